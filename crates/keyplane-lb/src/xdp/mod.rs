//! `--io xdp`: the Concury lookup and forwarding in the kernel, as an XDP
//! program on the LB's port (`bpf/lb_xdp.c`, compiled by `build.rs` with
//! clang), loaded by the small loader here (`elf.rs`, `sys.rs`: the raw
//! `bpf()` system call, no libbpf or aya).
//!
//! **What runs where.** The program forwards the VIP packets it has all the
//! data for (Ethernet without VLAN tag, IPv4 without options and not a
//! fragment, IPv6 without extension headers, TCP/UDP, backend MAC resolved)
//! exactly as [`crate::dataplane::Worker`] would: same Concury lookup
//! (`keyplane::lb::DataPlane`, bit for bit), same output bytes (DSR MAC
//! rewrite; IP-in-IP outer header as [`crate::encap`] writes it), same
//! new-flow events (the same flow hash and direct-mapped flow cache). Every
//! other frame is `XDP_PASS`: the kernel answers ARP/ND and carries health
//! checks, and the LB's user-space path (AF_PACKET, as `--io auto`) resolves
//! backends' MACs and handles, drops and counts the VIP packets the program
//! left alone.
//!
//! **Maps and atomic pool changes.** The control side writes the whole data
//! plane ([`DataPlane::images`](keyplane::lb::DataPlane::images): BAS images,
//! DIP rows, backends with their next-hop MACs) into an *inactive*
//! generation of mmap-able array maps (`kp_vips`, `kp_heap`, `kp_bk`; two
//! generations) and the VIP hash map (keys carry the generation), then
//! flips `kp_ctl.gen` with one atomic store. A packet reads `gen` once, so
//! it sees the old data plane or the new one, never a mix. A generation is
//! written again only when no run of the program that may have read it is
//! still going: every run increments a per-CPU counter (`kp_epoch`) before
//! it reads `gen` and again when it is done (fetching atomics: full
//! barriers), so after a flip the publisher reads every CPU's counter once
//! and waits only for the CPUs whose count was odd to move on (a run takes
//! microseconds). This is RCU with the program's runs as the read-side
//! sections, finished in microseconds where `synchronize_rcu`
//! (`membarrier`) took 4–16 ms here, which back-to-back pool changes would
//! have waited for.
//!
//! **Reports and counters.** New-flow events go to the control side through
//! a bounded BPF ring buffer (`kp_reports`; a full ring is counted,
//! `keyplane_lb_xdp_report_ring_full_total`), then through the same token
//! bucket and report channel as the user-space path's. Per-(VIP, backend)
//! packets, bytes and new connections are per-CPU counters (`kp_stats`),
//! folded into [`Counters`] every 100 ms.

pub mod elf;
mod feed;
pub mod generator;
pub mod sys;

pub use feed::{Feed, StatsDelta};

use crate::dataplane::{PortInfo, Services};
use crate::error::{Error, Result};
use crate::metrics::Counters;
use elf::MapDef;
use keyplane::lb::{Backend, PlaneImage, VipId};
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(kp_xdp_obj)]
static OBJECT: Option<&[u8]> = Some(include_bytes!(concat!(env!("OUT_DIR"), "/lb_xdp.o")));
#[cfg(not(kp_xdp_obj))]
static OBJECT: Option<&[u8]> = None;

/// The compiled XDP program, or why there is none.
pub fn object() -> Result<&'static [u8]> {
    OBJECT.ok_or_else(|| {
        Error::Setup(
            "this keyplane-lb was built without its XDP program (clang was missing at build time): install \
             clang, llvm and libbpf-dev and rebuild, or use --io af_packet / af_xdp"
                .into(),
        )
    })
}

/// XDP verdicts.
pub const XDP_DROP: u32 = 1;
/// Left to the kernel (and the user-space path).
pub const XDP_PASS: u32 = 2;
/// Transmitted on the port.
pub const XDP_TX: u32 = 3;

