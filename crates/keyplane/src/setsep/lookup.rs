//! The SetSep data-plane form: bucket choices, group records, fallback table.

use super::delta::{
    CHOICE_BYTES, Delta, Fallback, FallbackList, GroupBody, GroupUpdate, Image, TAG_REPLACE, Update, encode_image,
};
use super::records::Records;
use super::{BUCKETS_PER_BLOCK, GROUPS_PER_BLOCK, Params};
use crate::bits::PackedArray;
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result, mask};
use crate::hash::hash64;
use crate::mem::prefetch;
use crate::sync::{Published, StripeSet, StripedSeqLock};
use crate::wire::{Kind, Writer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Seqlock stripes (one per block, blocks folded onto at most this many).
const MAX_STRIPES: usize = 1024;
/// Batch of Algorithm 1's three stages.
const BATCH: usize = 16;
/// From this many value bits on, `get_batch` also prefetches the four
/// candidate group records in its first stage (measured faster for l = 4
/// and 8, slower or equal for l = 1 and 2; see docs/structures/setsep.md).
const SPECULATE_FROM_BITS: usize = 4;

/// One snapshot of the lookup form. Updates rewrite choices and records in
/// place under the block seqlocks and publish a new fallback table; growth
/// replaces the whole snapshot.
#[derive(Debug)]
pub(crate) struct Inner {
    p: Params,
    /// 2-bit choice per bucket: exactly `p.buckets()` elements of 2 bits
    /// (the unchecked reads of [`Inner::choice`] rely on it).
    choices: PackedArray,
    rec: Records,
    fallback: Published<Fallback>,
    lock: StripedSeqLock,
    smask: usize,
    /// `hash::short_flip(p.seed)`, for the 8-byte key path.
    flip8: u64,
    /// Record layout constants for [`Inner::eval`].
    dec: Decode,
    /// The records are word-aligned with l = 8 (`Records::Words`, `k = 1`)
    /// and this CPU runs AVX2: single lookups take [`Inner::read_once8`].
    simd8: bool,
}

/// Record layout constants, derived once from [`Params`].
#[derive(Debug, Clone, Copy)]
struct Decode {
    /// Value bits `l`.
    l: usize,
    /// Bits of one element (`x + y`).
    width: u32,
    /// Bits of one group record (`l * (x + y)`).
    record_bits: usize,
    /// `mask(x + y)`.
    emask: u64,
    /// `Params::marker()`: `mask(x)`.
    marker: u64,
    /// `x`.
    xbits: u32,
    /// `Params::shift()`: `32 - log2(y)`.
    shift: u32,
}

impl Decode {
    fn new(p: &Params) -> Self {
        let width = p.width();
        Decode {
            l: p.vbits as usize,
            width,
            record_bits: p.vbits as usize * width as usize,
            emask: mask(width),
            marker: p.marker(),
            xbits: p.xbits,
            shift: 32 - p.ybits.trailing_zeros(),
        }
    }
}

enum Eval {
    Value(u64),
    Fallback(usize),
}

impl Inner {
    fn new(img: Image) -> Self {
        let lock = StripedSeqLock::new((img.p.blocks as usize).min(MAX_STRIPES));
        let smask = lock.stripes() - 1;
        let p = img.p;
        // Decoded images always have these shapes; anything else is copied
        // into one that has, so the lookup's unchecked reads stay in bounds.
        let choices = if img.choices.len() == p.buckets() && img.choices.bits() == 2 {
            img.choices
        } else {
            let c = PackedArray::new(p.buckets(), 2);
            (0..p.buckets().min(img.choices.len())).for_each(|i| c.set(i, img.choices.get(i)));
            c
        };
        let rec = Records::from_packed(&p, img.rec);
        let simd8 = matches!(rec, Records::Words { k: 1, .. }) && avx2_detected();
        Self {
            p,
            choices,
            rec,
            fallback: Published::new(img.fallback),
            lock,
            smask,
            flip8: crate::hash::short_flip(img.p.seed),
            dec: Decode::new(&img.p),
            simd8,
        }
    }

    #[inline(always)]
    fn stripe(&self, bucket: usize) -> usize {
        (bucket / BUCKETS_PER_BLOCK) & self.smask
    }

    /// Bucket `bucket`'s 2-bit choice. `bucket < p.buckets()`.
    #[inline(always)]
    fn choice(&self, bucket: usize) -> u64 {
        debug_assert!(bucket < self.p.buckets());
        let words = self.choices.raw_words();
        // SAFETY: `bucket < p.buckets()` (every caller's bucket comes from
        // `Params::key_hash`, `reduce(_, buckets)`), and `choices` holds
        // exactly `p.buckets()` elements of 2 bits (established in
        // `Inner::new`), i.e. at least `ceil(2 · buckets / 64)` words, so
        // word `bucket / 32` exists.
        let w = unsafe { words.get_unchecked(bucket >> 5) }.load(Ordering::Relaxed);
        (w >> ((bucket & 31) * 2)) & 3
    }

    /// Evaluates group `g`'s record for a key (§4.1: `array[H_i(x)]` per
    /// bit). `g < p.groups()`. The common shape (word-aligned records,
    /// l = 8, y = 8) is inlined; every other shape is one call away, so
    /// its code does not weigh on the hot path's registers.
    #[inline(always)]
    fn eval(&self, g: usize, g1: u32, g2: u32) -> Eval {
        debug_assert!(g < self.p.groups());
        match &self.rec {
            Records::Words { words, k: 1 } => self.eval_words(words, 1, 29, g, g1, g2),
            _ => self.eval_other(g, g1, g2),
        }
    }

    /// [`Self::eval`] for the shapes other than l = 8, y = 8 aligned.
    #[inline(never)]
    fn eval_other(&self, g: usize, g1: u32, g2: u32) -> Eval {
        match &self.rec {
            Records::Words { words, k } => self.eval_words(words, *k, self.dec.shift, g, g1, g2),
            Records::Packed(rec) => self.eval_packed(rec, g, g1, g2),
        }
    }

    /// [`Self::eval`] over the word-aligned records (`k = l / 8` words of
    /// arrays; `shift` is `dec.shift`). Inlined with the constants `k = 1`
    /// and `shift = 29` for l = 8, y = 8, so the 8 bits unroll into
    /// register arithmetic on three loaded words.
    ///
    /// Per chunk of 8 value bits: each bit's array position `pos_b` (one
    /// multiply-add and a shift of its 16-bit index) selects bit `8b + pos_b`
    /// of the chunk's array word; the 8 selected bits are gathered at once
    /// (`a & m` has at most one bit per byte, each byte at most `0x80`, so
    /// adding `0x7f` per byte carries into the byte's top bit exactly when
    /// the byte is non-zero, never across bytes; a multiply collects the 8
    /// top bits into one byte).
    #[inline(always)]
    fn eval_words(&self, words: &[AtomicU64], k: usize, shift: u32, g: usize, g1: u32, g2: u32) -> Eval {
        let base = g * 3 * k;
        let word = |j: usize| -> u64 {
            debug_assert!(base + j < words.len());
            // SAFETY: `g < p.groups()` (every caller's group comes from
            // `Params::group` of an in-range bucket: block `< blocks` times
            // 64 plus a candidate `< 64`) and `j < 3k`, and `Records::Words`
            // holds exactly `p.groups() · 3k` words, so `base + j` is in
            // bounds.
            unsafe { words.get_unchecked(base + j) }.load(Ordering::Relaxed)
        };
        let mut v = 0u64;
        for c in 0..k {
            let (i0, i1, a) = (word(2 * c), word(2 * c + 1), word(2 * k + c));
            if c == 0 && i0 & 0xffff == self.dec.marker {
                return Eval::Fallback(g);
            }
            let mut m = 0u64;
            for b in 0..8u32 {
                let i = ((if b < 4 { i0 } else { i1 } >> (16 * (b % 4))) & 0xffff) as u32;
                let pos = g1.wrapping_add(i.wrapping_mul(g2)) >> shift;
                m |= 1u64 << (8 * b + pos);
            }
            let top = ((a & m).wrapping_add(0x7f7f_7f7f_7f7f_7f7f) & 0x8080_8080_8080_8080) >> 7;
            v |= (top.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * c);
        }
        Eval::Value(v)
    }

    /// [`Self::eval`] over the packed records (any `x`, `y`, `l`).
    ///
    /// The record's `l` elements are contiguous: they are decoded straight
    /// from the raw words with the layout constants precomputed in `dec`
    /// (bit `b` is bit `Params::pos(index, G1, G2)` of the array part of
    /// element `g * l + b`, whose index part is its low `x` bits).
    #[inline(always)]
    fn eval_packed(&self, rec: &PackedArray, g: usize, g1: u32, g2: u32) -> Eval {
        let d = &self.dec;
        let words = rec.raw_words();
        let elem = |bit: usize| -> u64 {
            let (w, off) = (bit >> 6, (bit & 63) as u32);
            let lo = words[w].load(Ordering::Relaxed) >> off;
            let e = if off + d.width <= 64 { lo } else { lo | (words[w + 1].load(Ordering::Relaxed) << (64 - off)) };
            e & d.emask
        };
        let mut bit = g * d.record_bits;
        let e0 = elem(bit);
        if e0 & d.marker == d.marker {
            return Eval::Fallback(g);
        }
        let one = |e: u64| -> u64 {
            let i = (e & d.marker) as u32;
            (e >> d.xbits >> (g1.wrapping_add(i.wrapping_mul(g2)) >> d.shift)) & 1
        };
        let mut v = one(e0);
        for b in 1..d.l {
            bit += d.width as usize;
            v |= one(elem(bit)) << b;
        }
        Eval::Value(v)
    }

    #[inline(never)]
    fn fallback_get(&self, g: usize, key: &[u8]) -> Option<u64> {
        let fb = self.fallback.load();
        let i = fb.binary_search_by_key(&(g as u32), |(h, _)| *h).ok()?;
        fb[i].1.iter().find(|(k, _)| &**k == key).map(|(_, v)| *v)
    }

    /// A single lookup's straight-line path: one stripe version, the
    /// bucket choice, the group record, one validation. Fallback groups, a
    /// record being written and a moved version take the out-of-line
    /// [`Self::read_retry`], so consecutive lookups overlap their misses.
    #[inline(always)]
    fn read_once(&self, key: &[u8], h: u64) -> Option<u64> {
        if self.simd8 {
            if let Records::Words { words, .. } = &self.rec {
                return self.read_once8(words, key, h);
            }
        }
        self.read_once_other(key, h)
    }

    /// [`Self::read_once`] for word-aligned l = 8 records on an AVX2 CPU:
    /// the same steps with the layout's constants (three words per group)
    /// and the record evaluated by [`eval8_avx2`].
    #[inline(always)]
    fn read_once8(&self, words: &[AtomicU64], key: &[u8], h: u64) -> Option<u64> {
        let kh = self.p.key_hash(h);
        let s = self.stripe(kh.bucket);
        let st = self.lock.view();
        let ver = st.peek(s);
        let base = (kh.bucket / BUCKETS_PER_BLOCK) * GROUPS_PER_BLOCK;
        let cand = &super::CANDIDATES[kh.bucket % BUCKETS_PER_BLOCK];
        // The four candidate records before the choice (see `read_once_other`).
        for &c in cand {
            prefetch(words.as_ptr().wrapping_add((base + c as usize) * 3));
        }
        let g = base + cand[(self.choice(kh.bucket) & 3) as usize] as usize;
        debug_assert_eq!(g, self.p.group(kh.bucket, self.choice(kh.bucket)));
        debug_assert!(3 * g + 3 <= words.len());
        // SAFETY: `g < p.groups()` (block `< blocks` times 64 plus a
        // candidate `< 64`), and `Records::Words` with `k = 1` holds exactly
        // `p.groups() · 3` words, so words `3g .. 3g + 3` exist.
        let w0 = unsafe { words.get_unchecked(3 * g) }.load(Ordering::Relaxed);
        // SAFETY: as above, the three words from `3g` are in bounds; `simd8`
        // is set only where AVX2 was detected.
        let v = unsafe { eval8_avx2(words.as_ptr().add(3 * g), kh.g1, kh.g2) };
        if (w0 & 0xffff != self.dec.marker) & st.still(s, ver) {
            return Some(v);
        }
        self.read_retry(key, h)
    }

    /// [`Self::read_once`] for every other shape or CPU, out of line.
    #[inline(never)]
    fn read_once_other(&self, key: &[u8], h: u64) -> Option<u64> {
        let kh = self.p.key_hash(h);
        let s = self.stripe(kh.bucket);
        let st = self.lock.view();
        let ver = st.peek(s);
        if let Records::Words { words, k } = &self.rec {
            // The bucket's four candidate records are known before its
            // choice is: fetching them now overlaps the record's memory
            // round trip with the choice's instead of following it.
            let base = (kh.bucket / BUCKETS_PER_BLOCK) * GROUPS_PER_BLOCK;
            let cand = &super::CANDIDATES[kh.bucket % BUCKETS_PER_BLOCK];
            for &c in cand {
                prefetch(words.as_ptr().wrapping_add((base + c as usize) * 3 * k));
            }
        }
        let g = self.p.group(kh.bucket, self.choice(kh.bucket));
        match self.eval(g, kh.g1, kh.g2) {
            Eval::Value(v) if st.still(s, ver) => Some(v),
            _ => self.read_retry(key, h),
        }
    }

    #[cold]
    #[inline(never)]
    fn read_retry(&self, key: &[u8], h: u64) -> Option<u64> {
        self.read(key, h)
    }

    /// One lookup, retried until it observes its block's stripe stable.
    #[inline(always)]
    fn read(&self, key: &[u8], h: u64) -> Option<u64> {
        let kh = self.p.key_hash(h);
        let s = self.stripe(kh.bucket);
        loop {
            let ver = self.lock.read_begin(s);
            let g = self.p.group(kh.bucket, self.choice(kh.bucket));
            let r = match self.eval(g, kh.g1, kh.g2) {
                Eval::Value(v) => Some(v),
                Eval::Fallback(g) => self.fallback_get(g, key),
            };
            if self.lock.read_validate(s, ver) {
                return r;
            }
        }
    }
}

/// True when this CPU runs AVX2 (std caches the CPUID query).
fn avx2_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The 8 value bits of a word-aligned l = 8, y = 8 record (`Records::Words`
/// with `k = 1`) at `rec` for the key hashes `g1`, `g2`: what
/// `Inner::eval_words(_, 1, 29, ..)` computes, with AVX2 on all 8 bits at
/// once. Lane `b` takes index `b` (16 bits at bit `16 · (b % 4)` of word
/// `b / 4`) and array `b` (byte `b` of word 2), computes the array position
/// `(g1 + index · g2) mod 2^32 >> 29`, shifts the array right by it and the
/// selected bit into the lane's sign; `vmovmskps` gathers the 8 signs, lane
/// `b` into value bit `b`.
///
/// Why `asm!`: the records are written concurrently by deltas through
/// `AtomicU64` stores (under the block seqlock), and plain SIMD loads of
/// them would be a data race in Rust's memory model. The block's loads are
/// the hardware's, equivalent to relaxed atomic loads of the bytes read (the
/// `atomic-memcpy` pattern); a record read while a writer changes it may mix
/// old and new bytes, and the caller's seqlock validation discards that
/// answer, as it does for the portable form's three atomic loads.
///
/// # Safety
///
/// The CPU runs AVX2, and `rec` points to three readable `AtomicU64` words
/// (24 bytes) that stay allocated for the call.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn eval8_avx2(rec: *const AtomicU64, g1: u32, g2: u32) -> u64 {
    let v: u32;
    // SAFETY: the caller guarantees AVX2 and that the 24 bytes at `rec` are
    // live words; the block only reads them (16 bytes at `rec`, 8 at
    // `rec + 16`, no alignment required by either instruction), writes only
    // `v` and the declared-clobbered `xmm0`/`xmm1` (whose upper halves this
    // crate's non-AVX code never holds values in; the closing `vzeroupper`
    // clears every ymm upper half, so the SSE code that follows pays no
    // transition penalty), uses no stack and leaves the flags alone.
    unsafe {
        std::arch::asm!(
            "vmovd xmm0, {g2:e}",
            "vpbroadcastd ymm0, xmm0",
            "vpmovzxwd ymm1, xmmword ptr [{p}]",
            "vpmulld ymm1, ymm1, ymm0",
            "vmovd xmm0, {g1:e}",
            "vpbroadcastd ymm0, xmm0",
            "vpaddd ymm1, ymm1, ymm0",
            "vpsrld ymm1, ymm1, 29",
            "vpmovzxbd ymm0, qword ptr [{p} + 16]",
            "vpsrlvd ymm0, ymm0, ymm1",
            "vpslld ymm0, ymm0, 31",
            "vmovmskps {v:e}, ymm0",
            "vzeroupper",
            p = in(reg) rec,
            g1 = in(reg) g1,
            g2 = in(reg) g2,
            v = lateout(reg) v,
            out("xmm0") _,
            out("xmm1") _,
            options(nostack, preserves_flags, readonly),
        );
    }
    v as u64
}

/// Never called: `simd8` is false off x86-64.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn eval8_avx2(_rec: *const AtomicU64, _g1: u32, _g2: u32) -> u64 {
    unreachable!("AVX2 is only detected on x86-64")
}

