//! Reproducible key and value sets for keyplane tables and benchmarks.
//!
//! * [`gen_keys`]: `n` distinct keys of a [`KeyType`] (u64, MAC, IPv4, IPv6,
//!   IPv4 5-tuple, hierarchical name), in one [`KeySet`] buffer; a `salt`
//!   selects disjoint sets (keys never inserted, fresh keys for updates).
//! * [`gen_values`]: values of a given width; [`gen_names`]: names in the
//!   canonical form of `keyplane::name`.
//! * [`stream`] / [`zipf_stream`]: query streams drawn uniformly or with
//!   Zipf popularity, laid out contiguously as packets arrive.
//! * [`parse_num`]: counts as people write them (`64K`, `1M`, `1Mi`, `1e6`).
//!
//! Everything is a pure function of its arguments: the same call gives the
//! same keys on every machine. The `keyplane` command (`build --generate`,
//! `demo`) and the benchmark suite (`keyplane-perf`) share these sets.
//!
//! ```
//! use keyplane_keygen::{KeyType, gen_keys, gen_values, parse_num};
//! let n = parse_num("1K").unwrap() as usize;
//! let keys = gen_keys(KeyType::Ipv4, n, 1);
//! let vals = gen_values(n, 8, 3);
//! assert_eq!((keys.len(), keys.get(0).len()), (1000, 4));
//! assert!(vals.iter().all(|&v| v < 256));
//! // Another salt, another (disjoint) set.
//! let other = gen_keys(KeyType::Ipv4, n, 2);
//! assert!(other.iter().all(|k| !keys.iter().any(|j| j == k)));
//! ```

/// What was wrong with an argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `KeyType::parse` was given an unknown name.
    #[error("unknown key type {0:?}: expected u64, mac, ipv4, ipv6, fivetuple or name")]
    UnknownKeyType(String),
}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}

impl std::str::FromStr for KeyType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::parse(s)
    }
}

/// Parses a count: `123`, `1e6`, `1.5M`, with decimal suffixes `K` (10^3),
/// `M` (10^6), `G` (10^9), `T` (10^12) and binary ones `Ki`, `Mi`, `Gi`,
/// `Ti` (2^10 ...), case-insensitive; `20M` = 20,000,000, `20Mi` =
/// 20,971,520. `None` for anything else, negative numbers and counts that do
/// not fit in 64 bits.
pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    let lower = s.to_ascii_lowercase();
    let suffixes: [(&str, u64); 8] = [
        ("ki", 1 << 10),
        ("mi", 1 << 20),
        ("gi", 1 << 30),
        ("ti", 1 << 40),
        ("k", 1_000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("t", 1_000_000_000_000),
    ];
    let (num, mul) = suffixes
        .iter()
        .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.to_string(), *m)))
        .unwrap_or((lower.clone(), 1));
    if num.is_empty() || num.starts_with('-') || num.starts_with('+') {
        return None;
    }
    if let Ok(v) = num.parse::<u64>() {
        return v.checked_mul(mul);
    }
    let f = num.parse::<f64>().ok()?;
    let x = f * mul as f64;
    // 2^64 is the first float that does not fit.
    ((0.0..18_446_744_073_709_551_616.0).contains(&x) && x.fract() == 0.0).then_some(x as u64)
}

/// Key shapes the benchmarks generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// 8-byte integers.
    U64,
    /// 6-byte MAC addresses.
    Mac,
    /// 4-byte IPv4 addresses.
    Ipv4,
    /// 16-byte IPv6 addresses.
    Ipv6,
    /// 13-byte IPv4 5-tuples.
    FiveTuple,
    /// Hierarchical names `/a/b/c`, 10–60 bytes.
    Name,
}

impl KeyType {
    /// Parses a `--key-type` value (`5tuple` is accepted for `fivetuple`).
    pub fn parse(s: &str) -> Result<Self, Error> {
        Ok(match s {
            "u64" => Self::U64,
            "mac" => Self::Mac,
            "ipv4" => Self::Ipv4,
            "ipv6" => Self::Ipv6,
            "fivetuple" | "5tuple" => Self::FiveTuple,
            "name" => Self::Name,
            _ => return Err(Error::UnknownKeyType(s.to_string())),
        })
    }
    /// Label used in JSON.
    pub fn label(self) -> &'static str {
        match self {
            Self::U64 => "u64",
            Self::Mac => "mac",
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
            Self::FiveTuple => "fivetuple",
            Self::Name => "name",
        }
    }
}

/// Many keys in one buffer (no allocation per key).
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    data: Vec<u8>,
    offs: Vec<u64>,
}

