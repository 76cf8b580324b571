// The BLDTT treecode on the device (crates/gpu/src/treecode.rs drives it; parki_treecode's host
// code has the formulas and is what these kernels are tested against). Double precision.
//
// - tc_lists: the four interaction lists (BLDTT paper eqs. (6), (8), (12), (15)) of one source
//   side in one launch, a block per work item. Items are pieces of the target leaves (PP and
//   PC: their particles, values into `out`) and of the target clusters that CP and CC reach
//   (their proxies, computed from the cluster's nodes, values into `pot`). Each has two lists of
//   source blocks, particles (PP, CP) and proxies (PC, CC), staged through shared memory in
//   tiles of blockDim.x sources.
// - tc_anterpolate: leaves' proxy charges, eq. (9), a block per leaf.
// - tc_upward_level: parents' proxy charges from their children, eq. (16), the tensor-factored
//   operator one axis at a time (3 (n + 1)^4 multiply-adds per child and component).
// - tc_downward_level: the transpose, eq. (20), parents' proxy potentials to their children.
// - tc_interpolate: leaves' proxy potentials at their targets, eq. (21).
// - tc_proxy_soa: the proxies of the used source clusters as points with densities (the layout
//   tc_lists reads), from the upward pass's charges on the device.
//
// Proxy k of a cluster is k1 + m (k2 + m k3) with m = n + 1 (x fastest); a cluster's nodes are
// 3 m values (axis-major), its charges or potentials m^3 blocks of `nd` or `nv` values.
// Particles and proxies as sources: x, y, z and densities component-major (q[c * stride + j]).

#define TC_COULOMB 0
#define TC_YUKAWA 1
#define TC_REG_COULOMB 2
#define TC_REG_YUKAWA 3
#define TC_SIN_OVER_R 4
#define TC_STOKESLET 5
#define TC_STRESSLET 6
#define TC_STOKES 7
#define TC_DENSITY(K) ((K) <= TC_SIN_OVER_R ? 1 : (K) == TC_STOKESLET ? 3 : (K) == TC_STRESSLET ? 6 : 9)
#define TC_VALUE(K) ((K) <= TC_SIN_OVER_R ? 1 : 3)
// Largest m = n + 1 (degree 16, parki_treecode::evaluate::MAX_DEGREE).
#define TC_MAX_M 17
#define TC_MIN_POSITIVE 2.2250738585072014e-308
// tc_lists' item kind: a piece of a target leaf.
#define TC_LEAF 0xFFFFFFFFu

// The barycentric Lagrange basis at x on the m nodes s (parki_treecode::cheb::lagrange, eq. (3)
// with the weights of eq. (5)): the Kronecker delta on an exact hit or a degenerate axis.
__device__ __forceinline__ void tc_basis(const double* s, int m, int degenerate, double x, double* out) {
  if (degenerate || m == 1) {
    for (int k = 0; k < m; ++k) out[k] = 0.0;
    out[0] = 1.0;
    return;
  }
  double denom = 0.0;
  for (int k = 0; k < m; ++k) {
    double d = x - s[k];
    if (fabs(d) < TC_MIN_POSITIVE) {
      for (int j = 0; j < m; ++j) out[j] = 0.0;
      out[k] = 1.0;
      return;
    }
    double w = (k == 0 || k == m - 1) ? 0.5 : 1.0;
    out[k] = ((k & 1) ? -w : w) / d;
    denom += out[k];
  }
  double inv = 1.0 / denom;
  for (int k = 0; k < m; ++k) out[k] *= inv;
}

