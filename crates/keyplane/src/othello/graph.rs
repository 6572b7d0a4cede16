//! The Othello core shared by Othello's control form and Ludo's bucket
//! locator (a 1-bit Othello over Ludo's own key ids): the bipartite graph as
//! per-slot singly linked edge lists, the two slot arrays, and the
//! algorithms that keep them ([`Forest`]: rebuild with re-seeding and
//! growth, insert joining two trees, value change, remove). Vertices are
//! slot indices, `SIDE_B`-tagged for array B; edge `id` joins the two slots
//! of key `id`.
//!
//! The two users differ only in how a key id maps to its two slots and its
//! XOR target (Othello hashes the key with the table seed; the locator
//! re-mixes Ludo's key hash), in the values of free slots (random for
//! Othello, zero for the locator) and in which slots an insert writes
//! absolutely ([`NewSlots`]); those are parameters here, so both keep
//! their blob and delta bytes.

use super::delta::{Image, SlotRef, Slots};
use super::{Params, SIDE_B, Sizing, Stats, peel_and_assign};
use crate::bits::PackedArray;
use crate::error::{Error, Result, mask};
use crate::hash::SeedSeq;

/// End of an edge list / no edge.
pub(crate) const NONE: u32 = u32::MAX;

/// One key's edge: its slots in A and B and the next edges of their lists.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Edge {
    pub a: u32,
    pub b: u32,
    pub na: u32,
    pub nb: u32,
}

/// An unused edge record.
pub(crate) const NO_EDGE: Edge = Edge { a: NONE, b: NONE, na: NONE, nb: NONE };

/// Outcome of [`walk`].
pub(crate) enum Walk {
    /// The start vertices are connected (without the skipped edge).
    Connected,
    /// Separate trees; `side` names the smaller one, whose vertices are in `q[side]`.
    Separate(usize),
}

#[inline]
fn head(head_a: &[u32], head_b: &[u32], v: u32) -> u32 {
    if v & SIDE_B != 0 { head_b[(v & !SIDE_B) as usize] } else { head_a[v as usize] }
}

#[inline(always)]
fn prefetch_head(head_a: &[u32], head_b: &[u32], v: u32) {
    let (h, i) = if v & SIDE_B != 0 { (head_b, (v & !SIDE_B) as usize) } else { (head_a, v as usize) };
    if let Some(x) = h.get(i) {
        crate::mem::prefetch(x as *const u32);
    }
}

/// Walks the trees of `s0` and `s1` in lock step (never crossing edge
/// `skip`) until one is exhausted or the walks meet. `q[s]` receives the
/// `(vertex, edge it was reached by)` pairs of walk `s`.
pub(crate) fn walk(
    edges: &[Edge],
    head_a: &[u32],
    head_b: &[u32],
    q: &mut [Vec<(u32, u32)>; 2],
    s0: u32,
    s1: u32,
    skip: u32,
) -> Walk {
    let starts = [s0, s1];
    let mut pos = [0usize; 2];
    for (q, &st) in q.iter_mut().zip(&starts) {
        q.clear();
        q.push((st, skip));
    }
    // An isolated start vertex is a whole tree by itself: no walk at all
    // (about 40% of inserts at full compact load).
    for (s, &st) in starts.iter().enumerate() {
        if head(head_a, head_b, st) == NONE {
            return Walk::Separate(s);
        }
    }
    loop {
        for s in 0..2 {
            let (v, parent) = q[s][pos[s]];
            pos[s] += 1;
            let side_b = v & SIDE_B != 0;
            let mut e = head(head_a, head_b, v);
            while e != NONE {
                let ed = edges[e as usize];
                let (w, next) = if side_b { (ed.a, ed.nb) } else { (ed.b | SIDE_B, ed.na) };
                if e != parent {
                    if w == starts[1 - s] {
                        return Walk::Connected;
                    }
                    // Start the vertex's cache miss now: it is expanded
                    // after the vertices queued before it, so the misses of
                    // a tree's frontier overlap instead of queueing up.
                    prefetch_head(head_a, head_b, w);
                    q[s].push((w, e));
                }
                e = next;
            }
            // Exhausted without meeting the other start: this tree is the smaller one.
            if pos[s] == q[s].len() {
                return Walk::Separate(s);
            }
        }
    }
}

