//! `Worker::process_in_place` (the packet loop's path over `Port::forward_burst`) against
//! `Worker::process` (the copying path, the oracle): random bursts mixing IPv4 and IPv6, TCP and
//! UDP, DSR and IP-in-IP VIPs, new, confirmed and ended flows, VLAN tags, Ethernet padding,
//! frames too big to encapsulate, unresolved backends, fragments, malformed frames, ARP and frames
//! for other hosts give the same transmitted frames byte for byte and in order, the same
//! reports and the same counters, in Concury and Maglev mode, with the frames in buffers of every
//! layout a port lends (room in front as AF_XDP copy mode leaves, none at all).

use keyplane_lb::config::Config;
use keyplane_lb::control::{ControlSide, Mode};
use keyplane_lb::dataplane::{Event, PortInfo, Report, TxBatch, Worker};
use keyplane_lb::metrics::{Counters, DropReason};
use keyplane_net::{FwdFrame, Verdict};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::Instant;

const CONFIG: &str = r#"
[lb]
max_connections = 100000
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
weight = 3
[[vip.backend]]
address = "198.18.0.13"
[[vip]]
address = "198.18.100.2"
port = 53
protocol = "udp"
method = "ipip"
[[vip.backend]]
address = "198.18.0.11"
[[vip.backend]]
address = "198.18.0.14"
[[vip]]
address = "fd00:100::1"
port = 80
protocol = "tcp"
method = "ipip"
[[vip.backend]]
address = "fd00::11"
[[vip.backend]]
address = "fd00::12"
[[vip]]
address = "fd00:100::2"
port = 53
protocol = "udp"
method = "dsr"
[[vip.backend]]
address = "fd00::11"
[[vip.backend]]
address = "fd00::13"
[[vip]]
address = "198.18.100.3"
port = 80
protocol = "tcp"
method = "ipip"
[[vip.backend]]
address = "fd00::12"
[[vip.backend]]
address = "fd00::14"
"#;

const PORT_MAC: [u8; 6] = [2, 0x1b, 0, 0, 0, 1];
const CLIENT_MAC: [u8; 6] = [2, 0xc, 0, 0, 0, 1];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn mac_of(a: IpAddr) -> [u8; 6] {
    let o = match a {
        IpAddr::V4(a) => a.octets()[3],
        IpAddr::V6(a) => a.octets()[15],
    };
    [2, 0xb, 0, 0, 0, o]
}

/// An Ethernet + IPv4/IPv6 + TCP/UDP frame with `payload` bytes.
fn ip_frame(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16, flags: u8, payload: usize) -> Vec<u8> {
    let mut f = PORT_MAC.to_vec();
    f.extend_from_slice(&CLIENT_MAC);
    let mut l4 = vec![0u8; if proto == 6 { 20 } else { 8 } + payload];
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        l4[12] = 0x50;
        l4[13] = flags;
    } else {
        let n = l4.len() as u16;
        l4[4..6].copy_from_slice(&n.to_be_bytes());
    }
    for (i, b) in l4.iter_mut().enumerate().skip(20) {
        *b = (i as u8).wrapping_mul(13) ^ sport as u8;
    }
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[8, 0, 0x45, 0x28]);
            f.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x61, 0x20, 0, 0]);
            f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => unreachable!(),
    }
    f.extend_from_slice(&l4);
    f
}

fn arp_reply(from: IpAddr) -> Vec<u8> {
    let IpAddr::V4(a) = from else { unreachable!() };
    let mut out = [0u8; 64];
    let n = keyplane_net::build::arp_reply(
        &mut out,
        keyplane_net::MacAddr(mac_of(from)),
        a,
        keyplane_net::MacAddr(PORT_MAC),
        "198.18.0.2".parse().unwrap(),
    )
    .unwrap();
    out[..n].to_vec()
}

