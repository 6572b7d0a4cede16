//! `keyplane-bench ludo`: Ludo hashing (plain and with fingerprints), the
//! DRAM floor of three random reads, lookups under concurrent updates, and
//! same-run baselines (keyplane Othello, hashbrown, PtrHash MPHF + value array).

use crate::common::*;
use keyplane::ext::bits::PackedArray;
use keyplane::lineage::DeltaInfo;
use keyplane::ludo::{self, Control, Options};
use keyplane::{ControlTable, LookupTable, ReadHandle, othello};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// On-CPU time of the calling thread in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`). On a machine shared with other jobs,
/// wall-clock figures are inflated by whatever else runs; the thread's CPU
/// time (which includes its memory stalls) is not.
#[cfg(target_os = "linux")]
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively
    // borrowed `t`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Wall-clock fallback where thread CPU time is unavailable.
#[cfg(not(target_os = "linux"))]
pub fn thread_cpu_ns() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<Instant> = OnceLock::new();
    T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Best-of-`reps` thread-CPU nanoseconds per operation.
pub fn cpu_best_ns(reps: usize, ops: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = thread_cpu_ns();
        f();
        best = best.min((thread_cpu_ns() - t) as f64 / ops as f64);
    }
    best
}

/// CPU-time lookup figures through a per-thread read handle: (single ns, batched ns).
fn cpu_reader_lookups<L: LookupTable>(t: &L, q: &KeySet) -> (f64, f64) {
    let rd = t.reader();
    cpu_timed_lookups(q, |k| rd.get(k), |ks, out| rd.get_batch(ks, out))
}

/// CPU-time lookup figures for any lookup form: (single ns, batched ns).
fn cpu_lookups<L: LookupTable>(t: &L, q: &KeySet) -> (f64, f64) {
    cpu_timed_lookups(q, |k| t.get(k), |ks, out| t.get_batch(ks, out))
}

/// Best-of-3 thread-CPU ns per lookup of `get` over the stream, and of
/// `get_batch` in bursts of 16.
fn cpu_timed_lookups(
    q: &KeySet,
    get: impl Fn(&[u8]) -> Option<u64>,
    get_batch: impl Fn(&[&[u8]], &mut [Option<u64>]),
) -> (f64, f64) {
    let refs: Vec<&[u8]> = q.iter().collect();
    let single = cpu_best_ns(3, refs.len(), || {
        let mut acc = 0u64;
        for k in &refs {
            acc = acc.wrapping_add(get(k).unwrap_or(1));
        }
        black_box(acc);
    });
    let mut out = vec![None; 16];
    let batch = cpu_best_ns(3, refs.len(), || {
        let mut acc = 0u64;
        for ch in refs.chunks(16) {
            get_batch(ch, &mut out[..ch.len()]);
            acc = acc.wrapping_add(out[0].unwrap_or(1));
        }
        black_box(acc);
    });
    (single, batch)
}

/// Per-component memory of a Ludo lookup form, in bits per key.
fn breakdown(r: &mut Record, t: &ludo::Lookup, n: usize) {
    for (name, bytes) in t.memory_breakdown() {
        r.set(&format!("bits_{name}"), bytes as f64 * 8.0 / n as f64);
    }
}

/// `dram_floor_ns` in thread CPU time: `reads` independent random 8-byte
/// reads per key into a buffer of `bytes`, 16 keys' reads prefetched at once.
fn cpu_dram_floor_ns(bytes: usize, reads: usize) -> f64 {
    let words = (bytes / 8).max(1 << 16);
    let mut v: Vec<u64> = vec![0; words];
    keyplane::ext::mem::advise_hugepages(&v);
    v.iter_mut().for_each(|x| *x = 1);
    let keys = 1 << 21;
    cpu_best_ns(3, keys, || {
        let mut acc = 0u64;
        let mut idx = [0usize; 16 * 4];
        for b in 0..keys / 16 {
            for (j, slot) in idx[..16 * reads].iter_mut().enumerate() {
                let i = keyplane::hash::reduce64(mix((b * 64 + j) as u64), words as u64) as usize;
                *slot = i;
                keyplane::ext::mem::prefetch(&v[i] as *const u64);
            }
            for &i in &idx[..16 * reads] {
                acc = acc.wrapping_add(v[i]);
            }
        }
        black_box(acc);
    })
}

