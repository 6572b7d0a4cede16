//! L2 through namespaces: 4 hosts, one switch namespace; hosts start
//! unknown, are learned through the control side, then ping each other
//! (IPv4, IPv6) and move a TCP stream byte for byte. Counters prove that
//! learned destinations are no longer flooded.

mod common;

use common::*;
use keyplane_switch::{Config, Shutdown};
use std::sync::atomic::Ordering;
use std::time::Duration;

#[test]
fn l2_learning_ping_all_pairs_and_tcp() {
    if skip() {
        return;
    }
    let t = Topo::new("l2", 4, false);
    // An empty OFW (f = 8 + emptiness) FIB: it gives the structure and slot layout; learning fills it.
    let (fib, _) = l2_blob(&t.dir, "fib.kpl", "othello", "filtered=8", 4, &[]);
    let mut cfg = Config::new(t.ports(), &fib);
    cfg.metrics = Some("127.0.0.1:0".into());
    let stop = Shutdown::new();
    let sw = t.start(&cfg, &stop);
    let c = sw.counters.clone();
    // Hosts start unknown, but a host's kernel may send a frame of its own
    // (IPv6 duplicate-address detection, router solicitation) as soon as
    // the switch runs, and the switch learns from it: at most the four host
    // MACs can be known before the first ping (seen once in CI-like runs).
    let early = c.events.learned.load(Ordering::Relaxed);
    assert!(early <= 4, "only host MACs can be learned before the first ping, got {early}");

    // Round 1: everything is unknown at first, ARP / ND broadcasts flood and teach the switch.
    t.ping_all();
    let learned = c.events.learned.load(Ordering::Relaxed);
    assert_eq!(learned, 4, "the four host MACs are learned (and nothing else)");
    for i in 0..4 {
        assert_eq!(sw.fib.load().table().get(&host_mac(i)), Some(i as u64), "h{i} learned on port {i}");
    }
    let before = c.total();
    assert!(before.unknown_flooded > 0 || before.flooded > 0, "first frames were flooded");

    // Round 2: every destination is known; unicast frames are forwarded, never flooded.
    t.ping_all();
    t.tcp_transfer(0, 1, false, 4 << 20, 5001);
    t.tcp_transfer(2, 3, true, 2 << 20, 5002);
    let after = c.total();
    assert_eq!(after.unknown_flooded, before.unknown_flooded, "learned destinations were flooded: {}", c.summary());
    assert!(after.tx - before.tx > (6 << 20) / 1514, "the TCP transfers went through the switch: {}", c.summary());
    assert_eq!(after.dropped[keyplane_switch::decide::Reason::Malformed.index()], 0);

    // The Prometheus endpoint serves the same counters.
    let addr = sw.metrics_addr().unwrap();
    let body = keyplane_net::testnet::enter(&t.sw, || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut b = String::new();
        s.read_to_string(&mut b).unwrap();
        b
    })
    .unwrap();
    assert!(body.contains("keyplane_switch_learned_total 4\n"), "{body}");
    assert!(body.contains("keyplane_switch_rx_frames_total{port=\"p0\"} "), "{body}");

    stop.stop();
    let fin = sw.join().unwrap();
    let s = fin.summary();
    assert!(s.contains("learned: 4"), "{s}");
    eprintln!("{s}");
}

/// Live update: while a bounded ping flood (h0 -> h1) and a TCP stream
/// (h2 -> h1) run, host 3 moves to port 4 (its MAC and addresses reappear on
/// h4's link) and a delta dropped into the watched directory moves its FIB
/// entry. Unaffected flows lose nothing; the moved host is reachable again.
#[test]
fn l2_live_update_moves_a_host_without_loss_elsewhere() {
    if skip() {
        return;
    }
    let t = Topo::new("mv", 5, false);
    t.net.ip(&t.hosts[4], &["addr", "flush", "dev", "eth0"]).unwrap();
    t.net.ip(&t.hosts[4], &["link", "set", "eth0", "down"]).unwrap();
    let items: Vec<([u8; 6], u64)> = (0..4).map(|i| (host_mac(i), i as u64)).collect();
    let (fib, mut ctl) = l2_blob(&t.dir, "fib.kpl", "othello", "filtered=8", 4, &items);
    let deltas = t.dir.join("deltas");
    let mut cfg = Config::new(t.ports(), &fib);
    cfg.deltas = Some(deltas.clone());
    cfg.unknown = keyplane_switch::decide::Unknown::Drop;
    let stop = Shutdown::new();
    let sw = t.start(&cfg, &stop);
    let c = sw.counters.clone();
    for (a, b) in [(0, 1), (0, 3), (2, 1)] {
        assert_eq!(t.ping(a, t.v4(b), 1, "0.1").1, 1, "warm-up h{a} -> h{b}");
    }
    let flood = t.ping_cmd(0, t.v4(1), 1500, "0.002");
    let affected = t.ping_cmd(0, t.v4(3), 300, "0.01");
    std::thread::scope(|s| {
        let tcp = s.spawn(|| t.tcp_transfer(2, 1, false, 16 << 20, 5201));
        std::thread::sleep(Duration::from_millis(800));
        // Move host 3: its link goes down, h4 takes its MAC and addresses.
        t.net.ip(&t.hosts[3], &["link", "set", "eth0", "down"]).unwrap();
        t.net.ip(&t.hosts[4], &["link", "set", "eth0", "address", &mac_str(host_mac(3))]).unwrap();
        t.net.addr(&t.hosts[4], "eth0", &format!("{}/24", t.v4(3))).unwrap();
        t.net.addr(&t.hosts[4], "eth0", &format!("{}/64", t.v6(3))).unwrap();
        t.net.up(&t.hosts[4], "eth0").unwrap();
        // What `keyplane update --control C --set MAC=4 --deltas DIR/001.kpd` writes.
        let d = ctl.insert(&host_mac(3), 4).unwrap();
        std::fs::create_dir_all(&deltas).unwrap();
        let tmp = deltas.join("001.kpd.tmp1");
        std::fs::write(&tmp, &d).unwrap();
        std::fs::rename(&tmp, deltas.join("001.kpd")).unwrap();
        tcp.join().unwrap();
    });
    let (fs, fr) = t.wait_ping(flood);
    let (as_, ar) = t.wait_ping(affected);
    assert!(fs >= 1000 && fr == fs, "unaffected ping flood lost frames: {fr}/{fs}");
    assert!(ar > 0 && ar <= as_, "affected flow: {ar}/{as_}");
    assert_eq!(c.events.deltas_applied.load(Ordering::Relaxed), 1);
    assert_eq!(sw.fib.load().table().get(&host_mac(3)), Some(4));
    // Converged: the moved host answers through its new port.
    let tx4 = c.port(4).tx;
    assert_eq!(t.ping(0, t.v4(3), 3, "0.05").1, 3, "moved host reachable");
    assert_eq!(t.ping(1, t.v6(3), 2, "0.05").1, 2, "moved host reachable over IPv6");
    assert!(c.port(4).tx >= tx4 + 5, "frames for the moved host leave by port 4");
    eprintln!("affected flow during the move: {ar}/{as_} echo replies; unaffected flood {fr}/{fs}");
    stop.stop();
    eprintln!("{}", sw.join().unwrap().summary());
}
