//! FHT: oracle property tests (several layouts, tiny fingerprints, both lookup
//! orders, growth), distributed forwarding, concurrency, corruption, edge cases.

use keyplane::conformance::{self, KeyShape, OracleConfig, StressConfig};
use keyplane::fht::{Control, Delta, Lookup, LookupOrder, Options};
use keyplane::lineage::DeltaInfo;
use keyplane::{ControlTable, Error, LookupTable, Wire, name};
use std::collections::HashMap;

keyplane::configured_table!(MainFirst, Control, Options { order: LookupOrder::MainFirst, ..Options::default() });
keyplane::configured_table!(Tiny1, Control, Options::with_fingerprint_bits(1));
keyplane::configured_table!(
    Tiny3,
    Control,
    Options { fingerprint_bits: 3, order: LookupOrder::MainFirst, ..Options::default() }
);
keyplane::configured_table!(Tiny4, Control, Options::with_fingerprint_bits(4));
keyplane::configured_table!(
    OneSlot,
    Control,
    Options { subtables: 1, bucket_entries: 1, fingerprint_bits: 6, max_load: 1.0, ..Options::default() }
);
keyplane::configured_table!(
    Full,
    Control,
    Options {
        subtables: 2,
        bucket_entries: 2,
        fingerprint_bits: 8,
        max_load: 1.0,
        order: LookupOrder::MainFirst,
        ..Options::default()
    }
);

#[test]
fn oracle_main_first_order() {
    for seed in 0..2 {
        let cfg = OracleConfig { seed, ops: 20_000, key_space: 3_000, ..Default::default() };
        conformance::oracle_run::<MainFirst>(&cfg).unwrap();
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
    conformance::oracle_run::<MainFirst>(&OracleConfig { seed: 12, ..cfg }).unwrap();
}

#[test]
fn oracle_forced_fingerprint_collisions() {
    // 1-, 3- and 4-bit fingerprints: most names collide and live in the CT,
    // groups are promoted and demoted all the time.
    let cfg = OracleConfig { ops: 15_000, key_space: 2_000, check_every: 1_500, ..Default::default() };
    conformance::oracle_run::<Tiny1>(&cfg).unwrap();
    conformance::oracle_run::<Tiny3>(&OracleConfig { seed: 2, ..cfg.clone() }).unwrap();
    conformance::oracle_run::<Tiny4>(&OracleConfig { seed: 3, ..cfg.clone() }).unwrap();
    // One entry per bucket, one subtable, 100 % load: bucket overflows.
    conformance::oracle_run::<OneSlot>(&OracleConfig { seed: 4, ..cfg.clone() }).unwrap();
    conformance::oracle_run::<Full>(&OracleConfig { seed: 5, ..cfg }).unwrap();
}

#[test]
fn tiny_fingerprints_fill_the_collision_table_and_stay_exact() {
    let names: Vec<Vec<u8>> = (0..5_000).map(|i| name::generate(i, 1, 3)).collect();
    for order in [LookupOrder::CollisionTableFirst, LookupOrder::MainFirst] {
        let opts = Options { fingerprint_bits: 2, order, ..Options::default() };
        let ctl =
            Control::from_items_with(names.iter().enumerate().map(|(i, n)| (n, i as u64 & 0xff)), 8, opts).unwrap();
        // With 3 fingerprint values per bucket number, a large share collides.
        assert!(ctl.stats().collisions > 500, "{:?}", ctl.stats());
        assert!(ctl.collision_table_entries() as u64 >= ctl.stats().collisions);
        let t = ctl.export();
        assert_eq!(t.collision_table_entries(), ctl.collision_table_entries());
        for (i, n) in names.iter().enumerate() {
            assert_eq!(t.get(n), Some(i as u64 & 0xff));
        }
        // Main-only lookups (CT offloaded) are right for main-table names only.
        let wrong = names.iter().enumerate().filter(|(i, n)| t.get_main_only(n) != Some(*i as u64 & 0xff)).count();
        assert!(wrong > 0 && wrong <= ctl.collision_table_entries());
        // Alien names that hit a flagged (main-first) group read None: the
        // group's names are all in the CT.
        let aliens: Vec<Vec<u8>> = (0..2_000).map(|i| name::generate(i + (1 << 40), 1, 3)).collect();
        let none = aliens.iter().filter(|a| t.get(a).is_none()).count();
        let mut out = vec![None; aliens.len()];
        t.get_batch(&aliens.iter().map(|a| a.as_slice()).collect::<Vec<_>>(), &mut out);
        assert_eq!(out.iter().filter(|o| o.is_none()).count(), none);
        if order == LookupOrder::MainFirst {
            assert!(none > 1_000, "{none} of 2000 aliens rejected");
        }
    }
}

#[test]
fn real_domain_names_from_the_public_suffix_list_sample() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/psl_sample.dat")).unwrap();
    let names = name::load_domain_list(&text);
    assert!(names.len() > 2_000, "{}", names.len());
    let mut ctl = Control::from_items(names.iter().enumerate().map(|(i, n)| (n, i as u64 % 48)), 6).unwrap();
    let t = ctl.export();
    for (i, n) in names.iter().enumerate() {
        assert_eq!(t.get(n), Some(i as u64 % 48));
    }
    // Delete every third name, change the others, through deltas.
    let replica = Lookup::from_bytes(&t.to_bytes()).unwrap();
    for (i, n) in names.iter().enumerate() {
        let d = if i % 3 == 0 { ctl.remove(n).unwrap().unwrap() } else { ctl.insert(n, 47 - i as u64 % 48).unwrap() };
        replica.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
    }
    for (i, n) in names.iter().enumerate() {
        if i % 3 != 0 {
            assert_eq!(replica.get(n), Some(47 - i as u64 % 48));
        }
    }
}

