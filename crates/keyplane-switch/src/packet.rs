//! Zero-copy views of the header fields the forwarding decision reads
//! (Ethernet, 802.1Q / 802.1ad tags, ARP, IPv4, IPv6, ICMPv6 neighbour
//! solicitation), in-place rewrites (TTL / hop limit with the IPv4 checksum
//! updated incrementally, RFC 1624) and the two replies the switch builds
//! (ARP reply, neighbour advertisement).
//!
//! Every read is bounds-checked: a short or inconsistent frame gives
//! [`Malformed`], never a panic.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Ethertypes the switch knows.
pub const ETH_IPV4: u16 = 0x0800;
/// ARP.
pub const ETH_ARP: u16 = 0x0806;
/// IPv6.
pub const ETH_IPV6: u16 = 0x86dd;
const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88a8;
/// At most this many VLAN tags are skipped.
const MAX_TAGS: usize = 2;

/// Why a frame was refused by the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than the headers it announces.
    Truncated,
    /// A header field is impossible (IPv4 IHL < 5, wrong IP version, bad
    /// IPv4 checksum, too many VLAN tags).
    BadHeader,
}

/// A MAC address.
pub type Mac = [u8; 6];

/// The broadcast address.
pub const BROADCAST: Mac = [0xff; 6];

/// True for group (multicast and broadcast) addresses.
#[inline]
pub fn is_group(m: &Mac) -> bool {
    m[0] & 1 == 1
}

/// The Ethernet header of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eth {
    /// Destination MAC.
    pub dst: Mac,
    /// Source MAC.
    pub src: Mac,
    /// Ethertype after the VLAN tags.
    pub ethertype: u16,
    /// Offset of the network header.
    pub l3: usize,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn arr<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Parses the Ethernet header and up to two VLAN tags.
pub fn parse_eth(f: &[u8]) -> Result<Eth, Malformed> {
    let t = Malformed::Truncated;
    let dst = arr::<6>(f, 0).ok_or(t)?;
    let src = arr::<6>(f, 6).ok_or(t)?;
    let mut et = be16(f, 12).ok_or(t)?;
    let mut l3 = 14;
    let mut tags = 0;
    while et == ETH_VLAN || et == ETH_QINQ {
        if tags == MAX_TAGS {
            return Err(Malformed::BadHeader);
        }
        et = be16(f, l3 + 2).ok_or(t)?;
        l3 += 4;
        tags += 1;
    }
    Ok(Eth { dst, src, ethertype: et, l3 })
}

/// An ARP packet (Ethernet / IPv4 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arp {
    /// 1 = request, 2 = reply.
    pub op: u16,
    /// Sender hardware address.
    pub sha: Mac,
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

/// Parses ARP at `at`.
pub fn parse_arp(f: &[u8], at: usize) -> Result<Arp, Malformed> {
    let t = Malformed::Truncated;
    let (htype, ptype) = (be16(f, at).ok_or(t)?, be16(f, at + 2).ok_or(t)?);
    let (hlen, plen) = (*f.get(at + 4).ok_or(t)?, *f.get(at + 5).ok_or(t)?);
    if htype != 1 || ptype != ETH_IPV4 || hlen != 6 || plen != 4 {
        return Err(Malformed::BadHeader);
    }
    Ok(Arp {
        op: be16(f, at + 6).ok_or(t)?,
        sha: arr(f, at + 8).ok_or(t)?,
        spa: Ipv4Addr::from(arr::<4>(f, at + 14).ok_or(t)?),
        tpa: Ipv4Addr::from(arr::<4>(f, at + 24).ok_or(t)?),
    })
}

/// An IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4 {
    /// Time to live.
    pub ttl: u8,
    /// Protocol.
    pub proto: u8,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
}

/// Parses IPv4 at `at` and verifies its header checksum.
pub fn parse_ipv4(f: &[u8], at: usize) -> Result<Ipv4, Malformed> {
    let t = Malformed::Truncated;
    let vihl = *f.get(at).ok_or(t)?;
    let ihl = (vihl & 0xf) as usize * 4;
    if vihl >> 4 != 4 || ihl < 20 {
        return Err(Malformed::BadHeader);
    }
    let hdr = f.get(at..at + ihl).ok_or(t)?;
    let total = be16(f, at + 2).ok_or(t)? as usize;
    if total < ihl || f.len() < at + total {
        return Err(t);
    }
    if fold(sum16(hdr, 0)) != 0xffff {
        return Err(Malformed::BadHeader);
    }
    Ok(Ipv4 {
        ttl: hdr[8],
        proto: hdr[9],
        src: Ipv4Addr::from(arr::<4>(hdr, 12).ok_or(t)?),
        dst: Ipv4Addr::from(arr::<4>(hdr, 16).ok_or(t)?),
    })
}

