//! Zero-copy frame parsing: Ethernet, 802.1Q / 802.1ad tags, ARP, IPv4, IPv6 (with extension
//! headers), TCP, UDP, ICMP / ICMPv6.
//!
//! [`parse`] walks the headers of a frame once and returns a small `Copy` summary, [`Packet`],
//! holding the fields a switch or load balancer decides on plus the **offsets** of each layer.
//! Because it holds offsets and not borrows, the caller can then rewrite the same buffer in place
//! (TTL, addresses, checksums: see [`crate::checksum`]). Malformed or truncated frames give a
//! [`ParseError`], never a panic; every read is bounds-checked against the frame.
//!
//! ```
//! use keyplane_net::parse::{parse, L3, L4};
//! # let frame = keyplane_net::build::udp_ipv4_frame_for_docs();
//! let p = parse(&frame).unwrap();
//! if let (L3::Ipv4(ip), L4::Udp { dst_port, .. }) = (p.l3, p.l4) {
//!     assert_eq!(ip.ttl, 64);
//!     assert_eq!(dst_port, 4789);
//! }
//! ```

use std::net::{Ipv4Addr, Ipv6Addr};

/// EtherType of IPv4.
pub const ETH_P_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETH_P_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// EtherType (TPID) of an 802.1Q VLAN tag.
pub const ETH_P_8021Q: u16 = 0x8100;
/// EtherType (TPID) of an 802.1ad service tag (QinQ outer tag).
pub const ETH_P_8021AD: u16 = 0x88a8;
/// IP protocol number of ICMP.
pub const IPPROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol number of ICMPv6.
pub const IPPROTO_ICMPV6: u8 = 58;
/// Length of an Ethernet header without tags.
pub const ETH_HLEN: usize = 14;
/// Most extension headers walked in an IPv6 packet before it is called malformed.
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// The broadcast address.
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }
    /// Group bit set: multicast or broadcast (frames a switch floods).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
    /// The address as a `u64` (big-endian, top 16 bits zero): the `mac` key format.
    pub fn to_u64(&self) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.0);
        u64::from_be_bytes(b)
    }
    /// From the low 48 bits of `v`.
    pub fn from_u64(v: u64) -> Self {
        let b = v.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    /// The IPv6 multicast MAC 33:33:xx:xx:xx:xx of `ip`.
    pub fn ipv6_multicast(ip: Ipv6Addr) -> Self {
        let o = ip.octets();
        MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl std::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl std::str::FromStr for MacAddr {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        let bad = || crate::Error::InvalidParameter(format!("bad MAC address {s:?}: expected aa:bb:cc:dd:ee:ff"));
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for o in out.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.is_empty() || p.len() > 2 {
                return Err(bad());
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

/// The protocol layer a [`ParseError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Ethernet header and VLAN tags.
    Ethernet,
    /// ARP.
    Arp,
    /// IPv4 header.
    Ipv4,
    /// IPv6 header and extension headers.
    Ipv6,
    /// TCP header.
    Tcp,
    /// UDP header.
    Udp,
    /// ICMP / ICMPv6 header.
    Icmp,
}

/// Why a frame could not be parsed. Cheap (`Copy`), so data planes count and drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ParseError {
    /// The frame ends inside a header.
    #[error("truncated {layer:?} header: {need} bytes needed at offset {offset}, frame has {have}")]
    Truncated {
        /// Layer being read.
        layer: Layer,
        /// Offset of the header.
        offset: usize,
        /// Bytes the header needs.
        need: usize,
        /// Frame length.
        have: usize,
    },
    /// A header field is impossible.
    #[error("malformed {layer:?} header: {reason}")]
    Malformed {
        /// Layer being read.
        layer: Layer,
        /// What was wrong.
        reason: &'static str,
    },
}

impl ParseError {
    /// The layer the error is about.
    pub fn layer(&self) -> Layer {
        match *self {
            ParseError::Truncated { layer, .. } | ParseError::Malformed { layer, .. } => layer,
        }
    }
}

/// Bounds-checked big-endian reads.
#[inline]
fn need(b: &[u8], layer: Layer, offset: usize, len: usize) -> Result<(), ParseError> {
    if offset.checked_add(len).is_some_and(|e| e <= b.len()) {
        Ok(())
    } else {
        Err(ParseError::Truncated { layer, offset, need: len, have: b.len() })
    }
}
#[inline]
fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
#[inline]
fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn mac_at(b: &[u8], o: usize) -> MacAddr {
    let mut m = [0u8; 6];
    m.copy_from_slice(&b[o..o + 6]);
    MacAddr(m)
}
fn v4_at(b: &[u8], o: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3])
}
fn v6_at(b: &[u8], o: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[o..o + 16]);
    Ipv6Addr::from(a)
}