/// Removes edge `id` from the list of slot `at` on side B (`side_b`) or A.
pub(crate) fn unlink(edges: &mut [Edge], head_a: &mut [u32], head_b: &mut [u32], side_b: bool, at: usize, id: u32) {
    let next = |e: &Edge| if side_b { e.nb } else { e.na };
    let after = next(&edges[id as usize]);
    let head = if side_b { &mut head_b[at] } else { &mut head_a[at] };
    if *head == id {
        *head = after;
        return;
    }
    let mut cur = *head;
    while cur != NONE {
        let ed = &mut edges[cur as usize];
        if next(ed) == id {
            if side_b {
                ed.nb = after
            } else {
                ed.na = after
            }
            return;
        }
        cur = next(ed);
    }
}

/// The forest's adjacency lists for edges `ids` with slot pairs `ends`
/// (indexed by id): `(head_a, head_b, edges)` for arrays of `ma` and `mb`
/// slots, with `edge_len` ≥ every id entries of edge links. Allocated with
/// huge-page advice (the walks read them at random).
pub(crate) fn link_all(
    ids: &[u32],
    ends: &[(u32, u32)],
    ma: usize,
    mb: usize,
    edge_len: usize,
) -> (Vec<u32>, Vec<u32>, Vec<Edge>) {
    let mut head_a = crate::mem::advised_vec(ma, NONE);
    let mut head_b = crate::mem::advised_vec(mb, NONE);
    let mut edges = crate::mem::advised_vec(edge_len, NO_EDGE);
    for &id in ids {
        let (i, j) = ends[id as usize];
        edges[id as usize] = Edge { a: i, b: j, na: head_a[i as usize], nb: head_b[j as usize] };
        head_a[i as usize] = id;
        head_b[j as usize] = id;
    }
    (head_a, head_b, edges)
}

/// Checks a loaded graph (control-form snapshots): every edge list ends,
/// holds exactly the edges `live` whose endpoint it is, each once; every
/// other edge record is unused; and the graph is a forest (the walks and
/// recolouring rely on it). Fails with [`crate::Error::Corrupt`].
pub(crate) fn check_forest(edges: &[Edge], head_a: &[u32], head_b: &[u32], live: &[u32]) -> crate::Result<()> {
    use crate::snapshot::ensure;
    let (ma, mb, n) = (head_a.len(), head_b.len(), edges.len());
    let mut is_live = vec![false; n];
    for &id in live {
        ensure((id as usize) < n, || format!("key {id} has no edge record"))?;
        let e = edges[id as usize];
        ensure((e.a as usize) < ma && (e.b as usize) < mb, || format!("edge {id} lies outside the arrays"))?;
        is_live[id as usize] = true;
    }
    // Walk every list once; count each edge's appearances per side.
    let mut seen = vec![0u8; n];
    for (side_b, heads) in [(false, head_a), (true, head_b)] {
        for (at, &h) in heads.iter().enumerate() {
            let mut e = h;
            while e != NONE {
                let i = e as usize;
                ensure(i < n && is_live[i], || format!("edge list of slot {at} holds unused edge {e}"))?;
                let ed = edges[i];
                let (end, next) = if side_b { (ed.b, ed.nb) } else { (ed.a, ed.na) };
                let bit = 1u8 << side_b as u8;
                ensure(end as usize == at && seen[i] & bit == 0, || format!("edge {e} is listed at the wrong slot"))?;
                seen[i] |= bit;
                e = next;
            }
        }
    }
    ensure(live.iter().all(|&id| seen[id as usize] == 3), || "an edge is missing from its slots' lists".into())?;
    // Union-find: a cycle means an edge joins two slots already connected.
    let mut parent: Vec<u32> = (0..(ma + mb) as u32).collect();
    fn root(p: &mut [u32], mut x: u32) -> u32 {
        while p[x as usize] != x {
            let up = p[p[x as usize] as usize];
            p[x as usize] = up;
            x = up;
        }
        x
    }
    for &id in live {
        let e = edges[id as usize];
        let (x, y) = (root(&mut parent, e.a), root(&mut parent, ma as u32 + e.b));
        ensure(x != y, || format!("edge {id} closes a cycle; the graph must be a forest"))?;
        parent[x as usize] = y;
    }
    Ok(())
}

