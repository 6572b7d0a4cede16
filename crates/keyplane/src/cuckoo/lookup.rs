//! The cuckoo lookup form: an independent replica kept current by deltas,
//! on the engine (scheme [`Cuckoo`], see [`crate::engine`]).

use super::STASH;
use super::delta::{Delta, Image, Ops, TAG_TABLE, read_change, write_change};
use super::table::{Op, Resize, Table};
use crate::engine::{RawDelta, RawLookup, Scheme};
use crate::error::{Error, Result};
use crate::sync::Published;
use crate::wire::{Kind, Reader as WireReader, Writer};
use std::sync::Arc;

/// The full cuckoo map's scheme: the table is the snapshot; a patch is the
/// writer's operations (slot steps under the table's seqlocks, arena
/// appends, rebuilds re-executed and published).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cuckoo;

impl Cuckoo {
    /// Applies one operation to `t`, the current table; a rebuild
    /// publishes its result and makes it `t` for the next operation.
    fn apply_op(cur: &Published<Table>, t: &mut Arc<Table>, op: &Op) -> Result<()> {
        match op {
            Op::Arena { off, words } => t.apply_arena(*off, words),
            Op::Step(ws) => t.apply_step(ws),
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
                    return Err(Error::DeltaMismatch(format!("rebuild gave {} buckets, the writer had {nb}", n.p.nb)));
                }
                cur.replace(n);
                *t = cur.load_full();
                Ok(())
            }
        }
    }
}

impl Scheme for Cuckoo {
    type Inner = Table;
    type Image = Image;
    type Patch = Ops;
    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    /// The whole-table operation (deltas put it after the seed and the
    /// operation count: see `write_delta`).
    const REPLACE_TAG: u8 = TAG_TABLE;

    fn build(img: Image) -> Result<Table> {
        Ok(img.0)
    }
    fn image(c: &Table) -> Image {
        Image(c.clone_table())
    }
    fn encode_inner(c: &Table, w: &mut Writer) {
        c.encode(w);
    }
    fn payload_hint(c: &Table) -> usize {
        c.memory_bytes() + 64
    }
    fn check_replace(c: &Table, img: &Image) -> Result<()> {
        let (a, b) = (&c.p, &img.0.p);
        if (a.seed, a.vbits, a.separate) != (b.seed, b.vbits, b.separate) {
            return Err(Error::DeltaMismatch("whole-table delta with another seed or value layout".into()));
        }
        Ok(())
    }
    fn apply_patch(cur: &Published<Table>, c: Arc<Table>, patch: &Ops) -> Result<()> {
        Self::apply_patch_torn(cur, c, patch).map_err(|(e, _)| e)
    }
    /// Each operation validates before it changes anything, so a failure of
    /// the first leaves the table untouched; a later failure leaves a
    /// half-applied delta (torn: the engine refuses further deltas).
    fn apply_patch_torn(cur: &Published<Table>, c: Arc<Table>, patch: &Ops) -> std::result::Result<(), (Error, bool)> {
        if patch.seed != c.p.seed {
            let e = format!("delta is for seed {:#x}, table has {:#x}", patch.seed, c.p.seed);
            return Err((Error::DeltaMismatch(e), false));
        }
        let mut t = c;
        for (i, op) in patch.ops.iter().enumerate() {
            Self::apply_op(cur, &mut t, op).map_err(|e| (e, i > 0))?;
        }
        Ok(())
    }
    fn patch_rebuilds(p: &Ops) -> bool {
        p.ops.iter().any(|o| matches!(o, Op::Rebuild { .. }))
    }
    fn write_delta(w: &mut Writer, d: &RawDelta<Self>) {
        crate::lineage::write_prologue(w, d.table, d.seq);
        write_change(&d.change, w);
    }
    fn read_delta(r: &mut WireReader<'_>) -> Result<RawDelta<Self>> {
        let (table, seq) = crate::lineage::read_prologue(r)?;
        let change = read_change(r.u8()?, r)?;
        Ok(RawDelta { table, seq, change })
    }
    fn memory_bytes(c: &Table) -> usize {
        c.memory_bytes().saturating_sub(std::mem::size_of::<Table>())
    }
    fn value_bits(c: &Table) -> u32 {
        c.p.vbits
    }
    crate::engine::inner_lookups!(get, get_batch, get_u64, get_batch_u64);
}

