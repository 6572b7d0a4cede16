//! Othello's batched lookups (`get_batch`, `get_batch_u64`) on the flat
//! [`View`]: hash every key of a batch and prefetch both of its lines, then
//! read every key's two slots under ONE seqlock validation for the whole
//! batch (a writer that intervened makes the whole batch re-read, out of
//! line). A batch's answers therefore come from one state of the table:
//! of two keys a writer changed one after the other, a batch never sees the
//! second's new value with the first's old one.
//! Slot reads are unchecked (indices `reduce(_, m) < m`, see [`View::slot`])
//! and the layout is dispatched once per batch, not per key.

use super::View;
use crate::mem::prefetch;
use crate::sync::RETIRED;
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// Keys hashed and prefetched before the first of them is read (one seqlock
/// validation each). 16 keys put 32 lines in flight, about what a core's
/// miss buffers hold.
const BATCH: usize = 16;

/// The located keys of one batch: each key's hash and its two slot
/// indices, packed `ia | ib << 32` (both below 2^31, `MAX_SLOTS`).
struct Located {
    h: [u64; BATCH],
    ix: [u64; BATCH],
}

impl View {
    /// Locates the `m ≤ BATCH` keys of one batch and starts the cache
    /// misses of their slots (both lines of every key before any is read).
    #[inline(always)]
    fn batch_stage<K: Copy>(
        &self,
        keys: &[K],
        m: usize,
        loc: &mut Located,
        locate: impl Fn(&Self, K) -> (u64, usize, usize),
    ) {
        let bits = self.bits as usize;
        for (j, &k) in keys[..m].iter().enumerate() {
            let (h, ia, ib) = locate(self, k);
            loc.h[j] = h;
            loc.ix[j] = ia as u64 | (ib as u64) << 32;
            // A prefetch never faults, so the address needs no proof; it
            // is the word `slot` reads first.
            prefetch(self.a.wrapping_add((ia * bits) >> 6));
            prefetch(self.b.wrapping_add((ib * bits) >> 6));
        }
    }

    /// Reads the `m ≤ BATCH` located keys into `out[..m]` under one
    /// seqlock validation. False if a writer was in or has been in the
    /// snapshot meanwhile (then `out` holds garbage and must be re-read).
    #[inline(always)]
    fn batch_read(&self, loc: &Located, out: &mut [Option<u64>], m: usize) -> bool {
        let out = &mut out[..m];
        let c = self.counter();
        let v = c.load(Ordering::Acquire);
        // The layout is tested once per batch; each loop has its width a
        // constant (plain 8/16/32-bit slots) or takes the general read.
        if self.plain8 {
            self.batch_plain::<3>(loc, out);
        } else if self.plain_bits == 16 {
            self.batch_plain::<4>(loc, out);
        } else if self.plain_bits == 32 {
            self.batch_plain::<5>(loc, out);
        } else {
            let (a, b) = (self.a, self.b);
            for (j, o) in out.iter_mut().enumerate() {
                let (ia, ib) = unpack(loc.ix[j]);
                let (x, y) = (self.slot(a, ia), self.slot(b, ib));
                *o = self.answer(loc.h[j], x, y);
            }
        }
        fence(Ordering::Acquire);
        // The single read's test (`View::read_plain`): the counter only
        // grows, so for an odd `v` it is never `v & !1`.
        c.load(Ordering::Relaxed) == v & !1
    }

    /// The read loop of a plain layout of `2^LG`-bit slots: `A ^ B`.
    #[inline(always)]
    fn batch_plain<const LG: u32>(&self, loc: &Located, out: &mut [Option<u64>]) {
        let (a, b): (*const AtomicU64, *const AtomicU64) = (self.a, self.b);
        for (j, o) in out.iter_mut().enumerate() {
            let (ia, ib) = unpack(loc.ix[j]);
            *o = Some(self.slot_pow2::<LG>(a, ia) ^ self.slot_pow2::<LG>(b, ib));
        }
    }

    /// One batch of `m ≤ BATCH` keys: locate and prefetch all, read all,
    /// one validation (the retry out of line). Called with `m = BATCH` a
    /// constant for full batches, so their loops have a constant count.
    #[inline(always)]
    fn batch_one<K: Copy>(
        &self,
        keys: &[K],
        out: &mut [Option<u64>],
        m: usize,
        loc: &mut Located,
        locate: impl Fn(&Self, K) -> (u64, usize, usize),
    ) {
        self.batch_stage(keys, m, loc, locate);
        if !self.batch_read(loc, out, m) {
            self.batch_retry(loc, out, m);
        }
    }

