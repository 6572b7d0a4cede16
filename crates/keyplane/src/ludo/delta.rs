//! Ludo update messages (thesis §4.4.8).

use super::table::Table;
use super::{MAX_SEED, Params};
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result};
use crate::othello;
use crate::wire::{Reader, Wire, Writer};

/// An update message for [`super::Lookup`].
///
/// Deltas are numbered: a lookup form applies delta `s + 1` only after delta
/// `s`. An insert's delta is the thesis' `update_sequence`: one node per
/// bucket of the cuckoo path, in the order the lookup form applies them (the
/// path's free end first).
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(pub(crate) RawDelta<super::lookup::Ludo>);

/// One node of an insert's update sequence (Ludo §4.4.8): bucket index, new
/// seed, new value order, where the moved-in value comes from, and the
/// Othello change for the key that moved in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub bucket: u32,
    pub seed: u32,
    /// Per new slot: 0..=3 old slot, 4 incoming value, 5 empty.
    pub order: [u8; 4],
    /// Incoming value: `(bucket, slot)` in the current lookup form, or
    /// `None` for the new key (value in [`Body::Path::content`]).
    pub from: Option<(u32, u8)>,
    /// Bucket-locator change of the incoming key.
    pub oth: Option<othello::Delta>,
}

/// An in-place change (the engine carries whole-table replacements).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// No change (same value written again).
    Nop,
    /// Value change: one slot write.
    Set { bucket: u32, slot: u8, content: u64 },
    /// Delete: nothing changes in the buckets; the Othello removal (no slot
    /// writes) keeps the bucket locator's sequence numbers in step.
    Remove { oth: othello::Delta },
    /// Insert through a cuckoo path.
    Path { content: u64, nodes: Vec<Node> },
    /// Fallback table: set (`Some`) or remove (`None`) a full key.
    Fallback { key: Vec<u8>, content: Option<u64> },
}

/// A complete lookup form (the body of a rebuild delta after growth,
/// re-seed or overflow growth).
#[derive(Debug)]
pub(crate) struct Image {
    pub table: Table,
    pub oth: othello::Lookup,
    pub fallback: Vec<(Vec<u8>, u64)>,
}

impl Image {
    pub fn p(&self) -> Params {
        self.table.p
    }
}

impl Clone for Image {
    fn clone(&self) -> Self {
        Image { table: self.table.clone(), oth: self.oth.duplicate(), fallback: self.fallback.clone() }
    }
}

/// Images are equal when they encode alike (the locator has no `PartialEq`).
impl PartialEq for Image {
    fn eq(&self, o: &Self) -> bool {
        let bytes = |img: &Image| {
            let mut w = Writer::new(super::LOOKUP_KIND);
            img.encode(&mut w);
            w.finish()
        };
        bytes(self) == bytes(o)
    }
}

/// Writes an image from its parts: the bucket table, the locator's blob and
/// the fallback table (sorted by key).
pub(crate) fn encode_image(w: &mut Writer, table: &Table, oth: &[u8], fallback: &[(Vec<u8>, u64)]) {
    table.encode(w);
    w.bytes(oth);
    w.u64(fallback.len() as u64);
    for (k, v) in fallback {
        w.bytes(k).u64(*v);
    }
}

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        encode_image(w, &self.table, &self.oth.to_bytes(), &self.fallback);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let table = Table::decode(r)?;
        let oth = othello::Lookup::from_bytes(r.bytes()?)?;
        if oth.value_bits() != 1 {
            return Err(Error::Corrupt("bucket locator must have 1-bit values".into()));
        }
        let n = r.count(12)?;
        let mut fallback = Vec::with_capacity(n);
        let wmask = crate::mask(table.p.sw());
        for _ in 0..n {
            let k = r.bytes()?.to_vec();
            let v = r.u64()?;
            Reader::ensure(v & !wmask == 0, || "fallback value wider than a slot".into())?;
            Reader::ensure(fallback.last().is_none_or(|(l, _): &(Vec<u8>, u64)| *l < k), || {
                "fallback keys not strictly increasing".into()
            })?;
            fallback.push((k, v));
        }
        Ok(Image { table, oth, fallback })
    }
}

impl Delta {
    /// Number of buckets written in place (path nodes; 1 for a value change).
    pub fn buckets_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(Body::Path { nodes, .. }) => nodes.len(),
            Change::Patch(Body::Set { .. }) => 1,
            _ => 0,
        }
    }

    /// Number of keys displaced by an insert (cuckoo path length).
    pub fn cuckoo_moves(&self) -> usize {
        match &self.0.change {
            Change::Patch(Body::Path { nodes, .. }) => nodes.len().saturating_sub(1),
            _ => 0,
        }
    }
}

