//! The FHT control form (the route controller of §7): full names of occupied
//! slots, collision groups, "not stored" markers, and a mirror of the lookup
//! form from which it emits deltas.

use super::ct::Ct;
use super::delta::{Delta, Image, Ops};
use super::{Loc, Lookup, LookupOrder, Options, Params};
use crate::ControlTable;
use crate::bits::PackedArray;
use crate::engine::{ControlLimits, RawDelta};
use crate::error::{Error, Result};
use crate::store::{Inserted, KeyStore};
use hashbrown::HashMap;

const NONE: u32 = u32::MAX;
const IN_CT: u64 = u64::MAX - 1;
const NOWHERE: u64 = u64::MAX;

/// Counters describing the control form's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Full rebuilds (construction and growth).
    pub rebuilds: u64,
    /// Names sent to the collision table because their true fingerprint
    /// collided with a main-table entry (inserts since the last rebuild
    /// included, rebuild placements included).
    pub collisions: u64,
    /// Names sent to the collision table because all d candidate buckets were full.
    pub overflows: u64,
}

/// FHT control form. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, fht};
///
/// let mut ctl = fht::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = fht::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&fht::Delta::from_bytes(&delta.to_bytes())?)?;
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
    limit: usize,
    store: KeyStore,
    absent: KeyStore,
    table: PackedArray,
    owner: Vec<u32>,
    loc: Vec<u64>,
    ct_ids: HashMap<u64, Vec<u32>>,
    markers: HashMap<u64, Vec<u32>>,
    ct: Ct,
    main_used: usize,
    tid: crate::lineage::Lineage,
    seq: u64,
    stats: Stats,
}

type CtList = Vec<(Vec<u8>, Option<u64>)>;

impl Control {
    crate::engine::options_constructors! {
        |value_bits, opts|
        empty: Self::build(KeyStore::new(), KeyStore::new(), value_bits, opts),
        items(items): Self::for_share(items, std::iter::empty::<&[u8]>(), value_bits, opts),
    }

    /// Distributed forwarding (§6.2): a table holding the share R_S
    /// (`stored`) of a rule set R whose other names (`not_stored`, R − R_S)
    /// must read `None` (the default port). The main table is sized for R_S
    /// only; every name of R − R_S whose fingerprint matches a main entry gets
    /// a "not stored" collision-table entry, so all of R is answered exactly.
    /// A name listed in both is stored.
    pub fn for_share<I, K, J, N>(stored: I, not_stored: J, value_bits: u32, opts: Options) -> Result<Self>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
        J: IntoIterator<Item = N>,
        N: AsRef<[u8]>,
    {
        let store: KeyStore = Self::collect_items(stored, value_bits)?;
        let mut absent = KeyStore::new();
        for n in not_stored {
            if store.find(n.as_ref()).is_none() {
                absent.insert(n.as_ref(), 0);
            }
        }
        Self::build(store, absent, value_bits, opts)
    }

    fn build(store: KeyStore, absent: KeyStore, value_bits: u32, opts: Options) -> Result<Self> {
        if !(0.05..=1.0).contains(&opts.max_load) {
            return Err(Error::InvalidParameter(format!("max_load {} not in 0.05..=1", opts.max_load)));
        }
        let p = Params {
            seed: opts.seed,
            d: opts.subtables,
            e: opts.bucket_entries,
            b: 1,
            fbits: opts.fingerprint_bits,
            vbits: value_bits,
            flag: opts.order == LookupOrder::MainFirst,
        };
        p.validate()?;
        let mut c = Control {
            opts,
            p,
            limit: 0,
            store,
            absent,
            table: PackedArray::new(1, p.width()),
            owner: Vec::new(),
            loc: Vec::new(),
            ct_ids: HashMap::new(),
            markers: HashMap::new(),
            ct: Ct::new(p.seed),
            main_used: 0,
            tid: crate::lineage::Lineage::random(),
            seq: 0,
            stats: Stats::default(),
        };
        let cap = opts.capacity.max(c.store.len());
        c.rebuild(cap)?;
        Ok(c)
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// `(subtables d, buckets per subtable B, entries per bucket E)`.
    pub fn shape(&self) -> (u32, u32, u32) {
        (self.p.d, self.p.b, self.p.e)
    }
    /// Main-table slots `d·B·E`.
    pub fn slots(&self) -> usize {
        self.p.slots()
    }
    /// Names the table holds before it grows.
    pub fn capacity(&self) -> usize {
        self.limit
    }
    /// Occupied main-table entries.
    pub fn main_entries(&self) -> usize {
        self.main_used
    }
    /// Entries in the collision table (colliding and overflowing names and
    /// "not stored" markers; in main-first mode also the first name of each
    /// collision group).
    pub fn collision_table_entries(&self) -> usize {
        self.ct.len()
    }
    /// "Not stored" markers currently in the collision table.
    pub fn not_stored_markers(&self) -> usize {
        self.ct.iter().filter(|e| e.val().is_none()).count()
    }
    /// Names registered as not stored (R − R_S).
    pub fn not_stored_len(&self) -> usize {
        self.absent.len()
    }
    /// History counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Iterates over stored `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.store.iter().map(|(_, k, v)| (k, v))
    }
    /// Expected fraction of names outside R matching a fingerprint
    /// (`main_entries / (B · (2^w − 1))`, §6.2, for this table).
    pub fn expected_alien_match_rate(&self) -> f64 {
        super::expected_alien_match_rate(self.main_used, self.p.b, self.p.fbits)
    }

