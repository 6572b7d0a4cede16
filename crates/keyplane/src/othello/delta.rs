//! Othello update messages (thesis Fig. 3.1 (c)).

use super::Params;
use crate::bits::PackedArray;
use crate::error::{Error, Result};
use crate::wire::{Frame, Kind, Reader, Wire, Writer};

/// A slot reference: `index << 1 | side` (side 1 = array B).
pub(crate) type SlotRef = u64;

/// An update message for [`super::Lookup`].
///
/// Deltas are numbered: a lookup form applies delta `s + 1` only after delta
/// `s`, so a lost or repeated message is reported instead of silently
/// corrupting the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// In-place change of the current skeleton: XOR `xor` into the slots of
    /// one tree (`cc` in the thesis), then write absolute slot values
    /// (new slots, emptiness bits: `indices`).
    Slots { seed: u64, xor: u64, xors: Vec<SlotRef>, sets: Vec<(SlotRef, u64)> },
    /// A rebuild (new seed or new sizes): the whole new lookup form.
    Replace(Box<Image>),
}

/// Arrays and parameters of a complete lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub a: PackedArray,
    pub b: PackedArray,
}

impl Image {
    pub fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.a.to_words()).u64s(&self.b.to_words());
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let wd = p.width();
        let a = PackedArray::from_words(r.u64s()?, p.ma as usize, wd)
            .ok_or_else(|| Error::Corrupt("array A length does not match its size".into()))?;
        let b = PackedArray::from_words(r.u64s()?, p.mb as usize, wd)
            .ok_or_else(|| Error::Corrupt("array B length does not match its size".into()))?;
        Ok(Self { p, a, b })
    }
}

impl Delta {
    /// Sequence number of this delta (the lookup form's after applying it).
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The table this delta belongs to (see [`crate::lineage`]).
    pub(crate) fn table_id(&self) -> crate::TableId {
        self.table.id
    }

    /// Number of slots this delta writes (a whole table for a rebuild).
    pub fn slots_touched(&self) -> usize {
        match &self.body {
            Body::Slots { xors, sets, .. } => xors.len() + sets.len(),
            Body::Replace(img) => img.p.ma as usize + img.p.mb as usize,
        }
    }

    /// True if this delta replaces the whole lookup form (re-seed or growth).
    pub(crate) fn is_rebuild(&self) -> bool {
        matches!(self.body, Body::Replace(_))
    }
}

const TAG_SLOTS: u8 = 1;
const TAG_REPLACE: u8 = 2;

impl Wire for Delta {
    const KIND: Kind = super::DELTA_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(super::DELTA_KIND);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
        match &self.body {
            Body::Slots { seed, xor, xors, sets } => {
                w.u8(TAG_SLOTS).u64(*seed).varint(*xor).varint(xors.len() as u64);
                for &s in xors {
                    w.varint(s);
                }
                w.varint(sets.len() as u64);
                for &(s, v) in sets {
                    w.varint(s).varint(v);
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
        let mut r = Frame::open(bytes, super::DELTA_KIND)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let body = match r.u8()? {
            TAG_SLOTS => {
                let seed = r.u64()?;
                let xor = r.varint()?;
                let n = r.varint_count(1)?;
                let mut xors = Vec::with_capacity(n);
                for _ in 0..n {
                    xors.push(r.varint()?);
                }
                let n = r.varint_count(2)?;
                let mut sets = Vec::with_capacity(n);
                for _ in 0..n {
                    sets.push((r.varint()?, r.varint()?));
                }
                Body::Slots { seed, xor, xors, sets }
            }
            TAG_REPLACE => Body::Replace(Box::new(Image::decode(&mut r)?)),
            t => return Err(Error::Corrupt(format!("unknown othello delta tag {t}"))),
        };
        r.finish()?;
        Ok(Delta { table, seq, body })
    }
}