const F_MMAP: u32 = 1024;
const CTL_BYTES: usize = 64;
const VIP_BYTES: usize = 64;
const BK_BYTES: usize = 32;
const REPORT_BYTES: usize = 56;

/// `kp_cnt` indices (see `lb_xdp.c`).
pub mod cnt {
    /// Transmitted by the program.
    pub const TX: usize = 0;
    /// Not a VIP packet the program handles.
    pub const PASS: usize = 1;
    /// VIP packets left to the user-space path.
    pub const SLOW: usize = 2;
    /// Reports lost to a full ring.
    pub const RING_FULL: usize = 3;
    /// Reports written.
    pub const REPORTS: usize = 4;
    /// Dropped: no room to grow the frame for the outer header.
    pub const NO_ROOM: usize = 5;
    /// Entries.
    pub const N: usize = 16;
}

/// Sizes of the maps that depend on the configuration (per generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// VIP records.
    pub vips: u32,
    /// 64-bit words of BAS images and DIP rows.
    pub heap_words: u32,
    /// Backend entries.
    pub backends: u32,
    /// (VIP, backend) counters.
    pub counters: u32,
    /// Ring buffer bytes (a power of two, at least a page).
    pub ring_bytes: u32,
}

impl Sizes {
    /// Room for `max_connections` tracked states (Othello arrays hold at most
    /// 4 slots a state with power-of-two arrays) over `vips` VIPs at
    /// `dcode_bits`, with a quarter to spare.
    pub fn for_config(max_connections: usize, vips: usize, dcode_bits: u32) -> Self {
        let bas = 4 * max_connections as u64 * dcode_bits as u64 / 64;
        let rows = (2 * vips as u64 + 64) * ((1u64 << dcode_bits) / 4 + 8);
        let heap = (bas + bas / 4 + rows + 65_536).min(u32::MAX as u64 / 4) as u32;
        Self { vips: 1024, heap_words: heap, backends: 1 << 14, counters: 1 << 14, ring_bytes: 1 << 22 }
    }
}

struct Map {
    fd: OwnedFd,
    def: MapDef,
    mem: Option<sys::Mmap>,
}

impl Map {
    fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }
    /// Writes `bytes` at byte `off` of an mmap-able map.
    fn write(&self, off: usize, bytes: &[u8]) -> Result<()> {
        let m = self.mem.as_ref().ok_or_else(|| Error::Setup(format!("{} is not mapped", self.def.name)))?;
        if off.checked_add(bytes.len()).is_none_or(|e| e > m.len()) {
            return Err(Error::Setup(format!("write outside {} ({} + {} bytes)", self.def.name, off, bytes.len())));
        }
        // SAFETY: the range is inside the mapping (checked above); the
        // program only reads these bytes while they are in the inactive
        // generation or after the flip, so no reader sees them change.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), m.ptr().add(off), bytes.len()) };
        Ok(())
    }
}

/// The loaded program's maps.
pub struct Maps {
    ctl: Map,
    vipmap: Map,
    vips: Map,
    heap: Map,
    bk: Map,
    stats: Map,
    cnt: Map,
    reports: Map,
    epoch: Map,
    ncpu: usize,
}

impl Maps {
    /// `kp_ctl.gen`, the generation packets read.
    fn gen_word(&self) -> &AtomicU32 {
        let m = self.ctl.mem.as_ref().expect("kp_ctl is mapped at load");
        // SAFETY: the mapping is at least a page, page aligned, and lives as
        // long as `self`; the kernel reads the word with plain loads.
        unsafe { &*(m.ptr() as *const AtomicU32) }
    }

