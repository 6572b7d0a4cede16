//! Table identity and delta sequencing, shared by every structure.
//!
//! A *lineage* is one control form and every lookup form exported from it:
//! they share a random 128-bit [`TableId`] drawn when the control form is
//! created and the [`KeyFormat`] its keys are written in ([`Lineage`]), and
//! count the deltas they have produced or applied. Every lookup blob and
//! every delta starts its payload with the same prologue,
//! `table id (16 bytes) | sequence number (8 bytes) | key format (1 byte, 0 = not recorded)`,
//! written and read here
//! (`write_prologue`, `read_prologue`), and every lookup form accepts a
//! delta only through `check_next`: same table id, sequence number exactly
//! one past its own. A delta from another table, a lost or repeated delta,
//! and a sequence number that cannot follow (0, or anything after
//! `u64::MAX`) are all [`Error::DeltaMismatch`], never a panic or a silent
//! change. A whole-table replacement (a rebuild delta) keeps the table id: it
//! continues the same lineage.

use crate::error::{Error, Result};
use crate::key::KeyFormat;
use crate::wire::{Reader, Writer};
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// The identity of one table lineage (a control form and the lookup forms
/// exported from it). Random by default; derived from a seed for reproducible
/// builds ([`TableId::from_seed`]).
///
/// ```
/// use keyplane::TableId;
/// assert_ne!(TableId::random(), TableId::random());
/// assert_eq!(TableId::from_seed(7), TableId::from_seed(7));
/// assert_eq!(TableId::from_seed(7).to_string().len(), 32);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(u128);

impl TableId {
    /// A fresh random id (operating-system entropy, a process-wide counter
    /// and the clock, mixed).
    pub fn random() -> Self {
        TableId(random_u128())
    }

    /// The id a table built with hash seed `seed` gets when reproducible
    /// output is asked for (e.g. `keyplane build --seed`). Two tables built
    /// with the same seed are the same lineage: do not mix their deltas.
    pub fn from_seed(seed: u64) -> Self {
        let a = crate::hash::mix64(seed ^ 0x7ab1_e1d0_0000_0001);
        let b = crate::hash::mix64(a ^ 0x7ab1_e1d0_0000_0002);
        TableId(((a as u128) << 64) | b as u128)
    }

    /// The id from its 128-bit value.
    pub const fn from_u128(v: u128) -> Self {
        TableId(v)
    }

    /// The 128-bit value.
    pub const fn as_u128(self) -> u128 {
        self.0
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableId({:032x})", self.0)
    }
}

/// What every lookup form, delta and control form of one table carries: the
/// table id and the key format (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lineage {
    /// The table id.
    pub id: TableId,
    /// How the keys are written as text, when the builder said so.
    pub key_format: Option<KeyFormat>,
}

impl Lineage {
    /// A new lineage with a random id and no recorded key format.
    pub(crate) fn random() -> Self {
        Lineage { id: TableId::random(), key_format: None }
    }

    /// The lineage of structures embedded in others and only ever replaced
    /// whole (the Concury core's per-VIP Othello maps).
    pub(crate) const EMBEDDED: Lineage = Lineage { id: TableId(0), key_format: None };
}

fn random_u128() -> u128 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    // `RandomState` keys come from the operating system's random source
    // (once per thread, then incremented per instance).
    let word = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(n);
        h.write_u128(t);
        h.finish()
    };
    ((word(1) as u128) << 64) | word(2) as u128
}

/// A random 64-bit hash seed, for control forms created without one.
pub fn random_seed() -> u64 {
    random_u128() as u64
}

/// Checks that a delta `(table, seq)` may follow a lookup form at
/// `(have_table, have_seq)`: same lineage, sequence number exactly one past
/// the current one. Every structure's `apply` goes through this check.
pub(crate) fn check_next(have: Lineage, have_seq: u64, delta: Lineage, seq: u64) -> Result<()> {
    let (have_table, table) = (have.id, delta.id);
    if table != have_table {
        return Err(Error::DeltaMismatch(format!(
            "delta belongs to table {table}, this table is {have_table}; apply deltas only to tables exported \
             from the control form that made them"
        )));
    }
    check_seq(have_seq, seq)
}

/// The sequence-number half of `check_next` (also used for Ludo's embedded
/// bucket-locator deltas, whose table id is Ludo's).
pub(crate) fn check_seq(have_seq: u64, seq: u64) -> Result<()> {
    match have_seq.checked_add(1) {
        None => Err(Error::DeltaMismatch(format!(
            "table is at the last sequence number {have_seq}; no delta can follow (reload a fresh blob)"
        ))),
        Some(next) if next == seq => Ok(()),
        Some(next) => Err(Error::DeltaMismatch(format!(
            "expected delta #{next}, got #{seq}; a delta was lost or repeated (reload a fresh blob)"
        ))),
    }
}

/// The sequence number of a control form's next delta. Saturates at
/// `u64::MAX`: a lookup form never accepts a delta after that number, so a
/// control form that reached it must be rebuilt (after 2^64 updates).
pub(crate) fn bump(seq: &mut u64) -> u64 {
    *seq = seq.saturating_add(1);
    *seq
}

/// Size of the prologue every lookup blob and delta payload starts with.
#[cfg(feature = "conformance")]
pub(crate) const PROLOGUE_LEN: usize = 25;

