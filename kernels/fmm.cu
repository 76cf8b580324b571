// The Laplace FMM on the device (crates/gpu/src/fmm.rs drives it; parki_fmm's host code has the
// formulas and is what these kernels are tested against). Double precision throughout.
//
// Storage as parki_fmm: an expansion of order p is p^2 coefficients, (n, m) at n^2 + n + m, in
// the orthonormal scaling with eq. (35)'s box scaling (multipoles a_n / h^n, locals b_n h^n);
// a box holds nc expansions (one per harmonic density: 1 for Laplace, 4 for the Stokeslet) of
// p^2 each. Boxes are described by `cent` (x, y, z of the centre and the edge h, 4 doubles) and
// `span` (begin, end, first child, children: 4 u32).
//
// - fmm_p2m: a block per source leaf: threads are (column m, point group), each runs the
//   regular harmonics' recursion (seed 001 eq. (15)) down its column for its points.
// - fmm_m2m, fmm_l2l: a block per parent (M2M: the children's multipoles into it) or per child
//   (L2L: its parent's local into it), one launch per level.
// - fmm_m2l: a block per target box, its M2L entries one after the other (no atomics; every
//   target's sum is the block's): rotate t onto +z (z then y), coaxial S|R, rotate back, each
//   step over the coefficients with the block's threads; fmm_m2l_thread (orders up to 16): the
//   same launch with a thread per translation, the block's sums by shared atomics.
// Both run the same per-entry helpers (fmm_rotate_z_pair, fmm_rotate_y_entry,
// fmm_coaxial_entry), in parallel over a translation's entries or serially in one thread.
// - fmm_l2p: a thread per target (flat over the targets): potential and gradient from the
//   leaf's local expansion, the gradient by the paper's sparse differentiation (§3.4) in gather
//   form; the Stokeslet's four harmonic potentials combined as parki_fmm's L2P.
// - fmm_p2p: a thread per target, a block per piece of a leaf, the sources of the leaf's near
//   list staged in shared memory; fmm_p2p_global: a thread per target (flat), the sources read
//   from global memory (for small leaves).
//
// The translations (M2M, M2L, L2L) run on two block-visible work vectors of p^2 doubles: in
// dynamic shared memory when they fit (the host passes scratch = 0), else in global scratch at
// scratch + 2 p^2 blockIdx.x; the kernels loop over their items with a stride of gridDim.x.

#define FMM_MAX_P 64
#define FMM_BLOCK 128
#define FMM_M2M 0
#define FMM_M2L 1
#define FMM_L2L 2

// The scalars every FMM kernel takes (crates/gpu/src/fmm.rs, `FmmArgs`).
struct FmmParams {
  int p;          // expansion order
  int nc;         // harmonic densities per box
  int kernel;     // 0 Laplace, 1 Stokeslet (L2P, P2P)
  int gradient;   // Laplace: whether the gradient is computed (L2P, P2P)
  u32 items;      // work items of the launch
  u32 rstride;    // doubles per y rotation
  u32 cstride;    // doubles per coaxial operator (the three are stored M2M, M2L, L2L)
  double origin[3];  // the Stokeslet's centre c (L2P)
};

__device__ __forceinline__ int fmm_degree(int i) {
  int n = (int)sqrt((double)i);
  while (n * n > i) --n;
  while ((n + 1) * (n + 1) <= i) ++n;
  return n;
}

// The geometry of a translation `op` from the box of centre and edge cfrom to that of cto
// (parki_fmm::evaluate's geometry and translate's scaling of eq. (35)): g[0], g[1] = cos, sin of
// the azimuth of t = c_to - c_from; g[2], g[3], g[4] = x_in, x_out and the prefactor of the
// powers pin[n] = x_in^n, pout[n] = pre x_out^n.
__device__ __forceinline__ void fmm_geometry(int op, const double* cfrom, const double* cto, double* g) {
  const double tx = cto[0] - cfrom[0], ty = cto[1] - cfrom[1], tz = cto[2] - cfrom[2];
  const double rho = hypot(tx, ty);
  g[0] = 1.0;
  g[1] = 0.0;
  if (rho > 0.0) {
    g[0] = tx / rho;
    g[1] = ty / rho;
  }
  const double t = sqrt(rho * rho + tz * tz);
  const double hin = cfrom[3], hout = cto[3];
  if (op == FMM_M2L) {
    g[2] = hin / t;
    g[3] = hout / t;
    g[4] = 1.0 / t;
  } else if (op == FMM_M2M) {
    g[2] = hin / t;
    g[3] = t / hout;
    g[4] = 1.0;
  } else {
    g[2] = t / hin;
    g[3] = hout / t;
    g[4] = 1.0;
  }
}