/// A per-thread read handle ([`crate::LookupTable::reader`]): the same
/// answers as [`Lookup`]'s `get` / `get_batch` / `get_u64`, without the
/// per-call snapshot pinning (see `Cached`). Applied deltas and whole-table
/// replacements are visible to it.
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, SetSep>);

/// SetSep lookup form: no keys except those of fallback groups. See the
/// [module docs](super).
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
/// `&self` lookups (`get`, `get_u64`, `get_batch`, `get_batch_u64`) cost
/// about what a [`Reader`]'s do: each thread that calls them keeps, inside
/// this table, a cached reference to the table's current snapshot and
/// checks one generation counter per call. The price (as Othello's and the
/// cuckoo map's): a thread may keep **one stale snapshot** of this table
/// alive after a whole-table replacement (a rebuild delta) until its next
/// `&self` lookup on this table, which moves it to the current one, or
/// until the table is dropped, which releases every thread's snapshot.
/// Answers are never stale: every call sees the deltas and replacements
/// applied before it.
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<SetSep>,
    /// The `&self` lookups' per-thread snapshot caches.
    local: crate::engine::LocalSnapshots<SetSep>,
}

crate::engine::lookup_form!(SetSep, pub(crate), local);

impl Lookup {
    pub(crate) fn from_image(img: Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(Inner::new(img), table, seq))
    }

    /// `(x, y)`: hash-index bits and array bits per value bit.
    pub fn config(&self) -> (u32, u32) {
        let c = self.raw.load();
        (c.p.xbits, c.p.ybits)
    }
    /// Number of 256-bucket blocks.
    pub fn blocks(&self) -> u32 {
        self.raw.load().p.blocks
    }
    /// Hash seed of the skeleton.
    pub fn seed(&self) -> u64 {
        self.raw.load().p.seed
    }
    /// `(groups, keys)` held in the fallback table.
    pub fn fallback_size(&self) -> (usize, usize) {
        let c = self.raw.load();
        let fb = c.fallback.load();
        (fb.len(), fb.iter().map(|(_, l)| l.len()).sum())
    }
}

