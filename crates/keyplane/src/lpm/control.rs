//! The LPM control form: every prefix, the top arrays' mirror, and one
//! Othello control form plus slot allocator per prefix length.

use super::delta::{Delta, LevelImage, Op};
use super::lookup::{Fam, Lookup, Tables};
use super::prefix::{Family, Prefix, netmask};
use super::slots::Entry;
use super::{BLOCKS, MAX_VALUE_BITS, T_BITS, bucket, level_key};
use crate::ControlTable;
use crate::error::{Error, Result, check_value, check_value_bits};
use crate::othello;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Smallest slot array of a length table.
const MIN_SLOTS: usize = 4;

/// Bits of a slot index for `n` slots.
fn index_bits(n: usize) -> u32 {
    (usize::BITS - (n.max(2) - 1).leading_zeros()).max(1)
}

/// The top array's mirror: per block, `best` = length + 1 of the longest
/// prefix ≤ `T_BITS` covering it (0 = none) and the values the lookup form
/// holds.
#[derive(Debug, Clone)]
struct CtlTop {
    best: Vec<u8>,
    val: Vec<u32>,
    mask: Vec<u64>,
}

impl CtlTop {
    fn new() -> Self {
        Self { best: vec![0; BLOCKS], val: vec![0; BLOCKS], mask: vec![0; BLOCKS] }
    }
}

/// One prefix length: the Othello index (prefix → slot), the slots and the
/// free list.
#[derive(Debug, Clone)]
struct CtlLevel {
    index: othello::Control,
    slots: Vec<Entry>,
    free: Vec<u32>,
    count: usize,
}

impl CtlLevel {
    /// A table holding `items` in slots `0..n`, with `cap` slots.
    fn build(fam: Family, items: &[(u128, u32)], cap: usize) -> Result<Self> {
        let cap = cap.max(items.len()).max(MIN_SLOTS);
        if cap > u32::MAX as usize {
            return Err(Error::CapacityExceeded("more than 2^32 prefixes of one length".into()));
        }
        let keys = items.iter().enumerate().map(|(i, &(k, _))| {
            let (b, n) = level_key(fam, k);
            (b[..n].to_vec(), i as u64)
        });
        // XXH3 keys (the index predates `othello::KeyHash`; its blob bytes are pinned).
        let opts = othello::Options { hash: othello::KeyHash::Xxh3, ..othello::Options::default() };
        let mut index = othello::Control::from_items_with(keys, index_bits(cap), opts)?;
        // The index's deltas travel inside this table's (id-checked) deltas and
        // patch the lookup form's index, built with the same internal lineage.
        index.set_lineage(super::lookup::INDEX_LINEAGE);
        let mut slots: Vec<Entry> = items.iter().map(|&e| Some(e)).collect();
        slots.resize(cap, None);
        let free = (items.len() as u32..cap as u32).rev().collect();
        Ok(Self { index, slots, free, count: items.len() })
    }

    fn entries(&self) -> Vec<(u128, u32)> {
        self.slots.iter().flatten().copied().collect()
    }

    fn slot_of(&self, fam: Family, k: u128) -> Option<usize> {
        let (b, n) = level_key(fam, k);
        self.index.get(&b[..n]).map(|s| s as usize)
    }

    fn image(&self, len: u8) -> LevelImage {
        let l = self.index.export();
        let c = l.snapshot_arc();
        LevelImage {
            len,
            oseq: l.seq(),
            index: othello::Image { p: c.p, a: c.a.clone(), b: c.b.clone() },
            slots: self.slots.clone(),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.index.memory_bytes() + self.slots.capacity() * std::mem::size_of::<Entry>() + self.free.capacity() * 4
    }
}

#[derive(Debug, Clone)]
struct CtlFam {
    f: Family,
    top: Option<CtlTop>,
    /// Prefixes of length ≤ `T_BITS`: (length, bits) → next hop.
    short: HashMap<(u8, u128), u32>,
    levels: BTreeMap<u8, CtlLevel>,
    /// Prefixes per (block, length bucket), for the top masks.
    counts: HashMap<(u32, u32), u32>,
}

impl CtlFam {
    fn new(f: Family) -> Self {
        Self { f, top: None, short: HashMap::new(), levels: BTreeMap::new(), counts: HashMap::new() }
    }

