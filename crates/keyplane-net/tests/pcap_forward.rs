//! The forwarding shape the switch and LB use, over pcap ports (deterministic, no namespaces):
//! frames lent by `rx_burst_with` are parsed and rewritten in place (IPv4 TTL with the RFC 1624
//! checksum patch, IPv6 hop limit), staged on another port found with `split_at_port`, and
//! malformed or expired frames are counted and dropped. The output capture is exactly the
//! expected frames.

use keyplane_net::build::{UdpSpec, udp_ipv4, udp_ipv6};
use keyplane_net::checksum::{ipv4_decrement_ttl, ipv4_header_valid, ipv6_decrement_hop_limit};
use keyplane_net::parse::{L3, parse};
use keyplane_net::{BURST, IoKind, MacAddr, Port, PortOptions, open, pcap, split_at_port};

#[test]
fn replay_rewrite_and_forward_between_pcap_ports() {
    let dir = std::env::temp_dir().join(format!("kpnet-fwd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.pcap");
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    let mut buf = [0u8; 2048];
    for i in 0..100u8 {
        let ttl = i % 4; // 0 and 1 expire
        let s4 = UdpSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src: [198, 18, 0, 1].into(),
            dst: [198, 18, 1, i].into(),
            src_port: 1000 + i as u16,
            dst_port: 53,
            ttl,
        };
        let n = udp_ipv4(&mut buf, &s4, &[i; 40]).unwrap();
        frames.push(buf[..n].to_vec());
        if ttl > 1 {
            let mut e = buf[..n].to_vec();
            e[22] = ttl - 1;
            let c = keyplane_net::checksum::ipv4_header_checksum(&e, 14).unwrap();
            e[24..26].copy_from_slice(&c.to_be_bytes());
            expected.push(e);
        }
        let s6 = UdpSpec {
            src_mac: s4.src_mac,
            dst_mac: s4.dst_mac,
            src: "fd00::1".parse().unwrap(),
            dst: "fd00::2".parse().unwrap(),
            src_port: s4.src_port,
            dst_port: s4.dst_port,
            ttl,
        };
        let n = udp_ipv6(&mut buf, &s6, &[i; 10]).unwrap();
        frames.push(buf[..n].to_vec());
        if ttl > 1 {
            let mut e = buf[..n].to_vec();
            e[21] = ttl - 1;
            expected.push(e);
        }
        frames.push(vec![0xff; (i % 14) as usize]); // garbage: shorter than an Ethernet header
    }
    pcap::write_frames(&input, &frames).unwrap();
    let output = dir.join("out.pcap");
    let opts = PortOptions::default();
    let mut ports: Vec<Box<dyn Port>> = vec![
        open(&format!("pcap:{}", input.display()), IoKind::Pcap, 0, &opts).unwrap(),
        open(&format!("pcap::{}", output.display()), IoKind::Pcap, 0, &opts).unwrap(),
    ];
    let (mut malformed, mut expired) = (0u64, 0u64);
    loop {
        let (rx, mut others) = split_at_port(&mut ports, 0).unwrap();
        let tx = others.get_mut(1).unwrap();
        let n = rx
            .rx_burst_with(BURST, &mut |f: &mut [u8]| {
                let Ok(p) = parse(f) else {
                    malformed += 1;
                    return;
                };
                let fwd = match p.l3 {
                    L3::Ipv4(_) => ipv4_decrement_ttl(f, p.l3_offset).unwrap(),
                    L3::Ipv6(_) => ipv6_decrement_hop_limit(f, p.l3_offset).unwrap(),
                    _ => None,
                };
                match fwd {
                    Some(_) => assert!(tx.tx_stage(f).unwrap()),
                    None => expired += 1,
                }
            })
            .unwrap();
        tx.tx_flush().unwrap();
        if n == 0 {
            break;
        }
    }
    assert_eq!(malformed, 100);
    assert_eq!(expired, 100);
    assert_eq!(ports[1].stats().tx_frames, 100);
    drop(ports);
    let out = pcap::read_frames(&output).unwrap();
    assert_eq!(out, expected);
    assert!(out.iter().filter(|f| f[12..14] == [8, 0]).all(|f| ipv4_header_valid(f, 14)));
    std::fs::remove_dir_all(&dir).unwrap();
}
