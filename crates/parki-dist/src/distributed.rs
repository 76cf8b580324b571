//! [`DistEwaldSolver`]: spectral Ewald over MPI ranks (data flow of ARCHITECTURE.md).
//!
//! Ownership. The process grid `[P_y, P_z]` splits the cell layers of the global cell grid
//! (cells at least `r_c` wide) along y and z: a particle belongs to the rank that owns its cell
//! column. Because ownership follows cells, the near field sums exactly the pairs of the
//! single-process solver (the 27 colleague cells of each target's cell); only the order of the
//! additions changes. The FFT grid is split evenly over the same process grid (FLUPS
//! topologies, see `parki_fft3d::dist`), independently of the cells.
//!
//! One evaluation:
//! 1. MPI-SORT: sources and targets to their owners (`MPI_Alltoallv`, or a neighbour-only
//!    exchange when every particle's owner is a process-grid neighbour of its caller);
//! 2. ghost sources: the owners send the sources of the cell columns in every neighbour's ghost
//!    ring (one cell layer around its columns, periodic images included; a rank may be its own
//!    neighbour's neighbour twice, with different image shifts);
//! 3. P2P on a window cell grid (owned columns plus the ghost ring);
//! 4. P2G of owned sources onto the grid block their windows cover (owned cells plus the window
//!    half-width), then the reverse halo exchange adds every point to its FFT owner;
//! 5. distributed r2c FFT, CNV on the local z-pencils, c2r FFT;
//! 6. the forward ghost-grid exchange copies the owners' values back into every block;
//! 7. G2P of owned targets; results return to the caller's rank and order.
//!
//! On one rank the grid block is the FFT grid and no exchange runs.

use std::f64::consts::PI;
use std::ops::Range;
use std::time::Instant;

use parki_comm::{Backend, Comm, Dir, ExchangePlan, ReduceOp};
use parki_core::memory::HugeBuffer;
use parki_core::{PackedSet, Par, Real, Result, SourceSet, Sources, Stage};
use parki_decomp::sort::counting_sort;
use parki_decomp::{split_owner, split_range, Decomposition, GridLayout, ProcGrid};
use parki_farfield::{p2g, Cnv, GridWindow, KaiserBessel, P2gScratch, Params, SpectralBlock};
use parki_fft3d::{DistFft, DistFftOptions};
use parki_nearfield::{p2p, CellGrid, Isa, PaddedSources, SortedTargets};

use crate::solver::{
    check_inputs, interpolate, net_charge, neutrality_sums, neutrality_warnings, p2g_scratch, Evaluation, EwaldOptions,
    SolverReal, Targets,
};

/// How the ranks are arranged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParallelOptions {
    /// Explicit process grid `[P_y, P_z]` (default: chosen from `decomposition`).
    pub grid: Option<[usize; 2]>,
    /// Slab, pencil or automatic.
    pub decomposition: Decomposition,
    /// Backend of the FFT switches and the grid exchanges.
    pub backend: Backend,
}

/// How particles reach their owners.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortMode {
    /// `MPI_Alltoallv` over all ranks.
    #[default]
    Full,
    /// Only process-grid neighbours exchange (particles that moved less than a subdomain width
    /// since the caller got them from their owner); falls back to `Full`, on every rank, when
    /// any particle's owner is not a neighbour.
    Neighbour,
}

/// Where one particle set went: the caller's indices in send order and the counts per peer.
struct Route {
    order: Vec<usize>,
    peers: Vec<usize>,
    send: Vec<usize>,
    recv: Vec<usize>,
    full: bool,
}

/// One rank's share of the cell grid and of the far-field grid.
#[derive(Clone, Debug)]
struct Ownership {
    pgrid: ProcGrid,
    ncell: [usize; 3],
}

impl Ownership {
    fn cells(&self, rank: usize) -> [Range<usize>; 2] {
        let [iy, iz] = self.pgrid.coords(rank);
        [split_range(self.ncell[1], self.pgrid.dims[0], iy), split_range(self.ncell[2], self.pgrid.dims[1], iz)]
    }

