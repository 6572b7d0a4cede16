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

use crate::packet::{self, ETH_ARP, ETH_IPV4, ETH_IPV6, Eth, Mac, Malformed};
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
pub fn decide_l3(frame: &mut [u8], in_port: u16, cfg: &L3Config, routes: &impl Routes, reply: &mut Vec<u8>) -> Verdict {
    let eth = match packet::parse_eth(frame) {
        Ok(e) => e,
        Err(m) => return m.into(),
    };
    let Some(&my_mac) = cfg.port_macs.get(in_port as usize) else { return Verdict::Drop(Reason::Malformed) };
    if packet::is_group(&eth.src) {
        return Verdict::Drop(Reason::Malformed);
    }
    match eth.ethertype {
        ETH_ARP => {
            let arp = match packet::parse_arp(frame, eth.l3) {
                Ok(a) => a,
                Err(m) => return m.into(),
            };
            if arp.op == 1 && cfg.own_v4.contains(&arp.tpa) && (eth.dst == my_mac || packet::is_group(&eth.dst)) {
                packet::arp_reply(reply, my_mac, arp.tpa, &arp);
                Verdict::Reply
            } else {
                Verdict::Drop(Reason::NotForUs)
            }
        }
        ETH_IPV4 => {
            let ip = match packet::parse_ipv4(frame, eth.l3) {
                Ok(i) => i,
                Err(m) => return m.into(),
            };
            if eth.dst != my_mac || cfg.own_v4.contains(&ip.dst) {
                return Verdict::Drop(Reason::NotForUs);
            }
            if ip.ttl <= 1 {
                return Verdict::Drop(Reason::TtlExpired);
            }
            let Some(nh) = cfg.next_hop(routes.route_v4(ip.dst)) else { return Verdict::Drop(Reason::Unknown) };
            packet::decrement_ttl_v4(frame, eth.l3);
            rewrite_macs(frame, nh, cfg)
        }
        ETH_IPV6 => {
            let ip = match packet::parse_ipv6(frame, eth.l3) {
                Ok(i) => i,
                Err(m) => return m.into(),
            };
            if let Some(target) = packet::neighbor_solicitation(frame, eth.l3, &ip) {
                if cfg.own_v6.contains(&target) {
                    packet::neighbor_advertisement(reply, my_mac, target, eth.src, ip.src);
                    return Verdict::Reply;
                }
                return Verdict::Drop(Reason::NotForUs);
            }
            if eth.dst != my_mac || cfg.own_v6.contains(&ip.dst) || ip.dst.is_multicast() {
                return Verdict::Drop(Reason::NotForUs);
            }
            if ip.hop_limit <= 1 {
                return Verdict::Drop(Reason::TtlExpired);
            }
            let Some(nh) = cfg.next_hop(routes.route_v6(ip.dst)) else { return Verdict::Drop(Reason::Unknown) };
            packet::decrement_hop_limit_v6(frame, eth.l3);
            rewrite_macs(frame, nh, cfg)
        }
        _ => Verdict::Drop(Reason::NotForUs),
    }
}

fn rewrite_macs(frame: &mut [u8], nh: NextHop, cfg: &L3Config) -> Verdict {
    let src = cfg.port_macs[nh.port as usize];
    frame[0..6].copy_from_slice(&nh.mac);
    frame[6..12].copy_from_slice(&src);
    Verdict::Forward(nh.port)
}
