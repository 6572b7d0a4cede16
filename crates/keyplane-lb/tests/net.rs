//! `keyplane lb` on real connections (root; namespaces made and removed by
//! each test): client namespace(s) → one-armed LB namespace → backend
//! namespaces running nginx that answers with its identity.
//!
//! Sizes are CI-sized by default; the documented long runs set
//! `KEYPLANE_LB_CHURN_CONNS=2000` and `KEYPLANE_LB_WEIGHT_CONNS=100000`.

use keyplane_lb::testbed::{self, Conn, ConnRecord, Testbed, VIP4, VIP4_IPIP, VIP6, VIP6_IPIP, backend4, backend6};
use keyplane_lb::{IoKind, Lb, Mode, Options};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The network tests share the machine's two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

fn setup(tag: &str, clients: usize, backends: usize) -> Option<Testbed> {
    if let Some(why) = keyplane_net::testnet::skip_reason() {
        eprintln!("skipping {tag}: {why}");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("lb-{tag}-{}", std::process::id()));
    Some(Testbed::new(tag, clients, backends, &dir).expect("topology"))
}

/// A pool: (backend index, weight, drained).
type Pool = Vec<(usize, u32, bool)>;

/// A config: `vips` = (address, method, pool).
fn config(extra: &str, vips: &[(IpAddr, &str, Pool)]) -> String {
    let mut s = String::from(extra);
    for (a, m, pool) in vips {
        s += &format!("[[vip]]\naddress = \"{a}\"\nport = 80\nprotocol = \"tcp\"\nmethod = \"{m}\"\n");
        for &(i, w, d) in pool {
            let b: IpAddr = if a.is_ipv4() { backend4(i).into() } else { backend6(i).into() };
            s += &format!("[[vip.backend]]\naddress = \"{b}\"\nweight = {w}\ndrain = {d}\n");
        }
    }
    s
}

fn start(tb: &Testbed, mode: Mode, text: &str) -> (Lb, PathBuf) {
    start_io(tb, mode, text, false)
}

/// Starts the LB on AF_PACKET, or with `xdp` on the XDP fast path
/// (`--io xdp`; the LB's peer port gets NAPI for `XDP_TX`).
fn start_io(tb: &Testbed, mode: Mode, text: &str, xdp: bool) -> (Lb, PathBuf) {
    let path = tb.dir().join(format!("lb-{mode:?}.toml"));
    std::fs::write(&path, text).unwrap();
    if xdp {
        tb.lb_peer_napi().expect("GRO on the LB's peer port");
    }
    let opts = Options { mode, io: IoKind::AfPacket, xdp, ..Options::new("eth0", &path) };
    let lb = tb.in_lb(|| Lb::start(opts)).unwrap().expect("LB starts");
    // Wait for the backends' MACs.
    let t0 = Instant::now();
    while lb.counters().neighbors_resolved.get() < tb.backends.len() as u64 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    (lb, path)
}

fn reload(lb: &Lb, path: &PathBuf, text: &str) {
    std::fs::write(path, text).unwrap();
    lb.reload().expect("reload");
}

/// curl and an HTTP client reach a backend of each VIP for IPv4 and IPv6,
/// by DSR and by IP-in-IP (decapsulated by the XDP program on the
/// backends); both forwarding methods spread new connections.
#[test]
fn delivery_v4_v6_dsr_and_ipip() {
    delivery(false);
}

/// [`delivery_v4_v6_dsr_and_ipip`] with `--io xdp`: the LB's XDP program
/// forwards the VIP packets (its transmit counter covers every request).
#[test]
fn xdp_delivery_v4_v6_dsr_and_ipip() {
    delivery(true);
}

