//! The Othello data-plane form.

use super::delta::{Delta, Image, Slots};
use super::{KeyHash, Params};
use crate::bits::PackedArray;
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result};
use crate::hash::{hi, lo};
use crate::lineage::Lineage;
use crate::mem::prefetch;
use crate::sync::{CachedView, PerThreadView, Published, StripedSeqLock};
use crate::wire::Kind;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};

mod apply;
mod batch;

/// One seqlock version counter for the whole snapshot. A single lookup
/// then peeks and validates one counter (not one per array), which is what
/// keeps the reader's hot path short; a writer holds it only while it
/// writes a patch's few slots. (Striping bought no fewer coherence misses:
/// readers touch every stripe's line at random, so each write invalidated a
/// line that readers soon missed on anyway.)
///
/// **Retirement.** When a whole-table replacement replaces a snapshot, the
/// engine retires the old snapshot's counter first ([`Scheme::retire`]:
/// [`crate::sync::RETIRED`], odd for ever) and then publishes the new one.
/// So a snapshot is, at any time, either the current one or retired, and a
/// validation against its counter succeeds only for a read that began (its
/// first counter load) while the snapshot was current and that no writer
/// touched: the per-thread readers ([`FlatReader`], [`LocalViews`]) keep a
/// view of their snapshot across calls and check no generation per call —
/// a failed validation ([`Defer`]) sends them, after the lookup, to a
/// second lookup out of line (`get_again`), which moves them to the current
/// snapshot and looks the key up again there. Lookups
/// that load their snapshot for the call (the [`InPlace`] retry under the
/// lock) read a snapshot retired meanwhile as it was when retired: its
/// last state, current during the call.
const STRIPES: usize = 1;

#[derive(Debug)]
pub(crate) struct Inner {
    pub p: Params,
    pub a: PackedArray,
    pub b: PackedArray,
    lock: StripedSeqLock,
    smask: usize,
    /// `hash::short_flip(p.seed)`, for the 8-byte key path of an XXH3 table.
    flip8: u64,
    /// No fingerprint and no emptiness bit: the answer is `A ^ B` masked.
    plain: bool,
    /// `mask(p.vbits)`.
    vmask: u64,
}

impl Inner {
    pub fn new(img: Image) -> Self {
        let lock = StripedSeqLock::new(STRIPES);
        let smask = lock.stripes() - 1;
        let flip8 = crate::hash::short_flip(img.p.seed);
        let (plain, vmask) = (img.p.fbits == 0 && !img.p.empt, crate::mask(img.p.vbits));
        // The unchecked reads of `View` rely on these (every image is made
        // so: `Image::decode` checks the word counts against `p`, and
        // `Params::validate` keeps both sizes at least 1).
        assert!(
            img.a.len() == img.p.ma as usize
                && img.b.len() == img.p.mb as usize
                && img.p.ma >= 1
                && img.p.mb >= 1
                && img.a.bits() == img.p.width()
                && img.b.bits() == img.p.width(),
            "othello image arrays do not match their parameters"
        );
        Self { p: img.p, a: img.a, b: img.b, lock, smask, flip8, plain, vmask }
    }

    /// A copy of the arrays and parameters.
    pub fn image(&self) -> Image {
        Image { p: self.p, a: self.a.clone(), b: self.b.clone() }
    }

    /// The seqlock stripe of slot `i` of either array.
    #[inline(always)]
    fn stripe(&self, i: usize) -> usize {
        i & self.smask
    }

    /// The flat view of this snapshot (see [`View`]).
    #[inline(always)]
    fn view(&self) -> View {
        let bits = self.a.bits();
        let fast8 = self.plain && bits == 8 && self.p.hash == KeyHash::Mum8;
        // Acquire: the slot reads of every lookup through this view come
        // after it (program order), as after a seqlock's peek.
        let seen = self.lock.counters()[0].load(Ordering::Acquire) & !1;
        View {
            inner: self,
            a: self.a.words_ptr(),
            b: self.b.words_ptr(),
            seq: &self.lock.counters()[0],
            seen,
            seen8: if fast8 { seen } else { NO_TYPED_PATH },
            fma: if fast8 { self.p.ma as u64 } else { 0 },
            fmb: if fast8 { self.p.mb as u64 } else { 0 },
            flip8: self.flip8,
            mum: *self.p.mum(),
            mum8: self.p.hash == KeyHash::Mum8,
            vmask: self.vmask,
            emask: crate::mask(bits),
            ma: self.p.ma as u64,
            mb: self.p.mb as u64,
            bits,
            lg: if bits.is_power_of_two() { bits.trailing_zeros() } else { NOT_POW2 },
            plain: self.plain,
            plain_bits: if self.plain && matches!(bits, 8 | 16 | 32) { bits } else { 0 },
            plain8: self.plain && bits == 8,
            fast8,
        }
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
        let (x, y) = self.lock.read2(self.stripe(ia), self.stripe(ib), || (self.a.get(ia), self.b.get(ib)));
        (x ^ y) & crate::mask(self.p.vbits)
    }

    #[inline(always)]
    fn read(&self, h: u64, ia: usize, ib: usize) -> Option<u64> {
        let (x, y) = self.lock.read2(self.stripe(ia), self.stripe(ib), || (self.a.get(ia), self.b.get(ib)));
        self.p.answer(h, x, y)
    }

    #[cold]
    #[inline(never)]
    fn read_retry(&self, h: u64, ia: usize, ib: usize) -> Option<u64> {
        self.read(h, ia, ib)
    }

