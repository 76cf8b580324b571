// CNV: the Fourier-space Green's functions and window deconvolution on the half spectrum,
// in place (Ewald paper eq. (7); parki_farfield::cnv, whose doc has the formulas). With
// sf = prod_d e^{-k_d^2/4xi^2} / W^(k_d h_d)^2 from per-axis tables (zero at Nyquist):
//   Laplace   v^ = 4 pi sf / (V k^2) phi^
//   Stokeslet v^ = 8 pi gamma sf / (V k^4) (k^2 phi^_f - (k.phi^_f) k),  gamma = 1 + k^2/4xi^2
//   stresslet v^_i = 8 pi i gamma sf / (V k^4) [k^2 (2 (S k)_i + k_i tr S) - 2 k_i (k.S k)]
// and the zero mode set to zero. A thread per complex point (kx fastest, z slowest), in f64.
template <typename T>
__device__ void cnv_impl(int kernel, int mxc, int my, int mz, int row_stride, i64 cs, double volume, double inv4xi2,
                         const double* k0, const double* k1, const double* k2, const double* f0, const double* f1,
                         const double* f2, T* grid) {
  u64 t = global_thread();
  if (t >= (u64)mxc * my * mz) return;
  const int ix = (int)(t % mxc), iy = (int)((t / mxc) % my), iz = (int)(t / ((u64)mxc * my));
  const u64 o = ((u64)iz * my + iy) * row_stride + 2 * (u64)ix;
  const int nc = parki_grid_components(kernel);
  const int dim = parki_output_dim(kernel);
  double phr[9], phi[9];
  for (int c = 0; c < nc; ++c) {
    phr[c] = (double)grid[(u64)c * cs + o];
    phi[c] = (double)grid[(u64)c * cs + o + 1];
  }
  const double k[3] = {k0[ix], k1[iy], k2[iz]};
  const double kk = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
  const double sf = f0[ix] * f1[iy] * f2[iz];
  double vr[3] = {0.0, 0.0, 0.0}, vi[3] = {0.0, 0.0, 0.0};
  if (kk > 0.0 && sf != 0.0) {
    if (kernel == PARKI_LAPLACE) {
      double g = 4.0 * PARKI_PI * sf / (volume * kk);
      vr[0] = g * phr[0];
      vi[0] = g * phi[0];
    } else {
      double g = 8.0 * PARKI_PI * (1.0 + kk * inv4xi2) * sf / (volume * kk * kk);
      int off = 0;
      if (kernel == PARKI_STOKESLET || kernel == PARKI_STOKES) {
        double kfr = k[0] * phr[0] + k[1] * phr[1] + k[2] * phr[2];
        double kfi = k[0] * phi[0] + k[1] * phi[1] + k[2] * phi[2];
        for (int i = 0; i < 3; ++i) {
          vr[i] += g * (kk * phr[i] - kfr * k[i]);
          vi[i] += g * (kk * phi[i] - kfi * k[i]);
        }
        off = 3;
      }
      if (kernel == PARKI_STRESSLET || kernel == PARKI_STOKES) {
        const double* sr = phr + off;
        const double* si = phi + off;
        double skr[3] = {sr[0] * k[0] + sr[3] * k[1] + sr[4] * k[2], sr[3] * k[0] + sr[1] * k[1] + sr[5] * k[2],
                         sr[4] * k[0] + sr[5] * k[1] + sr[2] * k[2]};
        double ski[3] = {si[0] * k[0] + si[3] * k[1] + si[4] * k[2], si[3] * k[0] + si[1] * k[1] + si[5] * k[2],
                         si[4] * k[0] + si[5] * k[1] + si[2] * k[2]};
        double trr = sr[0] + sr[1] + sr[2], tri = si[0] + si[1] + si[2];
        double kskr = k[0] * skr[0] + k[1] * skr[1] + k[2] * skr[2];
        double kski = k[0] * ski[0] + k[1] * ski[1] + k[2] * ski[2];
        for (int i = 0; i < 3; ++i) {
          double wr = kk * (2.0 * skr[i] + k[i] * trr) - 2.0 * k[i] * kskr;
          double wi = kk * (2.0 * ski[i] + k[i] * tri) - 2.0 * k[i] * kski;
          vr[i] -= g * wi;
          vi[i] += g * wr;
        }
      }
    }
  }
  for (int c = 0; c < dim; ++c) {
    grid[(u64)c * cs + o] = (T)vr[c];
    grid[(u64)c * cs + o + 1] = (T)vi[c];
  }
}
PARKI_EXPORT_BOTH(cnv, (int kernel, int mxc, int my, int mz, int row_stride, i64 cs, double volume, double inv4xi2,
                        const double* k0, const double* k1, const double* k2, const double* f0, const double* f1,
                        const double* f2, real* grid),
                  cnv_impl<real>(kernel, mxc, my, mz, row_stride, cs, volume, inv4xi2, k0, k1, k2, f0, f1, f2, grid))
