//! A raw pointer that may cross threads, for parallel work on disjoint parts of one buffer.

/// A raw pointer that rayon tasks may share. Each use must touch only elements no other task
/// touches meanwhile (see the safety comment at each use).
#[derive(Clone, Copy)]
pub(crate) struct Ptr<T>(pub(crate) *mut T);
// SAFETY: used only for disjoint ranges, see each use.
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Ptr<T> {}

impl<T> Ptr<T> {
    /// The pointer (a method, so that closures capture the whole wrapper, not its field).
    #[inline]
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}
