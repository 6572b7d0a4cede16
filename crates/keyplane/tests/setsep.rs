//! SetSep-specific tests: x+y configurations, forced fallback, repairs,
//! balanced bulk loads, fallback groups under concurrent readers, fallback and
//! growth deltas under corruption. The checks every structure passes are the
//! conformance suite (`conformance.rs`).

use keyplane::conformance::{self, OracleConfig, StressConfig};
use keyplane::lineage::DeltaInfo;
use keyplane::setsep::{Control, Delta, Lookup, Options};
use keyplane::{ControlTable, Error, LookupTable, Wire};
use std::collections::HashMap;

keyplane::configured_table!(Cfg8p16, Control, Options::with_bits(8, 16));
keyplane::configured_table!(Cfg16p16, Control, Options::with_bits(16, 16));
keyplane::configured_table!(TwoThreads, Control, Options::default().threads(2));
// Two index bits: only hash indices 0..=2 are tried, so most groups fail.
keyplane::configured_table!(TinyIndex, Control, Options { index_bits: 2, array_bits: 2, ..Options::default() });

#[test]
fn oracle_other_configurations() {
    for (i, bits) in [1u32, 3, 8, 16].into_iter().enumerate() {
        let cfg =
            OracleConfig { value_bits: bits, seed: 10 + i as u64, ops: 6_000, key_space: 2_000, ..Default::default() };
        conformance::oracle_run::<Cfg8p16>(&cfg).unwrap();
        conformance::oracle_run::<Cfg16p16>(&cfg).unwrap();
    }
    let cfg = OracleConfig { value_bits: 5, seed: 20, ops: 6_000, initial: 3_000, ..Default::default() };
    conformance::oracle_run::<TwoThreads>(&cfg).unwrap();
    let cfg = OracleConfig { value_bits: 64, seed: 21, ops: 3_000, key_space: 1_000, ..Default::default() };
    conformance::oracle_run::<Control>(&cfg).unwrap();
}

#[test]
fn oracle_forced_fallback_never_loses_a_key() {
    for (i, bits) in [1u32, 3, 8].into_iter().enumerate() {
        let cfg = OracleConfig {
            value_bits: bits,
            seed: 30 + i as u64,
            ops: 5_000,
            key_space: 2_000,
            initial: 1_500,
            ..Default::default()
        };
        conformance::oracle_run::<TinyIndex>(&cfg).unwrap();
    }
    let opts = Options { index_bits: 2, array_bits: 2, ..Options::default() };
    let ctl = Control::from_items_with((0..5_000u64).map(|i| (i.to_le_bytes(), i % 5)), 3, opts).unwrap();
    assert!(ctl.fallback_ratio() > 0.5, "tiny index range must force fallback: {}", ctl.fallback_ratio());
    let t = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    assert_eq!(t.fallback_size(), ctl.fallback_size());
    for i in 0..5_000u64 {
        assert_eq!(t.get(&i.to_le_bytes()), Some(i % 5));
    }
    // Alien keys of fallback groups are recognised (the fallback stores full keys).
    let alien_none = (0..5_000u64).filter(|i| t.get(&(i + (1 << 40)).to_le_bytes()).is_none()).count();
    assert!(alien_none > 2_500, "{alien_none}");
}

/// Hand-driven replay: the delta replica is bit-for-bit the export, and
/// repairs (local moves, block rebalances) happen and stay correct.
fn replay(opts: Options, bits: u32, initial: u64, ops: usize, seed: u64) -> Control {
    let vm = keyplane::mask(bits);
    let mut oracle: HashMap<Vec<u8>, u64> =
        (0..initial).map(|i| (i.to_le_bytes().to_vec(), keyplane::hash::mix64(i) & vm)).collect();
    let mut ctl = Control::from_items_with(oracle.iter().map(|(k, v)| (k.clone(), *v)), bits, opts).unwrap();
    let replica = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    let mut rng = conformance::Rng::new(seed);
    for step in 0..ops {
        let k = rng.below(initial + initial / 10 + 1).to_le_bytes().to_vec();
        if rng.chance(0.2) {
            let d = ctl.remove(&k).unwrap();
            assert_eq!(d.is_some(), oracle.remove(&k).is_some());
            if let Some(d) = d {
                replica.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
            }
        } else {
            let v = rng.next_u64() & vm;
            oracle.insert(k.clone(), v);
            let d = ctl.insert(&k, v).unwrap();
            replica.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        }
        if step % 2_500 == 0 || step + 1 == ops {
            let fresh = ctl.export();
            for (k, v) in &oracle {
                assert_eq!(replica.get(k), Some(*v), "step {step}");
            }
            assert_eq!(replica.to_bytes(), fresh.to_bytes(), "step {step}");
        }
    }
    ctl
}