// One source at displacement (dx, dy, dz) = target - source with densities q, added into acc
// (parki_treecode::kernel: the same formulas and self-term rules; p0, p1 the parameters:
// kappa, epsilon, wavenumber, or kappa and epsilon for the regularised Yukawa).
template <int K>
__device__ __forceinline__ void tc_pair(double p0, double p1, double dx, double dy, double dz, const double* q,
                                        double* acc) {
  double r2 = fma(dz, dz, fma(dy, dy, dx * dx));
  double ri = r2 > 0.0 ? 1.0 / sqrt(r2) : 0.0;  // the self term of the singular kernels
  if (K == TC_COULOMB) {
    acc[0] = fma(q[0], ri, acc[0]);
  } else if (K == TC_YUKAWA) {
    double e = exp(-p0 * r2 * ri);
    acc[0] = fma(q[0] * e, ri, acc[0]);
  } else if (K == TC_REG_COULOMB) {
    acc[0] = fma(q[0], 1.0 / sqrt(r2 + p0 * p0), acc[0]);
  } else if (K == TC_REG_YUKAWA) {
    double e = exp(-p0 * r2 * ri);
    acc[0] = fma(q[0] * e, 1.0 / sqrt(r2 + p1 * p1), acc[0]);
  } else if (K == TC_SIN_OVER_R) {
    double s = sin(p0 * r2 * ri);
    acc[0] = fma(q[0] * s, ri, acc[0]);
  } else {
    int off = 0;
    if (K == TC_STOKESLET || K == TC_STOKES) {
      double rf = dx * q[0] + dy * q[1] + dz * q[2];
      double c = rf * ri * ri * ri;
      acc[0] += fma(q[0], ri, c * dx);
      acc[1] += fma(q[1], ri, c * dy);
      acc[2] += fma(q[2], ri, c * dz);
      off = 3;
    }
    if (K == TC_STRESSLET || K == TC_STOKES) {
      const double* s = q + off;
      double ri2 = ri * ri;
      double diag = s[0] * dx * dx + s[1] * dy * dy + s[2] * dz * dz;
      double offd = s[3] * dx * dy + s[4] * dx * dz + s[5] * dy * dz;
      double c = -6.0 * fma(2.0, offd, diag) * ri2 * ri2 * ri;
      acc[0] = fma(c, dx, acc[0]);
      acc[1] = fma(c, dy, acc[1]);
      acc[2] = fma(c, dz, acc[2]);
    }
  }
}

// The list kernel's scalars (crates/gpu/src/treecode.rs, `ListParams`).
struct TcListParams {
  double p0, p1;
  int kernel;
  int m;
  u32 np;       // m^3
  u32 pstride;  // particles of the source side (their densities' component stride)
  u32 xstride;  // proxies of the source side
};

// Adds the sources of blocks e0..e1 of `ranges` (pairs begin, end into x, y, z, q) at the
// target (tx, ty, tz) into acc; `tile` holds blockDim.x * (3 + ND) doubles. Every thread of the
// block calls it with the same blocks (its barriers are uniform); `active` ones accumulate.
template <int K>
__device__ __forceinline__ void tc_side(const TcListParams& P, double* tile, u32 e0, u32 e1, const u32* ranges,
                                        const double* x, const double* y, const double* z, const double* q,
                                        u32 stride, bool active, double tx, double ty, double tz, double* acc) {
  constexpr int ND = TC_DENSITY(K);
  const u32 bs = blockDim.x;
  for (u32 e = e0; e < e1; ++e) {
    const u32 j0 = ranges[2 * e], j1 = ranges[2 * e + 1];
    for (u32 jb = j0; jb < j1; jb += bs) {
      const u32 j = jb + threadIdx.x;
      __syncthreads();
      if (j < j1) {
        tile[threadIdx.x] = x[j];
        tile[bs + threadIdx.x] = y[j];
        tile[2 * bs + threadIdx.x] = z[j];
        for (int c = 0; c < ND; ++c) tile[(3 + c) * bs + threadIdx.x] = q[(u64)c * stride + j];
      }
      __syncthreads();
      const u32 len = j1 - jb < bs ? j1 - jb : bs;
      if (active) {
        for (u32 l = 0; l < len; ++l) {
          double s[ND];
          for (int c = 0; c < ND; ++c) s[c] = tile[(3 + c) * bs + l];
          tc_pair<K>(P.p0, P.p1, tx - tile[l], ty - tile[bs + l], tz - tile[2 * bs + l], s, acc);
        }
      }
    }
  }
}

