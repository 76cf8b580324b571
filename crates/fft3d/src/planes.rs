//! The a0 and a1 passes of a [`DistFft`](crate::DistFft) fused per a2 plane.
//!
//! Where the process grid has one part along a1 (`P_1 = 1`: one rank, or slabs along a2), the
//! topologies T0 and T1 hold the same a2 planes and differ only by a1's zero padding, which
//! switch 1 inserts by moving every row (a local re-layout). Done pass by pass, the forward
//! transform then sweeps the whole block through memory four times before the a2 pass: the a0
//! transform, the re-layout's read and its write (padding rows included), the a1 transform. The
//! transform is bound by those sweeps (about 10 GB/s on two cores of our benchmark machine, at
//! which each pass of FFTW ran), so here each plane of each component goes through all of them
//! while it is in cache (a 1P plane of 49 x 210 complex values is 165 KB): a0 transform of its
//! data rows in place, move to its T1 place, zero the padding rows, a1 transform in blocks of
//! columns. Memory sees one read of T0 and one write of T1. The backward transform runs the
//! same steps back (a1, move back, a0).
//!
//! A plane's T1 place may cover the T0 places of other planes (T1 planes are `L1 / n1` times
//! larger), so planes run in *waves*: forward from the last plane down, a wave holding the
//! planes whose T1 places cover no T0 plane of the same or a later wave but their own; backward
//! from the first plane up, the mirror rule (design.md, "Planes in cache"). Within a wave every
//! plane of every component runs in parallel; there are about `log2(n2)` waves with padding and
//! one without.

use std::ops::Range;

use parki_core::{Par, Result};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::ffi::{ClassPlans, Kind, Plan1d};
use crate::lines::{BlockedLines, Lines};
use crate::ptr::Ptr;
use crate::rows::{NativeRowPass, RowSet};
use crate::{FftReal, LineEngine, PlanRigor};

/// Where the planes are, in reals of the data buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlaneGeometry {
    /// Components transformed in this direction.
    pub(crate) comps: usize,
    /// Reals between components.
    pub(crate) cs: usize,
    /// Local a2 planes.
    pub(crate) planes: usize,
    /// Reals per a0 row (`nf L0`).
    pub(crate) row: usize,
    /// a1: data rows, line slots, data offset (this direction's).
    pub(crate) n1: usize,
    pub(crate) l1: usize,
    pub(crate) d1: usize,
}

impl PlaneGeometry {
    /// First real of plane `z` of component `c` in T0.
    fn t0(&self, c: usize, z: usize) -> usize {
        c * self.cs + z * self.n1 * self.row
    }

    /// First real of plane `z` of component `c` in T1.
    fn t1(&self, c: usize, z: usize) -> usize {
        c * self.cs + z * self.l1 * self.row
    }

    /// The planes of the other topology that plane `z`'s destination covers: forward, the T0
    /// planes under its T1 place; backward, the T1 planes under its T0 place.
    fn covered(&self, z: usize, forward: bool) -> Range<usize> {
        let (dst, src) = if forward { (self.l1, self.n1) } else { (self.n1, self.l1) };
        let first = z * dst / src;
        let last = ((z + 1) * dst - 1) / src;
        first..(last + 1).min(self.planes)
    }

    /// The waves (see the module documentation), in execution order.
    fn waves(&self, forward: bool) -> Vec<Range<usize>> {
        let n = self.planes;
        let mut waves = Vec::new();
        if forward {
            // descending: plane z may join the wave ending at b when it covers only itself and
            // planes >= b (done in earlier waves)
            let ok = |z: usize, b: usize| self.covered(z, true).all(|w| w == z || w >= b);
            let mut b = n;
            while b > 0 {
                let mut a = b - 1;
                while a > 0 && ok(a - 1, b) {
                    a -= 1;
                }
                waves.push(a..b);
                b = a;
            }
        } else {
            // ascending, the mirror rule: plane z covers only itself and planes < a
            let ok = |z: usize, a: usize| self.covered(z, false).all(|w| w == z || w < a);
            let mut a = 0;
            while a < n {
                let mut b = a + 1;
                while b < n && ok(b, a) {
                    b += 1;
                }
                waves.push(a..b);
                a = b;
            }
        }
        waves
    }
}

