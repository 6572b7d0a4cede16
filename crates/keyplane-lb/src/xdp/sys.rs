//! The `bpf()` system call for the XDP fast path: maps (create, lookup,
//! update, delete, mmap), program load, XDP attachment (`BPF_LINK_CREATE`),
//! `BPF_PROG_TEST_RUN`, and the RCU grace period (`membarrier`) that double
//! buffering waits for.

use crate::error::{Error, Result};
use keyplane_net::bpf::Attr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_MAP_DELETE_ELEM: i32 = 3;
const BPF_PROG_LOAD: i32 = 5;
const BPF_PROG_TEST_RUN: i32 = 10;
const BPF_LINK_CREATE: i32 = 28;
/// `BPF_PROG_TYPE_XDP`.
pub const PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE` (generic XDP).
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE` (native XDP).
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `bpf(cmd, attr)` with this module's error context.
fn bpf(cmd: i32, attr: &mut Attr, what: &str) -> Result<i64> {
    // SAFETY: every caller in this module sets only pointer fields to
    // buffers that outlive the call and are as large as the sizes passed.
    unsafe { keyplane_net::bpf::call(cmd, attr) }.map_err(|e| Error::io(what, e))
}

/// As [`bpf`], for the commands that create a descriptor (maps, programs,
/// links).
fn bpf_fd(cmd: i32, attr: &mut Attr, what: &str) -> Result<OwnedFd> {
    // SAFETY: as in `bpf`; the callers pass only descriptor-returning commands.
    unsafe { keyplane_net::bpf::call_fd(cmd, attr) }.map_err(|e| Error::io(what, e))
}

/// Creates a map.
pub fn map_create(name: &str, ty: u32, key: u32, value: u32, entries: u32, flags: u32) -> Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, ty).u32(4, key).u32(8, value).u32(12, entries).u32(16, flags).name(28, name);
    bpf_fd(BPF_MAP_CREATE, &mut a, &format!("bpf(MAP_CREATE {name}, {entries} entries)"))
}

/// `value` of `key` (for per-CPU maps `value` holds one 8-byte-rounded value per possible CPU).
pub fn map_lookup(fd: RawFd, key: &[u8], value: &mut [u8]) -> Result<()> {
    let mut a = Attr::new();
    a.u32(0, fd as u32).u64(8, key.as_ptr() as u64).u64(16, value.as_mut_ptr() as u64);
    bpf(BPF_MAP_LOOKUP_ELEM, &mut a, "bpf(MAP_LOOKUP_ELEM)").map(|_| ())
}

/// Sets `key` to `value`.
pub fn map_update(fd: RawFd, key: &[u8], value: &[u8]) -> Result<()> {
    let mut a = Attr::new();
    a.u32(0, fd as u32).u64(8, key.as_ptr() as u64).u64(16, value.as_ptr() as u64).u64(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a, "bpf(MAP_UPDATE_ELEM)").map(|_| ())
}

/// Removes `key` (no error when absent).
pub fn map_delete(fd: RawFd, key: &[u8]) {
    let mut a = Attr::new();
    a.u32(0, fd as u32).u64(8, key.as_ptr() as u64);
    let _ = bpf(BPF_MAP_DELETE_ELEM, &mut a, "bpf(MAP_DELETE_ELEM)");
}

/// `BPF_F_XDP_HAS_FRAGS`: the program takes multi-buffer frames.
pub const F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// Loads an XDP program; on refusal the error carries the verifier's last lines.
pub fn prog_load(name: &str, insns: &[u64]) -> Result<OwnedFd> {
    prog_load_flags(name, insns, 0)
}

