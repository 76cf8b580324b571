//! The free-space (0P) kernel tables made by the ranks together.
//!
//! [`crate::free`] defines the table of a component on the three free half grids as
//! `T = [R2R_N o restrict_{M_ext} o R2R_Nup] f` (DCT-I or DST-I along each axis by the
//! component's parity). Both transforms and the restriction to the box `|n| < M_ext` are products
//! over the axes, so
//!
//! `T = (A_z (x) A_y (x) A_x) f`, `A_a = R2R_{N,a} o restrict_a o R2R_{Nup,a}`,
//!
//! one operator per axis that maps the axis's `n1` upsampled slots to its `n2` padded ones
//! (`n2` about `n1 / 1.45` in 0P). Applied axis by axis, the upsampled grid is never held whole,
//! and the work splits over the ranks:
//!
//! 1. *planes*: each rank takes an even share of the upsampled planes `j_z`, fills each with `f`
//!    and applies `A_y (x) A_x` (two 2-D transforms, the planes on the solver's threads), keeping
//!    `n2_y x n2_x` values per plane;
//! 2. *lines*: one all-to-all gives each rank the whole lines along `z` of its share of `y`;
//!    batched 1-D transforms apply `A_z`;
//! 3. *gather*: each rank receives the entries of its block of the evaluation's spectrum (its
//!    stored slots, [`crate::fold`]: along `y` and `z` the distinct `min(j, N - j)`), for
//!    every component, from the ranks whose lines hold them: mirrored into the half grids (slot
//!    `j > N/2` reads `N - j`, odd tables with the sign flipped), and read from the
//!    representative with the axes permuted for the components that are images of another
//!    (see `symmetry_images` in [`crate::free`]). Owner and receiver enumerate the same entries
//!    in the same order from the blocks (gathered once), so no index travels.
//!
//! Work and memory per rank fall as `1/ranks` up to the count of planes (`n1_z`) and of lines
//! (`n2_y`); on one rank the steps run the same with local copies. The per-axis transforms do
//! the work of the 3-D ones (`(n1^2 + n1 n2 + n2^2)` lines of both lengths against `3 n1^2`
//! and `3 n2^2`), and a rank's memory is `n1_z n2_y n2_x / ranks` per representative instead of
//! the whole upsampled grid per transformed component.

use std::ops::Range;

use parki_comm::Comm;
use parki_core::{Par, Real, Result};
use parki_decomp::split_range;
use parki_fft3d::{LocalR2r, R2rKind};
use rayon::prelude::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator, ParallelSliceMut};

use crate::fold::{fold_block, AxisFold};
use crate::free::{AxisModes, Component, FreeGrid};
use crate::truncated::{truncated, ModeBessel, Scalar};

/// What the 0P tables are made of (see [`crate::free::FreeCnv::new`]).
pub(crate) struct Spec<'a> {
    /// The kernel's components.
    pub comps: &'a [Component],
    /// Per component, the representative whose table gives it and the permutation of the axes
    /// (component axis `a` reads the representative's axis `perm[a]`).
    pub images: &'a [(usize, [usize; 3])],
    /// The grid.
    pub free: &'a FreeGrid,
    /// Per axis, the wave numbers of the upsampled half grid.
    pub up: &'a [AxisModes],
    /// Per axis, `e^{-k_a^2/4 xi^2} / W^(k_a h)^2` on the upsampled half grid.
    pub sw: &'a [Vec<f64>],
    /// `1 / (4 xi^2)`.
    pub inv4xi2: f64,
    /// `prod_d (1/N_up,d) / V_h`.
    pub scale: f64,
}

/// A representative's half grids along each axis.
#[derive(Clone, Copy, Debug)]
struct Axes {
    odd: [bool; 3],
    /// Upsampled slots (the first transform's length); slot `i` is wave number index
    /// `j = i + shift`.
    n1: [usize; 3],
    shift: [usize; 3],
    /// Samples kept, `|n| < M_ext` (`M_ext` on even axes, `M_ext - 1` on odd ones).
    kept: [usize; 3],
    /// Padded slots (the second transform's length).
    n2: [usize; 3],
}