    /// [`Inner::raw`] out of line: a plain layout's retry (its answer is
    /// always the raw XOR, so the hot path's answer is always `Some`).
    #[cold]
    #[inline(never)]
    fn raw_retry(&self, ia: usize, ib: usize) -> u64 {
        self.raw(ia, ib)
    }

    #[inline(always)]
    fn get(&self, key: &[u8]) -> Option<u64> {
        self.view().get(key, InPlace)
    }

    /// `get(&u64_key(key))`: the same hash bit for bit
    /// ([`crate::hash::hash_u64`]), with the seed's constant precomputed.
    #[inline(always)]
    fn get_u64(&self, key: u64) -> Option<u64> {
        self.view().get_u64(key, InPlace)
    }

    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        self.view().get_batch(keys, out)
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
        // Every slot in range first (a bad patch changes nothing). The lock
        // has one stripe (`STRIPES`), so a patch that writes any slot takes
        // stripe 0, and no per-slot stripe list is sorted.
        const { assert!(STRIPES == 1) };
        for &s in xors.iter().chain(sets.iter().map(|(s, _)| s)) {
            let (side_b, i) = (s & 1 == 1, s >> 1);
            let m = if side_b { self.p.mb } else { self.p.ma } as u64;
            if i >= m {
                return Err(Error::DeltaMismatch(format!("slot {i} outside array of {m}")));
            }
        }
        let st: &[usize] = if xors.is_empty() && sets.is_empty() { &[] } else { &[0] };
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

/// `View::lg` of a slot width that is not a power of two.
const NOT_POW2: u32 = u32::MAX;

/// A flat copy of what a single lookup needs from one snapshot ([`Inner`]):
/// the arrays' and stripe counters' base addresses, the sizes and the
/// layout constants. A reader keeps it by value ([`FlatReader`]), so the
/// hot path loads no field through `Arc<Inner>` → `PackedArray` → `Box`,
/// and its reads are unchecked because every index is in range by
/// construction (`reduce(x, m) < m`, see [`View::slot`]).
///
/// Validity: a `View` is made only by [`Inner::view`] and used only while
/// that `Inner` is alive: either inside a borrow of it (`Inner::get`,
/// `Inner::get_u64`) or inside [`CachedView::with`] /
/// [`CachedView::with_held`] of a [`FlatReader`] (or the same calls on a
/// [`LocalViews`] slot), whose handle holds the `Arc<Inner>` the view was
/// made from (and no lookup calls `with`, `with_held` or `reload`
/// re-entrantly: a lookup's miss is handled after it returned, [`Defer`]).
/// The type and its fields are private to this module, so no other code can
/// make or keep one.
#[derive(Clone, Copy, Debug)]
struct View {
    inner: *const Inner,
    a: *const AtomicU64,
    b: *const AtomicU64,
    /// The snapshot's seqlock counter (the lock's only stripe).
    seq: *const AtomicU64,
    /// The counter's value when last loaded (acquire) through this view,
    /// with bit 0 cleared: a single lookup validates against it instead of
    /// peeking the counter first ([`View::read_validated`]). Set when the
    /// view is made (so for a view made per call, as `Inner::get` does, it
    /// is that call's peek) and, for a view a per-thread handle keeps, again
    /// after a lookup missed ([`View::resync`]).
    seen: u64,
    /// What [`View::get_u64_8`] validates against: `seen` for a
    /// [`View::fast8`] layout, else [`NO_TYPED_PATH`], a value the counter
    /// never holds, so that path always misses on other layouts and their
    /// lookups take the general path, out of line.
    seen8: u64,
    /// `ma` and `mb` for a `fast8` layout, else 0: [`View::get_u64_8`]'s
    /// slot indices, which are then 0 (byte 0 of each array, inside its
    /// words whatever the layout) and its answer discarded (see `seen8`).
    fma: u64,
    fmb: u64,
    flip8: u64,
    /// The `Mum8` hash's keys (`Params::mum`).
    mum: [u64; 4],
    /// The table hashes 8-byte keys with `Mum8` (else with XXH3).
    mum8: bool,
    vmask: u64,
    /// `mask(bits)`.
    emask: u64,
    /// `p.ma` and `p.mb`, widened (the range reduction multiplies by them
    /// straight from memory).
    ma: u64,
    mb: u64,
    /// Slot width (both arrays).
    bits: u32,
    /// `log2(bits)` if `bits` is a power of two (a slot never straddles
    /// two words: one word read, no branch), else [`NOT_POW2`].
    lg: u32,
    plain: bool,
    /// Which read [`View::read_once`] runs: 8, 16 or 32 for a plain slot
    /// (value bits only) of that width, which has its own code with the
    /// width a constant (one word read, constant shifts, no mask, no answer
    /// decoding); 0 for every other layout (the general read).
    plain_bits: u32,
    /// `plain_bits == 8`.
    plain8: bool,
    /// `plain8 && mum8`: the one layout whose typed lookup is a path of
    /// its own ([`View::get_u64`] tests only this), the rest going through
    /// [`View::locate_u64`] and [`View::read_once`].
    fast8: bool,
}

// SAFETY: a `View` points only into an `Inner` (its arrays and counters are
// atomics, `Inner` is `Send + Sync`) and is dereferenced only while that
// `Inner` is kept alive (see the type's docs), so moving one to another
// thread is no different from moving the `Arc<Inner>` that keeps it valid.
unsafe impl Send for View {}

impl View {
    /// Slot `i` of the array at `base` (the A or B array of this view's
    /// snapshot, whose size is `ma` or `mb`). `i` must be below that size:
    /// every caller passes `reduce(_, ma)` / `reduce(_, mb)`, which is.
    #[inline(always)]
    fn slot(&self, base: *const AtomicU64, i: usize) -> u64 {
        if self.lg != NOT_POW2 {
            let bit = i << self.lg;
            // SAFETY: `base` is the word array of a `PackedArray` of `len`
            // elements of `bits = 2^lg` bits (asserted in `Inner::new`),
            // alive while the view is used (type docs). It holds
            // `words_for(len, bits) = ceil(len·bits/64) + 1` words, and
            // `i < len` gives `bit >> 6 ≤ (len·bits − 1) / 64 <
            // words_for(len, bits)`. A slot of a power-of-two width never
            // straddles a word, so one word holds it all.
            let w = unsafe { (*base.add(bit >> 6)).load(Ordering::Relaxed) };
            (w >> (bit & 63)) & self.emask
        } else {
            let bit = i * self.bits as usize;
            let (w, off) = (bit >> 6, (bit & 63) as u32);
            // SAFETY: as above, `w ≤ (len·bits − 1) / 64`, and the padding
            // word of `words_for` makes `w + 1` in range too.
            let (w0, w1) =
                unsafe { ((*base.add(w)).load(Ordering::Relaxed), (*base.add(w + 1)).load(Ordering::Relaxed)) };
            // `(w1 << 1) << (63 − off)` is `w1 << (64 − off)`, and 0 for off = 0.
            ((w0 >> off) | ((w1 << 1) << (63 - off))) & self.emask
        }
    }

