// CNV: the Fourier-space Green's functions and window deconvolution on the half spectrum,
// in place (Ewald paper eq. (7); parki_farfield::cnv, whose doc has the formulas). With
// sf = prod_d e^{-k_d^2/4xi^2} / W^(k_d h_d)^2 from per-axis tables (zero at Nyquist):
//   Laplace   v^ = 4 pi sf / (V k^2) phi^
//   Stokeslet v^ = 8 pi gamma sf / (V k^4) (k^2 phi^_f - (k.phi^_f) k),  gamma = 1 + k^2/4xi^2
//   stresslet v^_i = 8 pi i gamma sf / (V k^4) [k^2 (2 (S k)_i + k_i tr S) - 2 k_i (k.S k)]
// and the zero mode set to zero; with `field` (Laplace) the field E^ = -i k v^ after the
// potential (three more output spectra). A thread per complex point (kx fastest, z slowest),
// in f64.
template <typename T>
__device__ void cnv_impl(int kernel, int field, int mxc, int my, int mz, int row_stride, i64 cs, double volume, double inv4xi2,
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
  double vr[4] = {0.0, 0.0, 0.0, 0.0}, vi[4] = {0.0, 0.0, 0.0, 0.0};
  if (kk > 0.0 && sf != 0.0) {
    if (kernel == PARKI_LAPLACE) {
      double g = 4.0 * PARKI_PI * sf / (volume * kk);
      vr[0] = g * phr[0];
      vi[0] = g * phi[0];
      if (field)
        for (int d = 0; d < 3; ++d) {
          vr[1 + d] = k[d] * vi[0];
          vi[1 + d] = -k[d] * vr[0];
        }
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
  const int nout = dim + (field ? 3 : 0);
  for (int c = 0; c < nout; ++c) {
    grid[(u64)c * cs + o] = (T)vr[c];
    grid[(u64)c * cs + o + 1] = (T)vi[c];
  }
}
PARKI_EXPORT_BOTH(cnv, (int kernel, int field, int mxc, int my, int mz, int row_stride, i64 cs, double volume, double inv4xi2,
                        const double* k0, const double* k1, const double* k2, const double* f0, const double* f1,
                        const double* f2, real* grid),
                  cnv_impl<real>(kernel, field, mxc, my, mz, row_stride, cs, volume, inv4xi2, k0, k1, k2, f0, f1, f2, grid))

// CNV with free directions (parki_farfield::FreeCnv::apply): the spectrum of the zero-padded
// grid times the kernel tables precomputed on the host (truncated Green's functions, docs/
// design.md "Free directions"), in place, one thread per element (kx fastest over the half
// spectrum). The tables are stored on the folded block (parki_farfield::fold): map holds the
// stresslet's 18 entries (below), 16 parities (component c: bit 0 odd along y, bit 1 along z),
// then per slot of y and of z its stored slot << 1, | 1 where it is the mirror image; table c of
// element (ix, iy, iz) is s tables[c * stored + (s_z ys + s_y) mxc + ix], s = -1 where c is
// odd along an odd count of the mirrored axes; already divided by the padded volume; in f64:
//   Laplace   v^ = t_0 phi^, with `field` E^_a = -i t_{1+a} phi^
//   Stokeslet v^_i = sum_j t_{ij} phi^_j                 (6 tables, i <= j)
//   stresslet v^_i = i sum_{jl} t_{ijl} S^_{jl}          (10 tables, i <= j <= l; stress[i * 6 + m]
//                                                         the table of T_i S_m, S_m counted twice
//                                                         off the diagonal)
//   Stokes    the Stokeslet's 6 tables, then the stresslet's 10.
template <typename T>
__device__ void cnv_free_impl(int kernel, int field, int mxc, int my, int mz, int ys, int zs, int row_stride, i64 cs,
                              int set_zero, double zero, const T* tables, const u32* map, T* grid) {
  const u64 g = global_thread();
  if (g >= (u64)mxc * my * mz) return;
  const int ix = (int)(g % mxc), iy = (int)((g / mxc) % my), iz = (int)(g / ((u64)mxc * my));
  const u64 o = ((u64)iz * my + iy) * row_stride + 2 * (u64)ix;
  const u32* stress = map;
  const u32* parity = map + 18;
  const u32 fy = map[34 + iy], fz = map[34 + my + iz];
  const u32 mirrored = (fy & 1u) | ((fz & 1u) << 1);
  const u64 elements = (u64)mxc * ys * zs;
  const u64 e = ((u64)(fz >> 1) * ys + (fy >> 1)) * mxc + ix;
  // the sign: bits 0 and 1 of parity & mirrored differ
#define PARKI_TABLE(c)                                                                  \
  (((((parity[c] & mirrored) ^ ((parity[c] & mirrored) >> 1)) & 1u) ? -1.0 : 1.0) * \
   (double)tables[(u64)(c) * elements + e])
  const int nc = parki_grid_components(kernel);
  double phr[9], phi[9];
  for (int c = 0; c < nc; ++c) {
    phr[c] = (double)grid[(u64)c * cs + o];
    phi[c] = (double)grid[(u64)c * cs + o + 1];
  }
  double vr[4] = {0.0, 0.0, 0.0, 0.0}, vi[4] = {0.0, 0.0, 0.0, 0.0};
  if (kernel == PARKI_LAPLACE) {
    // the exact zero mode (FreeCnv::zero_mode): the spread grid's carries the window's aliasing
    if (g == 0 && set_zero) {
      phr[0] = zero;
      phi[0] = 0.0;
    }
    const double t = PARKI_TABLE(0);
    vr[0] = t * phr[0];
    vi[0] = t * phi[0];
    if (field)
      for (int a = 0; a < 3; ++a) {
        const double ta = PARKI_TABLE(1 + a);
        vr[1 + a] = ta * phi[0];
        vi[1 + a] = -ta * phr[0];
      }
  } else {
    int off_t = 0, off_g = 0;
    if (kernel == PARKI_STOKESLET || kernel == PARKI_STOKES) {
      const int idx[9] = {0, 3, 4, 3, 1, 5, 4, 5, 2};
      double t[6];
      for (int c = 0; c < 6; ++c) t[c] = PARKI_TABLE(c);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          const double tij = t[idx[3 * i + j]];
          vr[i] += tij * phr[j];
          vi[i] += tij * phi[j];
        }
      off_t = 6;
      off_g = 3;
    }
    if (kernel == PARKI_STRESSLET || kernel == PARKI_STOKES) {
      double t[10];
      for (int c = 0; c < 10; ++c) t[c] = PARKI_TABLE(off_t + c);
      const double mult[6] = {1.0, 1.0, 1.0, 2.0, 2.0, 2.0};
      for (int i = 0; i < 3; ++i) {
        double re = 0.0, im = 0.0;
        for (int m = 0; m < 6; ++m) {
          const double tm = mult[m] * t[stress[i * 6 + m]];
          re += tm * phr[off_g + m];
          im += tm * phi[off_g + m];
        }
        vr[i] -= im;  // times i
        vi[i] += re;
      }
    }
  }
#undef PARKI_TABLE
  const int nout = parki_output_dim(kernel) + (field ? 3 : 0);
  for (int c = 0; c < nout; ++c) {
    grid[(u64)c * cs + o] = (T)vr[c];
    grid[(u64)c * cs + o + 1] = (T)vi[c];
  }
}
PARKI_EXPORT_BOTH(cnv_free, (int kernel, int field, int mxc, int my, int mz, int ys, int zs, int row_stride, i64 cs,
                             int set_zero, double zero, const real* tables, const u32* map, real* grid),
                  cnv_free_impl<real>(kernel, field, mxc, my, mz, ys, zs, row_stride, cs, set_zero, zero, tables, map,
                                      grid))
