//! Single-lookup latency of the FHT at 16M names, for A/B experiments on
//! the lookup path (`cargo run --release -p keyplane-bench --example fht_single`).
use keyplane::{ControlTable, LookupTable, ReadHandle, fht, name};
use keyplane_bench::common::{KeySet, lookup_ns, stream};

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(16 << 20);
    let mut keys = KeySet::default();
    for i in 0..n as u64 {
        keys.push(&name::generate(i, (i % 3) as usize, 1));
    }
    let ctl = fht::Control::from_items_with(keys.iter().map(|k| (k, 1)), 8, fht::Options::default()).unwrap();
    let t = ctl.export();
    drop(ctl);
    let q = stream(&keys, 2 << 20, 4);
    for round in 0..3 {
        let rd = t.reader();
        let a = lookup_ns(&q, |k| t.get(k));
        let b = lookup_ns(&q, |k| rd.get(k));
        let c = lookup_ns(&q, |k| t.get_main_only(k));
        println!("round {round}: get {a:.1} ns, reader {b:.1} ns, main-only {c:.1} ns");
    }
}
