//! The SetSep control form: keys, two-level grouping, group records, repair.

use super::delta::{CHOICE_BYTES, Delta, Fallback, FallbackList, GroupBody, GroupUpdate, Image, Update};
use super::{
    BUCKETS_PER_BLOCK, CANDIDATES, GROUPS_PER_BLOCK, GroupKey, KEYS_PER_BLOCK, Lookup, Options, Params, balance,
    mark_fallback, solve_group,
};
use crate::ControlTable;
use crate::bits::PackedArray;
use crate::engine::ControlLimits;
use crate::engine::RawDelta;
use crate::error::{Error, Result, check_value_bits};
use crate::hash::{SeedSeq, hash64, mix64};
use crate::store::{Inserted, KeyStore};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Blocks handed to a construction thread at a time.
const CHUNK: usize = 8;

/// Counters describing construction and the update history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Full constructions (bulk load, growth, shrink).
    pub rebuilds: u64,
    /// Full rebuilds forced by growth (more than 1.125 × 1024 keys per block).
    pub grow_rebuilds: u64,
    /// Full rebuilds after shrinking below a quarter of the capacity.
    pub shrink_rebuilds: u64,
    /// Hash indices tried by the last full construction.
    pub build_trials: u64,
    /// Wall-clock nanoseconds of the last full construction's two-level
    /// hashing and group searches (without loading the key store).
    pub build_nanos: u64,
    /// Groups re-solved by updates (refit, then search of the bits that need it).
    pub group_solves: u64,
    /// Hash indices tried by updates.
    pub update_trials: u64,
    /// Block repairs that moved one bucket to another candidate group.
    pub local_moves: u64,
    /// Block repairs that re-ran the greedy balancing of a whole block.
    pub block_rebalances: u64,
    /// Groups sent to the fallback table by updates.
    pub fallback_events: u64,
}

/// Groups and blocks an update changed.
#[derive(Default)]
struct Changes {
    groups: BTreeSet<u32>,
    blocks: BTreeSet<u32>,
}

/// One block's construction result.
struct BlockOut {
    choices: [u8; BUCKETS_PER_BLOCK],
    groups: Vec<Vec<u32>>,
    rec: Vec<u64>,
    fallback: Vec<u32>,
    trials: u64,
}

/// SetSep control form. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, setsep};
///
/// let mut ctl = setsep::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = setsep::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&setsep::Delta::from_bytes(&delta.to_bytes())?)?;
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
    store: KeyStore,
    /// `hash64(key, seed)` per key id.
    hs: Vec<u64>,
    /// 2-bit choice per bucket.
    choices: Vec<u8>,
    /// Key ids per group.
    groups: Vec<Vec<u32>>,
    /// `groups · l` record elements.
    rec: Vec<u64>,
    fallback: BTreeSet<u32>,
    table: crate::lineage::Lineage,
    seq: u64,
    stats: Stats,
    ctr: u64,
    keys: Vec<GroupKey>,
    elems: Vec<u64>,
}

fn blocks_for(keys: usize) -> Result<u32> {
    let b = keys.div_ceil(KEYS_PER_BLOCK).max(1);
    if b > super::MAX_BLOCKS as usize {
        return Err(Error::CapacityExceeded(format!("{keys} keys need more than {} blocks", super::MAX_BLOCKS)));
    }
    Ok(b as u32)
}

impl Control {
    crate::engine::options_constructors!(build);