/// An IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6 {
    /// Hop limit.
    pub hop_limit: u8,
    /// Next header.
    pub next: u8,
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Payload length.
    pub payload_len: u16,
}

/// Parses IPv6 at `at`.
pub fn parse_ipv6(f: &[u8], at: usize) -> Result<Ipv6, Malformed> {
    let t = Malformed::Truncated;
    if *f.get(at).ok_or(t)? >> 4 != 6 {
        return Err(Malformed::BadHeader);
    }
    let payload_len = be16(f, at + 4).ok_or(t)?;
    if f.len() < at + 40 + payload_len as usize {
        return Err(t);
    }
    Ok(Ipv6 {
        payload_len,
        next: f[at + 6],
        hop_limit: f[at + 7],
        src: Ipv6Addr::from(arr::<16>(f, at + 8).ok_or(t)?),
        dst: Ipv6Addr::from(arr::<16>(f, at + 24).ok_or(t)?),
    })
}

/// The target of an ICMPv6 neighbour solicitation (type 135) carried
/// directly after the IPv6 header at `at`, if that is what the packet is.
pub fn neighbor_solicitation(f: &[u8], at: usize, ip: &Ipv6) -> Option<Ipv6Addr> {
    if ip.next != 58 || ip.hop_limit != 255 || ip.payload_len < 24 {
        return None;
    }
    let icmp = at + 40;
    if *f.get(icmp)? != 135 || *f.get(icmp + 1)? != 0 {
        return None;
    }
    Some(Ipv6Addr::from(arr::<16>(f, icmp + 8)?))
}

/// One's-complement sum of 16-bit words starting from `init`.
pub fn sum16(b: &[u8], init: u32) -> u32 {
    let mut s = init as u64;
    let mut ch = b.chunks_exact(2);
    for w in &mut ch {
        s += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [x] = ch.remainder() {
        s += (*x as u64) << 8;
    }
    while s > 0xffff_ffff {
        s = (s & 0xffff_ffff) + (s >> 32);
    }
    s as u32
}

/// Folds a 32-bit one's-complement sum to 16 bits.
pub fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Decrements the IPv4 TTL at `at` and patches the header checksum
/// incrementally (RFC 1624 eq. 3: HC' = ~(~HC + ~m + m')).
pub fn decrement_ttl_v4(f: &mut [u8], at: usize) {
    let Some(h) = f.get_mut(at..at + 20) else { return };
    let old = u16::from_be_bytes([h[8], h[9]]);
    h[8] = h[8].wrapping_sub(1);
    let new = u16::from_be_bytes([h[8], h[9]]);
    let hc = u16::from_be_bytes([h[10], h[11]]);
    let s = (!hc as u32) + (!old as u32) + new as u32;
    h[10..12].copy_from_slice(&(!fold(s)).to_be_bytes());
}

/// Decrements the IPv6 hop limit at `at` (IPv6 has no header checksum).
pub fn decrement_hop_limit_v6(f: &mut [u8], at: usize) {
    if let Some(h) = f.get_mut(at + 7) {
        *h = h.wrapping_sub(1);
    }
}

/// Builds an ARP reply saying `ip` is at `mac`, to the requester `req`.
pub fn arp_reply(out: &mut Vec<u8>, mac: Mac, ip: Ipv4Addr, req: &Arp) {
    out.clear();
    out.extend_from_slice(&req.sha);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ETH_ARP.to_be_bytes());
    out.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ip.octets());
    out.extend_from_slice(&req.sha);
    out.extend_from_slice(&req.spa.octets());
    out.resize(60, 0);
}

