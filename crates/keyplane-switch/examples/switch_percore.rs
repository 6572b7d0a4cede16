//! Per-core forwarding benchmark of `keyplane switch` against the kernel (issue #16). Root; not a
//! test. `scripts/switch-bench.sh` runs it; see `docs/switch.md` for how to read the figures.
//!
//! ```text
//! cargo run --release -p keyplane-switch --example switch_percore -- [SECS] [ROUNDS] [RATE] [CPU]
//! ```
//!
//! Topology: generator namespace `g` —veth— switch namespace (`p0`, `p1`) —veth— sink namespace
//! `s`, and a second, direct veth pair `g:eth1` — `s:eth1` (no forwarder) as the baseline. The
//! generator is this program's own AF_PACKET `sendmmsg` loop (64 frames per call, destination MAC
//! or IPv4 address rewritten per frame), the same for every setup; the sink is the kernel of `s`,
//! which counts the frames (`/proc/net/dev` of `s`) and drops them.
//!
//! **Everything runs on one CPU** (`CPU`, default 1): the generator thread and every switch
//! thread are pinned there, and a veth delivers a frame in the softirq of the CPU that sent it,
//! so the kernel's own forwarding (bridge, IP forwarding), the copies into the AF_PACKET ring /
//! UMEM, the switch's transmit and the sink's receive all run on that CPU too. Two measures:
//!
//! * **saturated** (`sat`): the generator sends flat out; frames per second delivered to the sink
//!   when one core does generator + forwarder + sink. Same generator, same sink, same core for
//!   every setup: the difference is the forwarder.
//! * **cost** (`cost`): the generator is paced at `RATE` frames/s (default 50,000, below every
//!   setup's saturated rate). The CPU time of the threads that do the work — the generator
//!   thread, every switch thread, and the CPU's `ksoftirqd` — is read from the scheduler's exact
//!   runtimes (`/proc/.../schedstat`, nanoseconds); softirq work (the veth deliveries, the
//!   kernel's forwarding, the copies into the AF_PACKET ring / UMEM) runs inside those threads
//!   (this kernel accounts IRQ time to the current task), and other tenants' processes are not
//!   counted, so the figure holds on a loaded machine. That time per delivered frame, minus the
//!   same for the direct pair (generator + sink), is the forwarder's CPU time per frame; its
//!   inverse is **frames per second per core**.
//!
//! Setups, alternated within each round: `direct`; L2 (FIB 1K and 1M MACs, 64- and 1500-byte
//! frames, destinations spread over all FIB keys): `bridge` (the Linux bridge; with 1K MACs it
//! has them as static FDB entries on `p1`, with 1M it floods each frame to `p1`, its only other
//! port), `kp-af_packet`, `kp-af_xdp` (`keyplane switch`, one worker, FIB = OFW l = 8, f = 8 +
//! emptiness); L3 (64-byte UDP/IPv4 to 32,768 addresses of a /17): `kernel-ipfwd` (ip_forward,
//! the route, a static neighbour) and `kp-l3-af_packet`, `kp-l3-af_xdp` (LPM blob, next-hop
//! file). JSON lines (with the load average) go to `docs/bench/switch_percore.json`
//! (`SWITCH_PERCORE_JSON` to change) and stdout; a table to stderr.

use keyplane::lpm::Prefix;
use keyplane::{ControlTable, Wire};
use keyplane_any::{AnyControl, Opts};
use keyplane_net::IoKind;
use keyplane_net::cpu;
use keyplane_net::testnet::{self, TestNet};
use keyplane_switch::decide::Unknown;
use keyplane_switch::{Config, Mode, Shutdown};
use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

const BATCH: usize = 64;
const SRC_MAC: [u8; 6] = [2, 0x6b, 0x70, 0, 0, 1];
const SINK_MAC: [u8; 6] = [2, 0x6b, 0x70, 0, 0xbe, 0xef];

struct Topo {
    net: TestNet,
    g: String,
    sw: String,
    s: String,
    dir: PathBuf,
}

