//! What front ends need to treat every structure alike: a describing trait
//! on lookup forms ([`Describe`]: value width, sequence number, lineage, how
//! absent keys are detected, parameters) and a configuring trait on control
//! forms ([`Configure`]: name, build options parsed by the structure itself).
//! `keyplane-any` (the CLI, C and Python front ends) is one registry line per
//! structure on top of these two traits.
//!
//! ```
//! use keyplane::describe::{AbsentKeys, Configure, Describe, Opts};
//! use keyplane::{ControlTable, ludo};
//!
//! let opts = Opts::parse("fingerprint_bits=8")?;
//! let ctl = ludo::Control::build_with([(b"a", 1u64), (b"b", 2)], 4, &opts)?;
//! let t = ctl.export();
//! assert_eq!(t.absent_keys(), AbsentKeys::Filtered { fingerprint_bits: 8, emptiness: false });
//! assert!(ludo::Control::build_with([(b"a", 1u64)], 4, &Opts::parse("nope=1")?).is_err());
//! # Ok::<(), keyplane::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::lineage::Lineage;
use crate::wire::Kind;
use crate::{ControlTable, LookupTable};

/// Build options as `name=value` strings (`-O` on the command line, keyword
/// arguments in Python). A structure takes the names it knows and rejects
/// the rest, so a typo is an error rather than a silent default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    items: Vec<(String, String)>,
}

impl Opts {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `a=1,b=2` (commas or whitespace separate; an empty string is no options).
    pub fn parse(s: &str) -> Result<Self> {
        let mut o = Self::new();
        for part in s.split([',', ' ', '\t', '\n']).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| Error::InvalidParameter(format!("option {part:?} is not of the form name=value")))?;
            o.push(k.trim(), v.trim());
        }
        Ok(o)
    }

    /// Adds (or replaces) one option.
    pub fn push(&mut self, name: &str, value: &str) -> &mut Self {
        let name = name.replace('-', "_");
        self.items.retain(|(k, _)| *k != name);
        self.items.push((name, value.to_string()));
        self
    }

    /// Removes an option; returns its value.
    pub fn take(&mut self, name: &str) -> Option<String> {
        let i = self.items.iter().position(|(k, _)| k == name)?;
        Some(self.items.remove(i).1)
    }

    /// The options as `(name, value)` pairs, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.items.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// True when no option is set.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `a=1,b=2`, the form [`Opts::parse`] reads.
    pub fn render(&self) -> String {
        self.items.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// Fails unless every option name is one of `known` (for `structure`).
    pub fn check_known(&self, structure: &str, known: &[(&str, &str)]) -> Result<()> {
        for (k, _) in self.iter() {
            if !known.iter().any(|(n, _)| *n == k) {
                let list: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                return Err(Error::InvalidParameter(if list.is_empty() {
                    format!("{structure} takes no options, got {k:?}")
                } else {
                    format!("{structure} has no option {k:?} (options: {})", list.join(", "))
                }));
            }
        }
        Ok(())
    }

    /// The raw value of an option.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.items.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// An unsigned integer option (`16`, `0x10`).
    pub(crate) fn u64(&self, name: &str, default: u64) -> Result<u64> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => {
                let parsed = match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => v.parse().ok(),
                };
                parsed.ok_or_else(|| Error::InvalidParameter(format!("option {name}={v}: not an unsigned integer")))
            }
        }
    }

    /// A `u32` option.
    pub(crate) fn u32(&self, name: &str, default: u32) -> Result<u32> {
        let v = self.u64(name, default as u64)?;
        u32::try_from(v).map_err(|_| Error::InvalidParameter(format!("option {name}={v}: too large")))
    }

    /// A boolean option (`true/false`, `1/0`, `yes/no`, `on/off`).
    pub(crate) fn bool(&self, name: &str, default: bool) -> Result<bool> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(Error::InvalidParameter(format!("option {name}={v}: not a boolean (true/false)"))),
            },
        }
    }

    /// One of `choices` (`(spelling, value)`).
    pub(crate) fn choice<T: Copy>(&self, name: &str, default: T, choices: &[(&str, T)]) -> Result<T> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => choices.iter().find(|(n, _)| *n == v).map(|(_, t)| *t).ok_or_else(|| {
                let list: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                Error::InvalidParameter(format!("option {name}={v}: expected one of {}", list.join(", ")))
            }),
        }
    }
}

