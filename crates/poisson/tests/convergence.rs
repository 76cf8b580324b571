//! Convergence on manufactured solutions (digest seed-002 §5 and §9 item 4):
//! `phi = phi_x(x) phi_y(y) phi_z(z)`, `f = lap(phi)` analytically, per axis a function that
//! satisfies its boundary conditions ([`parki_poisson::fields`]: sines and cosines on
//! spectral axes, a compact blob on unbounded ones, a blob and its image on semi-unbounded ones). The observed order between two resolutions is asserted in
//! a band around the kernel's nominal order, or machine precision where the kernel is exact.

use parki_comm::Comm;
use parki_poisson::fields::Manufactured;
use parki_poisson::{Bc, Centering, GreenKind, PoissonOptions, PoissonSolver};

/// Relative max error of a solve at `n` cells per axis.
fn error(bc: [[Bc; 2]; 3], green: GreenKind, n: usize) -> f64 {
    error_at(bc, green, n, Centering::Cell)
}

/// Relative max error of a solve at `n` cells per axis, cell- or node-centred.
fn error_at(bc: [[Bc; 2]; 3], green: GreenKind, n: usize, centering: Centering) -> f64 {
    let l = [1.0, 1.0, 1.0];
    let cells = [n, n, n];
    let mut opts = PoissonOptions::new(l, cells, bc);
    opts.green = green;
    opts.centering = centering;
    let e = opts.extents();
    let mut solver = PoissonSolver::plan(&Comm::single(), opts).unwrap();
    let h = 1.0 / n as f64;
    let shift = if centering == Centering::Cell { 0.5 } else { 0.0 };
    let m = Manufactured::new(l, bc);
    let mut rhs = Vec::with_capacity(e[0] * e[1] * e[2]);
    let mut want = Vec::with_capacity(e[0] * e[1] * e[2]);
    for i in 0..e[0] {
        for j in 0..e[1] {
            for k in 0..e[2] {
                let s = m.at([i, j, k].map(|q| (q as f64 + shift) * h));
                rhs.push(s.laplacian);
                want.push(s.value);
            }
        }
    }
    let mut phi = vec![0.0; rhs.len()];
    solver.solve(&rhs, &mut phi).unwrap();
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    phi.iter().zip(&want).fold(0.0f64, |m, (a, b)| m.max((a - b).abs())) / scale
}

fn bcs(s: &str) -> [[Bc; 2]; 3] {
    let v: Vec<Bc> = s.split(',').map(|t| Bc::parse(t).unwrap()).collect();
    [[v[0], v[1]], [v[2], v[3]], [v[4], v[5]]]
}

fn order(bc: &str, green: GreenKind, n: usize) -> (f64, f64, f64) {
    let (a, b) = (error(bcs(bc), green, n), error(bcs(bc), green, 2 * n));
    (a, b, (a / b).log2())
}

#[test]
fn fully_spectral_chat2_is_exact() {
    // test 4.1 with the y conditions matching its function (erratum 8)
    for bc in ["even,even,even,odd,per,per", "odd,odd,odd,even,even,even", "per,per,per,per,per,per"] {
        let e = error(bcs(bc), GreenKind::Chat2, 16);
        println!("{bc} chat2: {e:.2e}");
        assert!(e < 1e-12, "{bc}: {e:.3e}");
    }
}

#[test]
fn observed_orders_match_the_kernels() {
    // tests 4.1-4.3 (4.3: x unb-even, y unb-unb, z odd-unb) and mixed cases
    // (conditions, kernel, coarse cells, order band): the HEJ kernels' smoothing eps = 2h is
    // as wide as the blob at 16 cells, so they start at 32
    let cases: &[(&str, GreenKind, usize, f64, f64)] = &[
        ("unb,unb,unb,unb,unb,unb", GreenKind::Chat2, 16, 1.7, 2.6),
        ("unb,even,unb,unb,odd,unb", GreenKind::Chat2, 16, 1.7, 2.6),
        ("unb,even,unb,unb,odd,unb", GreenKind::Hej(4), 32, 3.0, 5.0),
        ("unb,unb,unb,unb,unb,unb", GreenKind::Hej(6), 32, 4.5, 7.5),
        ("unb,unb,unb,unb,unb,unb", GreenKind::Hej0, 16, 4.0, 60.0),
        ("even,even,even,odd,per,per", GreenKind::Hej(4), 32, 3.5, 4.6),
        ("even,even,even,odd,per,per", GreenKind::Lgf2, 16, 1.8, 2.3),
        ("unb,unb,unb,unb,unb,unb", GreenKind::Lgf2, 16, 1.7, 2.6),
        ("unb,even,unb,unb,odd,unb", GreenKind::Lgf2, 16, 1.7, 2.6),
        ("per,per,unb,unb,even,odd", GreenKind::Lgf2, 16, 1.7, 2.6),
        ("unb,unb,odd,unb,per,per", GreenKind::Lgf2, 16, 1.7, 2.6),
        ("per,per,even,unb,per,per", GreenKind::Lgf2, 16, 1.7, 2.6),
        ("per,per,unb,unb,even,odd", GreenKind::Chat2, 16, 1.7, 2.6),
        ("per,per,unb,unb,even,odd", GreenKind::Hej(4), 32, 3.0, 5.0),
        ("unb,unb,odd,unb,per,per", GreenKind::Chat2, 16, 1.7, 2.6),
        ("unb,unb,odd,unb,per,per", GreenKind::Hej(6), 32, 4.5, 7.5),
    ];
    for &(bc, g, n, lo, hi) in cases {
        let (a, b, p) = order(bc, g, n);
        println!("{bc} {}: {a:.2e} -> {b:.2e}, order {p:.2}", g.name());
        assert!(p > lo && p < hi, "{bc} {}: order {p:.2} outside [{lo}, {hi}] ({a:.2e} -> {b:.2e})", g.name());
    }
}

