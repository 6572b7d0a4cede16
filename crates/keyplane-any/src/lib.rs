//! # keyplane-any
//!
//! Type-erased keyplane tables for the front ends (the `keyplane` command,
//! the C library and the Python package): open **any** lookup blob by the
//! kind code in its frame, build **any** structure by name with string
//! options, and move deltas as bytes.
//!
//! Every structure the front ends know is listed once, in the
//! `registry!` invocation in `registry.rs`. Adding a structure is one line
//! there, once its control form implements
//! [`keyplane::describe::Configure`] and its lookup form
//! [`keyplane::describe::Describe`]:
//!
//! ```text
//! Ludo = keyplane::ludo;
//! ```
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

mod registry;

pub use keyplane::describe::AbsentKeys;
pub use keyplane::key::KeyFormat;
pub use registry::{
    AnyControl, AnyLookup, AnyReader, Bfw, Cfw, Cuckoo, Fht, Fpt, KINDS, Ludo, Othello, PartialCuckoo, STRUCTURES,
    SetSep, StructureInfo, identify, label,
};

use keyplane::describe::{Configure, Describe};
use keyplane::ext::wire::{Frame, HEADER_LEN, TRAILER_LEN};
use keyplane::{Error, LookupTable, Result, Wire};

pub use keyplane::describe::Opts;

/// One structure as the front ends see it: its control form implements
/// [`Configure`] (name, options parsed by the structure) and its lookup form
/// [`Describe`]; everything else comes from those two traits. Defined for
/// each registry line.
pub trait Structure: 'static {
    /// The control form.
    type Control: Configure<Lookup = Self::Lookup, Delta = Self::Delta> + keyplane::Snapshot + Send;
    /// The lookup form.
    type Lookup: LookupTable<Delta = Self::Delta> + Describe;
    /// The delta.
    type Delta: Wire;
    /// Name used on the command line and in Python (`"othello"`).
    const NAME: &'static str = <Self::Control as Configure>::NAME;
    /// One-line description (paper and section).
    const SUMMARY: &'static str = <Self::Control as Configure>::SUMMARY;
    /// Build options: `(name, help)`.
    const OPTIONS: &'static [(&'static str, &'static str)] = <Self::Control as Configure>::OPTIONS;
    /// Wire kind of the lookup form.
    const LOOKUP_KIND: keyplane::ext::wire::Kind = <Self::Control as Configure>::LOOKUP_KIND;

    /// Bulk construction with options. A repeated key: the last value wins.
    fn build<I, K>(items: I, value_bits: u32, opts: &Opts) -> Result<Self::Control>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        Self::Control::build_with(items, value_bits, opts)
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

/// Decodes a key given as text in one of the key formats (see
/// [`KeyFormat::parse`]).
pub fn parse_key(format: KeyFormat, s: &str) -> std::result::Result<Vec<u8>, String> {
    format.parse(s)
}

