//! The BFW data-plane form.

use super::delta::{Body, Delta, Image, Op};
use super::{Params, bit, predicted_rates, step_of};
use crate::LookupTable;
use crate::error::{Error, Result};
use crate::hash::{hash64, reduce};
use crate::sync::{Published, StripedSeqLock};
use crate::wire::{Frame, Kind, Wire, Writer};
use std::sync::atomic::{AtomicU64, Ordering, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

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

#[derive(Debug)]
pub(crate) struct Inner {
    p: Params,
    ports: Vec<u32>,
    filters: Vec<Arc<Filter>>,
}

impl Inner {
    fn from_image(img: &Image) -> Self {
        Self {
            p: img.p,
            ports: img.filters.iter().map(|f| f.0).collect(),
            filters: img.filters.iter().map(|(_, m, w)| Arc::new(Filter::from_words(*m, w))).collect(),
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
    table: crate::lineage::Lineage,
    cur: Published<Inner>,
    lock: StripedSeqLock,
    seq: AtomicU64,
    writer: Mutex<()>,
}

impl Lookup {
    /// Table id and key format (see [`crate::lineage`]).
    pub(crate) fn lineage(&self) -> crate::lineage::Lineage {
        self.table
    }

    pub(crate) fn from_image(img: &Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self {
            table,
            cur: Published::new(Inner::from_image(img)),
            lock: StripedSeqLock::new(1),
            seq: AtomicU64::new(seq),
            writer: Mutex::new(()),
        }
    }

    /// Value bits.
    pub(crate) fn value_bits(&self) -> u32 {
        self.cur.load().p.vbits
    }
    /// Hash functions per filter `n_h`.
    pub fn hashes(&self) -> u32 {
        self.cur.load().p.hashes
    }
    /// Ports with a filter.
    pub fn ports(&self) -> Vec<u32> {
        self.cur.load().ports.clone()
    }
    /// Sequence number of the last delta applied (or of the export).
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Every port whose filter matches `key`, in scan order (the first one
    /// is what [`LookupTable::get`] returns), written into `out` (cleared
    /// first; it allocates only if `out` lacks capacity). A valid key's own
    /// port is always among them. The list is a consistent snapshot even
    /// while deltas are applied.
    pub fn matches(&self, key: &[u8], out: &mut Vec<u64>) {
        loop {
            out.clear();
            let v = self.lock.read_begin(0);
            let c = self.cur.load();
            c.scan(hash64(key, c.p.seed), |p| {
                out.push(p as u64);
                true
            });
            if self.lock.read_validate(0, v) {
                return;
            }
        }
    }

    /// True if `port`'s filter matches `key` (consistent under concurrent
    /// deltas; never allocates).
    pub fn contains(&self, key: &[u8], port: u64) -> bool {
        loop {
            let v = self.lock.read_begin(0);
            let c = self.cur.load();
            let h = hash64(key, c.p.seed);
            let hit = port <= u32::MAX as u64
                && c.find(port as u32).is_some_and(|i| c.filters[i].contains(h, step_of(h), c.p.hashes));
            if self.lock.read_validate(0, v) {
                return hit;
            }
        }
    }

    /// Predicted rates from the filters' current fill (eq. 3.7 and the scan model).
    pub fn rates(&self) -> Rates {
        let c = self.cur.load();
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

    fn apply_ops(&self, seed: u64, ops: &[Op]) -> Result<()> {
        let c = self.cur.load_full();
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
        self.lock.write_begin(&[0]);
        let mut cur: Option<Inner> = None;
        for op in ops {
            let inner: &Inner = cur.as_ref().unwrap_or(&c);
            match op {
                Op::Set { port, bits } | Op::Clear { port, bits } => {
                    let on = matches!(op, Op::Set { .. });
                    if let Some(i) = inner.find(*port) {
                        bits.iter().for_each(|&b| inner.filters[i].set(b, on));
                    }
                }
                Op::Filter { port, m, words } => {
                    let mut next = Inner { p: inner.p, ports: inner.ports.clone(), filters: inner.filters.clone() };
                    match (next.find(*port), *m) {
                        (Some(i), 0) => {
                            next.ports.remove(i);
                            next.filters.remove(i);
                        }
                        (Some(i), _) => next.filters[i] = Arc::new(Filter::from_words(*m, words)),
                        (None, 0) => {}
                        (None, _) => {
                            let i = next.ports.partition_point(|&p| p < *port);
                            next.ports.insert(i, *port);
                            next.filters.insert(i, Arc::new(Filter::from_words(*m, words)));
                        }
                    }
                    cur = Some(next);
                }
            }
        }
        if let Some(next) = cur {
            self.cur.replace(next);
        }
        self.lock.write_end(&[0]);
        Ok(())
    }
}

impl LookupTable for Lookup {
    type Delta = Delta;
    type Reader<'a> = crate::SharedReader<'a, Self>;

    fn reader(&self) -> Self::Reader<'_> {
        crate::SharedReader(self)
    }

    /// The port of the first matching filter in the scan (see the module
    /// docs for the tie rule); `None` when no filter matches.
    #[inline]
    fn get(&self, key: &[u8]) -> Option<u64> {
        loop {
            let v = self.lock.read_begin(0);
            let c = self.cur.load();
            let h = hash64(key, c.p.seed);
            let mut r = None;
            c.scan(h, |p| {
                r = Some(p as u64);
                false
            });
            if self.lock.read_validate(0, v) {
                return r;
            }
        }
    }

    fn apply(&self, delta: &Delta) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let have = self.seq.load(Relaxed);
        crate::lineage::check_next(self.table, have, delta.table, delta.seq)?;
        match &delta.body {
            Body::Ops { seed, ops } => self.apply_ops(*seed, ops)?,
            Body::Replace(img) => {
                let c = self.cur.load();
                if img.p.vbits != c.p.vbits || img.p.hashes != c.p.hashes || img.p.seed != c.p.seed {
                    return Err(Error::DeltaMismatch("rebuild delta has different parameters".into()));
                }
                self.lock.write_begin(&[0]);
                self.cur.replace(Inner::from_image(img));
                self.lock.write_end(&[0]);
            }
        }
        self.seq.store(delta.seq, Ordering::Release);
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        let c = self.cur.load();
        std::mem::size_of::<Self>()
            + std::mem::size_of::<Inner>()
            + c.ports.capacity() * 4
            + c.filters.iter().map(|f| f.words.len() * 8 + std::mem::size_of::<Filter>() + 16).sum::<usize>()
            + c.filters.capacity() * 8
            + self.lock.memory_bytes()
    }
}

impl Wire for Lookup {
    fn to_bytes(&self) -> Vec<u8> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.cur.load();
        let mut w = Writer::new(Kind::BfwLookup);
        crate::lineage::write_prologue(&mut w, self.table, self.seq.load(Ordering::Acquire));
        let img =
            Image { p: c.p, filters: c.ports.iter().zip(&c.filters).map(|(&p, f)| (p, f.m, f.to_words())).collect() };
        img.encode(&mut w);
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, Kind::BfwLookup)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let img = Image::decode(&mut r)?;
        r.finish()?;
        Ok(Self::from_image(&img, table, seq))
    }
}
