//! Boundary conditions per axis and what they make of the axis: its class, its transforms
//! for the field and for the Green's function, its wavenumbers and its normalisation (digest
//! seed-002 §2.1, cell- and node-centred data).

use parki_core::{Error, Result};
use parki_fft3d::{AxisSpec, AxisTransform, R2rKind};

/// A boundary condition on one side of an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bc {
    /// Even symmetry (zero flux).
    Even,
    /// Odd symmetry (zero value).
    Odd,
    /// Periodic (both sides).
    Periodic,
    /// Unbounded (free space).
    Unbounded,
}

impl Bc {
    /// Name in run.toml: `even`, `odd`, `per`, `unb`.
    pub fn name(self) -> &'static str {
        match self {
            Bc::Even => "even",
            Bc::Odd => "odd",
            Bc::Periodic => "per",
            Bc::Unbounded => "unb",
        }
    }

    /// Parses a name of [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        [Bc::Even, Bc::Odd, Bc::Periodic, Bc::Unbounded].into_iter().find(|b| b.name() == s)
    }

    fn is_symmetric(self) -> bool {
        matches!(self, Bc::Even | Bc::Odd)
    }
}

/// Where the data sit: at cell centres `(i + 1/2) h`, `N` values per axis, or at the nodes
/// `i h`, `N + 1` values per axis (`N` on a periodic axis, whose node `N` is node 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Centering {
    /// Cell-centred.
    #[default]
    Cell,
    /// Node-centred.
    Node,
}

impl Centering {
    /// Name in run.toml: `cell`, `node`.
    pub fn name(self) -> &'static str {
        match self {
            Centering::Cell => "cell",
            Centering::Node => "node",
        }
    }

    /// Parses a name of [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        [Centering::Cell, Centering::Node].into_iter().find(|c| c.name() == s)
    }
}

/// What an axis is, from its pair of boundary conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisClass {
    /// Periodic: DFT of `N`.
    Periodic,
    /// Symmetric on both sides: a DCT/DST of `N` (types II or IV).
    Symmetric {
        /// Low side.
        low: Bc,
        /// High side.
        high: Bc,
    },
    /// Symmetric on one side, unbounded on the other: a DCT-II/DST-II on `2N` (digest §2.3).
    SemiUnbounded {
        /// The symmetric side's condition.
        sym: Bc,
        /// Whether the symmetric side is the low one.
        sym_low: bool,
    },
    /// Unbounded on both sides: zero padding to `2N` (Hockney-Eastwood, digest §2.2).
    Unbounded,
}

impl AxisClass {
    /// The class of `[low, high]` on `axis`; periodic on one side only is an error.
    pub fn of(axis: usize, pair: [Bc; 2]) -> Result<Self> {
        let [low, high] = pair;
        match (low, high) {
            (Bc::Periodic, Bc::Periodic) => Ok(AxisClass::Periodic),
            (Bc::Periodic, _) | (_, Bc::Periodic) => Err(Error::OutOfRange {
                field: format!("problem.bc[{axis}]"),
                value: format!("[\"{}\", \"{}\"]", low.name(), high.name()),
                allowed: "periodic on both sides or on neither".into(),
            }),
            (Bc::Unbounded, Bc::Unbounded) => Ok(AxisClass::Unbounded),
            (Bc::Unbounded, s) => Ok(AxisClass::SemiUnbounded { sym: s, sym_low: false }),
            (s, Bc::Unbounded) => Ok(AxisClass::SemiUnbounded { sym: s, sym_low: true }),
            (l, h) if l.is_symmetric() && h.is_symmetric() => Ok(AxisClass::Symmetric { low: l, high: h }),
            _ => unreachable!("every pair is covered"),
        }
    }

    /// Whether the Green's function is known in closed form along the axis (a spectral axis)
    /// rather than sampled in space and transformed (an unbounded or semi-unbounded axis).
    pub fn is_spectral(self) -> bool {
        matches!(self, AxisClass::Periodic | AxisClass::Symmetric { .. })
    }

