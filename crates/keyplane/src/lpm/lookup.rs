//! The LPM data-plane form: a top array per address family and one
//! Othello-indexed, verified table per prefix length longer than the top.

use super::delta::{Delta, FamImage, Image, LevelImage, Op, Steps, lineage_of};
use super::prefix::{Family, netmask};
use super::slots::Slots;
use super::{BLOCKS, T_BITS, bucket, buckets, level_key};
use crate::engine::{Change, RawDelta, RawLookup, Scheme};
use crate::error::{Error, Result, mask};
use crate::lineage::Lineage;
use crate::mem::prefetch;
use crate::othello;
use crate::sync::Published;
use crate::wire::{Kind, Reader as WireReader, Writer};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Lineage of the per-length Othello indexes inside an LPM lookup form: internal
/// parts, patched only by this table's own (id-checked) deltas.
pub(super) const INDEX_LINEAGE: crate::lineage::Lineage =
    crate::lineage::Lineage { id: crate::TableId::from_u128(0), key_format: None };

const BATCH: usize = 16;
/// Candidate lengths probed in parallel by one lookup.
const GROUP: usize = 8;

/// Per family, indexed by the address's top [`T_BITS`] bits: the leaf-pushed
/// next hop of the longest prefix of length ≤ `T_BITS` covering the block
/// (`next_hop + 1`, 0 = none), and the bit set of length buckets that hold
/// at least one longer prefix inside the block.
#[derive(Debug)]
pub(crate) struct Top {
    pub mask: Box<[AtomicU64]>,
    pub short: Box<[AtomicU32]>,
}

impl Top {
    fn new() -> Self {
        Self { mask: crate::bits::zeroed_atomics(BLOCKS), short: (0..BLOCKS).map(|_| AtomicU32::new(0)).collect() }
    }
    fn memory_bytes(&self) -> usize {
        self.mask.len() * 8 + self.short.len() * 4
    }
}

/// One prefix length: Othello index (prefix → slot) + verified slots.
#[derive(Debug)]
pub(crate) struct Level {
    pub len: u8,
    bucket: u32,
    net: u128,
    /// Owner of the index, for in-place deltas.
    index: othello::Lookup,
    /// The index's arrays, read directly (the index is only ever patched in
    /// place: a re-seeded index arrives as a new `Level`).
    inner: Arc<othello::LookupInner>,
    slots: Arc<Slots>,
}

impl Level {
    fn new(fam: Family, len: u8, index: othello::Lookup, slots: Arc<Slots>) -> Self {
        let inner = index.snapshot_arc();
        Level { len, bucket: bucket(fam, len), net: netmask(fam.width(), len as u32), index, inner, slots }
    }

    fn from_image(fam: Family, img: LevelImage) -> Self {
        let slots = Arc::new(Slots::from_entries(&img.slots, fam == Family::V6));
        Self::new(fam, img.len, othello::Lookup::from_image(img.index, INDEX_LINEAGE, img.oseq), slots)
    }

    fn image(&self) -> LevelImage {
        let c = &self.inner;
        LevelImage {
            len: self.len,
            oseq: self.index.seq(),
            index: othello::Image { p: c.p, a: c.a.clone(), b: c.b.clone() },
            slots: self.slots.entries(),
        }
    }

    #[inline(always)]
    fn locate(&self, fam: Family, k: u128) -> (usize, usize) {
        let (buf, n) = level_key(fam, k);
        let (_, ia, ib) = self.inner.p.locate(&buf[..n]);
        (ia, ib)
    }

