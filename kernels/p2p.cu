// P2P: the Ewald-screened near field over the cell lists (parki_nearfield::p2p, whose doc has
// the formulas; Hasimoto splitting, eq. (4) of the Ewald paper, ParkiPy digest §1.2, §9.4).
//
// With A = erfc(xi r)/r, B = 2 xi e^{-xi^2 r^2}/sqrt(pi), D = 2 xi^2 B:
//   Laplace   u += A q
//   Stokeslet u += (A - B) f + (A + B) (r.f) r / r^2
//   stresslet u += D [(q.n) r + (r.n) q + (r.q) n] - (r.q)(r.n) r [6 (A + B)/r^4 + 2 D/r^2]
//   Stokes    the sum of the two;
//   the Laplace field E = -grad u: E += (A + B) q r / r^2, after u (PARKI_LAPLACE_FIELD).
// At r = 0 exactly the self term -G^F(0) s: -2 xi/sqrt(pi) q (Laplace), -4 xi/sqrt(pi) f
// (Stokeslet), 0 (stresslet and the Laplace field: their smooth parts are odd).
//
// erfc: E = 1 the fitted one of erfc.cu from the Gaussian the pair has (default), E = 0
// CUDA's (`DeviceErfc`); E = 2 (f64 only) the CPU's medium pair functions
// (PairAccuracy::Medium): erfc.cu's medium polynomial and exp_neg_medium below, the Gaussian
// to about 2e-13 and erfc to 2e-12 times its conditioning, 1e-11 per pair term in the error
// model. The exponential is CUDA's otherwise.
//
// Two variants: GM-1D (the paper's: one thread per sorted target, sources read from global
// memory, a warp's targets share a cell so its loads broadcast) and shared memory (a block per
// target cell stages each colleague's sources in tiles).
//
// Which pairs: with r2 < 0 every pair of the 27 colleague cells; with r2 >= 0 those of the
// cut-off sphere of squared radius r2 (parki_nearfield::NearCutoff::Sphere, docs/design.md
// "P2P's cut-off sphere"): the sources of every cell sorted by x (cell_sort_x), a target at
// squared distance d2 from a colleague's row of cells across y and z reads the colleague's
// sources with |x_s - x| <= sqrt(r2 - d2), a window found by binary search, the same pairs as
// the CPU's. Both variants add the pairs they evaluate to *pairs (when not null).

template <typename T>
struct PairConsts {
  T xi, neg_xi2, c, two_xi2;
};

template <typename T>
__device__ __forceinline__ PairConsts<T> pair_consts(T xi) {
  PairConsts<T> k;
  k.xi = xi;
  k.neg_xi2 = -xi * xi;
  k.c = (T)(2.0 / sqrt(PARKI_PI)) * xi;
  k.two_xi2 = (T)2 * xi * xi;
  return k;
}

// The CPU's medium exp (parki_nearfield::special::exp_neg_at, MEDIUM): 1/k!, k = 0..10 (the
// emulator tests check they are the CPU's).
__constant__ double parki_exp_f64_medium[11] = {
    (double)1.0,
    (double)1.0,
    (double)0.5,
    (double)1.6666666666666666e-1,
    (double)4.1666666666666664e-2,
    (double)8.333333333333333e-3,
    (double)1.388888888888889e-3,
    (double)1.984126984126984e-4,
    (double)2.4801587301587302e-5,
    (double)2.755731922398589e-6,
    (double)2.7557319223985893e-7,
};

// exp(y) for y <= 0 as the CPU's medium exp_neg: y clamped at -600 (results stay normal),
// Cody-Waite reduction y = n ln2 + r with ln2 split in two, the Taylor polynomial of degree 10
// in r (|r| <= ln2/2: remainder 2.2e-13) by Horner from constant memory, times 2^n built in the
// exponent bits. 15 FP64 instructions and no branch, against CUDA's exp's 16 with 22 uniform
// moves and an overflow branch (docs/performance.md §8.13).
__device__ __forceinline__ double exp_neg_medium(double y) {
  y = fmax(y, -600.0);
  const double n = rint(y * 1.4426950408889634);
  double r = fma(n, -6.9314718036912382e-1, y);
  r = fma(n, -1.9082149292705877e-10, r);
  double p = parki_exp_f64_medium[10];
  PARKI_UNROLL
  for (int k = 9; k >= 0; --k) p = fma(p, r, parki_exp_f64_medium[k]);
  return p * __longlong_as_double((long long)((int)n + 1023) << 52);
}

