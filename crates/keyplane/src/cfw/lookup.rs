//! The CFW data-plane form.

use super::delta::{Delta, Image, Op, Ops, TAG_REPLACE};
use super::l2::L2;
use super::{Loc, Params, SLOTS};
use crate::bits::PackedArray;
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result, check_value};
use crate::mem::prefetch;
use crate::sync::{Published, StripeSet, StripedSeqLock};
use crate::wire::Kind;
use arc_swap::ArcSwap;
use std::sync::Arc;

const MAX_STRIPES: usize = 4096;
const BATCH: usize = 16;

#[derive(Debug)]
pub(crate) struct Inner {
    pub p: Params,
    pub l1: PackedArray,
    l2: ArcSwap<L2>,
    lock: StripedSeqLock,
    l2lock: StripedSeqLock,
    smask: usize,
}

impl Inner {
    fn new(img: Image) -> Result<Self> {
        let lock = StripedSeqLock::new((img.p.nb as usize / 256).clamp(64, MAX_STRIPES));
        let smask = lock.stripes() - 1;
        let p = img.p;
        let l2 = L2::build(img.l2.iter().map(|(k, v)| (k.as_slice(), p.locate(k).h, *v)));
        if l2.len() != img.l2.len() {
            return Err(Error::Corrupt("duplicate level-2 keys".into()));
        }
        Ok(Self { p, l1: img.l1, l2: ArcSwap::from_pointee(l2), lock, l2lock: StripedSeqLock::new(1), smask })
    }

    #[inline(always)]
    fn stripe(&self, bucket: usize) -> usize {
        bucket & self.smask
    }

    /// Level 1, then level 2, validated against both buckets' stripes (and
    /// the level-2 stripe when level 2 was read).
    #[inline(always)]
    fn read(&self, key: &[u8], l: &Loc) -> Option<u64> {
        let (s1, s2) = (self.stripe(l.b1), self.stripe(l.b2));
        loop {
            let v1 = self.lock.read_begin(s1);
            let v2 = self.lock.read_begin(s2);
            let mut r = self.p.scan(&self.l1, l.b1, l.fp);
            if r.is_none() {
                r = self.p.scan(&self.l1, l.b2, l.fp);
            }
            let mut ok = true;
            if r.is_none() {
                let v = self.l2lock.read_begin(0);
                r = self.l2.load().get(key, l.h);
                ok = self.l2lock.read_validate(0, v);
            }
            if ok && self.lock.read_validate(s1, v1) && self.lock.read_validate(s2, v2) {
                return r;
            }
        }
    }

    fn image(&self) -> Image {
        let mut l2 = self.l2.load().entries();
        l2.sort_unstable();
        Image { p: self.p, l1: self.l1.clone(), l2 }
    }
}

/// CFW lookup form: the Cuckoo Filtable (level 1) and the colliding keys
/// (level 2). See the [module docs](super).
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<Cfw>,
}

/// A per-thread read handle ([`crate::LookupTable::reader`]).
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Cfw>);

crate::engine::lookup_form!(Cfw);

impl Lookup {
    pub(crate) fn from_image(img: Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        // Images built by the control form never hold duplicate level-2 keys.
        let inner = Inner::new(img).expect("control-form image is consistent");
        Self::from_raw(RawLookup::new(inner, table, seq))
    }

    /// Fingerprint bits.
    pub fn fingerprint_bits(&self) -> u32 {
        self.raw.load().p.fbits
    }
    /// Number of level-1 buckets (4 slots each).
    pub fn buckets(&self) -> u64 {
        self.raw.load().p.nb
    }
    /// Hash seed (part of the skeleton).
    pub fn seed(&self) -> u64 {
        self.raw.load().p.seed
    }
    /// Keys held in level 2.
    pub fn level2_len(&self) -> usize {
        self.raw.load().l2.load().len()
    }
    /// Occupied level-1 slots (a scan of level 1).
    pub fn level1_len(&self) -> usize {
        let c = self.raw.load();
        (0..c.l1.len()).filter(|&i| c.l1.get(i) != 0).count()
    }
    /// Heap bytes of level 1 alone (the part every lookup touches).
    pub fn level1_memory_bytes(&self) -> usize {
        self.raw.load().l1.memory_bytes()
    }
}

