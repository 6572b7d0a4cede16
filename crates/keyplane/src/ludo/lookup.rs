//! The Ludo lookup structure (thesis §4.4.3, Algorithms 1, 3 and 4).

use super::delta::{Body, Delta, Image, TAG_REPLACE, encode_image};
use super::locator::locate;
use super::table::Table;
use super::{OVERFLOW_SEED, Params, slot_of};
use crate::LookupTable;
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result};
use crate::othello;
use crate::sync::{Published, StripeSet, StripedSeqLock};
use crate::wire::{Kind, Wire, Writer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Version stripes (§4.4.8 "Consistency under concurrent read/write"): one
/// per 1024 buckets, between 64 and 2048 (16 KiB, 0.008 bits/key at 16M keys;
/// with one writer, more stripes only make a reader's retry rarer still).
const MAX_STRIPES: usize = 2048;

type Fallback = hashbrown::HashMap<Box<[u8]>, u64>;

/// A key's hash with its locator slots and candidate buckets.
#[derive(Debug, Clone, Copy, Default)]
struct Probe {
    h: u64,
    ia: usize,
    ib: usize,
    b0: u32,
    b1: u32,
}

/// One complete lookup form. Lookups load one snapshot of it (one
/// `Published` load, or none through a [`Reader`]) and read everything
/// through it: the bucket locator's arrays are reached through a plain `Arc`
/// taken when the snapshot was built, never through the locator's own
/// publisher. In-place deltas (slot writes, path nodes, locator recolourings)
/// change it under its seqlocks; anything that replaces a part (a locator
/// rebuild, growth, re-seed) builds a new snapshot and publishes it, so a
/// snapshot's locator and buckets always belong together.
#[derive(Debug)]
pub(crate) struct Inner {
    p: Params,
    t: Table,
    /// Writer side of the bucket locator (applies in-place Othello deltas).
    oth: othello::Lookup,
    /// Reader side: the same arrays as `oth`, which is never replaced.
    loc: std::sync::Arc<othello::LookupInner>,
    /// Fallback table; loaded (a second snapshot) only while `fb_on`.
    fb: Published<Fallback>,
    fb_on: AtomicBool,
    lock: StripedSeqLock,
    smask: usize,
    /// One version counter for the overflow table (its linear-probing
    /// deletions move entries of other buckets; it is read by ~4% of lookups).
    ovlock: StripedSeqLock,
}

impl Inner {
    fn new(img: Image) -> Self {
        let lock = StripedSeqLock::new((img.table.p.nb as usize / 1024).clamp(64, MAX_STRIPES));
        let smask = lock.stripes() - 1;
        let fb: Fallback = img.fallback.into_iter().map(|(k, v)| (k.into_boxed_slice(), v)).collect();
        Self {
            p: img.table.p,
            t: img.table,
            loc: img.oth.snapshot_arc(),
            oth: img.oth,
            fb_on: AtomicBool::new(!fb.is_empty()),
            fb: Published::new(fb),
            lock,
            smask,
            ovlock: StripedSeqLock::new(1),
        }
    }

    #[inline(always)]
    fn stripe(&self, b: u32) -> usize {
        b as usize & self.smask
    }

    /// Algorithm 4: optimistic read of the key's slot under the versions of
    /// both alternate buckets (the locator read itself is consistent under
    /// the locator's own seqlock).
    #[inline(always)]
    fn read(&self, q: &Probe) -> Option<u64> {
        let (h, b0, b1) = (q.h, q.b0, q.b1);
        let (s0, s1) = (self.stripe(b0), self.stripe(b1));
        loop {
            let v0 = self.lock.read_begin(s0);
            let v1 = self.lock.read_begin(s1);
            let b = if self.loc.raw(q.ia, q.ib) & 1 == 0 { b0 } else { b1 };
            // Buckets of at most 64 bits (l + f ≤ 14) are read with one
            // two-word load: seed and slots come out of the same bits.
            let whole = self.t.small_bucket(b);
            let mut seed = match whole {
                Some(x) => (x & crate::mask(super::SEED_BITS)) as u32,
                None => self.t.inline_seed(b),
            };
            let mut ok = true;
            if seed == OVERFLOW_SEED {
                seed = loop {
                    let v = self.ovlock.read_begin(0);
                    let s = self.t.ov_seed(b);
                    if self.ovlock.read_validate(0, v) {
                        break s.unwrap_or_else(|| {
                            ok = false;
                            0
                        });
                    }
                };
            }
            let t = slot_of(h, seed);
            let x = match whole {
                Some(x) => {
                    let sw = self.p.sw();
                    (x >> (super::SEED_BITS + t as u32 * sw)) & crate::mask(sw)
                }
                None => self.t.slot(b, t),
            };
            if self.lock.read_validate(s0, v0) && self.lock.read_validate(s1, v1) {
                return if ok { self.p.answer(h, x) } else { None };
            }
        }
    }

    #[inline(always)]
    fn fallback(&self, key: &[u8], h: u64) -> Option<Option<u64>> {
        if self.fb_on.load(Ordering::Acquire) {
            if let Some(&v) = self.fb.load().get(key) {
                return Some(self.p.answer(h, v));
            }
        }
        None
    }

    #[inline(always)]
    fn get(&self, key: &[u8]) -> Option<u64> {
        let h = self.p.hash(key);
        if let Some(r) = self.fallback(key, h) {
            return r;
        }
        let q = self.probe(h);
        self.prefetch(&q);
        self.read(&q)
    }

    /// Prefetches everything a lookup of hash `h` may read: both locator
    /// slots and **both** candidate buckets, so the bucket miss overlaps the
    /// locator miss instead of following it (one memory round trip per key
    /// instead of two dependent ones).
    #[inline(always)]
    fn probe(&self, h: u64) -> Probe {
        let (ia, ib) = locate(&self.loc.p, h);
        let (b0, b1) = self.p.buckets(h);
        Probe { h, ia, ib, b0, b1 }
    }

    #[inline(always)]
    fn prefetch(&self, q: &Probe) {
        self.loc.prefetch(q.ia, q.ib);
        self.t.prefetch_bucket(q.b0);
        self.t.prefetch_bucket(q.b1);
    }

    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        if self.fb_on.load(Ordering::Acquire) {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.get(k);
            }
            return;
        }
        // Software pipeline: key i is hashed and its locator slots and both
        // candidate buckets are prefetched while key i − AHEAD is read
        // (Algorithm 4). For the usual 16-key batch that is "prefetch all,
        // then read all"; measured at 16M keys, a distance of 16 beat 8.
        const AHEAD: usize = 16;
        let n = keys.len().min(out.len());
        let mut qs = [Probe::default(); AHEAD];
        for i in 0..n + AHEAD {
            if i >= AHEAD {
                out[i - AHEAD] = self.read(&qs[i % AHEAD]);
            }
            if i < n {
                let q = self.probe(self.p.hash(keys[i]));
                self.prefetch(&q);
                qs[i % AHEAD] = q;
            }
        }
    }

    /// A snapshot with the same buckets (copied) and fallback, a new bucket
    /// locator (a locator rebuild inside a path node).
    fn with_locator(&self, img: othello::Image, oseq: u64) -> Self {
        let mut fb: Vec<(Vec<u8>, u64)> = self.fb.load().iter().map(|(k, v)| (k.to_vec(), *v)).collect();
        fb.sort_unstable();
        let oth = othello::Lookup::from_image(img, self.oth.lineage(), oseq);
        Inner::new(Image { table: self.t.clone(), oth, fallback: fb })
    }

    /// Heap bytes of the fallback table.
    fn fallback_bytes(&self) -> usize {
        let fb = self.fb.load();
        fb.capacity() * (std::mem::size_of::<(Box<[u8]>, u64)>() + 1) + fb.keys().map(|k| k.len()).sum::<usize>()
    }

    /// The fallback table as an image holds it (sorted by key).
    fn fallback_image(&self) -> Vec<(Vec<u8>, u64)> {
        let mut fb: Vec<(Vec<u8>, u64)> = self.fb.load().iter().map(|(k, v)| (k.to_vec(), *v)).collect();
        fb.sort_unstable();
        fb
    }
}

