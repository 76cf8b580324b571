//! Typed per-stage wall-clock timers (the keys of reports and benchmarks).

use std::time::Instant;

/// A stage of one evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Input checks, cell lists, sorting.
    Prepare,
    /// MPI-SORT: particles to the ranks that own them.
    Sort,
    /// Ghost sources from neighbouring ranks (within r_c of the subdomain).
    Ghost,
    /// Near field: particle-to-particle on cell lists.
    P2P,
    /// Far field: particle-to-grid spreading (including periodic folding).
    P2G,
    /// Reverse halo exchange: spread values on other ranks' grid points added to their owners.
    Halo,
    /// Forward FFT of all grid components.
    FFT,
    /// Fourier-space kernel and window deconvolution.
    CNV,
    /// Inverse FFT of the output components.
    IFFT,
    /// Forward ghost-grid exchange: owners' grid values to the ranks that interpolate them.
    GridGhost,
    /// Far field: grid-to-particle interpolation.
    G2P,
    /// Results back to the calling ranks, in input order.
    Return,
}

impl Stage {
    /// All stages in execution order.
    pub const ALL: [Stage; 12] = [
        Stage::Prepare,
        Stage::Sort,
        Stage::Ghost,
        Stage::P2P,
        Stage::P2G,
        Stage::Halo,
        Stage::FFT,
        Stage::CNV,
        Stage::IFFT,
        Stage::GridGhost,
        Stage::G2P,
        Stage::Return,
    ];

    /// Name used in reports and tables.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Prepare => "prepare",
            Stage::Sort => "sort",
            Stage::Ghost => "ghost",
            Stage::P2P => "P2P",
            Stage::P2G => "P2G",
            Stage::Halo => "halo",
            Stage::FFT => "FFT",
            Stage::CNV => "CNV",
            Stage::IFFT => "IFFT",
            Stage::GridGhost => "grid_ghost",
            Stage::G2P => "G2P",
            Stage::Return => "return",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Seconds spent per stage (accumulates over calls).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    seconds: [f64; 12],
}

impl StageTimes {
    /// Adds `seconds` to `stage`.
    pub fn add(&mut self, stage: Stage, seconds: f64) {
        self.seconds[stage.index()] += seconds;
    }

    /// Runs `f`, charging its wall time to `stage`.
    pub fn time<R>(&mut self, stage: Stage, f: impl FnOnce() -> R) -> R {
        let t0 = Instant::now();
        let r = f();
        self.add(stage, t0.elapsed().as_secs_f64());
        r
    }

    /// Seconds of one stage.
    pub fn get(&self, stage: Stage) -> f64 {
        self.seconds[stage.index()]
    }

    /// Sum over all stages.
    pub fn total(&self) -> f64 {
        self.seconds.iter().sum()
    }

    /// `(stage, seconds)` in execution order.
    pub fn iter(&self) -> impl Iterator<Item = (Stage, f64)> + '_ {
        Stage::ALL.iter().map(move |&s| (s, self.get(s)))
    }

    /// Sum of two records.
    pub fn merged(&self, other: &StageTimes) -> StageTimes {
        let mut out = *self;
        for (a, b) in out.seconds.iter_mut().zip(other.seconds.iter()) {
            *a += b;
        }
        out
    }
}