    fn w(&self) -> u32 {
        self.f.width()
    }

    /// Blocks covered by a short prefix.
    fn range(&self, len: u8, k: u128) -> (usize, usize) {
        ((k >> (self.w() - T_BITS)) as usize, 1usize << (T_BITS - len as u32))
    }

    fn block(&self, k: u128) -> u32 {
        (k >> (self.w() - T_BITS)) as u32
    }

    /// Sets `best`/`val` of the blocks in `first..first+n` selected by
    /// `pick` to `(best, val)`, and records the changed runs.
    fn set_blocks(&mut self, first: usize, n: usize, best: u8, val: u32, pick: impl Fn(u8) -> bool, ops: &mut Vec<Op>) {
        let top = self.top.as_mut().expect("top allocated before short prefixes");
        let mut runs: Vec<(u32, u32, u32)> = Vec::new();
        for b in first..first + n {
            if pick(top.best[b]) {
                top.best[b] = best;
                top.val[b] = val;
                match runs.last_mut() {
                    Some(r) if (r.0 + r.1) as usize == b => r.1 += 1,
                    _ => runs.push((b as u32, 1, val)),
                }
            }
        }
        if !runs.is_empty() {
            ops.push(Op::Short { fam: self.f, runs });
        }
    }

    fn insert_short(&mut self, p: Prefix, nh: u32, ops: &mut Vec<Op>) -> bool {
        let (len, k) = (p.len(), p.bits());
        let old = self.short.insert((len, k), nh);
        if old == Some(nh) {
            return false;
        }
        let (first, n) = self.range(len, k);
        self.set_blocks(first, n, len + 1, nh + 1, |b| b <= len + 1, ops);
        old.is_none()
    }

    fn remove_short(&mut self, p: Prefix, ops: &mut Vec<Op>) -> bool {
        let (len, k) = (p.len(), p.bits());
        if self.short.remove(&(len, k)).is_none() {
            return false;
        }
        // Every shorter prefix covering part of the range covers all of it.
        let (best, val) = (0..len)
            .rev()
            .find_map(|l| self.short.get(&(l, k & netmask(self.w(), l as u32))).map(|&v| (l + 1, v + 1)))
            .unwrap_or((0, 0));
        let (first, n) = self.range(len, k);
        self.set_blocks(first, n, best, val, |b| b == len + 1, ops);
        true
    }

    fn mask_add(&mut self, k: u128, len: u8, delta: i32, ops: &mut Vec<Op>) {
        let (block, bkt) = (self.block(k), bucket(self.f, len));
        let c = self.counts.entry((block, bkt)).or_insert(0);
        let before = *c;
        *c = (*c as i64 + delta as i64) as u32;
        let after = *c;
        if after == 0 {
            self.counts.remove(&(block, bkt));
        }
        if (before == 0) != (after == 0) {
            let top = self.top.as_mut().expect("top allocated before long prefixes");
            top.mask[block as usize] ^= 1 << bkt;
            ops.push(Op::Mask { fam: self.f, block, mask: top.mask[block as usize] });
        }
    }