// The tables of a geometry (fmm_geometry) for q degrees: cs[2m], cs[2m+1] = cos, sin of
// m (-alpha) (parki_fmm::rotation::angle_table_from(cos a, -sin a)), pin[n], pout[n].
__device__ __forceinline__ void fmm_fill_tables(const double* g, int q, double* cs, double* pin, double* pout) {
  const double c1 = g[0], s1 = -g[1];
  double c = 1.0, s = 0.0, u = 1.0, v = g[4];
  for (int m = 0; m < q; ++m) {
    cs[2 * m] = c;
    cs[2 * m + 1] = s;
    const double cn = c * c1 - s * s1;
    s = s * c1 + c * s1;
    c = cn;
    pin[m] = u;
    pout[m] = v;
    u *= g[2];
    v *= g[3];
  }
}

// The geometry's tables, by thread 0 into shared memory (the block's translations read them).
__device__ __forceinline__ void fmm_tables(int op, int q, const double* cfrom, const double* cto, double* cs,
                                           double* pin, double* pout) {
  if (threadIdx.x != 0) return;
  double g[5];
  fmm_geometry(op, cfrom, cto, g);
  fmm_fill_tables(g, q, cs, pin, pout);
}

// Entry (n, m) (n >= 1) of W_n(R_y)^T in (transpose) or W_n(R_y) in, with the rotation's
// blocks w and their per-degree offsets yoff (parki_fmm::rotation::YRotation::apply).
__device__ __forceinline__ double fmm_rotate_y_entry(const double* w, const u32* yoff, int n, int m, int transpose,
                                                     const double* in) {
  const int c0 = n * n + n, e = n + 1;
  const u32 base = yoff[n];
  double acc = 0.0;
  if (m >= 0) {
    const double* line = w + base + (transpose ? 0 : e * e) + m;
    for (int j = 0; j <= n; ++j) acc = fma(line[j * e], in[c0 + j], acc);
  } else {
    const double* line = w + base + 2 * e * e + (transpose ? 0 : n * n) + (-m - 1);
    for (int j = 0; j < n; ++j) acc = fma(line[j * n], in[c0 - 1 - j], acc);
  }
  return acc;
}

// Entry (n, m) of the scaled coaxial product of b (q degrees): pout[n] sum_n' K_(n, n') pin[n']
// b_(n', m), K the unit matrix of `op` (per k = |m| at coff[k], (p - k)^2 entries by columns; S|S
// lower and R|R upper triangular, their zeros skipped).
__device__ __forceinline__ double fmm_coaxial_entry(int op, int p, int q, int n, int m, const double* b,
                                                    const double* pin, const double* pout, const double* coax,
                                                    const u32* coff) {
  const int k = m < 0 ? -m : m;
  const int d = p - k, r = n - k, cnt = q - k;
  const double* col = coax + coff[k];
  int j0 = 0, j1 = cnt;
  if (op == FMM_M2M) j1 = r + 1;
  if (op == FMM_L2L) j0 = r;
  double s = 0.0;
  for (int j = j0; j < j1; ++j) {
    const int np = k + j;
    s = fma(col[j * d + r], b[np * np + np + m] * pin[np], s);
  }
  return s * pout[n];
}

// The pair (m, -m) (k = m >= 1) of degree n's coefficients rotated about z: W(R_z)^T
// (transpose) or W(R_z) with cs of fmm_fill_tables; out may be in.
__device__ __forceinline__ void fmm_rotate_z_pair(const double* cs, int n, int k, int transpose, const double* in,
                                                  double* out, int add) {
  const int c0 = n * n + n;
  const double c = cs[2 * k], s = transpose ? -cs[2 * k + 1] : cs[2 * k + 1];
  const double vp = in[c0 + k], vm = in[c0 - k];
  const double rp = fma(c, vp, s * vm), rm = fma(c, vm, -s * vp);
  if (add) {
    out[c0 + k] += rp;
    out[c0 - k] += rm;
  } else {
    out[c0 + k] = rp;
    out[c0 - k] = rm;
  }
}

// out = W(R_y)^T in (transpose) or W(R_y) in, degrees < q, over the threads of the block.
__device__ __forceinline__ void fmm_rotate_y(const double* w, const u32* yoff, int q, int transpose,
                                             const double* in, double* out) {
  const int nq = q * q;
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int n = fmm_degree(i);
    out[i] = n == 0 ? in[0] : fmm_rotate_y_entry(w, yoff, n, i - n * n - n, transpose, in);
  }
}

