//! P2G and G2P stage by stage: the variants agree (P2G to 1e-13, G2P bitwise), for any thread
//! count; G2P is the adjoint of P2G; spreading conserves mass up to the window's aliasing.

use parki_core::isa::Isa;
use parki_core::{Kernel, Par, Points, Sources};
use parki_decomp::GridLayout;
use parki_farfield::{
    g2p, g2p_field, p2g, G2pVariant, GatherGrid, GridWindow, KaiserBessel, P2gScratch, P2gVariant, WindowPoly,
};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

const L: [f64; 3] = [1.0, 1.2, 0.9];
const N: usize = 700;

/// Window, positions, charges, forces, dipoles, normals.
type Setup = (GridWindow<f64>, Vec<[f64; 3]>, Vec<f64>, Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<[f64; 3]>);

fn setup(p: usize, grid: [usize; 3]) -> Setup {
    let layout = GridLayout::new(grid).unwrap();
    let h = [0, 1, 2].map(|d| L[d] / grid[d] as f64);
    let (poly, _) = WindowPoly::fit_to(&KaiserBessel::new(p), 1e-15);
    let win = GridWindow::new(layout, h, &poly);
    let mut g = Lcg(17);
    let pos: Vec<[f64; 3]> = (0..N).map(|_| [g.next() * L[0], g.next() * L[1], g.next() * L[2]]).collect();
    let q: Vec<f64> = (0..N).map(|_| g.next() - 0.5).collect();
    let mut v = || [g.next() - 0.5, g.next() - 0.5, g.next() - 0.5];
    let f = (0..N).map(|_| v()).collect();
    let d = (0..N).map(|_| v()).collect();
    let n = (0..N).map(|_| v()).collect();
    (win, pos, q, f, d, n)
}

/// Indices of the grid points (not the r2c row padding) of `ncomp` components.
fn real_points(win: &GridWindow<f64>, ncomp: usize) -> impl Iterator<Item = usize> + '_ {
    let [mx, my, mz] = win.layout.global;
    let rl = win.layout.real_len();
    (0..ncomp).flat_map(move |c| {
        (0..mz)
            .flat_map(move |z| (0..my).flat_map(move |y| (0..mx).map(move |x| c * rl + win.layout.real_index(x, y, z))))
    })
}

#[test]
fn p2g_variants_agree_for_any_thread_count() {
    for (p, grid) in [(8usize, [20usize, 24, 18]), (6, [8, 10, 6]), (12, [16, 14, 14])] {
        let (win, pos, q, f, d, n) = setup(p, grid);
        let src =
            Sources { positions: &pos, charges: Some(&q), forces: Some(&f), dipoles: Some(&d), normals: Some(&n) };
        for kernel in Kernel::ALL {
            let len = kernel.grid_components() * win.layout.real_len();
            let mut base = vec![0.0; len];
            p2g(P2gVariant::Scatter, kernel, &win, &src, &mut base, &mut P2gScratch::new(1), Isa::Scalar, Par::Seq);
            let scale = base.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (variant, par, isa) in [
                (P2gVariant::Scatter, Par::Rayon(3), Isa::detect()),
                (P2gVariant::Blocked, Par::Seq, Isa::Scalar),
                (P2gVariant::Blocked, Par::Seq, Isa::detect()),
                (P2gVariant::Blocked, Par::Rayon(2), Isa::detect()),
                (P2gVariant::Blocked, Par::Rayon(7), Isa::detect()),
            ] {
                let mut g = vec![1.0; len];
                p2g(variant, kernel, &win, &src, &mut g, &mut P2gScratch::new(par.threads()), isa, par);
                // the row padding of the r2c layout is not part of the grid (FFTW ignores it)
                let diff =
                    real_points(&win, kernel.grid_components()).fold(0.0f64, |m, i| m.max((g[i] - base[i]).abs()));
                assert!(diff <= 1e-13 * scale, "P={p} {} {variant:?} {par:?}: {:e}", kernel.name(), diff / scale);
            }
            // blocked results do not depend on the thread count at all
            let mut a = vec![0.0; len];
            let mut b = vec![0.0; len];
            p2g(P2gVariant::Blocked, kernel, &win, &src, &mut a, &mut P2gScratch::new(2), Isa::detect(), Par::Rayon(2));
            p2g(P2gVariant::Blocked, kernel, &win, &src, &mut b, &mut P2gScratch::new(5), Isa::detect(), Par::Rayon(5));
            assert!(
                real_points(&win, kernel.grid_components()).all(|i| a[i] == b[i]),
                "blocked P2G depends on the thread count"
            );
        }
    }
}