#[test]
fn every_boundary_combination_converges() {
    // the 10 classes per axis, 1000 combinations, CHAT2 at 12 and 24 cells: second order, or
    // round-off where every axis is spectral
    let classes = [
        [Bc::Periodic, Bc::Periodic],
        [Bc::Even, Bc::Even],
        [Bc::Odd, Bc::Odd],
        [Bc::Even, Bc::Odd],
        [Bc::Odd, Bc::Even],
        [Bc::Unbounded, Bc::Unbounded],
        [Bc::Even, Bc::Unbounded],
        [Bc::Odd, Bc::Unbounded],
        [Bc::Unbounded, Bc::Even],
        [Bc::Unbounded, Bc::Odd],
    ];
    let mut worst = (f64::INFINITY, String::new());
    for cx in classes {
        for cy in classes {
            for cz in classes {
                let bc = [cx, cy, cz];
                let spectral = bc.iter().all(|c| !c.contains(&Bc::Unbounded));
                let (a, b) = (error(bc, GreenKind::Chat2, 12), error(bc, GreenKind::Chat2, 24));
                let name = format!("{bc:?}");
                if spectral {
                    assert!(a < 1e-12 && b < 1e-12, "{name}: {a:.2e}, {b:.2e}");
                    continue;
                }
                let p = (a / b).log2();
                assert!(p > 1.5 && p < 2.8, "{name}: order {p:.2} ({a:.2e} -> {b:.2e})");
                if p < worst.0 {
                    worst = (p, name);
                }
            }
        }
    }
    println!("lowest observed order {:.2} for {}", worst.0, worst.1);
}

#[test]
fn node_centred_data_converge() {
    // fully spectral node-centred data: exact with CHAT2 (DCT-I, DST-I, DCT-III/II, DST-III/II,
    // DFT); with unbounded and semi-unbounded axes, the kernels' orders
    for bc in ["even,even,odd,odd,per,per", "even,odd,odd,even,even,even", "odd,odd,per,per,even,odd"] {
        let e = error_at(bcs(bc), GreenKind::Chat2, 16, Centering::Node);
        println!("node {bc} chat2: {e:.2e}");
        assert!(e < 1e-12, "node {bc}: {e:.3e}");
    }
    let cases: &[(&str, GreenKind, usize, f64, f64)] = &[
        ("unb,unb,unb,unb,unb,unb", GreenKind::Chat2, 16, 1.7, 2.6),
        ("unb,even,odd,unb,unb,odd", GreenKind::Chat2, 16, 1.7, 2.6),
        ("per,per,even,unb,odd,even", GreenKind::Chat2, 16, 1.7, 2.6),
        ("unb,unb,unb,unb,unb,unb", GreenKind::Lgf2, 16, 1.7, 2.6),
        ("even,unb,unb,odd,per,per", GreenKind::Lgf2, 16, 1.7, 2.6),
        ("unb,unb,unb,unb,unb,unb", GreenKind::Hej(6), 32, 4.5, 7.5),
        ("odd,unb,even,odd,per,per", GreenKind::Hej(4), 32, 3.0, 5.0),
        ("unb,unb,unb,unb,unb,unb", GreenKind::Hej0, 16, 4.0, 60.0),
    ];
    for &(bc, g, n, lo, hi) in cases {
        let (a, b) = (error_at(bcs(bc), g, n, Centering::Node), error_at(bcs(bc), g, 2 * n, Centering::Node));
        let p = (a / b).log2();
        println!("node {bc} {}: {a:.2e} -> {b:.2e}, order {p:.2}", g.name());
        assert!(p > lo && p < hi, "node {bc} {}: order {p:.2} outside [{lo}, {hi}] ({a:.2e} -> {b:.2e})", g.name());
    }
}
