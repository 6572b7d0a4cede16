//! Control-form insert rate (issues #17 and #20): bulk-build `N` random
//! 8-byte keys with 8-bit values, then time `UPDATES` inserts of new keys
//! in the control form alone (the delta is built but not applied), for
//! Othello (compact and power-of-two sizing) and Ludo.
//!
//! `cargo run --release -p keyplane --example control_inserts -- [N] [UPDATES] [othello,pow2,ludo] [ROUNDS]`
//!
//! Like `keyplane serve -O expected_keys=N+EXTRA`, the table is pre-sized:
//! it is built from the `N` keys plus `EXTRA` placeholder keys (environment
//! `KEYPLANE_BENCH_EXTRA`, default `UPDATES`; never fewer than `UPDATES`),
//! which are removed again before the timed inserts, so no insert triggers
//! a growth rebuild (the JSON reports the rebuilds that did happen). With
//! `EXTRA = UPDATES` the inserts end at Ludo's full 95% load; `keyplane
//! serve`'s benchmark pre-sizes 16M keys for 18M (`EXTRA` = 2000000).
//!
//! `KEYPLANE_BENCH_ENCODE=1` also serialises every delta (`to_bytes`), as
//! `keyplane serve` does before it logs one.
//!
//! Prints one JSON object per structure and round: build seconds, inserts
//! per second in wall time and in the thread's CPU time (time spent
//! descheduled on a loaded machine is not counted), the rebuilds the
//! inserts caused and the load average. Defaults: N = 1M, UPDATES = N / 16,
//! all three structures, 1 round.

use keyplane::hash::mix64;
use keyplane::{ControlTable, Wire};
use std::time::Instant;

/// Fixed table seed: alternating binaries build the same tables and see
/// the same rebuilds.
const SEED: u64 = 0x5eed;

fn cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn key(i: u64) -> [u8; 8] {
    mix64(i ^ (1 << 40)).to_le_bytes()
}

/// Placeholder key `i` (pre-sizing), never equal to a [`key`].
fn placeholder(i: u64) -> [u8; 9] {
    let mut k = [0xfe; 9];
    k[..8].copy_from_slice(&mix64(i ^ (1 << 50)).to_le_bytes());
    k
}

/// Removes the `ups` placeholders the build added, then removes the placeholders.
fn presize<C: ControlTable>(ctl: &mut C, ups: u64) {
    for i in 0..ups {
        ctl.remove(&placeholder(i)).expect("remove placeholder").expect("placeholder present");
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
}

/// Times `ups` inserts of new keys; returns (wall ns, cpu ns) per insert.
/// Not inlined, so `valgrind --tool=callgrind --toggle-collect='*time_inserts*'`
/// counts the inserts alone.
#[inline(never)]
fn time_inserts<C: ControlTable>(ctl: &mut C, n: u64, ups: u64, encode: bool) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ns());
    for i in n..n + ups {
        let d = ctl.insert(&key(i), i & 0xff).expect("insert");
        if encode {
            std::hint::black_box(d.to_bytes());
        } else {
            std::hint::black_box(d);
        }
    }
    (t.elapsed().as_nanos() as f64 / ups as f64, (cpu_ns() - c) / ups as f64)
}

#[allow(clippy::too_many_arguments)]
fn report(name: &str, n: u64, ups: u64, extra: u64, encode: bool, build_s: f64, (wall, cpu): (f64, f64), more: String) {
    println!(
        "{{\"structure\":\"{name}\",\"n\":{n},\"inserts\":{ups},\"presized_extra\":{extra},\"encode\":{encode},\"build_s\":{build_s:.3},\
         \"inserts_per_s\":{:.0},\"inserts_per_cpu_s\":{:.0},\"ns_per_insert\":{wall:.1},\
         \"cpu_ns_per_insert\":{cpu:.1},{more},\"load_avg\":\"{}\"}}",
        1e9 / wall,
        1e9 / cpu,
        loadavg()
    );
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: u64 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let ups: u64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(n / 16);
    let which = a.get(3).cloned().unwrap_or_else(|| "othello,pow2,ludo".into());
    let rounds: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    // KEYPLANE_BENCH_ENCODE=1: also serialise every delta (`to_bytes`), as
    // `keyplane serve` does before logging it.
    let encode = std::env::var("KEYPLANE_BENCH_ENCODE").is_ok_and(|v| v == "1");
    let extra: u64 = std::env::var("KEYPLANE_BENCH_EXTRA").ok().and_then(|s| s.parse().ok()).unwrap_or(ups).max(ups);
    for _ in 0..rounds {
        for name in which.split(',') {
            let items = (0..n)
                .map(|i| (key(i).to_vec(), mix64(i) & 0xff))
                .chain((0..extra).map(|i| (placeholder(i).to_vec(), 0)));
            match name {
                "othello" | "pow2" => {
                    use keyplane::othello::{Control, Options, Sizing};
                    let sizing = if name == "pow2" { Sizing::PowerOfTwo } else { Sizing::Compact };
                    let t0 = Instant::now();
                    let mut ctl =
                        Control::from_items_with(items, 8, Options { sizing, seed: SEED, ..Options::default() })
                            .expect("build");
                    presize(&mut ctl, extra);
                    let build_s = t0.elapsed().as_secs_f64();
                    let before = ctl.stats();
                    let r = time_inserts(&mut ctl, n, ups, encode);
                    let s = ctl.stats();
                    let more = format!(
                        "\"grow_rebuilds\":{},\"cycle_rebuilds\":{},\"recoloured_per_insert\":{:.2}",
                        s.grow_rebuilds - before.grow_rebuilds,
                        s.cycle_rebuilds - before.cycle_rebuilds,
                        (s.recoloured_slots - before.recoloured_slots) as f64 / ups as f64
                    );
                    report(name, n, ups, extra, encode, build_s, r, more);
                }
                "ludo" => {
                    use keyplane::ludo::{Control, Options};
                    let t0 = Instant::now();
                    let opts = Options { seed: SEED, ..Options::default() };
                    let mut ctl = Control::from_items_with(items, 8, opts).expect("build");
                    presize(&mut ctl, extra);
                    let build_s = t0.elapsed().as_secs_f64();
                    let (before, lb) = (ctl.stats(), ctl.locator_stats());
                    let r = time_inserts(&mut ctl, n, ups, encode);
                    let (s, ls) = (ctl.stats(), ctl.locator_stats());
                    let more = format!(
                        "\"rebuilds\":{},\"locator_rebuilds\":{},\"locator_recoloured_per_insert\":{:.2},\
                         \"cuckoo_moves_per_insert\":{:.2},\"load\":{:.3}",
                        s.rebuilds - before.rebuilds,
                        ls.rebuilds.saturating_sub(lb.rebuilds),
                        ls.recoloured_slots.saturating_sub(lb.recoloured_slots) as f64 / ups as f64,
                        (s.cuckoo_moves - before.cuckoo_moves) as f64 / ups as f64,
                        ctl.load()
                    );
                    report(name, n, ups, extra, encode, build_s, r, more);
                }
                other => eprintln!("unknown structure {other} (othello, pow2, ludo)"),
            }
        }
    }
}
