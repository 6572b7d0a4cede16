//! The TOML configuration (`lb.toml`) and its validation.
//!
//! ```toml
//! [lb]                       # optional; defaults shown
//! max_connections = 1000000  # connection states the control side tracks (bounded; oldest unconfirmed evicted first)
//! report_rate = 200000       # new-flow reports per second from each worker (token bucket)
//! report_queue = 65536       # bounded report channel
//! dcode_bits = 12            # Concury Dcode length
//! remove_grace_ms = 300000   # a removed backend drains (weight 0) until its connections ended or this passed
//!
//! [health]                   # defaults for every VIP; a VIP may override with its own [vip.health]
//! kind = "tcp"               # "tcp" (connect) or "http" (GET path, 2xx/3xx = up) or "none"
//! interval_ms = 1000
//! timeout_ms = 500
//! rise = 2                   # consecutive successes to come up
//! fall = 2                   # consecutive failures to go down
//! path = "/"
//!
//! [[vip]]
//! address = "198.18.100.1"
//! port = 80
//! protocol = "tcp"           # or "udp"
//! method = "dsr"             # or "ipip" (IPIP / IP6-in-IP6 / 4in6 / 6in4 by the families)
//! [[vip.backend]]
//! address = "198.18.0.11"
//! weight = 1
//! drain = false              # true: weight 0 (no new connections, existing ones stay)
//! ```
//!
//! Validation gives one-line errors: unknown fields, duplicate VIPs,
//! duplicate backends, a VIP whose backends all have weight 0 (or none),
//! backends that are not on a subnet of the LB's port (the LB reaches
//! backends over L2 on its one port).

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::net::IpAddr;

/// Most backends one VIP may hold at the default Dcode length (`2^12 / 8`).
pub const MAX_WEIGHT: u32 = 1 << 16;

/// Forwarding method of a VIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// L2 direct server return: the destination MAC is rewritten to the
    /// backend's; the backend holds the VIP on `lo`.
    Dsr,
    /// IP-in-IP (or IPv6-in-IPv6, 4in6, 6in4) encapsulation to the backend.
    Ipip,
}

/// Transport protocol of a VIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP (IP protocol 6).
    Tcp,
    /// UDP (IP protocol 17).
    Udp,
}

impl Protocol {
    /// IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
        }
    }
}

/// Kind of health check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// No checks: every backend is up.
    None,
    /// TCP connect to the backend's address and port.
    Tcp,
    /// HTTP/1.0 GET of `path`; a 2xx or 3xx status is up.
    Http,
}

/// Health-check settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Health {
    /// Kind of check.
    pub kind: CheckKind,
    /// Time between checks of one backend.
    pub interval_ms: u64,
    /// Time a check may take.
    pub timeout_ms: u64,
    /// Consecutive successes that bring a down backend up.
    pub rise: u32,
    /// Consecutive failures that take an up backend down.
    pub fall: u32,
    /// HTTP path.
    pub path: String,
    /// Port to check (default: the VIP's port).
    pub port: Option<u16>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            kind: CheckKind::Tcp,
            interval_ms: 1000,
            timeout_ms: 500,
            rise: 2,
            fall: 2,
            path: "/".into(),
            port: None,
        }
    }
}

/// Global LB settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LbSettings {
    /// Connection states the control side tracks at most.
    pub max_connections: usize,
    /// New-flow reports per second per worker.
    pub report_rate: u64,
    /// Capacity of the report channel.
    pub report_queue: usize,
    /// Concury Dcode length.
    pub dcode_bits: u32,
    /// A backend removed from the file stays in the pool at weight 0 (no
    /// new connections) until its last tracked connection ended or this
    /// long passed, then leaves (graceful removal). 0: leave at once.
    pub remove_grace_ms: u64,
}

impl Default for LbSettings {
    fn default() -> Self {
        Self {
            max_connections: 1_000_000,
            report_rate: 200_000,
            report_queue: 65_536,
            dcode_bits: 12,
            remove_grace_ms: 300_000,
        }
    }
}

/// A backend entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// Backend address (on a subnet of the LB's port).
    pub address: IpAddr,
    /// Relative weight (0 = drained).
    #[serde(default = "one")]
    pub weight: u32,
    /// Drained: no new connections, existing ones stay.
    #[serde(default)]
    pub drain: bool,
}

fn one() -> u32 {
    1
}

