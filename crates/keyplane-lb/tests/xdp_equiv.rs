//! The XDP program (`bpf/lb_xdp.c`, `--io xdp`) against the user-space path
//! (`Worker::process`), frame by frame through `BPF_PROG_TEST_RUN` (root; no
//! interface or namespace needed).
//!
//! Plain frames (≥ 100,000 random IPv4 / IPv6, TCP / UDP frames to 10 VIPs:
//! DSR, IPIP, IP6-in-IP6, 4in6, 6in4, pools of 1 to 300 backends (a 16-bit
//! DIP row), random flags, payloads, TOS, Ethernet padding; some to
//! addresses that are not VIPs; pools changed every 10,000 frames and the
//! maps republished): the program transmits exactly the frames the
//! user-space path forwards, **byte for byte**, and passes the others; its
//! new-flow reports (ring buffer) equal the user-space path's, in order.
//!
//! Odd frames (VLAN tags, IPv4 options, IPv6 extension headers, fragments,
//! truncations, byte mutations, bad lengths, foreign MACs, frames too big to
//! encapsulate, backends without a resolved MAC): no crash; the verdict is
//! XDP_PASS / XDP_DROP, or XDP_TX with exactly the user-space output.

use keyplane_lb::config::Config;
use keyplane_lb::control::{ControlSide, Mode};
use keyplane_lb::dataplane::{Engine, PortInfo, Report, TxBatch, Worker};
use keyplane_lb::metrics::Counters;
use keyplane_lb::xdp::{self, Program, XDP_PASS, XDP_TX};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const PORT_MAC: [u8; 6] = [2, 0x1b, 0, 0, 0, 1];

fn port() -> PortInfo {
    PortInfo { mac: PORT_MAC, v4: Some(Ipv4Addr::new(198, 18, 0, 2)), v6: Some("fd00::2".parse().unwrap()) }
}

fn mac_of(a: &IpAddr) -> [u8; 6] {
    let o = match a {
        IpAddr::V4(v) => v.octets()[2..].to_vec(),
        IpAddr::V6(v) => v.octets()[14..].to_vec(),
    };
    [2, 0xb, a.is_ipv4() as u8, 7, o[0], o[1]]
}

fn b4(i: usize) -> IpAddr {
    Ipv4Addr::new(198, 18, 2 + (i / 250) as u8, 1 + (i % 250) as u8).into()
}
fn b6(i: usize) -> IpAddr {
    format!("fd00::b:{i:x}").parse::<Ipv6Addr>().unwrap().into()
}

/// VIPs: (address, port, protocol, method, backend family 4/6, pool size).
fn vips() -> Vec<(IpAddr, u16, &'static str, &'static str, u8, usize)> {
    vec![
        ("198.18.100.1".parse().unwrap(), 80, "tcp", "dsr", 4, 4),
        ("198.18.100.2".parse().unwrap(), 80, "tcp", "ipip", 4, 7),
        ("fd00:100::1".parse().unwrap(), 80, "tcp", "dsr", 6, 3),
        ("fd00:101::1".parse().unwrap(), 80, "tcp", "ipip", 6, 5),
        ("198.18.100.3".parse().unwrap(), 53, "udp", "dsr", 4, 2),
        ("fd00:100::1".parse().unwrap(), 53, "udp", "ipip", 6, 6),
        ("198.18.100.4".parse().unwrap(), 443, "tcp", "ipip", 6, 3),
        ("fd00:102::1".parse().unwrap(), 80, "tcp", "ipip", 4, 4),
        ("198.18.100.5".parse().unwrap(), 80, "tcp", "dsr", 4, 300),
        ("198.18.100.6".parse().unwrap(), 8080, "udp", "dsr", 4, 1),
    ]
}

