//! The BFW data-plane form.

use super::delta::{Delta, Image, Op, Ops, TAG_REPLACE};
use super::{Params, bit, predicted_rates, step_of};
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result};
use crate::hash::{hash64, reduce};
use crate::sync::{Published, StripedSeqLock};
use crate::wire::Kind;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

#[derive(Debug)]
pub(crate) struct Filter {
    words: Box<[AtomicU64]>,
    m: u64,
}

impl Filter {
    fn from_words(m: u64, words: &[u64]) -> Self {
        let v: Vec<AtomicU64> = words.iter().map(|&w| AtomicU64::new(w)).collect();
        crate::mem::advise_hugepages(&v);
        Self { words: v.into_boxed_slice(), m }
    }

    #[inline(always)]
    fn contains(&self, h: u64, step: u64, hashes: u32) -> bool {
        (0..hashes).all(|t| {
            let b = bit(h, step, t, self.m);
            self.words[(b >> 6) as usize].load(Relaxed) >> (b & 63) & 1 == 1
        })
    }

    fn set(&self, b: u64, on: bool) {
        let w = &self.words[(b >> 6) as usize];
        let x = w.load(Relaxed);
        w.store(if on { x | 1 << (b & 63) } else { x & !(1 << (b & 63)) }, Relaxed);
    }

    fn to_words(&self) -> Vec<u64> {
        self.words.iter().map(|w| w.load(Relaxed)).collect()
    }

    fn ones(&self) -> u64 {
        self.words.iter().map(|w| w.load(Relaxed).count_ones() as u64).sum()
    }
}

/// One snapshot. A delta that adds, resizes or drops a filter publishes a
/// new snapshot sharing the unchanged filters and the seqlock, and marks the
/// old one `retired` inside the seqlock window: a reader that finds its
/// snapshot retired starts over on the newest one.
#[derive(Debug)]
pub(crate) struct Inner {
    p: Params,
    ports: Vec<u32>,
    filters: Vec<Arc<Filter>>,
    lock: Arc<StripedSeqLock>,
    retired: AtomicBool,
}

impl Inner {
    fn from_image(img: &Image) -> Self {
        Self {
            p: img.p,
            ports: img.filters.iter().map(|f| f.0).collect(),
            filters: img.filters.iter().map(|(_, m, w)| Arc::new(Filter::from_words(*m, w))).collect(),
            lock: Arc::new(StripedSeqLock::new(1)),
            retired: AtomicBool::new(false),
        }
    }

    /// The same filters and seqlock (a snapshot about to be changed).
    fn successor(&self) -> Self {
        Self {
            p: self.p,
            ports: self.ports.clone(),
            filters: self.filters.clone(),
            lock: self.lock.clone(),
            retired: AtomicBool::new(false),
        }
    }

    #[inline(always)]
    fn scan(&self, h: u64, mut f: impl FnMut(u32) -> bool) {
        let d = self.ports.len();
        if d == 0 {
            return;
        }
        let step = step_of(h);
        let start = reduce((h >> 32) as u32 ^ h as u32, d as u32) as usize;
        for j in 0..d {
            let i = if start + j >= d { start + j - d } else { start + j };
            if self.filters[i].contains(h, step, self.p.hashes) && !f(self.ports[i]) {
                return;
            }
        }
    }

    /// Runs the read `f` until it saw a stable snapshot; `None` when this
    /// snapshot is retired (the caller starts over on the newest one).
    #[inline(always)]
    fn read<R>(&self, mut f: impl FnMut(&Self) -> R) -> Option<R> {
        loop {
            let v = self.lock.read_begin(0);
            let r = f(self);
            if self.lock.read_validate(0, v) {
                return if self.retired.load(Relaxed) { None } else { Some(r) };
            }
        }
    }

    /// Consistent read of the newest snapshot, starting from `c`.
    #[inline(always)]
    fn read_latest<R>(c: &Self, latest: impl Fn() -> Arc<Inner>, mut f: impl FnMut(&Self) -> R) -> R {
        if let Some(r) = c.read(&mut f) {
            return r;
        }
        loop {
            if let Some(r) = latest().read(&mut f) {
                return r;
            }
        }
    }

