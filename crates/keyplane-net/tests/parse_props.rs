//! Parser properties: frames built by an independent reference builder parse to the fields they
//! were built from; random, truncated and mutated frames never panic and truncation inside a
//! header is always an error.

use keyplane_net::parse::{self, L3, L4, MacAddr, ParseError, parse};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone)]
enum RefL4 {
    Tcp { sp: u16, dp: u16, flags: u8, opt_words: u8 },
    Udp { sp: u16, dp: u16 },
    Icmp { ty: u8, code: u8 },
    Raw(u8),
}

#[derive(Debug, Clone)]
enum RefL3 {
    Arp { oper: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4] },
    V4 { src: [u8; 4], dst: [u8; 4], ttl: u8, tos: u8, id: u16, opt_words: u8, l4: RefL4 },
    V6 { src: [u8; 16], dst: [u8; 16], hop: u8, tc: u8, flow: u32, ext: Vec<(u8, u8)>, l4: RefL4 },
    Other(u16),
}

#[derive(Debug, Clone)]
struct Spec {
    dst: [u8; 6],
    src: [u8; 6],
    vlans: Vec<(bool, u16)>,
    l3: RefL3,
    payload: Vec<u8>,
    padding: usize,
}

fn push16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_be_bytes());
}

/// Byte layout written from the RFCs, independently of the parser's code.
fn build(s: &Spec) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&s.dst);
    f.extend_from_slice(&s.src);
    for &(outer, tci) in &s.vlans {
        push16(&mut f, if outer { 0x88a8 } else { 0x8100 });
        push16(&mut f, tci);
    }
    let l4 = |l4: &RefL4, payload: &[u8]| -> (u8, Vec<u8>) {
        let mut v = Vec::new();
        let proto = match *l4 {
            RefL4::Tcp { sp, dp, flags, opt_words } => {
                push16(&mut v, sp);
                push16(&mut v, dp);
                v.extend_from_slice(&[0; 8]);
                v.push((5 + opt_words) << 4);
                v.push(flags);
                v.extend_from_slice(&[0; 6]);
                v.extend(std::iter::repeat_n(1u8, opt_words as usize * 4));
                6
            }
            RefL4::Udp { sp, dp } => {
                push16(&mut v, sp);
                push16(&mut v, dp);
                push16(&mut v, (8 + payload.len()) as u16);
                push16(&mut v, 0);
                17
            }
            RefL4::Icmp { ty, code } => {
                v.extend_from_slice(&[ty, code, 0, 0]);
                255 // patched by the caller (1 or 58)
            }
            RefL4::Raw(p) => p,
        };
        v.extend_from_slice(payload);
        (proto, v)
    };
    match &s.l3 {
        RefL3::Arp { oper, sha, spa, tha, tpa } => {
            push16(&mut f, 0x0806);
            f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
            push16(&mut f, *oper);
            f.extend_from_slice(sha);
            f.extend_from_slice(spa);
            f.extend_from_slice(tha);
            f.extend_from_slice(tpa);
        }
        RefL3::V4 { src, dst, ttl, tos, id, opt_words, l4: l } => {
            push16(&mut f, 0x0800);
            let (mut proto, body) = l4(l, &s.payload);
            if proto == 255 {
                proto = 1;
            }
            let hl = 20 + *opt_words as usize * 4;
            f.push(0x40 | (hl / 4) as u8);
            f.push(*tos);
            push16(&mut f, (hl + body.len()) as u16);
            push16(&mut f, *id);
            push16(&mut f, 0x4000);
            f.push(*ttl);
            f.push(proto);
            push16(&mut f, 0);
            f.extend_from_slice(src);
            f.extend_from_slice(dst);
            f.extend(std::iter::repeat_n(1u8, *opt_words as usize * 4)); // NOP options
            f.extend_from_slice(&body);
        }
        RefL3::V6 { src, dst, hop, tc, flow, ext, l4: l } => {
            push16(&mut f, 0x86dd);
            let (mut proto, body) = l4(l, &s.payload);
            if proto == 255 {
                proto = 58;
            }
            let mut exts = Vec::new();
            // Chain: each extension header names the next one.
            let kinds: Vec<u8> = ext.iter().map(|e| e.0).collect();
            for (i, &(kind, units)) in ext.iter().enumerate() {
                let next = kinds.get(i + 1).copied().unwrap_or(proto);
                if kind == 44 {
                    exts.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 1]);
                } else {
                    exts.push(next);
                    exts.push(units);
                    exts.extend(std::iter::repeat_n(0u8, 6 + units as usize * 8));
                }
            }
            let first = kinds.first().copied().unwrap_or(proto);
            let w = 0x6000_0000u32 | (*tc as u32) << 20 | (flow & 0xfffff);
            f.extend_from_slice(&w.to_be_bytes());
            push16(&mut f, (exts.len() + body.len()) as u16);
            f.push(first);
            f.push(*hop);
            f.extend_from_slice(src);
            f.extend_from_slice(dst);
            f.extend_from_slice(&exts);
            f.extend_from_slice(&body);
        }
        RefL3::Other(t) => {
            push16(&mut f, *t);
            f.extend_from_slice(&s.payload);
        }
    }
    f.extend(std::iter::repeat_n(0u8, s.padding));
    f
}

