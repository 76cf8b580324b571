// The last step of an evaluation and the halo rows.

// out[i * dim + c] = near[s * dim + c] + (far[i * dim + c] + bg) for sorted slot s of target
// i = order[s] (the CPU's sum_into: the near field unsorted, then far field and background).
template <typename T>
__device__ void sum_into_impl(u32 n, int dim, const u32* order, const T* near, const T* far, T bg, T* out) {
  u64 s = global_thread();
  if (s >= n) return;
  u64 i = order[s];
  for (int c = 0; c < dim; ++c) out[i * dim + c] = near[s * dim + c] + (far[i * dim + c] + bg);
}
PARKI_EXPORT_BOTH(sum_into, (u32 n, int dim, const u32* order, const real* near, const real* far, real bg,
                             real* out),
                  sum_into_impl<real>(n, dim, order, near, far, bg, out))

// Halo rows (parki_decomp::RowLayout): row r of component c starts at c * cs + r * row_stride.
// pack (mode 0): buf[(c * nrows + k) * mx + x] = grid[row rows[k] of c, x]; add (1) and copy
// (2): the reverse. A thread per (component, row, x).
template <typename T>
__device__ void rows_impl(int mode, u32 nrows, const u32* rows, int ncomp, int mx, int row_stride, i64 cs, T* grid,
                          T* buf) {
  u64 t = global_thread();
  if (t >= (u64)nrows * ncomp * mx) return;
  const u64 x = t % mx, k = (t / mx) % nrows, c = t / ((u64)mx * nrows);
  T* g = grid + c * cs + (u64)rows[k] * row_stride + x;
  if (mode == 0)
    buf[t] = *g;
  else if (mode == 1)
    *g += buf[t];
  else
    *g = buf[t];
}
PARKI_EXPORT_BOTH(rows, (int mode, u32 nrows, const u32* rows, int ncomp, int mx, int row_stride, i64 cs,
                         real* grid, real* buf),
                  rows_impl<real>(mode, nrows, rows, ncomp, mx, row_stride, cs, grid, buf))

// Checks the parameter blocks' layout against crates/gpu/src/params.rs: writes sizeof and the
// offsets of their fields.
PARKI_EXPORT(abi_probe, (CellParams g, WindowParams w, u64* out), {
  if (global_thread() == 0) {
    out[0] = sizeof(CellParams);
    out[1] = sizeof(WindowParams);
    out[2] = (u64)((const char*)&g.n[0] - (const char*)&g);
    out[3] = (u64)((const char*)&g.wrap[2] - (const char*)&g);
    out[4] = (u64)((const char*)&w.p - (const char*)&w);
    out[5] = (u64)((const char*)&w.row_stride - (const char*)&w);
    out[6] = (u64)g.n[0] + 1000 * (u64)g.global_n[2] + 1000000 * (u64)g.wrap[1];
    out[7] = (u64)w.p + 1000 * (u64)w.degree + 1000000 * (u64)w.m[2];
  }
})