// One translation `op` of the first q degrees of `in` added into `acc` (both block-visible),
// with the tables of fmm_tables, the y rotation w, the unit coaxial matrix `coax` of the op
// (per k at coff[k], (p - k)^2 entries by columns) and the work vectors a, b. Every thread of
// the block calls it; it ends with a barrier.
__device__ void fmm_translate(int op, int p, int q, const double* in, double* acc, double* a, double* b,
                              const double* cs, const double* pin, const double* pout, const double* w,
                              const u32* yoff, const double* coax, const u32* coff) {
  const int nq = q * q;
  // a = W(R_z(-alpha))^T in: the pairs (m, -m)
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int n = fmm_degree(i);
    const int k = i - n * n - n;
    if (k == 0) a[i] = in[i];
    if (k > 0) fmm_rotate_z_pair(cs, n, k, 1, in, a, 0);
  }
  __syncthreads();
  fmm_rotate_y(w, yoff, q, 1, a, b);
  __syncthreads();
  // a = the scaled coaxial product of b
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int n = fmm_degree(i);
    a[i] = fmm_coaxial_entry(op, p, q, n, i - n * n - n, b, pin, pout, coax, coff);
  }
  __syncthreads();
  fmm_rotate_y(w, yoff, q, 0, a, b);
  __syncthreads();
  // acc += W(R_z(-alpha)) b
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int n = fmm_degree(i);
    const int k = i - n * n - n;
    if (k == 0) acc[i] += b[i];
    if (k > 0) fmm_rotate_z_pair(cs, n, k, 0, b, acc, 1);
  }
  __syncthreads();
}

// The two work vectors of a block: dynamic shared memory, or global scratch.
__device__ __forceinline__ double* fmm_work(double* scratch, int p) {
  if (scratch == 0) {
    PARKI_DYNAMIC_SHARED(double, sh);
    return sh;
  }
  return scratch + (u64)blockIdx.x * 2 * p * p;
}

// M2M of one level: block item `parents[i]`'s multipole += its children's, translated.
__device__ void fmm_m2m_impl(FmmParams P, const u32* parents, const double* cent, const u32* span,
                             double* multipoles, const double* yrot, const u32* yoff, const double* coax,
                             const u32* coff, double* scratch) {
  __shared__ double cs[2 * FMM_MAX_P], pin[FMM_MAX_P], pout[FMM_MAX_P];
  const int p = P.p, p2 = p * p;
  double* a = fmm_work(scratch, p);
  double* b = a + p2;
  const u64 bs = (u64)P.nc * p2;
  const double* op = coax + (u64)FMM_M2M * P.cstride;
  for (u32 it = blockIdx.x; it < P.items; it += gridDim.x) {
    const u32 pb = parents[it];
    const u32 c0 = span[4 * pb + 2], nch = span[4 * pb + 3];
    for (u32 ch = c0; ch < c0 + nch; ++ch) {
      const double* from = cent + 4 * (u64)ch;
      const double* to = cent + 4 * (u64)pb;
      const u32 r = to[2] > from[2] ? 0 : 1;  // updown: [up, down]
      fmm_tables(FMM_M2M, p, from, to, cs, pin, pout);
      __syncthreads();
      for (int c = 0; c < P.nc; ++c)
        fmm_translate(FMM_M2M, p, p, multipoles + ch * bs + c * p2, multipoles + pb * bs + c * p2, a, b, cs, pin,
                      pout, yrot + (u64)r * P.rstride, yoff, op, coff);
    }
  }
}
PARKI_EXPORT_SYNC(fmm_m2m,
                  (FmmParams P, const u32* parents, const double* cent, const u32* span, double* multipoles,
                   const double* yrot, const u32* yoff, const double* coax, const u32* coff, double* scratch),
                  fmm_m2m_impl(P, parents, cent, span, multipoles, yrot, yoff, coax, coff, scratch))

// L2L of one level (boxes first .. first + P.items, breadth first): block item i's box first + i
// has its local += its parent's, translated.
__device__ void fmm_l2l_impl(FmmParams P, u32 first, const u32* parent, const double* cent, double* locals,
                             const double* yrot, const u32* yoff, const double* coax, const u32* coff,
                             double* scratch) {
  __shared__ double cs[2 * FMM_MAX_P], pin[FMM_MAX_P], pout[FMM_MAX_P];
  const int p = P.p, p2 = p * p;
  double* a = fmm_work(scratch, p);
  double* b = a + p2;
  const u64 bs = (u64)P.nc * p2;
  const double* op = coax + (u64)FMM_L2L * P.cstride;
  for (u32 it = blockIdx.x; it < P.items; it += gridDim.x) {
    const u32 tb = first + it, pb = parent[tb];
    const double* from = cent + 4 * (u64)pb;
    const double* to = cent + 4 * (u64)tb;
    const u32 r = to[2] > from[2] ? 0 : 1;  // updown: [up, down]
    fmm_tables(FMM_L2L, p, from, to, cs, pin, pout);
    __syncthreads();
    for (int c = 0; c < P.nc; ++c)
      fmm_translate(FMM_L2L, p, p, locals + pb * bs + c * p2, locals + tb * bs + c * p2, a, b, cs, pin, pout,
                    yrot + (u64)r * P.rstride, yoff, op, coff);
  }
}
PARKI_EXPORT_SYNC(fmm_l2l,
                  (FmmParams P, u32 first, const u32* parent, const double* cent, double* locals,
                   const double* yrot, const u32* yoff, const double* coax, const u32* coff, double* scratch),
                  fmm_l2l_impl(P, first, parent, cent, locals, yrot, yoff, coax, coff, scratch))