/// Cuckoo lookup form: the full table (keys, values, stash, key arena).
/// Lookups are exact. See the [module docs](super).
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
///
/// # Snapshots held per thread
///
/// `get`, `get_u64`, `get_batch` and `get_batch_u64` on `&self` cost about
/// what a [`Reader`]'s do: each thread that calls them keeps, inside this
/// table, a cached reference to the table's current snapshot and checks
/// one generation counter per call. The price (the same as Othello's): a
/// thread may keep **one stale snapshot** of this table alive after a
/// whole-table replacement (growth, shrink, a rebuild delta) until its
/// next `&self` lookup on this table, which moves it to the current one,
/// or until the table is dropped, which releases every thread's snapshot
/// (a thread that exited leaves its snapshot to the table's drop or to the
/// next thread given its id). Nothing outside the table refers to these
/// caches. Answers are never stale: every call sees the deltas and
/// replacements applied before it.
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<Cuckoo>,
    /// The `&self` lookups' per-thread snapshot caches.
    local: crate::engine::LocalSnapshots<Cuckoo>,
}

/// A per-thread read handle on a lookup form ([`crate::LookupTable::reader`]):
/// lock-free lookups concurrent with `apply` (CuckooSwitch Algorithm 2) and
/// batched lookups with two-round prefetching (Algorithm 3). The writer's
/// own handle is [`super::Reader`].
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Cuckoo>);

crate::engine::lookup_form!(Cuckoo, pub(crate), local);