const TAG_NOP: u8 = 0;
const TAG_SET: u8 = 1;
const TAG_REMOVE: u8 = 2;
const TAG_PATH: u8 = 3;
const TAG_FALLBACK: u8 = 4;
pub(crate) const TAG_REPLACE: u8 = 5;

fn pack_order(o: &[u8; 4]) -> u16 {
    o.iter().enumerate().fold(0u16, |a, (i, &c)| a | (c as u16) << (3 * i))
}

impl PatchCodec for Body {
    fn encode(&self, w: &mut Writer) {
        match self {
            Body::Nop => {
                w.u8(TAG_NOP);
            }
            Body::Set { bucket, slot, content } => {
                w.u8(TAG_SET).varint(*bucket as u64).u8(*slot).varint(*content);
            }
            Body::Remove { oth } => {
                w.u8(TAG_REMOVE).bytes(&oth.to_bytes());
            }
            Body::Path { content, nodes } => {
                w.u8(TAG_PATH).varint(*content).varint(nodes.len() as u64);
                for n in nodes {
                    w.varint(n.bucket as u64).u8(n.seed as u8).u16(pack_order(&n.order));
                    match n.from {
                        Some((b, s)) => w.u8(1).varint(b as u64).u8(s),
                        None => w.u8(0),
                    };
                    match &n.oth {
                        Some(d) => w.u8(1).bytes(&d.to_bytes()),
                        None => w.u8(0),
                    };
                }
            }
            Body::Fallback { key, content } => {
                w.u8(TAG_FALLBACK).bytes(key);
                match content {
                    Some(v) => w.u8(1).varint(*v),
                    None => w.u8(0),
                };
            }
        }
    }

    fn decode(tag: u8, r: &mut Reader<'_>) -> Result<Self> {
        let u32_of = |v: u64| -> Result<u32> {
            u32::try_from(v).map_err(|_| Error::Corrupt(format!("bucket index {v} exceeds 32 bits")))
        };
        Ok(match tag {
            TAG_NOP => Body::Nop,
            TAG_SET => {
                let bucket = u32_of(r.varint()?)?;
                let slot = r.u8()?;
                Reader::ensure(slot < 4, || format!("slot {slot} > 3"))?;
                Body::Set { bucket, slot, content: r.varint()? }
            }
            TAG_REMOVE => Body::Remove { oth: othello::Delta::from_bytes(r.bytes()?)? },
            TAG_PATH => {
                let content = r.varint()?;
                let n = r.varint_count(5)?;
                let mut nodes = Vec::with_capacity(n);
                for _ in 0..n {
                    let bucket = u32_of(r.varint()?)?;
                    let seed = r.u8()? as u32;
                    Reader::ensure(seed <= MAX_SEED, || "seed out of range".into())?;
                    let o = r.u16()?;
                    let order = [0, 1, 2, 3].map(|i| ((o >> (3 * i)) & 7) as u8);
                    Reader::ensure(o >> 12 == 0 && order.iter().all(|&c| c <= 5), || {
                        format!("invalid value order {o:#x}")
                    })?;
                    let from = match r.u8()? {
                        0 => None,
                        1 => {
                            let b = u32_of(r.varint()?)?;
                            let s = r.u8()?;
                            Reader::ensure(s < 4, || format!("slot {s} > 3"))?;
                            Some((b, s))
                        }
                        x => return Err(Error::Corrupt(format!("node source flag {x}"))),
                    };
                    let oth = match r.u8()? {
                        0 => None,
                        1 => Some(othello::Delta::from_bytes(r.bytes()?)?),
                        x => return Err(Error::Corrupt(format!("node othello flag {x}"))),
                    };
                    nodes.push(Node { bucket, seed, order, from, oth });
                }
                Body::Path { content, nodes }
            }
            TAG_FALLBACK => {
                let key = r.bytes()?.to_vec();
                let content = match r.u8()? {
                    0 => None,
                    1 => Some(r.varint()?),
                    x => return Err(Error::Corrupt(format!("fallback flag {x}"))),
                };
                Body::Fallback { key, content }
            }
            t => return Err(Error::Corrupt(format!("unknown ludo delta tag {t}"))),
        })
    }
}