    /// The seqlock counter.
    #[inline(always)]
    fn counter(&self) -> &AtomicU64 {
        // SAFETY: the lock's first counter (it has `STRIPES` = 1, never
        // resized), alive while the view is used (type docs).
        unsafe { &*self.seq }
    }

    #[inline(always)]
    fn inner(&self) -> &Inner {
        // SAFETY: the view's snapshot is alive while it is used (type docs).
        unsafe { &*self.inner }
    }

    /// Slot `i` of a plain array of `2^LG`-bit slots (`LG` = `self.lg`,
    /// so the width is a constant): one word, constant shifts.
    #[inline(always)]
    fn slot_pow2<const LG: u32>(&self, base: *const AtomicU64, i: usize) -> u64 {
        debug_assert_eq!(self.lg, LG);
        // SAFETY: the caller checked that `bits = 2^LG` with `LG` in 3..=5
        // and passes `i` below the array's size (see `slot`); the array's
        // words are alive while the view is used (type docs).
        unsafe { load_slot::<LG>(base, i) }
    }

    /// One lookup of slots `ia < ma`, `ib < mb`: the seqlock version, both
    /// slots, one validation, no loop (the retry, after a writer was in the
    /// snapshot, is out of line), so consecutive lookups overlap their
    /// misses. (`Inner::stripe` is always 0: one stripe.)
    #[inline(always)]
    fn read_once(&self, h: u64, ia: usize, ib: usize, miss: impl Miss) -> Option<u64> {
        // 8-bit values (the data-plane case: ports, next hops) are tested
        // first, on a field of their own (LLVM would merge the compares of
        // one field into a switch and test the widths in its own order).
        if self.plain8 {
            return self.read_plain::<3>(ia, ib, miss);
        }
        let pb = self.plain_bits;
        if pb == 16 {
            self.read_plain::<4>(ia, ib, miss)
        } else if pb == 32 {
            self.read_plain::<5>(ia, ib, miss)
        } else {
            self.read_general(h, ia, ib, miss)
        }
    }

    /// `read_once` of a plain layout of `2^LG`-bit slots: the answer is
    /// `A ^ B` (no fingerprint, no emptiness bit, the value fills the slot).
    #[inline(always)]
    /// Always `Some` (the retry reads the raw XOR too), which the caller's
    /// code sees: no test of the answer's discriminant is left after
    /// inlining.
    fn read_plain<const LG: u32>(&self, ia: usize, ib: usize, miss: impl Miss) -> Option<u64> {
        Some(self.read_validated(
            |v| (v.slot_pow2::<LG>(v.a, ia), v.slot_pow2::<LG>(v.b, ib)),
            |_, x, y| x ^ y,
            |v| miss.plain(v, ia, ib),
        ))
    }

    #[inline(always)]
    fn read_general(&self, h: u64, ia: usize, ib: usize, miss: impl Miss) -> Option<u64> {
        self.read_validated(
            |v| (v.slot(v.a, ia), v.slot(v.b, ib)),
            |v, x, y| v.answer(h, x, y),
            |v| miss.general(v, h, ia, ib),
        )
    }

