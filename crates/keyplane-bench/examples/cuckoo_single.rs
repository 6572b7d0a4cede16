//! Single-lookup latency of the cuckoo map next to a memory floor, in the
//! protocol of the C++ reference harnesses (docs/benchmarks.md, "Cuckoo
//! single get"): random 8-byte keys `mix64(i ^ 2^40)`, 8-bit values
//! `mix64(i ^ 0x5eed) & 0xff`, query stream `keys[reduce64(mix64(i ^ 3), n)]`;
//! one measurement round per line read on stdin (a driver alternates
//! binaries), median of in-process repetitions in thread CPU time.
//!
//! `cargo run --release -p keyplane-bench --example cuckoo_single -- N QUERIES REPS [wide|keyed] [PATH]`
//! (with PATH = none, self, reader, reader_u64 or self_u64: one pass of that
//! path and exit, for callgrind instruction counts).
use keyplane::cuckoo::{Control, KeyLayout, Options};
use keyplane::hash::{mix64, reduce64};
use keyplane::{ControlTable, LookupTable, ReadHandle};
use std::hint::black_box;
use std::io::BufRead;

/// This thread's CPU time in ns.
fn cpu_ns() -> f64 {
    keyplane_perf::ludo::thread_cpu_ns() as f64
}

/// Median (thread CPU ns, wall ns) per query over `reps` passes.
fn median(q: &[u64], reps: usize, mut f: impl FnMut(u64) -> u64) -> (f64, f64) {
    let (mut c, mut w) = (Vec::new(), Vec::new());
    let mut acc = 0u64;
    for _ in 0..reps {
        let (t0, c0) = (std::time::Instant::now(), cpu_ns());
        for &k in q {
            acc = acc.wrapping_add(f(k));
        }
        c.push((cpu_ns() - c0) / q.len() as f64);
        w.push(t0.elapsed().as_nanos() as f64 / q.len() as f64);
    }
    black_box(acc);
    c.sort_by(f64::total_cmp);
    w.sort_by(f64::total_cmp);
    (c[c.len() / 2], w[w.len() / 2])
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let qn: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1 << 23);
    let reps: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let wide = a.get(4).is_some_and(|s| s == "wide");
    let keys: Vec<u64> = (0..n as u64).map(|i| mix64(i ^ (1 << 40))).collect();
    let vals: Vec<u64> = (0..n as u64).map(|i| mix64(i ^ 0x5eed) & 0xff).collect();
    let opts = Options { keys: if wide { KeyLayout::Wide } else { KeyLayout::Auto }, ..Options::default() };
    let t0 = std::time::Instant::now();
    let ctl = Control::from_items_with(keys.iter().zip(&vals).map(|(k, v)| (k.to_le_bytes(), *v)), 8, opts).unwrap();
    let build_s = t0.elapsed().as_secs_f64();
    let t = ctl.export();
    drop(ctl);
    let r = t.reader();
    let bad = keys.iter().zip(&vals).filter(|(k, v)| r.get_u64(**k) != Some(**v)).count();
    let q: Vec<u64> = (0..qn as u64).map(|i| keys[reduce64(mix64(i ^ 3), n as u64) as usize]).collect();
    let qb: Vec<[u8; 8]> = q.iter().map(|k| k.to_le_bytes()).collect();
    // Floor: a buffer of the table's size in 64-byte lines; one random
    // line per lookup, and two (the two buckets a lookup loads).
    let lines = (t.memory_bytes() / 64).max(1);
    let buf: Vec<[u64; 8]> = (0..lines as u64).map(|i| [mix64(i); 8]).collect();
    let line = |k: u64, s: u64| &buf[reduce64(mix64(k ^ s), lines as u64) as usize];
    let label = if wide { "keyplane cuckoo (wide layout)" } else { "keyplane cuckoo (keyed layout)" };
    // Instruction counts (valgrind --tool=callgrind): one pass of one path.
    if let Some(only) = a.get(5) {
        let mut acc = 0u64;
        for (k, kb) in q.iter().zip(&qb) {
            acc = acc.wrapping_add(match only.as_str() {
                "self" => t.get(kb).unwrap_or(0),
                "reader" => r.get(kb).unwrap_or(0),
                "reader_u64" => r.get_u64(*k).unwrap_or(0),
                "self_u64" => t.get_u64(*k).unwrap_or(0),
                _ => *k & 1,
            });
        }
        println!("{acc}");
        return;
    }
    eprintln!("ready");
    for l in std::io::stdin().lock().lines() {
        if l.is_err() {
            break;
        }
        let mut i = 0usize;
        let lookup_self = median(&q, reps, |_| {
            i = (i + 1) % qb.len();
            t.get(&qb[i]).unwrap_or(0)
        });
        let reader_get = median(&q, reps, |_| {
            i = (i + 1) % qb.len();
            r.get(&qb[i]).unwrap_or(0)
        });
        let reader_u64 = median(&q, reps, |k| r.get_u64(k).unwrap_or(0));
        let self_u64 = median(&q, reps, |k| t.get_u64(k).unwrap_or(0));
        let refs: Vec<&[u8]> = qb.iter().map(|k| k.as_slice()).collect();
        let mut out = [None; 16];
        let batch = {
            let (mut c, mut w) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                let (t0, c0) = (std::time::Instant::now(), cpu_ns());
                for ch in refs.chunks(16) {
                    r.get_batch(ch, &mut out[..ch.len()]);
                    black_box(out[0]);
                }
                c.push((cpu_ns() - c0) / refs.len() as f64);
                w.push(t0.elapsed().as_nanos() as f64 / refs.len() as f64);
            }
            c.sort_by(f64::total_cmp);
            w.sort_by(f64::total_cmp);
            (c[c.len() / 2], w[w.len() / 2])
        };
        let floor1 = median(&q, reps, |k| line(k, 1)[0]);
        let floor2 = median(&q, reps, |k| line(k, 1)[0] ^ line(k, 2)[0]);
        println!(
            "{{\"impl\":\"{label}\",\"n\":{n},\"bad\":{bad},\"build_s\":{build_s:.3},\"bits_per_key\":{:.2},\
             \"get_self_cpu_ns\":{:.2},\"get_reader_cpu_ns\":{:.2},\"get_u64_reader_cpu_ns\":{:.2},\"get_u64_self_cpu_ns\":{:.2},\
             \"batch16_cpu_ns\":{:.2},\"floor_1line_cpu_ns\":{:.2},\"floor_2lines_cpu_ns\":{:.2},\
             \"get_reader_wall_ns\":{:.2},\"get_u64_reader_wall_ns\":{:.2}}}",
            t.memory_bytes() as f64 * 8.0 / n as f64,
            lookup_self.0,
            reader_get.0,
            reader_u64.0,
            self_u64.0,
            batch.0,
            floor1.0,
            floor2.0,
            reader_get.1,
            reader_u64.1
        );
    }
}