/// One random frame.
fn random_frame(r: &mut Rng) -> Vec<u8> {
    let vips: [(&str, &str, u8, u16); 5] = [
        ("198.18.1.", "198.18.100.1", 6, 80),
        ("198.18.1.", "198.18.100.2", 17, 53),
        ("fd00:1::", "fd00:100::1", 6, 80),
        ("fd00:1::", "fd00:100::2", 17, 53),
        ("198.18.1.", "198.18.100.3", 6, 80),
    ];
    let kind = r.below(20);
    let (c, v, proto, dport) = vips[r.below(5) as usize];
    let client: IpAddr = format!("{c}{}", 1 + r.below(3)).parse().unwrap();
    let vip: IpAddr = v.parse().unwrap();
    let sport = 1000 + r.below(300) as u16;
    let flags = [0x02, 0x10, 0x10, 0x18, 0x11, 0x04, 0x12][r.below(7) as usize];
    let payload = match r.below(10) {
        0 => 1900 + r.below(100) as usize, // too big to encapsulate into 2,048 bytes
        1..=3 => 1400 + r.below(60) as usize,
        _ => r.below(200) as usize,
    };
    let mut f = ip_frame(client, vip, proto, sport, dport, flags, payload);
    match kind {
        0 => f[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]), // another host's frame
        1 => f = arp_reply(["198.18.0.11", "198.18.0.13", "198.18.0.14"][r.below(3) as usize].parse().unwrap()),
        2 => f.truncate(14 + r.below(30) as usize), // malformed
        3 => {
            f = ip_frame(
                client,
                if vip.is_ipv4() { "198.18.100.9" } else { "fd00:100::9" }.parse().unwrap(),
                proto,
                sport,
                dport,
                flags,
                10,
            )
        }
        4 if vip.is_ipv4() => f[20] = 0x20, // IPv4 fragment (MF)
        5 => f[0] = 0xff,                   // broadcast to a VIP
        6 | 7 => f.splice(12..12, [0x81, 0x00, 0x20, 0x07]).for_each(drop), // 802.1Q tag
        8 | 9 => f.extend((0..1 + r.below(8)).map(|i| i as u8 | 0x80)), // Ethernet padding
        _ => {}
    }
    f.truncate(2048);
    f
}

struct Side<'a> {
    w: Worker<'a>,
    counters: Arc<Counters>,
    reports: Receiver<Report>,
}

fn side<'e>(engine: &'e keyplane_lb::dataplane::Engine, port: PortInfo, learned: &[IpAddr]) -> Side<'e> {
    let counters = Arc::new(Counters::default());
    let (tx, reports) = sync_channel::<Report>(1_000_000);
    // A report rate the bucket never refuses (its refill follows the clock, which the two
    // sides do not share).
    let mut w = Worker::new(engine, port, Some(tx), 100_000_000, counters.clone());
    let now = Instant::now();
    w.neighbors.due(learned, now);
    for a in learned {
        w.neighbors.learn(*a, mac_of(*a), now);
    }
    Side { w, counters, reports }
}

