//! The verification array of one prefix length (Chisel's "filter table",
//! Hasan et al., ISCA 2006, §3.2): slot `i` holds the prefix that the
//! length's Othello index maps to `i`, and its next hop. A lookup reads the
//! slot its Othello answer names and accepts it only if the stored prefix
//! equals the address's prefix, so the arbitrary answer that Othello gives
//! for a prefix it never stored (Concise §VII-A) can only ever land on a
//! slot holding a *different* prefix and is rejected.
//!
//! Layout, one writer and any number of readers, atomics only:
//!
//! * IPv4: one `AtomicU64` per slot, `prefix << 32 | valid << 31 | next_hop`,
//!   read with a single load.
//! * IPv6: three words per slot, `gen << 32 | valid << 31 | next_hop`, then
//!   the prefix's high and low 64 bits. The generation makes the three words
//!   a per-slot seqlock (odd while the writer is changing the slot).

use std::sync::atomic::{AtomicU64, Ordering, fence};

pub(crate) const VALID: u64 = 1 << 31;
const NH_MASK: u64 = VALID - 1;

/// One slot's contents: `(prefix bits, next hop)`.
pub(crate) type Entry = Option<(u128, u32)>;

#[derive(Debug)]
pub(crate) struct Slots {
    w: Box<[AtomicU64]>,
    v6: bool,
}

impl Slots {
    /// `n` empty slots.
    pub fn new(n: usize, v6: bool) -> Self {
        let w = crate::bits::zeroed_atomics(n * if v6 { 3 } else { 1 });
        crate::mem::advise_hugepages(&w);
        Self { w, v6 }
    }

    /// Slots holding `entries`.
    pub fn from_entries(entries: &[Entry], v6: bool) -> Self {
        let s = Self::new(entries.len(), v6);
        for (i, e) in entries.iter().enumerate() {
            if e.is_some() {
                s.set(i, *e);
            }
        }
        s
    }

    pub fn len(&self) -> usize {
        if self.v6 { self.w.len() / 3 } else { self.w.len() }
    }

    pub fn memory_bytes(&self) -> usize {
        self.w.len() * 8
    }

    /// Prefetches slot `i` (nothing when out of range).
    #[inline(always)]
    pub fn prefetch(&self, i: usize) {
        let at = if self.v6 { i.wrapping_mul(3) } else { i };
        if let Some(w) = self.w.get(at) {
            crate::mem::prefetch(w as *const AtomicU64);
        }
    }

    /// The slot's contents; `None` for an empty slot or one out of range.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Entry {
        if !self.v6 {
            let w = self.w.get(i)?.load(Ordering::Acquire);
            return if w & VALID != 0 { Some(((w >> 32) as u128, (w & NH_MASK) as u32)) } else { None };
        }
        let at = i.checked_mul(3)?;
        let [m, hi, lo] = self.w.get(at..at + 3)? else { return None };
        loop {
            let m1 = m.load(Ordering::Acquire);
            if (m1 >> 32) & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            if m1 & VALID == 0 {
                return None;
            }
            let k = (hi.load(Ordering::Relaxed) as u128) << 64 | lo.load(Ordering::Relaxed) as u128;
            fence(Ordering::Acquire);
            if m.load(Ordering::Relaxed) == m1 {
                return Some((k, (m1 & NH_MASK) as u32));
            }
        }
    }

    /// Writes slot `i` (single writer; `i` in range, next hop < 2^31).
    pub fn set(&self, i: usize, e: Entry) {
        let meta = match e {
            Some((_, nh)) => VALID | (nh as u64 & NH_MASK),
            None => 0,
        };
        if !self.v6 {
            let w = match e {
                Some((k, _)) => (k as u64) << 32 | meta,
                None => 0,
            };
            self.w[i].store(w, Ordering::Release);
            return;
        }
        let (m, hi, lo) = (&self.w[3 * i], &self.w[3 * i + 1], &self.w[3 * i + 2]);
        let g = (m.load(Ordering::Relaxed) >> 32).wrapping_add(1) & 0xffff_ffff; // odd: being written
        m.store(g << 32, Ordering::Relaxed);
        fence(Ordering::Release);
        let k = e.map_or(0, |(k, _)| k);
        hi.store((k >> 64) as u64, Ordering::Relaxed);
        lo.store(k as u64, Ordering::Relaxed);
        let g = g.wrapping_add(1) & 0xffff_ffff;
        m.store(g << 32 | meta, Ordering::Release);
    }

    /// Every slot's contents.
    pub fn entries(&self) -> Vec<Entry> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}
