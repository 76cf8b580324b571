//! Exact convolution identities (digest seed-002 §9 item 2): for every axis class the solver
//! equals the discrete convolution `h^u sum_j G(x_i - x_j) f_j` with the explicit images of
//! the symmetric sides, the spectral axes done by the `O(N^2)` defining sums of their
//! transforms. This checks the index, offset and normalisation bookkeeping independently of
//! the discretisation error.

use std::f64::consts::PI;

use parki_comm::Comm;
use parki_poisson::{AxisClass, Bc, FieldMode, Green, GreenKind, PoissonOptions, PoissonSolver};
use parki_reference::transforms::{apply_along_axis, Transform1d};

fn bcs(s: &str) -> [[Bc; 2]; 3] {
    let v: Vec<Bc> = s.split(',').map(|t| Bc::parse(t).unwrap()).collect();
    [[v[0], v[1]], [v[2], v[3]], [v[4], v[5]]]
}

/// The spectral axes' forward and backward transforms and the wavenumber of mode `m`.
fn spectral_axis(c: AxisClass, n: usize, l: f64) -> (Transform1d, Transform1d, f64, Box<dyn Fn(usize) -> f64>) {
    match c {
        AxisClass::Periodic => (
            Transform1d::DftForward,
            Transform1d::DftBackward,
            n as f64,
            Box::new(move |m| 2.0 * PI * (if m <= n / 2 { m as f64 } else { m as f64 - n as f64 }) / l),
        ),
        AxisClass::Symmetric { low, high } => {
            let (f, b, shift) = match (low, high) {
                (Bc::Even, Bc::Even) => (Transform1d::Dct2, Transform1d::Dct3, 0.0),
                (Bc::Odd, Bc::Odd) => (Transform1d::Dst2, Transform1d::Dst3, 1.0),
                (Bc::Even, Bc::Odd) => (Transform1d::Dct4, Transform1d::Dct4, 0.5),
                _ => (Transform1d::Dst4, Transform1d::Dst4, 0.5),
            };
            (f, b, 2.0 * n as f64, Box::new(move |m| PI * (m as f64 + shift) / l))
        }
        _ => unreachable!("not spectral"),
    }
}