    /// Every batch of `keys` (`min(keys.len(), out.len())` of them).
    #[inline(always)]
    fn batch_all<K: Copy>(
        &self,
        keys: &[K],
        out: &mut [Option<u64>],
        locate: impl Fn(&Self, K) -> (u64, usize, usize) + Copy,
    ) {
        let n = keys.len().min(out.len());
        let (keys, out) = (&keys[..n], &mut out[..n]);
        let mut loc = Located { h: [0; BATCH], ix: [0; BATCH] };
        let mut ks = keys.chunks_exact(BATCH);
        let mut os = out.chunks_exact_mut(BATCH);
        for (k, o) in (&mut ks).zip(&mut os) {
            self.batch_one(k, o, BATCH, &mut loc, locate);
        }
        let (k, o) = (ks.remainder(), os.into_remainder());
        if !k.is_empty() {
            self.batch_one(k, o, k.len(), &mut loc, locate);
        }
    }

    /// `get_batch` of byte keys: 8-byte keys take the typed hash (as
    /// [`View::get`] does), others the generic one.
    /// The table's key hash is tested once per call, not per key.
    #[inline]
    pub(super) fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        if self.mum8 {
            self.batch_all(
                keys,
                out,
                #[inline(always)]
                |v, k| match <[u8; 8]>::try_from(k) {
                    Ok(k8) => v.locate_mum(u64::from_le_bytes(k8)),
                    Err(_) => v.inner().p.locate(k),
                },
            )
        } else {
            self.batch_all(
                keys,
                out,
                #[inline(always)]
                |v, k| match <[u8; 8]>::try_from(k) {
                    Ok(k8) => v.locate_xxh3(u64::from_le_bytes(k8)),
                    Err(_) => v.inner().p.locate(k),
                },
            )
        }
    }

    /// `get_batch` of 8-byte integer keys ([`crate::key::u64_key`]).
    #[inline]
    pub(super) fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        if self.mum8 {
            self.batch_all(
                keys,
                out,
                #[inline(always)]
                |v, k| v.locate_mum(k),
            )
        } else {
            self.batch_all(
                keys,
                out,
                #[inline(always)]
                |v, k| v.locate_xxh3(k),
            )
        }
    }
}

/// The slot indices `(ia, ib)` packed in [`Located::ix`].
#[inline(always)]
fn unpack(ix: u64) -> (usize, usize) {
    (ix as u32 as usize, (ix >> 32) as usize)
}

impl View {
    /// A batch whose validation failed (a writer was in the snapshot, or
    /// it was retired): the whole batch is read again until one read of
    /// all of it validates, so a batch's answers always come from one state
    /// of the table. A retired snapshot (replaced while the batch ran: the
    /// batch checked the generation when it began) no longer changes, so
    /// one read of it after the retirement is seen gives its last state,
    /// current during the call.
    #[cold]
    #[inline(never)]
    fn batch_retry(&self, loc: &Located, out: &mut [Option<u64>], m: usize) {
        loop {
            // Wait for the writer to leave (its patches are a few slots).
            let mut now = self.counter().load(Ordering::Relaxed);
            while now & 1 == 1 && now != RETIRED {
                std::hint::spin_loop();
                now = self.counter().load(Ordering::Relaxed);
            }
            if now == RETIRED {
                // `batch_read`'s acquire load of the counter (`RETIRED`,
                // its last value) orders the reads after the retirement's
                // release store, so they see every write made before it,
                // and no write follows it.
                self.batch_read(loc, out, m);
                return;
            }
            if self.batch_read(loc, out, m) {
                return;
            }
        }
    }
}

impl super::FlatReader<'_> {
    /// See [`super::Reader::get_batch_u64`].
    #[inline]
    pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        // SAFETY: the closure does not call `with` on this handle.
        unsafe { self.0.with(|v| v.get_batch_u64(keys, out)) }
    }
}

impl super::Lookup {
    /// [`crate::LookupTable::get_batch`] of 8-byte integer keys: the same
    /// answers as [`crate::LookupTable::get_u64`] of each key (no byte
    /// slices, no length dispatch). `out.len()` must equal `keys.len()`;
    /// extra entries of either are ignored.
    ///
    /// ```
    /// use keyplane::{ControlTable, othello};
    ///
    /// let ctl = othello::Control::from_items((0..100u64).map(|k| (k.to_le_bytes(), k % 7)), 3)?;
    /// let table = ctl.export();
    /// let mut out = [None; 3];
    /// table.get_batch_u64(&[5, 6, 7], &mut out);
    /// assert_eq!(out, [Some(5), Some(6), Some(0)]);
    /// # Ok::<(), keyplane::Error>(())
    /// ```
    #[inline]
    pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        self.local.get_batch_u64(&self.raw, keys, out)
    }
}

impl super::Reader<'_> {
    /// Same answers as [`super::Lookup::get_batch_u64`], through this
    /// per-thread handle.
    #[inline]
    pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        self.0.get_batch_u64(keys, out)
    }
}
