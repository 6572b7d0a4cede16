//! Othello hashing and the Concise FIB (Yu, Li, Qian, Wang, ANCS/ToN;
//! thesis §2.3 and §3.4.3 "OFW").
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/othello.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

mod control;
mod delta;
pub(crate) mod graph;
mod lookup;

pub use control::{Control, Stats};
pub use delta::Delta;
pub use lookup::{Lookup, Reader8};
// For structures that embed Othello lookup forms (lb, ludo): raw arrays,
// images, delta bodies and the peeling builder.
pub(crate) use control::peel_and_assign;
pub(crate) use delta::{Body, Image, Slots};
pub(crate) use lookup::Inner as LookupInner;

use crate::error::{Error, Result, mask};
use crate::hash::{hash_u64_mum, hash64, hi, lo, mix64, mum_keys, reduce, reduce64};

/// How the two arrays are sized for a capacity of `c` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sizing {
    /// m_a = ⌈1.33·c⌉, m_b = c, with multiply-shift range reduction
    /// (≈ 2.33·l bits/key at full capacity).
    #[default]
    Compact,
    /// The paper's power-of-two sizes: m_a = 2^⌈log₂ 1.33c⌉, m_b = 2^⌈log₂ c⌉
    /// (between 2.33·l and 4.66·l bits/key).
    PowerOfTwo,
}

/// How a table hashes its keys: chosen when the table is built and recorded
/// in its lookup blobs, deltas that replace the table and control
/// snapshots, so a table always reads with the hash it was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyHash {
    /// XXH3-64 of every key (every table made before this choice existed;
    /// their blobs and snapshots decode as this).
    Xxh3,
    /// 8-byte keys (and `get_u64`) by a seeded two-multiply hash of the key's
    /// little-endian word (rapidhash's construction, about half of XXH3's
    /// instructions); keys of other lengths by XXH3-64, as [`KeyHash::Xxh3`].
    #[default]
    Mum8,
}

impl KeyHash {
    /// The code stored in blobs (bits 1.. of the layout flags byte).
    fn code(self) -> u8 {
        match self {
            KeyHash::Xxh3 => 0,
            KeyHash::Mum8 => 1,
        }
    }
}

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Array sizing policy.
    pub sizing: Sizing,
    /// Fingerprint bits stored with each value (0..=32): alien keys pass the
    /// fingerprint check with probability 2^-f.
    pub fingerprint_bits: u32,
    /// Store the OFW emptiness indicator (one bit per slot).
    pub emptiness: bool,
    /// Initial seed; rebuilds draw later seeds deterministically from it.
    pub seed: u64,
    /// Extra capacity, in percent of the key count, reserved by bulk
    /// construction and growth so that a table under insert/delete churn does
    /// not grow on its first insert. The default 1% keeps compact sizing at
    /// ≈ 2.36·l bits/key. Ignored by power-of-two sizing, which rounds up anyway.
    pub headroom_percent: u32,
    /// Key hash ([`KeyHash::Mum8`] by default; a loaded control snapshot
    /// keeps the hash its table was built with).
    pub hash: KeyHash,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            sizing: Sizing::Compact,
            fingerprint_bits: 0,
            emptiness: false,
            seed: crate::lineage::random_seed(),
            headroom_percent: 1,
            hash: KeyHash::default(),
        }
    }
}

impl Options {
    /// Options with `fingerprint_bits` of fingerprint and the emptiness bit on.
    pub fn filtered(fingerprint_bits: u32) -> Self {
        Self { fingerprint_bits, emptiness: true, ..Self::default() }
    }
}

/// Parameters every lookup form carries: the skeleton (seed, sizes) and the
/// slot layout.
///
/// The seed is private and changed only through [`Params::set_seed`], so
/// the `Mum8` keys derived from it ([`Params::hash`]'s, `mum`) always
/// belong to it: outside this module a `Params` is made only by
/// [`Params::new`] or [`Params::with_plain_values`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    seed: u64,
    /// `hash::mum_keys(seed)`, derived once per seed (not per hashed key:
    /// four splitmix64 steps, about 5% of a control-side update).
    mum: [u64; 4],
    pub ma: u32,
    pub mb: u32,
    pub vbits: u32,
    pub fbits: u32,
    pub empt: bool,
    pub hash: KeyHash,
}