    fn insert_long(&mut self, p: Prefix, nh: u32, ops: &mut Vec<Op>) -> Result<bool> {
        let (f, len, k) = (self.f, p.len(), p.bits());
        match self.levels.get_mut(&len) {
            None => {
                let lv = CtlLevel::build(f, &[(k, nh)], MIN_SLOTS)?;
                ops.push(Op::Level { fam: f, len, image: Some(Box::new(lv.image(len))) });
                self.levels.insert(len, lv);
            }
            Some(lv) => {
                if let Some(s) = lv.slot_of(f, k) {
                    if lv.slots[s] == Some((k, nh)) {
                        return Ok(false);
                    }
                    lv.slots[s] = Some((k, nh));
                    ops.push(Op::Slot { fam: f, len, slot: s as u32, entry: Some((k, nh)) });
                    return Ok(false);
                }
                if let Some(s) = lv.free.pop() {
                    // The slot first (no stored prefix maps to a free slot),
                    // then the index that leads the prefix to it.
                    lv.slots[s as usize] = Some((k, nh));
                    let (b, n) = level_key(f, k);
                    match lv.index.insert(&b[..n], s as u64) {
                        Ok(d) => {
                            ops.push(Op::Slot { fam: f, len, slot: s, entry: Some((k, nh)) });
                            ops.push(Op::Index { fam: f, len, delta: d });
                            lv.count += 1;
                        }
                        Err(e) => {
                            lv.slots[s as usize] = None;
                            lv.free.push(s);
                            return Err(e);
                        }
                    }
                } else {
                    let mut items = lv.entries();
                    items.push((k, nh));
                    let nl = CtlLevel::build(f, &items, lv.slots.len() * 2)?;
                    ops.push(Op::Level { fam: f, len, image: Some(Box::new(nl.image(len))) });
                    *lv = nl;
                }
            }
        }
        self.mask_add(k, len, 1, ops);
        Ok(true)
    }

    fn remove_long(&mut self, p: Prefix, ops: &mut Vec<Op>) -> Result<bool> {
        let (f, len, k) = (self.f, p.len(), p.bits());
        let Some(lv) = self.levels.get_mut(&len) else { return Ok(false) };
        let Some(s) = lv.slot_of(f, k) else { return Ok(false) };
        // Invalidate the slot first: from then on the prefix misses.
        lv.slots[s] = None;
        ops.push(Op::Slot { fam: f, len, slot: s as u32, entry: None });
        lv.count -= 1;
        if lv.count == 0 {
            self.levels.remove(&len);
            ops.push(Op::Level { fam: f, len, image: None });
        } else if lv.count * 8 < lv.slots.len() && lv.slots.len() > 64 {
            let items = lv.entries();
            let nl = CtlLevel::build(f, &items, lv.slots.len() / 2)?;
            ops.push(Op::Level { fam: f, len, image: Some(Box::new(nl.image(len))) });
            *lv = nl;
        } else {
            let (b, n) = level_key(f, k);
            let d = lv.index.remove(&b[..n])?.ok_or_else(|| Error::Corrupt("index lost a prefix".into()))?;
            ops.push(Op::Index { fam: f, len, delta: d });
            lv.free.push(s as u32);
        }
        self.mask_add(k, len, -1, ops);
        Ok(true)
    }

    fn get(&self, p: Prefix) -> Option<u32> {
        if p.len() as u32 <= T_BITS {
            return self.short.get(&(p.len(), p.bits())).copied();
        }
        let lv = self.levels.get(&p.len())?;
        lv.slots[lv.slot_of(self.f, p.bits())?].map(|(_, nh)| nh)
    }