impl BackendConfig {
    /// The weight the balancer uses (0 when drained).
    pub fn effective_weight(&self) -> u32 {
        if self.drain { 0 } else { self.weight }
    }
}

/// A VIP entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VipConfig {
    /// Virtual IP.
    pub address: IpAddr,
    /// Service port.
    pub port: u16,
    /// Protocol.
    pub protocol: Protocol,
    /// Forwarding method.
    pub method: Method,
    /// Health-check override for this VIP.
    pub health: Option<Health>,
    /// The backend pool.
    #[serde(default, rename = "backend")]
    pub backends: Vec<BackendConfig>,
}

/// A whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Global settings.
    #[serde(default)]
    pub lb: LbSettings,
    /// Default health checks.
    #[serde(default)]
    pub health: Health,
    /// The services.
    #[serde(default, rename = "vip")]
    pub vips: Vec<VipConfig>,
}

/// An on-link prefix of the LB's port (address and prefix length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// An address of the port.
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// True when `a` is inside the prefix.
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self.addr, a) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let m = if self.len == 0 { 0 } else { u32::MAX << (32 - self.len.min(32)) };
                u32::from(p) & m == u32::from(a) & m
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let m = if self.len == 0 { 0 } else { u128::MAX << (128 - self.len.min(128) as u32) };
                u128::from(p) & m == u128::from(a) & m
            }
            _ => false,
        }
    }
}

impl VipConfig {
    /// The health settings in force for this VIP.
    pub fn health<'a>(&'a self, defaults: &'a Health) -> &'a Health {
        self.health.as_ref().unwrap_or(defaults)
    }
}

impl Config {
    /// Parses and validates a configuration text. `onlink` are the prefixes
    /// of the LB's port (empty: the reachability check is skipped).
    pub fn parse(text: &str, onlink: &[Prefix]) -> Result<Self> {
        let c: Config = toml::from_str(text).map_err(|e| Error::Config(one_line(text, &e)))?;
        c.validate(onlink)?;
        Ok(c)
    }

    /// Reads, parses and validates a configuration file.
    pub fn load(path: &std::path::Path, onlink: &[Prefix]) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        Self::parse(&text, onlink).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            e => e,
        })
    }

    /// The semantic checks (the parser checks fields and types).
    pub fn validate(&self, onlink: &[Prefix]) -> Result<()> {
        let s = &self.lb;
        let bad = |m: String| Err(Error::Config(m));
        if !(4..=16).contains(&s.dcode_bits) {
            return bad(format!("lb.dcode_bits = {} (use 4..=16)", s.dcode_bits));
        }
        if s.max_connections == 0 || s.report_queue == 0 || s.report_rate == 0 {
            return bad("lb.max_connections, lb.report_queue and lb.report_rate must be positive".into());
        }
        let max_backends = (1usize << s.dcode_bits) / 8;
        check_health("health", &self.health)?;
        let mut seen = HashSet::new();
        for v in &self.vips {
            let name = format!("vip {}:{} {:?}", v.address, v.port, v.protocol).to_lowercase();
            if !seen.insert((v.address, v.port, v.protocol)) {
                return bad(format!("{name} is defined twice (each address, port and protocol once)"));
            }
            if v.port == 0 {
                return bad(format!("{name}: port 0 (give the service port)"));
            }
            if let Some(h) = &v.health {
                check_health(&name, h)?;
            }
            if v.backends.is_empty() {
                return bad(format!("{name} has no backend (add a [[vip.backend]])"));
            }
            if v.backends.len() > max_backends {
                return bad(format!(
                    "{name} has {} backends; at most {max_backends} at dcode_bits {}",
                    v.backends.len(),
                    s.dcode_bits
                ));
            }
            let mut bs = HashSet::new();
            for b in &v.backends {
                if !bs.insert(b.address) {
                    return bad(format!("{name}: backend {} listed twice", b.address));
                }
                if b.weight > MAX_WEIGHT {
                    return bad(format!("{name}: backend {} weight {} (at most {MAX_WEIGHT})", b.address, b.weight));
                }
                if !onlink.is_empty() && !onlink.iter().any(|p| p.contains(b.address)) {
                    return bad(format!(
                        "{name}: backend {} is not on a subnet of the LB's port (the LB reaches backends over L2; give an on-link address)",
                        b.address
                    ));
                }
                if b.address.is_unspecified() || b.address.is_multicast() || b.address.is_loopback() {
                    return bad(format!("{name}: backend {} is not a unicast host address", b.address));
                }
            }
            if v.backends.iter().all(|b| b.effective_weight() == 0) {
                return bad(format!(
                    "{name}: every backend has weight 0 (give at least one backend a positive weight)"
                ));
            }
        }
        Ok(())
    }
}