fn delivery(xdp: bool) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(tb) = setup(if xdp { "xdlv" } else { "dlv" }, 1, 4) else { return };
    tb.attach_decap().expect("decap program");
    let pool = vec![(1, 1, false), (2, 1, false), (3, 1, false), (4, 1, false)];
    let text = config(
        "[health]\nkind = \"http\"\ninterval_ms = 200\n",
        &[
            (VIP4.into(), "dsr", pool.clone()),
            (VIP6.into(), "dsr", pool.clone()),
            (VIP4_IPIP.into(), "ipip", pool.clone()),
            (VIP6_IPIP.into(), "ipip", pool.clone()),
        ],
    );
    let (lb, _) = start_io(&tb, Mode::Concury, &text, xdp);
    for vip in [IpAddr::from(VIP4), VIP6.into(), VIP4_IPIP.into(), VIP6_IPIP.into()] {
        let url = match vip {
            IpAddr::V4(a) => format!("http://{a}/"),
            IpAddr::V6(a) => format!("http://[{a}]/"),
        };
        let out = match tb.net.run(&tb.clients[0], &["curl", "-s", "--max-time", "5", &url]) {
            Ok(o) => o,
            Err(e) => panic!("curl {url}: {e}\n{}", lb.counters().prometheus()),
        };
        assert!(["b1", "b2", "b3", "b4"].contains(&out.trim()), "curl {url}: {out:?}");
        let seen: Vec<String> = tb
            .in_client(0, || {
                (0..24)
                    .map(|_| testbed::fetch_once(SocketAddr::new(vip, 80), Duration::from_secs(3)).expect("request"))
                    .collect()
            })
            .unwrap();
        let distinct: std::collections::BTreeSet<&String> = seen.iter().collect();
        assert!(distinct.len() >= 2, "{vip}: new connections all went to {distinct:?}");
        assert!(distinct.iter().all(|b| ["b1", "b2", "b3", "b4"].contains(&b.as_str())), "{distinct:?}");
    }
    // Workers publish their per-backend counts every 100 ms (also when idle):
    // wait for the last VIP's to show.
    let want = "keyplane_lb_backend_packets_total{vip=\"[fd00:0:0:101::1]:80/tcp\"";
    let t0 = std::time::Instant::now();
    let mut m = lb.counters().prometheus();
    while !m.contains(want) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        m = lb.counters().prometheus();
    }
    assert!(m.contains(want), "{m}");
    if xdp {
        // 4 VIPs x 25 connections, at least 3 client packets each, all through the program.
        let c = lb.counters();
        assert!(c.xdp_tx.get() >= 300, "XDP transmitted {}\n{m}", c.xdp_tx.get());
        assert_eq!(c.xdp_ring_full.get(), 0);
        assert!(c.reports_sent.get() >= 100, "new flows reported from the ring buffer\n{m}");
        // Every XDP_TX left the veth (none refused for want of NAPI on the peer).
        let st = tb.net.run(&tb.lb, &["ethtool", "-S", "eth0"]).expect("veth statistics");
        let errs: u64 = st
            .lines()
            .filter(|l| l.contains("xdp_tx_errors"))
            .filter_map(|l| l.rsplit(':').next()?.trim().parse::<u64>().ok())
            .sum();
        assert_eq!(errs, 0, "{st}");
    }
    lb.stop();
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    conns: usize,
    on_failed: usize,
    live_moved: usize,
    live_broken: usize,
    failed_broken: usize,
}

fn tally(recs: &[ConnRecord], failed: &str) -> Tally {
    let mut by: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for r in recs {
        let e = by.entry(r.first.as_str()).or_default();
        e.0 += 1;
        e.1 += (r.changes > 0) as usize;
        e.2 += r.broken as usize;
    }
    eprintln!("per first backend (conns, moved, broken): {by:?}");
    let mut t = Tally { conns: recs.len(), ..Tally::default() };
    for r in recs {
        if r.first == failed {
            t.on_failed += 1;
            t.failed_broken += r.broken as usize;
        } else {
            t.live_moved += (r.changes > 0) as usize;
            t.live_broken += r.broken as usize;
        }
    }
    t
}

fn open_conns(tb: &Testbed, n: usize) -> Vec<(Conn, String)> {
    tb.in_client(0, || {
        (0..n)
            .map(|_| {
                let mut c = Conn::open(SocketAddr::from((VIP4, 80)), Duration::from_secs(5)).expect("connect");
                let b = c.get().expect("first reply");
                (c, b)
            })
            .collect()
    })
    .unwrap()
}

/// One churn run: `step(k)` performs change k (0..5: add 2, remove 1,
/// drain 1, reweight 2, fail 1) while the connections run.
fn churn(tb: &mut Testbed, n: usize, mut step: impl FnMut(&mut Testbed, usize)) -> Vec<ConnRecord> {
    let conns = open_conns(tb, n);
    let stop = AtomicBool::new(false);
    let threads = 4;
    std::thread::scope(|s| {
        let h = s.spawn(|| testbed::drive(conns, threads, &stop));
        for k in 0..5 {
            std::thread::sleep(Duration::from_millis(800));
            step(tb, k);
        }
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap()
    })
}

