//! `Lb` on AF_XDP I/O (copy mode on the veth), the worker forwarding in place
//! (`Port::forward_burst` + `Worker::process_in_place`), on real connections:
//! client namespace → one-armed LB namespace → backend namespaces running
//! nginx that answers with its identity (root; namespaces made and removed by
//! the test, also on failure, by the testbed's guard).
//!
//! AF_XDP that cannot be opened on the LB's veth fails the test with the
//! reason; only a machine where namespaces cannot be made skips.

use keyplane_lb::testbed::{self, Conn, Testbed, VIP4, VIP4_IPIP, VIP6, VIP6_IPIP, backend4, backend6};
use keyplane_lb::{IoKind, Lb, Mode, Options};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn setup(tag: &str, backends: usize) -> Option<Testbed> {
    if let Some(why) = keyplane_net::testnet::skip_reason() {
        eprintln!("skipping {tag}: {why}");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("lb-{tag}-{}", std::process::id()));
    Some(Testbed::new(tag, 1, backends, &dir).expect("topology"))
}

/// A config: `vips` = (address, method, backend indices), weight 1 each.
fn config(vips: &[(IpAddr, &str, &[usize])]) -> String {
    // AF_XDP takes every frame of the port from the LB's kernel: no kernel
    // health checks (docs/lb-service.md), every backend is up.
    let mut s = String::from("[health]\nkind = \"none\"\n");
    for (a, m, pool) in vips {
        s += &format!("[[vip]]\naddress = \"{a}\"\nport = 80\nprotocol = \"tcp\"\nmethod = \"{m}\"\n");
        for &i in pool.iter() {
            let b: IpAddr = if a.is_ipv4() { backend4(i).into() } else { backend6(i).into() };
            s += &format!("[[vip.backend]]\naddress = \"{b}\"\n");
        }
    }
    s
}

/// Starts the LB on AF_XDP; fails (never skips) when AF_XDP cannot be opened.
fn start_xdp(tb: &Testbed, path: &Path, text: &str) -> Lb {
    std::fs::write(path, text).unwrap();
    // The LB's kernel answers no ARP/ND on an AF_XDP port: the client gets
    // static neighbour entries for the LB's addresses (docs/lb-service.md).
    let mac = tb.net.run(&tb.lb, &["cat", "/sys/class/net/eth0/address"]).expect("the LB's MAC");
    for a in [IpAddr::from(testbed::lb4()), testbed::lb6().into()] {
        let a = a.to_string();
        tb.net
            .ip(&tb.clients[0], &["neigh", "replace", &a, "lladdr", mac.trim(), "dev", "eth0", "nud", "permanent"])
            .expect("static neighbour entry");
    }
    let opts = Options { mode: Mode::Concury, io: IoKind::AfXdp, ..Options::new("eth0", path) };
    let lb = match tb.in_lb(|| Lb::start(opts)).unwrap() {
        Ok(lb) => lb,
        Err(e) => panic!("AF_XDP could not be opened on the LB's veth eth0 (this test needs AF_XDP): {e}"),
    };
    let t0 = Instant::now();
    while lb.counters().neighbors_resolved.get() < tb.backends.len() as u64 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    lb
}

fn url(vip: IpAddr) -> String {
    match vip {
        IpAddr::V4(a) => format!("http://{a}/"),
        IpAddr::V6(a) => format!("http://[{a}]/"),
    }
}

