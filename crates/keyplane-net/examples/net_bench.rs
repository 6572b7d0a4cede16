//! Packet-I/O micro-benchmark: RX and TX frames per second per core over a veth pair between
//! two namespaces, for 64- and 1500-byte frames, on AF_PACKET, AF_XDP (native) and AF_XDP
//! (generic / SKB mode). Needs root. Bounded: each measurement runs `SECS` seconds (default 2).
//!
//! ```text
//! cargo run --release -p keyplane-net --example net_bench [-- SECS ROUNDS]
//! ```
//!
//! One sender thread (namespace a) floods bursts of 32 frames through one port; one receiver
//! thread (namespace b) drains the peer port. For each side it reports frames per wall-clock
//! second and frames per CPU-second of that thread (`RUSAGE_THREAD`, user + system): the
//! per-core figure. On veth the kernel's receive work (veth xmit, the peer's backlog / NAPI, the
//! XDP program, the copy into the UMEM or ring) largely runs in the sender's softirq context, so
//! the sender's CPU time includes part of the receive path. Rounds alternate the back ends so a
//! noisy machine spreads evenly; the table shows min..max over the rounds. One JSON object per
//! measurement goes to stdout, the table to stderr.

use keyplane_net::afxdp::XdpPort;
use keyplane_net::testnet::{self, TestNet};
use keyplane_net::{IoKind, Port, PortOptions, Shutdown, XdpMode, open};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ETHERTYPE_TEST: u16 = 0x88b5;
const MAX_FRAMES: u64 = 200_000_000;

/// TX pps, TX pps per core, RX pps, RX pps per core.
type Row = [f64; 4];
type Key = (Backend, usize);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Backend {
    AfPacket,
    XdpNative,
    XdpSkb,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::AfPacket => "af_packet",
            Backend::XdpNative => "af_xdp_native",
            Backend::XdpSkb => "af_xdp_skb",
        }
    }
    fn open(self, ns: &str, ifname: &str) -> Box<dyn Port> {
        testnet::enter(ns, || -> Box<dyn Port> {
            match self {
                Backend::AfPacket => open(ifname, IoKind::AfPacket, 0, &PortOptions::default()).unwrap(),
                Backend::XdpNative | Backend::XdpSkb => {
                    let mode = if self == Backend::XdpNative { XdpMode::Native } else { XdpMode::Skb };
                    let p = XdpPort::open(ifname, 0, &PortOptions { xdp_mode: mode, ..Default::default() }).unwrap();
                    assert_eq!(p.is_native(), self == Backend::XdpNative);
                    Box::new(p)
                }
            }
        })
        .unwrap()
    }
}

fn thread_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage struct for the calling thread.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

struct Side {
    frames: u64,
    wall: Duration,
    cpu: Duration,
}

