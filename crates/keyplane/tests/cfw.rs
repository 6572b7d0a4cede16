//! CFW (Cuckoo Filtable): oracle property tests, level-2 collisions with tiny
//! fingerprints, CR = 0 over every key, eq. 3.8 false positives, shared
//! skeleton, concurrency, corruption, edge cases.

use keyplane::cfw::{self, Control, Delta, Lookup, Options};
use keyplane::conformance::{self, KeyShape, OracleConfig, StressConfig};
use keyplane::lineage::DeltaInfo;
use keyplane::{ControlTable, Error, LookupTable, Wire};
use std::collections::HashMap;

/// CFW with a fixed fingerprint width, so the generic conformance runs can
/// drive non-default configurations.
#[derive(Debug)]
struct Fp<const F: u32>(Control);

impl<const F: u32> ControlTable for Fp<F> {
    type Delta = Delta;
    type Lookup = Lookup;
    fn with_value_bits(b: u32) -> keyplane::Result<Self> {
        Control::with_options(b, Options::with_fingerprint_bits(F)).map(Fp)
    }
    fn lineage(&self) -> keyplane::lineage::Lineage {
        self.0.lineage()
    }
    fn set_lineage(&mut self, l: keyplane::lineage::Lineage) {
        self.0.set_lineage(l)
    }
    fn from_items<I, K>(items: I, b: u32) -> keyplane::Result<Self>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        Control::from_items_with(items, b, Options::with_fingerprint_bits(F)).map(Fp)
    }
    fn insert(&mut self, k: &[u8], v: u64) -> keyplane::Result<Delta> {
        let d = self.0.insert(k, v);
        debug_assert!(self.0.len() % 997 != 0 || self.0.check_invariants().is_ok());
        d
    }
    fn remove(&mut self, k: &[u8]) -> keyplane::Result<Option<Delta>> {
        self.0.remove(k)
    }
    fn get(&self, k: &[u8]) -> Option<u64> {
        self.0.get(k)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn value_bits(&self) -> u32 {
        self.0.value_bits()
    }
    fn export(&self) -> Lookup {
        self.0.export()
    }
    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }
}

#[test]
fn oracle_crosses_growth() {
    let cfg = OracleConfig {
        ops: 60_000,
        key_space: 40_000,
        remove_ratio: 0.1,
        initial: 100,
        check_every: 5_000,
        shape: KeyShape::U64,
        seed: 11,
        ..Default::default()
    };
    conformance::oracle_run::<Fp<6>>(&OracleConfig { seed: 12, ..cfg }).unwrap();
}

#[test]
fn oracle_tiny_fingerprints_exercise_level_2() {
    for (i, cfg) in [
        OracleConfig { ops: 15_000, key_space: 2_000, seed: 21, ..Default::default() },
        OracleConfig { ops: 15_000, key_space: 4_000, initial: 50, remove_ratio: 0.15, seed: 22, ..Default::default() },
    ]
    .into_iter()
    .enumerate()
    {
        conformance::oracle_run::<Fp<1>>(&cfg).unwrap_or_else(|e| panic!("f=1 cfg {i}: {e}"));
        conformance::oracle_run::<Fp<2>>(&cfg).unwrap_or_else(|e| panic!("f=2 cfg {i}: {e}"));
        conformance::oracle_run::<Fp<3>>(&cfg).unwrap_or_else(|e| panic!("f=3 cfg {i}: {e}"));
        conformance::oracle_run::<Fp<4>>(&cfg).unwrap_or_else(|e| panic!("f=4 cfg {i}: {e}"));
    }
}

