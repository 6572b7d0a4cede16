//! The FPT data-plane form: one array of node words, bit positions only.

use super::delta::{Delta, Image, TAG_REPLACE, Writes};
use super::{Bits, INTERNAL, LEAF, POS_MASK, Params, TAG};
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result, mask};
use crate::sync::{Published, StripedSeqLock};
use crate::wire::Kind;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub(crate) struct Inner {
    pub p: Params,
    pub nodes: Box<[AtomicU64]>,
    lock: StripedSeqLock,
}

impl Inner {
    fn new(img: Image) -> Self {
        let nodes: Vec<AtomicU64> = img.nodes.into_iter().map(AtomicU64::new).collect();
        crate::mem::advise_hugepages(&nodes);
        Self { p: img.p, nodes: nodes.into_boxed_slice(), lock: StripedSeqLock::new(1) }
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
    raw: RawLookup<Fpt>,
}

/// A per-thread read handle ([`crate::LookupTable::reader`]).
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Fpt>);

crate::engine::lookup_form!(Fpt);

impl Lookup {
    pub(crate) fn from_image(img: Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(Inner::new(img), table, seq))
    }

    /// Fingerprint bits prepended to names.
    pub fn fingerprint_bits(&self) -> u32 {
        self.raw.load().p.fbits
    }
    /// Check bits per leaf.
    pub(crate) fn check_bits(&self) -> u32 {
        self.raw.load().p.cbits
    }
    /// Node words in the array (used or free).
    pub fn node_capacity(&self) -> usize {
        self.raw.load().nodes.len()
    }
    /// Internal nodes visited by a lookup of `key` (the leaf depth for a
    /// stored name); `None` for an empty trie.
    pub fn depth(&self, key: &[u8]) -> Option<u32> {
        let c = self.raw.load();
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

/// The FPT scheme (see [`crate::engine`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fpt;

impl Scheme for Fpt {
    type Inner = Inner;
    type Image = Image;
    type Patch = Writes;
    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    const REPLACE_TAG: u8 = TAG_REPLACE;

    fn build(img: Image) -> Result<Inner> {
        Ok(Inner::new(img))
    }
    fn image(c: &Inner) -> Image {
        c.image()
    }
    fn payload_hint(c: &Inner) -> usize {
        c.nodes.len() * 8 + 64
    }
    fn check_replace(c: &Inner, img: &Image) -> Result<()> {
        if img.p != c.p {
            return Err(Error::DeltaMismatch("rebuild delta has different parameters".into()));
        }
        Ok(())
    }
    fn apply_patch(_cur: &Published<Inner>, c: Arc<Inner>, patch: &Writes) -> Result<()> {
        let Writes { seed, nodes, writes } = patch;
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
        Ok(())
    }
    fn memory_bytes(c: &Inner) -> usize {
        c.nodes.len() * 8 + c.lock.memory_bytes()
    }
    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }
    #[inline(always)]
    fn get(c: &Inner, key: &[u8], _latest: impl Fn() -> Arc<Inner>) -> Option<u64> {
        c.answer(&c.p.bits(key))
    }
    // A trie walk is a chain of dependent loads: the default (one snapshot
    // for the batch, key by key) is the batch lookup.
}