#[test]
fn distributed_share_recognises_every_unstored_name() {
    // R = 60,000 names; this router stores a 25 % share.
    let r: Vec<Vec<u8>> = (0..60_000).map(|i| name::generate(i, 0, 9)).collect();
    let (stored, rest): (Vec<_>, Vec<_>) = r.iter().enumerate().partition(|(i, _)| i % 4 == 0);
    let stored: Vec<(&Vec<u8>, u64)> = stored.into_iter().map(|(i, n)| (n, (i as u64 / 4) & 0xff)).collect();
    let rest: Vec<&Vec<u8>> = rest.into_iter().map(|(_, n)| n).collect();
    for w in [8u32, 12] {
        let opts = Options::with_fingerprint_bits(w);
        let plain = Control::from_items_with(stored.iter().copied(), 8, opts).unwrap();
        let share = Control::for_share(stored.iter().copied(), rest.iter(), 8, opts).unwrap();
        // Without markers, R − R_S names hit at the designed alien rate.
        let pt = plain.export();
        let hits = rest.iter().filter(|n| pt.get(n).is_some()).count() as f64 / rest.len() as f64;
        let want = plain.expected_alien_match_rate();
        assert!((hits - want).abs() < want * 0.25 + 0.002, "w={w}: alien rate {hits} vs designed {want}");
        // With markers: every name of R − R_S reads None, every stored name its value.
        let t = share.export();
        for n in &rest {
            assert_eq!(t.get(n), None, "w={w}");
        }
        for (n, v) in &stored {
            assert_eq!(t.get(n), Some(*v));
        }
        // Markers ≈ |R − R_S| · designed rate; memory ≈ plain table + markers.
        let m = share.not_stored_markers() as f64;
        let expect = rest.len() as f64 * want;
        assert!((m - expect).abs() < expect * 0.3 + 10.0, "w={w}: {m} markers vs {expect}");
        assert_eq!(share.shape(), plain.shape());
        // Names outside R still match at the designed rate.
        let alien =
            (0..40_000).filter(|&i| t.get(&name::generate(i + (1 << 40), 0, 77)).is_some()).count() as f64 / 40_000.0;
        assert!((alien - want).abs() < want * 0.3 + 0.002, "w={w}: {alien} vs {want}");
    }
}