/// Consecutive failed seeds before a rebuild gives up (each attempt
/// succeeds with probability ≈ 0.5 at full compact load).
pub(crate) const MAX_ATTEMPTS: u32 = 64;

/// Which slots an insert writes with absolute values in its delta (the
/// rest of the delta XORs one tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewSlots {
    /// Every endpoint that gains its first edge, with its emptiness bit
    /// (Othello's control form).
    Marked,
    /// Only an isolated endpoint whose value changes (Ludo's locator).
    Recoloured,
}

/// The Othello core: parameters, capacity and seeds, the two slot arrays,
/// the forest over them and its history counters. See the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct Forest {
    pub p: Params,
    /// Keys the arrays hold before the next growth.
    pub cap: usize,
    pub seeds: SeedSeq,
    pub a: PackedArray,
    pub b: PackedArray,
    // Per edge (= key id) its endpoints and the next edge at each endpoint,
    // in one 16-byte record so a walk step costs one cache miss.
    pub edges: Vec<Edge>,
    pub head_a: Vec<u32>,
    pub head_b: Vec<u32>,
    pub stats: Stats,
    // Traversal scratch.
    q: [Vec<(u32, u32)>; 2],
}

/// The slot reference of vertex `v` in a delta.
#[inline]
fn slot_ref(v: u32) -> SlotRef {
    if v & SIDE_B != 0 { ((v & !SIDE_B) as u64) << 1 | 1 } else { (v as u64) << 1 }
}

impl Forest {
    /// An empty core with 1-slot arrays and no graph (rebuild it before use).
    pub fn new(p: Params, seeds: SeedSeq) -> Self {
        Forest {
            p,
            cap: 0,
            seeds,
            a: PackedArray::new(1, p.width()),
            b: PackedArray::new(1, p.width()),
            edges: Vec::new(),
            head_a: Vec::new(),
            head_b: Vec::new(),
            stats: Stats::default(),
            q: [Vec::new(), Vec::new()],
        }
    }

    /// Capacity after one growth step.
    pub fn grow_cap(&self, sizing: Sizing) -> usize {
        match sizing {
            Sizing::Compact => self.cap + self.cap / 2,
            Sizing::PowerOfTwo => self.cap * 2,
        }
    }