/// Pool of the churn: b1..b5 at weight 1; b6, b7 spare.
fn churn_pool(k: usize) -> Vec<(usize, u32, bool)> {
    // after step k (k = 0 before any step)
    let mut p: Vec<(usize, u32, bool)> = (1..=5).map(|i| (i, 1, false)).collect();
    if k >= 1 {
        p.push((6, 1, false));
        p.push((7, 1, false));
    }
    if k >= 2 {
        p.retain(|x| x.0 != 5);
    }
    if k >= 3 {
        p.iter_mut().filter(|x| x.0 == 4).for_each(|x| x.2 = true);
    }
    if k >= 4 {
        p.iter_mut().filter(|x| x.0 == 1).for_each(|x| x.1 = 3);
        p.iter_mut().filter(|x| x.0 == 6).for_each(|x| x.1 = 2);
    }
    p
}

const CHURN_HEALTH: &str = "[health]\nkind = \"http\"\ninterval_ms = 150\ntimeout_ms = 300\nrise = 2\nfall = 2\n";

fn churn_lb(tb: &mut Testbed, mode: Mode, n: usize, xdp: bool) -> (Tally, u64) {
    tb.start_backend(2).unwrap();
    let (lb, path) = start_io(tb, mode, &config(CHURN_HEALTH, &[(VIP4.into(), "dsr", churn_pool(0))]), xdp);
    let recs = churn(tb, n, |tb, k| {
        if k < 4 {
            reload(&lb, &path, &config(CHURN_HEALTH, &[(VIP4.into(), "dsr", churn_pool(k + 1))]));
        } else {
            tb.stop_backend(2);
        }
    });
    let down = lb
        .counters()
        .prometheus()
        .contains(&format!("keyplane_lb_backend_up{{vip=\"{VIP4}:80/tcp\",backend=\"{}\"}} 0", backend4(2)));
    assert!(down, "the health check took the failed backend out");
    let remaps: u64 = lb.counters().vips().values().map(|c| c.remaps).sum();
    if xdp {
        let c = lb.counters();
        eprintln!(
            "xdp: {} frames transmitted in the kernel, {} VIP frames to user space, {} publications, last pool change {} us (write + flip {} us)",
            c.xdp_tx.get(),
            c.xdp_slow.get(),
            c.xdp_publishes.get(),
            c.xdp_pool_change_us.get(),
            c.xdp_publish_us.get()
        );
        assert!(c.xdp_tx.get() as usize >= n, "the XDP program forwarded the traffic");
    }
    lb.stop();
    (tally(&recs, "b2"), remaps)
}

/// The issue's churn (add 2, remove 1, drain 1, reweight 2, fail 1) under
/// long-lived keep-alive connections, through Concury, Maglev mode and the
/// kernel's nftables LB (kube-proxy style), reported side by side.
/// Concury: every connection on a live backend keeps it (0 changes, 0
/// resets); only the failed backend's connections break.
#[test]
fn consistency_under_churn_concury_maglev_nftables() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = env_usize("KEYPLANE_LB_CHURN_CONNS", 300);
    let Some(mut tb) = setup("churn", 1, 7) else { return };
    let (concury, remaps) = churn_lb(&mut tb, Mode::Concury, n, false);
    let (maglev, _) = churn_lb(&mut tb, Mode::Maglev, n, false);
    // nftables: the test plays the health checker (takes b2 out after killing it).
    tb.start_backend(2).unwrap();
    let nft_pool = |k: usize| -> Vec<(usize, u32)> {
        let mut p: Vec<(usize, u32)> = churn_pool(k).iter().filter(|x| !x.2).map(|x| (x.0, x.1)).collect();
        if k >= 5 {
            p.retain(|x| x.0 != 2);
        }
        p
    };
    tb.nft_lb(VIP4, &nft_pool(0)).unwrap();
    let recs = churn(&mut tb, n, |tb, k| {
        if k == 4 {
            tb.stop_backend(2);
        }
        tb.nft_lb(VIP4, &nft_pool(k + 1)).unwrap();
    });
    let nft = tally(&recs, "b2");
    tb.nft_clear().unwrap();
    eprintln!("churn with {n} connections (add 2, remove 1, drain 1, reweight 2, fail 1):");
    eprintln!(
        "{:<10} {:>6} {:>10} {:>11} {:>12} {:>14}",
        "LB", "conns", "on failed", "live moved", "live broken", "failed broken"
    );
    for (name, t) in [("concury", concury), ("maglev", maglev), ("nftables", nft)] {
        eprintln!(
            "{name:<10} {:>6} {:>10} {:>11} {:>12} {:>14}",
            t.conns, t.on_failed, t.live_moved, t.live_broken, t.failed_broken
        );
    }
    eprintln!("concury consistency-preserving remaps: {remaps}");
    assert_eq!(concury.conns, n);
    assert!(concury.on_failed > 0, "some connections were on the failed backend");
    assert_eq!(concury.live_moved, 0, "Concury: connections of live backends changed backend");
    assert_eq!(concury.live_broken, 0, "Concury: connections of live backends broke");
    assert_eq!(concury.failed_broken, concury.on_failed, "the failed backend's connections break");
}

