//! The Othello control form: keys, bipartite graph, arrays, deltas.

use super::delta::{Delta, Image, SlotRef, Slots};
use super::{Lookup, Options, Params, SIDE_B, Sizing};
use crate::ControlTable;
use crate::bits::PackedArray;
use crate::engine::ControlLimits;
use crate::error::{Error, Result, check_value, check_value_bits, mask};
use crate::hash::SeedSeq;
use crate::store::{Inserted, KeyStore};

use super::graph::{self, Edge, NO_EDGE, NONE, Walk};
/// Consecutive failed seeds before construction gives up (each attempt
/// succeeds with probability ≈ 0.5 at full compact load).
const MAX_ATTEMPTS: u32 = 64;
/// Salt (XORed with the table seed) of the random values in free slots.
const FREE_SALT: u64 = 0x0f4e_e5a1_7000_d1ce;

/// Counters describing the control form's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Full rebuilds (construction, re-seeds and growth).
    pub rebuilds: u64,
    /// Rebuilds forced by an insert that closed a cycle.
    pub cycle_rebuilds: u64,
    /// Rebuilds forced by growth.
    pub grow_rebuilds: u64,
    /// Seeds tried and rejected during rebuilds (cyclic graphs).
    pub failed_seeds: u64,
    /// Slots recoloured by inserts and value changes.
    pub recoloured_slots: u64,
}

/// Othello control form. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, othello};
///
/// let mut ctl = othello::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = othello::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&othello::Delta::from_bytes(&delta.to_bytes())?)?;
/// assert_eq!(table.get(b"10.0.0.2"), Some(7));
/// let mut out = [None; 2];
/// table.get_batch(&[b"10.0.0.1".as_slice(), b"10.0.0.2"], &mut out);
/// assert_eq!(out, [Some(5), Some(7)]);
/// let reader = table.reader(); // one per packet thread
/// assert_eq!(reader.get(b"10.0.0.1"), Some(5));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Control {
    opts: Options,
    p: Params,
    cap: usize,
    seeds: SeedSeq,
    store: KeyStore,
    a: PackedArray,
    b: PackedArray,
    // Graph: per edge (= key id) its endpoints and the next edge at each
    // endpoint, in one 16-byte record so a walk step costs one cache miss.
    edges: Vec<Edge>,
    head_a: Vec<u32>,
    head_b: Vec<u32>,
    table: crate::lineage::Lineage,
    seq: u64,
    stats: Stats,
    // Traversal scratch.
    q: [Vec<(u32, u32)>; 2],
}

impl Control {
    /// Empty table whose arrays are sized for at least `min_capacity` keys
    /// from the start (and never shrink below that). Useful when the values
    /// unknown keys read matter: they come from pairs of free slots, and
    /// arrays of `ma` and `mb` slots hold only `ma · mb` such pairs.
    pub(crate) fn with_min_capacity(value_bits: u32, opts: Options, min_capacity: usize) -> Result<Self> {
        Self::build(KeyStore::new(), value_bits, opts, min_capacity)
    }

    crate::engine::options_constructors! {
        |value_bits, opts|
        empty: Self::build(KeyStore::new(), value_bits, opts, 0),
        items(items): Self::build(Self::collect_items(items, value_bits)?, value_bits, opts, 0),
    }

    fn build(store: KeyStore, value_bits: u32, opts: Options, min_cap: usize) -> Result<Self> {
        check_value_bits(value_bits, 1, 64)?;
        let mut seeds = SeedSeq::new(opts.seed);
        let seed = seeds.next();
        let p = Params { seed, ma: 1, mb: 1, vbits: value_bits, fbits: opts.fingerprint_bits, empt: opts.emptiness };
        p.validate()?;
        let mut c = Control {
            opts,
            p,
            cap: 0,
            seeds,
            store,
            a: PackedArray::new(1, p.width()),
            b: PackedArray::new(1, p.width()),
            edges: Vec::new(),
            head_a: Vec::new(),
            head_b: Vec::new(),
            table: crate::lineage::Lineage::random(),
            seq: 0,
            stats: Stats::default(),
            q: [Vec::new(), Vec::new()],
        };
        let n = c.store.len();
        c.rebuild(c.with_headroom(n).max(min_cap), false)?;
        Ok(c)
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// Capacity before the next growth.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Array sizes `(m_a, m_b)`.
    pub fn sizes(&self) -> (u32, u32) {
        (self.p.ma, self.p.mb)
    }
    /// Current seed.
    pub fn seed(&self) -> u64 {
        self.p.seed
    }
    /// History counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Iterates over `(key, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.store.iter().map(|(_, k, v)| (k, v))
    }