/// The configuration of round `r`: pools shift (backends leave and join,
/// weights change) from round to round.
fn config(r: usize) -> String {
    let mut s = String::from("[lb]\nremove_grace_ms = 0\nreport_rate = 100000000\n[health]\nkind = \"none\"\n");
    for (k, (a, p, proto, m, fam, n)) in vips().into_iter().enumerate() {
        s += &format!("[[vip]]\naddress = \"{a}\"\nport = {p}\nprotocol = \"{proto}\"\nmethod = \"{m}\"\n");
        let n = if r == 0 || n == 1 { n } else { n + (r + k) % 3 };
        let skip = if r == 0 || n <= 2 { usize::MAX } else { (r * 7 + k) % n };
        for i in 0..n {
            if i == skip {
                continue;
            }
            let b = if fam == 4 { b4(i + 10 * k) } else { b6(i + 10 * k) };
            let w = 1 + (i + r) % 3;
            s += &format!("[[vip.backend]]\naddress = \"{b}\"\nweight = {w}\n");
        }
    }
    s
}

/// An Ethernet frame: `dst`/`src` IP, UDP or TCP, `flags`, `payload` bytes, `tos`, `pad` bytes of Ethernet padding.
#[allow(clippy::too_many_arguments)]
fn frame(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    udp: bool,
    flags: u8,
    payload: usize,
    tos: u8,
    pad: usize,
) -> Vec<u8> {
    let mut f = PORT_MAC.to_vec();
    f.extend_from_slice(&[2, 0xc, 0, 0, 0, 9]);
    let l4len = if udp { 8 } else { 20 } + payload;
    let mut l4 = vec![0u8; l4len];
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    if udp {
        l4[4..6].copy_from_slice(&(l4len as u16).to_be_bytes());
    } else {
        l4[12] = 5 << 4;
        l4[13] = flags;
    }
    for (i, b) in l4.iter_mut().enumerate().skip(if udp { 8 } else { 20 }) {
        *b = (i * 31 + sport as usize) as u8;
    }
    let proto = if udp { 17 } else { 6 };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00]);
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = tos;
            h[2..4].copy_from_slice(&((20 + l4len) as u16).to_be_bytes());
            h[4..6].copy_from_slice(&sport.to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = 64;
            h[9] = proto;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let c = keyplane_net::checksum::internet_checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd]);
            let mut h = [0u8; 40];
            let w = (6u32 << 28) | ((tos as u32) << 20) | ((sport as u32 * 7) & 0xfffff);
            h[0..4].copy_from_slice(&w.to_be_bytes());
            h[4..6].copy_from_slice(&(l4len as u16).to_be_bytes());
            h[6] = proto;
            h[7] = 64;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            f.extend_from_slice(&h);
        }
        _ => unreachable!(),
    }
    f.extend_from_slice(&l4);
    f.extend(std::iter::repeat_n(0u8, pad));
    f
}

/// A random plain frame: to a VIP (90 %) or a non-VIP address / port, of one of `flows` sources.
fn plain(rng: &mut Rng, flows: u64) -> Vec<u8> {
    let vs = vips();
    let (vip, vport, proto, _, _, _) = vs[rng.below(vs.len() as u64) as usize];
    let udp = proto == "udp";
    let flow = rng.below(flows);
    let sport = 1024 + (flow % 50_000) as u16;
    let src: IpAddr = if vip.is_ipv4() {
        Ipv4Addr::from(0xc613_0000 + (flow as u32 >> 4)).into()
    } else {
        Ipv6Addr::from(0xfd00_0005_u128 << 96 | (flow as u128 >> 4)).into()
    };
    let (mut dst, mut dport) = (vip, vport);
    match rng.below(20) {
        0 => dport = vport + 1,
        1 => {
            dst = match vip {
                IpAddr::V4(_) => Ipv4Addr::new(198, 18, 100, 99).into(),
                IpAddr::V6(_) => "fd00:100::99".parse().unwrap(),
            }
        }
        _ => {}
    }
    let flags = [0x02, 0x10, 0x10, 0x18, 0x11, 0x04, 0x12, 0x10][rng.below(8) as usize];
    let payload = match rng.below(4) {
        0 => 0,
        1 => rng.below(64) as usize,
        2 => rng.below(1400) as usize,
        _ => 1400,
    };
    let pad = if payload == 0 && rng.below(2) == 0 { rng.below(20) as usize } else { 0 };
    frame(src, dst, sport, dport, udp, flags, payload, rng.below(256) as u8, pad)
}

