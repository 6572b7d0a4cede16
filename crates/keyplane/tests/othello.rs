//! Othello-specific tests: configurations, filters, sizing, skeleton sharing,
//! delta sizes, free-slot values. The checks every structure passes (oracle,
//! stress, corruption, sequence numbers, edge cases) are the conformance
//! suite in `conformance.rs`.

use keyplane::conformance::{self, KeyShape};
use keyplane::lineage::DeltaInfo;
use keyplane::othello::{self, Control, Delta, Lookup, Options, Sizing};
use keyplane::{ControlTable, Error, LookupTable, Wire};
use std::collections::HashMap;

/// The same oracle run for a non-default configuration, driven by hand.
fn oracle_with(opts: Options, seed: u64) {
    let mut rng = conformance::Rng::new(seed);
    let mut ctl = Control::with_options(8, opts).unwrap();
    let replica = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    let mut oracle = HashMap::new();
    for step in 0..20_000 {
        let k = conformance::make_key(KeyShape::Mixed, rng.below(4_000));
        if rng.chance(0.3) {
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
        if step % 2_000 == 0 {
            let fresh = ctl.export();
            for (k, v) in &oracle {
                assert_eq!(replica.get(k), Some(*v), "step {step}");
                assert_eq!(fresh.get(k), Some(*v), "step {step}");
            }
            // The replica is bit-for-bit the export.
            assert_eq!(replica.to_bytes(), fresh.to_bytes(), "step {step}");
        }
    }
    assert!(ctl.stats().rebuilds >= 2, "growth must have happened: {:?}", ctl.stats());
}

#[test]
fn oracle_power_of_two_sizing() {
    oracle_with(Options { sizing: Sizing::PowerOfTwo, ..Options::default() }, 3);
}

#[test]
fn oracle_with_fingerprints_and_emptiness() {
    oracle_with(Options::filtered(8), 4);
    oracle_with(Options { fingerprint_bits: 0, emptiness: true, ..Options::default() }, 5);
    oracle_with(Options { fingerprint_bits: 12, emptiness: false, ..Options::default() }, 6);
}

#[test]
fn filtered_lookups_reject_most_alien_keys_and_removed_keys() {
    let items: Vec<(Vec<u8>, u64)> = (0..50_000u64).map(|i| (i.to_le_bytes().to_vec(), i & 0xff)).collect();
    let mut ctl = Control::from_items_with(items.clone(), 8, Options::filtered(8)).unwrap();
    let t = ctl.export();
    for (k, v) in &items {
        assert_eq!(t.get(k), Some(*v));
    }
    let (ma, mb) = ctl.sizes();
    let alien = 200_000u64;
    let fp = (0..alien).filter(|i| t.get(&(i + (1 << 40)).to_le_bytes()).is_some()).count() as f64 / alien as f64;
    let expected = othello::expected_false_positive_rate(items.len(), ma, mb, 8, true);
    assert!(fp < expected * 1.5 + 0.001, "alien false-positive rate {fp} vs eq. 3.9 {expected}");
    // Removing every key of a slot's tree empties it: most removed keys now read None.
    for (k, _) in &items[..25_000] {
        let d = ctl.remove(k).unwrap().unwrap();
        t.apply(&d).unwrap();
    }
    let still = items[..25_000].iter().filter(|(k, _)| t.get(k).is_some()).count();
    assert!(still < 25_000 / 2, "{still} removed keys still answer");
    for (k, v) in &items[25_000..] {
        assert_eq!(t.get(k), Some(*v));
    }
}

#[test]
fn unfiltered_lookups_answer_something_for_alien_keys() {
    let ctl = Control::from_items((0..100u64).map(|i| (i.to_le_bytes(), 1)), 4).unwrap();
    let t = ctl.export();
    assert!(t.get(b"not a key").is_some());
}

#[test]
fn memory_matches_the_sizing_formulas() {
    let n = 100_000u64;
    let items = (0..n).map(|i| (i.to_le_bytes(), i & 0xff));
    let ctl = Control::from_items(items, 8).unwrap();
    let t = ctl.export();
    let (ma, mb) = ctl.sizes();
    let cap = n + n / 100; // default 1% headroom
    assert_eq!(ma as u64, (cap * 4).div_ceil(3));
    assert_eq!(mb as u64, cap);
    let bits_per_key = (t.memory_bytes() * 8) as f64 / n as f64;
    assert!(bits_per_key < 2.4 * 8.0, "{bits_per_key} bits/key");
    let p2 = Control::from_items_with(
        (0..n).map(|i| (i.to_le_bytes(), 1)),
        8,
        Options { sizing: Sizing::PowerOfTwo, ..Options::default() },
    )
    .unwrap();
    let (ma, mb) = p2.sizes();
    assert!(ma.is_power_of_two() && mb.is_power_of_two());
    assert!(ma as u64 >= n * 4 / 3 && mb as u64 >= n);
}

#[test]
fn shared_skeleton_exports_per_node_values() {
    let keys: Vec<[u8; 8]> = (0..20_000u64).map(|i| i.to_le_bytes()).collect();
    let ctl = Control::from_items(keys.iter().map(|k| (k, 0)), 4).unwrap();
    let seed = ctl.seed();
    let nodes: Vec<Lookup> = (0..3u64).map(|node| ctl.export_with(|k| (k[0] as u64 + node) & 0xf).unwrap()).collect();
    for (node, t) in nodes.iter().enumerate() {
        assert_eq!(t.seed(), seed, "same skeleton");
        assert_eq!(t.sizes(), ctl.sizes());
        for k in &keys {
            assert_eq!(t.get(k), Some((k[0] as u64 + node as u64) & 0xf));
        }
    }
    assert!(matches!(ctl.export_with(|_| 16), Err(Error::ValueTooWide { .. })));
}

#[test]
fn no_op_deltas_and_layout_bounds() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    let t = ctl.export();
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    // Same value again: a delta that touches no slot.
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.slots_touched(), 0);
    t.apply(&d).unwrap();
    // A layout wider than a word is refused.
    assert!(Control::with_options(60, Options::filtered(8)).is_err());
}