    /// The next hop in slot `s` if that slot holds the address's prefix of
    /// this length (the verification that makes absent prefixes harmless).
    #[inline(always)]
    fn verify(&self, a: u128, s: usize) -> Option<u32> {
        match self.slots.get(s) {
            Some((stored, nh)) if stored == a & self.net => Some(nh),
            _ => None,
        }
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + crate::LookupTable::memory_bytes(&self.index) + self.slots.memory_bytes()
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Fam {
    pub top: Option<Arc<Top>>,
    /// Longest length first.
    pub levels: Vec<Arc<Level>>,
}

impl Fam {
    fn level(&self, len: u8) -> Option<&Arc<Level>> {
        self.levels.iter().find(|l| l.len == len)
    }
    fn put_level(&mut self, l: Level) {
        self.levels.retain(|x| x.len != l.len);
        let at = self.levels.iter().position(|x| x.len < l.len).unwrap_or(self.levels.len());
        self.levels.insert(at, Arc::new(l));
    }
}

/// Everything a lookup reads; replaced as a whole (sharing unchanged parts)
/// when a length table appears, disappears or is rebuilt.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tables {
    pub fams: [Fam; 2],
    /// Next-hop width.
    pub vbits: u32,
}

/// Splits 4 or 16 address bytes into a family and right-aligned bits.
#[inline(always)]
fn parse(key: &[u8]) -> Option<(Family, u128)> {
    match key.len() {
        4 => Some((Family::V4, u32::from_be_bytes([key[0], key[1], key[2], key[3]]) as u128)),
        16 => {
            let mut b = [0u8; 16];
            b.copy_from_slice(key);
            Some((Family::V6, u128::from_be_bytes(b)))
        }
        _ => None,
    }
}

impl Tables {
    /// Longest-prefix match of `a` in family `f`.
    #[inline(always)]
    pub fn get_in(&self, f: Family, a: u128) -> Option<u64> {
        let fam = &self.fams[f.index()];
        let top = fam.top.as_deref()?;
        let b = (a >> (f.width() - T_BITS)) as usize;
        let m = top.mask.get(b)?.load(Ordering::Acquire);
        if m != 0 {
            // The candidate lengths are probed in groups of up to GROUP, with
            // all of a group's memory reads in flight at once (hash, prefetch
            // both Othello slots; read them, prefetch the verification slots;
            // check longest first): two rounds of parallel misses instead of
            // two serial misses per candidate length.
            let mut cand = [(0usize, 0usize, 0usize); GROUP];
            let mut levels = fam.levels.iter().enumerate().filter(|(_, lv)| (m >> lv.bucket) & 1 == 1).peekable();
            while levels.peek().is_some() {
                let mut n = 0;
                for (i, lv) in levels.by_ref().take(GROUP) {
                    let (ia, ib) = lv.locate(f, a & lv.net);
                    lv.inner.prefetch(ia, ib);
                    cand[n] = (i, ia, ib);
                    n += 1;
                }
                if n == 1 {
                    let (i, ia, ib) = cand[0];
                    let lv = &fam.levels[i];
                    if let Some(nh) = lv.verify(a, lv.inner.raw(ia, ib) as usize) {
                        return Some(nh as u64);
                    }
                    continue;
                }
                for c in cand.iter_mut().take(n) {
                    let lv = &fam.levels[c.0];
                    c.1 = lv.inner.raw(c.1, c.2) as usize;
                    lv.slots.prefetch(c.1);
                }
                for c in cand.iter().take(n) {
                    if let Some(nh) = fam.levels[c.0].verify(a, c.1) {
                        return Some(nh as u64);
                    }
                }
            }
        }
        match top.short.get(b)?.load(Ordering::Acquire) {
            0 => None,
            s => Some((s - 1) as u64),
        }
    }

    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let (f, a) = parse(key)?;
        self.get_in(f, a)
    }

