//! L3 through namespaces: 4 hosts in their own IPv4 / IPv6 subnets behind
//! the switch (their default gateway). ARP / ND for the switch's addresses,
//! longest-prefix routes from a `keyplane::lpm` blob, TTL / hop-limit
//! decrement; all-pairs ping (v4, v6), a byte-checked TCP transfer, TTL
//! expiry counted, and a route change by delta while traffic runs.

mod common;

use common::*;
use keyplane::lpm::{Control, Prefix};
use keyplane::{ControlTable, Wire};
use keyplane_net::testnet;
use keyplane_switch::{Config, Mode, Shutdown};
use std::sync::atomic::Ordering;

#[test]
fn l3_routes_ping_tcp_ttl_and_route_delta() {
    if skip() {
        return;
    }
    let t = Topo::new("l3", 4, true);
    let mut routes: Vec<(Prefix, u64)> = Vec::new();
    let mut nh = String::new();
    for i in 0..4usize {
        routes.push((format!("198.18.{}.0/24", i + 1).parse().unwrap(), i as u64));
        routes.push((format!("fd00:0:0:{}::/64", i + 1).parse().unwrap(), i as u64));
        nh.push_str(&format!("{i} p{i} {}\n", mac_str(host_mac(i))));
    }
    // A covering /16 that the /24s override (longest prefix wins); it points at host 0.
    routes.push(("198.18.0.0/16".parse().unwrap(), 0));
    let mut ctl = Control::from_prefixes(routes, 8).unwrap();
    let fib = t.dir.join("routes.kpl");
    std::fs::write(&fib, ctl.export().to_bytes()).unwrap();
    let nh_path = t.dir.join("next-hops");
    std::fs::write(&nh_path, nh).unwrap();
    let deltas = t.dir.join("deltas");

    let mut cfg = Config::new(t.ports(), &fib);
    cfg.mode = Mode::L3;
    cfg.next_hops = Some(nh_path);
    cfg.deltas = Some(deltas.clone());
    for i in 0..4 {
        cfg.addresses.push(testnet::v4(i as u8 + 1, 1).into());
        cfg.addresses.push(testnet::v6(i as u16 + 1, 1).into());
    }
    let stop = Shutdown::new();
    let sw = t.start(&cfg, &stop);
    let c = sw.counters.clone();

    t.ping_all();
    t.tcp_transfer(3, 0, false, 2 << 20, 5101);
    t.tcp_transfer(1, 2, true, 2 << 20, 5102);

    // TTL 1 dies at the switch: dropped and counted, nothing delivered.
    let ttl0 = c.total().dropped[keyplane_switch::decide::Reason::TtlExpired.index()];
    let out = t
        .net
        .exec(&t.hosts[0], &["ping", "-n", "-q", "-c", "3", "-i", "0.05", "-W", "1", "-t", "1", &t.v4(1).to_string()])
        .unwrap();
    assert_eq!(parse_ping(&String::from_utf8_lossy(&out.stdout)).1, 0);
    let out = t
        .net
        .exec(
            &t.hosts[0],
            &["ping", "-6", "-n", "-q", "-c", "2", "-i", "0.05", "-W", "1", "-t", "1", &t.v6(1).to_string()],
        )
        .unwrap();
    assert_eq!(parse_ping(&String::from_utf8_lossy(&out.stdout)).1, 0);
    let ttl = c.total().dropped[keyplane_switch::decide::Reason::TtlExpired.index()] - ttl0;
    assert_eq!(ttl, 5, "five TTL-1 / hop-limit-1 pings counted as expired: {}", c.summary());

    // Route change by delta: 198.18.2.0/24 (host 1) now goes to next hop 2 (host 2, who
    // does not own the address and drops it); then back. Unaffected flows keep working.
    let d1 = ctl.insert_prefix("198.18.2.0/24".parse().unwrap(), 2).unwrap();
    std::fs::create_dir_all(&deltas).unwrap();
    std::fs::write(deltas.join("001.kpd"), d1.to_bytes()).unwrap();
    wait_for(|| c.events.deltas_applied.load(Ordering::Relaxed) == 1);
    assert_eq!(t.ping(0, t.v4(1), 2, "0.05").1, 0, "host 1 is routed away");
    assert_eq!(t.ping(0, t.v4(3), 2, "0.05").1, 2, "host 3 is unaffected");
    let d2 = ctl.insert_prefix("198.18.2.0/24".parse().unwrap(), 1).unwrap();
    std::fs::write(deltas.join("002.kpd"), d2.to_bytes()).unwrap();
    // A repeated delta is refused, not applied.
    std::fs::write(deltas.join("003.kpd"), d1.to_bytes()).unwrap();
    wait_for(|| c.events.deltas_refused_repeated.load(Ordering::Relaxed) == 1);
    assert_eq!(c.events.deltas_applied.load(Ordering::Relaxed), 2);
    assert_eq!(t.ping(0, t.v4(1), 2, "0.05").1, 2, "host 1 reachable again");

    stop.stop();
    let fin = sw.join().unwrap();
    eprintln!("{}", fin.summary());
}

fn wait_for(mut f: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !f() {
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "timed out waiting for the switch");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
