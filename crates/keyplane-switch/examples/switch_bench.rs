//! `keyplane switch` benchmark (issue #16; not a test). Needs root.
//!
//! ```text
//! cargo run --release -p keyplane-switch --example switch_bench [-- SECS ROUNDS]
//! ```
//!
//! Topology: generator namespace `g` —veth— switch namespace (`p0`, `p1`) —veth— sink namespace
//! `s`. `trafgen` (netsniff-ng, one CPU) floods `p0` with frames whose destination MACs are
//! drawn from the FIB's keys (all behind `p1`); the sink's interface counters give the frames
//! forwarded. Setups, alternated round by round (the machine is shared and noisy):
//!
//! * `bridge`: the Linux bridge in the switch namespace (`p0`, `p1` enslaved; unknown
//!   destinations flood to the one other port, which is the same work as forwarding there);
//! * `keyplane-af_packet`, `keyplane-af_xdp`: `keyplane switch` with one worker, FIB = OFW
//!   (Othello, l = 8, fingerprint 8 + emptiness) over 1K or 1M MACs;
//! * L3 (64-byte UDP/IPv4 to 198.18.200.1, matched by a /17; trafgen's
//!   `csumip` cannot cover bytes made random after it, so the destination is fixed): `kernel-ipfwd` (ip_forward, one
//!   route, static neighbour) vs `keyplane-l3-*` (LPM blob, next-hop file).
//!
//! Per-core figure for keyplane: forwarded frames / CPU seconds of the worker thread
//! (utime + stime from /proc). For the kernel paths the work runs in softirq on whatever CPU
//! sends; their per-core figure is forwarded frames / softirq+system CPU seconds of the whole
//! machine in the window (an upper bound on their cost, so a lower bound on per-core pps).
//!
//! Then, on AF_PACKET with a paced generator (keyplane-net AF_PACKET port, 200K frames/s to
//! 1K flows): frames lost while 10,000 FIB updates/s are applied to other keys, and the
//! delta-apply rate while forwarding (as fast as the control side can). JSON lines go to
//! `docs/bench/switch.json` (with `--json PATH` elsewhere) and stdout; a table to stderr.

use keyplane::lpm::Prefix;
use keyplane::{ControlTable, Wire};
use keyplane_any::{AnyControl, Opts};
use keyplane_net::cpu;
use keyplane_net::testnet::{self, TestNet};
use keyplane_net::{IoKind, PortOptions};
use keyplane_switch::decide::Unknown;
use keyplane_switch::source::{UpdateEvent, Updater};
use keyplane_switch::{Config, Mode, Shutdown};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Net {
    net: TestNet,
    g: String,
    sw: String,
    s: String,
    sink_mac: String,
    dir: PathBuf,
}

