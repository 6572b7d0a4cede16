//! A/B timing of the structures on the generic engine: build, single,
//! batched and reader lookups, and updates (insert + remove deltas applied
//! to a lookup form), at `N` keys (default 1M).
//!
//! `cargo run --release -p keyplane --example engine_ab -- [N] [structure,...] [UPDATES]`
//! prints one JSON object per measurement (ns per operation; build in ms):
//! `value` in wall time, `cpu` in the thread's CPU time (time spent
//! descheduled on a loaded machine is not counted). `UPDATES` inserts (and as
//! many removes) are timed, default `N / 10`. Build one binary before a
//! change and one after, then alternate them.

use keyplane::describe::{Configure, Opts};
use keyplane::{LookupTable, ReadHandle};
use std::hint::black_box;
use std::time::Instant;

fn cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// Wall and thread-CPU time since it started.
struct Clock(Instant, f64);

impl Clock {
    fn start() -> Self {
        Clock(Instant::now(), cpu_ns())
    }
    /// `(wall, cpu)` nanoseconds per operation of `ops`.
    fn per(&self, ops: u64) -> (f64, f64) {
        (self.0.elapsed().as_nanos() as f64 / ops as f64, (cpu_ns() - self.1) / ops as f64)
    }
}

/// Timed passes per lookup section (`ENGINE_AB_REPS`, default 1): the
/// fastest pass is reported, which on a shared VM filters out the passes a
/// neighbour disturbed. The callgrind split of `scripts/engine_ab.py`
/// counts on one pass per section, so it runs with the default.
fn reps() -> u32 {
    std::env::var("ENGINE_AB_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1)
}

/// `(wall, cpu)` ns per operation of the pass with the least CPU time of
/// `reps` timed passes of `pass` (which returns its operation count).
fn best(reps: u32, s: &mut u64, mut pass: impl FnMut(&mut u64) -> u64) -> (f64, f64) {
    let mut min = (f64::INFINITY, f64::INFINITY);
    for _ in 0..reps {
        let t = Clock::start();
        let ops = pass(s);
        let r = t.per(ops);
        if r.1 < min.1 {
            min = r;
        }
    }
    min
}

fn key(i: u64, names: bool) -> Vec<u8> {
    if names {
        format!("/com/example/n{}/{}", i % 97, i).into_bytes()
    } else {
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes().to_vec()
    }
}

fn run<C: Configure>(n: u64, names: bool, vbits: u32, updates: Option<u64>) {
    let name = C::NAME;
    let vmask = (1u64 << vbits) - 1;
    let keys: Vec<Vec<u8>> = (0..n).map(|i| key(i, names)).collect();
    let items = keys.iter().enumerate().map(|(i, k)| (k.as_slice(), (i as u64 * 7) & vmask));
    let opts = Opts::parse("seed=7").unwrap();
    let t = Clock::start();
    let mut ctl = C::build_with(items, vbits, &opts).unwrap();
    let (b, bc) = t.per(1);
    let build_ms = (b / 1e6, bc / 1e6);
    let table = ctl.export();
    // Lookup order: a fixed pseudo-random permutation of the stored keys.
    let q: Vec<&[u8]> = (0..n).map(|i| keys[((i * 0x9e37_79b9) % n) as usize].as_slice()).collect();
    // One untimed pass first: the first touch of a fresh table's pages
    // would otherwise be charged to whichever path runs first.
    let mut s = 0u64;
    for k in &q {
        s = s.wrapping_add(table.get(k).unwrap_or(1));
    }
    let reps = reps();
    let single = best(reps, &mut s, |s| {
        for k in &q {
            *s = s.wrapping_add(table.get(k).unwrap_or(1));
        }
        n
    });
    let mut out = vec![None; 16];
    let batch = best(reps, &mut s, |s| {
        for ks in q.chunks(16) {
            table.get_batch(ks, &mut out[..ks.len()]);
            *s = s.wrapping_add(out[0].unwrap_or(1));
        }
        n
    });
    let r = table.reader();
    let reader = best(reps, &mut s, |s| {
        for k in &q {
            *s = s.wrapping_add(r.get(k).unwrap_or(1));
        }
        n
    });
    let reader_batch = best(reps, &mut s, |s| {
        for ks in q.chunks(16) {
            r.get_batch(ks, &mut out[..ks.len()]);
            *s = s.wrapping_add(out[0].unwrap_or(1));
        }
        n
    });
    // `get_u64` on the stored keys that are 8 bytes long (all of them
    // without `names`).
    let q64: Vec<u64> = q.iter().filter_map(|k| <[u8; 8]>::try_from(*k).ok()).map(u64::from_le_bytes).collect();
    let get_u64 = best(reps, &mut s, |s| {
        for &k in &q64 {
            *s = s.wrapping_add(table.get_u64(k).unwrap_or(1));
        }
        q64.len().max(1) as u64
    });
    let reader_u64 = best(reps, &mut s, |s| {
        for &k in &q64 {
            *s = s.wrapping_add(r.get_u64(k).unwrap_or(1));
        }
        q64.len().max(1) as u64
    });
    drop(r);
    black_box(s);
    // Updates: insert new keys then remove them, each delta applied.
    let u = updates.unwrap_or(n / 10).max(1);
    let t = Clock::start();
    for i in 0..u {
        let d = ctl.insert(&key(n + i, names), i & vmask).unwrap();
        table.apply(&d).unwrap();
    }
    for i in 0..u {
        if let Some(d) = ctl.remove(&key(n + i, names)).unwrap() {
            table.apply(&d).unwrap();
        }
    }
    let update = t.per(2 * u);
    let mut rows = vec![
        ("build_ms", build_ms),
        ("get_ns", single),
        ("batch_ns", batch),
        ("reader_ns", reader),
        ("reader_batch_ns", reader_batch),
    ];
    if !q64.is_empty() {
        rows.extend([("get_u64_ns", get_u64), ("reader_u64_ns", reader_u64)]);
    }
    rows.push(("update_ns", update));
    let label = if names { format!("{name}-names") } else { name.to_string() };
    for (what, (v, c)) in rows {
        println!("{{\"structure\":\"{label}\",\"keys\":{n},\"what\":\"{what}\",\"value\":{v:.2},\"cpu\":{c:.2}}}");
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = a.first().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let only: Vec<String> = a.get(1).map(|s| s.split(',').map(String::from).collect()).unwrap_or_default();
    let want = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    let updates: Option<u64> = a.get(2).and_then(|s| s.parse().ok());
    if want("bfw") {
        run::<keyplane::bfw::Control>(n, false, 4, updates);
    }
    if want("cfw") {
        run::<keyplane::cfw::Control>(n, false, 8, updates);
    }
    if want("cuckoo") {
        run::<keyplane::cuckoo::Control>(n, false, 8, updates);
    }
    if want("cuckoo-wide") {
        // Name keys: the wide layout, long keys in the arena.
        run::<keyplane::cuckoo::Control>(n, true, 8, updates);
    }
    if want("cuckoo-partial") {
        run::<keyplane::cuckoo::partial::Control>(n, false, 8, updates);
    }
    if want("fht") {
        run::<keyplane::fht::Control>(n, true, 8, updates);
    }
    if want("fpt") {
        run::<keyplane::fpt::Control>(n, true, 8, updates);
    }
    if want("othello") {
        run::<keyplane::othello::Control>(n, false, 8, updates);
    }
    if want("ludo") {
        run::<keyplane::ludo::Control>(n, false, 8, updates);
    }
    if want("setsep") {
        run::<keyplane::setsep::Control>(n, false, 8, updates);
    }
}
