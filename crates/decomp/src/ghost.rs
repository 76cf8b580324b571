//! [`GhostPlan`]: the ghost sources a rank needs from its neighbours, by cell column.
//!
//! Every rank's window is its owned columns plus a one-layer ring ([`CellOwnership::ring`]).
//! The ghost pattern is static: each rank enumerates every neighbour's ring in the same order,
//! so a message carries one count per ring column and no indices. A rank may receive the same
//! column twice with different periodic shifts (two parts along an axis): they are two ring
//! entries, stored in two window columns.

use parki_comm::{Comm, Pod};
use parki_core::{Kernel, PackedSet, Par, Real, SourceSet};

use crate::ownership::CellOwnership;
use crate::sort::counting_sort;

/// The static ghost-source pattern of one rank.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GhostPlan {
    peers: Vec<usize>,
    /// Per peer: indices of my owned columns whose sources go to it, in its ring order.
    send: Vec<Vec<usize>>,
    /// Per peer: my window-local `(ly, lz)` of what it sends, in my ring order.
    recv: Vec<Vec<[usize; 2]>>,
    /// My owned columns.
    columns: usize,
}

/// Ghost sources received, with the window column each is stored in.
#[derive(Clone, Debug)]
pub struct Ghosts<T> {
    /// The sources (positions unshifted, as their owners hold them).
    pub sources: PackedSet<T>,
    /// Window-local `(ly, lz)` column of every ghost.
    pub columns: Vec<[usize; 2]>,
    /// The ghosts' position residuals ([`SourceSet::residuals`]) where the owned sources have
    /// them, else empty.
    pub residuals: Vec<[T; 3]>,
}

impl GhostPlan {
    /// The pattern of rank `me` under `own`.
    pub fn new(own: &CellOwnership, me: usize) -> Self {
        let peers = own.neighbours(me);
        let my_ring = own.ring(me);
        let mut send = Vec::with_capacity(peers.len());
        let mut recv = Vec::with_capacity(peers.len());
        for &p in &peers {
            send.push(
                own.ring(p)
                    .iter()
                    .filter(|(_, c)| own.owner(c[0], c[1]) == me)
                    .map(|(_, c)| own.column_index(me, c[0], c[1]))
                    .collect(),
            );
            recv.push(my_ring.iter().filter(|(_, c)| own.owner(c[0], c[1]) == p).map(|(l, _)| *l).collect());
        }
        Self { peers, send, recv, columns: own.column_count(me) }
    }

    /// Whether the rank needs no ghosts (one rank, or no split axis).
    pub fn is_empty(&self) -> bool {
        self.recv.iter().all(Vec::is_empty) && self.send.iter().all(Vec::is_empty)
    }

    /// Exchanges the ghost sources: `owned` are this rank's sources and `columns[j]` the owned
    /// column index ([`CellOwnership::column_index`]) of source `j`, with their position
    /// residuals where `owned` has them (one more message per neighbour; every rank must agree
    /// on whether they travel). Collective over the neighbours.
    pub fn exchange<T: Real + Pod>(
        &self,
        comm: &Comm,
        kernel: Kernel,
        owned: &dyn SourceSet<T>,
        columns: &[u32],
        par: Par,
    ) -> Ghosts<T> {
        let by_col = counting_sort(columns, self.columns, par);
        let w = kernel.density_width();
        let positions = owned.positions();
        let mut cmsg = Vec::with_capacity(self.peers.len());
        let mut pmsg = Vec::with_capacity(self.peers.len());
        let mut dmsg = Vec::with_capacity(self.peers.len());
        let residuals = owned.residuals();
        let mut rmsg: Vec<Vec<[T; 3]>> = Vec::with_capacity(self.peers.len());
        for cols in &self.send {
            let n: usize = cols.iter().map(|&c| by_col.count(c)).sum();
            let mut c = Vec::with_capacity(cols.len());
            let mut p = Vec::with_capacity(n);
            let mut d = vec![T::ZERO; n * w];
            let mut r = Vec::with_capacity(if residuals.is_some() { n } else { 0 });
            for &col in cols {
                let idx = &by_col.order[by_col.offsets[col]..by_col.offsets[col + 1]];
                c.push(idx.len() as u64);
                for &j in idx {
                    let j = j as usize;
                    let o = p.len() * w;
                    owned.density(kernel, j, &mut d[o..o + w]);
                    p.push(positions[j]);
                    if let Some(res) = residuals {
                        r.push(res[j]);
                    }
                }
            }
            cmsg.push(c);
            pmsg.push(p);
            dmsg.push(d);
            rmsg.push(r);
        }
        let rc = comm.neighbour_exchange(&self.peers, &cmsg);
        let rp = comm.neighbour_exchange(&self.peers, &pmsg);
        let rd = comm.neighbour_exchange(&self.peers, &dmsg);
        let rr = if residuals.is_some() { comm.neighbour_exchange(&self.peers, &rmsg).concat() } else { Vec::new() };
        let mut sources = PackedSet::new(kernel);
        let mut cols = Vec::new();
        for k in 0..self.peers.len() {
            sources.extend(&rp[k], &rd[k]);
            for (e, &n) in rc[k].iter().enumerate() {
                cols.extend(std::iter::repeat_n(self.recv[k][e], n as usize));
            }
        }
        Ghosts { sources, columns: cols, residuals: rr }
    }
}
