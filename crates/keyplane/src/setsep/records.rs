//! The lookup form's group records in memory.
//!
//! Blobs and deltas carry the records as one packed array of `groups · l`
//! elements of `x + y` bits (element `g · l + b` is value bit `b` of group
//! `g`: its hash index in the low `x` bits, its array above). That layout is
//! unchanged on the wire. In memory, the lookup form re-lays the records out
//! word-aligned when it can ([`Records::Words`]), so a lookup reads a group
//! as a few whole words and decodes each value bit from registers with
//! constant shifts, instead of one unaligned element extraction per bit.

use super::Params;
use crate::bits::{PackedArray, zeroed_atomics};
use crate::error::mask;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Group records as the lookup form holds them.
#[derive(Debug)]
pub(crate) enum Records {
    /// `l % 8 == 0`, `x = 16`, `y = 8` (the default `16 + 8`, with the
    /// paper's l = 8 or any multiple of 8): with `k = l / 8`, group `g` is the `3k` words from
    /// `3k · g`: `2k` words of 16-bit hash indices (value bit `b`'s at bits
    /// `16 · (b % 4)` of word `b / 4`), then `k` words of 8-bit arrays (bit
    /// `b`'s at bits `8 · (b % 8)` of word `2k + b / 8`).
    /// Exactly as large as the packed form (24 bits per element); narrower
    /// shapes stay packed, so the in-memory form is never larger. The slice holds
    /// exactly `groups · 3k` words (the lookup relies on it).
    Words {
        /// The words.
        words: Box<[AtomicU64]>,
        /// `k = l / 8`.
        k: usize,
    },
    /// Any other shape: the wire's packed array itself.
    Packed(PackedArray),
}

impl Records {
    /// Whether skeleton `p` gets the word-aligned layout.
    pub(crate) fn aligned(p: &Params) -> bool {
        p.vbits % 8 == 0 && p.xbits == 16 && p.ybits == 8
    }

    /// The in-memory records of a packed array of `p.groups() · l`
    /// elements (elements past the array's end read as 0).
    pub(crate) fn from_packed(p: &Params, rec: PackedArray) -> Self {
        if !Self::aligned(p) {
            return Records::Packed(rec);
        }
        let l = p.vbits as usize;
        let k = l / 8;
        let words = zeroed_atomics(p.groups() * 3 * k);
        crate::mem::advise_hugepages(&words);
        let r = Records::Words { words, k };
        let n = (p.groups() * l).min(rec.len());
        for i in 0..n {
            r.set(p, i, rec.get(i));
        }
        r
    }

    /// The packed array the wire carries (a copy).
    pub(crate) fn to_packed(&self, p: &Params) -> PackedArray {
        match self {
            Records::Packed(rec) => rec.clone(),
            Records::Words { .. } => {
                let n = p.groups() * p.vbits as usize;
                let out = PackedArray::new(n, p.width());
                for i in 0..n {
                    out.set(i, self.get(p, i));
                }
                out
            }
        }
    }

    /// Word index and shift of element `i`'s index and array fields.
    #[inline(always)]
    fn locate(k: usize, i: usize) -> ((usize, u32), (usize, u32)) {
        let (g, b) = (i / (8 * k), i % (8 * k));
        let base = g * 3 * k;
        ((base + b / 4, 16 * (b % 4) as u32), (base + 2 * k + b / 8, 8 * (b % 8) as u32))
    }

    /// Element `i` (`index | array << x`).
    pub(crate) fn get(&self, p: &Params, i: usize) -> u64 {
        match self {
            Records::Packed(rec) => rec.get(i),
            Records::Words { words, k } => {
                let ((wi, si), (wa, sa)) = Self::locate(*k, i);
                let idx = (words[wi].load(Relaxed) >> si) & 0xffff;
                let arr = (words[wa].load(Relaxed) >> sa) & 0xff;
                idx | arr << p.xbits
            }
        }
    }

    /// Writes element `i` (single writer, under the block's seqlock; `v`
    /// is masked to `x + y` bits).
    pub(crate) fn set(&self, p: &Params, i: usize, v: u64) {
        match self {
            Records::Packed(rec) => rec.set(i, v),
            Records::Words { words, k } => {
                let v = v & mask(p.width());
                let ((wi, si), (wa, sa)) = Self::locate(*k, i);
                let put = |w: usize, s: u32, m: u64, x: u64| {
                    let old = words[w].load(Relaxed);
                    words[w].store((old & !(m << s)) | (x << s), Relaxed);
                };
                put(wi, si, 0xffff, v & mask(p.xbits));
                put(wa, sa, 0xff, v >> p.xbits);
            }
        }
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        match self {
            Records::Packed(rec) => rec.memory_bytes(),
            Records::Words { words, .. } => words.len() * 8,
        }
    }

    /// Addresses of the first and last byte of group `g`'s record with `l`
    /// elements (for prefetching; never dereferenced here).
    #[inline(always)]
    pub(crate) fn group_ptrs(&self, g: usize, l: usize) -> (*const u8, *const u8) {
        match self {
            Records::Packed(rec) => (rec.word_ptr(g * l), rec.word_ptr(g * l + l - 1)),
            Records::Words { words, k } => {
                let base = words.as_ptr().wrapping_add(g * 3 * k) as *const u8;
                (base, base.wrapping_add(3 * k * 8 - 1))
            }
        }
    }
}
