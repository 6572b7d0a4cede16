//! FHT update instructions (§7.2): CT puts, slot writes, CT deletions.

use super::Params;
use super::ct::{Ct, decode_val, encode_val};
use crate::bits::PackedArray;
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result};
use crate::wire::{Reader, Writer};

/// An update message for [`super::Lookup`].
///
/// Deltas are numbered: a lookup form applies delta `s + 1` only after delta
/// `s`. An in-place delta lists CT insertions/changes, main-table slot writes
/// and CT deletions, applied in that order; a rebuild delta carries the whole
/// new lookup form.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(pub(crate) RawDelta<super::lookup::Fht>);

/// In-place changes to the table `(seed, buckets)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ops {
    pub seed: u64,
    pub buckets: u32,
    pub puts: Vec<(Vec<u8>, Option<u64>)>,
    pub slots: Vec<(u64, u64)>,
    pub dels: Vec<Vec<u8>>,
}

/// A complete lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub table: PackedArray,
    pub ct: Vec<(Vec<u8>, Option<u64>)>,
}

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.table.to_words());
        w.u64(self.ct.len() as u64);
        for (n, v) in &self.ct {
            w.bytes(n);
            encode_val(w, *v);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let table = PackedArray::from_words(r.u64s()?, p.slots(), p.width())
            .ok_or_else(|| Error::Corrupt("main table length does not match its parameters".into()))?;
        let n = r.count(5)?;
        let mut ct = Vec::with_capacity(n);
        let mut seen = Ct::new(p.seed);
        for _ in 0..n {
            let name = r.bytes()?.to_vec();
            let v = decode_val(r, p.vbits)?;
            let h = crate::hash::hash64(&name, p.seed);
            Reader::ensure(seen.get(h, &name).is_none(), || "duplicate collision-table name".into())?;
            seen.put(h, &name, v);
            ct.push((name, v));
        }
        Ok(Self { p, table, ct })
    }
}

impl Image {
    pub fn build_ct(&self) -> Ct {
        let mut c = Ct::new(self.p.seed);
        for (n, v) in &self.ct {
            c.put(crate::hash::hash64(n, self.p.seed), n, *v);
        }
        c
    }
}

impl Delta {
    /// Main-table slots written (all of them for a rebuild).
    pub fn slots_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p.slots.len(),
            Change::Replace(img) => img.p.slots(),
        }
    }
    /// Collision-table entries inserted, changed or deleted.
    pub fn ct_entries_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p.puts.len() + p.dels.len(),
            Change::Replace(img) => img.ct.len(),
        }
    }
}

const TAG_OPS: u8 = 1;
pub(crate) const TAG_REPLACE: u8 = 2;

impl PatchCodec for Ops {
    fn encode(&self, w: &mut Writer) {
        w.u8(TAG_OPS).u64(self.seed).u32(self.buckets).varint(self.puts.len() as u64);
        for (n, v) in &self.puts {
            w.bytes(n);
            encode_val(w, *v);
        }
        w.varint(self.slots.len() as u64);
        for &(s, x) in &self.slots {
            w.varint(s).varint(x);
        }
        w.varint(self.dels.len() as u64);
        for n in &self.dels {
            w.bytes(n);
        }
    }

    fn decode(tag: u8, r: &mut Reader<'_>) -> Result<Self> {
        if tag != TAG_OPS {
            return Err(Error::Corrupt(format!("unknown fht delta tag {tag}")));
        }
        let seed = r.u64()?;
        let buckets = r.u32()?;
        let n = r.varint_count(5)?;
        let mut puts = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.bytes()?.to_vec();
            puts.push((name, decode_val(r, 64)?));
        }
        let n = r.varint_count(2)?;
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n {
            slots.push((r.varint()?, r.varint()?));
        }
        let n = r.varint_count(4)?;
        let mut dels = Vec::with_capacity(n);
        for _ in 0..n {
            dels.push(r.bytes()?.to_vec());
        }
        Ok(Ops { seed, buckets, puts, slots, dels })
    }
}