/// Ludo lookup form: bucket locator (1-bit Othello), bucket array, overflow
/// and fallback tables; no keys. See the [module docs](super).
///
/// `get` / `get_batch` through `&self` pin one snapshot of the whole form per
/// call (one arc-swap load, a locked instruction; a second one only while the
/// fallback table is non-empty). A per-thread [`Reader`]
/// ([`LookupTable::reader`]) caches the snapshot and checks a generation
/// counter with one plain load instead.
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<Ludo>,
}

crate::engine::lookup_form!(Ludo);

/// A per-thread read handle ([`crate::LookupTable::reader`]): the same
/// answers as [`Lookup`]'s `get` / `get_batch` without the per-call snapshot
/// pinning (see `Cached`). Applied deltas and whole-table replacements are
/// visible to it.
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Ludo>);

impl Lookup {
    pub(crate) fn from_image(img: Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(Inner::new(img), table, seq))
    }

    /// Fingerprint bits per slot.
    pub fn fingerprint_bits(&self) -> u32 {
        self.raw.load().p.fbits
    }
    /// Number of buckets.
    pub fn buckets(&self) -> u32 {
        self.raw.load().p.nb
    }
    /// Hash seed (part of the skeleton).
    pub fn seed(&self) -> u64 {
        self.raw.load().p.seed
    }
    /// Keys in the fallback table.
    pub fn fallback_len(&self) -> usize {
        self.raw.load().fb.load().len()
    }
    /// Buckets whose seed lives in the overflow table.
    pub fn overflow_len(&self) -> usize {
        let c = self.raw.load();
        (0..c.p.nb).filter(|&b| c.t.inline_seed(b) == OVERFLOW_SEED).count()
    }

    /// Heap bytes per component: `(name, bytes)` for the bucket locator,
    /// bucket array, overflow table, fallback table, seqlocks and fixed
    /// headers; they sum to [`LookupTable::memory_bytes`].
    pub fn memory_breakdown(&self) -> Vec<(&'static str, usize)> {
        let c = self.raw.load();
        let (buckets, ov) = c.t.memory_parts();
        vec![
            ("locator", c.oth.memory_bytes()),
            ("buckets", buckets),
            ("overflow", ov),
            ("fallback", c.fallback_bytes()),
            ("lock", c.lock.memory_bytes() + c.ovlock.memory_bytes()),
            ("headers", std::mem::size_of::<Self>() + std::mem::size_of::<Inner>()),
        ]
    }
}