    fn build(store: KeyStore, value_bits: u32, opts: Options) -> Result<Self> {
        check_value_bits(value_bits, 1, 64)?;
        opts.validate()?;
        let seed = SeedSeq::new(opts.seed).next();
        let p = Params { seed, blocks: 1, vbits: value_bits, xbits: opts.index_bits, ybits: opts.array_bits };
        p.validate()?;
        let mut hs = vec![0u64; store.id_bound()];
        for (id, k, _) in store.iter() {
            hs[id as usize] = hash64(k, seed);
        }
        let mut c = Control {
            opts,
            p,
            store,
            hs,
            choices: Vec::new(),
            groups: Vec::new(),
            rec: Vec::new(),
            fallback: BTreeSet::new(),
            table: crate::lineage::Lineage::random(),
            seq: 0,
            stats: Stats::default(),
            ctr: 0,
            keys: Vec::new(),
            elems: vec![0; value_bits as usize],
        };
        c.rebuild(blocks_for(c.store.len())?);
        Ok(c)
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// Number of 256-bucket blocks (64 groups each).
    pub fn blocks(&self) -> u32 {
        self.p.blocks
    }
    /// Number of groups.
    pub fn groups(&self) -> usize {
        self.p.groups()
    }
    /// Keys the current blocks are sized for (1024 per block); growth happens
    /// beyond 1.125 times this.
    pub fn capacity(&self) -> usize {
        self.p.blocks as usize * KEYS_PER_BLOCK
    }
    /// History counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Size of the most loaded group.
    pub fn max_group_size(&self) -> usize {
        self.groups.iter().map(Vec::len).max().unwrap_or(0)
    }
    /// Histogram of group sizes (`h[s]` groups hold `s` keys).
    pub fn group_size_histogram(&self) -> Vec<usize> {
        let mut h = vec![0usize; self.max_group_size() + 1];
        for g in &self.groups {
            h[g.len()] += 1;
        }
        h
    }
    /// `(groups, keys)` in the fallback table.
    pub fn fallback_size(&self) -> (usize, usize) {
        (self.fallback.len(), self.fallback.iter().map(|&g| self.groups[g as usize].len()).sum())
    }
    /// Fraction of keys stored in the fallback table.
    pub fn fallback_ratio(&self) -> f64 {
        if self.store.is_empty() { 0.0 } else { self.fallback_size().1 as f64 / self.store.len() as f64 }
    }
    /// Iterates over `(key, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.store.iter().map(|(_, k, v)| (k, v))
    }

    #[inline]
    fn bucket_of(&self, id: u32) -> usize {
        self.p.key_hash(self.hs[id as usize]).bucket
    }

    #[inline]
    fn group_of(&self, id: u32) -> usize {
        let b = self.bucket_of(id);
        self.p.group(b, self.choices[b] as u64)
    }