/// Builds a solicited neighbour advertisement (RFC 4861 §4.4, router and
/// override flags set) for `target` at `mac`, answering a solicitation from
/// `to_mac` / `to_ip` (the unspecified address gets all-nodes multicast).
pub fn neighbor_advertisement(out: &mut Vec<u8>, mac: Mac, target: Ipv6Addr, to_mac: Mac, to_ip: Ipv6Addr) {
    let (dst_ip, solicited) =
        if to_ip.is_unspecified() { (Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1), false) } else { (to_ip, true) };
    let dst_mac = if to_ip.is_unspecified() { [0x33, 0x33, 0, 0, 0, 1] } else { to_mac };
    out.clear();
    out.extend_from_slice(&dst_mac);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ETH_IPV6.to_be_bytes());
    // IPv6 header: payload 32 bytes (ICMPv6 24 + option 8), next header 58, hop limit 255.
    out.extend_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
    out.extend_from_slice(&target.octets());
    out.extend_from_slice(&dst_ip.octets());
    let icmp = out.len();
    let flags = 0x80 | if solicited { 0x40 } else { 0 } | 0x20;
    out.extend_from_slice(&[136, 0, 0, 0, flags, 0, 0, 0]);
    out.extend_from_slice(&target.octets());
    out.extend_from_slice(&[2, 1]);
    out.extend_from_slice(&mac);
    // Checksum over the pseudo-header (src, dst, length, next header) and the message.
    let mut s = sum16(&target.octets(), 0);
    s = sum16(&dst_ip.octets(), s);
    s = sum16(&[0, 0, 0, 32, 0, 0, 0, 58], s);
    s = sum16(&out[icmp..], s);
    let c = !fold(s);
    out[icmp + 2..icmp + 4].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn ipv4_frame(ttl: u8, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0];
        let mut h = vec![0x45, 0, 0, 28, 0, 1, 0, 0, ttl, 17, 0, 0];
        h.extend_from_slice(&src);
        h.extend_from_slice(&dst);
        let c = !fold(sum16(&h, 0));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
        f.extend_from_slice(&[0; 8]);
        f
    }

    #[test]
    fn ttl_decrement_keeps_the_checksum_valid() {
        for ttl in [1u8, 2, 64, 255] {
            let mut f = ipv4_frame(ttl, [198, 18, 1, 2], [198, 18, 2, 2]);
            decrement_ttl_v4(&mut f, 14);
            let ip = parse_ipv4(&f, 14).expect("checksum still valid");
            assert_eq!(ip.ttl, ttl - 1);
            // Full recomputation agrees with the incremental update.
            let mut h = f[14..34].to_vec();
            let inc = [h[10], h[11]];
            h[10..12].fill(0);
            assert_eq!((!fold(sum16(&h, 0))).to_be_bytes(), inc);
        }
    }

    #[test]
    fn corrupt_checksum_and_truncations_are_refused() {
        let f = ipv4_frame(64, [1, 2, 3, 4], [5, 6, 7, 8]);
        let mut g = f.clone();
        g[20] ^= 1;
        assert_eq!(parse_ipv4(&g, 14), Err(Malformed::BadHeader));
        for n in 0..f.len() - 8 {
            assert!(parse_eth(&f[..n]).is_err() || parse_ipv4(&f[..n], 14).is_err(), "{n}");
        }
    }

    #[test]
    fn vlan_tags_are_skipped() {
        let mut f = vec![0xff; 12];
        f.extend_from_slice(&[0x81, 0, 0, 5, 0x08, 0x06]);
        let e = parse_eth(&f).unwrap();
        assert_eq!((e.ethertype, e.l3), (ETH_ARP, 18));
        let mut g = vec![0xff; 12];
        for _ in 0..3 {
            g.extend_from_slice(&[0x81, 0, 0, 5]);
        }
        g.extend_from_slice(&[8, 0]);
        assert_eq!(parse_eth(&g), Err(Malformed::BadHeader));
    }

    #[test]
    fn neighbor_advertisement_checksum_verifies() {
        let mut out = Vec::new();
        let t: Ipv6Addr = "fd00:1::1".parse().unwrap();
        let to: Ipv6Addr = "fd00:1::2".parse().unwrap();
        neighbor_advertisement(&mut out, [2, 0, 0, 0, 0, 9], t, [2, 0, 0, 0, 0, 1], to);
        let ip = parse_ipv6(&out, 14).unwrap();
        assert_eq!((ip.src, ip.dst, ip.next, ip.hop_limit), (t, to, 58, 255));
        let mut s = sum16(&ip.src.octets(), 0);
        s = sum16(&ip.dst.octets(), s);
        s = sum16(&[0, 0, 0, 32, 0, 0, 0, 58], s);
        s = sum16(&out[54..], s);
        assert_eq!(fold(s), 0xffff);
    }

    #[test]
    fn arp_reply_round_trips() {
        let req = Arp { op: 1, sha: [2, 0, 0, 0, 0, 1], spa: [198, 18, 1, 2].into(), tpa: [198, 18, 1, 1].into() };
        let mut out = Vec::new();
        arp_reply(&mut out, [2, 0, 0, 0, 0, 9], req.tpa, &req);
        let e = parse_eth(&out).unwrap();
        let a = parse_arp(&out, e.l3).unwrap();
        assert_eq!((a.op, a.sha, a.spa, a.tpa), (2, [2, 0, 0, 0, 0, 9], req.tpa, req.spa));
        assert_eq!(e.dst, req.sha);
    }
}