    /// The two slots `read` returns, validated against the seqlock counter
    /// and turned into the answer; a writer in the snapshot, or its
    /// retirement, sends the lookup to `retry` (the lookup's [`Miss`]).
    ///
    /// The version the reads are validated against is [`View::seen`], the
    /// counter as last loaded (with acquire) through this view — in this
    /// call or an earlier one of the same thread, before these reads in
    /// program order — with bit 0 cleared; the counter is not peeked again.
    /// This is the seqlock's test with an earlier peek: the counter only
    /// grows (until it is retired, to the odd `RETIRED`), so finding it
    /// equal to `seen` after the reads means it held that even value from
    /// the load that gave `seen` until now — no writer was in, the snapshot
    /// was not retired, and the reads (after that acquire load) saw the
    /// state that version published, the table's state at the final load,
    /// inside this call. An odd load gives a `seen` the counter has passed
    /// already, so every lookup misses until the view is resynchronised.
    #[inline(always)]
    fn read_validated<R>(
        &self,
        read: impl FnOnce(&Self) -> (u64, u64),
        answer: impl FnOnce(&Self, u64, u64) -> R,
        retry: impl FnOnce(&Self) -> R,
    ) -> R {
        let (x, y) = read(self);
        fence(Ordering::Acquire);
        if self.counter().load(Ordering::Relaxed) != self.seen {
            return retry(self);
        }
        answer(self, x, y)
    }

    /// After a miss on a view a per-thread handle keeps (its snapshot not
    /// retired): [`View::seen`] from the counter now (acquire), for the
    /// handle's next lookups.
    #[inline(always)]
    fn resync(&mut self) {
        self.seen = self.counter().load(Ordering::Acquire) & !1;
        if self.fast8 {
            self.seen8 = self.seen;
        }
    }

    /// The snapshot was retired (replaced): the handle must reload.
    #[inline(always)]
    fn retired(&self) -> bool {
        self.counter().load(Ordering::Relaxed) == crate::sync::RETIRED
    }

    #[inline(always)]
    fn get(&self, key: &[u8], miss: impl Miss) -> Option<u64> {
        // An 8-byte key takes the typed path: `Params::hash` of it is the
        // hash `locate_u64` gives its little-endian word (for XXH3 tables
        // `hash64(key, seed)` equals `hash_u64(from_le_bytes(key), seed)`
        // bit for bit, proptest
        // `hash::tests::fixed_width_hashes_are_xxh3_bit_for_bit`; for
        // `Mum8` tables it is `hash_u64_mum` by definition), and the view
        // has the seed's constants precomputed.
        if let Ok(k8) = <[u8; 8]>::try_from(key) {
            return self.get_u64(u64::from_le_bytes(k8), miss);
        }
        let (h, ia, ib) = self.inner().p.locate(key);
        self.read_once(h, ia, ib, miss)
    }

    /// Hash and slot indices of an 8-byte key (`Params::locate` of its
    /// little-endian bytes) under the table's key hash.
    #[inline(always)]
    fn locate_u64(&self, key: u64) -> (u64, usize, usize) {
        if self.mum8 { self.locate_mum(key) } else { self.locate_xxh3(key) }
    }

    /// `Params::locate` of an 8-byte key in an XXH3 table: `hash_u64` bit
    /// for bit (the seed's constant precomputed), `reduce(lo(h), ma)` and
    /// `reduce(hi(h), mb)`, below `ma` / `mb` because both halves of `h`
    /// are below 2^32.
    #[inline(always)]
    fn locate_xxh3(&self, key: u64) -> (u64, usize, usize) {
        let h = crate::hash::hash_word_flipped(key.rotate_left(32), 8, self.flip8);
        (h, ((lo(h) as u64 * self.ma) >> 32) as usize, ((hi(h) as u64 * self.mb) >> 32) as usize)
    }

    /// `Params::locate` of an 8-byte key in a `Mum8` table, with the keys
    /// and sizes from the view: `reduce(lo(h), ma)`, below `ma` because
    /// `lo(h) < 2^32`, and `reduce64(h, mb)`, below `mb` because `h < 2^64`.
    #[inline(always)]
    fn locate_mum(&self, key: u64) -> (u64, usize, usize) {
        let h = crate::hash::hash_u64_mum(key, &self.mum);
        (h, ((lo(h) as u64 * self.ma) >> 32) as usize, crate::hash::reduce64(h, self.mb) as usize)
    }

    /// `get_u64` of a plain 8-bit `Mum8` table: the two-multiply hash, the
    /// reductions, one byte load per slot, one seqlock validation.
    #[inline(always)]
    fn get_u64_fast8(&self, key: u64, miss: impl Miss) -> Option<u64> {
        let (_, ia, ib) = self.locate_mum(key);
        self.read_plain::<3>(ia, ib, miss)
    }

    /// [`Reader8`]'s lookup of an 8-byte key: the path of the plain 8-bit
    /// `Mum8` layout ([`View::fast8`]) with no test of the layout — the
    /// two-multiply hash, the reductions, one byte load per slot, one
    /// seqlock validation. Any other layout fails that validation by
    /// construction ([`View::seen8`], [`View::fma`]), as a replaced
    /// snapshot does, and the handle looks the key up again out of line
    /// ([`FlatReader::get_again`]). The answer is always `Some` here (a
    /// miss's is discarded), so the caller's code keeps no test of it.
    #[inline(always)]
    fn get_u64_8(&self, key: u64, missed: &Cell<bool>) -> Option<u64> {
        let h = crate::hash::hash_u64_mum(key, &self.mum);
        let ia = ((lo(h) as u64 * self.fma) >> 32) as usize;
        let ib = crate::hash::reduce64(h, self.fmb) as usize;
        // SAFETY: for a `fast8` view `ia < ma` and `ib < mb` (as in
        // `locate_mum`) index 8-bit slots of the live arrays; for any other
        // view `fma = fmb = 0` make both 0, byte 0 of an array's words,
        // which hold at least one (padding) word.
        let (x, y) = unsafe { (load_slot::<3>(self.a, ia), load_slot::<3>(self.b, ib)) };
        fence(Ordering::Acquire);
        if self.counter().load(Ordering::Relaxed) != self.seen8 {
            missed.set(true);
        }
        Some(x ^ y)
    }

