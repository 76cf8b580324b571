//! LGF2 is the exact inverse of the 7-point Laplacian on the unbounded lattice: the solution of
//! a random right-hand side satisfies the discrete equation to round-off at every cell whose
//! stencil stays in the domain or crosses a periodic or symmetric side (there the neighbour is the
//! periodic copy or the mirror image).

use parki_comm::Comm;
use parki_poisson::{Bc, Centering, GreenKind, PoissonOptions, PoissonSolver};

fn bcs(s: &str) -> [[Bc; 2]; 3] {
    let v: Vec<Bc> = s.split(',').map(|t| Bc::parse(t).unwrap()).collect();
    [[v[0], v[1]], [v[2], v[3]], [v[4], v[5]]]
}

/// The largest 7-point residual `|lap_h phi - f| / max |f|` over the cells whose neighbours are
/// known, with `n` cells per axis.
fn residual(bc: [[Bc; 2]; 3], cells: [usize; 3], centering: Centering) -> f64 {
    let l = [0.1 * cells[0] as f64, 0.1 * cells[1] as f64, 0.1 * cells[2] as f64];
    let mut opts = PoissonOptions::new(l, cells, bc);
    opts.green = GreenKind::Lgf2;
    opts.centering = centering;
    let node = centering == Centering::Node;
    // the data points per axis
    let n = opts.extents();
    let mut solver = PoissonSolver::plan(&Comm::single(), opts).unwrap();
    // a reproducible pseudo-random right-hand side (xorshift), zero mean
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rhs: Vec<f64> = (0..n[0] * n[1] * n[2])
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect();
    let mean = rhs.iter().sum::<f64>() / rhs.len() as f64;
    rhs.iter_mut().for_each(|v| *v -= mean);
    // node-centred: zero on the nodes an odd side pins, and a zero trapezoidal mean where every
    // axis is periodic or even-even
    let pinned = |i: [usize; 3]| {
        node && (0..3).any(|a| bc[a][0] == Bc::Odd && i[a] == 0 || bc[a][1] == Bc::Odd && i[a] == cells[a])
    };
    let weight = |i: [usize; 3]| {
        (0..3)
            .map(|a| if node && bc[a] == [Bc::Even, Bc::Even] && (i[a] == 0 || i[a] == cells[a]) { 0.5 } else { 1.0 })
            .product::<f64>()
    };
    let index = |q: usize| [q / (n[1] * n[2]), q / n[2] % n[1], q % n[2]];
    let spectral =
        bc.iter().all(|s| s[0] != Bc::Unbounded && s[1] != Bc::Unbounded && s[0] != Bc::Odd && s[1] != Bc::Odd);
    if spectral {
        let (sw, s): (f64, f64) = (0..rhs.len())
            .map(|q| (weight(index(q)), weight(index(q)) * rhs[q]))
            .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
        rhs.iter_mut().for_each(|v| *v -= s / sw);
    }
    for (q, v) in rhs.iter_mut().enumerate() {
        if pinned(index(q)) {
            *v = 0.0;
        }
    }
    let mut phi = vec![0.0; rhs.len()];
    solver.solve(&rhs, &mut phi).unwrap();
    let h = 0.1;
    let at = |i: [usize; 3]| phi[(i[0] * n[1] + i[1]) * n[2] + i[2]];
    // the neighbour of cell i along axis a in direction d, or None where it is unknown
    let neighbour = |i: [usize; 3], a: usize, up: bool| -> Option<f64> {
        let mut j = i;
        let side = bc[a][up as usize];
        if up && i[a] + 1 == n[a] || !up && i[a] == 0 {
            // the mirror about the cell face (cell-centred) or about the node itself
            let mut m = i;
            if node && side != Bc::Periodic && side != Bc::Unbounded {
                m[a] = if up { i[a] - 1 } else { i[a] + 1 };
            }
            match side {
                Bc::Periodic => j[a] = if up { 0 } else { n[a] - 1 },
                Bc::Even => return Some(at(m)),
                Bc::Odd => return Some(-at(m)),
                Bc::Unbounded => return None,
            }
        } else if up {
            j[a] += 1;
        } else {
            j[a] -= 1;
        }
        Some(at(j))
    };
    let scale = rhs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst: f64 = 0.0;
    for i0 in 0..n[0] {
        for i1 in 0..n[1] {
            'cell: for i2 in 0..n[2] {
                let i = [i0, i1, i2];
                if pinned(i) {
                    // the solution is pinned to zero there
                    worst = worst.max(at(i).abs());
                    continue;
                }
                let mut lap = -6.0 * at(i);
                for a in 0..3 {
                    for up in [false, true] {
                        match neighbour(i, a, up) {
                            Some(v) => lap += v,
                            None => continue 'cell,
                        }
                    }
                }
                let r = (lap / (h * h) - rhs[(i0 * n[1] + i1) * n[2] + i2]).abs();
                worst = worst.max(r);
            }
        }
    }
    worst / scale
}

#[test]
fn lgf2_inverts_the_7_point_laplacian() {
    // three, one and none unbounded axes, semi-unbounded ones, uneven sizes: exact
    for (bc, n) in [
        ("unb,unb,unb,unb,unb,unb", [12, 10, 9]),
        ("even,unb,unb,odd,unb,unb", [8, 11, 10]),
        ("per,per,odd,even,unb,unb", [8, 6, 12]),
        ("per,per,per,per,even,unb", [6, 8, 10]),
        ("unb,odd,even,even,per,per", [10, 6, 8]),
        ("even,even,odd,odd,per,per", [10, 6, 8]),
        // two unbounded axes: k = 0 from the 2-D lattice function, k != 0 from the doubled
        // domain's spectral form (FLUPS's approximation is in the far field, beyond the box: inside
        // it the 7-point equation holds all the same)
        ("unb,unb,unb,unb,per,per", [12, 12, 8]),
        ("unb,unb,even,unb,odd,odd", [12, 12, 8]),
        // node-centred transforms of every symmetric pair
        ("even,odd,odd,even,even,even", [8, 7, 6]),
        ("odd,odd,per,per,unb,odd", [8, 7, 6]),
    ] {
        for centering in [Centering::Cell, Centering::Node] {
            let r = residual(bcs(bc), n, centering);
            println!("{bc} {n:?} {}: residual {r:.2e}", centering.name());
            assert!(r < 1e-11, "{bc} {}: 7-point residual {r:.3e}", centering.name());
        }
    }
}
