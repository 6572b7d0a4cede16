//! The CFW control form: full keys, collision-avoidance sets, slot owners,
//! cuckoo-path search, deltas.

use super::delta::{Delta, Image, Op, Ops};
use super::{Lookup, Options, Params, SLOTS};
use crate::ControlTable;
use crate::bits::PackedArray;
use crate::cuckoo::path::{Cap, Policy, Seen, search};
use crate::engine::{ControlLimits, RawDelta};
use crate::error::{Error, Result, check_value};
use crate::store::{Inserted, KeyStore};

const NONE: u32 = u32::MAX;
/// `loc` of a key held in level 2.
const IN_L2: u32 = u32::MAX - 1;
/// Level-1 load that triggers growth (1.5× buckets).
const MAX_LOAD: f64 = 0.95;
/// Load a bulk build aims at.
const BUILD_LOAD: f64 = 0.90;
/// Above this load a failed cuckoo-path search grows the table; below it the
/// key goes to level 2 (the stash).
const STASH_LOAD: f64 = 0.90;
/// Buckets a cuckoo-path BFS may visit.
const MAX_BFS: usize = 2000;

/// Counters describing the control form's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Full rebuilds (construction and growth).
    pub rebuilds: u64,
    /// Rebuilds forced by growth.
    pub grow_rebuilds: u64,
    /// Keys moved from level 1 to level 2 because a new key collided with them.
    pub demotions: u64,
    /// Keys moved from level 2 back to level 1 after their colliders left.
    pub promotions: u64,
    /// Keys put in level 2 because no cuckoo path was found (stash use).
    pub stashed: u64,
    /// Level-1 keys displaced by cuckoo paths.
    pub cuckoo_moves: u64,
    /// Longest cuckoo path (keys moved by one insertion).
    pub max_path: u64,
}

#[derive(Debug, Clone, Copy)]
struct Meta {
    fp: u32,
    loc: u32,
    b: [u32; 2],
    next: [u32; 2],
}

const EMPTY_META: Meta = Meta { fp: 0, loc: NONE, b: [NONE; 2], next: [NONE; 2] };

/// Level 1 as the shared cuckoo-path search sees it.
struct L1<'a> {
    owner: &'a [u32],
    meta: &'a [Meta],
}

impl crate::cuckoo::path::Graph for L1<'_> {
    fn slots(&self) -> usize {
        SLOTS
    }
    fn alt(&mut self, b: usize, s: usize) -> Option<usize> {
        let x = *self.owner.get(b * SLOTS + s).filter(|&&x| x != NONE)? as usize;
        let [b1, b2] = self.meta[x].b;
        Some(if b1 as usize == b { b2 } else { b1 } as usize)
    }
    fn free(&self, b: usize) -> Option<usize> {
        (0..SLOTS).find(|&s| self.owner[b * SLOTS + s] == NONE)
    }
}

/// CFW control form. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, cfw};
///
/// let mut ctl = cfw::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = cfw::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&cfw::Delta::from_bytes(&delta.to_bytes())?)?;
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
    store: KeyStore,
    // Per key id: fingerprint, candidate buckets, level-1 slot (or IN_L2),
    // links of the two collision-avoidance lists — one cache line per visit.
    meta: Vec<Meta>,
    // Per bucket: head of the collision-avoidance set (keys with this candidate bucket).
    head: Vec<u32>,
    // Per level-1 slot: owning key id.
    owner: Vec<u32>,
    l1_count: usize,
    l2_count: usize,
    table: crate::lineage::Lineage,
    seq: u64,
    stats: Stats,
    // Cuckoo-path search scratch.
    nodes: Vec<crate::cuckoo::path::Node>,
    marks: Vec<u32>,
    epoch: u32,
    path: Vec<(u32, u8)>,
}

impl Control {
    crate::engine::options_constructors!(build);

