//! Othello update rate after a bulk build (issue #20 item 4): power-of-two
//! and compact sizing, random 8-byte keys, 8-bit values; then inserts of new
//! keys, each delta applied to an exported lookup form (the full update
//! path: control insert, delta, apply). Prints one JSON line per sizing.
//!
//! `cargo run --release -p keyplane-bench --example othello_updates -- N UPDATES [pow2|compact] [MODE]`
//!
//! MODE (default `apply`):
//! * `apply`: insert, then `apply` the delta value (in-process replica);
//! * `wire`: insert, `to_bytes` of the delta, `Delta::from_bytes`, `apply`
//!   (what a controller and a data plane following it do per update);
//! * `control`: insert only (the delta is built and dropped);
//! * `batch`: the same updates in batches of `KEYPLANE_BENCH_BATCH` (default
//!   64): `Control::insert_batch`, then `Lookup::apply_batch` of the batch's
//!   deltas (each starts the cache misses of later updates early).
//!
//! `KEYPLANE_BENCH_HASH=xxh3` builds the tables with `othello::KeyHash::Xxh3`
//! (default `mum8`, the library's default), for an A/B in one binary.
//!
//! Rates are given per wall second and per CPU second of the thread (time
//! spent descheduled on a loaded machine is not counted). The timed loop is
//! `time_updates` (not inlined), so
//! `valgrind --tool=callgrind --toggle-collect='*time_updates*'` counts it
//! alone: instructions per update = (run with U updates − run with 1) / (U − 1).
use keyplane::hash::mix64;
use keyplane::othello::{Control, Delta, KeyHash, Lookup, Options, Sizing};
use keyplane::{ControlTable, LookupTable, Wire};
use std::time::Instant;

/// This thread's CPU time in ns.
fn cpu_ns() -> f64 {
    keyplane_perf::ludo::thread_cpu_ns() as f64
}

fn key(i: u64) -> [u8; 8] {
    mix64(i ^ (1 << 40)).to_le_bytes()
}

/// Inserts keys `n..n + ups` and applies every delta to `table` as `mode`
/// says; returns (wall ns, cpu ns) per update.
#[inline(never)]
fn time_updates(ctl: &mut Control, table: &Lookup, n: u64, ups: u64, mode: &str, batch: u64) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ns());
    if mode == "batch" {
        let mut items = Vec::with_capacity(batch as usize);
        for start in (n..n + ups).step_by(batch as usize) {
            items.clear();
            items.extend((start..(start + batch).min(n + ups)).map(|i| (key(i), i & 0xff)));
            let deltas: Vec<Delta> = ctl.insert_batch(&items).into_iter().map(|d| d.expect("insert")).collect();
            table.apply_batch(&deltas).expect("apply");
        }
        return (t.elapsed().as_nanos() as f64 / ups as f64, (cpu_ns() - c) / ups as f64);
    }
    for i in n..n + ups {
        let d = ctl.insert(&key(i), i & 0xff).expect("insert");
        match mode {
            "control" => drop(std::hint::black_box(d)),
            "wire" => {
                let bytes = d.to_bytes();
                table.apply(&Delta::from_bytes(&bytes).expect("decode")).expect("apply");
            }
            _ => table.apply(&d).expect("apply"),
        }
    }
    (t.elapsed().as_nanos() as f64 / ups as f64, (cpu_ns() - c) / ups as f64)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: u64 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(16_000_000);
    let ups: u64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let only = a.get(3).cloned().unwrap_or_default();
    let mode = a.get(4).cloned().unwrap_or_else(|| "apply".into());
    let batch: u64 = std::env::var("KEYPLANE_BENCH_BATCH").ok().and_then(|s| s.parse().ok()).unwrap_or(64).max(1);
    let hash = match std::env::var("KEYPLANE_BENCH_HASH").as_deref() {
        Ok("xxh3") => KeyHash::Xxh3,
        Ok("mum8") | Err(_) => KeyHash::Mum8,
        Ok(other) => {
            eprintln!("othello_updates: KEYPLANE_BENCH_HASH must be xxh3 or mum8, not {other:?}");
            std::process::exit(2);
        }
    };
    if !["apply", "wire", "control", "batch"].contains(&mode.as_str()) {
        eprintln!("othello_updates: MODE must be apply, wire, control or batch, not {mode:?}");
        std::process::exit(2);
    }
    for (name, sizing) in [("pow2", Sizing::PowerOfTwo), ("compact", Sizing::Compact)] {
        if !only.is_empty() && only != name {
            continue;
        }
        let opts = Options { sizing, seed: 0x5eed, hash, ..Options::default() };
        let t0 = std::time::Instant::now();
        let mut ctl =
            Control::from_items_with((0..n).map(|i| (key(i), mix64(i) & 0xff)), 8, opts).expect("othello build");
        let build_s = t0.elapsed().as_secs_f64();
        let table = ctl.export();
        let before = ctl.stats();
        let (wall, cpu) = time_updates(&mut ctl, &table, n, ups, &mode, batch);
        let s = ctl.stats();
        // The replica answers every key it was sent (`control` sends none).
        for i in (0..if mode == "control" { n } else { n + ups }).step_by(997) {
            assert_eq!(table.get(&key(i)), Some(if i < n { mix64(i) & 0xff } else { i & 0xff }), "key {i}");
        }
        println!(
            "{{\"sizing\":\"{name}\",\"hash\":\"{hash:?}\",\"mode\":\"{mode}\",\"batch\":{},\"n\":{n},\"updates\":{ups},\"build_s\":{build_s:.2},\
             \"updates_per_s\":{:.0},\"updates_per_cpu_s\":{:.0},\"ns_per_update\":{wall:.1},\"cpu_ns_per_update\":{cpu:.1},\
             \"grow_rebuilds\":{},\"cycle_rebuilds\":{},\"recoloured_per_update\":{:.2},\"capacity\":{},\"sizes\":\"{:?}\",\
             \"load_avg\":\"{}\"}}",
            if mode == "batch" { batch } else { 1 },
            1e9 / wall,
            1e9 / cpu,
            s.grow_rebuilds - before.grow_rebuilds,
            s.cycle_rebuilds - before.cycle_rebuilds,
            (s.recoloured_slots - before.recoloured_slots) as f64 / ups as f64,
            ctl.capacity(),
            ctl.sizes(),
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
        );
    }
}
