//! AF_XDP back end: one `AF_XDP` socket per (interface, queue) with its own UMEM.
//!
//! The UMEM is `ring_frames + tx_frames` chunks of 2048 bytes. Every chunk is always in exactly
//! one place: user space's free list, lent to the kernel for receiving (fill ring, the kernel, RX
//! ring: at most `ring_frames` chunks, so that `tx_frames` stay for sending), or lent for sending
//! (TX ring, the kernel, completion ring). A frame received is lent in place to the caller
//! ([`Port::rx_burst_with`]) and its chunk goes straight back to the fill ring; a frame sent is
//! copied into a free chunk ([`Port::tx_stage`]) and the TX ring is kicked once per burst
//! ([`Port::tx_flush`]). [`Port::forward_burst`] copies nothing: a transmitted frame's RX chunk
//! goes onto the TX ring as it is (rewritten in place, grown into the 256 bytes that copy mode
//! leaves in front of received data) and comes back through the completion ring to the free
//! list, from which the fill ring is topped up.
//!
//! The frames reach the socket through a tiny XDP program (see `bpf.rs`) that redirects every
//! frame of queue *q* to the socket in slot *q* of an `XSKMAP`, attached natively where the
//! driver allows and in generic (SKB) mode otherwise ([`crate::XdpMode`]). Bind flags: zero-copy
//! where the driver supports it, copy mode otherwise (veth: copy), `XDP_USE_NEED_WAKEUP` so that
//! syscalls happen only when the kernel asks for them.

mod bpf;
mod ring;

use crate::forward::{FWD_MAX, Forwarded, FwdFrame, FwdScratch, Verdict};
use crate::port::{FRAME_CAPACITY, IoKind, Port, PortOptions, PortStats, XdpCopy, XdpMode};
use crate::sys::{self, Mmap};
use crate::{Error, Result};
use ring::Ring;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

const CHUNK: u32 = 2048;
const DESC: usize = 16; // struct xdp_desc
const ADDR: usize = 8; // fill / completion entries
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
/// `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17): most descriptors one copy-mode `sendto` transmits.
const XDP_MAX_TX_SKB_BUDGET: i32 = 9;

/// The `len` bytes at `addr` of the UMEM, if they lie inside it.
fn chunk(umem: &mut Mmap, addr: u64, len: usize) -> Option<&mut [u8]> {
    let end = (addr as usize).checked_add(len)?;
    if end > umem.len || len > CHUNK as usize {
        return None;
    }
    // SAFETY: [addr, addr+len) lies inside the UMEM mapping (checked), which outlives the borrow;
    // the chunk belongs to user space (taken from the RX ring or the TX free list) until it is
    // put back on the fill / TX ring, and the port hands out one chunk at a time.
    Some(unsafe { std::slice::from_raw_parts_mut(umem.ptr.add(addr as usize), len) })
}

/// Where an [`XdpPort`]'s UMEM chunks are ([`XdpPort::chunks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkCounts {
    /// Chunks in the UMEM (`ring_frames + tx_frames`).
    pub total: u64,
    /// In user space's free list.
    pub free: u64,
    /// Lent to the kernel for receiving: put on the fill ring and not yet taken back from the RX ring.
    pub rx_lent: u64,
    /// Lent to the kernel for sending: submitted on the TX ring and not yet taken back from the
    /// completion ring.
    pub tx_lent: u64,
    /// TX descriptors written but not yet submitted.
    pub tx_staged: u64,
}

impl ChunkCounts {
    /// Every chunk is in exactly one place.
    pub fn conserved(&self) -> bool {
        self.free + self.rx_lent + self.tx_lent + self.tx_staged == self.total
    }
}

/// One AF_XDP socket bound to one queue of one interface.
pub struct XdpPort {
    name: String,
    queue: u32,
    // Field order is drop order: rings before the socket, socket before the UMEM.
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    fd: OwnedFd,
    umem: Mmap,
    attachment: Arc<bpf::Attachment>,
    /// Free chunk addresses (user space's own).
    free: Vec<u64>,
    /// TX descriptors written but not yet submitted.
    tx_staged: u32,
    /// Most chunks lent for receiving (`ring_frames`).
    rx_quota: u64,
    /// Chunks ever put on the fill ring / taken from the RX ring / put on the TX ring / taken
    /// from the completion ring: the lent counts are differences ([`XdpPort::chunks`]).
    fill_given: u64,
    rx_taken: u64,
    tx_given: u64,
    comp_taken: u64,
    need_wakeup: bool,
    zero_copy: bool,
    stats: PortStats,
}