    /// Four passes per group of 16, each touching memory the previous one
    /// prefetched: the block's top entry; the first candidate length's two
    /// Othello slots; the verification slot they name; the answer (a miss at
    /// the first candidate falls back to [`Tables::get_in`], whose lines
    /// are cached by then).
    pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        #[derive(Clone, Copy)]
        struct St {
            f: Family,
            a: u128,
            b: usize,
            /// Index of the first candidate level, `usize::MAX` for none.
            lv: usize,
            ia: usize,
            ib: usize,
            slot: usize,
        }
        let none = St { f: Family::V4, a: 0, b: usize::MAX, lv: usize::MAX, ia: 0, ib: 0, slot: 0 };
        let mut st = [none; BATCH];
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let st = &mut st[..ks.len()];
            for (k, s) in ks.iter().zip(st.iter_mut()) {
                *s = none;
                let Some((f, a)) = parse(k) else { continue };
                let Some(top) = self.fams[f.index()].top.as_deref() else { continue };
                let b = (a >> (f.width() - T_BITS)) as usize;
                if let Some(m) = top.mask.get(b) {
                    prefetch(m as *const AtomicU64);
                    *s = St { f, a, b, ..none };
                }
            }
            for s in st.iter_mut().filter(|s| s.b != usize::MAX) {
                let fam = &self.fams[s.f.index()];
                let Some(top) = fam.top.as_deref() else { continue };
                let m = top.mask[s.b].load(Ordering::Acquire);
                match fam.levels.iter().position(|lv| (m >> lv.bucket) & 1 == 1) {
                    Some(i) => {
                        let lv = &fam.levels[i];
                        (s.ia, s.ib) = lv.locate(s.f, s.a & lv.net);
                        lv.inner.prefetch(s.ia, s.ib);
                        s.lv = i;
                    }
                    None => prefetch(&top.short[s.b] as *const AtomicU32),
                }
            }
            for s in st.iter_mut().filter(|s| s.lv != usize::MAX) {
                let lv = &self.fams[s.f.index()].levels[s.lv];
                s.slot = lv.inner.raw(s.ia, s.ib) as usize;
                lv.slots.prefetch(s.slot);
            }
            for (s, o) in st.iter().zip(os.iter_mut()) {
                *o = if s.b == usize::MAX {
                    None
                } else if s.lv == usize::MAX {
                    self.fams[s.f.index()].top.as_deref().and_then(|t| match t.short[s.b].load(Ordering::Acquire) {
                        0 => None,
                        v => Some((v - 1) as u64),
                    })
                } else {
                    let lv = &self.fams[s.f.index()].levels[s.lv];
                    match lv.verify(s.a, s.slot) {
                        Some(nh) => Some(nh as u64),
                        None => self.get_in(s.f, s.a),
                    }
                };
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.fams
            .iter()
            .map(|f| {
                f.top.as_ref().map_or(0, |t| t.memory_bytes())
                    + f.levels.iter().map(|l| l.memory_bytes()).sum::<usize>()
                    + f.levels.capacity() * std::mem::size_of::<Arc<Level>>()
            })
            .sum()
    }
}

/// The LPM lookup form. See the [module docs](super).
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle (`export`,
/// `to_bytes` / `from_bytes`, `apply`, `get`, `get_batch`, `reader`); typed
/// lookups by address:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, Wire, lpm};
/// use std::net::Ipv4Addr;
///
/// let mut ctl = lpm::Control::with_value_bits(8)?;
/// ctl.insert_prefix("10.0.0.0/8".parse()?, 1)?;
/// let table = ctl.export();
/// let d = ctl.insert_prefix("10.1.0.0/16".parse()?, 2)?;
/// table.apply(&d)?;
/// assert_eq!(table.get_v4(Ipv4Addr::new(10, 1, 2, 3)), Some(2));
/// assert_eq!(table.get(&[10, 9, 9, 9]), Some(1));
/// assert_eq!(table.get(&[11, 0, 0, 1]), None);
/// let copy = lpm::Lookup::from_bytes(&table.to_bytes())?;
/// assert_eq!(copy.get_v4(Ipv4Addr::new(10, 1, 0, 0)), Some(2));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<Lpm>,
}

/// A per-thread read handle on an LPM [`Lookup`] ([`crate::LookupTable::reader`]).
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Lpm>);

crate::engine::lookup_form!(Lpm, pub);