/// Hand-driven oracle with invariant checks: level 2 is heavily used, keys
/// move between levels, and the delta-maintained replica stays bit-for-bit
/// equal to a fresh export.
fn oracle_with_invariants(fbits: u32, seed: u64, key_space: u64) {
    let mut rng = conformance::Rng::new(seed);
    let mut ctl = Control::with_options(8, Options { fingerprint_bits: fbits, seed }).unwrap();
    let replica = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    let mut oracle = HashMap::new();
    let mut max_l2 = 0;
    for step in 0..12_000 {
        let k = conformance::make_key(KeyShape::Mixed, rng.below(key_space));
        if rng.chance(0.35) {
            let d = ctl.remove(&k).unwrap();
            assert_eq!(d.is_some(), oracle.remove(&k).is_some());
            if let Some(d) = d {
                replica.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
            }
        } else {
            let v = rng.next_u64() & 0xff;
            oracle.insert(k.clone(), v);
            let d = ctl.insert(&k, v).unwrap();
            replica.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        }
        max_l2 = max_l2.max(ctl.level2_len());
        if step % 1_500 == 0 {
            ctl.check_invariants().unwrap_or_else(|e| panic!("f={fbits} step {step}: {e}"));
            let fresh = ctl.export();
            for (k, v) in &oracle {
                assert_eq!(replica.get(k), Some(*v), "f={fbits} step {step}");
                assert_eq!(fresh.get(k), Some(*v), "f={fbits} step {step}");
            }
            assert_eq!(replica.level2_len(), ctl.level2_len());
            assert_eq!(replica.to_bytes(), fresh.to_bytes(), "f={fbits} step {step}");
        }
    }
    let s = ctl.stats();
    assert!(max_l2 > 0 && s.demotions > 0, "f={fbits}: level 2 never used: {s:?}");
    if fbits >= 3 {
        assert!(s.promotions > 0, "f={fbits}: no key ever returned to level 1: {s:?}");
    }
}

#[test]
fn tiny_fingerprints_keep_invariants_and_replicas_exact() {
    oracle_with_invariants(2, 31, 1_500);
    oracle_with_invariants(3, 32, 1_500);
    oracle_with_invariants(4, 33, 3_000);
    oracle_with_invariants(8, 34, 5_000);
}

#[test]
fn valid_keys_never_collide() {
    // CR = 0 (eq. 3.8): every key of a large table reads its own value, in
    // every configuration, including ones where most keys collide.
    for (f, n) in [(4u32, 30_000u64), (8, 200_000), (12, 200_000)] {
        let items: Vec<([u8; 8], u64)> =
            (0..n).map(|i| (keyplane::hash::mix64(i).to_le_bytes(), keyplane::hash::mix64(i ^ 9) & 0xff)).collect();
        let ctl = Control::from_items_with(items.iter().copied(), 8, Options::with_fingerprint_bits(f)).unwrap();
        ctl.check_invariants().unwrap();
        let t = ctl.export();
        let wrong = items.iter().filter(|(k, v)| t.get(k) != Some(*v)).count();
        assert_eq!(wrong, 0, "f={f}: {wrong} valid-key collisions");
        let refs: Vec<&[u8]> = items.iter().map(|(k, _)| &k[..]).collect();
        let mut out = vec![None; refs.len()];
        t.get_batch(&refs, &mut out);
        assert!(items.iter().zip(&out).all(|((_, v), o)| *o == Some(*v)));
        assert!(ctl.level2_len() > 0, "f={f}: some keys must collide");
        // Level 2 share ≈ 1 − η ≈ 4·load·4/(2^f − 1) (keys whose candidate
        // buckets meet k's: ≈ 4n/n_b).
        let share = ctl.level2_len() as f64 / n as f64;
        let approx = 1.0 - (-(4.0 * n as f64 / ctl.buckets() as f64) / ((1u64 << f) - 1) as f64).exp();
        assert!(share < approx * 1.3 + 0.001, "f={f}: level-2 share {share} vs ≈{approx}");
    }
}

#[test]
fn three_key_collision_is_caught() {
    // Thesis §3.4.2: a and b share a fingerprint and a bucket, so both sit in
    // level 2; c arrives with the same fingerprint. Level 1 holds neither a
    // nor b, so only the collision-avoidance sets can send c to level 2.
    // An empty table has 2 buckets: every key has both as candidates, and
    // 2-bit fingerprints make collisions easy to find.
    let opts = Options { fingerprint_bits: 2, seed: 5 };
    let key = |i: u64| i.to_le_bytes();
    let with = |ks: &[u64]| {
        let mut c = Control::with_options(8, opts).unwrap();
        for &k in ks {
            c.insert(&key(k), k & 0xff).unwrap();
        }
        c
    };
    let a = 0u64;
    let b = (1..100).find(|&b| with(&[a, b]).in_level2(&key(a)) == Some(true)).unwrap();
    let c = (b + 1..200).find(|&c| with(&[a, b, c]).in_level2(&key(c)) == Some(true)).unwrap();
    let mut ctl = with(&[]);
    let t = ctl.export();
    for k in [a, b, c] {
        t.apply(&ctl.insert(&key(k), k & 0xff).unwrap()).unwrap();
    }
    assert_eq!(ctl.buckets(), 2, "no growth in this scenario");
    ctl.check_invariants().unwrap();
    for k in [a, b, c] {
        assert_eq!(ctl.in_level2(&key(k)), Some(true), "key {k}");
        assert_eq!(t.get(&key(k)), Some(k & 0xff));
    }
    assert_eq!(ctl.level1_len(), 0);
    // Removing a leaves b and c colliding with each other: both stay in level 2.
    t.apply(&ctl.remove(&key(a)).unwrap().unwrap()).unwrap();
    assert_eq!(ctl.in_level2(&key(b)), Some(true));
    assert_eq!(ctl.in_level2(&key(c)), Some(true));
    // Removing b leaves c alone: it returns to level 1.
    t.apply(&ctl.remove(&key(b)).unwrap().unwrap()).unwrap();
    assert_eq!(ctl.in_level2(&key(c)), Some(false));
    assert_eq!(ctl.stats().promotions, 1);
    ctl.check_invariants().unwrap();
    assert_eq!(t.get(&key(c)), Some(c & 0xff));
    assert_eq!(t.level2_len(), 0);
    assert_eq!(t.to_bytes(), ctl.export().to_bytes());
}

