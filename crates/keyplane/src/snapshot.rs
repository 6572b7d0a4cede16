//! Control-form snapshots: a whole control form as one framed, checksummed
//! blob that loads back without rebuilding or rehashing.
//!
//! A snapshot is framed like every lookup blob and delta ([`crate::wire`]:
//! magic, format version, kind, length, XXH3 checksum, all checked before a
//! payload byte is read) and its payload starts with the same lineage
//! prologue ([`crate::lineage`]: table id, sequence number of the last delta
//! emitted, key format), followed by the snapshot state version
//! (`STATE_VERSION`) and the structure's full internal state: parameters,
//! seeds and seed sequence, key store (keys, values, id free list, per-key
//! hashes of the store index), arrays, graph / forest links, bucket contents,
//! counters. Loading restores that state field by field, so a loaded control
//! form continues exactly where the saved one stopped: same table id, next
//! delta number, and the same future deltas for the same updates. No key is
//! hashed and no structure is rebuilt on load ([`crate::work`] counts keys
//! hashed, and tests assert that loading adds none).
//!
//! Each structure lists its fields once with the crate-internal `persist!`
//! macro (and its control form with `control_snapshot!`, which adds
//! the kind code and the post-load invariant check); the framing, prologue
//! and version live only in [`save`] and [`load`] here. A snapshot of one
//! structure is refused by every other ([`crate::Error::KindMismatch`]).

use crate::error::{Error, Result};
use crate::lineage::{Lineage, read_prologue, write_prologue};
use crate::wire::{Frame, Kind, Reader, Writer};

/// Version of the snapshot state layout written after the prologue.
pub(crate) const STATE_VERSION: u16 = 1;

/// A control form that serialises to a snapshot and loads back from one.
///
/// Implemented by every structure's `Control`. A snapshot carries the full
/// state (no rebuild, no rehash on load); see the [module docs](self).
///
/// ```
/// use keyplane::{ControlTable, Snapshot, othello};
///
/// let mut ctl = othello::Control::from_items([(b"a", 1u64), (b"b", 2)], 4)?;
/// let saved = ctl.snapshot();
/// let mut back = othello::Control::from_snapshot(&saved)?;
/// assert_eq!(back.table_id(), ctl.table_id());
/// assert_eq!(back.get(b"b"), Some(2));
/// // Both continue the same lineage with the same deltas.
/// assert_eq!(ctl.insert(b"c", 3)?, back.insert(b"c", 3)?);
/// # Ok::<(), keyplane::Error>(())
/// ```
pub trait Snapshot: Sized {
    /// The frame kind of this structure's snapshots.
    const SNAPSHOT_KIND: Kind;
    /// The whole control form as a framed, checksummed blob.
    fn snapshot(&self) -> Vec<u8>;
    /// Loads a snapshot written by [`Snapshot::snapshot`] (of this
    /// structure; any other kind is refused). Never panics: bad bytes give
    /// a typed error.
    fn from_snapshot(bytes: &[u8]) -> Result<Self>;
}

