//! Partial-key cuckoo hashing (SILT, Lim et al. SOSP 2011; MemC3, Fan et
//! al. NSDI 2013): the (2,4) cuckoo table with an f-bit **fingerprint**
//! instead of the key in each slot — the comparison point of thesis §4
//! (Fig. 4.30, "Partial-key Cuckoo").
//!
//! How partial-key cuckoo works, its parameters, guarantees and measured
//! performance: `docs/structures/cuckoo.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

use super::path::{Cap, Policy, Seen, search};
use crate::ControlTable;
use crate::bits::PackedArray;
use crate::engine::{Change, ControlLimits, ImageCodec, PatchCodec, RawDelta, RawLookup, Scheme};
use crate::error::{Error, Result, mask};
use crate::hash::{hash64, hi, lo, mix64, reduce};
use crate::mem::prefetch;
use crate::store::{Inserted, KeyStore};
use crate::sync::{Published, StripeSet, StripedSeqLock};
use crate::wire::{Kind, Reader as WireReader, Writer};
use std::sync::Arc;

const SLOTS: usize = 4;
const NONE: u32 = u32::MAX;
const MAX_BFS_NODES: usize = 1024;
const MAX_LOAD_PCT: u64 = 95;
const BUILD_LOAD: f64 = 0.90;
const MAX_STRIPES: usize = 4096;
const MAX_NB: u32 = 1 << 30;

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Fingerprint bits per slot (1..=32).
    pub fingerprint_bits: u32,
    /// Hash seed.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { fingerprint_bits: 16, seed: crate::lineage::random_seed() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    seed: u64,
    nb: u32,
    fbits: u32,
    vbits: u32,
}

impl Params {
    fn validate(&self) -> Result<()> {
        Control::check_value_bits(self.vbits)?;
        if !(1..=32).contains(&self.fbits) || self.width() > 64 {
            return Err(Error::InvalidParameter(format!(
                "fingerprint_bits {} must be 1..=32 and 1 + fingerprint + value bits ({}) at most 64",
                self.fbits,
                self.width()
            )));
        }
        if !(2..=MAX_NB).contains(&self.nb) {
            return Err(Error::InvalidParameter(format!("bucket count {} outside 2..=2^30", self.nb)));
        }
        Ok(())
    }
    #[inline(always)]
    fn width(&self) -> u32 {
        1 + self.fbits + self.vbits
    }
    /// (first bucket, fingerprint).
    #[inline(always)]
    fn locate(&self, key: &[u8]) -> (usize, u64) {
        let h = hash64(key, self.seed);
        (reduce(lo(h), self.nb) as usize, hi(h) as u64 & mask(self.fbits))
    }
    /// The other bucket of a fingerprint in bucket `b`: `(x − b) mod m` with
    /// `x = H(fp)`, an involution for any bucket count.
    #[inline(always)]
    fn alt(&self, b: usize, fp: u64) -> usize {
        let x = reduce(mix64(fp ^ 0x5bd1_e995) as u32, self.nb) as usize;
        if x >= b { x - b } else { x + self.nb as usize - b }
    }
    #[inline(always)]
    fn word(&self, fp: u64, v: u64) -> u64 {
        1 << (self.fbits + self.vbits) | fp << self.vbits | v
    }
    #[inline(always)]
    fn fp_of(&self, x: u64) -> u64 {
        (x >> self.vbits) & mask(self.fbits)
    }
    fn slots(&self) -> usize {
        self.nb as usize * SLOTS
    }
    fn encode(&self, w: &mut Writer) {
        w.u64(self.seed).u32(self.nb).u8(self.fbits as u8).u8(self.vbits as u8);
    }
    fn decode(r: &mut WireReader<'_>) -> Result<Self> {
        let p = Params { seed: r.u64()?, nb: r.u32()?, fbits: r.u8()? as u32, vbits: r.u8()? as u32 };
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
    /// Scans a bucket for a fingerprint: the value of the first match.
    #[inline(always)]
    fn scan(&self, a: &PackedArray, b: usize, fp: u64) -> Option<u64> {
        let want = 1 << self.fbits | fp;
        (0..SLOTS).map(|s| a.get(b * SLOTS + s)).find(|&x| x >> self.vbits == want).map(|x| x & mask(self.vbits))
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    p: Params,
    a: PackedArray,
    lock: StripedSeqLock,
    smask: usize,
}

impl Inner {
    fn new(p: Params, a: PackedArray) -> Self {
        let lock = StripedSeqLock::new((p.nb as usize).clamp(64, MAX_STRIPES));
        let smask = lock.stripes() - 1;
        Self { p, a, lock, smask }
    }
    #[inline(always)]
    fn read(&self, b1: usize, fp: u64) -> Option<u64> {
        let b2 = self.p.alt(b1, fp);
        self.lock.read2(b1 & self.smask, b2 & self.smask, || {
            self.p.scan(&self.a, b1, fp).or_else(|| self.p.scan(&self.a, b2, fp))
        })
    }
}

/// One step of slot writes (slot, word) that readers observe atomically.
type Step = Vec<(u64, u64)>;

/// An update message for [`Lookup`], numbered like every keyplane delta.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(RawDelta<PartialCuckoo>);

/// In-place steps on a table with this seed and bucket count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Steps {
    seed: u64,
    nb: u32,
    steps: Vec<Step>,
}

impl Delta {
    /// Slot writes carried (a whole table for a rebuild).
    pub fn slots_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p.steps.iter().map(Vec::len).sum(),
            Change::Replace(b) => b.0.slots(),
        }
    }
}

