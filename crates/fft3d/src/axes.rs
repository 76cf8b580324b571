//! Per-axis transforms of a distributed 3-D transform (FLUPS, digest seed-002 §2.1).
//!
//! Each axis of [`DistFft`](crate::DistFft) has an [`AxisSpec`]: the data points it carries,
//! the 1-D transform ([`AxisTransform`]: a DFT, a DCT/DST, or none), and where data and
//! transform sit in the axis's *line*, the storage of the whole axis in the topology where it
//! is not split. Zero padding (the doubled domains of unbounded directions) is the part of the
//! line outside the data; it exists only from the switch that makes the axis whole, so the
//! transforms of the earlier axes skip it (FLUPS §4.2). After the transform the line holds the
//! axis's spectral slots, which the later topologies split.

use parki_core::{Error, Result};

use crate::ffi::R2rKind;

/// The 1-D transform along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisTransform {
    /// Complex DFT (`e^{-i k x}` forward); real-to-complex on the first axis when the input is
    /// real, the line then holding `fft_len / 2 + 1` complex slots.
    Dft,
    /// Real-to-real transform; `forward` and `backward` kinds (a DCT-II and its DCT-III, ...).
    /// On complex data (after a DFT axis) it transforms real and imaginary parts.
    R2r {
        /// Forward kind.
        forward: R2rKind,
        /// Backward kind.
        backward: R2rKind,
    },
    /// No transform: the axis is carried through the switches as it is.
    Identity,
}

/// One axis of a [`DistFft`](crate::DistFft) (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisSpec {
    /// Data points along the axis in real space (what the caller's block holds).
    pub n: usize,
    /// The transform.
    pub transform: AxisTransform,
    /// Transform length.
    pub fft_len: usize,
    /// First slot of the transform in the line.
    pub fft_offset: usize,
    /// Slots of the line (ignored on the real-to-complex axis: `fft_len / 2 + 1`).
    pub line: usize,
    /// First slot of the data in the line (0 on the real-to-complex axis).
    pub data_offset: usize,
    /// First slot of the backward transform in the line (`fft_offset` unless a backward kind
    /// of another parity reads the spectrum at a shifted place, see
    /// [`with_backward_offsets`](Self::with_backward_offsets)).
    pub backward_fft_offset: usize,
    /// First slot of the backward transform's data in the line (`data_offset` unless shifted).
    pub backward_data_offset: usize,
}

impl AxisSpec {
    /// A periodic axis of `n` points: DFT of length `n`, no padding.
    pub fn periodic(n: usize) -> Self {
        Self::plain(n, AxisTransform::Dft, n, 0, n, 0)
    }

    fn plain(n: usize, transform: AxisTransform, fft_len: usize, fft_offset: usize, line: usize, data: usize) -> Self {
        Self {
            n,
            transform,
            fft_len,
            fft_offset,
            line,
            data_offset: data,
            backward_fft_offset: fft_offset,
            backward_data_offset: data,
        }
    }

    /// `n` points zero-padded to a DFT of length `fft_len`, data first (Hockney-Eastwood
    /// doubling with `fft_len = 2 n`).
    pub fn padded_dft(n: usize, fft_len: usize) -> Self {
        Self::plain(n, AxisTransform::Dft, fft_len, 0, fft_len, 0)
    }

    /// A real-to-real axis: data at `data_offset` in a line of `line` slots, the transform
    /// over `fft_len` slots from `fft_offset`.
    pub fn r2r(
        n: usize,
        forward: R2rKind,
        backward: R2rKind,
        fft_len: usize,
        fft_offset: usize,
        line: usize,
        data_offset: usize,
    ) -> Self {
        Self::plain(n, AxisTransform::R2r { forward, backward }, fft_len, fft_offset, line, data_offset)
    }

    /// The same axis with the backward transform over `fft_len` slots from `fft_offset` and its
    /// data from `data_offset`: a backward kind of the other parity (a DST-III after a DCT-II,
    /// as a derivative along a symmetric axis calls for) reads the spectrum one slot further
    /// along a line whose slots are aligned by wavenumber.
    pub fn with_backward_offsets(self, fft_offset: usize, data_offset: usize) -> Self {
        Self { backward_fft_offset: fft_offset, backward_data_offset: data_offset, ..self }
    }

