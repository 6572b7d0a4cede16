//! FPT update instructions (§7.1): node writes.

use super::Params;
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result};
use crate::wire::{Reader, Writer};

/// An update message for [`super::Lookup`]: numbered node writes (applied
/// in order, atomically for readers) or a whole new node array (growth).
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(pub(crate) RawDelta<super::lookup::Fpt>);

/// Node writes to a trie with this seed and node count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Writes {
    pub seed: u64,
    pub nodes: u32,
    pub writes: Vec<(u32, u64)>,
}

/// A complete lookup form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub p: Params,
    pub nodes: Vec<u64>,
}

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        self.p.encode(w);
        w.u64s(&self.nodes);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let p = Params::decode(r)?;
        let nodes = r.u64s()?;
        p.check_nodes(&nodes)?;
        Ok(Self { p, nodes })
    }
}

impl Delta {
    /// Node words written (the whole array for a rebuild).
    pub fn nodes_touched(&self) -> usize {
        match &self.0.change {
            Change::Patch(p) => p.writes.len(),
            Change::Replace(img) => img.nodes.len(),
        }
    }
}

const TAG_WRITES: u8 = 1;
pub(crate) const TAG_REPLACE: u8 = 2;

impl PatchCodec for Writes {
    fn encode(&self, w: &mut Writer) {
        w.u8(TAG_WRITES).u64(self.seed).u32(self.nodes).varint(self.writes.len() as u64);
        for &(i, x) in &self.writes {
            w.varint(i as u64).varint(x);
        }
    }

    fn decode(tag: u8, r: &mut Reader<'_>) -> Result<Self> {
        if tag != TAG_WRITES {
            return Err(Error::Corrupt(format!("unknown fpt delta tag {tag}")));
        }
        let seed = r.u64()?;
        let nodes = r.u32()?;
        let n = r.varint_count(2)?;
        let mut writes = Vec::with_capacity(n);
        for _ in 0..n {
            let i = r.varint()?;
            Reader::ensure(i < nodes as u64, || format!("node index {i} outside {nodes} nodes"))?;
            writes.push((i as u32, r.varint()?));
        }
        Ok(Writes { seed, nodes, writes })
    }
}