    /// One past the largest key id handed out (live keys have ids below it;
    /// ids are stable while a key stays and reused after it leaves). With
    /// [`Self::key_at`], a scan that can stop and resume anywhere.
    pub(crate) fn id_bound(&self) -> usize {
        self.store.id_bound()
    }

    /// The key and value of key id `id`, if a key holds it.
    pub(crate) fn key_at(&self, id: u32) -> Option<(&[u8], u64)> {
        self.store.is_live(id).then(|| (self.store.key(id), self.store.value(id)))
    }

    /// Exports a lookup form that shares this control form's skeleton (seed,
    /// sizes, graph) but holds `value(key)` for every key: the OthelloSet of
    /// thesis §3.4.3, one control form serving many data planes with
    /// different values. The graph is reused; only the colouring is redone.
    /// Deltas from this control form carry the default values, so such a
    /// lookup form is a snapshot: re-export it after changes.
    pub fn export_with(&self, mut value: impl FnMut(&[u8]) -> u64) -> Result<Lookup> {
        let mut vals = vec![0u64; self.store.id_bound()];
        for (id, k, _) in self.store.iter() {
            let v = value(k);
            check_value(v, self.p.vbits)?;
            vals[id as usize] = v;
        }
        // Start from the current arrays: free slots (isolated ones and tree
        // roots) keep their random values; every other slot is recoloured.
        let a = self.a.clone();
        let b = self.b.clone();
        // Colour every tree from an arbitrary root with BFS over the adjacency lists.
        let mut seen_a = vec![false; self.p.ma as usize];
        let mut seen_b = vec![false; self.p.mb as usize];
        let mut queue: Vec<u32> = Vec::new();
        let eb = self.p.ebit();
        for root in 0..self.p.ma {
            if seen_a[root as usize] || self.head_a[root as usize] == NONE {
                continue;
            }
            seen_a[root as usize] = true;
            a.set(root as usize, (a.get(root as usize) & self.p.xmask()) | eb);
            queue.clear();
            queue.push(root);
            while let Some(v) = queue.pop() {
                let (side_b, i) = (v & SIDE_B != 0, (v & !SIDE_B) as usize);
                let mut e = if side_b { self.head_b[i] } else { self.head_a[i] };
                let mine = if side_b { b.get(i) } else { a.get(i) } & self.p.xmask();
                while e != NONE {
                    let t = self.p.target(self.hash_of(e), vals[e as usize]);
                    let ed = self.edges[e as usize];
                    if side_b {
                        let o = ed.a as usize;
                        if !seen_a[o] {
                            seen_a[o] = true;
                            a.set(o, (mine ^ t) | eb);
                            queue.push(o as u32);
                        }
                        e = ed.nb;
                    } else {
                        let o = ed.b as usize;
                        if !seen_b[o] {
                            seen_b[o] = true;
                            b.set(o, (mine ^ t) | eb);
                            queue.push(o as u32 | SIDE_B);
                        }
                        e = ed.na;
                    }
                }
            }
        }
        Ok(Lookup::from_image(Image { p: self.p, a, b }, self.table, self.seq))
    }

    #[inline]
    fn hash_of(&self, id: u32) -> u64 {
        crate::hash::hash64(self.store.key(id), self.p.seed)
    }

    /// Rebuilds the graph and arrays for capacity `cap` with fresh seeds.
    fn rebuild(&mut self, cap: usize, new_seed: bool) -> Result<()> {
        let (ma, mb) = Params::sizes(self.opts.sizing, cap)?;
        let cap = match self.opts.sizing {
            Sizing::Compact => cap.max(4),
            // The arrays' real capacity: the most keys these power-of-two
            // sizes are chosen for (m_b ≥ c, m_a ≥ 4c/3). A bulk build of
            // 16.0M keys gets m_b = 2^24 and room for 16.7M keys, so its
            // first inserts do not force a growth rebuild.
            Sizing::PowerOfTwo => cap.max(4).max((mb as usize).min(ma as usize * 3 / 4)),
        };
        let bound = self.store.id_bound();
        if bound >= NONE as usize {
            return Err(Error::CapacityExceeded("more than 2^32-1 keys".into()));
        }
        let mut p = Params { ma, mb, ..self.p };
        if new_seed {
            p.seed = self.seeds.next();
        }
        let ids: Vec<u32> = self.store.ids().collect();
        let mut hs = vec![0u64; bound];
        let mut ends = vec![(NONE, NONE); bound];
        let mut attempts = 0;
        let (a, b) = loop {
            for &id in &ids {
                let (h, ia, ib) = p.locate(self.store.key(id));
                hs[id as usize] = h;
                ends[id as usize] = (ia as u32, ib as u32);
            }
            let target = |id: u32| p.target(hs[id as usize], self.store.value(id));
            if let Some(arrays) = peel_and_assign(&p, &ids, &ends, target, Some(p.seed ^ FREE_SALT)) {
                break arrays;
            }
            self.stats.failed_seeds += 1;
            attempts += 1;
            if attempts >= MAX_ATTEMPTS {
                return Err(Error::BuildFailed(format!(
                    "{MAX_ATTEMPTS} seeds in a row gave cyclic graphs for {} keys in {ma}+{mb} slots; this \
                     only happens with duplicate keys under a broken hash — please report it",
                    ids.len()
                )));
            }
            p.seed = self.seeds.next();
        };
        drop(hs);
        let (head_a, head_b, edges) = graph::link_all(&ids, &ends, ma as usize, mb as usize, bound);
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

    fn replace_delta(&mut self) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta::replace(self.table, self.seq, Image { p: self.p, a: self.a.clone(), b: self.b.clone() })
    }