    /// Rebuilds arrays and graph for capacity `cap` (array sizes by
    /// `sizing`). Draws a fresh seed first when `new_seed`, and again after
    /// every attempt whose graph has a cycle. `locate(&params, id)` gives
    /// key `id`'s slots and XOR target under the attempt's seed; free slots
    /// get pseudo-random values from `seed ^ salt` with `free_salt`, else
    /// zero. Edge records are allocated for `edge_len` ids (≥ every id in
    /// `ids`, all below `bound`). After [`MAX_ATTEMPTS`] cyclic graphs it
    /// fails with [`Error::BuildFailed`] carrying `fail(ids.len())`, and
    /// nothing has changed.
    #[allow(clippy::too_many_arguments)]
    pub fn rebuild(
        &mut self,
        sizing: Sizing,
        cap: usize,
        new_seed: bool,
        ids: &[u32],
        bound: usize,
        edge_len: impl FnOnce(usize) -> usize,
        free_salt: Option<u64>,
        mut locate: impl FnMut(&Params, u32) -> (u32, u32, u64),
        fail: impl FnOnce(usize) -> String,
    ) -> Result<()> {
        let (ma, mb) = Params::sizes(sizing, cap)?;
        let cap = match sizing {
            Sizing::Compact => cap.max(4),
            // The arrays' real capacity: the most keys these power-of-two
            // sizes are chosen for (m_b ≥ c, m_a ≥ 4c/3). A bulk build of
            // 16.0M keys gets m_b = 2^24 and room for 16.7M keys, so its
            // first inserts do not force a growth rebuild.
            Sizing::PowerOfTwo => cap.max(4).max((mb as usize).min(ma as usize * 3 / 4)),
        };
        if bound >= NONE as usize {
            return Err(Error::CapacityExceeded("more than 2^32-1 keys".into()));
        }
        let mut p = Params { ma, mb, ..self.p };
        if new_seed {
            p.set_seed(self.seeds.next());
        }
        // Per id: slots and target, filled in increasing id order so every
        // attempt walks them sequentially.
        let mut ends = crate::mem::advised_vec(bound, (NONE, NONE));
        let mut targets = crate::mem::advised_vec(bound, 0u64);
        let mut attempts = 0;
        let (a, b) = loop {
            for &id in ids {
                let (ia, ib, t) = locate(&p, id);
                ends[id as usize] = (ia, ib);
                targets[id as usize] = t;
            }
            let free = free_salt.map(|s| p.seed ^ s);
            if let Some(ab) = peel_and_assign(&p, ids, &ends, |id| targets[id as usize], free) {
                break ab;
            }
            self.stats.failed_seeds += 1;
            attempts += 1;
            if attempts >= MAX_ATTEMPTS {
                return Err(Error::BuildFailed(fail(ids.len())));
            }
            p.set_seed(self.seeds.next());
        };
        drop(targets);
        // Free the old graph first (peak memory), then link the new one.
        self.edges = Vec::new();
        self.head_a = Vec::new();
        self.head_b = Vec::new();
        let (head_a, head_b, edges) = link_all(ids, &ends, ma as usize, mb as usize, edge_len(cap).max(bound));
        drop(ends);
        self.p = p;
        self.cap = cap;
        self.a = a;
        self.b = b;
        self.edges = edges;
        self.head_a = head_a;
        self.head_b = head_b;
        self.stats.rebuilds += 1;
        Ok(())
    }

    /// The lookup-form image of the current arrays.
    pub fn image(&self) -> Image {
        Image { p: self.p, a: self.a.clone(), b: self.b.clone() }
    }

    /// A delta body that changes nothing.
    pub fn nop(&self) -> Slots {
        Slots { seed: self.p.seed, xor: 0, xors: Vec::new(), sets: Vec::new() }
    }

    /// Room for edge records of ids below `bound`.
    pub fn reserve(&mut self, bound: usize) {
        if self.edges.len() < bound {
            self.edges.resize(bound, NO_EDGE);
        }
    }

    /// Starts the cache misses of an insert at slots `(ia, ib)`: both
    /// adjacency-list heads and both slots.
    #[inline]
    pub fn prefetch(&self, ia: usize, ib: usize) {
        if ia < self.head_a.len() && ib < self.head_b.len() {
            crate::mem::prefetch(&self.head_a[ia] as *const u32);
            crate::mem::prefetch(&self.head_b[ib] as *const u32);
            crate::mem::prefetch(self.a.word_ptr(ia));
            crate::mem::prefetch(self.b.word_ptr(ib));
        }
    }

    /// Starts the cache misses of the first edge records a walk from slots
    /// `(ia, ib)` reads (the edges their list heads name); the heads
    /// should be cached already ([`Forest::prefetch`] some time before).
    #[inline]
    pub fn prefetch_edges(&self, ia: usize, ib: usize) {
        for e in [self.head_a.get(ia), self.head_b.get(ib)].into_iter().flatten() {
            if let Some(x) = self.edges.get(*e as usize) {
                crate::mem::prefetch(x as *const Edge);
            }
        }
    }

    /// Heap bytes of arrays and graph.
    pub fn memory_bytes(&self) -> usize {
        self.a.memory_bytes()
            + self.b.memory_bytes()
            + std::mem::size_of::<Edge>() * self.edges.capacity()
            + 4 * (self.head_a.capacity() + self.head_b.capacity())
    }

    /// Current value of an edge's slots, `(slot(a), slot(b))`.
    #[inline]
    fn slot(&self, v: u32) -> u64 {
        if v & SIDE_B != 0 { self.b.get((v & !SIDE_B) as usize) } else { self.a.get(v as usize) }
    }

