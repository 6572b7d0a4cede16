//! FHT update instructions (§7.2): CT puts, slot writes, CT deletions.

use super::Params;
use super::ct::{Ct, decode_val, encode_val};
use crate::bits::PackedArray;
use crate::error::{Error, Result};
use crate::wire::{Frame, Kind, Reader, Wire, Writer};

/// An update message for [`super::Lookup`].
///
/// Deltas are numbered: a lookup form applies delta `s + 1` only after delta
/// `s`. An in-place delta lists CT insertions/changes, main-table slot writes
/// and CT deletions, applied in that order; a rebuild delta carries the whole
/// new lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    Ops { seed: u64, buckets: u32, puts: Vec<(Vec<u8>, Option<u64>)>, slots: Vec<(u64, u64)>, dels: Vec<Vec<u8>> },
    Replace(Box<Image>),
}

/// A complete lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub table: PackedArray,
    pub ct: Vec<(Vec<u8>, Option<u64>)>,
}

impl Image {
    pub fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.table.to_words());
        w.u64(self.ct.len() as u64);
        for (n, v) in &self.ct {
            w.bytes(n);
            encode_val(w, *v);
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
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

    pub fn build_ct(&self) -> Ct {
        let mut c = Ct::new(self.p.seed);
        for (n, v) in &self.ct {
            c.put(crate::hash::hash64(n, self.p.seed), n, *v);
        }
        c
    }
}

impl Delta {
    /// Sequence number of this delta.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The table this delta belongs to (see [`crate::lineage`]).
    pub(crate) fn table_id(&self) -> crate::TableId {
        self.table.id
    }
    /// True if this delta replaces the whole lookup form (growth).
    pub(crate) fn is_rebuild(&self) -> bool {
        matches!(self.body, Body::Replace(_))
    }
    /// Main-table slots written (all of them for a rebuild).
    pub fn slots_touched(&self) -> usize {
        match &self.body {
            Body::Ops { slots, .. } => slots.len(),
            Body::Replace(img) => img.p.slots(),
        }
    }
    /// Collision-table entries inserted, changed or deleted.
    pub fn ct_entries_touched(&self) -> usize {
        match &self.body {
            Body::Ops { puts, dels, .. } => puts.len() + dels.len(),
            Body::Replace(img) => img.ct.len(),
        }
    }
}

const TAG_OPS: u8 = 1;
const TAG_REPLACE: u8 = 2;

impl Wire for Delta {
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(Kind::FhtDelta);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
        match &self.body {
            Body::Ops { seed, buckets, puts, slots, dels } => {
                w.u8(TAG_OPS).u64(*seed).u32(*buckets).varint(puts.len() as u64);
                for (n, v) in puts {
                    w.bytes(n);
                    encode_val(&mut w, *v);
                }
                w.varint(slots.len() as u64);
                for &(s, x) in slots {
                    w.varint(s).varint(x);
                }
                w.varint(dels.len() as u64);
                for n in dels {
                    w.bytes(n);
                }
            }
            Body::Replace(img) => {
                w.u8(TAG_REPLACE);
                img.encode(&mut w);
            }
        }
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, Kind::FhtDelta)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let body = match r.u8()? {
            TAG_OPS => {
                let seed = r.u64()?;
                let buckets = r.u32()?;
                let n = r.varint_count(5)?;
                let mut puts = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.bytes()?.to_vec();
                    puts.push((name, decode_val(&mut r, 64)?));
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
                Body::Ops { seed, buckets, puts, slots, dels }
            }
            TAG_REPLACE => Body::Replace(Box::new(Image::decode(&mut r)?)),
            t => return Err(Error::Corrupt(format!("unknown fht delta tag {t}"))),
        };
        r.finish()?;
        Ok(Delta { table, seq, body })
    }
}