fn measure(b: Backend, size: usize, secs: f64) -> (Side, Side, u64) {
    let mut net = TestNet::new("bench").unwrap();
    let a = net.add_ns("a").unwrap();
    let bns = net.add_ns("b").unwrap();
    net.veth(&a, "va", &bns, "vb").unwrap();
    let stop = Shutdown::new();
    let ready = Arc::new(AtomicBool::new(false));
    let (ns_b, stop_r, ready_r) = (bns.clone(), stop.clone(), ready.clone());
    let rx = std::thread::spawn(move || {
        let mut port = b.open(&ns_b, "vb");
        ready_r.store(true, Ordering::Release);
        let t0 = Instant::now();
        let c0 = thread_cpu();
        let mut n = 0u64;
        while !stop_r.is_stopped() {
            if port.wait_rx(Duration::from_millis(10)).unwrap() {
                port.rx_burst_with(64, &mut |f: &mut [u8]| {
                    n += (f.len() >= 14 && f[12..14] == ETHERTYPE_TEST.to_be_bytes()) as u64;
                })
                .unwrap();
            }
        }
        (Side { frames: n, wall: t0.elapsed(), cpu: thread_cpu() - c0 }, port.stats().rx_kernel_drops)
    });
    while !ready.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut port = b.open(&a, "va");
    let mut frame = vec![0u8; size];
    frame[0..6].copy_from_slice(&testnet::mac(2).0);
    frame[6..12].copy_from_slice(&testnet::mac(1).0);
    frame[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let c0 = thread_cpu();
    let mut sent = 0u64;
    while Instant::now() < deadline && sent < MAX_FRAMES {
        for _ in 0..32 {
            frame[14..22].copy_from_slice(&sent.to_be_bytes());
            port.tx_stage(&frame).unwrap();
        }
        sent += port.tx_flush().unwrap() as u64;
    }
    let tx_side = Side { frames: port.stats().tx_frames, wall: t0.elapsed(), cpu: thread_cpu() - c0 };
    std::thread::sleep(Duration::from_millis(100));
    stop.stop();
    let (rx_side, drops) = rx.join().unwrap();
    drop(port);
    drop(net);
    (tx_side, rx_side, drops)
}

fn main() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("net_bench needs network namespaces: {why}");
        std::process::exit(1);
    }
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse::<f64>().ok()).unwrap_or(2.0).clamp(0.2, 30.0);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3).clamp(1, 20);
    let backends = [Backend::AfPacket, Backend::XdpNative, Backend::XdpSkb];
    let sizes = [64usize, 1500];
    // results[(backend, size)] = Vec<(tx pps, tx per core, rx pps, rx per core)>
    let mut res: Vec<(Key, Vec<Row>)> = Vec::new();
    for round in 0..rounds {
        for &size in &sizes {
            for i in 0..backends.len() {
                let b = backends[(i + round) % backends.len()];
                let (t, r, drops) = measure(b, size, secs);
                let row = [
                    t.frames as f64 / t.wall.as_secs_f64(),
                    t.frames as f64 / t.cpu.as_secs_f64().max(1e-9),
                    r.frames as f64 / t.wall.as_secs_f64(),
                    r.frames as f64 / r.cpu.as_secs_f64().max(1e-9),
                ];
                println!(
                    "{{\"bench\":\"net_io\",\"backend\":\"{}\",\"frame_bytes\":{size},\"round\":{round},\"secs\":{secs},\
                     \"tx_frames\":{},\"tx_pps\":{:.0},\"tx_pps_per_core\":{:.0},\"tx_cpu_s\":{:.3},\
                     \"rx_frames\":{},\"rx_pps\":{:.0},\"rx_pps_per_core\":{:.0},\"rx_cpu_s\":{:.3},\"rx_kernel_drops\":{drops}}}",
                    b.name(),
                    t.frames,
                    row[0],
                    row[1],
                    t.cpu.as_secs_f64(),
                    r.frames,
                    row[2],
                    row[3],
                    r.cpu.as_secs_f64()
                );
                match res.iter_mut().find(|e| e.0 == (b, size)) {
                    Some(e) => e.1.push(row),
                    None => res.push(((b, size), vec![row])),
                }
            }
        }
    }
    let range = |v: &[Row], k: usize| {
        let lo = v.iter().map(|r| r[k]).fold(f64::MAX, f64::min) / 1e3;
        let hi = v.iter().map(|r| r[k]).fold(0.0, f64::max) / 1e3;
        format!("{lo:.0}..{hi:.0}")
    };
    eprintln!("\n| back end | frame | TX kpps | TX kpps/core | RX kpps | RX kpps/core |");
    eprintln!("|---|---|---|---|---|---|");
    for &size in &sizes {
        for &b in &backends {
            if let Some((_, v)) = res.iter().find(|e| e.0 == (b, size)) {
                eprintln!(
                    "| {} | {size} B | {} | {} | {} | {} |",
                    b.name(),
                    range(v, 0),
                    range(v, 1),
                    range(v, 2),
                    range(v, 3)
                );
            }
        }
    }
}
