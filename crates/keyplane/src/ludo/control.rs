//! The Ludo maintenance structure (thesis §4.4.2, §4.4.7, §4.4.8).

use super::delta::{Body, Delta, Image, Node};
use super::keys::Keys;
use super::locator::Locator;
use super::table::{Table, default_ov_cap};
use super::{Lookup, OVERFLOW_SEED, Options, Params, find_seed, slot_of};
use crate::ControlTable;
use crate::engine::ControlLimits;
use crate::engine::RawDelta;
use crate::error::{Error, Result};
use crate::hash::SeedSeq;
use crate::mem::advised_vec;
use crate::othello;

pub(super) const NONE: u32 = u32::MAX;
/// BFS gives up after visiting this many buckets (far beyond what paths of
/// `max_cuckoo_path` ≤ 8 need at 95% load).
const MAX_BFS: usize = 1 << 16;
/// Rebuild attempts (re-seeds, enlargements) before construction reports failure.
const MAX_ATTEMPTS: u32 = 64;
/// Largest seed stored inline in a bucket (31 means "overflow table").
const INLINE_MAX: u32 = OVERFLOW_SEED - 1;
/// The overflow-avoiding BFS gives up after this many buckets and falls back
/// to an unconstrained path (whose buckets may need overflow seeds).
const MAX_VALID_BFS: usize = 4096;

/// Counters describing the maintenance structure's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Full rebuilds (construction, growth, re-seeds, overflow growth).
    pub rebuilds: u64,
    /// Rebuilds caused by growth (load limit or full fallback table).
    pub grow_rebuilds: u64,
    /// Rebuilds caused by a bucket without a valid seed ≤ `max_seed`.
    pub reseed_rebuilds: u64,
    /// Rebuilds caused by a full overflow table.
    pub overflow_rebuilds: u64,
    /// Longest cuckoo path (displaced keys) of any insert, construction included.
    pub max_cuckoo_path: u32,
    /// Keys displaced by inserts after construction.
    pub cuckoo_moves: u64,
    /// Largest slot-locator seed ever chosen.
    pub max_seed: u32,
    /// Keys that went to the fallback table.
    pub fallback_inserts: u64,
    /// Bucket-locator (Othello) rebuild deltas carried inside path nodes.
    pub locator_rebuilds: u64,
    /// Construction-time relocations: buckets without a seed ≤ 30 whose key
    /// set was changed by a cuckoo path so that every touched bucket has one.
    pub relocations: u64,
    /// Inserts whose cuckoo path had to give a bucket an overflow seed.
    pub overflow_paths: u64,
}

/// Ludo maintenance structure. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, ludo};
///
/// let mut ctl = ludo::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = ludo::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&ludo::Delta::from_bytes(&delta.to_bytes())?)?;
/// assert_eq!(table.get(b"10.0.0.2"), Some(7));
/// let mut out = [None; 2];
/// table.get_batch(&[b"10.0.0.1".as_slice(), b"10.0.0.2"], &mut out);
/// assert_eq!(out, [Some(5), Some(7)]);
/// let reader = table.reader(); // one per packet thread
/// assert_eq!(reader.get(b"10.0.0.1"), Some(5));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Control {
    opts: Options,
    p: Params,
    seeds: SeedSeq,
    keys: Keys,
    /// Source (2,4)-cuckoo table: 4 key ids (and their hashes) per bucket,
    /// in lookup-slot order; one cache line per bucket.
    cells: Vec<Cell>,
    bseed: Vec<u8>,
    /// Bit-exact shadow of the lookup form's buckets and overflow table.
    img: Table,
    loc: Locator,
    /// Fallback table (§4.4.6): full key → id.
    fallback: hashbrown::HashMap<Box<[u8]>, u32>,
    cap: usize,
    table: crate::lineage::Lineage,
    seq: u64,
    stats: Stats,
    poisoned: bool,
    visit: Vec<u32>,
    epoch: u32,
    queue: Vec<crate::cuckoo::path::Node>,
    path: Vec<(u32, u8)>,
    /// The seeds of `path`'s buckets after its moves, when
    /// [`Control::path_inline_ok`] found them (else empty).
    path_seeds: Vec<u32>,
}

/// The cells as the shared cuckoo-path search sees them: `inc` is the hash
/// of the key entering the roots (`None`: relocating a key out of one
/// root); `inline` keeps to buckets whose new key sets have an inline seed.
struct Cells<'a> {
    cells: &'a [Cell],
    p: &'a Params,
    inc: Option<u64>,
    inline: bool,
}