    /// The answer of a general (not fixed-width plain) layout from the two
    /// slots: `A ^ B` masked for plain slots, else `p.answer` (fingerprint,
    /// emptiness bit).
    #[inline(always)]
    fn answer(&self, h: u64, x: u64, y: u64) -> Option<u64> {
        if self.plain { Some((x ^ y) & self.vmask) } else { self.inner().p.answer(h, x, y) }
    }

    #[inline(always)]
    fn get_u64(&self, key: u64, miss: impl Miss) -> Option<u64> {
        if self.fast8 {
            return self.get_u64_fast8(key, miss);
        }
        let (h, ia, ib) = self.locate_u64(key);
        self.read_once(h, ia, ib, miss)
    }
}

/// [`View::seen8`] of a view whose layout [`View::get_u64_8`] does not
/// read: a value the seqlock counter never holds. The counter counts up by
/// one per writer entry and exit from 0 (2^64 − 2 of them would take
/// centuries) and otherwise only becomes [`crate::sync::RETIRED`], one
/// above this. (It is also the `seen` a view gets from a retired counter,
/// which the counter has passed.)
const NO_TYPED_PATH: u64 = crate::sync::RETIRED & !1;

/// What a single lookup does when its seqlock validation fails (a writer
/// was or has been in the snapshot, or the snapshot was retired): the
/// answer of a plain layout (always the raw XOR, so the hot path's answer
/// stays `Some`) or of any layout. `v` is the view that failed, `(h, ia,
/// ib)` the key's hash and slots in its snapshot.
trait Miss {
    fn plain(self, v: &View, ia: usize, ib: usize) -> u64;
    fn general(self, v: &View, h: u64, ia: usize, ib: usize) -> Option<u64>;
}

/// The miss of a lookup that loaded its snapshot for this call (`Inner::get`,
/// `Inner::get_u64` under an arc-swap guard): read the same slots again
/// under the lock, out of line. A snapshot retired meanwhile is read as it
/// was retired ([`StripedSeqLock::read_begin`]), a state current during
/// the call.
#[derive(Clone, Copy)]
struct InPlace;

impl Miss for InPlace {
    #[inline(always)]
    fn plain(self, v: &View, ia: usize, ib: usize) -> u64 {
        v.inner().raw_retry(ia, ib)
    }
    #[inline(always)]
    fn general(self, v: &View, h: u64, ia: usize, ib: usize) -> Option<u64> {
        v.inner().read_retry(h, ia, ib)
    }
}

/// A key of a single lookup: looked up through a view ([`View::get`] /
/// [`View::get_u64`]), and located again after a reload.
trait SingleKey: Copy {
    fn get(self, v: &View, miss: impl Miss) -> Option<u64>;
    fn locate(self, v: &View) -> (u64, usize, usize);
}

impl SingleKey for u64 {
    #[inline(always)]
    fn get(self, v: &View, miss: impl Miss) -> Option<u64> {
        v.get_u64(self, miss)
    }
    #[inline(always)]
    fn locate(self, v: &View) -> (u64, usize, usize) {
        v.locate_u64(self)
    }
}

impl SingleKey for &[u8] {
    #[inline(always)]
    fn get(self, v: &View, miss: impl Miss) -> Option<u64> {
        v.get(self, miss)
    }
    #[inline(always)]
    fn locate(self, v: &View) -> (u64, usize, usize) {
        // As `View::get`: an 8-byte key by the typed hash.
        match <[u8; 8]>::try_from(self) {
            Ok(k8) => v.locate_u64(u64::from_le_bytes(k8)),
            Err(_) => v.inner().p.locate(self),
        }
    }
}

/// The miss of a per-thread handle's single lookup, which reads through
/// the handle's held view with no generation check (its snapshot may be
/// one that was replaced, and then retired, so the validation failed):
/// it only records the miss (the answer returned with it is discarded).
/// After the lookup returned, the handle reloads and the key is looked up
/// again ([`get_again`], out of line). (The reload cannot run inside the
/// lookup: it overwrites the view the lookup holds a reference to.)
struct Defer<'f>(&'f Cell<bool>);

impl Miss for Defer<'_> {
    #[inline(always)]
    fn plain(self, _: &View, _: usize, _: usize) -> u64 {
        self.0.set(true);
        0
    }
    #[inline(always)]
    fn general(self, _: &View, _: u64, _: usize, _: usize) -> Option<u64> {
        self.0.set(true);
        None
    }
}

/// [`Defer`]'s second lookup, on the view of the current snapshot (the
/// handle reloaded it if its snapshot was retired): the key located again
/// (seed and sizes may have changed) and read under the lock ([`InPlace`]'s reads: they wait for a
/// writer; a snapshot retired meanwhile is read as it was retired, a state
/// current during the call).
#[inline(always)]
fn get_again<K: SingleKey>(v: &View, key: K) -> Option<u64> {
    let (h, ia, ib) = key.locate(v);
    v.inner().read(h, ia, ib)
}