    #[inline]
    fn locate(&self, key: &[u8]) -> Loc {
        self.p.locate(key)
    }

    fn find_slot(&self, l: &Loc) -> Option<usize> {
        let e = self.p.e as usize;
        for i in 0..self.p.d {
            let b = self.p.bucket(i, l);
            for s in b..b + e {
                if self.owner[s] != NONE && self.p.fp_of(self.table.get(s)) == l.f {
                    return Some(s);
                }
            }
        }
        None
    }

    /// A free entry in the least loaded candidate bucket (leftmost on ties).
    fn free_slot(&self, l: &Loc) -> Option<usize> {
        let e = self.p.e as usize;
        let mut best: Option<(usize, usize)> = None;
        for i in 0..self.p.d {
            let b = self.p.bucket(i, l);
            let used = self.owner[b..b + e].iter().filter(|&&o| o != NONE).count();
            if used < e && best.is_none_or(|(u, _)| used < u) {
                best = Some((used, b));
            }
        }
        let (_, b) = best?;
        (b..b + e).find(|&s| self.owner[s] == NONE)
    }

    /// Desired lookup-form state of one collision group: its main slot and
    /// word, and its collision-table entries.
    fn group(&self, l: &Loc) -> (Option<(usize, u64)>, CtList) {
        let t = l.t();
        let mut ct: CtList = Vec::new();
        if let Some(ids) = self.ct_ids.get(&t) {
            for &id in ids {
                ct.push((self.store.key(id).to_vec(), Some(self.store.value(id))));
            }
        }
        let Some(s) = self.find_slot(l) else { return (None, ct) };
        if let Some(ms) = self.markers.get(&t) {
            for &m in ms {
                ct.push((self.absent.key(m).to_vec(), None));
            }
        }
        let o = self.owner[s];
        let v = self.store.value(o);
        let flagged = self.p.flag && !ct.is_empty();
        if flagged {
            ct.push((self.store.key(o).to_vec(), Some(v)));
        }
        (Some((s, self.p.word(l.f, v, flagged))), ct)
    }

    /// Runs `mutate` on the control state of one collision group and turns
    /// the difference of the group's lookup-form state into a delta.
    fn change(&mut self, l: &Loc, mutate: impl FnOnce(&mut Self)) -> Delta {
        let (s0, ct0) = self.group(l);
        mutate(self);
        let (s1, ct1) = self.group(l);
        let mut slots = Vec::new();
        if let Some((s, _)) = s0
            && s1.is_none_or(|(x, _)| x != s)
        {
            self.table.set(s, 0);
            slots.push((s as u64, 0));
        }
        if let Some((s, w)) = s1
            && s0 != Some((s, w))
        {
            self.table.set(s, w);
            slots.push((s as u64, w));
        }
        let mut puts = Vec::new();
        for (n, v) in &ct1 {
            if !ct0.iter().any(|(m, u)| m == n && u == v) {
                self.ct.put(crate::hash::hash64(n, self.p.seed), n, *v);
                puts.push((n.clone(), *v));
            }
        }
        let mut dels = Vec::new();
        for (n, _) in ct0 {
            if !ct1.iter().any(|(m, _)| *m == n) {
                self.ct.del(crate::hash::hash64(&n, self.p.seed), &n);
                dels.push(n);
            }
        }
        self.ops_delta(puts, slots, dels)
    }

