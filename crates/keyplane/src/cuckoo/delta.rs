//! Cuckoo update messages: the writer's own slot steps, arena appends and
//! resize decisions, replayed by a replica.

use super::table::{MAX_ENTRY_WORDS, Op, Resize, SlotWrite};
use crate::error::{Error, Result};
use crate::wire::{Frame, Kind, Wire, Writer};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) seed: u64,
    pub(crate) ops: Vec<Op>,
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
    /// Slot writes this delta carries.
    pub fn slots_touched(&self) -> usize {
        self.ops.iter().map(|o| if let Op::Step(w) = o { w.len() } else { 0 }).sum()
    }
    /// Cuckoo displacements (two-slot steps that move a key).
    pub fn moves(&self) -> usize {
        self.ops.iter().filter(|o| matches!(o, Op::Step(w) if w.len() == 2 && w[0].meta != 0)).count()
    }
    /// True if the replica has to rebuild (resize or arena compaction).
    pub(crate) fn is_rebuild(&self) -> bool {
        self.ops.iter().any(|o| matches!(o, Op::Rebuild { .. }))
    }
}

const TAG_ARENA: u8 = 1;
const TAG_STEP: u8 = 2;
const TAG_REBUILD: u8 = 3;

impl Wire for Delta {
    const KIND: Kind = super::DELTA_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(super::DELTA_KIND);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
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
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, super::DELTA_KIND)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let seed = r.u64()?;
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
                t => return Err(Error::Corrupt(format!("unknown cuckoo delta op {t}"))),
            };
            ops.push(op);
        }
        r.finish()?;
        Ok(Delta { table, seq, seed, ops })
    }
}
