//! LPM update messages: a numbered list of small operations on the lookup
//! form's parts (top array, per-length Othello indexes and slot arrays).

use super::lookup::Lpm;
use super::slots::Entry;
use super::{BLOCKS, Family, T_BITS, buckets};
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result, mask};
use crate::lineage::Lineage;
use crate::othello;
use crate::wire::{Reader, Wire, Writer};

/// A whole prefix-length table: its Othello index (prefix → slot), the
/// index's own delta sequence number, and the slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LevelImage {
    pub len: u8,
    pub oseq: u64,
    pub index: othello::Image,
    pub slots: Vec<Entry>,
}

impl LevelImage {
    pub fn encode(&self, w: &mut Writer, fam: Family) {
        w.u8(self.len).u64(self.oseq);
        self.index.encode(w);
        w.varint(self.slots.len() as u64);
        for e in &self.slots {
            match e {
                None => {
                    w.u8(0);
                }
                Some((k, nh)) => {
                    w.u8(1);
                    put_bits(w, fam, *k);
                    w.varint(*nh as u64);
                }
            }
        }
    }

    /// Decodes and checks everything a lookup relies on: the length fits
    /// the family and lies above the top array, every slot index the Othello
    /// index can produce is below 2^32, stored prefixes have no host bits.
    pub fn decode(r: &mut Reader<'_>, fam: Family) -> Result<Self> {
        let len = r.u8()?;
        if (len as u32) <= T_BITS || len as u32 > fam.width() {
            return Err(Error::Corrupt(format!("prefix-length table /{len} outside {}..={}", T_BITS + 1, fam.width())));
        }
        let oseq = r.u64()?;
        let index = othello::Image::decode(r)?;
        if index.p.vbits > 32 {
            return Err(Error::Corrupt(format!("slot index of {} bits", index.p.vbits)));
        }
        let n = r.varint_count(1)?;
        if n as u64 > 1u64 << index.p.vbits {
            return Err(Error::Corrupt(format!("{n} slots behind a {}-bit index", index.p.vbits)));
        }
        let mut slots = Vec::with_capacity(n);
        let m = super::prefix::netmask(fam.width(), len as u32);
        for _ in 0..n {
            slots.push(match r.u8()? {
                0 => None,
                1 => {
                    let k = get_bits(r, fam)?;
                    if k & !m != 0 {
                        return Err(Error::Corrupt(format!("slot prefix has bits beyond /{len}")));
                    }
                    let nh = r.varint()?;
                    if nh > super::MAX_VALUE {
                        return Err(Error::Corrupt(format!("next hop {nh} wider than 31 bits")));
                    }
                    Some((k, nh as u32))
                }
                f => return Err(Error::Corrupt(format!("slot flag {f}"))),
            });
        }
        Ok(Self { len, oseq, index, slots })
    }
}

pub(crate) fn put_bits(w: &mut Writer, fam: Family, k: u128) {
    match fam {
        Family::V4 => w.u32(k as u32),
        Family::V6 => w.u64((k >> 64) as u64).u64(k as u64),
    };
}

pub(crate) fn get_bits(r: &mut Reader<'_>, fam: Family) -> Result<u128> {
    Ok(match fam {
        Family::V4 => r.u32()? as u128,
        Family::V6 => (r.u64()? as u128) << 64 | r.u64()? as u128,
    })
}

/// One step of a delta. Steps are applied in order, each atomically with
/// respect to readers; the control form orders them so that every
/// intermediate state answers each address with its route before or after
/// the update (module docs, "Updates").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Allocates a family's (empty) top array.
    InitTop { fam: Family },
    /// Top-array next hops (`next_hop + 1`, 0 = none) for runs of blocks:
    /// `(first block, count, value)`.
    Short { fam: Family, runs: Vec<(u32, u32, u32)> },
    /// A block's set of non-empty length buckets.
    Mask { fam: Family, block: u32, mask: u64 },
    /// Writes one slot of a length's table.
    Slot { fam: Family, len: u8, slot: u32, entry: Entry },
    /// An Othello delta for a length's index.
    Index { fam: Family, len: u8, delta: othello::Delta },
    /// Creates or replaces a length's table (`Some`) or drops it (`None`).
    Level { fam: Family, len: u8, image: Option<Box<LevelImage>> },
}

/// An update message for [`super::Lookup`], numbered like every keyplane
/// delta: a lookup form applies delta `s + 1` only after delta `s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta(pub(crate) RawDelta<Lpm>);

/// A delta's steps, in order (an LPM delta is always a patch: a length
/// table that changes whole travels as an [`Op::Level`] step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Steps(pub Vec<Op>);

/// The lineage of an LPM table: its 64-bit id, no key format.
pub(crate) fn lineage_of(id: u64) -> Lineage {
    Lineage { id: crate::TableId::from_u128(id as u128), key_format: None }
}

