//! Builders for the frames a switch or load balancer originates: ARP requests and replies, IPv6
//! Neighbor Solicitations and Advertisements (RFC 4861), and UDP test frames. Each writes into a
//! caller buffer (e.g. a [`crate::Burst`] slot via [`crate::Burst::push_with`]) and returns the
//! frame length; nothing allocates.
//!
//! ```
//! use keyplane_net::{build, parse, Burst, MacAddr};
//! let mut b = Burst::new();
//! let me = MacAddr([2, 0, 0, 0, 0, 1]);
//! assert!(b.push_with(|buf| build::arp_request(buf, me, [198, 18, 0, 1].into(), [198, 18, 0, 2].into()).unwrap_or(0)));
//! let p = parse(b.frame(0)).unwrap();
//! assert!(p.dst.is_broadcast());
//! ```

use crate::checksum::{internet_checksum, l4_checksum_v4, l4_checksum_v6};
use crate::parse::{ETH_P_ARP, ETH_P_IPV4, ETH_P_IPV6, IPPROTO_ICMPV6, IPPROTO_UDP, MacAddr};
use crate::{Error, Result};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Shortest Ethernet frame without FCS; shorter frames are zero-padded to it.
pub const MIN_FRAME: usize = 60;

fn room(out: &[u8], need: usize) -> Result<()> {
    if out.len() < need { Err(Error::BufferTooSmall { need, have: out.len() }) } else { Ok(()) }
}

/// Write an Ethernet header; returns 14.
pub fn ethernet(out: &mut [u8], dst: MacAddr, src: MacAddr, ethertype: u16) -> Result<usize> {
    room(out, 14)?;
    out[0..6].copy_from_slice(&dst.0);
    out[6..12].copy_from_slice(&src.0);
    out[12..14].copy_from_slice(&ethertype.to_be_bytes());
    Ok(14)
}

#[allow(clippy::too_many_arguments)]
fn arp(
    out: &mut [u8],
    dst: MacAddr,
    oper: u16,
    sha: MacAddr,
    spa: Ipv4Addr,
    tha: MacAddr,
    tpa: Ipv4Addr,
) -> Result<usize> {
    room(out, MIN_FRAME)?;
    ethernet(out, dst, sha, ETH_P_ARP)?;
    let a = &mut out[14..MIN_FRAME];
    a.fill(0);
    a[0..2].copy_from_slice(&1u16.to_be_bytes());
    a[2..4].copy_from_slice(&ETH_P_IPV4.to_be_bytes());
    a[4] = 6;
    a[5] = 4;
    a[6..8].copy_from_slice(&oper.to_be_bytes());
    a[8..14].copy_from_slice(&sha.0);
    a[14..18].copy_from_slice(&spa.octets());
    a[18..24].copy_from_slice(&tha.0);
    a[24..28].copy_from_slice(&tpa.octets());
    Ok(MIN_FRAME)
}

/// A broadcast ARP request "who has `tpa`? tell `spa` (at `sha`)". 60 bytes.
pub fn arp_request(out: &mut [u8], sha: MacAddr, spa: Ipv4Addr, tpa: Ipv4Addr) -> Result<usize> {
    arp(out, MacAddr::BROADCAST, 1, sha, spa, MacAddr([0; 6]), tpa)
}

/// A unicast ARP reply "`spa` is at `sha`" to `tha` / `tpa` (the requester). 60 bytes.
pub fn arp_reply(out: &mut [u8], sha: MacAddr, spa: Ipv4Addr, tha: MacAddr, tpa: Ipv4Addr) -> Result<usize> {
    arp(out, tha, 2, sha, spa, tha, tpa)
}

/// The solicited-node multicast address of `ip` (ff02::1:ffXX:XXXX).
pub fn solicited_node(ip: Ipv6Addr) -> Ipv6Addr {
    let o = ip.octets();
    Ipv6Addr::from([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]])
}