/// Slot `i` of a packed array of `2^LG`-bit slots (`LG` in 3..=5: bytes,
/// 16- or 32-bit slots) whose words start at `base`: on x86-64 one
/// zero-extending load of the slot's own bytes (`movzx` / `mov`, base and
/// scaled index in the instruction), elsewhere the slot's word, shifted
/// and masked.
///
/// Why `asm!` on x86-64: the words are `AtomicU64`s that writers change
/// concurrently (deltas, under the seqlock), and a plain or `AtomicU8`
/// load of a byte inside one would be a data race or a mixed-size atomic
/// access, which Rust's memory model does not define. The block's load is
/// the hardware's: on x86-64 an aligned load of 1, 2 or 4 bytes is single-
/// copy atomic and, like a relaxed atomic load, returns a value some write
/// stored (the `atomic-memcpy` pattern; `setsep::lookup::eval8_avx2` reads
/// its records the same way). A slot read while a writer changes it is
/// discarded by the caller's seqlock validation, as for the word read.
/// `readonly` without `pure` keeps the compiler from moving or merging the
/// load across the seqlock's acquire load and fence.
///
/// # Safety
///
/// The array at `base` has more than `i` slots of `2^LG` bits (so the
/// `2^(LG-3)` bytes at byte offset `i << (LG - 3)` lie inside its words,
/// naturally aligned, as packed slots of a power-of-two width never
/// straddle a word) and stays allocated for the call.
#[inline(always)]
unsafe fn load_slot<const LG: u32>(base: *const AtomicU64, i: usize) -> u64 {
    const { assert!(3 <= LG && LG <= 5) };
    #[cfg(target_arch = "x86_64")]
    {
        let v: u32;
        // SAFETY: the caller guarantees that the slot's bytes are inside
        // the live array (see the function's docs); the block reads only
        // them, writes only `v`, uses no stack and leaves the flags alone.
        unsafe {
            match LG {
                3 => std::arch::asm!(
                    "movzx {v:e}, byte ptr [{b} + {i}]",
                    b = in(reg) base, i = in(reg) i, v = lateout(reg) v,
                    options(nostack, preserves_flags, readonly),
                ),
                4 => std::arch::asm!(
                    "movzx {v:e}, word ptr [{b} + {i} * 2]",
                    b = in(reg) base, i = in(reg) i, v = lateout(reg) v,
                    options(nostack, preserves_flags, readonly),
                ),
                _ => std::arch::asm!(
                    "mov {v:e}, dword ptr [{b} + {i} * 4]",
                    b = in(reg) base, i = in(reg) i, v = lateout(reg) v,
                    options(nostack, preserves_flags, readonly),
                ),
            }
        }
        v as u64
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let bit = i << LG;
        // SAFETY: as in `View::slot`: `i` below the size gives a word index
        // below `words_for(len, 2^LG)`.
        let w = unsafe { (*base.add(bit >> 6)).load(Ordering::Relaxed) };
        (w >> (bit & 63)) & crate::mask(1 << LG)
    }
}

/// Othello's per-thread reader: a snapshot and its [`View`], cached by
/// value ([`CachedView`]). A single lookup (`get`, `get_u64`) checks no
/// generation: it reads through a copy of the view and validates against
/// the snapshot's seqlock, which fails once the snapshot was replaced (the
/// engine retires it first, see [`STRIPES`]); then ([`Defer`]) the handle
/// moves to the current snapshot and looks the key up again, out of line. Batches check the
/// generation once per call.
#[derive(Debug, Clone)]
pub(crate) struct FlatReader<'a>(CachedView<'a, Inner, View>);

impl<'a> From<crate::engine::Reader<'a, Othello>> for FlatReader<'a> {
    fn from(r: crate::engine::Reader<'a, Othello>) -> Self {
        FlatReader(CachedView::new(r.publisher(), Inner::view))
    }
}

impl FlatReader<'_> {
    #[inline(always)]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.single(key)
    }

    #[inline(always)]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.single(key)
    }

    /// [`Reader8::get_u64`]: [`View::get_u64_8`] through the held view,
    /// then [`Self::get_again`] out of line on a miss (a writer, a replaced
    /// snapshot, or another layout).
    ///
    /// The same steps as [`Self::single`], written out: one shared helper
    /// taking the lookup as a closure left `reader().get_u64` at 47.6
    /// instructions per lookup instead of 35.6 (callgrind, 1M keys).
    #[inline(always)]
    pub fn get_u64_8(&self, key: u64) -> Option<u64> {
        let missed = Cell::new(false);
        // SAFETY: the closure does not call `with`, `with_held` or
        // `reload` on this handle.
        let r = unsafe {
            self.0.with_held(
                #[inline(always)]
                |v| v.get_u64_8(key, &missed),
            )
        };
        if missed.get() { self.get_again(key) } else { r }
    }

    /// A single lookup through the held view ([`Defer`] on a miss, then
    /// [`Self::get_again`] out of line).
    #[inline(always)]
    fn single<K: SingleKey>(&self, key: K) -> Option<u64> {
        let missed = Cell::new(false);
        // SAFETY: the closure does not call `with`, `with_held` or
        // `reload` on this handle.
        let r = unsafe {
            self.0.with_held(
                #[inline(always)]
                |v| key.get(v, Defer(&missed)),
            )
        };
        if missed.get() { self.get_again(key) } else { r }
    }

    /// After a [`Defer`] miss: a retired snapshot sends the handle to the
    /// current one; the key is looked up ([`get_again`]); then the view's
    /// [`View::seen`] is brought up to date for the next lookups.
    #[cold]
    #[inline(never)]
    fn get_again<K: SingleKey>(&self, key: K) -> Option<u64> {
        // SAFETY: see `get`.
        if unsafe { self.0.with_held(View::retired) } {
            self.0.reload();
        }
        // SAFETY: see `get`.
        let r = unsafe { self.0.with_held(|v| get_again(v, key)) };
        self.0.update(View::resync);
        r
    }

    #[inline]
    pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        // SAFETY: the closure does not call `with` on this handle.
        unsafe { self.0.with(|v| v.get_batch(keys, out)) }
    }
}