impl Cells<'_> {
    /// Hash of the key entering from slot `from` (`None`: the root's).
    fn entering(&self, from: Option<(usize, usize)>) -> Option<u64> {
        match from {
            Some((b, s)) => Some(self.cells[b].h[s]),
            None => self.inc,
        }
    }
}

impl crate::cuckoo::path::Graph for Cells<'_> {
    fn slots(&self) -> usize {
        4
    }
    #[inline(always)]
    fn alt(&mut self, b: usize, s: usize) -> Option<usize> {
        let c = &self.cells[b];
        (c.id[s] != NONE).then(|| {
            let (b0, b1) = self.p.buckets(c.h[s]);
            (if b as u32 == b0 { b1 } else { b0 }) as usize
        })
    }
    fn free(&self, b: usize) -> Option<usize> {
        self.cells[b].free()
    }
    #[inline(always)]
    fn prefetch(&self, b: usize) {
        crate::mem::prefetch(&self.cells[b] as *const Cell);
    }
    fn may_leave(&self, b: usize, s: usize, enter: Option<(usize, usize)>) -> bool {
        !self.inline || self.cells[b].inline_ok(Some(s), self.entering(enter))
    }
    fn may_take(&self, b: usize, enter: Option<(usize, usize)>) -> bool {
        !self.inline || self.cells[b].inline_ok(None, self.entering(enter))
    }
}

/// One bucket of the source cuckoo table.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Cell {
    pub h: [u64; 4],
    pub id: [u32; 4],
}

const EMPTY: Cell = Cell { h: [0; 4], id: [NONE; 4] };

impl Cell {
    #[inline(always)]
    fn free(&self) -> Option<usize> {
        self.id.iter().position(|&k| k == NONE)
    }

    /// True if the bucket's keys, without the one in slot `out` and with a
    /// key of hash `inc` added, have a slot-locator seed ≤ 30 (inline).
    #[inline]
    fn inline_ok(&self, out: Option<usize>, inc: Option<u64>) -> bool {
        self.inline_seed(out, inc).is_some()
    }

    /// The seed of [`Cell::inline_ok`]'s key set, if it is ≤ 30.
    #[inline]
    fn inline_seed(&self, out: Option<usize>, inc: Option<u64>) -> Option<u32> {
        let mut hs = [0u64; 4];
        let mut n = 0;
        for t in 0..4 {
            if self.id[t] != NONE && Some(t) != out {
                hs[n] = self.h[t];
                n += 1;
            }
        }
        if let Some(h) = inc {
            if n == 4 {
                return None;
            }
            hs[n] = h;
            n += 1;
        }
        find_seed(&hs[..n], INLINE_MAX)
    }
}

fn buckets_for(n: usize, permille: u32) -> usize {
    (n * 1000).div_ceil(4 * permille as usize).max(2)
}

impl Control {
    crate::engine::options_constructors! {
        |value_bits, opts|
        empty: Self::build(Keys::default(), value_bits, opts),
        items(items): {
            opts.validate(value_bits)?;
            // Repeated keys are merged by the first rebuild (last value wins).
            Self::build(Self::collect_items(items, value_bits)?, value_bits, opts)
        },
    }

