//! Typed key helpers. Every structure takes keys as byte strings; these
//! helpers give the canonical byte encoding of common network keys so that a
//! control plane and a data plane written separately agree on it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A 48-bit MAC address as 6 bytes.
pub fn mac(addr: [u8; 6]) -> [u8; 6] {
    addr
}

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
pub fn ipv4(addr: Ipv4Addr) -> [u8; 4] {
    addr.octets()
}

/// IPv6 address in network byte order (16 bytes).
pub fn ipv6(addr: Ipv6Addr) -> [u8; 16] {
    addr.octets()
}

/// A 64-bit integer key (little-endian, 8 bytes).
pub fn u64_key(x: u64) -> [u8; 8] {
    x.to_le_bytes()
}

/// A small inline key buffer (up to 40 bytes), so typed keys need no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyBuf {
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
    /// Canonical key bytes.
    pub fn key(&self) -> KeyBuf {
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
    }
}
