//! FPT: oracle property tests, trie depth, speculative answers, distributed
//! check bits, concurrency, corruption, edge cases.

use keyplane::conformance::{self, KeyShape, OracleConfig};
use keyplane::fpt::{Control, Delta, Lookup, Options};
use keyplane::{ControlTable, Error, LookupTable, Wire, name};
use std::collections::HashMap;

keyplane::configured_table!(Plain, Control, Options::with_fingerprint_bits(0));
keyplane::configured_table!(Fp32, Control, Options::with_fingerprint_bits(32));
keyplane::configured_table!(Checked, Control, Options { check_bits: 12, fingerprint_bits: 7, ..Options::default() });

fn psl_sample() -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/psl_sample.dat")).unwrap();
    name::load_domain_list(&text)
}

#[test]
fn oracle_mixed_keys_all_fingerprint_widths() {
    // Mixed keys include the empty key and keys that are prefixes of others.
    for seed in 0..2 {
        let cfg = OracleConfig { seed, ops: 20_000, key_space: 3_000, ..Default::default() };
        conformance::oracle_run::<Control>(&cfg).unwrap();
        conformance::oracle_run::<Plain>(&OracleConfig { seed: seed + 10, ..cfg.clone() }).unwrap();
        conformance::oracle_run::<Fp32>(&OracleConfig { seed: seed + 20, ..cfg.clone() }).unwrap();
        conformance::oracle_run::<Checked>(&OracleConfig { seed: seed + 30, ..cfg }).unwrap();
    }
}

#[test]
fn oracle_wide_and_narrow_values_and_growth() {
    for bits in [1, 2, 7, 16, 33, 62] {
        let cfg =
            OracleConfig { value_bits: bits, seed: bits as u64, ops: 5_000, key_space: 2_000, ..Default::default() };
        conformance::oracle_run::<Control>(&cfg).unwrap();
    }
    let cfg = OracleConfig {
        ops: 50_000,
        key_space: 40_000,
        remove_ratio: 0.1,
        initial: 10,
        check_every: 5_000,
        shape: KeyShape::U64,
        seed: 11,
        ..Default::default()
    };
    conformance::oracle_run::<Control>(&cfg).unwrap();
}

#[test]
fn names_that_are_prefixes_of_each_other() {
    let names: Vec<&[u8]> = vec![b"", b"/uk", b"/uk/co", b"/uk/co/bbc", b"/uk/c", b"/u", b"\0", b"\0\0", b"/uk/co\0"];
    for f in [0, 3, 20] {
        let ctl = Control::from_items_with(
            names.iter().enumerate().map(|(i, n)| (n, i as u64)),
            8,
            Options::with_fingerprint_bits(f),
        )
        .unwrap();
        let t = ctl.export();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(t.get(n), Some(i as u64), "f={f} {n:?}");
        }
        let (_, leaves, _) = ctl.depth_stats();
        assert_eq!(leaves, names.len() as u64);
    }
}

#[test]
fn fingerprints_shorten_the_trie_on_real_domain_names() {
    let names = psl_sample();
    let n = names.len() as f64;
    let mut depths = Vec::new();
    for f in [0u32, 4, 8, 12, 16, 20, 24, 32] {
        let ctl = Control::from_items_with(names.iter().map(|k| (k, 1)), 8, Options::with_fingerprint_bits(f)).unwrap();
        let t = ctl.export();
        // The reported depth is the number of nodes a lookup visits.
        let sum: u64 = names.iter().map(|k| t.depth(k).unwrap() as u64).sum();
        let (s, leaves, _) = ctl.depth_stats();
        assert_eq!((sum, leaves), (s, names.len() as u64));
        depths.push((f, ctl.avg_leaf_depth()));
    }
    let d0 = depths[0].1;
    let d20 = depths.iter().find(|(f, _)| *f == 20).unwrap().1;
    assert!(d20 <= d0 * 0.7, "20-bit fingerprints: {d20} vs {d0} without ({depths:?})");
    // With f ≥ log2 n the depth approaches log2 n (Fig. 3).
    assert!(d20 < n.log2() + 3.0, "{d20} vs log2 n = {}", n.log2());
}

