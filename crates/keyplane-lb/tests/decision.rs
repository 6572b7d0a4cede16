//! The LB's data plane on in-memory frames (no sockets): the code the packet
//! loop runs, checked against an oracle (the control side's own record and
//! the configured pools).

use keyplane::lb::{Backend, StateKey, Vip};
use keyplane_lb::config::Config;
use keyplane_lb::control::{ControlSide, Mode};
use keyplane_lb::dataplane::{PortInfo, Report, TxBatch, Worker};
use keyplane_lb::metrics::{Counters, DropReason};
use keyplane_lb::packet::{Frame, parse, tcp};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

const CONFIG: &str = r#"
[lb]
max_connections = 100000
remove_grace_ms = 0
[health]
kind = "none"
[[vip]]
address = "198.18.100.1"
port = 80
protocol = "tcp"
method = "dsr"
[[vip.backend]]
address = "198.18.0.11"
[[vip.backend]]
address = "198.18.0.12"
[[vip.backend]]
address = "198.18.0.13"
[[vip]]
address = "fd00:100::1"
port = 80
protocol = "tcp"
method = "ipip"
[[vip.backend]]
address = "fd00::11"
[[vip.backend]]
address = "fd00::12"
"#;

fn frame(src: IpAddr, dst: IpAddr, sport: u16, flags: u8) -> Vec<u8> {
    let mut f = vec![2, 0x1b, 0, 0, 0, 1, 2, 0xc, 0, 0, 0, 1];
    let mut l4 = vec![0u8; 20];
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&80u16.to_be_bytes());
    l4[12] = 0x50;
    l4[13] = flags;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[8, 0, 0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 20, 6, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => unreachable!(),
    }
    f.extend_from_slice(&l4);
    f
}

fn mac_of(a: IpAddr) -> [u8; 6] {
    let o = match a {
        IpAddr::V4(a) => a.octets()[3],
        IpAddr::V6(a) => a.octets()[15],
    };
    [2, 0xb, 0, 0, 0, o]
}