    fn build(store: KeyStore, value_bits: u32, opts: Options) -> Result<Self> {
        Self::check_value_bits(value_bits)?;
        let p = Params { seed: opts.seed, nb: 2, vbits: value_bits, fbits: opts.fingerprint_bits };
        p.validate()?;
        let mut c = Control {
            opts,
            p,
            store,
            meta: Vec::new(),
            head: Vec::new(),
            owner: Vec::new(),
            l1_count: 0,
            l2_count: 0,
            table: crate::lineage::Lineage::random(),
            seq: 0,
            stats: Stats::default(),
            nodes: Vec::new(),
            marks: Vec::new(),
            epoch: 0,
            path: Vec::new(),
        };
        let nb = ((c.store.len() as f64 / (SLOTS as f64 * BUILD_LOAD)).ceil() as u64).max(2);
        c.rebuild(nb)?;
        Ok(c)
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// Number of level-1 buckets.
    pub fn buckets(&self) -> u64 {
        self.p.nb
    }
    /// Keys in level 1.
    pub fn level1_len(&self) -> usize {
        self.l1_count
    }
    /// Keys in level 2 (colliding keys and stashed keys).
    pub fn level2_len(&self) -> usize {
        self.l2_count
    }
    /// Level-1 load factor `r_l` (occupied slots / slots).
    pub fn load_factor(&self) -> f64 {
        self.l1_count as f64 / (self.p.nb as f64 * SLOTS as f64)
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
    /// True if the key is stored in level 2 (`None` if absent).
    pub fn in_level2(&self, key: &[u8]) -> Option<bool> {
        self.store.find(key).map(|id| self.meta[id as usize].loc == IN_L2)
    }

    /// Expected alien false-positive rate of the current table (eq. 3.8).
    pub fn expected_false_positive_rate(&self) -> f64 {
        super::expected_false_positive_rate(self.l1_count, self.p.nb, self.p.fbits)
    }

    /// Exports a lookup form with the same skeleton (seed, buckets, slot of
    /// every key, level of every key) but `value(key)` as every key's value:
    /// one control form serving many forwarding nodes whose port numbers
    /// differ (thesis §3.4.2, "the CP FIBs of the nodes share the same
    /// skeleton"). Deltas from this control form carry the default values,
    /// so such a lookup form is a snapshot: re-export it after changes.
    pub fn export_with(&self, mut value: impl FnMut(&[u8]) -> u64) -> Result<Lookup> {
        let mut vals = vec![0u64; self.store.id_bound()];
        for (id, k, _) in self.store.iter() {
            let v = value(k);
            check_value(v, self.p.vbits)?;
            vals[id as usize] = v;
        }
        Ok(Lookup::from_image(self.image(|id| vals[id as usize]), self.table, self.seq))
    }

    fn image(&self, value: impl Fn(u32) -> u64) -> Image {
        let l1 = PackedArray::new(self.owner.len(), self.p.width());
        let mut l2 = Vec::with_capacity(self.l2_count);
        for (s, &id) in self.owner.iter().enumerate() {
            if id != NONE {
                l1.set(s, self.p.word(self.meta[id as usize].fp as u64, value(id)));
            }
        }
        for id in self.store.ids() {
            if self.meta[id as usize].loc == IN_L2 {
                l2.push((self.store.key(id).to_vec(), value(id)));
            }
        }
        l2.sort_unstable();
        Image { p: self.p, l1, l2 }
    }

    #[inline]
    fn word_of(&self, id: u32) -> u64 {
        self.p.word(self.meta[id as usize].fp as u64, self.store.value(id))
    }

    fn max_l1(&self) -> usize {
        (self.p.nb as f64 * SLOTS as f64 * MAX_LOAD) as usize
    }

    fn ensure_arrays(&mut self) {
        let bound = self.store.id_bound();
        if self.meta.len() < bound {
            self.meta.resize(bound, EMPTY_META);
        }
    }

    /// Adds key `id` to the collision-avoidance sets of its two buckets.
    fn link(&mut self, id: u32) {
        let l = self.p.locate(self.store.key(id));
        let i = id as usize;
        self.meta[i].fp = l.fp as u32;
        self.meta[i].b = [l.b1 as u32, l.b2 as u32];
        for side in 0..2 {
            let b = self.meta[i].b[side] as usize;
            self.meta[i].next[side] = self.head[b];
            self.head[b] = id;
        }
    }

    fn unlink(&mut self, id: u32) {
        let i = id as usize;
        for side in 0..2 {
            let b = self.meta[i].b[side];
            let mut cur = self.head[b as usize];
            let mut prev: Option<(u32, usize)> = None;
            while cur != NONE {
                let cs = if self.meta[cur as usize].b[0] == b { 0 } else { 1 };
                if cur == id {
                    let nx = self.meta[i].next[side];
                    match prev {
                        None => self.head[b as usize] = nx,
                        Some((p, ps)) => self.meta[p as usize].next[ps] = nx,
                    }
                    break;
                }
                prev = Some((cur, cs));
                cur = self.meta[cur as usize].next[cs];
            }
        }
        self.meta[i].b = [NONE; 2];
        self.meta[i].next = [NONE; 2];
    }

    /// Calls `f` for every key (other than `id`) in the collision-avoidance
    /// sets of `id`'s buckets whose fingerprint equals `id`'s. A key in both
    /// sets is reported once.
    fn for_colliders(&self, id: u32, mut f: impl FnMut(u32)) {
        let i = id as usize;
        let fp = self.meta[i].fp as u64;
        let [b1, b2] = self.meta[i].b;
        for (side, b) in [b1, b2].into_iter().enumerate() {
            let mut cur = self.head[b as usize];
            while cur != NONE {
                let c = cur as usize;
                let cs = if self.meta[c].b[0] == b { 0 } else { 1 };
                // A key sharing both buckets is reported from the first only.
                let shares_both = self.meta[c].b.contains(&b1) && self.meta[c].b.contains(&b2);
                if cur != id && (self.meta[c].fp as u64) == fp && !(side == 1 && shares_both) {
                    f(cur);
                }
                cur = self.meta[c].next[cs];
            }
        }
    }

    fn has_collider(&self, id: u32) -> bool {
        let mut any = false;
        self.for_colliders(id, |_| any = true);
        any
    }

    /// Breadth-first search for a cuckoo path that frees a slot in one of
    /// `id`'s buckets; on success moves the keys along it, places `id` and
    /// appends the level-1 writes to `ops`.
    fn place_l1(&mut self, id: u32, ops: Option<&mut Vec<Op>>) -> bool {
        let [b1, b2] = self.meta[id as usize].b;
        if self.marks.len() < self.p.nb as usize {
            self.marks.resize(self.p.nb as usize, 0);
        }
        let policy = Policy {
            seen: Seen::Marks(&mut self.marks, &mut self.epoch),
            cap: Cap::Expand(MAX_BFS),
            max_moves: usize::MAX,
            roots_free: true,
        };
        let mut g = L1 { owner: &self.owner, meta: &self.meta };
        if !search(&mut g, &[b1, b2], policy, &mut self.nodes, &mut self.path).0 {
            return false;
        }
        // The key in `path[j - 1]` (the new key for j = 0) moves to `path[j]`, leaf first.
        let mut ops = ops;
        for j in (0..self.path.len()).rev() {
            let dst = self.path[j].0 as usize * SLOTS + self.path[j].1 as usize;
            let x =
                if j == 0 { id } else { self.owner[self.path[j - 1].0 as usize * SLOTS + self.path[j - 1].1 as usize] };
            self.owner[dst] = x;
            self.meta[x as usize].loc = dst as u32;
            if let Some(o) = ops.as_deref_mut() {
                o.push(Op::L1 { slot: dst as u64, word: self.word_of(x) });
            }
        }
        let path = self.path.len() as u64 - 1;
        self.stats.cuckoo_moves += path;
        self.stats.max_path = self.stats.max_path.max(path);
        self.l1_count += 1;
        true
    }

    /// Moves level-1 key `id` to level 2.
    fn demote(&mut self, id: u32, ops: &mut Vec<Op>) {
        let s = self.meta[id as usize].loc;
        if s == IN_L2 {
            return;
        }
        self.owner[s as usize] = NONE;
        ops.push(Op::L1 { slot: s as u64, word: 0 });
        self.meta[id as usize].loc = IN_L2;
        self.l1_count -= 1;
        self.l2_count += 1;
        ops.push(Op::L2Put { key: self.store.key(id).to_vec(), value: self.store.value(id) });
        self.stats.demotions += 1;
    }

    /// Re-places every key for `nb` buckets (same seed). Keys that collide
    /// go to level 2; a key with no cuckoo path goes to level 2 too, unless
    /// too many do, in which case the table is made 25 % larger.
    fn rebuild(&mut self, mut nb: u64) -> Result<()> {
        if self.store.id_bound() >= IN_L2 as usize {
            return Err(Error::CapacityExceeded("more than 2^32-2 keys".into()));
        }
        loop {
            if nb > super::MAX_BUCKETS {
                return Err(Error::CapacityExceeded(format!("{} keys need more than 2^30 buckets", self.store.len())));
            }
            self.p.nb = nb;
            let bound = self.store.id_bound();
            self.meta = vec![EMPTY_META; bound];
            self.head = vec![NONE; nb as usize];
            self.owner = vec![NONE; nb as usize * SLOTS];
            self.l1_count = 0;
            self.l2_count = 0;
            let ids: Vec<u32> = self.store.ids().collect();
            for &id in &ids {
                self.link(id);
            }
            // Colliding keys, found by sorting (bucket, fingerprint, id) for
            // both candidate buckets of every key: a run of two or more
            // entries is a set of keys sharing a bucket and a fingerprint.
            // (Sequential, unlike walking the collision-avoidance lists.)
            let mut collides_v = vec![false; bound];
            {
                let mut tri: Vec<(u64, u32)> = Vec::with_capacity(ids.len() * 2);
                for &id in &ids {
                    let m = self.meta[id as usize];
                    for b in m.b {
                        tri.push(((b as u64) << 32 | m.fp as u64, id));
                    }
                }
                tri.sort_unstable();
                for run in tri.chunk_by(|x, y| x.0 == y.0) {
                    if run.len() > 1 {
                        run.iter().for_each(|&(_, id)| collides_v[id as usize] = true);
                    }
                }
            }
            let mut stashed = 0usize;
            for &id in &ids {
                let collides = collides_v[id as usize];
                if collides || !self.place_l1(id, None) {
                    if !collides {
                        stashed += 1;
                    }
                    self.meta[id as usize].loc = IN_L2;
                    self.l2_count += 1;
                }
            }
            self.stats.rebuilds += 1;
            if stashed <= ids.len() / 1000 + 4 {
                self.stats.stashed += stashed as u64;
                return Ok(());
            }
            nb += nb / 4 + 1;
        }
    }

    fn replace_delta(&mut self) -> Delta {
        crate::lineage::bump(&mut self.seq);
        let img = self.image(|id| self.store.value(id));
        Delta(RawDelta::replace(self.table, self.seq, img))
    }

    fn ops_delta(&mut self, ops: Vec<Op>) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta(RawDelta::patch(self.table, self.seq, Ops { seed: self.p.seed, nb: self.p.nb, ops }))
    }

    fn grow(&mut self) -> Result<Delta> {
        let nb = self.p.nb + self.p.nb / 2 + 1;
        self.rebuild(nb)?;
        self.stats.grow_rebuilds += 1;
        Ok(self.replace_delta())
    }

    fn insert_new(&mut self, id: u32, key: &[u8], value: u64) -> Result<Delta> {
        self.ensure_arrays();
        // Size by all keys (not only level-1 ones): the bucket count fixes
        // how many keys share a bucket, hence the level-2 share 1 − η.
        if self.store.len() > self.max_l1() {
            return self.grow();
        }
        self.link(id);
        let mut colliders = Vec::new();
        self.for_colliders(id, |j| colliders.push(j));
        let mut ops = Vec::new();
        if !colliders.is_empty() {
            for j in colliders {
                self.demote(j, &mut ops);
            }
        } else if self.place_l1(id, Some(&mut ops)) {
            return Ok(self.ops_delta(ops));
        } else if self.load_factor() >= STASH_LOAD {
            return self.grow();
        } else {
            self.stats.stashed += 1;
        }
        self.meta[id as usize].loc = IN_L2;
        self.l2_count += 1;
        ops.push(Op::L2Put { key: key.to_vec(), value });
        Ok(self.ops_delta(ops))
    }

    fn remove_id(&mut self, id: u32, key: &[u8]) -> Delta {
        let i = id as usize;
        let mut ops = Vec::new();
        let s = self.meta[i].loc;
        if s == IN_L2 {
            ops.push(Op::L2Del { key: key.to_vec() });
            self.l2_count -= 1;
        } else {
            self.owner[s as usize] = NONE;
            ops.push(Op::L1 { slot: s as u64, word: 0 });
            self.l1_count -= 1;
        }
        // Level-2 keys that collided with this one may now go back to level 1.
        let mut cands = Vec::new();
        self.for_colliders(id, |j| cands.push(j));
        self.unlink(id);
        self.meta[i].loc = NONE;
        for j in cands {
            if self.meta[j as usize].loc == IN_L2 && !self.has_collider(j) && self.l1_count < self.max_l1() {
                let mut path = Vec::new();
                if self.place_l1(j, Some(&mut path)) {
                    ops.push(Op::L2Del { key: self.store.key(j).to_vec() });
                    ops.extend(path);
                    self.l2_count -= 1;
                    self.stats.promotions += 1;
                }
            }
        }
        self.ops_delta(ops)
    }

    fn change_value(&mut self, id: u32, key: &[u8], value: u64) -> Delta {
        let s = self.meta[id as usize].loc;
        let op = if s == IN_L2 {
            Op::L2Put { key: key.to_vec(), value }
        } else {
            Op::L1 { slot: s as u64, word: self.word_of(id) }
        };
        self.ops_delta(vec![op])
    }

    /// Checks the collision invariant and the bookkeeping (for tests): every
    /// level-1 key has no collider, every slot owner points back, counts add up.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let mut l1 = 0;
        let mut l2 = 0;
        for id in self.store.ids() {
            let i = id as usize;
            let l = self.p.locate(self.store.key(id));
            if (self.meta[i].fp as u64) != l.fp || self.meta[i].b != [l.b1 as u32, l.b2 as u32] {
                return Err(format!("key {id}: stale location"));
            }
            match self.meta[i].loc {
                IN_L2 => l2 += 1,
                NONE => return Err(format!("key {id} has no location")),
                s => {
                    l1 += 1;
                    if self.owner[s as usize] != id {
                        return Err(format!("slot {s} not owned by key {id}"));
                    }
                    if !self.meta[i].b.contains(&(s / SLOTS as u32)) {
                        return Err(format!("key {id} in a bucket that is not a candidate"));
                    }
                    if self.has_collider(id) {
                        return Err(format!("level-1 key {id} has a fingerprint collider"));
                    }
                }
            }
        }
        if l1 != self.l1_count || l2 != self.l2_count {
            return Err(format!("counts {l1}/{l2} vs {}/{}", self.l1_count, self.l2_count));
        }
        Ok(())
    }
}