/// How a lookup form tells keys that were never inserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbsentKeys {
    /// Full keys are stored: `None` exactly for absent keys.
    Exact,
    /// Fingerprints and/or emptiness bits: an absent key reads `None` except
    /// with a small false-positive probability (2^-f per probe for `f`
    /// fingerprint bits).
    Filtered {
        /// Fingerprint (or check) bits per entry.
        fingerprint_bits: u32,
        /// Emptiness bits per slot (Othello's OFW indicator).
        emptiness: bool,
    },
    /// Bloom filters: an absent key reads `None` unless some filter's `k`
    /// bits all happen to be set.
    Bloom {
        /// Hash functions per filter.
        hashes: u32,
    },
    /// Nothing is stored to tell them: an absent key reads an arbitrary value.
    Undetected,
}

impl AbsentKeys {
    /// True when `get` can answer `None` for keys never inserted, so a
    /// checked query (`keyplane query --checked`) is meaningful.
    pub fn detected(self) -> bool {
        self != AbsentKeys::Undetected
    }
}

impl std::fmt::Display for AbsentKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbsentKeys::Exact => write!(f, "exact (full keys stored)"),
            AbsentKeys::Filtered { fingerprint_bits, emptiness: true } => {
                write!(f, "{fingerprint_bits} fingerprint bits + emptiness bits")
            }
            AbsentKeys::Filtered { fingerprint_bits, emptiness: false } => {
                write!(f, "{fingerprint_bits} fingerprint bits")
            }
            AbsentKeys::Bloom { hashes } => write!(f, "Bloom filters ({hashes} hashes)"),
            AbsentKeys::Undetected => write!(f, "not detected (absent keys read arbitrary values)"),
        }
    }
}

/// A lookup form describing itself (every structure implements it).
pub trait Describe: LookupTable {
    /// Width of values in bits.
    fn value_bits(&self) -> u32;
    /// Sequence number of the last delta applied (or of the export).
    fn seq(&self) -> u64;
    /// Table id and key format.
    fn lineage(&self) -> Lineage;
    /// The table id ([`Describe::lineage`]).
    fn table_id(&self) -> crate::TableId {
        self.lineage().id
    }
    /// How absent keys are told apart.
    fn absent_keys(&self) -> AbsentKeys;
    /// True when every inserted key reads exactly its own value (false for
    /// structures whose colliding valid keys may read another's value).
    fn exact_for_stored_keys(&self) -> bool {
        true
    }
    /// Parameters for display (`keyplane inspect`), structure-specific.
    fn params(&self) -> Vec<(&'static str, String)>;
    /// Number of keys, when the lookup form knows it.
    fn key_count(&self) -> Option<usize> {
        None
    }
    /// Keys the lookup form is sized for, when known (for bits per key).
    fn capacity(&self) -> Option<usize> {
        None
    }
}

/// A control form built with string options parsed by the structure itself.
pub trait Configure: ControlTable<Lookup: Describe> {
    /// Name used on the command line and in Python (`"othello"`).
    const NAME: &'static str;
    /// One-line description (paper and section).
    const SUMMARY: &'static str;
    /// Build options: `(name, help)`.
    const OPTIONS: &'static [(&'static str, &'static str)];
    /// Wire kind of the lookup form (declared by the structure's module).
    const LOOKUP_KIND: Kind = <Self::Lookup as crate::Wire>::KIND;

