use parki_core::Domain;
use parki_dist::generate::Distribution;
#[path = "../tests/common.rs"]
mod common;
use std::f64::consts::PI;
fn main() {
    let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let l = domain.lengths();
    let n = 1200;
    let data = common::Data::new(&domain, Distribution::Uniform, n, 31);
    let xi = 48.01;
    let grid = [90usize, 108, 80];
    let v = domain.volume();
    // exact pure truncation: modes with any |n_d| >= M_d/2, |k| <= 14 xi
    let kc = 14.0 * xi;
    let nm = [0, 1, 2].map(|d| (kc * l[d] / (2.0 * PI)).ceil() as i64);
    let mut err = vec![0.0f64; n];
    let mut kept = vec![0.0f64; n];
    let mut count = 0;
    for a in 0..=nm[0] {
        for b in -nm[1]..=nm[1] {
            for c in -nm[2]..=nm[2] {
                if !(a > 0 || (a == 0 && b > 0) || (a == 0 && b == 0 && c > 0)) {
                    continue;
                }
                let k = [
                    2.0 * PI * a as f64 / l[0],
                    2.0 * PI * b as f64 / l[1],
                    2.0 * PI * c as f64 / l[2],
                ];
                let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
                if k2 > kc * kc {
                    continue;
                }
                let dropped = [a, b, c]
                    .iter()
                    .zip(grid)
                    .any(|(&i, m)| i.unsigned_abs() as usize >= m / 2);
                let g = 4.0 * PI * (-k2 / (4.0 * xi * xi)).exp() / k2;
                let (mut sr, mut si) = (0.0, 0.0);
                for j in 0..n {
                    let t =
                        -(k[0] * data.pos[j][0] + k[1] * data.pos[j][1] + k[2] * data.pos[j][2]);
                    sr += data.q[j] * t.cos();
                    si += data.q[j] * t.sin();
                }
                for i in 0..n {
                    let t = k[0] * data.pos[i][0] + k[1] * data.pos[i][1] + k[2] * data.pos[i][2];
                    let val = 2.0 / v * g * (sr * t.cos() - si * t.sin());
                    if dropped {
                        err[i] += val
                    } else {
                        kept[i] += val
                    }
                }
                if dropped {
                    count += 1;
                }
            }
        }
    }
    let reference = parki_reference::ClassicalEwald::new(domain, n, n).evaluate(
        parki_core::Kernel::Laplace,
        &data.sources(),
        &data.pos,
    );
    let rms = |x: &[f64]| (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64).sqrt();
    let q2: f64 = data.q.iter().map(|v| v * v).sum();
    let m =
        parki_farfield::error_model::ErrorModel::new(parki_core::KernelPart::Laplace, &domain, n);
    let kmax = [0, 1, 2].map(|d| 2.0 * PI * (grid[d] / 2 - 1) as f64 / l[d]);
    println!(
        "U model {:.4e} vs reference rms {:.4e}; E_F model abs {:.3e} vs exact abs {:.3e}",
        (m.magnitude2() * q2).sqrt(),
        rms(&reference),
        m.fourier(xi, kmax) * (m.magnitude2() * q2).sqrt(),
        rms(&err)
    );
    println!(
        "dropped modes {count}: truncation rel {:.3e}; far rms/total rms {:.3e}",
        rms(&err) / rms(&reference),
        rms(&kept) / rms(&reference)
    );
}
#[allow(dead_code)]
fn unused() {}
