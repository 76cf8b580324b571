//! Plain-old-data element types that travel as raw bytes.

/// A type whose values are plain bytes: no padding, no pointers, any bit pattern valid.
///
/// # Safety
/// Implementors must be `Copy`, contain no padding and no references, and accept every bit
/// pattern (integers, floats and arrays of them).
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: no padding, every bit pattern valid.
        unsafe impl Pod for $t {}
    )* };
}
pod!(u8, u16, u32, u64, usize, i32, i64, f32, f64);
// SAFETY: an array of Pod is Pod (no padding between elements).
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// The bytes of a slice of `Pod` values.
pub fn as_bytes<T: Pod>(s: &[T]) -> &[u8] {
    // SAFETY: T is Pod, so every byte is initialised and the length is exact.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of `Pod` values.
pub fn as_bytes_mut<T: Pod>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: T is Pod, so any bytes written form valid values.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, std::mem::size_of_val(s)) }
}
