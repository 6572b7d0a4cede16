//! Output frames: L2 direct server return (destination-MAC rewrite) and
//! IP-in-IP encapsulation (IPv4 or IPv6 outer header by the backend's
//! family, protocol 4 for an IPv4 inner packet and 41 for IPv6, as Katran
//! does). The backends' decapsulation program is `bpf/decap.c`.

use crate::packet::Ip;
use keyplane_net::FwdFrame;
use keyplane_net::checksum::internet_checksum;
use keyplane_net::parse::{ETH_P_IPV4 as ETH_IPV4, ETH_P_IPV6 as ETH_IPV6};
use std::net::IpAddr;

/// Bytes an encapsulation adds for an outer header of this family.
pub fn overhead(backend: IpAddr) -> usize {
    if backend.is_ipv4() { 20 } else { 40 }
}

/// DSR: the frame with its destination MAC set to the backend's and its
/// source MAC to the LB port's. The IP packet is untouched (the backend
/// holds the VIP on `lo`). Returns the frame length written into `out`, or
/// `None` if `out` is too small.
#[inline]
pub fn dsr(frame: &[u8], dst_mac: [u8; 6], src_mac: [u8; 6], out: &mut [u8]) -> Option<usize> {
    let o = out.get_mut(..frame.len())?;
    o.copy_from_slice(frame);
    o[0..6].copy_from_slice(&dst_mac);
    o[6..12].copy_from_slice(&src_mac);
    Some(frame.len())
}

/// DSR in place: sets the frame's destination MAC to the backend's and its
/// source MAC to the LB port's. `None` (frame unchanged) for a frame shorter
/// than an Ethernet header or longer than `max` (the bound [`dsr`]'s output
/// buffer sets).
#[inline]
pub fn dsr_in_place(frame: &mut [u8], dst_mac: [u8; 6], src_mac: [u8; 6], max: usize) -> Option<usize> {
    if frame.len() > max || frame.len() < 12 {
        return None;
    }
    frame[0..6].copy_from_slice(&dst_mac);
    frame[6..12].copy_from_slice(&src_mac);
    Some(frame.len())
}

/// The outer IPv4 / IPv6 header of an IP-in-IP packet, written into `h`
/// (exactly [`overhead`]`(dst)` bytes) for an inner packet of `inner_len`
/// bytes whose version nibble is `inner_version`. Returns the outer
/// EtherType, or `None` if the families of `src` and `dst` differ or the
/// packet would exceed 65535 bytes.
#[inline]
fn outer_header(
    h: &mut [u8],
    tos: u8,
    src: IpAddr,
    dst: IpAddr,
    flow: u32,
    inner_len: usize,
    inner_version: u8,
) -> Option<u16> {
    let nh = if inner_version == 4 { 4u8 } else { 41u8 };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let len = u16::try_from(20 + inner_len).ok()?;
            let h = h.get_mut(..20)?;
            h[0] = 0x45;
            h[1] = tos;
            h[2..4].copy_from_slice(&len.to_be_bytes());
            h[4..6].copy_from_slice(&(flow as u16).to_be_bytes());
            h[6..8].copy_from_slice(&[0, 0]);
            h[8] = 64;
            h[9] = nh;
            h[10..12].copy_from_slice(&[0, 0]);
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let c = internet_checksum(h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            Some(ETH_IPV4)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let len = u16::try_from(inner_len).ok()?;
            let h = h.get_mut(..40)?;
            let fl = flow & 0xf_ffff;
            let w = (6u32 << 28) | ((tos as u32) << 20) | fl;
            h[0..4].copy_from_slice(&w.to_be_bytes());
            h[4..6].copy_from_slice(&len.to_be_bytes());
            h[6] = nh;
            h[7] = 64;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            Some(ETH_IPV6)
        }
        _ => None,
    }
}

/// IP-in-IP: Ethernet (`(backend MAC, port MAC)`, VLAN tags kept) + an outer
/// IPv4/IPv6 header from `src` to `dst` + the inner IP packet (without
/// Ethernet padding). `flow` seeds the outer IPv6 flow label / IPv4 ID so
/// receivers can spread flows. Returns the frame length, or `None` if the
/// families of `src` and `dst` differ, the packet would exceed 65535 bytes,
/// or `out` is too small.
#[inline]
pub fn ipip(
    frame: &[u8],
    ip: &Ip,
    (dst_mac, src_mac): ([u8; 6], [u8; 6]),
    src: IpAddr,
    dst: IpAddr,
    flow: u32,
    out: &mut [u8],
) -> Option<usize> {
    let inner = frame.get(ip.l3..ip.l3 + ip.len)?;
    let l3 = ip.l3;
    let oh = overhead(dst);
    let total = l3 + oh + inner.len();
    let o = out.get_mut(..total)?;
    let et = outer_header(&mut o[l3..l3 + oh], ip.tos, src, dst, flow, inner.len(), *inner.first()? >> 4)?;
    o[0..6].copy_from_slice(&dst_mac);
    o[6..12].copy_from_slice(&src_mac);
    o[12..l3 - 2].copy_from_slice(frame.get(12..l3 - 2)?);
    o[l3 - 2..l3].copy_from_slice(&et.to_be_bytes());
    o[l3 + oh..].copy_from_slice(inner);
    Some(total)
}