    fn owner(&self, cy: usize, cz: usize) -> usize {
        let iy = split_owner(self.ncell[1], self.pgrid.dims[0], cy);
        let iz = split_owner(self.ncell[2], self.pgrid.dims[1], cz);
        iy + self.pgrid.dims[0] * iz
    }

    /// Window of `rank` along y (a = 0) or z (a = 1): (origin, dims, wrap).
    fn window(&self, rank: usize, a: usize) -> (i64, usize, bool) {
        let r = &self.cells(rank)[a];
        if self.pgrid.dims[a] == 1 {
            (0, self.ncell[1 + a], true)
        } else {
            (r.start as i64 - 1, r.len() + 2, false)
        }
    }

    /// Ghost ring of `rank`: window-local `(ly, lz)` and wrapped global `(cy, cz)` of every
    /// window column that `rank` does not own, in a fixed order.
    fn ring(&self, rank: usize) -> Vec<([usize; 2], [usize; 2])> {
        let (oy, ny, wy) = self.window(rank, 0);
        let (oz, nz, wz) = self.window(rank, 1);
        let mut out = Vec::new();
        for lz in 0..nz {
            for ly in 0..ny {
                let inner_y = wy || (ly >= 1 && ly + 1 < ny);
                let inner_z = wz || (lz >= 1 && lz + 1 < nz);
                if inner_y && inner_z {
                    continue;
                }
                let cy = (oy + ly as i64).rem_euclid(self.ncell[1] as i64) as usize;
                let cz = (oz + lz as i64).rem_euclid(self.ncell[2] as i64) as usize;
                out.push(([ly, lz], [cy, cz]));
            }
        }
        out
    }

