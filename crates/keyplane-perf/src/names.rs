//! `keyplane-bench fht` and `keyplane-bench fpt`: name-based forwarding
//! structures (Yuan–Crowley–Song, ANCS 2017) on generated hierarchical names
//! and on the Public Suffix List.
//!
//! * `fht`: the common measurements for both lookup orders, lookups without
//!   the collision table ("w/o CT"), Table 2 (memory split main table /
//!   collision table for w = 12, 16, 20, 24), Table 3 (distributed
//!   forwarding: memory proportional to the stored share), and the same-run
//!   hashbrown baseline over full names.
//! * `fpt`: Fig. 3 (average leaf depth for fingerprint lengths 0–32) on the
//!   full Public Suffix List (canonical reversed encoding and raw domain
//!   strings), on the `mailchecker` domain list when installed, and on
//!   generated names; lookup latency with and without the
//!   fingerprint; the common measurements.

use crate::common::*;
use keyplane::{ControlTable, LookupTable, fht, fpt, name};
pub use keyplane_keygen::gen_names;

/// A workload of generated names (the common `Workload` with name keys).
fn name_workload(a: &Common) -> Workload {
    let n = a.keys as usize;
    let bits = a.value_bits;
    let (keys, t) = time(|| gen_names(n, 0));
    eprintln!(
        "# generated {n} names ({} bytes, {:.1} bytes/name) in {t:.2}s",
        keys.bytes(),
        keys.bytes() as f64 / n as f64
    );
    let alien = gen_names((n / 4).clamp(1000, 1 << 20), 2);
    let queries = stream(&keys, n.clamp(1, 2 << 20), 4);
    let alien_queries = stream(&alien, n.clamp(1, 1 << 20), 5);
    Workload {
        kt: KeyType::Name,
        values: gen_values(n, bits, 3),
        keys,
        alien,
        queries,
        alien_queries,
        value_bits: bits,
        threads: a.threads,
        updates: a.updates as usize,
    }
}

fn fht_fields(r: &mut Record, ctl: &fht::Control, t: &fht::Lookup, n: usize) {
    let (d, b, e) = ctl.shape();
    r.set("subtables", d).set("buckets_per_subtable", b).set("bucket_entries", e);
    r.set("fingerprint_bits", t.fingerprint_bits());
    r.set("load", ctl.main_entries() as f64 / ctl.slots() as f64);
    r.set("collision_table_entries", t.collision_table_entries());
    r.set("collisions", ctl.stats().collisions).set("overflows", ctl.stats().overflows);
    r.set("main_table_bytes", t.main_table_bytes());
    r.set("collision_table_bytes", t.collision_table_bytes());
    r.set("main_bits_per_name", t.main_table_bytes() as f64 * 8.0 / n as f64);
    r.set("total_bits_per_name", (t.main_table_bytes() + t.collision_table_bytes()) as f64 * 8.0 / n as f64);
    r.set("expected_alien_match_rate", ctl.expected_alien_match_rate());
}