    /// The field's transform of `n` cells. `aligned`: the slots of both parities carry the
    /// same wavenumber (the rotational mode's derivatives map one parity to the other slot by
    /// slot): the DCT-II/DST-II pair of a symmetric axis then sits in a line of `N + 1` slots
    /// with the DST one slot further along (slot `s` is mode `s` of either), instead of `N`.
    pub fn field_axis(self, n: usize, aligned: bool) -> AxisSpec {
        use R2rKind::{Dct2, Dct3, Dct4, Dst2, Dst3, Dst4};
        match self {
            AxisClass::Periodic => AxisSpec::periodic(n),
            AxisClass::Symmetric { low, high } => {
                let (f, b) = match (low, high) {
                    (Bc::Even, Bc::Even) => (Dct2, Dct3),
                    (Bc::Odd, Bc::Odd) => (Dst2, Dst3),
                    (Bc::Even, Bc::Odd) => (Dct4, Dct4),
                    _ => (Dst4, Dst4),
                };
                let two = matches!(f, Dct2 | Dst2);
                if aligned && two {
                    let shift = usize::from(f == Dst2);
                    AxisSpec::r2r(n, f, b, n, shift, n + 1, shift)
                } else {
                    AxisSpec::r2r(n, f, b, n, 0, n, 0)
                }
            }
            AxisClass::SemiUnbounded { sym, sym_low } => {
                // a line of 2N + 1 slots: slot s is DCT-I mode s of the Green's function; the
                // DST-II's entry k (mode k + 1) sits at slot k + 1
                let odd = sym == Bc::Odd;
                let (f, b) = if odd { (Dst2, Dst3) } else { (Dct2, Dct3) };
                let shift = usize::from(odd);
                let data = if sym_low { shift } else { n + shift };
                AxisSpec::r2r(n, f, b, 2 * n, shift, 2 * n + 1, data)
            }
            AxisClass::Unbounded => AxisSpec::padded_dft(n, 2 * n),
        }
    }

    /// The low and high boundary conditions of the axis.
    pub fn sides(self) -> [Bc; 2] {
        match self {
            AxisClass::Periodic => [Bc::Periodic; 2],
            AxisClass::Symmetric { low, high } => [low, high],
            AxisClass::SemiUnbounded { sym, sym_low: true } => [sym, Bc::Unbounded],
            AxisClass::SemiUnbounded { sym, sym_low: false } => [Bc::Unbounded, sym],
            AxisClass::Unbounded => [Bc::Unbounded; 2],
        }
    }

    /// Data points along the axis of `n` cells: `N` cell centres, or `N + 1` nodes (`N` on a
    /// periodic axis).
    pub fn extent(self, n: usize, centering: Centering) -> usize {
        match (centering, self) {
            (Centering::Node, AxisClass::Periodic) | (Centering::Cell, _) => n,
            (Centering::Node, _) => n + 1,
        }
    }

    /// The nodes an odd side pins to zero (node 0 and/or node `N`): they carry no unknown, the
    /// transform skips them, the solution is 0 there and the right-hand side there is ignored.
    pub fn pinned_nodes(self, n: usize) -> [Option<usize>; 2] {
        let [low, high] = self.sides();
        [(low == Bc::Odd).then_some(0), (high == Bc::Odd).then_some(n)]
    }

    /// The field's transform of `n` cells with node-centred data (FLUPS's node transforms): the
    /// line holds node `i` at slot `i` (slot `N + i` where a semi-unbounded axis is symmetric on
    /// its high side), and the transform skips the nodes an odd side pins to zero:
    ///
    /// - even-even: DCT-I of the `N + 1` nodes, mode `s` at slot `s`;
    /// - odd-odd: DST-I of nodes `1..N-1`, mode `s` (its entry `s - 1`) at slot `s`;
    /// - even-odd: DCT-III forward, DCT-II backward, of nodes `0..N-1`, mode `s + 1/2` at slot `s`;
    /// - odd-even: DST-III forward, DST-II backward, of nodes `1..N`, mode `s - 1/2` at slot `s`;
    /// - periodic: DFT of the `N` nodes; unbounded: the `N + 1` nodes padded to a DFT of `2N`;
    /// - semi-unbounded: the `N + 1` nodes in a line of `2N + 1`, a DCT-I over all of it (even
    ///   side) or a DST-I over slots `1..2N-1` (odd side): slot `s` is mode `s` of the Green's
    ///   DCT-I, as for cell-centred data.
    pub fn node_axis(self, n: usize) -> AxisSpec {
        use R2rKind::{Dct1, Dct2, Dct3, Dst1, Dst2, Dst3};
        match self {
            AxisClass::Periodic => AxisSpec::periodic(n),
            AxisClass::Symmetric { low, high } => match (low, high) {
                (Bc::Even, Bc::Even) => AxisSpec::r2r(n + 1, Dct1, Dct1, n + 1, 0, n + 1, 0),
                (Bc::Odd, Bc::Odd) => AxisSpec::r2r(n + 1, Dst1, Dst1, n - 1, 1, n + 1, 0),
                (Bc::Even, Bc::Odd) => AxisSpec::r2r(n + 1, Dct3, Dct2, n, 0, n + 1, 0),
                _ => AxisSpec::r2r(n + 1, Dst3, Dst2, n, 1, n + 1, 0),
            },
            AxisClass::SemiUnbounded { sym, sym_low } => {
                let data = if sym_low { 0 } else { n };
                if sym == Bc::Odd {
                    AxisSpec::r2r(n + 1, Dst1, Dst1, 2 * n - 1, 1, 2 * n + 1, data)
                } else {
                    AxisSpec::r2r(n + 1, Dct1, Dct1, 2 * n + 1, 0, 2 * n + 1, data)
                }
            }
            AxisClass::Unbounded => AxisSpec::padded_dft(n + 1, 2 * n),
        }
    }