// The pair's Gaussian e^{-xi^2 r^2}: CUDA's exp, or the medium one (E = 2, f64).
template <typename T, int E>
__device__ __forceinline__ T pair_gauss(T y) {
  if constexpr (E == 2 && sizeof(T) == 8)
    return exp_neg_medium(y);
  else
    return p_exp(y);
}

// One pair: displacement d, source densities s (packed: [q], [f], [q n], [f q n]).
template <typename T, int kernel, int E>
__device__ __forceinline__ void pair(const PairConsts<T>& k, const T* d, const T* s, T* acc) {
  T r2 = p_fma(d[0], d[0], p_fma(d[1], d[1], d[2] * d[2]));
  bool pos = r2 > (T)0;
  T rinv = pos ? p_rsqrt(r2) : (T)0;
  T r = r2 * rinv;
  T g = pair_gauss<T, E>(k.neg_xi2 * r2);
  T b = k.c * g;
  T a = pos ? (E ? erfc_gauss<T, E>(k.xi * r, g) : p_erfc(k.xi * r)) * rinv : (T)0;
  if (kernel == PARKI_LAPLACE || kernel == PARKI_LAPLACE_FIELD) {
    acc[0] = p_fma(pos ? a : -k.c, s[0], acc[0]);
    if (kernel == PARKI_LAPLACE_FIELD) {
      T e = (a + b) * (rinv * rinv) * s[0];  // 0 at r = 0 (rinv = 0)
      for (int i = 0; i < 3; ++i) acc[1 + i] = p_fma(e, d[i], acc[1 + i]);
    }
    return;
  }
  int off = 0;
  if (kernel == PARKI_STOKESLET || kernel == PARKI_STOKES) {
    T aa = (pos ? a : -k.c) - b;
    T cr = (a + b) * rinv * rinv;
    T rf = p_fma(d[0], s[0], p_fma(d[1], s[1], d[2] * s[2]));
    T kk = cr * rf;
    for (int i = 0; i < 3; ++i) acc[i] = p_fma(aa, s[i], p_fma(kk, d[i], acc[i]));
    off = 3;
  }
  if (kernel == PARKI_STRESSLET || kernel == PARKI_STOKES) {
    const T* q = s + off;
    const T* n = s + off + 3;
    T dd = k.two_xi2 * b;
    T rq = p_fma(d[0], q[0], p_fma(d[1], q[1], d[2] * q[2]));
    T rn = p_fma(d[0], n[0], p_fma(d[1], n[1], d[2] * n[2]));
    T qn = p_fma(q[0], n[0], p_fma(q[1], n[1], q[2] * n[2]));
    T ri2 = rinv * rinv;
    T e = ri2 * p_fma((T)6 * (a + b), ri2, (T)2 * dd);
    T sc = rq * rn * e;
    for (int i = 0; i < 3; ++i) {
      T t = p_fma(qn, d[i], p_fma(rn, q[i], rq * n[i]));
      acc[i] = p_fma(dd, t, p_fma(-sc, d[i], acc[i]));
    }
  }
}

// The target's position relative to colleague k's origin: (x_rel + o) rounded once to T, with
// o = origin(c) - origin(cell) - s (CellGrid::colleague_offsets); *xd its x before the
// rounding (the cut-off sphere's window is found in f64, as on the CPU). Returns the colleague
// cell.
template <typename T>
__device__ __forceinline__ int colleague_position(const CellParams& g, int c, const double* oc_self, int k,
                                                  const double* xrel, T* p, double* xd) {
  double s[3];
  int cc = cell_colleague(g, c, k, s);
  double oc[3];
  cell_origin<T>(g, cc, oc);
  for (int d = 0; d < 3; ++d) {
    double v = xrel[d] + ((oc_self[d] - oc[d]) - s[d]);
    if (d == 0) *xd = v;
    p[d] = (T)v;
  }
  return cc;
}

