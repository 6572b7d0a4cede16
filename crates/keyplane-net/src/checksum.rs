//! Internet checksums (RFC 1071) and their incremental update (RFC 1624), plus the in-place
//! rewrites a router does: IPv4 TTL decrement with the header checksum patched incrementally, IPv6
//! hop-limit decrement, and TCP / UDP / ICMPv6 checksums over the IPv4 / IPv6 pseudo-headers.
//!
//! ```
//! use keyplane_net::checksum::{internet_checksum, update16};
//! let mut hdr = [0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2];
//! let c = internet_checksum(&hdr);
//! hdr[10..12].copy_from_slice(&c.to_be_bytes());
//! // TTL 64 -> 63: the 16-bit word holding TTL and protocol changes.
//! let c2 = update16(c, u16::from_be_bytes([64, 17]), u16::from_be_bytes([63, 17]));
//! hdr[8] = 63;
//! hdr[10..12].copy_from_slice(&[0, 0]);
//! assert_eq!(c2, internet_checksum(&hdr));
//! ```

use crate::parse::{IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, L3, L4, Layer, Packet, ParseError};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Ones'-complement sum of `data` as big-endian 16-bit words (odd length: zero-padded), added
/// to `acc`; not folded. Combine partial sums with `+` and finish with [`fold`].
pub fn sum(data: &[u8], acc: u64) -> u64 {
    let mut s = acc;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        s += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let rest = chunks.remainder();
    let mut i = 0;
    while i + 1 < rest.len() {
        s += u16::from_be_bytes([rest[i], rest[i + 1]]) as u64;
        i += 2;
    }
    if i < rest.len() {
        s += (rest[i] as u64) << 8;
    }
    s
}

/// Fold a ones'-complement sum to 16 bits and complement it: the checksum field value.
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// The Internet checksum of `data` (RFC 1071). Over data that includes a correct checksum field
/// it returns 0.
pub fn internet_checksum(data: &[u8]) -> u16 {
    fold(sum(data, 0))
}

/// Incremental update (RFC 1624, eq. 3): the new checksum after one 16-bit word of the covered
/// data changes from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
pub fn update16(check: u16, old: u16, new: u16) -> u16 {
    let s = (!check) as u64 + (!old) as u64 + new as u64;
    fold(s)
}

/// Incremental update for a 32-bit field (e.g. an IPv4 address) changing from `old` to `new`.
pub fn update32(check: u16, old: u32, new: u32) -> u16 {
    let c = update16(check, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

/// Incremental update for a 128-bit field (an IPv6 address) changing from `old` to `new`.
pub fn update128(check: u16, old: Ipv6Addr, new: Ipv6Addr) -> u16 {
    let (o, n) = (old.octets(), new.octets());
    let mut s = (!check) as u64;
    for i in (0..16).step_by(2) {
        s += (!u16::from_be_bytes([o[i], o[i + 1]])) as u64 + u16::from_be_bytes([n[i], n[i + 1]]) as u64;
    }
    fold(s)
}

fn ipv4_header(frame: &[u8], l3: usize) -> Result<usize, ParseError> {
    let t = |need| ParseError::Truncated { layer: Layer::Ipv4, offset: l3, need, have: frame.len() };
    let first = *frame.get(l3).ok_or(t(20))?;
    let hl = (first & 0xf) as usize * 4;
    if first >> 4 != 4 || hl < 20 {
        return Err(ParseError::Malformed { layer: Layer::Ipv4, reason: "not an IPv4 header" });
    }
    if l3 + hl > frame.len() {
        return Err(t(hl));
    }
    Ok(hl)
}

/// The header checksum the IPv4 header at `frame[l3..]` should carry (its checksum field is
/// skipped).
pub fn ipv4_header_checksum(frame: &[u8], l3: usize) -> Result<u16, ParseError> {
    let hl = ipv4_header(frame, l3)?;
    let h = &frame[l3..l3 + hl];
    Ok(fold(sum(&h[12..], sum(&h[..10], 0))))
}

/// `true` when the IPv4 header at `frame[l3..]` has a correct checksum.
pub fn ipv4_header_valid(frame: &[u8], l3: usize) -> bool {
    ipv4_header(frame, l3).is_ok_and(|hl| internet_checksum(&frame[l3..l3 + hl]) == 0)
}

/// Recompute and store the IPv4 header checksum at `frame[l3..]`.
pub fn ipv4_set_checksum(frame: &mut [u8], l3: usize) -> Result<(), ParseError> {
    let c = ipv4_header_checksum(frame, l3)?;
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Decrement the TTL of the IPv4 header at `frame[l3..]` and patch its checksum incrementally
/// (RFC 1624). Returns `Some(new_ttl)`, or `None` — frame untouched — when the TTL is 0 or 1 and
/// the packet must be dropped (and an ICMP time-exceeded may be sent).
pub fn ipv4_decrement_ttl(frame: &mut [u8], l3: usize) -> Result<Option<u8>, ParseError> {
    ipv4_header(frame, l3)?;
    let ttl = frame[l3 + 8];
    if ttl <= 1 {
        return Ok(None);
    }
    let proto = frame[l3 + 9];
    let old = u16::from_be_bytes([ttl, proto]);
    let new = u16::from_be_bytes([ttl - 1, proto]);
    let c = update16(u16::from_be_bytes([frame[l3 + 10], frame[l3 + 11]]), old, new);
    frame[l3 + 8] = ttl - 1;
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    Ok(Some(ttl - 1))
}

/// Decrement the hop limit of the IPv6 header at `frame[l3..]` (IPv6 has no header checksum).
/// Returns `Some(new_hop_limit)`, or `None` — frame untouched — when it is 0 or 1.
pub fn ipv6_decrement_hop_limit(frame: &mut [u8], l3: usize) -> Result<Option<u8>, ParseError> {
    if l3 + 40 > frame.len() {
        return Err(ParseError::Truncated { layer: Layer::Ipv6, offset: l3, need: 40, have: frame.len() });
    }
    if frame[l3] >> 4 != 6 {
        return Err(ParseError::Malformed { layer: Layer::Ipv6, reason: "not an IPv6 header" });
    }
    let h = frame[l3 + 7];
    if h <= 1 {
        return Ok(None);
    }
    frame[l3 + 7] = h - 1;
    Ok(Some(h - 1))
}

/// Ones'-complement sum of the IPv4 pseudo-header (RFC 793 / 768).
pub fn pseudo_sum_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u32) -> u64 {
    sum(&src.octets(), 0) + sum(&dst.octets(), 0) + proto as u64 + len as u64
}

/// Ones'-complement sum of the IPv6 pseudo-header (RFC 8200 §8.1).
pub fn pseudo_sum_v6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, len: u32) -> u64 {
    sum(&src.octets(), 0) + sum(&dst.octets(), 0) + proto as u64 + len as u64
}

/// TCP / UDP / ICMPv6 checksum of `segment` (header + data, with its checksum field zero) over
/// IPv4. A UDP result of 0 must be sent as 0xffff (see [`set_l4_checksum`]).
pub fn l4_checksum_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, segment: &[u8]) -> u16 {
    fold(sum(segment, pseudo_sum_v4(src, dst, proto, segment.len() as u32)))
}

