//! The forwarding decision: pure functions of a parsed frame and the FIB's
//! answer. The packet workers, the pcap replay and the fuzz target all call
//! these, so they exercise exactly the data-plane code.
//!
//! **L2** (Concise §V, thesis §3.3.2): the FIB maps a destination MAC to the
//! 0-based index of the switch port it lives behind. Group addresses flood.
//! A destination the FIB does not hold (answer `None`, or a value that is no
//! port) is flooded or dropped ([`Unknown`]); a destination behind the
//! ingress port is filtered, as a learning bridge does. A unicast source the
//! FIB does not place on the ingress port is reported for learning
//! ([`should_learn`]); the data plane itself never stores a key.
//!
//! **L3**: destination IPv4 / IPv6 address → longest matching prefix → next
//! hop `(port, MAC)`; TTL / hop limit decremented (IPv4 checksum patched),
//! frames whose TTL would reach 0 dropped; ARP and neighbour solicitations
//! answered for the switch's own addresses only.

use crate::packet::{self, Eth, Mac, Malformed};
use keyplane_net::parse::{IPPROTO_ICMPV6, L3, L4};
use keyplane_net::{MacAddr, build, checksum};
use std::net::{Ipv4Addr, Ipv6Addr};

/// What to do with a frame whose destination the FIB does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unknown {
    /// Send it out of every port but the ingress one (a bridge's behaviour).
    #[default]
    Flood,
    /// Drop it (and count it).
    Drop,
}

/// Why a frame was dropped; one counter each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The parser refused it (truncated, bad header, group source MAC).
    Malformed,
    /// Destination unknown (`--unknown drop`), no route, or no next hop.
    Unknown,
    /// Destination is behind the ingress port.
    Filtered,
    /// IPv4 TTL or IPv6 hop limit would reach 0.
    TtlExpired,
    /// L3: not addressed to this switch (other unicast MAC, ARP for another
    /// address, multicast other than neighbour solicitations) or addressed to
    /// the switch itself beyond ARP / ND.
    NotForUs,
    /// The egress port's transmit ring was full (counted at the egress port).
    TxFull,
}

impl Reason {
    /// Every reason, in counter order.
    pub const ALL: [Reason; 6] =
        [Reason::Malformed, Reason::Unknown, Reason::Filtered, Reason::TtlExpired, Reason::NotForUs, Reason::TxFull];

    /// Counter name (`dropped_malformed`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Reason::Malformed => "dropped_malformed",
            Reason::Unknown => "dropped_unknown",
            Reason::Filtered => "filtered",
            Reason::TtlExpired => "ttl_expired",
            Reason::NotForUs => "not_for_us",
            Reason::TxFull => "tx_dropped",
        }
    }

    /// Index into per-reason counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The decision for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send out of this port.
    Forward(u16),
    /// Send out of every port but the ingress one.
    Flood,
    /// L3: send the reply the decision built back out of the ingress port.
    Reply,
    /// Drop and count.
    Drop(Reason),
}

impl From<Malformed> for Verdict {
    fn from(_: Malformed) -> Self {
        Verdict::Drop(Reason::Malformed)
    }
}

/// L2 decision for a frame with Ethernet header `eth` that arrived on
/// `in_port`, given the FIB's answer for its destination MAC.
#[inline]
pub fn decide_l2(eth: &Eth, in_port: u16, ports: u16, dst_answer: Option<u64>, unknown: Unknown) -> Verdict {
    if packet::is_group(&eth.src) {
        return Verdict::Drop(Reason::Malformed);
    }
    if packet::is_group(&eth.dst) {
        return Verdict::Flood;
    }
    match dst_answer {
        Some(p) if p < ports as u64 => {
            if p == in_port as u64 {
                Verdict::Drop(Reason::Filtered)
            } else {
                Verdict::Forward(p as u16)
            }
        }
        _ => match unknown {
            Unknown::Flood => Verdict::Flood,
            Unknown::Drop => Verdict::Drop(Reason::Unknown),
        },
    }
}

/// True when the frame's source should be reported to the control side:
/// a unicast source the FIB does not place on the ingress port (unknown, or
/// moved). With a FIB that cannot tell absent keys (plain Othello) an
/// unknown source whose arbitrary answer happens to be the ingress port is
/// missed (probability 2^-l per frame).
#[inline]
pub fn should_learn(eth: &Eth, in_port: u16, src_answer: Option<u64>) -> bool {
    !packet::is_group(&eth.src) && src_answer != Some(in_port as u64)
}

/// Longest-prefix-match routes: destination address → next-hop index.
pub trait Routes {
    /// Next hop of the longest IPv4 prefix covering `a`.
    fn route_v4(&self, a: Ipv4Addr) -> Option<u64>;
    /// Next hop of the longest IPv6 prefix covering `a`.
    fn route_v6(&self, a: Ipv6Addr) -> Option<u64>;
}

/// Where a next hop is: port and the MAC frames get as destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// 0-based port index.
    pub port: u16,
    /// Destination MAC written into forwarded frames.
    pub mac: Mac,
}

/// The static part of L3 forwarding: port MACs, the switch's own addresses,
/// the next-hop table.
#[derive(Debug, Clone, Default)]
pub struct L3Config {
    /// MAC of each port (source MAC of forwarded frames and replies).
    pub port_macs: Vec<Mac>,
    /// IPv4 addresses the switch answers ARP for (its gateway addresses).
    pub own_v4: Vec<Ipv4Addr>,
    /// IPv6 addresses the switch answers neighbour solicitations for.
    pub own_v6: Vec<Ipv6Addr>,
    /// Next hops by index (`--next-hops` lines `INDEX PORT DST_MAC`).
    pub next_hops: Vec<Option<NextHop>>,
}