/// The reference solution for `f` (C order, axis 0 slowest).
fn reference(opts: &PoissonOptions, f: &[f64]) -> Vec<f64> {
    let n = opts.cells;
    let l = opts.lengths;
    let h = [0, 1, 2].map(|i| l[i] / n[i] as f64);
    let classes = [0, 1, 2].map(|i| AxisClass::of(i, opts.bc[i]).unwrap());
    let green = Green::new(opts.green, h, opts.alpha).unwrap();
    let at = |p: [usize; 3]| (p[0] * n[1] + p[1]) * n[2] + p[2];
    let mut data: Vec<(f64, f64)> = f.iter().map(|&v| (v, 0.0)).collect();
    let spectral: Vec<usize> = (0..3).filter(|&a| classes[a].is_spectral()).collect();
    let physical: Vec<usize> = (0..3).filter(|&a| !classes[a].is_spectral()).collect();
    let axes: Vec<_> =
        (0..3).map(|a| classes[a].is_spectral().then(|| spectral_axis(classes[a], n[a], l[a]))).collect();
    for &a in &spectral {
        let (fwd, _, _, _) = axes[a].as_ref().unwrap();
        apply_along_axis(&mut data, n, a, *fwd, 0, n[a], 1.0);
    }
    // images of a source coordinate along a physical axis: (position, sign)
    let images = |a: usize, i: usize| -> Vec<(f64, f64)> {
        let x = (i as f64 + 0.5) * h[a];
        match classes[a] {
            AxisClass::SemiUnbounded { sym, sym_low } => {
                let s = if sym == Bc::Even { 1.0 } else { -1.0 };
                vec![(x, 1.0), (if sym_low { -x } else { 2.0 * l[a] - x }, s)]
            }
            _ => vec![(x, 1.0)],
        }
    };
    let total = n.iter().product::<usize>();
    let mut out = vec![(0.0, 0.0); total];
    let hu: f64 = physical.iter().map(|&a| h[a]).product();
    for o in 0..total {
        let po = [o / (n[1] * n[2]), (o / n[2]) % n[1], o % n[2]];
        let k: Vec<f64> = spectral.iter().map(|&a| (axes[a].as_ref().unwrap().3)(po[a])).collect();
        if physical.is_empty() {
            let g = green.spectral([k[0], k[1], k[2]]);
            out[o] = (g * data[o].0, g * data[o].1);
            continue;
        }
        let mut sum = (0.0, 0.0);
        for s in 0..total {
            let ps = [s / (n[1] * n[2]), (s / n[2]) % n[1], s % n[2]];
            if spectral.iter().any(|&a| ps[a] != po[a]) {
                continue;
            }
            // every combination of images over the physical axes
            let lists: Vec<Vec<(f64, f64)>> = physical.iter().map(|&a| images(a, ps[a])).collect();
            let mut combos = vec![(Vec::new(), 1.0)];
            for list in &lists {
                combos = combos
                    .iter()
                    .flat_map(|(xs, sg): &(Vec<f64>, f64)| {
                        list.iter().map(move |&(x, s)| {
                            let mut v = xs.clone();
                            v.push(x);
                            (v, sg * s)
                        })
                    })
                    .collect();
            }
            for (xs, sign) in combos {
                let d: Vec<f64> = physical.iter().zip(&xs).map(|(&a, &x)| (po[a] as f64 + 0.5) * h[a] - x).collect();
                let g = match physical.len() {
                    3 => green.g3((d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()),
                    2 => green.g2((d[0] * d[0] + d[1] * d[1]).sqrt(), k[0], [h[physical[0]], h[physical[1]]]).unwrap(),
                    _ => green.g1(d[0], (k[0] * k[0] + k[1] * k[1]).sqrt()),
                };
                let v = data[at(ps)];
                sum = (sum.0 + sign * g * v.0, sum.1 + sign * g * v.1);
            }
        }
        out[o] = (hu * sum.0, hu * sum.1);
    }
    for &a in &spectral {
        let (_, bwd, norm, _) = axes[a].as_ref().unwrap();
        apply_along_axis(&mut out, n, a, *bwd, 0, n[a], *norm);
    }
    out.iter().map(|v| v.0).collect()
}

fn check(bc: &str, green: GreenKind, lengths: [f64; 3], comps: usize) -> f64 {
    let cells = [6, 5, 4];
    let mut opts = PoissonOptions::new(lengths, cells, bcs(bc));
    opts.green = green;
    opts.field = if comps == 3 { FieldMode::Vector } else { FieldMode::Scalar };
    let comm = Comm::single();
    let mut solver = PoissonSolver::plan(&comm, opts.clone()).unwrap();
    let total = cells.iter().product::<usize>();
    let value = |c: usize, i: usize| (((i * 7919 + c * 104_729) % 1009) as f64 / 1009.0 - 0.5) * (1.0 + c as f64);
    let rhs: Vec<f64> = (0..total * comps).map(|q| value(q % comps, q / comps)).collect();
    let mut phi = vec![0.0; rhs.len()];
    solver.solve(&rhs, &mut phi).unwrap();
    let mut err = 0.0f64;
    for c in 0..comps {
        let f: Vec<f64> = (0..total).map(|i| value(c, i)).collect();
        let want = reference(&opts, &f);
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for i in 0..total {
            err = err.max((phi[i * comps + c] - want[i]).abs() / scale);
        }
    }
    err
}

#[test]
fn convolution_identities_hold_to_round_off() {
    let aniso = [1.0, 0.9, 0.8];
    let iso = [0.6, 0.5, 0.4];
    let cases: &[(&str, GreenKind, [f64; 3], usize)] = &[
        ("unb,unb,unb,unb,unb,unb", GreenKind::Chat2, aniso, 1),
        ("even,unb,unb,odd,odd,unb", GreenKind::Chat2, aniso, 1),
        ("unb,even,unb,unb,per,per", GreenKind::Chat2, aniso, 3),
        ("unb,unb,even,even,odd,odd", GreenKind::Chat2, aniso, 1),
        ("odd,even,even,odd,per,per", GreenKind::Chat2, aniso, 1),
        ("unb,odd,per,per,even,odd", GreenKind::Chat2, aniso, 1),
        ("per,per,unb,even,odd,odd", GreenKind::Chat2, aniso, 1),
        ("unb,unb,odd,unb,unb,even", GreenKind::Hej(4), iso, 1),
        ("even,even,unb,odd,per,per", GreenKind::Hej(6), iso, 1),
        ("per,per,odd,odd,even,odd", GreenKind::Hej(8), iso, 1),
        ("unb,unb,unb,unb,unb,unb", GreenKind::Hej0, iso, 3),
        ("per,per,even,even,per,per", GreenKind::Lgf2, iso, 1),
    ];
    for &(bc, g, l, comps) in cases {
        let err = check(bc, g, l, comps);
        println!("{bc} {}: {err:.2e}", g.name());
        assert!(err < 1e-14, "{bc} {}: {err:.3e}", g.name());
    }
}