// Squared distances of a target at xrel (relative to its cell c) to the rows of colleague
// cells at steps -1, 0, +1 across y (dy2) and z (dz2): 0 for its own row, else the distance to
// the face between (CellGrid::faces).
template <typename T>
__device__ __forceinline__ void sphere_rows(const CellParams& g, int c, const double* xrel, double* dy2,
                                            double* dz2) {
  double lo[3], hi[3];
  cell_faces<T>(g, c, lo, hi);
  double* out[2] = {dy2, dz2};
  for (int a = 0; a < 2; ++a) {
    const int d = a + 1;
    double below = xrel[d] - lo[d];
    double above = hi[d] - xrel[d];
    below = below > 0.0 ? below : 0.0;
    above = above > 0.0 ? above : 0.0;
    out[a][0] = below * below;
    out[a][1] = 0.0;
    out[a][2] = above * above;
  }
}

// The sources *j0..*j1 (sorted by x) cut to the window |x_s - x| <= sqrt(r2 - d2) of a target
// at x in their frame (parki_nearfield::p2p's sphere_window): empty (*j1, *j1) where the
// sphere does not reach the row; the ends searched only where they are cut. r2 < 0: unchanged.
template <typename T>
__device__ __forceinline__ void sphere_window(const T* xs, double x, double d2, double r2, u32* j0, u32* j1) {
  if (r2 < 0.0) return;
  const u32 a = *j0, b = *j1;
  const double w2 = r2 - d2;
  if (w2 < 0.0 || a == b) {
    *j0 = b;
    return;
  }
  const double w = sqrt(w2);
  const double lo = x - w, hi = x + w;
  u32 f = a;
  if ((double)xs[a] < lo) {
    u32 h = b;
    while (f < h) {
      const u32 m = f + (h - f) / 2;
      if ((double)xs[m] < lo)
        f = m + 1;
      else
        h = m;
    }
  }
  u32 e = b;
  if ((double)xs[b - 1] > hi) {
    u32 l = f;
    while (l < e) {
      const u32 m = l + (e - l) / 2;
      if ((double)xs[m] <= hi)
        l = m + 1;
      else
        e = m;
    }
  }
  *j0 = f;
  *j1 = e;
}

// GM-1D: thread t handles sorted target t of cell tcell[t]; out[t * dim + c] in sorted order.
// Sources: soff[c]..soff[c+1] of cell c, coordinates sx, sy, sz, densities sd[q * ns + j].
template <typename T, int K, int E>
struct P2pGm1d {
  static __device__ void run(CellParams g, T xi, double r2, u32 nt, const u32* tcell, const T* tx, const T* ty,
                             const T* tz, const u32* soff, const T* sx, const T* sy, const T* sz, const T* sd, u32 ns,
                             T* out, u64* pairs) {
    u64 t = global_thread();
    if (t >= nt) return;
    constexpr int DIM = PARKI_DIM(K);
    constexpr int DW = PARKI_WIDTH(K);
    const PairConsts<T> kc = pair_consts<T>(xi);
    int c = (int)tcell[t];
    double o[3];
    cell_origin<T>(g, c, o);
    double xrel[3] = {(double)tx[t], (double)ty[t], (double)tz[t]};
    double dy2[3], dz2[3];
    sphere_rows<T>(g, c, xrel, dy2, dz2);
    T acc[DIM];
    for (int q = 0; q < DIM; ++q) acc[q] = (T)0;
    u64 np = 0;
    for (int k = 0; k < 27; ++k) {
      T p[3];
      double xd;
      int cc = colleague_position<T>(g, c, o, k, xrel, p, &xd);
      u32 j0 = soff[cc], j1 = soff[cc + 1];
      sphere_window<T>(sx, xd, dy2[(k / 3) % 3] + dz2[k / 9], r2, &j0, &j1);
      np += j1 - j0;
      for (u32 j = j0; j < j1; ++j) {
        T d[3] = {p[0] - sx[j], p[1] - sy[j], p[2] - sz[j]};
        T s[DW];
        for (int q = 0; q < DW; ++q) s[q] = sd[(u64)q * ns + j];
        pair<T, K, E>(kc, d, s, acc);
      }
    }
    for (int q = 0; q < DIM; ++q) out[t * DIM + q] = acc[q];
    if (pairs) atomicAdd(pairs, np);
  }
};
// GM-1D's entry points, one per kernel (K) and erfc (E: `fit`, `lib`, `med`), each with its own
// register allocation (one function for all ten took the most any of them needs: 118 registers
// in f64 against 68 to 111 apart, docs/performance.md §8.11), so a kernel's occupancy is its
// own. (A block per target cell instead, as the paper maps it, measured slower on an H100 at
// ~46 targets per cell: blocks of 64 threads, a quarter of them idle.)
// Launch bounds of both variants' entry points: blocks of at most 128 threads (the backend's
// P2P_BLOCK and the shared variant's block), and registers few enough for five of them per SM
// (at most 96 per thread, the allocation's granularity included: 20 warps; f64's medium Stokes
// kernels took 104 otherwise, 16 warps).
#define PARKI_P2P_THREADS 128
#define PARKI_P2P_BLOCKS 5
#define PARKI_P2P_GM1D_PARAMS                                                                                      \
  (CellParams g, real xi, double r2, u32 nt, const u32* tcell, const real* tx, const real* ty, const real* tz,    \
   const u32* soff, const real* sx, const real* sy, const real* sz, const real* sd, u32 ns, real* out, u64* pairs)
