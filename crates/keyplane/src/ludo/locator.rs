//! The bucket locator's maintenance structure (Ludo §4.4.4): a 1-bit
//! Othello (thesis §2.3) kept over **Ludo's own key ids and key hashes**, so
//! the keys are stored once (in Ludo's key store) and hashed once per
//! operation. It produces ordinary [`othello::Delta`]s for the lookup form's
//! embedded [`othello::Lookup`].
//!
//! A key with Ludo hash `h` is the edge `(ia, ib)` of [`locate`]: both
//! indices come from `mix64(h ^ seed)`, a bijection of `h`, so re-seeding the
//! locator gives a fresh graph without re-reading any key. Keys with identical
//! 64-bit hashes are inseparable here; they make every seed fail and the
//! caller re-seeds Ludo's hash instead.
//!
//! The algorithms are Othello's own, not a copy: the locator is a thin
//! wrapper around the shared Othello core ([`othello::graph::Forest`], the
//! same code as `othello::Control`'s). An insert joins two trees and
//! recolours the smaller one, a value change (a key moving to its other
//! bucket) recolours the smaller side of its edge, a remove only unlinks the
//! edge, and an insert closing a cycle rebuilds with a new seed from the
//! cuckoo cells (which hold every key's id, hash and bucket). What differs
//! from `othello::Control` are the core's parameters: slots from
//! [`locate`], zero free slots (no random fill) and
//! [`NewSlots::Recoloured`] deltas.

use super::Params as LParams;
use super::control::{Cell, NONE};
use crate::error::{Error, Result};
use crate::hash::{SeedSeq, hi, lo, mix64, reduce};
use crate::othello::graph::{Forest, MAX_ATTEMPTS, NewSlots};
use crate::othello::{self, Image, Sizing};

/// Locator slot indices `(ia, ib)` of a key with Ludo hash `h`.
#[inline(always)]
pub(crate) fn locate(p: &othello::Params, h: u64) -> (usize, usize) {
    let x = mix64(h ^ p.seed());
    (reduce(lo(x), p.ma) as usize, reduce(hi(x), p.mb) as usize)
}

/// 1-bit Othello maintenance structure over external ids. See the module docs.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    /// The shared Othello core (1-bit values, compact sizing).
    f: Forest,
    len: usize,
    table: crate::lineage::Lineage,
    seq: u64,
}

impl Locator {
    /// Builds the locator of every key in `cells` (bit = key sits in its
    /// bucket h1), sized for `cap` keys with compact Othello sizing.
    pub fn build(
        cells: &[Cell],
        lp: &LParams,
        id_bound: usize,
        cap: usize,
        seed: u64,
        table: crate::lineage::Lineage,
    ) -> Result<Self> {
        let p = othello::Params::new(0, 1, 1, 1, 0, false, othello::KeyHash::Xxh3);
        let mut l = Locator { f: Forest::new(p, SeedSeq::new(seed)), len: 0, table, seq: 0 };
        l.rebuild(cells, lp, id_bound, cap)?;
        Ok(l)
    }

    /// Re-labels the lineage of the deltas this locator emits (Ludo's id).
    pub fn set_lineage(&mut self, l: crate::lineage::Lineage) {
        self.table = l;
    }

    pub fn stats(&self) -> othello::Stats {
        self.f.stats
    }

    pub fn memory_bytes(&self) -> usize {
        self.f.memory_bytes()
    }

    /// Prefetches the adjacency-list heads and slots of a key with Ludo hash `h`.
    #[inline]
    pub fn prefetch(&self, h: u64) {
        let (ia, ib) = locate(&self.f.p, h);
        self.f.prefetch(ia, ib);
    }

    fn image(&self) -> Image {
        self.f.image()
    }

    /// The lookup form of the current arrays.
    pub fn export(&self) -> othello::Lookup {
        othello::Lookup::from_image(self.image(), self.table, self.seq)
    }