    fn export(&self) -> Fam {
        let top = self.top.as_ref().map(|c| {
            let t = Lookup::new_top();
            for b in 0..BLOCKS {
                t.mask[b].store(c.mask[b], Ordering::Relaxed);
                t.short[b].store(c.val[b], Ordering::Relaxed);
            }
            Arc::new(t)
        });
        let levels =
            self.levels.iter().rev().map(|(&len, lv)| Arc::new(Lookup::build_level(self.f, lv.image(len)))).collect();
        Fam { top, levels }
    }
}

/// The LPM control form: all prefixes and their next hops; turns every
/// insert and remove into a [`super::Delta`]. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas. The
/// control form's keys are prefixes ([`Prefix::to_key`] bytes through
/// [`ControlTable`], or [`Control::insert_prefix`]); the lookup form's keys
/// are addresses (4 or 16 bytes, network order), answered by the longest
/// stored prefix covering them:
///
/// ```
/// use keyplane::lpm::{self, Prefix};
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire};
///
/// let mut ctl = lpm::Control::with_value_bits(8)?; // empty, 8-bit next hops
/// ctl.insert(&"198.18.0.0/15".parse::<Prefix>()?.to_key(), 1)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = lpm::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert_prefix("198.18.4.0/24".parse()?, 2)?;
/// table.apply(&lpm::Delta::from_bytes(&delta.to_bytes())?)?;
/// assert_eq!(table.get(&[198, 18, 4, 9]), Some(2)); // the /24
/// assert_eq!(table.get(&[198, 19, 0, 1]), Some(1)); // the /15
/// assert_eq!(table.get(&[10, 0, 0, 1]), None); // no route
/// let mut out = [None; 2];
/// table.get_batch(&[[198, 18, 4, 1].as_slice(), &[198, 18, 5, 1]], &mut out);
/// assert_eq!(out, [Some(2), Some(1)]);
/// let reader = table.reader(); // one per packet thread
/// assert_eq!(reader.get(&[198, 18, 4, 9]), Some(2));
/// assert_eq!(ctl.longest_match("198.18.4.9".parse().unwrap()), Some(("198.18.4.0/24".parse()?, 2)));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Control {
    vbits: u32,
    /// Random identity, carried by deltas and lookup forms.
    id: u64,
    seq: u64,
    fams: [CtlFam; 2],
    count: usize,
}

impl Control {
    /// Bulk construction from typed prefixes. A repeated prefix: the last
    /// next hop wins.
    pub fn from_prefixes<I: IntoIterator<Item = (Prefix, u64)>>(items: I, value_bits: u32) -> Result<Self> {
        let mut c = Self::with_value_bits(value_bits)?;
        let mut all: HashMap<Prefix, u32> = HashMap::new();
        for (p, v) in items {
            check_value(v, value_bits)?;
            all.insert(p, v as u32);
        }
        c.count = all.len();
        let mut sorted: Vec<(Prefix, u32)> = all.into_iter().collect();
        sorted.sort_unstable();
        let mut ops = Vec::new();
        for fam in c.fams.iter_mut() {
            let mine: Vec<&(Prefix, u32)> = sorted.iter().filter(|(p, _)| p.family() == fam.f).collect();
            if mine.is_empty() {
                continue;
            }
            fam.top = Some(CtlTop::new());
            let mut by_len: BTreeMap<u8, Vec<(u128, u32)>> = BTreeMap::new();
            // Sorted by length: longer short prefixes overwrite shorter ones.
            for &&(p, nh) in &mine {
                if p.len() as u32 <= T_BITS {
                    fam.insert_short(p, nh, &mut ops);
                } else {
                    by_len.entry(p.len()).or_default().push((p.bits(), nh));
                    fam.mask_add(p.bits(), p.len(), 1, &mut ops);
                }
            }
            for (len, items) in by_len {
                let cap = items.len() + items.len() / 32;
                fam.levels.insert(len, CtlLevel::build(fam.f, &items, cap)?);
            }
        }
        Ok(c)
    }

    /// Inserts a route or changes its next hop.
    pub fn insert_prefix(&mut self, p: Prefix, next_hop: u64) -> Result<Delta> {
        check_value(next_hop, self.vbits)?;
        let fam = &mut self.fams[p.family().index()];
        let mut ops = Vec::new();
        let created = fam.top.is_none();
        if created {
            fam.top = Some(CtlTop::new());
            ops.push(Op::InitTop { fam: fam.f });
        }
        let res = if p.len() as u32 <= T_BITS {
            Ok(fam.insert_short(p, next_hop as u32, &mut ops))
        } else {
            fam.insert_long(p, next_hop as u32, &mut ops)
        };
        match res {
            Ok(new) => self.count += new as usize,
            Err(e) => {
                if created {
                    fam.top = None;
                }
                return Err(e);
            }
        }
        self.seq += 1;
        Ok(Delta::new(self.id, self.seq, ops))
    }

