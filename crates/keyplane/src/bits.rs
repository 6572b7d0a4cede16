//! Packed arrays of l-bit elements (1 ≤ l ≤ 64) over atomic words.
//!
//! Elements are stored back to back with no wasted bits; an element may
//! straddle two words. One padding word at the end makes every read a
//! branch-free two-word load. Words are `AtomicU64` so that a writer can
//! update elements in place while readers keep reading without a data race;
//! `Relaxed` loads and stores compile to plain moves on x86-64 and AArch64.
//! Consistency of multi-element updates is the caller's business (see
//! `StripedSeqLock`).

use crate::error::mask;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A fixed-length array of `bits`-wide unsigned elements.
#[derive(Debug)]
pub struct PackedArray {
    words: Box<[AtomicU64]>,
    len: usize,
    bits: u32,
    mask: u64,
}

impl Clone for PackedArray {
    fn clone(&self) -> Self {
        // Advise huge pages before the copy touches the pages: exported
        // lookup forms are clones, and large ones need the advice.
        let words = zeroed_atomics(self.words.len());
        crate::mem::advise_hugepages(&words);
        for (d, s) in words.iter().zip(self.words.iter()) {
            d.store(s.load(Relaxed), Relaxed);
        }
        Self { words, len: self.len, bits: self.bits, mask: self.mask }
    }
}

impl PartialEq for PackedArray {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.bits == other.bits
            && self.words.iter().zip(other.words.iter()).all(|(a, b)| a.load(Relaxed) == b.load(Relaxed))
    }
}
impl Eq for PackedArray {}

/// `n` zeroed atomic words from a zeroed (calloc) allocation.
pub(crate) fn zeroed_atomics(n: usize) -> Box<[AtomicU64]> {
    let v: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    let len = v.len();
    let p = Box::into_raw(v) as *mut AtomicU64;
    // SAFETY: AtomicU64 has the same size, alignment and bit validity as u64
    // (documented in std), and the pointer comes from a Box<[u64]> of `len`
    // elements, so it is a valid Box<[AtomicU64]> of `len` elements.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) }
}

/// Number of u64 words (including the padding word) for `len` elements of `bits`.
pub(crate) const fn words_for(len: usize, bits: u32) -> usize {
    (len * bits as usize).div_ceil(64) + 1
}

impl PackedArray {
    /// `len` zeroed elements of `bits` bits. Panics only if `bits` is not in 1..=64
    /// (a programming error inside the library; public constructors validate first).
    pub fn new(len: usize, bits: u32) -> Self {
        assert!((1..=64).contains(&bits), "element width must be 1..=64");
        let n = words_for(len, bits);
        // A zeroed allocation is mapped lazily, so huge-page advice given now
        // applies before the first touch.
        let v = zeroed_atomics(n);
        crate::mem::advise_hugepages(&v);
        Self { words: v, len, bits, mask: mask(bits) }
    }

    /// Builds from raw words (as decoded from a blob). Returns `None` if the
    /// word count does not match `len` and `bits`.
    pub(crate) fn from_words(words: Vec<u64>, len: usize, bits: u32) -> Option<Self> {
        if !(1..=64).contains(&bits) || words.len() != words_for(len, bits) {
            return None;
        }
        if words.len() >= crate::mem::HUGE_ADVICE_MIN_WORDS {
            // The decoded words were written (their pages touched) before any
            // advice could be given, and the kernel backs a touched region with
            // huge pages only much later, if ever: copy a large array into a
            // fresh allocation advised before its first touch, as `new` and
            // `clone` do (a lookup form decoded from a blob then reads through
            // 2 MiB pages like an exported one).
            let v = zeroed_atomics(words.len());
            crate::mem::advise_hugepages(&v);
            for (d, s) in v.iter().zip(&words) {
                d.store(*s, Relaxed);
            }
            return Some(Self { words: v, len, bits, mask: mask(bits) });
        }
        let v: Vec<AtomicU64> = words.into_iter().map(AtomicU64::new).collect();
        Some(Self { words: v.into_boxed_slice(), len, bits, mask: mask(bits) })
    }

    /// Copies the words out (for encoding).
    pub(crate) fn to_words(&self) -> Vec<u64> {
        self.words.iter().map(|w| w.load(Relaxed)).collect()
    }