impl Axes {
    fn new(c: &Component, free: &FreeGrid) -> Self {
        let odd = [0, 1, 2].map(|d| c.poly.odd(d));
        let slots = |half: usize, o: bool| if o { half - 1 } else { half + 1 };
        Self {
            odd,
            n1: [0, 1, 2].map(|d| slots(free.upsampled[d] / 2, odd[d])),
            shift: odd.map(usize::from),
            kept: [0, 1, 2].map(|d| free.data[d] - usize::from(odd[d])),
            n2: [0, 1, 2].map(|d| slots(free.fft_len[d] / 2, odd[d])),
        }
    }

    fn kind(&self, d: usize) -> R2rKind {
        if self.odd[d] {
            R2rKind::Dst1
        } else {
            R2rKind::Dct1
        }
    }

    /// The slots `i_z` of the upsampled planes `j_z` in `planes`.
    fn planes_of(&self, planes: Range<usize>) -> Range<usize> {
        let (s, n) = (self.shift[2], self.n1[2]);
        let lo = planes.start.max(s) - s;
        let hi = planes.end.min(s + n).max(s) - s;
        lo..hi.max(lo)
    }
}

/// The tables of every component on this rank's `block` (`[(start, count)]` per axis of the
/// padded grid's spectrum, `x` the half axis), on its stored slots ([`fold_block`]), written to
/// `tables[c * elements + e]` with `e = (s_z n_y + s_y) n_x + s_x` (`s` the stored slots, `n`
/// their counts; entries that vanish are left as they are: zero).
///
/// Collective over `comm`: every rank calls it with its own block.
///
/// # Errors
/// When FFTW cannot plan a transform.
pub(crate) fn tables<T: Real>(
    spec: &Spec<'_>,
    comm: &Comm,
    block: [(usize, usize); 3],
    par: Par,
    tables: &mut [T],
) -> Result<()> {
    let reps: Vec<usize> = (0..spec.comps.len()).filter(|&c| spec.images[c].0 == c).collect();
    let axes: Vec<Axes> = reps.iter().map(|&r| Axes::new(&spec.comps[r], spec.free)).collect();
    let (rank, size) = (comm.rank(), comm.size());
    let planes_up = spec.free.upsampled[2] / 2 + 1;
    let mine = split_range(planes_up, size, rank);
    let slabs = planes(spec, &reps, &axes, mine, par)?;
    let mut lines_of = Vec::with_capacity(reps.len());
    // each representative's planes leave memory as its lines are made
    for (ax, slab) in axes.iter().zip(slabs) {
        lines_of.push(lines(comm, ax, slab, planes_up, par)?);
    }
    gather(spec, comm, &reps, &axes, &lines_of, block, tables);
    Ok(())
}

