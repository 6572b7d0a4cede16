//! The FIB: a keyplane lookup form chosen by the blob (Othello/OFW, CFW,
//! cuckoo, Ludo, ...), swapped atomically as a whole and patched in place by
//! deltas.
//!
//! What the switch needs from a structure beyond `get` / `get_batch` /
//! `reader` is whether it can tell a destination it does not hold
//! ([`Fib::tells_absent`]): OFW with fingerprint or emptiness bits (thesis
//! §3.4.3), CFW (fingerprints, eq. 3.8), cuckoo (full keys) and Ludo with
//! fingerprints can; plain Othello (Concise §VII-A) cannot and answers an
//! arbitrary port for an alien MAC.

use crate::error::{Result, SwitchError};
use arc_swap::ArcSwap;
use keyplane::describe::Describe;
use keyplane::ext::wire::Frame;
use keyplane::{ControlTable, cfw, cuckoo, ludo, othello};
use keyplane_any::{AnyControl, AnyLookup, Opts};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One lookup form serving as a FIB.
#[derive(Debug)]
pub struct Fib {
    table: AnyLookup,
    tells_absent: bool,
}

impl Fib {
    /// Wraps a lookup form.
    pub fn new(table: AnyLookup) -> Self {
        let tells_absent = match &table {
            AnyLookup::Othello(l) => l.fingerprint_bits() > 0 || l.has_emptiness(),
            AnyLookup::Cfw(_) | AnyLookup::Cuckoo(_) | AnyLookup::Fht(_) => true,
            AnyLookup::Ludo(l) => l.fingerprint_bits() > 0,
            t => t.rejects_aliens(),
        };
        Self { table, tells_absent }
    }

    /// Decodes a lookup blob of any kind (`what` names it in errors).
    pub fn from_bytes(what: &str, bytes: &[u8]) -> Result<Self> {
        AnyLookup::from_bytes(bytes).map(Self::new).map_err(|e| SwitchError::table(what, e))
    }

    /// The lookup form.
    #[inline]
    pub fn table(&self) -> &AnyLookup {
        &self.table
    }

    /// True when the structure answers `None` for (almost all) keys it does
    /// not hold; false for plain Othello, whose answer for an alien key is an
    /// arbitrary value.
    pub fn tells_absent(&self) -> bool {
        self.tells_absent
    }

    /// Sequence number of the last delta applied, for structures whose
    /// lookup form exposes it (Othello, CFW, cuckoo, Ludo).
    pub fn seq(&self) -> Option<u64> {
        match &self.table {
            AnyLookup::Othello(l) => Some(l.seq()),
            AnyLookup::Cfw(l) => Some(l.seq()),
            AnyLookup::Cuckoo(l) => Some(l.seq()),
            AnyLookup::Ludo(l) => Some(l.seq()),
            _ => None,
        }
    }

    /// Value width in bits, when the structure exposes it.
    pub fn value_bits(&self) -> Option<u32> {
        match &self.table {
            AnyLookup::Cfw(l) => Some(l.value_bits()),
            AnyLookup::Cuckoo(l) => Some(l.value_bits()),
            AnyLookup::Ludo(l) => Some(l.value_bits()),
            t => t.value_bits(),
        }
    }

    /// An empty control form of the same structure and slot layout (value,
    /// fingerprint and emptiness bits) as this FIB: the learning control
    /// side starts from it.
    pub fn empty_control(&self) -> Result<AnyControl> {
        let bad = |e| SwitchError::table("an empty control form for the FIB", e);
        Ok(match &self.table {
            AnyLookup::Othello(l) => {
                let o = othello::Options {
                    fingerprint_bits: l.fingerprint_bits(),
                    emptiness: l.has_emptiness(),
                    ..othello::Options::default()
                };
                AnyControl::Othello(othello::Control::with_options(l.value_bits(), o).map_err(bad)?)
            }
            AnyLookup::Cfw(l) => AnyControl::Cfw(
                cfw::Control::with_options(l.value_bits(), cfw::Options::with_fingerprint_bits(l.fingerprint_bits()))
                    .map_err(bad)?,
            ),
            AnyLookup::Cuckoo(l) => AnyControl::Cuckoo(cuckoo::Control::with_value_bits(l.value_bits()).map_err(bad)?),
            AnyLookup::Ludo(l) => {
                let o = ludo::Options { fingerprint_bits: l.fingerprint_bits(), ..ludo::Options::default() };
                AnyControl::Ludo(ludo::Control::with_options(l.value_bits(), o).map_err(bad)?)
            }
            t => {
                let bits = self.value_bits().ok_or_else(|| {
                    SwitchError::config(format!(
                        "learning needs the FIB's value width, which a {} blob does not expose; use othello, cfw, cuckoo or ludo",
                        t.name()
                    ))
                })?;
                AnyControl::empty(t.name(), bits, &Opts::new()).map_err(bad)?
            }
        })
    }
}

/// Kind of a framed object: a whole lookup blob or one delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A lookup blob (replaces the FIB).
    Blob,
    /// A delta; `seq` is its sequence number when the structure's delta
    /// format starts with one (Othello, CFW, cuckoo, Ludo).
    Delta {
        /// The delta's sequence number.
        seq: Option<u64>,
    },
}

/// Classifies a framed keyplane object (checks magic, version, length and
/// checksum first). The sequence number comes from the core's one decode of
/// a delta's head (`keyplane::lineage::delta_head`).
pub fn classify(bytes: &[u8]) -> keyplane::Result<ObjectKind> {
    if let Some(h) = keyplane::lineage::delta_head(bytes)? {
        return Ok(ObjectKind::Delta { seq: Some(h.seq) });
    }
    let info = Frame::inspect(bytes)?;
    Ok(if info.kind.label().ends_with("delta") { ObjectKind::Delta { seq: None } } else { ObjectKind::Blob })
}

/// The running FIB shared by the packet workers and the control side:
/// whole-FIB swaps are one atomic pointer store (RCU through `arc-swap`),
/// deltas are applied in place to the current lookup form by the single
/// writer (the control side) while workers keep reading.
#[derive(Debug)]
pub struct FibCell {
    cur: ArcSwap<Fib>,
    swaps: AtomicU64,
}

impl FibCell {
    /// A cell holding `fib`.
    pub fn new(fib: Fib) -> Self {
        Self { cur: ArcSwap::from_pointee(fib), swaps: AtomicU64::new(0) }
    }

    /// The current FIB (cheap; hold it for one burst).
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<Fib>> {
        self.cur.load()
    }

    /// Replaces the FIB as a whole; readers move to it at their next load.
    pub fn swap(&self, fib: Fib) {
        self.cur.store(Arc::new(fib));
        self.swaps.fetch_add(1, Ordering::Relaxed);
    }

    /// Number of whole-FIB swaps so far.
    pub fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }
}
