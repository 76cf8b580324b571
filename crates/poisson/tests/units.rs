//! Lengths far from 1 ([`PoissonSolver::length_unit`]): a box of three unbounded (or
//! semi-unbounded) axes whose longest side lies far from 1 is solved in a power-of-two unit of
//! length, so that with lengths times `s` and the right-hand side over `s^2` (the vorticity over
//! `s` in the rotational mode) the solution is the unit box's, bit for bit, at `s = 2^-500` and
//! `2^400`. Before, the free-space kernel times the cell volume left f64's range beyond about
//! `1e100` and below `1e-100`: the solution was NaN or 0, silently. Boxes with a spectral axis
//! stay in the caller's units (their kernels depend on `k r` and `ln r`) and hold the same
//! solution to rounding.
//!
//! Right-hand sides far from 1: the solve is linear, and a right-hand side whose largest value
//! (times `s^2`) lies outside `[2^-40, 2^40]` is solved over a power of two near it. With the
//! right-hand side times `2^k` the solution is the unit one's times `2^k`, rounded once, from
//! subnormal right-hand sides to values within a factor 4 of the largest f64 (before: NaN from
//! `1e303` on, where the solution is finite); and a box of `2^-700` with a solution of `2^-600`, whose `s^2`
//! is not a f64, is solved too.

use parki_comm::Comm;
use parki_poisson::fields::{Manufactured, Sample, COMPONENT_AMPLITUDES};
use parki_poisson::{Bc, Differentiation, FieldMode, GreenKind, PoissonOptions, PoissonSolver};

fn bcs(s: &str) -> [[Bc; 2]; 3] {
    let v: Vec<Bc> = s.split(',').map(|t| Bc::parse(t).unwrap()).collect();
    [[v[0], v[1]], [v[2], v[3]], [v[4], v[5]]]
}

const N: usize = 24;

/// The solution of the manufactured problem on a box of sides `s` (`[1, 1, 1]` times `s`),
/// per component conditions `comp`, the right-hand side scaled for the box (over `s^2`, the
/// vorticity over `s`), and the solver's length unit.
fn solve(comp: [&str; 3], green: GreenKind, field: FieldMode, s: f64) -> (Vec<f64>, f64) {
    let (phi, unit, _) = solve_times(comp, green, field, s, 0, false);
    (phi, unit)
}

/// [`solve`] with the right-hand side also times `2^k` (`kept`: and back, so that it holds the
/// digits that the right-hand side times `2^k` kept), and the largest right-hand-side value.
fn solve_times(
    comp: [&str; 3],
    green: GreenKind,
    field: FieldMode,
    s: f64,
    k: i32,
    kept: bool,
) -> (Vec<f64>, f64, f64) {
    use parki_core::units::{exponent_of, times_two_to};
    let l = [1.0; 3];
    let bc = comp.map(bcs);
    let mut opts = PoissonOptions::new(l.map(|x| x * s), [N; 3], bc[0]);
    opts.green = green;
    opts.field = field;
    if field != FieldMode::Scalar {
        opts.component_bc = Some(bc);
    }
    let comps = field.components();
    // over s^2 (s) and times 2^k in one step: s^2 of a box of 2^-700 is no f64
    let p = if matches!(field, FieldMode::Curl(_)) { 1 } else { 2 };
    let e = k - p * exponent_of(s);
    let value = |v: f64| if kept { times_two_to(times_two_to(v, e), -k) } else { times_two_to(v, e) };
    let m: Vec<Manufactured> =
        (0..comps).map(|c| Manufactured::new(l, bc[c]).scaled(COMPONENT_AMPLITUDES[c])).collect();
    let h = 1.0 / N as f64;
    let mut rhs = Vec::with_capacity(N * N * N * comps);
    for i in 0..N {
        for j in 0..N {
            for k in 0..N {
                let x = [i, j, k].map(|q| (q as f64 + 0.5) * h);
                let v: Vec<Sample> = m.iter().map(|m| m.at(x)).collect();
                rhs.extend(v.iter().map(|v| value(v.laplacian)));
            }
        }
    }
    let largest = rhs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut solver = PoissonSolver::plan(&Comm::single(), opts).unwrap();
    assert_eq!(solver.options().lengths, l.map(|x| x * s), "options in the caller's units");
    let mut phi = vec![0.0; rhs.len()];
    solver.solve(&rhs, &mut phi).unwrap();
    (phi, solver.length_unit(), largest)
}