template <int K>
__device__ void tc_lists_k(TcListParams P, const u32* item, const double* tx, const double* ty, const double* tz,
                           const double* tnodes, const u32* poff, const u32* pranges, const double* px,
                           const double* py, const double* pz, const double* pq, const u32* xoff,
                           const u32* xranges, const double* xx, const double* xy, const double* xz,
                           const double* xq, double* out, double* pot) {
  PARKI_DYNAMIC_SHARED(double, tile);
  constexpr int NV = TC_VALUE(K);
  const u32* it = item + 4 * (u64)blockIdx.x;
  const u32 c = it[0], b = it[1], e = it[2], row = it[3];
  const u32 bs = blockDim.x;
  const bool leaf = c == TC_LEAF;
  const int m = P.m;
  const double* nodes = leaf ? tnodes : tnodes + (u64)c * 3 * m;
  double* o = leaf ? out : pot + (u64)c * P.np * NV;
  for (u32 tb = b; tb < e; tb += bs) {
    const u32 t = tb + threadIdx.x;
    const bool active = t < e;
    double x = 0.0, y = 0.0, z = 0.0;
    if (active) {
      if (leaf) {
        x = tx[t];
        y = ty[t];
        z = tz[t];
      } else {
        x = nodes[t % m];
        y = nodes[m + (t / m) % m];
        z = nodes[2 * m + t / (m * m)];
      }
    }
    double acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = 0.0;
    tc_side<K>(P, tile, poff[row], poff[row + 1], pranges, px, py, pz, pq, P.pstride, active, x, y, z, acc);
    tc_side<K>(P, tile, xoff[row], xoff[row + 1], xranges, xx, xy, xz, xq, P.xstride, active, x, y, z, acc);
    if (active)
      for (int v = 0; v < NV; ++v) o[(u64)t * NV + v] += acc[v];
  }
}

template <int K>
struct TcLists {
  static __device__ void run(TcListParams P, const u32* item, const double* tx, const double* ty, const double* tz,
                             const double* tnodes, const u32* poff, const u32* pranges, const double* px,
                             const double* py, const double* pz, const double* pq, const u32* xoff,
                             const u32* xranges, const double* xx, const double* xy, const double* xz,
                             const double* xq, double* out, double* pot) {
    tc_lists_k<K>(P, item, tx, ty, tz, tnodes, poff, pranges, px, py, pz, pq, xoff, xranges, xx, xy, xz, xq, out,
                  pot);
  }
};
// The kernel at compile time.
template <template <int> class F, typename... A>
__device__ __forceinline__ void tc_with_kernel(int kernel, A... a) {
  switch (kernel) {
    case TC_COULOMB: F<TC_COULOMB>::run(a...); return;
    case TC_YUKAWA: F<TC_YUKAWA>::run(a...); return;
    case TC_REG_COULOMB: F<TC_REG_COULOMB>::run(a...); return;
    case TC_REG_YUKAWA: F<TC_REG_YUKAWA>::run(a...); return;
    case TC_SIN_OVER_R: F<TC_SIN_OVER_R>::run(a...); return;
    case TC_STOKESLET: F<TC_STOKESLET>::run(a...); return;
    case TC_STRESSLET: F<TC_STRESSLET>::run(a...); return;
    default: F<TC_STOKES>::run(a...); return;
  }
}
// A block per item (gridDim.x items of four u32: [cluster, begin, end, row]): cluster TC_LEAF for
// a piece of a target leaf (targets begin..end in tree order, values into out), else proxies
// begin..end of that target cluster (values into its block of pot); row: the item's source
// blocks, poff[row]..poff[row + 1] of pranges and xoff[row]..xoff[row + 1] of xranges. Pieces of
// at most blockDim.x targets, so that the grid has blocks for every SM whatever the leaf size.
// Dynamic shared memory blockDim.x * (3 + nd) doubles.
PARKI_EXPORT_SYNC(tc_lists,
                  (TcListParams P, const u32* item, const double* tx, const double* ty, const double* tz,
                   const double* tnodes, const u32* poff, const u32* pranges, const double* px, const double* py,
                   const double* pz, const double* pq, const u32* xoff, const u32* xranges, const double* xx,
                   const double* xy, const double* xz, const double* xq, double* out, double* pot),
                  tc_with_kernel<TcLists>(P.kernel, P, item, tx, ty, tz, tnodes, poff, pranges, px, py, pz, pq, xoff,
                                          xranges, xx, xy, xz, xq, out, pot))