#[test]
fn g2p_variants_are_identical_and_adjoint_to_p2g() {
    let (win, pos, q, ..) = setup(8, [20, 24, 18]);
    let src = Sources::laplace(&pos, &q);
    let len = win.layout.real_len();
    // a smooth random grid function (padding entries are never read)
    let mut g = Lcg(5);
    let grid: Vec<f64> = (0..len).map(|_| g.next() - 0.5).collect();
    let view = GatherGrid::from_fft(&win.layout, &grid);
    let mut base = vec![0.0; N];
    g2p(G2pVariant::Base, &win, &view, Points::new(&pos), &mut base, Isa::detect(), Par::Seq);
    for (variant, par) in [
        (G2pVariant::Base, Par::Rayon(3)),
        (G2pVariant::TargetSorted, Par::Seq),
        (G2pVariant::TargetSorted, Par::Rayon(2)),
    ] {
        let mut u = vec![0.0; N];
        g2p(variant, &win, &view, Points::new(&pos), &mut u, Isa::detect(), par);
        assert!(u == base, "{variant:?} {par:?} differs");
    }
    let mut scalar = vec![0.0; N];
    g2p(G2pVariant::Base, &win, &view, Points::new(&pos), &mut scalar, Isa::Scalar, Par::Seq);
    let diff = scalar.iter().zip(&base).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    let scale = base.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(diff <= 1e-14 * scale, "scalar and SIMD G2P differ by {:e}", diff / scale);
    // interleaved three-component grids gather the same values per component
    let mut three = vec![0.0; 3 * len];
    for c in 0..3 {
        three[c * len..(c + 1) * len].copy_from_slice(&grid);
    }
    let mut inter = vec![0.0; 3 * win.layout.points()];
    parki_farfield::interleave(&win.layout, 3, &three, &mut inter, Par::Rayon(2));
    let view3 = GatherGrid::interleaved(&win.layout, 3, &inter);
    let mut u3 = vec![0.0; 3 * N];
    g2p(G2pVariant::TargetSorted, &win, &view3, Points::new(&pos), &mut u3, Isa::detect(), Par::Rayon(2));
    for i in 0..N {
        for c in 0..3 {
            assert_eq!(u3[3 * i + c], base[i]);
        }
    }
    // <G2P v, q> = <v, P2G q>
    let mut spread = vec![0.0; len]; // padding stays zero: blocked P2G writes grid points only
    p2g(
        P2gVariant::Blocked,
        Kernel::Laplace,
        &win,
        &src,
        &mut spread,
        &mut P2gScratch::new(1),
        Isa::detect(),
        Par::Seq,
    );
    let lhs: f64 = base.iter().zip(&q).map(|(a, b)| a * b).sum();
    let [mx, my, mz] = win.layout.global;
    let mut rhs = 0.0;
    for z in 0..mz {
        for y in 0..my {
            for x in 0..mx {
                let i = win.layout.real_index(x, y, z);
                rhs += grid[i] * spread[i];
            }
        }
    }
    assert!((lhs - rhs).abs() < 1e-13 * lhs.abs().max(1.0), "{lhs} vs {rhs}");
}

#[test]
fn spreading_conserves_mass_up_to_aliasing() {
    for p in [6usize, 8, 12] {
        let (win, pos, ..) = setup(p, [24, 24, 24]);
        let kb = KaiserBessel::new(p);
        // one unit charge at arbitrary offsets: the grid sum is W^(0)^3 up to aliasing ~ e^-beta
        for x in &pos[..20] {
            let one = [1.0];
            let src = Sources::laplace(std::slice::from_ref(x), &one);
            let mut g = vec![0.0; win.layout.real_len()];
            p2g(
                P2gVariant::Blocked,
                Kernel::Laplace,
                &win,
                &src,
                &mut g,
                &mut P2gScratch::new(1),
                Isa::detect(),
                Par::Seq,
            );
            let sum: f64 = g.iter().sum();
            let expect = kb.fourier(0.0).powi(3);
            assert!((sum / expect - 1.0).abs() < 20.0 * (-kb.beta).exp(), "P={p}: {sum} vs {expect}");
        }
    }
}

