//! A fast hash map for the traversal's and the M2L classes' integer keys (box displacements,
//! levels, exact polar-angle ratios). Their keys are computed, not attacker-chosen, so the
//! standard map's SipHash buys nothing; per M2L entry it cost a third of the traversal.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative word hash (rotate, xor, multiply by an odd constant).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        // fold the high bits down: the map indexes buckets by the low bits
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A `HashMap` with [`KeyHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;
