//! Control-plane state for `keyplane update`: the control form's snapshot
//! ([`keyplane::Snapshot`]), so an update loads it, applies the new
//! operations and saves it again — O(update) work, no rebuild (version 3).
//!
//! File layout (little-endian), checksummed like every keyplane object:
//!
//! ```text
//! "KPCS" u16 version=3
//! structure name, options (`a=1,b=2`, including `seed`): u32 length + bytes each
//! value_bits u32
//! updates recorded since the build: u64
//! control snapshot: u64 length + bytes (framed and checksummed itself; its
//!   prologue holds the table id, the last delta number and the key format)
//! u64 XXH3 of all bytes before it
//! ```
//!
//! Version 2 files (written by older builds) hold the items the table was
//! built from plus a journal of every update since; they are still read
//! (the control form is rebuilt from them once) and are rewritten as
//! version 3 by the next `update`:
//!
//! ```text
//! "KPCS" u16 version=2
//! structure name, options: u32 length + bytes each
//! value_bits u32
//! table id: 16 bytes (u128 little-endian); key format: u8 (0 = not recorded)
//! base items: u64 count, then per item u32 key length, key, u64 value
//! journal:    u64 count, then per op u8 (1 = set, 2 = del), u32 key length, key, [u64 value]
//! u64 XXH3 of the lookup blob the state exports (replay check)
//! u64 XXH3 of all bytes before it
//! ```

use crate::CliError;
use crate::input::Op;
use keyplane::ext::wire::{Reader, checksum};
use keyplane_any::{AnyControl, Opts};

const MAGIC: &[u8; 4] = b"KPCS";
/// The version this build writes.
const VERSION: u16 = 3;
/// The journal format, still read (and migrated by the next `update`).
const LEGACY_VERSION: u16 = 2;

/// A loaded control state: a snapshot (version 3) or a legacy journal.
pub struct State {
    /// Structure name.
    pub structure: String,
    /// Build options.
    pub opts: Opts,
    /// Value width.
    pub value_bits: u32,
    /// Table id and key format (from the snapshot's prologue, or the
    /// legacy header), so deltas fit the blob.
    pub lineage: keyplane::lineage::Lineage,
    /// Updates recorded since the build.
    pub updates: u64,
    /// What the control form is restored from.
    pub body: Body,
}

/// How a [`State`] holds its control form.
pub enum Body {
    /// A control-form snapshot (version 3).
    Snapshot(Vec<u8>),
    /// Version 2: the items the table was built from, the journal of every
    /// update since, and the checksum of the lookup blob it exports.
    Legacy(Legacy),
}

/// A version 2 state.
pub struct Legacy {
    /// Items the table was built from.
    pub base: Vec<(Vec<u8>, u64)>,
    /// Updates since.
    pub journal: Vec<Op>,
    /// Checksum of the exported lookup blob when saved.
    pub export_sum: u64,
}

impl State {
    /// The state of a control form (written by `build --control` and `update`).
    pub fn of(structure: &str, opts: &Opts, ctl: &AnyControl, updates: u64) -> Self {
        State {
            structure: structure.to_string(),
            opts: opts.clone(),
            value_bits: ctl.value_bits(),
            lineage: ctl.lineage(),
            updates,
            body: Body::Snapshot(ctl.snapshot()),
        }
    }

    /// Restores the control form: loads the snapshot (no rebuild, no
    /// rehash), or replays a legacy journal.
    pub fn control(&self, path: &str) -> Result<AnyControl, CliError> {
        match &self.body {
            Body::Snapshot(b) => {
                let ctl = AnyControl::from_snapshot(b).map_err(|e| CliError::lib(path, e))?;
                if ctl.name() != self.structure || ctl.value_bits() != self.value_bits {
                    return Err(CliError::blob(path, "the control snapshot does not match the state's header"));
                }
                Ok(ctl)
            }
            Body::Legacy(l) => l.replay(self, path),
        }
    }