    /// Sum over CPUs of a per-CPU map's value `key` (`n` u64 fields).
    fn percpu(&self, map: &Map, key: u32, n: usize) -> Result<Vec<u64>> {
        let vs = (map.def.value as usize).div_ceil(8) * 8;
        let mut buf = vec![0u8; vs * self.ncpu];
        sys::map_lookup(map.raw(), &key.to_ne_bytes(), &mut buf)?;
        let mut out = vec![0u64; n];
        for c in 0..self.ncpu {
            for (i, o) in out.iter_mut().enumerate() {
                let at = c * vs + i * 8;
                *o = o.wrapping_add(u64::from_ne_bytes(buf[at..at + 8].try_into().expect("8 bytes")));
            }
        }
        Ok(out)
    }
}

/// The XDP program with its maps and publisher state (owned by the control side).
pub struct Program {
    maps: Arc<Maps>,
    prog: OwnedFd,
    link: Option<OwnedFd>,
    sizes: Sizes,
    active: u32,
    last_quiesce_us: u64,
    /// VIP-map keys written per generation (deleted before it is rewritten).
    keys: [Vec<[u8; 24]>; GENS as usize],
    ctr: HashMap<(VipId, Backend), u32>,
    ctrs: Arc<Mutex<Vec<(u32, VipId, Backend)>>>,
    /// Attach mode ("native" or "generic"), once attached.
    pub mode: Option<&'static str>,
}

/// What one [`Program::publish`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Published {
    /// VIPs written.
    pub vips: usize,
    /// VIPs left to the user-space path (no service entry, or the maps are full).
    pub skipped: usize,
    /// Heap words written.
    pub words: usize,
    /// Microseconds waited after the flip for runs of the program that had read the previous generation.
    pub grace_us: u64,
    /// Microseconds from the start of the write to the flip.
    pub write_us: u64,
}

fn ip16(a: IpAddr) -> [u8; 16] {
    let mut o = [0u8; 16];
    match a {
        IpAddr::V4(v) => o[..4].copy_from_slice(&v.octets()),
        IpAddr::V6(v) => o = v.octets(),
    }
    o
}

impl Program {
    /// Creates the maps (sized by `sizes`) and loads the program (root).
    pub fn load(sizes: Sizes) -> Result<Self> {
        let obj = elf::parse(object()?, "xdp")?;
        let mut made: HashMap<String, Map> = HashMap::new();
        for d in &obj.maps {
            let mut d = d.clone();
            d.entries = match d.name.as_str() {
                "kp_vips" => GENS * sizes.vips,
                "kp_heap" => GENS * sizes.heap_words,
                "kp_bk" => GENS * sizes.backends,
                "kp_stats" => sizes.counters,
                "kp_reports" => sizes.ring_bytes,
                _ => d.entries,
            };
            let fd = sys::map_create(&d.name, d.ty, d.key, d.value, d.entries, d.flags)?;
            let mem = if d.flags & F_MMAP != 0 {
                let bytes = (d.value as usize).div_ceil(8) * 8 * d.entries as usize;
                let page = page_size();
                Some(sys::Mmap::new(fd.as_raw_fd(), bytes.div_ceil(page) * page, 0, true, &d.name)?)
            } else {
                None
            };
            made.insert(d.name.clone(), Map { fd, def: d, mem });
        }
        let mut insns = obj.insns.clone();
        for &(i, m) in &obj.relocs {
            let fd = made[&obj.maps[m].name].raw() as u32 as u64;
            insns[i] = (insns[i] & 0x0000_0000_ffff_0fff) | (1 << 12) | (fd << 32);
            insns[i + 1] &= 0x0000_0000_ffff_ffff;
        }
        let prog = sys::prog_load("kp_lb", &insns)?;
        let mut take = |n: &str| made.remove(n).ok_or_else(|| Error::Setup(format!("the XDP object has no map {n}")));
        let maps = Maps {
            ctl: take("kp_ctl")?,
            vipmap: take("kp_vipmap")?,
            vips: take("kp_vips")?,
            heap: take("kp_heap")?,
            bk: take("kp_bk")?,
            stats: take("kp_stats")?,
            cnt: take("kp_cnt")?,
            reports: take("kp_reports")?,
            epoch: take("kp_epoch")?,
            ncpu: sys::possible_cpus(),
        };
        Ok(Self {
            maps: Arc::new(maps),
            prog,
            link: None,
            sizes,
            active: 0,
            last_quiesce_us: 0,
            keys: Default::default(),
            ctr: HashMap::new(),
            ctrs: Arc::new(Mutex::new(Vec::new())),
            mode: None,
        })
    }