    /// Full construction with `blocks` blocks, in parallel across blocks.
    fn rebuild(&mut self, blocks: u32) {
        let t0 = std::time::Instant::now();
        let p = Params { blocks, ..self.p };
        let nb = p.buckets();
        // Bucket membership in CSR form.
        let mut start = vec![0u32; nb + 1];
        for id in self.store.ids() {
            start[p.key_hash(self.hs[id as usize]).bucket + 1] += 1;
        }
        for i in 0..nb {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut ids = vec![0u32; self.store.len()];
        for id in self.store.ids() {
            let b = p.key_hash(self.hs[id as usize]).bucket;
            ids[fill[b] as usize] = id;
            fill[b] += 1;
        }
        drop(fill);
        let nblocks = blocks as usize;
        let chunks = nblocks.div_ceil(CHUNK);
        let next = AtomicUsize::new(0);
        let threads = self.opts.threads.clamp(1, chunks.max(1));
        let (store, hs, opts) = (&self.store, &self.hs, &self.opts);
        let (start, ids) = (&start, &ids);
        let work = || {
            let mut out = Vec::new();
            let mut keys = Vec::new();
            loop {
                let c = next.fetch_add(1, Ordering::Relaxed);
                if c >= chunks {
                    break;
                }
                let blocks: Vec<BlockOut> = (c * CHUNK..((c + 1) * CHUNK).min(nblocks))
                    .map(|b| build_block(&p, opts, b, start, ids, hs, store, &mut keys))
                    .collect();
                out.push((c, blocks));
            }
            out
        };
        let mut parts: Vec<(usize, Vec<BlockOut>)> = if threads <= 1 {
            work()
        } else {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
                hs.into_iter().flat_map(|h| h.join().expect("construction thread panicked")).collect()
            })
        };
        parts.sort_unstable_by_key(|(c, _)| *c);
        let l = p.vbits as usize;
        let mut choices = Vec::with_capacity(nb);
        let mut groups = Vec::with_capacity(p.groups());
        let mut rec = Vec::with_capacity(p.groups() * l);
        let mut fallback = BTreeSet::new();
        let mut trials = 0;
        for (_, bs) in parts {
            for b in bs {
                choices.extend_from_slice(&b.choices);
                groups.extend(b.groups);
                rec.extend_from_slice(&b.rec);
                fallback.extend(b.fallback);
                trials += b.trials;
            }
        }
        self.p = p;
        self.choices = choices;
        self.groups = groups;
        self.rec = rec;
        self.fallback = fallback;
        self.stats.rebuilds += 1;
        self.stats.build_trials = trials;
        self.stats.build_nanos = t0.elapsed().as_nanos() as u64;
    }

    fn fill_keys(&mut self, g: usize) {
        self.keys.clear();
        for &id in &self.groups[g] {
            let kh = self.p.key_hash(self.hs[id as usize]);
            self.keys.push((kh.g1, kh.g2, self.store.value(id)));
        }
    }

    /// Re-solves group `g` for its current keys. On success the record is
    /// stored and the group leaves the fallback; on failure nothing changes.
    fn solve(&mut self, g: usize) -> bool {
        self.fill_keys(g);
        let l = self.p.vbits as usize;
        let old = if self.fallback.contains(&(g as u32)) { None } else { Some(&self.rec[g * l..(g + 1) * l]) };
        let (trials, ok) = solve_group(&self.p, &self.keys, old, &mut self.elems);
        self.stats.group_solves += 1;
        self.stats.update_trials += trials;
        if ok {
            self.rec[g * l..(g + 1) * l].copy_from_slice(&self.elems);
            self.fallback.remove(&(g as u32));
        }
        ok
    }

    fn set_fallback(&mut self, g: usize) {
        let l = self.p.vbits as usize;
        mark_fallback(&self.p, &mut self.rec[g * l..(g + 1) * l]);
        if self.fallback.insert(g as u32) {
            self.stats.fallback_events += 1;
        }
    }

    /// Makes group `g` correct for its current keys: solve it; if it is too
    /// large or cannot be solved, repair its block (one bucket moved, then a
    /// full greedy rebalance); groups that still fail go to the fallback.
    fn settle(&mut self, g: usize, ch: &mut Changes) {
        ch.groups.insert(g as u32);
        let limit = self.opts.group_limit as usize;
        let was_fallback = self.fallback.contains(&(g as u32));
        if self.groups[g].len() <= limit {
            if self.solve(g) {
                return;
            }
            if was_fallback {
                // Already repaired once and still unsolvable: it stays in the
                // fallback (its list travels with the delta).
                return;
            }
        }
        let mut pending = vec![g];
        if let Some(g2) = self.local_move(g, ch) {
            self.stats.local_moves += 1;
            pending.push(g2);
            if self.groups[g].len() <= limit && self.solve(g) && self.solve(g2) {
                return;
            }
        }
        self.rebalance(g / GROUPS_PER_BLOCK, &pending, ch);
    }

    /// Moves one bucket of group `g` to another of its candidate groups when
    /// that lowers the larger of the two loads. Returns the receiving group.
    fn local_move(&mut self, g: usize, ch: &mut Changes) -> Option<usize> {
        let block = g / GROUPS_PER_BLOCK;
        let base = block * GROUPS_PER_BLOCK;
        let load = self.groups[g].len();
        // Distinct buckets of g with their sizes.
        let mut bs: Vec<(usize, usize)> = Vec::new();
        for &id in &self.groups[g] {
            let b = self.bucket_of(id);
            match bs.iter_mut().find(|(x, _)| *x == b) {
                Some(e) => e.1 += 1,
                None => bs.push((b, 1)),
            }
        }
        let mut best: Option<(usize, usize, u8, usize)> = None; // (new max, bucket, choice, group)
        for &(b, s) in &bs {
            let cur = self.choices[b];
            for c in 0..4u8 {
                if c == cur {
                    continue;
                }
                let g2 = base + CANDIDATES[b % BUCKETS_PER_BLOCK][c as usize] as usize;
                let m = (load - s).max(self.groups[g2].len() + s);
                if m < load && best.is_none_or(|(bm, ..)| m < bm) {
                    best = Some((m, b, c, g2));
                }
            }
        }
        let (_, b, c, g2) = best?;
        self.choices[b] = c;
        let moved: Vec<u32> = self.groups[g].iter().copied().filter(|&id| self.bucket_of(id) == b).collect();
        let hs = &self.hs;
        let p = self.p;
        self.groups[g].retain(|&id| p.key_hash(hs[id as usize]).bucket != b);
        self.groups[g2].extend(moved);
        ch.blocks.insert(block as u32);
        ch.groups.insert(g2 as u32);
        Some(g2)
    }

    /// Re-runs the greedy balancing of a block (§4.4) for its current keys;
    /// re-solves every group whose key set changed plus `pending`.
    fn rebalance(&mut self, block: usize, pending: &[usize], ch: &mut Changes) {
        self.stats.block_rebalances += 1;
        self.ctr += 1;
        let base = block * GROUPS_PER_BLOCK;
        let bbase = block * BUCKETS_PER_BLOCK;
        let mut sizes = [0u32; BUCKETS_PER_BLOCK];
        let mut members: Vec<(u32, usize)> = Vec::new();
        for g in base..base + GROUPS_PER_BLOCK {
            for &id in &self.groups[g] {
                let b = self.bucket_of(id);
                sizes[b - bbase] += 1;
                members.push((id, b));
            }
        }
        let (choice, _) =
            balance(&sizes, self.opts.balance_runs * 2, mix64(self.p.seed ^ block as u64 ^ self.ctr << 32));
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); GROUPS_PER_BLOCK];
        for &(id, b) in &members {
            lists[CANDIDATES[b - bbase][choice[b - bbase] as usize] as usize].push(id);
        }
        if self.choices[bbase..bbase + BUCKETS_PER_BLOCK] != choice[..] {
            self.choices[bbase..bbase + BUCKETS_PER_BLOCK].copy_from_slice(&choice);
            ch.blocks.insert(block as u32);
        }
        let mut dirty: BTreeSet<usize> = pending.iter().copied().collect();
        for (i, mut list) in lists.into_iter().enumerate() {
            let g = base + i;
            let mut old = self.groups[g].clone();
            old.sort_unstable();
            list.sort_unstable();
            if old != list {
                self.groups[g] = list;
                dirty.insert(g);
            }
        }
        for g in dirty {
            ch.groups.insert(g as u32);
            if !self.solve(g) {
                self.set_fallback(g);
            }
        }
    }

    fn fallback_list(&self, g: usize) -> FallbackList {
        self.groups[g].iter().map(|&id| (Box::from(self.store.key(id)), self.store.value(id))).collect()
    }

    fn make_delta(&mut self, ch: Changes) -> Delta {
        crate::lineage::bump(&mut self.seq);
        let l = self.p.vbits as usize;
        let choices = ch
            .blocks
            .iter()
            .map(|&b| {
                let mut bytes = [0u8; CHOICE_BYTES];
                let base = b as usize * BUCKETS_PER_BLOCK;
                for j in 0..BUCKETS_PER_BLOCK {
                    bytes[j / 4] |= (self.choices[base + j] & 3) << ((j % 4) * 2);
                }
                (b, bytes)
            })
            .collect();
        let groups = ch
            .groups
            .iter()
            .map(|&g| {
                let gi = g as usize;
                let body = if self.fallback.contains(&g) {
                    GroupBody::Fallback(self.fallback_list(gi))
                } else {
                    GroupBody::Record(self.rec[gi * l..(gi + 1) * l].into())
                };
                GroupUpdate { g, body }
            })
            .collect();
        Delta(RawDelta::patch(
            self.table,
            self.seq,
            Update { seed: self.p.seed, blocks: self.p.blocks, choices, groups },
        ))
    }

    fn image(&self) -> Image {
        let choices = PackedArray::new(self.p.buckets(), 2);
        for (i, &c) in self.choices.iter().enumerate() {
            if c != 0 {
                choices.set(i, c as u64);
            }
        }
        let rec = PackedArray::new(self.rec.len(), self.p.width());
        for (i, &e) in self.rec.iter().enumerate() {
            if e != 0 {
                rec.set(i, e);
            }
        }
        let fallback: Fallback = self.fallback.iter().map(|&g| (g, self.fallback_list(g as usize))).collect();
        Image { p: self.p, choices, rec, fallback }
    }

    fn replace_delta(&mut self) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta(RawDelta::replace(self.table, self.seq, self.image()))
    }

    fn insert_new(&mut self, id: u32) -> Result<Delta> {
        if self.hs.len() < self.store.id_bound() {
            self.hs.resize(self.store.id_bound(), 0);
        }
        self.hs[id as usize] = hash64(self.store.key(id), self.p.seed);
        let cap = self.capacity();
        if self.store.len() > cap + cap / 8 {
            let blocks = blocks_for(self.store.len() + self.store.len() / 4)?;
            self.rebuild(blocks);
            self.stats.grow_rebuilds += 1;
            return Ok(self.replace_delta());
        }
        let g = self.group_of(id);
        self.groups[g].push(id);
        let mut ch = Changes::default();
        self.settle(g, &mut ch);
        Ok(self.make_delta(ch))
    }
}