    /// Encodes the state (version 3; a legacy state encodes as version 2).
    pub fn to_bytes(&self) -> Vec<u8> {
        let legacy = match &self.body {
            Body::Legacy(l) => l,
            Body::Snapshot(snap) => {
                let mut b = Vec::with_capacity(64 + snap.len());
                b.extend_from_slice(MAGIC);
                b.extend_from_slice(&VERSION.to_le_bytes());
                for s in [self.structure.as_bytes(), self.opts.render().as_bytes()] {
                    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    b.extend_from_slice(s);
                }
                b.extend_from_slice(&self.value_bits.to_le_bytes());
                b.extend_from_slice(&self.updates.to_le_bytes());
                b.extend_from_slice(&(snap.len() as u64).to_le_bytes());
                b.extend_from_slice(snap);
                let sum = checksum(&b);
                b.extend_from_slice(&sum.to_le_bytes());
                return b;
            }
        };
        legacy.to_bytes(self)
    }
}

impl Legacy {
    /// Encodes a version 2 state.
    fn to_bytes(&self, st: &State) -> Vec<u8> {
        let mut b = Vec::with_capacity(64 + self.base.len() * 24);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&LEGACY_VERSION.to_le_bytes());
        for s in [st.structure.as_bytes(), st.opts.render().as_bytes()] {
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s);
        }
        b.extend_from_slice(&st.value_bits.to_le_bytes());
        b.extend_from_slice(&st.lineage.id.as_u128().to_le_bytes());
        b.push(st.lineage.key_format.map_or(0, |f| f.code()));
        b.extend_from_slice(&(self.base.len() as u64).to_le_bytes());
        for (k, v) in &self.base {
            b.extend_from_slice(&(k.len() as u32).to_le_bytes());
            b.extend_from_slice(k);
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(self.journal.len() as u64).to_le_bytes());
        for op in &self.journal {
            let (tag, k) = match op {
                Op::Set(k, _) => (1u8, k),
                Op::Del(k) => (2u8, k),
            };
            b.push(tag);
            b.extend_from_slice(&(k.len() as u32).to_le_bytes());
            b.extend_from_slice(k);
            if let Op::Set(_, v) = op {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b.extend_from_slice(&self.export_sum.to_le_bytes());
        let sum = checksum(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        b
    }
}

impl State {
    /// Decodes a state file; `path` names it in errors.
    pub fn from_bytes(path: &str, bytes: &[u8]) -> Result<Self, CliError> {
        let bad = |m: String| CliError::blob(path, &format!("not a valid control state: {m}"));
        if bytes.len() < 14 || &bytes[..4] != MAGIC {
            return Err(bad("bad magic bytes (expected a file written by `keyplane build --control`)".into()));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        let mut sb = [0u8; 8];
        sb.copy_from_slice(sum);
        if checksum(body) != u64::from_le_bytes(sb) {
            return Err(bad("checksum mismatch: the file is corrupted".into()));
        }
        let e = |x: keyplane::Error| bad(x.to_string());
        let mut r = Reader::over(&body[4..]);
        let v = r.u16().map_err(e)?;
        if v != VERSION && v != LEGACY_VERSION {
            return Err(bad(format!("version {v}, this build reads {LEGACY_VERSION} and {VERSION}")));
        }
        let utf8 = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| bad("name is not UTF-8".into()));
        let structure = utf8(r.bytes().map_err(e)?)?;
        let opts = Opts::parse(&utf8(r.bytes().map_err(e)?)?).map_err(e)?;
        let value_bits = r.u32().map_err(e)?;
        if v == VERSION {
            let updates = r.u64().map_err(e)?;
            let n = r.count(1).map_err(e)?;
            let snap = r.raw(n).map_err(e)?.to_vec();
            r.finish().map_err(e)?;
            let info = keyplane::snapshot::peek(&snap).map_err(e)?;
            let lineage =
                info.lineage.ok_or_else(|| e(keyplane::Error::Corrupt("snapshot without a lineage".into())))?;
            let body = Body::Snapshot(snap);
            return Ok(State { structure, opts, value_bits, lineage, updates, body });
        }
        let lo = r.u64().map_err(e)? as u128;
        let hi = r.u64().map_err(e)? as u128;
        let key_format = match r.u8().map_err(e)? {
            0 => None,
            c => Some(keyplane::key::KeyFormat::from_code(c).ok_or_else(|| bad(format!("unknown key format {c}")))?),
        };
        let lineage = keyplane::lineage::Lineage { id: keyplane::TableId::from_u128(hi << 64 | lo), key_format };
        let n = r.count(12).map_err(e)?;
        let mut base = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.bytes().map_err(e)?.to_vec();
            base.push((k, r.u64().map_err(e)?));
        }
        let m = r.count(5).map_err(e)?;
        let mut journal = Vec::with_capacity(m);
        for _ in 0..m {
            let tag = r.u8().map_err(e)?;
            let k = r.bytes().map_err(e)?.to_vec();
            journal.push(match tag {
                1 => Op::Set(k, r.u64().map_err(e)?),
                2 => Op::Del(k),
                t => return Err(bad(format!("unknown journal operation {t}"))),
            });
        }
        let export_sum = r.u64().map_err(e)?;
        r.finish().map_err(e)?;
        let updates = journal.len() as u64;
        let body = Body::Legacy(Legacy { base, journal, export_sum });
        Ok(State { structure, opts, value_bits, lineage, updates, body })
    }
}

