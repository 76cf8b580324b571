// P2G: spreading sources onto the grid (Ewald paper eq. (6)),
// phi_c(g) = sum_j W(g - y_j) s_jc, for the kernel's grid components (parki_farfield::p2g).
//
// The grid written: component c, point (x, y, z) of the block at
//   c * w.component_stride + (z * m_y + y) * w.row_stride + x.
// Variants:
// - atomic (the paper's P2G-base, Alg. 3): a thread per source, P^3 atomicAdds per component;
// - hybrid (the paper's Alg. 5): sources sorted by far-field cell (C grid points per axis, by
//   their anchor); a block per cell stages its sources' anchors, weights and grid densities in
//   shared memory, then its threads each own grid points of the cell's support region
//   (C + P - 1 per axis), sum the staged sources there and add the sum with one atomicAdd per
//   point and component;
// - operator (seed 004's precomputed spreading for fixed positions): the weights W(g - y_j) of
//   every source stored once as (grid index, weight) lists sorted by grid point, each
//   evaluation a gather over them without atomics (p2g_operator_*).

// Footprint of source j: anchors and weights per axis, in `wts[d * P + l]`, at its position plus
// its residual where `lo` is not null.
template <typename T, int P = 0>
__device__ __forceinline__ void footprint(const WindowParams& w, const T* coeffs, const T* pos, const T* lo, u64 j,
                                          int* anchor, T* wts) {
  const int p = P > 0 ? P : w.p;
  for (int d = 0; d < 3; ++d) anchor[d] = window_axis<T, P>(w, coeffs, d, point_coord(pos, lo, j, d), wts + d * p);
}

__device__ __forceinline__ u64 grid_index(const WindowParams& w, int ix, int iy, int iz) {
  return ((u64)iz * w.m[1] + iy) * w.row_stride + ix;
}

// The kernel at compile time; the support at run time (the baseline as the paper has it).
template <typename T, int K, int P_UNUSED>
struct P2gAtomic {
  static __device__ void run(WindowParams w, const T* coeffs, u32 n, const T* pos, const T* lo, const T* packed,
                             T* grid) {
    u64 j = global_thread();
    if (j >= n) return;
    const int p = w.p;
    constexpr int DW = PARKI_WIDTH(K);
    constexpr int NC = DW;
    int a[3];
    T wts[3 * PARKI_MAX_P];
    footprint<T>(w, coeffs, pos, lo, j, a, wts);
    T s[NC];
    grid_density<T>(K, packed + (u64)j * DW, s);
    for (int l = 0; l < p; ++l) {
      int iz = (a[2] + l) % w.m[2];
      for (int m = 0; m < p; ++m) {
        int iy = (a[1] + m) % w.m[1];
        T wyz = wts[2 * p + l] * wts[p + m];
        u64 row = grid_index(w, 0, iy, iz);
        for (int c = 0; c < NC; ++c) {
          T v = wyz * s[c];
          T* g = grid + (u64)c * w.component_stride + row;
          for (int k = 0; k < p; ++k) {
            int ix = (a[0] + k) % w.m[0];
            atomicAdd(g + ix, wts[k] * v);
          }
        }
      }
    }
  }
};
template <typename T>
__device__ void p2g_atomic_impl(WindowParams w, const T* coeffs, int kernel, u32 n, const T* pos, const T* lo,
                                const T* packed, T* grid) {
  parki_with_kernel<P2gAtomic, T>(kernel, w, coeffs, n, pos, lo, packed, grid);
}
PARKI_EXPORT_BOTH(p2g_atomic,
                  (WindowParams w, const real* coeffs, int kernel, u32 n, const real* pos, const real* lo,
                   const real* packed, real* grid),
                  p2g_atomic_impl<real>(w, coeffs, kernel, n, pos, lo, packed, grid))

// keys[j]: the far-field cell of source j, cells of C points per axis by local anchor.
template <typename T>
__device__ void farcell_keys_impl(WindowParams w, u32 cw, u32 n, const T* pos, const T* lo, u32* keys) {
  u64 j = global_thread();
  if (j >= n) return;
  u32 c[3], nc[3];
  for (int d = 0; d < 3; ++d) {
    nc[d] = (w.m[d] + cw - 1) / cw;
    c[d] = (u32)window_anchor_of(w, d, point_coord(pos, lo, j, d)) / cw;
  }
  keys[j] = (c[2] * nc[1] + c[1]) * nc[0] + c[0];
}
PARKI_EXPORT_BOTH(farcell_keys, (WindowParams w, u32 cw, u32 n, const real* pos, const real* lo, u32* keys),
                  farcell_keys_impl<real>(w, cw, n, pos, lo, keys))