/// The SetSep scheme (see [`crate::engine`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SetSep;

impl Scheme for SetSep {
    type Inner = Inner;
    type Image = Image;
    type Patch = Update;
    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    const REPLACE_TAG: u8 = TAG_REPLACE;

    fn build(img: Image) -> Result<Inner> {
        Ok(Inner::new(img))
    }
    fn image(c: &Inner) -> Image {
        Image {
            p: c.p,
            choices: c.choices.clone(),
            rec: c.rec.to_packed(&c.p),
            fallback: (**c.fallback.load()).clone(),
        }
    }
    fn encode_inner(c: &Inner, w: &mut Writer) {
        encode_image(w, &c.p, &c.choices, &c.rec.to_packed(&c.p), &c.fallback.load());
    }
    fn payload_hint(c: &Inner) -> usize {
        c.choices.memory_bytes() + c.rec.memory_bytes() + 64
    }
    fn check_replace(c: &Inner, img: &Image) -> Result<()> {
        if img.p.vbits != c.p.vbits {
            return Err(Error::DeltaMismatch("rebuild delta has a different value width".into()));
        }
        Ok(())
    }
    fn apply_patch(_cur: &Published<Inner>, c: Arc<Inner>, u: &Update) -> Result<()> {
        Inner::check_update(&c.p, u)?;
        c.apply_update(&u.choices, &u.groups);
        Ok(())
    }
    fn memory_bytes(c: &Inner) -> usize {
        let fb = c.fallback.load();
        let fb_bytes: usize =
            fb.iter().map(|(_, l)| 4 + 16 + l.iter().map(|(k, _)| k.len() + 24).sum::<usize>()).sum::<usize>();
        c.choices.memory_bytes()
            + c.rec.memory_bytes()
            + c.lock.memory_bytes()
            + fb.capacity() * std::mem::size_of::<(u32, FallbackList)>()
            + fb_bytes
    }
    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }
    crate::engine::inner_lookups!(get, get_batch, get_u64);
}