/// One VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vlan {
    /// Tag protocol identifier (0x8100 or 0x88a8).
    pub tpid: u16,
    /// Tag control information (PCP 3 bits, DEI 1 bit, VID 12 bits).
    pub tci: u16,
}

impl Vlan {
    /// The 12-bit VLAN identifier.
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }
}

/// ARP for IPv4 over Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arp {
    /// 1 = request, 2 = reply.
    pub oper: u16,
    /// Sender hardware address.
    pub sha: MacAddr,
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: MacAddr,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

/// IPv4 header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4 {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Time to live.
    pub ttl: u8,
    /// Protocol of the payload.
    pub protocol: u8,
    /// Header length in bytes (20..=60).
    pub header_len: u8,
    /// Total length from the header (header + payload; the frame may carry padding after it).
    pub total_len: u16,
    /// DSCP and ECN.
    pub tos: u8,
    /// Identification.
    pub id: u16,
    /// Flags and fragment offset (in 8-byte units).
    pub frag: u16,
}

impl Ipv4 {
    /// More-fragments set or non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.frag & 0x3fff != 0
    }
    /// Not the first fragment: the L4 header is elsewhere.
    pub fn is_later_fragment(&self) -> bool {
        self.frag & 0x1fff != 0
    }
}

/// IPv6 header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6 {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Hop limit.
    pub hop_limit: u8,
    /// Next header after the extension headers (the L4 protocol).
    pub protocol: u8,
    /// Payload length from the header.
    pub payload_len: u16,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// A fragment header was present.
    pub fragment: bool,
    /// The fragment header had a non-zero offset (the L4 header is elsewhere).
    pub later_fragment: bool,
}

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3 {
    /// ARP.
    Arp(Arp),
    /// IPv4.
    Ipv4(Ipv4),
    /// IPv6.
    Ipv6(Ipv6),
    /// Another EtherType (carried in [`Packet::ethertype`]); not parsed.
    Other,
}

/// The transport layer of an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4 {
    /// No transport header (not IP, or a later fragment).
    None,
    /// TCP.
    Tcp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
        /// Flags (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, ...).
        flags: u8,
        /// Header length in bytes.
        header_len: u8,
    },
    /// UDP.
    Udp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
        /// Length field (header + data).
        len: u16,
    },
    /// ICMP (IPv4) or ICMPv6.
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
    },
    /// Another protocol; not parsed.
    Other(u8),
}

/// The parsed headers of one frame, with the offset of each layer. `Copy`, no borrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packet {
    /// Destination MAC.
    pub dst: MacAddr,
    /// Source MAC.
    pub src: MacAddr,
    /// Outer VLAN tag, if any.
    pub vlan: Option<Vlan>,
    /// Inner VLAN tag of a double-tagged (QinQ) frame.
    pub inner_vlan: Option<Vlan>,
    /// EtherType after the tags.
    pub ethertype: u16,
    /// Offset of the L3 header.
    pub l3_offset: usize,
    /// L3 fields.
    pub l3: L3,
    /// Offset of the L4 header (also for [`L4::Other`]; 0 when `l4` is [`L4::None`]).
    pub l4_offset: usize,
    /// L4 fields.
    pub l4: L4,
    /// End of the L3 packet (IP total length); the bytes after it are Ethernet padding.
    pub l3_end: usize,
}

impl Packet {
    /// The transport payload offset (after the TCP / UDP / ICMP header), if there is one.
    pub fn payload_offset(&self) -> Option<usize> {
        match self.l4 {
            L4::Tcp { header_len, .. } => Some(self.l4_offset + header_len as usize),
            L4::Udp { .. } => Some(self.l4_offset + 8),
            L4::Icmp { .. } => Some(self.l4_offset + 4),
            _ => None,
        }
    }
}