const TAG_STEPS: u8 = 1;
const TAG_REPLACE: u8 = 2;

impl ImageCodec for (Params, PackedArray) {
    fn encode(&self, w: &mut Writer) {
        self.0.encode(w);
        w.u64s(&self.1.to_words());
    }
    fn decode(r: &mut WireReader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let a = PackedArray::from_words(r.u64s()?, p.slots(), p.width())
            .ok_or_else(|| Error::Corrupt("slot array length does not match the bucket count".into()))?;
        Ok((p, a))
    }
}

impl PatchCodec for Steps {
    fn encode(&self, w: &mut Writer) {
        w.u8(TAG_STEPS).u64(self.seed).u32(self.nb).varint(self.steps.len() as u64);
        for st in &self.steps {
            w.varint(st.len() as u64);
            for &(s, x) in st {
                w.varint(s).varint(x);
            }
        }
    }
    fn decode(tag: u8, r: &mut WireReader<'_>) -> Result<Self> {
        if tag != TAG_STEPS {
            return Err(Error::Corrupt(format!("unknown partial-key cuckoo delta tag {tag}")));
        }
        let seed = r.u64()?;
        let nb = r.u32()?;
        let n = r.varint_count(1)?;
        let mut steps = Vec::with_capacity(n);
        for _ in 0..n {
            let m = r.varint_count(2)?;
            let mut st = Vec::with_capacity(m);
            for _ in 0..m {
                st.push((r.varint()?, r.varint()?));
            }
            steps.push(st);
        }
        Ok(Steps { seed, nb, steps })
    }
}

/// The partial-key cuckoo scheme (see [`crate::engine`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PartialCuckoo;

impl Scheme for PartialCuckoo {
    type Inner = Inner;
    type Image = (Params, PackedArray);
    type Patch = Steps;
    const LOOKUP_KIND: Kind = LOOKUP_KIND;
    const DELTA_KIND: Kind = DELTA_KIND;
    const REPLACE_TAG: u8 = TAG_REPLACE;

