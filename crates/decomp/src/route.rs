//! MPI-SORT and its inverse: particles to the ranks that own them, results back to the callers.
//!
//! [`Route::send_to_owners`] bins a rank's particles by owner (the deterministic counting sort of
//! [`crate::sort`]), sends positions and packed densities with `MPI_Alltoallv` (or only to the
//! 3x3 process-grid neighbours, [`SortMode::Neighbour`]), and remembers the send order;
//! [`Route::return_to_callers`] sends per-particle results back by the reverse exchange and
//! scatters them into the caller's order. Nothing here depends on the method: the Ewald
//! pipeline, the treecode and a particle-mesh Poisson solver route their particles alike.

use parki_comm::{Comm, Pod};
use parki_core::{Kernel, Par, Real, SourceSet};

use crate::sort::counting_sort;

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

/// Where one rank's particles went: the caller's indices in send order and the counts per peer.
#[derive(Clone, Debug, Default)]
pub struct Route {
    order: Vec<usize>,
    peers: Vec<usize>,
    send: Vec<usize>,
    recv: Vec<usize>,
    full: bool,
}

/// What a rank received: the particles it owns, in the order of the peers that sent them.
#[derive(Clone, Debug, Default)]
pub struct Received<T> {
    /// Positions.
    pub positions: Vec<[T; 3]>,
    /// Packed densities (`Kernel::density_width` per particle), empty for targets.
    pub density: Vec<T>,
}

impl Route {
    /// Sends particle `i` (its position and, with `densities`, its packed densities) to rank
    /// `owners[i]`. `neighbours` are the ranks a [`SortMode::Neighbour`] exchange may reach
    /// (sorted; the caller's process-grid neighbourhood). Collective over `comm`.
    pub fn send_to_owners<T: Real + Pod>(
        comm: &Comm,
        owners: &[u32],
        neighbours: &[usize],
        mode: SortMode,
        positions: &[[T; 3]],
        densities: Option<(Kernel, &dyn SourceSet<T>)>,
        par: Par,
    ) -> (Route, Received<T>) {
        let far =
            mode == SortMode::Neighbour && owners.iter().any(|&o| neighbours.binary_search(&(o as usize)).is_err());
        let full = mode == SortMode::Full || comm.max(u64::from(far)) > 0;
        let binned = counting_sort(owners, comm.size(), par);
        let order: Vec<usize> = binned.order.iter().map(|&i| i as usize).collect();
        let w = densities.map_or(0, |(k, _)| k.density_width());
        let spos: Vec<[T; 3]> = order.iter().map(|&i| positions[i]).collect();
        let mut sdens = vec![T::ZERO; order.len() * w];
        if let Some((kernel, s)) = densities {
            for (k, &i) in order.iter().enumerate() {
                s.density(kernel, i, &mut sdens[k * w..(k + 1) * w]);
            }
        }
        let counts: Vec<usize> = (0..comm.size()).map(|r| binned.count(r)).collect();
        let (peers, send, recv, got) = if full {
            let mut rpos = Vec::new();
            let recv = comm.alltoallv(&spos, &counts, &mut rpos);
            let mut rdens = vec![T::ZERO; rpos.len() * w];
            if w > 0 {
                let sc: Vec<usize> = counts.iter().map(|c| c * w).collect();
                let rc: Vec<usize> = recv.iter().map(|c| c * w).collect();
                comm.alltoallv_known(&sdens, &sc, &mut rdens, &rc);
            }
            ((0..comm.size()).collect(), counts, recv, Received { positions: rpos, density: rdens })
        } else {
            let peers = neighbours.to_vec();
            let send: Vec<usize> = peers.iter().map(|&p| counts[p]).collect();
            let at = |p: usize| binned.offsets[p]..binned.offsets[p + 1];
            let pmsg: Vec<Vec<[T; 3]>> = peers.iter().map(|&p| spos[at(p)].to_vec()).collect();
            let rp = comm.neighbour_exchange(&peers, &pmsg);
            let recv: Vec<usize> = rp.iter().map(|v| v.len()).collect();
            let density = if w > 0 {
                let dmsg: Vec<Vec<T>> = peers.iter().map(|&p| sdens[at(p).start * w..at(p).end * w].to_vec()).collect();
                comm.neighbour_exchange(&peers, &dmsg).concat()
            } else {
                Vec::new()
            };
            (peers, send, recv, Received { positions: rp.concat(), density })
        };
        (Route { order, peers, send, recv, full }, got)
    }

