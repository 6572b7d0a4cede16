//! A cheap work counter for control forms: how many keys they hashed on
//! the calling thread.
//!
//! Control-form operations count here: every key a key store hashes
//! (insert, remove, lookup of the control form's own index; one each),
//! every key of a full traversal of a key store (rebuilds, bulk
//! construction and per-data-plane exports hash every key again), and the
//! keys the cuckoo and Ludo control forms hash for inserts, removes and
//! rebuilds. Lookup forms never count (their hot paths stay untouched).
//! Loading a snapshot ([`crate::Snapshot`]) hashes no key.
//!
//! The counter is per thread (a plain thread-local add, no atomic), so read
//! it on the thread that did the work:
//!
//! ```
//! use keyplane::{ControlTable, Snapshot, othello, work};
//!
//! // A fixed seed: with a random one, the insert below closes a cycle in
//! // Othello's graph with a small probability, and the re-seeding rebuild
//! // that follows hashes every key again (rare, and still correct).
//! let opts = othello::Options { seed: 3, ..Default::default() };
//! let ctl = othello::Control::from_items_with((0..1000u32).map(|i| (i.to_le_bytes(), 1u64)), 1, opts)?;
//! let saved = ctl.snapshot();
//! let before = work::keys_hashed();
//! let mut back = othello::Control::from_snapshot(&saved)?;
//! back.insert(b"new key", 1)?;
//! assert!(work::keys_hashed() - before < 10); // O(update), not O(n)
//! # Ok::<(), keyplane::Error>(())
//! ```

use std::cell::Cell;

thread_local! {
    static KEYS_HASHED: Cell<u64> = const { Cell::new(0) };
}

/// Keys hashed by control forms on this thread since it started.
pub fn keys_hashed() -> u64 {
    KEYS_HASHED.with(Cell::get)
}

/// Counts `n` keys hashed.
#[inline(always)]
pub(crate) fn hashed(n: usize) {
    KEYS_HASHED.with(|c| c.set(c.get().wrapping_add(n as u64)));
}
