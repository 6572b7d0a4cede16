//! The few header facts the forwarding decision needs on top of
//! `keyplane_net::parse`: the switch's MAC type, group addresses and a small
//! Ethernet view (destination, source, ethertype, network-header offset) for
//! the L2 plane's per-burst arrays. Parsing itself — Ethernet and 802.1Q /
//! 802.1ad tags here, ARP / IPv4 / IPv6 / ICMPv6 in [`crate::decide`] — is
//! `keyplane_net::parse`; rewrites and replies are `keyplane_net::checksum` /
//! `keyplane_net::build`. A short or inconsistent frame gives [`Malformed`],
//! never a panic.

use keyplane_net::ParseError;

/// IPv4.
pub const ETH_IPV4: u16 = keyplane_net::parse::ETH_P_IPV4;
/// ARP.
pub const ETH_ARP: u16 = keyplane_net::parse::ETH_P_ARP;
/// IPv6.
pub const ETH_IPV6: u16 = keyplane_net::parse::ETH_P_IPV6;

/// Why a frame was refused by the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than the headers it announces.
    Truncated,
    /// A header field is impossible (IPv4 IHL < 5, wrong IP version, bad
    /// IPv4 checksum, too many VLAN tags).
    BadHeader,
}

impl From<ParseError> for Malformed {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::Truncated { .. } => Malformed::Truncated,
            ParseError::Malformed { .. } => Malformed::BadHeader,
        }
    }
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

/// Parses the Ethernet header and up to two VLAN tags
/// (`keyplane_net::parse::parse_ethernet`).
#[inline]
pub fn parse_eth(f: &[u8]) -> Result<Eth, Malformed> {
    let p = keyplane_net::parse::parse_ethernet(f)?;
    Ok(Eth { dst: p.dst.0, src: p.src.0, ethertype: p.ethertype, l3: p.l3_offset })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_tags_are_skipped_and_short_frames_refused() {
        let mut f = vec![0xff; 12];
        f.extend_from_slice(&[0x81, 0, 0, 5, 0x08, 0x06]);
        let e = parse_eth(&f).unwrap();
        assert_eq!((e.ethertype, e.l3, e.dst), (ETH_ARP, 18, BROADCAST));
        let mut g = vec![0xff; 12];
        for _ in 0..3 {
            g.extend_from_slice(&[0x81, 0, 0, 5]);
        }
        g.extend_from_slice(&[8, 0]);
        assert_eq!(parse_eth(&g), Err(Malformed::BadHeader));
        for n in 0..14 {
            assert_eq!(parse_eth(&f[..n]), Err(Malformed::Truncated), "{n}");
        }
        assert_eq!(parse_eth(&f[..16]), Err(Malformed::Truncated));
    }
}
