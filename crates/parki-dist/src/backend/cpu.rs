//! [`CpuBackend`]: the stages on the CPU, multi-threaded (rayon) with run-time SIMD dispatch.

use parki_comm::Comm;
use parki_core::memory::{try_touched_vec, HugeBuffer};
use parki_core::{Kernel, Output, Par, Points, Result, SourceSet};
use parki_decomp::{HaloPlan, RowLayout};
use parki_farfield::{
    g2p, g2p_field, interleave, p2g, Cnv, FieldMethod, FreeCnv, G2pVariant, GatherGrid, GridWindow, KaiserBessel,
    P2gScratch, P2gVariant,
};
use parki_fft3d::{DistFft, DistFftOptions, R2rMethod};
use parki_nearfield::{p2p_within, CellGrid, Isa, NearCutoff, PaddedSources, PairAccuracy, SortedTargets};

use super::{BackendSetup, EwaldBackend, NearStats};
use crate::SolverReal;

/// The CPU backend: padded cell lists and SIMD P2P, blocked P2G, FFTW (distributed over the
/// ranks), CNV, target-sorted G2P, every stage on the solver's threads.
pub struct CpuBackend<T: SolverReal> {
    kernel: Kernel,
    output: Output,
    /// Components of the grid the inverse transform returns (the field's too with `-i k`).
    grid_out: usize,
    /// The field by the window's derivative in G2P.
    window_field: bool,
    xi: f64,
    isa: Isa,
    /// How P2P evaluates its pair functions.
    pair_accuracy: PairAccuracy,
    /// Which pairs P2P sums (the selection's cut-off sphere, `Params::near_cut`).
    cutoff: NearCutoff,
    threads: usize,
    p2g: P2gVariant,
    g2p: G2pVariant,
    cells: CellGrid,
    window: GridWindow<T>,
    direct: bool,
    cnv: Convolution<T>,
    /// Values per grid row that carry data (the halo exchanges move these).
    row_data: usize,
    fft: DistFft<T>,
    /// The P2G block (empty when direct).
    block: HugeBuffer<T>,
    /// The output components interleaved for G2P (vector kernels).
    gather: HugeBuffer<T>,
    p2g_scratch: P2gScratch<T>,
    /// The sources of the current evaluation in padded cell lists (from `bin` to P2P).
    padded: Option<PaddedSources<T>>,
    /// The last P2P's statistics.
    near_stats: NearStats,
    /// The targets of the current evaluation sorted by cell (resident from `bin` to the sum).
    sorted: Option<SortedTargets<T>>,
    /// Near field in the sorted order of `sorted`.
    near: Vec<T>,
    /// Far field in target order, or in the cell order of `sorted` when `far_sorted`.
    far: Vec<T>,
    /// The targets' positions in the cell order of `sorted` (what G2P reads).
    sorted_positions: Vec<[T; 3]>,
    /// The targets' position residuals in the same order, where an evaluation has them
    /// (allocated at its first).
    sorted_residuals: Vec<[T; 3]>,
    /// The last `interpolate` wrote `far` in the cell order of `sorted` (target-sorted G2P
    /// reuses the near field's sort).
    far_sorted: bool,
}

/// CNV: on the fly for a triply periodic box, by precomputed tables with free axes.
enum Convolution<T> {
    Periodic(Cnv),
    Free(Box<FreeCnv<T>>),
}

impl<T: SolverReal> CpuBackend<T> {
    fn par(&self) -> Par {
        Par::with_threads(self.threads)
    }

    /// The grid G2P reads and P2G writes: the block, or the FFT's own data when direct.
    fn block_layout(&self) -> RowLayout {
        RowLayout { mx: self.row_data, ..RowLayout::padded(&self.window.layout) }
    }

    fn fft_layout(&self) -> RowLayout {
        self.fft.row_layout()
    }
}

