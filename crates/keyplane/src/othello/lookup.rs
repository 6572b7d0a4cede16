//! The Othello data-plane form.

use super::Params;
use super::delta::{Body, Delta, Image};
use crate::LookupTable;
use crate::bits::PackedArray;
use crate::error::{Error, Result};
use crate::hash::{hi, lo, reduce};
use crate::mem::prefetch;
use crate::sync::{Published, StripeSet, StripedSeqLock};
use crate::wire::{Frame, Kind, Wire, Writer};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// At most this many seqlock stripes; smaller tables get one per 4096 slots
/// (at least 64), so the lock costs well under 0.1 bit per key.
const MAX_STRIPES: usize = 4096;
const BATCH: usize = 16;

#[derive(Debug)]
pub(crate) struct Inner {
    pub p: Params,
    pub a: PackedArray,
    pub b: PackedArray,
    pub seq: AtomicU64,
    lock: StripedSeqLock,
    smask: usize,
    /// `hash::short_flip(p.seed)`, for the 8-byte key path.
    flip8: u64,
    /// No fingerprint and no emptiness bit: the answer is `A ^ B` masked.
    plain: bool,
    /// `mask(p.vbits)`.
    vmask: u64,
}

impl Inner {
    pub fn new(img: Image, seq: u64) -> Self {
        let slots = img.p.ma as usize + img.p.mb as usize;
        let lock = StripedSeqLock::new((slots / 4096).clamp(64, MAX_STRIPES));
        let smask = lock.stripes() - 1;
        let flip8 = crate::hash::short_flip(img.p.seed);
        let (plain, vmask) = (img.p.fbits == 0 && !img.p.empt, crate::mask(img.p.vbits));
        Self { p: img.p, a: img.a, b: img.b, seq: AtomicU64::new(seq), lock, smask, flip8, plain, vmask }
    }

    #[inline(always)]
    fn stripe_a(&self, i: usize) -> usize {
        i & self.smask
    }
    #[inline(always)]
    fn stripe_b(&self, i: usize) -> usize {
        (i.wrapping_mul(0x9e37_79b9) >> 7) & self.smask
    }

    /// Crate-internal hook: prefetches both slots of a key.
    #[inline(always)]
    pub(crate) fn prefetch(&self, ia: usize, ib: usize) {
        prefetch(self.a.word_ptr(ia));
        prefetch(self.b.word_ptr(ib));
    }

    /// Crate-internal hook: the value bits of `A[ia] XOR B[ib]`, read
    /// consistently under this form's seqlock (no fingerprint check).
    #[inline(always)]
    pub(crate) fn raw(&self, ia: usize, ib: usize) -> u64 {
        let (x, y) = self.lock.read2(self.stripe_a(ia), self.stripe_b(ib), || (self.a.get(ia), self.b.get(ib)));
        (x ^ y) & crate::mask(self.p.vbits)
    }

    #[inline(always)]
    fn read(&self, h: u64, ia: usize, ib: usize) -> Option<u64> {
        let (x, y) = self.lock.read2(self.stripe_a(ia), self.stripe_b(ib), || (self.a.get(ia), self.b.get(ib)));
        self.p.answer(h, x, y)
    }

    /// A single lookup's read: both stripe versions, both slots, one
    /// validation, no loop. The retry loop ([`Self::read`]) is out of line,
    /// so the inlined path is straight-line code whose only branch (the
    /// validation) is predicted taken, and consecutive lookups overlap
    /// their cache misses.
    #[inline(always)]
    fn read_once(&self, h: u64, ia: usize, ib: usize) -> Option<u64> {
        let st = self.lock.view();
        let (sa, sb) = (self.stripe_a(ia), self.stripe_b(ib));
        let (va, vb) = (st.peek(sa), st.peek(sb));
        let (x, y) = (self.a.get(ia), self.b.get(ib));
        if !(st.still(sa, va) & st.still(sb, vb)) {
            return self.read_retry(h, ia, ib);
        }
        // Same answer as `p.answer` (no fingerprint or emptiness bit to check).
        if self.plain { Some((x ^ y) & self.vmask) } else { self.p.answer(h, x, y) }
    }