    fn grow_cap(&self) -> usize {
        match self.opts.sizing {
            Sizing::Compact => self.cap + self.cap / 2,
            Sizing::PowerOfTwo => self.cap * 2,
        }
    }

    fn with_headroom(&self, n: usize) -> usize {
        match self.opts.sizing {
            // Power-of-two sizes already round up; headroom would only double
            // the arrays when n is itself a power of two.
            Sizing::PowerOfTwo => n,
            Sizing::Compact => n + n * self.opts.headroom_percent as usize / 100,
        }
    }

    /// See [`graph::walk`].
    fn walk(&mut self, s0: u32, s1: u32, skip: u32) -> Walk {
        graph::walk(&self.edges, &self.head_a, &self.head_b, &mut self.q, s0, s1, skip)
    }

    #[inline]
    fn slot(&self, v: u32) -> u64 {
        if v & SIDE_B != 0 { self.b.get((v & !SIDE_B) as usize) } else { self.a.get(v as usize) }
    }

    fn set_slot(&self, v: u32, x: u64) {
        if v & SIDE_B != 0 { self.b.set((v & !SIDE_B) as usize, x) } else { self.a.set(v as usize, x) }
    }

    fn slot_ref(v: u32) -> SlotRef {
        if v & SIDE_B != 0 { ((v & !SIDE_B) as u64) << 1 | 1 } else { (v as u64) << 1 }
    }

    /// XORs `d` into every vertex of tree `q[side]`; returns the slot refs.
    fn recolour(&mut self, side: usize, d: u64) -> Vec<SlotRef> {
        let verts = std::mem::take(&mut self.q[side]);
        let mut refs = Vec::with_capacity(verts.len());
        for &(v, _) in &verts {
            let x = self.slot(v);
            self.set_slot(v, x ^ d);
            refs.push(Self::slot_ref(v));
        }
        self.stats.recoloured_slots += verts.len() as u64;
        self.q[side] = verts;
        refs
    }

