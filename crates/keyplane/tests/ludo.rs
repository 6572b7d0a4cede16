//! Ludo-specific tests: export-vs-delta-replica equivalence (bit for bit),
//! fallback, re-seeding, overflow seeds, memory, fingerprints, the cuckoo
//! moves under concurrent readers, every delta kind under corruption. The
//! checks every structure passes are the conformance suite (`conformance.rs`).

use keyplane::conformance::{self, KeyShape, StressConfig};
use keyplane::lineage::DeltaInfo;
use keyplane::ludo::{self, Control, Delta, Lookup, Options};
use keyplane::{ControlTable, Error, LookupTable, ReadHandle, Wire};
use std::collections::HashMap;

/// Oracle run driven by hand with explicit options. After every check point
/// the delta-fed replica must be bit-for-bit the fresh export, and both must
/// return every live key's value.
fn oracle_with(opts: Options, seed: u64, ops: usize, key_space: u64) -> (ludo::Stats, u64) {
    let mut cycles = 0;
    let mut rng = conformance::Rng::new(seed);
    let mut ctl = Control::with_options(8, opts).unwrap();
    let replica = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    let mut oracle = HashMap::new();
    for step in 0..ops {
        let k = conformance::make_key(KeyShape::Mixed, rng.below(key_space));
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
        if step % 1_000 == 0 || step + 1 == ops {
            let fresh = ctl.export();
            for (k, v) in &oracle {
                assert_eq!(ctl.get(k), Some(*v), "step {step}");
                assert_eq!(replica.get(k), Some(*v), "step {step}: replica");
                assert_eq!(fresh.get(k), Some(*v), "step {step}: export");
            }
            assert_eq!(replica.to_bytes(), fresh.to_bytes(), "step {step}: replica differs from export");
        }
        cycles = cycles.max(ctl.locator_stats().cycle_rebuilds);
    }
    (ctl.stats(), cycles)
}

#[test]
fn replica_is_bitwise_the_export_default_options() {
    let (s, cycles) = oracle_with(Options::default(), 1, 30_000, 6_000);
    assert!(s.grow_rebuilds >= 2, "growth must have happened: {s:?}");
    assert!(cycles > 0, "the bucket locator must have closed a cycle and re-seeded");
    assert!(s.cuckoo_moves > 0, "cuckoo paths must have happened: {s:?}");
    assert!(s.locator_rebuilds > 0, "bucket-locator rebuilds must travel inside path nodes: {s:?}");
}

#[test]
fn replica_is_bitwise_the_export_with_fingerprints() {
    oracle_with(Options::filtered(8), 2, 20_000, 4_000);
    oracle_with(Options::filtered(1), 3, 10_000, 2_000);
}

#[test]
fn fallback_table_path_is_exercised_and_correct() {
    // Without cuckoo paths, inserts into two full buckets must use the
    // fallback table (and, when it is full, grow).
    let (s, _) = oracle_with(Options { max_cuckoo_path: 0, ..Options::default() }, 4, 20_000, 4_000);
    assert!(s.fallback_inserts > 0, "{s:?}");
}

#[test]
fn reseed_path_is_exercised_and_correct() {
    // With max_seed 31 every full bucket whose seeds 0..=31 all collide
    // (~4% of them) forces a hash re-seed.
    let (s, _) = oracle_with(Options { max_seed: 31, avoid_overflow: false, ..Options::default() }, 5, 6_000, 200);
    assert!(s.reseed_rebuilds > 0, "{s:?}");
}