fn ipv6_header(out: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, next: u8, payload: usize, hop: u8) {
    out[0..4].copy_from_slice(&0x6000_0000u32.to_be_bytes());
    out[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    out[6] = next;
    out[7] = hop;
    out[8..24].copy_from_slice(&src.octets());
    out[24..40].copy_from_slice(&dst.octets());
}

/// An ICMPv6 Neighbor Solicitation from `src_mac` / `src_ip` for `target`, sent to the target's
/// solicited-node multicast group, with a source link-layer address option. 86 bytes.
pub fn neighbor_solicitation(out: &mut [u8], src_mac: MacAddr, src_ip: Ipv6Addr, target: Ipv6Addr) -> Result<usize> {
    let dst = solicited_node(target);
    nd(out, 135, 0, src_mac, src_ip, MacAddr::ipv6_multicast(dst), dst, target, 1)
}

/// Flags of a Neighbor Advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NaFlags {
    /// R: the sender is a router.
    pub router: bool,
    /// S: sent in answer to a solicitation.
    pub solicited: bool,
    /// O: override an existing cache entry.
    pub override_: bool,
}

/// An ICMPv6 Neighbor Advertisement "`target` is at `src_mac`" from `target` to `dst_mac` /
/// `dst_ip`, with a target link-layer address option. 86 bytes.
pub fn neighbor_advertisement(
    out: &mut [u8],
    src_mac: MacAddr,
    target: Ipv6Addr,
    dst_mac: MacAddr,
    dst_ip: Ipv6Addr,
    flags: NaFlags,
) -> Result<usize> {
    let f = (flags.router as u8) << 7 | (flags.solicited as u8) << 6 | (flags.override_ as u8) << 5;
    nd(out, 136, f, src_mac, target, dst_mac, dst_ip, target, 2)
}

#[allow(clippy::too_many_arguments)]
fn nd(
    out: &mut [u8],
    ty: u8,
    flags: u8,
    src_mac: MacAddr,
    src_ip: Ipv6Addr,
    dst_mac: MacAddr,
    dst_ip: Ipv6Addr,
    target: Ipv6Addr,
    opt: u8,
) -> Result<usize> {
    const LEN: usize = 14 + 40 + 32;
    room(out, LEN)?;
    ethernet(out, dst_mac, src_mac, ETH_P_IPV6)?;
    ipv6_header(&mut out[14..54], src_ip, dst_ip, IPPROTO_ICMPV6, 32, 255);
    let m = &mut out[54..LEN];
    m.fill(0);
    m[0] = ty;
    m[4] = flags;
    m[8..24].copy_from_slice(&target.octets());
    m[24] = opt;
    m[25] = 1;
    m[26..32].copy_from_slice(&src_mac.0);
    let c = l4_checksum_v6(src_ip, dst_ip, IPPROTO_ICMPV6, m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    Ok(LEN)
}

/// Addresses of a UDP test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSpec<A> {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Source IP.
    pub src: A,
    /// Destination IP.
    pub dst: A,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// TTL / hop limit.
    pub ttl: u8,
}