// M2L: block item i is target box targets[i]; its entries moff[tb]..moff[tb+1] of `entries`
// (source box, polar angle's rotation, order q: 3 u32 each) one after the other.
__device__ void fmm_m2l_impl(FmmParams P, const u32* targets, const u32* moff, const u32* entries,
                             const double* tcent, const double* scent, const double* multipoles, double* locals,
                             const double* yrot, const u32* yoff, const double* coax, const u32* coff,
                             double* scratch) {
  __shared__ double cs[2 * FMM_MAX_P], pin[FMM_MAX_P], pout[FMM_MAX_P];
  const int p = P.p, p2 = p * p;
  double* a = fmm_work(scratch, p);
  double* b = a + p2;
  const u64 bs = (u64)P.nc * p2;
  const double* op = coax + (u64)FMM_M2L * P.cstride;
  for (u32 it = blockIdx.x; it < P.items; it += gridDim.x) {
    const u32 tb = targets[it];
    for (u32 e = moff[tb]; e < moff[tb + 1]; ++e) {
      const u32 sb = entries[3 * e], r = entries[3 * e + 1];
      const int q = (int)entries[3 * e + 2];
      fmm_tables(FMM_M2L, q, scent + 4 * (u64)sb, tcent + 4 * (u64)tb, cs, pin, pout);
      __syncthreads();
      for (int c = 0; c < P.nc; ++c)
        fmm_translate(FMM_M2L, p, q, multipoles + sb * bs + c * p2, locals + tb * bs + c * p2, a, b, cs, pin, pout,
                      yrot + (u64)r * P.rstride, yoff, op, coff);
    }
  }
}
PARKI_EXPORT_SYNC(fmm_m2l,
                  (FmmParams P, const u32* targets, const u32* moff, const u32* entries, const double* tcent,
                   const double* scent, const double* multipoles, double* locals, const double* yrot,
                   const u32* yoff, const double* coax, const u32* coff, double* scratch),
                  fmm_m2l_impl(P, targets, moff, entries, tcent, scent, multipoles, locals, yrot, yoff, coax, coff,
                               scratch))

// P2M: block item i is source leaf leaves[i]; thread (g, col) with col = m + p - 1 (2p - 1
// columns) and g its point group (G = blockDim.x / (2p - 1) groups) runs its column's recursion
// for the leaf's points g, g + G, ..., accumulating q_c R~_n^m for one density c at a time; the
// groups then add their sums into the leaf's multipoles one after the other (weights
// p2m[n^2 + n + m]).
// R~_k^k + i R~_k^-k = (-(x - i y) / 2)^k / k! (the diagonal recursion), then
// R~_{k+1}^m = -z R~_k^m and R~_n^m = -((2n-1) z R~_{n-1}^m + r^2 R~_{n-2}^m) / ((n-k)(n+k)).
__device__ void fmm_p2m_impl(FmmParams P, const u32* leaves, const double* cent, const u32* span, const double* x,
                             const double* y, const double* z, const double* q, u32 stride, const double* p2m,
                             double* multipoles) {
  const int p = P.p, p2 = p * p, nc = P.nc;
  const int cols = 2 * p - 1;
  const int groups = (int)blockDim.x / cols;
  const int g = (int)threadIdx.x / cols, col = (int)threadIdx.x % cols;
  const int m = col - (p - 1), k = m < 0 ? -m : m;
  const bool active = g < groups;
  const u64 bs = (u64)nc * p2;
  for (u32 it = blockIdx.x; it < P.items; it += gridDim.x) {
    const u32 lb = leaves[it];
    const double* c = cent + 4 * (u64)lb;
    const double inv = 1.0 / c[3];
    const u32 j0 = span[4 * lb], j1 = span[4 * lb + 1];
    // one density at a time (the harmonics recomputed for each): a thread's sums are p
    // doubles, not nc p (up to 2 KB a thread in local memory, where the Stokeslet's four
    // densities at p 28 took 0.21 s against Laplace's 0.014 s at p 24 on an H200)
    for (int a = 0; a < nc; ++a) {
      double acc[FMM_MAX_P];
      for (int n = k; n < p; ++n) acc[n] = 0.0;
      if (active) {
        for (u32 j = j0 + (u32)g; j < j1; j += (u32)groups) {
          const double ux = (x[j] - c[0]) * inv, uy = (y[j] - c[1]) * inv, uz = (z[j] - c[2]) * inv;
          const double r2 = fma(ux, ux, fma(uy, uy, uz * uz));
          // the diagonal (k, +-k)
          double re = 1.0, im = 0.0;
          for (int l = 1; l <= k; ++l) {
            const double s = 1.0 / (2 * l);
            const double nre = -fma(ux, re, uy * im) * s;
            const double nim = fma(uy, re, -ux * im) * s;
            re = nre;
            im = nim;
          }
          const double r0 = m < 0 ? im : re;
          const double qa = q[(u64)a * stride + j];
          acc[k] = fma(qa, r0, acc[k]);
          if (k + 1 < p) {
            double rm2 = r0, rm1 = -uz * r0;
            acc[k + 1] = fma(qa, rm1, acc[k + 1]);
            for (int n = k + 2; n < p; ++n) {
              const double cf = 1.0 / (double)((n - k) * (n + k));
              const double v = -fma((double)(2 * n - 1) * uz, rm1, r2 * rm2) * cf;
              acc[n] = fma(qa, v, acc[n]);
              rm2 = rm1;
              rm1 = v;
            }
          }
        }
      }
      for (int gg = 0; gg < groups; ++gg) {
        __syncthreads();
        if (active && g == gg)
          for (int n = k; n < p; ++n) {
            const int i = n * n + n + m;
            multipoles[lb * bs + (u64)a * p2 + i] = fma(p2m[i], acc[n], multipoles[lb * bs + (u64)a * p2 + i]);
          }
      }
      __syncthreads();
    }
  }
}
PARKI_EXPORT_SYNC(fmm_p2m,
                  (FmmParams P, const u32* leaves, const double* cent, const u32* span, const double* x,
                   const double* y, const double* z, const double* q, u32 stride, const double* p2m,
                   double* multipoles),
                  fmm_p2m_impl(P, leaves, cent, span, x, y, z, q, stride, p2m, multipoles))

