//! The digest's §6 unit tests of the treecode's building blocks: barycentric interpolation on
//! Chebyshev points (exact for polynomials of the degree, spectral for smooth functions, exact
//! hits and degenerate boxes), the cluster tree (partition, bounding boxes, leaf sizes, the
//! aspect-ratio rule), proxy-charge moment invariants and the multilevel identity of the upward
//! pass.

use parki_core::Par;
use parki_treecode::cheb::{lagrange, nodes, weight};
use parki_treecode::tree::split_axes;
use parki_treecode::upward::{anterpolate, cluster_nodes};
use parki_treecode::{upward_pass, AxisNodes, Tree, TreeParams};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

fn interpolate(ax: &AxisNodes, f: impl Fn(f64) -> f64, x: f64) -> f64 {
    let mut l = vec![0.0; ax.degree() + 1];
    ax.basis(x, &mut l);
    ax.s.iter().zip(&l).map(|(&s, &lk)| f(s) * lk).sum()
}

/// Degree-n interpolation reproduces every polynomial of degree <= n, at random points, at the
/// nodes and on the faces; the basis sums to 1.
#[test]
fn interpolation_is_exact_for_polynomials_of_the_degree() {
    let mut g = Lcg(1);
    for n in [1usize, 2, 5, 8, 12] {
        let (a, b) = (-0.37, 1.9);
        let ax = AxisNodes::new(n, a, b);
        assert_eq!((ax.s[0], ax.s[n]), (b, a), "faces are nodes exactly");
        let coef: Vec<f64> = (0..=n).map(|_| g.next() - 0.5).collect();
        let p = |x: f64| coef.iter().rev().fold(0.0, |acc, &c| acc * x + c);
        // the polynomial's size on the interval: errors are relative to it
        let scale: f64 = coef.iter().enumerate().map(|(k, c)| c.abs() * b.abs().max(a.abs()).powi(k as i32)).sum();
        let mut xs: Vec<f64> = (0..50).map(|_| a + (b - a) * g.next()).collect();
        xs.extend_from_slice(&ax.s);
        for x in xs {
            let e = (interpolate(&ax, p, x) - p(x)).abs() / scale;
            assert!(e < 1e-14, "n {n} x {x}: {e:e}");
            let mut l = vec![0.0; n + 1];
            ax.basis(x, &mut l);
            assert!((l.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        }
    }
}

/// On a node the basis is the Kronecker delta exactly (no 0/0); off the nodes the error of a
/// smooth function falls spectrally with the degree.
#[test]
fn exact_hits_and_spectral_convergence() {
    let ax = AxisNodes::new(6, 0.0, 1.0);
    for k in 0..=6 {
        let mut l = vec![f64::NAN; 7];
        ax.basis(ax.s[k], &mut l);
        for (i, &v) in l.iter().enumerate() {
            assert_eq!(v, if i == k { 1.0 } else { 0.0 });
        }
    }
    let f = |x: f64| 1.0 / (x + 2.0);
    let mut last = f64::INFINITY;
    let mut g = Lcg(2);
    let xs: Vec<f64> = (0..200).map(|_| g.next()).collect();
    for n in [2usize, 4, 6, 8, 10, 12] {
        let ax = AxisNodes::new(n, 0.0, 1.0);
        let e = xs.iter().map(|&x| (interpolate(&ax, f, x) - f(x)).abs()).fold(0.0, f64::max);
        // Chebyshev interpolation of a function analytic in the Bernstein ellipse of rho = 5 + sqrt 24
        assert!(e < 2.0 * (5.0 + 24f64.sqrt()).powi(-(n as i32)), "n {n}: {e:e}");
        assert!(e < last, "n {n}: error {e:e} not below {last:e}");
        last = e;
    }
}

/// A degenerate interval (particles on a plane) puts every node at `a` and the basis at the
/// first node; the weights follow eq. (5); degree 0 is the midpoint.
#[test]
fn degenerate_intervals_and_weights() {
    let mut s = vec![0.0; 5];
    assert!(nodes(4, 0.3, 0.3, &mut s));
    assert!(s.iter().all(|&v| v == 0.3));
    let mut l = vec![f64::NAN; 5];
    lagrange(&s, true, 0.3, &mut l);
    assert_eq!(l, [1.0, 0.0, 0.0, 0.0, 0.0]);
    assert!(!nodes(0, 0.0, 2.0, &mut s));
    assert_eq!(s[0], 1.0);
    let w: Vec<f64> = (0..=4).map(|k| weight(4, k)).collect();
    assert_eq!(w, [0.5, -1.0, 1.0, -1.0, 0.5]);
}

fn uniform(n: usize, seed: u64) -> Vec<[f64; 3]> {
    let mut g = Lcg(seed);
    (0..n).map(|_| [g.next(), g.next(), g.next()]).collect()
}

/// Plummer-like cluster (heavy tails) with a slab: a non-uniform set for the tree.
fn clustered(n: usize, seed: u64) -> Vec<[f64; 3]> {
    let mut g = Lcg(seed);
    (0..n)
        .map(|i| {
            if i % 4 == 0 {
                [g.next(), g.next(), 0.5] // a plane: degenerate boxes along z
            } else {
                let r = 0.05 / ((g.next().max(1e-12)).powf(-2.0 / 3.0) - 1.0).sqrt();
                let (u, v) = (2.0 * g.next() - 1.0, 2.0 * std::f64::consts::PI * g.next());
                let s = (1.0 - u * u).sqrt();
                [0.5 + r * s * v.cos(), 0.5 + r * s * v.sin(), 0.5 + r * u]
            }
        })
        .collect()
}

/// Every cluster's particles are the disjoint union of its children's; boxes are minimal;
/// leaves hold at most max_leaf particles unless all coincide; children counts follow the
/// 2/4/8 rule; pre-order numbering puts descendants after their cluster.
#[test]
#[allow(clippy::needless_range_loop)] // one axis of several arrays at a time
fn trees_partition_the_particles() {
    for (name, pos) in [("uniform", uniform(20_000, 3)), ("clustered", clustered(20_000, 4))] {
        for max_leaf in [1usize, 7, 100, 2000] {
            let t = Tree::build(&pos, TreeParams { max_leaf });
            let mut seen = t.order.clone();
            seen.sort_unstable();
            assert!(seen.iter().enumerate().all(|(i, &j)| i == j as usize), "{name}: order is a permutation");
            assert_eq!((t.root().begin, t.root().end), (0, pos.len()));
            let mut leaves = 0;
            for (c, cl) in t.clusters.iter().enumerate() {
                let idx = &t.order[cl.begin..cl.end];
                for d in 0..3 {
                    let lo = idx.iter().map(|&j| pos[j as usize][d]).fold(f64::INFINITY, f64::min);
                    let hi = idx.iter().map(|&j| pos[j as usize][d]).fold(f64::NEG_INFINITY, f64::max);
                    assert_eq!((cl.lo[d], cl.hi[d]), (lo, hi), "{name}: box of {c} is minimal");
                }
                if cl.is_leaf() {
                    leaves += cl.count();
                    let point = (0..3).all(|d| cl.lo[d] == cl.hi[d]);
                    assert!(cl.count() <= max_leaf || point, "{name}: leaf {c} holds {}", cl.count());
                    continue;
                }
                let allowed = if cl.count() < 2 * max_leaf {
                    2
                } else if cl.count() < 4 * max_leaf {
                    4
                } else {
                    8
                };
                assert!(cl.children.len() >= 2 && cl.children.len() <= allowed, "{name}: children of {c}");
                let mut at = cl.begin;
                for &ch in &cl.children {
                    assert!(ch > c, "pre-order");
                    assert_eq!(t.clusters[ch].begin, at, "{name}: children tile the parent");
                    assert_eq!(t.clusters[ch].parent, Some(c));
                    assert_eq!(t.clusters[ch].level, cl.level + 1);
                    at = t.clusters[ch].end;
                }
                assert_eq!(at, cl.end);
            }
            assert_eq!(leaves, pos.len(), "{name}: leaves hold every particle once");
            assert_eq!(t.levels.iter().map(|l| l.len()).sum::<usize>(), t.clusters.len());
        }
    }
}

/// The parallel build (children of clusters above `PAR_MIN_PARTICLES` built on the rayon pool,
/// clusters above `PAR_SPLIT_PARTICLES` split in chunks over it) gives the sequential build's
/// tree: the same clusters, numbering, boxes and order.
#[test]
fn parallel_build_equals_the_sequential_one() {
    let n = 2 * parki_treecode::tree::PAR_SPLIT_PARTICLES + 123;
    for (name, pos) in [("uniform", uniform(n, 5)), ("clustered", clustered(n, 6))] {
        for max_leaf in [7usize, 100, 2000] {
            let p = TreeParams { max_leaf };
            let seq = Tree::build(&pos, p);
            let par = Tree::build_with(&pos, p, Par::Rayon(2));
            assert!(seq.clusters.len() > 8, "{name} {max_leaf}: a tree deep enough to split in parallel");
            assert_eq!(par.clusters, seq.clusters, "{name} {max_leaf}: clusters");
            assert_eq!(par.order, seq.order, "{name} {max_leaf}: order");
            assert_eq!((par.levels.clone(), par.leaves.clone()), (seq.levels.clone(), seq.leaves.clone()));
        }
    }
}

/// The aspect-ratio rule: a cube splits 8 ways, a slab 4 (its thin axis kept whole), a rod 2;
/// with few particles the child count caps the axes.
#[test]
fn split_axes_follow_the_aspect_ratio_rule() {
    let lo = [0.0; 3];
    assert_eq!(split_axes(lo, [1.0, 1.0, 1.0], 10_000, 10), [true; 3]);
    assert_eq!(split_axes(lo, [1.0, 1.0, 0.1], 10_000, 10), [true, true, false]);
    assert_eq!(split_axes(lo, [0.1, 1.0, 0.1], 10_000, 10), [false, true, false]);
    // at most 4 children: the strictly shortest axis dropped, x when all are equal
    assert_eq!(split_axes(lo, [1.0, 0.9, 1.0], 30, 10), [true, false, true]);
    assert_eq!(split_axes(lo, [1.0, 1.0, 1.0], 30, 10), [false, true, true]);
    // at most 2: the longest
    assert_eq!(split_axes(lo, [0.9, 1.0, 0.95], 15, 10), [false, true, false]);
    assert_eq!(split_axes(lo, [0.0, 0.0, 0.0], 15, 10), [false; 3]);
}

/// Proxy charges keep every moment of degree <= n per axis: sum_k q^_k s_k^a = sum_j q_j y_j^a,
/// for leaves and for parents built from children, scalar and 3-component charges.
#[test]
fn proxy_charges_keep_the_moments() {
    let pos = clustered(5_000, 5);
    let mut g = Lcg(6);
    for ncomp in [1usize, 3] {
        let q: Vec<f64> = (0..pos.len() * ncomp).map(|_| g.next() - 0.3).collect();
        let n = 4;
        let t = Tree::build(&pos, TreeParams { max_leaf: 60 });
        let proxies = upward_pass(&t, &pos, &q, ncomp, n, Par::Rayon(2));
        let m = n + 1;
        for (c, cl) in t.clusters.iter().enumerate() {
            let nodes = &proxies.nodes[c];
            let qh = proxies.of(c);
            let centre = cl.centre();
            for alpha in [[0, 0, 0], [1, 0, 0], [0, 2, 1], [n, 0, n], [n, n, n]] {
                let mono = |p: [f64; 3]| (0..3).map(|d| (p[d] - centre[d]).powi(alpha[d] as i32)).product::<f64>();
                for comp in 0..ncomp {
                    let direct: f64 = t.order[cl.begin..cl.end]
                        .iter()
                        .map(|&j| q[j as usize * ncomp + comp] * mono(pos[j as usize]))
                        .sum();
                    let mut proxy = 0.0;
                    let mut scale = 0.0;
                    for k3 in 0..m {
                        for k2 in 0..m {
                            for k1 in 0..m {
                                let s = [nodes[0].s[k1], nodes[1].s[k2], nodes[2].s[k3]];
                                let v = qh[((k3 * m + k2) * m + k1) * ncomp + comp];
                                proxy += v * mono(s);
                                scale += (v * mono(s)).abs();
                            }
                        }
                    }
                    let e = (proxy - direct).abs() / scale.max(1e-300);
                    assert!(e < 1e-12, "cluster {c} ncomp {ncomp} alpha {alpha:?}: {e:e}");
                }
            }
        }
    }
}

/// The multilevel identity (eqs. (16)-(17)): a parent's proxy charges from its children equal
/// the anterpolation of all its particles directly into its box.
#[test]
fn upward_pass_equals_direct_anterpolation() {
    for (name, pos) in [("uniform", uniform(8_000, 7)), ("clustered", clustered(8_000, 8))] {
        let mut g = Lcg(9);
        let q: Vec<f64> = (0..pos.len()).map(|_| g.next() - 0.5).collect();
        for n in [1usize, 3, 6, 9] {
            let t = Tree::build(&pos, TreeParams { max_leaf: 50 });
            let proxies = upward_pass(&t, &pos, &q, 1, n, Par::Seq);
            let mut worst: f64 = 0.0;
            for (c, cl) in t.clusters.iter().enumerate().filter(|(_, cl)| !cl.is_leaf()) {
                let nodes = cluster_nodes(n, cl);
                let mut direct = vec![0.0; (n + 1).pow(3)];
                anterpolate(&nodes, &pos, &q, 1, &t.order[cl.begin..cl.end], &mut direct);
                let scale = direct.iter().map(|v| v.abs()).fold(0.0, f64::max).max(1e-300);
                for (a, b) in proxies.of(c).iter().zip(&direct) {
                    worst = worst.max((a - b).abs() / scale);
                }
            }
            assert!(worst < 1e-11, "{name} n {n}: {worst:e}");
        }
    }
}