    fn build(keys: Keys, value_bits: u32, opts: Options) -> Result<Self> {
        opts.validate(value_bits)?;
        let mut seeds = SeedSeq::new(opts.seed);
        let p = Params { seed: seeds.next(), nb: 2, vbits: value_bits, fbits: opts.fingerprint_bits };
        let nb = buckets_for(keys.len(), opts.max_load_permille);
        let table = crate::lineage::Lineage::random();
        let mut c = Control {
            opts,
            p,
            seeds,
            keys,
            cells: Vec::new(),
            bseed: Vec::new(),
            img: Table::new(p, 8),
            loc: Locator::build(&[], &p, 0, 4, 0, table)?,
            fallback: hashbrown::HashMap::new(),
            cap: 0,
            table,
            seq: 0,
            stats: Stats::default(),
            poisoned: false,
            visit: Vec::new(),
            epoch: 0,
            queue: Vec::new(),
            path: Vec::new(),
            path_seeds: Vec::new(),
        };
        c.rebuild(nb, default_ov_cap(nb as u32, opts.avoid_overflow), false)?;
        Ok(c)
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// History counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// History counters of the bucket locator (Othello): cycle re-seeds and
    /// growth rebuilds since the last Ludo rebuild.
    pub fn locator_stats(&self) -> othello::Stats {
        self.loc.stats()
    }
    /// Number of buckets.
    pub fn buckets(&self) -> u32 {
        self.p.nb
    }
    /// Keys the table holds before the next growth.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Current hash seed.
    pub fn seed(&self) -> u64 {
        self.p.seed
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Load factor: keys in the cuckoo table / slots.
    pub fn load(&self) -> f64 {
        (self.keys.len() - self.fallback.len()) as f64 / (4.0 * self.p.nb as f64)
    }
    /// Buckets whose seed needs the overflow table (seed ≥ 31).
    pub fn overflow_buckets(&self) -> usize {
        self.img.ov_count()
    }
    /// Fraction of buckets with an overflow seed.
    pub fn overflow_seed_fraction(&self) -> f64 {
        self.img.ov_count() as f64 / self.p.nb as f64
    }
    /// Slots of the overflow table.
    pub fn overflow_capacity(&self) -> usize {
        self.img.ov_cap()
    }
    /// Keys in the fallback table.
    pub fn fallback_len(&self) -> usize {
        self.fallback.len()
    }
    /// Histogram of the seeds in use: `h[s]` buckets have seed `s` (0..=255).
    pub fn seed_histogram(&self) -> Vec<u64> {
        let mut h = vec![0u64; 256];
        for &s in &self.bseed {
            h[s as usize] += 1;
        }
        h
    }
    /// Iterates over `(key, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.keys.iter()
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned {
            return Err(Error::BuildFailed(
                "an earlier rebuild failed; rebuild the table from its keys (Control::iter)".into(),
            ));
        }
        Ok(())
    }

    fn fb_limit(&self) -> usize {
        4 + self.keys.len() / 4096
    }

    /// Shortest cuckoo path for a new key of hash `h` (Ludo §4.4.8 step 1),
    /// whatever seeds its buckets will need. See [`Control::find_path`].
    fn find_any_path(&mut self, h: u64) -> bool {
        let (b0, b1) = self.p.buckets(h);
        self.find_path(&[b0, b1], Some(h), false)
    }

    /// Overflow-avoiding cuckoo path (the slot locator's constraint): only
    /// paths on which every bucket's new key set has a seed ≤ 30, so no
    /// bucket of the path needs the overflow table. See [`Control::find_path`].
    fn find_valid_path(&mut self, roots: &[u32], inc: Option<u64>) -> bool {
        self.find_path(roots, inc, true)
    }

    /// BFS for a cuckoo path from `roots`. On success `self.path` holds
    /// `(bucket, slot)` from a root to a free slot: the key in `path[j]`
    /// moves to `path[j+1]`; the last slot is free. `inc` is the hash of the
    /// key entering the roots (an insert), or `None` to relocate one key out
    /// of a single root (construction). Buckets are checked for a free slot
    /// when discovered, and the alternates of a bucket are prefetched
    /// together. `inline` keeps to buckets whose new key sets have an
    /// inline seed (and gives up sooner: [`MAX_VALID_BFS`] buckets).
    fn find_path(&mut self, roots: &[u32], inc: Option<u64>, inline: bool) -> bool {
        use crate::cuckoo::path::{Cap, Policy, Seen, search};
        let policy = Policy {
            seen: Seen::Marks(&mut self.visit, &mut self.epoch),
            cap: Cap::Expand(if inline { MAX_VALID_BFS } else { MAX_BFS }),
            max_moves: self.opts.max_cuckoo_path as usize,
            roots_free: inc.is_some(),
        };
        let mut g = Cells { cells: &self.cells, p: &self.p, inc, inline };
        search(&mut g, roots, policy, &mut self.queue, &mut self.path).0
    }

    /// True if every bucket of `self.path` (an insert of hash `h`) keeps a
    /// seed ≤ 30 after the moves; those seeds are then in `self.path_seeds`
    /// (the path's buckets are distinct, so each bucket's new key set is
    /// the one [`Control::run_path`] settles, and the smallest seed ≤ 30 is
    /// the smallest seed).
    fn path_inline_ok(&mut self, h: u64) -> bool {
        self.path_seeds.clear();
        let m = self.path.len() - 1;
        for j in 0..=m {
            let (bj, tj) = self.path[j];
            let inc = if j == 0 {
                h
            } else {
                let (bp, tp) = self.path[j - 1];
                self.cells[bp as usize].h[tp as usize]
            };
            match self.cells[bj as usize].inline_seed((j < m).then_some(tj as usize), Some(inc)) {
                Some(s) => self.path_seeds.push(s),
                None => {
                    self.path_seeds.clear();
                    return false;
                }
            }
        }
        true
    }

    /// Gives bucket `b` the smallest seed ≤ `max` for its current keys and
    /// puts them in lookup-slot order. `false` (nothing changed) if there is none.
    fn settle(&mut self, b: usize, max: u32) -> bool {
        let cell = self.cells[b];
        let mut ks = [NONE; 4];
        let mut hs = [0u64; 4];
        let mut n = 0;
        for t in 0..4 {
            if cell.id[t] != NONE {
                ks[n] = cell.id[t];
                hs[n] = cell.h[t];
                n += 1;
            }
        }
        let Some(s) = find_seed(&hs[..n], max) else { return false };
        self.bseed[b] = s as u8;
        self.stats.max_seed = self.stats.max_seed.max(s);
        let mut new = EMPTY;
        for i in 0..n {
            let t = slot_of(hs[i], s);
            new.id[t] = ks[i];
            new.h[t] = hs[i];
        }
        self.cells[b] = new;
        true
    }

    /// Moves the keys along `self.path` (the key in `path[j-1]` to
    /// `path[j]`), emptying `path[0]`'s slot. Construction only (no deltas).
    fn shift_path(&mut self) {
        for j in (1..self.path.len()).rev() {
            let (bj, tj) = self.path[j];
            let (bp, tp) = self.path[j - 1];
            let src = self.cells[bp as usize];
            let dst = &mut self.cells[bj as usize];
            dst.id[tj as usize] = src.id[tp as usize];
            dst.h[tj as usize] = src.h[tp as usize];
        }
        let (b, t) = self.path[0];
        self.cells[b as usize].id[t as usize] = NONE;
        self.cells[b as usize].h[t as usize] = 0;
    }

    /// Rebuilds everything from the key store (Ludo §4.4.7) with `nb`
    /// buckets; re-seeds the hash when `new_seed`, when a bucket has no valid
    /// seed, and enlarges when too many keys would need the fallback table.
    fn rebuild(&mut self, nb: usize, ov_cap: usize, new_seed: bool) -> Result<()> {
        let r = self.rebuild_inner(nb, ov_cap, new_seed);
        // A failed rebuild leaves the cuckoo cells out of step with the
        // shadow image: refuse further updates instead of risking them.
        self.poisoned = r.is_err();
        r
    }

    fn rebuild_inner(&mut self, mut nb: usize, mut ov_cap: usize, mut new_seed: bool) -> Result<()> {
        let mut attempts = 0;
        loop {
            let ids: Vec<u32> = self.keys.ids().collect();
            attempts += 1;
            if attempts > MAX_ATTEMPTS {
                return Err(Error::BuildFailed(format!(
                    "{MAX_ATTEMPTS} attempts failed to place {} keys; only identical 64-bit hashes cause this",
                    ids.len()
                )));
            }
            if nb > 1 << 30 {
                return Err(Error::CapacityExceeded(format!("{} keys need more than 2^30 buckets", ids.len())));
            }
            if new_seed {
                self.p.seed = self.seeds.next();
            }
            new_seed = true;
            self.p.nb = nb as u32;
            let p = self.p;
            self.cells = Vec::new();
            self.cells = advised_vec(nb, EMPTY);
            self.visit = Vec::new();
            self.visit = advised_vec(nb, 0);
            self.epoch = 0;
            self.fallback.clear();
            let mut max_path = 0u32;
            // Step 1: cuckoo insertion, less loaded bucket first, BFS when both are full.
            for &id in &ids {
                let key = self.keys.key(id);
                crate::work::hashed(1);
                let h = p.hash(key);
                let (b0, b1) = p.buckets(h);
                // A repeated key (bulk construction only): the later value
                // wins, the later id is dropped.
                if let Some((old, _)) = self.find_in(key, h) {
                    let v = self.keys.value(id);
                    self.keys.set_value(old, v);
                    self.keys.remove(id);
                    continue;
                }
                let nfree = |c: &Cell| c.id.iter().filter(|&&x| x == NONE).count();
                let (f0, f1) = (nfree(&self.cells[b0 as usize]), nfree(&self.cells[b1 as usize]));
                let path_ok = if f0 > 0 || f1 > 0 {
                    let b = if f0 >= f1 { b0 } else { b1 };
                    let t = self.cells[b as usize].free().unwrap_or(0);
                    self.path.clear();
                    self.path.push((b, t as u8));
                    true
                } else {
                    self.find_any_path(h)
                };
                if path_ok {
                    max_path = max_path.max(self.path.len() as u32 - 1);
                    for j in (1..self.path.len()).rev() {
                        let (bj, tj) = self.path[j];
                        let (bp, tp) = self.path[j - 1];
                        let src = self.cells[bp as usize];
                        let dst = &mut self.cells[bj as usize];
                        dst.id[tj as usize] = src.id[tp as usize];
                        dst.h[tj as usize] = src.h[tp as usize];
                    }
                    let (b, t) = self.path[0];
                    let c = &mut self.cells[b as usize];
                    c.id[t as usize] = id;
                    c.h[t as usize] = h;
                } else {
                    self.fallback.insert(self.keys.key(id).into(), id);
                }
            }
            if self.fallback.len() > self.fb_limit() {
                nb = nb * 3 / 2 + 1;
                continue;
            }
            // Step 2: seeds, slots in lookup order. With `avoid_overflow`,
            // a bucket without an inline seed (≤ 30) first tries to hand one
            // key to a cuckoo path on which every bucket keeps an inline seed.
            self.bseed.clear();
            self.bseed.resize(nb, 0);
            let first_max = if self.opts.avoid_overflow { INLINE_MAX } else { self.opts.max_seed };
            let mut failing = Vec::new();
            for b in 0..nb {
                if !self.settle(b, first_max) {
                    failing.push(b);
                }
            }
            let mut ok = true;
            for &b in &failing {
                if self.opts.avoid_overflow {
                    // An earlier relocation may have changed this bucket.
                    if self.settle(b, INLINE_MAX) {
                        continue;
                    }
                    if self.find_valid_path(&[b as u32], None) {
                        self.shift_path();
                        self.stats.relocations += 1;
                        for j in 0..self.path.len() {
                            let bj = self.path[j].0 as usize;
                            // The BFS checked these sets; the fallback keeps it total.
                            if !self.settle(bj, INLINE_MAX) && !self.settle(bj, self.opts.max_seed) {
                                ok = false;
                            }
                        }
                        continue;
                    }
                }
                if !self.settle(b, self.opts.max_seed) {
                    ok = false;
                    break;
                }
            }
            if !ok {
                self.stats.reseed_rebuilds += 1;
                continue;
            }
            // Step 5: the lookup table (buckets + overflow seeds).
            let img = loop {
                let mut img = Table::new(p, ov_cap);
                let mut fits = true;
                for b in 0..nb {
                    let cell = &self.cells[b];
                    let mut c = [0u64; 4];
                    for (t, x) in c.iter_mut().enumerate() {
                        let k = cell.id[t];
                        if k != NONE {
                            *x = p.content(cell.h[t], self.keys.value(k));
                        }
                    }
                    let s = self.bseed[b] as u32;
                    if (s >= OVERFLOW_SEED && !img.ov_has_room()) || !img.set_bucket(b as u32, s, &c) {
                        fits = false;
                        break;
                    }
                }
                if fits {
                    break img;
                }
                ov_cap *= 2;
            };
            // Steps 3-4: the bucket locator, one bit per key (1 = the key
            // sits in its bucket h1), sized for this table's capacity so it
            // grows only when the table does. Identical 64-bit key hashes make
            // it fail for every seed: re-seed the hash.
            let cap = nb * 4 * self.opts.max_load_permille as usize / 1000;
            let lseed = self.seeds.next();
            self.loc = match Locator::build(&self.cells, &p, self.keys.id_bound(), cap, lseed, self.table) {
                Ok(l) => l,
                Err(Error::BuildFailed(_)) => {
                    self.stats.reseed_rebuilds += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.img = img;
            self.cap = cap;
            self.stats.rebuilds += 1;
            self.stats.max_cuckoo_path = self.stats.max_cuckoo_path.max(max_path);
            return Ok(());
        }
    }

    fn image(&self) -> Image {
        let mut fallback: Vec<(Vec<u8>, u64)> = self
            .fallback
            .iter()
            .map(|(k, &id)| (k.to_vec(), self.p.content(self.p.hash(k), self.keys.value(id))))
            .collect();
        fallback.sort_unstable();
        Image { table: self.img.clone(), oth: self.loc.export(), fallback }
    }

    fn delta(&mut self, body: Body) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta(RawDelta::patch(self.table, self.seq, body))
    }

    /// Rebuild (`kind`: 0 grow, 1 re-seed, 2 overflow) and the Replace delta.
    fn rebuild_delta(&mut self, kind: u8) -> Result<Delta> {
        let nb = self.p.nb as usize;
        let ov = self.img.ov_cap();
        match kind {
            0 => {
                let want = buckets_for(self.keys.len() + 1, self.opts.max_load_permille) + 1;
                let nb = (nb * 3 / 2).max(want);
                // Refuse before touching any state.
                if nb > 1 << 30 {
                    return Err(Error::CapacityExceeded(format!(
                        "{} keys need more than 2^30 buckets",
                        self.keys.len()
                    )));
                }
                self.stats.grow_rebuilds += 1;
                self.rebuild(nb, default_ov_cap(nb as u32, self.opts.avoid_overflow), false)?;
            }
            1 => {
                self.stats.reseed_rebuilds += 1;
                self.rebuild(nb, ov, true)?;
            }
            _ => {
                self.stats.overflow_rebuilds += 1;
                self.rebuild(nb, ov * 2, false)?;
            }
        }
        let img = self.image();
        crate::lineage::bump(&mut self.seq);
        Ok(Delta(RawDelta::replace(self.table, self.seq, img)))
    }

    /// Id and position of a key with hash `h`: `(id, Some((bucket, slot)))`
    /// in the cuckoo table, `(id, None)` in the fallback table. The cuckoo
    /// cells are the key index: only a cell with the same 64-bit hash has its
    /// key compared.
    #[inline]
    fn find_in(&self, key: &[u8], h: u64) -> Option<(u32, Option<(u32, usize)>)> {
        if !self.fallback.is_empty() {
            if let Some(&id) = self.fallback.get(key) {
                return Some((id, None));
            }
        }
        let (b0, b1) = self.p.buckets(h);
        for b in [b0, b1] {
            let c = &self.cells[b as usize];
            for t in 0..4 {
                if c.h[t] == h && c.id[t] != NONE && self.keys.is(c.id[t], key) {
                    return Some((c.id[t], Some((b, t))));
                }
            }
        }
        None
    }

    /// Prefetches everything an update of a key with hash `h` touches first.
    #[inline]
    fn prefetch(&self, h: u64) {
        let (b0, b1) = self.p.buckets(h);
        for b in [b0, b1] {
            crate::mem::prefetch(&self.cells[b as usize] as *const Cell);
            crate::mem::prefetch(&self.bseed[b as usize] as *const u8);
            self.img.prefetch_bucket(b);
        }
        self.loc.prefetch(h);
    }

    fn insert_new(&mut self, id: u32, key: &[u8], h: u64, value: u64) -> Result<Delta> {
        if self.keys.len() - self.fallback.len() > self.cap {
            return self.rebuild_delta(0);
        }
        // The shortest path first; if one of its buckets would need an
        // overflow seed, search for a path on which none does.
        let (b0, b1) = self.p.buckets(h);
        self.path_seeds.clear();
        let any = self.find_any_path(h);
        let found = if !self.opts.avoid_overflow || (any && self.path_inline_ok(h)) {
            any
        } else if self.find_valid_path(&[b0, b1], Some(h)) {
            true
        } else {
            let any = self.find_any_path(h);
            self.stats.overflow_paths += any as u64;
            any
        };
        // Seeds from `path_inline_ok` belong to the path only if it was kept.
        if self.path_seeds.len() != self.path.len() {
            self.path_seeds.clear();
        }
        if !found {
            if self.fallback.len() < self.fb_limit() {
                self.fallback.insert(key.into(), id);
                self.stats.fallback_inserts += 1;
                let content = Some(self.p.content(h, value));
                return Ok(self.delta(Body::Fallback { key: key.to_vec(), content }));
            }
            return self.rebuild_delta(0);
        }
        let path = std::mem::take(&mut self.path);
        let r = self.run_path(id, h, value, &path);
        self.path = path;
        match r {
            Ok(Ok(nodes)) => Ok(self.delta(Body::Path { content: self.p.content(h, value), nodes })),
            Ok(Err(kind)) => self.rebuild_delta(kind),
            // The bucket locator could not be updated (it gave up re-seeding):
            // rebuild everything with a fresh seed.
            Err(_) => self.rebuild_delta(1),
        }
    }

    /// Executes a cuckoo path from its free end (Ludo §4.4.8 steps 2-3),
    /// producing the update sequence. `Ok(Err(kind))` asks for a rebuild.
    fn run_path(
        &mut self,
        id: u32,
        h: u64,
        value: u64,
        path: &[(u32, u8)],
    ) -> Result<std::result::Result<Vec<Node>, u8>> {
        let m = path.len() - 1;
        self.stats.max_cuckoo_path = self.stats.max_cuckoo_path.max(m as u32);
        self.stats.cuckoo_moves += m as u64;
        let first = self.p.content(h, value);
        let mut nodes = Vec::with_capacity(path.len());
        let mut hs = [0u64; 4];
        let mut ks = [NONE; 4];
        for j in (0..=m).rev() {
            let (bj, tj) = path[j];
            let ((inc, inc_h), from) = if j == 0 {
                ((id, h), None)
            } else {
                let (bp, tp) = path[j - 1];
                let c = &self.cells[bp as usize];
                ((c.id[tp as usize], c.h[tp as usize]), Some((bp, tp)))
            };
            let mut old = self.cells[bj as usize];
            old.id[tj as usize] = NONE;
            let mut n = 0;
            for t in 0..4 {
                if old.id[t] != NONE {
                    ks[n] = old.id[t];
                    hs[n] = old.h[t];
                    n += 1;
                }
            }
            ks[n] = inc;
            hs[n] = inc_h;
            n += 1;
            let known = self.path_seeds.get(j).copied();
            let Some(seed) = known.or_else(|| find_seed(&hs[..n], self.opts.max_seed)) else { return Ok(Err(1)) };
            if seed >= OVERFLOW_SEED && (self.bseed[bj as usize] as u32) < OVERFLOW_SEED && !self.img.ov_has_room() {
                return Ok(Err(2));
            }
            self.stats.max_seed = self.stats.max_seed.max(seed);
            let mut new = EMPTY;
            for i in 0..n {
                let t = slot_of(hs[i], seed);
                new.id[t] = ks[i];
                new.h[t] = hs[i];
            }
            let mut order = [5u8; 4];
            for (t, o) in order.iter_mut().enumerate() {
                if new.id[t] == inc {
                    *o = 4;
                } else if new.id[t] != NONE {
                    *o = old.id.iter().position(|&k| k == new.id[t]).unwrap_or(5) as u8;
                }
            }
            let contents = self.img.node_slots(bj, &order, from, first);
            if !self.img.set_bucket(bj, seed, &contents) {
                return Ok(Err(2));
            }
            self.cells[bj as usize] = new;
            self.bseed[bj as usize] = seed as u8;
            let bit = (self.p.buckets(inc_h).1 == bj) as u64;
            let od = if j == 0 {
                self.loc.insert(inc, inc_h, bit, &self.cells, &self.p, self.keys.id_bound())?
            } else {
                self.loc.set(inc, bit)
            };
            if od.is_rebuild() {
                self.stats.locator_rebuilds += 1;
            }
            nodes.push(Node { bucket: bj, seed, order, from, oth: Some(od) });
        }
        Ok(Ok(nodes))
    }
}

impl ControlLimits for Control {
    type Options = Options;
}

impl crate::engine::ItemStore for Keys {
    fn sized(n: usize) -> Self {
        Keys::with_capacity(n, 16)
    }
    fn put(&mut self, key: &[u8], value: u64) {
        self.add(key, value);
    }
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, also: loc, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        self.check_poisoned()?;
        Self::check_item(key, value, self.p.vbits)?;
        // Hash once and start the key's cache misses (cuckoo cells, shadow
        // buckets, locator heads) at once.
        crate::work::hashed(1);
        let h = self.p.hash(key);
        self.prefetch(h);
        match self.find_in(key, h) {
            Some((id, pos)) => {
                if self.keys.value(id) == value {
                    return Ok(self.delta(Body::Nop));
                }
                self.keys.set_value(id, value);
                let content = self.p.content(h, value);
                match pos {
                    Some((b, t)) => {
                        self.img.write_slot(b, t, content);
                        Ok(self.delta(Body::Set { bucket: b, slot: t as u8, content }))
                    }
                    None => Ok(self.delta(Body::Fallback { key: key.to_vec(), content: Some(content) })),
                }
            }
            None => {
                let id = self.keys.add(key, value);
                match self.insert_new(id, key, h, value) {
                    Ok(d) => Ok(d),
                    Err(e) => {
                        // Nothing may be half-done: drop the key and restore a consistent state.
                        self.keys.remove(id);
                        self.fallback.remove(key);
                        // Refused before any state changed (growth beyond 2^30 buckets).
                        if matches!(e, Error::CapacityExceeded(_))
                            && self.cells.len() == self.p.nb as usize
                            && self.img.p.nb == self.p.nb
                        {
                            return Err(e);
                        }
                        let nb = self.p.nb as usize;
                        let ov = self.img.ov_cap();
                        let r = self.rebuild(nb, ov, true);
                        // Replicas must reload a blob rather than apply later deltas.
                        crate::lineage::bump(&mut self.seq);
                        r?;
                        Err(e)
                    }
                }
            }
        }
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        self.check_poisoned()?;
        crate::work::hashed(1);
        let h = self.p.hash(key);
        self.prefetch(h);
        let Some((id, pos)) = self.find_in(key, h) else { return Ok(None) };
        self.keys.remove(id);
        match pos {
            None => {
                self.fallback.remove(key);
                Ok(Some(self.delta(Body::Fallback { key: key.to_vec(), content: None })))
            }
            Some((b, t)) => {
                self.cells[b as usize].id[t] = NONE;
                let oth = self.loc.remove(id);
                Ok(Some(self.delta(Body::Remove { oth })))
            }
        }
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        self.find_in(key, self.p.hash(key)).map(|(id, _)| self.keys.value(id))
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(self.image(), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.keys.memory_bytes()
            + std::mem::size_of::<Cell>() * self.cells.capacity()
            + self.bseed.capacity()
            + self.img.memory_bytes()
            + self.loc.memory_bytes()
            + 4 * self.visit.capacity()
            + self.fallback.capacity() * (std::mem::size_of::<(Box<[u8]>, u32)>() + 1)
            + self.fallback.keys().map(|k| k.len()).sum::<usize>()
    }
}

crate::snapshot::persist!(Options {
    fingerprint_bits,
    seed,
    max_load_permille,
    max_cuckoo_path,
    max_seed,
    avoid_overflow
});
crate::snapshot::persist_codec!(Params, Table);
crate::snapshot::persist!(Stats {
    rebuilds,
    grow_rebuilds,
    reseed_rebuilds,
    overflow_rebuilds,
    max_cuckoo_path,
    cuckoo_moves,
    max_seed,
    fallback_inserts,
    locator_rebuilds,
    relocations,
    overflow_paths
});
crate::snapshot::persist!(Cell { h, id });
crate::snapshot::control_snapshot!(
    Control, super::CONTROL_KIND, lineage: table, seq: seq,
    state { opts, p, seeds, keys, cells, bseed, img, loc, fallback, cap, stats, poisoned, visit, epoch },
    scratch { queue, path, path_seeds },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::ensure;
        let nb = self.p.nb as usize;
        ensure(self.img.p == self.p, || "ludo shadow table parameters differ from the control form's".into())?;
        ensure(self.cells.len() == nb && self.bseed.len() == nb && self.visit.len() == nb, || {
            format!("ludo per-bucket arrays do not have {nb} entries")
        })?;
        self.keys.check()?;
        let bound = self.keys.id_bound();
        let mut placed = vec![false; bound];
        for (b, c) in self.cells.iter().enumerate() {
            for &id in &c.id {
                if id != NONE {
                    let ok = (id as usize) < bound
                        && self.keys.is_live(id)
                        && !std::mem::replace(&mut placed[id as usize], true);
                    ensure(ok, || format!("ludo bucket {b} holds key id {id}, which is unused or placed twice"))?;
                }
            }
        }
        for (k, &id) in &self.fallback {
            let ok = (id as usize) < bound && self.keys.is_live(id) && self.keys.is(id, k) && !placed[id as usize];
            ensure(ok, || format!("ludo fallback entry for id {id} is invalid"))?;
            placed[id as usize] = true;
        }
        ensure(placed.iter().filter(|&&x| x).count() == self.keys.len(), || "a ludo key is in no bucket".into())?;
        self.loc.check(&self.cells)
    }
}
