//! Concurrent (2,4) cuckoo hash map with full keys — the CuckooSwitch FIB
//! (Zhou, Fan, Lim, Kaminsky, Andersen, CoNEXT 2013, §2.2–3.5) and the
//! "partial FIB" of ScaleBricks (§5.2).
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/cuckoo.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`]. Slot layout:
//!
//! ```text
//! meta word:  occupied (1) | length code (7) | fingerprint (8) | value (48, interleaved layout)
//! key word:   inline keys (≤ 8 bytes): the key bytes, little-endian, zero padded
//!             longer keys:             32-bit hash check << 32 | arena offset (words)
//! ```

mod control;
mod delta;
mod lookup;
pub mod partial;
mod table;

pub use control::{Control, Reader, Stats};
pub use delta::Delta;
pub use lookup::Lookup;

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

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Value placement.
    pub values: ValueLayout,
    /// Hash seed (part of every blob and delta).
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { values: ValueLayout::Auto, seed: crate::lineage::random_seed() }
    }
}

/// Largest value width of the interleaved layout.
pub(crate) const MAX_INTERLEAVED_BITS: u32 = 48;
/// Longest key accepted (bytes). Network keys are far shorter; the bound
/// keeps arena offsets and delta sizes small.
pub const MAX_KEY_LEN: usize = 65535;
/// Slots per bucket.
pub(crate) const SLOTS: usize = 4;
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
    /// True: separate value array.
    pub separate: bool,
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
        let p = Params { seed: opts.seed, nb, vbits, separate };
        p.validate()?;
        Ok(p)
    }

    pub fn validate(&self) -> Result<()> {
        crate::check_value_bits(self.vbits, 1, 64)?;
        if !self.separate && self.vbits > MAX_INTERLEAVED_BITS {
            return Err(Error::InvalidParameter("interleaved layout with more than 48 value bits".into()));
        }
        if self.nb < 2 || self.nb > MAX_BUCKETS {
            return Err(Error::InvalidParameter(format!("bucket count {} outside 2..=2^30", self.nb)));
        }
        Ok(())
    }

    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u64(self.seed).u32(self.nb).u8(self.vbits as u8).u8(self.separate as u8);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let p = Params {
            seed: r.u64()?,
            nb: r.u32()?,
            vbits: r.u8()? as u32,
            separate: match r.u8()? {
                0 => false,
                1 => true,
                x => return Err(Error::Corrupt(format!("value layout flag {x}"))),
            },
        };
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
}