/// Runs the Ludo benchmark. `--memory-only`: build, memory and seed
/// statistics only (for extra value widths on a busy machine).
pub fn run(a: &LudoArgs) -> Result<Vec<Record>, String> {
    let w = Workload::from_args(&a.common)?;
    if a.memory_only {
        return Ok(vec![memory_only(&w)]);
    }
    let n = w.n();
    let l = w.value_bits;
    let mut out = Vec::new();
    let fp_bits = a.fingerprint_bits;
    let rate = a.concurrent_updates_per_s;
    let secs = a.secs;
    let mut variants = vec![("ludo", Options::default())];
    if fp_bits > 0 && l + fp_bits <= 64 && !a.no_fingerprints {
        variants.push(("ludo_fp", Options::filtered(fp_bits)));
    }
    for (name, opts) in variants {
        let build_cpu = std::cell::Cell::new(0u64);
        let (mut r, mut ctl, table) = measure::<Control>(name, &w, |w| {
            let c0 = thread_cpu_ns();
            let c = Control::from_items_with(w.items(), w.value_bits, opts);
            build_cpu.set(thread_cpu_ns() - c0);
            c
        });
        let build_s = r.num("build_ns_per_key").unwrap_or(0.0) * n as f64 / 1e9;
        r.set("build_s", build_s);
        r.set("build_cpu_s", build_cpu.get() as f64 / 1e9);
        let (cs, cb) = cpu_lookups(&table, &w.queries);
        r.set("lookup_cpu_ns", cs).set("batch_lookup_cpu_ns", cb);
        let (rs, rb) = cpu_reader_lookups(&table, &w.queries);
        r.set("reader_lookup_cpu_ns", rs).set("reader_batch_lookup_cpu_ns", rb);
        breakdown(&mut r, &table, n);
        r.set("relocations", ctl.stats().relocations);
        r.set("locator_failed_seeds_build", ctl.locator_stats().failed_seeds);
        r.set("load_factor", ctl.load());
        r.set("buckets", ctl.buckets());
        r.set("paper_bits_per_key", 3.76 + 1.05 * l as f64);
        r.set("overflow_seed_fraction", ctl.overflow_seed_fraction());
        r.set("overflow_table_slots", ctl.overflow_capacity());
        r.set("max_seed", ctl.stats().max_seed);
        r.set("fallback_keys", ctl.fallback_len());
        r.set("max_cuckoo_path_build", ctl.stats().max_cuckoo_path);
        r.set("fingerprint_bits", opts.fingerprint_bits);
        if opts.fingerprint_bits > 0 {
            r.set("false_positive_rate", r.num("alien_positive_rate").unwrap_or(0.0));
            r.set(
                "expected_false_positive_rate",
                ludo::expected_false_positive_rate(opts.fingerprint_bits, ctl.load()),
            );
        }
        // Lookups under concurrent updates (taken before the update timing so
        // the table is at its built load).
        let (quiet, busy, achieved) = batch_under_updates(&mut ctl, &table, &w, rate, secs);
        r.set("batch_lookup_cpu_ns_quiet", quiet);
        r.set("batch_lookup_cpu_ns_under_updates", busy);
        r.set("concurrent_updates_per_s", achieved);
        r.set("lookup_slowdown_under_updates", busy / quiet - 1.0);
        r.set("load_factor_during_updates", ctl.load());
        let ops = w.updates.min(n.max(3)).max(3);
        let before = ctl.stats();
        let c0 = thread_cpu_ns();
        let (e2e, ctl_only) = measure_updates(&mut ctl, &table, &w, ops);
        r.set("update_ops_per_cpu_s", ops as f64 / ((thread_cpu_ns() - c0) as f64 / 1e9));
        let after = ctl.stats();
        r.set("update_ops_per_s", e2e);
        r.set("update_ops_per_s_control_only", ctl_only);
        r.set("update_ops", ops);
        r.set("max_cuckoo_path", after.max_cuckoo_path);
        r.set("cuckoo_moves_during_updates", after.cuckoo_moves - before.cuckoo_moves);
        r.set("rebuilds_during_updates", after.rebuilds - before.rebuilds);
        r.set("locator_rebuilds_during_updates", after.locator_rebuilds - before.locator_rebuilds);
        r.set("control_memory_bytes", ctl.memory_bytes());
        out.push(r);
    }
    // Memory floor: three random reads per key into a buffer as large as the table.
    let bytes = out[0].num("memory_bytes").unwrap_or(0.0) as usize;
    let floor = dram_floor_ns(bytes, 3);
    let mut fr = Record::new("floor_3_random_reads", n, l, w.kt);
    fr.set("batch_lookup_ns", floor).set("memory_bytes", bytes);
    for r in out.iter_mut() {
        if let Some(b) = r.num("batch_lookup_ns") {
            r.set("batch_vs_floor", b / floor);
        }
    }
    let cfloor = cpu_dram_floor_ns(bytes, 3);
    fr.set("batch_lookup_cpu_ns", cfloor);
    for r in out.iter_mut() {
        if let Some(b) = r.num("batch_lookup_cpu_ns") {
            r.set("batch_cpu_vs_floor", b / cfloor);
        }
    }
    out.push(fr);
    // The floor is three random *DRAM* reads. A buffer the size of
    // the table is L3-resident when the table is (25 MB at l = 8 against a
    // 32 MiB L3), so also measure the floor in a buffer far larger than any
    // L3 (256 MiB) and report the ratio to it separately.
    let dram_bytes = bytes.max(256 << 20);
    let dfloor = dram_floor_ns(dram_bytes, 3);
    let dcfloor = cpu_dram_floor_ns(dram_bytes, 3);
    let mut dr = Record::new("floor_3_dram_reads", n, l, w.kt);
    dr.set("batch_lookup_ns", dfloor).set("batch_lookup_cpu_ns", dcfloor).set("memory_bytes", dram_bytes);
    for r in out.iter_mut().filter(|r| r.num("batch_vs_floor").is_some()) {
        if let Some(b) = r.num("batch_lookup_ns") {
            r.set("batch_vs_dram_floor", b / dfloor);
        }
        if let Some(b) = r.num("batch_lookup_cpu_ns") {
            r.set("batch_cpu_vs_dram_floor", b / dcfloor);
        }
    }
    out.push(dr);
    // Baselines, same run.
    let (mut o, _, ot) = measure::<othello::Control>("othello_compact", &w, |w| {
        othello::Control::from_items_with(w.items(), w.value_bits, othello::Options::default())
    });
    let (cs, cb) = cpu_lookups(&ot, &w.queries);
    o.set("lookup_cpu_ns", cs).set("batch_lookup_cpu_ns", cb);
    let (rs, rb) = cpu_reader_lookups(&ot, &w.queries);
    o.set("reader_lookup_cpu_ns", rs).set("reader_batch_lookup_cpu_ns", rb);
    drop(ot);
    o.set("note", "keyplane Othello, compact sizing, same keys and values");
    out.push(o);
    out.push(baseline_ptrhash(&w));
    out.push(baseline_hashbrown(&w));
    Ok(out)
}