    fn build(img: (Params, PackedArray)) -> Result<Inner> {
        Ok(Inner::new(img.0, img.1))
    }
    fn image(c: &Inner) -> (Params, PackedArray) {
        (c.p, c.a.clone())
    }
    fn encode_inner(c: &Inner, w: &mut Writer) {
        c.p.encode(w);
        w.u64s(&c.a.to_words());
    }
    fn payload_hint(c: &Inner) -> usize {
        c.a.memory_bytes() + 32
    }
    fn check_replace(c: &Inner, img: &(Params, PackedArray)) -> Result<()> {
        if img.0.fbits != c.p.fbits || img.0.vbits != c.p.vbits {
            return Err(Error::DeltaMismatch("rebuild delta has a different slot layout".into()));
        }
        Ok(())
    }
    fn apply_patch(_cur: &Published<Inner>, c: Arc<Inner>, patch: &Steps) -> Result<()> {
        if patch.seed != c.p.seed || patch.nb != c.p.nb {
            return Err(Error::DeltaMismatch("delta is for another table (seed or size)".into()));
        }
        let wmask = mask(c.p.width());
        for &(s, x) in patch.steps.iter().flatten() {
            if s >= c.p.slots() as u64 || x & !wmask != 0 {
                return Err(Error::DeltaMismatch(format!("slot write ({s}, {x:#x}) outside the table")));
            }
        }
        let mut set = StripeSet::new();
        for st in &patch.steps {
            set.clear();
            for &(s, _) in st {
                set.add((s as usize / SLOTS) & c.smask);
            }
            let ss = set.finish();
            c.lock.write_begin(ss);
            for &(s, x) in st {
                c.a.set(s as usize, x);
            }
            c.lock.write_end(ss);
        }
        Ok(())
    }
    fn memory_bytes(c: &Inner) -> usize {
        c.a.memory_bytes() + c.lock.memory_bytes()
    }
    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }
    #[inline(always)]
    fn get(c: &Inner, key: &[u8], _latest: impl Fn() -> Arc<Inner>) -> Option<u64> {
        let (b1, fp) = c.p.locate(key);
        c.read(b1, fp)
    }
    fn get_batch(c: &Inner, keys: &[&[u8]], out: &mut [Option<u64>], _latest: impl Fn() -> Arc<Inner>) {
        let mut loc = [(0usize, 0u64); 16];
        for (ks, os) in keys.chunks(16).zip(out.chunks_mut(16)) {
            for (k, l) in ks.iter().zip(loc.iter_mut()) {
                *l = c.p.locate(k);
                prefetch(c.a.word_ptr(l.0 * SLOTS));
                prefetch(c.a.word_ptr(c.p.alt(l.0, l.1) * SLOTS));
            }
            for (l, o) in loc.iter().zip(os.iter_mut()).take(ks.len()) {
                *o = c.read(l.0, l.1);
            }
        }
    }
}

/// Partial-key cuckoo lookup form: fingerprints and values, no keys. May
/// return a wrong value for a valid key (see the [module docs](self)).
///
/// # Examples
///
/// [`Control`](Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<PartialCuckoo>,
}

/// A per-thread read handle ([`crate::LookupTable::reader`]).
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, PartialCuckoo>);

crate::engine::lookup_form!(PartialCuckoo);

impl Lookup {
    fn new(p: Params, a: PackedArray, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(Inner::new(p, a), table, seq))
    }
    /// Fingerprint bits.
    pub fn fingerprint_bits(&self) -> u32 {
        self.raw.load().p.fbits
    }
    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.raw.load().p.nb as usize
    }
}

/// The control form's slot array as the shared cuckoo-path search sees it.
impl super::path::Graph for &Control {
    fn slots(&self) -> usize {
        SLOTS
    }
    fn alt(&mut self, b: usize, s: usize) -> Option<usize> {
        let slot = b * SLOTS + s;
        (self.owner[slot] != NONE).then(|| self.p.alt(b, self.p.fp_of(self.a.get(slot))))
    }
    fn free(&self, b: usize) -> Option<usize> {
        self.free_in(b).map(|s| s % SLOTS)
    }
}

/// Partial-key cuckoo control form: keys, values, the slot of every key and
/// a mirror of the lookup form's slot array.
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, cuckoo};
///
/// let mut ctl = cuckoo::partial::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = cuckoo::partial::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&cuckoo::partial::Delta::from_bytes(&delta.to_bytes())?)?;
/// // Stored keys always read some value; a key may read another key's value when their fingerprints collide.
/// assert!(table.get(b"10.0.0.2").is_some());
/// let mut out = [None; 2];
/// table.get_batch(&[b"10.0.0.1".as_slice(), b"10.0.0.2"], &mut out);
/// assert!(out.iter().all(Option::is_some));
/// let reader = table.reader(); // one per packet thread
/// assert_eq!(reader.get(b"10.0.0.1"), table.get(b"10.0.0.1"));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Control {
    opts: Options,
    p: Params,
    store: KeyStore,
    /// Key id in each slot.
    owner: Vec<u32>,
    /// Slot of each key id.
    pos: Vec<u32>,
    a: PackedArray,
    table: crate::lineage::Lineage,
    seq: u64,
    steps: Vec<Step>,
    grows: u64,
    moves: u64,
}

impl Control {
    crate::engine::options_constructors!(build);