    /// Wavenumber of spectral slot `s` of node-centred data (the slots of
    /// [`node_axis`](Self::node_axis)); the unbounded and semi-unbounded axes' are those of
    /// cell-centred data.
    pub fn node_wavenumber(self, n: usize, l: f64, s: usize, r2c: bool) -> f64 {
        use std::f64::consts::PI;
        match self {
            AxisClass::Symmetric { low, high } => {
                let m = match (low, high) {
                    (Bc::Even, Bc::Odd) => s as f64 + 0.5,
                    // slot 0 carries no mode (node 0 is pinned): any finite value
                    (Bc::Odd, Bc::Even) => (s as f64 - 0.5).abs(),
                    _ => s as f64,
                };
                PI * m / l
            }
            c => c.wavenumber(n, l, s, r2c, false),
        }
    }

    /// The class of the derivative along this axis: even and odd sides swap (a cosine series
    /// differentiates into a sine series), periodic and unbounded sides stay.
    pub fn derivative(self) -> Self {
        let flip = |b: Bc| match b {
            Bc::Even => Bc::Odd,
            Bc::Odd => Bc::Even,
            b => b,
        };
        match self {
            AxisClass::Symmetric { low, high } => AxisClass::Symmetric { low: flip(low), high: flip(high) },
            AxisClass::SemiUnbounded { sym, sym_low } => AxisClass::SemiUnbounded { sym: flip(sym), sym_low },
            c => c,
        }
    }

    /// Whether `self` and `other` share their spectral slots (the same transform sizes and
    /// wavenumbers in aligned lines): equal up to the parities of [`derivative`](Self::derivative).
    pub fn shares_slots(self, other: Self) -> bool {
        self == other || self.derivative() == other
    }

    /// The transform of a component whose forward transform is of class `self` and whose
    /// backward transform (after a derivative) is of class `out`, in aligned lines; `None`
    /// when they do not share their slots.
    pub fn field_axis_to(self, out: Self, n: usize) -> Option<AxisSpec> {
        if !self.shares_slots(out) {
            return None;
        }
        let (f, b) = (self.field_axis(n, true), out.field_axis(n, true));
        let transform = match (f.transform, b.transform) {
            (AxisTransform::R2r { forward, .. }, AxisTransform::R2r { backward, .. }) => {
                AxisTransform::R2r { forward, backward }
            }
            (t, _) => t,
        };
        Some(AxisSpec { transform, ..f }.with_backward_offsets(b.fft_offset, b.data_offset))
    }

    /// The Green's function's transform along the axis, `line` the field's slots along it: the
    /// identity on spectral axes, a DFT of the `2N` samples mirrored about `N` (unbounded), a
    /// DCT-I of the `2N + 1` vertex samples (semi-unbounded).
    pub fn green_axis(self, n: usize, line: usize) -> AxisSpec {
        match self {
            AxisClass::Periodic | AxisClass::Symmetric { .. } => AxisSpec::identity(line),
            AxisClass::Unbounded => AxisSpec::periodic(2 * n),
            AxisClass::SemiUnbounded { .. } => {
                AxisSpec::r2r(2 * n + 1, R2rKind::Dct1, R2rKind::Dct1, 2 * n + 1, 0, 2 * n + 1, 0)
            }
        }
    }