/// Parse only the Ethernet header and its VLAN tags (at most two): what an L2 switch decides
/// on. [`Packet::l3`] is [`L3::Other`] and [`Packet::l4`] is [`L4::None`]; the network header,
/// whatever it holds, starts at [`Packet::l3_offset`]. Never panics.
///
/// ```
/// use keyplane_net::parse::{parse_ethernet, L3};
/// let mut f = vec![0u8; 60];
/// f[0] = 0x02;
/// f[12..18].copy_from_slice(&[0x81, 0x00, 0x00, 0x07, 0x08, 0x00]); // VLAN 7, then IPv4
/// let p = parse_ethernet(&f).unwrap();
/// assert_eq!((p.vlan.unwrap().vid(), p.ethertype, p.l3_offset, p.l3), (7, 0x0800, 18, L3::Other));
/// ```
pub fn parse_ethernet(frame: &[u8]) -> Result<Packet, ParseError> {
    let b = frame;
    need(b, Layer::Ethernet, 0, ETH_HLEN)?;
    let dst = mac_at(b, 0);
    let src = mac_at(b, 6);
    let mut ethertype = be16(b, 12);
    let mut off = ETH_HLEN;
    let mut vlan = None;
    let mut inner_vlan = None;
    for _ in 0..2 {
        if ethertype != ETH_P_8021Q && ethertype != ETH_P_8021AD {
            break;
        }
        need(b, Layer::Ethernet, off, 4)?;
        let tag = Vlan { tpid: ethertype, tci: be16(b, off) };
        if vlan.is_none() {
            vlan = Some(tag)
        } else {
            inner_vlan = Some(tag)
        }
        ethertype = be16(b, off + 2);
        off += 4;
    }
    if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        return Err(ParseError::Malformed { layer: Layer::Ethernet, reason: "more than two VLAN tags" });
    }
    Ok(Packet {
        dst,
        src,
        vlan,
        inner_vlan,
        ethertype,
        l3_offset: off,
        l3: L3::Other,
        l4_offset: 0,
        l4: L4::None,
        l3_end: b.len(),
    })
}

/// Parse the headers of an Ethernet frame. Never panics.
pub fn parse(frame: &[u8]) -> Result<Packet, ParseError> {
    let b = frame;
    let mut p = parse_ethernet(b)?;
    let (ethertype, off) = (p.ethertype, p.l3_offset);
    match ethertype {
        ETH_P_ARP => p.l3 = L3::Arp(parse_arp(b, off)?),
        ETH_P_IPV4 => parse_ipv4(b, &mut p)?,
        ETH_P_IPV6 => parse_ipv6(b, &mut p)?,
        _ => {}
    }
    Ok(p)
}

fn parse_arp(b: &[u8], o: usize) -> Result<Arp, ParseError> {
    need(b, Layer::Arp, o, 28)?;
    if be16(b, o) != 1 || be16(b, o + 2) != ETH_P_IPV4 || b[o + 4] != 6 || b[o + 5] != 4 {
        return Err(ParseError::Malformed { layer: Layer::Arp, reason: "not Ethernet/IPv4 ARP" });
    }
    Ok(Arp {
        oper: be16(b, o + 6),
        sha: mac_at(b, o + 8),
        spa: v4_at(b, o + 14),
        tha: mac_at(b, o + 18),
        tpa: v4_at(b, o + 24),
    })
}

fn parse_ipv4(b: &[u8], p: &mut Packet) -> Result<(), ParseError> {
    let o = p.l3_offset;
    need(b, Layer::Ipv4, o, 20)?;
    if b[o] >> 4 != 4 {
        return Err(ParseError::Malformed { layer: Layer::Ipv4, reason: "version is not 4" });
    }
    let hl = ((b[o] & 0xf) as usize) * 4;
    if hl < 20 {
        return Err(ParseError::Malformed { layer: Layer::Ipv4, reason: "header length below 20 bytes" });
    }
    need(b, Layer::Ipv4, o, hl)?;
    let total = be16(b, o + 2) as usize;
    if total < hl {
        return Err(ParseError::Malformed { layer: Layer::Ipv4, reason: "total length below header length" });
    }
    need(b, Layer::Ipv4, o, total)?;
    let ip = Ipv4 {
        src: v4_at(b, o + 12),
        dst: v4_at(b, o + 16),
        ttl: b[o + 8],
        protocol: b[o + 9],
        header_len: hl as u8,
        total_len: total as u16,
        tos: b[o + 1],
        id: be16(b, o + 4),
        frag: be16(b, o + 6),
    };
    p.l3 = L3::Ipv4(ip);
    p.l3_end = o + total;
    if !ip.is_later_fragment() {
        parse_l4(&b[..o + total], ip.protocol, o + hl, p)?;
    }
    Ok(())
}