    #[inline]
    fn set_slot(&self, v: u32, x: u64) {
        if v & SIDE_B != 0 { self.b.set((v & !SIDE_B) as usize, x) } else { self.a.set(v as usize, x) }
    }

    /// See [`walk`].
    fn walk(&mut self, s0: u32, s1: u32, skip: u32) -> Walk {
        walk(&self.edges, &self.head_a, &self.head_b, &mut self.q, s0, s1, skip)
    }

    /// XORs `d` into every vertex of tree `q[side]`; returns the slot refs.
    fn recolour(&mut self, side: usize, d: u64) -> Vec<SlotRef> {
        let verts = std::mem::take(&mut self.q[side]);
        let mut refs = Vec::with_capacity(verts.len());
        for &(v, _) in &verts {
            let x = self.slot(v);
            self.set_slot(v, x ^ d);
            refs.push(slot_ref(v));
        }
        self.stats.recoloured_slots += verts.len() as u64;
        self.q[side] = verts;
        refs
    }

    /// Links key `id` (an id below the last [`Forest::reserve`] bound, not
    /// linked yet) at slots `(ia, ib)` with XOR target `t`: joins two trees
    /// and recolours the smaller one. `None` (nothing changed) when the
    /// slots are already connected: the edge would close a cycle, and the
    /// caller rebuilds with a new seed.
    pub fn insert(&mut self, id: u32, ia: usize, ib: usize, t: u64, new: NewSlots) -> Option<Slots> {
        let (u, v) = (ia as u32, ib as u32 | SIDE_B);
        let side = match self.walk(u, v, NONE) {
            Walk::Connected => return None,
            Walk::Separate(side) => side,
        };
        let d = (self.slot(u) ^ self.slot(v) ^ t) & self.p.xmask();
        let eb = self.p.ebit();
        let (u_empty, v_empty) = (self.head_a[ia] == NONE, self.head_b[ib] == NONE);
        let mut sets = Vec::new();
        let mut xors = Vec::new();
        // An isolated start vertex is recoloured with an absolute write; a
        // real tree with an XOR list.
        let lone = if side == 0 { u_empty } else { v_empty };
        if d != 0 {
            if lone {
                let w = if side == 0 { u } else { v };
                let x = self.slot(w) ^ d;
                self.set_slot(w, x);
                self.stats.recoloured_slots += 1;
                if new == NewSlots::Recoloured {
                    sets.push((slot_ref(w), x));
                }
            } else {
                xors = self.recolour(side, d);
            }
        }
        if new == NewSlots::Marked {
            // Every endpoint gaining its first edge also gains its emptiness bit.
            for (w, empty) in [(u, u_empty), (v, v_empty)] {
                if empty {
                    let x = self.slot(w) | eb;
                    self.set_slot(w, x);
                    sets.push((slot_ref(w), x));
                }
            }
        }
        self.edges[id as usize] = Edge { a: ia as u32, b: ib as u32, na: self.head_a[ia], nb: self.head_b[ib] };
        self.head_a[ia] = id;
        self.head_b[ib] = id;
        Some(Slots { seed: self.p.seed, xor: if xors.is_empty() { 0 } else { d }, xors, sets })
    }

    /// Gives linked key `id` the XOR target `t`: recolours the smaller side
    /// of its edge.
    pub fn change(&mut self, id: u32, t: u64) -> Slots {
        let ed = self.edges[id as usize];
        let (u, v) = (ed.a, ed.b | SIDE_B);
        let d = (self.slot(u) ^ self.slot(v) ^ t) & self.p.xmask();
        if d == 0 {
            return self.nop();
        }
        match self.walk(u, v, id) {
            Walk::Separate(side) => {
                let xors = self.recolour(side, d);
                Slots { seed: self.p.seed, xor: d, xors, sets: Vec::new() }
            }
            // Removing an edge of a forest disconnects its ends (snapshots
            // are checked to be forests when loaded).
            Walk::Connected => unreachable!("the graph is a forest: removing an edge disconnects its ends"),
        }
    }