/// Step 1: the planes `j_z` of `mine`, for every representative the plane
/// `i_z = j_z - shift_z` (where it exists) after `A_y (x) A_x`: per representative its slab of
/// planes in order of `i_z`, `n2_y x n2_x` values each, `x` fastest.
fn planes(spec: &Spec<'_>, reps: &[usize], axes: &[Axes], mine: Range<usize>, par: Par) -> Result<Vec<Vec<f64>>> {
    let free = spec.free;
    let plan2 = |ax: &Axes, n: [usize; 3]| LocalR2r::<f64>::new(&[n[1], n[0]], &[ax.kind(1), ax.kind(0)]);
    let mut plans = Vec::with_capacity(axes.len());
    for ax in axes {
        plans.push((plan2(ax, ax.n1)?, plan2(ax, ax.n2)?));
    }
    let up_x = free.upsampled[0] / 2 + 1;
    let up_y = free.upsampled[1] / 2 + 1;
    let need = |s: Scalar| reps.iter().any(|&r| spec.comps[r].scalar == s);
    let (need_h, need_b) = (need(Scalar::Harmonic), need(Scalar::Biharmonic));
    let bessel = ModeBessel::new(0.0);
    let radius = free.radius;
    // the scalar kernel of `|k|^2` (times Hasimoto's factor for the biharmonic one)
    let kernel_of = |which: Scalar, k2: f64| -> f64 {
        let t = truncated(which, 3, 0.0, k2.sqrt(), radius, bessel);
        match which {
            Scalar::Harmonic => t,
            Scalar::Biharmonic => t * (1.0 + k2 * spec.inv4xi2),
        }
    };
    // With one wave-number step `dk` on every axis (a cube's grids) `|k|^2 = dk^2 m`, `m` an
    // integer up to the sum of the squared half lengths: the radial kernels are tabulated per
    // `m` once instead of per upsampled point (a cosine each).
    let steps: Vec<f64> = spec.up.iter().map(|m| m.k.get(1).copied().unwrap_or(0.0)).collect();
    let same_step = steps.iter().all(|&d| d > 0.0 && (d - steps[0]).abs() <= 1e-14 * steps[0]);
    let radial = |which: Scalar| -> Vec<f64> {
        if !same_step {
            return Vec::new();
        }
        let top: usize = spec.up.iter().map(|m| (m.k.len() - 1).pow(2)).sum();
        let dk2 = steps[0] * steps[0];
        let one = |m: usize| kernel_of(which, dk2 * m as f64);
        match par {
            Par::Seq => (0..=top).map(one).collect(),
            Par::Rayon(_) => (0..=top).into_par_iter().map(one).collect(),
        }
    };
    let radial_h = if need_h { radial(Scalar::Harmonic) } else { Vec::new() };
    let radial_b = if need_b { radial(Scalar::Biharmonic) } else { Vec::new() };
    // this rank's planes of every representative, one contiguous slab each (freed whole)
    let plane_len = |ax: &Axes| ax.n2[0] * ax.n2[1];
    let mut slabs: Vec<Vec<f64>> =
        axes.iter().map(|ax| vec![0.0; ax.planes_of(mine.clone()).len() * plane_len(ax)]).collect();
    let mut per_plane: Vec<Vec<Option<&mut [f64]>>> =
        mine.clone().map(|_| (0..axes.len()).map(|_| None).collect()).collect();
    for (q, (ax, slab)) in axes.iter().zip(slabs.iter_mut()).enumerate() {
        let lo = ax.planes_of(mine.clone()).start;
        for (k, plane) in slab.chunks_exact_mut(plane_len(ax)).enumerate() {
            per_plane[lo + k + ax.shift[2] - mine.start][q] = Some(plane);
        }
    }
    let most = |f: &dyn Fn(&Axes) -> usize| axes.iter().map(f).max().unwrap_or(0);
    let scratch = || Scratch {
        s_h: vec![0.0; if need_h { up_y * up_x } else { 0 }],
        s_b: vec![0.0; if need_b { up_y * up_x } else { 0 }],
        a: vec![0.0; most(&|ax| ax.n1[0] * ax.n1[1])],
    };
    let work = |w: &mut Scratch, (k, outs): (usize, Vec<Option<&mut [f64]>>)| {
        let jz = mine.start + k;
        let kz = spec.up[2].k[jz];
        let swz = spec.sw[2][jz];
        // the scalar kernels times screening and window on the plane, [j_y][j_x]
        let scalar = |which: Scalar, s: &mut [f64]| {
            let table = match which {
                Scalar::Harmonic => &radial_h,
                Scalar::Biharmonic => &radial_b,
            };
            for (jy, row) in s.chunks_exact_mut(up_x).enumerate() {
                let (ky, gy) = (spec.up[1].k[jy], spec.sw[1][jy] * swz);
                let myz = jy * jy + jz * jz;
                for (jx, v) in row.iter_mut().enumerate() {
                    let g = gy * spec.sw[0][jx];
                    *v = if g == 0.0 {
                        0.0
                    } else if same_step {
                        g * table[jx * jx + myz]
                    } else {
                        let kx = spec.up[0].k[jx];
                        g * kernel_of(which, kx * kx + ky * ky + kz * kz)
                    };
                }
            }
        };
        if need_h {
            scalar(Scalar::Harmonic, &mut w.s_h);
        }
        if need_b {
            scalar(Scalar::Biharmonic, &mut w.s_b);
        }
        for (((&r, ax), (p1, p2)), out) in reps.iter().zip(axes).zip(&plans).zip(outs) {
            let Some(b) = out else { continue };
            let c = &spec.comps[r];
            let base = match c.scalar {
                Scalar::Harmonic => &w.s_h,
                Scalar::Biharmonic => &w.s_b,
            };
            let [n1x, n1y, _] = ax.n1;
            let a = &mut w.a[..n1y * n1x];
            for (iy, row) in a.chunks_exact_mut(n1x).enumerate() {
                let jy = iy + ax.shift[1];
                for (ix, v) in row.iter_mut().enumerate() {
                    let jx = ix + ax.shift[0];
                    let k = [spec.up[0].k[jx], spec.up[1].k[jy], kz];
                    *v = c.poly.eval(k) * base[jy * up_x + jx];
                }
            }
            p1.execute(a);
            // restricted to the kept samples, zero-padded (the slab starts zeroed)
            let n2x = ax.n2[0];
            let kx = ax.kept[0].min(n2x);
            for (dst, src) in b.chunks_exact_mut(n2x).zip(a.chunks_exact(n1x)).take(ax.kept[1]) {
                dst[..kx].copy_from_slice(&src[..kx]);
            }
            p2.execute(b);
        }
    };
    match par {
        Par::Seq => {
            let mut w = scratch();
            per_plane.into_iter().enumerate().for_each(|x| work(&mut w, x));
        }
        Par::Rayon(_) => per_plane.into_par_iter().enumerate().for_each_init(scratch, work),
    }
    Ok(slabs)
}

