//! Othello update messages (thesis Fig. 3.1 (c)).

use super::Params;
use super::lookup::Othello;
use crate::bits::PackedArray;
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result};
use crate::lineage::Lineage;
use crate::wire::{Reader, Writer};

/// A slot reference: `index << 1 | side` (side 1 = array B).
pub(crate) type SlotRef = u64;

/// An update message for [`super::Lookup`].
///
/// Deltas are numbered: a lookup form applies delta `s + 1` only after delta
/// `s`, so a lost or repeated message is reported instead of silently
/// corrupting the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta(pub(crate) RawDelta<Othello>);

/// A delta's change: an in-place [`Slots`] patch or a whole [`Image`].
pub(crate) type Body = Change<Othello>;

/// In-place change of the current skeleton: XOR `xor` into the slots of
/// one tree (`cc` in the thesis), then write absolute slot values (new
/// slots, emptiness bits: `sets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slots {
    pub seed: u64,
    pub xor: u64,
    pub xors: Vec<SlotRef>,
    pub sets: Vec<(SlotRef, u64)>,
}

/// Arrays and parameters of a complete lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub a: PackedArray,
    pub b: PackedArray,
}

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.a.to_words()).u64s(&self.b.to_words());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let wd = p.width();
        let a = PackedArray::from_words(r.u64s()?, p.ma as usize, wd)
            .ok_or_else(|| Error::Corrupt("array A length does not match its size".into()))?;
        let b = PackedArray::from_words(r.u64s()?, p.mb as usize, wd)
            .ok_or_else(|| Error::Corrupt("array B length does not match its size".into()))?;
        Ok(Self { p, a, b })
    }
}

/// Tag byte of a [`Slots`] patch (a rebuild is [`Othello`]'s `REPLACE_TAG`, 2).
const TAG_SLOTS: u8 = 1;

impl PatchCodec for Slots {
    fn encode(&self, w: &mut Writer) {
        w.u8(TAG_SLOTS).u64(self.seed).varint(self.xor).varint(self.xors.len() as u64);
        for &s in &self.xors {
            w.varint(s);
        }
        w.varint(self.sets.len() as u64);
        for &(s, v) in &self.sets {
            w.varint(s).varint(v);
        }
    }

    fn decode(tag: u8, r: &mut Reader<'_>) -> Result<Self> {
        if tag != TAG_SLOTS {
            return Err(Error::Corrupt(format!("unknown othello delta tag {tag}")));
        }
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
        Ok(Slots { seed, xor, xors, sets })
    }
}

impl Delta {
    /// An in-place patch delta (crate-internal: Othello's and Ludo's locator control forms).
    pub(crate) fn slots(table: Lineage, seq: u64, s: Slots) -> Self {
        Delta(RawDelta::patch(table, seq, s))
    }

    /// A rebuild delta carrying the whole new lookup form.
    pub(crate) fn replace(table: Lineage, seq: u64, img: Image) -> Self {
        Delta(RawDelta::replace(table, seq, img))
    }

    /// The change this delta carries.
    pub(crate) fn body(&self) -> &Body {
        &self.0.change
    }

    /// Number of slots this delta writes (a whole table for a rebuild).
    pub fn slots_touched(&self) -> usize {
        match self.body() {
            Change::Patch(s) => s.xors.len() + s.sets.len(),
            Change::Replace(img) => img.p.ma as usize + img.p.mb as usize,
        }
    }
}
