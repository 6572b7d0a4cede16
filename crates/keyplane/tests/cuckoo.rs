//! Concurrent (2,4) cuckoo map: oracle runs, shared-table and replica
//! stress, stash and resize, an interleaving test of the read protocol,
//! corruption, edge cases.

use keyplane::conformance::{self, KeyShape};
use keyplane::cuckoo::{Control, Delta, Lookup, Options, ValueLayout};
use keyplane::ext::wire::Kind;
use keyplane::hash::{hash64, hi, lo, reduce};
use keyplane::lineage::DeltaInfo;
use keyplane::{ControlTable, LookupTable, Wire};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Oracle run with explicit options; the delta-fed replica must be
/// bit-for-bit the writer's table, and reader handles must agree.
fn oracle_with(opts: Options, bits: u32, seed: u64, ops: usize, space: u64) -> Control {
    let mut rng = conformance::Rng::new(seed);
    let vm = keyplane::mask(bits);
    let mut ctl = Control::with_options(bits, opts).unwrap();
    let reader = ctl.reader();
    let replica = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    let replica_reader = replica.reader();
    let mut oracle = HashMap::new();
    for step in 0..ops {
        let k = conformance::make_key(KeyShape::Mixed, rng.below(space));
        if rng.chance(0.3) {
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
        assert_eq!(reader.get(&k), oracle.get(&k).copied(), "step {step}");
        if step % 2_000 == 0 || step + 1 == ops {
            assert_eq!(reader.len(), oracle.len());
            for (k, v) in &oracle {
                assert_eq!(replica.get(k), Some(*v), "step {step}");
                assert_eq!(reader.get(k), Some(*v), "step {step}");
                assert_eq!(replica_reader.get(k), Some(*v), "step {step}");
            }
            assert_eq!(replica.to_bytes(), ctl.export().to_bytes(), "step {step}: replica differs from the writer");
        }
    }
    ctl
}

#[test]
fn oracle_separate_value_array() {
    oracle_with(Options { values: ValueLayout::Separate, ..Options::default() }, 8, 3, 20_000, 4_000);
    oracle_with(Options { values: ValueLayout::Separate, ..Options::default() }, 64, 4, 10_000, 2_000);
}

#[test]
fn oracle_interleaved_grows_from_empty() {
    let ctl = oracle_with(Options::default(), 12, 5, 30_000, 20_000);
    let s = ctl.stats();
    assert!(s.grows >= 5, "{s:?}");
    assert!(s.moves > 0, "cuckoo displacements must have happened: {s:?}");
}

#[test]
fn interleaved_refuses_wide_values() {
    assert!(Control::with_options(49, Options { values: ValueLayout::Interleaved, ..Options::default() }).is_err());
    assert!(Control::with_options(48, Options { values: ValueLayout::Interleaved, ..Options::default() }).is_ok());
}

/// Keys whose two candidate buckets are exactly {`a`, `b`} in a table of `nb` buckets.
fn colliding_keys(seed: u64, nb: u32, count: usize) -> Vec<[u8; 8]> {
    let mut out = Vec::new();
    let mut i = 0u64;
    let mut pair = None;
    while out.len() < count {
        let k = i.to_le_bytes();
        i += 1;
        let h = hash64(&k, seed);
        let b1 = reduce(lo(h), nb);
        let mut b2 = reduce(hi(h), nb);
        if b2 == b1 {
            b2 = if b1 + 1 == nb { 0 } else { b1 + 1 };
        }
        let p = (b1.min(b2), b1.max(b2));
        match pair {
            None => {
                pair = Some(p);
                out.push(k);
            }
            Some(q) if q == p => out.push(k),
            _ => {}
        }
    }
    out
}

#[test]
fn stash_takes_keys_without_a_cuckoo_path_and_drains_back() {
    // 12 keys sharing the same two buckets: 8 fit, 4 have no cuckoo path.
    let base: Vec<(Vec<u8>, u64)> = (0..400u64).map(|i| ((i | 1 << 40).to_le_bytes().to_vec(), i & 0xff)).collect();
    let mut ctl = Control::from_items(base.clone(), 8).unwrap();
    let nb = ctl.buckets() as u32;
    let seed = ctl.seed();
    let keys = colliding_keys(seed, nb, 12);
    let replica = ctl.export();
    let mut oracle: HashMap<Vec<u8>, u64> = base.into_iter().collect();
    for (i, k) in keys.iter().enumerate() {
        oracle.insert(k.to_vec(), i as u64);
        replica.apply(&ctl.insert(k, i as u64).unwrap()).unwrap();
    }
    // The colliding pair may already hold base keys, so at least 4 are stashed.
    assert!(ctl.stash_len() >= 4, "stash {}", ctl.stash_len());
    assert_eq!(ctl.buckets() as u32, nb, "no resize needed");
    assert!(ctl.stats().stashed >= 4);
    let reader = ctl.reader();
    for (k, v) in &oracle {
        assert_eq!(reader.get(k), Some(*v));
        assert_eq!(replica.get(k), Some(*v));
    }
    let refs: Vec<&[u8]> = oracle.keys().map(|k| k.as_slice()).collect();
    let mut out = vec![None; refs.len()];
    reader.get_batch(&refs, &mut out);
    for (k, o) in refs.iter().zip(&out) {
        assert_eq!(*o, Some(oracle[*k]));
    }
    assert_eq!(reader.get(b"absent!"), None);
    // Removing keys of the pair makes room: stashed keys move back.
    let before = ctl.stash_len();
    for k in &keys[..4] {
        oracle.remove(k.as_slice());
        replica.apply(&ctl.remove(k).unwrap().unwrap()).unwrap();
    }
    assert!(ctl.stash_len() < before, "stash drained: {} -> {}", before, ctl.stash_len());
    for (k, v) in &oracle {
        assert_eq!(replica.get(k), Some(*v));
    }
    assert_eq!(replica.to_bytes(), ctl.export().to_bytes());
    // Filling the stash completely forces a resize, never a lost key.
    let more = colliding_keys(seed, nb, 40);
    for (i, k) in more.iter().enumerate() {
        oracle.insert(k.to_vec(), (i as u64 + 100) & 0xff);
        replica.apply(&ctl.insert(k, (i as u64 + 100) & 0xff).unwrap()).unwrap();
    }
    assert!(ctl.stats().grows >= 1);
    for (k, v) in &oracle {
        assert_eq!(ctl.get(k), Some(*v));
        assert_eq!(replica.get(k), Some(*v));
    }
    assert_eq!(replica.to_bytes(), ctl.export().to_bytes());
}

#[test]
fn high_load_inserts_use_bfs_paths() {
    // Bulk sized for 90 % load, then inserts up to the 95 % growth point.
    let n = 90_000u64;
    let mut ctl = Control::from_items((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let cap = ctl.capacity() as u64;
    let replica = ctl.export();
    let target = cap * 94 / 100;
    for i in n..target {
        replica.apply(&ctl.insert(&i.to_le_bytes(), i & 0xff).unwrap()).unwrap();
    }
    assert_eq!(ctl.capacity() as u64, cap, "no growth below 95 %");
    assert!(ctl.load_factor() > 0.93);
    assert!(ctl.stats().moves > 1000, "{:?}", ctl.stats());
    for i in 0..target {
        assert_eq!(replica.get(&i.to_le_bytes()), Some(i & 0xff));
    }
    assert_eq!(replica.to_bytes(), ctl.export().to_bytes());
}

/// Readers on the writer's own table (reader handles) verify stable keys,
/// single and batched, while the writer inserts, overwrites and deletes
/// millions of other keys at high load — cuckoo displacements, stash use
/// and resizes included — and a delta-fed replica is read concurrently too.
#[test]
fn shared_table_readers_during_heavy_churn() {
    // Stable keys never start with 0xEE; churned keys always do.
    let stable: Vec<(Vec<u8>, u64)> = (0..30_000u64)
        .map(|i| (conformance::make_key(KeyShape::Mixed, i + 1), keyplane::hash::mix64(i) & 0xffff))
        .filter(|(k, _)| k.first() != Some(&0xEE))
        .collect::<HashMap<_, _>>() // make_key repeats short keys: keep one value per key
        .into_iter()
        .collect();
    let churn_key = |x: u64| {
        let mut k = vec![0xEE];
        k.extend_from_slice(&conformance::make_key(KeyShape::Mixed, x + 1)[..]);
        k
    };
    let mut ctl = Control::from_items(stable.clone(), 16).unwrap();
    let replica = Arc::new(ctl.export());
    let stable = Arc::new(stable);
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for t in 0..2u64 {
        let (reader, replica, stable, stop) = (ctl.reader(), replica.clone(), stable.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut rng = conformance::Rng::new(t + 5);
            let mut n = 0u64;
            let mut out = vec![None; 13];
            while !stop.load(Ordering::Relaxed) {
                let (k, v) = &stable[rng.below(stable.len() as u64) as usize];
                assert_eq!(reader.get(k), Some(*v), "shared table, key {k:02x?}");
                assert_eq!(replica.get(k), Some(*v), "replica, key {k:02x?}");
                let idx: Vec<usize> = (0..13).map(|_| rng.below(stable.len() as u64) as usize).collect();
                let keys: Vec<&[u8]> = idx.iter().map(|&i| stable[i].0.as_slice()).collect();
                reader.get_batch(&keys, &mut out);
                for (&i, o) in idx.iter().zip(&out) {
                    assert_eq!(*o, Some(stable[i].1), "batch, shared table");
                }
                replica.get_batch(&keys, &mut out);
                for (&i, o) in idx.iter().zip(&out) {
                    assert_eq!(*o, Some(stable[i].1), "batch, replica");
                }
                n += 1;
            }
            n
        }));
    }
    let mut rng = conformance::Rng::new(77);
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut updates = 0u64;
    while updates < 1_500_000 {
        let op = rng.below(10);
        let d = if op < 5 || live.len() < 1000 {
            let k = churn_key(rng.below(1 << 30));
            if ctl.get(&k).is_none() {
                live.push(k.clone());
            }
            Some(ctl.insert(&k, rng.next_u64() & 0xffff).unwrap())
        } else if op < 6 {
            let k = &live[rng.below(live.len() as u64) as usize];
            Some(ctl.insert(k, rng.next_u64() & 0xffff).unwrap())
        } else {
            let i = rng.below(live.len() as u64) as usize;
            let k = live.swap_remove(i);
            ctl.remove(&k).unwrap()
        };
        if let Some(d) = d {
            replica.apply(&d).unwrap();
            updates += 1;
        }
        if live.len() > 150_000 {
            // Shrink back to keep churning at high load.
            for k in live.drain(..100_000) {
                if let Some(d) = ctl.remove(&k).unwrap() {
                    replica.apply(&d).unwrap();
                    updates += 1;
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        assert!(h.join().expect("reader panicked") > 0);
    }
    let s = ctl.stats();
    assert!(s.moves > 10_000 && s.grows > 0, "{s:?}");
    for (k, v) in stable.iter() {
        assert_eq!(replica.get(k), Some(*v));
    }
    for k in &live {
        assert_eq!(replica.get(k), ctl.get(k));
        assert!(ctl.get(k).is_some());
    }
    assert_eq!(replica.len(), ctl.len());
}

/// Interleaving test of the read protocol on a tiny, nearly full table
/// (16 buckets): the writer keeps inserting and removing keys between 89 %
/// and 94 % load, so nearly every insert runs a BFS path and displaces
/// resident keys between their two buckets; readers check every resident
/// key, single and batched, on every pass.
#[test]
fn displacements_on_a_tiny_table_never_hide_a_key() {
    let resident: Vec<([u8; 8], u64)> = (0..57u64).map(|i| ((i + (1 << 50)).to_le_bytes(), i + 1)).collect();
    let mut ctl = Control::from_items(resident.clone(), 8).unwrap();
    assert_eq!(ctl.buckets(), 16);
    let replica = Arc::new(ctl.export());
    let stop = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let (stop, reader, replica, resident) = (stop.clone(), ctl.reader(), replica.clone(), resident.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                let mut out = vec![None; resident.len()];
                let keys: Vec<&[u8]> = resident.iter().map(|(k, _)| k.as_slice()).collect();
                while !stop.load(Ordering::Relaxed) {
                    for (k, v) in &resident {
                        assert_eq!(reader.get(k), Some(*v));
                        assert_eq!(replica.get(k), Some(*v));
                    }
                    reader.get_batch(&keys, &mut out);
                    for ((_, v), o) in resident.iter().zip(&out) {
                        assert_eq!(*o, Some(*v));
                    }
                    replica.get_batch(&keys, &mut out);
                    for ((_, v), o) in resident.iter().zip(&out) {
                        assert_eq!(*o, Some(*v));
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut rng = conformance::Rng::new(1);
    for round in 0..100_000u64 {
        let keys: Vec<[u8; 8]> = (0..3).map(|j| (round * 4 + j).to_le_bytes()).collect();
        for k in &keys {
            replica.apply(&ctl.insert(k, rng.next_u64() & 0xff).unwrap()).unwrap();
        }
        for k in &keys {
            replica.apply(&ctl.remove(k).unwrap().unwrap()).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        assert!(h.join().unwrap() > 0);
    }
    let s = ctl.stats();
    assert_eq!(ctl.buckets(), 16, "never grew: {s:?}");
    assert!(s.moves > 10_000, "{s:?}");
}

#[test]
fn garbage_deltas_never_panic_and_never_break_valid_keys_silently() {
    // Structurally valid deltas with random contents: applying them either
    // fails or writes well-formed slots; nothing panics.
    let ctl = Control::from_items((0..200u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let mut rng = conformance::Rng::new(9);
    for _ in 0..3_000 {
        let t = ctl.export();
        let mut w = keyplane::ext::wire::Writer::new(Kind::CuckooDelta);
        let id = ctl.table_id().as_u128();
        w.u64(id as u64).u64((id >> 64) as u64).u64(1).u8(0).u64(ctl.seed()).varint(1);
        match rng.below(3) {
            0 => {
                w.u8(2).varint(1).varint(rng.below(300)).u64(rng.next_u64()).u64(rng.next_u64() | 1 << 63).varint(0);
            }
            1 => {
                w.u8(1).varint(rng.below(3)).varint(3).u64(rng.below(20)).u64(rng.next_u64()).u64(rng.next_u64());
            }
            _ => {
                w.u8(3).u8(rng.below(2) as u8).u32(rng.below(100) as u32).u32(rng.below(1000) as u32);
            }
        }
        if let Ok(d) = Delta::from_bytes(&w.finish()) {
            let _ = t.apply(&d);
            let _ = t.get(b"x");
            let _ = Lookup::from_bytes(&t.to_bytes());
        }
    }
}

#[test]
fn no_op_deltas_wide_values_and_long_keys() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    let t = ctl.export();
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    // Same value again: a delta that touches no slot.
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.slots_touched(), 0);
    t.apply(&d).unwrap();
    // 64-bit values live in the separate value array.
    assert!(Control::with_value_bits(64).unwrap().export().separate_values());
    // Long keys up to the limit; longer ones are refused.
    let mut c = Control::with_value_bits(8).unwrap();
    let e = c.export();
    let long = vec![7u8; keyplane::cuckoo::MAX_KEY_LEN];
    e.apply(&c.insert(&long, 3).unwrap()).unwrap();
    assert_eq!(e.get(&long), Some(3));
    assert!(c.insert(&vec![7u8; keyplane::cuckoo::MAX_KEY_LEN + 1], 1).is_err());
    // Bulk load repeating one out-of-line key.
    let dup = Control::from_items((0..5_000u64).map(|i| (b"one long repeated key".to_vec(), i & 7)), 4).unwrap();
    assert_eq!(dup.len(), 1);
    let blob = dup.export().to_bytes();
    assert_eq!(Lookup::from_bytes(&blob).unwrap().get(b"one long repeated key"), Some(4999 & 7));
    // The lookup form's own key count.
    t.apply(&ctl.remove(b"").unwrap().unwrap()).unwrap();
    assert!(t.is_empty());
}

#[test]
fn memory_is_one_cache_line_per_four_slots() {
    let n = 100_000u64;
    let ctl = Control::from_items((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let t = ctl.export();
    let per_key = t.memory_bytes() as f64 / n as f64;
    // 16 bytes per slot at ≥ 85 % load (bulk builds fill 90 %).
    assert!(per_key < 16.0 / 0.85, "{per_key} bytes per key");
    assert!(ctl.load_factor() > 0.85);
}

#[test]
fn delta_sizes_stay_small_for_incremental_updates() {
    // At 90 % load many inserts displace keys; deltas still carry only the
    // touched slots.
    let mut ctl = Control::from_items((0..100_000u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let (mut total, mut count, mut moves) = (0usize, 0usize, 0usize);
    for i in 0..2_000u64 {
        let d = ctl.insert(&(i + (1 << 40)).to_le_bytes(), i & 0xff).unwrap();
        if !d.is_rebuild() {
            total += d.to_bytes().len();
            count += 1;
            moves += d.moves();
        }
    }
    let avg = total as f64 / count as f64;
    assert!(moves > 100, "{moves} displacements");
    assert!(avg < 200.0, "average insert delta {avg} bytes");
    let d = ctl.remove(&5u64.to_le_bytes()).unwrap().unwrap();
    assert!(d.to_bytes().len() < 100);
}

#[test]
fn arena_garbage_is_reclaimed_by_compaction() {
    // Long keys churned through a small table: removed entries leave arena
    // garbage that only a compaction (rebuild at the same size) reclaims.
    let mut ctl = Control::with_value_bits(8).unwrap();
    let replica = ctl.export();
    let key = |i: u64| format!("a rather long key number {i:010}").into_bytes();
    for i in 0..20_000u64 {
        replica.apply(&ctl.insert(&key(i), i & 0xff).unwrap()).unwrap();
        if i >= 10 {
            replica.apply(&ctl.remove(&key(i - 10)).unwrap().unwrap()).unwrap();
        }
    }
    let s = ctl.stats();
    assert!(s.compactions > 10, "{s:?}");
    assert_eq!(ctl.len(), 10);
    assert!(ctl.memory_bytes() < 64 << 10, "{} bytes for 10 keys", ctl.memory_bytes());
    for i in 19_990..20_000 {
        assert_eq!(replica.get(&key(i)), Some(i & 0xff));
    }
    assert_eq!(replica.get(&key(5)), None);
    assert_eq!(replica.to_bytes(), ctl.export().to_bytes());
}

#[test]
fn mass_removal_shrinks_the_table() {
    let mut ctl = Control::from_items((0..50_000u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let replica = ctl.export();
    let reader = ctl.reader();
    let big = ctl.buckets();
    for i in 100..50_000u64 {
        replica.apply(&ctl.remove(&i.to_le_bytes()).unwrap().unwrap()).unwrap();
    }
    let s = ctl.stats();
    assert!(s.shrinks >= 4, "{s:?}");
    assert!(ctl.buckets() * 16 <= big, "{} buckets, started with {big}", ctl.buckets());
    assert!(ctl.load_factor() >= 0.2, "shrinks keep the load at or above 20 %");
    for i in 0..50_000u64 {
        let want = (i < 100).then_some(i & 0xff);
        assert_eq!(reader.get(&i.to_le_bytes()), want);
        assert_eq!(replica.get(&i.to_le_bytes()), want);
    }
    assert_eq!(replica.to_bytes(), ctl.export().to_bytes());
    // Growing again after shrinking.
    for i in 100..20_000u64 {
        replica.apply(&ctl.insert(&i.to_le_bytes(), 1).unwrap()).unwrap();
    }
    assert!(ctl.stats().grows > s.grows);
    assert_eq!(replica.to_bytes(), ctl.export().to_bytes());
}
