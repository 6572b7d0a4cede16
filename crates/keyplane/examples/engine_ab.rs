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

fn run<C: Configure>(n: u64, names: bool, vbits: u32) {
    let name = C::NAME;
    let vmask = (1u64 << vbits) - 1;
    let keys: Vec<Vec<u8>> = (0..n).map(|i| key(i, names)).collect();
    let items = keys.iter().enumerate().map(|(i, k)| (k.as_slice(), (i as u64 * 7) & vmask));
    let opts = Opts::parse("seed=7").unwrap();
    let t = Instant::now();
    let mut ctl = C::build_with(items, vbits, &opts).unwrap();
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let table = ctl.export();
    // Lookup order: a fixed pseudo-random permutation of the stored keys.
    let q: Vec<&[u8]> = (0..n).map(|i| keys[((i * 0x9e37_79b9) % n) as usize].as_slice()).collect();
    let t = Instant::now();
    let mut s = 0u64;
    for k in &q {
        s = s.wrapping_add(table.get(k).unwrap_or(1));
    }
    let single = t.elapsed().as_nanos() as f64 / n as f64;
    let mut out = vec![None; 16];
    let t = Instant::now();
    for ks in q.chunks(16) {
        table.get_batch(ks, &mut out[..ks.len()]);
        s = s.wrapping_add(out[0].unwrap_or(1));
    }
    let batch = t.elapsed().as_nanos() as f64 / n as f64;
    let r = table.reader();
    let t = Instant::now();
    for k in &q {
        s = s.wrapping_add(r.get(k).unwrap_or(1));
    }
    let reader = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    for ks in q.chunks(16) {
        r.get_batch(ks, &mut out[..ks.len()]);
        s = s.wrapping_add(out[0].unwrap_or(1));
    }
    let reader_batch = t.elapsed().as_nanos() as f64 / n as f64;
    drop(r);
    black_box(s);
    // Updates: insert 100K new keys then remove them, each delta applied.
    let u = (n / 10).max(1);
    let t = Instant::now();
    for i in 0..u {
        let d = ctl.insert(&key(n + i, names), i & vmask).unwrap();
        table.apply(&d).unwrap();
    }
    for i in 0..u {
        if let Some(d) = ctl.remove(&key(n + i, names)).unwrap() {
            table.apply(&d).unwrap();
        }
    }
    let update = t.elapsed().as_nanos() as f64 / (2 * u) as f64;
    for (what, v) in [
        ("build_ms", build_ms),
        ("get_ns", single),
        ("batch_ns", batch),
        ("reader_ns", reader),
        ("reader_batch_ns", reader_batch),
        ("update_ns", update),
    ] {
        println!("{{\"structure\":\"{name}\",\"keys\":{n},\"what\":\"{what}\",\"value\":{v:.2}}}");
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
    if want("cuckoo-partial") {
        run::<keyplane::cuckoo::partial::Control>(n, false, 8);
    }
    if want("fht") {
        run::<keyplane::fht::Control>(n, true, 8);
    }
    if want("fpt") {
        run::<keyplane::fpt::Control>(n, true, 8);
    }
    if want("othello") {
        run::<keyplane::othello::Control>(n, false, 8);
    }
    if want("ludo") {
        run::<keyplane::ludo::Control>(n, false, 8);
    }
}