/// One thread's plane buffers in [`planes`].
struct Scratch {
    /// The harmonic and the biharmonic kernel on the plane.
    s_h: Vec<f64>,
    s_b: Vec<f64>,
    /// A representative's upsampled plane.
    a: Vec<f64>,
}

/// Step 2: this rank's share of the rows `y` (of `n2_y`), every `x`, the whole lines along `z`
/// after `A_z`: `[y - y0][x][z]`, `z` fastest. `slab` holds this rank's planes `i_z` in order
/// (its share of the `planes_up` upsampled planes), `n2_y x n2_x` values each.
fn lines(comm: &Comm, ax: &Axes, slab: Vec<f64>, planes_up: usize, par: Par) -> Result<Vec<f64>> {
    let (rank, size) = (comm.rank(), comm.size());
    let [n2x, n2y, n2z] = ax.n2;
    let n1z = ax.n1[2];
    let rows = |s: usize| split_range(n2y, size, s);
    let planes_of = |s: usize| ax.planes_of(split_range(planes_up, size, s));
    let planes = slab.len() / (n2x * n2y);
    let send = if size == 1 {
        slab
    } else {
        let mut send = Vec::with_capacity(slab.len());
        for s in 0..size {
            let y = rows(s);
            for plane in slab.chunks_exact(n2x * n2y) {
                send.extend_from_slice(&plane[y.start * n2x..y.end * n2x]);
            }
        }
        send
    };
    let send_counts: Vec<usize> = (0..size).map(|s| planes * rows(s).len() * n2x).collect();
    let yc = rows(rank).len();
    let recv_counts: Vec<usize> = (0..size).map(|r| planes_of(r).len() * yc * n2x).collect();
    let recv = if size == 1 {
        send
    } else {
        let mut recv = vec![0.0; recv_counts.iter().sum()];
        comm.alltoallv_known(&send, &send_counts, &mut recv, &recv_counts);
        recv
    };
    let count = yc * n2x;
    if count == 0 {
        return Ok(Vec::new());
    }
    // [y][x][i_z], the upsampled planes of every rank in place: the received data hold
    // the planes of rank 0, then rank 1, ... in order of i_z, which tile 0..n1_z
    let mut lines = vec![0.0; count * n1z];
    let fill = |(line, out): (usize, &mut [f64])| {
        for (iz, v) in out.iter_mut().enumerate() {
            *v = recv[iz * count + line];
        }
    };
    match par {
        Par::Seq => lines.chunks_mut(n1z).enumerate().for_each(fill),
        Par::Rayon(_) => lines.par_chunks_mut(n1z).enumerate().for_each(fill),
    }
    drop(recv);
    let threads = match par {
        Par::Seq => 1,
        Par::Rayon(t) => t.max(1),
    };
    LocalR2r::<f64>::batch(n1z, ax.kind(2), count, threads)?.execute(&mut lines);
    let mut out = vec![0.0; count * n2z];
    let kz = ax.kept[2].min(n2z);
    for (dst, src) in out.chunks_exact_mut(n2z).zip(lines.chunks_exact(n1z)) {
        dst[..kz].copy_from_slice(&src[..kz]);
    }
    drop(lines);
    LocalR2r::<f64>::batch(n2z, ax.kind(2), count, threads)?.execute(&mut out);
    Ok(out)
}