    #[cold]
    #[inline(never)]
    fn read_retry(&self, h: u64, ia: usize, ib: usize) -> Option<u64> {
        self.read(h, ia, ib)
    }

    #[inline(always)]
    fn get(&self, key: &[u8]) -> Option<u64> {
        let (h, ia, ib) = self.p.locate(key);
        self.read_once(h, ia, ib)
    }

    /// `get(&u64_key(key))`: the same hash bit for bit
    /// ([`crate::hash::hash_u64`]), with the seed's constant precomputed.
    #[inline(always)]
    fn get_u64(&self, key: u64) -> Option<u64> {
        let h = crate::hash::hash_word_flipped(key.rotate_left(32), 8, self.flip8);
        let (ia, ib) = (reduce(lo(h), self.p.ma) as usize, reduce(hi(h), self.p.mb) as usize);
        self.read_once(h, ia, ib)
    }

    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        let mut loc = [(0u64, 0usize, 0usize); BATCH];
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for (k, l) in ks.iter().zip(loc.iter_mut()) {
                *l = self.p.locate(k);
                prefetch(self.a.word_ptr(l.1));
                prefetch(self.b.word_ptr(l.2));
            }
            for (l, o) in loc.iter().zip(os.iter_mut()).take(ks.len()) {
                *o = self.read(l.0, l.1, l.2);
            }
        }
    }
}

crate::sync::cached_reader!(Inner, u64);

/// Othello lookup form: two packed arrays, no keys. See the [module docs](super).
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
#[derive(Debug)]
pub struct Lookup {
    table: crate::lineage::Lineage,
    cur: Published<Inner>,
    /// The writer lock, holding the writer's reusable stripe scratch.
    writer: Mutex<StripeSet>,
}

impl Lookup {
    /// Table id and key format (see [`crate::lineage`]).
    pub(crate) fn lineage(&self) -> crate::lineage::Lineage {
        self.table
    }

    pub(crate) fn from_image(img: Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self { table, cur: Published::new(Inner::new(img, seq)), writer: Mutex::new(StripeSet::new()) }
    }

    /// The current arrays, for structures (lb) that embed a lookup form which
    /// they only ever replace as a whole, never patch in place.
    pub(crate) fn snapshot_arc(&self) -> std::sync::Arc<Inner> {
        self.cur.load_full()
    }

    /// Value bits.
    pub(crate) fn value_bits(&self) -> u32 {
        self.cur.load().p.vbits
    }
    /// Fingerprint bits.
    pub fn fingerprint_bits(&self) -> u32 {
        self.cur.load().p.fbits
    }
    /// True if the emptiness indicator is stored.
    pub fn has_emptiness(&self) -> bool {
        self.cur.load().p.empt
    }
    /// Array sizes `(m_a, m_b)`.
    pub fn sizes(&self) -> (u32, u32) {
        let c = self.cur.load();
        (c.p.ma, c.p.mb)
    }
    /// Current hash seed (part of the skeleton).
    pub fn seed(&self) -> u64 {
        self.cur.load().p.seed
    }
    /// Sequence number of the last delta applied (or of the export).
    pub(crate) fn seq(&self) -> u64 {
        self.cur.load().seq.load(Ordering::Acquire)
    }

    /// `A[ha(k)] XOR B[hb(k)]` without fingerprint or emptiness checks: the
    /// value bits of the raw Othello answer (arbitrary for alien keys).
    #[inline]
    pub fn get_unchecked(&self, key: &[u8]) -> u64 {
        let c = self.cur.load();
        let (_, ia, ib) = c.p.locate(key);
        let (x, y) = c.lock.read2(c.stripe_a(ia), c.stripe_b(ib), || (c.a.get(ia), c.b.get(ib)));
        (x ^ y) & crate::mask(c.p.vbits)
    }

