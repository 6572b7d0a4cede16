//! Next-hop resolution on the LB's one port: ARP (IPv4) and Neighbor
//! Discovery (IPv6) requests built here, replies learned from the frames the
//! port receives. The LB resolves every backend itself, so a one-armed LB
//! on a single port works without the kernel's neighbour table.

use crate::packet::{ETH_ARP, ETH_IPV6, Frame, checksum, parse, pseudo_v6};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// An ARP who-has request for `target` from `(mac, ip)`.
pub fn arp_request(mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ETH_ARP.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ip.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.octets());
    f.resize(60, 0);
    f
}

/// Solicited-node multicast address of `a` (RFC 4291 §2.7.1).
pub fn solicited_node(a: &Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | o[13] as u16, u16::from_be_bytes([o[14], o[15]]))
}

/// A Neighbor Solicitation for `target` from `(mac, ip)` with the
/// source link-layer address option (RFC 4861 §4.3).
pub fn neighbor_solicitation(mac: [u8; 6], ip: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let dst = solicited_node(&target);
    let d = dst.octets();
    let mut f = Vec::with_capacity(86);
    f.extend_from_slice(&[0x33, 0x33, d[12], d[13], d[14], d[15]]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ETH_IPV6.to_be_bytes());
    let mut icmp = vec![135u8, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&target.octets());
    icmp.extend_from_slice(&[1, 1]);
    icmp.extend_from_slice(&mac);
    let c = checksum(&icmp, pseudo_v6(&ip, &dst, icmp.len() as u32, 58));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&ip.octets());
    f.extend_from_slice(&d);
    f.extend_from_slice(&icmp);
    f
}

/// What a received frame teaches about neighbours: `(address, MAC)` from
/// an ARP packet's sender or an ICMPv6 Neighbor Advertisement's target.
pub fn learn(frame: &[u8]) -> Option<(IpAddr, [u8; 6])> {
    match parse(frame) {
        Frame::Arp(a) if a.spa != Ipv4Addr::UNSPECIFIED => Some((a.spa.into(), a.sha)),
        Frame::Ip(ip) if ip.proto == 58 && ip.dst.is_ipv6() => {
            let icmp = frame.get(ip.l3 + 40..ip.l3 + ip.len)?;
            if *icmp.first()? != 136 || icmp.len() < 24 {
                return None;
            }
            let mut t = [0u8; 16];
            t.copy_from_slice(&icmp[8..24]);
            // Target link-layer address option, else the frame's source MAC.
            let mut mac = [0u8; 6];
            mac.copy_from_slice(frame.get(6..12)?);
            let mut opt = &icmp[24..];
            while opt.len() >= 8 {
                let (ty, len) = (opt[0], opt[1] as usize * 8);
                if len == 0 || len > opt.len() {
                    break;
                }
                if ty == 2 {
                    mac.copy_from_slice(&opt[2..8]);
                }
                opt = &opt[len..];
            }
            Some((Ipv6Addr::from(t).into(), mac))
        }
        _ => None,
    }
}

/// The neighbour table of the port: address → MAC, with the time each was
/// last confirmed and the time of the last request.
#[derive(Debug, Default)]
pub struct Neighbors {
    macs: HashMap<IpAddr, ([u8; 6], Instant)>,
    asked: HashMap<IpAddr, Instant>,
}

/// Re-ask for an entry this old even when it answers.
pub const REFRESH: Duration = Duration::from_secs(30);
/// Wait this long between requests for one address.
pub const RETRY: Duration = Duration::from_millis(200);