fn sh(ns: &str, cmd: &str) -> String {
    let o = std::process::Command::new("ip").args(["netns", "exec", ns, "sh", "-c", cmd]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn rx_packets(ns: &str) -> u64 {
    sh(ns, "cat /sys/class/net/eth0/statistics/rx_packets").parse().unwrap_or(0)
}

fn setup() -> Net {
    let mut net = TestNet::new("swb").unwrap();
    let g = net.add_ns("g").unwrap();
    let sw = net.add_ns("sw").unwrap();
    let s = net.add_ns("s").unwrap();
    net.veth(&g, "eth0", &sw, "p0").unwrap();
    net.veth(&sw, "p1", &s, "eth0").unwrap();
    for ns in [&g, &sw, &s] {
        sh(ns, "sysctl -qw net.ipv6.conf.all.disable_ipv6=1; sysctl -qw net.ipv6.conf.default.disable_ipv6=1");
    }
    net.set_mac(&s, "eth0", testnet::mac(0xbeef)).unwrap();
    let sink_mac = testnet::mac(0xbeef).to_string();
    let dir = std::env::temp_dir().join(format!("kp-switch-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Net { net, g, sw, s, sink_mac, dir }
}

/// FIB keys: 1K = 02:00:00:00:0a:bb (a < 4), 1M = 02:00:00:0a:bb:cc (a < 16).
fn keys(n: usize) -> Vec<[u8; 6]> {
    if n <= 1024 {
        (0..1024u32).map(|i| [2, 0, 0, 0, (i >> 8) as u8, i as u8]).collect()
    } else {
        (0..1u32 << 20).map(|i| [2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]).collect()
    }
}

fn trafgen_l2(path: &Path, n: usize, size: usize) {
    let dst = if n <= 1024 {
        "0x02, 0x00, 0x00, 0x00, dinc(0, 3), drnd(),"
    } else {
        "0x02, 0x00, 0x00, dinc(0, 15), drnd(), drnd(),"
    };
    let cfg =
        format!("{{\n  {dst}\n  0x02, 0x6b, 0x70, 0x00, 0x00, 0x01,\n  0x88, 0xb5,\n  fill(0x00, {})\n}}\n", size - 14);
    std::fs::write(path, cfg).unwrap();
}

fn trafgen_l3(path: &Path, dst_mac: &str) {
    let m: Vec<String> = dst_mac.split(':').map(|b| format!("0x{b}")).collect();
    // 64-byte frame: Ethernet, IPv4 (checksum by csumip), UDP (checksum 0), 18 bytes payload.
    let cfg = format!(
        "{{\n  {},\n  0x02, 0x6b, 0x70, 0x00, 0x00, 0x01, 0x08, 0x00,\n  0x45, 0x00, 0x00, 0x32, 0x00, 0x01, 0x40, 0x00, 0x40, 0x11, csumip(14, 33),\n  198, 18, 0, 2,  198, 18, 200, 1,\n  0x04, 0x00, 0x08, 0x00, 0x00, 0x1e, 0x00, 0x00,\n  fill(0x00, 22)\n}}\n",
        m.join(", ")
    );
    std::fs::write(path, cfg).unwrap();
}

/// CPU seconds (user + system) of this process's threads named `name`.
fn thread_cpu(name: &str) -> f64 {
    let ticks: u64 = cpu::threads_named(|c| c == name).into_iter().map(cpu::thread_ticks).sum();
    ticks as f64 / cpu::USER_HZ
}

/// Machine-wide softirq + system CPU seconds so far.
fn kernel_cpu() -> f64 {
    cpu::kernel_ticks() as f64 / cpu::USER_HZ
}

struct Sample {
    pps: f64,
    per_core: f64,
}

/// Floods for `secs` with trafgen and measures the sink.
fn flood(n: &Net, conf: &Path, secs: f64, worker: Option<&str>) -> Sample {
    use std::os::unix::process::CommandExt;
    // trafgen forks its sender: run it in its own process group and stop the whole group.
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &n.g, "trafgen", "--dev", "eth0", "--conf"])
        .arg(conf)
        .args(["-P", "1", "-q", "-C", "-Q", "-n", "50000000"])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let (r0, c0, k0, t0) = (rx_packets(&n.s), worker.map(thread_cpu).unwrap_or(0.0), kernel_cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (r1, c1, k1, dt) =
        (rx_packets(&n.s), worker.map(thread_cpu).unwrap_or(0.0), kernel_cpu(), t0.elapsed().as_secs_f64());
    // SAFETY: signals the process group we created above (its leader is our child).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let t = Instant::now();
    while child.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above; a sender that ignored SIGINT is killed.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(300));
    let frames = (r1 - r0) as f64;
    let cpu = if worker.is_some() { c1 - c0 } else { k1 - k0 };
    Sample { pps: frames / dt, per_core: if cpu > 0.0 { frames / cpu } else { 0.0 } }
}

fn ofw_fib(n: &Net, keys: &[[u8; 6]]) -> (PathBuf, AnyControl) {
    let ctl =
        AnyControl::build("othello", keys.iter().map(|k| (k.to_vec(), 1u64)), 8, &Opts::parse("filtered=8").unwrap())
            .unwrap();
    let p = n.dir.join(format!("fib{}.kpl", keys.len()));
    std::fs::write(&p, ctl.export().to_bytes()).unwrap();
    (p, ctl)
}

fn main() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("switch_bench needs network namespaces: {why}");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let json_path = std::env::var("SWITCH_BENCH_JSON").unwrap_or_else(|_| "docs/bench/switch.json".into());
    let mut n = setup();
    let mut results: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut json = Vec::new();
    let fibs: Vec<(usize, PathBuf, AnyControl)> = [1024usize, 1 << 20]
        .iter()
        .map(|&k| {
            let ks = keys(k);
            let (p, c) = ofw_fib(&n, &ks);
            (k, p, c)
        })
        .collect();
    let mem: Vec<(usize, usize)> = fibs.iter().map(|(k, _, c)| (*k, c.export().memory_bytes())).collect();
    for round in 0..rounds {
        for size in [64usize, 1500] {
            for (k, fib, _) in &fibs {
                let conf = n.dir.join("l2.cfg");
                trafgen_l2(&conf, *k, size);
                // Bridge.
                n.net.bridge(&n.sw, "br0").unwrap();
                n.net.attach(&n.sw, "p0", "br0").unwrap();
                n.net.attach(&n.sw, "p1", "br0").unwrap();
                let s = flood(&n, &conf, secs, None);
                n.net.ip(&n.sw, &["link", "del", "br0"]).unwrap();
                n.net.up(&n.sw, "p0").unwrap();
                n.net.up(&n.sw, "p1").unwrap();
                results.entry(format!("l2 {size}B fib {k}: bridge")).or_default().push((s.pps, s.per_core));
                for io in [IoKind::AfPacket, IoKind::AfXdp] {
                    let mut cfg = Config::new(vec!["p0".into(), "p1".into()], fib);
                    cfg.io = io;
                    cfg.learn = Some(false);
                    cfg.unknown = Unknown::Drop;
                    let stop = Shutdown::new();
                    let sw = match testnet::enter(&n.sw, || keyplane_switch::start(&cfg, &stop)).unwrap() {
                        Ok(s) => s,
                        Err(e) => {
                            eprintln!("{io}: {e}");
                            continue;
                        }
                    };
                    let s = flood(&n, &conf, secs, Some("kp-switch-0"));
                    stop.stop();
                    let fin = sw.join().unwrap();
                    eprintln!("  {io} {size}B fib {k}: {:.0} pps; p0 {}", s.pps, fin.port_stats[0]);
                    results.entry(format!("l2 {size}B fib {k}: keyplane-{io}")).or_default().push((s.pps, s.per_core));
                }
            }
        }
        // L3, 64-byte frames.
        let p0mac = testnet::enter(&n.sw, || keyplane_switch::interface_mac("p0")).unwrap().unwrap();
        let p0s: Vec<String> = p0mac.iter().map(|b| format!("{b:02x}")).collect();
        let conf = n.dir.join("l3.cfg");
        trafgen_l3(&conf, &p0s.join(":"));
        sh(
            &n.sw,
            &format!(
                "sysctl -qw net.ipv4.ip_forward=1; ip addr add 198.18.0.1/24 dev p0; ip addr add 198.18.1.1/24 dev p1; \
             ip route add 198.18.128.0/17 via 198.18.1.2; ip neigh replace 198.18.1.2 lladdr {} dev p1",
                n.sink_mac
            ),
        );
        let s = flood(&n, &conf, secs, None);
        results.entry("l3 64B: kernel-ipfwd".into()).or_default().push((s.pps, s.per_core));
        sh(&n.sw, "sysctl -qw net.ipv4.ip_forward=0; ip addr flush dev p0; ip addr flush dev p1");
        let routes =
            keyplane::lpm::Control::from_prefixes([("198.18.128.0/17".parse::<Prefix>().unwrap(), 0u64)], 4).unwrap();
        let rp = n.dir.join("routes.kpl");
        std::fs::write(&rp, routes.export().to_bytes()).unwrap();
        let nh = n.dir.join("nh");
        std::fs::write(&nh, format!("0 p1 {}\n", n.sink_mac)).unwrap();
        for io in [IoKind::AfPacket, IoKind::AfXdp] {
            let mut cfg = Config::new(vec!["p0".into(), "p1".into()], &rp);
            cfg.mode = Mode::L3;
            cfg.next_hops = Some(nh.clone());
            cfg.io = io;
            let stop = Shutdown::new();
            let Ok(sw) = testnet::enter(&n.sw, || keyplane_switch::start(&cfg, &stop)).unwrap() else { continue };
            let s = flood(&n, &conf, secs, Some("kp-switch-0"));
            stop.stop();
            let fin = sw.join().unwrap();
            eprintln!("  l3 {io}: {:.0} pps\n{}", s.pps, fin.summary());
            results.entry(format!("l3 64B: keyplane-l3-{io}")).or_default().push((s.pps, s.per_core));
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    for (k, v) in &results {
        let (lo, hi) = minmax(v.iter().map(|x| x.0));
        let (clo, chi) = minmax(v.iter().map(|x| x.1));
        json.push(format!(
            "{{\"bench\":\"switch\",\"setup\":\"{k}\",\"pps_min\":{lo:.0},\"pps_max\":{hi:.0},\"pps_per_core_min\":{clo:.0},\"pps_per_core_max\":{chi:.0},\"rounds\":{},\"secs\":{secs}}}",
            v.len()
        ));
        eprintln!("{k:<40} {lo:>10.0} .. {hi:>10.0} pps   per core {clo:>10.0} .. {chi:>10.0}");
    }
    for (k, m) in &mem {
        let bits = *m as f64 * 8.0 / *k as f64;
        json.push(format!("{{\"bench\":\"switch\",\"setup\":\"fib memory ofw l=8 f=8+e\",\"macs\":{k},\"bytes\":{m},\"bits_per_mac\":{bits:.2}}}"));
        eprintln!("FIB memory, OFW l=8 f=8+emptiness, {k} MACs: {m} bytes = {bits:.2} bits/MAC");
    }
    for k in [1024usize, 1 << 20] {
        let ctl = AnyControl::build("othello", keys(k).iter().map(|x| (x.to_vec(), 1u64)), 8, &Opts::new()).unwrap();
        let m = ctl.export().memory_bytes();
        let bits = m as f64 * 8.0 / k as f64;
        json.push(format!("{{\"bench\":\"switch\",\"setup\":\"fib memory ofw l=8 f=0\",\"macs\":{k},\"bytes\":{m},\"bits_per_mac\":{bits:.2}}}"));
        eprintln!("FIB memory, Othello l=8 no fingerprint, {k} MACs: {m} bytes = {bits:.2} bits/MAC");
    }
    json.extend(updates_while_forwarding(&n));
    let mut f = std::fs::File::create(&json_path).unwrap();
    for l in &json {
        writeln!(f, "{l}").unwrap();
        println!("{l}");
    }
    let _ = std::fs::remove_dir_all(&n.dir);
}

fn minmax(it: impl Iterator<Item = f64>) -> (f64, f64) {
    it.fold((f64::MAX, 0.0f64), |(a, b), x| (a.min(x), b.max(x)))
}

const PACED_PPS: u64 = 50_000;

/// Paced traffic (50K frames/s to the 1K-MAC FIB's keys) while FIB updates
/// on other keys are applied: at 10,000 per second, then as fast as possible.
fn updates_while_forwarding(n: &Net) -> Vec<String> {
    let mut out = Vec::new();
    // FIB: the 1,024 traffic MACs behind p1 plus 100,000 other MACs whose entries the
    // updates change (port 0 <-> port 1): the traffic's flows are the unaffected ones.
    let other = |i: u32| [4u8, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8];
    let items: Vec<(Vec<u8>, u64)> =
        keys(1024).iter().map(|k| (k.to_vec(), 1u64)).chain((0..100_000u32).map(|i| (other(i).to_vec(), 0))).collect();
    let mut ctl = AnyControl::build("othello", items, 8, &Opts::parse("filtered=8").unwrap()).unwrap();
    let fib = n.dir.join("upd.kpl");
    std::fs::write(&fib, ctl.export().to_bytes()).unwrap();
    let mut cfg = Config::new(vec!["p0".into(), "p1".into()], &fib);
    cfg.io = IoKind::AfPacket;
    cfg.learn = Some(false);
    cfg.unknown = Unknown::Drop;
    let stop = Shutdown::new();
    let sw = testnet::enter(&n.sw, || keyplane_switch::start(&cfg, &stop)).unwrap().unwrap();
    let updater = Updater::new(sw.fib.clone());
    let ev = &sw.counters.events;
    // Pre-computed deltas: the control side's cost is separate from applying them.
    let t = Instant::now();
    let mut deltas = Vec::new();
    for i in 0..300_000u32 {
        deltas.push(ctl.insert(&other(i % 100_000), (1 + i / 100_000) as u64 % 2).unwrap());
    }
    let make_s = t.elapsed().as_secs_f64();
    for (rate, count) in [(1u64, 0usize), (10_000, 30_000), (0, 270_000)] {
        let frames = PACED_PPS * 3;
        let done = std::sync::atomic::AtomicBool::new(false);
        let run = std::thread::scope(|s| {
            let rcv = s.spawn(|| receive(&n.s, frames, &done));
            std::thread::sleep(Duration::from_millis(100));
            let g = s.spawn(|| paced(&n.g, PACED_PPS, frames));
            let t = Instant::now();
            let start = if rate == 0 { 30_000 } else { 0 };
            let count = if rate == 1 { 0 } else { count };
            for (i, d) in deltas[start..start + count].iter().enumerate() {
                if rate > 0 {
                    let due = Duration::from_secs_f64(i as f64 / rate as f64);
                    if let Some(w) = due.checked_sub(t.elapsed()) {
                        std::thread::sleep(w);
                    }
                }
                updater.apply(&UpdateEvent::Delta(d.clone()), ev);
            }
            let apply_s = t.elapsed().as_secs_f64().max(1e-9);
            let sent = g.join().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            (sent, apply_s, rcv.join().unwrap())
        });
        let (got, dups) = run.2;
        let sent = run.0;
        let rate_got = if count == 0 { 0.0 } else { count as f64 / run.1 };
        let lost = sent.saturating_sub(got);
        eprintln!(
            "updates {} : {count} deltas applied in {:.2} s = {rate_got:.0}/s while forwarding; frames sent {sent}, received {got} distinct ({dups} duplicates), lost {lost}",
            match rate {
                0 => "max".to_string(),
                1 => "none (baseline)".to_string(),
                r => format!("{r}/s"),
            },
            run.1
        );
        out.push(format!(
            "{{\"bench\":\"switch\",\"setup\":\"updates while forwarding\",\"target_rate\":{rate},\"deltas\":{count},\"applied_per_s\":{rate_got:.0},\"frames_sent\":{sent},\"frames_received\":{got},\"frames_lost\":{lost},\"duplicates\":{dups},\"delta_make_s_per_300k\":{make_s:.2}}}"
        ));
    }
    let ld = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let refused = ld(&ev.deltas_refused_bad) + ld(&ev.deltas_refused_lost) + ld(&ev.deltas_refused_repeated);
    assert_eq!(refused, 0, "deltas refused");
    assert_eq!(ld(&ev.deltas_applied), 300_000, "every delta applied");
    stop.stop();
    sw.join().unwrap();
    out
}

/// Counts the paced generator's frames at the sink by sequence number: (distinct, duplicates).
fn receive(sink: &str, frames: u64, done: &std::sync::atomic::AtomicBool) -> (u64, u64) {
    let mut port = testnet::enter(sink, || keyplane_net::open("eth0", IoKind::AfPacket, 0, &PortOptions::default()))
        .unwrap()
        .unwrap();
    let mut seen = vec![false; frames as usize];
    let (mut got, mut dups) = (0u64, 0u64);
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        if !port.wait_rx(Duration::from_millis(20)).unwrap() {
            continue;
        }
        port.rx_burst_with(256, &mut |f: &mut [u8]| {
            if f.len() >= 22 && f[6..12] == [2, 0x6b, 0x70, 0, 0, 1] && f[12..14] == [0x88, 0xb5] {
                let q = u64::from_le_bytes(f[14..22].try_into().unwrap());
                if let Some(s) = seen.get_mut(q as usize) {
                    if *s {
                        dups += 1
                    } else {
                        *s = true;
                        got += 1
                    }
                }
            }
        })
        .unwrap();
    }
    (got, dups)
}

/// Sends `frames` 64-byte frames at `pps` from the generator namespace to the 1K FIB's keys.
fn paced(g: &str, pps: u64, frames: u64) -> u64 {
    let mut port = testnet::enter(g, || keyplane_net::open("eth0", IoKind::AfPacket, 0, &PortOptions::default()))
        .unwrap()
        .unwrap();
    let mut f = [0u8; 60];
    f[6..12].copy_from_slice(&[2, 0x6b, 0x70, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    let t = Instant::now();
    let mut sent = 0u64;
    while sent < frames {
        let due = (t.elapsed().as_secs_f64() * pps as f64) as u64;
        if sent >= due {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        for _ in 0..(due - sent).min(32).min(frames - sent) {
            f[0..6].copy_from_slice(&[2, 0, 0, 0, ((sent >> 8) & 3) as u8, sent as u8]);
            f[14..22].copy_from_slice(&sent.to_le_bytes());
            if port.tx_stage(&f).unwrap() {
                sent += 1;
            }
        }
        port.tx_flush().unwrap();
    }
    sent
}