    /// Bulk construction with options. A repeated key: the last value wins.
    fn build_with<I, K>(items: I, value_bits: u32, opts: &Opts) -> Result<Self>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>;
}

/// Help text of the `seed` option every structure takes.
pub(crate) const SEED_HELP: &str = "initial hash seed (random by default; fix it for reproducible builds)";

/// `Describe` from inherent accessors: `value_bits`, `seq`, `lineage`.
macro_rules! describe_basics {
    () => {
        fn value_bits(&self) -> u32 {
            Self::value_bits(self)
        }
        fn seq(&self) -> u64 {
            Self::seq(self)
        }
        fn lineage(&self) -> Lineage {
            Self::lineage(self)
        }
    };
}

/// The `seed` option and the check of known names, then `from_items_with`.
macro_rules! configure_build {
    ($module:ident, |$o:ident, $opts:ident| $body:block) => {
        fn build_with<I, K>(items: I, value_bits: u32, $opts: &Opts) -> Result<Self>
        where
            I: IntoIterator<Item = (K, u64)>,
            K: AsRef<[u8]>,
        {
            $opts.check_known(Self::NAME, Self::OPTIONS)?;
            let mut $o = crate::$module::Options::default();
            $o.seed = $opts.u64("seed", $o.seed)?;
            $body
            Self::from_items_with(items, value_bits, $o)
        }
    };
}

mod othello_impl {
    use super::*;
    use crate::othello::{Control, KeyHash, Lookup, Options, Sizing};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            match (self.fingerprint_bits(), self.has_emptiness()) {
                (0, false) => AbsentKeys::Undetected,
                (f, e) => AbsentKeys::Filtered { fingerprint_bits: f, emptiness: e },
            }
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            let (ma, mb) = self.sizes();
            vec![
                ("fingerprint_bits", self.fingerprint_bits().to_string()),
                ("emptiness", self.has_emptiness().to_string()),
                ("m_a", ma.to_string()),
                ("m_b", mb.to_string()),
                ("seed", format!("{:#x}", self.seed())),
            ]
        }
        fn capacity(&self) -> Option<usize> {
            // Compact sizing makes m_b the capacity; power-of-two sizing rounds it up.
            Some(self.sizes().1 as usize)
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "othello";
        const SUMMARY: &'static str =
            "Othello hashing / Concise FIB: two XOR-ed arrays, no keys, ~2.33·l bits/key (thesis §2.3, §3.4.3 OFW)";
        const OPTIONS: &'static [(&'static str, &'static str)] = &[
            ("sizing", "compact (m_a=1.33n, m_b=n) or pow2 (power-of-two arrays, the paper's sizes)"),
            ("fingerprint_bits", "0..32 fingerprint bits per slot; alien keys pass with probability 2^-f"),
            ("emptiness", "true/false: store the OFW emptiness bit per slot"),
            ("filtered", "F: shorthand for fingerprint_bits=F,emptiness=true"),
            ("headroom_percent", "extra capacity reserved by bulk construction, in percent (default 1)"),
            ("hash", "mum8 (default: 8-byte keys by a two-multiply hash, others XXH3) or xxh3 (every key XXH3)"),
            ("seed", SEED_HELP),
        ];
        configure_build!(othello, |o, opts| {
            if opts.get("filtered").is_some() {
                let f = opts.u32("filtered", 0)?;
                o = Options { seed: o.seed, ..Options::filtered(f) };
            }
            o.sizing = opts.choice(
                "sizing",
                o.sizing,
                &[("compact", Sizing::Compact), ("pow2", Sizing::PowerOfTwo), ("power_of_two", Sizing::PowerOfTwo)],
            )?;
            o.fingerprint_bits = opts.u32("fingerprint_bits", o.fingerprint_bits)?;
            o.emptiness = opts.bool("emptiness", o.emptiness)?;
            o.headroom_percent = opts.u32("headroom_percent", o.headroom_percent)?;
            o.hash = opts.choice("hash", o.hash, &[("mum8", KeyHash::Mum8), ("xxh3", KeyHash::Xxh3)])?;
        });
    }
}

