//! AF_PACKET back end: a `TPACKET_V3` block ring for RX, `sendmmsg` for TX.
//!
//! RX: the kernel fills blocks of the mmapped ring with many frames each and hands a block over
//! when it is full or after `block_timeout_ms`; [`AfPacketPort::rx_burst_with`] walks the frames
//! in place (zero copy) and gives each block back when all its frames were seen. VLAN tags that
//! the kernel stripped into the frame header (`TP_STATUS_VLAN_VALID`) are written back into the
//! frame, in the 4 bytes of headroom reserved with `PACKET_RESERVE`, so frames arrive as sent.
//! Frames this socket (or the host) transmits are not received (`PACKET_IGNORE_OUTGOING`).
//!
//! Frames the sending host's own stack left with a partial TCP / UDP checksum (checksum offload,
//! `TP_STATUS_CSUMNOTREADY`: the default on veth) get their checksum completed in place when
//! [`PortOptions::complete_checksums`] is set (the default), so they can be forwarded as is.
//!
//! TX: frames are copied into a staging area and handed to the kernel with one `sendmmsg` per
//! flush, bypassing the qdisc (`PACKET_QDISC_BYPASS`).
//!
//! Several sockets (one per worker) share an interface's traffic through `PACKET_FANOUT` when
//! [`PortOptions::fanout_group`] is set, spread by flow hash, receive queue or CPU
//! ([`PortOptions::fanout_mode`]).

use crate::port::{FRAME_CAPACITY, FanoutMode, IoKind, Port, PortOptions, PortStats};
use crate::sys::{self, Mmap};
use crate::{Error, Result};
use std::cell::Cell;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const ETH_P_ALL: u16 = 0x0003;
const PACKET_RX_RING: i32 = 5;
const PACKET_STATISTICS: i32 = 6;
const PACKET_VERSION: i32 = 10;
const PACKET_RESERVE: i32 = 12;
const PACKET_FANOUT: i32 = 18;
const PACKET_QDISC_BYPASS: i32 = 20;
const PACKET_IGNORE_OUTGOING: i32 = 23;
const TPACKET_V3: i32 = 2;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_FANOUT_CPU: u32 = 2;
const PACKET_FANOUT_QM: u32 = 5;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// Headroom before each frame for re-inserting a stripped VLAN tag.
const RESERVE: u32 = 4;
const BLOCK_SIZE: u32 = 1 << 18;
const RING_FRAME: u32 = 2048;
/// Frames staged before an automatic flush.
const TX_STAGE: usize = 256;

/// `struct tpacket_req3`.
#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketStatsV3 {
    packets: u32,
    drops: u32,
    freeze_q_cnt: u32,
}

// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then tpacket_hdr_v1).
const BD_STATUS: usize = 8;
const BD_NUM_PKTS: usize = 12;
const BD_FIRST: usize = 16;
// Offsets in `struct tpacket3_hdr`.
const H_NEXT: usize = 0;
const H_SNAPLEN: usize = 12;
const H_STATUS: usize = 20;
const H_MAC: usize = 24;
const H_VLAN_TCI: usize = 32;
const H_VLAN_TPID: usize = 36;

/// One AF_PACKET socket with a TPACKET_V3 RX ring, bound to one interface.
pub struct AfPacketPort {
    name: String,
    fd: OwnedFd,
    ring: Mmap,
    block_nr: usize,
    block: usize,
    /// Frames left and offset of the next frame in the current block, while one is being read.
    in_block: Option<(u32, usize)>,
    tx_buf: Box<[u8]>,
    tx_lens: Vec<usize>,
    stats: PortStats,
    kernel_drops: Cell<u64>,
    complete_checksums: bool,
}

/// Fill in the TCP / UDP checksum of a frame the local stack sent with checksum offload (the
/// field holds only the pseudo-header sum). Frames that do not parse are left alone.
fn complete_l4_checksum(frame: &mut [u8]) {
    if let Ok(p) = crate::parse::parse(frame)
        && matches!(p.l4, crate::parse::L4::Tcp { .. } | crate::parse::L4::Udp { .. })
    {
        let _ = crate::checksum::set_l4_checksum(frame, &p);
    }
}

// SAFETY: the ring mapping is owned by this port and only touched through `&mut self`; the
// kernel side synchronises through the block status words (acquire / release).
unsafe impl Send for AfPacketPort {}

