//! `query --lpm` for the name tables FHT and FPT: component-wise longest
//! prefix over exact lookups. `/com/example/www/x` tries
//! `/com/example/www/x`, then `/com/example/www`, `/com/example`, `/com`
//! and answers with the value of the first prefix the table reports as
//! stored. Keys are names in the `--key-format name` encoding.
//!
//! What the answer guarantees follows the fingerprint-name-forwarding paper
//! (Yuan, Crowley, Song, ANCS 2017): neither lookup form stores names, so a
//! prefix that was never stored is told apart only by fingerprints.
//!
//! * **Stored names** answer their own value (the first probe is the name
//!   itself, and both structures are exact for stored names: FHT's
//!   collision table, FPT's own leaf).
//! * **A name with a stored proper prefix** answers the value of its
//!   longest stored prefix unless one of the `j` longer, unstored prefixes
//!   probed before it is a fingerprint false positive: probability at most
//!   `j · ε`, with `ε` the per-probe rate (FHT: `≈ load·d·E / 2^w` for `w`
//!   fingerprint bits over `d` candidate buckets of `E` entries,
//!   `fht::Control::expected_alien_match_rate`; FPT: `2^-c` for `c` check bits, §6.1).
//! * **A name with no stored prefix** answers `-`, except with probability
//!   at most `k · ε` for its `k` prefixes, when it answers some stored
//!   name's value — the false positive the paper leaves to edge routers,
//!   which hold full names (§2.2, §5.1).
//!
//! FPT without check bits (`check_bits = 0`, the plain speculative trie)
//! answers *every* probe, so the whole name would always "match": `--lpm`
//! is refused there with a hint to rebuild with `-O check_bits=C`.

use crate::CliError;
use keyplane::describe::AbsentKeys;
use keyplane_any::{AnyLookup, AnyReader};

/// Structures `--lpm` applies to (names with `/`-separated components).
pub const NAME_STRUCTURES: &[&str] = &["fht", "fpt"];

/// Refuses `--lpm` on tables that are not name tables, and on FPT tables
/// without check bits (exit 2).
pub fn check(table: &AnyLookup, blob: &str) -> Result<(), CliError> {
    if table.name() == "fpt" && !matches!(table.absent_keys(), AbsentKeys::Filtered { .. }) {
        return Err(CliError::usage(&format!(
            "{blob}: --lpm on an fpt table needs check bits: without them the speculative trie answers every \
             name, so every name would match itself; rebuild with -O check_bits=16 (a 2^-16 false-positive \
             rate per probed prefix)"
        )));
    }
    if NAME_STRUCTURES.contains(&table.name()) {
        return Ok(());
    }
    Err(CliError::usage(&format!(
        "{blob}: --lpm needs a name table ({}; build with -s fht --key-format name, or -s fpt -O check_bits=16) \
         or an IP prefix table (build -s lpm), this is {}",
        NAME_STRUCTURES.join(", "),
        table.name(),
    )))
}

/// The value of the longest prefix of `key` (whole components) the table
/// reports as stored.
pub fn get(reader: &AnyReader<'_>, key: &[u8]) -> Option<u64> {
    let ends: Vec<usize> = keyplane::name::prefixes(key).map(<[u8]>::len).collect();
    ends.iter().rev().find_map(|&e| reader.get(&key[..e]))
}

#[cfg(test)]
mod tests {
    use keyplane_any::{AnyControl, Opts};
    use std::collections::BTreeMap;

    fn n(s: &str) -> Vec<u8> {
        keyplane::key::name_key(s).unwrap()
    }

    /// The oracle: the value of the longest stored component prefix.
    fn oracle(stored: &BTreeMap<Vec<u8>, u64>, key: &[u8]) -> Option<u64> {
        let ends: Vec<usize> = keyplane::name::prefixes(key).map(<[u8]>::len).collect();
        ends.iter().rev().find_map(|&e| stored.get(&key[..e]).copied())
    }