fn l4_strategy() -> impl Strategy<Value = RefL4> {
    prop_oneof![
        (any::<u16>(), any::<u16>(), any::<u8>(), 0u8..=10).prop_map(|(sp, dp, flags, opt_words)| RefL4::Tcp {
            sp,
            dp,
            flags,
            opt_words
        }),
        (any::<u16>(), any::<u16>()).prop_map(|(sp, dp)| RefL4::Udp { sp, dp }),
        (any::<u8>(), any::<u8>()).prop_map(|(ty, code)| RefL4::Icmp { ty, code }),
        prop_oneof![Just(47u8), Just(50u8), Just(132u8)].prop_map(RefL4::Raw),
    ]
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    let l3 = prop_oneof![
        (any::<u16>(), any::<[u8; 6]>(), any::<[u8; 4]>(), any::<[u8; 6]>(), any::<[u8; 4]>())
            .prop_map(|(oper, sha, spa, tha, tpa)| RefL3::Arp { oper, sha, spa, tha, tpa }),
        (any::<[u8; 4]>(), any::<[u8; 4]>(), any::<u8>(), any::<u8>(), any::<u16>(), 0u8..=10, l4_strategy())
            .prop_map(|(src, dst, ttl, tos, id, opt_words, l4)| RefL3::V4 { src, dst, ttl, tos, id, opt_words, l4 }),
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            any::<u8>(),
            0u32..(1 << 20),
            proptest::collection::vec((prop_oneof![Just(0u8), Just(43u8), Just(44u8), Just(60u8)], 0u8..3), 0..4),
            l4_strategy()
        )
            .prop_map(|(src, dst, hop, tc, flow, ext, l4)| RefL3::V6 { src, dst, hop, tc, flow, ext, l4 }),
        (0x0600u16..0xffff)
            .prop_filter("not a parsed EtherType", |t| ![0x0800, 0x0806, 0x86dd, 0x8100, 0x88a8].contains(t))
            .prop_map(RefL3::Other),
    ];
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        proptest::collection::vec((any::<bool>(), any::<u16>()), 0..=2),
        l3,
        proptest::collection::vec(any::<u8>(), 0..200),
        0usize..20,
    )
        .prop_map(|(dst, src, vlans, l3, payload, padding)| Spec { dst, src, vlans, l3, payload, padding })
}

