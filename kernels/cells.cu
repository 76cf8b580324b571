// Cell lists on the device: keys, counting sort (count, scan, scatter) and the gather of the
// sorted particles into structure-of-arrays with coordinates relative to their cell's origin
// (parki_nearfield::cells, whose doc explains why relative coordinates).
//
// The scatter takes slots by atomicAdd, so the order of the particles inside a cell, and with
// it the order of the near-field sums, follows the arrival of the atomics: the results agree
// with the CPU's to rounding, not bitwise. With P2P's cut-off sphere, cell_sort_x then orders
// every cell by x (ties by index), as the CPU's sort_bins_by_x does: the order is deterministic.

// keys[i] = local cell of point i (CellGrid::cell_of).
template <typename T>
__device__ void cell_keys_impl(CellParams g, const T* pos, u32 n, u32* keys) {
  u64 i = global_thread();
  if (i < n) keys[i] = cell_of<T>(g, pos + 3 * i);
}
PARKI_EXPORT_BOTH(cell_keys, (CellParams g, const real* pos, u32 n, u32* keys), cell_keys_impl<real>(g, pos, n, keys))

// counts[keys[i]] += 1 (counts zeroed by the caller).
PARKI_EXPORT(sort_count, (const u32* keys, u32 n, u32* counts), {
  u64 i = global_thread();
  if (i < n) atomicAdd(&counts[keys[i]], 1u);
})

// out[0..=n]: exclusive prefix sum of in[0..n], out[n] the total. One block of blockDim.x
// threads (a power of two), dynamic shared memory of blockDim.x u32; chunks of blockDim.x in
// turn, each by a Hillis-Steele scan in shared memory.
PARKI_EXPORT_SYNC(scan_exclusive, (const u32* in, u32 n, u32* out), {
  PARKI_DYNAMIC_SHARED(u32, s);
  const u32 b = blockDim.x;
  const u32 t = threadIdx.x;
  u32 carry = 0;
  for (u32 base = 0; base < n; base += b) {
    u32 v = base + t < n ? in[base + t] : 0u;
    s[t] = v;
    __syncthreads();
    for (u32 off = 1; off < b; off *= 2) {
      u32 add = t >= off ? s[t - off] : 0u;
      __syncthreads();
      s[t] += add;
      __syncthreads();
    }
    if (base + t < n) out[base + t] = carry + s[t] - v;
    u32 total = s[b - 1];
    __syncthreads();
    carry += total;
  }
  if (t == 0) out[n] = carry;
})

// order[offsets[k] + c] = i for the c-th arrival i of key k (cursor zeroed by the caller).
PARKI_EXPORT(sort_scatter, (const u32* keys, u32 n, const u32* offsets, u32* cursor, u32* order), {
  u64 i = global_thread();
  if (i < n) {
    u32 k = keys[i];
    u32 slot = offsets[k] + atomicAdd(&cursor[k], 1u);
    order[slot] = (u32)i;
  }
})

// Sorted slot s holds particle i = order[s] of cell keys[i]: its coordinates relative to the
// cell's origin (rounded once to T, CellGrid::relative; with position residuals `lo`, not
// null, (pos - origin) + lo in double, then rounded once), its cell in `cell_of_slot`, and, when
// `dw > 0`, its packed densities in component arrays dens[c * n + s] from packed[i * dw + c].
template <typename T>
__device__ void cell_gather_impl(CellParams g, const T* pos, const T* lo, const T* packed, int dw, const u32* keys,
                                 const u32* order, u32 n, T* x, T* y, T* z, T* dens, u32* cell_of_slot) {
  u64 s = global_thread();
  if (s >= n) return;
  u32 i = order[s];
  u32 c = keys[i];
  double o[3];
  cell_origin<T>(g, (int)c, o);
  double r[3];
  for (int d = 0; d < 3; ++d) {
    r[d] = (double)pos[3 * (u64)i + d] - o[d];
    if (lo) r[d] += (double)lo[3 * (u64)i + d];
  }
  x[s] = (T)r[0];
  y[s] = (T)r[1];
  z[s] = (T)r[2];
  if (cell_of_slot) cell_of_slot[s] = c;
  for (int q = 0; q < dw; ++q) dens[(u64)q * n + s] = packed[(u64)i * dw + q];
}
PARKI_EXPORT_BOTH(cell_gather,
                  (CellParams g, const real* pos, const real* lo, const real* packed, int dw, const u32* keys,
                   const u32* order, u32 n, real* x, real* y, real* z, real* dens, u32* cell_of_slot),
                  cell_gather_impl<real>(g, pos, lo, packed, dw, keys, order, n, x, y, z, dens, cell_of_slot))

// out[offsets[c] + r] = i for the particle i = order[s] of cell c = keys[i] with r the number of
// the cell's particles before it in x (ties by index: the CPU's sort_bins_by_x): the counting
// sort's slots ordered by x within every cell, for the windows of P2P's cut-off sphere (x plus
// its residual in double where `lo` is not null: the order of the coordinates cell_gather
// stores). One thread per slot counts over its cell (O(n_c^2) per cell; a warp's threads
// mostly share the cell, so their reads of the cell's positions broadcast).
template <typename T>
__device__ void cell_sort_x_impl(const T* pos, const T* lo, const u32* keys, const u32* offsets, const u32* order,
                                 u32 n, u32* out) {
  u64 s = global_thread();
  if (s >= n) return;
  const u32 i = order[s];
  const u32 c = keys[i];
  const double x = (double)pos[3 * (u64)i] + (lo ? (double)lo[3 * (u64)i] : 0.0);
  const u32 j0 = offsets[c], j1 = offsets[c + 1];
  u32 r = 0;
  for (u32 j = j0; j < j1; ++j) {
    const u32 k = order[j];
    const double y = (double)pos[3 * (u64)k] + (lo ? (double)lo[3 * (u64)k] : 0.0);
    r += (y < x || (y == x && k < i)) ? 1u : 0u;
  }
  out[j0 + r] = i;
}
PARKI_EXPORT_BOTH(cell_sort_x,
                  (const real* pos, const real* lo, const u32* keys, const u32* offsets, const u32* order, u32 n,
                   u32* out),
                  cell_sort_x_impl<real>(pos, lo, keys, offsets, order, n, out))