/// The Ludo scheme (see [`crate::engine`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ludo;

impl Scheme for Ludo {
    type Inner = Inner;
    type Image = Image;
    type Patch = Body;
    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    const REPLACE_TAG: u8 = TAG_REPLACE;

    fn build(img: Image) -> Result<Inner> {
        Ok(Inner::new(img))
    }
    fn image(c: &Inner) -> Image {
        Image { table: c.t.clone(), oth: c.oth.duplicate(), fallback: c.fallback_image() }
    }
    fn encode_inner(c: &Inner, w: &mut Writer) {
        encode_image(w, &c.t, &c.oth.to_bytes(), &c.fallback_image());
    }
    fn payload_hint(c: &Inner) -> usize {
        c.t.memory_bytes() + c.oth.memory_bytes() + 64
    }
    fn check_replace(c: &Inner, img: &Image) -> Result<()> {
        let p = img.p();
        if p.vbits != c.p.vbits || p.fbits != c.p.fbits {
            return Err(Error::DeltaMismatch("rebuild delta has a different slot layout".into()));
        }
        Ok(())
    }
    fn apply_patch(cur: &Published<Inner>, c: Arc<Inner>, body: &Body) -> Result<()> {
        let wmask = crate::mask(c.p.sw());
        match body {
            Body::Nop => {}
            Body::Set { bucket, slot, content } => {
                if *bucket >= c.p.nb || *slot > 3 || content & !wmask != 0 {
                    return Err(Error::DeltaMismatch("value change outside the table or wider than a slot".into()));
                }
                let s = [c.stripe(*bucket)];
                c.lock.write_begin(&s);
                c.t.write_slot(*bucket, *slot as usize, *content);
                c.lock.write_end(&s);
            }
            Body::Remove { oth } => {
                if oth.is_rebuild() {
                    return Err(Error::DeltaMismatch("a delete never rebuilds the bucket locator".into()));
                }
                c.oth.apply(oth)?
            }
            Body::Path { content, nodes } => Inner::apply_path(cur, c, *content, nodes)?,
            Body::Fallback { key, content } => {
                if content.is_some_and(|v| v & !wmask != 0) {
                    return Err(Error::DeltaMismatch("fallback value wider than a slot".into()));
                }
                let mut m: Fallback = (**c.fb.load()).clone();
                match content {
                    Some(v) => {
                        m.insert(key.clone().into_boxed_slice(), *v);
                    }
                    None => {
                        m.remove(key.as_slice());
                    }
                }
                let on = !m.is_empty();
                c.fb.replace(m);
                c.fb_on.store(on, Ordering::Release);
            }
        }
        Ok(())
    }
    fn memory_bytes(c: &Inner) -> usize {
        c.t.memory_bytes() + c.oth.memory_bytes() + c.lock.memory_bytes() + c.ovlock.memory_bytes() + c.fallback_bytes()
    }
    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }
    crate::engine::inner_lookups!(get, get_batch);
}