/// Builds one block: greedy balancing, then every group solved or sent to
/// the fallback table.
#[allow(clippy::too_many_arguments)]
fn build_block(
    p: &Params,
    opts: &Options,
    block: usize,
    start: &[u32],
    ids: &[u32],
    hs: &[u64],
    store: &KeyStore,
    keys: &mut Vec<GroupKey>,
) -> BlockOut {
    let bbase = block * BUCKETS_PER_BLOCK;
    let mut sizes = [0u32; BUCKETS_PER_BLOCK];
    for (j, s) in sizes.iter_mut().enumerate() {
        *s = start[bbase + j + 1] - start[bbase + j];
    }
    let (choices, _) = balance(&sizes, opts.balance_runs, mix64(p.seed ^ block as u64));
    let mut groups: Vec<Vec<u32>> = vec![Vec::new(); GROUPS_PER_BLOCK];
    for j in 0..BUCKETS_PER_BLOCK {
        let g = CANDIDATES[j][choices[j] as usize] as usize;
        groups[g].extend_from_slice(&ids[start[bbase + j] as usize..start[bbase + j + 1] as usize]);
    }
    let l = p.vbits as usize;
    let mut rec = vec![0u64; GROUPS_PER_BLOCK * l];
    let mut fallback = Vec::new();
    let mut trials = 0;
    for (i, members) in groups.iter().enumerate() {
        keys.clear();
        for &id in members {
            let kh = p.key_hash(hs[id as usize]);
            keys.push((kh.g1, kh.g2, store.value(id)));
        }
        let e = &mut rec[i * l..(i + 1) * l];
        let (t, ok) = solve_group(p, keys, None, e);
        trials += t;
        if !ok {
            mark_fallback(p, e);
            fallback.push((block * GROUPS_PER_BLOCK + i) as u32);
        }
    }
    BlockOut { choices, groups, rec, fallback, trials }
}