pub(crate) const SIDE_B: u32 = 1 << 31;
pub(crate) const MAX_SLOTS: u32 = (1 << 31) - 1;

impl Params {
    /// Parameters with seed `seed` (and the `Mum8` keys derived from it).
    pub fn new(seed: u64, ma: u32, mb: u32, vbits: u32, fbits: u32, empt: bool, hash: KeyHash) -> Self {
        Params { seed, mum: mum_keys(seed), ma, mb, vbits, fbits, empt, hash }
    }

    /// The hash seed (part of the skeleton).
    #[inline(always)]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Changes the seed, and with it the `Mum8` keys.
    pub fn set_seed(&mut self, seed: u64) {
        *self = Params { seed, mum: mum_keys(seed), ..*self };
    }

    /// The `Mum8` keys of this seed (`hash::mum_keys(seed)`).
    #[inline(always)]
    pub fn mum(&self) -> &[u64; 4] {
        &self.mum
    }

    /// The same skeleton (seed, sizes, key hash) with plain slots of
    /// `vbits` value bits: no fingerprint, no emptiness bit.
    pub fn with_plain_values(&self, vbits: u32) -> Self {
        Params { vbits, fbits: 0, empt: false, ..*self }
    }

    pub fn validate(&self) -> Result<()> {
        if !(1..=64).contains(&self.vbits) {
            return Err(Error::InvalidValueBits { got: self.vbits, min: 1, max: 64 });
        }
        if self.fbits > 32 {
            return Err(Error::InvalidParameter(format!("fingerprint_bits {} > 32", self.fbits)));
        }
        if self.width() > 64 {
            return Err(Error::InvalidParameter(format!(
                "value_bits {} + fingerprint_bits {} + emptiness {} exceed 64",
                self.vbits, self.fbits, self.empt as u32
            )));
        }
        if self.ma == 0 || self.mb == 0 || self.ma > MAX_SLOTS || self.mb > MAX_SLOTS {
            return Err(Error::InvalidParameter(format!("array sizes {} / {} out of range", self.ma, self.mb)));
        }
        Ok(())
    }

    /// Bits per slot.
    #[inline(always)]
    pub fn width(&self) -> u32 {
        self.vbits + self.fbits + self.empt as u32
    }

    /// Mask of the XOR-ed part (value and fingerprint).
    #[inline(always)]
    pub fn xmask(&self) -> u64 {
        mask(self.vbits + self.fbits)
    }

    /// Emptiness bit (0 when disabled).
    #[inline(always)]
    pub fn ebit(&self) -> u64 {
        if self.empt { 1u64 << (self.vbits + self.fbits) } else { 0 }
    }

    /// The 64-bit hash of a key under this table's seed and [`KeyHash`].
    #[inline(always)]
    pub fn hash(&self, key: &[u8]) -> u64 {
        match (self.hash, <[u8; 8]>::try_from(key)) {
            (KeyHash::Mum8, Ok(k8)) => {
                debug_assert_eq!(self.mum, mum_keys(self.seed), "Mum8 keys of another seed");
                hash_u64_mum(u64::from_le_bytes(k8), &self.mum)
            }
            _ => hash64(key, self.seed),
        }
    }

    /// Hash and slot indices of a key.
    #[inline(always)]
    pub fn locate(&self, key: &[u8]) -> (u64, usize, usize) {
        self.locate_hash(self.hash(key))
    }