/// An odd frame: a plain one, changed.
fn odd(rng: &mut Rng, flows: u64) -> Vec<u8> {
    let mut f = plain(rng, flows);
    let v4 = f[12] == 0x08;
    match rng.below(14) {
        0 => {
            let mut t = f[..12].to_vec();
            t.extend_from_slice(&[0x81, 0, 0, 7]);
            t.extend_from_slice(&f[12..]);
            f = t;
        }
        1 if v4 => {
            // IPv4 options (NOPs), lengths fixed.
            f.splice(34..34, [1u8, 1, 1, 1]);
            f[14] = 0x46;
            let tot = u16::from_be_bytes([f[16], f[17]]) + 4;
            f[16..18].copy_from_slice(&tot.to_be_bytes());
        }
        1 => {
            // IPv6 hop-by-hop header in front of the transport.
            let nh = f[20];
            f.splice(54..54, [nh, 0, 1, 4, 0, 0, 0, 0]);
            f[20] = 0;
            let pl = u16::from_be_bytes([f[18], f[19]]) + 8;
            f[18..20].copy_from_slice(&pl.to_be_bytes());
        }
        2 if v4 => f[20] |= 0x20, // MF
        2 => {
            let nh = f[20];
            f.splice(54..54, [nh, 0, 0, 1, 0, 0, 0, 9]);
            f[20] = 44;
            let pl = u16::from_be_bytes([f[18], f[19]]) + 8;
            f[18..20].copy_from_slice(&pl.to_be_bytes());
        }
        3 => {
            let n = rng.below(f.len() as u64) as usize;
            f.truncate(n.max(14));
        }
        4 | 5 => {
            for _ in 0..1 + rng.below(3) {
                let i = 12 + rng.below(50.min(f.len() as u64 - 12)) as usize;
                f[i] = rng.next() as u8;
            }
        }
        6 => f[0] = 0xff, // broadcast / multicast
        7 => f[5] ^= 1,   // another host's MAC
        8 => f[6..12].copy_from_slice(&PORT_MAC),
        9 => {
            // Too big to encapsulate (and to send as it is).
            let extra = vec![0u8; 2100];
            let l3 = 14;
            f.extend_from_slice(&extra);
            if v4 {
                let tot = (f.len() - l3) as u16;
                f[16..18].copy_from_slice(&tot.to_be_bytes());
            } else {
                let pl = (f.len() - l3 - 40) as u16;
                f[18..20].copy_from_slice(&pl.to_be_bytes());
            }
        }
        10 => {
            // TCP data offset or UDP length out of range.
            let l4 = if v4 { 34 } else { 54 };
            if f.len() > l4 + 13 {
                if f[if v4 { 23 } else { 20 }] == 6 {
                    f[l4 + 12] = if rng.below(2) == 0 { 4 << 4 } else { 15 << 4 };
                } else {
                    f[l4 + 4] = 0xff;
                }
            }
        }
        11 => {
            let n = 14 + rng.below(80) as usize;
            f = (0..n).map(|_| rng.next() as u8).collect();
            f[..6].copy_from_slice(&PORT_MAC);
        }
        _ => {}
    }
    f
}

struct Rig {
    ctl: ControlSide,
    prog: Program,
    feed: xdp::Feed,
    rx: std::sync::mpsc::Receiver<Report>,
}

fn publish(rig: &mut Rig, unresolved: &dyn Fn(&IpAddr) -> bool) {
    let Engine::Concury(dp) = rig.ctl.engine() else { unreachable!() };
    let (_, images) = dp.images();
    let svc = rig.ctl.services().load_full();
    let p = rig.prog.publish(&images, &svc, &|a| (!unresolved(a)).then(|| mac_of(a))).expect("publish");
    assert_eq!(p.skipped, 0, "{p:?}");
    assert_eq!(p.vips, vips().len());
}