/// How a plane's a0 rows are transformed.
enum RowRun<T: FftReal> {
    /// FFTW's plans, one per address class of the plane starts.
    Fftw(ClassPlans<T>),
    /// RustFFT's real rows (`realfft`) of one plane, run on the calling thread.
    Native(NativeRowPass<T>),
}

/// The fused a0 and a1 passes of one direction (see the module documentation).
pub(crate) struct PlanePasses<T: FftReal> {
    geo: PlaneGeometry,
    forward: bool,
    /// One plane's a0 transform: FFTW's, per address class of the planes it runs on (SIMD at
    /// every plane), or RustFFT's real rows.
    rows: RowRun<T>,
    /// First real of the a0 transform's layout within a plane.
    row_offset: usize,
    /// The a1 lines of one T1 plane (planned on plane 0).
    lines: BlockedLines<T>,
    /// Forward: the reals of each row that hold data (the rest is zeroed before the a0
    /// transform); `None` when the data fill the row.
    row_data: Option<Range<usize>>,
    waves: Vec<Range<usize>>,
}

/// What the a0 transform of one plane is: its kind, length, stride, row loop and offset.
pub(crate) struct RowSpec {
    pub(crate) kind: Kind,
    pub(crate) n: usize,
    pub(crate) stride: (usize, usize),
    /// `(rows, input distance, output distance)` in the transform's input and output elements.
    pub(crate) rows: (usize, usize, usize),
    /// First real of the layout within a plane.
    pub(crate) offset: usize,
}

impl<T: FftReal> PlanePasses<T> {
    /// Plans both passes on `data` (the transform's buffer). `row` is the a0 transform of one
    /// plane, `lines` the a1 lines of one T1 plane (relative to its first complex value).
    pub(crate) fn new(
        geo: PlaneGeometry,
        forward: bool,
        row: RowSpec,
        lines: (Kind, Lines),
        row_data: Option<Range<usize>>,
        data: *mut T,
        (rigor, engine): (PlanRigor, LineEngine),
    ) -> Result<Self> {
        let starts = (0..geo.comps * geo.planes).map(|u| {
            // SAFETY: every plane's layout lies inside the buffer (the T0 block).
            unsafe { data.add(geo.t0(u / geo.planes, u % geo.planes) + row.offset) }
        });
        let real = matches!(row.kind, Kind::R2c | Kind::C2r) && row.stride == (1, 1);
        // the rows' distance in reals (the input's for r2c, the output's for c2r)
        let dist = if row.kind == Kind::R2c { row.rows.1 } else { row.rows.2 };
        let set = RowSet { n: row.n, rows: (row.rows.0, dist), comps: (1, 0), offset: 0 };
        // odd lengths: `NativeRowPass` declines, FFTW's plans run them
        let native = (real && engine == LineEngine::RustFft).then(|| NativeRowPass::new(row.kind, set)).flatten();
        let rows = match native {
            Some(pass) => RowRun::Native(pass),
            None => RowRun::Fftw(ClassPlans::new(starts, |p| {
                Plan1d::single(row.kind, row.n, row.stride, &[row.rows], p, rigor, true)
            })?),
        };
        let lines = BlockedLines::new(lines.0, lines.1, data, rigor, engine)?;
        Ok(Self { geo, forward, rows, row_offset: row.offset, lines, row_data, waves: geo.waves(forward) })
    }

    /// Runs the passes (forward: a0, re-layout, a1; backward: a1, re-layout, a0) on `data`.
    ///
    /// # Safety
    /// `data` must be the buffer planned on, holding T0 (forward) or T1 (backward).
    pub(crate) unsafe fn execute(&self, data: *mut T, par: Par) {
        let shared = Ptr(data);
        let g = self.geo;
        let plane = |c: usize, z: usize| {
            // SAFETY: within a wave the planes' T0 and T1 places do not overlap those of another
            // plane still to be read (`waves`), and components are disjoint.
            unsafe { self.plane(shared.get(), c, z) }
        };
        for wave in &self.waves {
            let units = g.comps * wave.len();
            let unit = |u: usize| plane(u / wave.len(), wave.start + u % wave.len());
            match par {
                Par::Rayon(_) if units > 1 => (0..units).into_par_iter().for_each(unit),
                _ => (0..units).for_each(unit),
            }
        }
    }

