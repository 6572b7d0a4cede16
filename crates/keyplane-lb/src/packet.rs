//! The LB's view of a frame: a thin summary over [`keyplane_net::parse`]
//! holding exactly what the LB decides on (addresses, protocol, ports, TCP
//! flags, fragment, TOS, the IP packet's offset and length). Bad frames give
//! [`Frame::Malformed`], never a panic.
//!
//! LB-specific on top of the shared parser:
//! * IPv6 extension headers are not looked through: a packet whose first
//!   next header is not the transport keeps that next header as its
//!   protocol, with ports 0 (so it is not a VIP packet and the kernel gets
//!   it), and a first next header of 44 (fragment) marks a fragment;
//! * a fragment (IPv4 MF or offset ≠ 0, IPv6 fragment header) has ports 0
//!   and no flags even when it is the first one (the LB drops fragments to a
//!   VIP: [`crate::metrics::DropReason::Fragment`]).
//!
//! Frames the shared parser refuses are [`Frame::Malformed`] (dropped and
//! counted as `malformed`): besides truncated headers this includes more
//! than two VLAN tags, a TCP data offset below 5 words or past the IP
//! payload, a UDP length field outside the IP payload, and a truncated
//! IPv6 extension-header chain.

use keyplane_net::parse::{L3, L4, Packet};
use std::net::{IpAddr, Ipv4Addr};

/// TCP flag bits.
pub mod tcp {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// A parsed IPv4/IPv6 packet with transport ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip {
    /// Offset of the IP header in the frame.
    pub l3: usize,
    /// Length of the IP packet (header + payload, without Ethernet padding).
    pub len: usize,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol / next header.
    pub proto: u8,
    /// Source port (0 when not TCP/UDP or a fragment).
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// TCP flags (0 for other protocols).
    pub flags: u8,
    /// True for a fragment (IPv4 MF or offset ≠ 0, IPv6 fragment header): ports unknown.
    pub fragment: bool,
    /// TOS / traffic class.
    pub tos: u8,
}

/// An ARP packet (Ethernet/IPv4 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arp {
    /// 1 = request, 2 = reply.
    pub op: u16,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// IPv4 or IPv6.
    Ip(Ip),
    /// ARP.
    Arp(Arp),
    /// A frame of another EtherType.
    Other,
    /// Truncated or inconsistent (`keyplane_net::parse` refused it).
    Malformed,
}

/// Parses a frame.
#[inline]
pub fn parse(f: &[u8]) -> Frame {
    match keyplane_net::parse(f) {
        Ok(p) => summarise(f, &p),
        Err(_) => Frame::Malformed,
    }
}