fn parse_ipv6(b: &[u8], p: &mut Packet) -> Result<(), ParseError> {
    let o = p.l3_offset;
    need(b, Layer::Ipv6, o, 40)?;
    if b[o] >> 4 != 6 {
        return Err(ParseError::Malformed { layer: Layer::Ipv6, reason: "version is not 6" });
    }
    let plen = be16(b, o + 4) as usize;
    need(b, Layer::Ipv6, o, 40 + plen)?;
    let end = o + 40 + plen;
    let b = &b[..end];
    let mut ip = Ipv6 {
        src: v6_at(b, o + 8),
        dst: v6_at(b, o + 24),
        hop_limit: b[o + 7],
        protocol: b[o + 6],
        payload_len: plen as u16,
        traffic_class: ((be16(b, o) >> 4) & 0xff) as u8,
        flow_label: be32(b, o) & 0x000f_ffff,
        fragment: false,
        later_fragment: false,
    };
    let mut next = ip.protocol;
    let mut off = o + 40;
    let mut walked = 0;
    loop {
        match next {
            0 | 43 | 60 => {
                need(b, Layer::Ipv6, off, 8)?;
                let len = (b[off + 1] as usize + 1) * 8;
                need(b, Layer::Ipv6, off, len)?;
                next = b[off];
                off += len;
            }
            44 => {
                need(b, Layer::Ipv6, off, 8)?;
                ip.fragment = true;
                ip.later_fragment = be16(b, off + 2) & 0xfff8 != 0;
                next = b[off];
                off += 8;
            }
            51 => {
                // Authentication header: length in 4-byte units minus 2.
                need(b, Layer::Ipv6, off, 8)?;
                let len = (b[off + 1] as usize + 2) * 4;
                need(b, Layer::Ipv6, off, len)?;
                next = b[off];
                off += len;
            }
            _ => break,
        }
        walked += 1;
        if walked > MAX_IPV6_EXT_HEADERS {
            return Err(ParseError::Malformed { layer: Layer::Ipv6, reason: "too many extension headers" });
        }
    }
    ip.protocol = next;
    p.l3 = L3::Ipv6(ip);
    p.l3_end = end;
    if !ip.later_fragment {
        parse_l4(b, next, off, p)?;
    }
    Ok(())
}

fn parse_l4(b: &[u8], proto: u8, o: usize, p: &mut Packet) -> Result<(), ParseError> {
    p.l4 = match proto {
        IPPROTO_TCP => {
            need(b, Layer::Tcp, o, 20)?;
            let hl = (b[o + 12] >> 4) as usize * 4;
            if hl < 20 {
                return Err(ParseError::Malformed { layer: Layer::Tcp, reason: "data offset below 5 words" });
            }
            need(b, Layer::Tcp, o, hl)?;
            L4::Tcp { src_port: be16(b, o), dst_port: be16(b, o + 2), flags: b[o + 13], header_len: hl as u8 }
        }
        IPPROTO_UDP => {
            need(b, Layer::Udp, o, 8)?;
            let len = be16(b, o + 4);
            // Length 0 is legal for IPv6 jumbograms only; treat anything else below 8 as malformed.
            if (len as usize) < 8 || o + len as usize > b.len() {
                return Err(ParseError::Malformed { layer: Layer::Udp, reason: "length field outside the IP payload" });
            }
            L4::Udp { src_port: be16(b, o), dst_port: be16(b, o + 2), len }
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 => {
            need(b, Layer::Icmp, o, 4)?;
            L4::Icmp { ty: b[o], code: b[o + 1] }
        }
        other => L4::Other(other),
    };
    p.l4_offset = o;
    Ok(())
}

/// The target address of an ICMPv6 Neighbor Solicitation or Advertisement in `frame` (parsed as
/// `p`), if it is one.
pub fn nd_target(frame: &[u8], p: &Packet) -> Option<Ipv6Addr> {
    match (p.l3, p.l4) {
        (L3::Ipv6(_), L4::Icmp { ty: 135 | 136, code: 0 }) => {
            let o = p.l4_offset + 8;
            (o + 16 <= p.l3_end.min(frame.len())).then(|| v6_at(frame, o))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_text_round_trip() {
        let m: MacAddr = "02:00:5e:10:00:ff".parse().unwrap();
        assert_eq!(m.to_string(), "02:00:5e:10:00:ff");
        assert_eq!(MacAddr::from_u64(m.to_u64()), m);
        assert!(MacAddr::BROADCAST.is_multicast() && MacAddr::BROADCAST.is_broadcast());
        for bad in ["", "1:2:3:4:5", "1:2:3:4:5:6:7", "001:2:3:4:5:6", "g1:2:3:4:5:6"] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn short_frames_are_truncated_errors() {
        for n in 0..14 {
            assert!(matches!(parse(&vec![0; n]), Err(ParseError::Truncated { layer: Layer::Ethernet, .. })));
        }
        let mut f = vec![0u8; 20];
        f[12] = 0x08;
        assert!(matches!(parse(&f), Err(ParseError::Truncated { layer: Layer::Ipv4, .. })));
    }
}
