//! Fingerprint-based hash table (FHT) with a collision table (Yuan, Crowley,
//! Song, "Enhancing Scalable Name-Based Forwarding", ANCS 2017, §5, §6.2, §7.2).
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/fht.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

mod control;
mod ct;
mod delta;
mod lookup;

pub use control::{Control, Stats};
pub use delta::Delta;
pub use lookup::Lookup;

use crate::error::{Error, Result, mask};
use crate::hash::{hash64, hi, lo, mix64, reduce};

/// Largest number of subtables.
pub(crate) const MAX_SUBTABLES: u32 = 8;

/// Which table a lookup consults first (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LookupOrder {
    /// Query the collision table, then the main table (the paper's design).
    #[default]
    CollisionTableFirst,
    /// Query the main table first; a one-bit collision flag per entry says
    /// when the collision table must be consulted.
    MainFirst,
}

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Subtables d (1..=8, default 4).
    pub subtables: u32,
    /// Entries per bucket E (1..=64, default 8).
    pub bucket_entries: u32,
    /// Fingerprint bits w (1..=32, default 16).
    pub fingerprint_bits: u32,
    /// Load factor at which the table grows (0.05..=1.0, default 0.93).
    pub max_load: f64,
    /// Lookup order.
    pub order: LookupOrder,
    /// Initial capacity in names (0: sized for the bulk load, at least 64).
    pub capacity: usize,
    /// Hash seed.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            subtables: 4,
            bucket_entries: 8,
            fingerprint_bits: 16,
            max_load: 0.93,
            order: LookupOrder::CollisionTableFirst,
            capacity: 0,
            seed: crate::lineage::random_seed(),
        }
    }
}

impl Options {
    /// Default options with `w` fingerprint bits.
    pub fn with_fingerprint_bits(w: u32) -> Self {
        Self { fingerprint_bits: w, ..Self::default() }
    }
}

/// Parameters every lookup form carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub seed: u64,
    pub d: u32,
    pub e: u32,
    pub b: u32,
    pub fbits: u32,
    pub vbits: u32,
    pub flag: bool,
}

/// Where a name hashes to: bucket number and fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub h: u64,
    pub b0: u32,
    pub f: u64,
}

impl Loc {
    /// The "true fingerprint" identifying a collision group.
    #[inline]
    pub fn t(&self) -> u64 {
        (self.b0 as u64) << 32 | self.f
    }
}

/// Most slots a table may have (2^36).
const MAX_SLOTS: u64 = 1 << 36;

impl Params {
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_SUBTABLES).contains(&self.d) {
            return Err(Error::InvalidParameter(format!("subtables {} not in 1..=8", self.d)));
        }
        if !(1..=64).contains(&self.e) {
            return Err(Error::InvalidParameter(format!("bucket entries {} not in 1..=64", self.e)));
        }
        if !(1..=32).contains(&self.fbits) {
            return Err(Error::InvalidParameter(format!("fingerprint_bits {} not in 1..=32", self.fbits)));
        }
        let maxv = 64 - self.fbits - self.flag as u32;
        if !(1..=maxv).contains(&self.vbits) {
            return Err(Error::InvalidValueBits { got: self.vbits, min: 1, max: maxv });
        }
        if self.b == 0 || self.slots() as u64 > MAX_SLOTS {
            return Err(Error::InvalidParameter(format!("bucket count {} out of range", self.b)));
        }
        Ok(())
    }

    /// The paper's default entry layout: buckets of 8 entries of a 16-bit
    /// fingerprint over an 8-bit value, no collision flag (24-byte buckets,
    /// which the lookup form decodes with a dedicated matcher).
    #[inline(always)]
    pub fn bytes24(&self) -> bool {
        self.e == 8 && self.vbits == 8 && self.fbits == 16 && !self.flag
    }

    #[inline(always)]
    pub fn width(&self) -> u32 {
        self.vbits + self.fbits + self.flag as u32
    }

    #[inline(always)]
    pub fn slots(&self) -> usize {
        self.d as usize * self.b as usize * self.e as usize
    }

    #[inline(always)]
    pub fn locate(&self, key: &[u8]) -> Loc {
        let h = hash64(key, self.seed);
        let fmax = (mask(self.fbits) as u32).max(1);
        let f = if self.fbits == 1 { 1 } else { 1 + reduce(lo(h), fmax) as u64 };
        Loc { h, b0: reduce(hi(h), self.b), f }
    }

    /// Index (over all subtables) of the candidate bucket of subtable `i`.
    #[inline(always)]
    pub fn bucket_index(&self, i: u32, l: &Loc) -> usize {
        let off = if i == 0 { 0 } else { reduce(mix64(l.f ^ ((i as u64) << 40) ^ self.seed) as u32, self.b) as u64 };
        let mut bi = l.b0 as u64 + off;
        if bi >= self.b as u64 {
            bi -= self.b as u64;
        }
        i as usize * self.b as usize + bi as usize
    }

    /// First slot of the candidate bucket of subtable `i`.
    #[inline(always)]
    pub fn bucket(&self, i: u32, l: &Loc) -> usize {
        self.bucket_index(i, l) * self.e as usize
    }

    #[inline(always)]
    pub fn fp_of(&self, word: u64) -> u64 {
        (word >> self.vbits) & mask(self.fbits)
    }

    #[inline(always)]
    pub fn flag_bit(&self) -> u64 {
        if self.flag { 1u64 << (self.vbits + self.fbits) } else { 0 }
    }

    #[inline(always)]
    pub fn word(&self, f: u64, v: u64, flagged: bool) -> u64 {
        v | f << self.vbits | if flagged { self.flag_bit() } else { 0 }
    }

    pub fn buckets_for(cap: usize, d: u32, e: u32, load: f64) -> Result<u32> {
        let b = ((cap.max(64) as f64) / (load * d as f64 * e as f64)).ceil() as u64;
        if b > u32::MAX as u64 || b * d as u64 * e as u64 > MAX_SLOTS {
            return Err(Error::CapacityExceeded(format!("{cap} names need more than 2^36 slots")));
        }
        Ok(b.max(1) as u32)
    }

    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u64(self.seed).u8(self.d as u8).u8(self.e as u8).u32(self.b).u8(self.fbits as u8).u8(self.vbits as u8);
        w.u8(self.flag as u8);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let p = Params {
            seed: r.u64()?,
            d: r.u8()? as u32,
            e: r.u8()? as u32,
            b: r.u32()?,
            fbits: r.u8()? as u32,
            vbits: r.u8()? as u32,
            flag: match r.u8()? {
                0 => false,
                1 => true,
                x => return Err(Error::Corrupt(format!("collision flag mode {x}"))),
            },
        };
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
}

/// Expected fraction of names outside the table that match a fingerprint
/// (the alien false-positive rate, and the fraction of R − R_S that needs a
/// "not stored" marker, §6.2): `main_entries / (B · (2^w − 1))`.
pub(crate) fn expected_alien_match_rate(main_entries: usize, buckets_per_subtable: u32, fingerprint_bits: u32) -> f64 {
    main_entries as f64 / (buckets_per_subtable as f64 * (mask(fingerprint_bits) as f64).max(1.0))
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0801, "fht lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0802, "fht delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0803, "fht control snapshot");