/// `keyplane-bench fht`.
pub fn run_fht(a: &FhtArgs) -> Result<Vec<Record>, String> {
    let w = name_workload(&a.common);
    let n = w.n();
    let fbits = a.fingerprint_bits;
    let mut out = Vec::new();
    if a.table2_only {
        return Ok(table2(&w, a));
    }
    for (label, order) in
        [("fht_ct_first", fht::LookupOrder::CollisionTableFirst), ("fht_main_first", fht::LookupOrder::MainFirst)]
    {
        let opts = fht::Options { fingerprint_bits: fbits, order, ..fht::Options::default() };
        let (mut r, mut ctl, table) =
            measure::<fht::Control>(label, &w, |w| fht::Control::from_items_with(w.items(), w.value_bits, opts));
        fht_fields(&mut r, &ctl, &table, n);
        r.set("lookup_ns_without_ct", lookup_ns(&w.queries, |k| table.get_main_only(k)));
        let ops = w.updates.min(n.max(3)).max(3);
        let (e2e, ctl_only) = measure_updates(&mut ctl, &table, &w, ops);
        r.set("update_ops_per_s", e2e).set("update_ops_per_s_control_only", ctl_only).set("update_ops", ops);
        r.set("control_memory_bytes", ctl.memory_bytes());
        out.push(r);
    }
    let hb = baseline_hashbrown(&w);
    let (hb_ns, hb_mem) = (hb.num("lookup_ns").unwrap_or(0.0), hb.num("memory_bytes").unwrap_or(0.0));
    for r in out.iter_mut() {
        r.set("speedup_vs_hashbrown", hb_ns / r.num("lookup_ns").unwrap_or(f64::NAN));
        r.set("reader_speedup_vs_hashbrown", hb_ns / r.num("reader_lookup_ns").unwrap_or(f64::NAN));
        r.set("batch_speedup_vs_hashbrown", hb_ns / r.num("batch_lookup_ns").unwrap_or(f64::NAN));
        r.set("memory_ratio_vs_hashbrown", hb_mem / r.num("memory_bytes").unwrap_or(f64::NAN));
    }
    out.push(hb);
    // Floor: four random reads per lookup into a buffer the size of the table.
    let bytes = out[0].num("memory_bytes").unwrap_or(0.0) as usize;
    let mut fr = Record::new("floor_4_random_reads", n, w.value_bits, w.kt);
    fr.set("batch_lookup_ns", dram_floor_ns(bytes, 4)).set("memory_bytes", bytes);
    out.push(fr);
    if !a.no_table2 && !a.common.core {
        out.extend(table2(&w, a));
    }
    if !a.no_table3 && !a.common.core {
        out.extend(table3(a));
    }
    Ok(out)
}

/// Table 2: memory of the main table and the collision table for w = 12..24.
fn table2(w: &Workload, a: &FhtArgs) -> Vec<Record> {
    let n = w.n();
    let mut out = Vec::new();
    for &fb in &a.table2_widths {
        let opts = fht::Options::with_fingerprint_bits(fb);
        let (ctl, s) = time(|| fht::Control::from_items_with(w.items(), 8, opts).expect("build"));
        let t = ctl.export();
        let mut r = Record::new("fht_table2", n, 8, w.kt);
        fht_fields(&mut r, &ctl, &t, n);
        r.set("build_ns_per_key", s * 1e9 / n as f64);
        let (mht, mct) = (t.main_table_bytes() as f64, t.collision_table_bytes() as f64);
        r.set("M_HT_bytes", mht).set("M_CT_bytes", mct).set("M_T_bytes", mht + mct);
        // The paper's figures scaled to this n (Table 2 is for 10^9 names).
        // M_T of Table 2 (2.80 / 3.14 / 3.63 / 4.13 GB per 10^9 names) in bits per name.
        let paper_bits = match fb {
            12 => 22.40,
            16 => 25.12,
            20 => 29.04,
            _ => 33.04,
        };
        r.set("paper_bits_per_name", paper_bits);
        r.set("memory_bytes", mht + mct);
        r.set("bits_per_key", (mht + mct) * 8.0 / n as f64);
        eprintln!(
            "# table2 w={fb}: S_CT={} M_CT={:.1}MB M_HT={:.1}MB total {:.2} bits/name",
            t.collision_table_entries(),
            mct / 1e6,
            mht / 1e6,
            (mht + mct) * 8.0 / n as f64
        );
        out.push(r);
    }
    out
}