    /// The a0 transform of the plane's rows at `p`.
    ///
    /// # Safety
    /// `p` is a plane start of the planned layout, its rows this thread's alone.
    unsafe fn rows(&self, p: *mut T) {
        match &self.rows {
            // every plane start's class was planned in `new`
            RowRun::Fftw(plans) => {
                let plan = plans.at(p).expect("an a0 plan per address class of the plane starts");
                // SAFETY: the caller's plane, planned layout
                unsafe { plan.execute(p) }
            }
            // SAFETY: the caller's plane holds the set's rows, this thread's alone
            RowRun::Native(pass) => unsafe { pass.execute(p, Par::Seq) },
        }
    }

    /// One plane of one component.
    ///
    /// # Safety
    /// As [`execute`](Self::execute), and no other thread touches this plane's places.
    unsafe fn plane(&self, data: *mut T, c: usize, z: usize) {
        let g = self.geo;
        let (t0, t1) = (g.t0(c, z), g.t1(c, z));
        let rows_len = g.n1 * g.row;
        // SAFETY: the plane's T0 and T1 places lie inside the buffer; the caller keeps other
        // threads off them.
        unsafe {
            if self.forward {
                if let Some(d) = &self.row_data {
                    for r in 0..g.n1 {
                        let at = data.add(t0 + r * g.row);
                        std::ptr::write_bytes(at, 0, d.start);
                        std::ptr::write_bytes(at.add(d.end), 0, g.row - d.end);
                    }
                }
                self.rows(data.add(t0 + self.row_offset));
                let dst = t1 + g.d1 * g.row;
                if dst != t0 {
                    std::ptr::copy(data.add(t0), data.add(dst), rows_len);
                }
                std::ptr::write_bytes(data.add(t1), 0, g.d1 * g.row);
                let end = dst + rows_len;
                std::ptr::write_bytes(data.add(end), 0, t1 + g.l1 * g.row - end);
                self.lines.execute(data.add(t1), Par::Seq);
            } else {
                self.lines.execute(data.add(t1), Par::Seq);
                let src = t1 + g.d1 * g.row;
                if src != t0 {
                    std::ptr::copy(data.add(src), data.add(t0), rows_len);
                }
                self.rows(data.add(t0 + self.row_offset));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PlaneGeometry;

    fn geo(planes: usize, n1: usize, l1: usize) -> PlaneGeometry {
        PlaneGeometry { comps: 1, cs: 0, planes, row: 1, n1, l1, d1: 0 }
    }

    /// Each wave's planes write over no plane that a later wave, or another plane of the same
    /// wave, still has to read; every plane is in exactly one wave.
    #[test]
    fn waves_never_overwrite_planes_still_to_read() {
        for (planes, n1, l1) in [(96, 103, 210), (103, 103, 210), (7, 5, 12), (40, 40, 40), (1, 9, 20), (33, 17, 35)] {
            let g = geo(planes, n1, l1);
            for forward in [true, false] {
                let waves = g.waves(forward);
                let mut seen = vec![0; planes];
                let mut done = vec![false; planes];
                for w in &waves {
                    for z in w.clone() {
                        seen[z] += 1;
                        // the places this plane writes (rows) and those still to be read
                        let (dst, src) = if forward { (l1, n1) } else { (n1, l1) };
                        let write = z * dst..(z + 1) * dst;
                        for (other, &finished) in done.iter().enumerate() {
                            if other == z || finished {
                                continue;
                            }
                            let read = other * src..(other + 1) * src;
                            assert!(
                                write.end <= read.start || read.end <= write.start,
                                "{planes} {n1} {l1} {forward}: plane {z} overwrites {other} (waves {waves:?})"
                            );
                        }
                    }
                    for z in w.clone() {
                        done[z] = true;
                    }
                }
                assert!(seen.iter().all(|&s| s == 1), "{waves:?}");
                if n1 == l1 {
                    assert_eq!(waves.len(), 1);
                } else {
                    assert!(waves.len() <= 2 + (planes as f64).log2().ceil() as usize * 2, "{waves:?}");
                }
            }
        }
    }
}
