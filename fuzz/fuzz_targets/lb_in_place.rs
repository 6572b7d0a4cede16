#![no_main]
//! The LB worker's in-place path (`Worker::process_in_place`, what the packet
//! loop runs over `Port::forward_burst`) against its copying path
//! (`Worker::process`, the oracle) on arbitrary bursts: the same transmitted
//! frames byte for byte and in order, the same reports, the same counters,
//! and no panic on either path. The input picks the configuration (Concury
//! or Maglev, with or without an IPv6 source address, which backends are
//! resolved up front) and then describes bursts of frames: raw bytes, or a
//! frame to a VIP (IPv4/IPv6, TCP/UDP, DSR/IPIP) with a VLAN tag, padding and
//! byte overwrites, or an ARP reply, each in a buffer of one of the layouts a
//! port lends (room in front as AF_XDP copy mode leaves, none at all).
use keyplane_lb::config::Config;
use keyplane_lb::control::{ControlSide, Mode};
use keyplane_lb::dataplane::{Engine, PortInfo, Report, Services, TxBatch, Worker};
use keyplane_lb::metrics::Counters;
use keyplane_net::{FwdFrame, Verdict};
use libfuzzer_sys::fuzz_target;
use std::cell::OnceCell;
use std::net::IpAddr;
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Instant;

const CONFIG: &str = r#"
[lb]
max_connections = 1000
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
const MAX_FRAME: usize = 2048;

/// The backends a configuration may resolve up front.
const BACKENDS: [&str; 8] =
    ["198.18.0.11", "198.18.0.12", "198.18.0.14", "fd00::11", "fd00::12", "fd00::13", "fd00::14", "198.18.0.13"];

/// (client prefix, VIP, protocol, port) of the frames the input builds.
const VIPS: [(&str, &str, u8, u16); 5] = [
    ("198.18.1.", "198.18.100.1", 6, 80),
    ("198.18.1.", "198.18.100.2", 17, 53),
    ("fd00:1::", "fd00:100::1", 6, 80),
    ("fd00:1::", "fd00:100::2", 17, 53),
    ("198.18.1.", "198.18.100.3", 6, 80),
];

/// The input, read front to back; zeros once it runs out.
struct Input<'a>(&'a [u8]);
impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
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
        // VIPS pairs clients and VIPs of one family.
        _ => return f,
    }
    f.extend_from_slice(&l4);
    f
}

/// One frame described by the input.
fn frame(inp: &mut Input) -> Vec<u8> {
    let k = inp.byte();
    let mut f = match k & 3 {
        // Raw bytes, often addressed to the port.
        0 => {
            let n = inp.byte() as usize * 9;
            let mut f = inp.bytes(n).to_vec();
            if k & 4 != 0 && f.len() >= 6 {
                f[0..6].copy_from_slice(&PORT_MAC);
            }
            f
        }
        // An ARP reply from a backend (resolves it).
        1 => {
            let from = BACKENDS[(k >> 2) as usize % BACKENDS.len()].parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
            let mut out = [0u8; 64];
            match from {
                IpAddr::V4(a) => keyplane_net::build::arp_reply(
                    &mut out,
                    keyplane_net::MacAddr(mac_of(from)),
                    a,
                    keyplane_net::MacAddr(PORT_MAC),
                    [198, 18, 0, 2].into(),
                )
                .map(|n| out[..n].to_vec())
                .unwrap_or_default(),
                IpAddr::V6(_) => Vec::new(),
            }
        }
        // A frame to a VIP (or next to one), then overwritten here and there.
        _ => {
            let (c, v, proto, dport) = VIPS[(k >> 2) as usize % VIPS.len()];
            let client = format!("{c}{}", 1 + inp.byte() % 4).parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
            let mut vip: IpAddr = v.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
            let sport = u16::from_be_bytes([inp.byte(), inp.byte()]);
            let flags = inp.byte();
            let payload = inp.byte() as usize * 8;
            if k & 0x80 != 0 {
                // Another address of the VIP's network.
                vip = match vip {
                    IpAddr::V4(a) => IpAddr::from([a.octets()[0], a.octets()[1], a.octets()[2], 9]),
                    IpAddr::V6(a) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(a) ^ 0xff)),
                };
            }
            let mut f = ip_frame(client, vip, proto, sport, dport, flags, payload);
            if k & 0x40 != 0 && f.len() >= 12 {
                f.splice(12..12, [0x81, 0x00, 0x20, 0x07]).for_each(drop); // 802.1Q tag
            }
            if k & 0x20 != 0 {
                let n = 1 + inp.byte() % 16;
                f.extend((0..n).map(|i| i | 0x80)); // Ethernet padding
            }
            for _ in 0..(k >> 3) & 3 {
                let (pos, val) = (inp.byte() as usize, inp.byte());
                if let Some(b) = f.get_mut(pos) {
                    *b = val;
                }
            }
            f
        }
    };
    f.truncate(MAX_FRAME);
    f
}

struct Side<'a> {
    w: Worker<'a>,
    counters: Arc<Counters>,
    reports: Receiver<Report>,
}