// The gradient's coefficient (n, m) (n <= p - 2) of sum_n D_n^m R~_n^m on axes 0, 1, 2, from the
// degree n + 1 row: D(m') = row[m'] lrow[m'] (local times l2p, pointers at m' = 0; every m' read
// has |m'| <= |m| + 1 <= n + 1): parki_fmm::basis::gradient_coefficients in gather form.
__device__ __forceinline__ void fmm_grad_coeff(const double* row, const double* lrow, int m, double* g) {
#define FMM_D(j) (row[(j)] * lrow[(j)])
  g[2] = -FMM_D(m);
  if (m >= 2) {
    g[0] = 0.5 * (FMM_D(m - 1) - FMM_D(m + 1));
    g[1] = 0.5 * (FMM_D(-(m - 1)) + FMM_D(-(m + 1)));
  } else if (m == 1) {
    g[0] = FMM_D(0) - 0.5 * FMM_D(2);
    g[1] = 0.5 * FMM_D(-2);
  } else if (m == 0) {
    g[0] = -0.5 * FMM_D(1);
    g[1] = 0.5 * FMM_D(-1);
  } else if (m == -1) {
    g[0] = -0.5 * FMM_D(-2);
    g[1] = -FMM_D(0) - 0.5 * FMM_D(2);
  } else {
    const int k = -m;
    g[0] = 0.5 * (FMM_D(m + 1) - FMM_D(m - 1));
    g[1] = -0.5 * (FMM_D(k - 1) + FMM_D(k + 1));
  }
#undef FMM_D
}

// The local expansion `local` (weights l2p) of a box at u = (y - c) / h: phi and, with `grad`,
// grad_u phi (the caller divides by h) into out[0..4]. A thread's whole work, in registers: the
// columns m = 0, 1, -1, 2, -2, ... each by the recursion of fmm_p2m.
__device__ void fmm_local_at(const double* local, const double* l2p, int p, double ux, double uy, double uz,
                             int grad, double* out) {
  const double r2 = fma(ux, ux, fma(uy, uy, uz * uz));
  double phi = 0.0, gx = 0.0, gy = 0.0, gz = 0.0;
  double re = 1.0, im = 0.0;
  for (int k = 0; k < p; ++k) {
    if (k > 0) {
      const double s = 1.0 / (2 * k);
      const double nre = -fma(ux, re, uy * im) * s;
      const double nim = fma(uy, re, -ux * im) * s;
      re = nre;
      im = nim;
    }
    for (int sg = 0; sg < (k == 0 ? 1 : 2); ++sg) {
      const int m = sg == 0 ? k : -k;
      double rm2 = 0.0, rm1 = 0.0;
      for (int n = k; n < p; ++n) {
        double v;
        if (n == k) {
          v = sg == 0 ? re : im;
        } else if (n == k + 1) {
          v = -uz * rm1;
        } else {
          const double cf = 1.0 / (double)((n - k) * (n + k));
          v = -fma((double)(2 * n - 1) * uz, rm1, r2 * rm2) * cf;
        }
        rm2 = rm1;
        rm1 = v;
        const int c0 = n * n + n;
        phi = fma(local[c0 + m] * l2p[c0 + m], v, phi);
        if (grad && n + 1 < p) {
          const int c1 = (n + 1) * (n + 1) + (n + 1);
          double g[3];
          fmm_grad_coeff(local + c1, l2p + c1, m, g);
          gx = fma(g[0], v, gx);
          gy = fma(g[1], v, gy);
          gz = fma(g[2], v, gz);
        }
      }
    }
  }
  out[0] = phi;
  out[1] = gx;
  out[2] = gy;
  out[3] = gz;
}

