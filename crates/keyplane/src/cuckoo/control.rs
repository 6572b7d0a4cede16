//! The cuckoo control form: the single writer of a table shared with its
//! reader handles.

use super::delta::Delta;
use super::lookup::Lookup;
use super::table::{MAX_ENTRY_WORDS, Op, Probe, Resize, Sink, SlotWrite, Table, VAL48, WriteStats, arena_cap_for};
use super::{
    BUILD_LOAD_RANGE, DEFAULT_BUILD_LOAD, DEFAULT_BUILD_LOAD_WIDE_BUCKETS, MAX_BUCKETS, MAX_KEY_LEN, Options, Params,
    SLOTS, fixed_fits,
};
use crate::ControlTable;
use crate::engine::ControlLimits;
use crate::error::{Error, Result};
use crate::sync::{Cached, Published};
use std::sync::Arc;

/// Fill (percent) of a bulk build: the option's, capped one point below the
/// layout's growth threshold, or the layout's default (headroom for updates).
fn build_load(p: &Params, opts: &Options) -> Result<f64> {
    let default = if p.sb > SLOTS as u32 { DEFAULT_BUILD_LOAD_WIDE_BUCKETS } else { DEFAULT_BUILD_LOAD };
    let pct = match opts.build_load_percent {
        None => default,
        Some(b) if BUILD_LOAD_RANGE.contains(&b) => b.min(p.max_load_pct() as u32 - 1),
        Some(b) => {
            return Err(Error::InvalidParameter(format!(
                "cuckoo build load {b} % outside {}..={} %; leave it unset for the default ({DEFAULT_BUILD_LOAD} % or {DEFAULT_BUILD_LOAD_WIDE_BUCKETS} %)",
                BUILD_LOAD_RANGE.start(),
                BUILD_LOAD_RANGE.end()
            )));
        }
    };
    Ok(pct as f64 / 100.0)
}

/// Counters describing the writer's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Cuckoo displacements (keys moved to their other bucket).
    pub moves: u64,
    /// Buckets visited by breadth-first path searches.
    pub bfs_nodes: u64,
    /// Inserts that found no cuckoo path and went to the stash.
    pub stashed: u64,
    /// Resizes that doubled the bucket count.
    pub grows: u64,
    /// Resizes that halved the bucket count (load below 20 % after removes).
    pub shrinks: u64,
    /// Arena compactions (rebuilds at the same size).
    pub compactions: u64,
}

/// The published table (whole-table replacement on resize; reader handles
/// cache it, see [`crate::sync::Cached`]), shared by the writer, its reader
/// handles and replicas.
pub(crate) type Shared = Published<Table>;

/// A per-thread read handle on a table — the writer's own
/// ([`Control::reader`]) or a replica's ([`crate::LookupTable::reader`]):
/// lock-free lookups concurrent with the writer's updates (CuckooSwitch
/// Algorithm 2) and batched lookups with two-round prefetching (Algorithm 3).
///
/// Cheap to clone; give each thread its own clone (it is `Send`, not
/// `Sync`). It caches the current table and checks a generation counter
/// (one plain load) on every lookup, so a lookup costs no atomic
/// read-modify-write; after a resize the next lookup picks up the new
/// table. An idle handle keeps the pre-resize table alive until its next
/// lookup or until it is dropped.
#[derive(Debug, Clone)]
pub struct Reader {
    cache: Cached<Arc<Shared>, Table>,
}

impl Reader {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Reader { cache: Cached::new(shared) }
    }

    #[inline(always)]
    fn with<R>(&self, f: impl FnOnce(&Table) -> R) -> R {
        self.cache.with(|t| f(t))
    }

    /// Exact lookup: `None` for a key that is not in the table.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.with(|t| t.get(key))
    }
    /// Exact lookup of the 8-byte key `key.to_le_bytes()`: the same answer
    /// as `get`, hashed from the integer (no slice, no length dispatch) on a
    /// table of 8-byte keys.
    #[inline]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.with(|t| t.get_u64(key))
    }
    /// Looks up `keys` (any number) into `out` (same length; extras ignored).
    pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        self.with(|t| t.get_batch(keys, out))
    }
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.with(|t| t.len())
    }
    /// True when the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Cuckoo control form: the writer. It owns the table that its
