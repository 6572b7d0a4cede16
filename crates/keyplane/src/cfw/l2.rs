//! Level 2 of the lookup form: a small full-key table for the keys whose
//! fingerprints collide (thesis §3.4.2, Fig. 3.2).
//!
//! Open addressing with linear probing over three atomic arrays: `slots`
//! (0 = empty, 1 = deleted, otherwise `arena offset + 2`), `vals`, and a key
//! arena where each key is stored as its length followed by its bytes in
//! little-endian words. Only the single writer mutates it, always inside the
//! level-2 seqlock stripe, so a reader that raced a write retries; every read
//! is bounds-checked, so a torn read can only produce a miss that the seqlock
//! then discards. Deletes leave tombstones; when the arena or the slot array
//! runs out, the writer builds a fresh, compacted table and swaps it in
//! (`ArcSwap`), readers on the old table finish there.
//!
//! Level 2 holds only colliding keys (a fraction `1 − η` of all keys), so it
//! is deliberately simple rather than compact: about `24 + 8·⌈len/8⌉` bytes
//! per entry at the sizing used here.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::Release};

const EMPTY: u64 = 0;
const TOMB: u64 = 1;

#[derive(Debug)]
pub(crate) struct L2 {
    slots: Box<[AtomicU64]>,
    vals: Box<[AtomicU64]>,
    arena: Box<[AtomicU64]>,
    mask: usize,
    used: AtomicUsize,
    live: AtomicUsize,
    tombs: AtomicUsize,
}

#[inline(always)]
fn key_word(chunk: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..chunk.len()].copy_from_slice(chunk);
    u64::from_le_bytes(b)
}

#[inline(always)]
fn words_of(len: usize) -> usize {
    1 + len.div_ceil(8)
}

#[inline(always)]
fn start(h: u64, mask: usize) -> usize {
    (crate::hash::mix64(h ^ 0x4c32_4c32) as usize) & mask
}

fn atomics(n: usize) -> Box<[AtomicU64]> {
    crate::bits::zeroed_atomics(n)
}

impl L2 {
    /// A table sized for `entries` (plus room to grow).
    pub fn build<'a>(entries: impl Iterator<Item = (&'a [u8], u64, u64)> + Clone) -> Self {
        let count = entries.clone().count();
        let words: usize = entries.clone().map(|(k, _, _)| words_of(k.len())).sum();
        // Load between 3/8 and 3/4 after a build; ~25 % arena slack.
        let cap = ((count + 1) * 4 / 3 + 1).next_power_of_two().max(8);
        let arena_len = (words + words / 4 + 16).max(32);
        let t = L2 {
            slots: atomics(cap),
            vals: atomics(cap),
            arena: atomics(arena_len),
            mask: cap - 1,
            used: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            tombs: AtomicUsize::new(0),
        };
        for (k, h, v) in entries {
            let ok = t.put(k, h, v);
            debug_assert!(ok, "fresh level-2 table has room");
        }
        t
    }

    pub fn len(&self) -> usize {
        self.live.load(Relaxed)
    }

    fn matches(&self, s: u64, key: &[u8]) -> bool {
        let off = (s - 2) as usize;
        let Some(len) = self.arena.get(off) else { return false };
        if len.load(Relaxed) != key.len() as u64 {
            return false;
        }
        let Some(ws) = self.arena.get(off + 1..off + words_of(key.len())) else { return false };
        key.chunks(8).zip(ws.iter()).all(|(c, w)| w.load(Relaxed) == key_word(c))
    }

    /// Slot index holding `key`.
    fn find(&self, key: &[u8], h: u64) -> Option<usize> {
        let mut i = start(h, self.mask);
        for _ in 0..=self.mask {
            let s = self.slots[i].load(Relaxed);
            if s == EMPTY {
                return None;
            }
            if s != TOMB && self.matches(s, key) {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// Reader: value of `key` (`h` is its level-1 hash). Never allocates.
    #[inline]
    pub fn get(&self, key: &[u8], h: u64) -> Option<u64> {
        if self.live.load(Relaxed) == 0 {
            return None;
        }
        self.find(key, h).map(|i| self.vals[i].load(Relaxed))
    }

    /// Writer: inserts or overwrites. `false` when the table is out of room
    /// (the caller rebuilds it bigger).
    pub fn put(&self, key: &[u8], h: u64, v: u64) -> bool {
        if let Some(i) = self.find(key, h) {
            self.vals[i].store(v, Relaxed);
            return true;
        }
        let need = words_of(key.len());
        let used = self.used.load(Relaxed);
        let live = self.live.load(Relaxed);
        let tombs = self.tombs.load(Relaxed);
        if used + need > self.arena.len() || (live + tombs + 1) * 4 > (self.mask + 1) * 3 {
            return false;
        }
        let mut i = start(h, self.mask);
        loop {
            let s = self.slots[i].load(Relaxed);
            if s == EMPTY || s == TOMB {
                if s == TOMB {
                    self.tombs.store(tombs - 1, Relaxed);
                }
                break;
            }
            i = (i + 1) & self.mask;
        }
        self.arena[used].store(key.len() as u64, Relaxed);
        for (j, c) in key.chunks(8).enumerate() {
            self.arena[used + 1 + j].store(key_word(c), Relaxed);
        }
        self.vals[i].store(v, Relaxed);
        self.slots[i].store(used as u64 + 2, Release);
        self.used.store(used + need, Relaxed);
        self.live.store(live + 1, Relaxed);
        true
    }

    /// Writer: deletes; `false` if absent.
    pub fn del(&self, key: &[u8], h: u64) -> bool {
        match self.find(key, h) {
            Some(i) => {
                self.slots[i].store(TOMB, Release);
                self.live.store(self.live.load(Relaxed) - 1, Relaxed);
                self.tombs.store(self.tombs.load(Relaxed) + 1, Relaxed);
                true
            }
            None => false,
        }
    }

    /// Live `(key, value)` pairs (writer side: encoding and rebuilds).
    pub fn entries(&self) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::with_capacity(self.len());
        for (s, v) in self.slots.iter().zip(self.vals.iter()) {
            let s = s.load(Relaxed);
            if s == EMPTY || s == TOMB {
                continue;
            }
            let off = (s - 2) as usize;
            let Some(len) = self.arena.get(off).map(|l| l.load(Relaxed) as usize) else { continue };
            let Some(ws) = self.arena.get(off + 1..off + words_of(len)) else { continue };
            let mut k = Vec::with_capacity(len);
            for w in ws {
                k.extend_from_slice(&w.load(Relaxed).to_le_bytes());
            }
            k.truncate(len);
            out.push((k, v.load(Relaxed)));
        }
        out
    }

    pub fn memory_bytes(&self) -> usize {
        (self.slots.len() + self.vals.len() + self.arena.len()) * 8
    }
}