    #[inline(always)]
    fn first(&self, h: u64) -> Option<u64> {
        let mut r = None;
        self.scan(h, |p| {
            r = Some(p as u64);
            false
        });
        r
    }

    fn find(&self, port: u32) -> Option<usize> {
        self.ports.binary_search(&port).ok()
    }
}

/// Predicted and structural rates of a BFW lookup form (thesis eq. 3.7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// Non-empty ports `d`.
    pub ports: usize,
    /// Mean per-filter false-match probability `q = (1 − p)^{n_h}`.
    pub filter_false_match: f64,
    /// Alien-key false-positive rate, eq. 3.7 with each filter's own fill:
    /// `1 − Π_i (1 − q_i)`.
    pub false_positive: f64,
    /// Valid-key collision rate, eq. 3.7 as printed with the measured `q`.
    pub collision_eq_3_7: f64,
    /// Valid-key collision rate of the first-match scan with a uniformly
    /// random start: `1 − (1 − (1 − q)^d)/(d·q)`.
    pub collision_scan: f64,
}

/// BFW lookup form: one Bloom filter per non-empty port. See the
/// [module docs](super) — valid keys may read another port's value.
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<Bfw>,
}

/// A per-thread read handle ([`crate::LookupTable::reader`]).
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Bfw>);

crate::engine::lookup_form!(Bfw);

impl Lookup {
    pub(crate) fn from_image(img: &Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(Inner::from_image(img), table, seq))
    }

    /// Hash functions per filter `n_h`.
    pub fn hashes(&self) -> u32 {
        self.raw.load().p.hashes
    }
    /// Ports with a filter.
    pub fn ports(&self) -> Vec<u32> {
        self.raw.load().ports.clone()
    }

    /// Every port whose filter matches `key`, in scan order (the first one
    /// is what [`LookupTable::get`](crate::LookupTable::get) returns), written into `out` (cleared
    /// first; it allocates only if `out` lacks capacity). A valid key's own
    /// port is always among them. The list is a consistent snapshot even
    /// while deltas are applied.
    pub fn matches(&self, key: &[u8], out: &mut Vec<u64>) {
        let c = self.raw.load();
        let h = hash64(key, c.p.seed);
        Inner::read_latest(
            &c,
            || self.raw.load_full(),
            |c| {
                out.clear();
                c.scan(h, |p| {
                    out.push(p as u64);
                    true
                })
            },
        )
    }

    /// True if `port`'s filter matches `key` (consistent under concurrent
    /// deltas; never allocates).
    pub fn contains(&self, key: &[u8], port: u64) -> bool {
        let c = self.raw.load();
        let h = hash64(key, c.p.seed);
        Inner::read_latest(
            &c,
            || self.raw.load_full(),
            |c| {
                port <= u32::MAX as u64
                    && c.find(port as u32).is_some_and(|i| c.filters[i].contains(h, step_of(h), c.p.hashes))
            },
        )
    }

    /// Predicted rates from the filters' current fill (eq. 3.7 and the scan model).
    pub fn rates(&self) -> Rates {
        let c = self.raw.load();
        let d = c.filters.len();
        let mut miss_all = 1.0;
        let mut qsum = 0.0;
        for f in &c.filters {
            let fill = f.ones() as f64 / f.m as f64;
            let q = fill.powi(c.p.hashes as i32);
            miss_all *= 1.0 - q;
            qsum += q;
        }
        let q = if d == 0 { 0.0 } else { qsum / d as f64 };
        let (_, cr_printed, cr_scan) = predicted_rates(d, q);
        Rates {
            ports: d,
            filter_false_match: q,
            false_positive: 1.0 - miss_all,
            collision_eq_3_7: cr_printed,
            collision_scan: cr_scan,
        }
    }
}

/// The BFW scheme (see [`crate::engine`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bfw;

impl Scheme for Bfw {
    type Inner = Inner;
    type Image = Image;
    type Patch = Ops;
    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    const REPLACE_TAG: u8 = TAG_REPLACE;