impl ControlLimits for Control {
    type Options = Options;
    /// A slot holds fingerprint and value in one 64-bit element.
    const MAX_VALUE_BITS: u32 = 63;

    /// Fingerprints of `min(12, 64 − value_bits)` bits.
    fn default_options(value_bits: u32) -> Result<Options> {
        Self::check_value_bits(value_bits)?;
        Ok(Options::with_fingerprint_bits(super::DEFAULT_FINGERPRINT_BITS.min(64 - value_bits)))
    }
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, keys: store, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        Self::check_item(key, value, self.p.vbits)?;
        match self.store.insert(key, value) {
            Inserted::Existing(id, old) => {
                if old == value {
                    Ok(self.ops_delta(Vec::new()))
                } else {
                    Ok(self.change_value(id, key, value))
                }
            }
            Inserted::New(id) => match self.insert_new(id, key, value) {
                Ok(d) => Ok(d),
                Err(e) => {
                    // Nothing may be half-done: a failed growth leaves the old table.
                    if self.meta.get(id as usize).map(|m| &m.loc).is_some_and(|&l| l == NONE) {
                        if self.meta[id as usize].b[0] != NONE {
                            self.unlink(id);
                        }
                        self.store.remove(key);
                    }
                    Err(e)
                }
            },
        }
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some(id) = self.store.find(key) else { return Ok(None) };
        let d = self.remove_id(id, key);
        self.store.remove(key);
        Ok(Some(d))
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(self.image(|id| self.store.value(id)), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.store.memory_bytes()
            + self.meta.capacity() * std::mem::size_of::<Meta>()
            + self.head.capacity() * 4
            + self.owner.capacity() * 4
    }
}

