//! Othello in the front ends: options and parameters.

use crate::{Opts, Structure};
use keyplane::othello::{self, Options, Sizing};
use keyplane::wire::Kind;
use keyplane::{ControlTable, Result};

/// Othello / Concise (OFW) — see [`keyplane::othello`].
///
/// Options: `sizing=compact|pow2`, `fingerprint_bits=0..32`,
/// `emptiness=true|false`, `seed=N`, and `filtered=F` as a shorthand for
/// `fingerprint_bits=F,emptiness=true` (thesis §3.4.3).
#[derive(Debug, Clone, Copy)]
pub struct Othello;

impl Othello {
    /// Library options from front-end options.
    pub fn options(opts: &Opts) -> Result<Options> {
        opts.check_known(Self::NAME, Self::OPTIONS)?;
        let mut o = Options::default();
        if let Some(f) = opts.get("filtered") {
            let f = opts.u64("filtered", 0).map_err(|_| {
                keyplane::Error::InvalidParameter(format!("option filtered={f}: not an unsigned integer"))
            })?;
            o = Options::filtered(u32::try_from(f).unwrap_or(u32::MAX));
        }
        o.sizing = match opts.get("sizing") {
            None => o.sizing,
            Some("compact") => Sizing::Compact,
            Some("pow2" | "power-of-two" | "power_of_two") => Sizing::PowerOfTwo,
            Some(v) => {
                return Err(keyplane::Error::InvalidParameter(format!("option sizing={v}: expected compact or pow2")));
            }
        };
        let fb = opts.u64("fingerprint_bits", o.fingerprint_bits as u64)?;
        o.fingerprint_bits = u32::try_from(fb).unwrap_or(u32::MAX);
        o.emptiness = opts.bool("emptiness", o.emptiness)?;
        o.seed = opts.u64("seed", o.seed)?;
        Ok(o)
    }
}

impl Structure for Othello {
    const NAME: &'static str = "othello";
    const SUMMARY: &'static str =
        "Othello hashing / Concise FIB: two XOR-ed arrays, no keys, ~2.33·l bits/key (thesis §2.3, §3.4.3 OFW)";
    const OPTIONS: &'static [(&'static str, &'static str)] = &[
        ("sizing", "compact (m_a=1.33n, m_b=n) or pow2 (power-of-two arrays, the paper's sizes)"),
        ("fingerprint_bits", "0..32 fingerprint bits per slot; alien keys pass with probability 2^-f"),
        ("emptiness", "true/false: store the OFW emptiness bit per slot"),
        ("filtered", "F: shorthand for fingerprint_bits=F,emptiness=true"),
        ("seed", "initial hash seed"),
    ];
    const LOOKUP_KIND: Kind = Kind::OthelloLookup;
    type Control = othello::Control;
    type Lookup = othello::Lookup;
    type Delta = othello::Delta;

    fn build<I, K>(items: I, value_bits: u32, opts: &Opts) -> Result<Self::Control>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        let o = Self::options(opts)?;
        if o == Options::default() {
            othello::Control::from_items(items, value_bits)
        } else {
            othello::Control::from_items_with(items, value_bits, o)
        }
    }

    fn describe(l: &Self::Lookup) -> Vec<(&'static str, String)> {
        let (ma, mb) = l.sizes();
        vec![
            ("value_bits", l.value_bits().to_string()),
            ("fingerprint_bits", l.fingerprint_bits().to_string()),
            ("emptiness", l.has_emptiness().to_string()),
            ("m_a", ma.to_string()),
            ("m_b", mb.to_string()),
            ("seed", format!("{:#x}", l.seed())),
            ("seq", l.seq().to_string()),
        ]
    }

    fn value_bits(l: &Self::Lookup) -> Option<u32> {
        Some(l.value_bits())
    }

    fn capacity(l: &Self::Lookup) -> Option<usize> {
        // Compact sizing makes m_b the capacity; power-of-two sizing rounds it up.
        Some(l.sizes().1 as usize)
    }

    fn rejects_aliens(l: &Self::Lookup) -> bool {
        l.fingerprint_bits() > 0 || l.has_emptiness()
    }
}
