// parki-dist CUDA kernels: common definitions (parameter blocks, math, export macros).
//
// Every file in kernels/ is compiled twice: by NVRTC for the device (crates/gpu, feature
// "cuda"), and as C++ by the host emulator (crates/gpu/emu) that tests them on machines without
// a GPU. Hence: no headers, no warp intrinsics, barriers only where every thread reaches them.
#pragma once

// Entry points: NAME_f32 and NAME_f64 from one template, `real` being the precision.
#define PARKI_EXPORT_BOTH(NAME, PARAMS, CALL)                                     \
  namespace parki_f32 {                                                          \
  typedef float real;                                                            \
  extern "C" __global__ void NAME##_f32 PARAMS { CALL; }                         \
  }                                                                              \
  namespace parki_f64 {                                                          \
  typedef double real;                                                           \
  extern "C" __global__ void NAME##_f64 PARAMS { CALL; }                         \
  }
// The same for kernels that use __syncthreads (the emulator runs their threads concurrently).
#define PARKI_EXPORT_BOTH_SYNC(NAME, PARAMS, CALL) PARKI_EXPORT_BOTH(NAME, PARAMS, CALL)
// An f64 entry point only (NAME_f64): where f32 has nothing of its own (P2P's medium pairs).
#define PARKI_EXPORT_F64(NAME, PARAMS, CALL)                                      \
  namespace parki_f64 {                                                          \
  typedef double real;                                                           \
  extern "C" __global__ void NAME##_f64 PARAMS { CALL; }                         \
  }
#define PARKI_EXPORT_F64_SYNC(NAME, PARAMS, CALL) PARKI_EXPORT_F64(NAME, PARAMS, CALL)
// The same with launch bounds: at most THREADS threads per block, and registers few enough
// for BLOCKS such blocks per SM (the compiler caps them, spilling if it must).
#define PARKI_EXPORT_BOTH_LB(NAME, THREADS, BLOCKS, PARAMS, CALL)                            \
  namespace parki_f32 {                                                                     \
  typedef float real;                                                                       \
  extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS) NAME##_f32 PARAMS { CALL; } \
  }                                                                                         \
  namespace parki_f64 {                                                                     \
  typedef double real;                                                                      \
  extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS) NAME##_f64 PARAMS { CALL; } \
  }
#define PARKI_EXPORT_BOTH_LB_SYNC(NAME, THREADS, BLOCKS, PARAMS, CALL) \
  PARKI_EXPORT_BOTH_LB(NAME, THREADS, BLOCKS, PARAMS, CALL)
#define PARKI_EXPORT_F64_LB(NAME, THREADS, BLOCKS, PARAMS, CALL)                              \
  namespace parki_f64 {                                                                     \
  typedef double real;                                                                      \
  extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS) NAME##_f64 PARAMS { CALL; } \
  }
#define PARKI_EXPORT_F64_LB_SYNC(NAME, THREADS, BLOCKS, PARAMS, CALL) \
  PARKI_EXPORT_F64_LB(NAME, THREADS, BLOCKS, PARAMS, CALL)
// A precision-independent entry point.
#define PARKI_EXPORT(NAME, PARAMS, BODY) extern "C" __global__ void NAME PARAMS { BODY; }
#define PARKI_EXPORT_SYNC(NAME, PARAMS, BODY) PARKI_EXPORT(NAME, PARAMS, BODY)

// Full unrolling of a loop with a constant trip count (its array in registers) under NVRTC.
#ifdef PARKI_NVRTC
#define PARKI_UNROLL _Pragma("unroll")
#else
#define PARKI_UNROLL
#endif

typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define PARKI_MAX_P 32
#define PARKI_PI 3.14159265358979323846

// Kernel selector, as parki_core::Kernel.
#define PARKI_LAPLACE 0
#define PARKI_STOKESLET 1
#define PARKI_STRESSLET 2
#define PARKI_STOKES 3
// P2P only: the Laplace potential and its field E = -grad u ([u, E_x, E_y, E_z] per target).
#define PARKI_LAPLACE_FIELD 4

// The same three as constant expressions (array sizes of the kernels compiled per kernel).
#define PARKI_DIM(K) ((K) == PARKI_LAPLACE ? 1 : (K) == PARKI_LAPLACE_FIELD ? 4 : 3)
#define PARKI_WIDTH(K)                                                                  \
  ((K) == PARKI_LAPLACE || (K) == PARKI_LAPLACE_FIELD ? 1                               \
   : (K) == PARKI_STOKESLET                           ? 3                               \
   : (K) == PARKI_STRESSLET                           ? 6                               \
                                                      : 9)
