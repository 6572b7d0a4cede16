//! Cuckoo Filtable and the Cuckoo Forwarder (CFW) — thesis §3.4.2, §3.5
//! (eq. 3.8) and Appendix A.1.3–A.1.6.
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/cfw.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

mod control;
mod delta;
mod l2;
mod lookup;

pub use control::{Control, Stats};
pub use delta::Delta;
pub use lookup::Lookup;

use crate::bits::PackedArray;
use crate::error::{Error, Result, mask};
use crate::hash::{hash64, hi, lo, mix64, reduce};

/// Slots per bucket (the "4" of (2,4) cuckoo hashing).
pub(crate) const SLOTS: usize = 4;
/// Largest bucket count (2^30 buckets = 2^32 slots).
pub(crate) const MAX_BUCKETS: u64 = 1 << 30;
/// Default fingerprint width: ≈ 0.7 % alien false positives at 90 % load.
pub(crate) const DEFAULT_FINGERPRINT_BITS: u32 = 12;

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Fingerprint bits per slot (1..=32; `value_bits + fingerprint_bits ≤ 64`).
    pub fingerprint_bits: u32,
    /// Hash seed (part of the skeleton).
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { fingerprint_bits: DEFAULT_FINGERPRINT_BITS, seed: crate::lineage::random_seed() }
    }
}

impl Options {
    /// Default options with `fingerprint_bits` bits of fingerprint.
    pub fn with_fingerprint_bits(fingerprint_bits: u32) -> Self {
        Self { fingerprint_bits, ..Self::default() }
    }
}

/// Skeleton and slot layout every lookup form carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub seed: u64,
    pub nb: u64,
    pub vbits: u32,
    pub fbits: u32,
}

/// Where a key lives: its hash, candidate buckets and fingerprint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loc {
    pub h: u64,
    pub b1: usize,
    pub b2: usize,
    pub fp: u64,
}

impl Params {
    pub fn validate(&self) -> Result<()> {
        if !(1..=63).contains(&self.vbits) {
            return Err(Error::InvalidValueBits { got: self.vbits, min: 1, max: 63 });
        }
        if !(1..=32).contains(&self.fbits) {
            return Err(Error::InvalidParameter(format!("fingerprint_bits {} not in 1..=32", self.fbits)));
        }
        if self.vbits + self.fbits > 64 {
            return Err(Error::InvalidParameter(format!(
                "value_bits {} + fingerprint_bits {} exceed 64",
                self.vbits, self.fbits
            )));
        }
        if self.nb < 2 || self.nb > MAX_BUCKETS {
            return Err(Error::InvalidParameter(format!("bucket count {} out of range 2..=2^30", self.nb)));
        }
        Ok(())
    }

    /// Bits per slot.
    #[inline(always)]
    pub fn width(&self) -> u32 {
        self.vbits + self.fbits
    }

    /// Candidate buckets (always distinct) and fingerprint (never 0).
    #[inline(always)]
    pub fn locate(&self, key: &[u8]) -> Loc {
        let h = hash64(key, self.seed);
        self.locate_hash(h)
    }

    #[inline(always)]
    pub fn locate_hash(&self, h: u64) -> Loc {
        let b1 = reduce(lo(h), self.nb as u32) as usize;
        let off = 1 + reduce(hi(h), (self.nb - 1) as u32) as usize;
        let mut b2 = b1 + off;
        if b2 >= self.nb as usize {
            b2 -= self.nb as usize;
        }
        let fp = 1 + reduce((mix64(h) >> 32) as u32, mask(self.fbits) as u32) as u64;
        Loc { h, b1, b2, fp }
    }

    /// Slot word for a fingerprint and value.
    #[inline(always)]
    pub fn word(&self, fp: u64, v: u64) -> u64 {
        fp << self.vbits | v
    }

    /// Scans one bucket for a fingerprint.
    #[inline(always)]
    pub fn scan(&self, l1: &PackedArray, b: usize, fp: u64) -> Option<u64> {
        let base = b * SLOTS;
        for s in 0..SLOTS {
            let w = l1.get(base + s);
            if w >> self.vbits == fp {
                return Some(w & mask(self.vbits));
            }
        }
        None
    }

    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u64(self.seed).u64(self.nb).u8(self.vbits as u8).u8(self.fbits as u8);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let p = Params { seed: r.u64()?, nb: r.u64()?, vbits: r.u8()? as u32, fbits: r.u8()? as u32 };
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
}

/// Expected alien-key false-positive rate (thesis eq. 3.8) of a table with
/// `level1_keys` keys in level 1 over `buckets` buckets and `f`
/// fingerprint bits: `1 − (1 − 1/(2^f − 1))^(2·level1_keys/buckets)`. The
/// exponent is eq. 3.8's `r_l·η·n_s·n_b` (occupied slots in two buckets);
/// the base uses `2^f − 1` because fingerprint 0 marks empty slots.
pub(crate) fn expected_false_positive_rate(level1_keys: usize, buckets: u64, fingerprint_bits: u32) -> f64 {
    if buckets == 0 {
        return 0.0;
    }
    let per_slot = 1.0 / (mask(fingerprint_bits.clamp(1, 32)) as f64);
    let occupied = 2.0 * level1_keys as f64 / buckets as f64;
    1.0 - (1.0 - per_slot).powf(occupied)
}

/// Eq. 3.8 exactly as printed (per-slot match probability `2^-f`).
pub fn eq_3_8(level1_keys: usize, buckets: u64, fingerprint_bits: u32) -> f64 {
    if buckets == 0 {
        return 0.0;
    }
    let occupied = 2.0 * level1_keys as f64 / buckets as f64;
    1.0 - (1.0 - 0.5f64.powi(fingerprint_bits as i32)).powf(occupied)
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0401, "cfw lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0402, "cfw delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0403, "cfw control snapshot");