// Hybrid: block b is far-field cell b (its sources order[off[b] .. off[b+1]]); `batch` sources
// are staged at a time. Dynamic shared memory: batch * (3 ints + 3P + nc reals). The kernel and
// the support at compile time (parki_with_kernel_p).
template <typename T, int K, int P>
struct P2gHybrid {
  static __device__ void run(WindowParams w, const T* coeffs, u32 cw, const u32* off, const u32* order,
                             const T* pos, const T* lo, const T* packed, u32 batch, T* grid) {
    PARKI_DYNAMIC_SHARED(T, smem);
    const u32 cell = blockIdx.x;
    const u32 s0 = off[cell], s1 = off[cell + 1];
    if (s0 == s1) return;  // uniform over the block
    const int p = P > 0 ? P : w.p;
    constexpr int DW = PARKI_WIDTH(K);
    constexpr int NC = DW;
    u32 ncell[3];
    for (int d = 0; d < 3; ++d) ncell[d] = (w.m[d] + cw - 1) / cw;
    const int corner[3] = {(int)((cell % ncell[0]) * cw), (int)(((cell / ncell[0]) % ncell[1]) * cw),
                       (int)((cell / (ncell[0] * ncell[1])) * cw)};
    const int ext = (int)cw + p - 1;
    const int pts = ext * ext * ext;
    T* wts = smem;                              // batch * 3P
    T* dens = smem + (u64)batch * 3 * p;        // batch * nc
    int* anc = (int*)(dens + (u64)batch * NC);  // batch * 3, anchors relative to corner
    for (u32 b0 = s0; b0 < s1; b0 += batch) {
      const u32 nb = s1 - b0 < batch ? s1 - b0 : batch;
      __syncthreads();
      for (u32 q = threadIdx.x; q < nb; q += blockDim.x) {
        u32 j = order[b0 + q];
        int a[3];
        footprint<T, P>(w, coeffs, pos, lo, j, a, wts + (u64)q * 3 * p);
        for (int d = 0; d < 3; ++d) anc[3 * q + d] = a[d] - corner[d];
        grid_density<T>(K, packed + (u64)j * DW, dens + (u64)q * NC);
      }
      __syncthreads();
      for (int pt = threadIdx.x; pt < pts; pt += blockDim.x) {
        const int r[3] = {pt % ext, (pt / ext) % ext, pt / (ext * ext)};
        T acc[NC];
        for (int c = 0; c < NC; ++c) acc[c] = (T)0;
        bool any = false;
        for (u32 q = 0; q < nb; ++q) {
          const int ox = r[0] - anc[3 * q], oy = r[1] - anc[3 * q + 1], oz = r[2] - anc[3 * q + 2];
          if ((unsigned)ox >= (unsigned)p || (unsigned)oy >= (unsigned)p || (unsigned)oz >= (unsigned)p) continue;
          const T* wq = wts + (u64)q * 3 * p;
          T v = wq[2 * p + oz] * wq[p + oy] * wq[ox];
          for (int c = 0; c < NC; ++c) acc[c] = p_fma(v, dens[(u64)q * NC + c], acc[c]);
          any = true;
        }
        if (!any) continue;
        int g[3];
        for (int d = 0; d < 3; ++d) g[d] = (corner[d] + r[d]) % w.m[d];
        u64 idx = grid_index(w, g[0], g[1], g[2]);
        for (int c = 0; c < NC; ++c) atomicAdd(grid + (u64)c * w.component_stride + idx, acc[c]);
      }
    }
  }
};
template <typename T>
__device__ void p2g_hybrid_impl(WindowParams w, const T* coeffs, int kernel, u32 cw, const u32* off,
                                const u32* order, const T* pos, const T* lo, const T* packed, u32 batch, T* grid) {
  parki_with_kernel_p<P2gHybrid, T>(kernel, w.p, w, coeffs, cw, off, order, pos, lo, packed, batch, grid);
}
PARKI_EXPORT_BOTH_SYNC(p2g_hybrid,
                       (WindowParams w, const real* coeffs, int kernel, u32 cw, const u32* off, const u32* order,
                        const real* pos, const real* lo, const real* packed, u32 batch, real* grid),
                       p2g_hybrid_impl<real>(w, coeffs, kernel, cw, off, order, pos, lo, packed, batch, grid))