/// The churn through Concury with `--io xdp` (the XDP program forwards;
/// reports reach the control side through the ring buffer; every pool change
/// is a generation flip): 0 changes and 0 resets for live backends, every
/// connection of the failed backend breaks.
#[test]
fn xdp_consistency_under_churn() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = env_usize("KEYPLANE_LB_CHURN_CONNS", 300);
    let Some(mut tb) = setup("xchurn", 1, 7) else { return };
    let (t, remaps) = churn_lb(&mut tb, Mode::Concury, n, true);
    eprintln!("concury --io xdp: {t:?}, remaps {remaps}");
    assert_eq!(t.conns, n);
    assert!(t.on_failed > 0, "some connections were on the failed backend");
    assert_eq!(t.live_moved, 0, "connections of live backends changed backend");
    assert_eq!(t.live_broken, 0, "connections of live backends broke");
    assert_eq!(t.failed_broken, t.on_failed, "the failed backend's connections break");
}

/// New connections split by the weights (1:2:3:4) within ±2 percentage
/// points.
#[test]
fn weights_split_new_connections() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = env_usize("KEYPLANE_LB_WEIGHT_CONNS", 10_000);
    let Some(tb) = setup("wgt", 1, 4) else { return };
    let pool = vec![(1, 1, false), (2, 2, false), (3, 3, false), (4, 4, false)];
    let (lb, _) = start(&tb, Mode::Concury, &config("[health]\nkind = \"none\"\n", &[(VIP4.into(), "dsr", pool)]));
    let counts: HashMap<String, usize> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let tb = &tb;
                s.spawn(move || {
                    tb.in_client(0, || {
                        let mut m: HashMap<String, usize> = HashMap::new();
                        for _ in 0..n / 4 {
                            let b = testbed::fetch_once(SocketAddr::from((VIP4, 80)), Duration::from_secs(5))
                                .expect("request");
                            *m.entry(b).or_default() += 1;
                        }
                        m
                    })
                    .unwrap()
                })
            })
            .collect();
        let mut all = HashMap::new();
        for h in hs {
            for (k, v) in h.join().unwrap() {
                *all.entry(k).or_default() += v;
            }
        }
        all
    });
    let total: usize = counts.values().sum();
    let shares: BTreeMap<&String, f64> = counts.iter().map(|(k, v)| (k, *v as f64 / total as f64)).collect();
    eprintln!("weights 1:2:3:4 over {total} new connections: {shares:?}");
    for (i, w) in [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)] {
        let s = shares.get(&format!("b{i}")).copied().unwrap_or(0.0);
        assert!((s - w).abs() <= 0.02, "b{i}: share {s:.4}, weight share {w}");
    }
    lb.stop();
}