    /// Rebuilds for capacity `cap` with a fresh seed (Othello's re-seed).
    fn rebuild(&mut self, cells: &[Cell], lp: &LParams, id_bound: usize, cap: usize) -> Result<()> {
        if id_bound >= NONE as usize {
            return Err(Error::CapacityExceeded("more than 2^32-1 keys".into()));
        }
        // Per id: hash and bit (2 = no key), then ids in increasing order so
        // every attempt below walks `hs` sequentially.
        let mut hs = crate::mem::advised_vec(id_bound, 0u64);
        let mut bits = crate::mem::advised_vec(id_bound, 2u8);
        for (bk, c) in cells.iter().enumerate() {
            for t in 0..4 {
                let id = c.id[t];
                if id != NONE {
                    hs[id as usize] = c.h[t];
                    bits[id as usize] = (lp.buckets(c.h[t]).1 == bk as u32) as u8;
                }
            }
        }
        let ids: Vec<u32> = (0..id_bound as u32).filter(|&i| bits[i as usize] != 2).collect();
        self.f.rebuild(
            Sizing::Compact,
            cap,
            true,
            &ids,
            id_bound,
            // Room for ids handed out later without a reallocation soon.
            |cap| cap + cap / 8,
            None,
            |p, id| {
                let (ia, ib) = locate(p, hs[id as usize]);
                (ia as u32, ib as u32, bits[id as usize] as u64)
            },
            |n| format!("bucket locator: {MAX_ATTEMPTS} seeds gave cyclic graphs for {n} keys (identical key hashes)"),
        )?;
        self.len = ids.len();
        Ok(())
    }

    fn replace_delta(&mut self) -> othello::Delta {
        crate::lineage::bump(&mut self.seq);
        othello::Delta::replace(self.table, self.seq, self.image())
    }

    fn slots_delta(&mut self, s: othello::Slots) -> othello::Delta {
        crate::lineage::bump(&mut self.seq);
        othello::Delta::slots(self.table, self.seq, s)
    }

    /// Adds key `id` (Ludo hash `h`) with locator bit `bit`. A cycle (or a
    /// full locator) rebuilds from `cells`, which must already hold the key.
    pub fn insert(
        &mut self,
        id: u32,
        h: u64,
        bit: u64,
        cells: &[Cell],
        lp: &LParams,
        id_bound: usize,
    ) -> Result<othello::Delta> {
        if self.len + 1 > self.f.cap {
            let cap = self.f.grow_cap(Sizing::Compact);
            self.rebuild(cells, lp, id_bound, cap)?;
            self.f.stats.grow_rebuilds += 1;
            return Ok(self.replace_delta());
        }
        self.f.reserve(id_bound);
        let (ia, ib) = locate(&self.f.p, h);
        match self.f.insert(id, ia, ib, bit, NewSlots::Recoloured) {
            Some(s) => {
                self.len += 1;
                Ok(self.slots_delta(s))
            }
            None => {
                let cap = self.f.cap;
                self.rebuild(cells, lp, id_bound, cap)?;
                self.f.stats.cycle_rebuilds += 1;
                Ok(self.replace_delta())
            }
        }
    }

    /// Sets the bit of existing key `id` (the key moved to its other bucket).
    pub fn set(&mut self, id: u32, bit: u64) -> othello::Delta {
        let s = self.f.change(id, bit);
        self.slots_delta(s)
    }

    /// Removes key `id`: unlinks its edge; no slot changes (no emptiness bits).
    pub fn remove(&mut self, id: u32) -> othello::Delta {
        let s = self.f.remove(id);
        self.len -= 1;
        self.slots_delta(s)
    }
}

// Snapshot layout (unchanged by the move to the shared core): p, cap,
// seeds, a, b, edges, head_a, head_b, len, table, seq, stats.
impl crate::snapshot::Persist for Locator {
    fn put(&self, w: &mut crate::wire::Writer) {
        self.f.put_head(w);
        self.f.put_graph(w);
        self.len.put(w);
        self.table.put(w);
        self.seq.put(w);
        self.f.stats.put(w);
    }
    fn take(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let head = Forest::take_head(r)?;
        let mut f = Forest::take_graph(r, head)?;
        let len = usize::take(r)?;
        let table = crate::lineage::Lineage::take(r)?;
        let seq = u64::take(r)?;
        f.stats = othello::Stats::take(r)?;
        Ok(Locator { f, len, table, seq })
    }
}

impl Locator {
    /// Checks a loaded locator against the cuckoo cells it indexes
    /// (control-form snapshots).
    pub fn check(&self, cells: &[Cell]) -> Result<()> {
        use crate::snapshot::ensure;
        let p = &self.f.p;
        ensure(p.vbits == 1 && p.fbits == 0 && !p.empt, || "ludo locator parameters".into())?;
        let live: Vec<u32> = cells.iter().flat_map(|c| c.id).filter(|&id| id != NONE).collect();
        ensure(live.len() == self.len, || "ludo locator key count".into())?;
        self.f.check(&live, "ludo locator")
    }
}
