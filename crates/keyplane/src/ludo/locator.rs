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
//! The algorithms are Othello's (`crate::othello::Control`): an insert joins
//! two trees and recolours the smaller one, a value change (a key moving to
//! its other bucket) recolours the smaller side of its edge, a remove only
//! unlinks the edge, and an insert closing a cycle rebuilds with a new seed
//! from the cuckoo cells (which hold every key's id, hash and bucket).

use super::Params as LParams;
use super::control::{Cell, NONE};
use crate::bits::PackedArray;
use crate::error::{Error, Result};
use crate::hash::{SeedSeq, hi, lo, mix64, reduce};
use crate::mem::advised_vec;
use crate::othello::graph::{self, Edge, NO_EDGE, Walk};
use crate::othello::{self, Image, SIDE_B};

/// Consecutive failed seeds before a rebuild gives up.
const MAX_ATTEMPTS: u32 = 64;

/// Locator slot indices `(ia, ib)` of a key with Ludo hash `h`.
#[inline(always)]
pub(crate) fn locate(p: &othello::Params, h: u64) -> (usize, usize) {
    let x = mix64(h ^ p.seed);
    (reduce(lo(x), p.ma) as usize, reduce(hi(x), p.mb) as usize)
}

/// 1-bit Othello maintenance structure over external ids. See the module docs.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    p: othello::Params,
    cap: usize,
    seeds: SeedSeq,
    a: PackedArray,
    b: PackedArray,
    edges: Vec<Edge>,
    head_a: Vec<u32>,
    head_b: Vec<u32>,
    len: usize,
    table: crate::lineage::Lineage,
    seq: u64,
    stats: othello::Stats,
    q: [Vec<(u32, u32)>; 2],
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
        let mut l = Locator {
            p: othello::Params { seed: 0, ma: 1, mb: 1, vbits: 1, fbits: 0, empt: false },
            cap: 0,
            seeds: SeedSeq::new(seed),
            a: PackedArray::new(1, 1),
            b: PackedArray::new(1, 1),
            edges: Vec::new(),
            head_a: Vec::new(),
            head_b: Vec::new(),
            len: 0,
            table,
            seq: 0,
            stats: othello::Stats::default(),
            q: [Vec::new(), Vec::new()],
        };
        l.rebuild(cells, lp, id_bound, cap)?;
        Ok(l)
    }

    /// Re-labels the lineage of the deltas this locator emits (Ludo's id).
    pub fn set_lineage(&mut self, l: crate::lineage::Lineage) {
        self.table = l;
    }

    pub fn stats(&self) -> othello::Stats {
        self.stats
    }

    pub fn memory_bytes(&self) -> usize {
        self.a.memory_bytes()
            + self.b.memory_bytes()
            + std::mem::size_of::<Edge>() * self.edges.capacity()
            + 4 * (self.head_a.capacity() + self.head_b.capacity())
    }

    /// Prefetches the adjacency-list heads of a key with Ludo hash `h`.
    #[inline]
    pub fn prefetch(&self, h: u64) {
        let (ia, ib) = locate(&self.p, h);
        if ia < self.head_a.len() && ib < self.head_b.len() {
            crate::mem::prefetch(&self.head_a[ia] as *const u32);
            crate::mem::prefetch(&self.head_b[ib] as *const u32);
        }
    }

    fn image(&self) -> Image {
        Image { p: self.p, a: self.a.clone(), b: self.b.clone() }
    }

    /// The lookup form of the current arrays.
    pub fn export(&self) -> othello::Lookup {
        othello::Lookup::from_image(self.image(), self.table, self.seq)
    }

    /// Rebuilds for capacity `cap` with a fresh seed (Othello's re-seed).
    fn rebuild(&mut self, cells: &[Cell], lp: &LParams, id_bound: usize, cap: usize) -> Result<()> {
        let cap = cap.max(4);
        let (ma, mb) = othello::Params::sizes(othello::Sizing::Compact, cap)?;
        if id_bound >= NONE as usize {
            return Err(Error::CapacityExceeded("more than 2^32-1 keys".into()));
        }
        // Per id: hash and bit (2 = no key), then ids in increasing order so
        // every attempt below walks `hs` and `ends` sequentially.
        let mut hs = advised_vec(id_bound, 0u64);
        let mut bits = advised_vec(id_bound, 2u8);
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
        let mut p = othello::Params { ma, mb, ..self.p };
        let mut ends = advised_vec(id_bound, (NONE, NONE));
        let mut attempts = 0;
        let (a, b) = loop {
            p.seed = self.seeds.next();
            for &id in &ids {
                let (ia, ib) = locate(&p, hs[id as usize]);
                ends[id as usize] = (ia as u32, ib as u32);
            }
            if let Some(ab) = othello::peel_and_assign(&p, &ids, &ends, |id| bits[id as usize] as u64, None) {
                break ab;
            }
            self.stats.failed_seeds += 1;
            attempts += 1;
            if attempts >= MAX_ATTEMPTS {
                return Err(Error::BuildFailed(format!(
                    "bucket locator: {MAX_ATTEMPTS} seeds gave cyclic graphs for {} keys (identical key hashes)",
                    ids.len()
                )));
            }
        };
        drop((hs, bits));
        // Free the old graph first (peak memory), then allocate with huge pages.
        self.edges = Vec::new();
        self.head_a = Vec::new();
        self.head_b = Vec::new();
        // Room for ids handed out later without a reallocation soon.
        let (head_a, head_b, edges) =
            graph::link_all(&ids, &ends, ma as usize, mb as usize, id_bound.max(cap + cap / 8));
        self.p = p;
        self.cap = cap;
        self.a = a;
        self.b = b;
        self.edges = edges;
        self.head_a = head_a;
        self.head_b = head_b;
        self.len = ids.len();
        self.stats.rebuilds += 1;
        Ok(())
    }

    fn replace_delta(&mut self) -> othello::Delta {
        crate::lineage::bump(&mut self.seq);
        othello::Delta::replace(self.table, self.seq, self.image())
    }

    fn slots_delta(&mut self, xor: u64, xors: Vec<u64>, sets: Vec<(u64, u64)>) -> othello::Delta {
        crate::lineage::bump(&mut self.seq);
        othello::Delta::slots(self.table, self.seq, othello::Slots { seed: self.p.seed, xor, xors, sets })
    }

    /// See [`graph::walk`].
    fn walk(&mut self, s0: u32, s1: u32, skip: u32) -> Walk {
        graph::walk(&self.edges, &self.head_a, &self.head_b, &mut self.q, s0, s1, skip)
    }

    #[inline]
    fn head(&self, v: u32) -> u32 {
        if v & SIDE_B != 0 { self.head_b[(v & !SIDE_B) as usize] } else { self.head_a[v as usize] }
    }

    #[inline]
    fn slot(&self, v: u32) -> u64 {
        if v & SIDE_B != 0 { self.b.get((v & !SIDE_B) as usize) } else { self.a.get(v as usize) }
    }

    fn slot_ref(v: u32) -> u64 {
        if v & SIDE_B != 0 { ((v & !SIDE_B) as u64) << 1 | 1 } else { (v as u64) << 1 }
    }

    /// Flips every slot of tree `q[side]` (1-bit XOR); returns the slot refs.
    fn recolour(&mut self, side: usize) -> Vec<u64> {
        let mut refs = Vec::with_capacity(self.q[side].len());
        for &(v, _) in &self.q[side] {
            if v & SIDE_B != 0 {
                self.b.xor((v & !SIDE_B) as usize, 1);
            } else {
                self.a.xor(v as usize, 1);
            }
            refs.push(Self::slot_ref(v));
        }
        self.stats.recoloured_slots += refs.len() as u64;
        refs
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
        if self.len + 1 > self.cap {
            let cap = self.cap + self.cap / 2;
            self.rebuild(cells, lp, id_bound, cap)?;
            self.stats.grow_rebuilds += 1;
            return Ok(self.replace_delta());
        }
        if self.edges.len() < id_bound {
            self.edges.resize(id_bound, NO_EDGE);
        }
        let (ia, ib) = locate(&self.p, h);
        let (u, v) = (ia as u32, ib as u32 | SIDE_B);
        match self.walk(u, v, NONE) {
            Walk::Connected => {
                let cap = self.cap;
                self.rebuild(cells, lp, id_bound, cap)?;
                self.stats.cycle_rebuilds += 1;
                Ok(self.replace_delta())
            }
            Walk::Separate(side) => {
                let d = (self.a.get(ia) ^ self.b.get(ib) ^ bit) & 1;
                let mut xors = Vec::new();
                let mut sets = Vec::new();
                if d != 0 {
                    let lone = self.head(if side == 0 { u } else { v }) == NONE;
                    if lone {
                        // An isolated vertex is written absolutely.
                        let w = if side == 0 { u } else { v };
                        let x = self.slot(w) ^ 1;
                        if side == 0 {
                            self.a.set(ia, x);
                        } else {
                            self.b.set(ib, x);
                        }
                        sets.push((Self::slot_ref(w), x));
                        self.stats.recoloured_slots += 1;
                    } else {
                        xors = self.recolour(side);
                    }
                }
                self.edges[id as usize] = Edge { a: ia as u32, b: ib as u32, na: self.head_a[ia], nb: self.head_b[ib] };
                self.head_a[ia] = id;
                self.head_b[ib] = id;
                self.len += 1;
                Ok(self.slots_delta(if xors.is_empty() { 0 } else { 1 }, xors, sets))
            }
        }
    }

    /// Sets the bit of existing key `id` (the key moved to its other bucket).
    pub fn set(&mut self, id: u32, bit: u64) -> othello::Delta {
        let ed = self.edges[id as usize];
        let (u, v) = (ed.a, ed.b | SIDE_B);
        let d = (self.a.get(ed.a as usize) ^ self.b.get(ed.b as usize) ^ bit) & 1;
        if d == 0 {
            return self.slots_delta(0, Vec::new(), Vec::new());
        }
        match self.walk(u, v, id) {
            Walk::Separate(side) => {
                let xors = self.recolour(side);
                self.slots_delta(1, xors, Vec::new())
            }
            // Removing an edge of a forest disconnects its ends.
            Walk::Connected => unreachable!("the locator graph is a forest"),
        }
    }

    /// Removes key `id`: unlinks its edge; no slot changes (no emptiness bits).
    pub fn remove(&mut self, id: u32) -> othello::Delta {
        let ed = self.edges[id as usize];
        self.unlink(false, ed.a as usize, id);
        self.unlink(true, ed.b as usize, id);
        self.edges[id as usize] = NO_EDGE;
        self.len -= 1;
        self.slots_delta(0, Vec::new(), Vec::new())
    }

    /// See [`graph::unlink`].
    fn unlink(&mut self, side_b: bool, at: usize, id: u32) {
        graph::unlink(&mut self.edges, &mut self.head_a, &mut self.head_b, side_b, at, id)
    }
}

crate::snapshot::persist!(Locator { p, cap, seeds, a, b, edges, head_a, head_b, len, table, seq, stats }; q);

impl Locator {
    /// Checks a loaded locator against the cuckoo cells it indexes
    /// (control-form snapshots).
    pub fn check(&self, cells: &[Cell]) -> Result<()> {
        use crate::snapshot::ensure;
        let p = &self.p;
        ensure(p.vbits == 1 && p.fbits == 0 && !p.empt, || "ludo locator parameters".into())?;
        ensure(self.a.len() == p.ma as usize && self.b.len() == p.mb as usize, || "ludo locator arrays".into())?;
        ensure(self.a.bits() == 1 && self.b.bits() == 1, || "ludo locator slot width".into())?;
        ensure(self.head_a.len() == p.ma as usize && self.head_b.len() == p.mb as usize, || {
            "ludo locator edge lists do not match the arrays".into()
        })?;
        let live: Vec<u32> = cells.iter().flat_map(|c| c.id).filter(|&id| id != NONE).collect();
        ensure(live.len() == self.len, || "ludo locator key count".into())?;
        graph::check_forest(&self.edges, &self.head_a, &self.head_b, &live)
    }
}
