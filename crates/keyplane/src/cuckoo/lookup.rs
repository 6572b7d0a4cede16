//! The cuckoo lookup form: an independent replica kept current by deltas.

use super::STASH;
use super::control::{Reader, Shared};
use super::delta::Delta;
use super::table::{Op, Resize, Table};
use crate::LookupTable;
use crate::error::{Error, Result};
use crate::wire::{Frame, Kind, Wire, Writer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Sequence value of a replica on which a delta failed half-way.
const POISONED: u64 = u64::MAX;

/// Cuckoo lookup form: the full table (keys, values, stash, key arena).
/// Lookups are exact. See the [module docs](super).
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
#[derive(Debug)]
pub struct Lookup {
    table: crate::lineage::Lineage,
    cur: Arc<Shared>,
    seq: AtomicU64,
    writer: Mutex<()>,
}

impl Lookup {
    /// Table id and key format (see [`crate::lineage`]).
    pub(crate) fn lineage(&self) -> crate::lineage::Lineage {
        self.table
    }

    pub(crate) fn from_table(t: Table, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self { table, cur: Arc::new(Shared::new(t)), seq: AtomicU64::new(seq), writer: Mutex::new(()) }
    }

    /// Sequence number of the last delta applied (or of the export).
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.cur.load().len()
    }
    /// True when the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exact lookup of the 8-byte key `key.to_le_bytes()` (see [`Reader::get_u64`]).
    #[inline]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.cur.load().get_u64(key)
    }
    /// Key width of the fixed-width layout (`None`: the wide layout).
    pub fn key_width(&self) -> Option<usize> {
        let kl = self.cur.load().p.kl;
        (kl != 0).then_some(kl as usize)
    }
    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.cur.load().p.nb as usize
    }
    /// Keys currently in the stash.
    pub fn stash_len(&self) -> usize {
        self.cur.load().stash_len()
    }
    /// Value width.
    pub(crate) fn value_bits(&self) -> u32 {
        self.cur.load().p.vbits
    }
    /// True when values live in a separate array (ScaleBricks §5.2).
    pub fn separate_values(&self) -> bool {
        self.cur.load().p.separate
    }

    fn apply_ops(&self, ops: &[Op]) -> Result<()> {
        for op in ops {
            let t = self.cur.load_full();
            match op {
                Op::Arena { off, words } => t.apply_arena(*off, words)?,
                Op::Step(ws) => t.apply_step(ws)?,
                Op::Rebuild { mode, extra, nb } => {
                    let justified = match mode {
                        Resize::Grow => t.needs_grow() || t.stash_len() == STASH,
                        Resize::Shrink => t.wants_shrink(),
                        Resize::Same => t.arena_used() + *extra as usize > t.arena_cap(),
                        Resize::Widen => t.p.kl != 0,
                        Resize::Narrow => {
                            t.p.kl == 0 && t.p.auto && t.len() == 0 && super::fixed_fits(*extra as usize, t.p.vbits)
                        }
                    };
                    if !justified {
                        return Err(Error::DeltaMismatch("rebuild this table does not need".into()));
                    }
                    let n = t.rebuild(*mode, *extra as usize)?;
                    if n.p.nb != *nb {
                        return Err(Error::DeltaMismatch(format!(
                            "rebuild gave {} buckets, the writer had {nb}",
                            n.p.nb
                        )));
                    }
                    self.cur.replace(n);
                }
            }
        }
        Ok(())
    }
}

impl LookupTable for Lookup {
    type Delta = Delta;
    type Reader<'a> = Reader;

    fn reader(&self) -> Reader {
        Reader::new(self.cur.clone())
    }

    #[inline]
    fn get(&self, key: &[u8]) -> Option<u64> {
        self.cur.load().get(key)
    }

    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        self.cur.load().get_batch(keys, out)
    }

    #[inline]
    fn get_u64(&self, key: u64) -> Option<u64> {
        self.cur.load().get_u64(key)
    }

    fn apply(&self, delta: &Delta) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let have = self.seq.load(Ordering::Relaxed);
        if have == POISONED {
            return Err(Error::DeltaMismatch("an earlier delta failed half-way; reload a fresh blob".into()));
        }
        crate::lineage::check_next(self.table, have, delta.table, delta.seq)?;
        let seed = self.cur.load().p.seed;
        if delta.seed != seed {
            return Err(Error::DeltaMismatch(format!("delta is for seed {:#x}, table has {seed:#x}", delta.seed)));
        }
        // Each op validates before it changes anything, so a failure of the
        // first op leaves the table untouched; a later failure leaves a
        // half-applied delta, and the replica refuses further deltas.
        let first = delta.ops.first().map(|o| self.apply_ops(std::slice::from_ref(o))).unwrap_or(Ok(()));
        first?;
        if let Err(e) = self.apply_ops(delta.ops.get(1..).unwrap_or(&[])) {
            self.seq.store(POISONED, Ordering::Release);
            return Err(e);
        }
        self.seq.store(delta.seq, Ordering::Release);
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.cur.load().memory_bytes()
    }
}

impl Wire for Lookup {
    const KIND: Kind = super::LOOKUP_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let t = self.cur.load();
        let mut w = Writer::with_capacity(super::LOOKUP_KIND, t.memory_bytes() + 64);
        crate::lineage::write_prologue(&mut w, self.table, self.seq());
        t.encode(&mut w);
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, super::LOOKUP_KIND)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        if seq == POISONED {
            return Err(Error::Corrupt("blob of a poisoned replica".into()));
        }
        let t = Table::decode(&mut r)?;
        r.finish()?;
        Ok(Self::from_table(t, table, seq))
    }
}
