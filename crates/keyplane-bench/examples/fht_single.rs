//! Single and batched lookup latency of the FHT (16M names unless given),
//! with the hashbrown baseline in the same run, for A/B experiments on
//! the lookup path (`cargo run --release -p keyplane-bench --example fht_single`).
use keyplane::{ControlTable, LookupTable, ReadHandle, fht, name};
use keyplane_perf::common::{KeySet, lookup_ns, stream};

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
    // Latency of one dependent random read, and of 4 parallel ones, in a
    // buffer the size of the table.
    let words = t.main_table_bytes() / 8;
    let buf = keyplane::ext::bits::PackedArray::new(words, 64);
    for i in 0..words {
        buf.set(i, keyplane::hash::mix64(i as u64));
    }
    let wmask = (words + 1).next_power_of_two() / 2 - 1;
    let reps = 2_000_000usize;
    let t0 = std::time::Instant::now();
    let mut x = 1u64;
    for i in 0..reps {
        // Mixing in the counter keeps the chain off short cycles.
        x = buf.get((keyplane::hash::mix64(x ^ i as u64) as usize) & wmask);
    }
    let one = t0.elapsed().as_nanos() as f64 / reps as f64;
    let t0 = std::time::Instant::now();
    for i in 0..reps {
        x ^= i as u64;
        let a = buf.get((keyplane::hash::mix64(x) as usize) & wmask);
        let b = buf.get((keyplane::hash::mix64(x ^ 1) as usize) & wmask);
        let c = buf.get((keyplane::hash::mix64(x ^ 2) as usize) & wmask);
        let d = buf.get((keyplane::hash::mix64(x ^ 3) as usize) & wmask);
        x = a ^ b ^ c ^ d;
    }
    let four = t0.elapsed().as_nanos() as f64 / reps as f64;
    // Four reads in one random 4 KiB page (512 words), on distinct lines.
    let pages = (wmask + 1) / 512;
    let t0 = std::time::Instant::now();
    for i in 0..reps {
        x ^= i as u64;
        let base = (keyplane::hash::mix64(x) as usize % pages) * 512;
        let h = keyplane::hash::mix64(x ^ 9) as usize;
        let a = buf.get(base + (h & 63) * 8);
        let b = buf.get(base + ((h >> 6) & 63) * 8);
        let c = buf.get(base + ((h >> 12) & 63) * 8);
        let d = buf.get(base + ((h >> 18) & 63) * 8);
        x = a ^ b ^ c ^ d;
    }
    let page4 = t0.elapsed().as_nanos() as f64 / reps as f64;
    println!(
        "dependent random read: 1 at a time {one:.1} ns, 4 in parallel {four:.1} ns, 4 in one 4 KiB page {page4:.1} ns ({x})"
    );
    let mut hb: hashbrown::HashMap<Box<[u8]>, u64> = hashbrown::HashMap::with_capacity(n);
    for k in keys.iter() {
        hb.insert(k.into(), 1);
    }
    for round in 0..3 {
        let h = lookup_ns(&q, |k| hb.get(k).copied());
        println!("hashbrown {h:.1} ns");
        let rd = t.reader();
        let a = lookup_ns(&q, |k| t.get(k));
        let b = lookup_ns(&q, |k| rd.get(k));
        let c = keyplane_perf::common::batch_ns(&t, &q, 16);
        // Dependent chain: the next key's index depends on this answer, so
        // no two lookups overlap (pure latency).
        let keys: Vec<&[u8]> = q.iter().collect();
        let zero = std::hint::black_box(0usize);
        let t0 = std::time::Instant::now();
        let mut dep = 0usize;
        for i in 0..keys.len() {
            let v = rd.get(keys[(i + dep) % keys.len()]).unwrap_or(1) as usize;
            dep = v & zero;
        }
        let d = t0.elapsed().as_nanos() as f64 / keys.len() as f64;
        std::hint::black_box(dep);
        println!("round {round}: get {a:.1} ns, reader {b:.1} ns, batch {c:.1} ns, dependent {d:.1} ns");
    }
}
