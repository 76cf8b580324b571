//! Typed, open per-stage wall-clock timers (the keys of reports, tables and benchmarks).
//!
//! Every method brings its own stages: an enum implementing [`StageKind`] that lists them in
//! execution order (the spectral Ewald pipeline's `EwaldStage`, the distributed FFT's switch
//! stages, later the Poisson solver's and the tree codes'). [`StageTimes`] records seconds per
//! stage of one such enum; [`StageName`] is the type-erased name under which communication
//! counters are kept, made only from a [`StageKind`] value, so that no string has to match a
//! list elsewhere.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::time::Instant;

/// The stages of one method, in execution order.
pub trait StageKind: Copy + Eq + Debug + Send + Sync + 'static {
    /// All stages in execution order.
    const ALL: &'static [Self];

    /// Name in reports, tables and communication counters (unique within the method).
    fn name(self) -> &'static str;

    /// Position in [`ALL`](Self::ALL).
    fn index(self) -> usize {
        Self::ALL.iter().position(|&s| s == self).expect("every stage is listed in StageKind::ALL")
    }
}

/// The name of a stage of any method: the key of communication counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StageName(&'static str);

impl StageName {
    /// The name.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl<S: StageKind> From<S> for StageName {
    fn from(s: S) -> Self {
        StageName(s.name())
    }
}

impl std::fmt::Display for StageName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Seconds spent per stage of `S` (accumulates over calls).
#[derive(Clone, Debug, PartialEq)]
pub struct StageTimes<S: StageKind> {
    seconds: Vec<f64>,
    _stages: PhantomData<S>,
}

impl<S: StageKind> Default for StageTimes<S> {
    fn default() -> Self {
        Self { seconds: vec![0.0; S::ALL.len()], _stages: PhantomData }
    }
}

impl<S: StageKind> StageTimes<S> {
    /// Adds `seconds` to `stage`.
    pub fn add(&mut self, stage: S, seconds: f64) {
        self.seconds[stage.index()] += seconds;
    }

    /// Runs `f`, charging its wall time to `stage`.
    pub fn time<R>(&mut self, stage: S, f: impl FnOnce() -> R) -> R {
        let t0 = Instant::now();
        let r = f();
        self.add(stage, t0.elapsed().as_secs_f64());
        r
    }

    /// Seconds of one stage.
    pub fn get(&self, stage: S) -> f64 {
        self.seconds[stage.index()]
    }

    /// Sum over all stages.
    pub fn total(&self) -> f64 {
        self.seconds.iter().sum()
    }

    /// `(stage, seconds)` in execution order.
    pub fn iter(&self) -> impl Iterator<Item = (S, f64)> + '_ {
        S::ALL.iter().map(move |&s| (s, self.get(s)))
    }

    /// Seconds in execution order (one value per stage of `S::ALL`).
    pub fn as_slice(&self) -> &[f64] {
        &self.seconds
    }

    /// Sum of two records.
    pub fn merged(&self, other: &StageTimes<S>) -> StageTimes<S> {
        let mut out = self.clone();
        for (a, b) in out.seconds.iter_mut().zip(other.seconds.iter()) {
            *a += b;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{StageKind, StageName, StageTimes};

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Demo {
        A,
        B,
    }

    impl StageKind for Demo {
        const ALL: &'static [Self] = &[Demo::A, Demo::B];
        fn name(self) -> &'static str {
            match self {
                Demo::A => "a",
                Demo::B => "b",
            }
        }
    }

    #[test]
    fn times_accumulate_per_stage_in_order() {
        let mut t = StageTimes::<Demo>::default();
        t.add(Demo::B, 2.0);
        t.add(Demo::A, 0.5);
        t.add(Demo::B, 1.0);
        assert_eq!(t.get(Demo::B), 3.0);
        assert_eq!(t.total(), 3.5);
        assert_eq!(t.iter().map(|(s, _)| s.name()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(t.merged(&t).get(Demo::A), 1.0);
        assert_eq!(StageName::from(Demo::B).as_str(), "b");
    }
}
