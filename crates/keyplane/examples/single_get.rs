//! Single-lookup benchmark (issue #20): keyplane `get` (&self and reader),
//! the typed `get_u64` (&self and reader) and batched lookups of Othello,
//! SetSep and the (2,4) cuckoo map, next to floors measured in the same run, one JSON line per
//! structure per round.
//!
//! ```text
//! single_get --n 1M [--structures othello,othello_pow2,setsep,cuckoo] [--queries 8M] [--reps 5] [--rounds 3] [--serve] [--decode] [--batch 16]
//! ```
//!
//! Keys, values and the query stream are the C++ reference harnesses' (see
//! docs/benchmarks.md, "Reference harnesses"): `mix64(i ^ 1 << 40)` keys,
//! 8-bit values, queries `keys[reduce64(mix64(i ^ 3), n)]`. Every figure is
//! the median of `--reps` passes over the stream, in thread CPU time (time
//! spent descheduled on a loaded machine is not counted) and in wall time.
//! With `--serve` the tables are built once and one round runs per line read
//! on stdin, so a driver can alternate this binary with the references
//! (`scripts/single_get.py`). Build with
//! `cargo build --release -p keyplane --example single_get`.
use keyplane::ext::mem::{advise_hugepages, prefetch};
use keyplane::hash::{mix64, reduce64};
use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, cuckoo, othello, setsep};
use std::hint::black_box;
use std::io::BufRead;
use std::time::Instant;

fn cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median (cpu, wall) ns per operation of `reps` runs of `f` (`ops` operations each).
fn timed(reps: usize, ops: usize, mut f: impl FnMut() -> u64) -> (f64, f64) {
    let (mut c, mut w) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let c0 = cpu_ns();
        black_box(f());
        c.push((cpu_ns() - c0) / ops as f64);
        w.push(t.elapsed().as_nanos() as f64 / ops as f64);
    }
    (median(c), median(w))
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(-1.0)
}

/// A buffer of `bytes` for the floors (huge-page advice like the tables').
fn floor_buffer(bytes: usize) -> Vec<u64> {
    let mut v: Vec<u64> = vec![0; (bytes / 8).max(1 << 16)];
    advise_hugepages(&v);
    v.iter_mut().enumerate().for_each(|(i, x)| *x = i as u64);
    v
}

/// `lines` independent random 8-byte reads per query key (index from one
/// multiply of the key, like a hash), in a loop of independent iterations:
/// the floor a loop of single lookups touching that many lines can reach.
fn floor_loop(buf: &[u64], q: &[u64], lines: usize) -> u64 {
    let n = buf.len() as u64;
    let mut acc = 0u64;
    for &k in q {
        let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        acc = acc.wrapping_add(buf[reduce64(h, n) as usize]);
        if lines > 1 {
            acc = acc.wrapping_add(buf[reduce64(h.rotate_left(32), n) as usize]);
        }
    }
    acc
}

/// The same reads prefetched 16 keys ahead (the batched floor).
fn floor_batched(buf: &[u64], q: &[u64], lines: usize) -> u64 {
    let n = buf.len() as u64;
    let mut acc = 0u64;
    let mut idx = [0usize; 32];
    for ch in q.chunks(16) {
        for (j, &k) in ch.iter().enumerate() {
            let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            idx[2 * j] = reduce64(h, n) as usize;
            idx[2 * j + 1] = reduce64(h.rotate_left(32), n) as usize;
            prefetch(&buf[idx[2 * j]]);
            if lines > 1 {
                prefetch(&buf[idx[2 * j + 1]]);
            }
        }
        for j in 0..ch.len() {
            acc = acc.wrapping_add(buf[idx[2 * j]]);
            if lines > 1 {
                acc = acc.wrapping_add(buf[idx[2 * j + 1]]);
            }
        }
    }
    acc
}

/// Typed batched lookups (`get_batch_u64`): one pass over `q` in calls of
/// `batch()` keys, through `f` (a reader's or the table's `get_batch_u64`),
/// summing each call's first answer.
fn batched_u64(q: &[u64], mut f: impl FnMut(&[u64], &mut [Option<u64>])) -> u64 {
    let mut out = vec![None; batch()];
    q.chunks(batch()).fold(0u64, |a, ch| {
        f(ch, &mut out[..ch.len()]);
        a.wrapping_add(out[0].unwrap_or(1))
    })
}

/// Keys per `get_batch` / `get_batch_u64` call (`--batch`, default 16;
/// the JSON keys say `16` whatever it is, and `batch` records it).
static BATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(16);

fn batch() -> usize {
    BATCH.load(std::sync::atomic::Ordering::Relaxed)
}