#[test]
fn distributed_share_stays_exact_under_updates() {
    let r: Vec<Vec<u8>> = (0..8_000).map(|i| name::generate(i, 1, 5)).collect();
    let opts = Options::with_fingerprint_bits(4); // many markers
    let mut stored: HashMap<Vec<u8>, u64> = r.iter().take(2_000).map(|n| (n.clone(), 1)).collect();
    let mut ctl = Control::for_share(stored.iter().map(|(k, v)| (k, *v)), r[2_000..].iter(), 8, opts).unwrap();
    let t = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    let mut rng = conformance::Rng::new(3);
    for step in 0..6_000 {
        let n = &r[rng.below(r.len() as u64) as usize];
        let d = match rng.below(3) {
            0 => {
                let v = rng.below(256);
                stored.insert(n.clone(), v);
                Some(ctl.insert(n, v).unwrap())
            }
            1 => {
                stored.remove(n);
                let d = ctl.remove(n).unwrap();
                if let Some(d) = d {
                    t.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
                }
                Some(ctl.mark_not_stored(n).unwrap())
            }
            _ => {
                if stored.contains_key(n) {
                    assert!(ctl.mark_not_stored(n).is_err());
                    None
                } else {
                    Some(ctl.mark_not_stored(n).unwrap())
                }
            }
        };
        if let Some(d) = d {
            t.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        }
        if step % 1_000 == 999 {
            for n in &r {
                assert_eq!(t.get(n), stored.get(n).copied(), "step {step}");
            }
            assert_eq!(t.to_bytes(), ctl.export().to_bytes(), "replica is the export, bit for bit");
        }
    }
    let m = ctl.not_stored_len();
    let some = r.iter().find(|n| !stored.contains_key(*n)).unwrap().clone();
    t.apply(&ctl.forget_not_stored(&some).unwrap()).unwrap();
    assert_eq!(ctl.not_stored_len(), m - 1);
    assert!(ctl.forget_not_stored(&some).is_none());
}

#[test]
fn memory_per_name_matches_the_formula() {
    let n = 200_000u64;
    for (w, l) in [(12u32, 8u32), (16, 8), (24, 8)] {
        let ctl = Control::from_items_with(
            (0..n).map(|i| (name::generate(i, 0, 1), i & 0xff)),
            l,
            Options::with_fingerprint_bits(w),
        )
        .unwrap();
        let t = ctl.export();
        let main_bits = t.main_table_bytes() as f64 * 8.0 / n as f64;
        let want = (w + l) as f64 / 0.93;
        assert!((main_bits - want).abs() / want < 0.02, "w={w}: {main_bits} bits/name vs {want}");
        // The CT is tiny at these widths: collisions ≈ n · 29.8 / 2^(w+1).
        let expect_coll = n as f64 * 0.93 * 32.0 / 2.0 / (1u64 << w) as f64;
        let got = ctl.stats().collisions as f64;
        assert!(got < expect_coll * 1.6 + 30.0, "w={w}: {got} collisions, expected ~{expect_coll}");
        assert!(ctl.main_entries() + ctl.collision_table_entries() >= n as usize);
    }
}

#[test]
fn concurrent_readers_main_first_and_tiny_fingerprints() {
    conformance::stress::<MainFirst>(&StressConfig { updates: 200_000, ..Default::default() }).unwrap();
    conformance::stress::<Tiny3>(&StressConfig { updates: 20_000, stable: 1_000, churn: 1_000, ..Default::default() })
        .unwrap();
}

#[test]
fn structure_delta_kinds_reject_corruption() {
    let opts = Options { fingerprint_bits: 3, ..Options::default() };
    let mut ctl = Control::from_items_with((0..300u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, opts).unwrap();
    assert!(ctl.collision_table_entries() > 0);
    let blob = ctl.export().to_bytes();
    conformance::corruption_sweep::<Lookup>(&blob, 3_000, 1).unwrap();
    let d = ctl.insert(b"new key", 9).unwrap();
    conformance::corruption_sweep::<Delta>(&d.to_bytes(), 2_000, 2).unwrap();
    // A delta with CT traffic (a collision group member removed).
    let mut with_ct = None;
    for i in 0..300u64 {
        let d = ctl.remove(&i.to_le_bytes()).unwrap().unwrap();
        if d.ct_entries_touched() > 0 {
            with_ct = Some(d);
            break;
        }
    }
    conformance::corruption_sweep::<Delta>(&with_ct.unwrap().to_bytes(), 2_000, 3).unwrap();
    let share = Control::for_share([(b"a", 1)], [b"b", b"c"], 8, Options::with_fingerprint_bits(1)).unwrap();
    conformance::corruption_sweep::<Lookup>(&share.export().to_bytes(), 1_000, 4).unwrap();
}

#[test]
fn structure_edge_cases() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    assert!(ctl.is_empty());
    assert_eq!(ctl.get(b""), None);
    let t = ctl.export();
    assert_eq!(t.get(b"anything"), None, "an empty table stores no fingerprint");
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    assert_eq!(t.get(b""), Some(1));
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.slots_touched() + d.ct_entries_touched(), 0);
    t.apply(&d).unwrap();
    assert!(matches!(Control::with_value_bits(49), Err(Error::InvalidValueBits { .. })));
    let mut wide = Control::with_value_bits(48).unwrap();
    let w = wide.export();
    w.apply(&wide.insert(b"max", (1 << 48) - 1).unwrap()).unwrap();
    assert_eq!(w.get(b"max"), Some((1 << 48) - 1));
    let mut w32 = Control::with_options(32, Options::with_fingerprint_bits(32)).unwrap();
    let t32 = w32.export();
    t32.apply(&w32.insert(b"k", u32::MAX as u64).unwrap()).unwrap();
    assert_eq!(t32.get(b"k"), Some(u32::MAX as u64));
    for bad in [
        Options { subtables: 0, ..Options::default() },
        Options { subtables: 9, ..Options::default() },
        Options { bucket_entries: 0, ..Options::default() },
        Options { fingerprint_bits: 0, ..Options::default() },
        Options { fingerprint_bits: 33, ..Options::default() },
        Options { max_load: 0.0, ..Options::default() },
        Options { max_load: 1.5, ..Options::default() },
    ] {
        assert!(Control::with_options(8, bad).is_err(), "{bad:?}");
    }
    let d = ctl.remove(b"").unwrap().unwrap();
    t.apply(&d).unwrap();
    assert!(ctl.is_empty());
    assert_eq!(t.get(b""), None);
    assert_eq!(ctl.expected_alien_match_rate(), 0.0, "an empty table matches no alien name");
}

