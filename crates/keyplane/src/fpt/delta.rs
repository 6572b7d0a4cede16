//! FPT update instructions (§7.1): node writes.

use super::Params;
use crate::error::{Error, Result};
use crate::wire::{Frame, Kind, Reader, Wire, Writer};

/// An update message for [`super::Lookup`]: numbered node writes (applied
/// in order, atomically for readers) or a whole new node array (growth).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    Writes { seed: u64, nodes: u32, writes: Vec<(u32, u64)> },
    Replace(Box<Image>),
}

/// A complete lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub nodes: Vec<u64>,
}

impl Image {
    pub fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.nodes);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let nodes = r.u64s()?;
        p.check_nodes(&nodes)?;
        Ok(Self { p, nodes })
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
    /// True if this delta replaces the whole lookup form (node array growth).
    pub(crate) fn is_rebuild(&self) -> bool {
        matches!(self.body, Body::Replace(_))
    }
    /// Node words written (the whole array for a rebuild).
    pub fn nodes_touched(&self) -> usize {
        match &self.body {
            Body::Writes { writes, .. } => writes.len(),
            Body::Replace(img) => img.nodes.len(),
        }
    }
}

const TAG_WRITES: u8 = 1;
const TAG_REPLACE: u8 = 2;

impl Wire for Delta {
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(Kind::FptDelta);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
        match &self.body {
            Body::Writes { seed, nodes, writes } => {
                w.u8(TAG_WRITES).u64(*seed).u32(*nodes).varint(writes.len() as u64);
                for &(i, x) in writes {
                    w.varint(i as u64).varint(x);
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
        let mut r = Frame::open(bytes, Kind::FptDelta)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let body = match r.u8()? {
            TAG_WRITES => {
                let seed = r.u64()?;
                let nodes = r.u32()?;
                let n = r.varint_count(2)?;
                let mut writes = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = r.varint()?;
                    Reader::ensure(i < nodes as u64, || format!("node index {i} outside {nodes} nodes"))?;
                    writes.push((i as u32, r.varint()?));
                }
                Body::Writes { seed, nodes, writes }
            }
            TAG_REPLACE => Body::Replace(Box::new(Image::decode(&mut r)?)),
            t => return Err(Error::Corrupt(format!("unknown fpt delta tag {t}"))),
        };
        r.finish()?;
        Ok(Delta { table, seq, body })
    }
}