/// One table under test.
struct Bench<'a, L> {
    name: &'static str,
    n: usize,
    build_s: f64,
    t: &'a L,
}

fn round<L: LookupTable>(b: &Bench<'_, L>, q: &[u64], qb: &[[u8; 8]], reps: usize) -> String {
    let ops = q.len();
    let sum = |o: Option<u64>| o.unwrap_or(1);
    let t = b.t;
    let self_get = timed(reps, ops, || qb.iter().fold(0u64, |a, k| a.wrapping_add(sum(t.get(k)))));
    let rd = t.reader();
    let rd = &rd;
    let reader_get = timed(reps, ops, || qb.iter().fold(0u64, |a, k| a.wrapping_add(sum(rd.get(k)))));
    let self_u64 = timed(reps, ops, || q.iter().fold(0u64, |a, &k| a.wrapping_add(sum(t.get_u64(k)))));
    let reader_u64 = timed(reps, ops, || q.iter().fold(0u64, |a, &k| a.wrapping_add(sum(rd.get_u64(k)))));
    let refs: Vec<&[u8]> = qb.iter().map(|k| &k[..]).collect();
    let mut out = vec![None; batch()];
    let batched = timed(reps, ops, || {
        let mut a = 0u64;
        for ch in refs.chunks(batch()) {
            t.get_batch(ch, &mut out[..ch.len()]);
            a = a.wrapping_add(sum(out[0]));
        }
        a
    });
    let batched_reader = timed(reps, ops, || {
        let mut a = 0u64;
        for ch in refs.chunks(batch()) {
            rd.get_batch(ch, &mut out[..ch.len()]);
            a = a.wrapping_add(sum(out[0]));
        }
        a
    });
    let batched_u64_reader = timed(reps, ops, || batched_u64(q, |k, o| rd.get_batch_u64(k, o)));
    let batched_u64_self = timed(reps, ops, || batched_u64(q, |k, o| t.get_batch_u64(k, o)));
    // Attribution without memory: the typed hash and index arithmetic alone.
    let hash_only = timed(reps, ops, || {
        q.iter().fold(0u64, |a, &k| {
            let h = keyplane::hash::hash_u64(k, 0x1234);
            a.wrapping_add(keyplane::hash::reduce(h as u32, 1 << 24) as u64 ^ (h >> 40))
        })
    });
    let memory = t.memory_bytes();
    let buf = floor_buffer(memory);
    let f1 = timed(reps, ops, || floor_loop(&buf, q, 1));
    let f2 = timed(reps, ops, || floor_loop(&buf, q, 2));
    let fb2 = timed(reps, ops, || floor_batched(&buf, q, 2));
    drop(buf);
    let pair = |(c, w): (f64, f64)| format!("{{\"cpu_ns\":{c:.3},\"wall_ns\":{w:.3}}}");
    let mut j = format!(
        "{{\"impl\":\"keyplane {}\",\"structure\":\"{}\",\"n\":{},\"value_bits\":8,\"queries\":{ops},\"reps\":{reps},\"memory_bytes\":{},\"bits_per_key\":{:.3},\"build_s\":{:.3},\"load_average\":{},\"batch\":{}",
        b.name,
        b.name,
        b.n,
        memory,
        memory as f64 * 8.0 / b.n as f64,
        b.build_s,
        load_average(),
        batch()
    );
    for (k, v) in [
        ("get_self", self_get),
        ("get_reader", reader_get),
        ("get_u64_self", self_u64),
        ("get_u64_reader", reader_u64),
        ("batched_16", batched),
        ("batched_16_reader", batched_reader),
        ("batched_u64_16_reader", batched_u64_reader),
        ("batched_u64_16_self", batched_u64_self),
        ("hash_u64_only", hash_only),
        ("floor_1_line", f1),
        ("floor_2_lines", f2),
        ("floor_2_lines_batched", fb2),
    ] {
        j.push_str(&format!(",\"{k}\":{}", pair(v)));
    }
    j.push('}');
    j
}

/// Othello's [`othello::Reader8`] (`get_u64` specialised for plain 8-bit
/// values), timed like `round`'s paths and spliced into its JSON line.
fn with_reader8(line: String, t: &othello::Lookup, q: &[u64], reps: usize) -> String {
    let rd = t.reader8();
    let (c, w) = timed(reps, q.len(), || q.iter().fold(0u64, |a, &k| a.wrapping_add(rd.get_u64(k).unwrap_or(1))));
    let mut j = line;
    j.pop();
    j.push_str(&format!(",\"get_u64_reader8\":{{\"cpu_ns\":{c:.3},\"wall_ns\":{w:.3}}}}}"));
    j
}

