//! # keyplane
//!
//! Compact, fast, dynamic key → value lookup tables for network data planes.
//!
//! Every structure exists in two forms:
//!
//! * a **control form** ([`ControlTable`]) that keeps the full key/value state,
//!   runs construction and updates, and emits compact **deltas**;
//! * a **lookup form** ([`LookupTable`]) — the small data-plane part that
//!   answers lookups, applies deltas in place while other threads keep
//!   reading, and serialises to a versioned, checksummed blob ([`Wire`]).
//!
//! ```
//! use keyplane::{ControlTable, LookupTable, Wire, othello};
//!
//! let mut ctl = othello::Control::with_value_bits(8)?;
//! let delta = ctl.insert(b"10.0.0.1", 5)?;
//! let table = ctl.export();                       // ship table.to_bytes() to a data plane
//! assert_eq!(table.get(b"10.0.0.1"), Some(5));
//! let d2 = ctl.insert(b"10.0.0.2", 7)?;
//! let replica = othello::Lookup::from_bytes(&table.to_bytes())?;
//! replica.apply(&othello::Delta::from_bytes(&d2.to_bytes())?)?;
//! assert_eq!(replica.get(b"10.0.0.2"), Some(7));
//! # let _ = delta;
//! # Ok::<(), keyplane::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod bfw;
pub mod cfw;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod cuckoo;
pub mod describe;
mod engine;
mod error;
pub mod ext;
pub mod fht;
pub mod fpt;
pub mod hash;
pub mod key;
pub mod lb;
pub mod lineage;
pub mod lpm;
pub mod ludo;
pub mod name;
pub mod othello;
pub mod setsep;
pub mod snapshot;
mod store;
mod sync;
pub mod work;

pub(crate) use error::check_value_bits;
pub use error::{Error, Result, check_value, mask};
// The extension modules under their crate-internal paths.
pub(crate) use ext::{bits, mem, wire};
pub use lineage::TableId;
pub use snapshot::Snapshot;
pub use wire::Wire;

/// The control plane of a table: full state, construction, updates, deltas.
pub trait ControlTable: Sized {
    /// Update message for the lookup form.
    type Delta: Wire;
    /// The data-plane form this control form exports.
    type Lookup: LookupTable<Delta = Self::Delta>;

    /// Empty table with default options.
    fn with_value_bits(value_bits: u32) -> Result<Self>;

    /// The table lineage of this control form: a random 128-bit id drawn at
    /// creation and the key format, carried by every delta and exported
    /// lookup form (see [`lineage`]). Lookup forms refuse deltas of any
    /// other lineage.
    fn lineage(&self) -> lineage::Lineage;

    /// Sets the lineage, to restore a saved one or for reproducible builds.
    /// Call it before exporting or emitting deltas: lookup forms exported
    /// earlier keep the old lineage and refuse the new deltas.
    fn set_lineage(&mut self, lineage: lineage::Lineage);

    /// The table id ([`ControlTable::lineage`]).
    fn table_id(&self) -> TableId {
        self.lineage().id
    }

    /// Sets the table id, e.g. [`TableId::from_seed`] for reproducible builds
    /// (see [`ControlTable::set_lineage`]).
    fn set_table_id(&mut self, id: TableId) {
        let l = self.lineage();
        self.set_lineage(lineage::Lineage { id, ..l });
    }

    /// The key format recorded for this table, if any.
    fn key_format(&self) -> Option<key::KeyFormat> {
        self.lineage().key_format
    }

    /// Records how the keys are written (stored in every blob; front ends
    /// read keys this way by default). Call it before exporting.
    fn set_key_format(&mut self, f: Option<key::KeyFormat>) {
        let l = self.lineage();
        self.set_lineage(lineage::Lineage { key_format: f, ..l });
    }

    /// Bulk construction. A repeated key: the last value wins.
    fn from_items<I, K>(items: I, value_bits: u32) -> Result<Self>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>;

    /// Inserts or overwrites. A value wider than `value_bits` is an error, never truncated.
    fn insert(&mut self, key: &[u8], value: u64) -> Result<Self::Delta>;

    /// Removes a key; `None` when it was absent.
    fn remove(&mut self, key: &[u8]) -> Result<Option<Self::Delta>>;

    /// Exact lookup (the control form knows every key).
    fn get(&self, key: &[u8]) -> Option<u64>;

    /// Number of keys.
    fn len(&self) -> usize;

    /// True when the table holds no key.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Width of values in bits.
    fn value_bits(&self) -> u32;

    /// A fresh lookup form reflecting the current state.
    fn export(&self) -> Self::Lookup;

    /// Heap bytes held by the control form.
    fn memory_bytes(&self) -> usize;
}

/// The data plane of a table: lookups, in-place updates, a wire format.
pub trait LookupTable: Wire + Send + Sync {
    /// Update message this lookup form applies.
    type Delta: Wire;
    /// Per-thread read handle, see [`LookupTable::reader`].
    type Reader<'a>: ReadHandle
    where
        Self: 'a;