// (in parentheses: the template's commas pass through the export macros)
#define PARKI_P2P_GM1D_CALL(K, E) \
  (P2pGm1d<real, K, E>::run(g, xi, r2, nt, tcell, tx, ty, tz, soff, sx, sy, sz, sd, ns, out, pairs))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_laplace_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_LAPLACE, 1))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_laplace_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_LAPLACE, 0))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_field_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_LAPLACE_FIELD, 1))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_field_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_LAPLACE_FIELD, 0))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_stokeslet_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STOKESLET, 1))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_stokeslet_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STOKESLET, 0))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_stresslet_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STRESSLET, 1))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_stresslet_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STRESSLET, 0))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_stokes_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STOKES, 1))
PARKI_EXPORT_BOTH_LB(p2p_gm1d_stokes_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STOKES, 0))
// the medium pair functions (`med`), f64 only
PARKI_EXPORT_F64_LB(p2p_gm1d_laplace_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_LAPLACE, 2))
PARKI_EXPORT_F64_LB(p2p_gm1d_field_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_LAPLACE_FIELD, 2))
PARKI_EXPORT_F64_LB(p2p_gm1d_stokeslet_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STOKESLET, 2))
PARKI_EXPORT_F64_LB(p2p_gm1d_stresslet_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STRESSLET, 2))
PARKI_EXPORT_F64_LB(p2p_gm1d_stokes_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_GM1D_PARAMS, PARKI_P2P_GM1D_CALL(PARKI_STOKES, 2))

// Shared memory: block b handles target cell b (targets toff[b]..toff[b+1]); each colleague's
// sources are staged in tiles of blockDim.x (dynamic shared memory: blockDim.x * (3 + dw) T).
template <typename T, int K, int E>
struct P2pShared {
  static __device__ void run(CellParams g, T xi, double r2, const u32* toff, const T* tx, const T* ty, const T* tz,
                             const u32* soff, const T* sx, const T* sy, const T* sz, const T* sd, u32 ns, T* out,
                             u64* pairs) {
  PARKI_DYNAMIC_SHARED(T, tile);
  const int c = (int)blockIdx.x;
  const u32 t0 = toff[c], t1 = toff[c + 1];
  if (t0 == t1) return;  // uniform over the block
  const u32 bs = blockDim.x;
  constexpr int dim = PARKI_DIM(K);
  constexpr int dw = PARKI_WIDTH(K);
  const PairConsts<T> kc = pair_consts<T>(xi);
  double o[3];
  cell_origin<T>(g, c, o);
  u64 np = 0;
  for (u32 tb = t0; tb < t1; tb += bs) {
    const u32 t = tb + threadIdx.x;
    const bool active = t < t1;
    double xrel[3] = {0.0, 0.0, 0.0};
    if (active) {
      xrel[0] = (double)tx[t];
      xrel[1] = (double)ty[t];
      xrel[2] = (double)tz[t];
    }
    double dy2[3], dz2[3];
    sphere_rows<T>(g, c, xrel, dy2, dz2);
    T acc[dim];
    for (int q = 0; q < dim; ++q) acc[q] = (T)0;
    for (int k = 0; k < 27; ++k) {
      T p[3];
      double xd;
      int cc = colleague_position<T>(g, c, o, k, xrel, p, &xd);
      const u32 j0 = soff[cc], j1 = soff[cc + 1];
      // this thread's window (the block stages the whole cell)
      u32 w0 = j0, w1 = j1;
      if (active) sphere_window<T>(sx, xd, dy2[(k / 3) % 3] + dz2[k / 9], r2, &w0, &w1);
      if (active) np += w1 - w0;
      for (u32 jb = j0; jb < j1; jb += bs) {
        const u32 j = jb + threadIdx.x;
        __syncthreads();
        if (j < j1) {
          tile[threadIdx.x] = sx[j];
          tile[bs + threadIdx.x] = sy[j];
          tile[2 * bs + threadIdx.x] = sz[j];
          for (int q = 0; q < dw; ++q) tile[(3 + q) * bs + threadIdx.x] = sd[(u64)q * ns + j];
        }
        __syncthreads();
        const u32 m = j1 - jb < bs ? j1 - jb : bs;
        // the tile's slots l in the window: w0 <= jb + l < w1
        const u32 l0 = w0 > jb ? w0 - jb : 0u;
        const u32 l1 = w1 > jb ? (w1 - jb < m ? w1 - jb : m) : 0u;
        if (active) {
          for (u32 l = l0; l < l1; ++l) {
            T d[3] = {p[0] - tile[l], p[1] - tile[bs + l], p[2] - tile[2 * bs + l]};
            T s[dw];
            for (int q = 0; q < dw; ++q) s[q] = tile[(3 + q) * bs + l];
            pair<T, K, E>(kc, d, s, acc);
          }
        }
      }
    }
    if (active)
      for (int q = 0; q < dim; ++q) out[(u64)t * dim + q] = acc[q];
  }
  if (pairs && np) atomicAdd(pairs, np);
}
};
// The shared-memory variant's entry points, one per kernel and erfc as GM-1D's (one function
// for all ten took 158 registers in f64 against 80 to 112 apart).
#define PARKI_P2P_SHARED_PARAMS                                                                                 \
  (CellParams g, real xi, double r2, const u32* toff, const real* tx, const real* ty, const real* tz,          \
   const u32* soff, const real* sx, const real* sy, const real* sz, const real* sd, u32 ns, real* out, u64* pairs)