    fn build(store: KeyStore, value_bits: u32, opts: Options) -> Result<Self> {
        Self::check_value_bits(value_bits)?;
        let nb = ((store.len() as f64 / (SLOTS as f64 * BUILD_LOAD)).ceil() as u64).max(2);
        if nb > MAX_NB as u64 {
            return Err(Error::CapacityExceeded(format!("{} keys need more than 2^30 buckets", store.len())));
        }
        let p = Params { seed: opts.seed, nb: nb as u32, fbits: opts.fingerprint_bits, vbits: value_bits };
        p.validate()?;
        let mut c = Control {
            opts,
            p,
            store,
            owner: Vec::new(),
            pos: Vec::new(),
            a: PackedArray::new(1, 1),
            table: crate::lineage::Lineage::random(),
            seq: 0,
            steps: Vec::new(),
            grows: 0,
            moves: 0,
        };
        c.rebuild(p.nb)?;
        Ok(c)
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.p.nb as usize
    }
    /// Fraction of slots in use.
    pub fn load_factor(&self) -> f64 {
        self.store.len() as f64 / self.p.slots() as f64
    }
    /// Resizes so far.
    pub fn grows(&self) -> u64 {
        self.grows
    }
    /// Cuckoo displacements so far.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// What the lookup form answers for `key` right now (the value of the
    /// first slot with a matching fingerprint).
    pub fn answer(&self, key: &[u8]) -> Option<u64> {
        let (b1, fp) = self.p.locate(key);
        self.p.scan(&self.a, b1, fp).or_else(|| self.p.scan(&self.a, self.p.alt(b1, fp), fp))
    }

    /// True when `key` is stored but the lookup form returns another key's
    /// value for it (a valid-key collision).
    pub fn collides(&self, key: &[u8]) -> bool {
        self.store.get(key).is_some_and(|v| self.answer(key) != Some(v))
    }

    /// Number of stored keys that currently collide.
    pub fn collision_count(&self) -> usize {
        self.store.iter().filter(|(_, k, v)| self.answer(k) != Some(*v)).count()
    }

    /// Places every key into a fresh table of `nb` buckets (doubling until all fit).
    fn rebuild(&mut self, mut nb: u32) -> Result<()> {
        'attempt: loop {
            self.p.nb = nb;
            self.a = PackedArray::new(self.p.slots(), self.p.width());
            self.owner = vec![NONE; self.p.slots()];
            self.pos = vec![NONE; self.store.id_bound()];
            let ids: Vec<u32> = self.store.ids().collect();
            for id in ids {
                if !self.place(id, false) {
                    nb = nb.checked_mul(2).filter(|&n| n <= MAX_NB).ok_or_else(|| {
                        Error::CapacityExceeded("partial-key cuckoo needs more than 2^30 buckets".into())
                    })?;
                    continue 'attempt;
                }
            }
            return Ok(());
        }
    }

    fn set_slot(&mut self, slot: usize, id: u32, step: &mut Step) {
        let x = if id == NONE {
            0
        } else {
            let (_, fp) = self.p.locate(self.store.key(id));
            self.pos[id as usize] = slot as u32;
            self.p.word(fp, self.store.value(id))
        };
        self.owner[slot] = id;
        self.a.set(slot, x);
        step.push((slot as u64, x));
    }

    fn free_in(&self, b: usize) -> Option<usize> {
        (b * SLOTS..(b + 1) * SLOTS).find(|&s| self.owner[s] == NONE)
    }

    /// Places key `id`; records steps when `record`. False when no room.
    fn place(&mut self, id: u32, record: bool) -> bool {
        if self.pos.len() <= id as usize {
            self.pos.resize(id as usize + 1, NONE);
        }
        let (b1, fp) = self.p.locate(self.store.key(id));
        let b2 = self.p.alt(b1, fp);
        let target = match self.free_in(b1).or_else(|| self.free_in(b2)) {
            Some(s) => s,
            None => {
                let Some((moves, root)) = self.bfs(b1, b2) else {
                    return false;
                };
                for (from, to) in moves {
                    let mut step = Vec::with_capacity(2);
                    let mover = self.owner[from];
                    self.set_slot(to, mover, &mut step);
                    self.set_slot(from, NONE, &mut step);
                    self.moves += 1;
                    if record {
                        self.steps.push(step);
                    }
                }
                root
            }
        };
        let mut step = Vec::with_capacity(1);
        self.set_slot(target, id, &mut step);
        if record {
            self.steps.push(step);
        }
        true
    }

    /// Cuckoo path from `b1`/`b2` (the shared [`super::path::search`], with
    /// the full map's rules): the moves (from, to), leaf first, and the
    /// freed root slot.
    fn bfs(&self, b1: usize, b2: usize) -> Option<(Vec<(usize, usize)>, usize)> {
        let policy =
            Policy { seen: Seen::OnPath, cap: Cap::Queue(MAX_BFS_NODES), max_moves: usize::MAX, roots_free: false };
        let mut path = Vec::new();
        let mut g = self;
        if !search(&mut g, &[b1 as u32, b2 as u32], policy, &mut Vec::new(), &mut path).0 {
            return None;
        }
        let slot = |(b, s): (u32, u8)| b as usize * SLOTS + s as usize;
        let moves = path.windows(2).rev().map(|w| (slot(w[0]), slot(w[1]))).collect();
        Some((moves, slot(path[0])))
    }

    fn grow(&mut self) -> Result<Delta> {
        let nb = self.p.nb.checked_mul(2).filter(|&n| n <= MAX_NB);
        let nb = nb.ok_or_else(|| Error::CapacityExceeded("more than 2^30 buckets".into()))?;
        self.rebuild(nb)?;
        self.grows += 1;
        self.steps.clear();
        crate::lineage::bump(&mut self.seq);
        Ok(Delta(RawDelta::replace(self.table, self.seq, (self.p, self.a.clone()))))
    }

    fn steps_delta(&mut self) -> Delta {
        crate::lineage::bump(&mut self.seq);
        let steps = Steps { seed: self.p.seed, nb: self.p.nb, steps: std::mem::take(&mut self.steps) };
        Delta(RawDelta::patch(self.table, self.seq, steps))
    }
}