mod ludo_impl {
    use super::*;
    use crate::ludo::{Control, Lookup};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            match self.fingerprint_bits() {
                0 => AbsentKeys::Undetected,
                f => AbsentKeys::Filtered { fingerprint_bits: f, emptiness: false },
            }
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            vec![
                ("fingerprint_bits", self.fingerprint_bits().to_string()),
                ("buckets", self.buckets().to_string()),
                ("overflow_entries", self.overflow_len().to_string()),
                ("fallback_entries", self.fallback_len().to_string()),
                ("seed", format!("{:#x}", self.seed())),
            ]
        }
        fn capacity(&self) -> Option<usize> {
            Some(self.buckets() as usize * 4)
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "ludo";
        const SUMMARY: &'static str = "Ludo hashing: (3.76 + 1.05·l) bits/key, dynamic, values only (thesis ch. 4)";
        const OPTIONS: &'static [(&'static str, &'static str)] = &[
            (
                "fingerprint_bits",
                "0..32 fingerprint bits stored beside each value (absent keys read None but for 2^-f)",
            ),
            ("max_load_permille", "target load of the 4-slot buckets, in permille (default 950)"),
            ("max_cuckoo_path", "longest cuckoo path an insert may take before a rebuild"),
            ("avoid_overflow", "true/false: size the bucket-seed overflow table to avoid overflow"),
            ("seed", SEED_HELP),
        ];
        configure_build!(ludo, |o, opts| {
            o.fingerprint_bits = opts.u32("fingerprint_bits", o.fingerprint_bits)?;
            o.max_load_permille = opts.u32("max_load_permille", o.max_load_permille)?;
            o.max_cuckoo_path = opts.u32("max_cuckoo_path", o.max_cuckoo_path)?;
            o.avoid_overflow = opts.bool("avoid_overflow", o.avoid_overflow)?;
        });
    }
}

mod setsep_impl {
    use super::*;
    use crate::setsep::{Control, Lookup};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            AbsentKeys::Undetected
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            let (x, y) = self.config();
            let (fb_keys, _) = self.fallback_size();
            vec![
                ("index_bits", x.to_string()),
                ("array_bits", y.to_string()),
                ("blocks", self.blocks().to_string()),
                ("fallback_entries", fb_keys.to_string()),
                ("seed", format!("{:#x}", self.seed())),
            ]
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "setsep";
        const SUMMARY: &'static str =
            "SetSep: 0.5 + 1.5·l bits/key, static-friendly, group-local updates (ScaleBricks §4)";
        const OPTIONS: &'static [(&'static str, &'static str)] = &[
            ("index_bits", "x: hash-index bits per value bit (default 16)"),
            ("array_bits", "y: array bits per value bit (default 8)"),
            ("threads", "construction threads (default 1)"),
            ("balance_runs", "bucket-to-group balancing runs"),
            ("group_limit", "largest group a search may take"),
            ("seed", SEED_HELP),
        ];
        configure_build!(setsep, |o, opts| {
            o.index_bits = opts.u32("index_bits", o.index_bits)?;
            o.array_bits = opts.u32("array_bits", o.array_bits)?;
            o.threads = opts.u64("threads", o.threads as u64)? as usize;
            o.balance_runs = opts.u32("balance_runs", o.balance_runs)?;
            o.group_limit = opts.u32("group_limit", o.group_limit)?;
        });
    }
}

mod cuckoo_impl {
    use super::*;
    use crate::cuckoo::{Control, Lookup, ValueLayout};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            AbsentKeys::Exact
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            vec![
                ("buckets", self.buckets().to_string()),
                ("stash_entries", self.stash_len().to_string()),
                ("values", if self.separate_values() { "separate" } else { "interleaved" }.to_string()),
            ]
        }
        fn key_count(&self) -> Option<usize> {
            Some(self.len())
        }
        fn capacity(&self) -> Option<usize> {
            Some(self.buckets() * 4)
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "cuckoo";
        const SUMMARY: &'static str =
            "Concurrent (2,4) cuckoo hash with full keys: exact, one writer and lock-free readers (CuckooSwitch)";
        const OPTIONS: &'static [(&'static str, &'static str)] = &[
            ("values", "auto, interleaved (values beside keys) or separate (a value array)"),
            (
                "build_load",
                "bulk-build fill in percent, 50..=97 (default: 90 for four-slot buckets, 93 for the fixed-width layouts, leaving room for updates before a growth; 97 builds dense tables)",
            ),
            ("seed", SEED_HELP),
        ];
        configure_build!(cuckoo, |o, opts| {
            if opts.get("build_load").is_some() {
                o.build_load_percent = Some(opts.u32("build_load", 0)?);
            }
            o.values = opts.choice(
                "values",
                o.values,
                &[
                    ("auto", ValueLayout::Auto),
                    ("interleaved", ValueLayout::Interleaved),
                    ("separate", ValueLayout::Separate),
                ],
            )?;
        });
    }
}