/// SYNs to both VIPs go to configured backends, as DSR (MAC rewrite) and
/// IP6-in-IP6, the new flows are reported and tracked, and after a pool
/// change (one backend added per VIP, one removed) every tracked
/// connection whose backend stayed keeps it.
#[test]
fn forwards_reports_and_keeps_connections_across_pool_changes() {
    let counters = Arc::new(Counters::default());
    let cfg = Config::parse(CONFIG, &[]).unwrap();
    let mut ctl = ControlSide::new(Mode::Concury, cfg, counters.clone()).unwrap();
    let engine = ctl.engine();
    let services = ctl.services();
    let port = PortInfo {
        mac: [2, 0x1b, 0, 0, 0, 1],
        v4: Some("198.18.0.2".parse().unwrap()),
        v6: Some("fd00::2".parse().unwrap()),
    };
    let (rtx, rrx) = sync_channel::<Report>(100_000);
    let mut w = Worker::new(&engine, port, Some(rtx), 1_000_000, counters.clone());
    let mut all: Vec<IpAddr> = services.load().neighbors.clone();
    all.push("fd00::13".parse().unwrap());
    all.push("198.18.0.14".parse().unwrap());
    let now = Instant::now();
    w.neighbors.due(&all, now);
    for a in &all {
        assert!(w.neighbors.learn(*a, mac_of(*a), now));
    }
    let vips: [(IpAddr, IpAddr); 2] = [
        ("198.18.1.0".parse().unwrap(), "198.18.100.1".parse().unwrap()),
        ("fd00:1::".parse().unwrap(), "fd00:100::1".parse().unwrap()),
    ];
    let mut chosen: HashMap<(usize, u16), IpAddr> = HashMap::new();
    let mut tx = TxBatch::default();
    let send =
        |w: &mut Worker, flags: u8, chosen: &mut HashMap<(usize, u16), IpAddr>, tx: &mut TxBatch, check: bool| {
            let mut moved = 0;
            for (v, &(client, vip)) in vips.iter().enumerate() {
                for chunk in (0..2000u16).collect::<Vec<_>>().chunks(64) {
                    let frames: Vec<Vec<u8>> = chunk.iter().map(|&p| frame(client, vip, 10_000 + p, flags)).collect();
                    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
                    tx.clear();
                    w.process(&services.load(), &refs, tx);
                    assert_eq!(tx.len(), chunk.len());
                    for (p, out) in chunk.iter().zip(tx.frames()) {
                        let Frame::Ip(ip) = parse(out) else { panic!("output does not parse") };
                        let b = if v == 0 {
                            assert_eq!(ip.dst, vip, "DSR keeps the IP packet");
                            // Backend identified by the MAC.
                            let o = out[5];
                            IpAddr::from([198, 18, 0, o])
                        } else {
                            assert_eq!(ip.proto, 41, "IP6-in-IP6");
                            assert_eq!(ip.src, IpAddr::V6("fd00::2".parse().unwrap()));
                            assert_eq!(&out[0..6], &mac_of(ip.dst));
                            ip.dst
                        };
                        assert_eq!(&out[6..12], &port.mac);
                        match chosen.get(&(v, *p)) {
                            Some(old) if check && *old != b => moved += 1,
                            Some(_) => {}
                            None => {
                                chosen.insert((v, *p), b);
                            }
                        }
                    }
                }
            }
            moved
        };
    send(&mut w, tcp::SYN, &mut chosen, &mut tx, false);
    let dist: std::collections::HashSet<IpAddr> = chosen.values().copied().collect();
    assert_eq!(dist.len(), 5, "every backend gets connections: {dist:?}");
    // Second packets confirm; the control side tracks all 4,000.
    send(&mut w, tcp::ACK, &mut chosen, &mut tx, true);
    // 4,000 new-flow reports, and a confirmation for each flow whose slot
    // of the 64K-entry flow cache no later flow took (≥ 95% here).
    let n = ctl.drain(&rrx);
    assert!((4000 + 3800..=8000).contains(&n), "{n} reports");
    assert_eq!(ctl.tracked(), 4000);
    assert_eq!(counters.reports_sent.get(), n as u64);
    for ((v, p), b) in &chosen {
        let vip = Vip::new(vips[*v].1, 80, 6);
        let id = ctl.vip_id(&vip).unwrap();
        let key = StateKey::four_tuple(vips[*v].0, 10_000 + p, 80, 6);
        assert_eq!(ctl.tracked_backend(id, &key), Some(Backend::new(*b, 80)));
    }
    // Pool change through a reload: add .14 and fd00::13, remove .13.
    let new = CONFIG.replace("address = \"198.18.0.13\"", "address = \"198.18.0.14\"")
        + "[[vip.backend]]\naddress = \"fd00::13\"\n";
    ctl.apply_config(Config::parse(&new, &[]).unwrap()).unwrap();
    let removed: IpAddr = "198.18.0.13".parse().unwrap();
    let before: HashMap<(usize, u16), IpAddr> = chosen.clone();
    chosen.retain(|_, b| *b != removed);
    let gone = before.len() - chosen.len();
    assert!(gone > 300, "{gone} connections on the removed backend");
    let moved = send(&mut w, tcp::ACK, &mut chosen, &mut tx, true);
    assert_eq!(moved, 0, "connections of live backends moved");
    // The removed backend's connections went to live backends.
    let after: std::collections::HashSet<IpAddr> = chosen.values().copied().collect();
    assert!(!after.contains(&removed));
    assert!(after.contains(&"198.18.0.14".parse::<IpAddr>().unwrap()));
    // Tracked states sit on their backends' pin Dcodes, which the rebalance
    // keeps: the change moved only free Dcodes and re-pinned no state.
    assert!(counters.vips().values().all(|c| c.remaps == 0), "no state needed a new Dcode");
    assert!(counters.vips().values().any(|c| c.pool_updates > 0));
    // FIN ends the connections.
    send(&mut w, tcp::FIN | tcp::ACK, &mut chosen, &mut tx, true);
    ctl.drain(&rrx);
    assert_eq!(ctl.tracked(), 0);
    w.flush(&services.load());
    let per = counters.backends();
    let pk: u64 = per.values().map(|c| c.packets).sum();
    assert_eq!(pk, 4 * 4000);
    assert_eq!(per.values().map(|c| c.new_connections).sum::<u64>(), 4000);
    assert!(
        counters
            .prometheus()
            .contains("keyplane_lb_backend_packets_total{vip=\"198.18.100.1:80/tcp\",backend=\"198.18.0.11\"}")
    );
}

