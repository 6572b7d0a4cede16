//! CFW update messages (thesis Fig. 3.1 (b)).

use super::{Params, SLOTS};
use crate::bits::PackedArray;
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result};
use crate::wire::{Reader, Writer};

/// One primitive change of a lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Level 1: write slot `bucket·4 + sid` (the thesis' `lv = 1, bid, sid`)
    /// with `fingerprint << value_bits | value` (0 clears it).
    L1 { slot: u64, word: u64 },
    /// Level 2: insert or overwrite a full key.
    L2Put { key: Vec<u8>, value: u64 },
    /// Level 2: delete a full key.
    L2Del { key: Vec<u8> },
}

/// An update message for [`super::Lookup`].
///
/// An addition carries its cuckoo path as the list of level-1 slots it
/// rewrites (thesis Fig. 3.1 (b), "Cuckoo update path"); a value change one
/// slot (or one level-2 put); a deletion one cleared slot (or a level-2
/// delete), plus any level-2 keys promoted back to level 1. All changes of
/// one delta become visible to readers at once. Deltas are numbered: a
/// lookup form applies delta `s + 1` only after `s`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(pub(crate) RawDelta<super::lookup::Cfw>);

/// In-place changes to the skeleton `(seed, nb)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ops {
    pub seed: u64,
    pub nb: u64,
    pub ops: Vec<Op>,
}

/// A complete lookup form: parameters, level 1, level-2 entries sorted by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub l1: PackedArray,
    pub l2: Vec<(Vec<u8>, u64)>,
}

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.l1.to_words());
        w.u64(self.l2.len() as u64);
        for (k, v) in &self.l2 {
            w.bytes(k).u64(*v);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let l1 = PackedArray::from_words(r.u64s()?, p.nb as usize * SLOTS, p.width())
            .ok_or_else(|| Error::Corrupt("level-1 array length does not match the bucket count".into()))?;
        let n = r.count(12)?;
        let mut l2: Vec<(Vec<u8>, u64)> = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.bytes()?;
            let v = r.u64()?;
            crate::check_value(v, p.vbits).map_err(|e| Error::Corrupt(format!("level-2 value: {e}")))?;
            if let Some((last, _)) = l2.last() {
                Reader::ensure(last.as_slice() < k, || "level-2 keys not strictly sorted".into())?;
            }
            l2.push((k.to_vec(), v));
        }
        Ok(Image { p, l1, l2 })
    }
}

impl Delta {
    /// Level-1 slots this delta writes (a cuckoo path has several).
    pub fn level1_slots(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p.ops.iter().filter(|o| matches!(o, Op::L1 { .. })).count(),
            Change::Replace(img) => img.l1.len(),
        }
    }

    /// Level-2 operations in this delta.
    pub fn level2_ops(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p.ops.iter().filter(|o| !matches!(o, Op::L1 { .. })).count(),
            Change::Replace(img) => img.l2.len(),
        }
    }
}

const TAG_OPS: u8 = 1;
pub(crate) const TAG_REPLACE: u8 = 2;
const OP_L1: u8 = 1;
const OP_PUT: u8 = 2;
const OP_DEL: u8 = 3;

impl PatchCodec for Ops {
    fn encode(&self, w: &mut Writer) {
        w.u8(TAG_OPS).u64(self.seed).u64(self.nb).varint(self.ops.len() as u64);
        for op in &self.ops {
            match op {
                Op::L1 { slot, word } => w.u8(OP_L1).varint(*slot).varint(*word),
                Op::L2Put { key, value } => w.u8(OP_PUT).bytes(key).varint(*value),
                Op::L2Del { key } => w.u8(OP_DEL).bytes(key),
            };
        }
    }

    fn decode(tag: u8, r: &mut Reader<'_>) -> Result<Self> {
        if tag != TAG_OPS {
            return Err(Error::Corrupt(format!("unknown cfw delta tag {tag}")));
        }
        let seed = r.u64()?;
        let nb = r.u64()?;
        let n = r.varint_count(3)?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            ops.push(match r.u8()? {
                OP_L1 => Op::L1 { slot: r.varint()?, word: r.varint()? },
                OP_PUT => Op::L2Put { key: r.bytes()?.to_vec(), value: r.varint()? },
                OP_DEL => Op::L2Del { key: r.bytes()?.to_vec() },
                t => return Err(Error::Corrupt(format!("unknown cfw delta op {t}"))),
            });
        }
        Ok(Ops { seed, nb, ops })
    }
}