mod partial_impl {
    use super::*;
    use crate::cuckoo::partial::{Control, Lookup};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            AbsentKeys::Filtered { fingerprint_bits: self.fingerprint_bits(), emptiness: false }
        }
        fn exact_for_stored_keys(&self) -> bool {
            false
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            vec![("fingerprint_bits", self.fingerprint_bits().to_string()), ("buckets", self.buckets().to_string())]
        }
        fn capacity(&self) -> Option<usize> {
            Some(self.buckets() * 4)
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "cuckoo-partial";
        const SUMMARY: &'static str =
            "Partial-key cuckoo: fingerprints + values, may mis-answer colliding valid keys (SILT/MemC3)";
        const OPTIONS: &'static [(&'static str, &'static str)] =
            &[("fingerprint_bits", "fingerprint bits per slot (default 16)"), ("seed", SEED_HELP)];
        fn build_with<I, K>(items: I, value_bits: u32, opts: &Opts) -> Result<Self>
        where
            I: IntoIterator<Item = (K, u64)>,
            K: AsRef<[u8]>,
        {
            opts.check_known(Self::NAME, Self::OPTIONS)?;
            let mut o = crate::cuckoo::partial::Options::default();
            o.seed = opts.u64("seed", o.seed)?;
            o.fingerprint_bits = opts.u32("fingerprint_bits", o.fingerprint_bits)?;
            Self::from_items_with(items, value_bits, o)
        }
    }
}

mod cfw_impl {
    use super::*;
    use crate::cfw::{Control, Lookup};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            AbsentKeys::Filtered { fingerprint_bits: self.fingerprint_bits(), emptiness: false }
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            vec![
                ("fingerprint_bits", self.fingerprint_bits().to_string()),
                ("buckets", self.buckets().to_string()),
                ("level1_entries", self.level1_len().to_string()),
                ("level2_entries", self.level2_len().to_string()),
                ("seed", format!("{:#x}", self.seed())),
            ]
        }
        fn key_count(&self) -> Option<usize> {
            Some(self.level1_len() + self.level2_len())
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "cfw";
        const SUMMARY: &'static str = "Cuckoo Filtable forwarder: fingerprints + values, colliding keys in level 2, exact for valid keys (thesis §3.4.2)";
        const OPTIONS: &'static [(&'static str, &'static str)] =
            &[("fingerprint_bits", "fingerprint bits per slot"), ("seed", SEED_HELP)];
        configure_build!(cfw, |o, opts| {
            o.fingerprint_bits = opts.u32("fingerprint_bits", o.fingerprint_bits)?;
        });
    }
}

mod bfw_impl {
    use super::*;
    use crate::bfw::{Control, Lookup};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            AbsentKeys::Bloom { hashes: self.hashes() }
        }
        fn exact_for_stored_keys(&self) -> bool {
            false
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            let r = self.rates();
            vec![
                ("hashes", self.hashes().to_string()),
                ("ports", r.ports.to_string()),
                ("filter_false_match", format!("{:.3e}", r.filter_false_match)),
            ]
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "bfw";
        const SUMMARY: &'static str =
            "Bloom-filter forwarder baseline: one Bloom filter per value, may mis-answer valid keys (thesis §3.4.1)";
        const OPTIONS: &'static [(&'static str, &'static str)] =
            &[("hashes", "hash functions per Bloom filter"), ("seed", SEED_HELP)];
        configure_build!(bfw, |o, opts| {
            o.hashes = opts.u32("hashes", o.hashes)?;
        });
    }
}