// L2P: a thread per target j < P.items (grid-stride), its leaf box tleaf[j]; values (4 per
// target, tree order) written: Laplace [phi, grad phi] (gradient zero unless asked), Stokeslet
// u_i = sum_k (phi_k - (y - c)_k d_i phi_k) + d_i psi with the four harmonic potentials phi_0..2
// and psi (parki_fmm::evaluate's L2P). Flat over the targets, so small leaves fill the blocks.
__device__ void fmm_l2p_impl(FmmParams P, const u32* tleaf, const double* cent, const double* x, const double* y,
                             const double* z, const double* locals, const double* l2p, double* values) {
  const int p = P.p, p2 = p * p;
  const u64 bs = (u64)P.nc * p2;
  for (u64 j = global_thread(); j < P.items; j += (u64)gridDim.x * blockDim.x) {
    const u32 lb = tleaf[j];
    const double* c = cent + 4 * (u64)lb;
    const double h = c[3], inv = 1.0 / h;
    const double ux = (x[j] - c[0]) * inv, uy = (y[j] - c[1]) * inv, uz = (z[j] - c[2]) * inv;
    double* out = values + 4 * j;
    const double* local = locals + lb * bs;
    double r[4];
    if (P.kernel == 0) {
      fmm_local_at(local, l2p, p, ux, uy, uz, P.gradient, r);
      out[0] = r[0];
      out[1] = P.gradient ? r[1] * inv : 0.0;
      out[2] = P.gradient ? r[2] * inv : 0.0;
      out[3] = P.gradient ? r[3] * inv : 0.0;
    } else {
      double u[3] = {0.0, 0.0, 0.0};
      const double yc[3] = {x[j] - P.origin[0], y[j] - P.origin[1], z[j] - P.origin[2]};
      for (int comp = 0; comp < 4; ++comp) {
        fmm_local_at(local + (u64)comp * p2, l2p, p, ux, uy, uz, 1, r);
        const double gr[3] = {r[1] * inv, r[2] * inv, r[3] * inv};
        if (comp < 3) {
          u[comp] += r[0];
          for (int i = 0; i < 3; ++i) u[i] -= yc[comp] * gr[i];
        } else {
          for (int i = 0; i < 3; ++i) u[i] += gr[i];
        }
      }
      out[0] = u[0];
      out[1] = u[1];
      out[2] = u[2];
      out[3] = 0.0;
    }
  }
}
PARKI_EXPORT(fmm_l2p,
             (FmmParams P, const u32* tleaf, const double* cent, const double* x, const double* y, const double* z,
              const double* locals, const double* l2p, double* values),
             fmm_l2p_impl(P, tleaf, cent, x, y, z, locals, l2p, values))

// One source's contribution to a target's accumulators (d = y - x): Laplace phi += q / r,
// grad += -q d / r^3; Stokeslet u += f / r + (f . d) d / r^3; nothing at r = 0.
__device__ __forceinline__ void fmm_pair(bool stokes, double dx, double dy, double dz, double q0, double q1,
                                         double q2, double* acc) {
  const double r2 = fma(dx, dx, fma(dy, dy, dz * dz));
  if (r2 == 0.0) return;
  const double ri = 1.0 / sqrt(r2);
  if (!stokes) {
    const double qr = q0 * ri;
    acc[0] += qr;
    const double w = -qr * ri * ri;
    acc[1] = fma(w, dx, acc[1]);
    acc[2] = fma(w, dy, acc[2]);
    acc[3] = fma(w, dz, acc[3]);
  } else {
    const double fd = fma(q0, dx, fma(q1, dy, q2 * dz)) * ri * ri * ri;
    acc[0] += fma(q0, ri, fd * dx);
    acc[1] += fma(q1, ri, fd * dy);
    acc[2] += fma(q2, ri, fd * dz);
  }
}

// Adds a target's near-field sums into its values (the gradient only when asked).
__device__ __forceinline__ void fmm_add_near(const FmmParams& P, const double* acc, double* out) {
  out[0] += acc[0];
  if (P.kernel != 0 || P.gradient) {
    out[1] += acc[1];
    out[2] += acc[2];
    out[3] += P.kernel != 0 ? 0.0 : acc[3];
  }
}