/// [`ipip`] in place: the frame is cut to its IP packet (Ethernet padding
/// dropped), grown at the front by the outer header (into the room in front
/// of it, see [`FwdFrame::grow_front`]), and its Ethernet header (VLAN tags
/// kept) moved to the new front. The bytes are those [`ipip`] writes into an
/// `out` of `max` bytes. `None` when [`ipip`] would return `None` (the frame
/// may then be left half rewritten: drop it).
#[inline]
pub fn ipip_in_place(
    fr: &mut FwdFrame<'_>,
    ip: &Ip,
    (dst_mac, src_mac): ([u8; 6], [u8; 6]),
    src: IpAddr,
    dst: IpAddr,
    flow: u32,
    max: usize,
) -> Option<usize> {
    let l3 = ip.l3;
    let inner_version = *fr.frame().get(l3..l3 + ip.len)?.first()? >> 4;
    let oh = overhead(dst);
    let total = l3 + oh + ip.len;
    if total > max || l3 < 14 || !fr.set_len(l3 + ip.len) || !fr.grow_front(oh) {
        return None;
    }
    let o = fr.frame_mut();
    o.copy_within(oh..oh + l3, 0);
    let et = outer_header(&mut o[l3..l3 + oh], ip.tos, src, dst, flow, ip.len, inner_version)?;
    o[0..6].copy_from_slice(&dst_mac);
    o[6..12].copy_from_slice(&src_mac);
    o[l3 - 2..l3].copy_from_slice(&et.to_be_bytes());
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::tests::tcp_frame;
    use crate::packet::{Frame, parse, tcp};

    const BMAC: [u8; 6] = [2, 0xb, 0, 0, 0, 9];
    const LMAC: [u8; 6] = [2, 0x1b, 0, 0, 0, 1];

    #[test]
    fn dsr_rewrites_only_the_macs() {
        let f = tcp_frame("198.18.1.2".parse().unwrap(), "198.18.100.1".parse().unwrap(), 5, 80, tcp::SYN, 3);
        let mut out = [0u8; 2048];
        let n = dsr(&f, BMAC, LMAC, &mut out).unwrap();
        assert_eq!(&out[..6], &BMAC);
        assert_eq!(&out[6..12], &LMAC);
        assert_eq!(&out[12..n], &f[12..]);
        assert!(dsr(&f, BMAC, LMAC, &mut [0u8; 10]).is_none());
    }

    /// Every family combination: the outer header parses, names the LB and
    /// the backend and the right inner protocol, and the inner packet is
    /// byte-identical (Ethernet padding dropped).
    #[test]
    fn ipip_all_four_family_combinations() {
        let cases: [(&str, &str, &str, &str); 4] = [
            ("198.18.1.2", "198.18.100.1", "198.18.0.2", "198.18.0.11"),
            ("fd00:1::2", "fd00:100::1", "fd00::2", "fd00::11"),
            ("198.18.1.2", "198.18.100.1", "fd00::2", "fd00::11"),
            ("fd00:1::2", "fd00:100::1", "198.18.0.2", "198.18.0.11"),
        ];
        for (c, v, l, b) in cases {
            let mut f = tcp_frame(c.parse().unwrap(), v.parse().unwrap(), 999, 80, tcp::ACK, 17);
            let inner_len = f.len() - 14;
            f.extend_from_slice(&[0xee; 5]); // padding must not be carried
            let Frame::Ip(ip) = parse(&f) else { panic!() };
            let (ls, bd): (IpAddr, IpAddr) = (l.parse().unwrap(), b.parse().unwrap());
            let mut out = [0u8; 2048];
            let n = ipip(&f, &ip, (BMAC, LMAC), ls, bd, 0x12345, &mut out).unwrap();
            assert_eq!(n, 14 + overhead(bd) + inner_len);
            let Frame::Ip(outer) = parse(&out[..n]) else { panic!("{c} {b}") };
            assert_eq!((outer.src, outer.dst), (ls, bd));
            assert_eq!(outer.proto, if ip.src.is_ipv4() { 4 } else { 41 });
            assert_eq!(&out[14 + overhead(bd)..n], &f[14..14 + inner_len]);
            if bd.is_ipv4() {
                assert_eq!(internet_checksum(&out[14..34]), 0, "outer IPv4 checksum");
            }
        }
        let f = tcp_frame("198.18.1.2".parse().unwrap(), "198.18.100.1".parse().unwrap(), 1, 80, 0, 0);
        let Frame::Ip(ip) = parse(&f) else { panic!() };
        let mixed =
            ipip(&f, &ip, (BMAC, LMAC), "198.18.0.2".parse().unwrap(), "fd00::1".parse().unwrap(), 0, &mut [0; 256]);
        assert!(mixed.is_none());
    }
}
