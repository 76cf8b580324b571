// G2P: interpolating the far-field grid at the targets (Ewald paper eq. (8)),
// u_c(x) = sum_g W(x - g) v_c(g) (parki_farfield::g2p): the grid read as in P2G (components
// w.component_stride apart, rows w.row_stride). A thread per target: base in input order
// (order = null), target-sorted through `order` (targets sorted by far-field cell, so a warp
// reads overlapping grid regions). The result is written in input order, out[i * dim + c].
// The accumulation follows the CPU's: rows first (tmp[k] += w_y w_z v), x weights last.
// DIM (the output dimension) and P at compile time (parki_with_kernel_p; P = 0: at run time).
template <typename T, int DIM, int P>
struct G2p {
  static __device__ void run(WindowParams w, const T* coeffs, u32 n, const T* pos, const u32* order, const T* grid,
                             T* out) {
    u64 k = global_thread();
    if (k >= n) return;
    const u64 i = order ? (u64)order[k] : k;
    const int p = P > 0 ? P : w.p;
    int a[3];
    T wts[3 * PARKI_P_OR_MAX(P)];
    for (int d = 0; d < 3; ++d) a[d] = window_axis<T, P>(w, coeffs, d, pos[3 * i + d], wts + d * p);
    int xs[PARKI_P_OR_MAX(P)];
    for (int x = 0; x < p; ++x) xs[x] = (a[0] + x) % w.m[0];
    for (int c = 0; c < DIM; ++c) {
      const T* gc = grid + (u64)c * w.component_stride;
      T tmp[PARKI_P_OR_MAX(P)];
      for (int x = 0; x < p; ++x) tmp[x] = (T)0;
      for (int l = 0; l < p; ++l) {
        int iz = (a[2] + l) % w.m[2];
        for (int m = 0; m < p; ++m) {
          int iy = (a[1] + m) % w.m[1];
          T wyz = wts[2 * p + l] * wts[p + m];
          const T* row = gc + ((u64)iz * w.m[1] + iy) * w.row_stride;
          for (int x = 0; x < p; ++x) tmp[x] = p_fma(row[xs[x]], wyz, tmp[x]);
        }
      }
      T acc = (T)0;
      for (int x = 0; x < p; ++x) acc = p_fma(tmp[x], wts[x], acc);
      out[i * DIM + c] = acc;
    }
  }
};

template <typename T>
__device__ void g2p_impl(WindowParams w, const T* coeffs, int dim, u32 n, const T* pos, const u32* order,
                         const T* grid, T* out) {
  if (dim == 1)
    parki_with_p<G2p, T, 1>(w.p, w, coeffs, n, pos, order, grid, out);
  else
    parki_with_p<G2p, T, 3>(w.p, w, coeffs, n, pos, order, grid, out);
}
PARKI_EXPORT_BOTH(g2p, (WindowParams w, const real* coeffs, int dim, u32 n, const real* pos, const u32* order,
                        const real* grid, real* out),
                  g2p_impl<real>(w, coeffs, dim, n, pos, order, grid, out))