/// The `&self` lookups' per-thread snapshot cache ([`PerThreadView`]):
/// each thread that calls `get` / `get_u64` / `get_batch` on a [`Lookup`] keeps, inside
/// that table, its own snapshot `Arc` and [`View`], instead of pinning the
/// snapshot with arc-swap on every call. As a [`FlatReader`]'s: single
/// lookups validate against the snapshot's (possibly retired) seqlock and
/// reload on a miss, batches check the generation.
pub(crate) struct LocalViews(PerThreadView<Inner, View>);

impl Default for LocalViews {
    fn default() -> Self {
        LocalViews(PerThreadView::new(Inner::view))
    }
}

impl std::fmt::Debug for LocalViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl LocalViews {
    #[inline(always)]
    fn get(&self, raw: &RawLookup<Othello>, key: &[u8]) -> Option<u64> {
        self.single(raw, key)
    }

    #[inline(always)]
    fn get_u64(&self, raw: &RawLookup<Othello>, key: u64) -> Option<u64> {
        self.single(raw, key)
    }

    /// As [`FlatReader::single`], on this thread's slot.
    #[inline(always)]
    fn single<K: SingleKey>(&self, raw: &RawLookup<Othello>, key: K) -> Option<u64> {
        let missed = Cell::new(false);
        // SAFETY: `raw` is the `RawLookup` owned next to this cache in the
        // same `Lookup` (the only callers, `lookup_form!`'s `get` /
        // `get_u64`, pass `&self.raw`), and the closure does not call
        // `with`, `with_held` or `reload` (as in `FlatReader::single`).
        let r = unsafe {
            self.0.with_held(
                raw.publisher(),
                #[inline(always)]
                |v| key.get(v, Defer(&missed)),
            )
        };
        if missed.get() { self.get_again(raw, key) } else { r }
    }

    /// As [`FlatReader::get_again`], on this thread's slot.
    #[cold]
    #[inline(never)]
    fn get_again<K: SingleKey>(&self, raw: &RawLookup<Othello>, key: K) -> Option<u64> {
        let src = raw.publisher();
        // SAFETY: `raw` as in `single`; the closures call nothing on `self`.
        unsafe {
            if self.0.with_held(src, View::retired) {
                self.0.reload(src);
            }
            let r = self.0.with_held(src, |v| get_again(v, key));
            self.0.update(src, View::resync);
            r
        }
    }

    #[inline]
    fn get_batch(&self, raw: &RawLookup<Othello>, keys: &[&[u8]], out: &mut [Option<u64>]) {
        // SAFETY: `raw` as in `single`, and the closure does not call `with`.
        unsafe { self.0.with(raw.publisher(), |v| v.get_batch(keys, out)) }
    }

    #[inline]
    pub(super) fn get_batch_u64(&self, raw: &RawLookup<Othello>, keys: &[u64], out: &mut [Option<u64>]) {
        // SAFETY: see `get_batch`.
        unsafe { self.0.with(raw.publisher(), |v| v.get_batch_u64(keys, out)) }
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
    /// Retires the replaced snapshot's seqlock (see [`STRIPES`]): the
    /// per-thread readers' single lookups check no generation and rely on
    /// it.
    fn retire(c: &Inner) {
        c.lock.retire();
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
///
/// # Snapshots held per thread
///
/// `get` and `get_u64` on `&self` cost about what a [`Reader`]'s do: each
/// thread that calls them keeps, inside this table, a cached pointer to the
/// table's current arrays (a snapshot); a single lookup validates against
/// that snapshot's seqlock, which a whole-table replacement retires, so no
/// generation counter is checked per call (batches check it once). The price: a thread may keep **one stale snapshot** of this
/// table alive after a whole-table replacement (growth, re-seed, a rebuild
/// delta) until its next `get` / `get_u64` on this table, which moves it to
/// the current one, or until the table is dropped, which releases every
/// thread's snapshot (a thread that exited leaves its snapshot to the
/// table's drop or to the next thread given its id). Nothing outside the
/// table refers to these caches, so dropping the table frees them all.
/// Answers are never stale: every call sees the deltas and replacements
/// applied before it.
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<Othello>,
    /// The `&self` lookups' per-thread snapshot caches.
    local: LocalViews,
}

/// A per-thread read handle ([`crate::LookupTable::reader`]): the same
/// answers as the lookup form's `get` / `get_batch` / `get_u64`, without the
/// per-call snapshot pinning. Applied deltas and whole-table replacements
/// are visible to it.
#[derive(Debug, Clone)]
pub struct Reader<'a>(FlatReader<'a>);

/// A per-thread read handle for the data-plane layout — plain 8-bit values,
/// the default `Mum8` key hash ([`Lookup::reader8`]): its `get_u64` takes
/// that layout's path with no test of the layout, which leaves the lookup
/// loop a quarter fewer instructions than [`Reader`]'s (`docs/single-get.md`).
/// On any other layout it answers correctly but every lookup goes out of
/// line (use [`Reader`] there). Like [`Reader`], it checks no generation per
/// call and sees every applied delta and replacement.
#[derive(Debug, Clone)]
pub struct Reader8<'a>(FlatReader<'a>);