/// The slots of a block's stored slots along one axis (global `slots[l]`) that hold a table
/// entry: `(stored slot l, index in the half grid, sign)`. Slot `j > N/2` reads `N - j` (odd
/// tables negated); an odd table's index is `j - 1` and it vanishes at `j = 0` and at the
/// Nyquist slot, which are left out (the circular convolution is exact only with every mode,
/// so an even table keeps its Nyquist slot).
fn entries(slots: &[usize], n: usize, odd: bool) -> Vec<(usize, usize, f64)> {
    slots
        .iter()
        .enumerate()
        .filter_map(|(l, &j)| {
            let (jm, neg) = if j <= n / 2 { (j, false) } else { (n - j, true) };
            if !odd {
                Some((l, jm, 1.0))
            } else if jm == 0 || 2 * jm == n {
                None
            } else {
                Some((l, jm - 1, if neg { -1.0 } else { 1.0 }))
            }
        })
        .collect()
}

/// The entries of component `c` on a (folded) block that the rank holding rows `rows` of its
/// representative's lines has, per component axis: `(stored slot, offset in the lines, sign)`.
fn owned(
    spec: &Spec<'_>,
    c: usize,
    ax: &Axes,
    block: &[AxisFold; 3],
    rows: Range<usize>,
) -> [Vec<(usize, isize, f64)>; 3] {
    let (_, perm) = spec.images[c];
    let stride = [ax.n2[2], ax.n2[0] * ax.n2[2], 1];
    std::array::from_fn(|d| {
        let a = perm[d];
        entries(block[d].stored(), spec.free.fft_len[d], spec.comps[c].poly.odd(d))
            .into_iter()
            .filter(|&(_, i, _)| a != 1 || rows.contains(&i))
            .map(|(l, i, s)| {
                let i = if a == 1 { i - rows.start } else { i };
                (l, (i * stride[a]) as isize, s)
            })
            .collect()
    })
}

/// A component's entries on a block held by one owner, per axis (see [`owned`]).
type Lists = [Vec<(usize, isize, f64)>; 3];

/// The entries of one plane `(offset, sign)` along `z` of `l`, `y` then `x` (`x` fastest),
/// times `scale`, from the representative's lines `t`.
fn plane_values<'a>(l: &'a Lists, (oz, sz): (isize, f64), t: &'a [f64], scale: f64) -> impl Iterator<Item = f64> + 'a {
    l[1].iter().flat_map(move |&(_, oy, sy)| {
        let (o, s) = (oz + oy, scale * sz * sy);
        l[0].iter().map(move |&(_, ox, sx)| s * sx * t[(o + ox) as usize])
    })
}

