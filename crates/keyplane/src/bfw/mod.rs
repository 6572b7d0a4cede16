//! Bloom Forwarder (BFW) — the Bloom-filter baseline of thesis §3.4.1,
//! §3.5.3 (eq. 3.7) and Appendix A.1.1, A.1.5, A.1.6 (after BUFFALO and
//! Summary Cache).
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/bfw.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

mod control;
mod delta;
mod lookup;

pub use control::Control;
pub use delta::Delta;
pub use lookup::{Lookup, Rates};

use crate::error::{Error, Result};
use crate::hash::{mix64, reduce64};

/// Largest value width: BFW keeps one filter per port, and a lookup may
/// test every non-empty one.
pub const MAX_VALUE_BITS: u32 = 16;
/// Default number of hash functions `n_h` (≈ 0.8 % false matches per filter
/// at the optimal size, 10.1 bits per key).
pub const DEFAULT_HASHES: u32 = 7;
/// Largest filter, in bits.
pub(crate) const MAX_FILTER_BITS: u64 = 1 << 40;

/// Construction options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Hash functions per filter `n_h` (1..=32); filters get `n_h/ln 2` bits per key.
    pub hashes: u32,
    /// Hash seed.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { hashes: DEFAULT_HASHES, seed: crate::lineage::random_seed() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub seed: u64,
    pub vbits: u32,
    pub hashes: u32,
}

impl Params {
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_VALUE_BITS).contains(&self.vbits) {
            return Err(Error::InvalidValueBits { got: self.vbits, min: 1, max: MAX_VALUE_BITS });
        }
        if !(1..=32).contains(&self.hashes) {
            return Err(Error::InvalidParameter(format!("hashes {} not in 1..=32", self.hashes)));
        }
        Ok(())
    }

    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u64(self.seed).u8(self.vbits as u8).u8(self.hashes as u8);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let p = Params { seed: r.u64()?, vbits: r.u8()? as u32, hashes: r.u8()? as u32 };
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }

    /// Bits for a filter of capacity `cap` keys (a multiple of 64).
    pub fn filter_bits(&self, cap: usize) -> u64 {
        let m = (cap.max(1) as f64 * self.hashes as f64 / std::f64::consts::LN_2).ceil() as u64;
        m.div_ceil(64).max(1) * 64
    }
}

/// The `t`-th bit position of hash `h` in a filter of `m` bits (double
/// hashing, Kirsch–Mitzenmacher).
#[inline(always)]
pub(crate) fn bit(h: u64, step: u64, t: u32, m: u64) -> u64 {
    reduce64(h.wrapping_add(step.wrapping_mul(t as u64)), m)
}

/// Second hash for double hashing.
#[inline(always)]
pub(crate) fn step_of(h: u64) -> u64 {
    mix64(h) | 1
}

/// Valid-key collision and alien false-positive rates predicted for `d`
/// filters with per-filter false-match probability `q`:
/// `(FP eq. 3.7, CR eq. 3.7 as printed, CR of the first-match scan)`.
pub fn predicted_rates(d: usize, q: f64) -> (f64, f64, f64) {
    if d == 0 {
        return (0.0, 0.0, 0.0);
    }
    let d_f = d as f64;
    let miss_all = (1.0 - q).powf(d_f);
    let fp = 1.0 - miss_all;
    let cr_printed = (1.0 - miss_all) / d_f;
    let cr_scan = if q <= 0.0 { 0.0 } else { 1.0 - (1.0 - (1.0 - q).powf(d_f)) / (d_f * q) };
    (fp, cr_printed, cr_scan)
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0601, "bfw lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0602, "bfw delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0603, "bfw control snapshot");
