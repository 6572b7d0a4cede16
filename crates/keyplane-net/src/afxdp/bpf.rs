//! The XDP side of AF_XDP: an `XSKMAP`, a redirect program assembled here (6 instructions, no
//! clang or libbpf), and its attachment to an interface with `BPF_LINK_CREATE`, all through the
//! raw `bpf()` system call. One [`Attachment`] per (network namespace, interface) is shared by every
//! AF_XDP port on that interface; the program is detached when the last port closes.

use crate::port::XdpMode;
use crate::{Error, Result};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_MAP_DELETE_ELEM: i32 = 3;
const BPF_PROG_LOAD: i32 = 5;
const BPF_LINK_CREATE: i32 = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const XDP_PASS: i32 = 2;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Queues an attachment's XSKMAP can address.
pub(crate) const MAX_QUEUES: u32 = 256;

use crate::bpf::Attr;

/// `bpf(cmd, attr)` with this module's error context.
fn bpf(cmd: i32, attr: &mut Attr, what: &str) -> Result<i64> {
    // SAFETY: every caller in this module sets only pointer fields to
    // buffers that outlive the call and are as large as the sizes passed.
    unsafe { crate::bpf::call(cmd, attr) }.map_err(|source| Error::Sys { what: what.into(), source })
}

/// As [`bpf`], for the commands that create a descriptor (map and program
/// creation, links).
fn bpf_fd(cmd: i32, attr: &mut Attr, what: &str) -> Result<OwnedFd> {
    // SAFETY: as in `bpf`; the callers pass only descriptor-returning commands.
    unsafe { crate::bpf::call_fd(cmd, attr) }.map_err(|source| Error::Sys { what: what.into(), source })
}

/// One eBPF instruction: opcode, dst | src << 4, offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = dst | (src << 4);
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    u64::from_le_bytes(b)
}

/// `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`
///
/// Frames of queues without a socket in the map go to the kernel stack (the `XDP_PASS` in the
/// flags' low bits is the fallback action).
fn redirect_program(map_fd: RawFd) -> [u64; 6] {
    [
        insn(0x61, 2, 1, 16, 0),                     // r2 = *(u32 *)(r1 + 16)   ctx->rx_queue_index
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // r1 = map (ld_imm64, first half)
        insn(0, 0, 0, 0, 0),                         //                           (second half)
        insn(0xb7, 3, 0, 0, XDP_PASS),               // r3 = XDP_PASS
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),  // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),                      // exit
    ]
}

/// The XSKMAP, program and link of one interface.
pub(crate) struct Attachment {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    /// The mode the program runs in (`Native` or `Skb`).
    pub(crate) mode: XdpMode,
}

impl Attachment {
    fn create(ifname: &str, ifindex: u32, mode: XdpMode) -> Result<Self> {
        let mut a = Attr::new();
        a.u32(0, BPF_MAP_TYPE_XSKMAP).u32(4, 4).u32(8, 4).u32(12, MAX_QUEUES);
        a.name(28, "kp_xsks");
        let map = bpf_fd(BPF_MAP_CREATE, &mut a, &format!("bpf(MAP_CREATE xskmap) for {ifname}"))?;
        let prog = redirect_program(map.as_raw_fd());
        let license = b"Dual MIT/GPL\0";
        let mut log = vec![0u8; 4096];
        let mut a = Attr::new();
        a.u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, prog.len() as u32)
            .u64(8, prog.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64);
        a.name(48, "kp_xsk_rd");
        let prog = match bpf_fd(BPF_PROG_LOAD, &mut a, &format!("bpf(PROG_LOAD) for {ifname}")) {
            Ok(fd) => fd,
            Err(e) => {
                let end = log.iter().position(|&c| c == 0).unwrap_or(log.len());
                log::warn!("XDP verifier log: {}", String::from_utf8_lossy(&log[..end]));
                return Err(e);
            }
        };
        let native = (XDP_FLAGS_DRV_MODE, XdpMode::Native);
        let skb = (XDP_FLAGS_SKB_MODE, XdpMode::Skb);
        // On a single-queue veth, generic mode measured 10-20% more frames per core than native
        // mode (docs/net.md), so Auto prefers it there. A multi-queue veth needs native mode: in
        // generic mode veth records no RX queue and every frame shows up on queue 0.
        let veth1 = crate::sys::driver_name(ifname).as_deref() == Some("veth")
            && crate::sys::rx_queues(ifname).is_some_and(|q| q <= 1);
        let modes: &[(u32, XdpMode)] = match mode {
            XdpMode::Auto if veth1 => &[skb, native],
            XdpMode::Auto => &[native, skb],
            XdpMode::Native => &[native],
            XdpMode::Skb => &[skb],
        };
        let mut last = None;
        for &(flags, m) in modes {
            let mut a = Attr::new();
            a.u32(0, prog.as_raw_fd() as u32).u32(4, ifindex).u32(8, BPF_XDP).u32(12, flags);
            match bpf_fd(BPF_LINK_CREATE, &mut a, &format!("bpf(LINK_CREATE xdp {m:?}) on {ifname}")) {
                Ok(fd) => return Ok(Attachment { map, _prog: prog, _link: fd, mode: m }),
                Err(e) => {
                    log::debug!("{e}");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::InvalidParameter("no XDP mode to try".into())))
    }

    /// Point queue `queue` of the interface at socket `xsk`.
    pub(crate) fn insert(&self, queue: u32, xsk: RawFd) -> Result<()> {
        let (key, val) = (queue, xsk as u32);
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &val as *const u32 as u64)
            .u64(24, 0);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a, "bpf(MAP_UPDATE_ELEM xskmap)").map(|_| ())
    }

    /// Remove queue `queue` from the map.
    pub(crate) fn remove(&self, queue: u32) {
        let key = queue;
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64);
        let _ = bpf(BPF_MAP_DELETE_ELEM, &mut a, "bpf(MAP_DELETE_ELEM xskmap)");
    }
}

type Registry = Mutex<HashMap<(u64, u32), Weak<Attachment>>>;

fn registry() -> &'static Registry {
    static R: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    R.get_or_init(Default::default)
}

/// Inode of this thread's network namespace: interfaces are keyed by (namespace, ifindex).
fn netns_id() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| std::os::unix::fs::MetadataExt::ino(&m)).unwrap_or(0)
}

/// The attachment of `ifindex` in this thread's namespace, creating it (in `mode`) if needed.
pub(crate) fn attach(ifname: &str, ifindex: u32, mode: XdpMode) -> Result<Arc<Attachment>> {
    let key = (netns_id(), ifindex);
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    r.retain(|_, w| w.strong_count() > 0);
    if let Some(a) = r.get(&key).and_then(Weak::upgrade) {
        return Ok(a);
    }
    let a = Arc::new(Attachment::create(ifname, ifindex, mode)?);
    r.insert(key, Arc::downgrade(&a));
    Ok(a)
}
