// G2P: interpolating the far-field grid at the targets (Ewald paper eq. (8)),
// u_c(x) = sum_g W(x - g) v_c(g) (parki_farfield::g2p): the grid read as in P2G (components
// w.component_stride apart, rows w.row_stride). A thread per target: base in input order
// (order = null), target-sorted through `order` (targets sorted by far-field cell, so a warp
// reads overlapping grid regions). The result is written in input order, out[i * dim + c].
// The accumulation follows the CPU's: rows first (tmp[k] += w_y w_z v), x weights last.
// DIM (the output dimension) and P at compile time (parki_with_kernel_p; P = 0: at run time).
template <typename T, int DIM, int P>
struct G2p {
  static __device__ void run(WindowParams w, const T* coeffs, u32 n, const T* pos, const T* lo, const u32* order,
                             const T* grid, T* out) {
    u64 k = global_thread();
    if (k >= n) return;
    const u64 i = order ? (u64)order[k] : k;
    const int p = P > 0 ? P : w.p;
    int a[3];
    T wts[3 * PARKI_P_OR_MAX(P)];
    for (int d = 0; d < 3; ++d) a[d] = window_axis<T, P>(w, coeffs, d, point_coord(pos, lo, i, d), wts + d * p);
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
__device__ void g2p_impl(WindowParams w, const T* coeffs, int dim, u32 n, const T* pos, const T* lo,
                         const u32* order, const T* grid, T* out) {
  if (dim == 1)
    parki_with_p<G2p, T, 1>(w.p, w, coeffs, n, pos, lo, order, grid, out);
  else if (dim == 4)  // the Laplace potential and the field differentiated in CNV
    parki_with_p<G2p, T, 4>(w.p, w, coeffs, n, pos, lo, order, grid, out);
  else
    parki_with_p<G2p, T, 3>(w.p, w, coeffs, n, pos, lo, order, grid, out);
}
PARKI_EXPORT_BOTH(g2p,
                  (WindowParams w, const real* coeffs, int dim, u32 n, const real* pos, const real* lo,
                   const u32* order, const real* grid, real* out),
                  g2p_impl<real>(w, coeffs, dim, n, pos, lo, order, grid, out))

// G2P of the Laplace potential and field from the potential grid (parki_farfield::g2p_field):
// E = -grad u = -sum_g grad W(x - g) v(g) with the window's derivative weights along one axis at
// a time. The rows are read once: per z layer sum_y w_y v and sum_y w_y' v (two FMAs per grid
// point), then t0 += s0 w_z, ty += s1 w_z, tz += s0 w_z', and x last, in the CPU's order.
// out[i * 4 + c] = [u, E_x, E_y, E_z], input order.
template <typename T, int UNUSED, int P>
struct G2pField {
  static __device__ void run(WindowParams w, const T* coeffs, const T* dcoeffs, u32 n, const T* pos, const T* lo,
                             const u32* order, const T* grid, T* out) {
    u64 k = global_thread();
    if (k >= n) return;
    const u64 i = order ? (u64)order[k] : k;
    const int p = P > 0 ? P : w.p;
    int a[3];
    T wts[3 * PARKI_P_OR_MAX(P)], dws[3 * PARKI_P_OR_MAX(P)];
    for (int d = 0; d < 3; ++d)
      a[d] = window_axis_derivative<T, P>(w, coeffs, dcoeffs, d, point_coord(pos, lo, i, d), wts + d * p,
                                          dws + d * p);
    int xs[PARKI_P_OR_MAX(P)];
    for (int x = 0; x < p; ++x) xs[x] = (a[0] + x) % w.m[0];
    T t0[PARKI_P_OR_MAX(P)], ty[PARKI_P_OR_MAX(P)], tz[PARKI_P_OR_MAX(P)];
    for (int x = 0; x < p; ++x) t0[x] = ty[x] = tz[x] = (T)0;
    for (int l = 0; l < p; ++l) {
      int iz = (a[2] + l) % w.m[2];
      T s0[PARKI_P_OR_MAX(P)], s1[PARKI_P_OR_MAX(P)];
      for (int x = 0; x < p; ++x) s0[x] = s1[x] = (T)0;
      for (int m = 0; m < p; ++m) {
        int iy = (a[1] + m) % w.m[1];
        const T wy = wts[p + m], dy = dws[p + m];
        const T* row = grid + ((u64)iz * w.m[1] + iy) * w.row_stride;
        for (int x = 0; x < p; ++x) {
          const T g = row[xs[x]];
          s0[x] = p_fma(g, wy, s0[x]);
          s1[x] = p_fma(g, dy, s1[x]);
        }
      }
      const T wz = wts[2 * p + l], dz = dws[2 * p + l];
      for (int x = 0; x < p; ++x) {
        t0[x] = p_fma(s0[x], wz, t0[x]);
        ty[x] = p_fma(s1[x], wz, ty[x]);
        tz[x] = p_fma(s0[x], dz, tz[x]);
      }
    }
    T acc[4] = {(T)0, (T)0, (T)0, (T)0};
    for (int x = 0; x < p; ++x) {
      acc[0] = p_fma(t0[x], wts[x], acc[0]);
      acc[1] = p_fma(t0[x], dws[x], acc[1]);
      acc[2] = p_fma(ty[x], wts[x], acc[2]);
      acc[3] = p_fma(tz[x], wts[x], acc[3]);
    }
    out[i * 4] = acc[0];
    for (int d = 1; d < 4; ++d) out[i * 4 + d] = -acc[d];
  }
};

template <typename T>
__device__ void g2p_field_impl(WindowParams w, const T* coeffs, const T* dcoeffs, u32 n, const T* pos, const T* lo,
                               const u32* order, const T* grid, T* out) {
  parki_with_p<G2pField, T, 1>(w.p, w, coeffs, dcoeffs, n, pos, lo, order, grid, out);
}
PARKI_EXPORT_BOTH(g2p_field,
                  (WindowParams w, const real* coeffs, const real* dcoeffs, u32 n, const real* pos, const real* lo,
                   const u32* order, const real* grid, real* out),
                  g2p_field_impl<real>(w, coeffs, dcoeffs, n, pos, lo, order, grid, out))