__device__ __forceinline__ int parki_output_dim(int kernel) { return PARKI_DIM(kernel); }
// Packed density width per source: [q], [f], [q, n], [f, q, n].
__device__ __forceinline__ int parki_density_width(int kernel) { return PARKI_WIDTH(kernel); }
// Grid components P2G spreads: [q], [f], S (6), [f, S] (9).
__device__ __forceinline__ int parki_grid_components(int kernel) { return parki_density_width(kernel); }

// Compile-time kernel and window support for the hot kernels (P2P, P2G, G2P): their arrays
// (weights, densities, accumulators) then live in registers instead of local memory.
// `F<T, K, P>::run(a...)` with K the kernel (or, for G2P, the output dimension) and P the
// support when it is an even value 4..16 (every support the parameter selection picks up to
// tolerances of about 1e-13), else P = 0: the support read at run time, arrays of PARKI_MAX_P.
#define PARKI_P_OR_MAX(P) ((P) > 0 ? (P) : PARKI_MAX_P)
template <template <typename, int, int> class F, typename T, int K, typename... A>
__device__ __forceinline__ void parki_with_p(int p, A... a) {
  switch (p) {
    case 4: F<T, K, 4>::run(a...); return;
    case 6: F<T, K, 6>::run(a...); return;
    case 8: F<T, K, 8>::run(a...); return;
    case 10: F<T, K, 10>::run(a...); return;
    case 12: F<T, K, 12>::run(a...); return;
    case 14: F<T, K, 14>::run(a...); return;
    case 16: F<T, K, 16>::run(a...); return;
    default: F<T, K, 0>::run(a...); return;
  }
}
// The kernel at compile time (P as the caller's `p`, 0 for kernels without a window).
template <template <typename, int, int> class F, typename T, typename... A>
__device__ __forceinline__ void parki_with_kernel(int kernel, A... a) {
  switch (kernel) {
    case PARKI_LAPLACE: F<T, PARKI_LAPLACE, 0>::run(a...); return;
    case PARKI_STOKESLET: F<T, PARKI_STOKESLET, 0>::run(a...); return;
    case PARKI_STRESSLET: F<T, PARKI_STRESSLET, 0>::run(a...); return;
    default: F<T, PARKI_STOKES, 0>::run(a...); return;
  }
}
// Both: the kernel and the support at compile time.
template <template <typename, int, int> class F, typename T, typename... A>
__device__ __forceinline__ void parki_with_kernel_p(int kernel, int p, A... a) {
  switch (kernel) {
    case PARKI_LAPLACE: parki_with_p<F, T, PARKI_LAPLACE>(p, a...); return;
    case PARKI_STOKESLET: parki_with_p<F, T, PARKI_STOKESLET>(p, a...); return;
    case PARKI_STRESSLET: parki_with_p<F, T, PARKI_STRESSLET>(p, a...); return;
    default: parki_with_p<F, T, PARKI_STOKES>(p, a...); return;
  }
}

// Math in the working precision.
__device__ __forceinline__ float p_erfc(float x) { return erfcf(x); }
__device__ __forceinline__ double p_erfc(double x) { return erfc(x); }
__device__ __forceinline__ float p_exp(float x) { return expf(x); }
__device__ __forceinline__ double p_exp(double x) { return exp(x); }
__device__ __forceinline__ float p_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double p_sqrt(double x) { return sqrt(x); }
// 1/sqrt(x): CUDA's rsqrt, within an ulp or two (the emulator: 1/sqrt); a square root and a
// division took 13 FP64 instructions and two slow-path branches per pair in P2P.
__device__ __forceinline__ float p_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double p_rsqrt(double x) { return rsqrt(x); }
__device__ __forceinline__ float p_fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double p_fma(double a, double b, double c) { return fma(a, b, c); }
// Rounds a double to the working precision and back (as `T::from_f64(x).to_f64()`).
template <typename T>
__device__ __forceinline__ double p_round(double x) {
  return (double)(T)x;
}

// A rank's window of the cell grid (parki_nearfield::CellGrid): see crates/gpu/src/params.rs.
struct CellParams {
  i64 origin[3];      // unwrapped global cell of local cell 0 along windowed axes
  double width[3];    // cell widths
  double lengths[3];  // box lengths
  int n[3];           // local cells per axis
  int global_n[3];    // global cells per axis
  int wrap[3];        // 1: the axis holds every cell and wraps
  int pad;
};