crate::snapshot::persist!(Options { fingerprint_bits, seed });
crate::snapshot::persist_codec!(Params);
crate::snapshot::persist!(Stats { rebuilds, grow_rebuilds, demotions, promotions, stashed, cuckoo_moves, max_path });
crate::snapshot::persist!(Meta { fp, loc, b, next });
crate::snapshot::control_snapshot!(
    Control, super::CONTROL_KIND, lineage: table, seq: seq,
    state { opts, p, store, meta, head, owner, l1_count, l2_count, stats },
    scratch { nodes, marks, epoch, path },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::{check_ids, ensure};
        let nb = self.p.nb as usize;
        let n = self.meta.len();
        ensure(self.head.len() == nb && self.owner.len() == nb * SLOTS, || "cfw bucket arrays".into())?;
        ensure(n >= self.store.id_bound().saturating_sub(1) && n <= self.store.id_bound(), || {
            "cfw key records".into()
        })?;
        check_ids("cfw bucket list", &self.head, n, NONE)?;
        check_ids("cfw slot owner", &self.owner, n, NONE)?;
        for m in &self.meta {
            check_ids("cfw candidate bucket", &m.b, nb, NONE)?;
            check_ids("cfw list link", &m.next, n, NONE)?;
            ensure(m.loc == NONE || m.loc == IN_L2 || (m.loc as usize) < nb * SLOTS, || "cfw slot".into())?;
        }
        Ok(())
    }
}