// The precomputed spreading operator, step 1: for every source j and support point l (P^3 of
// them, x fastest), its grid point and weight: keys[j P^3 + l] = grid point (linear in the
// block, x fastest, unpadded), weights[j P^3 + l] = W. Sorting keys (count, scan, scatter)
// then gives, per grid point, the list of (source, weight) that step 2 gathers.
template <typename T>
__device__ void p2g_operator_entries_impl(WindowParams w, const T* coeffs, u32 n, const T* pos, const T* lo,
                                          u32* keys, T* weights) {
  u64 j = global_thread();
  if (j >= n) return;
  const int p = w.p;
  int a[3];
  T wts[3 * PARKI_MAX_P];
  footprint<T>(w, coeffs, pos, lo, j, a, wts);
  u64 e = j * (u64)p * p * p;
  for (int l = 0; l < p; ++l) {
    int iz = (a[2] + l) % w.m[2];
    for (int m = 0; m < p; ++m) {
      int iy = (a[1] + m) % w.m[1];
      T wyz = wts[2 * p + l] * wts[p + m];
      for (int k = 0; k < p; ++k) {
        int ix = (a[0] + k) % w.m[0];
        keys[e] = (u32)(((u64)iz * w.m[1] + iy) * w.m[0] + ix);
        weights[e] = wts[k] * wyz;
        ++e;
      }
    }
  }
}
PARKI_EXPORT_BOTH(p2g_operator_entries,
                  (WindowParams w, const real* coeffs, u32 n, const real* pos, const real* lo, u32* keys,
                   real* weights),
                  p2g_operator_entries_impl<real>(w, coeffs, n, pos, lo, keys, weights))

// Step 1b: the operator in grid-point order: src[s] = source of entry order[s], wsorted[s] =
// its weight (P^3 entries per source, so the source of entry e is e / P^3).
template <typename T>
__device__ void p2g_operator_pack_impl(u64 entries, u32 per_source, const u32* order, const T* weights, u32* src,
                                       T* wsorted) {
  u64 s = global_thread();
  if (s >= entries) return;
  u32 e = order[s];
  src[s] = e / per_source;
  wsorted[s] = weights[e];
}
PARKI_EXPORT_BOTH(p2g_operator_pack, (u64 entries, u32 per_source, const u32* order, const real* weights, u32* src,
                                      real* wsorted),
                  p2g_operator_pack_impl<real>(entries, per_source, order, weights, src, wsorted))

// Step 2, every evaluation: a thread per grid point sums its entries, no atomics:
// phi_c(g) = sum_{s in off[g]..off[g+1]} wsorted[s] S_c(src[s]).
template <typename T, int K, int P_UNUSED>
struct P2gOperatorApply {
  static __device__ void run(WindowParams w, const u32* off, const u32* src, const T* wsorted, const T* packed,
                             T* grid) {
    u64 g = global_thread();
    const u64 points = (u64)w.m[0] * w.m[1] * w.m[2];
    if (g >= points) return;
    constexpr int DW = PARKI_WIDTH(K);
    constexpr int NC = DW;
    T acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = (T)0;
    for (u32 s = off[g]; s < off[g + 1]; ++s) {
      T d[NC];
      grid_density<T>(K, packed + (u64)src[s] * DW, d);
      for (int c = 0; c < NC; ++c) acc[c] = p_fma(wsorted[s], d[c], acc[c]);
    }
    const int ix = (int)(g % w.m[0]), iy = (int)((g / w.m[0]) % w.m[1]), iz = (int)(g / ((u64)w.m[0] * w.m[1]));
    u64 idx = grid_index(w, ix, iy, iz);
    for (int c = 0; c < NC; ++c) grid[(u64)c * w.component_stride + idx] = acc[c];
  }
};
template <typename T>
__device__ void p2g_operator_apply_impl(WindowParams w, int kernel, const u32* off, const u32* src, const T* wsorted,
                                        const T* packed, T* grid) {
  parki_with_kernel<P2gOperatorApply, T>(kernel, w, off, src, wsorted, packed, grid);
}
PARKI_EXPORT_BOTH(p2g_operator_apply, (WindowParams w, int kernel, const u32* off, const u32* src,
                                       const real* wsorted, const real* packed, real* grid),
                  p2g_operator_apply_impl<real>(w, kernel, off, src, wsorted, packed, grid))
