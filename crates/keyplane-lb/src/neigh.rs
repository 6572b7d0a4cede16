//! Next-hop resolution on the LB's one port: ARP (IPv4) and Neighbor
//! Discovery (IPv6) requests (built by `keyplane_net::build`), replies
//! learned from the frames the port receives. The LB resolves every backend itself, so a one-armed LB
//! on a single port works without the kernel's neighbour table.

use crate::packet::{Frame, parse};
use keyplane_net::MacAddr;
use keyplane_net::build::{arp_request, neighbor_solicitation};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

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
        // 86 bytes: the longer of the two (an NS; an ARP request is 60).
        let mut f = vec![0u8; 86];
        let n = match a {
            IpAddr::V4(t) => arp_request(&mut f, MacAddr(mac), v4?, t),
            IpAddr::V6(t) => neighbor_solicitation(&mut f, MacAddr(mac), v6?, t),
        }
        .ok()?;
        f.truncate(n);
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_replies_teach() {
        let mac = [2, 1, 2, 3, 4, 5];
        let (v4, v6): (Ipv4Addr, Ipv6Addr) = ("198.18.0.2".parse().unwrap(), "fd00::2".parse().unwrap());
        let t4: IpAddr = "198.18.0.11".parse().unwrap();
        let r = Neighbors::request(mac, Some(v4), None, t4).unwrap();
        // Byte for byte the ARP request the LB sent before it used keyplane-net's builder.
        let mut want = vec![0xff; 6];
        want.extend_from_slice(&mac);
        want.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
        want.extend_from_slice(&mac);
        want.extend_from_slice(&v4.octets());
        want.extend_from_slice(&[0; 6]);
        want.extend_from_slice(&[198, 18, 0, 11]);
        want.resize(60, 0);
        assert_eq!(r, want);
        let Frame::Arp(a) = parse(&r) else { panic!() };
        assert_eq!((a.op, a.sha, IpAddr::V4(a.tpa)), (1, mac, t4));
        // An ARP packet teaches its sender.
        assert_eq!(learn(&r), Some((v4.into(), mac)));
        // No port address of the family: no request.
        assert_eq!(Neighbors::request(mac, None, Some(v6), t4), None);
        let tgt: Ipv6Addr = "fd00::11".parse().unwrap();
        assert_eq!(Neighbors::request(mac, Some(v4), None, tgt.into()), None);
        let ns = Neighbors::request(mac, None, Some(v6), tgt.into()).unwrap();
        assert_eq!(ns.len(), 86);
        assert_eq!(&ns[..6], &[0x33, 0x33, 0xff, 0, 0, 0x11]);
        let Frame::Ip(ip) = parse(&ns) else { panic!() };
        assert_eq!((ip.proto, ip.dst), (58, IpAddr::V6("ff02::1:ff00:11".parse().unwrap())));
        assert_eq!((ns[20], ns[21]), (58, 255), "next header ICMPv6, hop limit 255");
        let icmp = &ns[54..];
        assert_eq!(
            (icmp[0], &icmp[8..24], &icmp[24..26], &icmp[26..32]),
            (135, &tgt.octets()[..], &[1, 1][..], &mac[..])
        );
        // Checksum over pseudo-header + ICMPv6 is valid.
        let p = keyplane_net::parse(&ns).unwrap();
        assert!(keyplane_net::checksum::l4_checksum_valid(&ns, &p));
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