/// [`Reader`]s read; see the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, cuckoo};
///
/// let mut ctl = cuckoo::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = cuckoo::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&cuckoo::Delta::from_bytes(&delta.to_bytes())?)?;
/// assert_eq!(table.get(b"10.0.0.2"), Some(7));
/// let mut out = [None; 2];
/// table.get_batch(&[b"10.0.0.1".as_slice(), b"10.0.0.2"], &mut out);
/// assert_eq!(out, [Some(5), Some(7)]);
/// let reader = table.reader(); // one per packet thread
/// assert_eq!(reader.get(b"10.0.0.1"), Some(5));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug)]
pub struct Control {
    shared: Arc<Shared>,
    /// The writer's own reference to the published table.
    cur: Arc<Table>,
    table: crate::lineage::Lineage,
    seq: u64,
    sink: Sink,
    st: WriteStats,
    stats: Stats,
}

impl Control {
    /// Empty table with explicit options.
    pub fn with_options(value_bits: u32, opts: Options) -> Result<Self> {
        Self::sized(value_bits, &opts, 0, 0, 0)
    }

    /// A table for `n` keys; `kl` > 0 takes the fixed-width layout for keys of `kl` bytes.
    fn sized(value_bits: u32, opts: &Options, n: usize, arena_words: usize, kl: u32) -> Result<Self> {
        let p0 = Params::new(value_bits, opts, 2)?;
        let p0 = p0.relayout(kl, 2);
        let load = build_load(&p0, opts)?;
        let nb = ((n as f64 / (p0.sb as f64 * load)).ceil() as u64).max(2);
        if nb > MAX_BUCKETS as u64 {
            return Err(Error::CapacityExceeded(format!("{n} keys need more than {MAX_BUCKETS} buckets")));
        }
        let p = p0.relayout(kl, nb as u32);
        // Bulk loads reserve 1/8 headroom for long keys; later compactions 2×.
        let t = Table::new(p, (arena_words + arena_words / 8).max(arena_cap_for(0, 0)));
        let shared = Arc::new(Shared::new(t));
        Ok(Control {
            cur: shared.load_full(),
            shared,
            table: crate::lineage::Lineage::random(),
            seq: 0,
            sink: Sink::default(),
            st: WriteStats::default(),
            stats: Stats::default(),
        })
    }