    /// Distinct ranks in the 3x3 process-grid neighbourhood of `rank` (itself included).
    fn neighbours(&self, rank: usize) -> Vec<usize> {
        let [iy, iz] = self.pgrid.coords(rank);
        let mut v = Vec::new();
        for dz in -1i64..=1 {
            for dy in -1i64..=1 {
                v.push(self.pgrid.rank([iy as i64 + dy, iz as i64 + dz]));
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The ghost-source pattern, fixed by the ownership.
struct GhostPlan {
    peers: Vec<usize>,
    /// Per peer: my owned column indices whose sources go to it, in its ring order.
    send: Vec<Vec<usize>>,
    /// Per peer: my window-local `(ly, lz)` of what it sends, in my ring order.
    recv: Vec<Vec<[usize; 2]>>,
}

/// Grid rows of a block and their FFT owners (the halo pattern).
struct HaloPlan {
    /// Per rank: my block rows (`lz * ly_n + ly`) sent to it, in order.
    send_rows: Vec<Vec<usize>>,
    /// Per rank: my FFT rows (`z_loc * y_loc_n + y_loc`) its rows land on, in its order.
    recv_rows: Vec<Vec<usize>>,
    spread: ExchangePlan<f64>,
    gather: ExchangePlan<f64>,
}

/// A planned distributed spectral Ewald solver (see the module documentation).
pub struct DistEwaldSolver<T: SolverReal> {
    comm: Comm,
    opts: EwaldOptions,
    popts: ParallelOptions,
    params: Params,
    threads: usize,
    pool: rayon::ThreadPool,
    isa: Isa,
    own: Ownership,
    cells: CellGrid,
    window: GridWindow<T>,
    direct: bool,
    block: HugeBuffer<T>,
    fft: DistFft<T>,
    cnv: Cnv,
    halo: Option<HaloPlan>,
    ghost: GhostPlan,
    gather: HugeBuffer<T>,
    p2g_scratch: P2gScratch<T>,
}

impl<T: SolverReal> DistEwaldSolver<T> {
    /// Plans a solver over `comm` for `sources` and `targets` particles in total (over all
    /// ranks). Collective; every rank gets the same error if one fails.
    pub fn new(
        comm: &Comm,
        opts: &EwaldOptions,
        popts: ParallelOptions,
        sources: usize,
        targets: usize,
    ) -> Result<Self> {
        comm.agree(Self::plan(comm, opts, popts, sources, targets))
    }

    /// Bytes the whole far-field grid may take: the smallest rank's budget times the ranks
    /// (the grid is split evenly). A rank's budget is `opts.max_grid_bytes`, else half the
    /// available memory shared by the ranks on its node (counted by host name). Collective.
    fn grid_budget(comm: &Comm, opts: &EwaldOptions) -> usize {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let id =
            host.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        let on_node = comm.all_gather(&[id]).iter().filter(|&&h| h == id).count().max(1);
        let mine = opts.max_grid_bytes.unwrap_or_else(|| crate::solver::available_memory() / 2 / on_node);
        (comm.min(mine as u64) as usize).saturating_mul(comm.size())
    }

    fn plan(comm: &Comm, opts: &EwaldOptions, popts: ParallelOptions, sources: usize, targets: usize) -> Result<Self> {
        let budget = Self::grid_budget(comm, opts);
        let serial = crate::solver::plan_parts::<T>(opts, sources, targets, Some(budget))?;
        let (params, threads, isa, pool) = (serial.params, serial.threads, serial.isa, serial.pool);
        let global_cells = CellGrid::new(&opts.domain, params.rc)?;
        let ncell = global_cells.dims();
        let [mx, my, mz] = params.grid;
        let kx = mx / 2 + 1;
        let pgrid = ProcGrid::choose(
            comm.size(),
            popts.decomposition,
            popts.grid,
            [my.min(kx).min(ncell[1]), mz.min(my).min(ncell[2])],
        )?;
        let own = Ownership { pgrid, ncell };
        let me = comm.rank();
        let (oy, ny, wy) = own.window(me, 0);
        let (oz, nz, wz) = own.window(me, 1);
        let cells = global_cells.window([0, oy, oz], [ncell[0], ny, nz], [true, wy, wz]);

        // grid block covering the supports of particles in the owned cells
        let half = (params.p / 2) as i64;
        let lengths = opts.domain.lengths();
        let cw = global_cells.widths();
        let block_axis = |a: usize| -> (i64, usize, bool) {
            let d = a + 1;
            if pgrid.dims[a] == 1 {
                return (0, params.grid[d], true);
            }
            let r = &own.cells(me)[a];
            let inv_h = params.grid[d] as f64 / lengths[d];
            let lo = (r.start as f64 * cw[d] * inv_h).floor() as i64 - half - 1;
            let hi = (r.end as f64 * cw[d] * inv_h).floor() as i64 + half + 2;
            let n = ((hi - lo) as usize).next_multiple_of(2);
            (lo, n, false)
        };
        let (by, bny, bwy) = block_axis(0);
        let (bz, bnz, bwz) = block_axis(1);
        let direct = bwy && bwz;
        let layout = GridLayout { global: [mx, bny, bnz] };
        let window = GridWindow::windowed(layout, params.grid, [0, by, bz], [true, bwy, bwz], params.h, &params.poly);
        let ncomp = opts.kernel.grid_components();
        let dim = opts.kernel.output_dim();
        let fopts = DistFftOptions {
            forward_components: ncomp,
            backward_components: dim,
            complex: false,
            backend: popts.backend,
            threads,
            rigor: opts.fft_rigor,
        };
        let fft = DistFft::<T>::new(comm, params.grid, pgrid, fopts)?;
        let cnv =
            Cnv::new(opts.kernel, GridLayout::new(params.grid)?, lengths, &KaiserBessel::new(params.p), params.xi);
        let block = HugeBuffer::new(if direct { 0 } else { ncomp * layout.real_len() }, T::ZERO, threads);
        let halo = if direct { None } else { Some(Self::halo_plan(comm, &fft, &window, ncomp, dim, popts.backend)) };
        let ghost = Self::ghost_plan(&own, me);
        let gather = HugeBuffer::new(if dim > 1 { dim * layout.points() } else { 0 }, T::ZERO, threads);
        let p2g_scratch = p2g_scratch(opts, &window, sources / comm.size() + 1, threads);
        Ok(Self {
            comm: comm.clone(),
            opts: opts.clone(),
            popts,
            params,
            threads,
            pool,
            isa,
            own,
            cells,
            window,
            direct,
            block,
            fft,
            cnv,
            halo,
            ghost,
            gather,
            p2g_scratch,
        })
    }

    fn ghost_plan(own: &Ownership, me: usize) -> GhostPlan {
        let peers = own.neighbours(me);
        let mine = own.cells(me);
        let col = |cy: usize, cz: usize| (cy - mine[0].start) + mine[0].len() * (cz - mine[1].start);
        let mut send = Vec::new();
        let mut recv = Vec::new();
        let my_ring = own.ring(me);
        for &p in &peers {
            send.push(
                own.ring(p).iter().filter(|(_, c)| own.owner(c[0], c[1]) == me).map(|(_, c)| col(c[0], c[1])).collect(),
            );
            recv.push(my_ring.iter().filter(|(_, c)| own.owner(c[0], c[1]) == p).map(|(l, _)| *l).collect());
        }
        GhostPlan { peers, send, recv }
    }

    fn halo_plan(
        comm: &Comm,
        fft: &DistFft<T>,
        win: &GridWindow<T>,
        ncomp: usize,
        dim: usize,
        backend: Backend,
    ) -> HaloPlan {
        let pg = fft.proc_grid();
        let [_, my, mz] = fft.global();
        let [_, bny, bnz] = win.layout.global;
        let mx = win.layout.global[0];
        let size = comm.size();
        let mut send_rows = vec![Vec::new(); size];
        let mut send_ids: Vec<Vec<u64>> = vec![Vec::new(); size];
        for lz in 0..bnz {
            let gz = if win.wrap[2] { lz } else { (win.origin[2] + lz as i64).rem_euclid(mz as i64) as usize };
            for ly in 0..bny {
                let gy = if win.wrap[1] { ly } else { (win.origin[1] + ly as i64).rem_euclid(my as i64) as usize };
                let r = split_owner(my, pg.dims[0], gy) + pg.dims[0] * split_owner(mz, pg.dims[1], gz);
                send_rows[r].push(lz * bny + ly);
                send_ids[r].push((gz * my + gy) as u64);
            }
        }
        let counts: Vec<usize> = send_ids.iter().map(|v| v.len()).collect();
        let flat: Vec<u64> = send_ids.concat();
        let mut got = Vec::new();
        let recv_counts = {
            let _g = comm.stage("plan");
            comm.alltoallv(&flat, &counts, &mut got)
        };
        let (yr, zr) = fft.real_ranges();
        let mut recv_rows = Vec::with_capacity(size);
        let mut k = 0;
        for &c in &recv_counts {
            recv_rows.push(
                got[k..k + c]
                    .iter()
                    .map(|&id| {
                        let (gz, gy) = (id as usize / my, id as usize % my);
                        (gz - zr.start) * yr.len() + (gy - yr.start)
                    })
                    .collect(),
            );
            k += c;
        }
        // the exchange plans move f64 bit patterns: T values are packed two f32 per f64 slot
        // when T is f32 (see `reals_as_f64`)
        let slots = |rows: usize, comps: usize| (rows * comps * mx * T::BYTES).div_ceil(8);
        let a: Vec<usize> = counts.iter().map(|&c| slots(c, ncomp)).collect();
        let b: Vec<usize> = recv_counts.iter().map(|&c| slots(c, ncomp)).collect();
        let spread = ExchangePlan::new(comm, &a, &b, backend);
        let a: Vec<usize> = counts.iter().map(|&c| slots(c, dim)).collect();
        let b: Vec<usize> = recv_counts.iter().map(|&c| slots(c, dim)).collect();
        let gather = ExchangePlan::new(comm, &a, &b, backend);
        HaloPlan { send_rows, recv_rows, spread, gather }
    }

    /// The chosen parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The process grid.
    pub fn proc_grid(&self) -> ProcGrid {
        self.own.pgrid
    }

    /// The parallel options.
    pub fn parallel(&self) -> &ParallelOptions {
        &self.popts
    }

    /// The communicator.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// Threads per rank.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Instruction set of P2P.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The owner rank of a position in the box (its cell column's owner): callers that keep
    /// particles on their owners can use the neighbour-only sort.
    pub fn owner_of(&self, p: &[T; 3]) -> usize {
        let c = self.cells.global_cell(p);
        self.own.owner(c[1], c[2])
    }

    fn par(&self) -> Par {
        Par::with_threads(self.threads)
    }

    /// Sends particles (positions and, for sources, packed densities) to their owners.
    fn sort(
        &self,
        positions: &[[T; 3]],
        dens: Option<&Sources<T>>,
        mode: SortMode,
        out: &mut PackedSet<T>,
        out_pos_only: &mut Vec<[T; 3]>,
    ) -> Route {
        let comm = &self.comm;
        let kernel = self.opts.kernel;
        let me = comm.rank();
        let owners: Vec<u32> = positions.iter().map(|p| self.owner_of(p) as u32).collect();
        let neighbours = self.own.neighbours(me);
        let far =
            mode == SortMode::Neighbour && owners.iter().any(|&o| neighbours.binary_search(&(o as usize)).is_err());
        let full = mode == SortMode::Full || comm.max(u64::from(far)) > 0;
        let binned = counting_sort(&owners, comm.size(), self.par());
        let order: Vec<usize> = binned.order.iter().map(|&i| i as usize).collect();
        let w = kernel.density_width();
        let spos: Vec<[T; 3]> = order.iter().map(|&i| positions[i]).collect();
        let mut sdens = vec![T::ZERO; if dens.is_some() { order.len() * w } else { 0 }];
        if let Some(s) = dens {
            for (k, &i) in order.iter().enumerate() {
                s.density(kernel, i, &mut sdens[k * w..(k + 1) * w]);
            }
        }
        let counts: Vec<usize> = (0..comm.size()).map(|r| binned.count(r)).collect();
        let (peers, send, recv, rpos, rdens) = if full {
            let mut rpos = Vec::new();
            let recv = comm.alltoallv(&spos, &counts, &mut rpos);
            let mut rdens = vec![T::ZERO; if dens.is_some() { rpos.len() * w } else { 0 }];
            if dens.is_some() {
                let sc: Vec<usize> = counts.iter().map(|c| c * w).collect();
                let rc: Vec<usize> = recv.iter().map(|c| c * w).collect();
                comm.alltoallv_known(&sdens, &sc, &mut rdens, &rc);
            }
            ((0..comm.size()).collect(), counts, recv, rpos, rdens)
        } else {
            let peers = neighbours;
            let send: Vec<usize> = peers.iter().map(|&p| counts[p]).collect();
            let pmsg: Vec<Vec<[T; 3]>> =
                peers.iter().map(|&p| spos[binned.offsets[p]..binned.offsets[p + 1]].to_vec()).collect();
            let rp = comm.neighbour_exchange(&peers, &pmsg);
            let recv: Vec<usize> = rp.iter().map(|v| v.len()).collect();
            let rdens = if dens.is_some() {
                let dmsg: Vec<Vec<T>> =
                    peers.iter().map(|&p| sdens[binned.offsets[p] * w..binned.offsets[p + 1] * w].to_vec()).collect();
                comm.neighbour_exchange(&peers, &dmsg).concat()
            } else {
                Vec::new()
            };
            (peers, send, recv, rp.concat(), rdens)
        };
        if dens.is_some() {
            out.clear();
            out.extend(&rpos, &rdens);
        } else {
            *out_pos_only = rpos;
        }
        Route { order, peers, send, recv, full }
    }

    /// Returns `dim` values per owned particle to the callers, in their order.
    fn unsort(&self, route: &Route, values: &[T], dim: usize, out: &mut [T]) {
        let comm = &self.comm;
        let back: Vec<T> = if route.full {
            let sc: Vec<usize> = route.recv.iter().map(|c| c * dim).collect();
            let rc: Vec<usize> = route.send.iter().map(|c| c * dim).collect();
            let mut back = vec![T::ZERO; rc.iter().sum()];
            comm.alltoallv_known(values, &sc, &mut back, &rc);
            back
        } else {
            let mut msgs = Vec::with_capacity(route.peers.len());
            let mut k = 0;
            for &c in &route.recv {
                msgs.push(values[k * dim..(k + c) * dim].to_vec());
                k += c;
            }
            comm.neighbour_exchange(&route.peers, &msgs).concat()
        };
        for (k, &i) in route.order.iter().enumerate() {
            out[i * dim..(i + 1) * dim].copy_from_slice(&back[k * dim..(k + 1) * dim]);
        }
    }

    /// Ghost sources of the ring; returns them with their window cells.
    fn ghosts(&self, owned: &PackedSet<T>) -> (PackedSet<T>, Vec<u32>) {
        let kernel = self.opts.kernel;
        let me = self.comm.rank();
        let mine = self.own.cells(me);
        let ncol = mine[0].len() * mine[1].len();
        let keys: Vec<u32> = owned
            .positions
            .iter()
            .map(|p| {
                let c = self.cells.global_cell(p);
                ((c[1] - mine[0].start) + mine[0].len() * (c[2] - mine[1].start)) as u32
            })
            .collect();
        let by_col = counting_sort(&keys, ncol, self.par());
        let w = kernel.density_width();
        let view = owned.view();
        let g = &self.ghost;
        let mut cmsg = Vec::with_capacity(g.peers.len());
        let mut pmsg = Vec::with_capacity(g.peers.len());
        let mut dmsg = Vec::with_capacity(g.peers.len());
        for cols in &g.send {
            let mut c = Vec::with_capacity(cols.len());
            let mut p = Vec::new();
            let mut d = Vec::new();
            for &col in cols {
                let idx = &by_col.order[by_col.offsets[col]..by_col.offsets[col + 1]];
                c.push(idx.len() as u64);
                for &j in idx {
                    let j = j as usize;
                    p.push(owned.positions[j]);
                    let o = d.len();
                    d.resize(o + w, T::ZERO);
                    view.density(kernel, j, &mut d[o..]);
                }
            }
            cmsg.push(c);
            pmsg.push(p);
            dmsg.push(d);
        }
        let rc = self.comm.neighbour_exchange(&g.peers, &cmsg);
        let rp = self.comm.neighbour_exchange(&g.peers, &pmsg);
        let rd = self.comm.neighbour_exchange(&g.peers, &dmsg);
        let mut set = PackedSet::new(kernel);
        let mut keys = Vec::new();
        for k in 0..g.peers.len() {
            set.extend(&rp[k], &rd[k]);
            let mut j = 0;
            for (e, &n) in rc[k].iter().enumerate() {
                let [ly, lz] = g.recv[k][e];
                for p in &rp[k][j..j + n as usize] {
                    let cx = self.cells.global_cell(p)[0];
                    keys.push(self.cells.linear([cx, ly, lz]));
                }
                j += n as usize;
            }
        }
        (set, keys)
    }

    /// Evaluates the potential of this rank's `sources` at its `targets` into `out` (`output_dim`
    /// values per target, this rank's input order). Collective: every rank calls it with its
    /// own share (possibly empty); any rank's input error stops every rank with that error.
    pub fn evaluate(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        out: &mut [T],
        mode: SortMode,
    ) -> Result<Evaluation> {
        self.evaluate_with_progress(sources, targets, out, mode, &mut |_, _| {})
    }

    /// As [`evaluate`](Self::evaluate), calling `progress(stage, seconds)` after every stage.
    pub fn evaluate_with_progress(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        out: &mut [T],
        mode: SortMode,
        progress: &mut dyn FnMut(Stage, f64),
    ) -> Result<Evaluation> {
        let kernel = self.opts.kernel;
        let dim = kernel.output_dim();
        let domain = self.opts.domain;
        let par = self.par();
        let mut ev = Evaluation::default();
        let mut stage = |ev: &mut Evaluation, s: Stage, t: Instant| {
            let dt = t.elapsed().as_secs_f64();
            ev.times.add(s, dt);
            progress(s, dt);
        };

        // prepare: checks on every rank, then agreement
        let t = Instant::now();
        self.comm.agree(check_inputs(kernel, &domain, sources, targets, out.len()).map(drop))?;
        let mut sums = neutrality_sums(kernel, sources);
        self.comm.all_reduce(&mut sums, ReduceOp::Sum);
        let net = net_charge(kernel, &sums);
        ev.warnings = neutrality_warnings(kernel, &sums, T::BYTES == 4);
        stage(&mut ev, Stage::Prepare, t);

        // MPI-SORT
        let t = Instant::now();
        let mut owned = PackedSet::new(kernel);
        let mut owned_targets = Vec::new();
        let (src_route, trg_route) = {
            let _g = self.comm.stage("sort");
            let sr = self.sort(sources.positions, Some(sources), mode, &mut owned, &mut owned_targets);
            let tr = match targets {
                Targets::Sources => None,
                Targets::Points(p) => Some(self.sort(p, None, mode, &mut PackedSet::new(kernel), &mut owned_targets)),
            };
            (sr, tr)
        };
        stage(&mut ev, Stage::Sort, t);

        // ghost sources
        let t = Instant::now();
        let (ghosts, ghost_keys) = {
            let _g = self.comm.stage("ghost_sources");
            self.ghosts(&owned)
        };
        stage(&mut ev, Stage::Ghost, t);

        // P2P on the window: owned + ghost sources
        let t = Instant::now();
        // owned sources first, ghosts after them: the first `n_own` are the owned set
        let n_own = owned.len();
        let mut keys = self.cells.keys(&owned.positions, par);
        owned.extend(&ghosts.positions, &ghosts.density);
        drop(ghosts);
        let all = &owned;
        let owned_targets: &[[T; 3]] = if trg_route.is_some() { &owned_targets } else { &all.positions[..n_own] };
        keys.extend_from_slice(&ghost_keys);
        let nt = owned_targets.len();
        let mut near_sorted = vec![T::ZERO; nt * dim];
        let mut result = vec![T::ZERO; nt * dim];
        let (cells, isa, xi) = (&self.cells, self.isa, self.params.xi);
        self.pool.install(|| {
            let padded = PaddedSources::build_keyed(cells, kernel, &all.view(), &keys, isa.lanes::<T>(), par);
            let sorted = SortedTargets::build(cells, owned_targets, par);
            ev.padding_efficiency = padded.count as f64 / padded.slots().max(1) as f64;
            p2p(kernel, xi, cells, &padded, &sorted, &mut near_sorted, isa, par);
            sorted.unsort(&near_sorted, dim, &mut result);
        });
        stage(&mut ev, Stage::P2P, t);

        // P2G onto the block (or straight into the FFT grid on one rank)
        let t = Instant::now();
        let ncomp = kernel.grid_components();
        let variant = self.opts.p2g;
        {
            let (window, scratch) = (&self.window, &mut self.p2g_scratch);
            let grid = if self.direct { self.fft.data_mut() } else { self.block.as_mut_slice() };
            let view = owned.first(n_own);
            self.pool.install(|| p2g(variant, kernel, window, &view, grid, scratch, isa, par));
        }
        stage(&mut ev, Stage::P2G, t);

        let t = Instant::now();
        if !self.direct {
            let _g = self.comm.stage("halo");
            self.halo_spread(ncomp);
        }
        stage(&mut ev, Stage::Halo, t);

        // FFT, CNV, IFFT
        let t = Instant::now();
        {
            let _g = self.comm.stage("fft");
            self.pool.install(|| self.fft.forward());
        }
        stage(&mut ev, Stage::FFT, t);
        let t = Instant::now();
        let sl = self.fft.spectral_layout();
        let block = SpectralBlock {
            x: sl.x,
            y: sl.y,
            z: sl.z,
            row_stride: sl.row_stride,
            component_stride: sl.component_stride,
        };
        let (cnv, data) = (&self.cnv, self.fft.data_mut());
        self.pool.install(|| cnv.apply_block(data, &block, par));
        stage(&mut ev, Stage::CNV, t);
        let t = Instant::now();
        {
            let _g = self.comm.stage("ifft");
            self.pool.install(|| self.fft.backward());
        }
        stage(&mut ev, Stage::IFFT, t);

        let t = Instant::now();
        if !self.direct {
            let _g = self.comm.stage("grid_ghost");
            self.halo_gather(dim);
        }
        stage(&mut ev, Stage::GridGhost, t);

        // G2P
        let t = Instant::now();
        let mut far = vec![T::ZERO; nt * dim];
        {
            let window = &self.window;
            let grid = if self.direct { self.fft.data() } else { self.block.as_slice() };
            let gather = &mut self.gather;
            let variant = self.opts.g2p;
            self.pool.install(|| interpolate(variant, window, dim, grid, gather, owned_targets, &mut far, isa, par));
        }
        let background = T::from_f64(-PI * net / (domain.volume() * self.params.xi * self.params.xi));
        for (r, f) in result.iter_mut().zip(&far) {
            *r += *f + background;
        }
        stage(&mut ev, Stage::G2P, t);

        // back to the callers
        let t = Instant::now();
        {
            let _g = self.comm.stage("return");
            self.unsort(trg_route.as_ref().unwrap_or(&src_route), &result, dim, out);
        }
        stage(&mut ev, Stage::Return, t);
        Ok(ev)
    }

    /// Reverse halo exchange: adds the block's rows into their FFT owners' rows.
    fn halo_spread(&mut self, ncomp: usize) {
        let Some(h) = self.halo.as_mut() else { return };
        let mx = self.window.layout.global[0];
        let (brs, brl) = (self.window.layout.row_stride(), self.window.layout.real_len());
        let (frs, fcs) = (self.fft.row_stride(), self.fft.component_stride());
        let loc = self.fft.real_topology().local();
        let fft_rows = loc[1] * loc[2];
        let block = self.block.as_slice();
        let data = self.fft.data_mut();
        for c in 0..ncomp {
            data[c * fcs..c * fcs + fft_rows * frs].iter_mut().for_each(|v| *v = T::ZERO);
        }
        let (send_rows, recv_rows) = (&h.send_rows, &h.recv_rows);
        h.spread.execute(
            Dir::Forward,
            |peer, buf| {
                let out = reals_as_t_mut::<T>(buf);
                let mut k = 0;
                for c in 0..ncomp {
                    for &r in &send_rows[peer] {
                        out[k..k + mx].copy_from_slice(&block[c * brl + r * brs..][..mx]);
                        k += mx;
                    }
                }
            },
            |peer, buf| {
                let inp = reals_as_t::<T>(buf);
                let mut k = 0;
                for c in 0..ncomp {
                    for &r in &recv_rows[peer] {
                        let dst = &mut data[c * fcs + r * frs..][..mx];
                        for (d, &s) in dst.iter_mut().zip(&inp[k..k + mx]) {
                            *d += s;
                        }
                        k += mx;
                    }
                }
            },
        );
    }

    /// Forward ghost-grid exchange: copies the FFT owners' rows into every block row.
    fn halo_gather(&mut self, dim: usize) {
        let Some(h) = self.halo.as_mut() else { return };
        let mx = self.window.layout.global[0];
        let (brs, brl) = (self.window.layout.row_stride(), self.window.layout.real_len());
        let (frs, fcs) = (self.fft.row_stride(), self.fft.component_stride());
        let data = self.fft.data();
        let block = self.block.as_mut_slice();
        let (send_rows, recv_rows) = (&h.send_rows, &h.recv_rows);
        h.gather.execute(
            Dir::Backward,
            |peer, buf| {
                let out = reals_as_t_mut::<T>(buf);
                let mut k = 0;
                for c in 0..dim {
                    for &r in &recv_rows[peer] {
                        out[k..k + mx].copy_from_slice(&data[c * fcs + r * frs..][..mx]);
                        k += mx;
                    }
                }
            },
            |peer, buf| {
                let inp = reals_as_t::<T>(buf);
                let mut k = 0;
                for c in 0..dim {
                    for &r in &send_rows[peer] {
                        block[c * brl + r * brs..][..mx].copy_from_slice(&inp[k..k + mx]);
                        k += mx;
                    }
                }
            },
        );
    }
}

/// The `T` values stored in a block of `f64` slots (exchange plans carry 8-byte slots).
fn reals_as_t<T: Real>(buf: &[f64]) -> &[T] {
    // SAFETY: f64 slots are 8-byte aligned, T is f32 or f64 (align <= 8), every bit pattern valid.
    unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const T, std::mem::size_of_val(buf) / T::BYTES) }
}

/// Mutable version of [`reals_as_t`].
fn reals_as_t_mut<T: Real>(buf: &mut [f64]) -> &mut [T] {
    // SAFETY: as in `reals_as_t`.
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut T, std::mem::size_of_val(buf) / T::BYTES) }
}