impl L3Config {
    fn next_hop(&self, idx: Option<u64>) -> Option<NextHop> {
        let i = usize::try_from(idx?).ok()?;
        let nh = (*self.next_hops.get(i)?)?;
        ((nh.port as usize) < self.port_macs.len()).then_some(nh)
    }
}

/// L3 decision for `frame` (rewritten in place when forwarded) that arrived
/// on `in_port`; an ARP reply or neighbour advertisement goes into `reply`.
/// Headers are read by `keyplane_net::parse` (a frame it refuses — truncated
/// anywhere up to the transport header, impossible fields — is malformed), the
/// IPv4 header checksum is verified, and the rewrite is RFC 1624's
/// (`keyplane_net::checksum`).
pub fn decide_l3(frame: &mut [u8], in_port: u16, cfg: &L3Config, routes: &impl Routes, reply: &mut Vec<u8>) -> Verdict {
    let p = match keyplane_net::parse(frame) {
        Ok(p) => p,
        Err(e) => return Malformed::from(e).into(),
    };
    let Some(&my_mac) = cfg.port_macs.get(in_port as usize) else { return Verdict::Drop(Reason::Malformed) };
    let (dst, src) = (p.dst.0, p.src.0);
    if packet::is_group(&src) {
        return Verdict::Drop(Reason::Malformed);
    }
    match p.l3 {
        L3::Arp(arp) => {
            if arp.oper == 1 && cfg.own_v4.contains(&arp.tpa) && (dst == my_mac || packet::is_group(&dst)) {
                build_reply(reply, |out| build::arp_reply(out, MacAddr(my_mac), arp.tpa, arp.sha, arp.spa))
            } else {
                Verdict::Drop(Reason::NotForUs)
            }
        }
        L3::Ipv4(ip) => {
            if !checksum::ipv4_header_valid(frame, p.l3_offset) {
                return Verdict::Drop(Reason::Malformed);
            }
            if dst != my_mac || cfg.own_v4.contains(&ip.dst) {
                return Verdict::Drop(Reason::NotForUs);
            }
            if ip.ttl <= 1 {
                return Verdict::Drop(Reason::TtlExpired);
            }
            let Some(nh) = cfg.next_hop(routes.route_v4(ip.dst)) else { return Verdict::Drop(Reason::Unknown) };
            if !matches!(checksum::ipv4_decrement_ttl(frame, p.l3_offset), Ok(Some(_))) {
                return Verdict::Drop(Reason::Malformed);
            }
            rewrite_macs(frame, nh, cfg)
        }
        L3::Ipv6(ip) => {
            // A neighbour solicitation (ICMPv6 135, code 0, hop limit 255) for one of our addresses.
            if ip.protocol == IPPROTO_ICMPV6 && ip.hop_limit == 255 && p.l4 == (L4::Icmp { ty: 135, code: 0 }) {
                let target = frame
                    .get(p.l4_offset + 8..p.l4_offset + 24)
                    .filter(|_| p.l4_offset + 24 <= p.l3_end)
                    .and_then(|t| <[u8; 16]>::try_from(t).ok())
                    .map(Ipv6Addr::from);
                if let Some(t) = target.filter(|t| cfg.own_v6.contains(t)) {
                    let (to_mac, to_ip, flags) = if ip.src.is_unspecified() {
                        let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
                        (
                            MacAddr::ipv6_multicast(all),
                            all,
                            build::NaFlags { router: true, solicited: false, override_: true },
                        )
                    } else {
                        (MacAddr(src), ip.src, build::NaFlags { router: true, solicited: true, override_: true })
                    };
                    return build_reply(reply, |out| {
                        build::neighbor_advertisement(out, MacAddr(my_mac), t, to_mac, to_ip, flags)
                    });
                }
                return Verdict::Drop(Reason::NotForUs);
            }
            if dst != my_mac || cfg.own_v6.contains(&ip.dst) || ip.dst.is_multicast() {
                return Verdict::Drop(Reason::NotForUs);
            }
            if ip.hop_limit <= 1 {
                return Verdict::Drop(Reason::TtlExpired);
            }
            let Some(nh) = cfg.next_hop(routes.route_v6(ip.dst)) else { return Verdict::Drop(Reason::Unknown) };
            if !matches!(checksum::ipv6_decrement_hop_limit(frame, p.l3_offset), Ok(Some(_))) {
                return Verdict::Drop(Reason::Malformed);
            }
            rewrite_macs(frame, nh, cfg)
        }
        L3::Other => Verdict::Drop(Reason::NotForUs),
    }
}

/// Builds a reply frame into `reply` (ARP replies are padded to 60 bytes).
fn build_reply(reply: &mut Vec<u8>, f: impl FnOnce(&mut [u8]) -> keyplane_net::Result<usize>) -> Verdict {
    reply.clear();
    reply.resize(128, 0);
    match f(reply) {
        Ok(n) => {
            reply.truncate(n.max(60));
            Verdict::Reply
        }
        Err(_) => {
            reply.clear();
            Verdict::Drop(Reason::Malformed)
        }
    }
}

fn rewrite_macs(frame: &mut [u8], nh: NextHop, cfg: &L3Config) -> Verdict {
    let src = cfg.port_macs[nh.port as usize];
    frame[0..6].copy_from_slice(&nh.mac);
    frame[6..12].copy_from_slice(&src);
    Verdict::Forward(nh.port)
}