    /// Bulk construction with explicit options. A repeated key: the last value wins.
    pub fn from_items_with<I, K>(items: I, value_bits: u32, opts: Options) -> Result<Self>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        Self::check_value_bits(value_bits)?;
        let items: Vec<(K, u64)> = items.into_iter().collect();
        let mut arena = 0;
        let mut len = items.first().map(|(k, _)| k.as_ref().len());
        for (k, v) in &items {
            let k = k.as_ref();
            Self::check_item(k, *v, value_bits)?;
            if k.len() > super::table::INLINE_MAX {
                arena += 1 + k.len().div_ceil(8);
            }
            if len != Some(k.len()) {
                len = None;
            }
        }
        let auto = Params::new(value_bits, &opts, 2)?.auto;
        let kl = match len {
            Some(l) if auto && fixed_fits(l, value_bits) => l as u32,
            _ => 0,
        };
        let mut c = Self::sized(value_bits, &opts, items.len(), arena, kl)?;
        for (k, v) in &items {
            c.put(k.as_ref(), *v)?;
        }
        // Repeated long keys made the arena estimate too large: compact.
        let t = c.cur.clone();
        if t.arena_cap() > arena_cap_for(t.arena_used(), MAX_ENTRY_WORDS) {
            c.shared.replace(t.rebuild(Resize::Same, 0)?);
            c.cur = c.shared.load_full();
        }
        c.seq = 0;
        Ok(c)
    }

    /// A read handle on this writer's own table (cheap; one per thread).
    pub fn reader(&self) -> Reader {
        Reader::new(self.shared.clone())
    }
    /// [`Reader::get_u64`] on the writer's table.
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.cur.get_u64(key)
    }
    /// Key width of the fixed-width layout (`None`: the wide layout).
    pub fn key_width(&self) -> Option<usize> {
        (self.cur.p.kl != 0).then_some(self.cur.p.kl as usize)
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// History counters.
    pub fn stats(&self) -> Stats {
        Stats { moves: self.st.moves, bfs_nodes: self.st.bfs_nodes, stashed: self.st.stashed, ..self.stats }
    }
    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.cur.p.nb as usize
    }
    /// Slots in buckets (the stash comes on top).
    pub fn capacity(&self) -> usize {
        self.cur.p.slots()
    }
    /// Keys currently in the stash.
    pub fn stash_len(&self) -> usize {
        self.cur.stash_len()
    }
    /// Fraction of bucket slots in use.
    pub fn load_factor(&self) -> f64 {
        let t = &self.cur;
        t.len() as f64 / t.p.slots() as f64
    }
    /// Hash seed.
    pub fn seed(&self) -> u64 {
        self.cur.p.seed
    }

    fn rebuild(&mut self, t: &Table, mode: Resize, extra: usize) -> Result<()> {
        crate::work::hashed(t.len());
        let n = t.rebuild(mode, extra)?;
        match mode {
            Resize::Grow => self.stats.grows += 1,
            Resize::Shrink => self.stats.shrinks += 1,
            Resize::Same => self.stats.compactions += 1,
            Resize::Widen | Resize::Narrow => {}
        }
        self.sink.push(Op::Rebuild { mode, extra: extra as u32, nb: n.p.nb });
        self.shared.replace(n);
        self.cur = self.shared.load_full();
        Ok(())
    }

    /// Insert or overwrite, recording operations in the sink.
    fn put(&mut self, key: &[u8], value: u64) -> Result<()> {
        while let Some((mode, extra)) = self.try_put(key, value)? {
            let t = self.cur.clone();
            self.rebuild(&t, mode, extra)?;
        }
        Ok(())
    }

    /// One attempt of [`Self::put`] on the current table (borrowed, not an
    /// `Arc` clone per key: bulk builds and updates run through here):
    /// `Some((mode, extra))` asks for that rebuild and another attempt.
    fn try_put(&mut self, key: &[u8], value: u64) -> Result<Option<(Resize, usize)>> {
        loop {
            let t = &*self.cur;
            crate::work::hashed(1);
            if t.p.kl != 0 && key.len() != t.p.kl as usize {
                // A key of another length: leave the fixed-width layout.
                return Ok(Some((Resize::Widen, 0)));
            }
            if t.p.kl == 0 && t.p.auto && t.len() == 0 && fixed_fits(key.len(), t.p.vbits) {
                // The first key of an empty table sets its key width.
                return Ok(Some((Resize::Narrow, key.len())));
            }
            let pr: Probe = t.p.probe(key);
            if let Some((slot, old)) = t.find_writer(&pr, key) {
                let (k, m, _) = t.raw(slot);
                if old != value && slot < t.p.slots() && !t.p.bucket_can_hold(k, (m & !VAL48) | value) {
                    // The all-zero packed entry moves to the stash.
                    let w = SlotWrite::clear(slot);
                    t.apply_step(&[w])?;
                    self.sink.push(Op::Step(vec![w]));
                    continue;
                }
                if old != value {
                    let w = if t.p.separate {
                        SlotWrite { slot: slot as u64, key: k, meta: m, val: value }
                    } else {
                        SlotWrite { slot: slot as u64, key: k, meta: (m & !VAL48) | value, val: 0 }
                    };
                    t.apply_step(&[w])?;
                    self.sink.push(Op::Step(vec![w]));
                }
                return Ok(None);
            }
            if t.needs_grow() {
                return Ok(Some((Resize::Grow, 0)));
            }
            let kword = if pr.ool {
                let words = Table::arena_entry(key);
                if t.arena_used() + words.len() > t.arena_cap() {
                    return Ok(Some((Resize::Same, words.len())));
                }
                let off = t.arena_used() as u64;
                t.apply_arena(off, &words)?;
                self.sink.push(Op::Arena { off, words });
                pr.kw | off
            } else {
                pr.kw
            };
            if t.insert_absent(&pr, kword, value, &mut self.sink, &mut self.st)? {
                return Ok(None);
            }
            // No cuckoo path and a full stash: grow and retry.
            return Ok(Some((Resize::Grow, 0)));
        }
    }

    fn delta(&mut self) -> Delta {
        crate::lineage::bump(&mut self.seq);
        let ops = std::mem::take(&mut self.sink.ops);
        Delta::new(self.table, self.seq, self.seed(), ops)
    }
}