#[test]
fn speculative_lookups_answer_alien_names() {
    let names = psl_sample();
    let ctl = Control::from_items(names.iter().map(|k| (k, 5)), 8).unwrap();
    let t = ctl.export();
    // Every alien name reaches some leaf: speculative forwarding.
    for i in 0..1000 {
        assert_eq!(t.get(&name::generate(i, 1, 3)), Some(5));
    }
}

#[test]
fn distributed_check_bits_recognise_unstored_names_at_the_designed_rate() {
    let r: Vec<Vec<u8>> = (0..40_000).map(|i| name::generate(i, 0, 4)).collect();
    for c in [4u32, 8] {
        let opts = Options { check_bits: c, ..Options::default() };
        let ctl = Control::from_items_with(r.iter().step_by(4).map(|k| (k, 3)), 8, opts).unwrap();
        let t = ctl.export();
        for k in r.iter().step_by(4) {
            assert_eq!(t.get(k), Some(3));
        }
        let rest: Vec<&Vec<u8>> = r.iter().enumerate().filter(|(i, _)| i % 4 != 0).map(|(_, k)| k).collect();
        let pass = rest.iter().filter(|k| t.get(k).is_some()).count() as f64 / rest.len() as f64;
        let want = 0.5f64.powi(c as i32);
        assert!((pass - want).abs() < want * 0.2 + 0.001, "c={c}: {pass} of R − R_S pass vs designed {want}");
        // Check bits cost memory per leaf only, the trie is unchanged.
        let plain = Control::from_items_with(r.iter().step_by(4).map(|k| (k, 3)), 8, Options { check_bits: 0, ..opts })
            .unwrap();
        assert_eq!(plain.avg_leaf_depth(), ctl.avg_leaf_depth());
    }
}

#[test]
fn node_array_holds_2n_minus_1_nodes_and_replicas_match_exports() {
    let mut ctl = Control::with_value_bits(8).unwrap();
    let t = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    let mut oracle = HashMap::new();
    let mut rng = conformance::Rng::new(9);
    let mut max_live = 0;
    for step in 0..20_000u64 {
        max_live = max_live.max(oracle.len());
        let k = name::generate(rng.below(3_000), (step % 3) as usize, 1);
        if rng.chance(0.4) {
            let d = ctl.remove(&k).unwrap();
            assert_eq!(d.is_some(), oracle.remove(&k).is_some());
            if let Some(d) = d {
                t.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
            }
        } else {
            let v = rng.below(256);
            oracle.insert(k.clone(), v);
            t.apply(&Delta::from_bytes(&ctl.insert(&k, v).unwrap().to_bytes()).unwrap()).unwrap();
        }
        if step % 2_000 == 1_999 {
            let (_, leaves, _) = ctl.depth_stats();
            assert_eq!(leaves as usize, oracle.len());
            assert_eq!(t.to_bytes(), ctl.export().to_bytes(), "step {step}");
            for (k, v) in &oracle {
                assert_eq!(t.get(k), Some(*v));
            }
        }
    }
    // Freed pairs are reused: the array never exceeds twice the 2n − 1 nodes needed.
    assert!(ctl.node_capacity() <= 2 * (2 * max_live + 2).max(64), "{} nodes for {max_live}", ctl.node_capacity());
}