    fn slots_delta(&mut self, xor: u64, xors: Vec<SlotRef>, sets: Vec<(SlotRef, u64)>) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta::slots(self.table, self.seq, Slots { seed: self.p.seed, xor, xors, sets })
    }

    fn ensure_edge_arrays(&mut self) {
        let bound = self.store.id_bound();
        if self.edges.len() < bound {
            self.edges.resize(bound, NO_EDGE);
        }
    }

    fn insert_new(&mut self, id: u32, value: u64) -> Result<Delta> {
        if self.store.len() > self.cap {
            let cap = self.grow_cap();
            self.rebuild(cap, true)?;
            self.stats.grow_rebuilds += 1;
            return Ok(self.replace_delta());
        }
        self.ensure_edge_arrays();
        let (h, ia, ib) = self.p.locate(self.store.key(id));
        let (u, v) = (ia as u32, ib as u32 | SIDE_B);
        match self.walk(u, v, NONE) {
            Walk::Connected => {
                // Closing a cycle: re-seed the whole table.
                self.rebuild(self.cap, true)?;
                self.stats.cycle_rebuilds += 1;
                Ok(self.replace_delta())
            }
            Walk::Separate(side) => {
                let t = self.p.target(h, value);
                let xm = self.p.xmask();
                let d = (self.slot(u) ^ self.slot(v) ^ t) & xm;
                let eb = self.p.ebit();
                let (u_empty, v_empty) = (self.head_a[ia] == NONE, self.head_b[ib] == NONE);
                let mut sets = Vec::new();
                let mut xors = Vec::new();
                // An isolated start vertex is recoloured with an absolute write (it
                // also gains its emptiness bit); a real tree with an XOR list.
                let lone = if side == 0 { u_empty } else { v_empty };
                if d != 0 {
                    if lone {
                        let w = if side == 0 { u } else { v };
                        let x = self.slot(w) ^ d;
                        self.set_slot(w, x);
                        self.stats.recoloured_slots += 1;
                    } else {
                        xors = self.recolour(side, d);
                    }
                }
                for (w, empty) in [(u, u_empty), (v, v_empty)] {
                    if empty {
                        let x = self.slot(w) | eb;
                        self.set_slot(w, x);
                        sets.push((Self::slot_ref(w), x));
                    }
                }
                // Link the edge.
                self.edges[id as usize] = Edge { a: ia as u32, b: ib as u32, na: self.head_a[ia], nb: self.head_b[ib] };
                self.head_a[ia] = id;
                self.head_b[ib] = id;
                Ok(self.slots_delta(if xors.is_empty() { 0 } else { d }, xors, sets))
            }
        }
    }

    fn change_value(&mut self, id: u32, value: u64) -> Delta {
        let ed = self.edges[id as usize];
        let (u, v) = (ed.a, ed.b | SIDE_B);
        // The fingerprint part of the target needs the key's hash; plain Othello does not.
        let fp = if self.p.fbits == 0 { 0 } else { self.p.fp(self.hash_of(id)) };
        let d = (self.slot(u) ^ self.slot(v) ^ value ^ fp) & self.p.xmask();
        if d == 0 {
            return self.slots_delta(0, Vec::new(), Vec::new());
        }
        match self.walk(u, v, id) {
            Walk::Separate(side) => {
                let xors = self.recolour(side, d);
                self.slots_delta(d, xors, Vec::new())
            }
            Walk::Connected => unreachable!("the graph is a forest: removing an edge disconnects its ends"),
        }
    }

    /// See [`graph::unlink`].
    fn unlink(&mut self, side_b: bool, at: usize, id: u32) {
        graph::unlink(&mut self.edges, &mut self.head_a, &mut self.head_b, side_b, at, id)
    }
}

/// Peels the forest (repeatedly removing a slot of degree one and its edge,
/// using the XOR-of-edge-ids trick), then assigns slot values in reverse peel
/// order. Returns `None` when the graph has a cycle (the 2-core is not empty).
///
/// With `free = Some(salt)` every slot starts with pseudo-random value bits
/// (a hash of its index and `salt`) instead of zero: the "free" slots —
/// isolated ones and each tree's root, whose values no key constrains — then
/// hold uniformly random values, as thesis §5.4.3 prescribes ("we assign
/// uniformly random values for every free element"), so a key that was never
/// inserted reads a uniformly random value rather than one biased towards 0.
pub(crate) fn peel_and_assign(
    p: &Params,
    ids: &[u32],
    ends: &[(u32, u32)],
    target: impl Fn(u32) -> u64,
    free: Option<u64>,
) -> Option<(PackedArray, PackedArray)> {
    let (ma, mb) = (p.ma as usize, p.mb as usize);
    // (degree, XOR of incident edge ids) per slot, interleaved: one cache
    // miss per endpoint instead of two.
    let mut va = vec![(0u32, 0u32); ma];
    let mut vb = vec![(0u32, 0u32); mb];
    crate::mem::advise_hugepages(&va);
    crate::mem::advise_hugepages(&vb);
    for &id in ids {
        let (i, j) = ends[id as usize];
        let x = &mut va[i as usize];
        x.0 += 1;
        x.1 ^= id;
        let y = &mut vb[j as usize];
        y.0 += 1;
        y.1 ^= id;
    }
    // order: (edge, free side is B)
    let mut order: Vec<(u32, bool)> = Vec::with_capacity(ids.len());
    let mut stack: Vec<u32> = Vec::new();
    stack.extend(va.iter().enumerate().filter(|(_, d)| d.0 == 1).map(|(i, _)| i as u32));
    stack.extend(vb.iter().enumerate().filter(|(_, d)| d.0 == 1).map(|(j, _)| j as u32 | SIDE_B));
    while let Some(v) = stack.pop() {
        let (side_b, i) = (v & SIDE_B != 0, (v & !SIDE_B) as usize);
        let (mine, other) = if side_b { (&mut vb, &mut va) } else { (&mut va, &mut vb) };
        if mine[i].0 != 1 {
            continue;
        }
        let e = mine[i].1;
        mine[i].0 = 0;
        order.push((e, side_b));
        let (ea, eb) = ends[e as usize];
        let o = if side_b { ea } else { eb } as usize;
        let x = &mut other[o];
        x.0 -= 1;
        x.1 ^= e;
        if x.0 == 1 {
            stack.push(if side_b { o as u32 } else { o as u32 | SIDE_B });
        }
    }
    if order.len() != ids.len() {
        return None;
    }
    drop((va, vb));
    let wd = p.width();
    let a = PackedArray::new(ma, wd);
    let b = PackedArray::new(mb, wd);
    if let Some(salt) = free {
        fill_free(&a, salt, p.xmask());
        fill_free(&b, !salt, p.xmask());
    }
    // Reverse peel order: the fixed end of each edge is final when the edge
    // is reached, so the free end can be solved, and both ends get their
    // emptiness bit without a second pass.
    let (xm, eb_bit) = (p.xmask(), p.ebit());
    for &(e, free_b) in order.iter().rev() {
        let (i, j) = ends[e as usize];
        let (i, j) = (i as usize, j as usize);
        let t = target(e);
        if free_b {
            let x = a.get(i);
            b.set(j, ((x ^ t) & xm) | eb_bit);
            if eb_bit != 0 {
                a.set(i, x | eb_bit);
            }
        } else {
            let y = b.get(j);
            a.set(i, ((y ^ t) & xm) | eb_bit);
            if eb_bit != 0 {
                b.set(j, y | eb_bit);
            }
        }
    }
    Some((a, b))
}

