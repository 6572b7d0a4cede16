//! Frames sent through each kernel back end between two namespaces over a veth pair arrive byte
//! for byte, in order, for bursts of many sizes (60- to 1514-byte frames).

use keyplane_net::testnet::{self, TestNet};
use keyplane_net::{Burst, IoKind, Port, PortOptions, open};
use std::time::{Duration, Instant};

const ETHERTYPE_TEST: u16 = 0x88b5; // IEEE local experimental

fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&testnet::mac(2).0);
    f[6..12].copy_from_slice(&testnet::mac(1).0);
    f[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(seq) as u8;
    }
    f
}

/// Receive until `want` test frames arrived or 5 s passed (other traffic is ignored).
fn receive(port: &mut dyn Port, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut burst = Burst::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        port.recv_timeout(&mut burst, Duration::from_millis(50)).unwrap();
        for f in burst.iter() {
            if f.len() >= 14 && f[12..14] == ETHERTYPE_TEST.to_be_bytes() {
                got.push(f.to_vec());
            }
        }
    }
    got
}

fn two_namespaces(kind: IoKind, tag: &str, opts: PortOptions) {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping {tag}: {why}");
        return;
    }
    let mut net = TestNet::new(tag).unwrap();
    let a = net.add_ns("a").unwrap();
    let b = net.add_ns("b").unwrap();
    net.veth(&a, "va", &b, "vb").unwrap();
    let mut tx = net.enter(&a, || open("va", kind, 0, &opts)).unwrap().unwrap();
    let mut rx = net.enter(&b, || open("vb", kind, 0, &opts)).unwrap().unwrap();
    assert_eq!(tx.kind(), kind);
    assert_eq!(rx.kind(), kind);
    let sizes = [60usize, 61, 64, 100, 128, 511, 512, 1000, 1500, 1514];
    let mut seq = 0u32;
    for burst_len in [1usize, 2, 7, 31, 32, 33, 64] {
        let sent: Vec<Vec<u8>> = (0..burst_len)
            .map(|i| {
                seq += 1;
                frame(seq, sizes[(i + burst_len) % sizes.len()])
            })
            .collect();
        let refs: Vec<&[u8]> = sent.iter().map(|f| f.as_slice()).collect();
        assert_eq!(tx.send(&refs).unwrap(), burst_len);
        let got = receive(rx.as_mut(), burst_len);
        assert_eq!(got.len(), burst_len, "{kind}: burst of {burst_len}: frames lost");
        for (g, s) in got.iter().zip(&sent) {
            assert_eq!(g, s, "{kind}: frame changed in transit");
        }
    }
    // And back: the RX port transmits too.
    let back = frame(99_999, 1514);
    assert_eq!(rx.send(&[&back]).unwrap(), 1);
    assert_eq!(receive(tx.as_mut(), 1), vec![back]);
    // Frames longer than FRAME_CAPACITY are refused and counted, never truncated.
    assert!(!tx.tx_stage(&vec![0u8; keyplane_net::FRAME_CAPACITY + 1]).unwrap());
    assert!(!tx.tx_stage(&[]).unwrap());
    let (ts, rs) = (tx.stats(), rx.stats());
    assert_eq!(ts.tx_frames, seq as u64);
    assert_eq!(rs.tx_frames, 1);
    assert!(rs.rx_frames >= seq as u64);
    assert_eq!((ts.tx_dropped, rs.tx_dropped), (2, 0));
}

#[test]
fn af_packet_frames_arrive_byte_for_byte() {
    two_namespaces(IoKind::AfPacket, "afp", PortOptions::default());
}

fn vlan_tag_kept(kind: IoKind) {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let mut net = TestNet::new("vlan").unwrap();
    let a = net.add_ns("a").unwrap();
    let b = net.add_ns("b").unwrap();
    net.veth(&a, "va", &b, "vb").unwrap();
    let opts = PortOptions::default();
    let mut tx = net.enter(&a, || open("va", kind, 0, &opts)).unwrap().unwrap();
    let mut rx = net.enter(&b, || open("vb", kind, 0, &opts)).unwrap().unwrap();
    let mut f = frame(7, 64);
    // Insert an 802.1Q tag (VID 42, PCP 3) carrying the test EtherType.
    f.splice(12..12, [0x81, 0x00, 0x60, 0x2a]);
    assert_eq!(tx.send(&[&f]).unwrap(), 1);
    let mut burst = Burst::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = None;
    while got.is_none() && Instant::now() < deadline {
        rx.recv_timeout(&mut burst, Duration::from_millis(50)).unwrap();
        got = burst.iter().find(|g| g.len() >= 18 && g[16..18] == ETHERTYPE_TEST.to_be_bytes()).map(|g| g.to_vec());
    }
    assert_eq!(got.as_deref(), Some(&f[..]), "{kind}: the VLAN tag must arrive in place");
}

#[test]
fn vlan_tagged_frames_keep_their_tag_on_af_packet() {
    vlan_tag_kept(IoKind::AfPacket);
}

#[test]
fn vlan_tagged_frames_keep_their_tag_on_af_xdp() {
    vlan_tag_kept(IoKind::AfXdp);
}

#[test]
fn af_xdp_frames_arrive_byte_for_byte() {
    two_namespaces(IoKind::AfXdp, "xdp", PortOptions::default());
}

#[test]
fn af_xdp_native_mode_frames_arrive_byte_for_byte() {
    let opts = PortOptions { xdp_mode: keyplane_net::XdpMode::Native, ..Default::default() };
    two_namespaces(IoKind::AfXdp, "xdpn", opts);
}