#define PARKI_P2P_SHARED_CALL(K, E) \
  (P2pShared<real, K, E>::run(g, xi, r2, toff, tx, ty, tz, soff, sx, sy, sz, sd, ns, out, pairs))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_laplace_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_LAPLACE, 1))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_laplace_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_LAPLACE, 0))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_field_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_LAPLACE_FIELD, 1))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_field_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_LAPLACE_FIELD, 0))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_stokeslet_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STOKESLET, 1))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_stokeslet_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STOKESLET, 0))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_stresslet_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STRESSLET, 1))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_stresslet_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STRESSLET, 0))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_stokes_fit, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STOKES, 1))
PARKI_EXPORT_BOTH_LB_SYNC(p2p_shared_stokes_lib, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STOKES, 0))
PARKI_EXPORT_F64_LB_SYNC(p2p_shared_laplace_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_LAPLACE, 2))
PARKI_EXPORT_F64_LB_SYNC(p2p_shared_field_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_LAPLACE_FIELD, 2))
PARKI_EXPORT_F64_LB_SYNC(p2p_shared_stokeslet_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STOKESLET, 2))
PARKI_EXPORT_F64_LB_SYNC(p2p_shared_stresslet_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STRESSLET, 2))
PARKI_EXPORT_F64_LB_SYNC(p2p_shared_stokes_med, PARKI_P2P_THREADS, PARKI_P2P_BLOCKS, PARKI_P2P_SHARED_PARAMS, PARKI_P2P_SHARED_CALL(PARKI_STOKES, 2))

// The FP64/FP32 peak of the device: `chains` independent FMA chains per thread, `iters` steps
// each (P2P's achieved rate is reported against it). out[thread] keeps the chains alive.
template <typename T>
__device__ void fma_peak_impl(u32 iters, T* out) {
  T a[8];
  for (int k = 0; k < 8; ++k) a[k] = (T)(threadIdx.x + k) * (T)1e-3;
  const T m = (T)0.999999, c = (T)1e-7;
  for (u32 i = 0; i < iters; ++i)
    for (int k = 0; k < 8; ++k) a[k] = p_fma(a[k], m, c);
  T s = (T)0;
  for (int k = 0; k < 8; ++k) s += a[k];
  out[global_thread()] = s;
}
PARKI_EXPORT_BOTH(fma_peak, (u32 iters, real* out), fma_peak_impl<real>(iters, out))