/// Writes the lineage prologue: table id, sequence number, key format.
pub(crate) fn write_prologue(w: &mut Writer, table: Lineage, seq: u64) {
    let id = table.id.0;
    w.u64(id as u64).u64((id >> 64) as u64).u64(seq).u8(table.key_format.map_or(0, KeyFormat::code));
}

/// Reads the lineage prologue written by `write_prologue`.
pub(crate) fn read_prologue(r: &mut Reader<'_>) -> Result<(Lineage, u64)> {
    let lo = r.u64()? as u128;
    let hi = r.u64()? as u128;
    let seq = r.u64()?;
    let code = r.u8()?;
    let key_format = match code {
        0 => None,
        c => Some(KeyFormat::from_code(c).ok_or_else(|| Error::Corrupt(format!("unknown key format code {c}")))?),
    };
    Ok((Lineage { id: TableId(hi << 64 | lo), key_format }, seq))
}

/// Where a framed delta or control snapshot belongs, read from its head
/// without decoding the body: see [`delta_head`] and
/// [`crate::snapshot::peek`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The object's kind.
    pub kind: crate::wire::Kind,
    /// Table id and key format, for objects that start with the lineage
    /// prologue (every snapshot); `None` for LPM deltas (which carry their
    /// own 64-bit table tag).
    pub lineage: Option<Lineage>,
    /// Sequence number: a delta applies to a lookup form at `seq - 1`; a
    /// snapshot's control form emitted deltas up to `seq`.
    pub seq: u64,
}

/// The lineage and sequence number of a framed delta, decoded the same way
/// the structures' own `from_bytes` do (frame checked first: magic,
/// version, length, checksum). `Ok(None)` for a valid framed object that is
/// not a delta (a lookup blob or a control snapshot). Consumers that route or order deltas (a switch's
/// update source, a subscriber) use this instead of reading fixed offsets.
///
/// ```
/// use keyplane::{ControlTable, Wire};
/// let mut c = keyplane::othello::Control::with_value_bits(8).unwrap();
/// let d = c.insert(b"k", 1).unwrap();
/// let head = keyplane::lineage::delta_head(&d.to_bytes()).unwrap().unwrap();
/// assert_eq!(head.seq, 1);
/// assert_eq!(head.lineage, Some(c.lineage()));
/// assert_eq!(keyplane::lineage::delta_head(&c.export().to_bytes()).unwrap(), None);
/// ```
pub fn delta_head(bytes: &[u8]) -> Result<Option<Head>> {
    use crate::wire::Frame;
    let kind = Frame::inspect(bytes)?.kind;
    let mut r = Frame::open(bytes, kind)?;
    if kind.role() != 2 {
        return Ok(None);
    }
    // Every delta starts with the lineage prologue but LPM's, which starts
    // with its sequence number (and carries its own 64-bit table tag).
    if kind == crate::lpm::DELTA_KIND {
        return Ok(Some(Head { kind, lineage: None, seq: r.u64()? }));
    }
    let (lineage, seq) = read_prologue(&mut r)?;
    Ok(Some(Head { kind, lineage: Some(lineage), seq }))
}

/// What every structure's delta tells about itself (one trait instead of
/// the same three accessors on each `Delta`).
///
/// ```
/// use keyplane::lineage::DeltaInfo;
/// use keyplane::{ControlTable, othello};
///
/// let mut ctl = othello::Control::with_value_bits(8)?;
/// let d = ctl.insert(b"k", 1)?;
/// assert_eq!((d.table_id(), d.seq()), (ctl.table_id(), 1));
/// # Ok::<(), keyplane::Error>(())
/// ```
pub trait DeltaInfo {
    /// The table (lineage) the delta belongs to; other tables refuse it.
    fn table_id(&self) -> TableId;
    /// Its sequence number: a lookup form at `seq - 1` applies it.
    fn seq(&self) -> u64;
    /// True when it replaces the whole table (growth, rebuild) rather than patching it.
    fn is_rebuild(&self) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_edges_are_errors_not_panics() {
        let t = Lineage { id: TableId::from_seed(1), key_format: None };
        assert!(check_next(t, 0, t, 1).is_ok());
        assert!(check_next(t, u64::MAX - 1, t, u64::MAX).is_ok());
        for (have, got) in [(0, 0), (0, u64::MAX), (5, 0), (5, u64::MAX), (u64::MAX, 0), (u64::MAX, u64::MAX)] {
            assert!(matches!(check_next(t, have, t, got), Err(Error::DeltaMismatch(_))), "{have} -> {got}");
        }
        let other = Lineage { id: TableId::from_seed(2), ..t };
        assert!(matches!(check_next(t, 0, other, 1), Err(Error::DeltaMismatch(_))));
        let mut s = u64::MAX - 1;
        assert_eq!(bump(&mut s), u64::MAX);
        assert_eq!(bump(&mut s), u64::MAX);
    }

    #[test]
    fn prologue_round_trips() {
        let t = Lineage { id: TableId::random(), key_format: Some(KeyFormat::Ipv4) };
        let mut w = Writer::new(crate::othello::DELTA_KIND);
        write_prologue(&mut w, t, 42);
        let b = w.finish();
        let mut r = crate::wire::Frame::open(&b, crate::othello::DELTA_KIND).unwrap();
        assert_eq!(read_prologue(&mut r).unwrap(), (t, 42));
    }
}
