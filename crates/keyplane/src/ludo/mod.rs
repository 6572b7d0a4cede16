//! Ludo hashing (Shi, Qian, Wang; thesis chapter 4 and Appendix A.2): the
//! most compact dynamic key→value table, split into a maintenance (control)
//! form and a lookup form that stores no keys.
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/ludo.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

mod control;
mod delta;
mod keys;
mod locator;
mod lookup;
mod table;

pub use control::{Control, Stats};
pub use delta::Delta;
pub use lookup::Lookup;

use crate::error::{Error, Result, mask};
use crate::hash::{hi, lo, mix64, reduce};

/// Inline seed bits per bucket (Ludo §4.4.5).
pub(crate) const SEED_BITS: u32 = 5;
/// Inline seed value meaning "look in the overflow table".
pub(crate) const OVERFLOW_SEED: u32 = (1 << SEED_BITS) - 1;
/// Largest slot-locator seed (overflow seeds are stored in 8 bits).
pub(crate) const MAX_SEED: u32 = 255;

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Fingerprint bits per slot (0..=32): alien keys get `None` except with
    /// probability about 2^-f.
    pub fingerprint_bits: u32,
    /// Initial seed; rebuilds draw later seeds deterministically from it.
    pub seed: u64,
    /// Target load (slots holding keys / all slots) in permille; growth
    /// happens when an insert would exceed it. Default 950 (thesis §4.4.2).
    pub max_load_permille: u32,
    /// Longest cuckoo path (number of displaced keys) an insert searches by
    /// BFS before it uses the fallback table. Default 8 (the thesis never
    /// observed more than 5 at 95% load, Appendix A.2.2).
    pub max_cuckoo_path: u32,
    /// Largest slot-locator seed tried before the hash is re-seeded
    /// (31..=255, default 255). Lower values only exist to exercise the
    /// re-seed path in tests.
    pub max_seed: u32,
    /// Keep overflow seeds rare (default `true`): construction relocates a
    /// key out of every bucket without a seed ≤ 30 through a cuckoo path on
    /// which every bucket keeps an inline seed, and inserts prefer such
    /// paths. Without it about 4% of full buckets need the overflow table.
    pub avoid_overflow: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            fingerprint_bits: 0,
            seed: crate::lineage::random_seed(),
            max_load_permille: 950,
            max_cuckoo_path: 8,
            max_seed: MAX_SEED,
            avoid_overflow: true,
        }
    }
}

impl Options {
    /// Default options with `f` fingerprint bits.
    pub fn filtered(f: u32) -> Self {
        Self { fingerprint_bits: f, ..Self::default() }
    }

    fn validate(&self, vbits: u32) -> Result<()> {
        crate::check_value_bits(vbits, 1, 64)?;
        if self.fingerprint_bits > 32 || vbits + self.fingerprint_bits > 64 {
            return Err(Error::InvalidParameter(format!(
                "fingerprint_bits {} (max 32) + value_bits {vbits} must fit in 64 bits",
                self.fingerprint_bits
            )));
        }
        if !(500..=980).contains(&self.max_load_permille) {
            return Err(Error::InvalidParameter(format!(
                "max_load_permille {} outside 500..=980",
                self.max_load_permille
            )));
        }
        if !(OVERFLOW_SEED..=MAX_SEED).contains(&self.max_seed) {
            return Err(Error::InvalidParameter(format!("max_seed {} outside 31..=255", self.max_seed)));
        }
        Ok(())
    }
}

/// Lookup-form layout revision, written into every blob and rebuild delta:
/// 2 = bucket-locator indices derived from the Ludo hash (`mix64(h ^ seed)`).
const LAYOUT: u8 = 2;

/// Parameters every lookup form carries (the skeleton and the slot layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    /// Hash seed for bucket choice, slot locator and fingerprints.
    pub seed: u64,
    /// Number of buckets (≥ 2).
    pub nb: u32,
    pub vbits: u32,
    pub fbits: u32,
}

impl Params {
    pub fn validate(&self) -> Result<()> {
        crate::check_value_bits(self.vbits, 1, 64)?;
        if self.fbits > 32 || self.vbits + self.fbits > 64 {
            return Err(Error::InvalidParameter("fingerprint + value bits exceed 64".into()));
        }
        if self.nb < 2 || self.nb > 1 << 30 {
            return Err(Error::InvalidParameter(format!("bucket count {} outside 2..=2^30", self.nb)));
        }
        Ok(())
    }

    /// Bits per value slot (value + fingerprint).
    #[inline(always)]
    pub fn sw(&self) -> u32 {
        self.vbits + self.fbits
    }

    /// Hash of a key.
    #[inline(always)]
    pub fn hash(&self, key: &[u8]) -> u64 {
        crate::hash::hash64(key, self.seed)
    }

    /// The two alternate buckets `(h0, h1)`, always distinct.
    #[inline(always)]
    pub fn buckets(&self, h: u64) -> (u32, u32) {
        let b0 = reduce(lo(h), self.nb);
        let b1 = reduce(hi(h), self.nb - 1);
        (b0, if b1 >= b0 { b1 + 1 } else { b1 })
    }

