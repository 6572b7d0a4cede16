//! LPM update messages: a numbered list of small operations on the lookup
//! form's parts (top array, per-length Othello indexes and slot arrays).

use super::slots::Entry;
use super::{Family, T_BITS};
use crate::error::{Error, Result};
use crate::othello;
use crate::wire::{Frame, Kind, Reader, Wire, Writer};

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
pub struct Delta {
    pub(crate) seq: u64,
    /// Identity of the control form that made it (refused by other tables).
    pub(crate) table: u64,
    pub(crate) ops: Vec<Op>,
}

impl Delta {
    /// Sequence number of this delta (the lookup form's after applying it).
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Number of steps (0 for an update that changed nothing).
    pub fn steps(&self) -> usize {
        self.ops.len()
    }
    /// True if the delta creates, replaces or drops a whole prefix-length
    /// table (its size is then that table's, not a few bytes).
    pub fn replaces_a_length(&self) -> bool {
        self.ops
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

impl Wire for Delta {
    const KIND: Kind = super::DELTA_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(super::DELTA_KIND);
        w.u64(self.seq).u64(self.table).varint(self.ops.len() as u64);
        for op in &self.ops {
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
                            put_bits(&mut w, *fam, *k);
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
                            img.encode(&mut w, *fam);
                        }
                    }
                }
            }
        }
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, super::DELTA_KIND)?;
        let seq = r.u64()?;
        let table = r.u64()?;
        let n = r.varint_count(2)?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            let tag = r.u8()?;
            let fam = read_fam(&mut r)?;
            let u32v = |r: &mut Reader<'_>| -> Result<u32> {
                u32::try_from(r.varint()?).map_err(|_| Error::Corrupt("32-bit field out of range".into()))
            };
            ops.push(match tag {
                T_INIT => Op::InitTop { fam },
                T_SHORT => {
                    let k = r.varint_count(3)?;
                    let mut runs = Vec::with_capacity(k);
                    for _ in 0..k {
                        runs.push((u32v(&mut r)?, u32v(&mut r)?, u32v(&mut r)?));
                    }
                    Op::Short { fam, runs }
                }
                T_MASK => Op::Mask { fam, block: u32v(&mut r)?, mask: r.u64()? },
                T_SLOT => {
                    let len = r.u8()?;
                    let slot = u32v(&mut r)?;
                    let entry = match r.u8()? {
                        0 => None,
                        1 => {
                            let k = get_bits(&mut r, fam)?;
                            Some((k, u32v(&mut r)?))
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
                            let img = LevelImage::decode(&mut r, fam)?;
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
        r.finish()?;
        Ok(Delta { seq, table, ops })
    }
}