// The pass kernels' scalars (crates/gpu/src/treecode.rs, `PassParams`).
struct TcPassParams {
  int m;
  int nc;      // values per proxy: charge components (upward) or potential values (downward)
  u32 items;   // leaves or parents in this launch
  u32 stride;  // particles' density component stride (tc_anterpolate)
};

// Leaves' proxy charges, eq. (9): block b anterpolates leaf leaves[b]'s particles
// crange[2c]..crange[2c+1] (x, y, z, q) onto charges[c m^3 nc ..]. Dynamic shared memory
// blockDim.x / 4 particles' basis rows and densities: (blockDim.x / 4) (3 m + nc) doubles.
__device__ void tc_anterpolate_impl(TcPassParams P, const u32* leaves, const u32* crange, const double* nodes, const u32* degen,
                   const double* x, const double* y, const double* z, const double* q, double* charges) {
  PARKI_DYNAMIC_SHARED(double, sh);
  const int m = P.m, nc = P.nc;
  const u32 np = (u32)(m * m * m);
  const u32 bs = blockDim.x, tp = bs / 4;  // particles per tile
  double* basis = sh;                      // tp rows of 3 m
  double* qs = sh + tp * 3 * m;            // tp rows of nc
  const u32 c = leaves[blockIdx.x];
  const u32 j0 = crange[2 * c], j1 = crange[2 * c + 1];
  const double* nd = nodes + (u64)c * 3 * m;
  double* out = charges + (u64)c * np * nc;
  for (u32 kb = 0; kb < np; kb += bs) {
    const u32 k = kb + threadIdx.x;
    const bool active = k < np;
    const u32 k1 = k % m, k2 = (k / m) % m, k3 = k / (m * m);
    double acc[9];
    for (int a = 0; a < nc; ++a) acc[a] = 0.0;
    for (u32 jb = j0; jb < j1; jb += tp) {
      const u32 len = j1 - jb < tp ? j1 - jb : tp;
      __syncthreads();
      if (threadIdx.x < 3 * len) {
        const u32 l = threadIdx.x / 3, d = threadIdx.x % 3;
        const double* pos = d == 0 ? x : d == 1 ? y : z;
        tc_basis(nd + d * m, m, (int)degen[3 * c + d], pos[jb + l], basis + (l * 3 + d) * m);
      } else if (threadIdx.x >= 3 * tp && threadIdx.x - 3 * tp < len) {
        const u32 l = threadIdx.x - 3 * tp;
        for (int a = 0; a < nc; ++a) qs[l * nc + a] = q[(u64)a * P.stride + jb + l];
      }
      __syncthreads();
      if (active) {
        for (u32 l = 0; l < len; ++l) {
          const double* b = basis + l * 3 * m;
          double w = b[k1] * (b[m + k2] * b[2 * m + k3]);
          for (int a = 0; a < nc; ++a) acc[a] = fma(w, qs[l * nc + a], acc[a]);
        }
      }
    }
    if (active)
      for (int a = 0; a < nc; ++a) out[(u64)k * nc + a] = acc[a];
  }
}
PARKI_EXPORT_SYNC(tc_anterpolate, (TcPassParams P, const u32* leaves, const u32* crange, const double* nodes, const u32* degen,
                   const double* x, const double* y, const double* z, const double* q, double* charges), tc_anterpolate_impl(P, leaves, crange, nodes, degen, x, y, z, q, charges))

// The per-axis factors A_d[k][k'] = L^parent_k(s^child_{d,k'}) into shared `a` (3 m^2).
__device__ __forceinline__ void tc_transfer(const double* pnodes, const u32* pdegen, const double* cnodes, int m,
                                            double* a) {
  for (u32 i = threadIdx.x; i < (u32)(3 * m); i += blockDim.x) {
    const int d = (int)i / m, kp = (int)i % m;
    double b[TC_MAX_M];
    tc_basis(pnodes + d * m, m, (int)pdegen[d], cnodes[d * m + kp], b);
    for (int k = 0; k < m; ++k) a[d * m * m + k * m + kp] = b[k];
  }
}