/// Over AF_XDP: curl and the HTTP client reach a backend of each VIP for
/// IPv4 and IPv6, by DSR and by IP-in-IP (decapsulated by the backends' XDP
/// program), new connections spread over at least two backends; then a pool
/// change (a backend added to every VIP, reloaded while keep-alive
/// connections are open) leaves every open connection on its backend, and
/// new connections still land in the new pool. The LB counts transmitted
/// frames and no TX errors.
#[test]
fn af_xdp_delivery_and_keepalive_consistency() {
    let Some(tb) = setup("xdp", 4) else { return };
    tb.attach_decap().expect("decap program");
    let vips: [(IpAddr, &str); 4] =
        [(VIP4.into(), "dsr"), (VIP6.into(), "dsr"), (VIP4_IPIP.into(), "ipip"), (VIP6_IPIP.into(), "ipip")];
    let old: &[usize] = &[1, 2, 3];
    let new: &[usize] = &[1, 2, 3, 4];
    let with = |pool: &[usize]| -> String {
        let v: Vec<(IpAddr, &str, &[usize])> = vips.iter().map(|&(a, m)| (a, m, pool)).collect();
        config(&v)
    };
    let path = tb.dir().join("lb-xdp.toml");
    let lb = start_xdp(&tb, &path, &with(old));
    let names = |pool: &[usize]| -> BTreeSet<String> { pool.iter().map(|i| format!("b{i}")).collect() };

    for (vip, _) in vips {
        let u = url(vip);
        let out = match tb.net.run(&tb.clients[0], &["curl", "-s", "--max-time", "5", &u]) {
            Ok(o) => o,
            Err(e) => panic!("curl {u} over AF_XDP: {e}\n{}", lb.counters().prometheus()),
        };
        assert!(names(old).contains(out.trim()), "curl {u}: {out:?}");
        let seen: BTreeSet<String> = tb
            .in_client(0, || {
                (0..16)
                    .map(|_| testbed::fetch_once(SocketAddr::new(vip, 80), Duration::from_secs(3)).expect("request"))
                    .collect()
            })
            .unwrap();
        assert!(seen.len() >= 2, "{vip}: new connections all went to {seen:?}");
        assert!(seen.is_subset(&names(old)), "{vip}: {seen:?} outside the pool");
    }

    // Keep-alive connections on every VIP, then the pool grows by b4.
    let mut conns: Vec<(IpAddr, Conn, String)> = tb
        .in_client(0, || {
            let mut v = Vec::new();
            for (vip, _) in vips {
                for _ in 0..12 {
                    let mut c = Conn::open(SocketAddr::new(vip, 80), Duration::from_secs(5)).expect("connect");
                    let b = c.get().expect("first reply");
                    v.push((vip, c, b));
                }
            }
            v
        })
        .unwrap();
    std::fs::write(&path, with(new)).unwrap();
    lb.reload().expect("reload");
    // The reload has reached the data plane once a new
    // connection lands on b4 (bounded: at most 300 fresh connections, 20 ms apart).
    let reached = tb
        .in_client(0, || {
            (0..300).any(|_| {
                std::thread::sleep(Duration::from_millis(20));
                testbed::fetch_once(SocketAddr::from((VIP4, 80)), Duration::from_secs(3)).expect("request") == "b4"
            })
        })
        .unwrap();
    assert!(reached, "no new connection reached the added backend b4 after the reload");
    for round in 0..3 {
        for (vip, c, first) in conns.iter_mut() {
            let b = c.get().unwrap_or_else(|e| panic!("{vip}: keep-alive request {round} after the pool change: {e}"));
            assert_eq!(&b, first, "{vip}: a keep-alive connection moved from {first} to {b} on a pool change");
        }
    }
    for (vip, _) in vips {
        let seen: BTreeSet<String> = tb
            .in_client(0, || {
                (0..8)
                    .map(|_| testbed::fetch_once(SocketAddr::new(vip, 80), Duration::from_secs(3)).expect("request"))
                    .collect()
            })
            .unwrap();
        assert!(seen.is_subset(&names(new)), "{vip}: {seen:?} outside the new pool");
    }
    drop(conns);
    let m = lb.counters().prometheus();
    assert!(lb.counters().tx.get() > 0, "{m}");
    assert_eq!(lb.counters().drops(keyplane_lb::metrics::DropReason::TxError), 0, "{m}");
    lb.stop();
}
