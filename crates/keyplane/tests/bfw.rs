//! BFW (Bloom forwarder baseline): what can be checked against an oracle —
//! no false negatives, exact replicas, collision and false-positive rates
//! against the model — plus concurrency, corruption and edge cases.

use keyplane::bfw::{self, Control, Delta, Lookup, Options};
use keyplane::conformance::{self, KeyShape, Rng};
use keyplane::{ControlTable, Error, LookupTable, Wire};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The key's own port always matches; `get` answers with a matching port.
fn check_key(t: &Lookup, k: &[u8], v: u64) -> Result<(), String> {
    let mut m = Vec::new();
    t.matches(k, &mut m);
    if !m.contains(&v) || m.is_empty() {
        return Err(format!("false negative: key {k:02x?} (port {v}) matches only {m:?}"));
    }
    if !t.contains(k, v) {
        return Err(format!("false negative: key {k:02x?} not in its port {v}"));
    }
    // `get` may answer another port whose filter matches by a false
    // positive; a concurrent delta can rebuild that filter between `get` and
    // `contains` (two calls, two snapshots). So a mismatch is an error only
    // if it persists: a real bug repeats, a race does not.
    let mut last = 0;
    for _ in 0..1000 {
        let g = t.get(k).ok_or_else(|| format!("key {k:02x?}: get = None"))?;
        if t.contains(k, g) {
            return Ok(());
        }
        last = g;
    }
    Err(format!("key {k:02x?}: get = {last}, whose filter does not match (1000 tries)"))
}

fn oracle(vbits: u32, ops: usize, key_space: u64, initial: usize, remove_ratio: f64, seed: u64) {
    let mut rng = Rng::new(seed);
    let vm = keyplane::mask(vbits);
    let mut oracle = HashMap::new();
    let mut items = Vec::new();
    for _ in 0..initial {
        let k = conformance::make_key(KeyShape::Mixed, rng.below(key_space));
        let v = rng.next_u64() & vm;
        oracle.insert(k.clone(), v);
        items.push((k, v));
    }
    let mut ctl = Control::from_items(items, vbits).unwrap();
    let mut replica = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    for step in 0..ops {
        let k = conformance::make_key(KeyShape::Mixed, rng.below(key_space));
        let d = if rng.chance(remove_ratio) {
            let d = ctl.remove(&k).unwrap();
            assert_eq!(d.is_some(), oracle.remove(&k).is_some(), "step {step}");
            d
        } else {
            let v = rng.next_u64() & vm;
            oracle.insert(k.clone(), v);
            Some(ctl.insert(&k, v).unwrap())
        };
        if let Some(d) = d {
            replica.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        }
        assert_eq!(ctl.len(), oracle.len());
        assert_eq!(ctl.get(&k), oracle.get(&k).copied(), "step {step}");
        if (step + 1) % 2_000 == 0 || step + 1 == ops {
            let fresh = ctl.export();
            let rt = Lookup::from_bytes(&replica.to_bytes()).unwrap();
            for (k, &v) in &oracle {
                assert_eq!(ctl.get(k), Some(v));
                for (name, t) in [("fresh", &fresh), ("replica", &replica), ("round trip", &rt)] {
                    check_key(t, k, v).unwrap_or_else(|e| panic!("step {step} {name}: {e}"));
                }
            }
            // The delta-maintained replica is bit-for-bit the export.
            assert_eq!(replica.to_bytes(), fresh.to_bytes(), "step {step}");
            replica = rt;
        }
    }
}

#[test]
fn oracle_no_false_negatives_and_exact_replicas() {
    oracle(3, 20_000, 3_000, 0, 0.3, 1);
    oracle(1, 8_000, 2_000, 0, 0.3, 2);
    oracle(8, 8_000, 2_000, 0, 0.3, 3);
    oracle(16, 5_000, 2_000, 0, 0.3, 4);
}