impl<T: SolverReal> EwaldBackend<T> for CpuBackend<T> {
    fn plan(s: &BackendSetup<'_, T>) -> Result<Self> {
        let p = s.params;
        let ncomp = s.kernel.grid_components();
        let dim = s.output.dim();
        let grid_out = FieldMethod::grid_outputs(s.field_method, s.kernel);
        let spectral_field = s.field_method == Some(FieldMethod::Spectral);
        let threads = s.threads.max(1);
        let fopts = DistFftOptions {
            forward_components: ncomp,
            backward_components: grid_out,
            complex: false,
            backend: s.switches,
            threads,
            rigor: s.fft_rigor,
            lines: s.fft_lines,
            r2r: R2rMethod::default(),
            fuse_planes: true,
        };
        let kb = KaiserBessel::new(p.p);
        let (fft, cnv, row_data) = match &p.free {
            None => {
                let fft = DistFft::<T>::new(s.comm, p.grid, s.pgrid, fopts)?;
                let layout = parki_decomp::GridLayout::new(p.grid)?;
                let cnv = Cnv::new(s.kernel, layout, s.lengths, &kb, p.xi);
                let cnv = if spectral_field { cnv.with_field() } else { cnv };
                (fft, Convolution::Periodic(cnv), p.grid[0])
            }
            Some(free) => {
                let fft =
                    DistFft::<T>::with_mode_classes(s.comm, free.axes(), [0, 1, 2], s.pgrid, fopts, &free.classes)?;
                let block = fft.spectral_layout();
                let par = Par::with_threads(threads);
                let cnv = FreeCnv::new(s.kernel, spectral_field, free, s.lengths, &kb, p.xi, &block, s.comm, par)?;
                (fft, Convolution::Free(Box::new(cnv)), free.data[0])
            }
        };
        // P2G and G2P work on the transform's own buffer when direct: its components lie the
        // transform's component stride apart (room for the padded topologies of free axes)
        let mut window = s.window.clone();
        if s.direct {
            window.layout = parki_decomp::GridLayout::with_stride(window.layout.global, fft.component_stride());
        }
        let block_len = if s.direct { 0 } else { ncomp.max(grid_out) * window.layout.real_len() };
        let block = HugeBuffer::try_new(block_len, T::ZERO, threads, "the P2G grid block")?;
        let gather_len = if grid_out > 1 { grid_out * window.layout.points() } else { 0 };
        let gather = HugeBuffer::try_new(gather_len, T::ZERO, threads, "the G2P gather grid")?;
        let p2g_scratch = if s.p2g == P2gVariant::Blocked {
            P2gScratch::planned(s.kernel, &window, s.sources, threads)
        } else {
            P2gScratch::new(threads)
        };
        // evaluation scratch allocated and touched now: evaluations then fault in no pages
        let near = try_touched_vec(s.targets * dim, T::ZERO, "the near field")?;
        let far = try_touched_vec(s.targets * dim, T::ZERO, "the far field")?;
        let sorted_positions = try_touched_vec(s.targets, [T::ZERO; 3], "the sorted targets")?;
        Ok(Self {
            kernel: s.kernel,
            output: s.output,
            grid_out,
            window_field: s.field_method == Some(FieldMethod::Window),
            xi: p.xi,
            isa: s.isa,
            pair_accuracy: s.pair_accuracy,
            cutoff: p.near_cut.map_or(NearCutoff::Cells, NearCutoff::Sphere),
            threads,
            p2g: s.p2g,
            g2p: s.g2p,
            cells: s.cells.clone(),
            window,
            direct: s.direct,
            cnv,
            row_data,
            fft,
            block,
            gather,
            p2g_scratch,
            padded: None,
            near_stats: NearStats::default(),
            sorted: None,
            near,
            far,
            sorted_positions,
            sorted_residuals: Vec::new(),
            far_sorted: false,
        })
    }