#[test]
fn overflow_seeds_are_used_and_counted() {
    // Without relocation about 4% of buckets need an overflow seed; with it
    // (the default) construction leaves none, and every key still reads its value.
    let n = 200_000u64;
    for avoid in [false, true] {
        let opts = Options { avoid_overflow: avoid, ..Options::default() };
        let ctl = Control::from_items_with((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8, opts).unwrap();
        let t = ctl.export();
        let frac = ctl.overflow_seed_fraction();
        let hist = ctl.seed_histogram();
        assert_eq!(hist.iter().sum::<u64>(), ctl.buckets() as u64);
        assert_eq!(t.overflow_len(), ctl.overflow_buckets());
        if avoid {
            assert_eq!(frac, 0.0, "relocation must remove every overflow seed");
            assert!(ctl.stats().max_seed <= 30);
            assert!(ctl.stats().relocations as f64 > 0.02 * ctl.buckets() as f64, "{:?}", ctl.stats());
            assert_eq!(hist[31..].iter().sum::<u64>(), 0);
        } else {
            assert!(frac > 0.01 && frac < 0.06, "overflow fraction {frac}");
            assert!(ctl.stats().max_seed >= 31 && ctl.stats().max_seed <= 255);
            assert_eq!(ctl.stats().relocations, 0);
        }
        for i in 0..n {
            assert_eq!(t.get(&i.to_le_bytes()), Some(i & 0xff));
        }
        assert!(ctl.load() > 0.94 && ctl.load() <= 0.95, "load {}", ctl.load());
    }
}

#[test]
fn inserts_at_full_load_avoid_overflow_seeds() {
    // Churn at 94-95% load: inserts take overflow-free cuckoo paths, so the
    // overflow table stays (nearly) empty and the replica stays exact.
    let n = 50_000u64;
    let mut ctl = Control::from_items((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let t = ctl.export();
    let nb = ctl.buckets();
    let mut moves = 0;
    for i in 0..20_000u64 {
        t.apply(&ctl.remove(&(i * 7 % n).to_le_bytes()).unwrap().unwrap()).unwrap();
        let d = ctl.insert(&(1_000_000 + i).to_le_bytes(), i & 0xff).unwrap();
        moves += d.cuckoo_moves();
        t.apply(&d).unwrap();
        if i % 10 == 0 {
            t.apply(&ctl.insert(&(1_000_000 + i).to_le_bytes(), 7).unwrap()).unwrap();
        }
    }
    assert_eq!(ctl.buckets(), nb, "no growth");
    assert!(moves > 1_000, "{moves}");
    let s = ctl.stats();
    eprintln!("{moves} moves, {s:?}, overflow fraction {}", ctl.overflow_seed_fraction());
    assert!(s.overflow_paths * 100 <= s.cuckoo_moves.max(1), "{s:?}");
    assert!(ctl.overflow_seed_fraction() < 0.002, "{}", ctl.overflow_seed_fraction());
    assert_eq!(t.to_bytes(), ctl.export().to_bytes());
    for (k, v) in ctl.iter() {
        assert_eq!(t.get(k), Some(v));
    }
}

#[test]
fn memory_is_close_to_the_paper_formula() {
    // 3.76 + 1.05·l bits per key at 95% load (thesis §4.5.1); measured at
    // 16M keys in the bench.
    let n = 200_000u64;
    for l in [8u32, 20] {
        let ctl = Control::from_items((0..n).map(|i| (i.to_le_bytes(), i & crate_mask(l))), l).unwrap();
        let t = ctl.export();
        let bpk = t.memory_bytes() as f64 * 8.0 / n as f64;
        let paper = 3.76 + 1.05 * l as f64;
        eprintln!("l={l}: {bpk:.3} bits/key, overflow fraction {:.4}", ctl.overflow_seed_fraction());
        // Seqlock stripes are a larger share at 200K keys than at 16M.
        assert!(bpk < paper + 0.06, "l={l}: {bpk} bits/key vs paper {paper}");
        assert!(bpk > 1.05 * l as f64 + 2.33, "l={l}: {bpk} bits/key is impossibly small");
        // The breakdown accounts for every byte, each part in its place.
        let parts = t.memory_breakdown();
        assert_eq!(parts.iter().map(|(_, b)| b).sum::<usize>(), t.memory_bytes(), "l={l}: {parts:?}");
        let part = |name: &str| parts.iter().find(|(p, _)| *p == name).map(|(_, b)| *b).unwrap();
        assert!(part("buckets") > part("locator") && part("locator") > 0, "l={l}: {parts:?}");
        assert_eq!(part("fallback"), 0, "l={l}: empty fallback table holds no memory: {parts:?}");
    }
}

fn crate_mask(l: u32) -> u64 {
    keyplane::mask(l)
}

#[test]
fn fingerprints_reject_most_alien_keys() {
    let n = 50_000u64;
    for f in [4u32, 8] {
        let ctl =
            Control::from_items_with((0..n).map(|i| (i.to_le_bytes(), i & 0xff)), 8, Options::filtered(f)).unwrap();
        let t = ctl.export();
        for i in 0..n {
            assert_eq!(t.get(&i.to_le_bytes()), Some(i & 0xff));
        }
        let alien = 200_000u64;
        let fp = (0..alien).filter(|i| t.get(&(i + (1 << 40)).to_le_bytes()).is_some()).count() as f64 / alien as f64;
        let want = ludo::expected_false_positive_rate(f, ctl.load());
        assert!(fp < want * 1.3 + 0.001 && fp > want * 0.7, "f={f}: {fp} vs expected {want}");
    }
    // Without fingerprints every key gets an answer.
    let ctl = Control::from_items((0..100u64).map(|i| (i.to_le_bytes(), 1)), 4).unwrap();
    assert!(ctl.export().get(b"not a key").is_some());
}

#[test]
fn deletes_change_nothing_in_the_lookup_form_and_value_changes_write_one_slot() {
    let mut ctl = Control::from_items((0..10_000u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8).unwrap();
    let t = ctl.export();
    let before = t.to_bytes();
    let d = ctl.remove(&5u64.to_le_bytes()).unwrap().unwrap();
    assert_eq!(d.buckets_touched(), 0);
    t.apply(&d).unwrap();
    // Only the sequence numbers (Ludo's and the locator's) differ.
    let after = t.to_bytes();
    assert_eq!(before.len(), after.len());
    let diff = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    // seq (Ludo, Othello) and two checksums.
    assert!(diff <= 2 + 16, "{diff} bytes changed by a delete");
    let d = ctl.insert(&7u64.to_le_bytes(), 200).unwrap();
    assert_eq!(d.buckets_touched(), 1);
    assert_eq!(d.cuckoo_moves(), 0);
    t.apply(&d).unwrap();
    assert_eq!(t.get(&7u64.to_le_bytes()), Some(200));
    assert!(
        d.to_bytes().len() < 65,
        "value-change delta is {} bytes (25 of them the lineage prologue)",
        d.to_bytes().len()
    );
}

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts the cuckoo moves and bucket-locator changes the stress writer's
/// deltas carry, so the stress tests prove they exercised them.
static MOVES: AtomicU64 = AtomicU64::new(0);
static PATHS: AtomicU64 = AtomicU64::new(0);
static FP_BITS: AtomicU64 = AtomicU64::new(0);

struct Counting(Control);
impl ControlTable for Counting {
    type Delta = Delta;
    type Lookup = Lookup;
    fn with_value_bits(b: u32) -> keyplane::Result<Self> {
        Control::with_options(b, Options::filtered(FP_BITS.load(Ordering::Relaxed) as u32)).map(Counting)
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
        Control::from_items_with(items, b, Options::filtered(FP_BITS.load(Ordering::Relaxed) as u32)).map(Counting)
    }
    fn insert(&mut self, k: &[u8], v: u64) -> keyplane::Result<Delta> {
        let d = self.0.insert(k, v)?;
        MOVES.fetch_add(d.cuckoo_moves() as u64, Ordering::Relaxed);
        PATHS.fetch_add((d.buckets_touched() > 1) as u64, Ordering::Relaxed);
        Ok(d)
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
fn concurrent_readers_never_see_wrong_values() {
    // One test drives both configurations (the counters are global).
    // The writer churns keys at 80-95% load, so inserts take cuckoo paths,
    // re-seed buckets, flip locator bits and grow the table.
    for (fp, updates) in [(0u64, 1_000_000usize), (6, 200_000)] {
        FP_BITS.store(fp, Ordering::Relaxed);
        MOVES.store(0, Ordering::Relaxed);
        PATHS.store(0, Ordering::Relaxed);
        let cfg = StressConfig { updates, stable: 30_000, ..Default::default() };
        let r = conformance::stress::<Counting>(&cfg).unwrap();
        assert!(r.reads > 0 && r.updates >= updates as u64);
        let (moves, paths) = (MOVES.load(Ordering::Relaxed), PATHS.load(Ordering::Relaxed));
        assert!(moves > 1_000 && paths > 1_000, "fp={fp}: only {moves} cuckoo moves in {paths} paths");
    }
}

#[test]
fn stress_updates_include_cuckoo_moves() {
    // The stress workload above runs at the load where paths are needed; check it here.
    let mut ctl = Control::from_items((0..20_000u64).map(|i| (i.to_le_bytes(), 1)), 8).unwrap();
    let mut moves = 0;
    for i in 0..2_000u64 {
        if ctl.len() + 1 > ctl.capacity() {
            let _ = ctl.remove(&(i * 3).to_le_bytes()).unwrap();
        }
        let d = ctl.insert(&(1_000_000 + i).to_le_bytes(), 2).unwrap();
        moves += d.cuckoo_moves();
    }
    assert!(moves > 0);
    assert!(ctl.stats().max_cuckoo_path >= 1 && ctl.stats().max_cuckoo_path <= 8);
}

fn sample_deltas() -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut ctl =
        Control::from_items_with((0..300u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, Options::filtered(4)).unwrap();
    let blob = ctl.export().to_bytes();
    let mut ds = Vec::new();
    ds.push(ctl.insert(b"new key", 9).unwrap()); // growth (Replace) at 95% load
    for i in 0..40u64 {
        ds.push(ctl.insert(&(1000 + i).to_le_bytes(), 3).unwrap());
    }
    ds.push(ctl.insert(&5u64.to_le_bytes(), 200).unwrap()); // value change
    ds.push(ctl.remove(&6u64.to_le_bytes()).unwrap().unwrap()); // delete
    ds.push(ctl.insert(&7u64.to_le_bytes(), 7).unwrap()); // same value: no-op
    let mut fb = Control::with_options(8, Options { max_cuckoo_path: 0, ..Options::default() }).unwrap();
    for i in 0..7u64 {
        let d = fb.insert(&i.to_le_bytes(), 1).unwrap();
        if matches!(d.cuckoo_moves(), 0) && d.buckets_touched() == 0 && !d.is_rebuild() {
            ds.push(d);
        }
    }
    let bytes: Vec<Vec<u8>> = ds.iter().map(|d| d.to_bytes()).collect();
    (blob, bytes)
}

#[test]
fn every_delta_kind_rejects_corruption() {
    let (blob, deltas) = sample_deltas();
    conformance::corruption_sweep::<Lookup>(&blob, 3_000, 1).unwrap();
    let mut kinds = std::collections::HashSet::new();
    for (i, d) in deltas.iter().enumerate() {
        let tag = d[16 + 25]; // after the header and the lineage prologue
        if kinds.insert(tag) || i % 10 == 0 {
            conformance::corruption_sweep::<Delta>(d, 1_000, i as u64).unwrap();
        }
    }
    assert!(kinds.len() >= 5, "delta kinds covered: {kinds:?}");
}

#[test]
fn no_op_deltas_and_option_bounds() {
    let mut ctl = Control::with_value_bits(1).unwrap();
    let t = ctl.export();
    t.apply(&ctl.insert(b"", 1).unwrap()).unwrap();
    // Same value again: a delta that touches no bucket.
    let d = ctl.insert(b"", 1).unwrap();
    assert_eq!(d.buckets_touched(), 0);
    t.apply(&d).unwrap();
    assert!(Control::with_options(60, Options::filtered(8)).is_err());
    assert!(Control::with_options(8, Options::filtered(33)).is_err());
    assert!(Control::with_options(8, Options { max_seed: 30, ..Options::default() }).is_err());
    assert!(Control::with_options(8, Options { max_load_permille: 990, ..Options::default() }).is_err());
}

#[test]
fn delete_heavy_sequences_keep_replica_and_export_in_step() {
    // Fill, delete most keys, refill: stale values must never leak into live keys.
    let mut ctl = Control::with_value_bits(8).unwrap();
    let t = ctl.export();
    let mut oracle = HashMap::new();
    for round in 0..3u64 {
        for i in 0..3_000u64 {
            let v = (i + round) & 0xff;
            t.apply(&ctl.insert(&i.to_le_bytes(), v).unwrap()).unwrap();
            oracle.insert(i, v);
        }
        for i in (0..3_000u64).filter(|i| i % 4 != 0) {
            t.apply(&ctl.remove(&i.to_le_bytes()).unwrap().unwrap()).unwrap();
            oracle.remove(&i);
        }
        for (k, v) in &oracle {
            assert_eq!(t.get(&k.to_le_bytes()), Some(*v));
        }
        assert_eq!(t.to_bytes(), ctl.export().to_bytes());
    }
}

#[test]
fn readers_of_moved_keys_never_see_wrong_values_in_a_tiny_full_table() {
    // 53 buckets at ~94% load: every insert takes a cuckoo path through
    // buckets the readers are reading, displacing stable keys, re-seeding
    // buckets, flipping locator bits and (at this size) re-seeding the
    // locator itself. Readers check every stable key, singly and batched.
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let stable: Vec<(u64, u64)> = (0..190u64).map(|i| (i, keyplane::hash::mix64(i) & 0xff)).collect();
    let churn = |i: u64| (1u64 << 40) + i;
    let items = stable.iter().map(|&(k, v)| (k.to_le_bytes(), v)).chain((0..10).map(|i| (churn(i).to_le_bytes(), 1)));
    let mut ctl = Control::from_items(items, 8).unwrap();
    let nb = ctl.buckets();
    let table = Arc::new(ctl.export());
    let stop = Arc::new(AtomicBool::new(false));
    let stable = Arc::new(stable);
    // Readers 0 and 1 use the table's `&self` get / get_batch; reader 2 a
    // long-lived per-thread handle (cached snapshot), alternating both.
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (table, stop, stable) = (table.clone(), stop.clone(), stable.clone());
            std::thread::spawn(move || -> Result<u64, String> {
                let keys: Vec<[u8; 8]> = stable.iter().map(|(k, _)| k.to_le_bytes()).collect();
                let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
                let mut out = vec![None; refs.len()];
                let mut n = 0u64;
                let handle = table.reader();
                let rd: &dyn ReadHandle = if r == 2 { &handle } else { &keyplane::SharedReader::from(&*table) };
                while !stop.load(Ordering::Relaxed) {
                    if r == 0 || (r == 2 && n % 2 == 0) {
                        for (k, v) in stable.iter() {
                            let got = rd.get(&k.to_le_bytes());
                            if got != Some(*v) {
                                return Err(format!("reader {r}: key {k}: got {got:?}, want {v}"));
                            }
                        }
                    } else {
                        rd.get_batch(&refs, &mut out);
                        for ((k, v), got) in stable.iter().zip(&out) {
                            if *got != Some(*v) {
                                return Err(format!("reader {r}: batch: key {k}: got {got:?}, want {v}"));
                            }
                        }
                    }
                    n += 1;
                }
                Ok(n)
            })
        })
        .collect();
    let mut moves = 0;
    let loc0 = ctl.locator_stats().rebuilds;
    for i in 0..150_000u64 {
        let d = ctl.remove(&churn(i).to_le_bytes()).unwrap().unwrap();
        table.apply(&d).unwrap();
        let d = ctl.insert(&churn(i + 10).to_le_bytes(), i & 0xff).unwrap();
        moves += d.cuckoo_moves();
        table.apply(&d).unwrap();
        if readers.iter().any(|h| h.is_finished()) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        let n = h.join().unwrap().unwrap();
        assert!(n > 0);
    }
    assert_eq!(ctl.buckets(), nb, "the table must not have grown");
    assert!(moves > 10_000, "only {moves} cuckoo moves");
    // Locator rebuilds travel inside path nodes and swap the readers' snapshot.
    assert!(ctl.locator_stats().rebuilds > loc0 + 10, "{:?}", ctl.locator_stats());
}

#[test]
fn failed_rebuilds_are_errors_never_panics() {
    // With max_seed 31, about 4% of full buckets have no valid seed, so a
    // table of thousands of buckets cannot be built: construction must fail
    // with an error, and a table that grows into that regime must refuse
    // updates with errors while still answering lookups.
    // The default seed of earlier versions (the growth below is seed-dependent).
    let opts = Options { max_seed: 31, avoid_overflow: false, seed: 0x1ad0_0000_5eed, ..Options::default() };
    let r = Control::from_items_with((0..20_000u64).map(|i| (i.to_le_bytes(), 1)), 8, opts);
    assert!(matches!(r, Err(Error::BuildFailed(_))), "{r:?}");
    let mut ctl = Control::from_items_with((0..20u64).map(|i| (i.to_le_bytes(), i)), 8, opts).unwrap();
    let t = ctl.export();
    let mut failed = None;
    for i in 20..20_000u64 {
        match ctl.insert(&i.to_le_bytes(), i & 0xff) {
            Ok(d) => t.apply(&d).unwrap(),
            Err(e) => {
                failed = Some(i);
                assert!(matches!(e, Error::BuildFailed(_)), "{e:?}");
                break;
            }
        }
    }
    let f = failed.expect("growth into thousands of buckets must fail with max_seed 31");
    assert_eq!(ctl.get(&f.to_le_bytes()), None, "the failed key is not inserted");
    assert!(ctl.insert(b"more", 1).is_err());
    assert!(ctl.remove(&3u64.to_le_bytes()).is_err());
    assert_eq!(ctl.get(&3u64.to_le_bytes()), Some(3));
    let _ = ctl.export().get(b"x");
    // Lookup forms kept by deltas still answer every key inserted before the failure.
    for i in 0..f {
        assert_eq!(t.get(&i.to_le_bytes()), Some(if i < 20 { i } else { i & 0xff }));
    }
}

/// Pre-sized the way `keyplane serve -O expected_keys` does it (built with
/// placeholder keys that are removed again), a table takes that many new
/// keys without a growth rebuild of the table or of its bucket locator (the
/// shared Othello core), and the delta-fed replica stays bit-for-bit the
/// fresh export with every key's value.
#[test]
fn presized_inserts_do_not_grow_and_replicas_equal_the_export() {
    let (n, extra) = (20_000u64, 4_000u64);
    let key = |i: u64| keyplane::hash::mix64(i).to_le_bytes().to_vec();
    let placeholder = |i: u64| [b"pad".as_slice(), &i.to_le_bytes()].concat();
    let items = (0..n).map(|i| (key(i), i & 0xff)).chain((0..extra).map(|i| (placeholder(i), 0)));
    let mut ctl = Control::from_items_with(items, 8, Options { seed: 11, ..Options::default() }).unwrap();
    for i in 0..extra {
        assert!(ctl.remove(&placeholder(i)).unwrap().is_some());
    }
    let (before, loc_before) = (ctl.stats(), ctl.locator_stats());
    let replica = Lookup::from_bytes(&ctl.export().to_bytes()).unwrap();
    for i in n..n + extra {
        replica.apply(&Delta::from_bytes(&ctl.insert(&key(i), i & 0xff).unwrap().to_bytes()).unwrap()).unwrap();
    }
    let (s, ls) = (ctl.stats(), ctl.locator_stats());
    assert_eq!(s.rebuilds, before.rebuilds, "no table rebuild: {s:?}");
    assert_eq!(ls.grow_rebuilds, loc_before.grow_rebuilds, "no locator growth: {ls:?}");
    assert_eq!(replica.to_bytes(), ctl.export().to_bytes());
    for i in 0..n + extra {
        assert_eq!(replica.get(&key(i)), Some(i & 0xff), "key {i}");
    }
}