/// Frames that are not for a VIP are left alone, malformed ones are counted,
/// and unresolved backends drop with their reason.
#[test]
fn drops_are_counted_by_reason() {
    let counters = Arc::new(Counters::default());
    let ctl = ControlSide::new(Mode::Maglev, Config::parse(CONFIG, &[]).unwrap(), counters.clone()).unwrap();
    let engine = ctl.engine();
    let services = ctl.services();
    let port = PortInfo { mac: [2, 0x1b, 0, 0, 0, 1], v4: None, v6: None };
    let mut w = Worker::new(&engine, port, None, 1000, counters.clone());
    let good = frame("198.18.1.9".parse().unwrap(), "198.18.100.1".parse().unwrap(), 5, tcp::SYN);
    let other = frame("198.18.1.9".parse().unwrap(), "198.18.100.2".parse().unwrap(), 5, tcp::SYN);
    let mut tx = TxBatch::default();
    w.process(&services.load(), &[&good, &other, &good[..30]], &mut tx);
    assert!(tx.is_empty());
    assert_eq!(counters.drops(DropReason::NoNeighbor), 1);
    assert_eq!(counters.drops(DropReason::Malformed), 1);
    assert_eq!(counters.ignored.get(), 1);
    let v6 = frame("fd00:1::9".parse().unwrap(), "fd00:100::1".parse().unwrap(), 5, tcp::SYN);
    let all = services.load().neighbors.clone();
    w.neighbors.due(&all, Instant::now());
    for a in &all {
        w.neighbors.learn(*a, mac_of(*a), Instant::now());
    }
    w.process(&services.load(), &[&v6], &mut tx);
    assert_eq!(counters.drops(DropReason::NoSourceAddress), 1, "IPIP without a port address of the family");
}

/// A backend removed from the file drains first (graceful removal): its
/// connections keep reaching it in both modes until they end (Concury: then
/// it leaves at the next tick).
#[test]
fn removed_backend_drains_before_it_leaves() {
    for mode in [Mode::Concury, Mode::Maglev] {
        let counters = Arc::new(Counters::default());
        let text = CONFIG.replace("remove_grace_ms = 0", "remove_grace_ms = 600000");
        let mut ctl = ControlSide::new(mode, Config::parse(&text, &[]).unwrap(), counters.clone()).unwrap();
        let engine = ctl.engine();
        let services = ctl.services();
        let port = PortInfo { mac: [2, 0x1b, 0, 0, 0, 1], v4: Some("198.18.0.2".parse().unwrap()), v6: None };
        let (rtx, rrx) = sync_channel::<Report>(100_000);
        let mut w = Worker::new(&engine, port, Some(rtx), 1_000_000, counters.clone());
        let all = services.load().neighbors.clone();
        w.neighbors.due(&all, Instant::now());
        for a in &all {
            w.neighbors.learn(*a, mac_of(*a), Instant::now());
        }
        let src: IpAddr = "198.18.1.0".parse().unwrap();
        let vip: IpAddr = "198.18.100.1".parse().unwrap();
        let mut tx = TxBatch::default();
        let mut run = |w: &mut Worker, flags: u8| -> Vec<u8> {
            let mut out = Vec::new();
            for chunk in (0..1000u16).collect::<Vec<_>>().chunks(64) {
                let frames: Vec<Vec<u8>> = chunk.iter().map(|&p| frame(src, vip, 20_000 + p, flags)).collect();
                let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
                tx.clear();
                w.process(&services.load(), &refs, &mut tx);
                out.extend(tx.frames().map(|f| f[5]));
            }
            out
        };
        let first = run(&mut w, tcp::SYN);
        run(&mut w, tcp::ACK);
        ctl.drain(&rrx);
        assert!(first.contains(&13));
        let new = CONFIG
            .replace("remove_grace_ms = 0", "remove_grace_ms = 600000")
            .replace("[[vip.backend]]\naddress = \"198.18.0.13\"\n", "");
        ctl.apply_config(Config::parse(&new, &[]).unwrap()).unwrap();
        assert_eq!(ctl.tick(Instant::now()).unwrap(), 0, "{mode:?}: .13 still has connections");
        let after = run(&mut w, tcp::ACK);
        assert_eq!(first, after, "{mode:?}: connections moved after a graceful removal");
        let thirteen: IpAddr = "198.18.0.13".parse().unwrap();
        assert!(services.load().neighbors.contains(&thirteen), "a leaving backend stays resolved");
        if mode == Mode::Concury {
            run(&mut w, tcp::FIN | tcp::ACK);
            ctl.drain(&rrx);
            assert_eq!(ctl.tick(Instant::now()).unwrap(), 1, "the drained backend leaves once its connections ended");
            assert!(!services.load().neighbors.contains(&thirteen));
            assert!(!run(&mut w, tcp::SYN).contains(&13));
        }
    }
}