impl Reader8<'_> {
    /// The value of an 8-byte key given as a `u64` (its little-endian
    /// bytes), as `LookupTable::get_u64`.
    #[inline(always)]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.0.get_u64_8(key)
    }
    /// The value of a key of any length, as [`Reader`]'s `get`.
    #[inline(always)]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.0.get(key)
    }
}

crate::engine::lookup_form!(Othello, pub(crate), local);

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
    /// How this table hashes its keys (recorded in its blob).
    pub fn key_hash(&self) -> super::KeyHash {
        self.raw.load().p.hash
    }

    /// `A[ha(k)] XOR B[hb(k)]` without fingerprint or emptiness checks: the
    /// value bits of the raw Othello answer (arbitrary for alien keys).
    #[inline]
    pub fn get_unchecked(&self, key: &[u8]) -> u64 {
        let c = self.raw.load();
        let (_, ia, ib) = c.p.locate(key);
        c.raw(ia, ib)
    }

    /// A [`Reader8`]: a per-thread handle whose `get_u64` is specialised
    /// for plain 8-bit values under the default key hash (correct, but
    /// slower than [`crate::LookupTable::reader`]'s, on other layouts).
    pub fn reader8(&self) -> Reader8<'_> {
        Reader8(self.raw.reader().into())
    }

    /// Crate-internal hook: an independent copy of this lookup form (same
    /// arrays and sequence number).
    pub(crate) fn duplicate(&self) -> Lookup {
        Lookup::from_image(self.raw.load().image(), self.lineage(), self.seq())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::u64_key;
    use crate::{ControlTable, LookupTable};
    use std::sync::{Weak, mpsc};

    fn assert_send_sync<T: Send + Sync>() {}

    /// Tables made and dropped one after another in the same place (so
    /// at the same address) are each read from their own arrays: the
    /// thread's memo of its last table is keyed by a never-reused id, not by
    /// the address.
    #[test]
    fn a_table_made_where_a_dropped_one_was_reads_its_own_values() {
        let ctls: Vec<_> = (0..2u64)
            .map(|v| {
                super::super::Control::from_items_with(
                    (0..50u64).map(|k| (u64_key(k), (k + v) & 0xff)),
                    8,
                    super::super::Options { seed: 41 + v, ..Default::default() },
                )
                .unwrap()
            })
            .collect();
        for round in 0..20u64 {
            let v = round % 2;
            let table = ctls[v as usize].export();
            for k in 0..50u64 {
                assert_eq!(table.get_u64(k), Some((k + v) & 0xff), "round {round} key {k}");
                assert_eq!(table.get(&u64_key(k)), Some((k + v) & 0xff));
            }
            drop(table);
        }
    }

    /// Threads that used a table's `&self` lookups keep its snapshots only
    /// inside the table: a stale snapshot stays alive (documented) until the
    /// thread's next lookup on that table, and dropping the table releases
    /// every snapshot although those threads are still running.
    #[test]
    fn dropping_a_table_releases_every_threads_snapshot() {
        assert_send_sync::<Lookup>();
        let mut ctl = super::super::Control::from_items_with(
            (0..100u64).map(|k| (u64_key(k), k & 0xff)),
            8,
            super::super::Options { seed: 40, ..Default::default() },
        )
        .unwrap();
        let table = Arc::new(ctl.export());
        let first = Arc::downgrade(&table.snapshot_arc());
        // Three threads look up (their slots now hold the first snapshot),
        // then wait for orders while holding no reference to the table
        // except the one they are handed.
        let mut workers = Vec::new();
        for _ in 0..3 {
            let (go, rx) = mpsc::channel::<Option<Arc<Lookup>>>();
            let (done, back) = mpsc::channel::<()>();
            let t = table.clone();
            let h = std::thread::spawn(move || {
                assert_eq!(t.get_u64(7), Some(7));
                drop(t);
                done.send(()).unwrap();
                while let Ok(Some(t)) = rx.recv() {
                    assert_eq!(t.get_u64(7), Some(7));
                    drop(t);
                    done.send(()).unwrap();
                }
            });
            back.recv().unwrap();
            workers.push((go, back, h));
        }
        // A whole-table replacement (growth) while the workers are idle.
        let mut replaced = false;
        for k in 100..2_000u64 {
            let d = ctl.insert(&u64_key(k), k & 0xff).unwrap();
            replaced |= d.is_rebuild();
            table.apply(&d).unwrap();
        }
        assert!(replaced, "no whole-table replacement");
        let second = Arc::downgrade(&table.snapshot_arc());
        assert!(!Weak::ptr_eq(&first, &second));
        // The idle workers' slots still hold the first snapshot.
        assert!(first.upgrade().is_some(), "the idle threads' stale snapshot");
        // Each worker's next lookup moves its slot to the current snapshot,
        // so the first one is released once all of them have looked up.
        for (go, back, _) in &workers {
            go.send(Some(table.clone())).unwrap();
            back.recv().unwrap();
        }
        assert!(first.upgrade().is_none(), "the first snapshot outlived every thread's next lookup");
        assert!(second.upgrade().is_some());
        // Dropping the table (the last reference) while the workers still
        // run releases the snapshot their slots hold.
        drop(table);
        assert!(second.upgrade().is_none(), "a dropped table's snapshot is still alive");
        for (go, _, h) in workers {
            go.send(None).unwrap();
            h.join().unwrap();
        }
    }
}