/// A bounded SYN flood (spoofed sources) from a second client: the
/// control side's state stays under its bound (evicting only unconfirmed
/// flood entries), and established connections keep their backend — also
/// across a pool change after the flood, which shows they stayed tracked.
#[test]
fn syn_flood_is_bounded_and_established_connections_survive() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let syns = env_usize("KEYPLANE_LB_FLOOD_SYNS", 100_000);
    let Some(mut tb) = setup("flood", 2, 5) else { return };
    let cap = 2000;
    let extra = format!("[lb]\nmax_connections = {cap}\nreport_rate = 1000000\n[health]\nkind = \"none\"\n");
    let pool: Vec<(usize, u32, bool)> = (1..=4).map(|i| (i, 1, false)).collect();
    let (lb, path) = start(&tb, Mode::Concury, &config(&extra, &[(VIP4.into(), "dsr", pool.clone())]));
    let conns = open_conns(&tb, 100);
    // The flood: SYNs from 198.19.x.y (not on any link) to the VIP.
    let mac = tb.net.ip(&tb.lb, &["-br", "link", "show", "eth0"]).unwrap();
    let lbmac: Vec<u8> =
        mac.split_whitespace().nth(2).unwrap().split(':').map(|x| u8::from_str_radix(x, 16).unwrap()).collect();
    let real = tb.in_lb(|| keyplane_lb::io::port_info("eth0").unwrap().0.mac).unwrap();
    eprintln!("flood to {lbmac:02x?}, LB port {real:02x?}");
    let ns = tb.clients[1].clone();
    let sent = keyplane_net::testnet::enter(&ns, || {
        let mut p =
            keyplane_net::open("eth0", keyplane_net::IoKind::AfPacket, 0, &keyplane_net::PortOptions::default())
                .unwrap();
        let t0 = Instant::now();
        let mut sent = 0usize;
        let own = keyplane_lb::io::port_info("eth0").unwrap().0.mac;
        let mut f = syn_frame(&lbmac, &own);
        while sent < syns && t0.elapsed() < Duration::from_secs(30) {
            for _ in 0..64 {
                let i = sent as u32;
                f[26..30].copy_from_slice(&[198, 19, (i >> 8) as u8, i as u8]);
                f[34..36].copy_from_slice(&((i >> 16) as u16 ^ 0x4000).to_be_bytes());
                f[24..26].copy_from_slice(&[0, 0]);
                let c = keyplane_net::checksum::internet_checksum(&f[14..34]);
                f[24..26].copy_from_slice(&c.to_be_bytes());
                let _ = p.tx_stage(&f);
                sent += 1;
            }
            let _ = p.tx_flush();
        }
        eprintln!("flood port stats: {:?}", p.stats());
        sent
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let c = lb.counters();
    let tracked = c.tracked.get();
    let bound = keyplane_lb::control::memory_bound(cap, 1);
    eprintln!(
        "flood: {sent} SYNs sent, {} reports, {} rate-limited, {} queue-full, tracked {tracked} (cap {cap}), evictions {}, control state {} B (bound {bound} B)",
        c.reports_sent.get(),
        c.reports_rate_limited.get(),
        c.reports_queue_full.get(),
        c.evictions.get(),
        c.control_bytes.get()
    );
    assert!(c.reports_sent.get() > cap as u64, "the flood reached the control side: {}", c.prometheus());
    assert!(tracked <= cap as u64, "tracked {tracked} > {cap}");
    assert!(c.evictions.get() > 0);
    assert!(c.control_bytes.get() <= bound as u64, "{} > {bound}", c.control_bytes.get());
    // A pool change after the flood: established connections keep their backend.
    let mut p2 = pool.clone();
    p2.push((5, 2, false));
    reload(&lb, &path, &config(&extra, &[(VIP4.into(), "dsr", p2)]));
    let stop = AtomicBool::new(true);
    let recs = testbed::drive(conns, 2, &stop);
    let t = tally(&recs, "none");
    assert_eq!((t.live_moved, t.live_broken), (0, 0), "established connections were disturbed by the flood");
    lb.stop();
    tb.stop_backend(1);
}

/// A TCP SYN to the DSR VIP from 198.19.0.0 (source patched per packet).
fn syn_frame(dst_mac: &[u8], src_mac: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(dst_mac);
    f.extend_from_slice(src_mac);
    f.extend_from_slice(&[8, 0]);
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 198, 19, 0, 0]);
    f.extend_from_slice(&VIP4.octets());
    f.extend_from_slice(&[0x40, 0, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    f
}

/// Bad configurations are refused with one-line errors and the running LB
/// keeps its configuration (it still serves).
#[test]
fn bad_config_reload_keeps_the_old_config() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(tb) = setup("badcfg", 1, 2) else { return };
    let pool = vec![(1, 1, false), (2, 1, false)];
    let good = config("[health]\nkind = \"none\"\n", &[(VIP4.into(), "dsr", pool.clone())]);
    let (lb, path) = start(&tb, Mode::Concury, &good);
    let cases = [
        (
            good.replace("weight = 1\ndrain = false\n[[vip.backend]]", "weight = 1\ncolor = 2\n[[vip.backend]]"),
            "unknown field",
        ),
        (format!("{good}{}", &good[good.find("[[vip]]").unwrap()..]), "defined twice"),
        (good.replace("weight = 1", "weight = 0"), "every backend has weight 0"),
        (good.replace(&backend4(2).to_string(), "198.18.77.7"), "not on a subnet"),
    ];
    for (text, want) in cases {
        std::fs::write(&path, text).unwrap();
        let err = lb.reload().expect_err("a bad config must be refused").to_string();
        assert!(err.contains(want) && !err.contains('\n'), "{err}");
        let b = tb.in_client(0, || testbed::fetch_once(SocketAddr::from((VIP4, 80)), Duration::from_secs(3))).unwrap();
        assert!(matches!(b.as_deref(), Ok("b1") | Ok("b2")), "the LB stopped serving after a bad reload: {b:?}");
    }
    assert_eq!(lb.counters().reloads_failed.get(), 4);
    lb.stop();
}
