//! Longest-prefix match (LPM) for IPv4 and IPv6 routes, built from Othello
//! exact-match lookup forms — hash-based LPM in the manner of Chisel
//! (Hasan, Cadambi, Jakkula, Chakradhar, "Chisel: A Storage-efficient,
//! Collision-free Hash-based Network Processing Architecture", ISCA 2006).
//!
//! Concise (Yu et al., ToN; `othello-concise-fib.txt` §I) "does not support
//! layer-3 longest prefix matching", and §VII-A explains why a plain Othello
//! cannot be used for it as is: for a name it never stored, Othello returns
//! an arbitrary value. Searching lengths longest first, an arbitrary answer
//! for an absent prefix would *be* the route. This module keeps Othello's
//! small, branch-free index and adds what Chisel adds to its Bloomier
//! filter: a verification ("filter") table behind the index.
//!
//! ## Layout (per address family)
//!
//! * **Top array** over the address's first 16 bits (`T_BITS`, 65,536
//!   blocks): per block, the next hop of the longest prefix of length ≤ 16
//!   covering it (prefixes that short are leaf-pushed, i.e. controlled prefix
//!   expansion to /16 — a table total over that domain, so no absent-key
//!   question arises), and a bit mask of the longer lengths that hold at least
//!   one prefix inside the block (one bit per length for IPv4, per two
//!   lengths for IPv6). Lengths with no prefix in the block cost nothing.
//! * **One table per prefix length > 16** that holds prefixes: an Othello
//!   index mapping the prefix to a slot number (`⌈log₂ slots⌉` value bits,
//!   ≈ 2.33 bits per bit of index per prefix) and a slot array holding the
//!   prefix itself and its next hop (Chisel's filter table).
//!
//! A lookup reads the block's mask, then probes the set lengths longest
//! first: hash the address's prefix of that length, read the two Othello
//! slots, read the slot they name, and accept only if the stored prefix
//! equals the address's prefix. The first hit is the answer; with no hit,
//! the block's leaf-pushed short route (or `None`).
//!
//! ## Why an absent prefix cannot yield a wrong route
//!
//! A slot only ever holds a prefix that is in the table, at its own length,
//! and the index maps every stored prefix to its own slot. So a probe hits
//! exactly when the address's prefix of that length is stored: an absent
//! prefix's arbitrary Othello answer lands on a slot holding some *other*
//! prefix (or none) and the comparison rejects it. The answer therefore
//! equals a naive longest-prefix search, exactly, for every address —
//! there is no false-positive rate. (Exactness needs the stored prefix: a
//! structure answering membership for arbitrary addresses without false
//! positives cannot hold less information than the prefixes.) The cost is
//! the slot: 8 bytes per IPv4 slot (prefix, valid bit, next hop in one
//! atomic word), 24 bytes per IPv6 slot.
//!
//! ## Memory
//!
//! `768 KiB` per family in use (top array), plus per prefix longer than 16:
//! the Othello index (≈ 2.36 · ⌈log₂ slots⌉ bits) and 8 (IPv4) or 24 (IPv6)
//! bytes per slot, slot arrays being 1–2× the prefixes of their length
//! (doubling on growth, halving below 1/8 use). Measured figures are in
//! `docs/structures/lpm.md`.
//!
//! ## Updates
//!
//! [`Control`] turns an insert or remove into a [`Delta`] of small steps,
//! each applied atomically with respect to readers and ordered so that
//! every intermediate state answers each address with its route before or
//! after the update: a new prefix's slot is written before the Othello
//! delta that leads to it and the block mask bit after; a removed prefix's
//! slot is invalidated first. Othello deltas are applied in place under
//! Othello's striped seqlock; a length table that grows, shrinks, appears,
//! disappears or is re-seeded is published whole (readers finish on the old
//! one).

mod control;
mod delta;
mod lookup;
mod prefix;
mod slots;

pub use control::Control;
pub use delta::Delta;
pub use lookup::Lookup;
pub use prefix::{Family, Prefix};

/// Bits of the address that index the top array.
pub(crate) const T_BITS: u32 = 16;
/// Blocks in a top array.
pub(crate) const BLOCKS: usize = 1 << T_BITS;
/// Widest next hop (slots keep 31 bits for it).
pub const MAX_VALUE_BITS: u32 = 31;
pub(crate) const MAX_VALUE: u64 = (1 << MAX_VALUE_BITS) - 1;

/// Mask bit of a prefix length longer than `T_BITS`.
#[inline(always)]
pub(crate) fn bucket(f: Family, len: u8) -> u32 {
    let shift = if f == Family::V4 { 0 } else { 1 };
    (len as u32 - T_BITS - 1) >> shift
}

/// Number of mask bits a family uses.
pub(crate) fn buckets(f: Family) -> u32 {
    bucket(f, f.width() as u8) + 1
}

/// The Othello key of a prefix's bits: 4 or 16 network-order bytes.
#[inline(always)]
pub(crate) fn level_key(f: Family, k: u128) -> ([u8; 16], usize) {
    let mut b = [0u8; 16];
    match f {
        Family::V4 => {
            b[..4].copy_from_slice(&(k as u32).to_be_bytes());
            (b, 4)
        }
        Family::V6 => (k.to_be_bytes(), 16),
    }
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0b01, "lpm lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0b02, "lpm delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0b03, "lpm control snapshot");
