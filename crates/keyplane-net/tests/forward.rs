//! `Port::forward_burst` over a veth pair: frames rewritten in place, some grown at the front (as
//! an IP-in-IP header does), transmitted, dropped or handed to the slow path by verdict, arrive
//! (or not) byte for byte; on AF_XDP every UMEM chunk stays accounted for through thousands of
//! bursts with small rings (a chunk leaked per burst would stop the port within a few bursts).

use keyplane_net::afxdp::XdpPort;
use keyplane_net::testnet::{self, TestNet};
use keyplane_net::{Burst, FwdScratch, IoKind, Port, PortOptions, Verdict, open};
use std::time::{Duration, Instant};

const ETHERTYPE_TEST: u16 = 0x88b5;
const GROW: usize = 40;

fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&testnet::mac(2).0);
    f[6..12].copy_from_slice(&testnet::mac(1).0);
    f[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(7).wrapping_add(seq) as u8;
    }
    f
}

fn seq_of(f: &[u8]) -> Option<u32> {
    (f.len() >= 18 && f[12..14] == ETHERTYPE_TEST.to_be_bytes())
        .then(|| u32::from_be_bytes([f[14], f[15], f[16], f[17]]))
}

/// What the forwarder makes of test frame `seq`: the verdict and, when transmitted, the frame.
fn expected(seq: u32, f: &[u8]) -> (Verdict, Option<Vec<u8>>) {
    match seq % 4 {
        0 => {
            let mut g = f.to_vec();
            g[18] ^= 0xff;
            (Verdict::Transmit, Some(g))
        }
        1 => {
            let mut g = f[..14].to_vec();
            g.extend_from_slice(&[0xa5; GROW]);
            g.extend_from_slice(&f[14..]);
            (Verdict::Transmit, Some(g))
        }
        2 => (Verdict::Drop, None),
        _ => (Verdict::Slow, None),
    }
}

/// The forwarder's closure: rewrite in place by the frame's sequence number.
fn decide(frames: &mut [keyplane_net::FwdFrame<'_>]) {
    for fr in frames {
        let Some(seq) = seq_of(fr.frame()) else { continue };
        match seq % 4 {
            0 => {
                fr.frame_mut()[18] ^= 0xff;
                fr.verdict = Verdict::Transmit;
            }
            1 => {
                assert!(fr.grow_front(GROW));
                let f = fr.frame_mut();
                f.copy_within(GROW..GROW + 14, 0);
                f[14..14 + GROW].fill(0xa5);
                fr.verdict = Verdict::Transmit;
            }
            2 => fr.verdict = Verdict::Drop,
            _ => fr.verdict = Verdict::Slow,
        }
    }
}

/// Send `rounds` bursts from `sender` through `fwd` and back; `check` runs after every call.
fn run<P: Port + ?Sized>(sender: &mut dyn Port, fwd: &mut P, rounds: u32, check: &mut dyn FnMut(&P)) {
    let sizes = [60usize, 64, 100, 511, 1000, 1473, 1500, 1514];
    let mut scratch = FwdScratch::default();
    let mut back = Burst::with_capacity(64);
    let mut seq = 0u32;
    let (mut total_tx, mut total_slow, mut total_rx) = (0usize, 0usize, 0usize);
    for round in 0..rounds {
        let n = 1 + (round as usize * 13) % 48;
        let sent: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                seq += 1;
                frame(seq, sizes[(i + round as usize) % sizes.len()])
            })
            .collect();
        let refs: Vec<&[u8]> = sent.iter().map(|f| f.as_slice()).collect();
        assert_eq!(sender.send(&refs).unwrap(), n);
        let mut want_tx = Vec::new();
        let mut want_slow = Vec::new();
        for f in &sent {
            match expected(seq_of(f).unwrap(), f) {
                (Verdict::Transmit, Some(g)) => want_tx.push(g),
                (Verdict::Slow, _) => want_slow.push(f.clone()),
                _ => {}
            }
        }
        // Forward until every sent frame was seen.
        let (mut seen, mut got_slow) = (0usize, Vec::new());
        let deadline = Instant::now() + Duration::from_secs(5);
        while seen < n && Instant::now() < deadline {
            fwd.wait_rx(Duration::from_millis(20)).unwrap();
            let r = fwd
                .forward_burst(64, &mut scratch, &mut |frames| {
                    seen += frames.iter().filter(|f| seq_of(f.frame()).is_some()).count();
                    decide(frames);
                })
                .unwrap();
            total_rx += r.rx;
            total_tx += r.tx;
            total_slow += r.slow;
            assert_eq!((r.tx_failed, r.slow_dropped), (0, 0), "round {round}");
            assert_eq!(scratch.slow.len(), r.slow);
            got_slow.extend(scratch.slow.iter().map(|f| f.to_vec()));
            check(fwd);
        }
        assert_eq!(seen, n, "round {round}: frames lost before the forwarder");
        assert_eq!(got_slow, want_slow, "round {round}: slow path");
        // The transmitted frames come back to the generator, in order and rewritten.
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < want_tx.len() && Instant::now() < deadline {
            sender.recv_timeout(&mut back, Duration::from_millis(20)).unwrap();
            got.extend(back.iter().filter(|f| seq_of(f).is_some()).map(|f| f.to_vec()));
        }
        assert_eq!(got.len(), want_tx.len(), "round {round}: transmitted frames lost");
        for (g, w) in got.iter().zip(&want_tx) {
            assert_eq!(g, w, "round {round}: frame {:?} changed", seq_of(w));
        }
    }
    assert!(total_rx >= seq as usize);
    assert_eq!(total_tx + total_slow, (1..=seq).filter(|s| s % 4 != 2).count());
}