mod fht_impl {
    use super::*;
    use crate::fht::{Control, Lookup, LookupOrder};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            AbsentKeys::Filtered { fingerprint_bits: self.fingerprint_bits(), emptiness: false }
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            let (d, b, e) = self.shape();
            vec![
                ("fingerprint_bits", self.fingerprint_bits().to_string()),
                ("subtables", d.to_string()),
                ("buckets_per_subtable", b.to_string()),
                ("bucket_entries", e.to_string()),
                ("collision_table_entries", self.collision_table_entries().to_string()),
                ("order", format!("{:?}", self.order())),
            ]
        }
        fn capacity(&self) -> Option<usize> {
            let (d, b, e) = self.shape();
            Some(d as usize * b as usize * e as usize)
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "fht";
        const SUMMARY: &'static str =
            "Fingerprint d-left hash table for names with a collision table: exact for stored names (FHT §5)";
        const OPTIONS: &'static [(&'static str, &'static str)] = &[
            ("fingerprint_bits", "fingerprint bits per entry (default 16)"),
            ("subtables", "d: subtables (d-left)"),
            ("bucket_entries", "entries per bucket"),
            ("capacity", "names to size the table for (0 = from the key count)"),
            ("order", "ct-first (collision table first, the paper's) or main-first"),
            ("seed", SEED_HELP),
        ];
        configure_build!(fht, |o, opts| {
            o.fingerprint_bits = opts.u32("fingerprint_bits", o.fingerprint_bits)?;
            o.subtables = opts.u32("subtables", o.subtables)?;
            o.bucket_entries = opts.u32("bucket_entries", o.bucket_entries)?;
            o.capacity = opts.u64("capacity", o.capacity as u64)? as usize;
            o.order = opts.choice(
                "order",
                o.order,
                &[("ct-first", LookupOrder::CollisionTableFirst), ("main-first", LookupOrder::MainFirst)],
            )?;
        });
    }
}

mod fpt_impl {
    use super::*;
    use crate::fpt::{Control, Lookup};

    impl Describe for Lookup {
        describe_basics!();
        fn absent_keys(&self) -> AbsentKeys {
            match self.check_bits() {
                0 => AbsentKeys::Undetected,
                c => AbsentKeys::Filtered { fingerprint_bits: c, emptiness: false },
            }
        }
        fn params(&self) -> Vec<(&'static str, String)> {
            vec![
                ("fingerprint_bits", self.fingerprint_bits().to_string()),
                ("check_bits", self.check_bits().to_string()),
                ("node_capacity", self.node_capacity().to_string()),
            ]
        }
    }

    impl Configure for Control {
        const NAME: &'static str = "fpt";
        const SUMMARY: &'static str = "Fingerprint Patricia trie for names: speculative, bit positions only (FPT §4)";
        const OPTIONS: &'static [(&'static str, &'static str)] = &[
            ("fingerprint_bits", "fingerprint bits prepended to names (default 20)"),
            ("check_bits", "check bits per leaf: absent names read None but for 2^-c (default 0)"),
            ("seed", SEED_HELP),
        ];
        configure_build!(fpt, |o, opts| {
            o.fingerprint_bits = opts.u32("fingerprint_bits", o.fingerprint_bits)?;
            o.check_bits = opts.u32("check_bits", o.check_bits)?;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_typed_values() {
        let o = Opts::parse("fingerprint-bits=8, emptiness=true, sizing=pow2").unwrap();
        assert_eq!(o.u64("fingerprint_bits", 0).unwrap(), 8);
        assert_eq!(o.u32("absent", 3).unwrap(), 3);
        assert!(o.bool("emptiness", false).unwrap());
        assert_eq!(o.choice("sizing", 0, &[("compact", 1), ("pow2", 2)]).unwrap(), 2);
        assert!(o.choice("sizing", 0, &[("compact", 1)]).is_err());
        assert!(Opts::parse("a=zz").unwrap().u64("a", 0).is_err());
        assert!(Opts::parse("a=maybe").unwrap().bool("a", false).is_err());
    }
}