    fn build(img: Image) -> Result<Inner> {
        Ok(Inner::from_image(&img))
    }
    fn image(c: &Inner) -> Image {
        Image { p: c.p, filters: c.ports.iter().zip(&c.filters).map(|(&p, f)| (p, f.m, f.to_words())).collect() }
    }
    fn check_replace(c: &Inner, img: &Image) -> Result<()> {
        if img.p.vbits != c.p.vbits || img.p.hashes != c.p.hashes || img.p.seed != c.p.seed {
            return Err(Error::DeltaMismatch("rebuild delta has different parameters".into()));
        }
        Ok(())
    }

    fn apply_patch(cur: &Published<Inner>, c: Arc<Inner>, patch: &Ops) -> Result<()> {
        let (seed, ops) = (patch.seed, &patch.ops);
        if seed != c.p.seed {
            return Err(Error::DeltaMismatch(format!("delta is for seed {seed:#x}, table has {:#x}", c.p.seed)));
        }
        // Validate against the port list as it evolves through the delta.
        let mut present: Vec<(u32, u64)> = c.ports.iter().zip(&c.filters).map(|(&p, f)| (p, f.m)).collect();
        for op in ops {
            match op {
                Op::Set { port, bits } | Op::Clear { port, bits } => {
                    let m = present
                        .iter()
                        .find(|e| e.0 == *port)
                        .map(|e| e.1)
                        .ok_or_else(|| Error::DeltaMismatch(format!("port {port} has no filter")))?;
                    if bits.iter().any(|&b| b >= m) {
                        return Err(Error::DeltaMismatch(format!("bit position outside port {port}'s {m} bits")));
                    }
                }
                Op::Filter { port, m, words } => {
                    if *m != 0 {
                        super::delta::check_filter(&c.p, *port, *m, words.len())
                            .map_err(|e| Error::DeltaMismatch(e.to_string()))?;
                    }
                    present.retain(|e| e.0 != *port);
                    if *m != 0 {
                        present.push((*port, *m));
                    }
                }
            }
        }
        c.lock.write_begin(&[0]);
        let mut next: Option<Inner> = None;
        for op in ops {
            let inner: &Inner = next.as_ref().unwrap_or(&c);
            match op {
                Op::Set { port, bits } | Op::Clear { port, bits } => {
                    let on = matches!(op, Op::Set { .. });
                    if let Some(i) = inner.find(*port) {
                        bits.iter().for_each(|&b| inner.filters[i].set(b, on));
                    }
                }
                Op::Filter { port, m, words } => {
                    let mut n = inner.successor();
                    match (n.find(*port), *m) {
                        (Some(i), 0) => {
                            n.ports.remove(i);
                            n.filters.remove(i);
                        }
                        (Some(i), _) => n.filters[i] = Arc::new(Filter::from_words(*m, words)),
                        (None, 0) => {}
                        (None, _) => {
                            let i = n.ports.partition_point(|&p| p < *port);
                            n.ports.insert(i, *port);
                            n.filters.insert(i, Arc::new(Filter::from_words(*m, words)));
                        }
                    }
                    next = Some(n);
                }
            }
        }
        if let Some(n) = next {
            c.retired.store(true, Relaxed);
            cur.replace(n);
        }
        c.lock.write_end(&[0]);
        Ok(())
    }

    fn memory_bytes(c: &Inner) -> usize {
        c.ports.capacity() * 4
            + c.filters.iter().map(|f| f.words.len() * 8 + std::mem::size_of::<Filter>() + 16).sum::<usize>()
            + c.filters.capacity() * 8
            + c.lock.memory_bytes()
    }

    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }

    /// The port of the first matching filter in the scan (see the module
    /// docs for the tie rule); `None` when no filter matches.
    #[inline(always)]
    fn get(c: &Inner, key: &[u8], latest: impl Fn() -> Arc<Inner>) -> Option<u64> {
        let h = hash64(key, c.p.seed);
        Inner::read_latest(c, latest, |c| c.first(h))
    }
}
