//! Concurrent (2,4) cuckoo hash map with full keys — the CuckooSwitch FIB
//! (Zhou, Fan, Lim, Kaminsky, Andersen, CoNEXT 2013, §2.2–3.5) and the
//! "partial FIB" of ScaleBricks (§5.2).
//!
//! Every key has two candidate buckets of four slots each. A bucket is one
//! 64-byte cache line (§3.5 "cache-line-aware"): four 16-byte slots, each a
//! *key word* and a *meta word*:
//!
//! ```text
//! meta word:  occupied (1) | length code (7) | fingerprint (8) | value (48, interleaved layout)
//! key word:   inline keys (≤ 8 bytes): the key bytes, little-endian, zero padded
//!             longer keys:             32-bit hash check << 32 | arena offset (words)
//! ```
//!
//! Keys of at most 8 bytes (MAC, IPv4, 64-bit ids) live **inline**, so a
//! lookup reads one cache line per candidate bucket. Longer keys live
//! **out of line** in an append-only arena of atomic words; the slot keeps a
//! 32-bit hash check and the 8-bit fingerprint so the arena is read (one more
//! cache line) essentially only for the key that matches. Values are either
//! **interleaved** in the meta word (up to 48 bits, one cache line per bucket,
//! as in CuckooSwitch) or kept in a **separate value array** indexed by slot
//! number (ScaleBricks §5.2: any width up to 64 bits, one extra read).
//!
//! # Concurrency (CuckooSwitch Algorithm 2, expressed with atomics)
//!
//! One writer and any number of readers share a table, with no reader locks.
//! Buckets are covered by striped version counters (at most 4096 stripes,
//! [`crate::sync::StripedSeqLock`]). The writer changes slots only in
//! *steps*: it makes the counters of every bucket a step touches odd, writes
//! the slots, and makes them even again. A cuckoo displacement is one step
//! that writes the destination slot and clears the source slot, so a key is
//! always in one of its two buckets from a validating reader's point of view.
//! A reader snapshots the two counters (waiting while odd), reads the two
//! buckets, and re-checks the counters; if one moved it retries.
//!
//! Data-race freedom: every word a reader can touch — bucket words, stash
//! words, the value array and the key arena — is an `AtomicU64` read with
//! `Relaxed` loads (plain moves on x86-64 and AArch64). The counters are read
//! with `Acquire` before and, after an `Acquire` fence, again after the data
//! (Boehm's seqlock, as in [`crate::sync`]); the writer's increments are
//! `Release`. Algorithm 2 relies on x86 TSO plus compiler barriers; these
//! orderings are exactly what the Rust memory model needs for the same
//! argument on any architecture, and cost nothing extra on x86.
//! Out-of-line key bytes are appended to the arena *before* the step that
//! publishes the slot referring to them, and arena words are never
//! overwritten while the table is live (freed space is reclaimed only by a
//! rebuild, which builds a new table), so a reader that validates always
//! compared against the bytes that slot was published with. A torn read can
//! see any word combination; every index derived from such words is bounds
//! checked and the answer is discarded by the failed validation.
//!
//! # Insertion never loses a key
//!
//! A new key goes to a free slot of its buckets; otherwise a breadth-first
//! search over the cuckoo graph (at most 1024 buckets, paths of distinct
//! buckets, the next level's buckets prefetched) finds the shortest
//! displacement path, executed from its free end
//! back to the new key's bucket (each move one step). If no path exists the
//! key goes to an 8-slot **stash** that lookups consult whenever it is not
//! empty; a full stash, or a load above 95 %, triggers a **resize** (bucket
//! count doubled). Removes move stashed keys back into buckets when room
//! appears, and a load below 20 % after a remove halves the bucket count. (The original CuckooSwitch table has neither stash nor resize
//! and silently drops a key when the path search fails.)
//!
//! # Two ways to read
//!
//! * [`Control::reader`] hands out cheap [`Reader`] handles on the writer's
//!   own table (one per thread: `Send`, not `Sync`): local data-plane
//!   threads need no copy and no deltas. A handle caches the current table
//!   and checks a generation counter with one plain load per lookup, so a
//!   lookup performs no atomic read-modify-write. A resize publishes a new
//!   table ([`crate::sync::Published`]); a reader that raced it finishes on
//!   the complete old one, and its next lookup switches to the new one.
//! * [`Control::export`](crate::ControlTable::export) returns an independent [`Lookup`] replica (another
//!   process, another machine); [`Delta`]s carry the writer's slot steps,
//!   arena appends and resize decisions, so the replica stays bit-identical
//!   to the writer's table (a resize is re-executed deterministically by the
//!   replica instead of shipping the whole table). [`crate::LookupTable::reader`] gives
//!   the same per-thread handles on a replica.
//!
//! Lookups are exact: an absent key gives `None`.
//!
//! [`partial`] is the fingerprint-only variant (SILT / MemC3 style), which
//! cannot return the right value for every valid key.

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