/// Parses `123` or `0x7b` as u64.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_parse_and_check() {
        let o = Opts::parse("fingerprint-bits=8, emptiness=true").unwrap();
        assert_eq!(o.iter().collect::<Vec<_>>(), vec![("fingerprint_bits", "8"), ("emptiness", "true")]);
        assert!(Opts::parse("novalue").is_err());
        assert!(o.check_known("x", &[("fingerprint_bits", "")]).is_err());
        assert_eq!(Opts::parse(&o.render()).unwrap(), o);
    }

    /// Every kind is declared by its structure, once: codes are distinct,
    /// follow `structure << 8 | role`, and the frames each structure writes
    /// carry its own declared kinds, which `identify` names.
    #[test]
    fn kinds_are_owned_by_the_structures_and_identified() {
        let mut codes: Vec<u16> = KINDS.iter().map(|k| k.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), KINDS.len(), "a kind code is declared twice");
        assert_eq!(KINDS.len(), 3 * STRUCTURES.len() + 6);
        for s in STRUCTURES {
            let mut c = AnyControl::build(s.name, [(b"k1", 1u64), (b"k2", 2)], 8, &Opts::new()).unwrap();
            let blob = c.export().to_bytes();
            let delta = c.insert(b"k3", 3).unwrap();
            let snap = c.snapshot();
            for (bytes, role, what) in [(&blob, 1, "lookup"), (&delta, 2, "delta"), (&snap, 3, "control snapshot")] {
                let kind = Frame::inspect(bytes).unwrap().kind;
                assert_eq!(kind.code() & 0xff, role, "{} {what}", s.name);
                assert_eq!(kind.code() >> 8, s.lookup_kind.code() >> 8, "{} {what}: one structure byte", s.name);
                let k = identify(kind.code()).unwrap_or_else(|| panic!("{} {what} not identified", s.name));
                assert!(k.label().ends_with(what), "{}: {:?}", s.name, k);
                assert_eq!(label(kind), k.label());
            }
            assert_eq!(AnyLookup::from_bytes(&blob).unwrap().kind(), s.lookup_kind);
            // Every delta carries its table's lineage and sequence number.
            let head = keyplane::lineage::delta_head(&delta).unwrap().unwrap();
            assert_eq!((head.lineage, head.seq), (Some(c.lineage()), 1), "{}", s.name);
        }
        assert_eq!(identify(0xffff), None);
        assert_eq!(
            label(
                Frame::inspect(&keyplane::ext::wire::Writer::new(keyplane::ext::wire::Kind::new(0x7702, "x")).finish())
                    .unwrap()
                    .kind
            ),
            "delta"
        );
    }

    /// A delta where a lookup blob is expected (and the reverse) is refused
    /// with both objects named by their structure's labels.
    #[test]
    fn wrong_kind_errors_name_the_found_object() {
        let mut c = AnyControl::build("othello", [(b"a", 1u64)], 8, &Opts::new()).unwrap();
        let t = c.export();
        let delta = c.insert(b"b", 2).unwrap();
        match AnyLookup::from_bytes(&delta) {
            Err(Error::KindMismatch { expected, found }) => {
                assert_eq!((expected.as_str(), found.as_str()), ("a lookup blob", "othello delta"))
            }
            other => panic!("{other:?}"),
        }
        match t.apply_bytes(&t.to_bytes()) {
            Err(Error::KindMismatch { expected, found }) => {
                assert_eq!((expected.as_str(), found.as_str()), ("othello delta", "othello lookup"))
            }
            other => panic!("{other:?}"),
        }
        use keyplane::ControlTable;
        let lpm =
            keyplane::lpm::Control::from_prefixes([("10.0.0.0/8".parse::<keyplane::lpm::Prefix>().unwrap(), 1)], 8)
                .unwrap()
                .export()
                .to_bytes();
        assert!(matches!(AnyLookup::from_bytes(&lpm), Err(Error::Unsupported(m)) if m.starts_with("lpm lookup blobs")));
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
            // BFW's Bloom filters and partial-key cuckoo's fingerprints may
            // name another value for a stored key: there the oracle is
            // "present, and every read path agrees".
            let exact = t.exact_for_stored_keys();
            assert_eq!(exact, !["bfw", "cuckoo-partial"].contains(&info.name));
            assert_eq!(t.value_bits(), Some(8));
            assert_eq!(t.table_id(), ctl.lineage().id);
            let want = |v: u64, got: Option<u64>| if exact { got == Some(v) } else { got.is_some() };
            for (k, v) in &items {
                assert!(want(*v, t.get(k)), "{}: {:?} for {v}", info.name, t.get(k));
                assert_eq!(reader.get(k), t.get(k));
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
                let k = (1000 + i).to_le_bytes();
                assert!(want(i, t.get(&k)), "{}", info.name);
                assert_eq!(reader.get(&k), t.get(&k), "{}: reader missed a delta", info.name);
            }
            let keys: Vec<&[u8]> = items.iter().skip(1).map(|(k, _)| k.as_slice()).collect();
            let mut out = vec![None; keys.len()];
            t.get_batch(&keys, &mut out);
            for (o, (k, v)) in out.iter().zip(items.iter().skip(1)) {
                assert!(want(*v, *o) && *o == t.get(k));
            }
            out.fill(None);
            reader.get_batch(&keys, &mut out);
            for (o, (k, v)) in out.iter().zip(items.iter().skip(1)) {
                assert!(want(*v, *o) && *o == t.get(k));
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