    /// Fingerprint bits of a hash, shifted above the value (0 without fingerprints).
    #[inline(always)]
    pub fn fp(&self, h: u64) -> u64 {
        if self.fbits == 0 {
            0
        } else {
            let x = mix64(h ^ 0xf1f0_5eed_0bad_cafe);
            ((x % mask(self.fbits)) + 1) << self.vbits
        }
    }

    /// Slot content of a key with value `v`.
    #[inline(always)]
    pub fn content(&self, h: u64, v: u64) -> u64 {
        v | self.fp(h)
    }

    /// Decodes a slot into a lookup answer.
    #[inline(always)]
    pub fn answer(&self, h: u64, x: u64) -> Option<u64> {
        if self.fbits == 0 {
            return Some(x);
        }
        if x & !mask(self.vbits) == self.fp(h) { Some(x & mask(self.vbits)) } else { None }
    }

    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u64(self.seed).u32(self.nb).u8(self.vbits as u8).u8(self.fbits as u8).u8(LAYOUT);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let p = Params { seed: r.u64()?, nb: r.u32()?, vbits: r.u8()? as u32, fbits: r.u8()? as u32 };
        let layout = r.u8()?;
        if layout != LAYOUT {
            return Err(Error::Corrupt(format!(
                "ludo layout {layout}, this version reads {LAYOUT} (blobs of an older keyplane are not readable)"
            )));
        }
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
}

/// Slot locator `H_s(h) ∈ {0,1,2,3}` (Ludo §4.4.5): an independent 2-bit
/// hash per seed.
#[inline(always)]
pub(crate) fn slot_of(h: u64, s: u32) -> usize {
    (mix64(h.wrapping_add((s as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))) >> 62) as usize
}

/// Brute-force seed search (Ludo §4.4.5, Algorithm 6): the smallest seed
/// `s ≤ max` mapping the hashes to distinct slots, or `None`.
pub(crate) fn find_seed(hs: &[u64], max: u32) -> Option<u32> {
    // Every seed's slots of all keys at once (independent multiplies, one
    // unpredictable branch per seed instead of one per key).
    fn first<const N: usize>(hs: &[u64], max: u32) -> Option<u32> {
        let k: [u64; N] = std::array::from_fn(|i| hs[i]);
        (0..=max).find(|&s| {
            let used = k.iter().fold(0u32, |u, &h| u | 1 << slot_of(h, s));
            used.count_ones() as usize == N
        })
    }
    match hs.len() {
        0 | 1 => Some(0),
        2 => first::<2>(hs, max),
        3 => first::<3>(hs, max),
        4 => first::<4>(hs, max),
        // Five keys never fit four slots.
        _ => None,
    }
}

/// Expected alien false-positive rate with `f` fingerprint bits (a full
/// slot's fingerprint matches with probability 1/(2^f − 1); empty slots never
/// match).
pub fn expected_false_positive_rate(fingerprint_bits: u32, load: f64) -> f64 {
    if fingerprint_bits == 0 { 1.0 } else { load / (mask(fingerprint_bits) as f64) }
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0201, "ludo lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0202, "ludo delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0203, "ludo control snapshot");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_distinct_and_in_range() {
        for nb in [2u32, 3, 7, 1000] {
            let p = Params { seed: 1, nb, vbits: 8, fbits: 0 };
            for i in 0..2000u64 {
                let (a, b) = p.buckets(mix64(i));
                assert!(a < nb && b < nb && a != b);
            }
        }
    }

    #[test]
    fn seed_search_finds_collision_free_seeds() {
        for i in 0..1000u64 {
            let hs: Vec<u64> = (0..4).map(|j| mix64(i * 4 + j)).collect();
            if let Some(s) = find_seed(&hs, 255) {
                let mut slots: Vec<usize> = hs.iter().map(|&h| slot_of(h, s)).collect();
                slots.sort();
                slots.dedup();
                assert_eq!(slots.len(), 4);
            }
        }
        // Identical hashes have no valid seed.
        assert_eq!(find_seed(&[5, 5], 255), None);
        assert_eq!(find_seed(&[1, 2, 3, 4, 5], 255), None);
        assert_eq!(find_seed(&[], 0), Some(0));
    }

    /// The first seed whose slots are distinct, one key at a time (the
    /// definition `find_seed` must keep: lookup forms store its answer).
    fn naive_seed(hs: &[u64], max: u32) -> Option<u32> {
        (0..=max).find(|&s| {
            let mut slots: Vec<usize> = hs.iter().map(|&h| slot_of(h, s)).collect();
            slots.sort();
            slots.dedup();
            slots.len() == hs.len()
        })
    }

    #[test]
    fn seed_search_equals_the_naive_search() {
        for i in 0..4000u64 {
            let n = (i % 6) as usize;
            let hs: Vec<u64> = (0..n as u64).map(|j| mix64(i * 8 + j)).collect();
            for max in [0, 7, 30, 255] {
                assert_eq!(find_seed(&hs, max), naive_seed(&hs, max), "{hs:?} max {max}");
            }
        }
    }

    #[test]
    fn fingerprints_are_never_zero() {
        let p = Params { seed: 1, nb: 4, vbits: 8, fbits: 1 };
        for i in 0..1000u64 {
            assert_eq!(p.fp(mix64(i)), 1 << 8);
        }
        let p = Params { seed: 1, nb: 4, vbits: 8, fbits: 4 };
        assert!((0..1000u64).all(|i| p.fp(mix64(i)) != 0));
    }
}
