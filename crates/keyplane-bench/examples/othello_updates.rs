//! Othello control-side update rate after a bulk build (issue #20 item 4):
//! power-of-two and compact sizing, random 8-byte keys, 8-bit values; then
//! inserts of new keys, each delta applied to an exported lookup form.
//! Prints one JSON line per sizing.
//!
//! `cargo run --release -p keyplane-bench --example othello_updates -- N UPDATES [pow2|compact]`
use keyplane::hash::mix64;
use keyplane::othello::{Control, Options, Sizing};
use keyplane::{ControlTable, LookupTable};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: u64 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(16_000_000);
    let ups: u64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let only = a.get(3).cloned().unwrap_or_default();
    for (name, sizing) in [("pow2", Sizing::PowerOfTwo), ("compact", Sizing::Compact)] {
        if !only.is_empty() && only != name {
            continue;
        }
        let opts = Options { sizing, ..Options::default() };
        let t0 = std::time::Instant::now();
        let mut ctl =
            Control::from_items_with((0..n).map(|i| (mix64(i ^ (1 << 40)).to_le_bytes(), mix64(i) & 0xff)), 8, opts)
                .unwrap();
        let build_s = t0.elapsed().as_secs_f64();
        let table = ctl.export();
        let before = ctl.stats();
        let t1 = std::time::Instant::now();
        for i in n..n + ups {
            let d = ctl.insert(&mix64(i ^ (1 << 40)).to_le_bytes(), i & 0xff).unwrap();
            table.apply(&d).unwrap();
        }
        let secs = t1.elapsed().as_secs_f64();
        let s = ctl.stats();
        println!(
            "{{\"sizing\":\"{name}\",\"n\":{n},\"updates\":{ups},\"build_s\":{build_s:.2},\"updates_per_s\":{:.0},\
             \"grow_rebuilds\":{},\"cycle_rebuilds\":{},\"capacity\":{},\"sizes\":\"{:?}\",\"load_avg\":\"{}\"}}",
            ups as f64 / secs,
            s.grow_rebuilds - before.grow_rebuilds,
            s.cycle_rebuilds - before.cycle_rebuilds,
            ctl.capacity(),
            ctl.sizes(),
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
        );
    }
}