impl ControlLimits for Control {
    type Options = Options;
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, keys: store, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        Self::check_item(key, value, self.p.vbits)?;
        match self.store.insert(key, value) {
            Inserted::Existing(id, old) => {
                let mut ch = Changes::default();
                if old != value {
                    let g = self.group_of(id);
                    self.settle(g, &mut ch);
                }
                Ok(self.make_delta(ch))
            }
            Inserted::New(id) => match self.insert_new(id) {
                Ok(d) => Ok(d),
                Err(e) => {
                    self.store.remove(key);
                    Err(e)
                }
            },
        }
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some((id, _)) = self.store.remove(key) else { return Ok(None) };
        let g = self.group_of(id);
        if let Some(pos) = self.groups[g].iter().position(|&x| x == id) {
            self.groups[g].swap_remove(pos);
        }
        let cap = self.capacity();
        if self.p.blocks > 1 && self.store.len() < cap / 4 {
            let blocks = blocks_for(self.store.len() + self.store.len() / 4)?;
            self.rebuild(blocks);
            self.stats.shrink_rebuilds += 1;
            return Ok(Some(self.replace_delta()));
        }
        let mut ch = Changes::default();
        // A solved group stays solved without the key; a fallback group may
        // now be solvable, and its list changed either way.
        if self.fallback.contains(&(g as u32)) {
            ch.groups.insert(g as u32);
            self.solve(g);
        }
        Ok(Some(self.make_delta(ch)))
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(self.image(), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.store.memory_bytes()
            + self.hs.capacity() * 8
            + self.choices.capacity()
            + self.groups.capacity() * std::mem::size_of::<Vec<u32>>()
            + self.groups.iter().map(|g| g.capacity() * 4).sum::<usize>()
            + self.rec.capacity() * 8
            + self.fallback.len() * 16
    }
}

crate::snapshot::persist!(Options { index_bits, array_bits, threads, balance_runs, group_limit, seed });
crate::snapshot::persist_codec!(Params);
crate::snapshot::persist!(Stats {
    rebuilds,
    grow_rebuilds,
    shrink_rebuilds,
    build_trials,
    build_nanos,
    group_solves,
    update_trials,
    local_moves,
    block_rebalances,
    fallback_events
});
crate::snapshot::control_snapshot!(
    Control, super::CONTROL_KIND, lineage: table, seq: seq,
    state { opts, p, store, hs, choices, groups, rec, fallback, stats, ctr, elems },
    scratch { keys },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::ensure;
        let bound = self.store.id_bound();
        ensure(self.hs.len() >= bound, || "setsep key hashes do not cover every key id".into())?;
        let l = self.rec.len().checked_div(self.groups.len().max(1)).unwrap_or(0);
        ensure(self.rec.len() == l * self.groups.len(), || "setsep record array does not match the groups".into())?;
        let mut seen = vec![false; bound];
        for g in &self.groups {
            for &id in g {
                let ok =
                    (id as usize) < bound && self.store.is_live(id) && !std::mem::replace(&mut seen[id as usize], true);
                ensure(ok, || format!("setsep group holds key id {id}, which is unused or repeated"))?;
            }
        }
        for &id in &self.fallback {
            ensure((id as usize) < bound && self.store.is_live(id), || format!("setsep fallback id {id}"))?;
        }
        Ok(())
    }
}
