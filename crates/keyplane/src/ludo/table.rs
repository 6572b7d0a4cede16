//! The bucket array (`seed | 4 slots`, bit-packed, Ludo §4.4.3) and the
//! overflow-seed table (Ludo §4.4.6 "Overflow seeds"), shared by the lookup
//! form and the maintenance structure's bit-exact shadow of it.

use super::{OVERFLOW_SEED, Params, SEED_BITS};
use crate::bits::{PackedArray, zeroed_atomics};
use crate::error::{Error, Result, mask};
use crate::hash::{mix64, reduce};
use crate::wire::{Reader, Writer};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Arbitrary-offset bit fields (width 1..=64) over atomic words, with one
/// padding word so every read is a branch-free two-word load.
#[derive(Debug)]
pub(crate) struct BitVec {
    words: Box<[AtomicU64]>,
}

impl Clone for BitVec {
    fn clone(&self) -> Self {
        // Huge-page advice before the copy touches the pages (exports are clones).
        let words = zeroed_atomics(self.words.len());
        crate::mem::advise_hugepages(&words);
        for (d, s) in words.iter().zip(self.words.iter()) {
            d.store(s.load(Relaxed), Relaxed);
        }
        Self { words }
    }
}

impl BitVec {
    pub fn words_for(nbits: usize) -> usize {
        nbits.div_ceil(64) + 1
    }

    pub fn new(nbits: usize) -> Self {
        let v = zeroed_atomics(Self::words_for(nbits));
        crate::mem::advise_hugepages(&v);
        Self { words: v }
    }

    pub fn from_words(words: Vec<u64>) -> Self {
        let v = zeroed_atomics(words.len());
        crate::mem::advise_hugepages(&v);
        for (d, s) in v.iter().zip(words) {
            d.store(s, Relaxed);
        }
        Self { words: v }
    }

    pub fn to_words(&self) -> Vec<u64> {
        self.words.iter().map(|w| w.load(Relaxed)).collect()
    }

    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }

    #[inline(always)]
    pub fn get(&self, pos: usize, w: u32) -> u64 {
        let i = pos >> 6;
        let off = (pos & 63) as u32;
        let lo = self.words[i].load(Relaxed) >> off;
        let hi = (self.words[i + 1].load(Relaxed) << 1) << (63 - off);
        (lo | hi) & mask(w)
    }

    #[inline]
    pub fn set(&self, pos: usize, w: u32, v: u64) {
        let m = mask(w);
        let v = v & m;
        let i = pos >> 6;
        let off = (pos & 63) as u32;
        let w0 = self.words[i].load(Relaxed);
        self.words[i].store((w0 & !(m << off)) | (v << off), Relaxed);
        if off + w > 64 {
            let sh = 64 - off;
            let w1 = self.words[i + 1].load(Relaxed);
            self.words[i + 1].store((w1 & !(m >> sh)) | (v >> sh), Relaxed);
        }
    }

    #[inline(always)]
    pub fn ptr(&self, pos: usize) -> *const u8 {
        self.words[(pos >> 6).min(self.words.len() - 1)].as_ptr() as *const u8
    }
}

/// Bucket array plus overflow table.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub p: Params,
    bw: usize,
    buckets: BitVec,
    /// Overflow entries `(bucket + 1) << 8 | seed`, 0 = empty; linear probing
    /// with backward-shift deletion.
    ov: PackedArray,
    ov_count: usize,
}

impl PartialEq for Table {
    fn eq(&self, o: &Self) -> bool {
        self.p == o.p && self.buckets.to_words() == o.buckets.to_words() && self.ov == o.ov
    }
}

/// Slots of an overflow table for `nb` buckets. Without `avoid_overflow`,
/// 5.5% of the bucket count: a full bucket overflows with probability
/// (29/32)^31 ≈ 4.7%, so at 95% load about 3.9% of buckets do; the table is
/// rebuilt larger beyond 7/8 load (4.8% of buckets, above the 4.7% ceiling of
/// the mean). With it, construction leaves no overflow bucket and inserts
/// create one only when no overflow-free cuckoo path exists: 1/1024 of the
/// bucket count (0.008 bits/key), doubled by a rebuild if it ever fills.
pub(crate) fn default_ov_cap(nb: u32, avoid_overflow: bool) -> usize {
    if avoid_overflow { (nb as usize / 1024).max(8) } else { (nb as usize * 11 / 200).max(8) }
}

fn bucket_bits(nb: u32) -> u32 {
    64 - (nb as u64).leading_zeros()
}