impl Delta {
    /// A delta of `ops` numbered `seq` for table `id`.
    pub(crate) fn new(id: u64, seq: u64, ops: Vec<Op>) -> Self {
        Delta(RawDelta::patch(lineage_of(id), seq, Steps(ops)))
    }
    /// The steps.
    pub(crate) fn ops(&self) -> &[Op] {
        match &self.0.change {
            Change::Patch(s) => &s.0,
            Change::Replace(_) => &[],
        }
    }
    /// Number of steps (0 for an update that changed nothing).
    pub fn steps(&self) -> usize {
        self.ops().len()
    }
    /// True if the delta creates, replaces or drops a whole prefix-length
    /// table (its size is then that table's, not a few bytes).
    pub fn replaces_a_length(&self) -> bool {
        self.ops()
            .iter()
            .any(|o| matches!(o, Op::Level { .. }) || matches!(o, Op::Index { delta, .. } if delta.is_rebuild()))
    }
}

const T_INIT: u8 = 1;
const T_SHORT: u8 = 2;
const T_MASK: u8 = 3;
const T_SLOT: u8 = 4;
const T_INDEX: u8 = 5;
const T_LEVEL: u8 = 6;

fn fam_code(f: Family) -> u8 {
    f.index() as u8
}

fn read_fam(r: &mut Reader<'_>) -> Result<Family> {
    match r.u8()? {
        0 => Ok(Family::V4),
        1 => Ok(Family::V6),
        x => Err(Error::Corrupt(format!("address family code {x}"))),
    }
}

/// A delta's payload (`Lpm::write_delta`): `seq | table id (8 bytes)`, then
/// the steps; no tag byte.
pub(crate) fn write_delta(w: &mut Writer, d: &RawDelta<Lpm>) {
    w.u64(d.seq).u64(d.table.id.as_u128() as u64);
    match &d.change {
        Change::Patch(s) => s.encode(w),
        // Never built: LPM deltas replace length tables, not the whole table.
        Change::Replace(_) => Steps(Vec::new()).encode(w),
    }
}

/// Reads what [`write_delta`] wrote.
pub(crate) fn read_delta(r: &mut Reader<'_>) -> Result<RawDelta<Lpm>> {
    let seq = r.u64()?;
    let table = r.u64()?;
    Ok(RawDelta::patch(lineage_of(table), seq, read_steps(r)?))
}

/// The steps, as a count and one tagged record each (LPM deltas have no
/// delta-level tag byte: [`write_delta`] writes this right after the
/// prologue).
impl PatchCodec for Steps {
    fn encode(&self, w: &mut Writer) {
        w.varint(self.0.len() as u64);
        for op in &self.0 {
            match op {
                Op::InitTop { fam } => {
                    w.u8(T_INIT).u8(fam_code(*fam));
                }
                Op::Short { fam, runs } => {
                    w.u8(T_SHORT).u8(fam_code(*fam)).varint(runs.len() as u64);
                    for &(b, n, v) in runs {
                        w.varint(b as u64).varint(n as u64).varint(v as u64);
                    }
                }
                Op::Mask { fam, block, mask } => {
                    w.u8(T_MASK).u8(fam_code(*fam)).varint(*block as u64).u64(*mask);
                }
                Op::Slot { fam, len, slot, entry } => {
                    w.u8(T_SLOT).u8(fam_code(*fam)).u8(*len).varint(*slot as u64);
                    match entry {
                        None => {
                            w.u8(0);
                        }
                        Some((k, nh)) => {
                            w.u8(1);
                            put_bits(w, *fam, *k);
                            w.varint(*nh as u64);
                        }
                    }
                }
                Op::Index { fam, len, delta } => {
                    w.u8(T_INDEX).u8(fam_code(*fam)).u8(*len).bytes(&delta.to_bytes());
                }
                Op::Level { fam, len, image } => {
                    w.u8(T_LEVEL).u8(fam_code(*fam)).u8(*len);
                    match image {
                        None => {
                            w.u8(0);
                        }
                        Some(img) => {
                            w.u8(1);
                            img.encode(w, *fam);
                        }
                    }
                }
            }
        }
    }

    /// Not reached: [`read_delta`] reads the steps without a tag byte.
    fn decode(tag: u8, _: &mut Reader<'_>) -> Result<Self> {
        Err(Error::Corrupt(format!("lpm deltas carry no tag byte (got {tag})")))
    }
}