#[test]
fn af_xdp_without_need_wakeup_and_small_rings() {
    let opts = PortOptions { need_wakeup: false, ring_frames: 64, tx_frames: 64, ..Default::default() };
    two_namespaces(IoKind::AfXdp, "xdps", opts);
}

#[test]
fn af_xdp_to_af_packet_and_back() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let mut net = TestNet::new("mix").unwrap();
    let a = net.add_ns("a").unwrap();
    let b = net.add_ns("b").unwrap();
    net.veth(&a, "va", &b, "vb").unwrap();
    let opts = PortOptions::default();
    let mut x = net.enter(&a, || open("va", IoKind::AfXdp, 0, &opts)).unwrap().unwrap();
    let mut p = net.enter(&b, || open("vb", IoKind::AfPacket, 0, &opts)).unwrap().unwrap();
    let sent: Vec<Vec<u8>> = (0..200).map(|i| frame(i, 60 + (i as usize * 7) % 1455)).collect();
    for chunk in sent.chunks(32) {
        let refs: Vec<&[u8]> = chunk.iter().map(|f| f.as_slice()).collect();
        assert_eq!(x.send(&refs).unwrap(), chunk.len());
        assert_eq!(receive(p.as_mut(), chunk.len()), chunk.to_vec());
        assert_eq!(p.send(&refs).unwrap(), chunk.len());
        assert_eq!(receive(x.as_mut(), chunk.len()), chunk.to_vec());
    }
}

#[test]
fn auto_picks_af_xdp_on_veth_and_falls_back_when_it_cannot() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let mut net = TestNet::new("auto").unwrap();
    let a = net.add_ns("a").unwrap();
    let b = net.add_ns("b").unwrap();
    net.veth(&a, "va", &b, "vb").unwrap();
    let opts = PortOptions::default();
    let p = net.enter(&a, || open("va", IoKind::Auto, 0, &opts)).unwrap().unwrap();
    assert_eq!(p.kind(), IoKind::AfXdp);
    // Queue 300 is beyond any XSKMAP slot: AF_XDP refuses, Auto falls back to AF_PACKET.
    let q = net.enter(&b, || open("vb", IoKind::Auto, 300, &opts)).unwrap().unwrap();
    assert_eq!(q.kind(), IoKind::AfPacket);
    let missing = net.enter(&b, || open("nosuchif0", IoKind::Auto, 0, &opts)).unwrap();
    assert!(matches!(missing, Err(keyplane_net::Error::NoSuchInterface(_))));
    // On veth, XdpMode::Auto attaches in generic mode (measured faster there); Native is honoured.
    let x = net.enter(&b, || keyplane_net::afxdp::XdpPort::open("vb", 0, &opts)).unwrap().unwrap();
    assert!(!x.is_native() && !x.is_zero_copy(), "veth: generic mode, copy");
    drop(x);
    let native = PortOptions { xdp_mode: keyplane_net::XdpMode::Native, ..Default::default() };
    let x = net.enter(&b, || keyplane_net::afxdp::XdpPort::open("vb", 0, &native)).unwrap();
    let x = x.unwrap_or_else(|e| panic!("native attach after generic: {e}"));
    assert!(x.is_native());
    assert!(net.ip(&b, &["link", "show", "vb"]).unwrap().contains("xdp"), "program attached");
    drop(x);
    assert!(!net.ip(&b, &["link", "show", "vb"]).unwrap().contains("xdp"), "program detached with the last port");
}

/// UDP from a namespace's own stack over veth carries a partial checksum (TX offload).
/// AF_PACKET completes it (TP_STATUS_CSUMNOTREADY); with offload turned off through
/// `TestNet::tx_checksum_offload`, both back ends receive a complete checksum.
#[test]
fn partial_checksums_from_the_host_stack() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let udp_valid = |kind: IoKind, offload: bool, complete: bool| -> bool {
        let mut net = TestNet::new("csum").unwrap();
        let a = net.add_ns("a").unwrap();
        let b = net.add_ns("b").unwrap();
        net.veth(&a, "va", &b, "vb").unwrap();
        net.tx_checksum_offload(&a, "va", offload).unwrap();
        net.addr(&a, "va", &format!("{}/24", testnet::v4(0, 1))).unwrap();
        net.ip(
            &a,
            &["neigh", "add", &testnet::v4(0, 2).to_string(), "lladdr", &testnet::mac(2).to_string(), "dev", "va"],
        )
        .unwrap();
        let opts = PortOptions { complete_checksums: complete, ..Default::default() };
        let mut rx = net.enter(&b, || open("vb", kind, 0, &opts)).unwrap().unwrap();
        // One UDP datagram from the stack of namespace a (bash's /dev/udp, no extra tools).
        net.run(&a, &["bash", "-c", &format!("echo hello > /dev/udp/{}/9", testnet::v4(0, 2))]).unwrap();
        let mut burst = Burst::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            rx.recv_timeout(&mut burst, Duration::from_millis(50)).unwrap();
            for f in burst.iter() {
                if let Ok(p) = keyplane_net::parse(f)
                    && matches!(p.l4, keyplane_net::parse::L4::Udp { dst_port: 9, .. })
                {
                    return keyplane_net::checksum::l4_checksum_valid(f, &p);
                }
            }
        }
        panic!("{kind}: the UDP datagram did not arrive");
    };
    assert!(!udp_valid(IoKind::AfPacket, true, false), "offloaded: partial checksum on the wire");
    assert!(udp_valid(IoKind::AfPacket, true, true), "AF_PACKET completes it");
    assert!(!udp_valid(IoKind::AfXdp, true, true), "AF_XDP cannot tell");
    assert!(udp_valid(IoKind::AfXdp, false, true), "offload off: complete");
    assert!(udp_valid(IoKind::AfPacket, false, false), "offload off: complete");
}