impl Lookup {
    pub(crate) fn from_table(t: Table, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(t, table, seq))
    }
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.raw.load().len()
    }
    /// True when the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exact lookup of the 8-byte key `key.to_le_bytes()` (see [`super::Reader::get_u64`]).
    #[inline(always)]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.local.get_u64(&self.raw, key)
    }
    /// Key width of the fixed-width layout (`None`: the wide layout).
    pub fn key_width(&self) -> Option<usize> {
        let kl = self.raw.load().p.kl;
        (kl != 0).then_some(kl as usize)
    }
    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.raw.load().p.nb as usize
    }
    /// Keys currently in the stash.
    pub fn stash_len(&self) -> usize {
        self.raw.load().stash_len()
    }
    /// True when values live in a separate array (ScaleBricks §5.2).
    pub fn separate_values(&self) -> bool {
        self.raw.load().p.separate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuckoo::Control;
    use crate::engine::Change;
    use crate::engine::RawDelta;
    use crate::{ControlTable, LookupTable, Wire};

    #[test]
    fn a_whole_table_delta_round_trips_and_replaces() {
        let mut ctl = Control::from_items((0..100u64).map(|i| (i.to_le_bytes(), i)), 8).unwrap();
        let replica = ctl.export();
        for i in 100..150u64 {
            ctl.insert(&i.to_le_bytes(), i).unwrap();
        }
        let whole = Image(ctl.export().raw.load().clone_table());
        let d = Delta(RawDelta::replace(ctl.lineage(), replica.seq() + 1, whole));
        let back = Delta::from_bytes(&d.to_bytes()).unwrap();
        assert_eq!(back, d);
        assert!(crate::lineage::DeltaInfo::is_rebuild(&back));
        replica.apply(&back).unwrap();
        for i in 0..150u64 {
            assert_eq!(replica.get(&i.to_le_bytes()), Some(i));
        }
        // A whole table among other operations is corrupt.
        let mut w = Writer::new(crate::cuckoo::DELTA_KIND);
        crate::lineage::write_prologue(&mut w, ctl.lineage(), 1);
        w.u64(ctl.seed()).varint(2).u8(TAG_TABLE);
        if let Change::Replace(img) = &d.0.change {
            crate::engine::ImageCodec::encode(&**img, &mut w);
        }
        assert!(matches!(Delta::from_bytes(&w.finish()), Err(Error::Corrupt(_))));
    }

    /// The `&self` lookups' per-thread snapshots (as Othello's): a thread
    /// keeps a stale snapshot only until its next lookup on the table, the
    /// table's drop releases every thread's, and after a growth every
    /// `&self` path answers from the new table.
    #[test]
    fn self_lookups_follow_replacements_and_release_snapshots() {
        use crate::key::u64_key;
        use std::sync::{Weak, mpsc};
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Lookup>();
        let mut ctl = Control::from_items((0..100u64).map(|k| (u64_key(k), k & 0xff)), 8).unwrap();
        let table = Arc::new(ctl.export());
        let first = Arc::downgrade(&table.raw.load_full());
        let mut workers = Vec::new();
        for _ in 0..3 {
            let (go, rx) = mpsc::channel::<Option<Arc<Lookup>>>();
            let (done, back) = mpsc::channel::<()>();
            let t = table.clone();
            let h = std::thread::spawn(move || {
                assert_eq!(t.get_u64(7), Some(7));
                drop(t);
                done.send(()).unwrap();
                while let Ok(Some(t)) = rx.recv() {
                    // Every `&self` path sees the keys the growth brought.
                    let mut out = [None; 3];
                    t.get_batch_u64(&[7, 1_500, 1_999], &mut out);
                    assert_eq!(out, [Some(7), Some(1_500 & 0xff), Some(1_999 & 0xff)]);
                    t.get_batch(&[&u64_key(1_234)[..]], &mut out[..1]);
                    assert_eq!(out[0], Some(1_234 & 0xff));
                    assert_eq!(t.get(&u64_key(1_001)), Some(1_001 & 0xff));
                    drop(t);
                    done.send(()).unwrap();
                }
            });
            back.recv().unwrap();
            workers.push((go, back, h));
        }
        let mut replaced = false;
        for k in 100..2_000u64 {
            let d = ctl.insert(&u64_key(k), k & 0xff).unwrap();
            replaced |= d.is_rebuild();
            table.apply(&d).unwrap();
        }
        let second = Arc::downgrade(&table.raw.load_full());
        assert!(replaced && !Weak::ptr_eq(&first, &second), "no whole-table replacement");
        assert!(first.upgrade().is_some(), "the idle threads' stale snapshot");
        for (go, back, _) in &workers {
            go.send(Some(table.clone())).unwrap();
            back.recv().unwrap();
        }
        assert!(first.upgrade().is_none(), "the first snapshot outlived every thread's next lookup");
        assert!(second.upgrade().is_some());
        drop(table);
        assert!(second.upgrade().is_none(), "a dropped table's snapshot is still alive");
        for (go, _, h) in workers {
            go.send(None).unwrap();
            h.join().unwrap();
        }
    }

    #[test]
    fn a_delta_failing_half_way_poisons_the_replica() {
        use super::super::table::SlotWrite;
        let ctl = Control::from_items((0..100u64).map(|i| (i.to_le_bytes(), i)), 8).unwrap();
        let replica = ctl.export();
        let outside = SlotWrite { slot: u64::MAX / 2, key: 1, meta: 1, val: 0 };
        // First operation bad: refused, nothing changed, the next delta still applies.
        let bad_first = Delta::new(ctl.lineage(), 1, ctl.seed(), vec![Op::Step(vec![outside])]);
        assert!(replica.apply(&bad_first).is_err());
        assert_eq!(replica.seq(), 0);
        let clear = Delta::new(ctl.lineage(), 1, ctl.seed(), vec![Op::Step(vec![SlotWrite::clear(0)])]);
        replica.apply(&clear).unwrap();
        // Second operation bad after a first that changed the table: poisoned.
        let torn = Delta::new(
            ctl.lineage(),
            2,
            ctl.seed(),
            vec![Op::Step(vec![SlotWrite::clear(1)]), Op::Step(vec![outside])],
        );
        assert!(replica.apply(&torn).is_err());
        let next = Delta::new(ctl.lineage(), 3, ctl.seed(), vec![Op::Step(vec![SlotWrite::clear(2)])]);
        assert!(matches!(replica.apply(&next), Err(Error::DeltaMismatch(_))));
        assert_eq!(replica.seq(), u64::MAX);
    }
}