fn pair(tag: &str) -> Option<(TestNet, String, String)> {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping {tag}: {why}");
        return None;
    }
    let mut net = TestNet::new(tag).unwrap();
    let a = net.add_ns("a").unwrap();
    let b = net.add_ns("b").unwrap();
    net.veth(&a, "va", &b, "vb").unwrap();
    // Grown frames (1514 + 40 bytes) exceed a 1500-byte MTU.
    net.ip(&a, &["link", "set", "va", "mtu", "1600"]).unwrap();
    net.ip(&b, &["link", "set", "vb", "mtu", "1600"]).unwrap();
    Some((net, a, b))
}

/// AF_XDP in place, with 64-entry rings and 2,000 bursts of mixed verdicts: the frames arrive
/// rewritten, and after every call each chunk is in exactly one place; once traffic stops, every
/// chunk is back where it started (`ring_frames` lent to the fill ring, `tx_frames` free).
#[test]
fn af_xdp_forwards_in_place_and_conserves_chunks() {
    let Some((net, a, b)) = pair("fwdx") else { return };
    let opts = PortOptions { ring_frames: 64, tx_frames: 64, ..Default::default() };
    let mut sender = net.enter(&a, || open("va", IoKind::AfPacket, 0, &PortOptions::default())).unwrap().unwrap();
    let mut x = net.enter(&b, || XdpPort::open("vb", 0, &opts)).unwrap().unwrap();
    let c0 = x.chunks();
    assert_eq!((c0.total, c0.free, c0.rx_lent, c0.tx_lent), (128, 64, 64, 0));
    let mut calls = 0u64;
    run(sender.as_mut(), &mut x, 2000, &mut |x: &XdpPort| {
        let c = x.chunks();
        assert!(c.conserved(), "{c:?}");
        assert!(c.rx_lent <= 64, "{c:?}");
        calls += 1;
    });
    assert!(calls >= 2000);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut c = x.chunks();
    while (c.tx_lent > 0 || c.rx_lent < 64) && Instant::now() < deadline {
        assert!(c.conserved(), "{c:?}");
        x.tx_flush().unwrap();
        std::thread::sleep(Duration::from_millis(10));
        c = x.chunks();
    }
    assert!(c.conserved(), "{c:?}");
    assert_eq!((c.free, c.rx_lent, c.tx_lent, c.tx_staged), (64, 64, 0, 0), "{c:?}");
    assert_eq!(x.stats().tx_dropped, 0);
}

/// The same through the default (copying) implementation on AF_PACKET.
#[test]
fn af_packet_forward_burst_default_path() {
    let Some((net, a, b)) = pair("fwdp") else { return };
    let mut sender = net.enter(&a, || open("va", IoKind::AfPacket, 0, &PortOptions::default())).unwrap().unwrap();
    let mut p = net.enter(&b, || open("vb", IoKind::AfPacket, 0, &PortOptions::default())).unwrap().unwrap();
    run(sender.as_mut(), &mut p, 200, &mut |_| {});
}
