//! IPv4 / IPv6 prefixes: parsing, masking, and the byte encoding used as a
//! [`crate::ControlTable`] key.

use crate::error::{Error, Result};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Address family of a prefix or an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4: 32-bit addresses.
    V4,
    /// IPv6: 128-bit addresses.
    V6,
}

impl Family {
    /// Address width in bits (32 or 128).
    pub const fn width(self) -> u32 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
    /// 0 for IPv4, 1 for IPv6 (index into per-family arrays).
    pub(crate) const fn index(self) -> usize {
        match self {
            Family::V4 => 0,
            Family::V6 => 1,
        }
    }
    pub(crate) fn from_index(i: usize) -> Family {
        if i == 0 { Family::V4 } else { Family::V6 }
    }
}

/// The network mask of a `len`-bit prefix in a `width`-bit address, as the
/// low `width` bits of a u128.
#[inline(always)]
pub(crate) const fn netmask(width: u32, len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        let all = u128::MAX >> (128 - width);
        all & !((1u128 << (width - len)) - 1)
    }
}

/// An IPv4 or IPv6 prefix such as `10.0.0.0/8` or `fd00::/16`: the address
/// bits (right-aligned in a u128: an IPv4 prefix uses the low 32 bits) and
/// the length. Host bits below the length are always zero.
///
/// ```
/// use keyplane::lpm::Prefix;
/// let p: Prefix = "10.0.0.0/8".parse()?;
/// assert_eq!(p.len(), 8);
/// assert!(p.contains("10.1.2.3".parse().unwrap()));
/// assert!("10.0.0.1/8".parse::<Prefix>().is_err()); // host bits set
/// assert_eq!(p.to_key(), [8, 10, 0, 0, 0]); // length, then the address bytes
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    fam: Family,
    len: u8,
    bits: u128,
}

impl Prefix {
    /// A prefix of `addr` and `len`; host bits below `len` must be zero.
    pub fn new(addr: IpAddr, len: u8) -> Result<Self> {
        let p = Self::truncated(addr, len)?;
        if p.bits != bits_of(addr) {
            return Err(Error::InvalidParameter(format!(
                "{addr}/{len} has host bits set below the prefix length; did you mean {p}?"
            )));
        }
        Ok(p)
    }

    /// A prefix of `addr` and `len`, clearing host bits below `len`.
    pub fn truncated(addr: IpAddr, len: u8) -> Result<Self> {
        let fam = match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        };
        if len as u32 > fam.width() {
            return Err(Error::InvalidParameter(format!(
                "prefix length /{len} is longer than the {}-bit address {addr}",
                fam.width()
            )));
        }
        Ok(Prefix { fam, len, bits: bits_of(addr) & netmask(fam.width(), len as u32) })
    }

    /// An IPv4 prefix (host bits cleared).
    pub fn v4(addr: Ipv4Addr, len: u8) -> Result<Self> {
        Self::truncated(IpAddr::V4(addr), len)
    }

    /// An IPv6 prefix (host bits cleared).
    pub fn v6(addr: Ipv6Addr, len: u8) -> Result<Self> {
        Self::truncated(IpAddr::V6(addr), len)
    }

    pub(crate) fn from_raw(fam: Family, bits: u128, len: u8) -> Self {
        Prefix { fam, len, bits: bits & netmask(fam.width(), len as u32) }
    }

    /// Address family.
    pub fn family(&self) -> Family {
        self.fam
    }
    /// Prefix length in bits.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        self.len
    }
    /// The address bits, right-aligned (IPv4 in the low 32 bits).
    pub fn bits(&self) -> u128 {
        self.bits
    }
    /// The network address.
    pub fn addr(&self) -> IpAddr {
        match self.fam {
            Family::V4 => IpAddr::V4(Ipv4Addr::from(self.bits as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(self.bits)),
        }
    }
    /// True if `addr` (same family) lies inside this prefix.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let same = matches!((self.fam, addr), (Family::V4, IpAddr::V4(_)) | (Family::V6, IpAddr::V6(_)));
        same && bits_of(addr) & netmask(self.fam.width(), self.len as u32) == self.bits
    }

    /// Key bytes for [`crate::ControlTable`]: the length, then the 4 or 16
    /// address bytes (network order).
    pub fn to_key(&self) -> Vec<u8> {
        let mut k = vec![self.len];
        match self.fam {
            Family::V4 => k.extend_from_slice(&(self.bits as u32).to_be_bytes()),
            Family::V6 => k.extend_from_slice(&self.bits.to_be_bytes()),
        }
        k
    }

    /// Decodes [`Prefix::to_key`] bytes (5 or 17 bytes, host bits zero).
    pub(crate) fn from_key(key: &[u8]) -> Result<Self> {
        let (len, rest) = key.split_first().ok_or_else(|| bad_key(key))?;
        let addr = addr_from_bytes(rest).ok_or_else(|| bad_key(key))?;
        Self::new(addr, *len)
    }
}

fn bad_key(key: &[u8]) -> Error {
    Error::InvalidParameter(format!(
        "an LPM key is 5 or 17 bytes (prefix length, then the IPv4 or IPv6 address), got {} bytes; build keys \
         with lpm::Prefix::to_key",
        key.len()
    ))
}

/// Address bits of an IP address, right-aligned.
pub(crate) fn bits_of(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// An address from 4 or 16 network-order bytes.
pub(crate) fn addr_from_bytes(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        16 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr(), self.len)
    }
}

impl FromStr for Prefix {
    type Err = Error;

    /// `ADDR/LEN` (`10.0.0.0/8`, `fd00::/16`) or a bare address (a host
    /// route: /32 or /128). Host bits below the length are refused.
    fn from_str(s: &str) -> Result<Self> {
        let shown: String = s.chars().take(80).collect();
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| {
            Error::InvalidParameter(format!("bad prefix {shown:?}: expected ADDR/LEN such as 10.0.0.0/8 or fd00::/16"))
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l.trim().parse::<u8>().ok().filter(|&n| n <= max).ok_or_else(|| {
                Error::InvalidParameter(format!("bad prefix length in {shown:?}: expected 0..={max}"))
            })?,
        };
        Self::new(addr, len)
    }
}