#[test]
fn oracle_crosses_filter_growth_and_shrinking() {
    // From a small bulk load far past every filter's capacity, then mostly removes.
    oracle(2, 30_000, 20_000, 50, 0.05, 5);
    oracle(2, 30_000, 2_000, 5_000, 0.7, 6);
}

#[test]
fn rates_follow_the_first_match_model() {
    for (vbits, hashes) in [(1u32, 3u32), (2, 3), (4, 4)] {
        let n = 60_000u64;
        let items: Vec<([u8; 8], u64)> =
            (0..n).map(|i| (i.to_le_bytes(), keyplane::hash::mix64(i) & keyplane::mask(vbits))).collect();
        let ctl =
            Control::from_items_with(items.iter().copied(), vbits, Options { hashes, ..Options::default() }).unwrap();
        let t = ctl.export();
        let r = t.rates();
        assert_eq!(r.ports, 1 << vbits);
        let wrong = items.iter().filter(|(k, v)| t.get(k) != Some(*v)).count() as f64 / n as f64;
        for (k, v) in items.iter().take(5_000) {
            check_key(&t, k, *v).unwrap();
        }
        let alien = 200_000u64;
        let fp = (0..alien).filter(|i| t.get(&(i + (1 << 40)).to_le_bytes()).is_some()).count() as f64 / alien as f64;
        assert!(
            (wrong - r.collision_scan).abs() < r.collision_scan * 0.15 + 0.001,
            "d={}: valid-key collision rate {wrong} vs first-match model {} (eq. 3.7 as printed: {})",
            r.ports,
            r.collision_scan,
            r.collision_eq_3_7
        );
        assert!(
            (fp - r.false_positive).abs() < r.false_positive * 0.1 + 0.001,
            "d={}: false-positive rate {fp} vs eq. 3.7 {}",
            r.ports,
            r.false_positive
        );
        let (fp_pred, _, cr_pred) = bfw::predicted_rates(r.ports, r.filter_false_match);
        assert!((fp_pred - r.false_positive).abs() < 0.01 && (cr_pred - r.collision_scan).abs() < 1e-9);
        if r.ports == 1 {
            assert_eq!(wrong, 0.0, "a single port cannot collide");
        }
    }
}

#[test]
fn concurrent_readers_never_lose_a_key() {
    // Readers check what BFW guarantees: a stable key's own port always
    // matches, and an alternating key matches one of its two ports, while the
    // writer applies 1,000,000 deltas (including filter resizes).
    let vbits = 3;
    let vm = keyplane::mask(vbits);
    let stable: Vec<([u8; 8], u64)> = (0..5_000u64).map(|i| (i.to_le_bytes(), keyplane::hash::mix64(i) & vm)).collect();
    let churn_key = |i: u64| ((1u64 << 40) + i).to_le_bytes();
    let va = move |i: u64| i & vm;
    let vb = move |i: u64| (i + 1) & vm;
    let churn = 4_000u64;
    let initial = stable.iter().copied().chain((1..churn).step_by(2).map(|i| (churn_key(i), va(i))));
    let mut ctl = Control::from_items(initial, vbits).unwrap();
    let table = Arc::new(ctl.export());
    let stop = Arc::new(AtomicBool::new(false));
    let stable = Arc::new(stable);
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (table, stop, stable) = (table.clone(), stop.clone(), stable.clone());
            std::thread::spawn(move || -> Result<u64, String> {
                let mut rng = Rng::new(t);
                let mut n = 0;
                let mut m = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let (k, v) = stable[rng.below(stable.len() as u64) as usize];
                    check_key(&table, &k, v)?;
                    let i = rng.below(churn) | 1;
                    if i < churn {
                        let k = churn_key(i);
                        // One snapshot: two separate `contains` calls could straddle a move.
                        table.matches(&k, &mut m);
                        if !m.contains(&va(i)) && !m.contains(&vb(i)) {
                            return Err(format!("churn key {i} matches neither of its ports"));
                        }
                    }
                    n += 1;
                }
                Ok(n)
            })
        })
        .collect();
    let mut rng = Rng::new(99);
    let mut flip: HashMap<u64, bool> = HashMap::new();
    let mut updates = 0;
    while updates < 1_000_000 {
        let i = rng.below(churn);
        let d = if i & 1 == 1 {
            let f = flip.entry(i).or_insert(false);
            *f = !*f;
            Some(ctl.insert(&churn_key(i), if *f { vb(i) } else { va(i) }).unwrap())
        } else if rng.chance(0.5) {
            Some(ctl.insert(&churn_key(i), rng.next_u64() & vm).unwrap())
        } else {
            ctl.remove(&churn_key(i)).unwrap()
        };
        if let Some(d) = d {
            table.apply(&d).unwrap();
            updates += 1;
        }
        if updates % 65_536 == 0 && readers.iter().any(|r| r.is_finished()) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap().unwrap() > 0);
    }
    assert!(updates >= 1_000_000);
    assert!(ctl.filter_rebuilds() > 0 || ctl.ports() > 0);
    assert_eq!(table.to_bytes(), ctl.export().to_bytes());
}