fn memory_only(w: &Workload) -> Record {
    let n = w.n();
    let c0 = thread_cpu_ns();
    let (ctl, build_s) = time(|| Control::from_items(w.items(), w.value_bits).expect("build"));
    let build_cpu_s = (thread_cpu_ns() - c0) as f64 / 1e9;
    let t = ctl.export();
    for (i, k) in w.keys.iter().enumerate() {
        assert_eq!(t.get(k), Some(w.values[i]), "key {i} wrong after build");
    }
    let mut r = Record::new("ludo", n, w.value_bits, w.kt);
    breakdown(&mut r, &t, n);
    r.set("relocations", ctl.stats().relocations);
    r.set("locator_failed_seeds_build", ctl.locator_stats().failed_seeds);
    let mem = t.memory_bytes();
    r.set("memory_bytes", mem).set("bits_per_key", mem as f64 * 8.0 / n as f64);
    r.set("paper_bits_per_key", 3.76 + 1.05 * w.value_bits as f64);
    r.set("build_s", build_s).set("build_ns_per_key", build_s * 1e9 / n as f64).set("build_cpu_s", build_cpu_s);
    r.set("load_factor", ctl.load());
    r.set("overflow_seed_fraction", ctl.overflow_seed_fraction());
    r.set("overflow_table_slots", ctl.overflow_capacity());
    r.set("max_seed", ctl.stats().max_seed);
    r.set("max_cuckoo_path_build", ctl.stats().max_cuckoo_path);
    r.set("fallback_keys", ctl.fallback_len());
    r.set("note", "--memory-only run");
    r
}