/// Table 3: a router stores a share of R; the rest must read `None`.
fn table3(a: &FhtArgs) -> Vec<Record> {
    let m = a.share_names as usize;
    let r_all = gen_names(m, 6);
    let full = fht::Control::from_items_with(r_all.iter().map(|k| (k, 1)), 8, fht::Options::default()).expect("full");
    let full_t = full.export();
    let full_mem = (full_t.main_table_bytes() + full_t.collision_table_bytes()) as f64;
    drop((full, full_t));
    let mut out = Vec::new();
    for div in [16usize, 8, 4, 2] {
        // Table size N = m / div · (1/0.93) slots, filled to 93 % (the paper's phases).
        let stored = m / div;
        let ctl = fht::Control::for_share(
            r_all.iter().take(stored).map(|k| (k, 1)),
            r_all.iter().skip(stored),
            8,
            fht::Options::default(),
        )
        .expect("share");
        let t = ctl.export();
        let wrong = r_all.iter().skip(stored).filter(|k| t.get(k).is_some()).count();
        let mem = (t.main_table_bytes() + t.collision_table_bytes()) as f64;
        let mut r = Record::new("fht_table3_share", stored, 8, KeyType::Name);
        fht_fields(&mut r, &ctl, &t, stored);
        r.set("rule_set_names", m);
        r.set("S_p_percent", 100.0 * stored as f64 / m as f64);
        r.set("M_p_percent", 100.0 * mem / full_mem);
        r.set("M_bytes", mem);
        r.set("not_stored_markers", ctl.not_stored_markers());
        r.set("unstored_names_answered", wrong);
        r.set("memory_bytes", mem);
        eprintln!(
            "# table3 S_p={:.2}% M_p={:.2}% M={:.1}MB markers={} wrong={wrong}",
            100.0 * stored as f64 / m as f64,
            100.0 * mem / full_mem,
            mem / 1e6,
            ctl.not_stored_markers()
        );
        out.push(r);
    }
    out
}

type NameLists = (Vec<Vec<u8>>, Vec<Vec<u8>>, String);

/// Where the full Public Suffix List is found on this machine, if the
/// `publicsuffixlist` Python package (PyPI, ships `public_suffix_list.dat`)
/// is installed: asks `python3` for the package directory. `None` otherwise.
fn find_installed_psl() -> Option<std::path::PathBuf> {
    let out = python_output("import publicsuffixlist, os; print(os.path.dirname(publicsuffixlist.__file__))")?;
    let p = std::path::PathBuf::from(out.trim()).join("public_suffix_list.dat");
    p.exists().then_some(p)
}