impl KeySet {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.offs.len().saturating_sub(1)
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Key `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        &self.data[self.offs[i] as usize..self.offs[i + 1] as usize]
    }
    /// Iterator over keys.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
    /// Appends a key.
    pub fn push(&mut self, k: &[u8]) {
        if self.offs.is_empty() {
            self.offs.push(0);
        }
        self.data.extend_from_slice(k);
        self.offs.push(self.data.len() as u64);
    }
    /// Total key bytes.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }
}

/// splitmix64, for reproducible key sets.
pub fn mix(x: u64) -> u64 {
    keyplane::hash::mix64(x)
}

/// `n` distinct keys of type `kt`; `salt` selects disjoint key sets (use a
/// different salt for alien keys).
pub fn gen_keys(kt: KeyType, n: usize, salt: u64) -> KeySet {
    let mut ks = KeySet { data: Vec::with_capacity(n * 16), offs: Vec::with_capacity(n + 1) };
    ks.offs.push(0);
    // Distinct by construction: a bijective mix of a counter, truncated where
    // the key type is shorter than 8 bytes only over ranges that stay unique.
    let words = |i: u64| mix(i ^ (salt << 40));
    let mut seen: hashbrown::HashSet<u64> = hashbrown::HashSet::new();
    let short = matches!(kt, KeyType::Ipv4 | KeyType::Mac);
    let mut i = 0u64;
    while ks.len() < n {
        let x = words(i);
        i += 1;
        match kt {
            KeyType::U64 => ks.push(&x.to_le_bytes()),
            KeyType::Mac => {
                if seen.insert(x & 0xffff_ffff_ffff) {
                    ks.push(&x.to_le_bytes()[..6])
                }
            }
            KeyType::Ipv4 => {
                if seen.insert(x & 0xffff_ffff) {
                    ks.push(&x.to_le_bytes()[..4])
                }
            }
            KeyType::Ipv6 => {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&x.to_le_bytes());
                k[8..].copy_from_slice(&mix(x).to_le_bytes());
                ks.push(&k);
            }
            KeyType::FiveTuple => {
                let y = mix(x);
                let mut k = [0u8; 13];
                k[..8].copy_from_slice(&x.to_le_bytes());
                k[8..12].copy_from_slice(&y.to_le_bytes()[..4]);
                k[12] = if y >> 63 == 0 { 6 } else { 17 };
                ks.push(&k);
            }
            KeyType::Name => {
                let mut s = String::with_capacity(64);
                let mut y = x;
                let depth = 2 + (y % 5) as usize;
                for d in 0..depth {
                    y = mix(y.wrapping_add(d as u64));
                    s.push('/');
                    let len = 2 + (y % 10) as usize;
                    for c in 0..len {
                        s.push((b'a' + ((y >> (c * 5)) % 26) as u8) as char);
                    }
                }
                // Uniqueness suffix keeps the set exact.
                s.push_str(&format!("/{:x}", i));
                ks.push(s.as_bytes());
            }
        }
        if short && seen.len() > n * 2 {
            seen.clear();
        }
    }
    if short {
        // Re-check exactness for short keys (the set may have been cleared above).
        let mut all: hashbrown::HashSet<&[u8]> = hashbrown::HashSet::with_capacity(n);
        for k in ks.iter() {
            assert!(all.insert(k), "duplicate key generated");
        }
    }
    ks
}

/// Values for `n` keys of `bits` bits.
pub fn gen_values(n: usize, bits: u32, salt: u64) -> Vec<u64> {
    let m = keyplane::mask(bits);
    (0..n as u64).map(|i| mix(i ^ salt.rotate_left(17)) & m).collect()
}

/// A random permutation sample of `0..n` of length `len` (lookup order).
pub fn sample_indices(n: usize, len: usize, salt: u64) -> Vec<u32> {
    (0..len as u64).map(|i| keyplane::hash::reduce64(mix(i ^ salt), n as u64) as u32).collect()
}

/// `len` keys drawn uniformly from `keys`, copied into one contiguous stream.
pub fn stream(keys: &KeySet, len: usize, salt: u64) -> KeySet {
    let mut s = KeySet::default();
    if keys.is_empty() {
        return s;
    }
    for i in sample_indices(keys.len(), len, salt) {
        s.push(keys.get(i as usize));
    }
    s
}

/// `len` keys drawn from `keys` with Zipf(`s`) popularity: rank r (1-based)
/// has probability ∝ 1/r^s, ranks are mapped to keys by a fixed random
/// permutation (a hash), so popular keys are spread over the table. Ranks are
/// drawn by inverting the continuous approximation of the Zipf CDF.
pub fn zipf_stream(keys: &KeySet, len: usize, s: f64, salt: u64) -> KeySet {
    let mut out = KeySet::default();
    let n = keys.len();
    if n == 0 {
        return out;
    }
    let nf = n as f64;
    for i in 0..len as u64 {
        let u = (mix(i ^ salt.rotate_left(29)) >> 11) as f64 / (1u64 << 53) as f64;
        let x = if (s - 1.0).abs() < 1e-9 {
            (nf + 1.0).powf(u) - 1.0
        } else {
            let e = 1.0 - s;
            (((nf + 1.0).powf(e) - 1.0) * u + 1.0).powf(1.0 / e) - 1.0
        };
        let rank = (x as u64).min(n as u64 - 1);
        let idx = keyplane::hash::reduce64(mix(rank ^ salt.rotate_left(47)), n as u64) as usize;
        out.push(keys.get(idx));
    }
    out
}

/// `n` distinct generated hierarchical names `/tld/label-id[/sub[/sub]]`
/// (`keyplane::name::generate`); `salt` selects disjoint sets.
pub fn gen_names(n: usize, salt: u64) -> KeySet {
    let mut ks = KeySet::default();
    for i in 0..n as u64 {
        ks.push(&keyplane::name::generate(i + (salt << 40), (i % 3) as usize, 1));
    }
    ks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_like_people_write_them() {
        for (s, v) in [
            ("123", 123),
            ("64K", 64_000),
            ("1M", 1_000_000),
            ("1Mi", 1 << 20),
            ("1e6", 1_000_000),
            ("1.5k", 1500),
            ("1_000", 1000),
        ] {
            assert_eq!(parse_num(s), Some(v), "{s}");
        }
        for s in ["", "-5", "+5", "1.5", "x", "99999999999999999999", "20000000T", "1e30"] {
            assert_eq!(parse_num(s), None, "{s}");
        }
    }

    #[test]
    fn key_sets_are_distinct_sized_and_reproducible() {
        for kt in [KeyType::U64, KeyType::Mac, KeyType::Ipv4, KeyType::Ipv6, KeyType::FiveTuple, KeyType::Name] {
            let a = gen_keys(kt, 5000, 1);
            assert_eq!(a.len(), 5000);
            let set: hashbrown::HashSet<&[u8]> = a.iter().collect();
            assert_eq!(set.len(), 5000, "{kt:?}");
            let want = match kt {
                KeyType::U64 => Some(8),
                KeyType::Mac => Some(6),
                KeyType::Ipv4 => Some(4),
                KeyType::Ipv6 => Some(16),
                KeyType::FiveTuple => Some(13),
                KeyType::Name => None,
            };
            assert!(a.iter().all(|k| want.is_none_or(|w| k.len() == w)), "{kt:?}");
            let b = gen_keys(kt, 5000, 1);
            assert!(a.iter().eq(b.iter()));
            assert_eq!(KeyType::parse(kt.label()), Ok(kt));
            let alien = gen_keys(kt, 5000, 2);
            assert!(alien.iter().all(|k| !set.contains(k)), "{kt:?}: salts overlap");
        }
        assert_eq!("5tuple".parse::<KeyType>(), Ok(KeyType::FiveTuple));
        assert!(KeyType::parse("ipv5").unwrap_err().to_string().contains("ipv5"));
    }

    #[test]
    fn values_fit_their_width_and_streams_draw_from_the_set() {
        assert!(gen_values(1000, 3, 1).iter().all(|&v| v < 8));
        assert!(gen_values(1000, 64, 1).iter().any(|&v| v > u32::MAX as u64));
        let keys = gen_keys(KeyType::U64, 100, 1);
        let set: hashbrown::HashSet<&[u8]> = keys.iter().collect();
        let s = stream(&keys, 1000, 4);
        let z = zipf_stream(&keys, 1000, 1.0, 4);
        assert_eq!((s.len(), z.len()), (1000, 1000));
        assert!(s.iter().chain(z.iter()).all(|k| set.contains(k)));
        // Zipf: the most popular key is drawn far more often than 1/100.
        let mut counts = hashbrown::HashMap::new();
        z.iter().for_each(|k| *counts.entry(k).or_insert(0) += 1);
        assert!(*counts.values().max().unwrap() > 50);
        assert!(stream(&KeySet::default(), 10, 1).is_empty());
        let names = gen_names(100, 0);
        assert!(names.iter().all(|n| n.starts_with(b"/")));
    }
}
