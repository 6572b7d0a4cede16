//! A/B timing of the structures on the generic engine: build, single,
//! batched and reader lookups, and updates (insert + remove deltas applied
//! to a lookup form), at `N` keys (default 1M).
//!
//! `cargo run --release -p keyplane --example engine_ab -- [N] [structure,...]`
//! prints one JSON object per measurement (ns per operation; build in ms).
//! Build one binary before a change and one after, then alternate them.

use keyplane::describe::{Configure, Opts};
use keyplane::{LookupTable, ReadHandle};
use std::hint::black_box;
use std::time::Instant;

fn key(i: u64, names: bool) -> Vec<u8> {
    if names {
        format!("/com/example/n{}/{}", i % 97, i).into_bytes()
    } else {
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes().to_vec()
    }
}

/// This thread's CPU time in ns (`/proc/thread-self/schedstat`; 0 where it
/// cannot be read). On a loaded machine CPU time is steadier than wall time.
fn cpu_ns() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0.0)
}

/// Wall-clock and CPU ns per operation of `f` over `n` operations.
fn timed(n: u64, f: impl FnOnce()) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ns());
    f();
    let c = cpu_ns() - c;
    (t.elapsed().as_nanos() as f64 / n as f64, c / n as f64)
}

fn run<C: Configure>(n: u64, names: bool, vbits: u32) {
    let name = C::NAME;
    let vmask = (1u64 << vbits) - 1;
    let keys: Vec<Vec<u8>> = (0..n).map(|i| key(i, names)).collect();
    let items = keys.iter().enumerate().map(|(i, k)| (k.as_slice(), (i as u64 * 7) & vmask));
    let opts = Opts::parse("seed=7").unwrap();
    let (t, c) = (Instant::now(), cpu_ns());
    let mut ctl = C::build_with(items, vbits, &opts).unwrap();
    let build_ms = (t.elapsed().as_secs_f64() * 1e3, (cpu_ns() - c) / 1e6);
    let table = ctl.export();
    // Lookup order: a fixed pseudo-random permutation of the stored keys.
    let q: Vec<&[u8]> = (0..n).map(|i| keys[((i * 0x9e37_79b9) % n) as usize].as_slice()).collect();
    let mut s = 0u64;
    let mut out = vec![None; 16];
    let single = timed(n, || {
        for k in &q {
            s = s.wrapping_add(table.get(k).unwrap_or(1));
        }
    });
    let batch = timed(n, || {
        for ks in q.chunks(16) {
            table.get_batch(ks, &mut out[..ks.len()]);
            s = s.wrapping_add(out[0].unwrap_or(1));
        }
    });
    let r = table.reader();
    let reader = timed(n, || {
        for k in &q {
            s = s.wrapping_add(r.get(k).unwrap_or(1));
        }
    });
    let reader_batch = timed(n, || {
        for ks in q.chunks(16) {
            r.get_batch(ks, &mut out[..ks.len()]);
            s = s.wrapping_add(out[0].unwrap_or(1));
        }
    });
    // Integer keys (8-byte keys only): `get_u64` on the table and the reader.
    let (mut get_u64, mut reader_u64) = ((f64::NAN, f64::NAN), (f64::NAN, f64::NAN));
    if !names {
        let qu: Vec<u64> = q.iter().map(|k| u64::from_le_bytes(k[..8].try_into().unwrap())).collect();
        get_u64 = timed(n, || {
            for &k in &qu {
                s = s.wrapping_add(table.get_u64(k).unwrap_or(1));
            }
        });
        reader_u64 = timed(n, || {
            for &k in &qu {
                s = s.wrapping_add(r.get_u64(k).unwrap_or(1));
            }
        });
    }
    drop(r);
    black_box(s);
    // Updates: insert 100K new keys then remove them, each delta applied.
    let u = (n / 10).max(1);
    let update = timed(2 * u, || {
        for i in 0..u {
            let d = ctl.insert(&key(n + i, names), i & vmask).unwrap();
            table.apply(&d).unwrap();
        }
        for i in 0..u {
            if let Some(d) = ctl.remove(&key(n + i, names)).unwrap() {
                table.apply(&d).unwrap();
            }
        }
    });
    for (what, (v, c)) in [
        ("build_ms", build_ms),
        ("get_ns", single),
        ("batch_ns", batch),
        ("reader_ns", reader),
        ("reader_batch_ns", reader_batch),
        ("get_u64_ns", get_u64),
        ("reader_u64_ns", reader_u64),
        ("update_ns", update),
    ] {
        if v.is_nan() {
            continue;
        }
        let label = if names { format!("{name}-names") } else { name.to_string() };
        println!("{{\"structure\":\"{label}\",\"keys\":{n},\"what\":\"{what}\",\"value\":{v:.2},\"cpu\":{c:.2}}}");
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = a.first().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let only: Vec<String> = a.get(1).map(|s| s.split(',').map(String::from).collect()).unwrap_or_default();
    let want = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    if want("bfw") {
        run::<keyplane::bfw::Control>(n, false, 4);
    }
    if want("cfw") {
        run::<keyplane::cfw::Control>(n, false, 8);
    }
    if want("cuckoo") {
        run::<keyplane::cuckoo::Control>(n, false, 8);
    }
    if want("cuckoo-wide") {
        // Name keys: the wide layout, long keys in the arena.
        run::<keyplane::cuckoo::Control>(n, true, 8);
    }
    if want("cuckoo-partial") {
        run::<keyplane::cuckoo::partial::Control>(n, false, 8);
    }
    if want("fht") {
        run::<keyplane::fht::Control>(n, true, 8);
    }
    if want("fpt") {
        run::<keyplane::fpt::Control>(n, true, 8);
    }
    if want("ludo") {
        run::<keyplane::ludo::Control>(n, false, 8);
    }
}