/// What `python3 -c code` prints, or `None` when python or the module is missing.
fn python_output(code: &str) -> Option<String> {
    let out = std::process::Command::new("python3").args(["-c", code]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A second real domain list, larger than the PSL: the ~56K registered
/// domains of disposable-mail providers shipped by the `mailchecker` package
/// (PyPI, `pip install mailchecker`, MIT; data from
/// github.com/FGRibreau/mailchecker). `None` when it is not installed.
fn mailchecker_names() -> Option<(Vec<Vec<u8>>, String)> {
    let text = python_output(
        "import MailChecker, importlib.metadata as m; \
         print('// mailchecker', m.version('mailchecker')); \
         print('\\n'.join(sorted(MailChecker.MailChecker.blacklist)))",
    )?;
    let source = text.lines().next().unwrap_or("").trim_start_matches("// ").to_string();
    Some((name::load_domain_list(&text), format!("PyPI {source} (disposable-mail domain list)")))
}

fn psl_names() -> Result<NameLists, String> {
    let path = find_installed_psl()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../keyplane/data/psl_sample.dat").to_string());
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let canonical = name::load_domain_list(&text);
    // Raw domain strings as the paper used them (e.g. `co.uk`, not reversed).
    let mut raw: Vec<Vec<u8>> = canonical
        .iter()
        .map(|k| {
            let comps: Vec<&[u8]> = name::components(k).collect();
            comps.iter().rev().cloned().collect::<Vec<_>>().join(&b'.')
        })
        .collect();
    raw.dedup();
    Ok((canonical, raw, path))
}

fn depth_curve(label: &str, names: &[Vec<u8>], widths: &[u32], source: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let n = names.len();
    let mut d0 = f64::NAN;
    for &f in widths {
        let opts = fpt::Options::with_fingerprint_bits(f);
        let ctl = fpt::Control::from_items_with(names.iter().map(|k| (k, 1)), 8, opts).expect("fpt");
        let (_, _, max) = ctl.depth_stats();
        let d = ctl.avg_leaf_depth();
        if f == 0 {
            d0 = d;
        }
        let t = ctl.export();
        let mut r = Record::new(label, n, 8, KeyType::Name);
        r.set("fingerprint_bits", f).set("avg_leaf_depth", d).set("max_leaf_depth", max);
        r.set("depth_reduction_vs_no_fingerprint", 1.0 - d / d0);
        r.set("log2_n", (n as f64).log2());
        r.set("source", source);
        if f == 0 || f == 20 {
            let qs: KeySet = {
                let mut s = KeySet::default();
                for i in sample_indices(n, (1 << 20).min(n * 16), 3) {
                    s.push(&names[i as usize]);
                }
                s
            };
            r.set("lookup_ns", lookup_ns(&qs, |k| t.get(k)));
            r.set("memory_bytes", t.memory_bytes());
        }
        eprintln!("# {label} f={f}: avg depth {d:.2} (max {max})");
        out.push(r);
    }
    out
}

/// `keyplane-bench fpt`.
pub fn run_fpt(a: &FptArgs) -> Result<Vec<Record>, String> {
    // The report (`--core`) keeps the two widths of the target.
    let widths: Vec<u32> = if !a.widths.is_empty() {
        a.widths.clone()
    } else if a.common.core {
        vec![0, 20]
    } else {
        vec![0, 4, 8, 12, 16, 20, 24, 28, 32]
    };
    let (canonical, raw, path) = psl_names()?;
    eprintln!("# public suffix list: {} names from {path}", canonical.len());
    let mut out = Vec::new();
    out.extend(depth_curve("fpt_depth_psl_canonical", &canonical, &widths, &path));
    out.extend(depth_curve("fpt_depth_psl_raw_domains", &raw, &widths, &path));
    match mailchecker_names() {
        Some((mc, source)) => {
            eprintln!("# {source}: {} names", mc.len());
            out.extend(depth_curve("fpt_depth_mailchecker", &mc, &widths, &source));
            // Both real lists together (the PSL's suffixes plus registered domains).
            let mut seen = std::collections::HashSet::new();
            let all: Vec<Vec<u8>> = canonical.iter().chain(mc.iter()).filter(|k| seen.insert(*k)).cloned().collect();
            out.extend(depth_curve("fpt_depth_psl_plus_mailchecker", &all, &widths, &format!("{path} + {source}")));
        }
        None => eprintln!("# mailchecker not installed (pip install mailchecker): skipping its depth curve"),
    }
    if !a.common.core {
        let gn = a.depth_names as usize;
        let gen_keys: Vec<Vec<u8>> = gen_names(gn, 0).iter().map(|k| k.to_vec()).collect();
        out.extend(depth_curve("fpt_depth_generated", &gen_keys, &widths, "keyplane::name::generate"));
    }
    let w = name_workload(&a.common);
    let n = w.n();
    for (label, f) in [("fpt_f0", 0u32), ("fpt_f20", 20)] {
        let opts = fpt::Options::with_fingerprint_bits(f);
        let (mut r, mut ctl, table) =
            measure::<fpt::Control>(label, &w, |w| fpt::Control::from_items_with(w.items(), w.value_bits, opts));
        r.set("fingerprint_bits", f).set("avg_leaf_depth", ctl.avg_leaf_depth());
        let ops = w.updates.min(n.max(3)).max(3);
        let (e2e, ctl_only) = measure_updates(&mut ctl, &table, &w, ops);
        r.set("update_ops_per_s", e2e).set("update_ops_per_s_control_only", ctl_only).set("update_ops", ops);
        r.set("control_memory_bytes", ctl.memory_bytes());
        out.push(r);
    }
    out.push(baseline_hashbrown(&w));
    Ok(out)
}
