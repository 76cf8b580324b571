// The last step of an evaluation and the halo rows.

// out[i * dim + c] = near[s * dim + c] + far[i * dim + c] for sorted slot s of target i =
// order[s], and the background bg to the potential, c = 0 (the CPU's sum_into: the near field
// unsorted, then the far field and the background).
template <typename T>
__device__ void sum_into_impl(u32 n, int dim, const u32* order, const T* near, const T* far, T bg, T* out) {
  u64 s = global_thread();
  if (s >= n) return;
  u64 i = order[s];
  out[i * dim] = near[s * dim] + far[i * dim] + bg;
  for (int c = 1; c < dim; ++c) out[i * dim + c] = near[s * dim + c] + far[i * dim + c];
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

// Free directions on one device: the data block P2G writes (mx, my, mz points, rows rs_b
// reals, components cs_b apart) into the zero-padded FFT grid (nx, ny, nz points, rows rs_f,
// components cs_f apart; pad: 1), every point of the FFT grid written, zero outside the block;
// or the block read back from the inverse transform's first points (crop: pad 0, a thread per
// block point).
template <typename T>
__device__ void pad_grid_impl(int pad, int ncomp, int mx, int my, int mz, int rs_b, i64 cs_b, int nx, int ny, int nz,
                              int rs_f, i64 cs_f, T* block, T* fft) {
  const u64 t = global_thread();
  const int ex = pad ? nx : mx, ey = pad ? ny : my, ez = pad ? nz : mz;
  if (t >= (u64)ncomp * ex * ey * ez) return;
  const int x = (int)(t % ex), y = (int)((t / ex) % ey);
  const int z = (int)((t / ((u64)ex * ey)) % ez), c = (int)(t / ((u64)ex * ey * ez));
  T* f = fft + (u64)c * cs_f + ((u64)z * ny + y) * rs_f + x;
  const bool inside = x < mx && y < my && z < mz;
  const u64 b = (u64)c * cs_b + ((u64)z * my + y) * rs_b + x;
  if (pad)
    *f = inside ? block[b] : (T)0;
  else
    block[b] = *f;
}
PARKI_EXPORT_BOTH(pad_grid, (int pad, int ncomp, int mx, int my, int mz, int rs_b, i64 cs_b, int nx, int ny, int nz,
                             int rs_f, i64 cs_f, real* block, real* fft),
                  pad_grid_impl<real>(pad, ncomp, mx, my, mz, rs_b, cs_b, nx, ny, nz, rs_f, cs_f, block, fft))

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