impl AfPacketPort {
    /// Open an AF_PACKET socket on `ifname`. `queue` only names the socket in messages: with
    /// [`PortOptions::fanout_group`] set, the sockets of the group share the traffic as
    /// [`PortOptions::fanout_mode`] says (in [`FanoutMode::Queue`], in the order they joined).
    pub fn open(ifname: &str, queue: u32, opts: &PortOptions) -> Result<Self> {
        opts.validate()?;
        let ifindex = sys::ifindex(ifname)?;
        let w = |s: &str| format!("{s} (AF_PACKET {ifname} queue {queue})");
        // Protocol 0: no frames are queued before the ring exists; bind() sets ETH_P_ALL.
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0, &w("socket"))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_VERSION, &TPACKET_V3, &w("PACKET_VERSION"))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_RESERVE, &RESERVE, &w("PACKET_RESERVE"))?;
        let one: i32 = 1;
        // Older kernels lack these two; both are optimisations, so failures are only logged.
        if let Err(e) = sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, &w("IGNORE_OUTGOING")) {
            log::warn!("{e}: this socket will also see frames sent on {ifname}");
        }
        if let Err(e) = sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, &one, &w("QDISC_BYPASS")) {
            log::debug!("{e}");
        }
        let bytes = (opts.ring_frames as u64 * RING_FRAME as u64).max(BLOCK_SIZE as u64 * 2);
        let block_nr = (bytes / BLOCK_SIZE as u64) as u32;
        let req = TpacketReq3 {
            block_size: BLOCK_SIZE,
            block_nr,
            frame_size: RING_FRAME,
            frame_nr: block_nr * (BLOCK_SIZE / RING_FRAME),
            retire_blk_tov: opts.block_timeout_ms.max(1),
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_RX_RING, &req, &w("PACKET_RX_RING"))?;
        let len = BLOCK_SIZE as usize * block_nr as usize;
        let ring = Mmap::map(Some(fd.as_raw_fd()), len, 0, 0, &w("mmap RX ring"))?;
        // SAFETY: sockaddr_ll is plain old data; zero is valid before we fill it.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r != 0 {
            return Err(Error::last_os(w("bind")));
        }
        if opts.promiscuous {
            sys::packet_promisc(&fd, ifindex, &w("PACKET_MR_PROMISC"))?;
        }
        if let Some(g) = opts.fanout_group {
            let mode = match opts.fanout_mode {
                FanoutMode::Hash => PACKET_FANOUT_HASH,
                FanoutMode::Queue => PACKET_FANOUT_QM,
                FanoutMode::Cpu => PACKET_FANOUT_CPU,
            };
            let v: u32 = g as u32 | (mode << 16);
            sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_FANOUT, &v, &w("PACKET_FANOUT"))?;
        }
        Ok(AfPacketPort {
            name: ifname.to_string(),
            fd,
            ring,
            block_nr: block_nr as usize,
            block: 0,
            in_block: None,
            tx_buf: vec![0u8; TX_STAGE * FRAME_CAPACITY].into_boxed_slice(),
            tx_lens: Vec::with_capacity(TX_STAGE),
            stats: PortStats::default(),
            kernel_drops: Cell::new(0),
            complete_checksums: opts.complete_checksums,
        })
    }

    fn block_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: i < block_nr, so the block lies inside the mapping.
        unsafe { self.ring.ptr.add(i * BLOCK_SIZE as usize) }
    }

    fn block_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: the status word is 4-byte aligned inside the block descriptor, which lives as
        // long as `self.ring`; the kernel writes it concurrently, hence the atomic view.
        unsafe { &*(self.block_ptr(i).add(BD_STATUS) as *const AtomicU32) }
    }

    fn read_u32(&self, p: *const u8) -> u32 {
        // SAFETY: callers pass pointers inside the mapping; ring headers are 4-byte aligned.
        unsafe { (p as *const u32).read_volatile() }
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> IoKind {
        IoKind::AfPacket
    }

    fn rx_burst_with(&mut self, max: usize, f: &mut dyn FnMut(&mut [u8])) -> Result<usize> {
        let mut n = 0;
        let bs = BLOCK_SIZE as usize;
        while n < max {
            let (left, off) = match self.in_block {
                Some(s) => s,
                None => {
                    if self.block_status(self.block).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                        break;
                    }
                    let b = self.block_ptr(self.block);
                    // SAFETY: descriptor fields inside the block, which the kernel handed to us.
                    let (num, first) = unsafe { (self.read_u32(b.add(BD_NUM_PKTS)), self.read_u32(b.add(BD_FIRST))) };
                    (num, first as usize)
                }
            };
            if left == 0 || off >= bs {
                self.block_status(self.block).store(TP_STATUS_KERNEL, Ordering::Release);
                self.block = (self.block + 1) % self.block_nr;
                self.in_block = None;
                continue;
            }
            let b = self.block_ptr(self.block);
            // SAFETY: `off` < block size was checked; header fields lie within the block.
            let (next, snap, status, mac, tci, tpid) = unsafe {
                let h = b.add(off);
                (
                    self.read_u32(h.add(H_NEXT)) as usize,
                    self.read_u32(h.add(H_SNAPLEN)) as usize,
                    self.read_u32(h.add(H_STATUS)),
                    (h.add(H_MAC) as *const u16).read_volatile() as usize,
                    self.read_u32(h.add(H_VLAN_TCI)) as u16,
                    (h.add(H_VLAN_TPID) as *const u16).read_volatile(),
                )
            };
            self.in_block = Some((left - 1, if next == 0 { bs } else { off + next }));
            if off + mac + snap > bs || mac < RESERVE as usize {
                // A header the kernel never writes; skip the rest of the block rather than read past it.
                self.in_block = Some((0, bs));
                continue;
            }
            // SAFETY: [off + mac - RESERVE, off + mac + snap) lies inside this block (checked
            // above), which is ours until its status is handed back; the RESERVE bytes before
            // the frame are the headroom requested with PACKET_RESERVE.
            let frame: &mut [u8] = unsafe {
                let start = b.add(off + mac);
                if status & TP_STATUS_VLAN_VALID != 0 && snap >= 12 {
                    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 { tpid } else { 0x8100 };
                    let s = start.sub(RESERVE as usize);
                    std::ptr::copy(start, s, 12);
                    s.add(12).copy_from_nonoverlapping(tpid.to_be_bytes().as_ptr(), 2);
                    s.add(14).copy_from_nonoverlapping(tci.to_be_bytes().as_ptr(), 2);
                    std::slice::from_raw_parts_mut(s, snap + RESERVE as usize)
                } else {
                    std::slice::from_raw_parts_mut(start, snap)
                }
            };
            if status & TP_STATUS_CSUMNOTREADY != 0 && self.complete_checksums {
                complete_l4_checksum(frame);
            }
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += frame.len() as u64;
            f(frame);
            n += 1;
        }
        Ok(n)
    }

    fn tx_stage(&mut self, frame: &[u8]) -> Result<bool> {
        if frame.len() > FRAME_CAPACITY || frame.is_empty() {
            self.stats.tx_dropped += 1;
            return Ok(false);
        }
        if self.tx_lens.len() == TX_STAGE {
            self.tx_flush()?;
        }
        let o = self.tx_lens.len() * FRAME_CAPACITY;
        self.tx_buf[o..o + frame.len()].copy_from_slice(frame);
        self.tx_lens.push(frame.len());
        Ok(true)
    }

    fn tx_flush(&mut self) -> Result<usize> {
        let count = self.tx_lens.len();
        if count == 0 {
            return Ok(0);
        }
        let mut iov: [libc::iovec; TX_STAGE] = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; TX_STAGE];
        // SAFETY: mmsghdr is plain old data; zero is a valid starting value.
        let mut msgs: [libc::mmsghdr; TX_STAGE] = unsafe { std::mem::zeroed() };
        for i in 0..count {
            iov[i] = libc::iovec {
                // SAFETY: slot i lies inside tx_buf, which outlives the sendmmsg calls below.
                iov_base: unsafe { self.tx_buf.as_mut_ptr().add(i * FRAME_CAPACITY) } as *mut libc::c_void,
                iov_len: self.tx_lens[i],
            };
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        let mut sent = 0usize;
        let mut retried = false;
        while sent < count {
            // SAFETY: msgs[sent..count] are valid headers pointing at live iovecs and buffers.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr().add(sent),
                    (count - sent) as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent += r as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) if !retried => {
                    retried = true;
                    sys::poll1(self.fd.as_raw_fd(), libc::POLLOUT, Duration::from_millis(2))?;
                }
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::ENETDOWN) | Some(libc::ENXIO) => break,
                _ => {
                    self.tx_lens.clear();
                    return Err(Error::Sys { what: format!("sendmmsg on {}", self.name), source: e });
                }
            }
        }
        for &l in &self.tx_lens[..sent] {
            self.stats.tx_bytes += l as u64;
        }
        self.stats.tx_frames += sent as u64;
        self.stats.tx_dropped += (count - sent) as u64;
        self.tx_lens.clear();
        Ok(sent)
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<bool> {
        if self.in_block.is_some() || self.block_status(self.block).load(Ordering::Acquire) & TP_STATUS_USER != 0 {
            return Ok(true);
        }
        sys::poll1(self.fd.as_raw_fd(), libc::POLLIN | libc::POLLERR, timeout)?;
        Ok(self.block_status(self.block).load(Ordering::Acquire) & TP_STATUS_USER != 0)
    }

    fn stats(&self) -> PortStats {
        if let Ok(s) = sys::getsockopt::<TpacketStatsV3>(self.fd.as_raw_fd(), libc::SOL_PACKET, PACKET_STATISTICS, "") {
            // Reading the statistics resets them in the kernel: accumulate.
            self.kernel_drops.set(self.kernel_drops.get() + s.drops as u64);
        }
        PortStats { rx_kernel_drops: self.kernel_drops.get(), ..self.stats }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}