    /// A per-thread read handle: the same answers as [`LookupTable::get`] and
    /// [`LookupTable::get_batch`], cheaper per call. `&self` lookups pin the
    /// current snapshot with an atomic read-modify-write (a full barrier on
    /// x86, so consecutive lookups cannot overlap their cache misses); a
    /// reader caches the snapshot and checks for a newer one with one plain
    /// load. Deltas applied to the table are visible to its readers. Give
    /// each packet thread its own (`Send`, not `Sync`).
    fn reader(&self) -> Self::Reader<'_>;

    /// `Some(v)` for every inserted key. For a key never inserted: `None` when
    /// the structure can tell (full keys, fingerprints, emptiness bits),
    /// otherwise `Some(arbitrary)`.
    fn get(&self, key: &[u8]) -> Option<u64>;

    /// Looks up many keys at once, with software prefetching where the
    /// structure supports it. `out.len()` must equal `keys.len()`; extra
    /// entries of either are ignored.
    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.get(k);
        }
    }

    /// Same answer as `self.get(&`[`key::u64_key`]`(key))`, for tables whose
    /// keys are 8-byte integers. Othello and SetSep answer it on a path
    /// specialised for the width (no byte-slice hashing, no per-call
    /// snapshot pinning); other structures run the generic `get`.
    #[inline]
    fn get_u64(&self, key: u64) -> Option<u64> {
        self.get(&key::u64_key(key))
    }

    /// [`LookupTable::get_batch`] of 8-byte integer keys: `out[i]` is
    /// `get_u64(keys[i])`. Othello and the full cuckoo map answer it on a
    /// batched path typed for the width; other structures run `get_batch`
    /// on the keys' little-endian bytes. `out.len()` must equal
    /// `keys.len()`; extra entries of either are ignored.
    fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        batch_u64_by_bytes(keys, out, |k, o| self.get_batch(k, o))
    }

    /// Applies a delta in place. One writer at a time (the implementation
    /// serialises writers); any number of threads may keep calling `get`.
    fn apply(&self, delta: &Self::Delta) -> Result<()>;

    /// Every heap byte the lookup form holds.
    fn memory_bytes(&self) -> usize;
}

/// A per-thread read handle on a lookup form ([`LookupTable::reader`]).
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, othello};
///
/// let ctl = othello::Control::from_items([(b"a", 1u64), (b"b", 2)], 4)?;
/// let table = ctl.export();
/// let reader = table.reader(); // one per thread
/// assert_eq!(reader.get(b"b"), Some(2));
/// # Ok::<(), keyplane::Error>(())
/// ```
pub trait ReadHandle: Send {
    /// Same answer as [`LookupTable::get`].
    fn get(&self, key: &[u8]) -> Option<u64>;

    /// Same answers as [`LookupTable::get_batch`].
    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.get(k);
        }
    }

    /// Same answer as [`LookupTable::get_u64`] (`get(&`[`key::u64_key`]`(key))`).
    #[inline]
    fn get_u64(&self, key: u64) -> Option<u64> {
        self.get(&key::u64_key(key))
    }

    /// Same answers as [`LookupTable::get_batch_u64`].
    fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        batch_u64_by_bytes(keys, out, |k, o| self.get_batch(k, o))
    }
}

/// The generic `get_batch_u64`: the keys' little-endian bytes
/// ([`key::u64_key`]) handed to `get_batch` in chunks, on the stack.
pub(crate) fn batch_u64_by_bytes(
    keys: &[u64],
    out: &mut [Option<u64>],
    mut get_batch: impl FnMut(&[&[u8]], &mut [Option<u64>]),
) {
    const CHUNK: usize = 32;
    let n = keys.len().min(out.len());
    let mut bytes = [[0u8; 8]; CHUNK];
    for (ks, os) in keys[..n].chunks(CHUNK).zip(out[..n].chunks_mut(CHUNK)) {
        for (b, &k) in bytes.iter_mut().zip(ks) {
            *b = key::u64_key(k);
        }
        let refs: [&[u8]; CHUNK] = std::array::from_fn(|i| &bytes[i][..]);
        get_batch(&refs[..ks.len()], os);
    }
}

/// The plain read handle: a reference to the table, calling its `&self`
/// methods. Used by lookup forms without a cheaper per-thread path.
#[derive(Debug, Clone, Copy)]
pub struct SharedReader<'a, L>(pub(crate) &'a L);

impl<'a, L> From<&'a L> for SharedReader<'a, L> {
    fn from(table: &'a L) -> Self {
        SharedReader(table)
    }
}

impl<L: LookupTable> ReadHandle for SharedReader<'_, L> {
    #[inline]
    fn get(&self, key: &[u8]) -> Option<u64> {
        self.0.get(key)
    }
    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        self.0.get_batch(keys, out)
    }
    #[inline]
    fn get_u64(&self, key: u64) -> Option<u64> {
        self.0.get_u64(key)
    }
    fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        self.0.get_batch_u64(keys, out)
    }
}