impl ControlLimits for Control {
    type Options = Options;
    const MAX_VALUE_BITS: u32 = 63;
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, keys: store, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        Self::check_item(key, value, self.p.vbits)?;
        self.steps.clear();
        match self.store.insert(key, value) {
            Inserted::Existing(id, old) => {
                if old != value {
                    let slot = self.pos[id as usize] as usize;
                    let mut step = Vec::new();
                    self.set_slot(slot, id, &mut step);
                    self.steps.push(step);
                }
                Ok(self.steps_delta())
            }
            Inserted::New(id) => {
                if (self.store.len() as u64) * 100 > self.p.slots() as u64 * MAX_LOAD_PCT {
                    return self.grow();
                }
                if self.place(id, true) { Ok(self.steps_delta()) } else { self.grow() }
            }
        }
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some((id, _)) = self.store.remove(key) else {
            return Ok(None);
        };
        self.steps.clear();
        let slot = self.pos[id as usize] as usize;
        self.pos[id as usize] = NONE;
        let mut step = Vec::new();
        self.set_slot(slot, NONE, &mut step);
        self.steps.push(step);
        Ok(Some(self.steps_delta()))
    }

    fn export(&self) -> Lookup {
        Lookup::new(self.p, self.a.clone(), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.store.memory_bytes()
            + self.owner.capacity() * 4
            + self.pos.capacity() * 4
            + self.a.memory_bytes()
    }
}

crate::snapshot::persist!(Options { fingerprint_bits, seed });
crate::snapshot::persist_codec!(Params);
crate::snapshot::control_snapshot!(
    Control, CONTROL_KIND, lineage: table, seq: seq,
    state { opts, p, store, owner, pos, a, grows, moves },
    scratch { steps },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::{check_ids, ensure};
        let slots = self.p.nb as usize * 4;
        ensure(self.a.len() == slots && self.a.bits() == self.p.width(), || "partial-key cuckoo slot array".into())?;
        ensure(self.owner.len() == slots, || "partial-key cuckoo slot owners".into())?;
        check_ids("partial-key cuckoo slot owner", &self.owner, self.store.id_bound(), NONE)?;
        check_ids("partial-key cuckoo key slot", &self.pos, slots, NONE)?;
        for id in self.store.live_ids() {
            let ok = self.pos.get(id as usize).is_some_and(|&s| s != NONE && self.owner[s as usize] == id);
            ensure(ok, || format!("partial-key cuckoo key {id} is not in its slot"))?;
        }
        Ok(())
    }
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0501, "partial-key cuckoo lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0502, "partial-key cuckoo delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind =
    crate::wire::Kind::new(0x0503, "partial-key cuckoo control snapshot");
