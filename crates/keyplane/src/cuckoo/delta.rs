//! Cuckoo update messages: the writer's own slot steps, arena appends and
//! resize decisions, replayed by a replica.

use super::lookup::Cuckoo;
use super::table::{MAX_ENTRY_WORDS, Op, Resize, SlotWrite, Table};
use crate::engine::{Change, ImageCodec, PatchCodec, RawDelta};
use crate::error::{Error, Result};
use crate::wire::{Reader as WireReader, Writer};

/// At most this many rebuilds in one delta (an insert needs at most three:
/// load growth, arena compaction, stash-full growth; a remove one shrink).
pub(crate) const MAX_REBUILDS: usize = 4;

/// An update message for [`super::Lookup`].
///
/// It lists, in order, the operations the writer performed on its own table
/// for one insert or remove: arena appends (long keys), steps (slot writes
/// that readers observe atomically — a cuckoo displacement, the new key, a
/// cleared slot) and rebuilds (resize or arena compaction, re-executed
/// deterministically by the replica). Deltas are numbered: a lookup form
/// applies delta `s + 1` only after delta `s`; a delta from a table with
/// another seed is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta(pub(crate) RawDelta<Cuckoo>);

impl Eq for Delta {}

/// The writer's operations for one update on a table with this seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ops {
    pub seed: u64,
    pub ops: Vec<Op>,
}

/// A whole table (a blob's payload; the body of a whole-table delta).
#[derive(Debug)]
pub(crate) struct Image(pub Table);

impl Clone for Image {
    fn clone(&self) -> Self {
        Image(self.0.clone_table())
    }
}

/// Equal when they encode to the same bytes.
impl PartialEq for Image {
    fn eq(&self, o: &Self) -> bool {
        let enc = |t: &Table| {
            let mut w = Writer::new(super::LOOKUP_KIND);
            t.encode(&mut w);
            w.finish()
        };
        enc(&self.0) == enc(&o.0)
    }
}

impl Delta {
    pub(crate) fn new(table: crate::lineage::Lineage, seq: u64, seed: u64, ops: Vec<Op>) -> Self {
        Delta(RawDelta::patch(table, seq, Ops { seed, ops }))
    }

    fn ops(&self) -> &[Op] {
        match &self.0.change {
            Change::Patch(p) => &p.ops,
            Change::Replace(_) => &[],
        }
    }

    /// Slot writes this delta carries (every occupied slot of a whole table).
    pub fn slots_touched(&self) -> usize {
        if let Change::Replace(img) = &self.0.change {
            return img.0.len();
        }
        self.ops().iter().map(|o| if let Op::Step(w) = o { w.len() } else { 0 }).sum()
    }
    /// Cuckoo displacements (two-slot steps that move a key).
    pub fn moves(&self) -> usize {
        self.ops().iter().filter(|o| matches!(o, Op::Step(w) if w.len() == 2 && w[0].meta != 0)).count()
    }
}

const TAG_ARENA: u8 = 1;
const TAG_STEP: u8 = 2;
const TAG_REBUILD: u8 = 3;
/// A whole table, the only operation of its delta (the engine's
/// whole-table replacement; the control form itself ships rebuilds).
pub(crate) const TAG_TABLE: u8 = 4;

impl ImageCodec for Image {
    fn encode(&self, w: &mut Writer) {
        self.0.encode(w);
    }
    fn decode(r: &mut WireReader<'_>) -> Result<Self> {
        Table::decode(r).map(Image)
    }
}

/// The delta body has no tag byte: the seed, the number of operations, the
/// operations (see [`Cuckoo`]'s `write_delta`).
impl PatchCodec for Ops {
    fn encode(&self, w: &mut Writer) {
        w.u64(self.seed).varint(self.ops.len() as u64);
        for op in &self.ops {
            match op {
                Op::Arena { off, words } => {
                    w.u8(TAG_ARENA).varint(*off).varint(words.len() as u64);
                    for &x in words {
                        w.u64(x);
                    }
                }
                Op::Step(ws) => {
                    w.u8(TAG_STEP).varint(ws.len() as u64);
                    for s in ws {
                        w.varint(s.slot).u64(s.key).u64(s.meta).varint(s.val);
                    }
                }
                Op::Rebuild { mode, extra, nb } => {
                    w.u8(TAG_REBUILD).u8(*mode as u8).u32(*extra).u32(*nb);
                }
            }
        }
    }
    /// `first` is the seed's low byte (read by the caller).
    fn decode(first: u8, r: &mut WireReader<'_>) -> Result<Self> {
        match read_change(first, r)? {
            Change::Patch(p) => Ok(p),
            Change::Replace(_) => Err(Error::Corrupt("a whole table where operations were expected".into())),
        }
    }
}

/// Writes a change: the operations, or a whole table as the one operation.
pub(crate) fn write_change(change: &Change<Cuckoo>, w: &mut Writer) {
    match change {
        Change::Patch(p) => p.encode(w),
        Change::Replace(img) => {
            w.u64(img.0.p.seed).varint(1).u8(TAG_TABLE);
            img.encode(w);
        }
    }
}

/// Reads a change whose first byte (the seed's low byte) is `first`.
pub(crate) fn read_change(first: u8, r: &mut WireReader<'_>) -> Result<Change<Cuckoo>> {
    let mut b = [first; 8];
    b[1..].copy_from_slice(r.raw(7)?);
    let seed = u64::from_le_bytes(b);
    let n = r.varint_count(2)?;
    let mut ops = Vec::with_capacity(n);
    let mut rebuilds = 0;
    for _ in 0..n {
        let op = match r.u8()? {
            TAG_ARENA => {
                let off = r.varint()?;
                let len = r.varint_count(8)?;
                if len == 0 || len > MAX_ENTRY_WORDS {
                    return Err(Error::Corrupt(format!("arena entry of {len} words")));
                }
                let mut words = Vec::with_capacity(len);
                for _ in 0..len {
                    words.push(r.u64()?);
                }
                Op::Arena { off, words }
            }
            TAG_STEP => {
                let len = r.varint_count(18)?;
                if len == 0 {
                    return Err(Error::Corrupt("empty step".into()));
                }
                let mut ws = Vec::with_capacity(len);
                for _ in 0..len {
                    ws.push(SlotWrite { slot: r.varint()?, key: r.u64()?, meta: r.u64()?, val: r.varint()? });
                }
                Op::Step(ws)
            }
            TAG_REBUILD => {
                rebuilds += 1;
                if rebuilds > MAX_REBUILDS {
                    return Err(Error::Corrupt("too many rebuilds in one delta".into()));
                }
                let c = r.u8()?;
                let mode = Resize::from_code(c).ok_or_else(|| Error::Corrupt(format!("resize mode {c}")))?;
                let extra = r.u32()?;
                if extra as usize > MAX_ENTRY_WORDS {
                    return Err(Error::Corrupt(format!("rebuild reserves {extra} arena words")));
                }
                Op::Rebuild { mode, extra, nb: r.u32()? }
            }
            TAG_TABLE if n == 1 => {
                let img = Image::decode(r)?;
                if img.0.p.seed != seed {
                    return Err(Error::Corrupt("whole table with another seed than its delta".into()));
                }
                return Ok(Change::Replace(Box::new(img)));
            }
            t => return Err(Error::Corrupt(format!("unknown cuckoo delta op {t}"))),
        };
        ops.push(op);
    }
    Ok(Change::Patch(Ops { seed, ops }))
}