    /// Unlinks key `id`'s edge; endpoints left isolated lose their
    /// emptiness bit (absolute writes in the delta).
    pub fn remove(&mut self, id: u32) -> Slots {
        let ed = self.edges[id as usize];
        let (ia, ib) = (ed.a as usize, ed.b as usize);
        unlink(&mut self.edges, &mut self.head_a, &mut self.head_b, false, ia, id);
        unlink(&mut self.edges, &mut self.head_a, &mut self.head_b, true, ib, id);
        self.edges[id as usize] = NO_EDGE;
        let mut sets = Vec::new();
        if self.p.empt {
            let keep = mask(self.p.vbits + self.p.fbits);
            if self.head_a[ia] == NONE {
                let x = self.a.get(ia) & keep;
                self.a.set(ia, x);
                sets.push(((ia as u64) << 1, x));
            }
            if self.head_b[ib] == NONE {
                let x = self.b.get(ib) & keep;
                self.b.set(ib, x);
                sets.push(((ib as u64) << 1 | 1, x));
            }
        }
        Slots { seed: self.p.seed, xor: 0, xors: Vec::new(), sets }
    }

    /// Checks a loaded core (control-form snapshots): array sizes and
    /// widths, edge lists, and that the graph is a forest over `live`.
    pub fn check(&self, live: &[u32], what: &str) -> Result<()> {
        use crate::snapshot::ensure;
        let p = &self.p;
        ensure(self.a.len() == p.ma as usize && self.b.len() == p.mb as usize, || {
            format!("{what} arrays do not match their sizes")
        })?;
        ensure(self.a.bits() == p.width() && self.b.bits() == p.width(), || format!("{what} slot width"))?;
        ensure(self.head_a.len() == p.ma as usize && self.head_b.len() == p.mb as usize, || {
            format!("{what} edge lists do not match the arrays")
        })?;
        check_forest(&self.edges, &self.head_a, &self.head_b, live)
    }

    /// Writes `(p, cap, seeds)` (the first part of both users' snapshots).
    pub fn put_head(&self, w: &mut crate::wire::Writer) {
        use crate::snapshot::Persist;
        self.p.put(w);
        self.cap.put(w);
        self.seeds.put(w);
    }

    /// Writes `(a, b, edges, head_a, head_b)`.
    pub fn put_graph(&self, w: &mut crate::wire::Writer) {
        use crate::snapshot::Persist;
        self.a.put(w);
        self.b.put(w);
        self.edges.put(w);
        self.head_a.put(w);
        self.head_b.put(w);
    }

    /// Reads what [`Forest::put_head`] wrote.
    pub fn take_head(r: &mut crate::wire::Reader<'_>) -> Result<(Params, usize, SeedSeq)> {
        use crate::snapshot::Persist;
        Ok((Params::take(r)?, usize::take(r)?, SeedSeq::take(r)?))
    }