#[test]
fn xdp_program_forwards_byte_for_byte_like_the_user_space_path() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: BPF_PROG_TEST_RUN needs root");
        return;
    }
    if let Err(e) = xdp::object() {
        panic!("{e}");
    }
    let counters = Arc::new(Counters::default());
    let ctl = ControlSide::new(Mode::Concury, Config::parse(&config(0), &[]).unwrap(), counters.clone()).unwrap();
    let engine = ctl.engine();
    let (tx, rx) = sync_channel::<Report>(1 << 20);
    let mut w = Worker::new(&engine, port(), Some(tx), 100_000_000, counters.clone());
    let now = Instant::now();
    let all: Vec<IpAddr> = (0..400).flat_map(|i| [b4(i), b6(i)]).collect();
    w.neighbors.due(&all, now);
    for a in &all {
        assert!(w.neighbors.learn(*a, mac_of(a), now));
    }
    let prog = Program::load(xdp::Sizes::for_config(100_000, 16, 12)).expect("load the XDP program (root)");
    prog.set_port(&port()).unwrap();
    let feed = prog.feed().unwrap();
    let mut rig = Rig { ctl, prog, feed, rx };
    publish(&mut rig, &|_| false);

    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut txb = TxBatch::default();
    let (mut n_tx, mut n_pass, mut n_reports) = (0usize, 0usize, 0usize);
    let total = 120_000;
    let flows = 6_000;
    let mut round = 0;
    for i in 0..total {
        if i > 0 && i % 10_000 == 0 {
            // Reports so far go to the control side (so pool changes keep
            // the tracked connections), then the pools change.
            round += 1;
            rig.ctl.apply_config(Config::parse(&config(round), &[]).unwrap()).unwrap();
            publish(&mut rig, &|_| false);
        }
        let f = plain(&mut rng, flows);
        let svc = rig.ctl.services().load_full();
        txb.clear();
        w.process(&svc, &[&f], &mut txb);
        let (v, out) = rig.prog.run(&f).expect("test run");
        match txb.frames().next() {
            Some(want) => {
                assert_eq!(v, XDP_TX, "frame {i}: user space forwards, XDP verdict {v}: {f:02x?}");
                assert_eq!(out, want, "frame {i}: output differs\n in  {f:02x?}");
                n_tx += 1;
            }
            None => {
                assert_eq!(
                    v,
                    XDP_PASS,
                    "frame {i}: user space does not forward it, XDP verdict {v}\n{f:02x?}\n{}",
                    counters.prometheus()
                );
                n_pass += 1;
            }
        }
        if i % 1000 == 999 {
            let a: Vec<Report> = rig.rx.try_iter().collect();
            let mut x = Vec::new();
            rig.feed.reports(|r| x.push(r));
            assert_eq!(a.len(), x.len(), "reports up to frame {i}");
            for (k, (ra, rx)) in a.iter().zip(&x).enumerate() {
                assert_eq!(ra, rx, "report {k} up to frame {i}");
            }
            n_reports += a.len();
            for r in a {
                rig.ctl.report(r);
            }
        }
    }
    eprintln!("plain: {total} frames, {n_tx} transmitted byte-identical, {n_pass} passed, {n_reports} reports equal");
    assert!(n_tx >= 100_000, "{n_tx}");
    assert!(n_reports > 10_000);
    let st = rig.feed.stats();
    assert_eq!(st.cnt[xdp::cnt::TX] as usize, n_tx);
    assert_eq!(st.cnt[xdp::cnt::RING_FULL], 0);
    let fwd: u64 = st.per.iter().map(|p| p.2[0]).sum();
    assert_eq!(fwd as usize, n_tx, "per-backend packet counters");

    // Odd frames; then a third of the backends unresolved.
    let mut odd_tx = 0;
    for phase in 0..2 {
        if phase == 1 {
            publish(&mut rig, &|a| mac_of(a)[5] % 3 == 0);
        }
        for i in 0..20_000 {
            let f = if phase == 0 { odd(&mut rng, flows) } else { plain(&mut rng, flows) };
            let svc = rig.ctl.services().load_full();
            txb.clear();
            w.process(&svc, &[&f], &mut txb);
            let (v, out) = rig.prog.run(&f).expect("test run");
            match v {
                XDP_TX => {
                    let want = txb.frames().next();
                    assert_eq!(
                        Some(&out[..]),
                        want,
                        "phase {phase} frame {i}: XDP transmitted what user space does not\n in {f:02x?}"
                    );
                    odd_tx += 1;
                }
                xdp::XDP_PASS | xdp::XDP_DROP => {}
                v => panic!("phase {phase} frame {i}: verdict {v}"),
            }
            let _ = rig.rx.try_iter().count();
            rig.feed.reports(|_| {});
        }
    }
    eprintln!("odd / unresolved: 40,000 frames, {odd_tx} transmitted (byte-identical), the rest passed or dropped");
    // Frames shorter than Ethernet: refused by the kernel's test run or passed, never transmitted.
    for n in 0..14 {
        if let Ok((v, _)) = rig.prog.run(&vec![0u8; n]) {
            assert_ne!(v, XDP_TX);
        }
    }
}