fn read_steps(r: &mut Reader<'_>) -> Result<Steps> {
    let n = r.varint_count(2)?;
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        let tag = r.u8()?;
        let fam = read_fam(r)?;
        let u32v = |r: &mut Reader<'_>| -> Result<u32> {
            u32::try_from(r.varint()?).map_err(|_| Error::Corrupt("32-bit field out of range".into()))
        };
        ops.push(match tag {
            T_INIT => Op::InitTop { fam },
            T_SHORT => {
                let k = r.varint_count(3)?;
                let mut runs = Vec::with_capacity(k);
                for _ in 0..k {
                    runs.push((u32v(r)?, u32v(r)?, u32v(r)?));
                }
                Op::Short { fam, runs }
            }
            T_MASK => Op::Mask { fam, block: u32v(r)?, mask: r.u64()? },
            T_SLOT => {
                let len = r.u8()?;
                let slot = u32v(r)?;
                let entry = match r.u8()? {
                    0 => None,
                    1 => {
                        let k = get_bits(r, fam)?;
                        Some((k, u32v(r)?))
                    }
                    f => return Err(Error::Corrupt(format!("slot flag {f}"))),
                };
                Op::Slot { fam, len, slot, entry }
            }
            T_INDEX => {
                let len = r.u8()?;
                Op::Index { fam, len, delta: othello::Delta::from_bytes(r.bytes()?)? }
            }
            T_LEVEL => {
                let len = r.u8()?;
                let image = match r.u8()? {
                    0 => None,
                    1 => {
                        let img = LevelImage::decode(r, fam)?;
                        if img.len != len {
                            return Err(Error::Corrupt("level image for another length".into()));
                        }
                        Some(Box::new(img))
                    }
                    f => return Err(Error::Corrupt(format!("level flag {f}"))),
                };
                Op::Level { fam, len, image }
            }
            t => return Err(Error::Corrupt(format!("unknown lpm delta step {t}"))),
        });
    }
    Ok(Steps(ops))
}

/// One family of a whole lookup form: the non-empty top-array entries
/// `(block, mask, short)` in block order (`None`: no top array), and the
/// length tables, longest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct FamImage {
    pub top: Option<Vec<(u32, u64, u32)>>,
    pub levels: Vec<LevelImage>,
}

/// A whole LPM lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub vbits: u32,
    pub fams: [FamImage; 2],
}

impl Image {
    /// Both families (a blob's payload after its `vbits | id | seq` head).
    pub fn encode_fams(&self, w: &mut Writer) {
        for (i, fam) in self.fams.iter().enumerate() {
            match &fam.top {
                None => {
                    w.u8(0);
                }
                Some(used) => {
                    // Sparse: (block gap, mask, short) for every non-empty block.
                    w.u8(1).varint(used.len() as u64);
                    let mut prev = 0u32;
                    for &(b, m, s) in used {
                        w.varint((b - prev) as u64).varint(m).varint(s as u64);
                        prev = b;
                    }
                }
            }
            w.varint(fam.levels.len() as u64);
            for l in &fam.levels {
                l.encode(w, Family::from_index(i));
            }
        }
    }

    /// Reads [`Image::encode_fams`] for a table of `vbits`-bit next hops,
    /// checking everything a lookup relies on.
    pub fn decode_fams(r: &mut Reader<'_>, vbits: u32) -> Result<Self> {
        let mut fams: [FamImage; 2] = Default::default();
        for (i, fam) in fams.iter_mut().enumerate() {
            let f = Family::from_index(i);
            fam.top = decode_top(r, f, vbits)?;
            let n = r.varint_count(8)?;
            let mut last = u8::MAX;
            for _ in 0..n {
                let img = LevelImage::decode(r, f)?;
                Reader::ensure(img.len < last, || "length tables out of order".into())?;
                Reader::ensure(img.slots.iter().flatten().all(|&(_, nh)| nh as u64 <= mask(vbits)), || {
                    "next hop wider than the table's value bits".into()
                })?;
                Reader::ensure(fam.top.is_some(), || "length table without a top array".into())?;
                last = img.len;
                fam.levels.push(img);
            }
        }
        Ok(Image { vbits, fams })
    }

    /// Reads and checks a value width.
    pub fn decode_vbits(r: &mut Reader<'_>) -> Result<u32> {
        let vbits = r.u8()? as u32;
        crate::check_value_bits(vbits, 1, super::MAX_VALUE_BITS).map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(vbits)
    }
}

/// `vbits`, then both families (blobs write their id and sequence number
/// between the two: see `Lpm::write_blob`).
impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        w.u8(self.vbits as u8);
        self.encode_fams(w);
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let vbits = Self::decode_vbits(r)?;
        Self::decode_fams(r, vbits)
    }
}

fn decode_top(r: &mut Reader<'_>, f: Family, vbits: u32) -> Result<Option<Vec<(u32, u64, u32)>>> {
    match r.u8()? {
        0 => Ok(None),
        1 => {
            let n = r.varint_count(3)?;
            Reader::ensure(n <= BLOCKS, || format!("{n} top entries, at most {BLOCKS}"))?;
            let mut used = Vec::with_capacity(n);
            let mut b = 0u64;
            for i in 0..n {
                let gap = r.varint()?;
                Reader::ensure(i == 0 || gap > 0, || "top entries out of order".into())?;
                b = b
                    .checked_add(gap)
                    .filter(|&b| b < BLOCKS as u64)
                    .ok_or_else(|| Error::Corrupt(format!("top entry beyond block {}", BLOCKS - 1)))?;
                let m = r.varint()?;
                let s = r.varint()?;
                Reader::ensure(m >> buckets(f) == 0, || "mask bit beyond the lengths".into())?;
                Reader::ensure(s <= mask(vbits) + 1, || "top next hop wider than the table's value bits".into())?;
                used.push((b as u32, m, s as u32));
            }
            Ok(Some(used))
        }
        x => Err(Error::Corrupt(format!("top flag {x}"))),
    }
}
