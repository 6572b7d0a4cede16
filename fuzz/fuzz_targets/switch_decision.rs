#![no_main]
//! The switch's data-plane code on arbitrary bytes: header parsing, the L2
//! burst plane (FIB lookups, learning reports, flood / forward / filter) and
//! the L3 decision (ARP / ND replies, TTL rewrite, LPM routes) never panic,
//! and what they emit is consistent: L2 sends the frame unchanged, never
//! back to its ingress port; L3 forwards only valid IPv4 / IPv6 with the
//! TTL / hop limit one lower (IPv4 checksum still valid) and the same length.
//! First byte: ingress port (low 2 bits) and the L2 unknown policy (bit 2);
//! the rest is split into up to 8 frames at 0xA5 0x5A markers.
use keyplane::lpm::Prefix;
use keyplane::{ControlTable, Wire};
use keyplane_any::{AnyControl, Opts};
use keyplane_switch::counters::Tally;
use keyplane_switch::decide::{self, L3Config, NextHop, Unknown, Verdict};
use keyplane_switch::fib::Fib;
use keyplane_switch::packet;
use keyplane_switch::plane::L2Plane;
use keyplane_switch::routes::Routes;
use keyplane_net::parse::L3;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const PORTS: u16 = 4;

fn fib() -> &'static Fib {
    static F: OnceLock<Fib> = OnceLock::new();
    F.get_or_init(|| {
        let items = (0..64u8).map(|i| (vec![2, 0, 0, 0, 0, i], (i % 4) as u64));
        Fib::new(AnyControl::build("othello", items, 2, &Opts::parse("filtered=8").unwrap()).unwrap().export())
    })
}

fn routes() -> &'static Routes {
    static R: OnceLock<Routes> = OnceLock::new();
    R.get_or_init(|| {
        let p: Vec<(Prefix, u64)> = vec![
            ("198.18.0.0/15".parse().unwrap(), 0),
            ("198.18.1.0/24".parse().unwrap(), 1),
            ("fd00::/8".parse().unwrap(), 2),
            ("fd00:0:0:1::/64".parse().unwrap(), 3),
            ("0.0.0.0/0".parse().unwrap(), 5), // no such next hop: dropped as unknown
        ];
        let t = keyplane::lpm::Control::from_prefixes(p, 4).unwrap().export();
        Routes::from_bytes("fuzz", &t.to_bytes()).unwrap()
    })
}

fn l3cfg() -> &'static L3Config {
    static C: OnceLock<L3Config> = OnceLock::new();
    C.get_or_init(|| L3Config {
        port_macs: (0..PORTS as u8).map(|i| [2, 0x6b, 0x70, 0xff, 0, i]).collect(),
        own_v4: vec!["198.18.1.1".parse().unwrap()],
        own_v6: vec!["fd00:0:0:1::1".parse().unwrap()],
        next_hops: (0..PORTS).map(|p| Some(NextHop { port: p, mac: [2, 0, 0, 0, 1, p as u8] })).collect(),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else { return };
    let in_port = (ctl & 3) as u16;
    let unknown = if ctl & 4 == 0 { Unknown::Flood } else { Unknown::Drop };
    let mut frames: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    for i in 0..rest.len().saturating_sub(1) {
        if rest[i] == 0xa5 && rest[i + 1] == 0x5a && frames.len() < 7 {
            frames.push(&rest[start..i]);
            start = i + 2;
        }
    }
    frames.push(&rest[start.min(rest.len())..]);

    // L2.
    let plane = L2Plane { ports: PORTS, unknown, learn: true };
    let mut out: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut tally = vec![Tally::default(); PORTS as usize];
    plane.process(fib(), in_port, &frames, &mut out, &mut tally, |m, p, _| {
        assert!(!packet::is_group(&m) && p == in_port);
    });
    for (p, f) in &out {
        assert!(*p < PORTS && *p != in_port);
        assert!(frames.iter().any(|x| x == &f.as_slice()));
    }
    assert_eq!(tally[in_port as usize].rx, frames.len() as u64);

    // L3.
    let mut reply = Vec::new();
    for f in &frames {
        let mut g = f.to_vec();
        match decide::decide_l3(&mut g, in_port, l3cfg(), routes(), &mut reply) {
            Verdict::Forward(p) => {
                assert!(p < PORTS);
                assert_eq!(g.len(), f.len());
                let (before, after) = (keyplane_net::parse(f).unwrap(), keyplane_net::parse(&g).unwrap());
                match (before.l3, after.l3) {
                    (L3::Ipv4(b), L3::Ipv4(a)) => {
                        assert!(
                            keyplane_net::checksum::ipv4_header_valid(&g, after.l3_offset),
                            "checksum valid after the TTL rewrite"
                        );
                        assert_eq!(a.ttl + 1, b.ttl);
                    }
                    (L3::Ipv6(b), L3::Ipv6(a)) => assert_eq!(a.hop_limit + 1, b.hop_limit),
                    (b, _) => panic!("forwarded {b:?}"),
                }
            }
            Verdict::Reply => assert!(reply.len() >= 42),
            Verdict::Flood => panic!("L3 never floods"),
            Verdict::Drop(_) => {}
        }
    }
});