/// Pseudo-random value bits (`xm`) in every slot of `t`, from `salt`.
fn fill_free(t: &PackedArray, salt: u64, xm: u64) {
    for i in 0..t.len() {
        t.set(i, crate::hash::mix64(i as u64 ^ salt.rotate_left(17)) & xm);
    }
}

impl ControlLimits for Control {
    type Options = Options;
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, keys: store, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        Self::check_item(key, value, self.p.vbits)?;
        match self.store.insert(key, value) {
            Inserted::Existing(id, old) => {
                if old == value {
                    Ok(self.slots_delta(0, Vec::new(), Vec::new()))
                } else {
                    Ok(self.change_value(id, value))
                }
            }
            Inserted::New(id) => match self.insert_new(id, value) {
                Ok(d) => Ok(d),
                Err(e) => {
                    // Nothing may be lost or half-done: undo the store insert.
                    self.store.remove(key);
                    Err(e)
                }
            },
        }
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some((id, _)) = self.store.remove(key) else { return Ok(None) };
        let ed = self.edges[id as usize];
        let (ia, ib) = (ed.a as usize, ed.b as usize);
        self.unlink(false, ia, id);
        self.unlink(true, ib, id);
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
        Ok(Some(self.slots_delta(0, Vec::new(), sets)))
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(Image { p: self.p, a: self.a.clone(), b: self.b.clone() }, self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.store.memory_bytes()
            + self.a.memory_bytes()
            + self.b.memory_bytes()
            + std::mem::size_of::<Edge>() * self.edges.capacity()
            + 4 * (self.head_a.capacity() + self.head_b.capacity())
    }
}

crate::snapshot::persist_enum!(super::Sizing { Compact = 0, PowerOfTwo = 1 });
crate::snapshot::persist!(Options { sizing, fingerprint_bits, emptiness, seed, headroom_percent });
crate::snapshot::persist_codec!(Params);
crate::snapshot::persist!(Stats { rebuilds, cycle_rebuilds, grow_rebuilds, failed_seeds, recoloured_slots });
crate::snapshot::persist!(Edge { a, b, na, nb });
crate::snapshot::control_snapshot!(
    Control, super::CONTROL_KIND, lineage: table, seq: seq,
    state { opts, p, cap, seeds, store, a, b, edges, head_a, head_b, stats },
    scratch { q },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::ensure;
        let p = &self.p;
        ensure(self.a.len() == p.ma as usize && self.b.len() == p.mb as usize, || {
            "othello arrays do not match their sizes".into()
        })?;
        ensure(self.a.bits() == p.width() && self.b.bits() == p.width(), || "othello slot width".into())?;
        ensure(self.head_a.len() == p.ma as usize && self.head_b.len() == p.mb as usize, || {
            "othello edge lists do not match the arrays".into()
        })?;
        let bound = self.store.id_bound();
        ensure(self.edges.len() <= bound && self.edges.len() + 1 >= bound, || {
            "othello edge records do not match the key ids".into()
        })?;
        let live: Vec<u32> = self.store.live_ids().collect();
        graph::check_forest(&self.edges, &self.head_a, &self.head_b, &live)
    }
}