/// Pool changes are atomic for packets: while one thread republishes two
/// data planes A and B (different pools and weights on every VIP) back to
/// back, another runs frames through the program; every output is the
/// frame A forwards it as or the one B does, never a mix (a packet reads
/// one generation; a generation is rewritten only after the runs that read
/// it ended).
#[test]
fn xdp_pool_flips_are_atomic_for_packets() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: BPF_PROG_TEST_RUN needs root");
        return;
    }
    let counters = Arc::new(Counters::default());
    let mut ctl = ControlSide::new(Mode::Concury, Config::parse(&config(0), &[]).unwrap(), counters).unwrap();
    let Engine::Concury(dp) = ctl.engine() else { unreachable!() };
    let mut planes = Vec::new();
    for r in [1, 2] {
        ctl.apply_config(Config::parse(&config(r), &[]).unwrap()).unwrap();
        planes.push((dp.images().1, ctl.services().load_full()));
    }
    let mut prog = Program::load(xdp::Sizes::for_config(100_000, 16, 12)).expect("load the XDP program (root)");
    prog.set_port(&port()).unwrap();
    let runner = prog.runner().unwrap();
    let mac = |a: &IpAddr| Some(mac_of(a));
    // ACK frames (no new-flow reports), to VIPs only.
    let mut rng = Rng(0xa70_3117c);
    let frames: Vec<Vec<u8>> = (0..2000)
        .map(|_| {
            let mut f = plain(&mut rng, 100_000);
            let l4 = if f[12] == 0x08 { 34 } else { 54 };
            let tcp = f[if f[12] == 0x08 { 23 } else { 20 }] == 6;
            if tcp {
                f[l4 + 13] = 0x10;
            }
            f
        })
        .collect();
    let mut want: Vec<[Option<Vec<u8>>; 2]> = vec![[None, None]; frames.len()];
    for (k, (images, svc)) in planes.iter().enumerate() {
        prog.publish(images, svc, &mac).unwrap();
        for (i, f) in frames.iter().enumerate() {
            let (v, out) = prog.run(f).unwrap();
            want[i][k] = (v == XDP_TX).then_some(out);
        }
    }
    let differ = want.iter().filter(|w| w[0] != w[1]).count();
    assert!(differ > frames.len() / 4, "the two planes differ on {differ} frames only");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (runs, flips) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (images, svc) = &planes[(flips % 2) as usize];
                prog.publish(images, svc, &mac).unwrap();
                flips += 1;
            }
            flips
        });
        let t = Instant::now();
        let (mut runs, mut bad) = (0u64, None);
        'outer: while t.elapsed() < std::time::Duration::from_secs(2) {
            for (i, f) in frames.iter().enumerate() {
                let (v, out) = runner.run(f).expect("test run");
                let got = (v == XDP_TX).then_some(out);
                if got != want[i][0] && got != want[i][1] {
                    bad = Some(i);
                    break 'outer;
                }
                runs += 1;
            }
        }
        // Stop the publisher before any assertion (a panic here would leave it running).
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let flips = h.join().unwrap();
        assert_eq!(bad, None, "a frame's output is neither plane's, after {runs} runs and {flips} flips");
        (runs, flips)
    });
    eprintln!("{runs} runs during {flips} flips, every output one plane's");
    assert!(flips > 100, "{flips} flips");
}
