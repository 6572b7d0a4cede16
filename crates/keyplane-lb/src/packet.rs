//! Zero-copy frame parsing for the LB's packet path: Ethernet (with up to two
//! 802.1Q/802.1ad tags), ARP, IPv4 (options skipped, fragments detected),
//! IPv6 (no extension-header walk: a first next-header other than TCP/UDP/
//! ICMPv6 is "other"), TCP and UDP ports, TCP flags. Every offset is
//! checked against the frame; bad frames give [`Frame::Malformed`], never a
//! panic.
//!
//! (A local piece: the shared packet crate `keyplane-net` was being written
//! in parallel; this parser covers exactly what the LB decides on.)

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// EtherType IPv4.
pub const ETH_IPV4: u16 = 0x0800;
/// EtherType IPv6.
pub const ETH_IPV6: u16 = 0x86dd;
/// EtherType ARP.
pub const ETH_ARP: u16 = 0x0806;
const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88a8;

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
    /// Source port (0 when not TCP/UDP or a non-first fragment).
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// TCP flags (0 for other protocols).
    pub flags: u8,
    /// True for a fragment (IPv4 MF or offset ≠ 0): ports unknown.
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
    /// Truncated or inconsistent.
    Malformed,
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Offset of the L3 header and the EtherType after VLAN tags.
#[inline]
pub fn l3_offset(f: &[u8]) -> Option<(usize, u16)> {
    let mut off = 12;
    let mut et = be16(f, off)?;
    let mut tags = 0;
    while (et == ETH_VLAN || et == ETH_QINQ) && tags < 2 {
        off += 4;
        et = be16(f, off)?;
        tags += 1;
    }
    Some((off + 2, et))
}

/// Parses a frame.
#[inline]
pub fn parse(f: &[u8]) -> Frame {
    let Some((l3, et)) = l3_offset(f) else { return Frame::Malformed };
    match et {
        ETH_IPV4 => parse_v4(f, l3).map_or(Frame::Malformed, Frame::Ip),
        ETH_IPV6 => parse_v6(f, l3).map_or(Frame::Malformed, Frame::Ip),
        ETH_ARP => parse_arp(f, l3).map_or(Frame::Malformed, Frame::Arp),
        _ => Frame::Other,
    }
}

fn ports(f: &[u8], l4: usize, end: usize, proto: u8) -> Option<(u16, u16, u8)> {
    match proto {
        6 => {
            if l4 + 20 > end {
                return None;
            }
            Some((be16(f, l4)?, be16(f, l4 + 2)?, *f.get(l4 + 13)?))
        }
        17 => {
            if l4 + 8 > end {
                return None;
            }
            Some((be16(f, l4)?, be16(f, l4 + 2)?, 0))
        }
        _ => Some((0, 0, 0)),
    }
}

fn parse_v4(f: &[u8], l3: usize) -> Option<Ip> {
    let h = f.get(l3..l3 + 20)?;
    if h[0] >> 4 != 4 {
        return None;
    }
    let ihl = (h[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([h[2], h[3]]) as usize;
    if ihl < 20 || total < ihl || l3 + total > f.len() {
        return None;
    }
    let frag = u16::from_be_bytes([h[6], h[7]]);
    let fragment = frag & 0x3fff != 0;
    let proto = h[9];
    let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]).into();
    let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]).into();
    let (sport, dport, flags) = if fragment { (0, 0, 0) } else { ports(f, l3 + ihl, l3 + total, proto)? };
    Some(Ip { l3, len: total, src, dst, proto, sport, dport, flags, fragment, tos: h[1] })
}

fn parse_v6(f: &[u8], l3: usize) -> Option<Ip> {
    let h = f.get(l3..l3 + 40)?;
    if h[0] >> 4 != 6 {
        return None;
    }
    let total = 40 + u16::from_be_bytes([h[4], h[5]]) as usize;
    if l3 + total > f.len() {
        return None;
    }
    let proto = h[6];
    let mut s = [0u8; 16];
    s.copy_from_slice(&h[8..24]);
    let mut d = [0u8; 16];
    d.copy_from_slice(&h[24..40]);
    let fragment = proto == 44;
    let (sport, dport, flags) = if fragment { (0, 0, 0) } else { ports(f, l3 + 40, l3 + total, proto)? };
    let tos = (h[0] << 4) | (h[1] >> 4);
    Some(Ip {
        l3,
        len: total,
        src: Ipv6Addr::from(s).into(),
        dst: Ipv6Addr::from(d).into(),
        proto,
        sport,
        dport,
        flags,
        fragment,
        tos,
    })
}

fn parse_arp(f: &[u8], l3: usize) -> Option<Arp> {
    let a = f.get(l3..l3 + 28)?;
    // Ethernet / IPv4 only.
    if a[0..2] != [0, 1] || a[2..4] != [8, 0] || a[4] != 6 || a[5] != 4 {
        return None;
    }
    let mut sha = [0u8; 6];
    sha.copy_from_slice(&a[8..14]);
    Some(Arp {
        op: u16::from_be_bytes([a[6], a[7]]),
        sha,
        spa: Ipv4Addr::new(a[14], a[15], a[16], a[17]),
        tpa: Ipv4Addr::new(a[24], a[25], a[26], a[27]),
    })
}

/// The Internet checksum (RFC 1071) of `data`, folded, starting from `sum`.
pub fn checksum(data: &[u8], mut sum: u32) -> u16 {
    let mut c = data.chunks_exact(2);
    for w in &mut c {
        sum = sum.wrapping_add(u16::from_be_bytes([w[0], w[1]]) as u32);
    }
    if let [b] = c.remainder() {
        sum = sum.wrapping_add((*b as u32) << 8);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sum of the IPv6 pseudo-header (for ICMPv6 / TCP / UDP checksums).
pub fn pseudo_v6(src: &Ipv6Addr, dst: &Ipv6Addr, len: u32, nh: u8) -> u32 {
    let mut s = 0u32;
    for a in [src.octets(), dst.octets()] {
        for w in a.chunks_exact(2) {
            s = s.wrapping_add(u16::from_be_bytes([w[0], w[1]]) as u32);
        }
    }
    s.wrapping_add(len >> 16).wrapping_add(len & 0xffff).wrapping_add(nh as u32)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
                f.extend_from_slice(&ETH_IPV4.to_be_bytes());
                let mut h = [0u8; 20];
                h[0] = 0x45;
                h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
                h[8] = 64;
                h[9] = 6;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                let c = checksum(&h, 0);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&h);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&ETH_IPV6.to_be_bytes());
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
        assert_eq!(checksum(&f[14..34], 0), 0);
    }
}