impl Inner {
    /// Refuses an update that does not fit skeleton `p` (before any write).
    fn check_update(p: &Params, u: &Update) -> Result<()> {
        let Update { seed, blocks, choices, groups } = u;
        let (seed, blocks) = (*seed, *blocks);
        if seed != p.seed || blocks != p.blocks {
            return Err(Error::DeltaMismatch(format!(
                "delta is for skeleton (seed {seed:#x}, {blocks} blocks), table has (seed {:#x}, {} blocks)",
                p.seed, p.blocks
            )));
        }
        for (b, _) in choices {
            if *b >= p.blocks {
                return Err(Error::DeltaMismatch(format!("block {b} outside {} blocks", p.blocks)));
            }
        }
        let wm = mask(p.width());
        for u in groups {
            if u.g as usize >= p.groups() {
                return Err(Error::DeltaMismatch(format!("group {} outside {} groups", u.g, p.groups())));
            }
            match &u.body {
                GroupBody::Record(e) => {
                    if e.len() != p.vbits as usize {
                        return Err(Error::DeltaMismatch(format!(
                            "group record with {} elements for {} value bits",
                            e.len(),
                            p.vbits
                        )));
                    }
                    if e.iter().any(|&x| x & !wm != 0) {
                        return Err(Error::DeltaMismatch("group record element wider than x+y bits".into()));
                    }
                    if e[0] & p.marker() == p.marker() {
                        return Err(Error::DeltaMismatch("solved group record carries the fallback marker".into()));
                    }
                }
                GroupBody::Fallback(list) => {
                    if list.iter().any(|(_, v)| v & !mask(p.vbits) != 0) {
                        return Err(Error::DeltaMismatch("fallback value wider than the table's value bits".into()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Fallback table with `updates` merged in. With `keep_old`, keys of the
    /// old lists that the new lists lack are kept, and groups leaving the
    /// fallback keep their lists (the interim table, valid for both the old
    /// and the new records).
    fn merged(old: &Fallback, groups: &[GroupUpdate], keep_old: bool) -> Fallback {
        let mut m: std::collections::BTreeMap<u32, FallbackList> = old.iter().cloned().collect();
        for u in groups {
            match &u.body {
                GroupBody::Fallback(list) => {
                    let prev = m.get(&u.g).filter(|_| keep_old);
                    if prev.is_none_or(|prev| prev.iter().all(|(k, _)| list.iter().any(|(k2, _)| k2 == k))) {
                        m.insert(u.g, list.clone());
                        continue;
                    }
                    let mut v: Vec<(Box<[u8]>, u64)> = list.to_vec();
                    if let Some(prev) = prev {
                        for (k, x) in prev.iter() {
                            if !list.iter().any(|(k2, _)| k2 == k) {
                                v.push((k.clone(), *x));
                            }
                        }
                    }
                    m.insert(u.g, v.into());
                }
                GroupBody::Record(_) => {
                    if !keep_old {
                        m.remove(&u.g);
                    }
                }
            }
        }
        m.into_iter().collect()
    }

    /// Writes a checked update: an interim fallback table valid for the old
    /// and the new records, the choices and records under the seqlocks of
    /// their blocks, then the final fallback table.
    fn apply_update(&self, choices: &[(u32, [u8; CHOICE_BYTES])], groups: &[GroupUpdate]) {
        let c = self;
        let p = &c.p;
        let touches_fb = {
            let fb = c.fallback.load();
            groups
                .iter()
                .any(|u| matches!(u.body, GroupBody::Fallback(_)) || fb.binary_search_by_key(&u.g, |(h, _)| *h).is_ok())
        };
        if touches_fb {
            let interim = Self::merged(&c.fallback.load(), groups, true);
            c.fallback.replace(interim);
        }
        let mut stripes = StripeSet::new();
        for (b, _) in choices {
            stripes.add(*b as usize & c.smask);
        }
        for u in groups {
            stripes.add((u.g as usize / GROUPS_PER_BLOCK) & c.smask);
        }
        let st = stripes.finish();
        let l = p.vbits as usize;
        c.lock.write_begin(st);
        for (b, bytes) in choices {
            let base = *b as usize * BUCKETS_PER_BLOCK;
            for j in 0..BUCKETS_PER_BLOCK {
                c.choices.set(base + j, ((bytes[j / 4] >> ((j % 4) * 2)) & 3) as u64);
            }
        }
        for u in groups {
            let base = u.g as usize * l;
            match &u.body {
                GroupBody::Record(e) => {
                    for (b, &x) in e.iter().enumerate() {
                        c.rec.set(p, base + b, x);
                    }
                }
                GroupBody::Fallback(_) => {
                    c.rec.set(p, base, p.marker());
                    for b in 1..l {
                        c.rec.set(p, base + b, 0);
                    }
                }
            }
        }
        c.lock.write_end(st);
        if touches_fb {
            let fin = Self::merged(&c.fallback.load(), groups, false);
            c.fallback.replace(fin);
        }
    }
}

impl Inner {
    #[inline(always)]
    pub(crate) fn get(&self, key: &[u8]) -> Option<u64> {
        self.read_once(key, hash64(key, self.p.seed))
    }

    /// `get(&u64_key(key))`: the same hash bit for bit
    /// ([`crate::hash::hash_u64`]), with the seed's constant precomputed.
    #[inline(always)]
    pub(crate) fn get_u64(&self, key: u64) -> Option<u64> {
        let h = crate::hash::hash_word_flipped(key.rotate_left(32), 8, self.flip8);
        self.read_once(&key.to_le_bytes(), h)
    }

    /// Algorithm 1 (§5.1): three passes over a batch — hash and prefetch the
    /// bucket choices; read the choices and prefetch the group records; read
    /// the records and evaluate. For l ≥ 4 the first pass also prefetches the
    /// four candidate records of each key's bucket.
    pub(crate) fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        let c = self;
        let p = c.p;
        let l = p.vbits as usize;
        let mut kh = [super::KeyHash { bucket: 0, g1: 0, g2: 0 }; BATCH];
        let mut hs = [0u64; BATCH];
        let mut gs = [(0usize, 0u64); BATCH];
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let n = ks.len().min(os.len());
            for i in 0..n {
                hs[i] = hash64(ks[i], p.seed);
                kh[i] = p.key_hash(hs[i]);
                prefetch(c.choices.word_ptr(kh[i].bucket));
                if l >= SPECULATE_FROM_BITS {
                    // The four candidate records are known from the bucket
                    // alone: fetching them now overlaps the second stage's
                    // memory round trip with the first.
                    for ch in 0..4 {
                        prefetch(c.rec.group_ptrs(p.group(kh[i].bucket, ch), l).0);
                    }
                }
            }
            for i in 0..n {
                let s = c.stripe(kh[i].bucket);
                let ver = c.lock.read_begin(s);
                let g = p.group(kh[i].bucket, c.choice(kh[i].bucket));
                gs[i] = (g, ver);
                let (first, last) = c.rec.group_ptrs(g, l);
                prefetch(first);
                if l > 1 {
                    prefetch(last);
                }
            }
            for i in 0..n {
                let (g, ver) = gs[i];
                let r = match c.eval(g, kh[i].g1, kh[i].g2) {
                    Eval::Value(v) if c.lock.read_validate(c.stripe(kh[i].bucket), ver) => Some(v),
                    _ => c.read(ks[i], hs[i]),
                };
                os[i] = r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 evaluation of an l = 8 record equals the per-bit
    /// definition (§4.1: bit `b` is bit `pos(index_b)` of array `b`) for
    /// random records and key hashes, including indices and multipliers at
    /// the extremes.
    #[test]
    fn avx2_record_evaluation_equals_the_definition() {
        if !avx2_detected() {
            eprintln!("no AVX2 on this CPU: only the portable evaluation runs here");
            return;
        }
        let mut x = 0x0123_4567_89ab_cdefu64;
        let mut next = || {
            x = crate::hash::mix64(x);
            x
        };
        for round in 0..200_000u32 {
            let mut w = [next(), next(), next()];
            if round % 7 == 0 {
                w[0] |= 0xffff_0000_ffff_0000;
            }
            let (g1, g2) = match round % 5 {
                0 => (u32::MAX, u32::MAX),
                1 => (0, next() as u32),
                _ => (next() as u32, (next() >> 32) as u32),
            };
            let want = (0..8u32).fold(0u64, |v, b| {
                let idx = ((w[(b / 4) as usize] >> (16 * (b % 4))) & 0xffff) as u32;
                let arr = (w[2] >> (8 * b)) & 0xff;
                let pos = g1.wrapping_add(idx.wrapping_mul(g2)) >> 29;
                v | ((arr >> pos) & 1) << b
            });
            let words: Vec<AtomicU64> = w.iter().map(|&v| AtomicU64::new(v)).collect();
            // SAFETY: AVX2 was detected; `words` holds three live words.
            let got = unsafe { eval8_avx2(words.as_ptr(), g1, g2) };
            assert_eq!(got, want, "record {w:x?} g1 {g1:#x} g2 {g2:#x}");
        }
    }

    /// A lookup form on the AVX2 path answers every present and absent key
    /// as the same snapshot on the portable path does (l = 8, the
    /// word-aligned records), through `get` and `get_u64`.
    #[test]
    fn simd8_path_answers_like_the_portable_path() {
        use crate::{ControlTable, LookupTable};
        let items: Vec<([u8; 8], u64)> =
            (0..20_000u64).map(|i| (crate::hash::mix64(i).to_le_bytes(), crate::hash::mix64(i ^ 9) & 0xff)).collect();
        let ctl = crate::setsep::Control::from_items(items.iter().map(|(k, v)| (*k, *v)), 8).unwrap();
        let lk = ctl.export();
        let inner = lk.raw.load_full();
        let fast = Inner::new(SetSep::image(&inner));
        let mut slow = Inner::new(SetSep::image(&inner));
        slow.simd8 = false;
        assert_eq!(fast.simd8, avx2_detected(), "l = 8 records are word-aligned");
        for (k, v) in &items {
            let w = u64::from_le_bytes(*k);
            assert_eq!(slow.get(k), Some(*v));
            assert_eq!(fast.get(k), Some(*v));
            assert_eq!(fast.get_u64(w), Some(*v));
            assert_eq!(lk.get_u64(w), Some(*v));
        }
        for i in 0..20_000u64 {
            let w = crate::hash::mix64(i ^ 1 << 45);
            assert_eq!(fast.get_u64(w), slow.get_u64(w), "absent key {w:#x}");
            assert_eq!(fast.get(&w.to_le_bytes()), slow.get(&w.to_le_bytes()));
        }
    }
}
