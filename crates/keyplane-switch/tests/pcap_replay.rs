//! The pcap back end: captures replay through the switch's runtime (the
//! same workers, planes and decisions as on AF_PACKET / AF_XDP) and give
//! exactly the expected output captures, computed by an independent model
//! (a dictionary bridge for L2; a per-frame router built with
//! `keyplane-net`'s frame builders and checksum code for L3). Deterministic,
//! no namespaces.

use keyplane::lpm::Prefix;
use keyplane::{ControlTable, Wire};
use keyplane_any::{AnyControl, Opts};
use keyplane_net::MacAddr;
use keyplane_net::build::{self, UdpSpec};
use keyplane_net::pcap::{read_frames, write_frames};
use keyplane_switch::decide::Unknown;
use keyplane_switch::{Config, Mode, Shutdown};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kp-switch-pcap-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn mac(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [2, 0x33, b[0], b[1], b[2], b[3]]
}

/// Replays `inputs[p]` into port p of a switch running `cfg` (ports are
/// rewritten to pcap ports) and returns the output capture of every port.
fn replay(mut cfg: Config, d: &Path, inputs: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    cfg.ports = (0..inputs.len())
        .map(|p| {
            let i = d.join(format!("in{p}.pcap"));
            write_frames(&i, &inputs[p]).unwrap();
            format!("pcap:{}:{}", i.display(), d.join(format!("out{p}.pcap")).display())
        })
        .collect();
    // One burst takes a whole input file, so the replay order is: port 0's frames, then port 1's, ...
    cfg.burst = 1024;
    let stop = Shutdown::new();
    let sw = keyplane_switch::start(&cfg, &stop).unwrap();
    let total: u64 = inputs.iter().map(|i| i.len() as u64).sum();
    let t = Instant::now();
    while sw.counters.total().rx < total {
        assert!(t.elapsed() < Duration::from_secs(10), "replay stalled: {}", sw.counters.summary());
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.stop();
    sw.join().unwrap();
    (0..inputs.len()).map(|p| std::fs::read(d.join(format!("out{p}.pcap"))).unwrap()).collect()
}

fn capture(d: &Path, name: &str, frames: &[Vec<u8>]) -> Vec<u8> {
    let p = d.join(name);
    write_frames(&p, frames).unwrap();
    std::fs::read(p).unwrap()
}

#[test]
fn l2_capture_replays_to_the_expected_captures() {
    let d = dir("l2");
    let ports = 3u16;
    // 40 known MACs behind the 3 ports; sources and destinations drawn from 60 (20 unknown).
    let fib: HashMap<[u8; 6], u16> = (0..40).map(|i| (mac(i), (i % 3) as u16)).collect();
    let ctl = AnyControl::build("cuckoo", fib.iter().map(|(m, p)| (m.to_vec(), *p as u64)), 2, &Opts::new()).unwrap();
    let fib_path = d.join("fib.kpl");
    std::fs::write(&fib_path, ctl.export().to_bytes()).unwrap();
    let mut x = 7u64;
    let mut rnd = move || {
        x = keyplane::hash::mix64(x);
        x
    };
    let inputs: Vec<Vec<Vec<u8>>> = (0..ports)
        .map(|_| {
            (0..300)
                .map(|_| {
                    let dst = match rnd() % 8 {
                        0 => [0xff; 6],
                        1 => [0x33, 0x33, 0, 0, 0, 1],
                        _ => mac((rnd() % 60) as u32),
                    };
                    let mut f = dst.to_vec();
                    f.extend_from_slice(&mac((rnd() % 60) as u32));
                    if rnd() % 5 == 0 {
                        f.extend_from_slice(&[0x81, 0, 0, 7]);
                    }
                    f.extend_from_slice(&[0x88, 0xb5]);
                    let len = 60 + (rnd() % 1400) as usize;
                    while f.len() < len {
                        f.push(rnd() as u8);
                    }
                    match rnd() % 25 {
                        0 => f.truncate(1 + (rnd() % 13) as usize),
                        1 => f[6] |= 1, // group source address
                        _ => {}
                    }
                    f
                })
                .collect()
        })
        .collect();
    for unknown in [Unknown::Flood, Unknown::Drop] {
        // The model: a dictionary bridge.
        let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); ports as usize];
        for (p, frames) in inputs.iter().enumerate() {
            for f in frames {
                if f.len() < 14 || f[6] & 1 == 1 {
                    continue;
                }
                let dst: [u8; 6] = f[0..6].try_into().unwrap();
                let out: Vec<u16> = match fib.get(&dst) {
                    Some(&q) if dst[0] & 1 == 0 => vec![q],
                    None if dst[0] & 1 == 0 && unknown == Unknown::Drop => vec![],
                    _ => (0..ports).collect(),
                };
                for q in out.into_iter().filter(|&q| q as usize != p) {
                    want[q as usize].push(f.clone());
                }
            }
        }
        let mut cfg = Config::new(Vec::new(), &fib_path);
        cfg.unknown = unknown;
        cfg.learn = Some(false);
        let got = replay(cfg, &d, &inputs);
        for p in 0..ports as usize {
            assert!(!want[p].is_empty());
            assert!(got[p] == capture(&d, "want.pcap", &want[p]), "port {p} ({unknown:?}): output capture differs");
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn l3_capture_replays_to_the_expected_captures() {
    let d = dir("l3");
    let pm = |i: u8| [0x02, 0x6b, 0x70, 0xff, 0, i];
    let hosts = [mac(100), mac(101)];
    let routes = vec![
        ("198.18.1.0/24".parse::<Prefix>().unwrap(), 0u64),
        ("198.18.2.0/24".parse().unwrap(), 1),
        ("198.18.2.128/25".parse().unwrap(), 0),
    ];
    let ctl = keyplane::lpm::Control::from_prefixes(routes, 4).unwrap();
    let fib_path = d.join("routes.kpl");
    std::fs::write(&fib_path, ctl.export().to_bytes()).unwrap();
    let nh = d.join("next-hops");
    std::fs::write(&nh, format!("0 0 {}\n1 1 {}\n", ms(hosts[0]), ms(hosts[1]))).unwrap();
    let gw: Ipv4Addr = "198.18.1.1".parse().unwrap();
    let mut inputs: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
    let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
    let mut buf = [0u8; 2048];
    // Port 0: ARP for the switch (answered), ARP for someone else (ignored),
    // UDP to each route with TTL 64 and TTL 1, one with a broken header checksum.
    let n = build::arp_request(&mut buf, MacAddr(hosts[0]), "198.18.1.2".parse().unwrap(), gw).unwrap();
    inputs[0].push(buf[..n].to_vec());
    let n = build::arp_reply(&mut buf, MacAddr(pm(0)), gw, MacAddr(hosts[0]), "198.18.1.2".parse().unwrap()).unwrap();
    want[0].push(padded(&buf[..n]));
    let n =
        build::arp_request(&mut buf, MacAddr(hosts[0]), "198.18.1.2".parse().unwrap(), "198.18.1.9".parse().unwrap())
            .unwrap();
    inputs[0].push(buf[..n].to_vec());
    for (dst, out_port, ttl) in
        [("198.18.2.7", 1usize, 64u8), ("198.18.2.200", 0, 64), ("198.18.2.7", 1, 1), ("198.18.9.1", 9, 64)]
    {
        let spec = UdpSpec {
            src_mac: MacAddr(hosts[0]),
            dst_mac: MacAddr(pm(0)),
            src: "198.18.1.2".parse().unwrap(),
            dst: dst.parse().unwrap(),
            src_port: 1000,
            dst_port: 2000,
            ttl,
        };
        let n = build::udp_ipv4(&mut buf, &spec, b"keyplane switch pcap replay").unwrap();
        inputs[0].push(buf[..n].to_vec());
        if ttl > 1 && out_port < 2 {
            // The router model: rebuild the frame as it must leave (TTL - 1, fresh checksums).
            let spec = UdpSpec {
                src_mac: MacAddr(pm(out_port as u8)),
                dst_mac: MacAddr(hosts[out_port]),
                ttl: ttl - 1,
                ..spec
            };
            let n = build::udp_ipv4(&mut buf, &spec, b"keyplane switch pcap replay").unwrap();
            want[out_port].push(buf[..n].to_vec());
        }
    }
    let mut bad = inputs[0][3].clone();
    bad[24] ^= 0xff; // header checksum
    inputs[0].push(bad);
    // Port 1: a frame to another MAC (not for the switch) and one back to host 0.
    let spec = UdpSpec {
        src_mac: MacAddr(hosts[1]),
        dst_mac: MacAddr(pm(1)),
        src: "198.18.2.7".parse().unwrap(),
        dst: "198.18.1.2".parse().unwrap(),
        src_port: 2000,
        dst_port: 1000,
        ttl: 2,
    };
    let n = build::udp_ipv4(&mut buf, &UdpSpec { dst_mac: MacAddr(mac(5)), ..spec }, b"x").unwrap();
    inputs[1].push(buf[..n].to_vec());
    let n = build::udp_ipv4(&mut buf, &spec, b"x").unwrap();
    inputs[1].push(buf[..n].to_vec());
    let n = build::udp_ipv4(
        &mut buf,
        &UdpSpec { src_mac: MacAddr(pm(0)), dst_mac: MacAddr(hosts[0]), ttl: 1, ..spec },
        b"x",
    )
    .unwrap();
    want[0].push(buf[..n].to_vec());

    let mut cfg = Config::new(Vec::new(), &fib_path);
    cfg.mode = Mode::L3;
    cfg.next_hops = Some(nh);
    cfg.addresses.push(gw.into());
    let got = replay(cfg, &d, &inputs);
    for p in 0..2 {
        assert!(
            got[p] == capture(&d, "want.pcap", &want[p]),
            "port {p}: output capture differs:\n{:?}\n{:?}",
            read_frames(d.join(format!("out{p}.pcap"))).unwrap(),
            want[p]
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

fn ms(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn padded(f: &[u8]) -> Vec<u8> {
    let mut v = f.to_vec();
    v.resize(v.len().max(60), 0);
    v
}
