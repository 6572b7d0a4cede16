//! SetSep update messages: new group records (and block choices), or a
//! whole new lookup form after growth.

use super::{BUCKETS_PER_BLOCK, Params};
use crate::bits::PackedArray;
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result, mask};
use crate::wire::{Reader, Writer};

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

/// In-place change of the current skeleton `(seed, blocks)`: the bucket
/// choices of whole blocks and the new content of groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Update {
    pub seed: u64,
    pub blocks: u32,
    pub choices: Vec<(u32, [u8; CHOICE_BYTES])>,
    pub groups: Vec<GroupUpdate>,
}

/// An update message for [`super::Lookup`]: an in-place [`Update`] or, after
/// growth or shrink, the whole new lookup form. Deltas are numbered: a
/// lookup form applies delta `s + 1` only after delta `s`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(pub(crate) RawDelta<super::lookup::SetSep>);

impl Eq for Delta {}

impl Delta {
    /// Groups whose record (or fallback list) this delta rewrites.
    pub fn groups_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(u) => u.groups.len(),
            Change::Replace(img) => img.p.groups(),
        }
    }
    /// Blocks whose bucket choices this delta rewrites.
    pub fn blocks_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(u) => u.choices.len(),
            Change::Replace(img) => img.p.blocks as usize,
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

/// Writes an image from its parts (the lookup form writes its blob without
/// copying its arrays into an [`Image`] first).
pub(crate) fn encode_image(w: &mut Writer, p: &Params, choices: &PackedArray, rec: &PackedArray, fallback: &Fallback) {
    p.encode(w);
    w.u64s(&choices.to_words()).u64s(&rec.to_words());
    w.varint(fallback.len() as u64);
    for (g, list) in fallback {
        w.u32(*g);
        encode_list(w, list);
    }
}

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        encode_image(w, &self.p, &self.choices, &self.rec, &self.fallback);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
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
pub(crate) const TAG_REPLACE: u8 = 2;

impl PatchCodec for Update {
    fn encode(&self, w: &mut Writer) {
        let Update { seed, blocks, choices, groups } = self;
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
                    encode_list(w, list);
                }
            }
        }
    }

    fn decode(tag: u8, r: &mut Reader<'_>) -> Result<Self> {
        if tag != TAG_UPDATE {
            return Err(Error::Corrupt(format!("unknown setsep delta tag {tag}")));
        }
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
                1 => GroupBody::Fallback(decode_list(r, 64)?),
                t => return Err(Error::Corrupt(format!("unknown group update kind {t}"))),
            };
            groups.push(GroupUpdate { g, body });
        }
        Ok(Update { seed, blocks, choices, groups })
    }
}
