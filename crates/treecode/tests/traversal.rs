//! The dual tree traversal covers every (target, source) particle pair exactly once (the
//! digest's "traversal completeness"), approximates only MAC-separated pairs with the cheapest
//! of PC, CP and CC, and is the direct sum at theta = 0.

use parki_treecode::traversal::{approximation, well_separated};
use parki_treecode::{Interaction, Interactions, Tree, TreeParams};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

fn points(n: usize, seed: u64, clustered: bool) -> Vec<[f64; 3]> {
    let mut g = Lcg(seed);
    (0..n)
        .map(|_| {
            let p = [g.next(), g.next(), g.next()];
            if clustered {
                p.map(|v| 0.5 + 0.5 * (v - 0.5).powi(3) * 8.0)
            } else {
                p
            }
        })
        .collect()
}

#[test]
fn every_pair_is_covered_once() {
    let mut seen = [false; 4];
    for (clustered, seed) in [(false, 1u64), (true, 2)] {
        let (m, n) = (700usize, 500usize);
        let tp = points(m, seed, clustered);
        let sp = points(n, seed + 10, !clustered);
        for (leaf, degree) in [(10usize, 1usize), (30, 2), (5, 1)] {
            let (tt, st) =
                (Tree::build(&tp, TreeParams { max_leaf: leaf }), Tree::build(&sp, TreeParams { max_leaf: leaf }));
            let np = (degree + 1).pow(3);
            for theta in [0.0, 0.5, 0.7, 0.9] {
                let lists = Interactions::build(&tt, &st, theta, np);
                let mut count = vec![0u8; m * n];
                for (kind, list) in [
                    (Interaction::Pp, &lists.pp),
                    (Interaction::Pc, &lists.pc),
                    (Interaction::Cp, &lists.cp),
                    (Interaction::Cc, &lists.cc),
                ] {
                    assert!(list.windows(2).all(|w| w[0].0 <= w[1].0), "sorted by target cluster");
                    for &(t, s) in list {
                        let (ct, cs) = (&tt.clusters[t as usize], &st.clusters[s as usize]);
                        let sep = well_separated(ct.radius(), cs.radius(), ct.centre(), cs.centre(), theta);
                        if sep {
                            assert_eq!(approximation(ct.count(), cs.count(), np), kind, "the cheapest interaction");
                        } else {
                            assert!(
                                kind == Interaction::Pp && ct.is_leaf() && cs.is_leaf(),
                                "unseparated pairs are leaf PP"
                            );
                        }
                        seen[kind as usize] = true;
                        for &i in &tt.order[ct.begin..ct.end] {
                            for &j in &st.order[cs.begin..cs.end] {
                                count[i as usize * n + j as usize] += 1;
                            }
                        }
                    }
                }
                assert!(count.iter().all(|&c| c == 1), "clustered {clustered} leaf {leaf} theta {theta}: coverage");
                let e = lists.evaluations(&tt, &st, np);
                if theta == 0.0 {
                    assert!(lists.pc.is_empty() && lists.cp.is_empty() && lists.cc.is_empty(), "theta 0 is direct");
                    assert_eq!(e, [(m * n) as u64, 0, 0, 0], "theta 0 evaluates every pair once");
                }
            }
        }
    }
    assert_eq!(seen, [true; 4], "every interaction type occurs");
}