/// The field G2P: its potential equals the plain G2P's (to rounding), its field is minus the
/// derivative of that interpolant (central differences), and the variants agree bitwise.
#[test]
fn g2p_field_is_minus_the_gradient_of_the_interpolant() {
    for (p, grid) in [(8usize, [20usize, 24, 18]), (6, [8, 10, 6]), (12, [16, 14, 14])] {
        let (win, pos, ..) = setup(p, grid);
        let mut g = Lcg(3);
        let data: Vec<f64> = (0..win.layout.real_len()).map(|_| g.next() - 0.5).collect();
        let view = GatherGrid::from_fft(&win.layout, &data);
        let mut u = vec![0.0; N];
        g2p(G2pVariant::Base, &win, &view, Points::new(&pos), &mut u, Isa::Scalar, Par::Seq);
        let mut uf = vec![0.0; 4 * N];
        g2p_field(G2pVariant::Base, &win, &view, Points::new(&pos), &mut uf, Isa::detect(), Par::Rayon(3));
        let mut sorted = vec![0.0; 4 * N];
        g2p_field(G2pVariant::TargetSorted, &win, &view, Points::new(&pos), &mut sorted, Isa::detect(), Par::Rayon(2));
        assert!(uf.iter().zip(&sorted).all(|(a, b)| a.to_bits() == b.to_bits()), "variants differ");
        let h = 1e-6;
        let (mut worst_u, mut worst_e, mut scale) = (0.0f64, 0.0f64, 0.0f64);
        for (i, x) in pos.iter().enumerate() {
            worst_u = worst_u.max((uf[4 * i] - u[i]).abs());
            for d in 0..3 {
                let mut pts = [*x; 2];
                pts[0][d] -= h;
                pts[1][d] += h;
                if pts[1][d] >= L[d] || pts[0][d] < 0.0 {
                    continue;
                }
                let mut v = [0.0; 2];
                g2p(G2pVariant::Base, &win, &view, Points::new(&pts), &mut v, Isa::Scalar, Par::Seq);
                let grad = (v[1] - v[0]) / (2.0 * h);
                worst_e = worst_e.max((uf[4 * i + 1 + d] + grad).abs());
                scale = scale.max(grad.abs());
            }
        }
        assert!(worst_u < 1e-13, "P={p}: potential differs by {worst_u:e}");
        // central differences of the polynomial bins: O(h^2) and rounding 1e-16/h; a step
        // across a bin boundary is smaller than h in a handful of cases and rare here
        assert!(worst_e < 1e-6 * scale, "P={p}: field against differences {:e}", worst_e / scale);
    }
}

/// G2P of the targets in another order (the near field's cell order, as the CPU backend
/// passes their sorted copies) gives each target bitwise its input-order values, for the
/// potential (1 and 3 components) and the field, supports 6 (compiled per P) and 18 (the
/// generic loop), in input order and target-sorted.
#[test]
fn g2p_in_another_order_matches_bitwise() {
    for (p, grid) in [(6usize, [20usize, 24, 18]), (18, [20, 24, 22])] {
        let (win, pos, ..) = setup(p, grid);
        let mut g = Lcg(11);
        let data: Vec<f64> = (0..win.layout.real_len()).map(|_| g.next() - 0.5).collect();
        let view = GatherGrid::from_fft(&win.layout, &data);
        // a permutation: reversed, then every other
        let order: Vec<u32> = (0..N as u32).rev().step_by(2).chain((0..N as u32).rev().skip(1).step_by(2)).collect();
        assert_eq!(order.len(), N);
        let permuted: Vec<[f64; 3]> = order.iter().map(|&j| pos[j as usize]).collect();
        let mut base = vec![0.0; N];
        g2p(G2pVariant::Base, &win, &view, Points::new(&pos), &mut base, Isa::detect(), Par::Seq);
        let mut field = vec![0.0; 4 * N];
        g2p_field(G2pVariant::Base, &win, &view, Points::new(&pos), &mut field, Isa::detect(), Par::Seq);
        for variant in [G2pVariant::Base, G2pVariant::TargetSorted] {
            let mut ordered = vec![0.0; N];
            g2p(variant, &win, &view, Points::new(&permuted), &mut ordered, Isa::detect(), Par::Rayon(3));
            for (k, &j) in order.iter().enumerate() {
                assert_eq!(ordered[k].to_bits(), base[j as usize].to_bits(), "P={p} {variant:?}: target {j}");
            }
            let mut field_ordered = vec![0.0; 4 * N];
            g2p_field(variant, &win, &view, Points::new(&permuted), &mut field_ordered, Isa::detect(), Par::Rayon(2));
            for (k, &j) in order.iter().enumerate() {
                let j = j as usize;
                assert!(field_ordered[4 * k..4 * k + 4] == field[4 * j..4 * j + 4], "P={p} {variant:?}: field of {j}");
            }
        }
        let mut three = vec![0.0; 3 * win.layout.real_len()];
        for c in 0..3 {
            three[c * win.layout.real_len()..(c + 1) * win.layout.real_len()].copy_from_slice(&data);
        }
        let mut inter = vec![0.0; 3 * win.layout.points()];
        parki_farfield::interleave(&win.layout, 3, &three, &mut inter, Par::Seq);
        let view3 = GatherGrid::interleaved(&win.layout, 3, &inter);
        let mut u3 = vec![0.0; 3 * N];
        g2p(G2pVariant::TargetSorted, &win, &view3, Points::new(&permuted), &mut u3, Isa::detect(), Par::Seq);
        for (k, &j) in order.iter().enumerate() {
            assert!(u3[3 * k..3 * k + 3].iter().all(|&v| v == base[j as usize]), "P={p}: three components");
        }
    }
}