    fn planning(query: &super::PlanningQuery) -> Result<super::PlanningHints> {
        let _ = query;
        Ok(super::PlanningHints { loose_pairs: true, sphere_cutoff: true, ..Default::default() })
    }

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn bytes(&self) -> usize {
        let t = T::BYTES;
        let tables = match &self.cnv {
            Convolution::Periodic(_) => 0,
            Convolution::Free(c) => c.bytes(),
        };
        (self.block.len() + self.gather.len() + self.fft.data().len() + self.near.capacity() + self.far.capacity()) * t
            + 3 * self.sorted_residuals.capacity() * t
            + tables
    }

    fn bin<S: SourceSet<T>>(&mut self, sources: &S, keys: &[u32], targets: Points<'_, T>) {
        let (target_residuals, targets) = (targets.residuals, targets.positions);
        let (par, cells) = (self.par(), &self.cells);
        let lanes = self.isa.lanes::<T>();
        // loose pair accuracy reads packed rows (their x frame costs eps L / r, see
        // `PaddedSources`): 9 runs per target instead of 27 padded cells
        let packed = self.pair_accuracy == PairAccuracy::Loose;
        self.padded = Some(if packed {
            PaddedSources::build_packed(cells, self.kernel, sources, keys, lanes, par)
        } else {
            PaddedSources::build_keyed(cells, self.kernel, sources, keys, lanes, par)
        });
        // targets that are the (owned, first) sources share their cell keys
        let same = targets.len() <= keys.len() && std::ptr::eq(targets.as_ptr(), sources.positions().as_ptr());
        self.sorted = Some(if same {
            SortedTargets::build_keyed_in_frame(cells, targets, target_residuals, &keys[..targets.len()], packed, par)
        } else {
            let keys = cells.keys(targets, par);
            SortedTargets::build_keyed_in_frame(cells, targets, target_residuals, &keys, packed, par)
        });
    }

    fn near_field(&mut self) {
        self.near_stats = NearStats::default();
        let (Some(padded), Some(sorted)) = (self.padded.take(), self.sorted.as_ref()) else {
            return;
        };
        let par = self.par();
        let cells = &self.cells;
        self.near.resize(sorted.len() * self.output.dim(), T::ZERO);
        let pairs = p2p_within(
            self.output,
            self.pair_accuracy,
            self.cutoff,
            self.xi,
            cells,
            &padded,
            sorted,
            &mut self.near,
            self.isa,
            par,
        );
        self.near_stats = NearStats {
            padding_efficiency: padded.count as f64 / padded.slots().max(1) as f64,
            pairs,
            overlapped_seconds: None,
        };
    }

    fn near_stats(&mut self) -> NearStats {
        self.near_stats
    }

    fn spread<S: SourceSet<T>>(&mut self, sources: &S) {
        let par = self.par();
        let grid = if self.direct { self.fft.data_mut() } else { self.block.as_mut_slice() };
        p2g(self.p2g, self.kernel, &self.window, sources, grid, &mut self.p2g_scratch, self.isa, par);
    }

    fn halo_spread(&mut self, halo: &mut HaloPlan, comm: &Comm) {
        let ncomp = self.kernel.grid_components();
        let (block_rows, fft_rows) = (self.block_layout(), self.fft_layout());
        let loc = self.fft.real_topology().local();
        let owned_rows = loc[1] * loc[2];
        let block = self.block.as_slice();
        let data = self.fft.data_mut();
        for c in 0..ncomp {
            let at = c * fft_rows.component_stride;
            data[at..at + owned_rows * fft_rows.row_stride].fill(T::ZERO);
        }
        halo.spread(
            comm,
            |rows, buf| block_rows.pack(block, rows, ncomp, buf),
            |rows, buf| fft_rows.add(data, rows, ncomp, buf),
        );
    }

    fn fft_forward(&mut self) {
        self.fft.forward();
    }

