//! # keyplane-any
//!
//! Type-erased keyplane tables for the front ends (the `keyplane` command,
//! the C library and the Python package): open **any** lookup blob by the
//! kind code in its frame, build **any** structure by name with string
//! options, and move deltas as bytes.
//!
//! Every structure the front ends know is listed once, in the
//! `registry!` invocation in `registry.rs`. Adding a structure is one line
//! there:
//!
//! ```text
//! plain Ludo = keyplane::ludo, "ludo", LudoLookup, "Ludo hashing (...)";
//! ```
//!
//! (`plain`: built with `ControlTable::from_items`, no options). A structure
//! with build options instead implements [`Structure`] by hand (see
//! `othello.rs`) and is listed as `custom Name;`.
//!
//! ```
//! use keyplane_any::{AnyControl, AnyLookup, Opts};
//!
//! let items = vec![(b"10.0.0.1".to_vec(), 5u64), (b"10.0.0.2".to_vec(), 7)];
//! let mut ctl = AnyControl::build("othello", items, 8, &Opts::parse("fingerprint_bits=8")?)?;
//! let blob = ctl.export().to_bytes();
//! let table = AnyLookup::from_bytes(&blob)?;           // any kind of blob
//! assert_eq!(table.get(b"10.0.0.1"), Some(5));
//! let delta = ctl.insert(b"10.0.0.3", 9)?;              // framed delta bytes
//! table.apply_bytes(&delta)?;
//! assert_eq!(table.get(b"10.0.0.3"), Some(9));
//! # Ok::<(), keyplane::Error>(())
//! ```
#![deny(missing_docs)]

mod othello;
mod registry;

pub use othello::Othello;
pub use registry::{AnyControl, AnyLookup, AnyReader, STRUCTURES, StructureInfo};

use keyplane::wire::{Frame, HEADER_LEN, TRAILER_LEN};
use keyplane::{ControlTable, Error, LookupTable, Result, Wire};

/// Build options as `name=value` strings (`--opt` on the command line,
/// keyword arguments in Python). A structure takes the names it knows and
/// rejects the rest, so a typo is an error rather than a silent default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    items: Vec<(String, String)>,
}

impl Opts {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `a=1,b=2` (commas or whitespace separate; an empty string is no options).
    pub fn parse(s: &str) -> Result<Self> {
        let mut o = Self::new();
        for part in s.split([',', ' ', '\t', '\n']).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| Error::InvalidParameter(format!("option {part:?} is not of the form name=value")))?;
            o.push(k.trim(), v.trim());
        }
        Ok(o)
    }

    /// Adds (or replaces) one option.
    pub fn push(&mut self, name: &str, value: &str) -> &mut Self {
        let name = name.replace('-', "_");
        self.items.retain(|(k, _)| *k != name);
        self.items.push((name, value.to_string()));
        self
    }

    /// The options as `(name, value)` pairs, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.items.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// True when no option is set.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `a=1,b=2`, the form [`Opts::parse`] reads.
    pub fn render(&self) -> String {
        self.items.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// Fails unless every option name is one of `known` (for `structure`).
    pub fn check_known(&self, structure: &str, known: &[(&str, &str)]) -> Result<()> {
        for (k, _) in self.iter() {
            if !known.iter().any(|(n, _)| *n == k) {
                let list: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                return Err(Error::InvalidParameter(if list.is_empty() {
                    format!("{structure} takes no options, got {k:?}")
                } else {
                    format!("{structure} has no option {k:?} (options: {})", list.join(", "))
                }));
            }
        }
        Ok(())
    }

    /// The raw value of an option.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.items.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// An unsigned integer option (`16`, `0x10`).
    pub fn u64(&self, name: &str, default: u64) -> Result<u64> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => {
                let parsed = match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => v.parse().ok(),
                };
                parsed.ok_or_else(|| Error::InvalidParameter(format!("option {name}={v}: not an unsigned integer")))
            }
        }
    }

    /// A boolean option (`true/false`, `1/0`, `yes/no`, `on/off`).
    pub fn bool(&self, name: &str, default: bool) -> Result<bool> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(Error::InvalidParameter(format!("option {name}={v}: not a boolean (true/false)"))),
            },
        }
    }
}

