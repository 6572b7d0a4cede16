//! AF_XDP back end: one `AF_XDP` socket per (interface, queue) with its own UMEM.
//!
//! The UMEM is `ring_frames + tx_frames` chunks of 2048 bytes: the first `ring_frames` circulate
//! between the fill ring, the kernel and the RX ring; the rest are TX buffers that return through
//! the completion ring. A frame received is lent in place to the caller
//! ([`Port::rx_burst_with`]) and its chunk goes straight back to the fill ring; a frame sent is
//! copied into a free TX chunk ([`Port::tx_stage`]) and the TX ring is kicked once per burst
//! ([`Port::tx_flush`]).
//!
//! The frames reach the socket through a tiny XDP program (see `bpf.rs`) that redirects every
//! frame of queue *q* to the socket in slot *q* of an `XSKMAP`, attached natively where the
//! driver allows and in generic (SKB) mode otherwise ([`crate::XdpMode`]). Bind flags: zero-copy
//! where the driver supports it, copy mode otherwise (veth: copy), `XDP_USE_NEED_WAKEUP` so that
//! syscalls happen only when the kernel asks for them.

mod bpf;
mod ring;

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
    /// Free TX chunk addresses.
    tx_free: Vec<u64>,
    /// TX descriptors written but not yet submitted.
    tx_staged: u32,
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
        let tx_free = (0..txn).map(|i| (rxn + i) as u64 * CHUNK as u64).collect();

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
            tx_free,
            tx_staged: 0,
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

    /// Take back TX chunks the kernel has finished with.
    fn reap(&mut self) {
        let n = self.comp.ready(u32::MAX);
        for i in 0..n {
            // SAFETY: i < ready count; completion entries are 8-byte aligned u64 addresses.
            let a = unsafe { (self.comp.cons_slot(i, ADDR) as *const u64).read() };
            self.tx_free.push(a & !(CHUNK as u64 - 1));
        }
        self.comp.release(n);
    }

    fn kick_tx(&mut self) -> Result<()> {
        // Copy mode transmits only inside sendto, at most one kernel TX batch (32 frames) per
        // call, so call until the ring is drained (bounded). Zero-copy drivers transmit on their
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
            }
        }
        self.rx.release(n);
        self.fill.submit(room);
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
        if self.tx_free.is_empty() {
            self.reap();
            if self.tx_free.is_empty() {
                // Everything is in flight: push what is staged and try once more.
                self.tx_flush()?;
                self.reap();
            }
        }
        if self.tx.free(self.tx_staged + 1) < self.tx_staged + 1 {
            self.stats.tx_dropped += 1;
            return Ok(false);
        }
        let Some(addr) = self.tx_free.pop() else {
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
            self.tx_staged = 0;
        }
        if n > 0 || self.tx.outstanding() > 0 {
            self.kick_tx()?;
        }
        self.reap();
        Ok(n as usize)
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