    /// Slot indices of a key hash: `reduce` of its low half into A; into B
    /// `reduce` of its high half (XXH3 tables) or the 64-bit
    /// `reduce64(h, mb)` (`Mum8` tables: the high half of one multiply,
    /// two instructions fewer, and within a carry of the former).
    #[inline(always)]
    pub fn locate_hash(&self, h: u64) -> (u64, usize, usize) {
        let ib = match self.hash {
            KeyHash::Xxh3 => reduce(hi(h), self.mb) as u64,
            KeyHash::Mum8 => reduce64(h, self.mb as u64),
        };
        (h, reduce(lo(h), self.ma) as usize, ib as usize)
    }

    /// Fingerprint of a hash, already shifted into place.
    #[inline(always)]
    pub fn fp(&self, h: u64) -> u64 {
        if self.fbits == 0 { 0 } else { ((mix64(h) >> 32) & mask(self.fbits)) << self.vbits }
    }

    /// The XOR target of a key with value `v`.
    #[inline(always)]
    pub fn target(&self, h: u64, v: u64) -> u64 {
        v | self.fp(h)
    }

    /// Decodes two slots into a lookup answer.
    #[inline(always)]
    pub fn answer(&self, h: u64, x: u64, y: u64) -> Option<u64> {
        let t = (x ^ y) & self.xmask();
        let e = self.ebit();
        let ok_e = (x & y & e) == e;
        let ok_f = (t & !mask(self.vbits)) == self.fp(h);
        if ok_e && ok_f { Some(t & mask(self.vbits)) } else { None }
    }

    /// Array sizes for a capacity.
    pub fn sizes(sizing: Sizing, cap: usize) -> Result<(u32, u32)> {
        let cap = cap.max(4) as u64;
        let (ma, mb) = match sizing {
            Sizing::Compact => ((cap * 4).div_ceil(3), cap),
            Sizing::PowerOfTwo => ((cap * 4).div_ceil(3).next_power_of_two(), cap.next_power_of_two()),
        };
        if ma > MAX_SLOTS as u64 || mb > MAX_SLOTS as u64 {
            return Err(Error::CapacityExceeded(format!("{cap} keys need arrays beyond 2^31 slots")));
        }
        Ok((ma as u32, mb as u32))
    }

    /// The layout flags byte: bit 0 the emptiness bit, bits 1.. the
    /// [`KeyHash`] code (0 for XXH3, so every blob written before the
    /// choice existed decodes as XXH3, byte for byte).
    pub fn encode(&self, w: &mut crate::wire::Writer) {
        let flags = self.empt as u8 | self.hash.code() << 1;
        w.u64(self.seed).u32(self.ma).u32(self.mb).u8(self.vbits as u8).u8(self.fbits as u8).u8(flags);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let (seed, ma, mb) = (r.u64()?, r.u32()?, r.u32()?);
        let (vbits, fbits) = (r.u8()? as u32, r.u8()? as u32);
        let flags = r.u8()?;
        let hash = match flags >> 1 {
            0 => KeyHash::Xxh3,
            1 => KeyHash::Mum8,
            x => {
                return Err(Error::Corrupt(format!(
                    "othello key hash code {x} is unknown (a newer version wrote it: upgrade keyplane)"
                )));
            }
        };
        let p = Params::new(seed, ma, mb, vbits, fbits, flags & 1 == 1, hash);
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
}

/// Expected alien-key false-positive rate of a lookup form with these
/// parameters holding `n` keys: thesis eq. 3.9,
/// `2^-f · (1 − ε_a)(1 − ε_b)` with `ε = (1 − 1/m)^n` when the emptiness bit
/// is on (f fingerprint bits), `2^-f` without it.
pub fn expected_false_positive_rate(n: usize, ma: u32, mb: u32, fingerprint_bits: u32, emptiness: bool) -> f64 {
    let f = 0.5f64.powi(fingerprint_bits as i32);
    if !emptiness {
        return f;
    }
    let ea = (1.0 - 1.0 / ma as f64).powf(n as f64);
    let eb = (1.0 - 1.0 / mb as f64).powf(n as f64);
    f * (1.0 - ea) * (1.0 - eb)
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0101, "othello lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0102, "othello delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0103, "othello control snapshot");
