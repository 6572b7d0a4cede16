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
    assert_eq!(c.events.learned.load(Ordering::Relaxed), 0, "hosts start unknown");

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
    assert!(body.contains(&format!("keyplane_switch_rx_frames_total{{port=\"p0\"}} ")), "{body}");

    stop.stop();
    let fin = sw.join().unwrap();
    let s = fin.summary();
    assert!(s.contains("learned: 4"), "{s}");
    eprintln!("{s}");
}
