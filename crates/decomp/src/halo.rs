//! [`HaloPlan`]: the rows of a rank's grid block and the ranks that own them in an evenly split
//! grid (the FFT's real-space topology).
//!
//! A particle method spreads its owned particles onto a *block*: the grid points their windows
//! cover, which reaches past the points the rank owns in the FFT's split. The reverse halo
//! exchange ([`HaloPlan::spread`]) adds every block row (a whole x-line) into its owner's row;
//! the forward ghost-grid exchange ([`HaloPlan::gather`]) copies the owners' rows back into
//! every block after the transform. Both are [`ExchangePlan`]s whose row lists are exchanged once
//! at plan time, so an execution sends only values.
//!
//! The plan only names rows; reading and writing them is the caller's (a backend's), through the
//! `pack`/`unpack` closures, so that grids may live in host or device memory. [`RowLayout`]
//! provides the host versions.

use std::ops::Range;

use parki_comm::{Backend, Comm, Dir, ExchangePlan, StageGuard};
use parki_core::{Real, StageName};

use crate::topology::{split_owner, ProcGrid};

/// How a grid block sits in the global periodic grid: along an axis with `wrap[d]` it holds the
/// whole axis, otherwise the unwrapped global points `origin[d] .. origin[d] + dims[d]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPlacement {
    /// Points per axis of the block (x is always whole).
    pub dims: [usize; 3],
    /// Unwrapped global index of the block's first point per axis.
    pub origin: [i64; 3],
    /// Whether the block holds the whole axis.
    pub wrap: [bool; 3],
}

/// The real-space split of the FFT grid: global size, process grid, this rank's y and z rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedRows {
    /// Global grid points.
    pub global: [usize; 3],
    /// The process grid over y and z.
    pub pgrid: ProcGrid,
    /// Owned y range.
    pub y: Range<usize>,
    /// Owned z range.
    pub z: Range<usize>,
}

/// Row addressing of a host grid: x-rows of `mx` reals, `row_stride` apart, components
/// `component_stride` apart; row `r` starts at `r * row_stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// Reals per row used (the whole x-line).
    pub mx: usize,
    /// Reals between consecutive rows.
    pub row_stride: usize,
    /// Reals between components.
    pub component_stride: usize,
}

impl RowLayout {
    /// The rows of `layout`'s padded real grid, components `real_len()` apart.
    pub fn padded(layout: &crate::GridLayout) -> Self {
        Self { mx: layout.global[0], row_stride: layout.row_stride(), component_stride: layout.real_len() }
    }

    /// Copies rows `rows` of components `0..comps` of `grid` into `buf` (`[c][row][x]`).
    pub fn pack<T: Copy>(&self, grid: &[T], rows: &[usize], comps: usize, buf: &mut [T]) {
        let mut k = 0;
        for c in 0..comps {
            for &r in rows {
                let at = c * self.component_stride + r * self.row_stride;
                buf[k..k + self.mx].copy_from_slice(&grid[at..at + self.mx]);
                k += self.mx;
            }
        }
    }

    /// Adds `buf` (`[c][row][x]`) into rows `rows` of `grid`.
    pub fn add<T: Real>(&self, grid: &mut [T], rows: &[usize], comps: usize, buf: &[T]) {
        let mut k = 0;
        for c in 0..comps {
            for &r in rows {
                let at = c * self.component_stride + r * self.row_stride;
                for (d, &s) in grid[at..at + self.mx].iter_mut().zip(&buf[k..k + self.mx]) {
                    *d += s;
                }
                k += self.mx;
            }
        }
    }

    /// Copies `buf` (`[c][row][x]`) into rows `rows` of `grid`.
    pub fn copy<T: Copy>(&self, grid: &mut [T], rows: &[usize], comps: usize, buf: &[T]) {
        let mut k = 0;
        for c in 0..comps {
            for &r in rows {
                let at = c * self.component_stride + r * self.row_stride;
                grid[at..at + self.mx].copy_from_slice(&buf[k..k + self.mx]);
                k += self.mx;
            }
        }
    }
}

/// The halo pattern of one rank (see the module documentation).
pub struct HaloPlan {
    /// Per rank: my block rows (`lz * ly_n + ly`) that it owns, in order.
    send_rows: Vec<Vec<usize>>,
    /// Per rank: my owned rows (`z_loc * y_loc_n + y_loc`) its rows land on, in its order.
    recv_rows: Vec<Vec<usize>>,
    spread: ExchangePlan<f64>,
    gather: ExchangePlan<f64>,
    mx: usize,
    real_bytes: usize,
    stages: [StageName; 2],
}

