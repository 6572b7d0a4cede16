//! CFW update messages (thesis Fig. 3.1 (b)).

use super::{Params, SLOTS};
use crate::bits::PackedArray;
use crate::error::{Error, Result};
use crate::wire::{Frame, Kind, Reader, Wire, Writer};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// In-place changes to the skeleton `(seed, nb)`.
    Ops { seed: u64, nb: u64, ops: Vec<Op> },
    /// Growth: the whole new lookup form.
    Replace(Box<Image>),
}

/// A complete lookup form: parameters, level 1, level-2 entries sorted by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub l1: PackedArray,
    pub l2: Vec<(Vec<u8>, u64)>,
}

impl Image {
    pub fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.l1.to_words());
        w.u64(self.l2.len() as u64);
        for (k, v) in &self.l2 {
            w.bytes(k).u64(*v);
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
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
    /// Sequence number of this delta (the lookup form's after applying it).
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The table this delta belongs to (see [`crate::lineage`]).
    pub(crate) fn table_id(&self) -> crate::TableId {
        self.table.id
    }

    /// Level-1 slots this delta writes (a cuckoo path has several).
    pub fn level1_slots(&self) -> usize {
        match &self.body {
            Body::Ops { ops, .. } => ops.iter().filter(|o| matches!(o, Op::L1 { .. })).count(),
            Body::Replace(img) => img.l1.len(),
        }
    }

    /// Level-2 operations in this delta.
    pub fn level2_ops(&self) -> usize {
        match &self.body {
            Body::Ops { ops, .. } => ops.iter().filter(|o| !matches!(o, Op::L1 { .. })).count(),
            Body::Replace(img) => img.l2.len(),
        }
    }

    /// True if this delta replaces the whole lookup form (growth).
    pub(crate) fn is_rebuild(&self) -> bool {
        matches!(self.body, Body::Replace(_))
    }
}

const TAG_OPS: u8 = 1;
const TAG_REPLACE: u8 = 2;
const OP_L1: u8 = 1;
const OP_PUT: u8 = 2;
const OP_DEL: u8 = 3;

impl Wire for Delta {
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(Kind::CfwDelta);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
        match &self.body {
            Body::Ops { seed, nb, ops } => {
                w.u8(TAG_OPS).u64(*seed).u64(*nb).varint(ops.len() as u64);
                for op in ops {
                    match op {
                        Op::L1 { slot, word } => w.u8(OP_L1).varint(*slot).varint(*word),
                        Op::L2Put { key, value } => w.u8(OP_PUT).bytes(key).varint(*value),
                        Op::L2Del { key } => w.u8(OP_DEL).bytes(key),
                    };
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
        let mut r = Frame::open(bytes, Kind::CfwDelta)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let body = match r.u8()? {
            TAG_OPS => {
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
                Body::Ops { seed, nb, ops }
            }
            TAG_REPLACE => Body::Replace(Box::new(Image::decode(&mut r)?)),
            t => return Err(Error::Corrupt(format!("unknown cfw delta tag {t}"))),
        };
        r.finish()?;
        Ok(Delta { table, seq, body })
    }
}