/// The CFW scheme (see [`crate::engine`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cfw;

impl Scheme for Cfw {
    type Inner = Inner;
    type Image = Image;
    type Patch = Ops;
    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    const REPLACE_TAG: u8 = TAG_REPLACE;

    fn build(img: Image) -> Result<Inner> {
        Inner::new(img)
    }
    fn image(c: &Inner) -> Image {
        c.image()
    }
    fn payload_hint(c: &Inner) -> usize {
        c.l1.memory_bytes() + 64
    }
    fn check_replace(c: &Inner, img: &Image) -> Result<()> {
        if img.p.vbits != c.p.vbits || img.p.fbits != c.p.fbits {
            return Err(Error::DeltaMismatch("rebuild delta has a different slot layout".into()));
        }
        Ok(())
    }
    fn apply_patch(_cur: &Published<Inner>, c: Arc<Inner>, patch: &Ops) -> Result<()> {
        let (seed, nb, ops) = (patch.seed, patch.nb, &patch.ops);
        let c = &*c;
        if seed != c.p.seed || nb != c.p.nb {
            return Err(Error::DeltaMismatch(format!(
                "delta is for skeleton (seed {seed:#x}, {nb} buckets), table has (seed {:#x}, {} buckets)",
                c.p.seed, c.p.nb
            )));
        }
        let slots = c.p.nb * SLOTS as u64;
        let wmask = crate::mask(c.p.width());
        let mut stripes = StripeSet::new();
        let mut l2 = false;
        for op in ops {
            match op {
                Op::L1 { slot, word } => {
                    if *slot >= slots {
                        return Err(Error::DeltaMismatch(format!("slot {slot} outside level 1 of {slots}")));
                    }
                    if word & !wmask != 0 {
                        return Err(Error::DeltaMismatch("slot word wider than the slot".into()));
                    }
                    stripes.add(c.stripe((*slot / SLOTS as u64) as usize));
                }
                Op::L2Put { value, .. } => {
                    check_value(*value, c.p.vbits).map_err(|e| Error::DeltaMismatch(e.to_string()))?;
                    l2 = true;
                }
                Op::L2Del { .. } => l2 = true,
            }
        }
        let st = stripes.finish();
        c.lock.write_begin(st);
        if l2 {
            c.l2lock.write_begin(&[0]);
        }
        for op in ops {
            match op {
                Op::L1 { slot, word } => c.l1.set(*slot as usize, *word),
                Op::L2Put { key, value } => {
                    let h = c.p.locate(key).h;
                    let t = c.l2.load();
                    if !t.put(key, h, *value) {
                        let mut es = t.entries();
                        es.retain(|(k, _)| k != key);
                        es.push((key.clone(), *value));
                        let fresh = L2::build(es.iter().map(|(k, v)| (k.as_slice(), c.p.locate(k).h, *v)));
                        c.l2.store(std::sync::Arc::new(fresh));
                    }
                }
                Op::L2Del { key } => {
                    let h = c.p.locate(key).h;
                    c.l2.load().del(key, h);
                }
            }
        }
        if l2 {
            c.l2lock.write_end(&[0]);
        }
        c.lock.write_end(st);
        Ok(())
    }

    fn memory_bytes(c: &Inner) -> usize {
        c.l1.memory_bytes() + c.l2.load().memory_bytes() + c.lock.memory_bytes() + c.l2lock.memory_bytes()
    }
    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }
    crate::engine::inner_lookups!(get, get_batch);
}

impl Inner {
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Option<u64> {
        let c = self;
        let l = c.p.locate(key);
        c.read(key, &l)
    }

    pub(crate) fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        let c = self;
        let mut loc = [Loc { h: 0, b1: 0, b2: 0, fp: 0 }; BATCH];
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for (k, l) in ks.iter().zip(loc.iter_mut()) {
                *l = c.p.locate(k);
                prefetch(c.l1.word_ptr(l.b1 * SLOTS));
                prefetch(c.l1.word_ptr(l.b2 * SLOTS));
            }
            for ((k, l), o) in ks.iter().zip(loc.iter()).zip(os.iter_mut()) {
                *o = c.read(k, l);
            }
        }
    }
}