/// [`prog_load`] with `BPF_F_*` program flags.
pub fn prog_load_flags(name: &str, insns: &[u64], flags: u32) -> Result<OwnedFd> {
    let license = b"Dual MIT/GPL\0";
    let mut a = Attr::new();
    a.u32(0, PROG_TYPE_XDP).u32(4, insns.len() as u32).u64(8, insns.as_ptr() as u64).u64(16, license.as_ptr() as u64);
    a.u32(44, flags).name(48, name);
    match bpf_fd(BPF_PROG_LOAD, &mut a, "bpf(PROG_LOAD)") {
        Ok(fd) => Ok(fd),
        Err(_) => {
            let mut log = vec![0u8; 1 << 24];
            a.u32(24, 1).u32(28, log.len() as u32).u64(32, log.as_mut_ptr() as u64);
            let r = bpf_fd(BPF_PROG_LOAD, &mut a, "bpf(PROG_LOAD)");
            let end = log.iter().position(|&c| c == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(12).collect();
            match r {
                Ok(fd) => Ok(fd),
                Err(e) => Err(Error::Setup(format!(
                    "the kernel refused the XDP program ({e}); verifier: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ))),
            }
        }
    }
}

/// A two-instruction XDP program that passes every frame (`return XDP_PASS`):
/// attached to the peer of a veth that receives `XDP_TX` frames, it gives
/// that peer the NAPI instance veth needs to take them (see
/// `Testbed::lb_peer_napi`).
pub fn pass_program() -> Result<OwnedFd> {
    // r0 = 2 (XDP_PASS); exit
    let insns = [0x0000_0002_0000_00b7u64, 0x0000_0000_0000_0095u64];
    prog_load("kp_pass", &insns)
}

/// [`pass_program`] loaded with `BPF_F_XDP_HAS_FRAGS`: as a generic
/// (skb-mode) XDP program it makes the kernel move every frame it receives
/// that is cloned, paged or short of headroom into page-pool memory with
/// `XDP_PACKET_HEADROOM` (`skb_cow_data_for_xdp`; without the flag the
/// kernel reallocates a kmalloc'ed head instead).
pub fn pass_program_frags() -> Result<OwnedFd> {
    let insns = [0x0000_0002_0000_00b7u64, 0x0000_0000_0000_0095u64];
    prog_load_flags("kp_pass_frags", &insns, F_XDP_HAS_FRAGS)
}

/// Attaches an XDP program to an interface of the calling thread's
/// namespace with `flags` (native or generic); detached when the link closes.
pub fn xdp_link(prog: RawFd, ifindex: u32, flags: u32) -> Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, prog as u32).u32(4, ifindex).u32(8, BPF_XDP).u32(12, flags);
    bpf_fd(BPF_LINK_CREATE, &mut a, "bpf(LINK_CREATE xdp)")
}

/// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`): the XDP verdict
/// and the frame as the program left it (`out` must hold it; its length is
/// returned).
pub fn test_run(prog: &OwnedFd, frame: &[u8], out: &mut [u8]) -> Result<(u32, usize)> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(8, frame.len() as u32)
        .u32(12, out.len() as u32)
        .u64(16, frame.as_ptr() as u64)
        .u64(24, out.as_mut_ptr() as u64)
        .u32(32, 1);
    bpf(BPF_PROG_TEST_RUN, &mut a, "bpf(PROG_TEST_RUN)")?;
    Ok((a.get_u32(4), a.get_u32(12) as usize))
}

/// `BPF_F_TEST_XDP_LIVE_FRAMES`.
const F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// Runs the program `repeat` times in live-frames mode
/// (`BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`, kernel 5.18 on):
/// every run gets a frame of a page pool initialised from `frame` (once per
/// page: a program that rewrites the frame sees its earlier writes), as if
/// received on `ifindex` (queue 0) of the calling thread's namespace;
/// `XDP_TX` transmits it on that device with `ndo_xdp_xmit`. Runs in the
/// calling thread (process context, bottom halves off per batch of 64).
pub fn test_run_live(prog: RawFd, frame: &[u8], ifindex: u32, repeat: u32) -> Result<()> {
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex.
    let ctx: [u32; 6] = [0, frame.len() as u32, 0, ifindex, 0, 0];
    let mut a = Attr::new();
    a.u32(0, prog as u32)
        .u32(8, frame.len() as u32)
        .u64(16, frame.as_ptr() as u64)
        .u32(32, repeat)
        .u32(40, std::mem::size_of_val(&ctx) as u32)
        .u64(48, ctx.as_ptr() as u64)
        .u32(64, F_TEST_XDP_LIVE_FRAMES);
    bpf(BPF_PROG_TEST_RUN, &mut a, "bpf(PROG_TEST_RUN live frames)").map(|_| ())
}

/// Waits for an RCU grace period (`membarrier(MEMBARRIER_CMD_GLOBAL)` is
/// `synchronize_rcu()`): every XDP program run that started before has
/// ended. Falls back to a 50 ms sleep (a run takes microseconds) where the
/// command is refused (nohz_full).
pub fn rcu_grace() {
    // SAFETY: membarrier with MEMBARRIER_CMD_GLOBAL (1) and flags 0 takes no pointers.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, 1, 0, 0) };
    if r != 0 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A shared memory mapping of a map (`BPF_F_MMAPABLE` arrays, ring buffers).
#[derive(Debug)]
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; concurrent
// access goes through atomics or is serialised by its users.
unsafe impl Send for Mmap {}
// SAFETY: as for Send.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset`.
    pub fn new(fd: RawFd, len: usize, offset: usize, writable: bool, what: &str) -> Result<Self> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: a fresh shared mapping of a map descriptor; the kernel checks length and offset.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, offset as libc::off_t) };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os(format!("mmap of {what}")));
        }
        Ok(Self { ptr: p.cast(), len })
    }
    /// Start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for an empty mapping (never: mmap refuses length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from a successful mmap and are unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Number of possible CPUs (per-CPU map values hold one value each).
pub fn possible_cpus() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let mut n = 0;
    for part in s.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    n = n.max(b + 1).max(a + 1);
                }
            }
            None => {
                if let Ok(a) = part.parse::<usize>() {
                    n = n.max(a + 1);
                }
            }
        }
    }
    n.max(1)
}