// One child-parent pair's tensor-factored operator added into dst, one axis sweep at a time
// (3 m^4 nc multiply-adds): dst[k3][k2][k1][c] += sum A_z(k3, .) A_y(k2, .) A_x(k1, .) src, with
// A_d(i, j) = a[d m^2 + i m + j], the factors of tc_transfer (upward, eq. (16): src the child's
// charges, dst the parent's), or with `transpose` a[d m^2 + j m + i] (downward, eq. (20): src
// the parent's potentials, dst the child's). t1, t2: m^3 nc scratch each. Every thread of the
// block calls it (barriers between the sweeps).
__device__ void tc_factored(const double* a, int m, int nc, int transpose, const double* src, double* t1, double* t2,
                            double* dst) {
  const u32 block = (u32)(m * m * m * nc), row = (u32)(m * nc), plane = (u32)m * row;
  const int si = transpose ? 1 : m, sj = transpose ? m : 1;  // A(i, j) = a[i si + j sj]
  // x: t1[r][i][c] = sum_j A_x(i, j) src[r][j][c]
  for (u32 e = threadIdx.x; e < block; e += blockDim.x) {
    const u32 r = e / row, i = (e % row) / nc, c = e % nc;
    double s = 0.0;
    for (int j = 0; j < m; ++j) s = fma(a[i * si + j * sj], src[r * row + j * nc + c], s);
    t1[e] = s;
  }
  __syncthreads();
  // y: t2[k3][i][ii] = sum_j A_y(i, j) t1[k3][j][ii]
  for (u32 e = threadIdx.x; e < block; e += blockDim.x) {
    const u32 k3 = e / plane, i = (e % plane) / row, ii = e % row;
    double s = 0.0;
    for (int j = 0; j < m; ++j) s = fma(a[m * m + i * si + j * sj], t1[k3 * plane + j * row + ii], s);
    t2[e] = s;
  }
  __syncthreads();
  // z: dst[i][ii] += sum_j A_z(i, j) t2[j][ii]
  for (u32 e = threadIdx.x; e < block; e += blockDim.x) {
    const u32 i = e / plane, ii = e % plane;
    double s = dst[e];
    for (int j = 0; j < m; ++j) s = fma(a[2 * m * m + i * si + j * sj], t2[j * plane + ii], s);
    dst[e] = s;
  }
}

// One level of either pass: block b handles parents b, b + gridDim.x, ... of `parents` (a
// level's non-leaves, upward; its active non-leaves, downward), children
// child_off[i]..child_off[i+1] of `children`, `data` the charges (upward: each parent's block
// set to the sum over its children, eq. (16)) or the potentials (downward: each child's block
// plus the parent's, eq. (20)); `scratch` holds 2 m^3 nc doubles per block.
__device__ void tc_level_impl(TcPassParams P, int down, const u32* parents, const u32* child_off, const u32* children,
                              const double* nodes, const u32* degen, double* data, double* scratch) {
  __shared__ double a[3 * TC_MAX_M * TC_MAX_M];
  const int m = P.m, nc = P.nc;
  const u32 block = (u32)(m * m * m * nc);
  double* t1 = scratch + (u64)blockIdx.x * 2 * block;
  double* t2 = t1 + block;
  for (u32 i = blockIdx.x; i < P.items; i += gridDim.x) {
    const u32 c = parents[i];
    double* parent = data + (u64)c * block;
    if (!down) {
      __syncthreads();
      for (u32 e = threadIdx.x; e < block; e += blockDim.x) parent[e] = 0.0;
    }
    for (u32 h = child_off[i]; h < child_off[i + 1]; ++h) {
      const u32 ch = children[h];
      double* child = data + (u64)ch * block;
      __syncthreads();
      tc_transfer(nodes + (u64)c * 3 * m, degen + 3 * c, nodes + (u64)ch * 3 * m, m, a);
      __syncthreads();
      if (down)
        tc_factored(a, m, nc, 1, parent, t1, t2, child);
      else
        tc_factored(a, m, nc, 0, child, t1, t2, parent);
    }
  }
}

