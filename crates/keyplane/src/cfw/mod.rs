//! Cuckoo Filtable and the Cuckoo Forwarder (CFW) — thesis §3.4.2, §3.5
//! (eq. 3.8) and Appendix A.1.3–A.1.6.
//!
//! A Cuckoo Filtable is a (2,4) cuckoo table whose slots hold a short key
//! **fingerprint** and the key's **value** instead of the full key. A lookup
//! hashes the key once, reads its two candidate buckets (4 slots each) and
//! returns the value of the first slot whose fingerprint matches.
//!
//! * **Level 1** — the Cuckoo Filtable: `n_b` buckets × 4 slots, each slot
//!   `fingerprint (f bits) | value (l bits)`, bit-packed back to back
//!   (the thesis' *compact* layout, Appendix A.1.4) in a [`PackedArray`].
//!   Fingerprint 0 marks an empty slot, so fingerprints take the values
//!   `1..2^f`.
//! * **Level 2** — a small full-key table holding only the keys whose
//!   fingerprint collides with another key sharing one of their candidate
//!   buckets (and, rarely, keys for which no cuckoo path was found: level 2
//!   doubles as the stash, so an insert never loses a key).
//!
//! **Valid keys never collide (CR = 0, eq. 3.8).** The control form keeps a
//! *collision-avoidance set* per bucket — every key (of either level) that
//! has the bucket as one of its two candidates — and enforces the invariant
//! *a key is in level 1 only if no other key with the same fingerprint shares
//! a candidate bucket with it*. A valid key `k` can therefore only match its
//! own level-1 slot, or miss level 1 and find itself in level 2. The rule
//! does not depend on where keys sit, so cuckoo moves never break it, and it
//! catches the thesis' three-key case (a and b already in level 2, c arrives
//! with the same fingerprint in a shared bucket: c finds a in the bucket's
//! set and goes to level 2 as well). When a key is removed, level-2 keys that
//! no longer collide with anything are moved back to level 1.
//!
//! **Alien keys** match some level-1 slot with probability eq. 3.8,
//! `FP = 1 − (1 − 1/2^f)^(r_l·η·n_s·n_b)` where `r_l·η·n_s·n_b` is the
//! expected number of occupied slots in two buckets; with fingerprint 0
//! reserved for "empty" the per-slot match probability is `1/(2^f − 1)`
//! ([`expected_false_positive_rate`]). Level 2 adds no false positives.
//!
//! **Shared skeleton** ([`Control::export_with`]): the slot positions depend
//! only on the key set, so one control form exports many lookup forms that
//! differ only in their value fields (one per forwarding node).
//!
//! **Updates** ([`Delta`], thesis Fig. 3.1 (b)): level-1 slot writes
//! (`bucket·4 + slot` and the new slot contents — a cuckoo insertion sends
//! its whole path, a value change one slot, a delete one cleared slot) plus
//! level-2 puts and deletes by full key. A [`Lookup`] applies a delta in
//! place under a striped seqlock (one stripe per bucket group, plus one for
//! level 2), so readers never see a value that is neither a key's old nor
//! its new value, and never miss a key that exists before and after. Growth
//! (1.5× buckets when level 1 passes 95 % load) ships the whole new table.
//!
//! Memory of the lookup form: `4·n_b·(f + l)` bits for level 1 (≈
//! `(f + l)/0.9` bits per key after a build, thesis eq. A.2 with `e_b1 = 1`)
//! plus level 2, about `(1 − η)·n·(key + 24)` bytes; `1 − η ≈ 14.4/(2^f − 1)`
//! at load 0.9.

mod control;
mod delta;
mod l2;
mod lookup;

pub use control::{Control, Stats};
pub use delta::Delta;
pub use lookup::{Lookup, Reader};

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
pub fn expected_false_positive_rate(level1_keys: usize, buckets: u64, fingerprint_bits: u32) -> f64 {
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
