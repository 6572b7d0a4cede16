//! Applying many Othello deltas in a row ([`Lookup::apply_batch`]): the
//! slots each patch writes are prefetched a few deltas ahead, so the cache
//! misses of consecutive updates overlap instead of queueing up.

use super::super::Delta;
use super::{Inner, Lookup};
use crate::LookupTable;
use crate::engine::Change;
use crate::error::Result;
use crate::mem::prefetch;

/// How many deltas ahead [`Lookup::apply_batch`] prefetches their slots.
const AHEAD: usize = 8;

impl Lookup {
    /// Applies `deltas` in order, one [`LookupTable::apply`] each, with the
    /// same checks and results; stops at the first delta refused and
    /// returns its error (the deltas before it stay applied, the ones after
    /// it are not applied). The array words each in-place patch writes are
    /// prefetched eight deltas before it is applied.
    pub fn apply_batch(&self, deltas: &[Delta]) -> Result<()> {
        let mut c = self.raw.load_full();
        deltas.iter().take(AHEAD).for_each(|d| touch(&c, d));
        for (i, d) in deltas.iter().enumerate() {
            if let Some(ahead) = deltas.get(i + AHEAD) {
                touch(&c, ahead);
            }
            LookupTable::apply(self, d)?;
            if d.is_rebuild() {
                // A new snapshot: later hints go to its arrays (and the old
                // one is not kept alive by this call).
                c = self.raw.load_full();
            }
        }
        Ok(())
    }
}

/// Prefetches the array words an in-place patch writes (a hint only).
#[inline]
fn touch(c: &Inner, d: &Delta) {
    if let Change::Patch(s) = d.body() {
        for &r in s.xors.iter().chain(s.sets.iter().map(|(r, _)| r)) {
            let (arr, i) = if r & 1 == 1 { (&c.b, r >> 1) } else { (&c.a, r >> 1) };
            // Slots outside the array (a bad delta, which `apply` refuses)
            // are skipped.
            if i < arr.len() as u64 {
                prefetch(arr.word_ptr(i as usize));
            }
        }
    }
}