    /// Removes a route; `None` when it was absent.
    pub fn remove_prefix(&mut self, p: Prefix) -> Result<Option<Delta>> {
        let fam = &mut self.fams[p.family().index()];
        let mut ops = Vec::new();
        let found =
            if p.len() as u32 <= T_BITS { fam.remove_short(p, &mut ops) } else { fam.remove_long(p, &mut ops)? };
        if !found {
            return Ok(None);
        }
        self.count -= 1;
        self.seq += 1;
        Ok(Some(Delta::new(self.id, self.seq, ops)))
    }

    /// The next hop stored for exactly this prefix.
    pub fn get_prefix(&self, p: Prefix) -> Option<u64> {
        self.fams[p.family().index()].get(p).map(u64::from)
    }

    /// Longest-prefix match on the control form (probes every length).
    pub fn longest_match(&self, addr: IpAddr) -> Option<(Prefix, u64)> {
        let bits = super::prefix::bits_of(addr);
        let f = if addr.is_ipv4() { Family::V4 } else { Family::V6 };
        (0..=f.width() as u8).rev().find_map(|l| {
            let p = Prefix::from_raw(f, bits, l);
            self.get_prefix(p).map(|v| (p, v))
        })
    }

    /// Every route, in no particular order.
    pub fn prefixes(&self) -> impl Iterator<Item = (Prefix, u64)> + '_ {
        self.fams.iter().flat_map(|fam| {
            let f = fam.f;
            fam.short.iter().map(move |(&(l, k), &v)| (Prefix::from_raw(f, k, l), v as u64)).chain(
                fam.levels.iter().flat_map(move |(&l, lv)| {
                    lv.slots.iter().flatten().map(move |&(k, v)| (Prefix::from_raw(f, k, l), v as u64))
                }),
            )
        })
    }

    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Random identity of this table: its deltas are refused by lookup
    /// forms exported from any other control form.
    pub fn table_id(&self) -> u64 {
        self.id
    }
}

/// A process-random identity (std's per-process hash keys, a counter).
fn fresh_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    crate::hash::mix64(h.finish())
}

impl ControlTable for Control {
    type Delta = Delta;
    type Lookup = Lookup;

    /// An empty table; `value_bits` (next-hop width) in 1..=31.
    fn with_value_bits(value_bits: u32) -> Result<Self> {
        check_value_bits(value_bits, 1, MAX_VALUE_BITS)?;
        Ok(Self {
            vbits: value_bits,
            id: fresh_id(),
            seq: 0,
            fams: [CtlFam::new(Family::V4), CtlFam::new(Family::V6)],
            count: 0,
        })
    }

    /// Keys are [`Prefix::to_key`] bytes.
    fn from_items<I, K>(items: I, value_bits: u32) -> Result<Self>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        let items: Result<Vec<(Prefix, u64)>> =
            items.into_iter().map(|(k, v)| Prefix::from_key(k.as_ref()).map(|p| (p, v))).collect();
        Self::from_prefixes(items?, value_bits)
    }

    /// LPM tables carry their own 64-bit table id in blobs and deltas (see
    /// docs/structures/lpm.md); the lineage reports it, and setting a
    /// lineage keeps the low 64 bits of its id. The key format is `prefix`.
    fn lineage(&self) -> crate::lineage::Lineage {
        crate::lineage::Lineage { id: crate::TableId::from_u128(self.id as u128), key_format: None }
    }

    fn set_lineage(&mut self, l: crate::lineage::Lineage) {
        self.id = l.id.as_u128() as u64;
    }

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        self.insert_prefix(Prefix::from_key(key)?, value)
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        self.remove_prefix(Prefix::from_key(key)?)
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        self.get_prefix(Prefix::from_key(key).ok()?)
    }

    fn len(&self) -> usize {
        self.count
    }

    fn value_bits(&self) -> u32 {
        self.vbits
    }

    fn export(&self) -> Lookup {
        let t = Tables { fams: [self.fams[0].export(), self.fams[1].export()], vbits: self.vbits };
        Lookup::from_tables(t, self.id, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.fams
            .iter()
            .map(|f| {
                f.top.as_ref().map_or(0, |_| BLOCKS * 13)
                    + f.short.capacity() * 40
                    + f.counts.capacity() * 16
                    + f.levels.values().map(|l| l.memory_bytes()).sum::<usize>()
            })
            .sum()
    }
}