    /// Crate-internal hook: an independent copy of this lookup form (same
    /// arrays and sequence number).
    pub(crate) fn duplicate(&self) -> Lookup {
        let c = self.cur.load();
        Lookup::from_image(Image { p: c.p, a: c.a.clone(), b: c.b.clone() }, self.table, c.seq.load(Ordering::Acquire))
    }

    fn apply_slots(
        c: &Inner,
        stripes: &mut StripeSet,
        seed: u64,
        xor: u64,
        xors: &[u64],
        sets: &[(u64, u64)],
    ) -> Result<()> {
        if seed != c.p.seed {
            return Err(Error::DeltaMismatch(format!(
                "delta is for skeleton seed {seed:#x}, table has {:#x}",
                c.p.seed
            )));
        }
        let wmask = crate::mask(c.p.width());
        if xor & !c.p.xmask() != 0 {
            return Err(Error::DeltaMismatch("xor value wider than the slot's value and fingerprint".into()));
        }
        let check = |s: u64| -> Result<(bool, usize)> {
            let side_b = s & 1 == 1;
            let i = s >> 1;
            let m = if side_b { c.p.mb } else { c.p.ma } as u64;
            if i >= m {
                return Err(Error::DeltaMismatch(format!("slot {i} outside array of {m}")));
            }
            Ok((side_b, i as usize))
        };
        stripes.clear();
        for &s in xors.iter().chain(sets.iter().map(|(s, _)| s)) {
            let (side_b, i) = check(s)?;
            stripes.add(if side_b { c.stripe_b(i) } else { c.stripe_a(i) });
        }
        for &(_, v) in sets {
            if v & !wmask != 0 {
                return Err(Error::DeltaMismatch("slot value wider than the slot".into()));
            }
        }
        let st = stripes.finish();
        c.lock.write_begin(st);
        for &s in xors {
            let (side_b, i) = ((s & 1) == 1, (s >> 1) as usize);
            if side_b { c.b.xor(i, xor) } else { c.a.xor(i, xor) }
        }
        for &(s, v) in sets {
            let (side_b, i) = ((s & 1) == 1, (s >> 1) as usize);
            if side_b { c.b.set(i, v) } else { c.a.set(i, v) }
        }
        c.lock.write_end(st);
        Ok(())
    }
}

impl LookupTable for Lookup {
    type Delta = Delta;

    crate::sync::snapshot_reads!(u64);

    fn apply(&self, delta: &Delta) -> Result<()> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.cur.load();
        let have = c.seq.load(Ordering::Relaxed);
        crate::lineage::check_next(self.table, have, delta.table, delta.seq)?;
        match &delta.body {
            Body::Slots { seed, xor, xors, sets } => {
                Self::apply_slots(&c, &mut w, *seed, *xor, xors, sets)?;
                c.seq.store(delta.seq, Ordering::Release);
            }
            Body::Replace(img) => {
                if img.p.vbits != c.p.vbits || img.p.fbits != c.p.fbits || img.p.empt != c.p.empt {
                    return Err(Error::DeltaMismatch("rebuild delta has a different slot layout".into()));
                }
                self.cur.replace(Inner::new((**img).clone(), delta.seq));
            }
        }
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        let c = self.cur.load();
        std::mem::size_of::<Self>()
            + std::mem::size_of::<Inner>()
            + c.a.memory_bytes()
            + c.b.memory_bytes()
            + c.lock.memory_bytes()
    }
}

impl Wire for Lookup {
    const KIND: Kind = super::LOOKUP_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let c = self.cur.load();
        let mut w = Writer::with_capacity(super::LOOKUP_KIND, c.a.memory_bytes() + c.b.memory_bytes() + 64);
        crate::lineage::write_prologue(&mut w, self.table, c.seq.load(Ordering::Acquire));
        Image { p: c.p, a: c.a.clone(), b: c.b.clone() }.encode(&mut w);
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, super::LOOKUP_KIND)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let img = Image::decode(&mut r)?;
        r.finish()?;
        Ok(Self::from_image(img, table, seq))
    }
}