// P2P, a thread per target j < P.items (grid-stride), sources read from global memory (the
// threads of a leaf read the same source at once): the leaf tleaf[j]'s near list
// poff[leaf]..poff[leaf + 1] of `near` (source leaves of the side, particles
// sspan[4 s]..sspan[4 s + 1]). For small leaves, where a block per leaf would idle.
__device__ void fmm_p2p_global_impl(FmmParams P, const u32* tleaf, const u32* poff, const u32* near,
                                    const u32* sspan, const double* tx, const double* ty, const double* tz,
                                    const double* sx, const double* sy, const double* sz, const double* q0,
                                    const double* q1, const double* q2, double* values) {
  const bool stokes = P.kernel != 0;
  for (u64 j = global_thread(); j < P.items; j += (u64)gridDim.x * blockDim.x) {
    const u32 lb = tleaf[j];
    const double yx = tx[j], yy = ty[j], yz = tz[j];
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (u32 e = poff[lb]; e < poff[lb + 1]; ++e) {
      const u32 sb = near[e];
      for (u32 k = sspan[4 * sb]; k < sspan[4 * sb + 1]; ++k)
        fmm_pair(stokes, yx - sx[k], yy - sy[k], yz - sz[k], q0[k], stokes ? q1[k] : 0.0, stokes ? q2[k] : 0.0,
                 acc);
    }
    fmm_add_near(P, acc, values + 4 * j);
  }
}
PARKI_EXPORT(fmm_p2p_global,
             (FmmParams P, const u32* tleaf, const u32* poff, const u32* near, const u32* sspan, const double* tx,
              const double* ty, const double* tz, const double* sx, const double* sy, const double* sz,
              const double* q0, const double* q1, const double* q2, double* values),
             fmm_p2p_global_impl(P, tleaf, poff, near, sspan, tx, ty, tz, sx, sy, sz, q0, q1, q2, values))

// P2P: block item i is a piece (leaf box, begin, end) of at most blockDim.x targets, a thread per
// target; the leaf's near list poff[leaf]..poff[leaf + 1] of `near` (source leaves of the side,
// whose particles are sspan[4 s]..sspan[4 s + 1]) staged through shared memory in tiles of
// blockDim.x sources. Laplace: phi += q / r, grad += -q d / r^3; Stokeslet: u += f / r +
// (f . d) d / r^3 (d = y - x); pairs at r = 0 skipped. Added into the values.
__device__ void fmm_p2p_impl(FmmParams P, const u32* pieces, const u32* poff, const u32* near, const u32* sspan,
                             const double* tx, const double* ty, const double* tz, const double* sx,
                             const double* sy, const double* sz, const double* q0, const double* q1,
                             const double* q2, double* values) {
  __shared__ double s[6][FMM_BLOCK];
  const bool stokes = P.kernel != 0;
  for (u32 it = blockIdx.x; it < P.items; it += gridDim.x) {
    const u32 lb = pieces[3 * it], j = pieces[3 * it + 1] + threadIdx.x;
    const bool active = j < pieces[3 * it + 2];
    const double yx = active ? tx[j] : 0.0, yy = active ? ty[j] : 0.0, yz = active ? tz[j] : 0.0;
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (u32 e = poff[lb]; e < poff[lb + 1]; ++e) {
      const u32 sb = near[e];
      const u32 b0 = sspan[4 * sb], b1 = sspan[4 * sb + 1];
      for (u32 t0 = b0; t0 < b1; t0 += blockDim.x) {
        const u32 len = b1 - t0 < blockDim.x ? b1 - t0 : blockDim.x;
        __syncthreads();
        if (threadIdx.x < len) {
          const u32 k = t0 + threadIdx.x;
          s[0][threadIdx.x] = sx[k];
          s[1][threadIdx.x] = sy[k];
          s[2][threadIdx.x] = sz[k];
          s[3][threadIdx.x] = q0[k];
          s[4][threadIdx.x] = stokes ? q1[k] : 0.0;
          s[5][threadIdx.x] = stokes ? q2[k] : 0.0;
        }
        __syncthreads();
        if (active)
          for (u32 l = 0; l < len; ++l)
            fmm_pair(stokes, yx - s[0][l], yy - s[1][l], yz - s[2][l], s[3][l], s[4][l], s[5][l], acc);
      }
    }
    if (active) fmm_add_near(P, acc, values + 4 * (u64)j);
  }
}
PARKI_EXPORT_SYNC(fmm_p2p,
                  (FmmParams P, const u32* pieces, const u32* poff, const u32* near, const u32* sspan,
                   const double* tx, const double* ty, const double* tz, const double* sx, const double* sy,
                   const double* sz, const double* q0, const double* q1, const double* q2, double* values),
                  fmm_p2p_impl(P, pieces, poff, near, sspan, tx, ty, tz, sx, sy, sz, q0, q1, q2, values))

// ---- M2L with a thread per translation (orders up to FMM_THREAD_P) ----
//
// At low orders a translation has too few coefficients (p^2 = 64 at p = 8) to occupy a block,
// and the block variant's five barriers per translation dominate. Here every thread of a block
// runs whole translations of the block's target box in its own memory (the entries t, t +
// blockDim.x, ...), summing them privately; the block then adds the threads' sums into shared
// memory by atomics and the box's locals once (the order of those additions varies: results
// agree with the block variant's to rounding, not bitwise).

#define FMM_THREAD_P 16