    /// Sends `dim` values per particle (`values` in the caller's order, as the positions given
    /// to [`Route::send_to_owners`]) along the same route: the owners get them in the order
    /// they received the positions. For payloads the positions' exchange did not carry (a
    /// method's own densities). Collective.
    pub fn forward<T: Pod + Default>(&self, comm: &Comm, values: &[T], dim: usize) -> Vec<T> {
        assert_eq!(values.len(), self.order.len() * dim, "one value block per sent particle");
        let mut send = Vec::with_capacity(values.len());
        for &i in &self.order {
            send.extend_from_slice(&values[i * dim..(i + 1) * dim]);
        }
        if self.full {
            let sc: Vec<usize> = self.send.iter().map(|c| c * dim).collect();
            let rc: Vec<usize> = self.recv.iter().map(|c| c * dim).collect();
            let mut got = vec![T::default(); rc.iter().sum()];
            comm.alltoallv_known(&send, &sc, &mut got, &rc);
            got
        } else {
            let mut msgs = Vec::with_capacity(self.peers.len());
            let mut k = 0;
            for &c in &self.send {
                msgs.push(send[k * dim..(k + c) * dim].to_vec());
                k += c;
            }
            comm.neighbour_exchange(&self.peers, &msgs).concat()
        }
    }

    /// Particles this rank received.
    pub fn received(&self) -> usize {
        self.recv.iter().sum()
    }

    /// Whether the last exchange went to every rank (the neighbour-only mode fell back, or was
    /// not asked for).
    pub fn was_full(&self) -> bool {
        self.full
    }

    /// Returns `dim` values per received particle (in received order) to the ranks that sent
    /// them, and writes them into `out` in the caller's order. Collective.
    pub fn return_to_callers<T: Pod + Default>(&self, comm: &Comm, values: &[T], dim: usize, out: &mut [T]) {
        assert_eq!(values.len(), self.received() * dim, "one result per received particle");
        assert_eq!(out.len(), self.order.len() * dim, "one result per sent particle");
        let back: Vec<T> = if self.full {
            let sc: Vec<usize> = self.recv.iter().map(|c| c * dim).collect();
            let rc: Vec<usize> = self.send.iter().map(|c| c * dim).collect();
            let mut back = vec![T::default(); rc.iter().sum()];
            comm.alltoallv_known(values, &sc, &mut back, &rc);
            back
        } else {
            let mut msgs = Vec::with_capacity(self.peers.len());
            let mut k = 0;
            for &c in &self.recv {
                msgs.push(values[k * dim..(k + c) * dim].to_vec());
                k += c;
            }
            comm.neighbour_exchange(&self.peers, &msgs).concat()
        };
        for (k, &i) in self.order.iter().enumerate() {
            out[i * dim..(i + 1) * dim].copy_from_slice(&back[k * dim..(k + 1) * dim]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Route, SortMode};
    use parki_comm::Comm;
    use parki_core::{Kernel, Par, Sources};

    #[test]
    fn one_rank_round_trip_keeps_the_order() {
        let pos: Vec<[f64; 3]> = (0..10).map(|i| [i as f64, 0.0, 0.0]).collect();
        let q: Vec<f64> = (0..10).map(|i| i as f64 * 0.5).collect();
        let src = Sources::laplace(&pos, &q);
        let owners = vec![0u32; 10];
        let comm = Comm::single();
        for mode in [SortMode::Full, SortMode::Neighbour] {
            let (route, got) =
                Route::send_to_owners(&comm, &owners, &[0], mode, &pos, Some((Kernel::Laplace, &src as _)), Par::Seq);
            assert_eq!(got.positions, pos);
            assert_eq!(got.density, q);
            let mut out = vec![0.0; 10];
            route.return_to_callers(&comm, &got.density, 1, &mut out);
            assert_eq!(out, q);
            let tagged: Vec<u64> = (0..20).collect();
            assert_eq!(route.forward(&comm, &tagged, 2), tagged);
        }
    }
}
