//! Concurrent (2,4) cuckoo hash map with full keys — the CuckooSwitch FIB
//! (Zhou, Fan, Lim, Kaminsky, Andersen, CoNEXT 2013, §2.2–3.5) and the
//! "partial FIB" of ScaleBricks (§5.2).
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/cuckoo.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`]. Slot layout:
//!
//! Every bucket is one 64-byte cache line. Three slot layouts:
//!
//! ```text
//! wide (any key length, 4 slots of 16 bytes):
//!   meta word:  occupied (1) | length code (7) | fingerprint (8) | value (48, interleaved layout)
//!   key word:   inline keys (≤ 8 bytes): the key bytes, little-endian, zero padded
//!               longer keys:             32-bit hash check << 32 | arena offset (words)
//! packed (every key k bytes, k + value bytes ≤ 8; 8 slots of one word, CuckooSwitch style):
//!   word:       [occupied bit 63 if a spare bit exists] | value << 8k | key bytes
//!               (all-zero word = empty; the one entry that would encode as zero lives in the stash)
//! keyed (every key k ≤ 8 bytes, values ≤ 48 bits: s = ⌊63 / (8 + value bytes)⌋ slots, 4..7):
//!   words 0..s: keys; then s values of ⌈value_bits / 8⌉ bytes; byte 63: occupancy bits
//! ```
//!
//! [`KeyLayout::Auto`] (the default) picks packed or keyed when every key
//! has the same length ≤ 8 bytes (bulk builds look at all keys; an empty
//! table takes the length of its first key) and falls back to the wide
//! layout, by a deterministic rebuild carried in the delta, when a key of
//! another length arrives.

mod control;
mod delta;
mod lookup;
pub mod partial;
pub(crate) mod path;
mod simd;
mod table;

pub use control::{Control, Stats};
pub use delta::Delta;
pub use lookup::Lookup;

mod fasthash;

use crate::error::{Error, Result};

/// Where values are stored (CuckooSwitch interleaving vs. ScaleBricks §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ValueLayout {
    /// Interleaved when `value_bits ≤ 48`, separate otherwise.
    #[default]
    Auto,
    /// In the slot's meta word: one cache line per bucket; at most 48 bits.
    Interleaved,
    /// In a separate value array indexed by slot number (ScaleBricks §5.2):
    /// any width, one extra memory read per hit.
    Separate,
}

/// How keys are stored (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyLayout {
    /// Fixed-width packed slots while every key has one length of at most
    /// 8 bytes (and values fit in 48 bits); the wide layout otherwise.
    #[default]
    Auto,
    /// Always the wide layout (keys of any length, mixed).
    Wide,
}

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Value placement (wide layout).
    pub values: ValueLayout,
    /// Hash seed (part of every blob and delta).
    pub seed: u64,
    /// Key storage.
    pub keys: KeyLayout,
    /// Fill of a bulk build ([`Control::from_items_with`]), in percent of
    /// the bucket slots. `None` (the default) leaves headroom below the
    /// growth threshold, so that ordinary updates after a bulk build do not
    /// trigger a whole-table growth rebuild: four-slot buckets are built at
    /// 90 % and grow at 95 %; five- to eight-slot buckets (the fixed-width
    /// layouts) are built at 93 % and grow
    /// at 98 %. `Some(p)` builds dense tables (e.g. `Some(97)`: a MAC →
    /// 16-bit table at 66 bits/key) at the price of a growth after about
    /// `(98 − p) %` more keys. Accepted: 50..=97; capped at the growth
    /// threshold minus one point (94 % for four-slot buckets). Front ends:
    /// the `build_load` structure option (`-O build_load=97`).
    pub build_load_percent: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            values: ValueLayout::Auto,
            seed: crate::lineage::random_seed(),
            keys: KeyLayout::Auto,
            build_load_percent: None,
        }
    }
}

/// Default fill (percent) of bulk builds of four-slot buckets (they grow at 95 %).
pub(crate) const DEFAULT_BUILD_LOAD: u32 = 90;
/// Default fill (percent) of bulk builds of five- to eight-slot buckets
/// (they grow at 98 %): five points of headroom, as four-slot buckets have.
pub(crate) const DEFAULT_BUILD_LOAD_WIDE_BUCKETS: u32 = 93;
/// Accepted range of [`Options::build_load_percent`].
pub(crate) const BUILD_LOAD_RANGE: std::ops::RangeInclusive<u32> = 50..=97;