    /// The sizes the maps were made with.
    pub fn sizes(&self) -> Sizes {
        self.sizes
    }

    /// Writes the port's MAC and addresses (outer sources of IP-in-IP).
    pub fn set_port(&self, port: &PortInfo) -> Result<()> {
        let mut c = [0u8; CTL_BYTES];
        c[0..4].copy_from_slice(&self.active.to_ne_bytes());
        if let Some(a) = port.v4 {
            c[4..8].copy_from_slice(&1u32.to_ne_bytes());
            c[8..12].copy_from_slice(&a.octets());
        }
        if let Some(a) = port.v6 {
            c[12..16].copy_from_slice(&1u32.to_ne_bytes());
            c[16..32].copy_from_slice(&a.octets());
        }
        c[32..38].copy_from_slice(&port.mac);
        // The generation word is written separately (atomically).
        self.maps.ctl.write(4, &c[4..])?;
        self.maps.gen_word().store(self.active, Ordering::Release);
        Ok(())
    }

    /// Attaches the program to `ifname` (this thread's namespace): native
    /// XDP, else generic (`KEYPLANE_LB_XDP_MODE=native|generic` forces one).
    /// Returns the mode. Detached when the program is dropped.
    pub fn attach(&mut self, ifname: &str) -> Result<&'static str> {
        let ifindex = crate::io::ifindex(ifname)? as u32;
        let want = std::env::var("KEYPLANE_LB_XDP_MODE").unwrap_or_default();
        let modes: &[(u32, &'static str)] = match want.as_str() {
            "native" => &[(sys::XDP_FLAGS_DRV_MODE, "native")],
            "generic" => &[(sys::XDP_FLAGS_SKB_MODE, "generic")],
            _ => &[(sys::XDP_FLAGS_DRV_MODE, "native"), (sys::XDP_FLAGS_SKB_MODE, "generic")],
        };
        let mut last = None;
        for &(flags, name) in modes {
            match sys::xdp_link(self.prog.as_raw_fd(), ifindex, flags) {
                Ok(l) => {
                    self.link = Some(l);
                    self.mode = Some(name);
                    return Ok(name);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(Error::Setup(format!(
            "attaching the XDP program to {ifname}: {}",
            last.map(|e| e.to_string()).unwrap_or_default()
        )))
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`, no interface
    /// needed): the verdict and the frame as the program left it.
    pub fn run(&self, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        let mut out = vec![0u8; frame.len() + 512];
        let (v, n) = sys::test_run(&self.prog, frame, &mut out)?;
        out.truncate(n);
        Ok((v, out))
    }

    /// A handle that runs the program ([`Runner::run`]) from another thread
    /// while this one publishes.
    pub fn runner(&self) -> Result<Runner> {
        Ok(Runner(self.prog.try_clone().map_err(|e| Error::io("dup of the XDP program descriptor", e))?))
    }

    /// The consumer of the program's reports and counters (one per program).
    pub fn feed(&self) -> Result<Feed> {
        Feed::new(self.maps.clone(), self.ctrs.clone())
    }

    fn counter_id(&mut self, vip: VipId, b: Backend) -> u32 {
        let cap = self.sizes.counters;
        let n = self.ctr.len() as u32;
        if let Some(&i) = self.ctr.get(&(vip, b)) {
            return i;
        }
        if n + 1 >= cap {
            return cap - 1; // shared overflow slot, never read
        }
        self.ctr.insert((vip, b), n);
        self.ctrs.lock().unwrap_or_else(|e| e.into_inner()).push((n, vip, b));
        n
    }

    /// Waits until no run of the program that started before this call is
    /// still going (each CPU's `kp_epoch` even, or moved on since the first
    /// look); returns the microseconds waited. After 100 ms of an odd count
    /// that does not move (not expected: a run takes microseconds) it waits
    /// for an RCU grace period instead, which covers every run too.
    fn quiesce(&self) -> Result<u64> {
        let t = Instant::now();
        let vs = 8;
        let mut first = vec![0u8; vs * self.maps.ncpu];
        sys::map_lookup(self.maps.epoch.raw(), &0u32.to_ne_bytes(), &mut first)?;
        let at = |b: &[u8], c: usize| u64::from_ne_bytes(b[c * vs..c * vs + 8].try_into().expect("8 bytes"));
        let mut busy: Vec<(usize, u64)> =
            (0..self.maps.ncpu).map(|c| (c, at(&first, c))).filter(|&(_, e)| e & 1 == 1).collect();
        let mut now = vec![0u8; vs * self.maps.ncpu];
        while !busy.is_empty() {
            if t.elapsed() > Duration::from_millis(100) {
                sys::rcu_grace();
                break;
            }
            std::thread::yield_now();
            sys::map_lookup(self.maps.epoch.raw(), &0u32.to_ne_bytes(), &mut now)?;
            busy.retain(|&(c, e)| at(&now, c) == e);
        }
        Ok(t.elapsed().as_micros() as u64)
    }

    /// Microseconds the last publication waited for runs of the program
    /// that could still read the generation it left.
    pub fn last_quiesce_us(&self) -> u64 {
        self.last_quiesce_us
    }

    /// Writes the data plane `images` (with each VIP's method from
    /// `services` and each backend's next-hop MAC from `mac`) into the
    /// inactive generation and flips to it. VIPs without a service entry or
    /// that do not fit are left out (their packets go to the user-space
    /// path).
    pub fn publish(
        &mut self,
        images: &[PlaneImage],
        services: &Services,
        mac: &dyn Fn(&IpAddr) -> Option<[u8; 6]>,
    ) -> Result<Published> {
        let g = (self.active + 1) % GENS;
        let mut r = Published::default();
        let t = Instant::now();
        let s = self.sizes;
        let (vbase, hbase, bbase) = (g * s.vips, g as u64 * s.heap_words as u64, g * s.backends);
        let (mut hpos, mut bpos, mut vpos) = (0u64, 0u32, 0u32);
        let mut keys = Vec::with_capacity(images.len());
        let mut words: Vec<u8> = Vec::new();
        for img in images {
            let Some(svc) = services.get(&img.vip) else {
                r.skipped += 1;
                continue;
            };
            let row_words = img.row.len().div_ceil(4) as u64;
            let need = (img.a.len() / 8 + 1 + img.b.len() / 8 + 1) as u64 + row_words;
            if vpos >= s.vips
                || hpos + need > s.heap_words as u64
                || bpos as usize + img.backends.len() > s.backends as usize
            {
                r.skipped += 1;
                continue;
            }
            let heap = &self.maps.heap;
            let (a_off, b_off) = (hbase + hpos, hbase + hpos + img.a.len() as u64 / 8 + 1);
            let row_off = b_off + img.b.len() as u64 / 8 + 1;
            heap.write(a_off as usize * 8, &img.a)?;
            heap.write((a_off as usize + img.a.len() / 8) * 8, &[0; 8])?;
            heap.write(b_off as usize * 8, &img.b)?;
            heap.write((b_off as usize + img.b.len() / 8) * 8, &[0; 8])?;
            words.clear();
            for c in img.row.chunks(4) {
                let mut w = 0u64;
                for (i, &e) in c.iter().enumerate() {
                    w |= (e as u64) << (16 * i);
                }
                words.extend_from_slice(&w.to_ne_bytes());
            }
            heap.write(row_off as usize * 8, &words)?;
            hpos += need;
            let bk_off = bbase + bpos;
            for (i, b) in img.backends.iter().enumerate() {
                let mut e = [0u8; BK_BYTES];
                e[0..16].copy_from_slice(&ip16(b.addr));
                let m = mac(&b.addr);
                if let Some(m) = m {
                    e[16..22].copy_from_slice(&m);
                }
                e[22] = if b.addr.is_ipv4() { 4 } else { 6 };
                e[23] = m.is_some() as u8;
                e[24..26].copy_from_slice(&b.port.to_ne_bytes());
                let ctr = self.counter_id(img.id, *b);
                e[28..32].copy_from_slice(&ctr.to_ne_bytes());
                self.maps.bk.write((bk_off as usize + i) * BK_BYTES, &e)?;
            }
            bpos += img.backends.len() as u32;
            let mut v = [0u8; VIP_BYTES];
            v[0..8].copy_from_slice(&img.seed.to_ne_bytes());
            v[8..12].copy_from_slice(&img.ma.to_ne_bytes());
            v[12..16].copy_from_slice(&img.mb.to_ne_bytes());
            v[16..20].copy_from_slice(&(a_off as u32).to_ne_bytes());
            v[20..24].copy_from_slice(&(b_off as u32).to_ne_bytes());
            v[24..28].copy_from_slice(&(row_off as u32).to_ne_bytes());
            v[28..32].copy_from_slice(&bk_off.to_ne_bytes());
            v[32..36].copy_from_slice(&(img.backends.len() as u32).to_ne_bytes());
            v[36..40].copy_from_slice(&img.id.to_ne_bytes());
            v[40..44].copy_from_slice(&(((1u64 << img.dbits) - 1) as u32).to_ne_bytes());
            v[44] = img.dbits as u8;
            v[45] = match svc.method {
                crate::config::Method::Dsr => 0,
                crate::config::Method::Ipip => 1,
            };
            let idx = vbase + vpos;
            self.maps.vips.write(idx as usize * VIP_BYTES, &v)?;
            vpos += 1;
            let mut k = [0u8; 24];
            k[0] = g as u8;
            k[1] = if img.vip.addr.is_ipv4() { 4 } else { 6 };
            k[2] = img.vip.proto;
            k[4..6].copy_from_slice(&img.vip.port.to_be_bytes());
            k[8..24].copy_from_slice(&ip16(img.vip.addr));
            keys.push((k, idx));
            r.vips += 1;
        }
        // The hash map's entries of this generation: old ones out, new ones in.
        for k in self.keys[g as usize].drain(..) {
            sys::map_delete(self.maps.vipmap.raw(), &k);
        }
        for (k, idx) in &keys {
            sys::map_update(self.maps.vipmap.raw(), k, &idx.to_ne_bytes())?;
            self.keys[g as usize].push(*k);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        self.maps.gen_word().store(g, Ordering::Release);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.active = g;
        r.words = hpos as usize;
        r.write_us = t.elapsed().as_micros() as u64;
        // The generation left behind is rewritten by a later publication:
        // wait here (microseconds) until no run can still be reading it.
        r.grace_us = self.quiesce()?;
        self.last_quiesce_us = r.grace_us;
        Ok(r)
    }
}

/// Generations of the data plane in the maps: the one packets read and the
/// one the next publication writes (free again once [`Program::quiesce`]
/// returned after the flip that left it).
const GENS: u32 = 2;

/// Runs the loaded program on frames (`BPF_PROG_TEST_RUN`).
pub struct Runner(OwnedFd);

impl Runner {
    /// As [`Program::run`].
    pub fn run(&self, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        let mut out = vec![0u8; frame.len() + 512];
        let (v, n) = sys::test_run(&self.0, frame, &mut out)?;
        out.truncate(n);
        Ok((v, out))
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// The numbers of the last pool change on the XDP path (for metrics).
pub fn record(counters: &Counters, p: &Published, total_us: u64) {
    counters.xdp_publishes.inc();
    counters.xdp_publish_us.set(p.write_us);
    counters.xdp_grace_us.set(p.grace_us);
    counters.xdp_pool_change_us.set(total_us);
}