impl Neighbors {
    /// The MAC of a neighbour.
    #[inline]
    pub fn get(&self, a: &IpAddr) -> Option<[u8; 6]> {
        self.macs.get(a).map(|e| e.0)
    }
    /// Records a neighbour's MAC (only addresses the LB asked for or knows).
    pub fn learn(&mut self, a: IpAddr, mac: [u8; 6], now: Instant) -> bool {
        if !self.asked.contains_key(&a) && !self.macs.contains_key(&a) {
            return false;
        }
        self.macs.insert(a, (mac, now));
        true
    }
    /// Resolved entries.
    pub fn len(&self) -> usize {
        self.macs.len()
    }
    /// True when nothing is resolved.
    pub fn is_empty(&self) -> bool {
        self.macs.is_empty()
    }
    /// The addresses of `wanted` that need a request now (unresolved or
    /// stale, and not asked within [`RETRY`]); marks them asked.
    pub fn due(&mut self, wanted: &[IpAddr], now: Instant) -> Vec<IpAddr> {
        let mut out = Vec::new();
        for a in wanted {
            let fresh = self.macs.get(a).is_some_and(|e| now.duration_since(e.1) < REFRESH);
            let recent = self.asked.get(a).is_some_and(|t| now.duration_since(*t) < RETRY);
            if !fresh && !recent {
                self.asked.insert(*a, now);
                out.push(*a);
            }
        }
        out
    }
    /// The request frame for `a` from the port's `mac` and addresses.
    pub fn request(mac: [u8; 6], v4: Option<Ipv4Addr>, v6: Option<Ipv6Addr>, a: IpAddr) -> Option<Vec<u8>> {
        match a {
            IpAddr::V4(t) => Some(arp_request(mac, v4?, t)),
            IpAddr::V6(t) => Some(neighbor_solicitation(mac, v6?, t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Frame;

    #[test]
    fn requests_parse_and_replies_teach() {
        let mac = [2, 1, 2, 3, 4, 5];
        let r = arp_request(mac, "198.18.0.2".parse().unwrap(), "198.18.0.11".parse().unwrap());
        let Frame::Arp(a) = parse(&r) else { panic!() };
        assert_eq!((a.op, a.sha, a.tpa), (1, mac, "198.18.0.11".parse().unwrap()));
        // An ARP packet teaches its sender.
        assert_eq!(learn(&r), Some(("198.18.0.2".parse().unwrap(), mac)));
        let src: Ipv6Addr = "fd00::2".parse().unwrap();
        let tgt: Ipv6Addr = "fd00::11".parse().unwrap();
        let ns = neighbor_solicitation(mac, src, tgt);
        let Frame::Ip(ip) = parse(&ns) else { panic!() };
        assert_eq!((ip.proto, ip.dst), (58, IpAddr::V6("ff02::1:ff00:11".parse().unwrap())));
        // Checksum over pseudo-header + ICMPv6 is valid.
        let icmp = &ns[54..];
        let dst = solicited_node(&tgt);
        assert_eq!(checksum(icmp, pseudo_v6(&src, &dst, icmp.len() as u32, 58)), 0);
        // A neighbor advertisement for the target teaches its option's MAC.
        let bmac = [2, 9, 9, 9, 9, 9];
        let mut na = ns.clone();
        na[6..12].copy_from_slice(&[2, 7, 7, 7, 7, 7]);
        na[54] = 136;
        na[54 + 24] = 2;
        na[54 + 26..54 + 32].copy_from_slice(&bmac);
        assert_eq!(learn(&na), Some((IpAddr::V6(tgt), bmac)));
    }

    #[test]
    fn table_asks_once_per_retry_and_learns_only_asked() {
        let mut n = Neighbors::default();
        let t0 = Instant::now();
        let a: IpAddr = "198.18.0.11".parse().unwrap();
        let b: IpAddr = "198.18.0.99".parse().unwrap();
        assert_eq!(n.due(&[a], t0), vec![a]);
        assert!(n.due(&[a], t0 + Duration::from_millis(10)).is_empty());
        assert!(!n.learn(b, [1; 6], t0), "unasked addresses are not learned");
        assert!(n.learn(a, [3; 6], t0));
        assert_eq!(n.get(&a), Some([3; 6]));
        assert!(n.due(&[a], t0 + Duration::from_secs(1)).is_empty());
        assert_eq!(n.due(&[a], t0 + REFRESH + Duration::from_secs(1)), vec![a]);
    }
}
