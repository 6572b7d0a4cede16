//! Profiling driver (not part of the bench): build, memory breakdown, update mix.
use clap::Parser;
use keyplane::ludo::Control;
use keyplane::{ControlTable, LookupTable};
use keyplane_perf::args::LudoArgs;
use keyplane_perf::common::*;
use std::time::Instant;

fn main() {
    /// `ludo_prof` takes the `ludo` benchmark's flags.
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        ludo: LudoArgs,
        /// Time lookups only.
        #[arg(long)]
        lookups: bool,
        /// Lookup rounds.
        #[arg(long, default_value_t = 10)]
        rounds: usize,
        /// Skip the growth run.
        #[arg(long)]
        no_grow: bool,
    }
    let f = Flags::parse();
    let a = &f.ludo;
    let w = Workload::from_args(&a.common).unwrap();
    let n = w.n();
    let t0 = Instant::now();
    let mut ctl = Control::from_items(w.items(), w.value_bits).unwrap();
    eprintln!("build {:.2}s", t0.elapsed().as_secs_f64());
    let t = ctl.export();
    let mut tot = 0;
    for (name, b) in t.memory_breakdown() {
        eprintln!("{name:>10}: {:8.4} bits/key ({b} B)", b as f64 * 8.0 / n as f64);
        tot += b;
    }
    eprintln!(
        "{:>10}: {:8.4} bits/key; paper {:.2}; overflow fraction {:.5}, ov cap {}, max seed {}",
        "total",
        tot as f64 * 8.0 / n as f64,
        3.76 + 1.05 * w.value_bits as f64,
        ctl.overflow_seed_fraction(),
        ctl.overflow_capacity(),
        ctl.stats().max_seed
    );
    eprintln!("stats {:?}\nlocator {:?}", ctl.stats(), ctl.locator_stats());
    assert_eq!(tot, t.memory_bytes());
    if a.memory_only {
        return;
    }
    if f.lookups {
        let refs: Vec<&[u8]> = w.queries.iter().collect();
        let mut out = vec![None; 16];
        let rounds = f.rounds;
        let t1 = Instant::now();
        let mut acc = 0u64;
        for _ in 0..rounds {
            for ch in refs.chunks(16) {
                t.get_batch(ch, &mut out[..ch.len()]);
                acc = acc.wrapping_add(out[0].unwrap_or(1));
            }
        }
        eprintln!("batch {:.2} ns/key ({acc})", t1.elapsed().as_nanos() as f64 / (rounds * refs.len()) as f64);
        return;
    }
    let ops = a.common.updates as usize;
    // Trigger growth like the bench's concurrent phase does.
    if !f.no_grow {
        let nb = ctl.buckets();
        let mut i = 0u64;
        while ctl.buckets() == nb {
            let d = ctl.insert(format!("grow-trigger-{i}").as_bytes(), 1).unwrap();
            t.apply(&d).unwrap();
            i += 1;
        }
    }
    eprintln!("load {:.3}", ctl.load());
    let t1 = Instant::now();
    let (e2e, co) = measure_updates(&mut ctl, &t, &w, ops);
    eprintln!("updates: {:.0}/s e2e, {:.0}/s control only ({:.2}s)", e2e, co, t1.elapsed().as_secs_f64());
}