/// Removing a backend at many tracked connections leaves its states to
/// bounded reaping steps (work counted in key ids and queue positions, not
/// time): the pool change itself drops them at once, every step does at most
/// `REAP_BUDGET + SWEEP_BUDGET` units, the steps needed are bounded by one
/// pass over the states, reports in between are recorded, and every connection of a
/// live backend keeps its backend through the removal, the reaping and a
/// later pool change.
#[test]
fn removal_reaping_is_incremental_and_bounded() {
    use keyplane::lb::REAP_REMOVE_UNITS;
    use keyplane_lb::control::{REAP_BUDGET, SWEEP_BUDGET};
    use keyplane_lb::dataplane::{Engine, Event};
    let counters = Arc::new(Counters::default());
    let cfg = CONFIG.replace("max_connections = 100000", "max_connections = 200000");
    let mut ctl = ControlSide::new(Mode::Concury, Config::parse(&cfg, &[]).unwrap(), counters).unwrap();
    let Engine::Concury(dp) = ctl.engine() else { panic!("Concury mode") };
    let id = ctl.vip_id(&Vip::new("198.18.100.1".parse::<IpAddr>().unwrap(), 80, 6)).unwrap();
    let key = |i: u32| StateKey::four_tuple(IpAddr::from((0xc613_0000u32 + i).to_be_bytes()), 1024, 80, 6);
    let n = 60_000u32;
    let mut chosen = Vec::new();
    for i in 0..n {
        let b = dp.lookup(id, key(i).as_ref()).unwrap();
        ctl.report(Report { vip: id, key: key(i), backend: b, event: Event::New });
        chosen.push((i, b));
    }
    assert_eq!(ctl.tracked(), n as usize);
    let removed: IpAddr = "198.18.0.13".parse().unwrap();
    let on_removed = chosen.iter().filter(|c| c.1.addr == removed).count();
    assert!(on_removed > 10_000);
    let new = cfg.replace("[[vip.backend]]\naddress = \"198.18.0.13\"\n", "");
    ctl.apply_config(Config::parse(&new, &[]).unwrap()).unwrap();
    assert_eq!(ctl.tracked(), n as usize - on_removed, "the removal dropped its states at once");
    assert_eq!(ctl.reap_pending(), 2 * on_removed, "both tables owe the removed states");
    let mut steps = 0;
    let mut extra = n;
    while ctl.reap_pending() > 0 {
        let (work, left) = ctl.reap_step().unwrap();
        assert!(work <= REAP_BUDGET + SWEEP_BUDGET, "one step did {work} units");
        assert_eq!(left, ctl.reap_pending());
        steps += 1;
        // Connection reports between steps.
        for _ in 0..100 {
            let b = dp.lookup(id, key(extra).as_ref()).unwrap();
            assert_ne!(b.addr, removed);
            ctl.report(Report { vip: id, key: key(extra), backend: b, event: Event::New });
            chosen.push((extra, b));
            extra += 1;
        }
        // One pass over the Othello's ids and the removals' units; one pass
        // over the queues.
        let ids = 2 * extra as usize;
        let concury = (ids + REAP_REMOVE_UNITS * on_removed) / REAP_BUDGET + 2;
        assert!(steps <= concury.max(ids / SWEEP_BUDGET + 2), "{steps} steps and not done");
    }
    assert!(steps >= 2, "a {on_removed}-state removal took {steps} step(s)");
    // A later pool change: every connection of a live backend stays.
    let more = new.replace(
        "[[vip.backend]]\naddress = \"198.18.0.12\"\n",
        "[[vip.backend]]\naddress = \"198.18.0.12\"\n[[vip.backend]]\naddress = \"198.18.0.14\"\n",
    );
    ctl.apply_config(Config::parse(&more, &[]).unwrap()).unwrap();
    for &(i, b) in &chosen {
        if b.addr == removed {
            assert_eq!(ctl.tracked_backend(id, &key(i)), None);
        } else {
            assert_eq!(ctl.tracked_backend(id, &key(i)), Some(b));
            assert_eq!(dp.lookup(id, key(i).as_ref()), Some(b), "connection {i} moved");
        }
    }
}