#[test]
fn deltas_stay_small_and_alien_names_mostly_miss() {
    let mut ctl = Control::from_items((0..100_000u64).map(|i| (name::generate(i, 0, 2), i & 0xff)), 8).unwrap();
    let t = ctl.export();
    let mut total = 0;
    for i in 0..1000u64 {
        let d = ctl.insert(&name::generate(i * 7, 0, 2), (i + 1) & 0xff).unwrap();
        assert!(!d.is_rebuild());
        total += d.to_bytes().len();
        t.apply(&d).unwrap();
    }
    assert!(total / 1000 < 80, "average value-change delta {} bytes", total / 1000);
    let fp = (0..100_000).filter(|&i| t.get(&name::generate(i + (1 << 40), 0, 99)).is_some()).count() as f64 / 1e5;
    let want = ctl.expected_alien_match_rate();
    assert!(fp < want * 1.5 + 1e-4, "alien rate {fp} vs {want}");
}

/// Every entry width of 8-entry buckets around the specialised decoders
/// (8..=32 bits) and past them, both lookup orders, subtables 1..=4: every
/// stored name answers its value through `get`, `get_batch` and a reader,
/// and names never inserted mostly miss.
#[test]
fn every_entry_width_decodes() {
    use keyplane::ReadHandle;
    let names: Vec<Vec<u8>> = (0..3_000u64).map(|i| name::generate(i, (i % 3) as usize, 1)).collect();
    for (fbits, vbits) in
        [(1, 7), (2, 6), (4, 4), (7, 9), (12, 8), (16, 8), (15, 16), (20, 12), (24, 8), (16, 17), (30, 20)]
    {
        for order in [LookupOrder::CollisionTableFirst, LookupOrder::MainFirst] {
            for d in [1, 4] {
                let opts = Options { fingerprint_bits: fbits, order, subtables: d, ..Options::default() };
                let vm = (1u64 << vbits) - 1;
                let items = names.iter().enumerate().map(|(i, n)| (n.as_slice(), (i as u64 * 7919) & vm));
                let t = Control::from_items_with(items, vbits, opts).unwrap().export();
                let refs: Vec<&[u8]> = names.iter().map(|n| n.as_slice()).collect();
                let mut out = vec![None; refs.len()];
                t.get_batch(&refs, &mut out);
                let rd = t.reader();
                for (i, n) in names.iter().enumerate() {
                    let want = Some((i as u64 * 7919) & vm);
                    assert_eq!(t.get(n), want, "w={fbits} v={vbits} {order:?} d={d} name #{i}");
                    assert_eq!(out[i], want);
                    assert_eq!(rd.get(n), want);
                }
                if fbits >= 12 {
                    let hits = (0..2_000u64).filter(|&i| t.get(&name::generate(1 << 40 | i, 1, 2)).is_some()).count();
                    assert!(hits < 100, "w={fbits}: {hits} of 2000 alien names hit");
                }
            }
        }
    }
}