fn sh(ns: &str, cmd: &str) -> String {
    let o = std::process::Command::new("ip").args(["netns", "exec", ns, "sh", "-c", cmd]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn mac_str(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn setup() -> Topo {
    let mut net = TestNet::new("swpc").unwrap();
    let g = net.add_ns("g").unwrap();
    let sw = net.add_ns("sw").unwrap();
    let s = net.add_ns("s").unwrap();
    net.veth(&g, "eth0", &sw, "p0").unwrap();
    net.veth(&sw, "p1", &s, "eth0").unwrap();
    net.veth(&g, "eth1", &s, "eth1").unwrap();
    for ns in [&g, &sw, &s] {
        sh(ns, "sysctl -qw net.ipv6.conf.all.disable_ipv6=1; sysctl -qw net.ipv6.conf.default.disable_ipv6=1");
    }
    sh(&s, &format!("ip link set eth0 address {m}; ip link set eth1 address {m}", m = mac_str(&SINK_MAC)));
    let dir = std::env::temp_dir().join(format!("kp-switch-percore-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Topo { net, g, sw, s, dir }
}

/// FIB keys: 1K = 02:00:00:00:0a:bb (a < 4), 1M = 02:00:00:0a:bb:cc (a < 16).
fn key(n: u32, i: u32) -> [u8; 6] {
    if n <= 1024 { [2, 0, 0, 0, (i >> 8) as u8, i as u8] } else { [2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8] }
}

/// Pin the calling thread (tid 0) or thread `tid` to `cpu`.
fn pin(tid: i32, cpu: usize) {
    let _ = cpu::pin(tid, cpu);
}

/// Pin every thread of this process whose name starts with `kp-switch` to `cpu`.
fn pin_switch(cpu: usize) {
    for tid in cpu::threads_named(|c| c.starts_with("kp-switch")) {
        pin(tid, cpu);
    }
}

/// CPU time (ns, the scheduler's exact runtime from `schedstat`) of the threads doing the work:
/// the generator thread `gen_tid`, every `kp-switch*` thread of this process, and the CPU's
/// `ksoftirqd` (softirq work the kernel deferred). Softirq work run on a thread's way out of a
/// system call (a veth delivers in the sender's softirq) is part of that thread's runtime, as
/// the kernel here accounts IRQ time to the current task (no `CONFIG_IRQ_TIME_ACCOUNTING`).
fn work_ns(gen_tid: i32, ksoftirqd_cpu: usize) -> (u64, u64) {
    let sw: u64 = cpu::threads_named(|c| c.starts_with("kp-switch")).into_iter().map(cpu::thread_runtime_ns).sum();
    let other = cpu::thread_runtime_ns(gen_tid) + cpu::ksoftirqd_runtime_ns(ksoftirqd_cpu);
    (other + sw, sw)
}

fn loadavg() -> String {
    cpu::loadavg()
}

/// `/proc/net/dev` of the sink namespace, opened there (the file keeps its namespace).
struct SinkCounter(std::fs::File);

impl SinkCounter {
    fn new(ns: &str) -> Self {
        SinkCounter(testnet::enter(ns, || std::fs::File::open("/proc/thread-self/net/dev").unwrap()).unwrap())
    }
    fn rx_packets(&mut self, ifname: &str) -> u64 {
        let mut s = String::new();
        self.0.rewind().unwrap();
        self.0.read_to_string(&mut s).unwrap();
        let tag = format!("{ifname}:");
        s.lines()
            .find_map(|l| {
                l.trim_start().strip_prefix(&tag).map(|r| r.split_whitespace().nth(1).unwrap_or("0").to_string())
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

#[derive(Clone, Copy)]
enum Traffic {
    /// Destination MACs over the FIB's `n` keys.
    L2 { n: u32 },
    /// UDP/IPv4 to 198.18.128.0/17 through a router whose MAC is `gw`.
    L3 { gw: [u8; 6] },
}

fn template(t: Traffic, size: usize) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[6..12].copy_from_slice(&SRC_MAC);
    match t {
        Traffic::L2 { .. } => f[12..14].copy_from_slice(&[0x88, 0xb5]),
        Traffic::L3 { gw } => {
            f[0..6].copy_from_slice(&gw);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let ip_len = (size - 14) as u16;
            f[14] = 0x45;
            f[16..18].copy_from_slice(&ip_len.to_be_bytes());
            f[20] = 0x40; // DF
            f[22] = 64; // TTL
            f[23] = 17; // UDP
            f[26..30].copy_from_slice(&[198, 18, 0, 2]);
            f[34..36].copy_from_slice(&1024u16.to_be_bytes());
            f[36..38].copy_from_slice(&2048u16.to_be_bytes());
            f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        }
    }
    f
}

/// Rewrite frame number `k`'s destination (spread over all keys / addresses).
fn patch(f: &mut [u8], t: Traffic, k: u64) {
    let h = (k as u32).wrapping_mul(0x9e37_79b1);
    match t {
        Traffic::L2 { n } => f[0..6].copy_from_slice(&key(n, h & (n - 1))),
        Traffic::L3 { .. } => {
            let a = h & 0x7fff;
            f[30..34].copy_from_slice(&[198, 18, 128 | (a >> 8) as u8, a as u8]);
            f[24..26].copy_from_slice(&[0, 0]);
            let mut sum = 0u32;
            for w in f[14..34].chunks(2) {
                sum += u16::from_be_bytes([w[0], w[1]]) as u32;
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
    }
}

/// Sends from `ns`/`ifname` on `cpu` until `stop`, paced at `rate` frames/s (or flat out).
/// Returns the frames the kernel accepted.
/// What the generator sends, from where, on which CPU, how fast (`None`: flat out).
struct GenSpec<'a> {
    ns: &'a str,
    ifname: &'a str,
    cpu: usize,
    t: Traffic,
    size: usize,
    rate: Option<f64>,
}

fn generator(g: &GenSpec<'_>, stop: &AtomicBool, tid: &AtomicI32) -> u64 {
    let GenSpec { ns, ifname, cpu, t, size, rate } = *g;
    pin(0, cpu);
    // SAFETY: gettid has no preconditions.
    tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
    let fd = testnet::enter(ns, || {
        // SAFETY: plain socket(2); the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let one: i32 = 1;
        // SAFETY: setsockopt with an int option value we own.
        unsafe { libc::setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, 20, &one as *const i32 as *const libc::c_void, 4) };
        let name = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: NUL-terminated name.
        let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
        // SAFETY: sockaddr_ll is plain old data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = idx as i32;
        // SAFETY: valid sockaddr_ll of the given size.
        let r = unsafe {
            libc::bind(fd.as_raw_fd(), &sll as *const _ as *const libc::sockaddr, std::mem::size_of_val(&sll) as u32)
        };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        fd
    })
    .unwrap();
    let tpl = template(t, size);
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| tpl.clone()).collect();
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec { iov_base: b.as_mut_ptr() as *mut libc::c_void, iov_len: b.len() })
        .collect();
    // SAFETY: mmsghdr is plain old data.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let t0 = Instant::now();
    let (mut k, mut sent) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        if let Some(r) = rate {
            let due = (t0.elapsed().as_secs_f64() * r) as u64;
            if sent + BATCH as u64 > due {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
        }
        for b in bufs.iter_mut() {
            patch(b, t, k);
            k += 1;
        }
        // SAFETY: msgs point at live iovecs and buffers of this frame.
        let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), BATCH as u32, 0) };
        if r > 0 {
            sent += r as u64;
        } else {
            std::thread::yield_now();
        }
    }
    sent
}

/// One round of one setup: (saturated, paced, paced direct baseline measured right before).
type Round = (Sample, Sample, Sample);

#[derive(Clone, Copy, Default)]
struct Sample {
    /// Frames delivered per second.
    pps: f64,
    /// CPU seconds of generator + switch + ksoftirqd per delivered frame.
    busy_per_frame: f64,
    /// CPU seconds of the switch's threads per delivered frame (0 for kernel paths).
    worker_per_frame: f64,
    /// Frames the generator sent per second.
    sent_pps: f64,
}

/// Runs the generator for `secs` (after 0.3 s of warm-up) and measures the sink and CPU time.
fn measure(n: &Topo, via_direct: bool, t: Traffic, size: usize, rate: Option<f64>, secs: f64, cpu: usize) -> Sample {
    let mut sink = SinkCounter::new(&n.s);
    let ifname = if via_direct { "eth1" } else { "eth0" };
    let stop = AtomicBool::new(false);
    let tid = AtomicI32::new(0);
    std::thread::scope(|sc| {
        let spec = GenSpec { ns: &n.g, ifname, cpu, t, size, rate };
        let (stop, tid) = (&stop, &tid);
        let g = sc.spawn(move || generator(&spec, stop, tid));
        std::thread::sleep(Duration::from_millis(300));
        let gt = tid.load(Ordering::Relaxed);
        let (r0, (b0, w0), t0) = (sink.rx_packets(ifname), work_ns(gt, cpu), Instant::now());
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (r1, (b1, w1), dt) = (sink.rx_packets(ifname), work_ns(gt, cpu), t0.elapsed().as_secs_f64());
        stop.store(true, Ordering::Relaxed);
        let sent = g.join().unwrap();
        let frames = (r1 - r0).max(1) as f64;
        std::thread::sleep(Duration::from_millis(200));
        Sample {
            pps: frames / dt,
            busy_per_frame: (b1 - b0) as f64 * 1e-9 / frames,
            worker_per_frame: (w1 - w0) as f64 * 1e-9 / frames,
            sent_pps: sent as f64 / (dt + 0.3),
        }
    })
}

/// The L2 FIB over the `n` keys, all on port 1: `SWITCH_PERCORE_FIB=STRUCTURE[:OPTIONS]`
/// (default `othello:filtered=8`, OFW l = 8, f = 8 + emptiness; e.g. `ludo:fingerprint_bits=8`).
fn l2_fib(dir: &std::path::Path, n: u32, spec: &str) -> PathBuf {
    let (s, o) = spec.split_once(':').unwrap_or((spec, ""));
    let ctl = AnyControl::build(s, (0..n).map(|i| (key(n, i).to_vec(), 1u64)), 8, &Opts::parse(o).unwrap()).unwrap();
    let p = dir.join(format!("fib{n}.kpl"));
    std::fs::write(&p, ctl.export().to_bytes()).unwrap();
    p
}

#[derive(Clone)]
enum Fwd {
    Direct,
    Bridge { fdb: bool },
    KernelL3,
    Keyplane { cfg: Box<Config> },
}

/// Measures the direct pair paced (the baseline, right before), then sets the forwarder up,
/// measures saturated and paced, tears it down: (saturated, paced, paced baseline).
fn run_setup(
    n: &Topo,
    fwd: &Fwd,
    t: Traffic,
    size: usize,
    secs: f64,
    rate: f64,
    cpu: usize,
) -> (Sample, Sample, Sample) {
    let base = measure(n, true, t, size, Some(rate), secs, cpu);
    let go = |direct: bool| {
        let sat = measure(n, direct, t, size, None, secs, cpu);
        let cost = measure(n, direct, t, size, Some(rate), secs, cpu);
        (sat, cost, base)
    };
    match fwd {
        Fwd::Direct => go(true),
        Fwd::Bridge { fdb } => {
            n.net.ip(&n.sw, &["link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0"]).unwrap();
            n.net.up(&n.sw, "br0").unwrap();
            n.net.attach(&n.sw, "p0", "br0").unwrap();
            n.net.attach(&n.sw, "p1", "br0").unwrap();
            if *fdb {
                let batch = n.dir.join("fdb.batch");
                let lines: String =
                    (0..1024).map(|i| format!("fdb add {} dev p1 master static\n", mac_str(&key(1024, i)))).collect();
                std::fs::write(&batch, lines).unwrap();
                sh(&n.sw, &format!("bridge -batch {}", batch.display()));
            }
            let r = go(false);
            n.net.ip(&n.sw, &["link", "del", "br0"]).unwrap();
            n.net.up(&n.sw, "p0").unwrap();
            n.net.up(&n.sw, "p1").unwrap();
            r
        }
        Fwd::KernelL3 => {
            sh(
                &n.sw,
                &format!(
                    "sysctl -qw net.ipv4.ip_forward=1; ip addr add 198.18.0.1/24 dev p0; ip addr add 198.18.1.1/24 dev p1; \
                     ip route add 198.18.128.0/17 via 198.18.1.2; ip neigh replace 198.18.1.2 lladdr {} dev p1 nud permanent",
                    mac_str(&SINK_MAC)
                ),
            );
            let r = go(false);
            sh(&n.sw, "sysctl -qw net.ipv4.ip_forward=0; ip addr flush dev p0; ip addr flush dev p1");
            r
        }
        Fwd::Keyplane { cfg } => {
            let stop = Shutdown::new();
            let sw = testnet::enter(&n.sw, || keyplane_switch::start(cfg, &stop)).unwrap().unwrap();
            pin_switch(cpu);
            let r = go(false);
            stop.stop();
            let fin = sw.join().unwrap();
            let st = &fin.port_stats[0];
            if st.rx_kernel_drops > 0 {
                eprintln!(
                    "    ({} frames dropped at p0's ring: the worker was not scheduled in time)",
                    st.rx_kernel_drops
                );
            }
            r
        }
    }
}

fn main() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("switch_percore needs network namespaces: {why}");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let rate: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50_000.0);
    let cpu: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    let json_path = std::env::var("SWITCH_PERCORE_JSON").unwrap_or_else(|_| "docs/bench/switch_percore.json".into());
    let load_start = loadavg();
    eprintln!(
        "switch_percore: {secs} s per measurement, {rounds} rounds, paced at {rate} frames/s, CPU {cpu}, load {load_start}"
    );
    let n = setup();
    let fib_spec = std::env::var("SWITCH_PERCORE_FIB").unwrap_or_else(|_| "othello:filtered=8".into());
    eprintln!("L2 FIB: {fib_spec}, l = 8");
    let fibs: Vec<(u32, PathBuf)> = [1024u32, 1 << 20].iter().map(|&k| (k, l2_fib(&n.dir, k, &fib_spec))).collect();
    let p0mac = testnet::enter(&n.sw, || keyplane_net::interface_mac("p0")).unwrap().unwrap().0;
    let routes =
        keyplane::lpm::Control::from_prefixes([("198.18.128.0/17".parse::<Prefix>().unwrap(), 0u64)], 4).unwrap();
    let rp = n.dir.join("routes.kpl");
    std::fs::write(&rp, routes.export().to_bytes()).unwrap();
    let nh = n.dir.join("nh");
    std::fs::write(&nh, format!("0 p1 {}\n", mac_str(&SINK_MAC))).unwrap();
    let kp = |fib: &PathBuf, io: IoKind, l3: bool| {
        let mut cfg = Config::new(vec!["p0".into(), "p1".into()], fib);
        cfg.io = io;
        cfg.learn = Some(false);
        cfg.unknown = Unknown::Drop;
        if l3 {
            cfg.mode = Mode::L3;
            cfg.next_hops = Some(nh.clone());
        }
        Fwd::Keyplane { cfg: Box::new(cfg) }
    };
    // (group, setup name, forwarder, traffic, frame size)
    let mut cases: Vec<(String, String, Fwd, Traffic, usize)> = Vec::new();
    for size in [64usize, 1500] {
        cases.push((format!("l2 {size}B"), "direct".into(), Fwd::Direct, Traffic::L2 { n: 1024 }, size));
        for (k, fib) in &fibs {
            let g = format!("l2 {size}B fib {k}");
            let t = Traffic::L2 { n: *k };
            cases.push((g.clone(), "bridge".into(), Fwd::Bridge { fdb: *k <= 1024 }, t, size));
            cases.push((g.clone(), "kp-af_packet".into(), kp(fib, IoKind::AfPacket, false), t, size));
            cases.push((g, "kp-af_xdp".into(), kp(fib, IoKind::AfXdp, false), t, size));
        }
    }
    let t3 = Traffic::L3 { gw: p0mac };
    cases.push(("l3 64B".into(), "direct".into(), Fwd::Direct, t3, 64));
    cases.push(("l3 64B".into(), "kernel-ipfwd".into(), Fwd::KernelL3, t3, 64));
    cases.push(("l3 64B".into(), "kp-l3-af_packet".into(), kp(&rp, IoKind::AfPacket, true), t3, 64));
    cases.push(("l3 64B".into(), "kp-l3-af_xdp".into(), kp(&rp, IoKind::AfXdp, true), t3, 64));
    // SWITCH_PERCORE_ONLY=WORD: only the cases whose "case setup" name contains WORD, e.g.
    // `l2` or `64B fib 1024 kp-af_packet` (for profiling one setup).
    if let Ok(only) = std::env::var("SWITCH_PERCORE_ONLY") {
        cases.retain(|c| format!("{} {}", c.0, c.1).contains(&only));
    }
    // results[(group, setup)] = per round (sat, cost, baseline measured right before)
    let mut results: BTreeMap<(String, String), Vec<Round>> = BTreeMap::new();
    for round in 0..rounds {
        // Alternate the order of the setups from round to round.
        let order: Vec<usize> =
            if round % 2 == 0 { (0..cases.len()).collect() } else { (0..cases.len()).rev().collect() };
        for i in order {
            let (g, name, fwd, t, size) = &cases[i];
            let (sat, cost, base) = run_setup(&n, fwd, *t, *size, secs, rate, cpu);
            eprintln!(
                "  round {} {g:<18} {name:<16} sat {:>9.0} pps | paced {:>7.0} pps, {:>6.0} ns CPU/frame (direct {:>6.0}), switch {:>6.0} ns/frame | load {}",
                round + 1,
                sat.pps,
                cost.pps,
                cost.busy_per_frame * 1e9,
                base.busy_per_frame * 1e9,
                cost.worker_per_frame * 1e9,
                loadavg()
            );
            results.entry((g.clone(), name.clone())).or_default().push((sat, cost, base));
        }
    }
    let load_end = loadavg();
    let mut json = Vec::new();
    eprintln!(
        "\n{:<18} {:<16} {:>21} {:>25} {:>23}",
        "case", "setup", "sat pps (1 core)", "fwd ns/frame (paced)", "fwd pps per core"
    );
    for ((g, name), v) in &results {
        // Forwarding cost per frame: paced CPU time per frame minus the direct pair's, measured
        // right before in the same round.
        let (slo, shi) = minmax(v.iter().map(|x| x.0.pps));
        let fwd: Vec<f64> = v.iter().map(|x| x.1.busy_per_frame - x.2.busy_per_frame).collect();
        let (blo, bhi) = minmax(v.iter().map(|x| x.2.busy_per_frame));
        let (flo, fhi) = minmax(fwd.iter().copied());
        // Pooled over rounds: all CPU time over all frames, minus the same for the baselines.
        let pooled = |f: &dyn Fn(&Round) -> Sample| {
            let (t, n) = v.iter().map(f).fold((0.0, 0.0), |(t, n), s| (t + s.busy_per_frame * s.pps, n + s.pps));
            t / n
        };
        let fmean = pooled(&|x| x.1) - pooled(&|x| x.2);
        // Frames per second per core; none where noise made the difference non-positive.
        let per_core = |ns: f64| if ns > 0.0 { format!("{:.0}", 1.0 / ns) } else { "null".to_string() };
        let (wlo, whi) = minmax(v.iter().map(|x| x.1.worker_per_frame));
        let (plo, phi) = minmax(v.iter().map(|x| x.1.pps));
        let (glo, ghi) = minmax(v.iter().map(|x| x.0.sent_pps));
        if name == "direct" {
            eprintln!(
                "{g:<18} {name:<16} {slo:>9.0}..{shi:>9.0} {:>11.0}..{:>11.0} (gen+sink ns/frame)",
                blo * 1e9,
                bhi * 1e9
            );
        } else {
            eprintln!(
                "{g:<18} {name:<16} {slo:>9.0}..{shi:>9.0} {:>11.0}..{:>11.0} {:>10}..{:>10}   pooled {:>5.0} ns = {:>8} /s",
                flo * 1e9,
                fhi * 1e9,
                per_core(fhi),
                per_core(flo),
                fmean * 1e9,
                per_core(fmean)
            );
        }
        json.push(format!(
            "{{\"bench\":\"switch_percore\",\"case\":\"{g}\",\"l2_fib\":\"{fib_spec}\",\"setup\":\"{name}\",\"cpu\":{cpu},\"rounds\":{},\"secs\":{secs},\
             \"sat_pps_min\":{slo:.0},\"sat_pps_max\":{shi:.0},\"sat_generated_pps_min\":{glo:.0},\"sat_generated_pps_max\":{ghi:.0},\
             \"paced_rate\":{rate},\"paced_delivered_pps_min\":{plo:.0},\"paced_delivered_pps_max\":{phi:.0},\
             \"fwd_ns_per_frame_min\":{:.1},\"fwd_ns_per_frame_max\":{:.1},\"fwd_pps_per_core_min\":{},\"fwd_pps_per_core_max\":{},\"fwd_ns_per_frame_pooled\":{:.1},\"fwd_pps_per_core_pooled\":{},\
             \"worker_ns_per_frame_min\":{:.1},\"worker_ns_per_frame_max\":{:.1},\"baseline_ns_per_frame_min\":{:.1},\"baseline_ns_per_frame_max\":{:.1},\
             \"load_start\":\"{load_start}\",\"load_end\":\"{load_end}\"}}",
            v.len(),
            flo * 1e9,
            fhi * 1e9,
            per_core(fhi),
            per_core(flo),
            fmean * 1e9,
            per_core(fmean),
            wlo * 1e9,
            whi * 1e9,
            blo * 1e9,
            bhi * 1e9
        ));
    }
    eprintln!("load average: start {load_start}, end {load_end}");
    let mut f = std::fs::File::create(&json_path).unwrap();
    for l in &json {
        writeln!(f, "{l}").unwrap();
        println!("{l}");
    }
    let _ = std::fs::remove_dir_all(&n.dir);
}

fn minmax(it: impl Iterator<Item = f64>) -> (f64, f64) {
    it.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)))
}
