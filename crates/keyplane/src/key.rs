//! Typed key helpers. Every structure takes keys as byte strings; these
//! helpers give the canonical byte encoding of common network keys so that a
//! control plane and a data plane written separately agree on it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Parses `aa:bb:cc:dd:ee:ff` (or `-` separated) into a MAC key.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in out.iter_mut() {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// IPv4 address in network byte order (4 bytes).
pub(crate) fn ipv4(addr: Ipv4Addr) -> [u8; 4] {
    addr.octets()
}

/// IPv6 address in network byte order (16 bytes).
pub(crate) fn ipv6(addr: Ipv6Addr) -> [u8; 16] {
    addr.octets()
}

/// A 64-bit integer key (little-endian, 8 bytes).
pub fn u64_key(x: u64) -> [u8; 8] {
    x.to_le_bytes()
}

/// A small inline key buffer (up to 40 bytes), so typed keys need no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct KeyBuf {
    len: u8,
    buf: [u8; 40],
}

impl KeyBuf {
    fn from_slice(s: &[u8]) -> Self {
        let mut buf = [0u8; 40];
        buf[..s.len()].copy_from_slice(s);
        Self { len: s.len() as u8, buf }
    }
}

impl AsRef<[u8]> for KeyBuf {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

impl std::fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyBuf({:02x?})", self.as_ref())
    }
}

/// A transport 5-tuple. Its key is `src ‖ dst ‖ sport ‖ dport ‖ proto`
/// (network byte order): 13 bytes for IPv4, 37 for IPv6. Mixed families are
/// encoded with both addresses as IPv6 (IPv4-mapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol number (6 = TCP, 17 = UDP).
    pub proto: u8,
}

impl FiveTuple {
    /// Canonical key bytes (inline, up to 37 bytes: no allocation).
    pub fn key(&self) -> impl AsRef<[u8]> + Copy + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync + 'static {
        let mut b = [0u8; 40];
        let mut n = 0;
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                b[0..4].copy_from_slice(&s.octets());
                b[4..8].copy_from_slice(&d.octets());
                n = 8;
            }
            (s, d) => {
                for a in [s, d] {
                    let o = match a {
                        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
                        IpAddr::V6(v6) => v6.octets(),
                    };
                    b[n..n + 16].copy_from_slice(&o);
                    n += 16;
                }
            }
        }
        b[n..n + 2].copy_from_slice(&self.src_port.to_be_bytes());
        b[n + 2..n + 4].copy_from_slice(&self.dst_port.to_be_bytes());
        b[n + 4] = self.proto;
        KeyBuf::from_slice(&b[..n + 5])
    }
}

/// Canonical encoding of a hierarchical name such as `/com/example/www` or a
/// domain name `www.example.com`: components in root-first order, each
/// followed by a `0x00` separator... see [`name_key`].
///
/// Domain names (containing `.` and no `/`) are reversed into components
/// (`www.example.com` → `com`, `example`, `www`) and lower-cased, so both
/// spellings of the same name give the same key. Empty components are
/// dropped. Returns `None` for a component longer than 255 bytes.
pub fn name_key(name: &str) -> Option<Vec<u8>> {
    let comps: Vec<&str> = if name.contains('/') || !name.contains('.') {
        name.split('/').filter(|c| !c.is_empty()).collect()
    } else {
        name.split('.').filter(|c| !c.is_empty()).rev().collect()
    };
    let mut out = Vec::with_capacity(name.len() + 1);
    for c in comps {
        if c.len() > 255 {
            return None;
        }
        out.push(b'/');
        out.extend(c.bytes().map(|b| b.to_ascii_lowercase()));
    }
    Some(out)
}

/// How a table's keys are written as text, stored in every blob so that front
/// ends read keys the way the table was built ([`crate::lineage::Lineage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum KeyFormat {
    /// The UTF-8 bytes of the field.
    #[default]
    Text,
    /// Hex digits (optional `0x`): arbitrary bytes.
    Hex,
    /// An unsigned integer, stored as 8 little-endian bytes ([`u64_key`]).
    U64,
    /// Dotted IPv4, stored as 4 network-order bytes ([`ipv4`]).
    Ipv4,
    /// IPv6, stored as 16 network-order bytes ([`ipv6`]).
    Ipv6,
    /// `aa:bb:cc:dd:ee:ff`, stored as 6 bytes ([`mac`]).
    Mac,
    /// A hierarchical or domain name ([`name_key`]).
    Name,
    /// `proto,src,sport,dst,dport` (e.g. `6,10.0.0.1,1234,10.0.0.2,80`),
    /// stored as [`FiveTuple::key`].
    FiveTuple,
}

impl KeyFormat {
    /// All formats with their names.
    pub const ALL: [(&'static str, KeyFormat); 8] = [
        ("text", KeyFormat::Text),
        ("hex", KeyFormat::Hex),
        ("u64", KeyFormat::U64),
        ("ipv4", KeyFormat::Ipv4),
        ("ipv6", KeyFormat::Ipv6),
        ("mac", KeyFormat::Mac),
        ("name", KeyFormat::Name),
        ("fivetuple", KeyFormat::FiveTuple),
    ];

    /// Parses a format name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, f)| *f)
    }