#[test]
fn alien_false_positives_follow_eq_3_8() {
    for f in [6u32, 8, 10] {
        let n = 100_000u64;
        let ctl =
            Control::from_items_with((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8, Options::with_fingerprint_bits(f))
                .unwrap();
        let t = ctl.export();
        let alien = 400_000u64;
        let fp = (0..alien).filter(|i| t.get(&(i + (1 << 40)).to_le_bytes()).is_some()).count() as f64 / alien as f64;
        let expected = ctl.expected_false_positive_rate();
        assert!((fp - expected).abs() < expected * 0.1 + 0.0005, "f={f}: measured {fp}, eq. 3.8 {expected}");
        let printed = cfw::eq_3_8(ctl.level1_len(), ctl.buckets(), f);
        assert!(printed < expected && printed > expected * 0.9);
    }
}

#[test]
fn memory_is_a_few_bits_per_key() {
    let n = 200_000u64;
    let ctl =
        Control::from_items_with((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8, Options::with_fingerprint_bits(10))
            .unwrap();
    let t = ctl.export();
    let bits = t.memory_bytes() as f64 * 8.0 / n as f64;
    // Level 1: (10 + 8) bits per slot at load ≥ 0.9 → ≤ 20 bits/key; level 2 adds ≈ 1.4 % of keys.
    assert!(ctl.load_factor() > 0.85, "load {}", ctl.load_factor());
    assert!(bits < 26.0, "{bits} bits/key");
    let l1_bits = t.level1_memory_bytes() as f64 * 8.0 / n as f64;
    assert!(l1_bits < 18.0 / 0.85, "{l1_bits}");
}

#[test]
fn shared_skeleton_exports_per_node_values() {
    let keys: Vec<[u8; 8]> = (0..20_000u64).map(|i| i.to_le_bytes()).collect();
    let ctl = Control::from_items_with(keys.iter().map(|k| (k, 0)), 4, Options::with_fingerprint_bits(5)).unwrap();
    assert!(ctl.level2_len() > 0);
    let nodes: Vec<Lookup> = (0..3u64).map(|node| ctl.export_with(|k| (k[0] as u64 + node) & 0xf).unwrap()).collect();
    for (node, t) in nodes.iter().enumerate() {
        assert_eq!(t.seed(), ctl.export().seed());
        assert_eq!(t.buckets(), ctl.buckets());
        assert_eq!(t.level2_len(), ctl.level2_len());
        for k in &keys {
            assert_eq!(t.get(k), Some((k[0] as u64 + node as u64) & 0xf));
        }
    }
    assert!(matches!(ctl.export_with(|_| 16), Err(Error::ValueTooWide { .. })));
}

#[test]
fn concurrent_readers_with_heavy_level_2() {
    // 5-bit fingerprints: ≈ 40 % of keys collide, so level 2 changes on most updates.
    conformance::stress::<Fp<5>>(&StressConfig {
        updates: 200_000,
        stable: 5_000,
        churn: 10_000,
        ..Default::default()
    })
    .unwrap();
}

#[test]
fn structure_delta_kinds_reject_corruption() {
    let mut ctl = Control::from_items_with(
        (0..300u64).map(|i| (i.to_le_bytes(), i & 0xff)),
        8,
        Options::with_fingerprint_bits(4),
    )
    .unwrap();
    assert!(ctl.level2_len() > 0);
    let blob = ctl.export().to_bytes();
    conformance::corruption_sweep::<Lookup>(&blob, 3_000, 1).unwrap();
    let mut kinds = [false; 3];
    for i in 0..400u64 {
        let d = ctl.insert(&(10_000 + i).to_le_bytes(), 9).unwrap();
        let slot = d.level1_slots() > 1 && !d.is_rebuild();
        let l2 = d.level2_ops() > 0 && !d.is_rebuild();
        let idx = if d.is_rebuild() {
            2
        } else if slot {
            0
        } else if l2 {
            1
        } else {
            continue;
        };
        if !kinds[idx] {
            kinds[idx] = true;
            conformance::corruption_sweep::<Delta>(&d.to_bytes(), 1_000, i).unwrap();
        }
    }
    assert_eq!(kinds, [true, true, true], "cuckoo-path, level-2 and rebuild deltas all swept");
    let d = ctl.remove(&5u64.to_le_bytes()).unwrap().unwrap();
    conformance::corruption_sweep::<Delta>(&d.to_bytes(), 1_000, 3).unwrap();
}

#[test]
fn structure_edge_cases() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    assert!(ctl.is_empty());
    assert_eq!(ctl.get(b""), None);
    let t = ctl.export();
    assert_eq!(t.get(b"anything"), None);
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    assert_eq!(t.get(b""), Some(1));
    assert_eq!(ctl.len(), 1);
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.level1_slots() + d.level2_ops(), 0);
    t.apply(&d).unwrap();
    assert!(matches!(Control::with_value_bits(64), Err(Error::InvalidValueBits { .. })));
    let mut wide = Control::with_value_bits(63).unwrap();
    let w = wide.export();
    w.apply(&wide.insert(b"max", u64::MAX >> 1).unwrap()).unwrap();
    assert_eq!(w.get(b"max"), Some(u64::MAX >> 1));
    assert!(Control::with_options(60, Options::with_fingerprint_bits(8)).is_err());
    assert!(Control::with_options(8, Options::with_fingerprint_bits(0)).is_err());
    assert!(Control::with_options(8, Options::with_fingerprint_bits(33)).is_err());
    assert!(Control::with_options(32, Options::with_fingerprint_bits(32)).is_ok());
    let d = ctl.remove(b"").unwrap().unwrap();
    t.apply(&d).unwrap();
    assert!(ctl.is_empty());
    assert_eq!(t.get(b""), None);
    // Long keys live happily in level 2.
    let mut lk = Control::with_options(8, Options::with_fingerprint_bits(1)).unwrap();
    let tl = lk.export();
    let long: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 300 + i as usize]).collect();
    for (i, k) in long.iter().enumerate() {
        tl.apply(&lk.insert(k, i as u64).unwrap()).unwrap();
    }
    assert!(lk.level2_len() > 40);
    for (i, k) in long.iter().enumerate() {
        assert_eq!(tl.get(k), Some(i as u64));
    }
}