    #[test]
    fn longest_stored_prefix_wins() {
        let items = [(n("/com"), 1u64), (n("/com/example/www"), 3), (n("/org/x"), 4)];
        for (s, opts) in [("fht", ""), ("fpt", "check_bits=20")] {
            let ctl = AnyControl::build(s, items.iter().map(|(k, v)| (k, *v)), 8, &Opts::parse(opts).unwrap()).unwrap();
            let t = ctl.export();
            let r = t.reader();
            assert_eq!(super::get(&r, &n("/com/example/www/x/y")), Some(3), "{s}");
            assert_eq!(super::get(&r, &n("/com/example/www")), Some(3), "{s}");
            assert_eq!(super::get(&r, &n("/com/example/mail")), Some(1), "{s}");
            assert_eq!(super::get(&r, &n("/org/x/y")), Some(4), "{s}");
            assert_eq!(super::get(&r, &n("/net/y")), None, "{s}");
        }
    }

    /// FPT with check bits against a BTreeMap oracle: stored names exact;
    /// names under a stored prefix and names with none within the paper's
    /// false-positive bound.
    #[test]
    fn fpt_lpm_matches_a_btreemap_oracle() {
        let mut stored = BTreeMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for i in 0..3000u64 {
            let depth = 1 + rnd(4);
            let name: String = (0..depth).map(|d| format!("/c{}", rnd(if d == 0 { 20 } else { 30 }))).collect();
            stored.insert(n(&name), i % 256);
        }
        for c in [8u32, 16] {
            let opts = Opts::parse(&format!("check_bits={c},seed=7")).unwrap();
            let ctl = AnyControl::build("fpt", stored.iter().map(|(k, v)| (k, *v)), 8, &opts).unwrap();
            let t = ctl.export();
            let r = t.reader();
            // Stored names: exact, always.
            for (k, v) in &stored {
                assert_eq!(super::get(&r, k), Some(*v), "c={c}");
            }
            // Longer names (extensions of stored ones and of aliens).
            let (mut under, mut under_wrong, mut probes_under) = (0u64, 0u64, 0u64);
            let (mut none, mut none_fp, mut probes_none) = (0u64, 0u64, 0u64);
            for i in 0..4000u64 {
                let base = if i % 2 == 0 {
                    String::from_utf8(stored.keys().nth(rnd(stored.len() as u64) as usize).unwrap().clone()).unwrap()
                } else {
                    format!("/alien{i}")
                };
                let q = n(&format!("{base}/x{i}/y{}", rnd(9)));
                let want = oracle(&stored, &q);
                let got = super::get(&r, &q);
                let comps = keyplane::name::prefixes(&q).count() as u64;
                match want {
                    Some(w) => {
                        under += 1;
                        // Probes before the longest stored prefix: the unstored longer ones.
                        let longest = keyplane::name::prefixes(&q)
                            .filter(|p| stored.contains_key(*p))
                            .map(<[u8]>::len)
                            .max()
                            .unwrap();
                        probes_under += keyplane::name::prefixes(&q).filter(|p| p.len() > longest).count() as u64;
                        under_wrong += (got != Some(w)) as u64;
                    }
                    None => {
                        none += 1;
                        probes_none += comps;
                        none_fp += got.is_some() as u64;
                    }
                }
            }
            let eps = (-(c as f64)).exp2();
            // Bounds: the expected count j·ε summed over queries, plus 5σ and one.
            let bound = |probes: u64| {
                let m = probes as f64 * eps;
                m + 5.0 * m.sqrt() + 1.0
            };
            assert!(under > 1000 && none > 1000, "{under} {none}");
            assert!((under_wrong as f64) <= bound(probes_under), "c={c}: {under_wrong} wrong of {under}");
            assert!((none_fp as f64) <= bound(probes_none), "c={c}: {none_fp} false positives of {none}");
            if c == 8 {
                // Measurable at c = 8: false positives occur, near k·2^-c per query.
                let expect = probes_none as f64 * eps;
                assert!((none_fp as f64) >= expect - 5.0 * expect.sqrt(), "{none_fp} < {expect}");
            }
        }
    }
}