    /// The format's name.
    pub fn name(self) -> &'static str {
        Self::ALL[self.code() as usize - 1].0
    }

    /// Wire code (1..=8; 0 is "not recorded").
    pub fn code(self) -> u8 {
        match self {
            KeyFormat::Text => 1,
            KeyFormat::Hex => 2,
            KeyFormat::U64 => 3,
            KeyFormat::Ipv4 => 4,
            KeyFormat::Ipv6 => 5,
            KeyFormat::Mac => 6,
            KeyFormat::Name => 7,
            KeyFormat::FiveTuple => 8,
        }
    }

    /// The format of a wire code (`None` for 0 or an unknown code).
    pub fn from_code(c: u8) -> Option<Self> {
        Self::ALL.get((c as usize).wrapping_sub(1)).map(|(_, f)| *f)
    }

    /// Encodes a key written in this format.
    ///
    /// ```
    /// use keyplane::key::KeyFormat;
    /// assert_eq!(KeyFormat::Ipv4.parse("10.0.0.1").unwrap(), vec![10, 0, 0, 1]);
    /// assert!(KeyFormat::Ipv4.parse("10.0.0").is_err());
    /// ```
    pub fn parse(self, s: &str) -> Result<Vec<u8>, String> {
        match self {
            KeyFormat::Text => Ok(s.as_bytes().to_vec()),
            KeyFormat::Hex => {
                let s = s.strip_prefix("0x").unwrap_or(s);
                if s.len() % 2 != 0 || !s.is_ascii() {
                    return Err(format!("hex key {s:?} has an odd number of digits or non-hex characters"));
                }
                (0..s.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("bad hex key {s:?}")))
                    .collect()
            }
            KeyFormat::U64 => {
                let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => s.parse().ok(),
                };
                v.map(|x| u64_key(x).to_vec()).ok_or_else(|| format!("bad u64 key {s:?}"))
            }
            KeyFormat::Ipv4 => {
                s.parse::<Ipv4Addr>().map(|a| ipv4(a).to_vec()).map_err(|_| format!("bad IPv4 address {s:?}"))
            }
            KeyFormat::Ipv6 => {
                s.parse::<Ipv6Addr>().map(|a| ipv6(a).to_vec()).map_err(|_| format!("bad IPv6 address {s:?}"))
            }
            KeyFormat::Mac => parse_mac(s).map(|m| m.to_vec()).ok_or_else(|| format!("bad MAC address {s:?}")),
            KeyFormat::Name => name_key(s).ok_or_else(|| format!("name {s:?} has a component over 255 bytes")),
            KeyFormat::FiveTuple => {
                let bad = || format!("bad 5-tuple {s:?}: expected proto,src,sport,dst,dport");
                let f: Vec<&str> = s.split(',').map(str::trim).collect();
                let [proto, src, sport, dst, dport] = f[..] else { return Err(bad()) };
                let t = FiveTuple {
                    proto: proto.parse().map_err(|_| bad())?,
                    src: src.parse().map_err(|_| bad())?,
                    src_port: sport.parse().map_err(|_| bad())?,
                    dst: dst.parse().map_err(|_| bad())?,
                    dst_port: dport.parse().map_err(|_| bad())?,
                };
                Ok(t.key().as_ref().to_vec())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(parse_mac("00:1b:44:11:3a:b7"), Some([0, 0x1b, 0x44, 0x11, 0x3a, 0xb7]));
        assert_eq!(parse_mac("00:1b:44:11:3a"), None);
        assert_eq!(parse_mac("00:1b:44:11:3a:b7:00"), None);
        assert_eq!(ipv4(Ipv4Addr::new(10, 0, 0, 1)), [10, 0, 0, 1]);
        let t = FiveTuple {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            src_port: 1234,
            dst_port: 80,
            proto: 6,
        };
        assert_eq!(t.key().as_ref(), &[10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xd2, 0, 80, 6]);
        let t6 = FiveTuple { dst: "::1".parse().unwrap(), ..t };
        assert_eq!(t6.key().as_ref().len(), 37);
        assert_eq!(name_key("www.Example.com"), name_key("/com/example/www"));
        assert_eq!(name_key("/com/example/www").unwrap(), b"/com/example/www".to_vec());
        assert_eq!(name_key("").unwrap(), Vec::<u8>::new());
        for (n, f) in KeyFormat::ALL {
            assert_eq!(KeyFormat::from_name(n), Some(f));
            assert_eq!(f.name(), n);
            assert_eq!(KeyFormat::from_code(f.code()), Some(f));
        }
        assert_eq!(KeyFormat::from_code(0), None);
        assert_eq!(KeyFormat::from_code(9), None);
        assert_eq!(KeyFormat::FiveTuple.parse("6,10.0.0.1,1234,10.0.0.2,80").unwrap(), t.key().as_ref());
        assert!(KeyFormat::FiveTuple.parse("6,10.0.0.1,1234,10.0.0.2").is_err());
        assert!(KeyFormat::Hex.parse("zé").is_err());
    }
}