impl ControlLimits for Control {
    type Options = Options;
    const MAX_KEY_LEN: usize = MAX_KEY_LEN;
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, keys: cur, value_bits: cur.p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        Self::check_item(key, value, self.value_bits())?;
        // Operations of a failed insert (e.g. a rebuild before a capacity
        // error) stay in the sink and go out with the next delta.
        self.sink.on = true;
        let r = self.put(key, value);
        self.sink.on = false;
        r.map(|()| self.delta())
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        // The table borrowed, not an `Arc` clone per remove.
        let t = &*self.cur;
        crate::work::hashed(1);
        let pr = t.p.probe(key);
        let Some((slot, _)) = t.find_writer(&pr, key) else {
            return Ok(None);
        };
        self.sink.on = true;
        let w = SlotWrite::clear(slot);
        t.apply_step(&[w])?;
        self.sink.ops.push(Op::Step(vec![w]));
        t.drain_stash(&mut self.sink)?;
        if t.wants_shrink() {
            let t = self.cur.clone();
            self.rebuild(&t, Resize::Shrink, 0)?;
        }
        self.sink.on = false;
        Ok(Some(self.delta()))
    }

    fn export(&self) -> Lookup {
        Lookup::from_table(self.cur.clone_table(), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.cur.memory_bytes()
    }
}

impl crate::ReadHandle for Reader {
    #[inline]
    fn get(&self, key: &[u8]) -> Option<u64> {
        Reader::get(self, key)
    }
    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        Reader::get_batch(self, keys, out)
    }
    #[inline]
    fn get_u64(&self, key: u64) -> Option<u64> {
        Reader::get_u64(self, key)
    }
}

crate::snapshot::persist!(Stats { moves, bfs_nodes, stashed, grows, shrinks, compactions });
crate::snapshot::persist!(WriteStats { moves, bfs_nodes, stashed });

/// The table as its lookup blob encodes it (every slot validated on load,
/// no key hashed), the write counters, and the operations a failed insert
/// left for the next delta (as a nested delta body).
impl crate::snapshot::ControlState for Control {
    const KIND: crate::wire::Kind = super::CONTROL_KIND;

    fn lineage_seq(&self) -> (crate::lineage::Lineage, u64) {
        (self.table, self.seq)
    }

    fn save_state(&self, w: &mut crate::wire::Writer) {
        use crate::snapshot::Persist;
        self.cur.encode(w);
        self.st.put(w);
        self.stats.put(w);
        let pending = Delta::new(self.table, 0, self.seed(), self.sink.ops.clone());
        w.bytes(&crate::Wire::to_bytes(&pending));
    }

    fn load_state(r: &mut crate::wire::Reader<'_>, table: crate::lineage::Lineage, seq: u64) -> Result<Self> {
        use crate::snapshot::Persist;
        let t = Table::decode(r)?;
        let st = WriteStats::take(r)?;
        let stats = Stats::take(r)?;
        let pending = match <Delta as crate::Wire>::from_bytes(r.bytes()?)?.0.change {
            crate::engine::Change::Patch(p) => p.ops,
            crate::engine::Change::Replace(_) => {
                return Err(Error::Corrupt("pending operations hold a whole table".into()));
            }
        };
        let shared = Arc::new(Shared::new(t));
        Ok(Control { cur: shared.load_full(), shared, table, seq, sink: Sink { on: false, ops: pending }, st, stats })
    }
}

impl crate::Snapshot for Control {
    const SNAPSHOT_KIND: crate::wire::Kind = super::CONTROL_KIND;
    fn snapshot(&self) -> Vec<u8> {
        crate::snapshot::save(self)
    }
    fn from_snapshot(bytes: &[u8]) -> Result<Self> {
        crate::snapshot::load(bytes)
    }
}