// SAFETY: the rings and UMEM are mappings owned by this port and touched only through
// `&mut self`; the kernel side synchronises through the ring indices (acquire / release).
unsafe impl Send for XdpPort {}

impl XdpPort {
    /// Open an AF_XDP socket on queue `queue` of `ifname` (loading and attaching the redirect
    /// program if this is the interface's first AF_XDP port in this process).
    pub fn open(ifname: &str, queue: u32, opts: &PortOptions) -> Result<Self> {
        opts.validate()?;
        if queue >= bpf::MAX_QUEUES {
            return Err(Error::InvalidParameter(format!(
                "queue {queue}: AF_XDP ports use queues 0..{}",
                bpf::MAX_QUEUES
            )));
        }
        let ifindex = sys::ifindex(ifname)?;
        let w = |s: &str| format!("{s} (AF_XDP {ifname} queue {queue})");
        let unsupported = |e: Error| match e {
            Error::Sys { what, source } => {
                Error::Unsupported { kind: "AF_XDP", ifname: ifname.to_string(), reason: format!("{what}: {source}") }
            }
            e => e,
        };
        let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0, &w("socket")).map_err(unsupported)?;
        let (rxn, txn) = (opts.ring_frames, opts.tx_frames);
        let umem_len = (rxn as usize + txn as usize) * CHUNK as usize;
        let umem = Mmap::map(None, umem_len, 0, 0, &w("mmap UMEM"))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: umem_len as u64,
            chunk_size: CHUNK,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg, &w("XDP_UMEM_REG")).map_err(unsupported)?;
        sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &rxn, &w("XDP_UMEM_FILL_RING"))?;
        sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_COMPLETION_RING, &txn, &w("XDP_UMEM_COMPLETION_RING"))?;
        sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_RX_RING, &rxn, &w("XDP_RX_RING"))?;
        sys::setsockopt(&fd, libc::SOL_XDP, libc::XDP_TX_RING, &txn, &w("XDP_TX_RING"))?;
        // Copy mode transmits at most 32 frames per `sendto` unless told more (a kernel
        // without the option refuses it: then the kick loop makes more calls).
        let _ = sys::setsockopt(&fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &txn, "XDP_MAX_TX_SKB_BUDGET");
        let off: libc::xdp_mmap_offsets =
            sys::getsockopt(fd.as_raw_fd(), libc::SOL_XDP, libc::XDP_MMAP_OFFSETS, &w("XDP_MMAP_OFFSETS"))?;
        let raw = fd.as_raw_fd();
        let rx = Ring::map(raw, &off.rx, libc::XDP_PGOFF_RX_RING, rxn, DESC, &w("mmap RX ring"))?;
        let tx = Ring::map(raw, &off.tx, libc::XDP_PGOFF_TX_RING, txn, DESC, &w("mmap TX ring"))?;
        let mut fill = Ring::map(raw, &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING as i64, rxn, ADDR, &w("mmap fill ring"))?;
        let comp = Ring::map(
            raw,
            &off.cr,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
            txn,
            ADDR,
            &w("mmap completion ring"),
        )?;
        // Every RX chunk starts in the fill ring.
        let n = fill.free(rxn);
        for i in 0..n {
            // SAFETY: slot i < free count, inside the fill ring; 8-byte aligned entries.
            unsafe { (fill.prod_slot(i, ADDR) as *mut u64).write(i as u64 * CHUNK as u64) };
        }
        fill.submit(n);
        let mut free = Vec::with_capacity((rxn + txn) as usize);
        free.extend((0..txn).map(|i| (rxn + i) as u64 * CHUNK as u64));

        let attachment = bpf::attach(ifname, ifindex, opts.xdp_mode).map_err(unsupported)?;
        let mut flags = match opts.xdp_copy {
            XdpCopy::Auto => 0,
            XdpCopy::Copy => XDP_COPY,
            XdpCopy::ZeroCopy => XDP_ZEROCOPY,
        };
        if opts.need_wakeup {
            flags |= XDP_USE_NEED_WAKEUP;
        }
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // A socket that was just closed on the same queue releases it asynchronously: bind then
        // fails with EBUSY for a few milliseconds. Retry for up to ~0.5 s.
        let mut tries = 0;
        loop {
            // SAFETY: `sxdp` is a valid sockaddr_xdp of the size given.
            let r = unsafe {
                libc::bind(
                    raw,
                    &sxdp as *const libc::sockaddr_xdp as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_xdp>() as u32,
                )
            };
            if r == 0 {
                break;
            }
            let e = Error::last_os(w("bind"));
            tries += 1;
            let busy = matches!(&e, Error::Sys { source, .. } if source.raw_os_error() == Some(libc::EBUSY));
            if !busy || tries > 50 {
                return Err(unsupported(e));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let zero_copy = sys::getsockopt::<u32>(raw, libc::SOL_XDP, libc::XDP_OPTIONS, "XDP_OPTIONS")
            .map(|f| f & XDP_OPTIONS_ZEROCOPY != 0)
            .unwrap_or(false);
        attachment.insert(queue, raw)?;
        log::info!(
            "AF_XDP on {ifname} queue {queue}: {} mode, {}",
            if attachment.mode == XdpMode::Native { "native" } else { "generic (SKB)" },
            if zero_copy { "zero-copy" } else { "copy" }
        );
        Ok(XdpPort {
            name: ifname.to_string(),
            queue,
            rx,
            tx,
            fill,
            comp,
            fd,
            umem,
            attachment,
            free,
            tx_staged: 0,
            rx_quota: rxn as u64,
            fill_given: n as u64,
            rx_taken: 0,
            tx_given: 0,
            comp_taken: 0,
            need_wakeup: opts.need_wakeup,
            zero_copy,
            stats: PortStats::default(),
        })
    }

    /// `true` when bound in zero-copy mode (the driver DMAs straight into the UMEM).
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// `true` when the redirect program runs in native (driver) mode, `false` for generic mode.
    pub fn is_native(&self) -> bool {
        self.attachment.mode == XdpMode::Native
    }

    fn kick_rx(&self) {
        // SAFETY: a zero-length non-blocking recvfrom on our socket only wakes the kernel.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Where the UMEM's chunks are: user space's free list, lent for receiving (fill ring, the
    /// kernel, RX ring), lent for sending (TX ring, the kernel, completion ring) and TX descriptors
    /// written but not yet submitted. The four always add up to `total`.
    pub fn chunks(&self) -> ChunkCounts {
        ChunkCounts {
            total: (self.umem.len / CHUNK as usize) as u64,
            free: self.free.len() as u64,
            rx_lent: self.fill_given - self.rx_taken,
            tx_lent: self.tx_given - self.comp_taken,
            tx_staged: self.tx_staged as u64,
        }
    }

    /// Take back TX chunks the kernel has finished with.
    fn reap(&mut self) {
        let n = self.comp.ready(u32::MAX);
        for i in 0..n {
            // SAFETY: i < ready count; completion entries are 8-byte aligned u64 addresses.
            let a = unsafe { (self.comp.cons_slot(i, ADDR) as *const u64).read() };
            self.free.push(a & !(CHUNK as u64 - 1));
        }
        self.comp.release(n);
        self.comp_taken += n as u64;
    }

    /// Lend free chunks to the fill ring until `ring_frames` are lent for receiving.
    fn top_up_fill(&mut self) {
        let lent = self.fill_given - self.rx_taken;
        let want = self.rx_quota.saturating_sub(lent).min(self.free.len() as u64) as u32;
        if want == 0 {
            return;
        }
        let n = self.fill.free(want);
        for i in 0..n {
            let a = self.free.pop().expect("n <= free.len()");
            // SAFETY: i < free count of the fill ring; 8-byte aligned entries.
            unsafe { (self.fill.prod_slot(i, ADDR) as *mut u64).write(a) };
        }
        self.fill.submit(n);
        self.fill_given += n as u64;
    }

    fn kick_tx(&mut self) -> Result<()> {
        // Copy mode transmits only inside sendto, at most one kernel TX budget per call (32
        // frames, or the TX ring's size where XDP_MAX_TX_SKB_BUDGET is known), so call until
        // the ring is drained (bounded). Zero-copy drivers transmit on their
        // own and set the need-wakeup flag when they want a kick.
        for _ in 0..4096 {
            if self.tx.outstanding() == 0 || (self.zero_copy && self.need_wakeup && !self.tx.needs_wakeup()) {
                return Ok(());
            }
            // SAFETY: a zero-length non-blocking sendto on our socket only kicks TX processing.
            let r = unsafe {
                libc::sendto(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0)
            };
            if r < 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::EINTR) => self.reap(),
                    Some(libc::ENOBUFS) | Some(libc::ENETDOWN) | Some(libc::ENXIO) => return Ok(()),
                    _ => return Err(Error::last_os(format!("sendto (AF_XDP TX kick) on {}", self.name))),
                }
            }
        }
        Ok(())
    }
}