#[inline]
fn summarise(f: &[u8], p: &Packet) -> Frame {
    // `ports`: the parsed transport header is the IP packet's own (not a
    // fragment, no IPv6 extension header in between).
    let (src, dst, proto, fragment, tos, ports): (IpAddr, IpAddr, u8, bool, u8, bool) = match p.l3 {
        L3::Arp(a) => return Frame::Arp(Arp { op: a.oper, sha: a.sha.0, spa: a.spa, tpa: a.tpa }),
        L3::Other => return Frame::Other,
        L3::Ipv4(h) => (h.src.into(), h.dst.into(), h.protocol, h.is_fragment(), h.tos, !h.is_fragment()),
        L3::Ipv6(h) => {
            // The first next header (`h.protocol` is the one after the extension headers).
            let first = f.get(p.l3_offset + 6).copied().unwrap_or(h.protocol);
            (h.src.into(), h.dst.into(), first, first == 44, h.traffic_class, first == h.protocol)
        }
    };
    let (sport, dport, flags) = match p.l4 {
        L4::Tcp { src_port, dst_port, flags, .. } if ports => (src_port, dst_port, flags),
        L4::Udp { src_port, dst_port, .. } if ports => (src_port, dst_port, 0),
        _ => (0, 0, 0),
    };
    Frame::Ip(Ip { l3: p.l3_offset, len: p.l3_end - p.l3_offset, src, dst, proto, sport, dport, flags, fragment, tos })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use keyplane_net::parse::{ETH_P_IPV4, ETH_P_IPV6};

    /// A TCP/IPv4 or TCP/IPv6 frame for tests (checksums not filled).
    pub fn tcp_frame(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, flags: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        let mut l4 = vec![0u8; 20 + payload];
        l4[0..2].copy_from_slice(&sport.to_be_bytes());
        l4[2..4].copy_from_slice(&dport.to_be_bytes());
        l4[12] = 5 << 4;
        l4[13] = flags;
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&ETH_P_IPV4.to_be_bytes());
                let mut h = [0u8; 20];
                h[0] = 0x45;
                h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
                h[8] = 64;
                h[9] = 6;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                let c = keyplane_net::checksum::internet_checksum(&h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&h);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&ETH_P_IPV6.to_be_bytes());
                let mut h = [0u8; 40];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
                h[6] = 6;
                h[7] = 64;
                h[8..24].copy_from_slice(&s.octets());
                h[24..40].copy_from_slice(&d.octets());
                f.extend_from_slice(&h);
            }
            _ => panic!("mixed families"),
        }
        f.extend_from_slice(&l4);
        f
    }

    #[test]
    fn parses_tcp_v4_and_v6_with_vlan_and_padding() {
        let s4: IpAddr = "198.18.1.2".parse().unwrap();
        let d4: IpAddr = "198.18.100.1".parse().unwrap();
        let mut f = tcp_frame(s4, d4, 40000, 80, tcp::SYN, 0);
        f.extend_from_slice(&[0; 6]); // Ethernet padding
        let Frame::Ip(ip) = parse(&f) else { panic!() };
        assert_eq!(
            (ip.src, ip.dst, ip.sport, ip.dport, ip.flags, ip.len, ip.l3),
            (s4, d4, 40000, 80, tcp::SYN, 40, 14)
        );
        // VLAN tag
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0, 0, 7]);
        t.extend_from_slice(&f[12..]);
        let Frame::Ip(ip2) = parse(&t) else { panic!() };
        assert_eq!((ip2.l3, ip2.dport), (18, 80));
        let s6: IpAddr = "fd00::5".parse().unwrap();
        let d6: IpAddr = "fd00:100::1".parse().unwrap();
        let f6 = tcp_frame(s6, d6, 1234, 443, tcp::ACK, 10);
        let Frame::Ip(ip6) = parse(&f6) else { panic!() };
        assert_eq!((ip6.src, ip6.dst, ip6.sport, ip6.dport, ip6.len), (s6, d6, 1234, 443, 70));
    }

    #[test]
    fn fragments_and_ipv6_extension_headers_keep_the_lb_view() {
        let (s4, d4): (IpAddr, IpAddr) = ("198.18.1.2".parse().unwrap(), "198.18.100.1".parse().unwrap());
        // IPv4 first fragment (MF, offset 0): a fragment, ports unknown, even with a whole TCP header.
        let mut f = tcp_frame(s4, d4, 40000, 80, tcp::SYN, 0);
        f[20] = 0x20;
        let Frame::Ip(ip) = parse(&f) else { panic!() };
        assert_eq!((ip.fragment, ip.proto, ip.sport, ip.dport, ip.flags), (true, 6, 0, 0, 0));
        let (s6, d6): (IpAddr, IpAddr) = ("fd00::5".parse().unwrap(), "fd00:100::1".parse().unwrap());
        let plain = tcp_frame(s6, d6, 1234, 443, tcp::SYN, 0);
        // Insert an 8-byte extension header of type `nh` (pointing at TCP) after the IPv6 header.
        let with = |nh: u8, hdr: [u8; 8]| {
            let mut f = plain[..54].to_vec();
            f[20] = nh;
            f[18..20].copy_from_slice(&(28u16).to_be_bytes());
            f.extend_from_slice(&hdr);
            f.extend_from_slice(&plain[54..]);
            f
        };
        // Hop-by-hop options: the LB sees protocol 0, no ports (not a VIP packet).
        let Frame::Ip(ip) = parse(&with(0, [6, 0, 1, 4, 0, 0, 0, 0])) else { panic!() };
        assert_eq!((ip.fragment, ip.proto, ip.sport, ip.dport, ip.len), (false, 0, 0, 0, 68));
        // A fragment header (offset 0, M set): a fragment.
        let Frame::Ip(ip) = parse(&with(44, [6, 0, 0, 1, 0, 0, 0, 9])) else { panic!() };
        assert_eq!((ip.fragment, ip.proto, ip.sport, ip.dport), (true, 44, 0, 0));
        // What the shared parser refuses is malformed: a TCP data offset of 4 words, three VLAN tags.
        let mut bad = plain.clone();
        bad[54 + 12] = 4 << 4;
        assert_eq!(parse(&bad), Frame::Malformed);
        let mut tagged = plain[..12].to_vec();
        for _ in 0..3 {
            tagged.extend_from_slice(&[0x81, 0, 0, 7]);
        }
        tagged.extend_from_slice(&plain[12..]);
        assert_eq!(parse(&tagged), Frame::Malformed);
        assert!(matches!(parse(&[tagged[..12].to_vec(), tagged[16..].to_vec()].concat()), Frame::Ip(_)));
    }

    #[test]
    fn every_truncation_is_malformed_not_a_panic() {
        let f = tcp_frame("198.18.1.2".parse().unwrap(), "198.18.100.1".parse().unwrap(), 1, 2, 0, 4);
        for n in 0..f.len() {
            let r = parse(&f[..n]);
            assert!(matches!(r, Frame::Malformed), "len {n}: {r:?}");
        }
        assert!(matches!(parse(&f), Frame::Ip(_)));
    }

    #[test]
    fn checksum_of_a_header_with_its_checksum_is_zero() {
        let f = tcp_frame("198.18.1.2".parse().unwrap(), "198.18.100.1".parse().unwrap(), 1, 2, 0, 0);
        assert_eq!(keyplane_net::checksum::internet_checksum(&f[14..34]), 0);
    }
}