/// A control form's snapshot plumbing (implemented by `control_snapshot!`).
pub(crate) trait ControlState: Sized {
    /// The frame kind of this structure's snapshots.
    const KIND: Kind;
    /// Lineage and sequence number, written in the prologue.
    fn lineage_seq(&self) -> (Lineage, u64);
    /// Writes every field but the lineage and sequence number.
    fn save_state(&self, w: &mut Writer);
    /// Reads the fields written by [`ControlState::save_state`].
    fn load_state(r: &mut Reader<'_>, lineage: Lineage, seq: u64) -> Result<Self>;
}

/// Writes a snapshot: frame, prologue, state version, state.
pub(crate) fn save<T: ControlState>(c: &T) -> Vec<u8> {
    let mut w = Writer::new(T::KIND);
    let (lineage, seq) = c.lineage_seq();
    write_prologue(&mut w, lineage, seq);
    w.u16(STATE_VERSION);
    c.save_state(&mut w);
    w.finish()
}

/// Reads a snapshot written by [`save`].
pub(crate) fn load<T: ControlState>(bytes: &[u8]) -> Result<T> {
    let mut r = Frame::open(bytes, T::KIND)?;
    let (lineage, seq) = read_prologue(&mut r)?;
    let v = r.u16()?;
    if v != STATE_VERSION {
        return Err(Error::UnsupportedVersion { found: v, supported: STATE_VERSION });
    }
    let c = T::load_state(&mut r, lineage, seq)?;
    r.finish()?;
    Ok(c)
}

/// Validates a snapshot's frame (magic, version, length, checksum) and
/// reads its prologue. Fails on anything that is not a control snapshot.
/// `lineage` is always `Some` for a snapshot.
pub fn peek(bytes: &[u8]) -> Result<crate::lineage::Head> {
    let info = Frame::inspect(bytes)?;
    if info.kind.role() != 3 {
        return Err(Error::KindMismatch {
            expected: "a control snapshot".into(),
            found: format!("{} of kind {:#06x}", info.kind.label(), info.kind.code()),
        });
    }
    let mut r = Frame::open(bytes, info.kind)?;
    let (lineage, seq) = read_prologue(&mut r)?;
    Ok(crate::lineage::Head { kind: info.kind, lineage: Some(lineage), seq })
}

/// Encoding of one piece of control-form state.
pub(crate) trait Persist: Sized {
    /// Appends `self`.
    fn put(&self, w: &mut Writer);
    /// Reads what [`Persist::put`] wrote. Bounds-checked; never panics.
    fn take(r: &mut Reader<'_>) -> Result<Self>;
    /// A lower bound on the encoded size (bounds element counts).
    const MIN_LEN: usize = 1;
}

macro_rules! prim {
    ($($t:ty => $m:ident, $n:expr;)*) => {$(
        impl Persist for $t {
            fn put(&self, w: &mut Writer) {
                w.$m(*self);
            }
            fn take(r: &mut Reader<'_>) -> Result<Self> {
                r.$m()
            }
            const MIN_LEN: usize = $n;
        }
    )*};
}
prim! { u8 => u8, 1; u16 => u16, 2; u32 => u32, 4; u64 => u64, 8; }

impl Persist for usize {
    fn put(&self, w: &mut Writer) {
        w.u64(*self as u64);
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let v = r.u64()?;
        usize::try_from(v).map_err(|_| Error::Corrupt(format!("size {v} does not fit this machine")))
    }
    const MIN_LEN: usize = 8;
}

impl Persist for bool {
    fn put(&self, w: &mut Writer) {
        w.u8(*self as u8);
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        match r.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(Error::Corrupt(format!("boolean byte {b}"))),
        }
    }
}

impl<T: Persist> Persist for Vec<T> {
    fn put(&self, w: &mut Writer) {
        w.u64(self.len() as u64);
        for x in self {
            x.put(w);
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let n = r.count(T::MIN_LEN)?;
        // Grows only as elements actually decode: a count can never
        // allocate more than the bytes that follow can fill.
        let mut v = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            v.push(T::take(r)?);
        }
        Ok(v)
    }
    const MIN_LEN: usize = 8;
}

impl<T: Persist, const N: usize> Persist for [T; N] {
    fn put(&self, w: &mut Writer) {
        for x in self {
            x.put(w);
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let v: Vec<T> = (0..N).map(|_| T::take(r)).collect::<Result<_>>()?;
        v.try_into().map_err(|_| Error::Corrupt("array length".into()))
    }
    const MIN_LEN: usize = N * T::MIN_LEN;
}

impl<T: Persist> Persist for Option<T> {
    fn put(&self, w: &mut Writer) {
        match self {
            None => {
                w.u8(0);
            }
            Some(x) => {
                w.u8(1);
                x.put(w);
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        Ok(if bool::take(r)? { Some(T::take(r)?) } else { None })
    }
}

impl<A: Persist, B: Persist> Persist for (A, B) {
    fn put(&self, w: &mut Writer) {
        self.0.put(w);
        self.1.put(w);
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        Ok((A::take(r)?, B::take(r)?))
    }
    const MIN_LEN: usize = A::MIN_LEN + B::MIN_LEN;
}

impl<T: Persist> Persist for Box<T> {
    fn put(&self, w: &mut Writer) {
        (**self).put(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Box::new(T::take(r)?))
    }
    const MIN_LEN: usize = T::MIN_LEN;
}

impl<T: Persist> Persist for Box<[T]> {
    fn put(&self, w: &mut Writer) {
        w.u64(self.len() as u64);
        for x in self.iter() {
            x.put(w);
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Vec::<T>::take(r)?.into_boxed_slice())
    }
    const MIN_LEN: usize = 8;
}

impl<T: Persist + Ord> Persist for std::collections::BTreeSet<T> {
    fn put(&self, w: &mut Writer) {
        w.u64(self.len() as u64);
        for x in self {
            x.put(w);
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let v = Vec::<T>::take(r)?;
        let n = v.len();
        let s: Self = v.into_iter().collect();
        Reader::ensure(s.len() == n, || "repeated set element".into())?;
        Ok(s)
    }
    const MIN_LEN: usize = 8;
}

/// Hash maps are written sorted by key (their iteration order differs
/// between instances: the maps use per-instance random hashers, so control
/// forms never let it reach a delta or a blob). One body for both map types.
macro_rules! persist_hash_map {
    ($($map:ident)::+) => {
        impl<K, V, S> Persist for $($map)::+<K, V, S>
        where
            K: Persist + Eq + std::hash::Hash + Ord,
            V: Persist,
            S: std::hash::BuildHasher + Default,
        {
            fn put(&self, w: &mut Writer) {
                let mut all: Vec<(&K, &V)> = self.iter().collect();
                all.sort_unstable_by(|a, b| a.0.cmp(b.0));
                w.u64(all.len() as u64);
                for (k, v) in all {
                    k.put(w);
                    v.put(w);
                }
            }
            fn take(r: &mut Reader<'_>) -> Result<Self> {
                let v = Vec::<(K, V)>::take(r)?;
                let n = v.len();
                let m: Self = v.into_iter().collect();
                Reader::ensure(m.len() == n, || "repeated map key".into())?;
                Ok(m)
            }
            const MIN_LEN: usize = 8;
        }
    };
}
persist_hash_map!(hashbrown::HashMap);
persist_hash_map!(std::collections::HashMap);

impl Persist for crate::bits::PackedArray {
    fn put(&self, w: &mut Writer) {
        w.u64(self.len() as u64).u32(self.bits()).u64s(&self.to_words());
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let len = usize::take(r)?;
        let bits = r.u32()?;
        let words = r.u64s()?;
        Reader::ensure((1..=64).contains(&bits), || format!("packed array of {bits}-bit elements"))?;
        Reader::ensure(len.checked_mul(bits as usize).is_some(), || "packed array length overflows".into())?;
        crate::bits::PackedArray::from_words(words, len, bits)
            .ok_or_else(|| Error::Corrupt(format!("packed array of {len} x {bits} bits has the wrong word count")))
    }
    const MIN_LEN: usize = 20;
}

impl Persist for crate::hash::SeedSeq {
    fn put(&self, w: &mut Writer) {
        w.u64(self.state());
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        Ok(crate::hash::SeedSeq::new(r.u64()?))
    }
    const MIN_LEN: usize = 8;
}

/// Implements [`Persist`] for a struct by listing its fields (in encoding
/// order); fields after `;` are scratch space, restored as `Default`.
macro_rules! persist {
    ($t:ty { $($f:ident),* $(,)? } $(; $($s:ident),* $(,)?)?) => {
        impl $crate::snapshot::Persist for $t {
            fn put(&self, w: &mut $crate::wire::Writer) {
                $($crate::snapshot::Persist::put(&self.$f, w);)*
            }
            fn take(r: &mut $crate::wire::Reader<'_>) -> $crate::error::Result<Self> {
                Ok(Self {
                    $($f: $crate::snapshot::Persist::take(r)?,)*
                    $($($s: Default::default(),)*)?
                })
            }
        }
    };
}
pub(crate) use persist;

/// Implements [`Persist`] for a `Copy` enum without fields by listing its
/// variants with their codes.
macro_rules! persist_enum {
    ($t:ty { $($v:ident = $c:expr),* $(,)? }) => {
        impl $crate::snapshot::Persist for $t {
            fn put(&self, w: &mut $crate::wire::Writer) {
                let c: u8 = match self { $(<$t>::$v => $c,)* };
                w.u8(c);
            }
            fn take(r: &mut $crate::wire::Reader<'_>) -> $crate::error::Result<Self> {
                match r.u8()? {
                    $($c => Ok(<$t>::$v),)*
                    c => Err($crate::Error::Corrupt(format!("unknown {} code {c}", stringify!($t)))),
                }
            }
        }
    };
}
pub(crate) use persist_enum;

/// Implements [`Persist`] for a type with `encode` / `decode` methods (the
/// structures' validated parameter blocks).
macro_rules! persist_codec {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::snapshot::Persist for $t {
            fn put(&self, w: &mut $crate::wire::Writer) {
                self.encode(w)
            }
            fn take(r: &mut $crate::wire::Reader<'_>) -> $crate::error::Result<Self> {
                <$t>::decode(r)
            }
        }
    )*};
}
pub(crate) use persist_codec;

/// Implements [`Snapshot`] for a control form: its kind code, the fields
/// holding its lineage and sequence number, the persisted fields (in
/// order), the scratch fields (restored as `Default`), and a check of the
/// loaded state's invariants (`fn(&Self) -> Result<()>`).
macro_rules! control_snapshot {
    (
        $t:ty, $kind:expr, lineage: $l:ident, seq: $q:ident,
        state { $($f:ident),* $(,)? }
        $(, scratch { $($s:ident),* $(,)? })?
        , check: $check:expr $(,)?
    ) => {
        impl $crate::snapshot::ControlState for $t {
            const KIND: $crate::wire::Kind = $kind;
            fn lineage_seq(&self) -> ($crate::lineage::Lineage, u64) {
                (self.$l, self.$q)
            }
            fn save_state(&self, w: &mut $crate::wire::Writer) {
                $($crate::snapshot::Persist::put(&self.$f, w);)*
            }
            fn load_state(
                r: &mut $crate::wire::Reader<'_>,
                lineage: $crate::lineage::Lineage,
                seq: u64,
            ) -> $crate::error::Result<Self> {
                let c = Self {
                    $l: lineage,
                    $q: seq,
                    $($f: $crate::snapshot::Persist::take(r)?,)*
                    $($($s: Default::default(),)*)?
                };
                let check: fn(&Self) -> $crate::error::Result<()> = $check;
                check(&c)?;
                Ok(c)
            }
        }
        impl $crate::snapshot::Snapshot for $t {
            const SNAPSHOT_KIND: $crate::wire::Kind = $kind;
            fn snapshot(&self) -> Vec<u8> {
                $crate::snapshot::save(self)
            }
            fn from_snapshot(bytes: &[u8]) -> $crate::error::Result<Self> {
                $crate::snapshot::load(bytes)
            }
        }
    };
}
pub(crate) use control_snapshot;

/// Fails with [`Error::Corrupt`] unless every index in `ids` is below
/// `bound` or equal to `none` (the "no entry" marker).
pub(crate) fn check_ids(what: &str, ids: &[u32], bound: usize, none: u32) -> Result<()> {
    match ids.iter().find(|&&i| i != none && i as usize >= bound) {
        None => Ok(()),
        Some(i) => Err(Error::Corrupt(format!("{what} refers to entry {i}, beyond {bound}"))),
    }
}

/// Fails with [`Error::Corrupt`] naming `what` unless `cond` holds.
pub(crate) fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<()> {
    Reader::ensure(cond, what)
}

impl Persist for Lineage {
    fn put(&self, w: &mut Writer) {
        let id = self.id.as_u128();
        w.u64(id as u64).u64((id >> 64) as u64).u8(self.key_format.map_or(0, crate::key::KeyFormat::code));
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let lo = r.u64()? as u128;
        let hi = r.u64()? as u128;
        let key_format = match r.u8()? {
            0 => None,
            c => Some(
                crate::key::KeyFormat::from_code(c)
                    .ok_or_else(|| Error::Corrupt(format!("unknown key format code {c}")))?,
            ),
        };
        Ok(Lineage { id: crate::TableId::from_u128(hi << 64 | lo), key_format })
    }
    const MIN_LEN: usize = 17;
}

impl Persist for f64 {
    fn put(&self, w: &mut Writer) {
        w.u64(self.to_bits());
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        Ok(f64::from_bits(r.u64()?))
    }
    const MIN_LEN: usize = 8;
}

impl Persist for u128 {
    fn put(&self, w: &mut Writer) {
        w.u64(*self as u64).u64((*self >> 64) as u64);
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let lo = r.u64()? as u128;
        Ok(lo | (r.u64()? as u128) << 64)
    }
    const MIN_LEN: usize = 16;
}

impl<K: Persist + Ord, V: Persist> Persist for std::collections::BTreeMap<K, V> {
    fn put(&self, w: &mut Writer) {
        w.u64(self.len() as u64);
        for (k, v) in self {
            k.put(w);
            v.put(w);
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let v = Vec::<(K, V)>::take(r)?;
        let n = v.len();
        let m: Self = v.into_iter().collect();
        Reader::ensure(m.len() == n, || "repeated map key".into())?;
        Ok(m)
    }
    const MIN_LEN: usize = 8;
}
