//! The FPT data-plane form: one array of node words, bit positions only.

use super::delta::{Body, Delta, Image};
use super::{Bits, INTERNAL, LEAF, POS_MASK, Params, TAG};
use crate::LookupTable;
use crate::error::{Error, Result, mask};
use crate::sync::{Published, StripedSeqLock};
use crate::wire::{Frame, Kind, Wire, Writer};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub(crate) struct Inner {
    pub p: Params,
    pub nodes: Box<[AtomicU64]>,
    pub seq: AtomicU64,
    lock: StripedSeqLock,
}

impl Inner {
    fn new(img: Image, seq: u64) -> Self {
        let nodes: Vec<AtomicU64> = img.nodes.into_iter().map(AtomicU64::new).collect();
        crate::mem::advise_hugepages(&nodes);
        Self { p: img.p, nodes: nodes.into_boxed_slice(), seq: AtomicU64::new(seq), lock: StripedSeqLock::new(1) }
    }

    /// Walks the trie once (no retry): the leaf word reached and the depth.
    #[inline(always)]
    fn walk(&self, b: &Bits<'_>) -> Option<(u64, u32)> {
        let mut w = self.nodes.first()?.load(Ordering::Relaxed);
        let mut depth = 0u32;
        // A well-formed trie has strictly increasing positions, so a walk
        // never exceeds the node count; the bound guards torn reads.
        let limit = self.nodes.len() as u32;
        loop {
            match w & TAG {
                LEAF => return Some((w, depth)),
                INTERNAL => {
                    let pos = (w >> 32) & POS_MASK;
                    let left = (w & 0xffff_ffff) as usize;
                    let i = left + b.bit(pos) as usize;
                    w = self.nodes.get(i)?.load(Ordering::Relaxed);
                    depth += 1;
                    if depth > limit {
                        return None;
                    }
                }
                _ => return None,
            }
        }
    }

    #[inline(always)]
    fn answer(&self, b: &Bits<'_>) -> Option<u64> {
        loop {
            let v = self.lock.read_begin(0);
            let r = self.walk(b);
            if self.lock.read_validate(0, v) {
                let (w, _) = r?;
                let vb = self.p.vbits;
                if self.p.cbits > 0 && (w >> vb) & mask(self.p.cbits) != b.check {
                    return None;
                }
                return Some(w & mask(vb));
            }
        }
    }

    fn image(&self) -> Image {
        Image { p: self.p, nodes: self.nodes.iter().map(|w| w.load(Ordering::Relaxed)).collect() }
    }
}

/// FPT lookup form. See the [module docs](super).
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
    writer: Mutex<()>,
}

impl Lookup {
    /// Table id and key format (see [`crate::lineage`]).
    pub(crate) fn lineage(&self) -> crate::lineage::Lineage {
        self.table
    }

    pub(crate) fn from_image(img: Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self { table, cur: Published::new(Inner::new(img, seq)), writer: Mutex::new(()) }
    }

    /// Sequence number of the last delta applied (or of the export).
    pub(crate) fn seq(&self) -> u64 {
        self.cur.load().seq.load(Ordering::Acquire)
    }
    /// Fingerprint bits prepended to names.
    pub fn fingerprint_bits(&self) -> u32 {
        self.cur.load().p.fbits
    }
    /// Value bits.
    pub(crate) fn value_bits(&self) -> u32 {
        self.cur.load().p.vbits
    }
    /// Check bits per leaf.
    pub fn check_bits(&self) -> u32 {
        self.cur.load().p.cbits
    }
    /// Node words in the array (used or free).
    pub fn node_capacity(&self) -> usize {
        self.cur.load().nodes.len()
    }
    /// Internal nodes visited by a lookup of `key` (the leaf depth for a
    /// stored name); `None` for an empty trie.
    pub fn depth(&self, key: &[u8]) -> Option<u32> {
        let c = self.cur.load();
        let b = c.p.bits(key);
        loop {
            let v = c.lock.read_begin(0);
            let r = c.walk(&b);
            if c.lock.read_validate(0, v) {
                return r.map(|(_, d)| d);
            }
        }
    }
}

impl Inner {
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Option<u64> {
        let c = self;
        c.answer(&c.p.bits(key))
    }

    pub(crate) fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        // A trie walk is a chain of dependent loads: only the root word and
        // the hash can be done ahead; keep one snapshot for the batch.
        let c = self;
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = c.answer(&c.p.bits(k));
        }
    }
}

crate::sync::cached_reader!(Inner);

impl LookupTable for Lookup {
    type Delta = Delta;

    crate::sync::snapshot_reads!();

    fn apply(&self, delta: &Delta) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.cur.load_full();
        let have = c.seq.load(Ordering::Relaxed);
        crate::lineage::check_next(self.table, have, delta.table, delta.seq)?;
        match &delta.body {
            Body::Writes { seed, nodes, writes } => {
                if *seed != c.p.seed || *nodes as usize != c.nodes.len() {
                    return Err(Error::DeltaMismatch(format!(
                        "delta is for a trie (seed {seed:#x}, {nodes} nodes), this one is (seed {:#x}, {} nodes)",
                        c.p.seed,
                        c.nodes.len()
                    )));
                }
                let lim = mask(c.p.vbits + c.p.cbits);
                for &(i, w) in writes {
                    let ok = match w & TAG {
                        0 => w == 0,
                        LEAF => (w & !TAG) & !lim == 0,
                        INTERNAL => {
                            let left = (w & 0xffff_ffff) as usize;
                            left >= 2 && left % 2 == 0 && left + 1 < c.nodes.len()
                        }
                        _ => false,
                    };
                    if !ok || i == 1 && w != 0 {
                        return Err(Error::DeltaMismatch(format!("node write {i} = {w:#x} does not fit this trie")));
                    }
                }
                c.lock.write_begin(&[0]);
                for &(i, w) in writes {
                    c.nodes[i as usize].store(w, Ordering::Relaxed);
                }
                c.lock.write_end(&[0]);
                c.seq.store(delta.seq, Ordering::Release);
            }
            Body::Replace(img) => {
                if img.p != c.p {
                    return Err(Error::DeltaMismatch("rebuild delta has different parameters".into()));
                }
                self.cur.replace(Inner::new((**img).clone(), delta.seq));
            }
        }
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        let c = self.cur.load();
        std::mem::size_of::<Self>() + std::mem::size_of::<Inner>() + c.nodes.len() * 8 + c.lock.memory_bytes()
    }
}

impl Wire for Lookup {
    fn to_bytes(&self) -> Vec<u8> {
        let c = self.cur.load();
        let mut w = Writer::with_capacity(Kind::FptLookup, c.nodes.len() * 8 + 64);
        crate::lineage::write_prologue(&mut w, self.table, c.seq.load(Ordering::Acquire));
        c.image().encode(&mut w);
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, Kind::FptLookup)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let img = Image::decode(&mut r)?;
        r.finish()?;
        Ok(Self::from_image(img, table, seq))
    }
}
