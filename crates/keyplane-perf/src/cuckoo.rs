//! `keyplane-bench cuckoo` and `keyplane-bench cuckoo-partial` (alias `pkcuckoo`).
//!
//! `cuckoo`: the concurrent (2,4) cuckoo map — the replica (`Lookup`) and
//! reader handles on the writer's shared table; batch sizes 1, 4, 8, 16
//! (CuckooSwitch Fig. 6); lookup throughput with 1 and 2 threads; lookup
//! throughput while a rate-limited writer thread sustains 64K and 500K
//! updates/s on the shared table (CuckooSwitch Fig. 10). Same-run
//! baselines: hashbrown immutable and behind an `RwLock`, and `dashmap`,
//! measured the same way.
//!
//! `cuckoo-partial`: the partial-key cuckoo for several fingerprint widths, with
//! its valid-key collision rate (thesis Fig. 4.30).

use crate::common::*;
use keyplane::cuckoo::{self, Control, Options, ValueLayout};
use keyplane::{ControlTable, LookupTable, ReadHandle};
use std::hint::black_box;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A batched lookup function owned by one reader thread.
type Get<'a> = Box<dyn Fn(&[&[u8]], &mut [Option<u64>]) + Send + 'a>;
/// Makes one batched lookup function per reader thread (on the calling thread).
type MakeGet<'a, 'b> = &'b dyn Fn() -> Get<'a>;

/// ns per key of a batched lookup function over the query stream.
fn batch_ns_with(queries: &KeySet, batch: usize, f: impl Fn(&[&[u8]], &mut [Option<u64>])) -> f64 {
    let refs: Vec<&[u8]> = queries.iter().collect();
    let mut out = vec![None; batch];
    best_ns(3, refs.len(), || {
        let mut acc = 0u64;
        for ch in refs.chunks(batch) {
            f(ch, &mut out[..ch.len()]);
            acc = acc.wrapping_add(out[0].unwrap_or(1));
        }
        black_box(acc);
    })
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// Million lookups per second with `threads` threads for `secs` seconds each.
fn mops_for(queries: &KeySet, threads: usize, secs: f64, mk: MakeGet<'_, '_>) -> f64 {
    mops_cpu(queries, threads, secs, mk).0
}

/// Million lookups per wall-clock second, and per second of the reader
/// threads' own CPU time (insensitive to other processes on a shared machine).
fn mops_cpu(queries: &KeySet, threads: usize, secs: f64, mk: MakeGet<'_, '_>) -> (f64, f64) {
    let cpu = AtomicU64::new(0);
    let gets: Vec<Get<'_>> = (0..threads).map(|_| mk()).collect();
    let refs: Vec<&[u8]> = queries.iter().collect();
    let total = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for (th, f) in gets.into_iter().enumerate() {
            let (refs, total, cpu) = (&refs, &total, &cpu);
            s.spawn(move || {
                let c0 = thread_cpu_ns();
                let mut out = [None; 16];
                let f = &f;
                let mut n = 0u64;
                let mut i = th * refs.len() / threads.max(1);
                let mut acc = 0u64;
                while start.elapsed().as_secs_f64() < secs {
                    for _ in 0..256 {
                        if i + 16 > refs.len() {
                            i = 0;
                        }
                        f(&refs[i..i + 16], &mut out);
                        acc = acc.wrapping_add(out[0].unwrap_or(1));
                        i += 16;
                        n += 16;
                    }
                }
                black_box(acc);
                total.fetch_add(n, Ordering::Relaxed);
                if let (Some(a), Some(b)) = (c0, thread_cpu_ns()) {
                    cpu.fetch_add(b.saturating_sub(a), Ordering::Relaxed);
                }
            });
        }
    });
    let n = total.load(Ordering::Relaxed) as f64;
    let cpu_s = cpu.load(Ordering::Relaxed) as f64 / 1e9;
    (n / start.elapsed().as_secs_f64() / 1e6, if cpu_s > 0.0 { n / cpu_s / 1e6 } else { f64::NAN })
}

/// Keys a churning writer keeps inserted before removing them again.
const CHURN_LAG: u64 = 4096;