/// Step 3: every rank's block of every component, from the ranks holding the lines; this
/// rank's own entries written straight from its lines, the planes of a component in parallel.
fn gather<T: Real>(
    spec: &Spec<'_>,
    comm: &Comm,
    reps: &[usize],
    axes: &[Axes],
    lines: &[Vec<f64>],
    block: [(usize, usize); 3],
    tables: &mut [T],
) {
    let (rank, size) = (comm.rank(), comm.size());
    let mine: [u64; 6] = [block[0].0, block[0].1, block[1].0, block[1].1, block[2].0, block[2].1].map(|v| v as u64);
    let all = comm.all_gather(&mine);
    // every rank's block as its tables store it
    let folds: Vec<[AxisFold; 3]> = (0..size)
        .map(|q| {
            let b = &all[6 * q..6 * q + 6];
            let ranges =
                [(b[0] as usize, b[1] as usize), (b[2] as usize, b[3] as usize), (b[4] as usize, b[5] as usize)];
            fold_block(ranges, spec.free.fft_len)
        })
        .collect();
    let rep_of = |c: usize| reps.iter().position(|&r| r == spec.images[c].0).expect("a representative");
    let own = &folds[rank];
    let (xl, yl) = (own[0].len(), own[1].len());
    let elements = xl * yl * own[2].len();
    let plane = |l: &Lists| l[0].len() * l[1].len();
    // one component at a time: the messages hold at most one table's worth
    for c in 0..spec.comps.len() {
        let (ax, t) = (&axes[rep_of(c)], &lines[rep_of(c)]);
        // the entries of `q`'s block that rank `s` holds
        let lists = |q: usize, s: usize| owned(spec, c, ax, &folds[q], split_range(ax.n2[1], size, s));
        let to: Vec<Option<Lists>> = (0..size).map(|q| (q != rank).then(|| lists(q, rank))).collect();
        let send_counts: Vec<usize> = to.iter().map(|l| l.as_ref().map_or(0, |l| plane(l) * l[2].len())).collect();
        let mut send = vec![0.0; send_counts.iter().sum()];
        let mut rest = &mut send[..];
        for l in to.iter().flatten() {
            let (region, tail) = std::mem::take(&mut rest).split_at_mut(plane(l) * l[2].len());
            rest = tail;
            region.par_chunks_mut(plane(l).max(1)).zip(&l[2]).for_each(|(out, &(_, oz, sz))| {
                for (o, v) in out.iter_mut().zip(plane_values(l, (oz, sz), t, spec.scale)) {
                    *o = v;
                }
            });
        }
        let from: Vec<Lists> = (0..size).map(|s| lists(rank, s)).collect();
        let recv_counts: Vec<usize> =
            from.iter().enumerate().map(|(s, l)| if s == rank { 0 } else { plane(l) * l[2].len() }).collect();
        let mut recv = vec![0.0; recv_counts.iter().sum()];
        comm.alltoallv_known(&send, &send_counts, &mut recv, &recv_counts);
        drop(send);
        let table = &mut tables[c * elements..(c + 1) * elements];
        let mut at = 0;
        for (s, l) in from.iter().enumerate() {
            // the planes of `l[2]`: their place in the received data (or this rank's lines)
            let mut slot = vec![None; own[2].len()];
            for (p, &(lz, oz, sz)) in l[2].iter().enumerate() {
                slot[lz] = Some((p, oz, sz));
            }
            let received = &recv[at..];
            table.par_chunks_mut((xl * yl).max(1)).zip(slot).for_each(|(out, slot)| {
                let Some((p, oz, sz)) = slot else { return };
                let put = |out: &mut [T], values: &mut dyn Iterator<Item = f64>| {
                    for &(ly, _, _) in &l[1] {
                        for &(lx, _, _) in &l[0] {
                            out[ly * xl + lx] = T::from_f64(values.next().expect("as many entries as counted"));
                        }
                    }
                };
                if s == rank {
                    put(out, &mut plane_values(l, (oz, sz), t, spec.scale));
                } else {
                    put(out, &mut received[p * plane(l)..(p + 1) * plane(l)].iter().copied());
                }
            });
            at += recv_counts[s];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{entries, Axes};
    use parki_decomp::split_range;

    /// Every rank count, more ranks than planes included: each rank's share of the upsampled
    /// planes maps to representative slots that tile `0..n1` (the counts both ends of the
    /// all-to-alls compute agree).
    #[test]
    fn shares_tile_the_planes() {
        for parts in 1..=9 {
            for (odd, n1, up_half) in [(false, 9usize, 8usize), (true, 7, 8)] {
                let ax = Axes { odd: [odd; 3], n1: [n1; 3], shift: [usize::from(odd); 3], kept: [1; 3], n2: [1; 3] };
                let mut next = 0;
                for i in 0..parts {
                    let slots = ax.planes_of(split_range(up_half + 1, parts, i));
                    if !slots.is_empty() {
                        assert_eq!(slots.start, next, "odd {odd}, {parts} parts");
                    }
                    next += slots.len();
                }
                assert_eq!(next, n1, "odd {odd}, {parts} parts");
            }
        }
    }

    /// The mirror: an even table reads `min(j, N - j)` everywhere, Nyquist included; an odd one
    /// `j - 1` with the sign of `j`'s side, and nothing at `0` and the Nyquist slot.
    #[test]
    fn entries_mirror_the_half_grid() {
        let n = 8;
        let all: Vec<usize> = (0..n).collect();
        let even = entries(&all, n, false);
        assert_eq!(even.iter().map(|e| e.1).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 3, 2, 1]);
        let odd = entries(&all, n, true);
        assert_eq!(
            odd.iter().map(|e| (e.0, e.1, e.2)).collect::<Vec<_>>(),
            [(1, 0, 1.0), (2, 1, 1.0), (3, 2, 1.0), (5, 2, -1.0), (6, 1, -1.0), (7, 0, -1.0)]
        );
        // a block's stored slots: local slots from 0
        assert_eq!(entries(&[5, 6], n, true).iter().map(|e| e.0).collect::<Vec<_>>(), [0, 1]);
    }
}