#[test]
fn deltas_are_small_and_carry_cuckoo_paths() {
    let n = 100_000u64;
    let mut ctl = Control::from_items((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let t = ctl.export();
    // Value changes: one level-1 slot (or one level-2 put).
    for i in 0..1_000u64 {
        let d = ctl.insert(&(i * 7).to_le_bytes(), (i * 7 + 1) & 0xff).unwrap();
        assert_eq!(d.level1_slots() + d.level2_ops(), 1);
        assert!(d.to_bytes().len() < 88, "{} bytes (16 of them the table id)", d.to_bytes().len());
        t.apply(&d).unwrap();
    }
    // Inserts at ~90 % load: cuckoo paths of a few slots.
    let (mut total, mut count, mut longest) = (0usize, 0usize, 0usize);
    for i in 0..5_000u64 {
        let d = ctl.insert(&(n + i).to_le_bytes(), 3).unwrap();
        t.apply(&d).unwrap();
        if !d.is_rebuild() {
            total += d.to_bytes().len();
            count += 1;
            longest = longest.max(d.level1_slots());
        }
    }
    assert!(longest > 1, "some insertion moved keys along a cuckoo path");
    assert!((total as f64 / count as f64) < 100.0, "average insert delta {} bytes", total / count);
    // Deletes: one cleared slot (plus any promotions).
    let d = ctl.remove(&(n + 1).to_le_bytes()).unwrap().unwrap();
    assert!(d.level1_slots() + d.level2_ops() >= 1);
    t.apply(&d).unwrap();
    assert_eq!(t.to_bytes(), ctl.export().to_bytes());
}