/// The `c`-th churn update over `f` fresh keys: even updates insert a fresh
/// key, odd ones remove the key inserted `CHURN_LAG` inserts earlier, so the
/// table size stays constant and every update is one insert or one remove.
fn churn(c: u64, f: u64) -> (bool, usize) {
    let j = c / 2;
    if c % 2 == 0 { (true, (j % f) as usize) } else { (false, ((j + f - CHURN_LAG % f) % f) as usize) }
}

/// A writer thread doing `rate` updates per second (insert a fresh key,
/// remove the one inserted `lag` updates earlier) until `stop`; returns the
/// achieved rate.
fn paced_writer(rate: f64, stop: &AtomicBool, mut update: impl FnMut(u64)) -> f64 {
    let start = Instant::now();
    let mut done = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * rate) as u64;
        if done >= due {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        for _ in 0..(due - done).min(64) {
            update(done);
            done += 1;
        }
    }
    done as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Lookup throughput of one reader thread while a writer sustains each rate
/// (CuckooSwitch Fig. 10). Each rate is measured `reps` times, each time
/// right after a writer-free measurement; medians are reported, in wall
/// time and per second of the reader's own CPU time.
#[allow(clippy::too_many_arguments)]
fn under_writer(
    r: &mut Record,
    prefix: &str,
    queries: &KeySet,
    rates: &[u64],
    secs: f64,
    reps: usize,
    read: MakeGet<'_, '_>,
    update: &mut (dyn FnMut(u64) + Send),
) {
    let (mut base, mut base_cpu) = (Vec::new(), Vec::new());
    for &rate in rates {
        let (mut m, mut mc, mut ach, mut drop, mut drop_cpu) = (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..reps {
            let (b, bc) = mops_cpu(queries, 1, secs, read);
            base.push(b);
            base_cpu.push(bc);
            let stop = AtomicBool::new(false);
            let ((mops, mops_cpu_s), achieved) = std::thread::scope(|s| {
                let stop = &stop;
                let update = &mut *update;
                let w = s.spawn(move || paced_writer(rate as f64, stop, update));
                let x = mops_cpu(queries, 1, secs, read);
                stop.store(true, Ordering::Relaxed);
                (x, w.join().expect("writer"))
            });
            m.push(mops);
            mc.push(mops_cpu_s);
            ach.push(achieved);
            drop.push(100.0 * (1.0 - mops / b));
            drop_cpu.push(100.0 * (1.0 - mops_cpu_s / bc));
        }
        let k = rate / 1000;
        r.set(&format!("{prefix}_mops_writer_{k}k"), median(m));
        r.set(&format!("{prefix}_writer_{k}k_achieved_updates_per_s"), median(ach));
        r.set(&format!("{prefix}_drop_pct_writer_{k}k"), median(drop));
        r.set(&format!("{prefix}_mops_per_cpu_s_writer_{k}k"), median(mc));
        r.set(&format!("{prefix}_drop_pct_per_cpu_s_writer_{k}k"), median(drop_cpu));
    }
    r.set(&format!("{prefix}_mops_writer_0"), median(base));
    r.set(&format!("{prefix}_mops_per_cpu_s_writer_0"), median(base_cpu));
    r.set("writer_test_reps", reps);
}

/// Runs the concurrent cuckoo map benchmark.
pub fn run(a: &CuckooArgs) -> Result<Vec<Record>, String> {
    let w = Workload::from_args(&a.common)?;
    let n = w.n();
    let batches = a.batch.clone();
    let core = a.common.core;
    let rates = if !a.rates.is_empty() {
        a.rates.clone()
    } else if core {
        vec![64_000]
    } else {
        vec![64_000, 500_000]
    };
    let secs = a.secs.unwrap_or(if core { 0.25 } else { 2.0 });
    let reps = a.reps.unwrap_or(if core { 1 } else { 3 }) as usize;
    let layouts: Vec<(&str, ValueLayout)> = match a.values {
        Values::Both => vec![("cuckoo", ValueLayout::Auto), ("cuckoo_separate_values", ValueLayout::Separate)],
        Values::Separate => vec![("cuckoo_separate_values", ValueLayout::Separate)],
        Values::Interleaved => vec![("cuckoo", ValueLayout::Auto)],
    };
    // Fresh keys for the churn writer (it cycles through them).
    let fresh = gen_keys(w.kt, n.clamp(4 * CHURN_LAG as usize, 1 << 20), 9);
    let mut out = Vec::new();
    for (name, layout) in layouts {
        let opts = Options { values: layout, ..Options::default() };
        let (mut r, mut ctl, table) =
            measure::<Control>(name, &w, |w| Control::from_items_with(w.items(), w.value_bits, opts));
        r.set("buckets", ctl.buckets()).set("load_factor", ctl.load_factor()).set("stash", ctl.stash_len());
        for &b in &batches {
            r.set(&format!("batch_{b}_lookup_ns"), batch_ns(&table, &w.queries, b as usize));
        }
        let mk = || Box::new(|k: &[&[u8]], o: &mut [Option<u64>]| table.get_batch(k, o)) as Get<'_>;
        r.set("lookup_mops_1_thread", mops_for(&w.queries, 1, secs, &mk));
        r.set("lookup_mops_2_threads", mops_for(&w.queries, 2, secs, &mk));
        let handle = table.reader();
        let mk = || {
            let h = handle.clone();
            Box::new(move |k: &[&[u8]], o: &mut [Option<u64>]| h.get_batch(k, o)) as Get<'_>
        };
        r.set("reader_lookup_ns", lookup_ns(&w.queries, |k| handle.get(k)));
        r.set("reader_lookup_mops_1_thread", mops_for(&w.queries, 1, secs, &mk));
        r.set("reader_lookup_mops_2_threads", mops_for(&w.queries, 2, secs, &mk));
        drop(handle);
        drop(table);
        // Reader handles on the writer's own table.
        let reader = ctl.reader();
        r.set("shared_lookup_ns", lookup_ns(&w.queries, |k| reader.get(k)));
        for &b in &batches {
            r.set(
                &format!("shared_batch_{b}_lookup_ns"),
                batch_ns_with(&w.queries, b as usize, |k, o| reader.get_batch(k, o)),
            );
        }
        let ops = w.updates.min(n.max(3)).max(3);
        let shared = ctl.export();
        let (e2e, ctl_only) = measure_updates(&mut ctl, &shared, &w, ops);
        drop(shared);
        r.set("update_ops_per_s", e2e).set("update_ops_per_s_control_only", ctl_only).set("update_ops", ops);
        let before = ctl.stats();
        {
            let ctl = &mut ctl;
            let fresh = &fresh;
            let vm = keyplane::mask(w.value_bits);
            let mut c = 0u64;
            let mut update = move |_| {
                let (ins, i) = churn(c, fresh.len() as u64);
                c += 1;
                if ins {
                    ctl.insert(fresh.get(i), c & vm).expect("insert");
                } else if c / 2 >= CHURN_LAG {
                    ctl.remove(fresh.get(i)).expect("remove");
                }
            };
            under_writer(
                &mut r,
                "shared_lookup",
                &w.queries,
                &rates,
                secs,
                reps,
                &|| {
                    let h = reader.clone();
                    Box::new(move |k: &[&[u8]], o: &mut [Option<u64>]| h.get_batch(k, o)) as Get<'_>
                },
                &mut update,
            );
        }
        let after = ctl.stats();
        r.set("writer_moves", after.moves - before.moves).set("writer_grows", after.grows - before.grows);
        r.set("control_memory_bytes", ctl.memory_bytes());
        out.push(r);
        drop(reader);
        drop(ctl);
    }
    let floor = dram_floor_ns(out[0].num("memory_bytes").unwrap_or(0.0) as usize, 1);
    let mut fr = Record::new("floor_1_random_read", n, w.value_bits, w.kt);
    fr.set("batch_lookup_ns", floor);
    out.push(fr);
    out.extend(baselines(&w, &batches, &rates, secs, reps, &fresh));
    let hb_ns = out.iter().find(|r| r.0["structure"] == "hashbrown").and_then(|r| r.num("lookup_ns"));
    if let Some(hb) = hb_ns {
        for r in out.iter_mut() {
            if r.0["structure"].as_str().unwrap_or("").starts_with("cuckoo") {
                r.set("batch_speedup_vs_hashbrown", hb / r.num("batch_lookup_ns").unwrap_or(f64::NAN));
                r.set("shared_batch_speedup_vs_hashbrown", hb / r.num("shared_batch_16_lookup_ns").unwrap_or(f64::NAN));
            }
        }
    }
    Ok(out)
}

/// hashbrown (immutable and behind an `RwLock`) and dashmap, measured like the cuckoo map.
fn baselines(w: &Workload, batches: &[u64], rates: &[u64], secs: f64, reps: usize, fresh: &KeySet) -> Vec<Record> {
    let n = w.n();
    let mut out = Vec::new();
    let vm = keyplane::mask(w.value_bits);
    {
        let (m, build_s) = time(|| {
            let mut m: hashbrown::HashMap<Box<[u8]>, u64> = hashbrown::HashMap::with_capacity(n);
            for (k, v) in w.items() {
                m.insert(k.into(), v);
            }
            m
        });
        let mut r = Record::new("hashbrown", n, w.value_bits, w.kt);
        let mem = m.capacity() * (std::mem::size_of::<(Box<[u8]>, u64)>() + 1) + w.keys.bytes();
        r.set("memory_bytes", mem).set("bits_per_key", mem as f64 * 8.0 / n as f64);
        r.set("build_ns_per_key", build_s * 1e9 / n as f64);
        r.set("lookup_ns", lookup_ns(&w.queries, |k| m.get(k).copied()));
        r.set("alien_lookup_ns", lookup_ns(&w.alien_queries, |k| m.get(k).copied()));
        r.set("note", "immutable hashbrown HashMap<Box<[u8]>, u64> (foldhash); memory = table + key heap bytes");
        let lock = RwLock::new(m);
        {
            let g = lock.read().expect("lock");
            let m = &*g;
            let get = |k: &[&[u8]], o: &mut [Option<u64>]| {
                for (k, o) in k.iter().zip(o.iter_mut()) {
                    *o = m.get(*k).copied();
                }
            };
            for &b in batches {
                r.set(&format!("batch_{b}_lookup_ns"), batch_ns_with(&w.queries, b as usize, get));
            }
            r.set("lookup_mops_1_thread", mops_for(&w.queries, 1, secs, &|| Box::new(&get) as Get<'_>));
            r.set("lookup_mops_2_threads", mops_for(&w.queries, 2, secs, &|| Box::new(&get) as Get<'_>));
        }
        out.push(r);
        let mut r = Record::new("hashbrown_rwlock", n, w.value_bits, w.kt);
        r.set("memory_bytes", out[0].num("memory_bytes").unwrap_or(0.0));
        let get = |k: &[&[u8]], o: &mut [Option<u64>]| {
            for (k, o) in k.iter().zip(o.iter_mut()) {
                *o = lock.read().expect("lock").get(*k).copied();
            }
        };
        r.set("lookup_ns", lookup_ns(&w.queries, |k| lock.read().expect("lock").get(k).copied()));
        r.set("lookup_mops_1_thread", mops_for(&w.queries, 1, secs, &|| Box::new(&get) as Get<'_>));
        r.set("lookup_mops_2_threads", mops_for(&w.queries, 2, secs, &|| Box::new(&get) as Get<'_>));
        let mut c = 0u64;
        let mut update = |_| {
            let (ins, i) = churn(c, fresh.len() as u64);
            c += 1;
            let mut g = lock.write().expect("lock");
            if ins {
                g.insert(fresh.get(i).into(), c & vm);
            } else {
                g.remove(fresh.get(i));
            }
        };
        under_writer(&mut r, "lookup", &w.queries, rates, secs, reps, &|| Box::new(&get) as Get<'_>, &mut update);
        r.set("note", "hashbrown HashMap<Box<[u8]>, u64> behind std RwLock: one read lock per lookup");
        out.push(r);
    }
    {
        let (m, build_s) = time(|| {
            let m: dashmap::DashMap<Box<[u8]>, u64> = dashmap::DashMap::with_capacity(n);
            for (k, v) in w.items() {
                m.insert(k.into(), v);
            }
            m
        });
        let mut r = Record::new("dashmap", n, w.value_bits, w.kt);
        r.set("build_ns_per_key", build_s * 1e9 / n as f64);
        let mem = m.capacity() * (std::mem::size_of::<(Box<[u8]>, u64)>() + 1) + w.keys.bytes();
        r.set("memory_bytes", mem).set("bits_per_key", mem as f64 * 8.0 / n as f64);
        let get = |k: &[&[u8]], o: &mut [Option<u64>]| {
            for (k, o) in k.iter().zip(o.iter_mut()) {
                *o = m.get(*k).map(|v| *v);
            }
        };
        r.set("lookup_ns", lookup_ns(&w.queries, |k| m.get(k).map(|v| *v)));
        r.set("alien_lookup_ns", lookup_ns(&w.alien_queries, |k| m.get(k).map(|v| *v)));
        r.set("lookup_mops_1_thread", mops_for(&w.queries, 1, secs, &|| Box::new(&get) as Get<'_>));
        r.set("lookup_mops_2_threads", mops_for(&w.queries, 2, secs, &|| Box::new(&get) as Get<'_>));
        let mut c = 0u64;
        let mut update = |_| {
            let (ins, i) = churn(c, fresh.len() as u64);
            c += 1;
            if ins {
                m.insert(fresh.get(i).into(), c & vm);
            } else {
                m.remove(fresh.get(i));
            }
        };
        under_writer(&mut r, "lookup", &w.queries, rates, secs, reps, &|| Box::new(&get) as Get<'_>, &mut update);
        r.set("note", "dashmap 6 DashMap<Box<[u8]>, u64>; memory estimated as for hashbrown");
        out.push(r);
    }
    out
}

/// Runs the partial-key cuckoo benchmark: one record per fingerprint width.
pub fn run_partial(a: &CuckooPartialArgs) -> Result<Vec<Record>, String> {
    use cuckoo::partial;
    let w = Workload::from_args(&a.common)?;
    let n = w.n();
    let mut out = Vec::new();
    for &f in &a.fingerprint_bits {
        if 1 + f + w.value_bits > 64 {
            continue;
        }
        let opts = partial::Options { fingerprint_bits: f, ..partial::Options::default() };
        let (ctl, build_s) = time(|| partial::Control::from_items_with(w.items(), w.value_bits, opts));
        let mut ctl = ctl.map_err(|e| e.to_string())?;
        let table = ctl.export();
        let mut r = Record::new(&format!("pkcuckoo_f{f}"), n, w.value_bits, w.kt);
        let mem = table.memory_bytes();
        r.set("fingerprint_bits", f);
        r.set("memory_bytes", mem).set("bits_per_key", mem as f64 * 8.0 / n as f64);
        r.set("extra_bits_per_key", (mem as f64 * 8.0 - (n as f64 * w.value_bits as f64)) / n as f64);
        r.set("load_factor", ctl.load_factor());
        r.set("build_ns_per_key", build_s * 1e9 / n as f64);
        let wrong = w.items().filter(|(k, v)| table.get(k) != Some(*v)).count();
        r.set("valid_collision_rate", wrong as f64 / n as f64);
        r.set("valid_collision_rate_control", ctl.collision_count() as f64 / n as f64);
        let fp = w.alien.iter().filter(|k| table.get(k).is_some()).count();
        r.set("false_positive_rate", fp as f64 / w.alien.len() as f64);
        r.set("lookup_ns", lookup_ns(&w.queries, |k| table.get(k)));
        r.set("batch_lookup_ns", batch_ns(&table, &w.queries, 16));
        r.set("alien_lookup_ns", lookup_ns(&w.alien_queries, |k| table.get(k)));
        let ops = w.updates.min(n.max(3)).max(3);
        let (e2e, ctl_only) = measure_updates(&mut ctl, &table, &w, ops);
        r.set("update_ops_per_s", e2e).set("update_ops_per_s_control_only", ctl_only);
        out.push(r);
    }
    Ok(out)
}