/// TCP / UDP / ICMPv6 checksum of `segment` (checksum field zero) over IPv6.
pub fn l4_checksum_v6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, segment: &[u8]) -> u16 {
    fold(sum(segment, pseudo_sum_v6(src, dst, proto, segment.len() as u32)))
}

/// Offset of the checksum field inside the L4 header, and the L4 protocol number.
fn l4_field(p: &Packet) -> Result<(usize, u8), ParseError> {
    let proto = match (p.l3, p.l4) {
        (L3::Ipv4(_), L4::Tcp { .. }) | (L3::Ipv6(_), L4::Tcp { .. }) => IPPROTO_TCP,
        (L3::Ipv4(_), L4::Udp { .. }) | (L3::Ipv6(_), L4::Udp { .. }) => IPPROTO_UDP,
        (L3::Ipv6(_), L4::Icmp { .. }) => IPPROTO_ICMPV6,
        (L3::Ipv4(_), L4::Icmp { .. }) => crate::parse::IPPROTO_ICMP,
        _ => return Err(ParseError::Malformed { layer: Layer::Tcp, reason: "no TCP, UDP or ICMP header" }),
    };
    let field = match proto {
        IPPROTO_TCP => 16,
        IPPROTO_UDP => 6,
        _ => 2,
    };
    Ok((field, proto))
}

fn l4_compute(frame: &[u8], p: &Packet, proto: u8) -> u16 {
    let seg = &frame[p.l4_offset..p.l3_end];
    match p.l3 {
        L3::Ipv4(ip) if proto == crate::parse::IPPROTO_ICMP => {
            let _ = ip;
            internet_checksum(seg)
        }
        L3::Ipv4(ip) => l4_checksum_v4(ip.src, ip.dst, proto, seg),
        L3::Ipv6(ip) => l4_checksum_v6(ip.src, ip.dst, proto, seg),
        _ => 0,
    }
}

/// Recompute and store the TCP / UDP / ICMP / ICMPv6 checksum of `frame`, parsed as `p` (which
/// must describe this frame, e.g. from [`crate::parse()`] after the last length change).
pub fn set_l4_checksum(frame: &mut [u8], p: &Packet) -> Result<(), ParseError> {
    let (field, proto) = l4_field(p)?;
    if p.l3_end > frame.len() || p.l4_offset + field + 2 > p.l3_end {
        return Err(ParseError::Truncated {
            layer: Layer::Tcp,
            offset: p.l4_offset,
            need: field + 2,
            have: frame.len(),
        });
    }
    let at = p.l4_offset + field;
    frame[at..at + 2].copy_from_slice(&[0, 0]);
    let mut c = l4_compute(frame, p, proto);
    if proto == IPPROTO_UDP && c == 0 {
        c = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// `true` when the L4 checksum of `frame` (parsed as `p`) verifies. A UDP-over-IPv4 checksum of 0
/// ("none") counts as valid.
pub fn l4_checksum_valid(frame: &[u8], p: &Packet) -> bool {
    let Ok((field, proto)) = l4_field(p) else { return false };
    if p.l3_end > frame.len() || p.l4_offset + field + 2 > p.l3_end {
        return false;
    }
    let at = p.l4_offset + field;
    if proto == IPPROTO_UDP && matches!(p.l3, L3::Ipv4(_)) && frame[at] == 0 && frame[at + 1] == 0 {
        return true;
    }
    let seg = &frame[p.l4_offset..p.l3_end];
    let s = match p.l3 {
        L3::Ipv4(_) if proto == crate::parse::IPPROTO_ICMP => sum(seg, 0),
        L3::Ipv4(ip) => sum(seg, pseudo_sum_v4(ip.src, ip.dst, proto, seg.len() as u32)),
        L3::Ipv6(ip) => sum(seg, pseudo_sum_v6(ip.src, ip.dst, proto, seg.len() as u32)),
        _ => return false,
    };
    fold(s) == 0
}