/// Largest value width of the interleaved layout.
pub(crate) const MAX_INTERLEAVED_BITS: u32 = 48;
/// Longest key accepted (bytes). Network keys are far shorter; the bound
/// keeps arena offsets and delta sizes small.
pub const MAX_KEY_LEN: usize = 65535;
/// Slots per bucket of the wide layout.
pub(crate) const SLOTS: usize = 4;
/// Largest slot count of a bucket (packed layout).
pub(crate) const MAX_SLOTS: usize = 8;
/// Stash slots.
pub(crate) const STASH: usize = 8;
/// Largest bucket count (2^30 buckets = 64 GiB of buckets).
pub(crate) const MAX_BUCKETS: u32 = 1 << 30;

/// Table parameters carried by every blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub seed: u64,
    pub nb: u32,
    pub vbits: u32,
    /// True: separate value array (wide layout only).
    pub separate: bool,
    /// Fixed key length in bytes (1..=8: packed or keyed layout); 0: wide layout.
    pub kl: u32,
    /// The table may switch to a fixed-width layout when it is empty.
    pub auto: bool,
    /// Derived: slots per bucket.
    pub sb: u32,
    /// Derived: value bytes of a fixed-width slot.
    pub vb: u32,
    /// Derived: true for the packed layout.
    pub packed: bool,
}

/// True when keys of `kl` bytes with `vbits`-bit values can use a fixed-width layout.
pub(crate) fn fixed_fits(kl: usize, vbits: u32) -> bool {
    (1..=8).contains(&kl) && vbits <= MAX_INTERLEAVED_BITS
}

impl Params {
    pub fn new(vbits: u32, opts: &Options, nb: u32) -> Result<Self> {
        crate::check_value_bits(vbits, 1, 64)?;
        let separate = match opts.values {
            ValueLayout::Auto => vbits > MAX_INTERLEAVED_BITS,
            ValueLayout::Interleaved => {
                if vbits > MAX_INTERLEAVED_BITS {
                    return Err(Error::InvalidParameter(format!(
                        "interleaved values hold at most {MAX_INTERLEAVED_BITS} bits, asked for {vbits}; use ValueLayout::Separate"
                    )));
                }
                false
            }
            ValueLayout::Separate => true,
        };
        let auto = opts.keys == KeyLayout::Auto && opts.values == ValueLayout::Auto && !separate;
        let p = Params::make(opts.seed, nb, vbits, separate, 0, auto);
        p.validate()?;
        Ok(p)
    }

    /// Parameters with the derived fields filled in.
    pub fn make(seed: u64, nb: u32, vbits: u32, separate: bool, kl: u32, auto: bool) -> Self {
        let vb = vbits.div_ceil(8);
        let packed = kl != 0 && kl + vb <= 8;
        let sb = if kl == 0 {
            SLOTS as u32
        } else if packed {
            MAX_SLOTS as u32
        } else {
            (63 / (8 + vb)).min(7)
        };
        Params { seed, nb, vbits, separate, kl, auto, sb, vb, packed }
    }

    /// The same table parameters with another key layout and bucket count.
    pub fn relayout(&self, kl: u32, nb: u32) -> Self {
        Params::make(self.seed, nb, self.vbits, self.separate, kl, self.auto)
    }

    pub fn validate(&self) -> Result<()> {
        crate::check_value_bits(self.vbits, 1, 64)?;
        if !self.separate && self.vbits > MAX_INTERLEAVED_BITS {
            return Err(Error::InvalidParameter("interleaved layout with more than 48 value bits".into()));
        }
        if self.kl != 0 && (self.separate || !fixed_fits(self.kl as usize, self.vbits)) {
            return Err(Error::InvalidParameter(format!(
                "fixed {}-byte key layout with {} value bits{}",
                self.kl,
                self.vbits,
                if self.separate { " and a separate value array" } else { "" }
            )));
        }
        if self.nb < 2 || self.nb > MAX_BUCKETS {
            return Err(Error::InvalidParameter(format!("bucket count {} outside 2..=2^30", self.nb)));
        }
        Ok(())
    }

    /// Layout byte: bit 0 separate values, bit 1 auto, bits 4..8 fixed key
    /// length. Blobs written before the fixed-width layouts carry 0 or 1
    /// here and load unchanged (wide layout, no automatic layout change).
    pub fn encode(&self, w: &mut crate::wire::Writer) {
        let b = self.separate as u8 | (self.auto as u8) << 1 | (self.kl as u8) << 4;
        w.u64(self.seed).u32(self.nb).u8(self.vbits as u8).u8(b);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let (seed, nb, vbits, b) = (r.u64()?, r.u32()?, r.u8()? as u32, r.u8()?);
        if b & 0x0c != 0 || b >> 4 > 8 {
            return Err(Error::Corrupt(format!("value/key layout byte {b:#x}")));
        }
        let p = Params::make(seed, nb, vbits, b & 1 != 0, (b >> 4) as u32, b & 2 != 0);
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0301, "cuckoo lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0302, "cuckoo delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0303, "cuckoo control snapshot");