// One translation of the first q degrees of `in` added into `acc`, by one thread: the same
// operations as fmm_translate (and parki_fmm::translate's translate_body), serially.
__device__ void fmm_translate_serial(int op, int p, int q, const double* in, double* acc, double* a, double* b,
                                     const double* cfrom, const double* cto, const double* w, const u32* yoff,
                                     const double* coax, const u32* coff) {
  double cs[2 * FMM_THREAD_P], pin[FMM_THREAD_P], pout[FMM_THREAD_P], g[5];
  fmm_geometry(op, cfrom, cto, g);
  fmm_fill_tables(g, q, cs, pin, pout);
  for (int n = 0; n < q; ++n) {
    const int c0 = n * n + n;
    a[c0] = in[c0];
    for (int k = 1; k <= n; ++k) fmm_rotate_z_pair(cs, n, k, 1, in, a, 0);
  }
  b[0] = a[0];
  for (int n = 1; n < q; ++n)
    for (int m = -n; m <= n; ++m) b[n * n + n + m] = fmm_rotate_y_entry(w, yoff, n, m, 1, a);
  for (int n = 0; n < q; ++n)
    for (int m = -n; m <= n; ++m) a[n * n + n + m] = fmm_coaxial_entry(op, p, q, n, m, b, pin, pout, coax, coff);
  b[0] = a[0];
  for (int n = 1; n < q; ++n)
    for (int m = -n; m <= n; ++m) b[n * n + n + m] = fmm_rotate_y_entry(w, yoff, n, m, 0, a);
  for (int n = 0; n < q; ++n) {
    const int c0 = n * n + n;
    acc[c0] += b[c0];
    for (int k = 1; k <= n; ++k) fmm_rotate_z_pair(cs, n, k, 0, b, acc, 1);
  }
}

// M2L, a thread per translation: block item i is target box targets[i] (as fmm_m2l); P.p <= TP,
// the thread's three work vectors TP^2 doubles each (TP = 8, 12 or 16 by the order, so that a
// low order keeps a small frame). Static shared memory: the block's sums, p^2 doubles.
template <int TP>
__device__ void fmm_m2l_thread_impl(FmmParams P, const u32* targets, const u32* moff, const u32* entries,
                                    const double* tcent, const double* scent, const double* multipoles,
                                    double* locals, const double* yrot, const u32* yoff, const double* coax,
                                    const u32* coff) {
  __shared__ double sum[FMM_THREAD_P * FMM_THREAD_P];
  const int p = P.p, p2 = p * p;
  const u64 bs = (u64)P.nc * p2;
  const double* op = coax + (u64)FMM_M2L * P.cstride;
  double a[TP * TP], b[TP * TP], acc[TP * TP];
  for (u32 it = blockIdx.x; it < P.items; it += gridDim.x) {
    const u32 tb = targets[it];
    const u32 e0 = moff[tb], e1 = moff[tb + 1];
    for (int c = 0; c < P.nc; ++c) {
      for (int i = 0; i < p2; ++i) acc[i] = 0.0;
      for (u32 e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
        const u32 sb = entries[3 * e], r = entries[3 * e + 1];
        const int q = (int)entries[3 * e + 2];
        fmm_translate_serial(FMM_M2L, p, q, multipoles + sb * bs + c * p2, acc, a, b, scent + 4 * (u64)sb,
                             tcent + 4 * (u64)tb, yrot + (u64)r * P.rstride, yoff, op, coff);
      }
      // the block's sums in shared memory (each thread starting at its own coefficient, so that
      // the atomics of one moment hit different addresses), then into the box's locals
      double* out = locals + tb * bs + (u64)c * p2;
      for (int i = threadIdx.x; i < p2; i += blockDim.x) sum[i] = 0.0;
      __syncthreads();
      for (int j = 0; j < p2; ++j) {
        const int i = ((int)threadIdx.x + j) % p2;
        if (acc[i] != 0.0) atomicAdd(&sum[i], acc[i]);
      }
      __syncthreads();
      for (int i = threadIdx.x; i < p2; i += blockDim.x) out[i] += sum[i];
      __syncthreads();
    }
  }
}
__device__ void fmm_m2l_thread_any(FmmParams P, const u32* targets, const u32* moff, const u32* entries,
                                   const double* tcent, const double* scent, const double* multipoles,
                                   double* locals, const double* yrot, const u32* yoff, const double* coax,
                                   const u32* coff) {
  if (P.p <= 8)
    fmm_m2l_thread_impl<8>(P, targets, moff, entries, tcent, scent, multipoles, locals, yrot, yoff, coax, coff);
  else if (P.p <= 12)
    fmm_m2l_thread_impl<12>(P, targets, moff, entries, tcent, scent, multipoles, locals, yrot, yoff, coax, coff);
  else
    fmm_m2l_thread_impl<FMM_THREAD_P>(P, targets, moff, entries, tcent, scent, multipoles, locals, yrot, yoff,
                                      coax, coff);
}
PARKI_EXPORT_SYNC(fmm_m2l_thread,
                  (FmmParams P, const u32* targets, const u32* moff, const u32* entries, const double* tcent,
                   const double* scent, const double* multipoles, double* locals, const double* yrot,
                   const u32* yoff, const double* coax, const u32* coff),
                  fmm_m2l_thread_any(P, targets, moff, entries, tcent, scent, multipoles, locals, yrot, yoff, coax,
                                     coff))
