//! Checksum helpers against a from-scratch RFC 1071 implementation.

use keyplane_net::build::{UdpSpec, udp_ipv4, udp_ipv6};
use keyplane_net::checksum::*;
use keyplane_net::parse::{L3, MacAddr, parse};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

/// RFC 1071 the slow way: 16-bit words, end-around carry after every addition.
fn reference(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for i in (0..data.len()).step_by(2) {
        let w = if i + 1 < data.len() { (data[i] as u32) << 8 | data[i + 1] as u32 } else { (data[i] as u32) << 8 };
        s += w;
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn ipv4_header(ttl: u8, rest: [u8; 16]) -> Vec<u8> {
    let mut h = vec![0x45, rest[0], 0, 20, rest[1], rest[2], 0, 0, ttl, rest[3], 0, 0];
    h.extend_from_slice(&rest[4..12]);
    let c = reference(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn internet_checksum_matches_reference(d in proptest::collection::vec(any::<u8>(), 0..3000)) {
        prop_assert_eq!(internet_checksum(&d), reference(&d));
    }

    #[test]
    fn incremental_update_matches_recompute(mut d in proptest::collection::vec(any::<u8>(), 4..200), at in any::<usize>(), new in any::<u16>()) {
        let n = d.len() / 2 * 2;
        d.truncate(n);
        let c = reference(&d);
        let i = (at % (n / 2)) * 2;
        let old = u16::from_be_bytes([d[i], d[i + 1]]);
        d[i..i + 2].copy_from_slice(&new.to_be_bytes());
        let inc = update16(c, old, new);
        // Same value as recomputing, except the two ones'-complement zeros (0x0000 / 0xffff) of
        // an all-zero sum, which both verify.
        let full = reference(&d);
        prop_assert!(inc == full || (inc ^ full == 0xffff && (inc == 0 || full == 0)), "{:#x} vs {:#x}", inc, full);
    }

    #[test]
    fn ttl_decrement_keeps_the_header_valid(ttl in any::<u8>(), rest in any::<[u8; 16]>(), pad in 0usize..4) {
        let mut f = vec![0u8; pad];
        f.extend(ipv4_header(ttl, rest));
        prop_assert!(ipv4_header_valid(&f, pad));
        let before = f.clone();
        match ipv4_decrement_ttl(&mut f, pad).unwrap() {
            None => {
                prop_assert!(ttl <= 1);
                prop_assert_eq!(&f, &before);
            }
            Some(t) => {
                prop_assert_eq!(t, ttl - 1);
                prop_assert_eq!(f[pad + 8], ttl - 1);
                prop_assert_eq!(reference(&f[pad..]), 0, "header checksum must still verify");
                let c = ipv4_header_checksum(&f, pad).unwrap();
                prop_assert_eq!(c.to_be_bytes(), [f[pad + 10], f[pad + 11]]);
            }
        }
    }

    #[test]
    fn udp_checksums_match_reference(payload in proptest::collection::vec(any::<u8>(), 0..600), src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), s6 in any::<[u8; 16]>(), d6 in any::<[u8; 16]>()) {
        let mut b = vec![0u8; 2048];
        let spec = UdpSpec { src_mac: MacAddr([2; 6]), dst_mac: MacAddr([4; 6]), src: Ipv4Addr::from(src), dst: Ipv4Addr::from(dst), src_port: 9, dst_port: 7, ttl: 9 };
        let n = udp_ipv4(&mut b, &spec, &payload).unwrap();
        let f = &b[..n];
        let seg = &f[34..34 + 8 + payload.len()];
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src);
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(seg);
        prop_assert_eq!(reference(&pseudo), 0);
        prop_assert_eq!(reference(&f[14..34]), 0);
        let p = parse(f).unwrap();
        prop_assert!(l4_checksum_valid(f, &p));
        let mut g = f.to_vec();
        // Corrupt the checksum itself: it no longer verifies, and set_l4_checksum repairs it.
        g[40] ^= 0x5a;
        let gp = parse(&g).unwrap();
        prop_assert!(!l4_checksum_valid(&g, &gp));
        set_l4_checksum(&mut g, &gp).unwrap();
        prop_assert!(l4_checksum_valid(&g, &gp));

        let spec6 = UdpSpec { src_mac: MacAddr([2; 6]), dst_mac: MacAddr([4; 6]), src: Ipv6Addr::from(s6), dst: Ipv6Addr::from(d6), src_port: 9, dst_port: 7, ttl: 9 };
        let n = udp_ipv6(&mut b, &spec6, &payload).unwrap();
        let f = &b[..n];
        let seg = &f[54..54 + 8 + payload.len()];
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&s6);
        pseudo.extend_from_slice(&d6);
        pseudo.extend_from_slice(&(seg.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        pseudo.extend_from_slice(seg);
        prop_assert_eq!(reference(&pseudo), 0);
        let p = parse(f).unwrap();
        prop_assert!(matches!(p.l3, L3::Ipv6(_)));
        prop_assert!(l4_checksum_valid(f, &p));
        let mut g = f.to_vec();
        let L3::Ipv6(ip) = p.l3 else { unreachable!() };
        prop_assert_eq!(ipv6_decrement_hop_limit(&mut g, 14).unwrap(), Some(8));
        prop_assert_eq!(g[21], 8);
        // Address rewrite patched incrementally (what a NAT / LB does) still verifies.
        let new_dst: Ipv6Addr = "fd00::1:2:3".parse().unwrap();
        let old_c = u16::from_be_bytes([g[60], g[61]]);
        g[38..54].copy_from_slice(&new_dst.octets());
        let c = update128(old_c, ip.dst, new_dst);
        g[60..62].copy_from_slice(&c.to_be_bytes());
        prop_assert!(l4_checksum_valid(&g, &parse(&g).unwrap()));
    }

    #[test]
    fn ipv4_address_rewrite_patched_incrementally(payload in proptest::collection::vec(any::<u8>(), 0..100), new_dst in any::<[u8; 4]>()) {
        let mut b = vec![0u8; 256];
        let spec = UdpSpec { src_mac: MacAddr([2; 6]), dst_mac: MacAddr([4; 6]), src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 18, 0, 2), src_port: 9, dst_port: 7, ttl: 9 };
        let n = udp_ipv4(&mut b, &spec, &payload).unwrap();
        let f = &mut b[..n];
        let old = u32::from_be_bytes([f[30], f[31], f[32], f[33]]);
        let new = u32::from_be_bytes(new_dst);
        f[30..34].copy_from_slice(&new_dst);
        let ic = update32(u16::from_be_bytes([f[24], f[25]]), old, new);
        f[24..26].copy_from_slice(&ic.to_be_bytes());
        let uc = update32(u16::from_be_bytes([f[40], f[41]]), old, new);
        f[40..42].copy_from_slice(&uc.to_be_bytes());
        prop_assert!(ipv4_header_valid(f, 14));
        let p = parse(f).unwrap();
        prop_assert!(l4_checksum_valid(f, &p));
    }
}

#[test]
fn ttl_edge_cases() {
    for ttl in [0u8, 1, 2, 255] {
        let mut f = ipv4_header(ttl, [7; 16]);
        let r = ipv4_decrement_ttl(&mut f, 0).unwrap();
        assert_eq!(r, if ttl <= 1 { None } else { Some(ttl - 1) });
        assert!(ipv4_header_valid(&f, 0));
    }
    assert!(ipv4_decrement_ttl(&mut [0x45u8; 10], 0).is_err());
    assert!(ipv4_decrement_ttl(&mut [0x65u8; 40], 0).is_err());
    assert!(ipv6_decrement_hop_limit(&mut [0x60u8; 39], 0).is_err());
    let mut h6 = [0u8; 40];
    h6[0] = 0x60;
    h6[7] = 1;
    assert_eq!(ipv6_decrement_hop_limit(&mut h6, 0).unwrap(), None);
}
