use parki_core::{Domain, Kernel};
use parki_dist::generate::Distribution;
use parki_dist::{EwaldOptions, EwaldSolver, Targets};
use parki_reference::ClassicalEwald;
#[path = "../tests/common.rs"]
mod common;
fn main() {
    let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let args: Vec<String> = std::env::args().collect();
    let kernel = Kernel::from_name(&args[1]).unwrap();
    let tol: f64 = args[2].parse().unwrap();
    let n: usize = args[3].parse().unwrap();
    let data = common::Data::new(&domain, Distribution::Uniform, n, 31);
    let reference = ClassicalEwald::new(domain, n, n).evaluate(kernel, &data.sources(), &data.pos);
    for rc in args[4..].iter().map(|s| s.parse::<f64>().unwrap()) {
        for (p, os) in [(Some(16), None::<f64>), (Some(8), None), (None, None)] {
            let mut o = EwaldOptions::new(kernel, domain, tol);
            o.rc = Some(rc);
            o.window_support = p;
            o.oversampling = os;
            let mut s = EwaldSolver::<f64>::new(&o, n, n).unwrap();
            let mut u = vec![0.0; n * kernel.output_dim()];
            s.evaluate(&data.sources(), Targets::Sources, &mut u)
                .unwrap();
            let e = common::rel_rms(&u, &reference);
            let other = common::Data::new(&domain, Distribution::Uniform, n, 99);
            let refo =
                ClassicalEwald::new(domain, n, n).evaluate(kernel, &data.sources(), &other.pos);
            let mut uo = vec![0.0; n * kernel.output_dim()];
            s.evaluate(&data.sources(), Targets::Points(&other.pos), &mut uo)
                .unwrap();
            println!("   separate targets: {:.3e}", common::rel_rms(&uo, &refo));
            let q = s.params();
            println!("rc {rc} P {:2} grid {:?} sigma {} xi {:.2}: measured {e:.3e} est near {:.2e} four {:.2e} win {:.2e} self {:.2e}", q.p, q.grid, q.oversampling, q.xi, q.estimate.near, q.estimate.fourier, q.estimate.window, q.estimate.self_interaction);
        }
    }
}