/// Batched lookup time while another thread applies `rate` deltas per second
/// (an equal mix of insert, value change and delete), against the quiet
/// figure on the same table. A growth rebuild that the first inserts trigger
/// (the built table sits at 95% load) is applied before either timing.
/// Both figures are best-of thread-CPU ns per key (so other jobs on the
/// machine do not distort the comparison). Returns (quiet ns per key, busy
/// ns per key, achieved updates per second).
fn batch_under_updates(ctl: &mut Control, table: &ludo::Lookup, w: &Workload, rate: u64, secs: f64) -> (f64, f64, f64) {
    let count = ((rate as f64 * secs) as usize).max(3);
    let fresh = gen_keys(w.kt, count / 3 + 1, 11);
    let vm = keyplane::mask(w.value_bits);
    let mut deltas = Vec::with_capacity(count);
    for i in 0..count {
        let d = match i % 3 {
            0 => Some(ctl.insert(fresh.get(i / 3), 1).expect("insert")),
            1 => {
                let k = (mix(i as u64 ^ 0x55) % w.n() as u64) as usize;
                Some(ctl.insert(w.keys.get(k), (w.values[k] ^ 1) & vm).expect("change"))
            }
            _ => ctl.remove(fresh.get(i / 3)).expect("remove"),
        };
        deltas.extend(d);
    }
    let pre = deltas.iter().take_while(|d| d.is_rebuild()).count();
    for d in &deltas[..pre] {
        table.apply(d).expect("apply");
    }
    let deltas = &deltas[pre..];
    let refs: Vec<&[u8]> = w.queries.iter().collect();
    let mut out = vec![None; 16];
    let quiet = cpu_best_ns(5, refs.len(), || {
        let mut acc = 0u64;
        for ch in refs.chunks(16) {
            table.get_batch(ch, &mut out[..ch.len()]);
            acc = acc.wrapping_add(out[0].unwrap_or(1));
        }
        black_box(acc);
    });
    let stop = Arc::new(AtomicBool::new(false));
    let (ns, applied, took) = std::thread::scope(|s| {
        let stop2 = stop.clone();
        let h = s.spawn(move || {
            let t0 = Instant::now();
            let gap = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
            let mut next = t0;
            let mut i = 0;
            while i < deltas.len() && !stop2.load(Ordering::Relaxed) {
                table.apply(&deltas[i]).expect("apply");
                i += 1;
                next += gap;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
            }
            (i, t0.elapsed().as_secs_f64())
        });
        let t = Instant::now();
        let mut best = f64::MAX;
        while t.elapsed().as_secs_f64() < secs * 0.9 {
            let t1 = thread_cpu_ns();
            let mut acc = 0u64;
            for ch in refs.chunks(16) {
                table.get_batch(ch, &mut out[..ch.len()]);
                acc = acc.wrapping_add(out[0].unwrap_or(1));
            }
            black_box(acc);
            best = best.min((thread_cpu_ns() - t1) as f64 / refs.len() as f64);
        }
        stop.store(true, Ordering::Relaxed);
        let (i, took) = h.join().expect("writer");
        (best, i, took)
    });
    // Apply what the writer did not get to, so the table matches the control form again.
    for d in &deltas[applied..] {
        table.apply(d).expect("apply");
    }
    (quiet, ns, applied as f64 / took)
}

