//! The seam between the treecode's host side and a device (parki-gpu's CUDA backend).
//!
//! The host builds the trees, runs the dual traversal and the locally essential tree, and
//! decides what is computed; a [`TreeBackend`] computes: the upward pass (eqs. (9), (16)), the
//! four interaction lists of each source side (eqs. (6), (8), (12), (15)) and the downward pass
//! (eqs. (20), (21)), with the data of one evaluation resident on the device
//! ([`TreeSession`]). The lists arrive as work items in compressed rows ([`ListWork`]), so a
//! device runs every list of one source side in one launch rather than one per entry (the
//! launch-bound design the BLDTT digest notes for BaryTree).
//!
//! Layouts are the host's: points in tree order, densities component-major
//! (`q[c * len + j]`), a cluster's proxies `k1 + m (k2 + m k3)` with `m = n + 1` and its
//! charges or potentials `m^3` blocks of `DENSITY` or `VALUE` values (as
//! [`crate::ProxyCharges`]).

use parki_core::Result;

use crate::cheb::AxisNodes;
use crate::compute::Csr;
use crate::tree::Tree;

/// A built-in kernel as a device evaluates it: its code in `kernels/treecode.cu` and its
/// parameters (`kappa`, `epsilon`, `wavenumber`; the regularised Yukawa's `kappa, epsilon`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceKernel {
    /// `TC_COULOMB` 0 .. `TC_STOKES` 7 (the order of [`crate::TreeKernel`]).
    pub code: u32,
    /// The kernel's parameters.
    pub params: [f64; 2],
}

/// A tree as the device takes it: the tree, the proxy nodes of each cluster, the points in
/// tree order, and for sources the densities (component-major, `density` components).
#[derive(Clone, Copy)]
pub struct TreeView<'a> {
    /// The tree.
    pub tree: &'a Tree,
    /// Each cluster's nodes.
    pub nodes: &'a [[AxisNodes; 3]],
    /// x, y and z in tree order.
    pub points: [&'a [f64]; 3],
    /// Densities, `q[c * len + j]` (empty for targets).
    pub densities: &'a [f64],
}

/// Source blocks per work item: item `i`'s are `ranges[offsets[i]..offsets[i + 1]]`, each
/// `[begin, end)` into the side's particles or proxies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    /// `items + 1` offsets.
    pub offsets: Vec<u32>,
    /// The blocks.
    pub ranges: Vec<[u32; 2]>,
}

impl Rows {
    /// The rows of `first` then those of `second`.
    pub(crate) fn concat(first: &Csr, second: &Csr) -> Self {
        let mut offsets = Vec::with_capacity(first.offsets.len() + second.offsets.len() - 1);
        offsets.extend(first.offsets.iter().map(|&o| o as u32));
        let base = first.ranges.len();
        offsets.extend(second.offsets[1..].iter().map(|&o| (base + o) as u32));
        let ranges = first.ranges.iter().chain(&second.ranges).map(|&(b, e)| [b as u32, e as u32]).collect();
        Self { offsets, ranges }
    }
}

/// One source side's lists as work items: the target tree's leaves (in `tree.leaves` order),
/// then the target clusters `clusters` whose proxies CP and CC reach. `particles` are PP (leaf
/// items) and CP (cluster items), `proxies` PC and CC.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListWork {
    /// Target clusters of the cluster items.
    pub clusters: Vec<u32>,
    /// Blocks of the side's particles per item.
    pub particles: Rows,
    /// Blocks of the side's proxies per item.
    pub proxies: Rows,
}

/// A source side other than the local tree (the locally essential tree's clusters): particles
/// and proxies as points with densities, component-major.
#[derive(Clone, Copy)]
pub struct SidePoints<'a> {
    /// Particles' x, y, z.
    pub particles: [&'a [f64]; 3],
    /// Their densities.
    pub particle_densities: &'a [f64],
    /// Proxies' x, y, z.
    pub proxies: [&'a [f64]; 3],
    /// Their densities (proxy charges).
    pub proxy_densities: &'a [f64],
}

/// A device that runs the treecode's compute stages (shared by reference with the thread pool
/// the evaluation runs in).
pub trait TreeBackend: Sync {
    /// The device and its variants, for reports.
    fn describe(&self) -> String;

    /// Opens one evaluation of `kernel` (`density` components per source, `value` values per
    /// target) at degree `degree`: uploads the source tree's particles (when this rank has
    /// sources) and the target tree's points (when it has targets).
    ///
    /// # Errors
    /// The device's: memory, launches.
    fn begin<'a>(
        &'a self,
        kernel: DeviceKernel,
        density: usize,
        value: usize,
        degree: usize,
        sources: Option<TreeView<'a>>,
        targets: Option<TreeView<'a>>,
    ) -> Result<Box<dyn TreeSession + 'a>>;
}

/// One evaluation on a device.
pub trait TreeSession {
    /// The upward pass over the source tree; the proxy charges of every cluster
    /// ([`crate::ProxyCharges::charges`]'s layout) when `download`.
    ///
    /// # Errors
    /// The device's.
    fn upward(&mut self, download: bool) -> Result<Option<Vec<f64>>>;

    /// Adds the lists `work` against the local source tree, whose proxies are those of the
    /// clusters `used` (block `i` for `used[i]`) from the upward pass.
    ///
    /// # Errors
    /// The device's.
    fn apply_local(&mut self, work: &ListWork, used: &[u32]) -> Result<()>;

    /// Adds the lists `work` against another source side.
    ///
    /// # Errors
    /// The device's.
    fn apply_remote(&mut self, work: &ListWork, side: &SidePoints<'_>) -> Result<()>;

    /// The downward pass over the clusters marked `active` (every cluster at or below one that
    /// CP or CC reached), then the targets' values in tree order (`value` per target).
    ///
    /// # Errors
    /// The device's.
    fn finish(&mut self, active: &[bool]) -> Result<Vec<f64>>;
}