    fn convolve(&mut self, net_charge: f64) {
        let par = self.par();
        match &self.cnv {
            Convolution::Periodic(cnv) => {
                let block = self.fft.spectral_layout();
                cnv.apply_block(self.fft.data_mut(), &block, par);
            }
            Convolution::Free(cnv) => cnv.apply(self.fft.data_mut(), par, net_charge),
        }
    }

    fn fft_backward(&mut self) {
        self.fft.backward();
    }

    fn halo_gather(&mut self, halo: &mut HaloPlan, comm: &Comm) {
        let dim = self.grid_out;
        let (block_rows, fft_rows) = (self.block_layout(), self.fft_layout());
        let data = self.fft.data();
        let block = self.block.as_mut_slice();
        halo.gather(
            comm,
            |rows, buf| fft_rows.pack(data, rows, dim, buf),
            |rows, buf| block_rows.copy(block, rows, dim, buf),
        );
    }

    fn interpolate(&mut self, points: Points<'_, T>) {
        let targets = points.positions;
        let par = self.par();
        self.far.resize(targets.len() * self.output.dim(), T::ZERO);
        let grid = if self.direct { self.fft.data() } else { self.block.as_slice() };
        let layout = &self.window.layout;
        let dim = self.grid_out;
        // target-sorted G2P in the near field's cell order (cells about r_c wide, the far-field
        // cells P/2 grid points): the targets are sorted once per evaluation, not twice, and
        // G2P reads their sorted copies in order (no index, no scattered loads)
        let sorted = match (&self.sorted, self.g2p) {
            (Some(s), G2pVariant::TargetSorted) if s.len() == targets.len() => Some(s),
            _ => None,
        };
        self.far_sorted = sorted.is_some();
        let (variant, targets) = match sorted {
            Some(s) => {
                self.sorted_positions.resize(targets.len(), [T::ZERO; 3]);
                s.sorted_positions(targets, &mut self.sorted_positions, par);
                let residuals = points.residuals.map(|r| {
                    self.sorted_residuals.resize(r.len(), [T::ZERO; 3]);
                    s.sorted_positions(r, &mut self.sorted_residuals, par);
                    &self.sorted_residuals[..]
                });
                (G2pVariant::Base, Points { positions: &self.sorted_positions[..], residuals })
            }
            None => (self.g2p, points),
        };
        let (window, isa, far) = (&self.window, self.isa, &mut self.far);
        if self.window_field {
            let view = GatherGrid::from_fft(layout, grid);
            g2p_field(variant, window, &view, targets, far, isa, par);
            return;
        }
        let view = if dim == 1 {
            GatherGrid::from_fft(layout, grid)
        } else {
            interleave(layout, dim, grid, self.gather.as_mut_slice(), par);
            GatherGrid::interleaved(layout, dim, self.gather.as_slice())
        };
        g2p(variant, window, &view, targets, far, isa, par);
    }

    fn sum_into(&mut self, background: f64, out: &mut [T]) {
        let dim = self.output.dim();
        let sorted = self.sorted.take().expect("near_field runs before sum_into");
        assert_eq!(out.len(), self.far.len(), "one result per target");
        let bg = T::from_f64(background);
        if self.far_sorted {
            // both in the cell order: near + far + background there, then one scatter back
            // (the same sums in the same order as below)
            for (n, f) in self.near.chunks_exact_mut(dim).zip(self.far.chunks_exact(dim)) {
                for (nc, &fc) in n.iter_mut().zip(f) {
                    *nc += fc;
                }
                n[0] += bg;
            }
            sorted.unsort(&self.near, dim, out, self.par());
            return;
        }
        // near field back to target order, then far field, and the background to the
        // potential (Laplace: the first value per target; zero for the vector kernels)
        sorted.unsort(&self.near, dim, out, self.par());
        for (o, f) in out.chunks_exact_mut(dim).zip(self.far.chunks_exact(dim)) {
            for (oc, &fc) in o.iter_mut().zip(f) {
                *oc += fc;
            }
            o[0] += bg;
        }
    }
}