#[test]
fn delta_sizes_stay_small_for_incremental_updates() {
    let mut ctl = Control::from_items((0..100_000u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let mut total = 0usize;
    let mut count = 0usize;
    for i in 0..1000u64 {
        let d = ctl.insert(&(i * 7).to_le_bytes(), (i + 1) & 0xff).unwrap();
        if !d.is_rebuild() {
            total += d.to_bytes().len();
            count += 1;
        }
    }
    let avg = total as f64 / count as f64;
    assert!(avg < 200.0, "average value-change delta {avg} bytes");
}

/// Free slots (isolated ones and tree roots) hold random values (thesis
/// §5.4.3), so keys never inserted read values spread over the whole range
/// instead of mostly 0 — after bulk construction, after inserts (trees
/// merge), after deletes and after `export_with` recolouring.
#[test]
fn unknown_keys_read_uniform_values() {
    let zero_share = |t: &Lookup| {
        let n = 40_000u64;
        let mut hist = [0u32; 256];
        for i in 0..n {
            let v = t.get_unchecked(&(1u64 << 50 | i).to_le_bytes());
            hist[v as usize] += 1;
        }
        let max = *hist.iter().max().unwrap() as f64 / n as f64;
        (hist[0] as f64 / n as f64, max)
    };
    // Every key stores 0: with zeroed free slots all of them would read 0.
    let items: Vec<([u8; 8], u64)> = (0..2_000u64).map(|i| (i.to_le_bytes(), 0)).collect();
    let mut c = Control::from_items_with(items.iter().map(|(k, v)| (k, *v)), 8, Options::default()).unwrap();
    for phase in 0..3 {
        let (z, max) = zero_share(&c.export());
        assert!(z < 0.02 && max < 0.02, "phase {phase}: share of 0 {z:.3}, largest share {max:.3}");
        match phase {
            0 => {
                for i in 2_000..3_000u64 {
                    c.insert(&i.to_le_bytes(), 0).unwrap();
                }
            }
            _ => {
                for i in (0..3_000u64).step_by(3) {
                    c.remove(&i.to_le_bytes()).unwrap();
                }
            }
        }
    }
    let (z, max) = zero_share(&c.export_with(|_| 0).unwrap());
    assert!(z < 0.02 && max < 0.02, "export_with: share of 0 {z:.3}, largest share {max:.3}");
}

/// Power-of-two sizing keeps the headroom its arrays already have: after a
/// bulk build, inserts up to the arrays' real capacity (m_b ≥ c, m_a ≥ 4c/3)
/// never force a growth rebuild (issue #20: a 16.0M-key build has
/// m_b = 2^24 and used to grow on its first insert); the next one does.
#[test]
fn power_of_two_bulk_build_keeps_its_real_capacity() {
    for n in [2_500u64, 5_000, 40_000] {
        let opts = Options { sizing: Sizing::PowerOfTwo, seed: n, ..Options::default() };
        let mut ctl = Control::from_items_with((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8, opts).unwrap();
        let (ma, mb) = ctl.sizes();
        let real = (mb as u64).min(ma as u64 * 3 / 4);
        assert!(real > n, "n {n}: arrays {ma}+{mb}");
        assert_eq!(ctl.capacity() as u64, real);
        let replica = ctl.export();
        for i in n..real {
            replica.apply(&ctl.insert(&i.to_le_bytes(), i & 0xff).unwrap()).unwrap();
        }
        let s = ctl.stats();
        assert_eq!(s.grow_rebuilds, 0, "n {n}: {s:?}");
        assert_eq!(s.rebuilds, 1 + s.cycle_rebuilds, "only the build and cycle re-seeds: {s:?}");
        assert_eq!(ctl.sizes(), (ma, mb));
        for i in (0..real).step_by(13) {
            assert_eq!(replica.get(&i.to_le_bytes()), Some(i & 0xff));
        }
        // One more key than the arrays hold: a growth rebuild.
        replica.apply(&ctl.insert(&real.to_le_bytes(), 1).unwrap()).unwrap();
        assert_eq!(ctl.stats().grow_rebuilds, 1);
        assert_eq!(replica.get(&real.to_le_bytes()), Some(1));
    }
}
