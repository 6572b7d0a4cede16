//! The Othello control form: keys, bipartite graph, arrays, deltas.

use super::delta::{Delta, Image, Slots};
use super::{Lookup, Options, Params, SIDE_B, Sizing};
use crate::ControlTable;
use crate::bits::PackedArray;
use crate::engine::ControlLimits;
use crate::error::{Result, check_value, check_value_bits};
use crate::hash::SeedSeq;
use crate::store::{Inserted, KeyStore};

use super::graph::{Edge, Forest, MAX_ATTEMPTS, NONE, NewSlots};
/// How many items ahead [`Control::insert_batch`] starts an item's cache
/// misses (its slots and edge-list heads; the edge records half as far).
pub const BATCH_AHEAD: usize = 8;

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
    store: KeyStore,
    /// Parameters, arrays, graph and the algorithms keeping them (shared
    /// with Ludo's bucket locator).
    f: Forest,
    table: crate::lineage::Lineage,
    seq: u64,
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
        let p = Params::new(seed, 1, 1, value_bits, opts.fingerprint_bits, opts.emptiness, opts.hash);
        p.validate()?;
        let mut c = Control { opts, store, f: Forest::new(p, seeds), table: crate::lineage::Lineage::random(), seq: 0 };
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
        self.f.cap
    }
    /// Array sizes `(m_a, m_b)`.
    pub fn sizes(&self) -> (u32, u32) {
        (self.f.p.ma, self.f.p.mb)
    }
    /// Current seed.
    pub fn seed(&self) -> u64 {
        self.f.p.seed
    }
    /// How this table hashes its keys (the options' [`super::KeyHash`] when
    /// built; a loaded snapshot keeps the one it was built with).
    pub fn key_hash(&self) -> super::KeyHash {
        self.f.p.hash
    }
    /// History counters.
    pub fn stats(&self) -> Stats {
        self.f.stats
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
            check_value(v, self.f.p.vbits)?;
            vals[id as usize] = v;
        }
        // Start from the current arrays: free slots (isolated ones and tree
        // roots) keep their random values; every other slot is recoloured.
        let a = self.f.a.clone();
        let b = self.f.b.clone();
        // Colour every tree from an arbitrary root with BFS over the adjacency lists.
        let mut seen_a = vec![false; self.f.p.ma as usize];
        let mut seen_b = vec![false; self.f.p.mb as usize];
        let mut queue: Vec<u32> = Vec::new();
        let eb = self.f.p.ebit();
        for root in 0..self.f.p.ma {
            if seen_a[root as usize] || self.f.head_a[root as usize] == NONE {
                continue;
            }
            seen_a[root as usize] = true;
            a.set(root as usize, (a.get(root as usize) & self.f.p.xmask()) | eb);
            queue.clear();
            queue.push(root);
            while let Some(v) = queue.pop() {
                let (side_b, i) = (v & SIDE_B != 0, (v & !SIDE_B) as usize);
                let mut e = if side_b { self.f.head_b[i] } else { self.f.head_a[i] };
                let mine = if side_b { b.get(i) } else { a.get(i) } & self.f.p.xmask();
                while e != NONE {
                    let t = self.f.p.target(self.hash_of(e), vals[e as usize]);
                    let ed = self.f.edges[e as usize];
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
        Ok(Lookup::from_image(Image { p: self.f.p, a, b }, self.table, self.seq))
    }

    #[inline]
    fn hash_of(&self, id: u32) -> u64 {
        self.f.p.hash(self.store.key(id))
    }

    /// Rebuilds the graph and arrays for capacity `cap` with fresh seeds.
    fn rebuild(&mut self, cap: usize, new_seed: bool) -> Result<()> {
        let ids: Vec<u32> = self.store.ids().collect();
        let store = &self.store;
        self.f.rebuild(
            self.opts.sizing,
            cap,
            new_seed,
            &ids,
            store.id_bound(),
            |_| 0,
            Some(FREE_SALT),
            |p, id| {
                let (h, ia, ib) = p.locate(store.key(id));
                (ia as u32, ib as u32, p.target(h, store.value(id)))
            },
            |n| {
                format!(
                    "{MAX_ATTEMPTS} seeds in a row gave cyclic graphs for {n} keys; this only happens with \
                     duplicate keys under a broken hash — please report it"
                )
            },
        )?;
        // Room for the keys the arrays hold before the next growth: inserts
        // up to it then never copy the edge records or the key store's
        // vectors (at 16M keys the first insert after a bulk build copied
        // ~0.5 GB of them: 130 ms).
        let room = self.f.cap.saturating_sub(self.store.len());
        self.store.reserve(room);
        let spare = self.f.cap.saturating_sub(self.f.edges.len());
        self.f.edges.reserve(spare);
        Ok(())
    }

    fn replace_delta(&mut self) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta::replace(self.table, self.seq, self.f.image())
    }

    fn with_headroom(&self, n: usize) -> usize {
        match self.opts.sizing {
            // Power-of-two sizes already round up; headroom would only double
            // the arrays when n is itself a power of two.
            Sizing::PowerOfTwo => n,
            Sizing::Compact => n + n * self.opts.headroom_percent as usize / 100,
        }
    }

    fn slots_delta(&mut self, s: Slots) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta::slots(self.table, self.seq, s)
    }

    fn insert_new(&mut self, id: u32, h: u64, ia: usize, ib: usize, value: u64) -> Result<Delta> {
        if self.store.len() > self.f.cap {
            let cap = self.f.grow_cap(self.opts.sizing);
            self.rebuild(cap, true)?;
            self.f.stats.grow_rebuilds += 1;
            return Ok(self.replace_delta());
        }
        self.f.reserve(self.store.id_bound());
        let t = self.f.p.target(h, value);
        match self.f.insert(id, ia, ib, t, NewSlots::Marked) {
            Some(s) => Ok(self.slots_delta(s)),
            None => {
                // Closing a cycle: re-seed the whole table.
                self.rebuild(self.f.cap, true)?;
                self.f.stats.cycle_rebuilds += 1;
                Ok(self.replace_delta())
            }
        }
    }

    /// [`ControlTable::insert`] of `key`, whose `locate` under the current
    /// parameters is `(h, ia, ib)`.
    #[inline]
    fn insert_at(&mut self, key: &[u8], value: u64, (h, ia, ib): (u64, usize, usize)) -> Result<Delta> {
        Self::check_item(key, value, self.f.p.vbits)?;
        match self.store.insert(key, value) {
            Inserted::Existing(id, old) => {
                if old == value {
                    let s = self.f.nop();
                    Ok(self.slots_delta(s))
                } else {
                    Ok(self.change_value(id, value))
                }
            }
            Inserted::New(id) => match self.insert_new(id, h, ia, ib, value) {
                Ok(d) => Ok(d),
                Err(e) => {
                    // Nothing may be lost or half-done: undo the store insert.
                    self.store.remove(key);
                    Err(e)
                }
            },
        }
    }

    /// Inserts (or sets the value of) every `(key, value)` in order: the
    /// same table, deltas and results as one [`ControlTable::insert`] call
    /// per item (a failed item changes nothing and the next one goes on),
    /// faster for many items, because the cache misses of later items are
    /// started while earlier ones are inserted: their slots and edge-list
    /// heads [`BATCH_AHEAD`] items ahead, the edge records those heads name
    /// half as far ahead. Apply the deltas in order (for example with
    /// [`Lookup::apply_batch`]).
    ///
    /// ```
    /// use keyplane::{ControlTable, LookupTable, othello};
    ///
    /// let mut ctl = othello::Control::with_value_bits(8)?;
    /// let table = ctl.export();
    /// let items: Vec<([u8; 4], u64)> = (0..100u32).map(|i| (i.to_le_bytes(), (i % 256) as u64)).collect();
    /// let deltas = ctl.insert_batch(&items).into_iter().collect::<Result<Vec<_>, _>>()?;
    /// table.apply_batch(&deltas)?;
    /// assert_eq!(table.get(&7u32.to_le_bytes()), Some(7));
    /// # Ok::<(), keyplane::Error>(())
    /// ```
    pub fn insert_batch<K: AsRef<[u8]>>(&mut self, items: &[(K, u64)]) -> Vec<Result<Delta>> {
        const RING: usize = 2 * BATCH_AHEAD;
        let mut out = Vec::with_capacity(items.len());
        // `locate` of item `i` sits in `ring[i % RING]` from the moment its
        // slots are prefetched until it is inserted, valid while the
        // parameters (seed, sizes) it was made with are the table's.
        let mut ring = [(0u64, 0usize, 0usize); RING];
        let mut made_with = self.f.p;
        let stage = |c: &Self, ring: &mut [(u64, usize, usize); RING], j: usize| {
            let at = c.f.p.locate(items[j].0.as_ref());
            c.f.prefetch(at.1, at.2);
            ring[j % RING] = at;
        };
        for j in 0..items.len().min(BATCH_AHEAD) {
            stage(self, &mut ring, j);
        }
        for (i, (k, v)) in items.iter().enumerate() {
            if self.f.p != made_with {
                // A rebuild (growth or re-seed) moved every slot: locate
                // the staged items again under the new parameters.
                made_with = self.f.p;
                for j in i..items.len().min(i + BATCH_AHEAD) {
                    stage(self, &mut ring, j);
                }
            }
            if i + BATCH_AHEAD < items.len() {
                stage(self, &mut ring, i + BATCH_AHEAD);
            }
            if i + BATCH_AHEAD / 2 < items.len() {
                let at = ring[(i + BATCH_AHEAD / 2) % RING];
                self.f.prefetch_edges(at.1, at.2);
            }
            out.push(self.insert_at(k.as_ref(), *v, ring[i % RING]));
        }
        out
    }

    fn change_value(&mut self, id: u32, value: u64) -> Delta {
        // The fingerprint part of the target needs the key's hash; plain Othello does not.
        let fp = if self.f.p.fbits == 0 { 0 } else { self.f.p.fp(self.hash_of(id)) };
        let s = self.f.change(id, value | fp);
        self.slots_delta(s)
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
    crate::engine::control_form!(lineage: table, keys: store, value_bits: f.p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        // Hash for the slots first and start their cache misses, so they
        // overlap the key store's own.
        let at = self.f.p.locate(key);
        self.f.prefetch(at.1, at.2);
        self.insert_at(key, value, at)
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some((id, _)) = self.store.remove(key) else { return Ok(None) };
        let s = self.f.remove(id);
        Ok(Some(self.slots_delta(s)))
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(self.f.image(), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.store.memory_bytes() + self.f.memory_bytes()
    }
}

crate::snapshot::persist_enum!(super::Sizing { Compact = 0, PowerOfTwo = 1 });
// `hash` is not persisted here (the snapshot layout predates it): it is
// the loaded parameters' (`Params` records it), set in `load_state`.
crate::snapshot::persist!(Options { sizing, fingerprint_bits, emptiness, seed, headroom_percent }; hash);
crate::snapshot::persist_codec!(Params);
crate::snapshot::persist!(Stats { rebuilds, cycle_rebuilds, grow_rebuilds, failed_seeds, recoloured_slots });
crate::snapshot::persist!(Edge { a, b, na, nb });
// Snapshot layout (unchanged by the move to the shared core): opts, p,
// cap, seeds, store, a, b, edges, head_a, head_b, stats.
impl crate::snapshot::ControlState for Control {
    const KIND: crate::wire::Kind = super::CONTROL_KIND;
    fn lineage_seq(&self) -> (crate::lineage::Lineage, u64) {
        (self.table, self.seq)
    }
    fn save_state(&self, w: &mut crate::wire::Writer) {
        use crate::snapshot::Persist;
        self.opts.put(w);
        self.f.put_head(w);
        self.store.put(w);
        self.f.put_graph(w);
        self.f.stats.put(w);
    }
    fn load_state(r: &mut crate::wire::Reader<'_>, table: crate::lineage::Lineage, seq: u64) -> Result<Self> {
        use crate::snapshot::Persist;
        let mut opts = Options::take(r)?;
        let head = Forest::take_head(r)?;
        opts.hash = head.0.hash;
        let store = KeyStore::take(r)?;
        let mut f = Forest::take_graph(r, head)?;
        f.stats = Stats::take(r)?;
        let c = Control { opts, store, f, table, seq };
        c.check_snapshot()?;
        Ok(c)
    }
}
impl crate::snapshot::Snapshot for Control {
    const SNAPSHOT_KIND: crate::wire::Kind = super::CONTROL_KIND;
    fn snapshot(&self) -> Vec<u8> {
        crate::snapshot::save(self)
    }
    fn from_snapshot(bytes: &[u8]) -> Result<Self> {
        crate::snapshot::load(bytes)
    }
}

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::ensure;
        let bound = self.store.id_bound();
        let n = self.f.edges.len();
        ensure(n <= bound && n + 1 >= bound, || "othello edge records do not match the key ids".into())?;
        let live: Vec<u32> = self.store.live_ids().collect();
        self.f.check(&live, "othello")
    }
}