impl Table {
    pub fn new(p: Params, ov_cap: usize) -> Self {
        let bw = (SEED_BITS + 4 * p.sw()) as usize;
        Self {
            p,
            bw,
            buckets: BitVec::new(p.nb as usize * bw),
            ov: PackedArray::new(ov_cap.max(1), bucket_bits(p.nb) + 8),
            ov_count: 0,
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.buckets.memory_bytes() + self.ov.memory_bytes()
    }

    /// `(bucket array, overflow table)` heap bytes.
    pub fn memory_parts(&self) -> (usize, usize) {
        (self.buckets.memory_bytes(), self.ov.memory_bytes())
    }

    pub fn ov_cap(&self) -> usize {
        self.ov.len()
    }

    pub fn ov_count(&self) -> usize {
        self.ov_count
    }

    /// True if an overflow insert of a new bucket keeps the table at ≤ 7/8 load.
    pub fn ov_has_room(&self) -> bool {
        (self.ov_count + 1) * 8 <= self.ov.len() * 7
    }

    #[inline(always)]
    fn base(&self, b: u32) -> usize {
        b as usize * self.bw
    }

    /// Prefetches both ends of bucket `b`'s bits.
    #[inline(always)]
    pub fn prefetch_bucket(&self, b: u32) {
        let pos = self.base(b);
        let (first, last) = (self.buckets.ptr(pos), self.buckets.ptr(pos + self.bw - 1));
        crate::mem::prefetch(first);
        // The second cache line only when the bucket straddles one.
        if (first as usize) >> 6 != (last as usize) >> 6 {
            crate::mem::prefetch(last);
        }
    }

    /// All bits of bucket `b` (seed in the low bits) when a bucket fits in
    /// 64 bits, else `None`.
    #[inline(always)]
    pub fn small_bucket(&self, b: u32) -> Option<u64> {
        if self.bw <= 64 { Some(self.buckets.get(self.base(b), self.bw as u32)) } else { None }
    }

    #[inline(always)]
    pub fn inline_seed(&self, b: u32) -> u32 {
        self.buckets.get(self.base(b), SEED_BITS) as u32
    }

    #[inline(always)]
    pub fn slot(&self, b: u32, t: usize) -> u64 {
        let sw = self.p.sw();
        self.buckets.get(self.base(b) + SEED_BITS as usize + t * sw as usize, sw)
    }

    #[inline(always)]
    fn home(&self, b: u32) -> usize {
        reduce(mix64(b as u64) as u32, self.ov.len() as u32) as usize
    }

    /// Overflow seed of bucket `b`; probes at most the whole table.
    #[inline]
    pub fn ov_seed(&self, b: u32) -> Option<u32> {
        let cap = self.ov.len();
        let mut i = self.home(b);
        let want = b as u64 + 1;
        for _ in 0..cap {
            let e = self.ov.get(i);
            if e == 0 {
                return None;
            }
            if e >> 8 == want {
                return Some((e & 0xff) as u32);
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
        None
    }

    fn ov_pos(&self, b: u32) -> Option<usize> {
        let cap = self.ov.len();
        let mut i = self.home(b);
        for _ in 0..cap {
            let e = self.ov.get(i);
            if e == 0 {
                return None;
            }
            if e >> 8 == b as u64 + 1 {
                return Some(i);
            }
            i = (i + 1) % cap;
        }
        None
    }

    /// Inserts or overwrites an overflow seed. `false` when the table is full.
    fn ov_set(&mut self, b: u32, seed: u32) -> bool {
        self.ov_set_shared(b, seed).map(|added| self.ov_count += added as usize).is_some()
    }

    /// As `ov_set` through `&self` (lookup form; the count is kept by the caller).
    /// Returns whether a new entry was added, or `None` when full.
    pub fn ov_set_shared(&self, b: u32, seed: u32) -> Option<bool> {
        let e = (b as u64 + 1) << 8 | seed as u64;
        if let Some(i) = self.ov_pos(b) {
            self.ov.set(i, e);
            return Some(false);
        }
        let cap = self.ov.len();
        let mut i = self.home(b);
        for _ in 0..cap {
            if self.ov.get(i) == 0 {
                self.ov.set(i, e);
                return Some(true);
            }
            i = (i + 1) % cap;
        }
        None
    }

    /// Removes bucket `b`'s overflow entry (backward-shift deletion). Returns
    /// whether one was there.
    pub fn ov_remove_shared(&self, b: u32) -> bool {
        let Some(mut i) = self.ov_pos(b) else { return false };
        let cap = self.ov.len();
        self.ov.set(i, 0);
        let mut j = i;
        for _ in 0..cap {
            j = (j + 1) % cap;
            let e = self.ov.get(j);
            if e == 0 {
                break;
            }
            let k = self.home((e >> 8).wrapping_sub(1) as u32);
            // Entry at j may move to the hole at i unless its home lies cyclically in (i, j].
            let in_range = if i <= j { i < k && k <= j } else { i < k || k <= j };
            if !in_range {
                self.ov.set(i, e);
                self.ov.set(j, 0);
                i = j;
            }
        }
        true
    }

    /// Writes the slots of a bucket (not its seed).
    pub fn write_slots(&self, b: u32, slots: &[u64; 4]) {
        let sw = self.p.sw();
        let base = self.base(b) + SEED_BITS as usize;
        for (t, &v) in slots.iter().enumerate() {
            self.buckets.set(base + t * sw as usize, sw, v);
        }
    }

    /// Writes the inline seed field.
    pub fn write_inline_seed(&self, b: u32, s: u32) {
        self.buckets.set(self.base(b), SEED_BITS, s as u64);
    }

    /// Writes one slot.
    pub fn write_slot(&self, b: u32, t: usize, v: u64) {
        let sw = self.p.sw();
        self.buckets.set(self.base(b) + SEED_BITS as usize + t * sw as usize, sw, v);
    }

    /// Control-side: sets a bucket's seed and slots (overflow table kept in
    /// step). `false` if the overflow table is full (nothing written).
    pub fn set_bucket(&mut self, b: u32, seed: u32, slots: &[u64; 4]) -> bool {
        if seed >= OVERFLOW_SEED {
            if !self.ov_set(b, seed) {
                return false;
            }
            self.write_inline_seed(b, OVERFLOW_SEED);
        } else {
            if self.inline_seed(b) == OVERFLOW_SEED && self.ov_remove_shared(b) {
                self.ov_count -= 1;
            }
            self.write_inline_seed(b, seed);
        }
        self.write_slots(b, slots);
        true
    }

    /// New slots of a path node's bucket (Ludo §4.4.8): `order[t]` names the
    /// source of new slot `t` (0..=3 an old slot of the same bucket, 4 the
    /// incoming value, 5 empty); the incoming value is read from slot
    /// `from.1` of bucket `from.0` (not yet rewritten) or is `first`.
    pub fn node_slots(&self, b: u32, order: &[u8; 4], from: Option<(u32, u8)>, first: u64) -> [u64; 4] {
        let old = [self.slot(b, 0), self.slot(b, 1), self.slot(b, 2), self.slot(b, 3)];
        let inc = match from {
            Some((fb, fs)) => self.slot(fb, fs as usize & 3),
            None => first,
        };
        let mut new = [0u64; 4];
        for (n, &o) in new.iter_mut().zip(order) {
            *n = match o {
                0..=3 => old[o as usize],
                4 => inc,
                _ => 0,
            };
        }
        new
    }

    pub fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.buckets.to_words());
        w.u64(self.ov.len() as u64);
        w.u64s(&self.ov.to_words());
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let bw = (SEED_BITS + 4 * p.sw()) as usize;
        let words = r.u64s()?;
        if words.len() != BitVec::words_for(p.nb as usize * bw) {
            return Err(Error::Corrupt("bucket array length does not match the bucket count".into()));
        }
        let cap = r.u64()?;
        let ovw = r.u64s()?;
        if cap == 0 || cap > 4 * p.nb as u64 + 16 {
            return Err(Error::Corrupt(format!("overflow table of {cap} slots for {} buckets", p.nb)));
        }
        let ov = PackedArray::from_words(ovw, cap as usize, bucket_bits(p.nb) + 8)
            .ok_or_else(|| Error::Corrupt("overflow table length does not match its size".into()))?;
        let mut t = Table { p, bw, buckets: BitVec::from_words(words), ov, ov_count: 0 };
        // Every entry names a real bucket exactly once and is reachable from
        // its home; every inline-31 bucket has an entry with a seed ≥ 31.
        let mut n = 0;
        for i in 0..t.ov.len() {
            let e = t.ov.get(i);
            if e == 0 {
                continue;
            }
            let b = (e >> 8).wrapping_sub(1);
            if b >= p.nb as u64 || t.ov_pos(b as u32) != Some(i) || (e & 0xff) < OVERFLOW_SEED as u64 {
                return Err(Error::Corrupt(format!("overflow entry {i} is invalid")));
            }
            n += 1;
        }
        if n == t.ov.len() {
            return Err(Error::Corrupt("overflow table has no empty slot".into()));
        }
        t.ov_count = n;
        for b in 0..p.nb {
            if t.inline_seed(b) == OVERFLOW_SEED && t.ov_seed(b).is_none() {
                return Err(Error::Corrupt(format!("bucket {b} has an overflow seed but no overflow entry")));
            }
        }
        Ok(t)
    }
}