/// One pass of one lookup path over the stream (for instruction counts).
fn only<L: LookupTable>(b: &Bench<'_, L>, path: &str, q: &[u64], qb: &[[u8; 8]]) {
    let (t, rd) = (b.t, b.t.reader());
    let sum = |o: Option<u64>| o.unwrap_or(1);
    let acc = match path {
        "none" => qb.iter().fold(0u64, |a, k| a.wrapping_add(k[0] as u64)),
        "get_self" => qb.iter().fold(0u64, |a, k| a.wrapping_add(sum(t.get(k)))),
        "get_reader" => qb.iter().fold(0u64, |a, k| a.wrapping_add(sum(rd.get(k)))),
        "get_u64_self" => q.iter().fold(0u64, |a, &k| a.wrapping_add(sum(t.get_u64(k)))),
        "get_u64_reader" => q.iter().fold(0u64, |a, &k| a.wrapping_add(sum(rd.get_u64(k)))),
        "batched" => {
            let refs: Vec<&[u8]> = qb.iter().map(|k| &k[..]).collect();
            let mut out = vec![None; batch()];
            refs.chunks(batch()).fold(0u64, |a, ch| {
                rd.get_batch(ch, &mut out[..ch.len()]);
                a.wrapping_add(sum(out[0]))
            })
        }
        "batched_self" => {
            let refs: Vec<&[u8]> = qb.iter().map(|k| &k[..]).collect();
            let mut out = vec![None; batch()];
            refs.chunks(batch()).fold(0u64, |a, ch| {
                t.get_batch(ch, &mut out[..ch.len()]);
                a.wrapping_add(sum(out[0]))
            })
        }
        "batched_u64" => batched_u64(q, |k, o| rd.get_batch_u64(k, o)),
        "batched_u64_self" => batched_u64(q, |k, o| t.get_batch_u64(k, o)),
        other => usage(&format!(
            "--only {other:?}: none, get_self, get_reader, get_u64_self, get_u64_reader, batched, batched_self, batched_u64, batched_u64_self"
        )),
    };
    println!("{} {path} {}", b.name, black_box(acc));
}

/// `1M`, `16M`, `65536`, `64K`.
fn parse_num(s: &str) -> Option<u64> {
    let (d, m) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    d.parse::<u64>().ok().map(|x| x * m)
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "single_get: {msg}\nusage: single_get [--n 1M] [--queries 8M] [--reps 5] [--rounds 3] [--structures othello,othello_pow2,setsep,cuckoo] [--serve] [--decode] [--only PATH] [--batch 16] [--othello-bits 8] [--othello-fp 0]"
    );
    std::process::exit(2)
}