impl HaloPlan {
    /// Plans the exchanges of a block placed at `block` against the owned rows `fft` for
    /// `spread_comps` components spread and `gather_comps` gathered, of reals of `real_bytes`
    /// bytes; `stages` name the spread and gather exchanges in the traffic counters, `plan` the
    /// one-time exchange of row lists. Collective over `comm`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: &Comm,
        block: BlockPlacement,
        fft: &OwnedRows,
        spread_comps: usize,
        gather_comps: usize,
        real_bytes: usize,
        backend: Backend,
        stages: [StageName; 2],
        plan: StageName,
    ) -> Self {
        let [mx, my, mz] = fft.global;
        let [_, bny, bnz] = block.dims;
        let pg = fft.pgrid;
        let size = comm.size();
        let mut send_rows = vec![Vec::new(); size];
        let mut send_ids: Vec<Vec<u64>> = vec![Vec::new(); size];
        let global = |d: usize, l: usize, m: usize| {
            if block.wrap[d] {
                l
            } else {
                (block.origin[d] + l as i64).rem_euclid(m as i64) as usize
            }
        };
        for lz in 0..bnz {
            let gz = global(2, lz, mz);
            for ly in 0..bny {
                let gy = global(1, ly, my);
                let r = split_owner(my, pg.dims[0], gy) + pg.dims[0] * split_owner(mz, pg.dims[1], gz);
                send_rows[r].push(lz * bny + ly);
                send_ids[r].push((gz * my + gy) as u64);
            }
        }
        let counts: Vec<usize> = send_ids.iter().map(Vec::len).collect();
        let flat: Vec<u64> = send_ids.concat();
        let mut got = Vec::new();
        let recv_counts = {
            let _g: StageGuard = comm.stage(plan);
            comm.alltoallv(&flat, &counts, &mut got)
        };
        let mut recv_rows = Vec::with_capacity(size);
        let mut k = 0;
        for &c in &recv_counts {
            recv_rows.push(
                got[k..k + c]
                    .iter()
                    .map(|&id| {
                        let (gz, gy) = (id as usize / my, id as usize % my);
                        (gz - fft.z.start) * fft.y.len() + (gy - fft.y.start)
                    })
                    .collect(),
            );
            k += c;
        }
        // the exchange plans move f64 slots: reals of 4 bytes go two to a slot
        let slots = |rows: usize, comps: usize| (rows * comps * mx * real_bytes).div_ceil(8);
        let plan_for = |comps: usize| {
            let a: Vec<usize> = counts.iter().map(|&c| slots(c, comps)).collect();
            let b: Vec<usize> = recv_counts.iter().map(|&c| slots(c, comps)).collect();
            ExchangePlan::new(comm, &a, &b, backend)
        };
        let spread = plan_for(spread_comps);
        let gather = plan_for(gather_comps);
        Self { send_rows, recv_rows, spread, gather, mx, real_bytes, stages }
    }

    /// Reverse halo exchange: `pack(rows, buf)` fills `buf` with the block rows `rows` of every
    /// spread component (`[c][row][x]`), `add(rows, buf)` adds such a buffer into the owned rows
    /// `rows`. Every `pack` runs before any `add`.
    pub fn spread<T: Real>(
        &mut self,
        comm: &Comm,
        mut pack: impl FnMut(&[usize], &mut [T]),
        mut add: impl FnMut(&[usize], &[T]),
    ) {
        assert_eq!(T::BYTES, self.real_bytes, "planned for another precision");
        let _g = comm.stage(self.stages[0]);
        let (send_rows, recv_rows) = (&self.send_rows, &self.recv_rows);
        self.spread.execute(
            Dir::Forward,
            |peer, buf| pack(&send_rows[peer], reals_mut::<T>(buf)),
            |peer, buf| add(&recv_rows[peer], reals::<T>(buf)),
        );
    }

    /// Forward ghost-grid exchange: `pack(rows, buf)` fills `buf` with the owned rows `rows`
    /// of every gathered component, `copy(rows, buf)` writes such a buffer into the block rows
    /// `rows`. Every `pack` runs before any `copy`.
    pub fn gather<T: Real>(
        &mut self,
        comm: &Comm,
        mut pack: impl FnMut(&[usize], &mut [T]),
        mut copy: impl FnMut(&[usize], &[T]),
    ) {
        assert_eq!(T::BYTES, self.real_bytes, "planned for another precision");
        let _g = comm.stage(self.stages[1]);
        let (send_rows, recv_rows) = (&self.send_rows, &self.recv_rows);
        self.gather.execute(
            Dir::Backward,
            |peer, buf| pack(&recv_rows[peer], reals_mut::<T>(buf)),
            |peer, buf| copy(&send_rows[peer], reals::<T>(buf)),
        );
    }

    /// Reals per row (the whole x-line).
    pub fn row_len(&self) -> usize {
        self.mx
    }
}

/// The `T` values stored in a block of `f64` slots (exchange plans carry 8-byte slots); a block
/// holds a whole number of rows, so a trailing half slot (f32) is not part of any row.
fn reals<T: Real>(buf: &[f64]) -> &[T] {
    // SAFETY: f64 slots are 8-byte aligned and T (f32 or f64) needs at most 8; the length covers
    // exactly the bytes of `buf`; every bit pattern is a valid float.
    unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const T, std::mem::size_of_val(buf) / T::BYTES) }
}

/// Mutable version of [`reals`].
fn reals_mut<T: Real>(buf: &mut [f64]) -> &mut [T] {
    // SAFETY: alignment and length as in `reals`; the exclusive borrow of `buf` is carried over.
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut T, std::mem::size_of_val(buf) / T::BYTES) }
}