/// One structure as the front ends see it. Implemented once per structure,
/// by the `plain` form of `registry!` or by hand for structures with
/// options.
pub trait Structure: 'static {
    /// Name used on the command line and in Python (`"othello"`).
    const NAME: &'static str;
    /// One-line description (paper and section).
    const SUMMARY: &'static str;
    /// Build options: `(name, help)`.
    const OPTIONS: &'static [(&'static str, &'static str)] = &[];
    /// Wire kind of the lookup form.
    const LOOKUP_KIND: keyplane::wire::Kind;
    /// The control form.
    type Control: ControlTable<Lookup = Self::Lookup, Delta = Self::Delta> + Send;
    /// The lookup form.
    type Lookup: LookupTable<Delta = Self::Delta>;
    /// The delta.
    type Delta: Wire;

    /// Bulk construction with options. A repeated key: the last value wins.
    fn build<I, K>(items: I, value_bits: u32, opts: &Opts) -> Result<Self::Control>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        opts.check_known(Self::NAME, Self::OPTIONS)?;
        Self::Control::from_items(items, value_bits)
    }

    /// Parameters of a lookup form, for `keyplane inspect`.
    fn describe(_lookup: &Self::Lookup) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Value width of a lookup form, when the structure exposes it.
    fn value_bits(_lookup: &Self::Lookup) -> Option<u32> {
        None
    }

    /// Number of keys, when the lookup form stores it.
    fn key_count(_lookup: &Self::Lookup) -> Option<usize> {
        None
    }

    /// Keys the lookup form is sized for (used for bits/key when the key
    /// count is not stored).
    fn capacity(_lookup: &Self::Lookup) -> Option<usize> {
        None
    }

    /// True when `get` answers `None` for (most) keys never inserted, so a
    /// `--checked` query is meaningful.
    fn rejects_aliens(_lookup: &Self::Lookup) -> bool {
        false
    }
}

/// Splits a file of concatenated frames (a delta stream) into frames.
/// Errors name the frame number and byte offset.
pub fn split_frames(bytes: &[u8]) -> Result<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let bad = |e: Error| Error::Corrupt(format!("frame {} at byte offset {at}: {e}", out.len() + 1));
        if rest.len() < HEADER_LEN {
            return Err(bad(Error::Truncated { offset: 0, needed: HEADER_LEN, available: rest.len() }));
        }
        let mut lb = [0u8; 8];
        lb.copy_from_slice(&rest[8..16]);
        let len = u64::from_le_bytes(lb);
        let total = len.checked_add((HEADER_LEN + TRAILER_LEN) as u64).filter(|t| *t <= rest.len() as u64);
        let Some(total) = total else {
            return Err(bad(Error::Truncated {
                offset: HEADER_LEN,
                needed: usize::try_from(len.saturating_add(TRAILER_LEN as u64)).unwrap_or(usize::MAX),
                available: rest.len() - HEADER_LEN,
            }));
        };
        let frame = &rest[..total as usize];
        Frame::inspect(frame).map_err(bad)?;
        out.push(frame);
        at += total as usize;
    }
    Ok(out)
}

/// Decodes a key given as text in one of the CLI / Python key formats:
/// `text` (the UTF-8 bytes), `hex`, `u64` (decimal or 0x-hex, 8 bytes
/// little-endian as [`keyplane::key::u64_key`]), `ipv4`, `ipv6`, `mac`,
/// `name` ([`keyplane::key::name_key`]).
pub fn parse_key(format: KeyFormat, s: &str) -> std::result::Result<Vec<u8>, String> {
    match format {
        KeyFormat::Text => Ok(s.as_bytes().to_vec()),
        KeyFormat::Hex => {
            let s = s.strip_prefix("0x").unwrap_or(s);
            if s.len() % 2 != 0 {
                return Err(format!("hex key {s:?} has an odd number of digits"));
            }
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("bad hex key {s:?}")))
                .collect()
        }
        KeyFormat::U64 => parse_u64(s).map(|x| x.to_le_bytes().to_vec()).ok_or_else(|| format!("bad u64 key {s:?}")),
        KeyFormat::Ipv4 => s
            .parse::<std::net::Ipv4Addr>()
            .map(|a| keyplane::key::ipv4(a).to_vec())
            .map_err(|_| format!("bad IPv4 address {s:?}")),
        KeyFormat::Ipv6 => s
            .parse::<std::net::Ipv6Addr>()
            .map(|a| keyplane::key::ipv6(a).to_vec())
            .map_err(|_| format!("bad IPv6 address {s:?}")),
        KeyFormat::Mac => {
            keyplane::key::parse_mac(s).map(|m| m.to_vec()).ok_or_else(|| format!("bad MAC address {s:?}"))
        }
        KeyFormat::Name => {
            keyplane::key::name_key(s).ok_or_else(|| format!("name {s:?} has a component over 255 bytes"))
        }
    }
}

/// Parses `123` or `0x7b` as u64.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// How keys are written in text input (see [`parse_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyFormat {
    /// The UTF-8 bytes of the field.
    #[default]
    Text,
    /// Hex digits (optional `0x`).
    Hex,
    /// An unsigned integer, stored as 8 little-endian bytes.
    U64,
    /// Dotted IPv4, stored as 4 network-order bytes.
    Ipv4,
    /// IPv6, stored as 16 network-order bytes.
    Ipv6,
    /// `aa:bb:cc:dd:ee:ff`, stored as 6 bytes.
    Mac,
    /// A hierarchical or domain name, canonical form of [`keyplane::key::name_key`].
    Name,
}

impl KeyFormat {
    /// All formats with their names.
    pub const ALL: [(&'static str, KeyFormat); 7] = [
        ("text", KeyFormat::Text),
        ("hex", KeyFormat::Hex),
        ("u64", KeyFormat::U64),
        ("ipv4", KeyFormat::Ipv4),
        ("ipv6", KeyFormat::Ipv6),
        ("mac", KeyFormat::Mac),
        ("name", KeyFormat::Name),
    ];

    /// Parses a format name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, f)| *f)
    }