impl Reader<'_> {
    /// Longest-prefix match of an IPv4 address.
    #[inline]
    pub fn get_v4(&self, a: Ipv4Addr) -> Option<u64> {
        self.0.with(|t| t.get_in(Family::V4, u32::from(a) as u128))
    }
    /// Longest-prefix match of an IPv6 address.
    #[inline]
    pub fn get_v6(&self, a: Ipv6Addr) -> Option<u64> {
        self.0.with(|t| t.get_in(Family::V6, u128::from(a)))
    }
}

/// What the pre-check of a delta tracks about one length table.
#[derive(Clone, Copy)]
struct Sim {
    len: u8,
    slots: usize,
    oseq: u64,
    seed: u64,
    ibits: u32,
}

/// LPM on the engine ([`crate::engine`]): a delta is a list of steps, each
/// written in place or published as a new [`Tables`] sharing the unchanged
/// parts. Its blobs and deltas keep their own head (a 64-bit table id, no
/// key format): `vbits | id | seq` and `seq | id`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lpm;

impl Scheme for Lpm {
    type Inner = Tables;
    type Image = Image;
    type Patch = Steps;

    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    /// Never written: LPM deltas are always step lists.
    const REPLACE_TAG: u8 = 0;

    fn build(img: Image) -> Result<Tables> {
        let mut t = Tables { vbits: img.vbits, ..Tables::default() };
        for (i, (fam, fi)) in t.fams.iter_mut().zip(img.fams).enumerate() {
            let f = Family::from_index(i);
            fam.top = fi.top.map(|used| {
                let top = Top::new();
                for (b, m, s) in used {
                    top.mask[b as usize].store(m, Ordering::Relaxed);
                    top.short[b as usize].store(s, Ordering::Relaxed);
                }
                Arc::new(top)
            });
            fam.levels = fi.levels.into_iter().map(|l| Arc::new(Level::from_image(f, l))).collect();
        }
        Ok(t)
    }

    fn image(t: &Tables) -> Image {
        let mut fams: [FamImage; 2] = Default::default();
        for (fam, fi) in t.fams.iter().zip(fams.iter_mut()) {
            fi.top = fam.top.as_ref().map(|top| {
                (0..BLOCKS)
                    .map(|b| (b as u32, top.mask[b].load(Ordering::Acquire), top.short[b].load(Ordering::Acquire)))
                    .filter(|&(_, m, s)| m != 0 || s != 0)
                    .collect()
            });
            fi.levels = fam.levels.iter().map(|l| l.image()).collect();
        }
        Image { vbits: t.vbits, fams }
    }

    fn payload_hint(t: &Tables) -> usize {
        t.memory_bytes() + 64
    }

    fn check_replace(_: &Tables, _: &Image) -> Result<()> {
        Err(Error::DeltaMismatch("lpm deltas never replace the whole table".into()))
    }

    fn apply_patch(cur: &Published<Tables>, t: Arc<Tables>, steps: &Steps) -> Result<()> {
        precheck(&t, &steps.0)?;
        drop(t);
        for op in &steps.0 {
            apply_op(cur, op)?;
        }
        Ok(())
    }

    fn memory_bytes(t: &Tables) -> usize {
        t.memory_bytes()
    }

    fn value_bits(t: &Tables) -> u32 {
        t.vbits
    }

    // Longest-prefix match of a 4-byte (IPv4) or 16-byte (IPv6) address in
    // network order; `None` when no prefix covers it (or any other length).
    crate::engine::inner_lookups!(get, get_batch);

    fn write_blob(w: &mut Writer, table: Lineage, seq: u64, t: &Tables) {
        let img = Self::image(t);
        w.u8(img.vbits as u8).u64(table.id.as_u128() as u64).u64(seq);
        img.encode_fams(w);
    }

    fn read_blob(r: &mut WireReader<'_>) -> Result<(Lineage, u64, Image)> {
        let vbits = Image::decode_vbits(r)?;
        let table = r.u64()?;
        let seq = r.u64()?;
        Ok((lineage_of(table), seq, Image::decode_fams(r, vbits)?))
    }