fn check_health(name: &str, h: &Health) -> Result<()> {
    if h.interval_ms == 0 || h.timeout_ms == 0 || h.rise == 0 || h.fall == 0 {
        return Err(Error::Config(format!("{name}: health interval_ms, timeout_ms, rise and fall must be positive")));
    }
    Ok(())
}

/// A TOML error as one line: `line L: message`.
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    match e.span() {
        Some(sp) => {
            let line = text[..sp.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {msg}")
        }
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[health]
kind = "http"
[[vip]]
address = "198.18.100.1"
port = 80
protocol = "tcp"
method = "dsr"
[[vip.backend]]
address = "198.18.0.11"
weight = 2
[[vip.backend]]
address = "198.18.0.12"
[[vip]]
address = "fd00:100::1"
port = 80
protocol = "tcp"
method = "ipip"
[[vip.backend]]
address = "fd00::11"
"#;

    fn onlink() -> Vec<Prefix> {
        vec![
            Prefix { addr: "198.18.0.2".parse().unwrap(), len: 24 },
            Prefix { addr: "fd00::2".parse().unwrap(), len: 64 },
        ]
    }

    #[test]
    fn parses_a_good_config() {
        let c = Config::parse(GOOD, &onlink()).unwrap();
        assert_eq!(c.vips.len(), 2);
        assert_eq!(c.vips[0].backends[0].weight, 2);
        assert_eq!(c.vips[0].backends[1].weight, 1);
        assert_eq!(c.vips[1].method, Method::Ipip);
        assert_eq!(c.health.kind, CheckKind::Http);
        assert_eq!(c.lb, LbSettings::default());
    }

    fn err(text: &str) -> String {
        let e = Config::parse(text, &onlink()).unwrap_err().to_string();
        assert!(!e.contains('\n'), "multi-line error: {e}");
        e
    }

    #[test]
    fn bad_configs_give_one_line_errors() {
        let e = err(&GOOD.replace("weight = 2", "weight = 2\ncolour = 1"));
        assert!(e.contains("unknown field") && e.contains("colour") && e.contains("line 12"), "{e}");
        let dup = format!(
            "{GOOD}\n{}",
            &GOOD[GOOD.find("[[vip]]").unwrap()..GOOD.find("[[vip]]\naddress = \"fd00").unwrap()]
        );
        let e = err(&dup);
        assert!(e.contains("defined twice"), "{e}");
        let e = err(&GOOD.replace("address = \"fd00::11\"", "address = \"fd00::11\"\nweight = 0"));
        assert!(e.contains("every backend has weight 0"), "{e}");
        let e = err(&GOOD.replace("198.18.0.12", "198.19.5.5"));
        assert!(e.contains("198.19.5.5") && e.contains("not on a subnet"), "{e}");
        let e = err(&GOOD.replace("198.18.0.12", "198.18.0.11"));
        assert!(e.contains("listed twice"), "{e}");
        let e = err(&GOOD.replace("method = \"dsr\"", "method = \"gre\""));
        assert!(e.contains("unknown variant"), "{e}");
        let e = err("[[vip]]\naddress = \"198.18.100.1\"\nport = 80\nprotocol = \"tcp\"\nmethod = \"dsr\"\n");
        assert!(e.contains("no backend"), "{e}");
        let e = err("[lb]\ndcode_bits = 40\n");
        assert!(e.contains("dcode_bits"), "{e}");
        let e = err("[[vip]\n");
        assert!(e.starts_with("config: line 1"), "{e}");
    }

    #[test]
    fn prefixes_match_their_family_only() {
        let p = Prefix { addr: "198.18.0.2".parse().unwrap(), len: 24 };
        assert!(p.contains("198.18.0.200".parse().unwrap()));
        assert!(!p.contains("198.18.1.1".parse().unwrap()));
        assert!(!p.contains("fd00::1".parse().unwrap()));
        let q = Prefix { addr: "fd00::2".parse().unwrap(), len: 64 };
        assert!(q.contains("fd00::ffff:1".parse().unwrap()));
        assert!(!q.contains("fd00:1::1".parse().unwrap()));
    }
}
