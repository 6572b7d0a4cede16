//! SetSep update messages: new group records (and block choices), or a
//! whole new lookup form after growth.

use super::{BUCKETS_PER_BLOCK, Params};
use crate::bits::PackedArray;
use crate::error::{Error, Result, mask};
use crate::wire::{Frame, Kind, Reader, Wire, Writer};

/// Keys and values of one fallback group (shared: copying the fallback
/// table to publish a new version copies pointers, not keys).
pub(crate) type FallbackList = std::sync::Arc<[(Box<[u8]>, u64)]>;

/// The fallback table: groups (ascending) with their keys and values.
pub(crate) type Fallback = Vec<(u32, FallbackList)>;

/// New content of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupBody {
    /// A solved group: one (index, array) element per value bit.
    Record(Box<[u64]>),
    /// A fallback group: its record is the marker, its keys live here.
    Fallback(FallbackList),
}

/// One group update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupUpdate {
    pub g: u32,
    pub body: GroupBody,
}

/// Bytes of one block's 256 packed 2-bit choices.
pub(crate) const CHOICE_BYTES: usize = BUCKETS_PER_BLOCK / 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// In-place change of the current skeleton.
    Update { seed: u64, blocks: u32, choices: Vec<(u32, [u8; CHOICE_BYTES])>, groups: Vec<GroupUpdate> },
    /// Growth or shrink: the whole new lookup form.
    Replace(Box<Image>),
}

/// An update message for [`super::Lookup`]. Deltas are numbered: a lookup
/// form applies delta `s + 1` only after delta `s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) body: Body,
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
    /// True if this delta replaces the whole lookup form (growth or shrink).
    pub(crate) fn is_rebuild(&self) -> bool {
        matches!(self.body, Body::Replace(_))
    }
    /// Groups whose record (or fallback list) this delta rewrites.
    pub fn groups_touched(&self) -> usize {
        match &self.body {
            Body::Update { groups, .. } => groups.len(),
            Body::Replace(img) => img.p.groups(),
        }
    }
    /// Blocks whose bucket choices this delta rewrites.
    pub fn blocks_touched(&self) -> usize {
        match &self.body {
            Body::Update { choices, .. } => choices.len(),
            Body::Replace(img) => img.p.blocks as usize,
        }
    }
}

/// Everything a lookup form consists of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    /// 2-bit choice per bucket.
    pub choices: PackedArray,
    /// `groups · l` elements of `x + y` bits.
    pub rec: PackedArray,
    pub fallback: Fallback,
}

fn encode_list(w: &mut Writer, list: &[(Box<[u8]>, u64)]) {
    w.varint(list.len() as u64);
    for (k, v) in list {
        w.bytes(k).varint(*v);
    }
}

fn decode_list(r: &mut Reader<'_>, vbits: u32) -> Result<FallbackList> {
    let n = r.varint_count(5)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let k: Box<[u8]> = r.bytes()?.into();
        let x = r.varint()?;
        if x & !mask(vbits) != 0 {
            return Err(Error::Corrupt(format!("fallback value {x:#x} wider than {vbits} bits")));
        }
        v.push((k, x));
    }
    Ok(v.into())
}

impl Image {
    pub fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.choices.to_words()).u64s(&self.rec.to_words());
        w.varint(self.fallback.len() as u64);
        for (g, list) in &self.fallback {
            w.u32(*g);
            encode_list(w, list);
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let choices = PackedArray::from_words(r.u64s()?, p.buckets(), 2)
            .ok_or_else(|| Error::Corrupt("choice array length does not match the bucket count".into()))?;
        let rec = PackedArray::from_words(r.u64s()?, p.groups() * p.vbits as usize, p.width())
            .ok_or_else(|| Error::Corrupt("record array length does not match the group count".into()))?;
        let n = r.varint_count(5)?;
        let mut fallback: Fallback = Vec::with_capacity(n);
        for _ in 0..n {
            let g = r.u32()?;
            if g as usize >= p.groups() || fallback.last().is_some_and(|(h, _)| *h >= g) {
                return Err(Error::Corrupt(format!("fallback group {g} out of range or out of order")));
            }
            fallback.push((g, decode_list(r, p.vbits)?));
        }
        // The marker and the fallback table must agree group by group.
        let l = p.vbits as usize;
        let mut it = fallback.iter().map(|(g, _)| *g as usize).peekable();
        for g in 0..p.groups() {
            let marked = rec.get(g * l) & p.marker() == p.marker();
            let listed = it.peek() == Some(&g);
            if listed {
                it.next();
            }
            if marked != listed {
                return Err(Error::Corrupt(format!(
                    "group {g}: fallback marker {marked} but fallback table entry {listed}"
                )));
            }
        }
        Ok(Self { p, choices, rec, fallback })
    }
}

const TAG_UPDATE: u8 = 1;
const TAG_REPLACE: u8 = 2;

impl Wire for Delta {
    const KIND: Kind = super::DELTA_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(super::DELTA_KIND);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
        match &self.body {
            Body::Update { seed, blocks, choices, groups } => {
                w.u8(TAG_UPDATE).u64(*seed).u32(*blocks).varint(choices.len() as u64);
                for (b, c) in choices {
                    w.varint(*b as u64).raw(c);
                }
                w.varint(groups.len() as u64);
                for u in groups {
                    w.varint(u.g as u64);
                    match &u.body {
                        GroupBody::Record(e) => {
                            w.u8(0).varint(e.len() as u64);
                            for &x in e.iter() {
                                w.varint(x);
                            }
                        }
                        GroupBody::Fallback(list) => {
                            w.u8(1);
                            encode_list(&mut w, list);
                        }
                    }
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
            TAG_UPDATE => {
                let seed = r.u64()?;
                let blocks = r.u32()?;
                let n = r.varint_count(1 + CHOICE_BYTES)?;
                let mut choices = Vec::with_capacity(n);
                for _ in 0..n {
                    let b = u32::try_from(r.varint()?).map_err(|_| Error::Corrupt("block index".into()))?;
                    let mut c = [0u8; CHOICE_BYTES];
                    c.copy_from_slice(r.raw(CHOICE_BYTES)?);
                    choices.push((b, c));
                }
                let n = r.varint_count(3)?;
                let mut groups = Vec::with_capacity(n);
                for _ in 0..n {
                    let g = u32::try_from(r.varint()?).map_err(|_| Error::Corrupt("group index".into()))?;
                    let body = match r.u8()? {
                        0 => {
                            let k = r.varint_count(1)?;
                            let mut e = Vec::with_capacity(k);
                            for _ in 0..k {
                                e.push(r.varint()?);
                            }
                            GroupBody::Record(e.into_boxed_slice())
                        }
                        1 => GroupBody::Fallback(decode_list(&mut r, 64)?),
                        t => return Err(Error::Corrupt(format!("unknown group update kind {t}"))),
                    };
                    groups.push(GroupUpdate { g, body });
                }
                Body::Update { seed, blocks, choices, groups }
            }
            TAG_REPLACE => Body::Replace(Box::new(Image::decode(&mut r)?)),
            t => return Err(Error::Corrupt(format!("unknown setsep delta tag {t}"))),
        };
        r.finish()?;
        Ok(Delta { table, seq, body })
    }
}