    /// The transform's and the data's first slots in direction `forward`.
    pub fn offsets(&self, forward: bool) -> (usize, usize) {
        if forward {
            (self.fft_offset, self.data_offset)
        } else {
            (self.backward_fft_offset, self.backward_data_offset)
        }
    }

    /// An axis of `n` points carried without a transform.
    pub fn identity(n: usize) -> Self {
        Self::plain(n, AxisTransform::Identity, n, 0, n, 0)
    }

    /// The line's slots when the axis is (`r2c`) or is not the real-to-complex axis.
    pub fn line_slots(&self, r2c: bool) -> usize {
        if r2c {
            self.fft_len / 2 + 1
        } else {
            self.line
        }
    }

    /// Whether the line has slots outside the data (zero padding).
    pub fn is_padded(&self) -> bool {
        self.line > self.n || self.fft_len > self.n
    }

    /// Checks that data and transform lie inside the line.
    pub fn validate(&self, axis: usize) -> Result<()> {
        let bad = |allowed: String| {
            Err(Error::OutOfRange { field: format!("fft axis {axis}"), value: format!("{self:?}"), allowed })
        };
        if self.n == 0 {
            return bad("at least one data point".into());
        }
        match self.transform {
            AxisTransform::Identity
                if self.fft_len != self.n
                    || self.line != self.n
                    || self.data_offset != 0
                    || self.backward_data_offset != 0 =>
            {
                bad("an identity axis without padding".into())
            }
            _ if self.data_offset.max(self.backward_data_offset) + self.n > self.line => {
                bad("data inside the line".into())
            }
            AxisTransform::R2r { .. } | AxisTransform::Dft
                if self.fft_offset.max(self.backward_fft_offset) + self.fft_len > self.line =>
            {
                bad("the transform inside the line".into())
            }
            AxisTransform::Dft
                if self.backward_fft_offset != self.fft_offset || self.backward_data_offset != self.data_offset =>
            {
                bad("the same offsets in both directions on a DFT axis".into())
            }
            AxisTransform::Dft if self.fft_len < self.n => bad("a DFT at least as long as the data".into()),
            _ => Ok(()),
        }
    }
}

/// Padding per periodic mode: over the spectral slots `slots` of the first axis in memory
/// order (a DFT axis, transformed first), the transforms along the second and third axes run
/// over `len` points (their data zero-padded to `len` instead of the axis's `fft_len`).
///
/// A zero-padded axis is the aperiodic convolution of an unbounded direction done as a circular
/// one. At a periodic wave number `k_p != 0` the kernel along the free axes decays like
/// `e^{-|k_p| rho}` (docs/design.md, "Padding per periodic mode"), so those modes' circular
/// convolution is exact to a tolerance on fewer points than the `2 n` the `k_p = 0` modes need.
/// The slots `len[0] ..` of the second axis's lines and `len[1] ..` of the third's are then
/// outside the class's spectrum: the transforms neither read nor write them (they hold zeros
/// after the forward transform).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModeClass {
    /// Spectral slots of the first axis (memory order).
    pub slots: std::ops::Range<usize>,
    /// Transform lengths of the second and third axes (memory order).
    pub len: [usize; 2],
}

impl ModeClass {
    /// Every slot `0..slots` of the first axis in a class: `classes` (ascending, disjoint) and
    /// the gaps between them at the axes' own lengths `full`; adjacent classes of equal
    /// lengths merged.
    pub fn cover(classes: &[ModeClass], slots: usize, full: [usize; 2]) -> Vec<ModeClass> {
        let mut out: Vec<ModeClass> = Vec::new();
        let mut push = |c: ModeClass| {
            if c.slots.is_empty() {
                return;
            }
            match out.last_mut() {
                Some(last) if last.len == c.len && last.slots.end == c.slots.start => last.slots.end = c.slots.end,
                _ => out.push(c),
            }
        };
        let mut at = 0;
        for c in classes {
            push(ModeClass { slots: at..c.slots.start.min(slots).max(at), len: full });
            push(ModeClass { slots: c.slots.start.max(at)..c.slots.end.min(slots), len: c.len });
            at = at.max(c.slots.end.min(slots));
        }
        push(ModeClass { slots: at..slots, len: full });
        out
    }
}

