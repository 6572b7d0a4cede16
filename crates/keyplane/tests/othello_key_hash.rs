//! `othello::KeyHash::Mum8` (the two-multiply hash of 8-byte keys) on
//! structured key sets — sequential integers, integers differing in high
//! bits, IPv4 addresses of one /16 (/12 beyond 64K), MACs of one OUI (as
//! integers and as their six bytes), keys one or two bits apart, strided
//! keys: tables build with about as many rejected seeds as XXH3's and as
//! a random graph's (a structured hash, such as one multiply by a constant,
//! makes almost every seed's graph cyclic), every key reads its value on
//! every path, and keys inserted one by one force about as few cycle
//! rebuilds as with XXH3.

use keyplane::key::u64_key;
use keyplane::othello::{Control, KeyHash, Options};
use keyplane::{ControlTable, LookupTable, ReadHandle};

/// The structured key sets of `n` distinct 8-byte keys (as `u64`s).
fn sets(n: u64) -> Vec<(&'static str, Vec<u64>)> {
    let ipv4_net: u64 = if n <= 1 << 16 { 0x0a01_0000 } else { 0x0a10_0000 };
    let mut bits: Vec<u64> = (0..64u64)
        .flat_map(|a| (a..64).map(move |b| 0x5eed_f00d_1234_5678u64 ^ (1u64 << a) ^ (1u64 << b)))
        .chain((0..64).map(|a| 0x5eed_f00d_1234_5678u64 ^ (1u64 << a)))
        .collect();
    bits.sort_unstable();
    bits.dedup();
    bits.truncate(n as usize);
    vec![
        ("sequential", (0..n).collect()),
        ("high bits", (0..n).map(|i| i << 40).collect()),
        ("ipv4 one net", (0..n).map(|i| ipv4_net | i).collect()),
        ("ipv4 one net, network order", (0..n).map(|i| ((ipv4_net | i) as u32).swap_bytes() as u64).collect()),
        ("macs of one oui", (0..n).map(|i| 0x001b_2100_0000 | i).collect()),
        (
            "mac bytes of one oui",
            (0..n)
                .map(|i| {
                    let m = (0x001b_2100_0000u64 | i).to_be_bytes();
                    u64::from_le_bytes([m[2], m[3], m[4], m[5], m[6], m[7], 0, 0])
                })
                .collect(),
        ),
        ("one or two bits apart", bits),
        ("stride 4096", (0..n).map(|i| i << 12).collect()),
    ]
}

/// Seeds rejected while building tables of `keys` under `builds` seeds,
/// after checking that every key reads its value (`get_u64`, `get`, a
/// reader).
fn failed_seeds(keys: &[u64], hash: KeyHash, builds: u64) -> u64 {
    let mut failed = 0;
    for s in 0..builds {
        let opts = Options { seed: 0x51ed ^ s << 20, hash, ..Options::default() };
        let items = keys.iter().map(|&k| (u64_key(k), k.rotate_left(7) & 0xff));
        let ctl = Control::from_items_with(items, 8, opts).unwrap();
        assert_eq!(ctl.key_hash(), hash);
        let t = ctl.export();
        let rd = t.reader();
        for &k in keys {
            let v = Some(k.rotate_left(7) & 0xff);
            assert_eq!(t.get_u64(k), v);
            assert_eq!(rd.get_u64(k), v);
            assert_eq!(t.get(&u64_key(k)), v);
        }
        failed += ctl.stats().failed_seeds;
    }
    failed
}

fn check_builds(n: u64, builds: u64) {
    for (name, keys) in sets(n) {
        let mum = failed_seeds(&keys, KeyHash::Mum8, builds);
        let xxh3 = failed_seeds(&keys, KeyHash::Xxh3, builds);
        // A random graph of this shape is acyclic about half the time:
        // about one rejected seed per build (geometric), so `builds` builds
        // reject about `builds` seeds, rarely more than 3x.
        assert!(
            mum <= 3 * builds.max(xxh3),
            "{name}, {n} keys: Mum8 rejected {mum} seeds in {builds} builds (XXH3 {xxh3})"
        );
    }
}

#[test]
fn mum8_builds_structured_keys_like_xxh3() {
    for n in [1_000, 16_384, 65_536] {
        check_builds(n, 6);
    }
}

/// The same at 1M keys (a release build: `cargo test --release -p keyplane
/// --test othello_key_hash -- --ignored`, about a minute).
#[test]
#[ignore]
fn mum8_builds_structured_keys_like_xxh3_at_1m() {
    check_builds(1 << 20, 3);
}

#[test]
fn mum8_inserts_of_structured_keys_rebuild_like_xxh3() {
    for (name, keys) in sets(12_000) {
        let mut rebuilds = [0u64; 2];
        for (r, hash) in rebuilds.iter_mut().zip([KeyHash::Mum8, KeyHash::Xxh3]) {
            for s in 0..3u64 {
                let mut ctl =
                    Control::with_options(8, Options { seed: 0xadd ^ s, hash, ..Options::default() }).unwrap();
                let t = ctl.export();
                for &k in &keys {
                    t.apply(&ctl.insert(&u64_key(k), k & 0xff).unwrap()).unwrap();
                }
                for &k in &keys {
                    assert_eq!(t.get_u64(k), Some(k & 0xff), "{name}");
                }
                *r += ctl.stats().cycle_rebuilds;
            }
        }
        let [mum, xxh3] = rebuilds;
        assert!(mum <= 2 * xxh3 + 12, "{name}: Mum8 {mum} cycle rebuilds, XXH3 {xxh3}");
    }
}

/// A table's key hash travels with it: a control snapshot, a lookup blob
/// and the rebuild deltas of growth all keep it, for both hashes, and the
/// loaded control form goes on emitting deltas the replica reads right.
#[test]
fn the_key_hash_survives_snapshots_blobs_and_rebuild_deltas() {
    use keyplane::{Snapshot, Wire};
    for hash in [KeyHash::Mum8, KeyHash::Xxh3] {
        let items = (0..300u64).map(|i| (u64_key(i * 3), i & 0xff));
        let ctl = Control::from_items_with(items, 8, Options { seed: 3, hash, ..Options::default() }).unwrap();
        let mut back = Control::from_snapshot(&ctl.snapshot()).unwrap();
        assert_eq!((back.key_hash(), back.options().hash), (hash, hash));
        let t = keyplane::othello::Lookup::from_bytes(&back.export().to_bytes()).unwrap();
        assert_eq!(t.key_hash(), hash);
        let grown = back.stats().grow_rebuilds;
        for i in 300..2_000u64 {
            let d = back.insert(&u64_key(i * 3), i & 0xff).unwrap();
            t.apply(&keyplane::othello::Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        }
        assert!(back.stats().grow_rebuilds > grown, "no growth rebuild");
        assert_eq!((back.key_hash(), t.key_hash()), (hash, hash));
        let rd = t.reader();
        for i in 0..2_000u64 {
            assert_eq!(rd.get_u64(i * 3), Some(i & 0xff));
        }
    }
}
