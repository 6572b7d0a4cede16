//! Fingerprint-based Patricia trie (FPT) for speculative name forwarding
//! (Yuan, Crowley, Song, "Enhancing Scalable Name-Based Forwarding", ANCS
//! 2017, §4, §6.1, §7.1; the speculative binary Patricia trie sBPT of Song et
//! al., ICN'15).
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/fpt.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

mod control;
mod delta;
mod lookup;

pub use control::Control;
pub use delta::Delta;
pub use lookup::Lookup;

use crate::error::{Error, Result, mask};
use crate::hash::{hash64, mix64};

/// Longest name the trie accepts (bit positions must fit 30 bits).
pub const MAX_NAME_LEN: usize = 1 << 16;

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Fingerprint bits prepended to every name (0..=32, default 20; 0 is the plain sBPT).
    pub fingerprint_bits: u32,
    /// Check bits stored in every leaf (0..=32, default 0): a lookup answers
    /// `None` unless the query's check bits match the leaf's (§6.1).
    pub check_bits: u32,
    /// Hash seed.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { fingerprint_bits: 20, check_bits: 0, seed: crate::lineage::random_seed() }
    }
}

impl Options {
    /// Default options with `f` fingerprint bits.
    pub fn with_fingerprint_bits(f: u32) -> Self {
        Self { fingerprint_bits: f, ..Self::default() }
    }
}

pub(crate) const LEAF: u64 = 1 << 63;
pub(crate) const INTERNAL: u64 = 3 << 62;
pub(crate) const TAG: u64 = 3 << 62;
pub(crate) const POS_MASK: u64 = (1 << 30) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub seed: u64,
    pub fbits: u32,
    pub cbits: u32,
    pub vbits: u32,
}

/// A query's bit string.
#[derive(Clone, Copy)]
pub(crate) struct Bits<'a> {
    pub fp: u64,
    pub fbits: u32,
    pub key: &'a [u8],
    pub check: u64,
}

impl Bits<'_> {
    #[inline(always)]
    pub fn bit(&self, pos: u64) -> u64 {
        let f = self.fbits as u64;
        if pos < f {
            return (self.fp >> (f - 1 - pos)) & 1;
        }
        let q = pos - f;
        let j = (q / 9) as usize;
        let r = (q % 9) as u32;
        match self.key.get(j) {
            None => 0,
            Some(_) if r == 0 => 1,
            Some(&b) => ((b >> (8 - r)) & 1) as u64,
        }
    }

    /// First bit position where two bit strings differ (`None` if equal).
    pub fn first_difference(&self, o: &Bits<'_>) -> Option<u64> {
        let f = self.fbits as u64;
        let x = self.fp ^ o.fp;
        if x != 0 {
            // Highest differing bit among the f fingerprint bits.
            let lz = (x << (64 - f)).leading_zeros() as u64;
            return Some(lz);
        }
        let n = self.key.len().max(o.key.len());
        for j in 0..n {
            match (self.key.get(j), o.key.get(j)) {
                (Some(a), Some(b)) if a == b => continue,
                (Some(a), Some(b)) => {
                    let lz = (a ^ b).leading_zeros() as u64;
                    return Some(f + 9 * j as u64 + 1 + lz);
                }
                _ => return Some(f + 9 * j as u64),
            }
        }
        None
    }
}

impl Params {
    pub fn validate(&self) -> Result<()> {
        if self.fbits > 32 {
            return Err(Error::InvalidParameter(format!("fingerprint_bits {} > 32", self.fbits)));
        }
        if self.cbits > 32 {
            return Err(Error::InvalidParameter(format!("check_bits {} > 32", self.cbits)));
        }
        let maxv = 62 - self.cbits;
        if !(1..=maxv).contains(&self.vbits) {
            return Err(Error::InvalidValueBits { got: self.vbits, min: 1, max: maxv });
        }
        Ok(())
    }

    #[inline(always)]
    pub fn bits<'a>(&self, key: &'a [u8]) -> Bits<'a> {
        let h = hash64(key, self.seed);
        let fp = if self.fbits == 0 { 0 } else { h >> (64 - self.fbits) };
        let check = if self.cbits == 0 { 0 } else { mix64(h ^ 0x00c4_ec4b) & mask(self.cbits) };
        Bits { fp, fbits: self.fbits, key, check }
    }

    #[inline(always)]
    pub fn leaf(&self, v: u64, check: u64) -> u64 {
        LEAF | check << self.vbits | v
    }

    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u64(self.seed).u8(self.fbits as u8).u8(self.cbits as u8).u8(self.vbits as u8);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let p = Params { seed: r.u64()?, fbits: r.u8()? as u32, cbits: r.u8()? as u32, vbits: r.u8()? as u32 };
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }

    /// Checks that `nodes` hold a well-formed trie: pairs referenced once,
    /// bit positions strictly increasing downwards, leaves within the layout.
    pub fn check_nodes(&self, nodes: &[u64]) -> Result<()> {
        if nodes.len() < 2 || nodes.len() % 2 != 0 || nodes.len() > u32::MAX as usize {
            return Err(Error::Corrupt(format!("node array of {} words", nodes.len())));
        }
        if nodes[1] != 0 {
            return Err(Error::Corrupt("node word 1 is reserved".into()));
        }
        if nodes[0] == 0 {
            return Ok(());
        }
        let mut seen = vec![false; nodes.len() / 2];
        let mut stack = vec![(0usize, 0u64)];
        let lim = mask(self.vbits + self.cbits);
        while let Some((i, min_pos)) = stack.pop() {
            let w = nodes[i];
            match w & TAG {
                LEAF => {
                    if (w & !TAG) & !lim != 0 {
                        return Err(Error::Corrupt(format!("leaf {i} wider than its layout")));
                    }
                }
                INTERNAL => {
                    let pos = (w >> 32) & POS_MASK;
                    let left = (w & 0xffff_ffff) as usize;
                    if pos < min_pos || left < 2 || left % 2 != 0 || left + 1 >= nodes.len() {
                        return Err(Error::Corrupt(format!("internal node {i} is malformed")));
                    }
                    if std::mem::replace(&mut seen[left / 2], true) {
                        return Err(Error::Corrupt(format!("node pair {left} has two parents")));
                    }
                    stack.push((left, pos + 1));
                    stack.push((left + 1, pos + 1));
                }
                _ => return Err(Error::Corrupt(format!("node {i} is empty or has an unknown tag"))),
            }
        }
        Ok(())
    }
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0901, "fpt lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0902, "fpt delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0903, "fpt control snapshot");
