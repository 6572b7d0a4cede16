//! BFW update messages.

use super::{MAX_FILTER_BITS, Params};
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result};
use crate::wire::{Reader, Writer};

/// One change to a port's Bloom filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Set these bit positions of `port`'s filter.
    Set { port: u32, bits: Vec<u64> },
    /// Clear these bit positions (their counters returned to 0).
    Clear { port: u32, bits: Vec<u64> },
    /// Replace `port`'s filter (`m` bits, `words`); `m = 0` removes the port.
    Filter { port: u32, m: u64, words: Vec<u64> },
}

/// An update message for [`super::Lookup`]: bit positions to set and clear
/// per port, or whole filters when a port's filter is resized, appears or
/// disappears. Deltas are numbered; a lookup form applies `s + 1` only after `s`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(pub(crate) RawDelta<super::lookup::Bfw>);

/// An in-place change: filter operations on the table with this seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ops {
    pub seed: u64,
    pub ops: Vec<Op>,
}

/// A whole lookup form: parameters and `(port, m, words)` per non-empty
/// port, ports strictly increasing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub filters: Vec<(u32, u64, Vec<u64>)>,
}

pub(crate) fn check_filter(p: &Params, port: u32, m: u64, words: usize) -> Result<()> {
    if port as u64 > crate::mask(p.vbits) {
        return Err(Error::Corrupt(format!("port {port} wider than {} value bits", p.vbits)));
    }
    if m == 0 || m > MAX_FILTER_BITS || m.div_ceil(64) as usize != words {
        return Err(Error::Corrupt(format!("filter of {m} bits with {words} words")));
    }
    Ok(())
}

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64(self.filters.len() as u64);
        for (port, m, words) in &self.filters {
            w.u32(*port).u64(*m).u64s(words);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let n = r.count(20)?;
        let mut filters: Vec<(u32, u64, Vec<u64>)> = Vec::with_capacity(n);
        for _ in 0..n {
            let port = r.u32()?;
            let m = r.u64()?;
            let words = r.u64s()?;
            check_filter(&p, port, m, words.len())?;
            if let Some((last, _, _)) = filters.last() {
                Reader::ensure(*last < port, || "ports not strictly increasing".into())?;
            }
            filters.push((port, m, words));
        }
        Ok(Image { p, filters })
    }
}

impl Delta {
    /// Bit positions set or cleared in place.
    pub fn bits_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p
                .ops
                .iter()
                .map(|o| match o {
                    Op::Set { bits, .. } | Op::Clear { bits, .. } => bits.len(),
                    Op::Filter { .. } => 0,
                })
                .sum(),
            Change::Replace(_) => 0,
        }
    }
    /// Whole filters this delta ships (resizes, new and emptied ports).
    pub fn filters_replaced(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p.ops.iter().filter(|o| matches!(o, Op::Filter { .. })).count(),
            Change::Replace(img) => img.filters.len(),
        }
    }
}

const TAG_OPS: u8 = 1;
pub(crate) const TAG_REPLACE: u8 = 2;
const OP_SET: u8 = 1;
const OP_CLEAR: u8 = 2;
const OP_FILTER: u8 = 3;

impl PatchCodec for Ops {
    fn encode(&self, w: &mut Writer) {
        w.u8(TAG_OPS).u64(self.seed).varint(self.ops.len() as u64);
        for op in &self.ops {
            match op {
                Op::Set { port, bits } | Op::Clear { port, bits } => {
                    w.u8(if matches!(op, Op::Set { .. }) { OP_SET } else { OP_CLEAR });
                    w.varint(*port as u64).varint(bits.len() as u64);
                    for &b in bits {
                        w.varint(b);
                    }
                }
                Op::Filter { port, m, words } => {
                    w.u8(OP_FILTER).varint(*port as u64).varint(*m).u64s(words);
                }
            }
        }
    }

    fn decode(tag: u8, r: &mut Reader<'_>) -> Result<Self> {
        if tag != TAG_OPS {
            return Err(Error::Corrupt(format!("unknown bfw delta tag {tag}")));
        }
        let seed = r.u64()?;
        let n = r.varint_count(3)?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            let tag = r.u8()?;
            let port = r.varint()?;
            let port = u32::try_from(port).map_err(|_| Error::Corrupt(format!("port {port}")))?;
            ops.push(match tag {
                OP_SET | OP_CLEAR => {
                    let k = r.varint_count(1)?;
                    let mut bits = Vec::with_capacity(k);
                    for _ in 0..k {
                        bits.push(r.varint()?);
                    }
                    if tag == OP_SET { Op::Set { port, bits } } else { Op::Clear { port, bits } }
                }
                OP_FILTER => Op::Filter { port, m: r.varint()?, words: r.u64s()? },
                t => return Err(Error::Corrupt(format!("unknown bfw delta op {t}"))),
            });
        }
        Ok(Ops { seed, ops })
    }
}