fn check_l4(r: &RefL4, got: L4, payload_len: usize) {
    match (r, got) {
        (RefL4::Tcp { sp, dp, flags, opt_words }, L4::Tcp { src_port, dst_port, flags: f, header_len }) => {
            assert_eq!((*sp, *dp, *flags, 20 + *opt_words * 4), (src_port, dst_port, f, header_len));
        }
        (RefL4::Udp { sp, dp }, L4::Udp { src_port, dst_port, len }) => {
            assert_eq!((*sp, *dp, 8 + payload_len as u16), (src_port, dst_port, len));
        }
        (RefL4::Icmp { ty, code }, L4::Icmp { ty: t, code: c }) => assert_eq!((*ty, *code), (t, c)),
        (RefL4::Raw(p), L4::Other(q)) => assert_eq!(*p, q),
        (r, g) => panic!("built {r:?}, parsed {g:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn built_frames_parse_to_their_fields(s in spec_strategy()) {
        let f = build(&s);
        let p = parse(&f).unwrap();
        prop_assert_eq!(p.dst, MacAddr(s.dst));
        prop_assert_eq!(p.src, MacAddr(s.src));
        let tags: Vec<(u16, u16)> = p.vlan.iter().chain(p.inner_vlan.iter()).map(|v| (v.tpid, v.tci)).collect();
        let want: Vec<(u16, u16)> = s.vlans.iter().map(|&(o, t)| (if o { 0x88a8 } else { 0x8100 }, t)).collect();
        prop_assert_eq!(tags, want);
        prop_assert_eq!(p.l3_offset, 14 + 4 * s.vlans.len());
        match (&s.l3, p.l3) {
            (RefL3::Arp { oper, sha, spa, tha, tpa }, L3::Arp(a)) => {
                prop_assert_eq!((a.oper, a.sha, a.spa, a.tha, a.tpa),
                    (*oper, MacAddr(*sha), Ipv4Addr::from(*spa), MacAddr(*tha), Ipv4Addr::from(*tpa)));
            }
            (RefL3::V4 { src, dst, ttl, tos, id, opt_words, l4 }, L3::Ipv4(ip)) => {
                prop_assert_eq!((ip.src, ip.dst, ip.ttl, ip.tos, ip.id, ip.header_len),
                    (Ipv4Addr::from(*src), Ipv4Addr::from(*dst), *ttl, *tos, *id, 20 + opt_words * 4));
                prop_assert_eq!(p.l3_end, f.len() - s.padding);
                check_l4(l4, p.l4, s.payload.len());
                prop_assert_eq!(p.l4_offset, p.l3_offset + ip.header_len as usize);
            }
            (RefL3::V6 { src, dst, hop, tc, flow, ext, l4 }, L3::Ipv6(ip)) => {
                prop_assert_eq!((ip.src, ip.dst, ip.hop_limit, ip.traffic_class, ip.flow_label),
                    (Ipv6Addr::from(*src), Ipv6Addr::from(*dst), *hop, *tc, *flow));
                prop_assert_eq!(ip.fragment, ext.iter().any(|e| e.0 == 44));
                prop_assert_eq!(p.l3_end, f.len() - s.padding);
                check_l4(l4, p.l4, s.payload.len());
            }
            (RefL3::Other(t), L3::Other) => prop_assert_eq!(p.ethertype, *t),
            (r, g) => prop_assert!(false, "built {:?}, parsed {:?}", r, g),
        }
    }

    #[test]
    fn truncated_frames_are_errors_never_panics(s in spec_strategy(), cut in 0usize..2000) {
        let f = build(&s);
        let p = parse(&f).unwrap();
        let cut = cut % (f.len() + 1);
        let r = parse(&f[..cut]);
        // Cutting into the headers or the IP packet is an error; cutting the padding is not.
        let header_end = match p.l3 {
            L3::Arp(_) => p.l3_offset + 28,
            L3::Ipv4(_) | L3::Ipv6(_) => p.l3_end,
            L3::Other => p.l3_offset,
        };
        if cut < header_end {
            prop_assert!(matches!(r, Err(ParseError::Truncated { .. }) | Err(ParseError::Malformed { .. })), "{:?}", r);
        } else {
            prop_assert!(r.is_ok());
        }
    }

    #[test]
    fn mutated_frames_never_panic(s in spec_strategy(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut f = build(&s);
        for (i, x) in flips {
            let n = f.len();
            f[i % n] ^= x;
        }
        if let Ok(p) = parse(&f) {
            // Whatever parsed must lie inside the frame.
            prop_assert!(p.l3_offset <= f.len() && p.l4_offset <= f.len() && p.l3_end <= f.len());
            let _ = parse::nd_target(&f, &p);
            let _ = keyplane_net::checksum::l4_checksum_valid(&f, &p);
        }
    }

    #[test]
    fn random_bytes_never_panic(f in proptest::collection::vec(any::<u8>(), 0..1600)) {
        if let Ok(p) = parse(&f) {
            prop_assert!(p.l3_end <= f.len());
        }
    }
}
