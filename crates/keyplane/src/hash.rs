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

/// XXH3's default secret, the 64-bit words at byte offsets 8, 16, 24, 32,
/// 40 and 48 (the only ones keys of 4 to 16 bytes touch).
const SECRET_8: u64 = 0x1cad_21f7_2c81_017c;
const SECRET_16: u64 = 0xdb97_9083_e96d_d4de;
#[cfg(test)]
const SECRET_24: u64 = 0x1f67_b3b7_a4a4_4072;
#[cfg(test)]
const SECRET_32: u64 = 0x78e5_c0cc_4ee6_79cb;
#[cfg(test)]
const SECRET_40: u64 = 0x2172_ffcc_7dd0_5a82;
#[cfg(test)]
const SECRET_48: u64 = 0x8e24_43f7_7446_08b8;

/// The per-seed constant of XXH3 for keys of 4 to 8 bytes: a structure that
/// hashes many fixed-width keys under one seed computes it once and calls
/// [`hash_word_flipped`].
#[inline(always)]
pub(crate) fn short_flip(seed: u64) -> u64 {
    let s = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
    (SECRET_8 ^ SECRET_16).wrapping_sub(s)
}

/// XXH3's final mix for keys of 4 to 8 bytes (`rrmxmx`).
#[inline(always)]
fn rrmxmx(mut v: u64, len: u64) -> u64 {
    v ^= v.rotate_left(49) ^ v.rotate_left(24);
    v = v.wrapping_mul(0x9FB2_1C65_1E98_DF25);
    v ^= (v >> 35).wrapping_add(len);
    v = v.wrapping_mul(0x9FB2_1C65_1E98_DF25);
    v ^ (v >> 28)
}

/// [`hash64`] of a key of `len` (4..=8) bytes given XXH3's input word
/// `w = read32(key[len-4..]) + (read32(key[..4]) << 32)` and
/// `flip = `[`short_flip`]`(seed)`: two multiplies, no length dispatch.
#[inline(always)]
pub(crate) fn hash_word_flipped(w: u64, len: u64, flip: u64) -> u64 {
    rrmxmx(w ^ flip, len)
}

/// [`hash64`] of the 8-byte key [`crate::key::u64_key`]`(x)`, bit for bit,
/// without the byte-slice dispatch (`hash_u64(x, s) == hash64(&x.to_le_bytes(), s)`).
#[inline(always)]
pub fn hash_u64(x: u64, seed: u64) -> u64 {
    hash_word_flipped(x.rotate_left(32), 8, short_flip(seed))
}

/// The four 64-bit keys of [`hash_u64_mum`] drawn from a table seed
/// (splitmix64 outputs: a random seed gives random, secret keys).
#[inline]
pub(crate) fn mum_keys(seed: u64) -> [u64; 4] {
    let mut s = SeedSeq::new(seed ^ 0x6d75_6d38_6b65_7973); // "mum8keys"
    [s.next(), s.next(), s.next(), s.next()]
}

/// The 64-bit fold of a 64 × 64 → 128-bit product (wyhash's `mum`).
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let m = a as u128 * b as u128;
    m as u64 ^ (m >> 64) as u64
}

/// A keyed hash of one 64-bit word in two multiplies (rapidhash's
/// construction for inputs of up to 16 bytes): the 128-bit product of
/// `x ^ k0` and `rotl(x, 32) ^ k1`, whose halves, XOR-ed with `k2` and
/// `k3`, are multiplied and folded. Keys from [`mum_keys`]. Othello's
/// `KeyHash::Mum8` hashes 8-byte keys with it: about 10 instructions
/// against XXH3's 18, and with a random seed per table as hard to flood.
/// (One folded multiply of `x ^ k0` by a constant is not enough: it maps
/// sequential keys to a lattice and Othello's graphs of such keys then
/// close hundreds of cycles; one multiply of the two key-dependent words
/// leaves 2–5× the cycles of XXH3 on 1K–4K sequential keys.)
#[inline(always)]
pub(crate) fn hash_u64_mum(x: u64, k: &[u64; 4]) -> u64 {
    let m = (x ^ k[0]) as u128 * (x.rotate_left(32) ^ k[1]) as u128;
    fold_mul(m as u64 ^ k[2], (m >> 64) as u64 ^ k[3])
}

/// [`hash64`] of a 6-byte key (a MAC address), bit for bit.
#[cfg(test)]
#[inline(always)]
pub(crate) fn hash_mac(k: [u8; 6], seed: u64) -> u64 {
    let lo = u32::from_le_bytes([k[0], k[1], k[2], k[3]]) as u64;
    let hi = u32::from_le_bytes([k[2], k[3], k[4], k[5]]) as u64;
    hash_word_flipped(hi.wrapping_add(lo << 32), 6, short_flip(seed))
}

/// [`hash64`] of a 4-byte key (an IPv4 address), bit for bit.
#[cfg(test)]
#[inline(always)]
pub(crate) fn hash_ipv4(k: [u8; 4], seed: u64) -> u64 {
    let w = u32::from_le_bytes(k) as u64;
    hash_word_flipped(w.wrapping_add(w << 32), 4, short_flip(seed))
}

/// [`hash64`] of a 16-byte key (an IPv6 address), bit for bit.
#[cfg(test)]
#[inline(always)]
pub(crate) fn hash_ipv6(k: [u8; 16], seed: u64) -> u64 {
    let (a, b) = k.split_at(8);
    let lo = u64::from_le_bytes(a.try_into().unwrap_or_default());
    let hi = u64::from_le_bytes(b.try_into().unwrap_or_default());
    let lo = lo ^ (SECRET_24 ^ SECRET_32).wrapping_add(seed);
    let hi = hi ^ (SECRET_40 ^ SECRET_48).wrapping_sub(seed);
    let m = lo as u128 * hi as u128;
    let acc = 16u64.wrapping_add(lo.swap_bytes()).wrapping_add(hi).wrapping_add(m as u64 ^ (m >> 64) as u64);
    let v = (acc ^ (acc >> 37)).wrapping_mul(0x1656_6791_9E37_79F9);
    v ^ (v >> 32)
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
    fn fixed_width_hashes_are_xxh3_bit_for_bit() {
        use proptest::prelude::*;
        let cfg = proptest::test_runner::Config { cases: 2000, ..Default::default() };
        proptest::proptest!(cfg, |(x in any::<u64>(), seed in any::<u64>(), k16 in any::<[u8; 16]>())| {
            prop_assert_eq!(hash_u64(x, seed), hash64(&x.to_le_bytes(), seed));
            let mac: [u8; 6] = k16[..6].try_into().unwrap();
            prop_assert_eq!(hash_mac(mac, seed), hash64(&mac, seed));
            let v4: [u8; 4] = k16[..4].try_into().unwrap();
            prop_assert_eq!(hash_ipv4(v4, seed), hash64(&v4, seed));
            prop_assert_eq!(hash_ipv6(k16, seed), hash64(&k16, seed));
        });
        for seed in [0, 1, u64::MAX, 0x6b65_7970_6c61_6e65] {
            for x in [0, 1, u64::MAX, 1 << 63] {
                assert_eq!(hash_u64(x, seed), hash64(&x.to_le_bytes(), seed));
            }
        }
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