#[test]
fn malformed_tries_and_node_writes_are_refused() {
    use keyplane::ext::wire::Writer;
    let blob = |nodes: &[u64]| {
        let mut w = Writer::new(<keyplane::fpt::Lookup as keyplane::Wire>::KIND);
        w.u64(0).u64(0).u64(0).u8(0).u64(1).u8(4).u8(0).u8(8).u64s(nodes); // table id, seq, key format, seed, ...
        w.finish()
    };
    let leaf = 1u64 << 63;
    let internal = |pos: u64, left: u64| 3u64 << 62 | pos << 32 | left;
    assert!(Lookup::from_bytes(&blob(&[leaf | 3, 0])).is_ok());
    assert!(Lookup::from_bytes(&blob(&[0, 0])).is_ok());
    assert!(Lookup::from_bytes(&blob(&[internal(1, 2), 0, leaf, leaf])).is_ok());
    for bad in [
        vec![internal(1, 2), 0, internal(0, 2), leaf], // cycle / decreasing positions
        vec![internal(1, 4), 0, leaf, leaf],           // child pair out of bounds
        vec![internal(1, 3), 0, leaf, leaf],           // odd pair
        vec![internal(1, 2), 0, leaf, 0],              // empty child
        vec![leaf | 1 << 9, 0],                        // value wider than 8 bits
        vec![leaf, 7],                                 // reserved word
        vec![leaf],                                    // odd length
    ] {
        assert!(Lookup::from_bytes(&blob(&bad)).is_err(), "{bad:x?}");
    }
    // Node writes that do not fit the trie are refused before any is applied.
    let ctl = Control::from_items([(b"a", 1), (b"b", 2)], 8).unwrap();
    let t = ctl.export();
    let cap = ctl.node_capacity() as u32;
    let seed = ctl.options().seed;
    let id = ctl.table_id().as_u128();
    let delta = |writes: &[(u64, u64)]| {
        let mut w = Writer::new(<keyplane::fpt::Delta as keyplane::Wire>::KIND);
        w.u64(id as u64).u64((id >> 64) as u64).u64(1).u8(0).u8(1).u64(seed).u32(cap).varint(writes.len() as u64);
        for &(i, x) in writes {
            w.varint(i).varint(x);
        }
        Delta::from_bytes(&w.finish()).unwrap()
    };
    let before = t.to_bytes();
    for bad in [
        vec![(0u64, leaf | 1), (1, leaf)],                 // reserved word
        vec![(0, leaf | 1), (2, internal(3, cap as u64))], // child out of bounds
        vec![(0, leaf | 1 << 8)],                          // value too wide
        vec![(0, 1u64 << 62)],                             // unknown tag
    ] {
        assert!(matches!(t.apply(&delta(&bad)), Err(Error::DeltaMismatch(_))), "{bad:x?}");
        assert_eq!(t.to_bytes(), before, "nothing applied");
    }
    t.apply(&delta(&[(0, leaf | 7)])).unwrap();
    assert_eq!(t.get(b"anything"), Some(7));
    let mut w = Writer::new(<keyplane::fpt::Delta as keyplane::Wire>::KIND);
    w.u64(id as u64)
        .u64((id >> 64) as u64)
        .u64(2)
        .u8(0)
        .u8(1)
        .u64(seed)
        .u32(cap)
        .varint(1)
        .varint(cap as u64)
        .varint(0);
    assert!(Delta::from_bytes(&w.finish()).is_err(), "index beyond the node count");
}

#[test]
fn structure_edge_cases() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    assert!(ctl.is_empty());
    let t = ctl.export();
    assert_eq!(t.get(b"x"), None, "an empty trie answers nothing");
    assert_eq!(ctl.avg_leaf_depth(), 0.0);
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    assert_eq!(t.get(b""), Some(1));
    assert_eq!(t.get(b"other"), Some(1), "one leaf: every name reaches it");
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.nodes_touched(), 0);
    t.apply(&d).unwrap();
    assert!(matches!(Control::with_value_bits(63), Err(Error::InvalidValueBits { .. })));
    assert!(Control::with_options(8, Options { fingerprint_bits: 33, ..Options::default() }).is_err());
    assert!(Control::with_options(8, Options { check_bits: 33, ..Options::default() }).is_err());
    assert!(Control::with_options(40, Options { check_bits: 32, ..Options::default() }).is_err());
    assert!(ctl.insert(&vec![0u8; keyplane::fpt::MAX_NAME_LEN + 1], 1).is_err());
    assert_eq!(ctl.len(), 1);
    t.apply(&ctl.remove(b"").unwrap().unwrap()).unwrap();
    assert!(ctl.is_empty());
    assert_eq!(t.get(b""), None);
}