fn compare(mode: Mode, port: PortInfo, seed: u64) {
    let cfg = Config::parse(CONFIG, &[]).unwrap();
    let ctl_a = ControlSide::new(mode, cfg.clone(), Arc::new(Counters::default())).unwrap();
    let ctl_b = ControlSide::new(mode, cfg, Arc::new(Counters::default())).unwrap();
    // Concury's data plane is read-only: one for both. Maglev learns on the packet path: one each.
    let (engine_a, engine_b) = match mode {
        Mode::Concury => (ctl_a.engine(), ctl_a.engine()),
        Mode::Maglev => (ctl_a.engine(), ctl_b.engine()),
    };
    let services = ctl_a.services();
    // Backends resolved up front; .14 and fd00::13/14 are not (their packets drop, or
    // .14 is learned from an ARP reply in the traffic).
    let learned: Vec<IpAddr> = ["198.18.0.11", "198.18.0.12", "198.18.0.13", "fd00::11", "fd00::12"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let mut a = side(&engine_a, port, &learned);
    let mut b = side(&engine_b, port, &learned);
    let mut r = Rng(seed);
    let mut tx = TxBatch::default();
    let (mut sent, mut grown, mut shifted) = (0usize, 0usize, 0usize);
    for _ in 0..400 {
        let n = 1 + r.below(64) as usize;
        let frames: Vec<Vec<u8>> = (0..n).map(|_| random_frame(&mut r)).collect();
        // The oracle: the copying path.
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        tx.clear();
        a.w.process(&services.load(), &refs, &mut tx);
        // In place, each frame in a buffer of a random layout: 256 bytes in front of 2,048
        // (the default path's scratch), AF_XDP's 2,048-byte chunk with 256 in front, or none.
        let mut bufs: Vec<(Vec<u8>, usize)> = frames
            .iter()
            .map(|f| {
                let (size, head) = match r.below(3) {
                    0 => (2304, 256),
                    1 if f.len() <= 1792 => (2048, 256),
                    _ => (2048, 0),
                };
                let mut buf = vec![0xeeu8; size];
                buf[head..head + f.len()].copy_from_slice(f);
                (buf, head)
            })
            .collect();
        let mut lent: Vec<FwdFrame<'_>> = bufs
            .iter_mut()
            .zip(&frames)
            .map(|((buf, head), f)| {
                let mut fr = FwdFrame::new(buf, *head, f.len());
                fr.verdict = Verdict::Slow; // whatever a port set: the worker decides
                fr
            })
            .collect();
        b.w.process_in_place(&services.load(), &mut lent);
        let out: Vec<&[u8]> = lent.iter().filter(|f| f.verdict == Verdict::Transmit).map(|f| f.frame()).collect();
        assert!(lent.iter().all(|f| matches!(f.verdict, Verdict::Transmit | Verdict::Drop)));
        let want: Vec<&[u8]> = tx.frames().collect();
        assert_eq!(out.len(), want.len(), "{mode:?} seed {seed}: transmitted frames");
        for (o, w) in out.iter().zip(&want) {
            assert_eq!(o, w, "{mode:?} seed {seed}: frame differs");
        }
        for (fr, f) in lent.iter().zip(&frames) {
            if fr.verdict == Verdict::Transmit && fr.len() > f.len() {
                grown += 1;
                shifted += (fr.head() == 0) as usize;
            }
        }
        sent += want.len();
    }
    a.w.flush(&services.load());
    b.w.flush(&services.load());
    assert!(sent > 2000, "{mode:?}: only {sent} frames forwarded");
    assert!(grown > 300 && shifted > 50, "{mode:?}: encapsulated {grown}, shifted {shifted}");
    for d in [DropReason::TooBig, DropReason::NoNeighbor, DropReason::Malformed, DropReason::Fragment] {
        assert!(a.counters.drops(d) > 0, "{mode:?}: the traffic has no {d:?} drop");
    }
    assert_eq!(a.counters.drops(DropReason::NoSourceAddress) > 0, port.v6.is_none());
    assert_eq!(a.counters.prometheus(), b.counters.prometheus(), "{mode:?}: counters differ");
    let ra: Vec<Report> = a.reports.try_iter().collect();
    let rb: Vec<Report> = b.reports.try_iter().collect();
    let events = |r: &[Report], e: Event| r.iter().filter(|x| x.event == e).count();
    for e in [Event::New, Event::Confirm, Event::End] {
        assert!(events(&ra, e) > 50, "{mode:?}: {} {e:?} reports", events(&ra, e));
    }
    assert_eq!(ra.len(), rb.len(), "{mode:?}: reports");
    assert!(ra == rb, "{mode:?}: reports differ");
}

#[test]
fn in_place_path_equals_the_copying_path_concury() {
    let port =
        PortInfo { mac: PORT_MAC, v4: Some("198.18.0.2".parse().unwrap()), v6: Some("fd00::2".parse().unwrap()) };
    for seed in [1, 0x9e37_79b9_7f4a_7c15] {
        compare(Mode::Concury, port, seed);
    }
}

#[test]
fn in_place_path_equals_the_copying_path_maglev_and_without_a_v6_address() {
    let full =
        PortInfo { mac: PORT_MAC, v4: Some("198.18.0.2".parse().unwrap()), v6: Some("fd00::2".parse().unwrap()) };
    compare(Mode::Maglev, full, 7);
    // No IPv6 source address: IP6-in-IP6 packets drop (NoSourceAddress) on both paths.
    let v4_only = PortInfo { v6: None, ..full };
    compare(Mode::Concury, v4_only, 11);
}