    fn write_delta(w: &mut Writer, d: &RawDelta<Self>) {
        super::delta::write_delta(w, d)
    }

    fn read_delta(r: &mut WireReader<'_>) -> Result<RawDelta<Self>> {
        super::delta::read_delta(r)
    }
}

/// Checks every step of `ops` against the current state (simulating the
/// structural steps), so that a delta made for another table is refused
/// before anything is written.
fn precheck(t: &Tables, ops: &[Op]) -> Result<()> {
    let bad = |m: String| Err(Error::DeltaMismatch(m));
    let vbits = t.vbits;
    let vmax = mask(vbits);
    let mut tops = [t.fams[0].top.is_some(), t.fams[1].top.is_some()];
    let mut sims: [Vec<Sim>; 2] = std::array::from_fn(|i| {
        t.fams[i]
            .levels
            .iter()
            .map(|l| Sim {
                len: l.len,
                slots: l.slots.len(),
                oseq: l.index.seq(),
                seed: l.index.seed(),
                ibits: l.index.value_bits(),
            })
            .collect()
    });
    for op in ops {
        match op {
            Op::InitTop { fam } => {
                if tops[fam.index()] {
                    return bad(format!("{fam:?} top array already exists"));
                }
                tops[fam.index()] = true;
            }
            Op::Short { fam, runs } => {
                if !tops[fam.index()] {
                    return bad(format!("{fam:?} has no top array"));
                }
                for &(b, n, v) in runs {
                    if b as u64 + n as u64 > BLOCKS as u64 || v as u64 > vmax + 1 {
                        return bad(format!("top run {b}+{n} = {v} out of range"));
                    }
                }
            }
            Op::Mask { fam, block, mask: m } => {
                if !tops[fam.index()] || *block as usize >= BLOCKS || m >> buckets(*fam) != 0 {
                    return bad(format!("mask step for block {block} does not fit"));
                }
            }
            Op::Slot { fam, len, slot, entry } => {
                let Some(s) = sims[fam.index()].iter().find(|s| s.len == *len) else {
                    return bad(format!("no /{len} table for a slot write"));
                };
                if *slot as usize >= s.slots {
                    return bad(format!("slot {slot} outside the /{len} table of {}", s.slots));
                }
                if let Some((k, nh)) = entry
                    && (*nh as u64 > vmax || k & !netmask(fam.width(), *len as u32) != 0)
                {
                    return bad(format!("slot entry does not fit /{len} with {vbits}-bit values"));
                }
            }
            Op::Index { fam, len, delta } => {
                let Some(s) = sims[fam.index()].iter_mut().find(|s| s.len == *len) else {
                    return bad(format!("no /{len} table for an index delta"));
                };
                crate::lineage::check_next(INDEX_LINEAGE, s.oseq, delta.0.table, delta.0.seq)
                    .map_err(|e| Error::DeltaMismatch(format!("/{len} index: {e}")))?;
                s.oseq = delta.0.seq;
                match delta.body() {
                    Change::Replace(img) => {
                        if img.p.vbits != s.ibits {
                            return bad(format!("/{len} index rebuild changes the slot-index width"));
                        }
                        s.seed = img.p.seed();
                    }
                    Change::Patch(p) => {
                        if p.seed != s.seed {
                            return bad(format!("/{len} index delta is for another seed"));
                        }
                    }
                }
            }
            Op::Level { fam, len, image } => {
                let v = &mut sims[fam.index()];
                v.retain(|s| s.len != *len);
                if let Some(img) = image {
                    if img.len != *len || img.slots.iter().flatten().any(|&(_, nh)| nh as u64 > vmax) {
                        return bad(format!("/{len} table image does not fit {vbits}-bit values"));
                    }
                    v.push(Sim {
                        len: *len,
                        slots: img.slots.len(),
                        oseq: img.oseq,
                        seed: img.index.p.seed(),
                        ibits: img.index.p.vbits,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Publishes a copy of the current tables changed by `f` (unchanged parts shared).
fn publish(cur: &Published<Tables>, f: impl FnOnce(&mut Tables)) {
    let mut t = (**cur.load()).clone();
    f(&mut t);
    cur.replace(t);
}

fn apply_op(cur: &Published<Tables>, op: &Op) -> Result<()> {
    let t = cur.load_full();
    match op {
        Op::InitTop { fam } => publish(cur, |t| t.fams[fam.index()].top = Some(Arc::new(Top::new()))),
        Op::Short { fam, runs } => {
            let top = t.fams[fam.index()].top.as_ref().ok_or_else(|| Error::DeltaMismatch("no top".into()))?;
            for &(b, n, v) in runs {
                for s in &top.short[b as usize..(b + n) as usize] {
                    s.store(v, Ordering::Release);
                }
            }
        }
        Op::Mask { fam, block, mask: m } => {
            let top = t.fams[fam.index()].top.as_ref().ok_or_else(|| Error::DeltaMismatch("no top".into()))?;
            top.mask[*block as usize].store(*m, Ordering::Release);
        }
        Op::Slot { fam, len, slot, entry } => {
            let lv = t.fams[fam.index()].level(*len).ok_or_else(|| Error::DeltaMismatch("no level".into()))?;
            lv.slots.set(*slot as usize, *entry);
        }
        Op::Index { fam, len, delta } => {
            let lv = t.fams[fam.index()].level(*len).ok_or_else(|| Error::DeltaMismatch("no level".into()))?;
            match delta.body() {
                Change::Replace(img) => {
                    let index = othello::Lookup::from_image((**img).clone(), INDEX_LINEAGE, delta.0.seq);
                    let nl = Level::new(*fam, *len, index, lv.slots.clone());
                    publish(cur, |t| t.fams[fam.index()].put_level(nl));
                }
                Change::Patch(_) => crate::LookupTable::apply(&lv.index, delta)?,
            }
        }
        Op::Level { fam, len, image } => match image {
            Some(img) => {
                let nl = Level::from_image(*fam, (**img).clone());
                publish(cur, |t| t.fams[fam.index()].put_level(nl));
            }
            None => publish(cur, |t| t.fams[fam.index()].levels.retain(|l| l.len != *len)),
        },
    }
    Ok(())
}

impl Lookup {
    pub(crate) fn from_tables(t: Tables, table: u64, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(t, lineage_of(table), seq))
    }

    pub(crate) fn build_level(fam: Family, img: LevelImage) -> Level {
        Level::from_image(fam, img)
    }

    pub(crate) fn new_top() -> Top {
        Top::new()
    }

    /// Identity of the control form whose deltas this table accepts.
    pub fn table_id(&self) -> u64 {
        self.lineage().id.as_u128() as u64
    }
    /// Prefix lengths that have a table (longer than the 16-bit top array),
    /// longest first.
    pub fn lengths(&self, fam: Family) -> Vec<u8> {
        self.raw.load().fams[fam.index()].levels.iter().map(|l| l.len).collect()
    }
    /// Longest-prefix match of an IPv4 address.
    #[inline]
    pub fn get_v4(&self, a: Ipv4Addr) -> Option<u64> {
        self.raw.load().get_in(Family::V4, u32::from(a) as u128)
    }
    /// Longest-prefix match of an IPv6 address.
    #[inline]
    pub fn get_v6(&self, a: Ipv6Addr) -> Option<u64> {
        self.raw.load().get_in(Family::V6, u128::from(a))
    }
    /// Longest-prefix match of an address of either family.
    pub fn get_addr(&self, a: IpAddr) -> Option<u64> {
        match a {
            IpAddr::V4(a) => self.get_v4(a),
            IpAddr::V6(a) => self.get_v6(a),
        }
    }
}