// The window on a grid block (parki_farfield::GridWindow) and the layout the kernel reads or
// writes: see crates/gpu/src/params.rs.
struct WindowParams {
  i64 origin[3];         // unwrapped global point of local point 0 along windowed axes
  i64 component_stride;  // reals between components of the grid read or written
  double inv_h[3];       // 1/h per axis
  int m[3];              // points per axis of the block (layout.global)
  int global[3];         // points per axis of the global grid
  int wrap[3];           // 1: the axis holds the whole periodic grid
  int p;                 // support
  int degree;            // polynomial degree per bin
  int row_stride;        // reals per x row of the grid read or written
  int pad;
};

// Local cell coordinates of linear cell c.
__device__ __forceinline__ void cell_coords(const CellParams& g, int c, int* ix) {
  ix[0] = c % g.n[0];
  ix[1] = (c / g.n[0]) % g.n[1];
  ix[2] = c / (g.n[0] * g.n[1]);
}

// Origin of local cell c rounded to T (CellGrid::origin): the lower face of its global cell, or
// the box length for the last cell.
template <typename T>
__device__ __forceinline__ void cell_origin(const CellParams& g, int c, double* o) {
  int ix[3];
  cell_coords(g, c, ix);
  for (int d = 0; d < 3; ++d) {
    i64 n = g.global_n[d];
    i64 gl = g.wrap[d] ? (i64)ix[d] : (((g.origin[d] + ix[d]) % n) + n) % n;
    double v = gl == n - 1 ? g.lengths[d] : (double)gl * g.width[d];
    o[d] = p_round<T>(v);
  }
}

// Faces of local cell c in its own relative frame (CellGrid::faces): along axis d the lower
// face g w - o and the upper face (g + 1) w - o, or L - o for the last global cell, with o the
// origin of cell_origin<T>. P2P's cut-off sphere measures the squared distance from a target to
// the rows of colleague cells across y and z by them.
template <typename T>
__device__ __forceinline__ void cell_faces(const CellParams& g, int c, double* lo, double* hi) {
  int ix[3];
  cell_coords(g, c, ix);
  double o[3];
  cell_origin<T>(g, c, o);
  for (int d = 0; d < 3; ++d) {
    i64 n = g.global_n[d];
    i64 gl = g.wrap[d] ? (i64)ix[d] : (((g.origin[d] + ix[d]) % n) + n) % n;
    lo[d] = (double)gl * g.width[d] - o[d];
    hi[d] = (gl == n - 1 ? g.lengths[d] : (double)(gl + 1) * g.width[d]) - o[d];
  }
}

// Colleague k (0..27, x fastest) of local cell c: its linear index and the image shift s.
__device__ __forceinline__ int cell_colleague(const CellParams& g, int c, int k, double* s) {
  int ix[3];
  cell_coords(g, c, ix);
  int dd[3] = {k % 3 - 1, (k / 3) % 3 - 1, k / 9 - 1};
  int j[3];
  for (int a = 0; a < 3; ++a) {
    i64 v = (i64)ix[a] + dd[a];
    i64 n = g.n[a];
    s[a] = 0.0;
    if (!g.wrap[a]) {
      if (v < 0) v = 0;
      if (v > n - 1) v = n - 1;
      j[a] = (int)v;
      i64 gn = g.global_n[a];
      i64 u = g.origin[a] + v;
      i64 q = u >= 0 ? u / gn : -((-u + gn - 1) / gn);
      s[a] = (double)q * g.lengths[a];
      continue;
    }
    if (v < 0) {
      j[a] = (int)(v + n);
      s[a] = -g.lengths[a];
    } else if (v >= n) {
      j[a] = (int)(v - n);
      s[a] = g.lengths[a];
    } else {
      j[a] = (int)v;
    }
  }
  return (j[2] * g.n[1] + j[1]) * g.n[0] + j[0];
}

// Linear local cell of a point in the box (CellGrid::cell_of).
template <typename T>
__device__ __forceinline__ u32 cell_of(const CellParams& g, const T* p) {
  int c[3];
  for (int d = 0; d < 3; ++d) {
    double i = floor((double)p[d] / g.width[d]);
    i64 gl = i < 0.0 ? 0 : (i64)i;
    if (gl > g.global_n[d] - 1) gl = g.global_n[d] - 1;
    if (g.wrap[d]) {
      c[d] = (int)gl;
    } else {
      i64 l = gl - g.origin[d];
      if (l < 0) l = 0;
      if (l > g.n[d] - 1) l = g.n[d] - 1;
      c[d] = (int)l;
    }
  }
  return (u32)((c[2] * g.n[1] + c[1]) * g.n[0] + c[0]);
}