impl Port for XdpPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> IoKind {
        IoKind::AfXdp
    }

    fn rx_burst_with(&mut self, max: usize, f: &mut dyn FnMut(&mut [u8])) -> Result<usize> {
        let n = self.rx.ready(max.min(u32::MAX as usize) as u32);
        if n == 0 {
            if self.need_wakeup && self.fill.needs_wakeup() {
                self.kick_rx();
            }
            return Ok(0);
        }
        // The fill ring has room for every chunk taken from the RX ring: RX chunks are either
        // in the fill ring, with the kernel, or in the RX ring, and the fill ring holds them all.
        let room = self.fill.free(n);
        for i in 0..n {
            // SAFETY: i < ready count; RX descriptors are 16-byte struct xdp_desc entries.
            let (addr, len) = unsafe {
                let d = self.rx.cons_slot(i, DESC);
                ((d as *const u64).read(), (d.add(8) as *const u32).read() as usize)
            };
            if let Some(frame) = chunk(&mut self.umem, addr, len) {
                self.stats.rx_bytes += frame.len() as u64;
                f(frame);
            }
            if i < room {
                // SAFETY: i < free count of the fill ring.
                unsafe { (self.fill.prod_slot(i, ADDR) as *mut u64).write(addr & !(CHUNK as u64 - 1)) };
            } else {
                self.free.push(addr & !(CHUNK as u64 - 1));
            }
        }
        self.rx.release(n);
        self.fill.submit(room);
        self.rx_taken += n as u64;
        self.fill_given += room as u64;
        self.stats.rx_frames += n as u64;
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.kick_rx();
        }
        Ok(n as usize)
    }

    fn tx_stage(&mut self, frame: &[u8]) -> Result<bool> {
        if frame.len() > FRAME_CAPACITY || frame.is_empty() {
            self.stats.tx_dropped += 1;
            return Ok(false);
        }
        if self.free.is_empty() {
            self.reap();
            if self.free.is_empty() {
                // Everything is in flight: push what is staged and try once more.
                self.tx_flush()?;
                self.reap();
            }
        }
        if self.tx.free(self.tx_staged + 1) < self.tx_staged + 1 {
            self.stats.tx_dropped += 1;
            return Ok(false);
        }
        let Some(addr) = self.free.pop() else {
            self.stats.tx_dropped += 1;
            return Ok(false);
        };
        let buf = chunk(&mut self.umem, addr, frame.len())
            .ok_or_else(|| Error::InvalidParameter("TX chunk outside UMEM".into()))?;
        buf.copy_from_slice(frame);
        let slot = self.tx.prod_slot(self.tx_staged, DESC);
        // SAFETY: the slot is free (checked above) and 16-byte aligned inside the TX ring.
        unsafe {
            (slot as *mut u64).write(addr);
            (slot.add(8) as *mut u32).write(frame.len() as u32);
            (slot.add(12) as *mut u32).write(0);
        }
        self.tx_staged += 1;
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(true)
    }

    fn tx_flush(&mut self) -> Result<usize> {
        let n = self.tx_staged;
        if n > 0 {
            self.tx.submit(n);
            self.tx_given += n as u64;
            self.tx_staged = 0;
        }
        if n > 0 || self.tx.outstanding() > 0 {
            self.kick_tx()?;
        }
        self.reap();
        self.top_up_fill();
        Ok(n as usize)
    }

    fn forward_burst(
        &mut self,
        max: usize,
        scratch: &mut FwdScratch,
        f: &mut dyn FnMut(&mut [FwdFrame<'_>]),
    ) -> Result<Forwarded> {
        scratch.clear();
        let mut out = Forwarded::default();
        let n = self.rx.ready(max.min(scratch.capacity()).min(FWD_MAX) as u32);
        if n == 0 {
            if self.need_wakeup && self.fill.needs_wakeup() {
                self.kick_rx();
            }
            return Ok(out);
        }
        const MASK: u64 = !(CHUNK as u64 - 1);
        // Chunk base of each lent frame, then its verdict, offset and length once `f` returned.
        let mut base = [0u64; FWD_MAX];
        let mut done = [(Verdict::Drop, 0usize, 0usize); FWD_MAX];
        // Chunks not lent (descriptors outside the UMEM or their chunk): straight back to the fill ring.
        let mut bad = [0u64; FWD_MAX];
        let (mut lent, mut nbad) = (0usize, 0usize);
        {
            let mut frames: [FwdFrame<'_>; FWD_MAX] = std::array::from_fn(|_| FwdFrame::default());
            for i in 0..n {
                // SAFETY: i < ready count; RX descriptors are 16-byte struct xdp_desc entries.
                let (addr, len) = unsafe {
                    let d = self.rx.cons_slot(i, DESC);
                    ((d as *const u64).read(), (d.add(8) as *const u32).read() as usize)
                };
                let b = addr & MASK;
                let off = (addr - b) as usize;
                let inside = b.checked_add(CHUNK as u64).is_some_and(|e| e <= self.umem.len as u64);
                if !inside || off + len > CHUNK as usize {
                    bad[nbad] = b;
                    nbad += 1;
                    continue;
                }
                // SAFETY: [b, b + CHUNK) lies inside the UMEM mapping (checked), which outlives
                // `frames` (dropped at the end of this block, before any chunk is handed back to
                // the kernel). The kernel hands each chunk to the RX ring once, so the lent
                // slices are disjoint; until the chunk goes back on a ring it is user space's.
                let buf = unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.add(b as usize), CHUNK as usize) };
                frames[lent] = FwdFrame::new(buf, off, len);
                base[lent] = b;
                lent += 1;
                self.stats.rx_bytes += len as u64;
            }
            self.rx.release(n);
            self.rx_taken += n as u64;
            self.stats.rx_frames += n as u64;
            out.rx = lent;
            f(&mut frames[..lent]);
            for (d, fr) in done.iter_mut().zip(&frames[..lent]) {
                if fr.verdict == Verdict::Slow {
                    if scratch.slow.push(fr.frame()) {
                        out.slow += 1;
                    } else {
                        out.slow_dropped += 1;
                    }
                }
                *d = (fr.verdict, fr.head(), fr.len());
            }
        }
        // Every chunk taken from the RX ring fits back on the fill ring (at most `ring_frames`
        // are lent for receiving and the fill ring holds that many); anything else goes to the
        // free list.
        let room = self.fill.free(n);
        let mut nfill = 0u32;
        let mut recycle = |port: &mut Self, b: u64| {
            if nfill < room {
                // SAFETY: nfill < free count of the fill ring; 8-byte aligned entries.
                unsafe { (port.fill.prod_slot(nfill, ADDR) as *mut u64).write(b) };
                nfill += 1;
            } else {
                port.free.push(b);
            }
        };
        for &b in &bad[..nbad] {
            recycle(self, b);
        }
        for (&b, &(v, head, len)) in base[..lent].iter().zip(&done[..lent]) {
            if v != Verdict::Transmit {
                recycle(self, b);
                continue;
            }
            let fits = len > 0 && len <= FRAME_CAPACITY && self.tx.free(self.tx_staged + 1) > self.tx_staged;
            if !fits {
                self.stats.tx_dropped += 1;
                out.tx_failed += 1;
                recycle(self, b);
                continue;
            }
            let slot = self.tx.prod_slot(self.tx_staged, DESC);
            // SAFETY: the slot is free (checked above) and 16-byte aligned inside the TX ring.
            unsafe {
                (slot as *mut u64).write(b + head as u64);
                (slot.add(8) as *mut u32).write(len as u32);
                (slot.add(12) as *mut u32).write(0);
            }
            self.tx_staged += 1;
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += len as u64;
            out.tx += 1;
        }
        self.fill.submit(nfill);
        self.fill_given += nfill as u64;
        if self.tx_staged > 0 {
            self.tx_flush()?;
        } else {
            self.top_up_fill();
        }
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.kick_rx();
        }
        Ok(out)
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<bool> {
        if self.rx.ready(1) > 0 {
            return Ok(true);
        }
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.kick_rx();
        }
        sys::poll1(self.fd.as_raw_fd(), libc::POLLIN, timeout)?;
        Ok(self.rx.ready(1) > 0)
    }

    fn stats(&self) -> PortStats {
        let drops =
            sys::getsockopt::<libc::xdp_statistics>(self.fd.as_raw_fd(), libc::SOL_XDP, libc::XDP_STATISTICS, "")
                .map(|s| s.rx_dropped + s.rx_ring_full)
                .unwrap_or(0);
        PortStats { rx_kernel_drops: drops, ..self.stats }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

impl Drop for XdpPort {
    fn drop(&mut self) {
        self.attachment.remove(self.queue);
    }
}