// Parents' proxy charges from their children, eq. (16), a level of the upward pass.
PARKI_EXPORT_SYNC(tc_upward_level,
                  (TcPassParams P, const u32* parents, const u32* child_off, const u32* children,
                   const double* nodes, const u32* degen, double* charges, double* scratch),
                  tc_level_impl(P, 0, parents, child_off, children, nodes, degen, charges, scratch))

// Parents' proxy potentials to their children, eq. (20), a level of the downward pass.
PARKI_EXPORT_SYNC(tc_downward_level,
                  (TcPassParams P, const u32* parents, const u32* child_off, const u32* children,
                   const double* nodes, const u32* degen, double* pot, double* scratch),
                  tc_level_impl(P, 1, parents, child_off, children, nodes, degen, pot, scratch))

// Leaves' proxy potentials at their targets, eq. (21): block b handles the piece
// pieces[3b..3b+3] = [leaf c, begin, end] (at most blockDim.x targets, tree order), a thread per
// target, values added into out (nv per target).
__device__ void tc_interpolate_impl(TcPassParams P, const u32* pieces, const double* nodes, const u32* degen,
                                    const double* x, const double* y, const double* z, const double* pot,
                                    double* out) {
  const int m = P.m, nv = P.nc;
  const u32 c = pieces[3 * blockIdx.x], j0 = pieces[3 * blockIdx.x + 1], j1 = pieces[3 * blockIdx.x + 2];
  const double* nd = nodes + (u64)c * 3 * m;
  const double* phi = pot + (u64)c * m * m * m * nv;
  for (u32 j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    double l[3][TC_MAX_M];
    tc_basis(nd, m, (int)degen[3 * c], x[j], l[0]);
    tc_basis(nd + m, m, (int)degen[3 * c + 1], y[j], l[1]);
    tc_basis(nd + 2 * m, m, (int)degen[3 * c + 2], z[j], l[2]);
    double acc[3] = {0.0, 0.0, 0.0};
    for (int k3 = 0; k3 < m; ++k3) {
      if (l[2][k3] == 0.0) continue;
      for (int k2 = 0; k2 < m; ++k2) {
        const double lyz = l[1][k2] * l[2][k3];
        if (lyz == 0.0) continue;
        const double* r = phi + (u64)(k3 * m + k2) * m * nv;
        for (int k1 = 0; k1 < m; ++k1) {
          const double w = l[0][k1] * lyz;
          for (int v = 0; v < nv; ++v) acc[v] = fma(w, r[k1 * nv + v], acc[v]);
        }
      }
    }
    for (int v = 0; v < nv; ++v) out[(u64)j * nv + v] += acc[v];
  }
}
PARKI_EXPORT(tc_interpolate,
             (TcPassParams P, const u32* pieces, const double* nodes, const u32* degen, const double* x,
              const double* y, const double* z, const double* pot, double* out),
             tc_interpolate_impl(P, pieces, nodes, degen, x, y, z, pot, out))

// The used source clusters' proxies as points (tc_lists' source layout): thread i = slot s
// (cluster used[s]) and proxy k, into x, y, z[i] and q[a * (items m^3) + i].
__device__ void tc_proxy_soa_impl(TcPassParams P, const u32* used, const double* nodes, const double* charges, double* x, double* y,
              double* z, double* q) {
  const int m = P.m, nc = P.nc;
  const u32 np = (u32)(m * m * m);
  const u64 i = global_thread();
  if (i >= (u64)P.items * np) return;
  const u32 s = (u32)(i / np), k = (u32)(i % np);
  const u32 c = used[s];
  const double* nd = nodes + (u64)c * 3 * m;
  x[i] = nd[k % m];
  y[i] = nd[m + (k / m) % m];
  z[i] = nd[2 * m + k / (m * m)];
  for (int a = 0; a < nc; ++a) q[(u64)a * P.items * np + i] = charges[((u64)c * np + k) * nc + a];
}
PARKI_EXPORT(tc_proxy_soa, (TcPassParams P, const u32* used, const double* nodes, const double* charges, double* x, double* y,
              double* z, double* q), tc_proxy_soa_impl(P, used, nodes, charges, x, y, z, q))