#[test]
fn free_space_boxes_far_from_one_give_the_unit_boxs_solution_exactly() {
    let free = ["unb,unb,unb,unb,unb,unb"; 3];
    let semi = ["unb,even,unb,unb,odd,unb"; 3];
    let cases: &[([&str; 3], GreenKind, FieldMode)] = &[
        (free, GreenKind::Chat2, FieldMode::Scalar),
        (free, GreenKind::Lgf2, FieldMode::Scalar),
        (free, GreenKind::Hej(6), FieldMode::Scalar),
        (free, GreenKind::Hej0, FieldMode::Scalar),
        (semi, GreenKind::Chat2, FieldMode::Scalar),
        (free, GreenKind::Hej(4), FieldMode::Vector),
        (free, GreenKind::Chat2, FieldMode::Curl(Differentiation::Spectral)),
        (free, GreenKind::Hej(4), FieldMode::Curl(Differentiation::Fd2)),
    ];
    for (comp, green, field) in cases {
        let (unit, one) = solve(*comp, *green, *field, 1.0);
        assert_eq!(one, 1.0);
        assert!(unit.iter().all(|v| v.is_finite()) && unit.iter().any(|v| *v != 0.0));
        for e in [-500, 400] {
            let s = 2f64.powi(e);
            let (got, u) = solve(*comp, *green, *field, s);
            assert_eq!(u, s, "{comp:?} {}: the unit of a box of 2^{e}", green.name());
            let differ = got.iter().zip(&unit).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differ, 0, "{comp:?} {} {field:?} at 2^{e}: {differ} values differ", green.name());
        }
    }
}

#[test]
fn boxes_with_a_spectral_axis_stay_in_the_callers_units() {
    let cases: &[(&str, GreenKind)] = &[
        ("per,per,unb,unb,unb,unb", GreenKind::Chat2),
        ("per,per,unb,unb,unb,unb", GreenKind::Lgf2),
        ("per,per,per,per,unb,unb", GreenKind::Hej(4)),
        ("even,even,even,odd,per,per", GreenKind::Chat2),
    ];
    for (bc, green) in cases {
        let (unit, _) = solve([bc; 3], *green, FieldMode::Scalar, 1.0);
        let scale = unit.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for e in [-500, 400] {
            let (got, u) = solve([bc; 3], *green, FieldMode::Scalar, 2f64.powi(e));
            assert_eq!(u, 1.0, "{bc}");
            assert!(got.iter().all(|v| v.is_finite()), "{bc} {} at 2^{e}: not finite", green.name());
            let d = got.iter().zip(&unit).map(|(a, b)| (a - b).abs()).fold(0.0f64, f64::max) / scale;
            assert!(d < 1e-13, "{bc} {} at 2^{e}: {d:e}", green.name());
        }
    }
}

#[test]
fn right_hand_sides_far_from_one_give_the_unit_solution_exactly() {
    use parki_core::units::times_two_to;
    let free = ["unb,unb,unb,unb,unb,unb"; 3];
    let periodic = ["per,per,per,per,per,per"; 3];
    let cases: &[([&str; 3], GreenKind, FieldMode)] = &[
        (free, GreenKind::Chat2, FieldMode::Scalar),
        (free, GreenKind::Lgf2, FieldMode::Vector),
        (periodic, GreenKind::Chat2, FieldMode::Scalar),
        (["per,per,unb,unb,unb,unb"; 3], GreenKind::Hej(4), FieldMode::Curl(Differentiation::Spectral)),
    ];
    for (comp, green, field) in cases {
        let label = format!("{comp:?} {} {field:?}", green.name());
        // the larger of the largest right-hand side and solution within a factor 4 of the
        // largest f64, and a subnormal right-hand side
        let (unit, _, top) = solve_times(*comp, *green, *field, 1.0, 0, false);
        let largest = unit.iter().fold(top, |m, v| m.max(v.abs()));
        let huge = (f64::MAX / largest).log2().floor() as i32 - 2;
        for k in [huge, -1060] {
            let (unit, _, _) = solve_times(*comp, *green, *field, 1.0, k, true);
            let (got, _, _) = solve_times(*comp, *green, *field, 1.0, k, false);
            let differ = got.iter().zip(&unit).filter(|(a, b)| a.to_bits() != times_two_to(**b, k).to_bits()).count();
            assert_eq!(differ, 0, "{label} at 2^{k}: {differ} values differ");
            assert!(got.iter().all(|v| v.is_finite()), "{label} at 2^{k}");
        }
    }
    // a box of 2^-700 (s^2 = 2^-1400 is no f64) holding a solution of 2^-600: the right-hand
    // side, about 2^800, is solved in both units at once
    let (unit, _) = solve(free, GreenKind::Chat2, FieldMode::Scalar, 1.0);
    let (got, u, _) = solve_times(free, GreenKind::Chat2, FieldMode::Scalar, 2f64.powi(-700), -600, false);
    assert_eq!(u, 2f64.powi(-700));
    let differ = got.iter().zip(&unit).filter(|(a, b)| a.to_bits() != times_two_to(**b, -600).to_bits()).count();
    assert_eq!(differ, 0, "box 2^-700, solution 2^-600: {differ} values differ");
}
