//! `keyplane-bench othello`: compact and power-of-two sizing, the filtered
//! (fingerprint + emptiness) variant, baselines and the DRAM floor.

use crate::common::*;
use keyplane::ControlTable;
use keyplane::othello::{self, Control, Options, Sizing};

/// Runs the Othello benchmark.
pub fn run(a: &OthelloArgs) -> Result<Vec<Record>, String> {
    let w = Workload::from_args(&a.common)?;
    let n = w.n();
    let mut out = Vec::new();
    let fp_bits = a.fingerprint_bits;
    let variants: Vec<(&str, Options)> = vec![
        ("othello_compact", Options::default()),
        ("othello_pow2", Options { sizing: Sizing::PowerOfTwo, ..Options::default() }),
        ("othello_filtered", Options::filtered(fp_bits)),
    ];
    for (name, opts) in variants {
        if w.value_bits + opts.fingerprint_bits + opts.emptiness as u32 > 64 {
            continue;
        }
        let (mut r, mut ctl, table) =
            measure::<Control>(name, &w, |w| Control::from_items_with(w.items(), w.value_bits, opts));
        let (ma, mb) = ctl.sizes();
        r.set("m_a", ma).set("m_b", mb);
        r.set("failed_seeds_at_build", ctl.stats().failed_seeds);
        if opts.fingerprint_bits > 0 || opts.emptiness {
            r.set("fingerprint_bits", opts.fingerprint_bits);
            r.set("false_positive_rate", r.num("alien_positive_rate").unwrap_or(0.0));
            r.set(
                "expected_false_positive_rate_eq_3_9",
                othello::expected_false_positive_rate(n, ma, mb, opts.fingerprint_bits, opts.emptiness),
            );
        }
        let ops = w.updates.min(n.max(3)).max(3);
        let before = ctl.stats();
        let (e2e, ctl_only) = measure_updates(&mut ctl, &table, &w, ops);
        let after = ctl.stats();
        r.set("update_ops_per_s", e2e);
        r.set("update_ops_per_s_control_only", ctl_only);
        r.set("update_ops", ops);
        r.set("rebuilds_during_updates", after.rebuilds - before.rebuilds);
        r.set("cycle_rebuilds_during_updates", after.cycle_rebuilds - before.cycle_rebuilds);
        r.set("grow_rebuilds_during_updates", after.grow_rebuilds - before.grow_rebuilds);
        r.set("control_memory_bytes", ctl.memory_bytes());
        out.push(r);
    }
    // Memory floor: two random reads per key into a buffer as large as the compact table.
    let bytes = out[0].num("memory_bytes").unwrap_or(0.0) as usize;
    let floor = dram_floor_ns(bytes, 2);
    let mut fr = Record::new("floor_2_random_reads", n, w.value_bits, w.kt);
    fr.set("batch_lookup_ns", floor).set("memory_bytes", bytes);
    for r in out.iter_mut() {
        if let Some(b) = r.num("batch_lookup_ns") {
            r.set("batch_vs_floor", b / floor);
        }
    }
    out.push(fr);
    let hb = baseline_hashbrown(&w);
    let (hb_ns, hb_mem) = (hb.num("lookup_ns").unwrap_or(0.0), hb.num("memory_bytes").unwrap_or(0.0));
    for r in out.iter_mut() {
        if r.0["structure"].as_str().unwrap_or("").starts_with("othello") {
            r.set("speedup_vs_hashbrown", hb_ns / r.num("lookup_ns").unwrap_or(f64::NAN));
            r.set("batch_speedup_vs_hashbrown", hb_ns / r.num("batch_lookup_ns").unwrap_or(f64::NAN));
            r.set("memory_ratio_vs_hashbrown", hb_mem / r.num("memory_bytes").unwrap_or(f64::NAN));
        }
    }
    out.push(hb);
    out.extend(baseline_xorf(&w));
    Ok(out)
}