// Local anchor along axis d of unwrapped first support index a (GridWindow::local_anchor).
__device__ __forceinline__ int window_anchor(const WindowParams& w, int d, i64 a) {
  if (w.wrap[d]) {
    i64 n = w.global[d];
    return (int)(((a % n) + n) % n);
  }
  i64 l = a - w.origin[d];
  if (l < 0) l = 0;
  if (l > w.m[d] - w.p) l = w.m[d] - w.p;
  return (int)l;
}

// Weights of the P bins at offset delta (GridWindow::weights): Horner over all bins in z =
// 2 delta - 1 with coefficients coeffs[k * P + l] in T.
// P > 0: the support at compile time (P == w.p).
template <typename T, int P = 0>
__device__ __forceinline__ void window_weights(const WindowParams& w, const T* coeffs, T delta, T* out) {
  const int p = P > 0 ? P : w.p;
  T z = delta + delta - (T)1;
  for (int l = 0; l < p; ++l) out[l] = coeffs[w.degree * p + l];
  for (int k = w.degree - 1; k >= 0; --k) {
    for (int l = 0; l < p; ++l) out[l] = p_fma(out[l], z, coeffs[k * p + l]);
  }
}

// Coordinate d of point i in double: its position, plus its residual where `lo` is not null
// (f32 positions rounded from f64: parki_core::Points::at).
template <typename T>
__device__ __forceinline__ double point_coord(const T* pos, const T* lo, u64 i, int d) {
  return (double)pos[3 * i + d] + (lo ? (double)lo[3 * i + d] : 0.0);
}

// Anchor, weights and the weights' derivatives in the position, (1/h) dw/d delta, along axis d
// (GridWindow::footprint_with_derivative): the field's G2P.
template <typename T, int P = 0>
__device__ __forceinline__ int window_axis_derivative(const WindowParams& w, const T* coeffs, const T* dcoeffs, int d,
                                                      double x, T* weights, T* dweights) {
  const int p = P > 0 ? P : w.p;
  double g = x * w.inv_h[d];
  double i0 = floor(g);
  T delta = (T)(g - i0);
  window_weights<T, P>(w, coeffs, delta, weights);
  window_weights<T, P>(w, dcoeffs, delta, dweights);
  const T inv_h = (T)w.inv_h[d];
  for (int l = 0; l < p; ++l) dweights[l] *= inv_h;
  return window_anchor(w, d, (i64)i0 - w.p / 2 + 1);
}

// Anchor and weights of a point along axis d (GridWindow::footprint); x in double: a position,
// or one rounded to T plus its residual (point_coord).
template <typename T, int P = 0>
__device__ __forceinline__ int window_axis(const WindowParams& w, const T* coeffs, int d, double x, T* weights) {
  double g = x * w.inv_h[d];
  double i0 = floor(g);
  double delta = g - i0;
  window_weights<T, P>(w, coeffs, (T)delta, weights);
  return window_anchor(w, d, (i64)i0 - w.p / 2 + 1);
}

// Only the anchor along axis d.
__device__ __forceinline__ int window_anchor_of(const WindowParams& w, int d, double x) {
  double i0 = floor(x * w.inv_h[d]);
  return window_anchor(w, d, (i64)i0 - w.p / 2 + 1);
}

// Grid densities of one source from its packed densities (parki_farfield::grid_density).
template <typename T>
__device__ __forceinline__ void grid_density(int kernel, const T* packed, T* out) {
  if (kernel == PARKI_LAPLACE) {
    out[0] = packed[0];
    return;
  }
  int off = 0;
  if (kernel == PARKI_STOKESLET || kernel == PARKI_STOKES) {
    out[0] = packed[0];
    out[1] = packed[1];
    out[2] = packed[2];
    off = 3;
  }
  if (kernel == PARKI_STRESSLET || kernel == PARKI_STOKES) {
    const T* q = packed + off;
    const T* n = packed + off + 3;
    const T half = (T)0.5;
    out[off + 0] = q[0] * n[0];
    out[off + 1] = q[1] * n[1];
    out[off + 2] = q[2] * n[2];
    out[off + 3] = half * (q[0] * n[1] + q[1] * n[0]);
    out[off + 4] = half * (q[0] * n[2] + q[2] * n[0]);
    out[off + 5] = half * (q[1] * n[2] + q[2] * n[1]);
  }
}

// Global thread index along x.
__device__ __forceinline__ u64 global_thread() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