    fn ops_delta(&mut self, puts: CtList, slots: Vec<(u64, u64)>, dels: Vec<Vec<u8>>) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta(RawDelta::patch(self.tid, self.seq, Ops { seed: self.p.seed, buckets: self.p.b, puts, slots, dels }))
    }

    fn replace_delta(&mut self) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta(RawDelta::replace(self.tid, self.seq, self.image()))
    }

    fn image(&self) -> Image {
        Image {
            p: self.p,
            table: self.table.clone(),
            ct: self.ct.sorted().into_iter().map(|(n, v)| (n.to_vec(), v)).collect(),
        }
    }

    fn ensure_loc(&mut self) {
        let b = self.store.id_bound();
        if self.loc.len() < b {
            self.loc.resize(b, NOWHERE);
        }
    }

    /// Places a stored name (control state only).
    fn place(&mut self, id: u32, l: &Loc) {
        if self.find_slot(l).is_some() {
            self.ct_ids.entry(l.t()).or_default().push(id);
            self.loc[id as usize] = IN_CT;
            self.stats.collisions += 1;
        } else if let Some(s) = self.free_slot(l) {
            self.owner[s] = id;
            self.loc[id as usize] = s as u64;
            self.table.set(s, self.p.word(l.f, 0, false));
            self.main_used += 1;
        } else {
            self.ct_ids.entry(l.t()).or_default().push(id);
            self.loc[id as usize] = IN_CT;
            self.stats.overflows += 1;
        }
    }

    /// Takes a stored name out of the control state (before its store removal).
    fn unplace(&mut self, id: u32, l: &Loc) {
        let t = l.t();
        let at = self.loc[id as usize];
        self.loc[id as usize] = NOWHERE;
        if at == IN_CT {
            if let Some(v) = self.ct_ids.get_mut(&t) {
                v.retain(|&x| x != id);
                if v.is_empty() {
                    self.ct_ids.remove(&t);
                }
            }
            return;
        }
        let s = at as usize;
        // Promote another member of the group into the main entry.
        let next = self.ct_ids.get_mut(&t).and_then(|v| v.pop());
        if self.ct_ids.get(&t).is_some_and(|v| v.is_empty()) {
            self.ct_ids.remove(&t);
        }
        match next {
            Some(n) => {
                self.owner[s] = n;
                self.loc[n as usize] = s as u64;
            }
            None => {
                self.owner[s] = NONE;
                self.table.set(s, 0);
                self.main_used -= 1;
            }
        }
    }

    /// Rebuilds for `cap` names (fresh layout, same seed).
    fn rebuild(&mut self, cap: usize) -> Result<()> {
        let b = Params::buckets_for(cap, self.p.d, self.p.e, self.opts.max_load)?;
        let p = Params { b, ..self.p };
        p.validate()?;
        if self.store.id_bound() >= NONE as usize {
            return Err(Error::CapacityExceeded("more than 2^32-1 names".into()));
        }
        self.p = p;
        self.table = PackedArray::new(p.slots(), p.width());
        self.owner = vec![NONE; p.slots()];
        self.loc = vec![NOWHERE; self.store.id_bound()];
        self.ct_ids.clear();
        self.markers.clear();
        self.ct = Ct::new(self.p.seed);
        self.main_used = 0;
        let ids: Vec<u32> = self.store.ids().collect();
        for &id in &ids {
            let l = self.p.locate(self.store.key(id));
            self.place(id, &l);
        }
        let marks: Vec<u32> = self.absent.ids().collect();
        for m in marks {
            let l = self.p.locate(self.absent.key(m));
            self.markers.entry(l.t()).or_default().push(m);
        }
        // Final words and CT entries, group by group.
        let mut done: hashbrown::HashSet<u64> = hashbrown::HashSet::new();
        for &id in &ids {
            let l = self.p.locate(self.store.key(id));
            let t = l.t();
            let simple = !self.ct_ids.contains_key(&t) && !self.markers.contains_key(&t);
            if simple {
                let s = self.loc[id as usize] as usize;
                self.table.set(s, self.p.word(l.f, self.store.value(id), false));
                continue;
            }
            if !done.insert(t) {
                continue;
            }
            let (slot, ct) = self.group(&l);
            if let Some((s, w)) = slot {
                self.table.set(s, w);
            }
            for (n, v) in ct {
                self.ct.put(crate::hash::hash64(&n, self.p.seed), &n, v);
            }
        }
        self.limit = ((p.slots() as f64 * self.opts.max_load) as usize).max(1);
        self.stats.rebuilds += 1;
        Ok(())
    }

    /// Registers a name of R − R_S (distributed forwarding, §6.2): from now
    /// on the lookup form answers `None` for it, exactly. Fails if the name
    /// is stored; registering twice is a no-op delta.
    pub fn mark_not_stored(&mut self, name: &[u8]) -> Result<Delta> {
        if self.store.find(name).is_some() {
            return Err(Error::InvalidParameter("name is stored; remove it before marking it not stored".into()));
        }
        if name.len() >= u32::MAX as usize {
            return Err(Error::InvalidParameter("name longer than 4 GiB".into()));
        }
        if self.absent.find(name).is_some() {
            return Ok(self.ops_delta(Vec::new(), Vec::new(), Vec::new()));
        }
        let l = self.locate(name);
        Ok(self.change(&l, |c| {
            let Inserted::New(m) = c.absent.insert(name, 0) else { return };
            c.markers.entry(l.t()).or_default().push(m);
        }))
    }

    /// Forgets a name registered with [`Control::mark_not_stored`]; `None` if
    /// it was not registered.
    pub fn forget_not_stored(&mut self, name: &[u8]) -> Option<Delta> {
        let m = self.absent.find(name)?;
        let l = self.locate(name);
        Some(self.change(&l, |c| c.unmark(m, &l, name)))
    }

    fn unmark(&mut self, m: u32, l: &Loc, name: &[u8]) {
        let t = l.t();
        if let Some(v) = self.markers.get_mut(&t) {
            v.retain(|&x| x != m);
            if v.is_empty() {
                self.markers.remove(&t);
            }
        }
        self.absent.remove(name);
    }
}

