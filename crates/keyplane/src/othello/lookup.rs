//! The Othello data-plane form.

use super::Params;
use super::delta::{Delta, Image, Slots};
use crate::bits::PackedArray;
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result};
use crate::hash::{hi, lo, reduce};
use crate::lineage::Lineage;
use crate::mem::prefetch;
use crate::sync::{Published, StripedSeqLock};
use crate::wire::Kind;
use std::sync::Arc;

/// At most this many seqlock stripes; smaller tables get one per 4096 slots
/// (at least 64), so the lock costs well under 0.1 bit per key.
const MAX_STRIPES: usize = 4096;
const BATCH: usize = 16;
/// Slot patches touching at most this many slots sort their stripes on the
/// stack (no allocation per update).
const STACK_STRIPES: usize = 64;

#[derive(Debug)]
pub(crate) struct Inner {
    pub p: Params,
    pub a: PackedArray,
    pub b: PackedArray,
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
    pub fn new(img: Image) -> Self {
        let slots = img.p.ma as usize + img.p.mb as usize;
        let lock = StripedSeqLock::new((slots / 4096).clamp(64, MAX_STRIPES));
        let smask = lock.stripes() - 1;
        let flip8 = crate::hash::short_flip(img.p.seed);
        let (plain, vmask) = (img.p.fbits == 0 && !img.p.empt, crate::mask(img.p.vbits));
        Self { p: img.p, a: img.a, b: img.b, lock, smask, flip8, plain, vmask }
    }

    /// A copy of the arrays and parameters.
    pub fn image(&self) -> Image {
        Image { p: self.p, a: self.a.clone(), b: self.b.clone() }
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

    /// Applies a slot patch in place under the seqlock stripes it touches,
    /// after checking every slot and value (a bad patch changes nothing).
    fn apply_slots(&self, d: &Slots) -> Result<()> {
        let Slots { seed, xor, xors, sets } = d;
        if *seed != self.p.seed {
            return Err(Error::DeltaMismatch(format!(
                "delta is for skeleton seed {seed:#x}, table has {:#x}",
                self.p.seed
            )));
        }
        let wmask = crate::mask(self.p.width());
        if xor & !self.p.xmask() != 0 {
            return Err(Error::DeltaMismatch("xor value wider than the slot's value and fingerprint".into()));
        }
        for &(_, v) in sets {
            if v & !wmask != 0 {
                return Err(Error::DeltaMismatch("slot value wider than the slot".into()));
            }
        }
        // Every slot's stripe, sorted and deduplicated (on the stack for
        // the usual few-slot patch).
        let n = xors.len() + sets.len();
        let (mut small, mut big) = ([0usize; STACK_STRIPES], Vec::new());
        let stripes: &mut [usize] = if n <= STACK_STRIPES {
            &mut small[..n]
        } else {
            big.resize(n, 0);
            &mut big
        };
        for (&s, st) in xors.iter().chain(sets.iter().map(|(s, _)| s)).zip(stripes.iter_mut()) {
            let (side_b, i) = (s & 1 == 1, s >> 1);
            let m = if side_b { self.p.mb } else { self.p.ma } as u64;
            if i >= m {
                return Err(Error::DeltaMismatch(format!("slot {i} outside array of {m}")));
            }
            *st = if side_b { self.stripe_b(i as usize) } else { self.stripe_a(i as usize) };
        }
        stripes.sort_unstable();
        let mut k = 0;
        for j in 0..stripes.len() {
            if k == 0 || stripes[j] != stripes[k - 1] {
                stripes[k] = stripes[j];
                k += 1;
            }
        }
        let st = &stripes[..k];
        self.lock.write_begin(st);
        for &s in xors {
            let (side_b, i) = ((s & 1) == 1, (s >> 1) as usize);
            if side_b { self.b.xor(i, *xor) } else { self.a.xor(i, *xor) }
        }
        for &(s, v) in sets {
            let (side_b, i) = ((s & 1) == 1, (s >> 1) as usize);
            if side_b { self.b.set(i, v) } else { self.a.set(i, v) }
        }
        self.lock.write_end(st);
        Ok(())
    }
}

/// Othello on the engine ([`crate::engine`]): slot patches in place under
/// the striped seqlock, rebuilds published whole.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Othello;

impl Scheme for Othello {
    type Inner = Inner;
    type Image = Image;
    type Patch = Slots;

    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    const REPLACE_TAG: u8 = 2;

    fn build(img: Image) -> Result<Inner> {
        Ok(Inner::new(img))
    }
    fn image(c: &Inner) -> Image {
        c.image()
    }
    fn payload_hint(c: &Inner) -> usize {
        c.a.memory_bytes() + c.b.memory_bytes() + 64
    }
    fn check_replace(c: &Inner, img: &Image) -> Result<()> {
        if img.p.vbits != c.p.vbits || img.p.fbits != c.p.fbits || img.p.empt != c.p.empt {
            return Err(Error::DeltaMismatch("rebuild delta has a different slot layout".into()));
        }
        Ok(())
    }
    fn apply_patch(_: &Published<Inner>, c: Arc<Inner>, patch: &Slots) -> Result<()> {
        c.apply_slots(patch)
    }
    fn memory_bytes(c: &Inner) -> usize {
        c.a.memory_bytes() + c.b.memory_bytes() + c.lock.memory_bytes()
    }
    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }
    crate::engine::inner_lookups!(get, get_batch, get_u64);
}

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
    raw: RawLookup<Othello>,
}

/// A per-thread read handle ([`crate::LookupTable::reader`]): the same
/// answers as the lookup form's `get` / `get_batch` / `get_u64`, without the
/// per-call snapshot pinning. Applied deltas and whole-table replacements
/// are visible to it.
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Othello>);

crate::engine::lookup_form!(Othello);

impl Lookup {
    pub(crate) fn from_image(img: Image, table: Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(Inner::new(img), table, seq))
    }

    /// The current arrays, for structures (lb, ludo, lpm) that read an
    /// embedded lookup form's arrays directly.
    pub(crate) fn snapshot_arc(&self) -> Arc<Inner> {
        self.raw.load_full()
    }

    /// Fingerprint bits.
    pub fn fingerprint_bits(&self) -> u32 {
        self.raw.load().p.fbits
    }
    /// True if the emptiness indicator is stored.
    pub fn has_emptiness(&self) -> bool {
        self.raw.load().p.empt
    }
    /// Array sizes `(m_a, m_b)`.
    pub fn sizes(&self) -> (u32, u32) {
        let c = self.raw.load();
        (c.p.ma, c.p.mb)
    }
    /// Current hash seed (part of the skeleton).
    pub fn seed(&self) -> u64 {
        self.raw.load().p.seed
    }

    /// `A[ha(k)] XOR B[hb(k)]` without fingerprint or emptiness checks: the
    /// value bits of the raw Othello answer (arbitrary for alien keys).
    #[inline]
    pub fn get_unchecked(&self, key: &[u8]) -> u64 {
        let c = self.raw.load();
        let (_, ia, ib) = c.p.locate(key);
        c.raw(ia, ib)
    }

    /// Crate-internal hook: an independent copy of this lookup form (same
    /// arrays and sequence number).
    pub(crate) fn duplicate(&self) -> Lookup {
        Lookup::from_image(self.raw.load().image(), self.lineage(), self.seq())
    }
}