/// A UDP-over-IPv4 frame carrying `payload`, checksums filled, padded to 60 bytes.
pub fn udp_ipv4(out: &mut [u8], s: &UdpSpec<Ipv4Addr>, payload: &[u8]) -> Result<usize> {
    let ip_len = 20 + 8 + payload.len();
    if ip_len > u16::MAX as usize {
        return Err(Error::InvalidParameter(format!("UDP payload of {} bytes does not fit IPv4", payload.len())));
    }
    let len = (14 + ip_len).max(MIN_FRAME);
    room(out, len)?;
    out[..len].fill(0);
    ethernet(out, s.dst_mac, s.src_mac, ETH_P_IPV4)?;
    let h = &mut out[14..34];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = s.ttl;
    h[9] = IPPROTO_UDP;
    h[12..16].copy_from_slice(&s.src.octets());
    h[16..20].copy_from_slice(&s.dst.octets());
    let c = internet_checksum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    let u = &mut out[34..34 + 8 + payload.len()];
    u[0..2].copy_from_slice(&s.src_port.to_be_bytes());
    u[2..4].copy_from_slice(&s.dst_port.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u[8..].copy_from_slice(payload);
    let mut c = l4_checksum_v4(s.src, s.dst, IPPROTO_UDP, u);
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
    Ok(len)
}

/// A UDP-over-IPv6 frame carrying `payload`, checksum filled, padded to 60 bytes.
pub fn udp_ipv6(out: &mut [u8], s: &UdpSpec<Ipv6Addr>, payload: &[u8]) -> Result<usize> {
    let plen = 8 + payload.len();
    if plen > u16::MAX as usize {
        return Err(Error::InvalidParameter(format!("UDP payload of {} bytes does not fit IPv6", payload.len())));
    }
    let len = (54 + plen).max(MIN_FRAME);
    room(out, len)?;
    out[..len].fill(0);
    ethernet(out, s.dst_mac, s.src_mac, ETH_P_IPV6)?;
    ipv6_header(&mut out[14..54], s.src, s.dst, IPPROTO_UDP, plen, s.ttl);
    let u = &mut out[54..54 + plen];
    u[0..2].copy_from_slice(&s.src_port.to_be_bytes());
    u[2..4].copy_from_slice(&s.dst_port.to_be_bytes());
    u[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
    u[8..].copy_from_slice(payload);
    let mut c = l4_checksum_v6(s.src, s.dst, IPPROTO_UDP, u);
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
    Ok(len)
}

#[doc(hidden)]
/// A fixed UDP/IPv4 frame for documentation examples.
pub fn udp_ipv4_frame_for_docs() -> Vec<u8> {
    let mut b = vec![0u8; 128];
    let s = UdpSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src: Ipv4Addr::new(198, 18, 0, 1),
        dst: Ipv4Addr::new(198, 18, 0, 2),
        src_port: 1234,
        dst_port: 4789,
        ttl: 64,
    };
    let n = udp_ipv4(&mut b, &s, b"hello").unwrap_or(0);
    b.truncate(n);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::l4_checksum_valid;
    use crate::parse::{L3, L4, nd_target, parse};

    #[test]
    fn arp_frames_parse_back() {
        let mut b = [0u8; 64];
        let me = MacAddr([2, 0, 0, 0, 0, 1]);
        let peer = MacAddr([2, 0, 0, 0, 0, 2]);
        let n = arp_reply(&mut b, me, [198, 18, 0, 1].into(), peer, [198, 18, 0, 2].into()).unwrap();
        assert_eq!(n, 60);
        let p = parse(&b[..n]).unwrap();
        assert_eq!(p.dst, peer);
        let L3::Arp(a) = p.l3 else { panic!("not ARP") };
        assert_eq!((a.oper, a.sha, a.tha), (2, me, peer));
        assert_eq!((a.spa, a.tpa), ([198, 18, 0, 1].into(), [198, 18, 0, 2].into()));
        assert!(matches!(arp_request(&mut b[..59], me, a.spa, a.tpa), Err(Error::BufferTooSmall { need: 60, .. })));
    }

    #[test]
    fn nd_frames_parse_back_with_valid_checksums() {
        let mut b = [0u8; 128];
        let me = MacAddr([2, 0, 0, 0, 0, 1]);
        let ip: Ipv6Addr = "fd00::1".parse().unwrap();
        let t: Ipv6Addr = "fd00::abcd:1234".parse().unwrap();
        let n = neighbor_solicitation(&mut b, me, ip, t).unwrap();
        let p = parse(&b[..n]).unwrap();
        assert_eq!(p.dst, MacAddr([0x33, 0x33, 0xff, 0xcd, 0x12, 0x34]));
        let L3::Ipv6(h) = p.l3 else { panic!() };
        assert_eq!(h.dst, "ff02::1:ffcd:1234".parse::<Ipv6Addr>().unwrap());
        assert_eq!(h.hop_limit, 255);
        assert_eq!(p.l4, L4::Icmp { ty: 135, code: 0 });
        assert_eq!(nd_target(&b[..n], &p), Some(t));
        assert!(l4_checksum_valid(&b[..n], &p));
        let flags = NaFlags { solicited: true, override_: true, ..Default::default() };
        let n = neighbor_advertisement(&mut b, me, t, MacAddr([2, 0, 0, 0, 0, 9]), ip, flags).unwrap();
        let p = parse(&b[..n]).unwrap();
        assert_eq!(p.l4, L4::Icmp { ty: 136, code: 0 });
        assert_eq!(b[p.l4_offset + 4], 0x60);
        assert_eq!(&b[p.l4_offset + 24..p.l4_offset + 26], &[2, 1]);
        assert_eq!(nd_target(&b[..n], &p), Some(t));
        assert!(l4_checksum_valid(&b[..n], &p));
    }
}
