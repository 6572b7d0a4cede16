//! Profiling aid: Othello update mix at 4M keys (run under `perf record`).
use keyplane::{ControlTable, LookupTable, othello::Control};
fn main() {
    let n = 4u64 << 20;
    let key = |i: u64| keyplane::hash::mix64(i).to_le_bytes();
    let mut ctl = Control::from_items((0..n).map(|i| (key(i), i & 0xff)), 8).unwrap();
    let t = ctl.export();
    let start = std::time::Instant::now();
    let ops = 3_000_000u64;
    for i in 0..ops {
        let d = match i % 3 {
            0 => Some(ctl.insert(&key(n + i / 3), i & 0xff).unwrap()),
            1 => Some(ctl.insert(&key(keyplane::hash::mix64(i) % n), (i + 1) & 0xff).unwrap()),
            _ => ctl.remove(&key(n + i / 3)).unwrap(),
        };
        if let Some(d) = d {
            t.apply(&d).unwrap();
        }
    }
    println!("{:.0} ops/s", ops as f64 / start.elapsed().as_secs_f64());
}