/// PtrHash (minimal perfect hash) + packed value array: the static baseline.
/// Memory of the static baseline (PtrHash MPHF over `hash64` plus an
/// `l`-bit packed value array) for these keys, in bytes.
pub fn mphf_memory(keys: &crate::common::KeySet, values: &[u64], l: u32) -> usize {
    use ptr_hash::{DefaultPtrHash, PtrHashParams};
    let n = keys.len();
    let hs: Vec<u64> = keys.iter().map(|k| keyplane::hash::hash64(k, 0)).collect();
    let mphf = <DefaultPtrHash>::new(&hs, PtrHashParams::default());
    let vals = PackedArray::new(n, l);
    for (h, &v) in hs.iter().zip(values) {
        vals.set(mphf.index(h), v);
    }
    let (pil, rem) = mphf.bits_per_element();
    ((pil + rem) * n as f64 / 8.0) as usize + vals.memory_bytes()
}

fn baseline_ptrhash(w: &Workload) -> Record {
    use ptr_hash::{DefaultPtrHash, PtrHashParams};
    let n = w.n();
    let hs: Vec<u64> = w.keys.iter().map(|k| keyplane::hash::hash64(k, 0)).collect();
    let ((mphf, vals), build_s) = time(|| {
        let mphf = <DefaultPtrHash>::new(&hs, PtrHashParams::default());
        let vals = PackedArray::new(n, w.value_bits);
        for (h, &v) in hs.iter().zip(&w.values) {
            vals.set(mphf.index(h), v);
        }
        (mphf, vals)
    });
    for (i, h) in hs.iter().enumerate() {
        assert_eq!(vals.get(mphf.index(h)), w.values[i], "ptr_hash baseline wrong");
    }
    let (pil, rem) = mphf.bits_per_element();
    let mem = ((pil + rem) * n as f64 / 8.0) as usize + vals.memory_bytes();
    let mut r = Record::new("ptrhash_mphf_values", n, w.value_bits, w.kt);
    r.set("memory_bytes", mem).set("bits_per_key", mem as f64 * 8.0 / n as f64);
    r.set("build_ns_per_key", build_s * 1e9 / n as f64);
    r.set("lookup_ns", lookup_ns(&w.queries, |k| Some(vals.get(mphf.index(&keyplane::hash::hash64(k, 0))))));
    // Batched: hash and prefetch 16 pilots' value slots, then read.
    let refs: Vec<&[u8]> = w.queries.iter().collect();
    let batch = best_ns(3, refs.len(), || {
        let mut acc = 0u64;
        let mut idx = [0usize; 16];
        for ch in refs.chunks(16) {
            for (k, i) in ch.iter().zip(idx.iter_mut()) {
                *i = mphf.index(&keyplane::hash::hash64(k, 0));
                keyplane::ext::mem::prefetch(vals.word_ptr(*i));
            }
            for &i in &idx[..ch.len()] {
                acc = acc.wrapping_add(vals.get(i));
            }
        }
        black_box(acc);
    });
    r.set("batch_lookup_ns", batch);
    let batch_cpu = cpu_best_ns(3, refs.len(), || {
        let mut acc = 0u64;
        let mut idx = [0usize; 16];
        for ch in refs.chunks(16) {
            for (k, i) in ch.iter().zip(idx.iter_mut()) {
                *i = mphf.index(&keyplane::hash::hash64(k, 0));
                keyplane::ext::mem::prefetch(vals.word_ptr(*i));
            }
            for &i in &idx[..ch.len()] {
                acc = acc.wrapping_add(vals.get(i));
            }
        }
        black_box(acc);
    });
    r.set("batch_lookup_cpu_ns", batch_cpu);
    r.set("note", "static: PtrHash DefaultPtrHash over hash64 + l-bit PackedArray; no updates");
    r
}
