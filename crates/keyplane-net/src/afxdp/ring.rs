//! The four single-producer / single-consumer rings of an AF_XDP socket, mmapped from the kernel.
//!
//! Producer and consumer indices are free-running `u32`s; an entry lives at `index & mask`. We
//! read the other side's index with Acquire and publish ours with Release, and cache both so a
//! burst touches the shared cache lines once (the libxdp `xsk_ring_prod__reserve` /
//! `xsk_ring_cons__peek` scheme).

use crate::Result;
use crate::sys::Mmap;
use std::sync::atomic::{AtomicU32, Ordering};

const XDP_RING_NEED_WAKEUP: u32 = 1;

pub(crate) struct Ring {
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
    size: u32,
    cached_prod: u32,
    cached_cons: u32,
}

impl Ring {
    /// Map ring `off` of socket `fd` at page offset `pgoff` with `size` entries of `entry` bytes.
    pub(crate) fn map(
        fd: i32,
        off: &libc::xdp_ring_offset,
        pgoff: i64,
        size: u32,
        entry: usize,
        what: &str,
    ) -> Result<Ring> {
        let len = off.desc as usize + size as usize * entry;
        let m = Mmap::map(Some(fd), len, pgoff, 0, what)?;
        let base = m.ptr;
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this very mapping and lie inside it.
        let (producer, consumer, flags, desc) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize),
            )
        };
        // SAFETY: as above; reading the current indices.
        let (p, c) = unsafe { ((*producer).load(Ordering::Acquire), (*consumer).load(Ordering::Acquire)) };
        Ok(Ring { _map: m, producer, consumer, flags, desc, mask: size - 1, size, cached_prod: p, cached_cons: c })
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into the mapping owned by `self`.
        unsafe { &*self.producer }
    }
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: points into the mapping owned by `self`.
        unsafe { &*self.consumer }
    }

    /// The kernel asked to be woken (XDP_USE_NEED_WAKEUP).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: points into the mapping owned by `self`.
        unsafe { (*self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }

    // --- producer side (fill, tx) ---

    /// Free slots for producing, up to `want`.
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free >= want {
            return want;
        }
        self.cached_cons = self.cons().load(Ordering::Acquire);
        (self.size - self.cached_prod.wrapping_sub(self.cached_cons)).min(want)
    }

    /// Pointer to the `i`-th slot after the ones produced so far (caller checked `free`).
    pub(crate) fn prod_slot(&self, i: u32, entry: usize) -> *mut u8 {
        let idx = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx <= mask, so the slot is inside the descriptor array.
        unsafe { self.desc.add(idx * entry) }
    }

    /// Publish `n` produced slots.
    pub(crate) fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Slots produced but not yet consumed by the kernel.
    pub(crate) fn outstanding(&mut self) -> u32 {
        self.cached_cons = self.cons().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    // --- consumer side (rx, completion) ---

    /// Entries ready to consume, up to `want`.
    pub(crate) fn ready(&mut self, want: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.prod().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(want)
    }

    /// Pointer to the `i`-th ready entry (caller checked `ready`).
    pub(crate) fn cons_slot(&self, i: u32, entry: usize) -> *const u8 {
        let idx = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx <= mask, so the slot is inside the descriptor array.
        unsafe { self.desc.add(idx * entry) }
    }

    /// Give `n` consumed entries back.
    pub(crate) fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.cons().store(self.cached_cons, Ordering::Release);
    }
}