    /// Wavenumber of spectral slot `s` of the field, `n` cells over length `l`, `r2c` when the
    /// axis is the real-to-complex one, `aligned` as in [`field_axis`](Self::field_axis).
    pub fn wavenumber(self, n: usize, l: f64, s: usize, r2c: bool, aligned: bool) -> f64 {
        use std::f64::consts::PI;
        let signed = |m: usize, period: usize| if r2c || m <= period / 2 { m as f64 } else { m as f64 - period as f64 };
        match self {
            AxisClass::Periodic => 2.0 * PI * signed(s, n) / l,
            AxisClass::Symmetric { low, high } => {
                let m = match (low, high) {
                    (Bc::Even, Bc::Even) => s as f64,
                    (Bc::Odd, Bc::Odd) if aligned => s as f64,
                    (Bc::Odd, Bc::Odd) => s as f64 + 1.0,
                    _ => s as f64 + 0.5,
                };
                PI * m / l
            }
            AxisClass::Unbounded => PI * signed(s, 2 * n) / l,
            AxisClass::SemiUnbounded { .. } => PI * s as f64 / (2.0 * l),
        }
    }

    /// Whether slot `s` is the Nyquist mode of a DFT axis of `n` cells (its derivative is
    /// taken as zero: `+-i k` are equally valid there).
    pub fn is_nyquist(self, n: usize, s: usize) -> bool {
        match self {
            AxisClass::Periodic => n.is_multiple_of(2) && s == n / 2,
            AxisClass::Unbounded => s == n,
            _ => false,
        }
    }

    /// Whether the axis's transform is a DFT (complex spectrum, derivative `i k`) rather than
    /// a real-to-real one (derivative `-+k` into the other parity).
    pub fn is_dft(self) -> bool {
        matches!(self, AxisClass::Periodic | AxisClass::Unbounded)
    }

    /// Whether the field along the axis is a cosine series at its first slot (even on the low
    /// side, or the symmetric side's even series of a semi-unbounded axis): its derivative is
    /// `-k` times the other parity's series, a sine series' is `+k`.
    pub fn is_cosine(self) -> bool {
        match self {
            AxisClass::Symmetric { low, .. } => low == Bc::Even,
            AxisClass::SemiUnbounded { sym, .. } => sym == Bc::Even,
            _ => false,
        }
    }

    /// The position of sample `i` of the Green's function along a non-spectral axis of cell
    /// size `h`: mirrored about `N` (unbounded), the vertex `i h` (semi-unbounded).
    pub fn sample(self, n: usize, h: f64, i: usize) -> f64 {
        match self {
            AxisClass::Unbounded => i.min(2 * n - i) as f64 * h,
            _ => i as f64 * h,
        }
    }

    /// The largest sample offset `|x| / h` of [`sample`](Self::sample) along a non-spectral axis
    /// of `n` cells: `N` (unbounded), `2N` (semi-unbounded).
    pub fn sample_extent(self, n: usize) -> usize {
        match self {
            AxisClass::Unbounded => n,
            AxisClass::SemiUnbounded { .. } => 2 * n,
            _ => 0,
        }
    }

    /// The factor of the axis in the Green's spectrum: the inverse of the transform pair's
    /// logical length, times the quadrature weight `h` on non-spectral axes.
    pub fn factor(self, spec: &AxisSpec, h: f64) -> f64 {
        let len = match spec.transform {
            AxisTransform::Dft => spec.fft_len,
            AxisTransform::R2r { backward, .. } => backward.logical_len(spec.fft_len),
            AxisTransform::Identity => 1,
        } as f64;
        if self.is_spectral() {
            1.0 / len
        } else {
            h / len
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AxisClass, Bc};

    #[test]
    fn classes_and_errors() {
        assert_eq!(AxisClass::of(0, [Bc::Periodic, Bc::Periodic]).unwrap(), AxisClass::Periodic);
        assert_eq!(
            AxisClass::of(1, [Bc::Unbounded, Bc::Odd]).unwrap(),
            AxisClass::SemiUnbounded { sym: Bc::Odd, sym_low: false }
        );
        let e = AxisClass::of(2, [Bc::Periodic, Bc::Even]).unwrap_err().to_string();
        assert!(e.contains("problem.bc[2]") && e.contains("per"), "{e}");
        // 1 + 9 classes per axis: 1000 combinations in 3-D
        let all = [Bc::Even, Bc::Odd, Bc::Periodic, Bc::Unbounded];
        let n =
            all.iter().flat_map(|&l| all.iter().map(move |&h| AxisClass::of(0, [l, h]))).filter(|c| c.is_ok()).count();
        assert_eq!(n, 10);
    }
}