/// The memory order of the axes (fastest first) for `axes`: the first is the axis of the
/// real-to-complex transform (a DFT axis, an unpadded one first), otherwise the first
/// unpadded axis, otherwise axis 0;
/// the others follow unpadded before padded (stable), so that the zero padding appears as
/// late as possible and the early transforms skip it (FLUPS's `dimorder` §2.4, with the r2c
/// axis contiguous). Ties go to the lower axis (x fastest, the Ewald grid's layout).
pub fn memory_order(axes: &[AxisSpec; 3]) -> [usize; 3] {
    memory_order_by(axes, [0, 1, 2])
}

/// As [`memory_order`], ties going to the axes in `preference` order (most preferred first):
/// `[2, 1, 0]` for data in C order, whose last axis is contiguous, so that a transform's
/// contiguous axis is the caller's wherever the transform kinds allow it and loading and
/// storing the caller's block copy contiguous runs.
pub fn memory_order_by(axes: &[AxisSpec; 3], preference: [usize; 3]) -> [usize; 3] {
    let dft = |a: &AxisSpec| a.transform == AxisTransform::Dft;
    let first = preference
        .into_iter()
        .find(|&i| dft(&axes[i]) && !axes[i].is_padded())
        .or_else(|| preference.into_iter().find(|&i| dft(&axes[i])))
        .or_else(|| preference.into_iter().find(|&i| !axes[i].is_padded()))
        .unwrap_or(preference[0]);
    let mut rest: Vec<usize> = preference.into_iter().filter(|&i| i != first).collect();
    rest.sort_by_key(|&i| axes[i].is_padded());
    [first, rest[0], rest[1]]
}

/// The largest process grid `[P_1, P_2]` a transform of `axes` can run on (every rank owning
/// part of every topology): `P_1 <= min(n_1, L_0)` and `P_2 <= min(n_2, L_1)` in memory order.
pub fn proc_grid_limits(axes: &[AxisSpec; 3], complex: bool) -> [usize; 2] {
    proc_grid_limits_in_order(axes, memory_order(axes), complex)
}

/// As [`proc_grid_limits`] for the memory order `order`.
pub fn proc_grid_limits_in_order(axes: &[AxisSpec; 3], order: [usize; 3], complex: bool) -> [usize; 2] {
    let a = order.map(|i| axes[i]);
    let r2c = !complex && a[0].transform == AxisTransform::Dft;
    [a[1].n.min(a[0].line_slots(r2c)), a[2].n.min(a[1].line)]
}

#[cfg(test)]
mod tests {
    use super::{memory_order, memory_order_by, AxisSpec};
    use crate::ffi::R2rKind;

    #[test]
    fn order_puts_the_dft_axis_first_and_padding_last() {
        let p = AxisSpec::periodic(8);
        let u = AxisSpec::padded_dft(8, 16);
        let e = AxisSpec::r2r(8, R2rKind::Dct2, R2rKind::Dct3, 8, 0, 8, 0);
        let s = AxisSpec::r2r(8, R2rKind::Dct2, R2rKind::Dct3, 16, 0, 17, 0);
        assert_eq!(memory_order(&[p, p, p]), [0, 1, 2]);
        assert_eq!(memory_order(&[u, e, p]), [2, 1, 0]);
        assert_eq!(memory_order(&[e, u, s]), [1, 0, 2]);
        assert_eq!(memory_order(&[s, e, e]), [1, 2, 0]);
        assert_eq!(memory_order(&[s, s, e]), [2, 0, 1]);
        assert_eq!(memory_order(&[s, s, s]), [0, 1, 2]);
        // C-order preference: the last axis first wherever the kinds tie
        let c = [2, 1, 0];
        assert_eq!(memory_order_by(&[e, e, e], c), [2, 1, 0]);
        assert_eq!(memory_order_by(&[u, u, u], c), [2, 1, 0]);
        assert_eq!(memory_order_by(&[p, p, u], c), [1, 0, 2]);
        assert_eq!(memory_order_by(&[u, e, p], c), [2, 1, 0]);
        assert_eq!(memory_order_by(&[s, s, e], c), [2, 1, 0]);
        assert_eq!(memory_order_by(&[e, s, s], c), [0, 2, 1]);
    }

    #[test]
    fn validation_names_the_axis() {
        let bad = AxisSpec { data_offset: 9, ..AxisSpec::r2r(8, R2rKind::Dct2, R2rKind::Dct3, 16, 0, 16, 0) };
        let e = bad.validate(2).unwrap_err().to_string();
        assert!(e.contains("fft axis 2"), "{e}");
        assert!(AxisSpec::padded_dft(8, 16).validate(0).is_ok());
    }
}
