//! BFW update messages.

use super::{MAX_FILTER_BITS, Params};
use crate::error::{Error, Result};
use crate::wire::{Frame, Kind, Reader, Wire, Writer};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    Ops { seed: u64, ops: Vec<Op> },
    Replace(Box<Image>),
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

impl Image {
    pub fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64(self.filters.len() as u64);
        for (port, m, words) in &self.filters {
            w.u32(*port).u64(*m).u64s(words);
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
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
    /// Sequence number of this delta.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The table this delta belongs to (see [`crate::lineage`]).
    pub(crate) fn table_id(&self) -> crate::TableId {
        self.table.id
    }
    /// Bit positions set or cleared in place.
    pub fn bits_touched(&self) -> usize {
        match &self.body {
            Body::Ops { ops, .. } => ops
                .iter()
                .map(|o| match o {
                    Op::Set { bits, .. } | Op::Clear { bits, .. } => bits.len(),
                    Op::Filter { .. } => 0,
                })
                .sum(),
            Body::Replace(_) => 0,
        }
    }
    /// Whole filters this delta ships (resizes, new and emptied ports).
    pub fn filters_replaced(&self) -> usize {
        match &self.body {
            Body::Ops { ops, .. } => ops.iter().filter(|o| matches!(o, Op::Filter { .. })).count(),
            Body::Replace(img) => img.filters.len(),
        }
    }
    /// True if this delta replaces the whole lookup form.
    pub(crate) fn is_rebuild(&self) -> bool {
        matches!(self.body, Body::Replace(_))
    }
}

const TAG_OPS: u8 = 1;
const TAG_REPLACE: u8 = 2;
const OP_SET: u8 = 1;
const OP_CLEAR: u8 = 2;
const OP_FILTER: u8 = 3;

impl Wire for Delta {
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(Kind::BfwDelta);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
        match &self.body {
            Body::Ops { seed, ops } => {
                w.u8(TAG_OPS).u64(*seed).varint(ops.len() as u64);
                for op in ops {
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
            Body::Replace(img) => {
                w.u8(TAG_REPLACE);
                img.encode(&mut w);
            }
        }
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, Kind::BfwDelta)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let body = match r.u8()? {
            TAG_OPS => {
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
                Body::Ops { seed, ops }
            }
            TAG_REPLACE => Body::Replace(Box::new(Image::decode(&mut r)?)),
            t => return Err(Error::Corrupt(format!("unknown bfw delta tag {t}"))),
        };
        r.finish()?;
        Ok(Delta { table, seq, body })
    }
}