fn side<'e>(engine: &'e keyplane_lb::dataplane::Engine, port: PortInfo, learned: &[IpAddr]) -> Side<'e> {
    let counters = Arc::new(Counters::default());
    let (tx, reports) = sync_channel::<Report>(1 << 16);
    // A report rate the bucket never refuses (its refill follows the clock,
    // which the two sides do not share).
    let mut w = Worker::new(engine, port, Some(tx), 100_000_000, counters.clone());
    let now = Instant::now();
    w.neighbors.due(learned, now);
    for a in learned {
        w.neighbors.learn(*a, mac_of(*a), now);
    }
    Side { w, counters, reports }
}

thread_local! {
    /// Each mode's engine and services, built once (a build is most of an
    /// input's time).
    static PLANES: OnceCell<[(Engine, Arc<Services>); 2]> = const { OnceCell::new() };
}

fn build(mode: Mode) -> (Engine, Arc<Services>) {
    let Ok(cfg) = Config::parse(CONFIG, &[]) else { panic!("the fuzz target's configuration does not parse") };
    let Ok(ctl) = ControlSide::new(mode, cfg, Arc::new(Counters::default())) else { panic!("control side") };
    (ctl.engine(), ctl.services().load_full())
}

/// The two sides' engines (Concury's data plane is read-only: one for both;
/// Maglev learns on the packet path: a fresh copy each, so every input
/// starts from the same state) and the services.
fn planes(mode: Mode) -> (Engine, Engine, Arc<Services>) {
    PLANES.with(|p| {
        let p = p.get_or_init(|| [build(Mode::Concury), build(Mode::Maglev)]);
        let (engine, services) = &p[(mode == Mode::Maglev) as usize];
        let copy = || match engine {
            Engine::Concury(dp) => Engine::Concury(dp.clone()),
            Engine::Maglev(m) => {
                Engine::Maglev(Arc::new(Mutex::new(m.lock().unwrap_or_else(|e| e.into_inner()).clone())))
            }
        };
        (copy(), copy(), services.clone())
    })
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let c = inp.byte();
    let mode = if c & 1 == 0 { Mode::Concury } else { Mode::Maglev };
    let port = PortInfo {
        mac: PORT_MAC,
        v4: Some([198, 18, 0, 2].into()),
        v6: (c & 2 == 0).then(|| "fd00::2".parse().ok()).flatten(),
    };
    let resolved = inp.byte();
    let learned: Vec<IpAddr> = BACKENDS
        .iter()
        .enumerate()
        .filter(|(i, _)| resolved & (1 << i) != 0)
        .filter_map(|(_, a)| a.parse().ok())
        .collect();
    let (engine_a, engine_b, services) = planes(mode);
    let mut a = side(&engine_a, port, &learned);
    let mut b = side(&engine_b, port, &learned);
    let mut tx = TxBatch::default();
    for _ in 0..64 {
        if inp.0.is_empty() {
            break;
        }
        let n = 1 + inp.byte() as usize % 64;
        let frames: Vec<(Vec<u8>, u8)> = (0..n).map(|_| (frame(&mut inp), inp.byte())).collect();
        // The oracle: the copying path.
        let refs: Vec<&[u8]> = frames.iter().map(|(f, _)| f.as_slice()).collect();
        tx.clear();
        a.w.process(&services, &refs, &mut tx);
        // In place, each frame in a buffer of the layout the input picks:
        // 256 bytes in front of 2,048 (the default path's scratch),
        // AF_XDP's 2,048-byte chunk with 256 in front, or none.
        let mut bufs: Vec<(Vec<u8>, usize)> = frames
            .iter()
            .map(|(f, l)| {
                let (size, head) = match l % 3 {
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
            .map(|((buf, head), (f, l))| {
                let mut fr = FwdFrame::new(buf, *head, f.len());
                // Whatever a port set: the worker decides.
                fr.verdict = if l & 0x80 != 0 { Verdict::Slow } else { Verdict::Transmit };
                fr
            })
            .collect();
        b.w.process_in_place(&services, &mut lent);
        assert!(lent.iter().all(|f| matches!(f.verdict, Verdict::Transmit | Verdict::Drop)));
        let out: Vec<&[u8]> = lent.iter().filter(|f| f.verdict == Verdict::Transmit).map(|f| f.frame()).collect();
        let want: Vec<&[u8]> = tx.frames().collect();
        assert_eq!(out.len(), want.len(), "{mode:?}: transmitted frames");
        for (o, w) in out.iter().zip(&want) {
            assert_eq!(o, w, "{mode:?}: a transmitted frame differs");
        }
    }
    a.w.flush(&services);
    b.w.flush(&services);
    assert_eq!(a.counters.prometheus(), b.counters.prometheus(), "{mode:?}: counters differ");
    let ra: Vec<Report> = a.reports.try_iter().collect();
    let rb: Vec<Report> = b.reports.try_iter().collect();
    assert_eq!(ra.len(), rb.len(), "{mode:?}: reports");
    assert!(ra == rb, "{mode:?}: reports differ");
});