impl Inner {
    /// Applies an insert's update sequence (§4.4.8), node by node in
    /// reverse path order, each inside one seqlock window over the stripes of
    /// its bucket and of the bucket its incoming value comes from. A locator
    /// rebuild inside a node publishes a new snapshot (copied buckets + new
    /// locator); later nodes go to it.
    fn apply_path(cur: &Published<Inner>, mut c: Arc<Inner>, content: u64, nodes: &[super::delta::Node]) -> Result<()> {
        let nb = c.p.nb;
        let wmask = crate::mask(c.p.sw());
        if content & !wmask != 0 {
            return Err(Error::DeltaMismatch("inserted value wider than a slot".into()));
        }
        let mut oseq = c.oth.seq();
        for n in nodes {
            if n.bucket >= nb || n.from.is_some_and(|(b, _)| b >= nb) {
                return Err(Error::DeltaMismatch(format!("bucket index outside the table of {nb}")));
            }
            if let Some(d) = &n.oth {
                crate::lineage::check_seq(oseq, d.seq())
                    .map_err(|e| Error::DeltaMismatch(format!("bucket-locator delta: {e}")))?;
                oseq = d.seq();
                if let othello::Body::Replace(img) = d.body() {
                    if img.p.vbits != 1 || img.p.fbits != 0 || img.p.empt {
                        return Err(Error::DeltaMismatch("bucket-locator rebuild with a different slot layout".into()));
                    }
                }
            }
        }
        let mut st = StripeSet::new();
        for n in nodes {
            let new = c.t.node_slots(n.bucket, &n.order, n.from, content);
            st.clear();
            st.add(c.stripe(n.bucket));
            if let Some((fb, _)) = n.from {
                st.add(c.stripe(fb));
            }
            let stripes = st.finish();
            c.lock.write_begin(stripes);
            let r = (|| {
                if n.seed >= OVERFLOW_SEED {
                    c.ovlock.write_begin(&[0]);
                    let ok = c.t.ov_set_shared(n.bucket, n.seed).is_some();
                    c.ovlock.write_end(&[0]);
                    if !ok {
                        return Err(Error::DeltaMismatch("overflow table full".into()));
                    }
                    c.t.write_inline_seed(n.bucket, OVERFLOW_SEED);
                } else {
                    let was = c.t.inline_seed(n.bucket);
                    c.t.write_inline_seed(n.bucket, n.seed);
                    if was == OVERFLOW_SEED {
                        c.ovlock.write_begin(&[0]);
                        c.t.ov_remove_shared(n.bucket);
                        c.ovlock.write_end(&[0]);
                    }
                }
                c.t.write_slots(n.bucket, &new);
                match n.oth.as_ref().map(|d| (d, d.body())) {
                    // Readers of this snapshot keep its old locator and the
                    // buckets as they are now; the new snapshot takes both over.
                    Some((d, othello::Body::Replace(img))) => Ok(Some(c.with_locator((**img).clone(), d.seq()))),
                    Some((d, _)) => c.oth.apply(d).map(|_| None),
                    None => Ok(None),
                }
            })();
            c.lock.write_end(stripes);
            if let Some(next) = r? {
                cur.replace(next);
                c = cur.load_full();
            }
        }
        Ok(())
    }
}