crate::snapshot::persist_enum!(Family { V4 = 0, V6 = 1 });
crate::snapshot::persist!(CtlTop { best, val, mask });

impl crate::snapshot::Persist for CtlLevel {
    fn put(&self, w: &mut crate::wire::Writer) {
        use crate::snapshot::ControlState;
        let (l, seq) = self.index.lineage_seq();
        l.put(w);
        w.u64(seq);
        self.index.save_state(w);
        self.slots.put(w);
        self.free.put(w);
        self.count.put(w);
    }
    fn take(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        use crate::snapshot::{ControlState, Persist};
        let l = crate::lineage::Lineage::take(r)?;
        let seq = r.u64()?;
        let index = othello::Control::load_state(r, l, seq)?;
        Ok(CtlLevel { index, slots: Persist::take(r)?, free: Persist::take(r)?, count: Persist::take(r)? })
    }
}

crate::snapshot::persist!(CtlFam { f, top, short, levels, counts });

/// Value width, identity, sequence number, both families (the /0–/T
/// direct tables, the short-prefix map, and per length its Othello index
/// with its slot table and free list) and the prefix count.
impl crate::snapshot::ControlState for Control {
    const KIND: crate::wire::Kind = super::CONTROL_KIND;

    fn lineage_seq(&self) -> (crate::lineage::Lineage, u64) {
        (ControlTable::lineage(self), self.seq)
    }

    fn save_state(&self, w: &mut crate::wire::Writer) {
        use crate::snapshot::Persist;
        self.vbits.put(w);
        self.fams.put(w);
        self.count.put(w);
    }

    fn load_state(r: &mut crate::wire::Reader<'_>, l: crate::lineage::Lineage, seq: u64) -> Result<Self> {
        use crate::snapshot::{Persist, ensure};
        let id = l.id.as_u128();
        ensure(id >> 64 == 0 && l.key_format.is_none(), || "lpm table ids are 64-bit, without a key format".into())?;
        let c =
            Control { vbits: Persist::take(r)?, id: id as u64, seq, fams: Persist::take(r)?, count: Persist::take(r)? };
        check_value_bits(c.vbits, 1, MAX_VALUE_BITS).map_err(|e| Error::Corrupt(e.to_string()))?;
        ensure(c.fams[0].f == Family::V4 && c.fams[1].f == Family::V6, || "lpm families".into())?;
        for fam in &c.fams {
            if let Some(t) = &fam.top {
                ensure(t.best.len() == BLOCKS && t.val.len() == BLOCKS && t.mask.len() == BLOCKS, || {
                    "lpm direct tables".into()
                })?;
            }
            for lv in fam.levels.values() {
                ensure(lv.count <= lv.slots.len() && lv.free.iter().all(|&i| (i as usize) < lv.slots.len()), || {
                    "lpm slot table".into()
                })?;
            }
        }
        Ok(c)
    }
}

impl crate::Snapshot for Control {
    const SNAPSHOT_KIND: crate::wire::Kind = super::CONTROL_KIND;
    fn snapshot(&self) -> Vec<u8> {
        crate::snapshot::save(self)
    }
    fn from_snapshot(bytes: &[u8]) -> Result<Self> {
        crate::snapshot::load(bytes)
    }
}
