//! Seeded key hashing and index derivation.
//!
//! Every structure hashes a key **once** with [`hash64`] (XXH3-64 with a
//! per-structure seed) and derives all indices and fingerprints from that
//! 64-bit value with cheap arithmetic: [`reduce`] (Lemire's multiply-shift
//! range reduction, which also serves power-of-two sizes) on the two 32-bit
//! halves, and [`mix64`] when more independent bits are needed.
//!
//! XXH3 was chosen after measuring it against hardware CRC32c and foldhash on
//! 6-, 16- and 40-byte keys (`keyplane-bench hash`, figures in
//! `docs/benchmarks.md`): it is within a nanosecond of the fastest on short
//! keys, is a fixed, versioned specification (blobs stay loadable across
//! releases, which foldhash does not promise), and a 64-bit output gives two
//! independent 32-bit indices from one call.
//!
//! Seeds are part of every blob: a lookup form in another process computes
//! exactly the same indices.

/// 64-bit seeded hash of a key. Stable across versions and platforms.
#[inline(always)]
pub fn hash64(key: &[u8], seed: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed)
}

/// Maps a uniformly distributed 32-bit value to `0..n` without division
/// (Lemire, "A fast alternative to the modulo reduction"). For `n = 2^k` this
/// is exactly the top `k` bits, so power-of-two and compact sizings share one
/// code path.
#[inline(always)]
pub fn reduce(x: u32, n: u32) -> u32 {
    ((x as u64 * n as u64) >> 32) as u32
}

/// 64-bit range reduction for tables larger than 2^32 slots.
#[inline(always)]
pub fn reduce64(x: u64, n: u64) -> u64 {
    ((x as u128 * n as u128) >> 64) as u64
}

/// Low 32 bits of a hash.
#[inline(always)]
pub fn lo(h: u64) -> u32 {
    h as u32
}

/// High 32 bits of a hash.
#[inline(always)]
pub fn hi(h: u64) -> u32 {
    (h >> 32) as u32
}

/// A strong 64-bit finaliser (the murmur3 / splitmix64 mix), for deriving
/// further independent bits (fingerprints, secondary indices) from a hash.
#[inline(always)]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Deterministic seed sequence (splitmix64). Structures draw new seeds from it
/// when they re-seed, so a build is reproducible from its initial seed.
#[derive(Debug, Clone)]
pub(crate) struct SeedSeq(u64);

impl SeedSeq {
    /// A sequence starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next seed.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Current state (to persist the sequence in a snapshot).
    pub fn state(&self) -> u64 {
        self.0
    }
}

impl Default for SeedSeq {
    fn default() -> Self {
        Self::new(0x6b65_7970_6c61_6e65) // "keyplane"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_stays_in_range_and_matches_top_bits_for_powers_of_two() {
        for n in [1u32, 2, 3, 7, 1000, 1 << 20, u32::MAX] {
            for x in [0u32, 1, 12345, u32::MAX / 2, u32::MAX] {
                assert!(reduce(x, n) < n);
            }
        }
        assert_eq!(reduce(0xabcd_1234, 1 << 8), 0xab);
    }

    #[test]
    fn hash_is_seeded_and_stable() {
        assert_ne!(hash64(b"key", 1), hash64(b"key", 2));
        assert_eq!(hash64(b"key", 7), hash64(b"key", 7));
        // Pinned value: blobs written by older builds must stay readable.
        assert_eq!(hash64(b"", 0), xxhash_rust::xxh3::xxh3_64(b""));
    }

    #[test]
    fn seed_sequence_is_deterministic() {
        let mut a = SeedSeq::new(5);
        let mut b = SeedSeq::new(5);
        let xs: Vec<u64> = (0..4).map(|_| a.next()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
    }
}