    /// Number of elements.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
    /// Element width in bits.
    #[inline]
    pub(crate) fn bits(&self) -> u32 {
        self.bits
    }
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Reads element `i`. `i` must be `< len` (checked in debug builds; an
    /// out-of-range index in release reads padding or panics on the slice
    /// bound, never undefined behaviour).
    #[inline(always)]
    pub fn get(&self, i: usize) -> u64 {
        debug_assert!(i < self.len);
        let bit = i * self.bits as usize;
        let w = bit >> 6;
        let off = (bit & 63) as u32;
        let lo = self.words[w].load(Relaxed) >> off;
        if off + self.bits <= 64 {
            // Never taken for widths that divide 64, so the branch is free
            // there, and the next word (maybe another cache line) is not touched.
            lo & self.mask
        } else {
            (lo | (self.words[w + 1].load(Relaxed) << (64 - off))) & self.mask
        }
    }

    /// Raw word `i` (a relaxed load), for readers that decode several
    /// neighbouring elements at once.
    #[inline(always)]
    pub(crate) fn word(&self, i: usize) -> u64 {
        self.words[i].load(Relaxed)
    }

    /// The raw words (with the padding word), for readers that decode
    /// several elements from whole words.
    #[inline(always)]
    pub(crate) fn raw_words(&self) -> &[AtomicU64] {
        &self.words
    }

    /// Address of the first word, for prefetching by word index
    /// (`wrapping_add` keeps out-of-range indices harmless: prefetches never fault).
    #[inline(always)]
    pub(crate) fn words_ptr(&self) -> *const AtomicU64 {
        self.words.as_ptr()
    }

    /// Address of the word holding element `i` (for prefetching).
    #[inline(always)]
    pub fn word_ptr(&self, i: usize) -> *const u8 {
        let w = (i * self.bits as usize) >> 6;
        self.words[w.min(self.words.len() - 1)].as_ptr() as *const u8
    }

    /// Writes element `i`. Single writer; concurrent readers see either
    /// word's old or new contents (use a seqlock for multi-word consistency).
    #[inline]
    pub fn set(&self, i: usize, v: u64) {
        debug_assert!(i < self.len);
        let v = v & self.mask;
        let bit = i * self.bits as usize;
        let w = bit >> 6;
        let off = (bit & 63) as u32;
        let m = self.mask;
        let w0 = self.words[w].load(Relaxed);
        self.words[w].store((w0 & !(m << off)) | (v << off), Relaxed);
        if off + self.bits > 64 {
            let sh = 64 - off;
            let w1 = self.words[w + 1].load(Relaxed);
            self.words[w + 1].store((w1 & !(m >> sh)) | (v >> sh), Relaxed);
        }
    }

    /// XORs `d` into element `i`.
    #[inline]
    pub(crate) fn xor(&self, i: usize, d: u64) {
        let cur = self.get(i);
        self.set(i, cur ^ d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    #[test]
    fn matches_a_plain_vector_for_every_width() {
        let mut rng = StdRng::seed_from_u64(1);
        for bits in 1..=64u32 {
            let n = 200;
            let a = PackedArray::new(n, bits);
            let mut oracle = vec![0u64; n];
            for _ in 0..2000 {
                let i = rng.gen_range(0..n);
                let v = rng.r#gen::<u64>() & mask(bits);
                if rng.gen_bool(0.5) {
                    a.set(i, v);
                    oracle[i] = v;
                } else {
                    a.xor(i, v);
                    oracle[i] ^= v;
                }
            }
            for (i, &o) in oracle.iter().enumerate() {
                assert_eq!(a.get(i), o, "bits={bits} i={i}");
            }
            let b = PackedArray::from_words(a.to_words(), n, bits).unwrap();
            assert_eq!(a, b);
        }
    }

    #[test]
    fn from_words_rejects_wrong_lengths() {
        assert!(PackedArray::from_words(vec![0; 3], 100, 8).is_none());
        assert!(PackedArray::from_words(vec![0; 14], 100, 0).is_none());
        assert!(PackedArray::from_words(vec![0; words_for(100, 8)], 100, 8).is_some());
    }
}