    /// The format's name.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, f)| *f == self).map(|(n, _)| *n).unwrap_or("text")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_parse_and_check() {
        let o = Opts::parse("fingerprint-bits=8, emptiness=true").unwrap();
        assert_eq!(o.u64("fingerprint_bits", 0).unwrap(), 8);
        assert!(o.bool("emptiness", false).unwrap());
        assert!(Opts::parse("novalue").is_err());
        assert!(o.check_known("x", &[("fingerprint_bits", "")]).is_err());
        assert_eq!(Opts::parse(&o.render()).unwrap(), o);
        assert!(Opts::parse("a=zz").unwrap().u64("a", 0).is_err());
    }

    #[test]
    fn keys() {
        assert_eq!(parse_key(KeyFormat::Hex, "0a0B").unwrap(), vec![10, 11]);
        assert!(parse_key(KeyFormat::Hex, "abc").is_err());
        assert_eq!(parse_key(KeyFormat::U64, "1").unwrap(), 1u64.to_le_bytes().to_vec());
        assert_eq!(parse_key(KeyFormat::Ipv4, "10.0.0.1").unwrap(), vec![10, 0, 0, 1]);
        assert!(parse_key(KeyFormat::Ipv4, "10.0.0").is_err());
        assert_eq!(parse_key(KeyFormat::Mac, "00:01:02:03:04:05").unwrap().len(), 6);
        for (n, f) in KeyFormat::ALL {
            assert_eq!(KeyFormat::from_name(n), Some(f));
            assert_eq!(f.name(), n);
        }
    }

    #[test]
    fn every_registered_structure_round_trips() {
        for info in STRUCTURES {
            let items: Vec<(Vec<u8>, u64)> = (0..500u64).map(|i| (i.to_le_bytes().to_vec(), i % 200)).collect();
            let mut ctl = AnyControl::build(info.name, items.clone(), 8, &Opts::new()).unwrap();
            assert_eq!(ctl.len(), 500);
            let blob = ctl.export().to_bytes();
            let t = AnyLookup::from_bytes(&blob).unwrap();
            assert_eq!(t.name(), info.name);
            // A read handle taken before the deltas must see them.
            let reader = t.reader();
            for (k, v) in &items {
                assert_eq!(t.get(k), Some(*v));
                assert_eq!(reader.get(k), Some(*v));
            }
            let mut stream = Vec::new();
            for i in 0..50u64 {
                stream.extend(ctl.insert(&(1000 + i).to_le_bytes(), i).unwrap());
            }
            stream.extend(ctl.remove(&0u64.to_le_bytes()).unwrap().unwrap());
            assert!(ctl.remove(b"absent").unwrap().is_none());
            let frames = split_frames(&stream).unwrap();
            assert_eq!(frames.len(), 51);
            for f in frames {
                t.apply_bytes(f).unwrap();
            }
            for i in 0..50u64 {
                assert_eq!(t.get(&(1000 + i).to_le_bytes()), Some(i));
                assert_eq!(reader.get(&(1000 + i).to_le_bytes()), Some(i), "{}: reader missed a delta", info.name);
            }
            let keys: Vec<&[u8]> = items.iter().skip(1).map(|(k, _)| k.as_slice()).collect();
            let mut out = vec![None; keys.len()];
            t.get_batch(&keys, &mut out);
            for (o, (_, v)) in out.iter().zip(items.iter().skip(1)) {
                assert_eq!(*o, Some(*v));
            }
            out.fill(None);
            reader.get_batch(&keys, &mut out);
            for (o, (_, v)) in out.iter().zip(items.iter().skip(1)) {
                assert_eq!(*o, Some(*v));
            }
            // A lookup blob is not a delta and vice versa.
            assert!(t.apply_bytes(&blob).is_err());
            assert!(AnyLookup::from_bytes(&stream).is_err());
            assert!(
                AnyControl::build(info.name, Vec::<(Vec<u8>, u64)>::new(), 8, &Opts::parse("nope=1").unwrap()).is_err()
            );
            assert!(ctl.insert(b"x", 256).is_err());
        }
        assert!(AnyControl::build("nosuch", Vec::<(Vec<u8>, u64)>::new(), 8, &Opts::new()).is_err());
    }

    #[test]
    fn split_frames_reports_position() {
        let mut ctl = AnyControl::build("othello", Vec::<(Vec<u8>, u64)>::new(), 8, &Opts::new()).unwrap();
        let mut s = ctl.insert(b"a", 1).unwrap();
        let d2 = ctl.insert(b"b", 2).unwrap();
        let first = s.len();
        s.extend(&d2[..d2.len() - 1]);
        let e = split_frames(&s).unwrap_err().to_string();
        assert!(e.contains(&format!("frame 2 at byte offset {first}")), "{e}");
        assert!(split_frames(b"").unwrap().is_empty());
    }
}