#[test]
fn delta_replica_is_the_export_and_repairs_happen() {
    // The default seed of earlier versions: a seed whose run needs no growth.
    let ctl = replay(Options { seed: 0x5e75_e900_5eed, ..Options::default() }, 4, 20_000, 10_000, 1);
    let s = ctl.stats();
    assert_eq!(s.rebuilds, 1, "no growth within 10% more keys: {s:?}");
    assert!(s.local_moves + s.block_rebalances > 0, "{s:?}");
    assert!(s.group_solves > 0);
    // Tight groups: a smaller limit makes repairs frequent.
    let ctl = replay(Options { group_limit: 17, ..Options::default() }, 2, 20_000, 6_000, 2);
    assert!(ctl.stats().block_rebalances > 0, "{:?}", ctl.stats());
    assert!(ctl.max_group_size() <= 24);
    replay(Options { index_bits: 3, array_bits: 4, ..Options::default() }, 3, 5_000, 4_000, 3);
}

#[test]
fn bulk_load_is_balanced_compact_and_thread_independent() {
    let n = 1u64 << 17;
    for bits in [1u32, 4] {
        let items: Vec<([u8; 8], u64)> =
            (0..n).map(|i| (i.to_le_bytes(), keyplane::hash::mix64(i) & keyplane::mask(bits))).collect();
        let seed = Options { seed: 7, ..Options::default() };
        let c1 = Control::from_items_with(items.clone(), bits, seed).unwrap();
        let mut c2 = Control::from_items_with(items.clone(), bits, seed.threads(2)).unwrap();
        c2.set_lineage(c1.lineage());
        let t1 = c1.export();
        assert_eq!(t1.to_bytes(), c2.export().to_bytes(), "construction must not depend on the thread count");
        assert_eq!(c1.blocks() as u64, n / 1024);
        assert!(c1.max_group_size() <= 24, "max group {}", c1.max_group_size());
        assert_eq!(c1.fallback_size(), (0, 0));
        let bpk = t1.memory_bytes() as f64 * 8.0 / n as f64;
        let paper = 0.5 + 1.5 * bits as f64;
        assert!(bpk >= paper && bpk < paper * 1.05, "{bpk} bits/key vs {paper}");
        for (k, v) in &items {
            assert_eq!(t1.get(k), Some(*v));
        }
    }
}

#[test]
fn concurrent_readers_with_fallback_groups() {
    let r = conformance::stress::<TinyIndex>(&StressConfig {
        stable: 3_000,
        churn: 3_000,
        updates: 20_000,
        value_bits: 3,
        ..Default::default()
    })
    .unwrap();
    assert!(r.reads > 0);
}

#[test]
fn fallback_and_growth_deltas_reject_corruption() {
    // Fallback lists in blobs and deltas.
    let opts = Options { index_bits: 2, array_bits: 2, ..Options::default() };
    let mut fb = Control::from_items_with((0..300u64).map(|i| (i.to_le_bytes(), i & 3)), 2, opts).unwrap();
    assert!(fb.fallback_size().0 > 0);
    conformance::corruption_sweep::<Lookup>(&fb.export().to_bytes(), 3_000, 4).unwrap();
    let d = fb.insert(b"fallback key", 1).unwrap();
    conformance::corruption_sweep::<Delta>(&d.to_bytes(), 2_000, 5).unwrap();
    // A whole-table (growth) delta.
    let mut small = Control::with_value_bits(2).unwrap();
    let mut grow = None;
    for i in 0..2_000u64 {
        let d = small.insert(&i.to_le_bytes(), i & 3).unwrap();
        if d.is_rebuild() {
            grow = Some(d);
            break;
        }
    }
    conformance::corruption_sweep::<Delta>(&grow.expect("growth").to_bytes(), 1_000, 6).unwrap();
}

#[test]
fn no_op_deltas_and_option_bounds() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    let t = ctl.export();
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    // Same value again: a delta that touches no group.
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.groups_touched(), 0);
    t.apply(&d).unwrap();
    for bad in [
        Options { index_bits: 0, ..Options::default() },
        Options { index_bits: 25, ..Options::default() },
        Options { array_bits: 6, ..Options::default() },
        Options { balance_runs: 0, ..Options::default() },
    ] {
        assert!(matches!(Control::with_options(4, bad), Err(Error::InvalidParameter(_))), "{bad:?}");
    }
}

#[test]
fn value_changes_and_removes_touch_one_group() {
    let mut ctl = Control::from_items((0..50_000u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let t = ctl.export();
    let mut bytes = 0;
    for i in 0..1_000u64 {
        let d = ctl.insert(&(i * 7).to_le_bytes(), (i + 1) & 0xff).unwrap();
        assert!(d.groups_touched() <= 1 || d.blocks_touched() == 1, "a value change is group-local");
        bytes += d.to_bytes().len();
        t.apply(&d).unwrap();
        let d = ctl.remove(&(i * 7 + 3).to_le_bytes()).unwrap().unwrap();
        assert_eq!(d.groups_touched(), 0, "a solved group stays solved without a key");
        t.apply(&d).unwrap();
    }
    assert!(bytes / 1_000 < 120, "average value-change delta {} bytes", bytes / 1_000);
    for i in 0..50_000u64 {
        if let Some(v) = ctl.get(&i.to_le_bytes()) {
            assert_eq!(t.get(&i.to_le_bytes()), Some(v));
        }
    }
}