fn main() {
    let mut opt = std::collections::HashMap::new();
    let mut serve = false;
    // `--decode`: Othello's lookup forms go through `to_bytes` / `from_bytes`
    // (the replica's path) instead of being the control form's export.
    let mut decode = false;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        match k.as_str() {
            "--serve" => serve = true,
            "--decode" => decode = true,
            "--n" | "--queries" | "--reps" | "--rounds" | "--structures" | "--only" | "--batch" | "--othello-bits"
            | "--othello-fp" => {
                let v = it.next().unwrap_or_else(|| usage(&format!("{k} needs a value")));
                opt.insert(k[2..].to_string(), v);
            }
            _ => usage(&format!("unknown argument {k:?}")),
        }
    }
    let num = |k: &str, d: u64| {
        opt.get(k).map(|v| parse_num(v).unwrap_or_else(|| usage(&format!("--{k}: not a number: {v}")))).unwrap_or(d)
    };
    let n = num("n", 1 << 20).max(1) as usize;
    let qn = num("queries", 1 << 23).max(1) as usize;
    let reps = num("reps", 5).max(1) as usize;
    let rounds = num("rounds", 3) as usize;
    BATCH.store(num("batch", 16).max(1) as usize, std::sync::atomic::Ordering::Relaxed);
    let structures = opt.get("structures").cloned().unwrap_or_else(|| "othello,othello_pow2,setsep".into());
    let keys: Vec<u64> = (0..n as u64).map(|i| mix64(i ^ (1 << 40))).collect();
    let vals: Vec<u64> = (0..n as u64).map(|i| mix64(i ^ 0x5eed) & 0xff).collect();
    let q: Vec<u64> = (0..qn as u64).map(|i| keys[reduce64(mix64(i ^ 3), n as u64) as usize]).collect();
    let qb: Vec<[u8; 8]> = q.iter().map(|k| k.to_le_bytes()).collect();
    let items = || keys.iter().map(|k| k.to_le_bytes()).zip(vals.iter().copied());

    let mut tables_o = Vec::new();
    let mut tables_s = Vec::new();
    let mut tables_c = Vec::new();
    for s in structures.split(',') {
        let t0 = Instant::now();
        match s {
            "othello" | "othello_pow2" => {
                let sizing = if s == "othello" { othello::Sizing::Compact } else { othello::Sizing::PowerOfTwo };
                // `--othello-bits` / `--othello-fp`: other layouts than the
                // plain 8-bit one (values stay below 2^8), for the cost of
                // the general path.
                let fingerprint_bits = num("othello-fp", 0) as u32;
                let opts = othello::Options { sizing, seed: 7, fingerprint_bits, ..Default::default() };
                let vb = num("othello-bits", 8) as u32;
                let ctl = othello::Control::from_items_with(items(), vb, opts).expect("othello build");
                let name = if s == "othello" { "othello" } else { "othello_pow2" };
                let t = ctl.export();
                let t = if decode { othello::Lookup::from_bytes(&t.to_bytes()).expect("othello decode") } else { t };
                tables_o.push((name, t, t0.elapsed().as_secs_f64()));
            }
            "setsep" => {
                let opts = setsep::Options { seed: 7, ..setsep::Options::default().threads(2) };
                let ctl = setsep::Control::from_items_with(items(), 8, opts).expect("setsep build");
                tables_s.push(("setsep", ctl.export(), t0.elapsed().as_secs_f64()));
            }
            "cuckoo" => {
                let opts = cuckoo::Options { seed: 7, ..Default::default() };
                let ctl = cuckoo::Control::from_items_with(items(), 8, opts).expect("cuckoo build");
                tables_c.push(("cuckoo", ctl.export(), t0.elapsed().as_secs_f64()));
            }
            other => {
                eprintln!("single_get: unknown structure {other:?} (othello, othello_pow2, setsep, cuckoo)");
                std::process::exit(2);
            }
        }
    }
    let bo: Vec<_> = tables_o.iter().map(|(name, t, s)| Bench { name, n, build_s: *s, t }).collect();
    let bs: Vec<_> = tables_s.iter().map(|(name, t, s)| Bench { name, n, build_s: *s, t }).collect();
    let bc: Vec<_> = tables_c.iter().map(|(name, t, s)| Bench { name, n, build_s: *s, t }).collect();
    // Correctness before speed: every path answers every key right.
    fn check<L: LookupTable>(b: &Bench<'_, L>, keys: &[u64], vals: &[u64]) {
        let rd = b.t.reader();
        for (i, k) in keys.iter().enumerate().step_by(97) {
            let want = Some(vals[i]);
            assert_eq!(b.t.get(&k.to_le_bytes()), want);
            assert_eq!(b.t.get_u64(*k), want);
            assert_eq!(rd.get_u64(*k), want);
        }
    }
    for b in &bo {
        let rd = b.t.reader8();
        for (i, k) in keys.iter().enumerate().step_by(97) {
            assert_eq!(rd.get_u64(*k), Some(vals[i]));
        }
    }
    bo.iter().for_each(|b| check(b, &keys, &vals));
    bs.iter().for_each(|b| check(b, &keys, &vals));
    bc.iter().for_each(|b| check(b, &keys, &vals));
    if let Some(path) = opt.get("only") {
        // Instruction counting (`valgrind --tool=callgrind`): one pass of
        // one path; `none` gives the harness's own count to subtract.
        if path == "get_u64_reader8" {
            for b in &bo {
                let rd = b.t.reader8();
                let acc = q.iter().fold(0u64, |a, &k| a.wrapping_add(rd.get_u64(k).unwrap_or(1)));
                println!("{} {path} {}", b.name, black_box(acc));
            }
            return;
        }
        bo.iter().for_each(|b| only(b, path, &q, &qb));
        bs.iter().for_each(|b| only(b, path, &q, &qb));
        bc.iter().for_each(|b| only(b, path, &q, &qb));
        return;
    }
    eprintln!("ready");
    let run_round = || {
        for b in &bo {
            println!("{}", with_reader8(round(b, &q, &qb, reps), b.t, &q, reps));
        }
        for b in &bs {
            println!("{}", round(b, &q, &qb, reps));
        }
        for b in &bc {
            println!("{}", round(b, &q, &qb, reps));
        }
    };
    if serve {
        for line in std::io::stdin().lock().lines() {
            if line.is_err() {
                break;
            }
            run_round();
        }
    } else {
        for _ in 0..rounds {
            run_round();
        }
    }
}