impl ControlLimits for Control {
    type Options = Options;
    const MAX_VALUE_BITS: u32 = 64;
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: tid, keys: store, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        Self::check_item(key, value, self.p.vbits)?;
        let l = self.locate(key);
        if let Some(id) = self.store.find(key) {
            if self.store.value(id) == value {
                return Ok(self.ops_delta(Vec::new(), Vec::new(), Vec::new()));
            }
            return Ok(self.change(&l, |c| c.store.set_value(id, value)));
        }
        if self.store.len() >= self.limit {
            // Grow: the new name joins the rebuilt table.
            let mark = self.absent.find(key);
            let Inserted::New(_) = self.store.insert(key, value) else { unreachable!("checked absent") };
            if mark.is_some() {
                self.absent.remove(key);
            }
            let cap = self.store.len() * 2;
            if let Err(e) = self.rebuild(cap) {
                self.store.remove(key);
                if mark.is_some() {
                    self.absent.insert(key, 0);
                }
                return Err(e);
            }
            return Ok(self.replace_delta());
        }
        Ok(self.change(&l, |c| {
            if let Some(m) = c.absent.find(key) {
                c.unmark(m, &l, key);
            }
            let Inserted::New(id) = c.store.insert(key, value) else { return };
            c.ensure_loc();
            c.place(id, &l);
        }))
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some(id) = self.store.find(key) else { return Ok(None) };
        let l = self.locate(key);
        Ok(Some(self.change(&l, |c| {
            c.unplace(id, &l);
            c.store.remove(key);
        })))
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(self.image(), self.tid, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        let map_bytes = |m: &HashMap<u64, Vec<u32>>| -> usize {
            m.capacity() * (8 + 24 + 1) + m.values().map(|v| v.capacity() * 4).sum::<usize>()
        };
        self.store.memory_bytes()
            + self.absent.memory_bytes()
            + self.table.memory_bytes()
            + self.owner.capacity() * 4
            + self.loc.capacity() * 8
            + map_bytes(&self.ct_ids)
            + map_bytes(&self.markers)
            + self.ct.memory_bytes()
    }
}

crate::snapshot::persist_enum!(LookupOrder { CollisionTableFirst = 0, MainFirst = 1 });
crate::snapshot::persist!(Options { subtables, bucket_entries, fingerprint_bits, max_load, order, capacity, seed });
crate::snapshot::persist_codec!(Params);
crate::snapshot::persist!(Stats { rebuilds, collisions, overflows });
crate::snapshot::control_snapshot!(
    Control, super::CONTROL_KIND, lineage: tid, seq: seq,
    state { opts, p, limit, store, absent, table, owner, loc, ct_ids, markers, ct, main_used, stats },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::{check_ids, ensure};
        let slots = self.table.len();
        ensure(self.table.bits() == self.p.width() && slots == self.p.slots(), || "fht main table size".into())?;
        ensure(self.owner.len() == slots, || "fht slot owners".into())?;
        let bound = self.store.id_bound().max(self.absent.id_bound());
        check_ids("fht slot owner", &self.owner, bound, NONE)?;
        ensure(self.loc.len() >= self.store.id_bound().saturating_sub(1), || "fht key locations".into())?;
        for v in self.ct_ids.values().chain(self.markers.values()) {
            check_ids("fht collision group", v, bound, u32::MAX)?;
            ensure(!v.is_empty(), || "fht empty collision group".into())?;
        }
        ensure(self.ct.seed() == self.p.seed, || "fht collision table seed".into())
    }
}