#[test]
fn structure_delta_kinds_reject_corruption() {
    let mut ctl = Control::from_items((0..300u64).map(|i| (i.to_le_bytes(), i & 0x7)), 3).unwrap();
    let blob = ctl.export().to_bytes();
    conformance::corruption_sweep::<Lookup>(&blob, 3_000, 1).unwrap();
    let mut d = ctl.insert(b"new key", 5).unwrap();
    for i in 0..100u64 {
        if d.bits_touched() > 0 {
            break;
        }
        d = ctl.insert(&(500 + i).to_le_bytes(), 5).unwrap();
    }
    assert!(d.bits_touched() > 0);
    conformance::corruption_sweep::<Delta>(&d.to_bytes(), 2_000, 2).unwrap();
    let d = ctl.insert(&5u64.to_le_bytes(), 1).unwrap();
    conformance::corruption_sweep::<Delta>(&d.to_bytes(), 2_000, 3).unwrap();
    let mut grow = None;
    for i in 0..200u64 {
        let d = ctl.insert(&(1_000 + i).to_le_bytes(), 7).unwrap();
        if d.filters_replaced() > 0 {
            grow = Some(d);
            break;
        }
    }
    conformance::corruption_sweep::<Delta>(&grow.expect("a filter resize").to_bytes(), 2_000, 4).unwrap();
}

#[test]
fn structure_edge_cases() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    assert!(ctl.is_empty());
    let t = ctl.export();
    assert_eq!(t.get(b"anything"), None);
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    assert_eq!(t.get(b""), Some(1), "one port: always right");
    assert_eq!(t.ports(), vec![1]);
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.bits_touched() + d.filters_replaced(), 0);
    t.apply(&d).unwrap();
    // Moving the only key to the other port swaps the filters.
    t.apply(&ctl.insert(b"", 0).unwrap()).unwrap();
    assert_eq!(t.get(b""), Some(0));
    assert_eq!(t.ports(), vec![0]);
    assert!(matches!(Control::with_value_bits(17), Err(Error::InvalidValueBits { .. })));
    assert!(Control::with_options(4, Options { hashes: 0, ..Options::default() }).is_err());
    assert!(Control::with_options(4, Options { hashes: 33, ..Options::default() }).is_err());
    t.apply(&ctl.remove(b"").unwrap().unwrap()).unwrap();
    assert!(ctl.is_empty());
    assert_eq!(t.ports(), Vec::<u32>::new());
    assert_eq!(t.get(b""), None);
    let mut wide = Control::with_value_bits(16).unwrap();
    let w = wide.export();
    w.apply(&wide.insert(b"max", 0xffff).unwrap()).unwrap();
    assert_eq!(w.get(b"max"), Some(0xffff));
}
