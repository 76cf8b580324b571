//! `parki-bench exact-positions`: an f32 solver given the f64 positions its positions were
//! rounded from (`evaluate_exact`) against the same solver on the rounded positions alone
//! (`evaluate`, the same plan) and the f64 solver at the same tolerance, alternating in one
//! process: the evaluations' times and stages (medians over the rounds), and each one's error
//! against the f64 solver at tol 1e-11 on the f64 data, over every target.

use parki_comm::Comm;
use parki_core::{Kernel, Real};
use parki_dist::{
    Evaluation, EwaldOptions, EwaldSolver, EwaldStage as Stage, ExactPositions, PositionRounding, SourceStatistics,
    Targets,
};

use crate::{rel, Problem};

/// One alternative's evaluations: totals and the stages the residuals touch.
#[derive(Default)]
struct Times {
    total: Vec<f64>,
    prepare: Vec<f64>,
    cells: Vec<f64>,
    far: Vec<f64>,
}

impl Times {
    fn push(&mut self, ev: &Evaluation) {
        self.total.push(ev.times.total());
        self.prepare.push(ev.times.get(Stage::Prepare));
        self.cells.push(ev.times.get(Stage::CellLists));
        self.far.push(ev.times.get(Stage::P2G) + ev.times.get(Stage::G2P));
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

pub fn exact_positions(ns: &[usize], tol: f64, kernels: &[Kernel], rounds: usize, threads: usize) {
    println!(
        "## f32 on exact positions ({threads} threads, tol {tol:.0e}, uniform particles in the unit cube, targets = \
         sources, {rounds} alternating rounds, medians)\n"
    );
    println!("| kernel | N | cells | f32 narrowed s | f32 exact s | ratio | f64 s | exact / f64 | prepare | cell lists | P2G + G2P | error narrowed | error exact | error f64 |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in ns {
        let prob = Problem::uniform(n, 3);
        for &kernel in kernels {
            let dim = kernel.output_dim();
            let reference = {
                let o = EwaldOptions::new(kernel, prob.domain, 1e-11).threads(threads);
                let mut u = vec![0.0; n * dim];
                EwaldSolver::<f64>::new(&o, n, n)
                    .expect("plan")
                    .evaluate(&prob.sources(), Targets::Sources, &mut u)
                    .expect("reference");
                u
            };
            let comm = Comm::single();
            let stats = SourceStatistics::measure(
                &comm,
                kernel,
                &prob.domain,
                &prob.sources(),
                None,
                PositionRounding::F32Cells,
            );
            let o32 = EwaldOptions::new(kernel, prob.domain, tol).threads(threads).statistics(Some(stats));
            let Ok(mut s32) = EwaldSolver::<f32>::new(&o32, n, n) else {
                println!("| {} | {n:.0e} | refused at this tolerance in f32 | | | | | | | | | | | |", kernel.name());
                continue;
            };
            let stats64 =
                SourceStatistics::measure(&comm, kernel, &prob.domain, &prob.sources(), None, PositionRounding::Exact);
            let o64 = EwaldOptions::new(kernel, prob.domain, tol).threads(threads).statistics(Some(stats64));
            let mut s64 = EwaldSolver::<f64>::new(&o64, n, n).expect("plan f64");
            let narrowed = prob.narrowed::<f32>();
            let src = narrowed.sources();
            let exact = ExactPositions { sources: &prob.pos, targets: None };
            let (mut u32n, mut u32e, mut u64v) = (vec![0.0f32; n * dim], vec![0.0f32; n * dim], vec![0.0; n * dim]);
            let (mut tn, mut te, mut t64) = (Times::default(), Times::default(), Times::default());
            // a first round faults in the scratch memory and is not counted
            for round in 0..=rounds {
                let a = s32.evaluate(&src, Targets::Sources, &mut u32n).expect("narrowed");
                let b = s32.evaluate_exact(&src, Targets::Sources, exact, &mut u32e).expect("exact");
                let c = s64.evaluate(&prob.sources(), Targets::Sources, &mut u64v).expect("f64");
                if round > 0 {
                    tn.push(&a);
                    te.push(&b);
                    t64.push(&c);
                }
            }
            let wide = |u: &[f32]| u.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
            let (en, ee, e64) = (rel(&wide(&u32n), &reference), rel(&wide(&u32e), &reference), rel(&u64v, &reference));
            let c = s32.params().cells;
            let (mn, me, m64) = (median(&tn.total), median(&te.total), median(&t64.total));
            println!(
                "| {} | {n:.0e} | {}x{}x{} | {mn:.3} | {me:.3} | {:.2} | {m64:.3} | {:.2} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} / {:.3} | {en:.2e} | {ee:.2e} | {e64:.2e} |",
                kernel.name(),
                c[0],
                c[1],
                c[2],
                me / mn,
                me / m64,
                median(&tn.prepare),
                median(&te.prepare),
                median(&tn.cells),
                median(&te.cells),
                median(&tn.far),
                median(&te.far),
            );
        }
    }
    println!("\nprepare, cell lists, P2G + G2P: narrowed / exact seconds.");
}
