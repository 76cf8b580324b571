//! The stages of one spectral Ewald evaluation, in execution order (the keys of reports,
//! progress lines, timing tables and communication counters).

use parki_core::{StageKind, StageName};
use parki_fft3d::FftStage;

/// A stage of the spectral Ewald pipeline (data flow of ARCHITECTURE.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EwaldStage {
    /// Input checks and the neutrality sums.
    Prepare,
    /// MPI-SORT: particles to the ranks that own them.
    Sort,
    /// Ghost sources from neighbouring ranks (the ring of cell columns around a rank's own).
    GhostSources,
    /// Cell lists: the particles' cells and the sources and targets binned by cell (on a device
    /// backend the particles' uploads and its counting sorts too).
    CellLists,
    /// Near field: particle-to-particle over the cell lists.
    P2P,
    /// Far field: particle-to-grid spreading.
    P2G,
    /// Reverse halo exchange: spread values on other ranks' grid points added to their owners.
    Halo,
    /// Forward FFT of all grid components (its switches are counted as [`FftStage`]s).
    FFT,
    /// Fourier-space kernel and window deconvolution.
    CNV,
    /// Inverse FFT of the output components.
    IFFT,
    /// Forward ghost-grid exchange: owners' grid values to the ranks that interpolate them.
    GridGhost,
    /// Far field: grid-to-particle interpolation, and the sum with the near field.
    G2P,
    /// Results back to the calling ranks, in input order.
    Return,
}

impl StageKind for EwaldStage {
    const ALL: &'static [Self] = &[
        EwaldStage::Prepare,
        EwaldStage::Sort,
        EwaldStage::GhostSources,
        EwaldStage::CellLists,
        EwaldStage::P2P,
        EwaldStage::P2G,
        EwaldStage::Halo,
        EwaldStage::FFT,
        EwaldStage::CNV,
        EwaldStage::IFFT,
        EwaldStage::GridGhost,
        EwaldStage::G2P,
        EwaldStage::Return,
    ];

    fn name(self) -> &'static str {
        match self {
            EwaldStage::Prepare => "prepare",
            EwaldStage::Sort => "sort",
            EwaldStage::GhostSources => "ghost_sources",
            EwaldStage::CellLists => "cell_lists",
            EwaldStage::P2P => "P2P",
            EwaldStage::P2G => "P2G",
            EwaldStage::Halo => "halo",
            EwaldStage::FFT => "FFT",
            EwaldStage::CNV => "CNV",
            EwaldStage::IFFT => "IFFT",
            EwaldStage::GridGhost => "grid_ghost",
            EwaldStage::G2P => "G2P",
            EwaldStage::Return => "return",
        }
    }
}

impl EwaldStage {
    /// The communication stages of an evaluation, in data-flow order: the keys of the traffic
    /// counters a distributed run reports (the FFT's switches under their own names).
    pub fn traffic() -> Vec<StageName> {
        let mut v: Vec<StageName> =
            [EwaldStage::Sort, EwaldStage::GhostSources, EwaldStage::Halo].into_iter().map(StageName::from).collect();
        v.extend(<FftStage as StageKind>::ALL.iter().map(|&s| StageName::from(s)));
        v.extend([EwaldStage::GridGhost, EwaldStage::Return].map(StageName::from));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::EwaldStage;
    use parki_core::StageKind;

    #[test]
    fn names_are_unique_and_traffic_is_named_once() {
        let mut names: Vec<&str> = EwaldStage::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EwaldStage::ALL.len());
        let t: Vec<&str> = EwaldStage::traffic().iter().map(|s| s.as_str()).collect();
        assert_eq!(t, ["sort", "ghost_sources", "halo", "fft_switch1", "fft_switch2", "grid_ghost", "return"]);
    }
}