impl Legacy {
    /// Rebuilds the control form: build from the base items, replay the
    /// journal, and check that the result exports the blob recorded at save
    /// time (so deltas computed from it fit the deployed table).
    fn replay(&self, st: &State, path: &str) -> Result<AnyControl, CliError> {
        let mut ctl = AnyControl::build(&st.structure, self.base.iter().map(|(k, v)| (k, *v)), st.value_bits, &st.opts)
            .map_err(|e| CliError::lib(path, e))?;
        ctl.set_lineage(st.lineage);
        for op in &self.journal {
            apply_op(&mut ctl, op).map_err(|e| CliError::lib(path, e))?;
        }
        let sum = checksum(&ctl.export().to_bytes());
        if sum != self.export_sum {
            return Err(CliError::blob(
                path,
                "replaying the control state did not reproduce the saved table (was the file edited, or is the structure not deterministic?)",
            ));
        }
        Ok(ctl)
    }
}

/// Applies one operation to a control form; returns the delta (none for
/// removing an absent key).
pub fn apply_op(ctl: &mut AnyControl, op: &Op) -> keyplane::Result<Option<Vec<u8>>> {
    match op {
        Op::Set(k, v) => ctl.insert(k, *v).map(Some),
        Op::Del(k) => ctl.remove(k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy() -> State {
        State {
            structure: "othello".into(),
            opts: Opts::parse("filtered=8").unwrap(),
            value_bits: 8,
            lineage: keyplane::lineage::Lineage { id: keyplane::TableId::from_seed(3), key_format: None },
            updates: 2,
            body: Body::Legacy(Legacy {
                base: (0..50u64).map(|i| (i.to_le_bytes().to_vec(), i)).collect(),
                journal: vec![Op::Set(b"x".to_vec(), 3), Op::Del(b"y".to_vec())],
                export_sum: 42,
            }),
        }
    }

    fn current() -> State {
        let opts = Opts::parse("filtered=8").unwrap();
        let mut ctl = AnyControl::build("othello", (0..50u64).map(|i| (i.to_le_bytes(), i)), 8, &opts).unwrap();
        ctl.insert(b"x", 3).unwrap();
        State::of("othello", &opts, &ctl, 1)
    }

    #[test]
    fn legacy_round_trip_and_replay_check() {
        let s = legacy();
        let b = s.to_bytes();
        let d = State::from_bytes("f", &b).unwrap();
        let Body::Legacy(l) = &d.body else { panic!("a version 2 file reads as legacy") };
        assert_eq!((d.structure.as_str(), d.value_bits, l.base.len(), l.journal.len()), ("othello", 8, 50, 2));
        assert_eq!(d.updates, 2);
        // The recorded export checksum is wrong on purpose: replay must notice.
        let e = d.control("f").unwrap_err();
        assert_eq!(e.code, 4);
        assert!(e.msg.contains("did not reproduce the saved table"), "{}", e.msg);
    }

    #[test]
    fn legacy_state_migrates_to_a_snapshot() {
        let opts = Opts::parse("filtered=8,seed=5").unwrap();
        let base: Vec<(Vec<u8>, u64)> = (0..50u64).map(|i| (i.to_le_bytes().to_vec(), i)).collect();
        let journal = vec![Op::Set(b"x".to_vec(), 3), Op::Del(0u64.to_le_bytes().to_vec())];
        let mut ctl = AnyControl::build("othello", base.iter().map(|(k, v)| (k, *v)), 8, &opts).unwrap();
        let lineage = keyplane::lineage::Lineage { id: keyplane::TableId::from_seed(3), key_format: None };
        ctl.set_lineage(lineage);
        for op in &journal {
            apply_op(&mut ctl, op).unwrap();
        }
        let export_sum = checksum(&ctl.export().to_bytes());
        let old = State {
            structure: "othello".into(),
            opts: opts.clone(),
            value_bits: 8,
            lineage,
            updates: 2,
            body: Body::Legacy(Legacy { base, journal, export_sum }),
        };
        let read = State::from_bytes("f", &old.to_bytes()).unwrap();
        let replayed = read.control("f").unwrap();
        let new = State::of("othello", &opts, &replayed, read.updates);
        let back = State::from_bytes("f", &new.to_bytes()).unwrap();
        assert!(matches!(back.body, Body::Snapshot(_)));
        assert_eq!((back.lineage, back.updates), (lineage, 2));
        assert!(back.control("f").unwrap().export().to_bytes() == ctl.export().to_bytes());
    }

    #[test]
    fn snapshot_state_round_trips_and_restores_the_control_form() {
        let s = current();
        let d = State::from_bytes("f", &s.to_bytes()).unwrap();
        assert_eq!((d.structure.as_str(), d.value_bits, d.updates), ("othello", 8, 1));
        assert_eq!(d.lineage, s.lineage);
        let ctl = d.control("f").unwrap();
        assert_eq!((ctl.len(), ctl.get(b"x")), (51, Some(3)));
        assert_eq!(d.to_bytes(), s.to_bytes());
    }

    #[test]
    fn truncations_flips_and_garbage_are_errors_not_panics() {
        for b in [legacy().to_bytes(), current().to_bytes()] {
            for n in 0..b.len() {
                assert!(State::from_bytes("f", &b[..n]).is_err(), "truncation at {n}");
            }
            for i in 0..b.len() {
                let mut c = b.clone();
                c[i] ^= 0x10;
                assert!(State::from_bytes("f", &c).is_err(), "flip at {i}");
            }
        }
        // Garbage bodies with a valid magic and checksum: decoding must fail cleanly.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for version in [b"\x02\x00", b"\x03\x00"] {
            for len in 0..300usize {
                let mut body = b"KPCS".to_vec();
                body.extend_from_slice(version);
                for _ in 0..len {
                    x = keyplane::hash::mix64(x);
                    body.push(x as u8);
                }
                let sum = checksum(&body);
                body.extend_from_slice(&sum.to_le_bytes());
                if let Ok(st) = State::from_bytes("f", &body) {
                    let _ = st.control("f");
                }
            }
        }
    }
}