    /// Reads what [`Forest::put_graph`] wrote; with the head and the
    /// stats, the whole core (checked by [`Forest::check`] afterwards).
    pub fn take_graph(r: &mut crate::wire::Reader<'_>, (p, cap, seeds): (Params, usize, SeedSeq)) -> Result<Self> {
        use crate::snapshot::Persist;
        Ok(Forest {
            p,
            cap,
            seeds,
            a: PackedArray::take(r)?,
            b: PackedArray::take(r)?,
            edges: Vec::take(r)?,
            head_a: Vec::take(r)?,
            head_b: Vec::take(r)?,
            stats: Stats::default(),
            q: [Vec::new(), Vec::new()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{hi, lo, mix64, reduce};
    use std::collections::HashMap;

    /// Slots of a key with hash `h` (the locator's mapping).
    fn locate(p: &Params, h: u64) -> (usize, usize) {
        let x = mix64(h ^ p.seed);
        (reduce(lo(x), p.ma) as usize, reduce(hi(x), p.mb) as usize)
    }

    /// A replica's view of a delta body: XOR `xor` into `xors`, then write `sets`.
    fn apply(s: &Slots, a: &PackedArray, b: &PackedArray) {
        for &r in &s.xors {
            let (arr, i) = if r & 1 == 1 { (b, (r >> 1) as usize) } else { (a, (r >> 1) as usize) };
            arr.set(i, arr.get(i) ^ s.xor);
        }
        for &(r, v) in &s.sets {
            let (arr, i) = if r & 1 == 1 { (b, (r >> 1) as usize) } else { (a, (r >> 1) as usize) };
            arr.set(i, v);
        }
    }

    /// Random inserts, value changes and removes against a map oracle, in
    /// both delta modes: every live key's two slots XOR to its target, the
    /// emptiness bit marks exactly the slots with edges, and the deltas
    /// replayed on a replica give the core's own arrays.
    #[test]
    fn forest_matches_an_oracle_and_its_deltas_rebuild_the_arrays() {
        for (new, empt, vbits) in
            [(NewSlots::Marked, true, 4), (NewSlots::Marked, false, 8), (NewSlots::Recoloured, false, 1)]
        {
            let p = Params::new(0, 1, 1, vbits, 0, empt, super::super::KeyHash::Xxh3);
            let mut f = Forest::new(p, SeedSeq::new(7));
            let cap = 600;
            // id -> (hash, value)
            let mut live: HashMap<u32, (u64, u64)> = HashMap::new();
            let mut hashes = vec![0u64; 2 * cap];
            let rebuild = |f: &mut Forest, live: &HashMap<u32, (u64, u64)>, hashes: &[u64]| {
                let mut ids: Vec<u32> = live.keys().copied().collect();
                ids.sort_unstable();
                f.rebuild(
                    Sizing::Compact,
                    cap,
                    true,
                    &ids,
                    hashes.len(),
                    |_| 0,
                    Some(0x1234),
                    |p, id| {
                        let (ia, ib) = locate(p, hashes[id as usize]);
                        (ia as u32, ib as u32, live[&id].1)
                    },
                    |n| format!("{n} keys"),
                )
                .unwrap();
            };
            rebuild(&mut f, &live, &hashes);
            let (mut ra, mut rb) = (f.a.clone(), f.b.clone());
            let mut rebuilds = 0;
            for step in 0..4000u64 {
                let r = mix64(step ^ (vbits as u64) << 32);
                let id = (r % (2 * cap as u64)) as u32;
                let v = (r >> 20) & mask(vbits);
                let delta = match live.get(&id).copied() {
                    Some((_, old)) if r >> 60 < 6 && old != v => {
                        live.insert(id, (hashes[id as usize], v));
                        Some(f.change(id, v))
                    }
                    Some(_) => {
                        live.remove(&id);
                        Some(f.remove(id))
                    }
                    None if live.len() < cap => {
                        hashes[id as usize] = mix64(r ^ 0xabc);
                        live.insert(id, (hashes[id as usize], v));
                        f.reserve(hashes.len());
                        let (ia, ib) = locate(&f.p, hashes[id as usize]);
                        let s = f.insert(id, ia, ib, v, new);
                        if s.is_none() {
                            rebuild(&mut f, &live, &hashes);
                            rebuilds += 1;
                            (ra, rb) = (f.a.clone(), f.b.clone());
                        }
                        s
                    }
                    None => None,
                };
                if let Some(s) = delta {
                    assert_eq!(s.seed, f.p.seed);
                    apply(&s, &ra, &rb);
                }
                assert!(ra == f.a && rb == f.b, "step {step}: the deltas do not reproduce the arrays");
                if step % 97 == 0 || step == 3999 {
                    for (&id, &(h, v)) in &live {
                        let (ia, ib) = locate(&f.p, h);
                        let (x, y) = (f.a.get(ia), f.b.get(ib));
                        assert_eq!((x ^ y) & f.p.xmask(), v, "step {step}, key {id}");
                        assert_eq!(f.edges[id as usize].a as usize, ia);
                    }
                    if empt {
                        for i in 0..f.p.ma as usize {
                            assert_eq!(f.a.get(i) & f.p.ebit() != 0, f.head_a[i] != NONE, "slot a{i}");
                        }
                    }
                    let ids: Vec<u32> = live.keys().copied().collect();
                    f.check(&ids, "test").unwrap();
                }
            }
            assert!(rebuilds < 20, "{rebuilds} cycle rebuilds for {cap} keys");
            assert_eq!(f.stats.rebuilds, rebuilds + 1);
        }
    }
}
