//! `keyplane bench --report DIR`: runs every registered benchmark at a
//! chosen scale and writes `results.json`, SVG plots mirroring the papers'
//! key figures, and `index.md`.
//!
//! The benchmark list is data-driven: every name in [`CANDIDATES`] is tried
//! through `keyplane_bench::run`, and names the bench crate does not know
//! ("unknown benchmark") are skipped, so a structure appears in the report
//! as soon as its bench module is dispatched there. Each benchmark module
//! reports its own variants and the same-run baselines (hashbrown, xorf,
//! the DRAM floor); the plots show every record under its `structure` name.

use crate::{CliError, Progress};
use keyplane_bench::common::{Args, Record};
use plotters::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

/// Benchmark names tried, in report order. A name the bench crate does not
/// dispatch is skipped; add a bench's dispatch name here if it is missing.
pub const CANDIDATES: &[&str] =
    &["othello", "ludo", "setsep", "cuckoo", "cuckoo-partial", "cfw", "bfw", "fht", "fpt", "lb"];

/// Sizes for one scale.
struct Scale {
    ns: Vec<u64>,
    sweep_n: u64,
    bits: Vec<u64>,
    updates: u64,
}

fn scale(name: &str) -> Result<Scale, CliError> {
    let k = 1u64 << 10;
    let m = 1u64 << 20;
    Ok(match name {
        "tiny" => Scale { ns: vec![k, 4 * k], sweep_n: 4 * k, bits: vec![4, 8, 16], updates: k },
        "small" => Scale {
            ns: vec![16 * k, 64 * k, 256 * k, m],
            sweep_n: 256 * k,
            bits: vec![1, 2, 4, 8, 16, 32],
            updates: 128 * k,
        },
        "medium" => {
            Scale { ns: vec![64 * k, 256 * k, m, 4 * m], sweep_n: m, bits: vec![1, 2, 4, 8, 16, 32], updates: 512 * k }
        }
        "large" => {
            Scale { ns: vec![256 * k, m, 4 * m, 16 * m], sweep_n: 4 * m, bits: vec![1, 2, 4, 8, 16, 32], updates: m }
        }
        s => return Err(CliError::usage(&format!("--scale {s}: expected tiny, small, medium or large"))),
    })
}

/// One run: a benchmark at one configuration.
struct Run {
    bench: &'static str,
    n: u64,
    bits: u64,
    dist: &'static str,
}

/// Runs the suite and writes the report.
pub fn run(dir: &str, scale_name: &str, only: Option<&[String]>) -> Result<(), CliError> {
    let sc = scale(scale_name)?;
    std::fs::create_dir_all(dir).map_err(|e| CliError::io(dir, e))?;
    let names: Vec<&'static str> = match only {
        Some(list) => {
            let list: Vec<String> = list.iter().map(|l| keyplane_bench::cli::canonical(l).to_string()).collect();
            for l in &list {
                if !CANDIDATES.contains(&l.as_str()) {
                    return Err(CliError::usage(&format!(
                        "--only {l}: not a known benchmark ({})",
                        CANDIDATES.join(", ")
                    )));
                }
            }
            CANDIDATES.iter().copied().filter(|c| list.iter().any(|l| l == c)).collect()
        }
        None => CANDIDATES.to_vec(),
    };
    let mut runs = Vec::new();
    for &b in &names {
        // The load balancer has its own traffic model and Dcode width: one
        // run per size.
        let fixed = b == "lb";
        for &n in &sc.ns {
            for dist in ["uniform", "zipf"] {
                if !(fixed && dist == "zipf") {
                    runs.push(Run { bench: b, n, bits: 8, dist });
                }
            }
        }
        for &bits in &sc.bits {
            if fixed {
                break;
            }
            if bits != 8 || !sc.ns.contains(&sc.sweep_n) {
                runs.push(Run { bench: b, n: sc.sweep_n, bits, dist: "uniform" });
            }
        }
    }
    let pb = Progress::items("benchmarks", Some(runs.len() as u64));
    let load_start = loadavg();
    let started = Instant::now();
    let mut records: Vec<Value> = Vec::new();
    let mut found: Vec<&str> = Vec::new();
    let mut skipped: Vec<&str> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut unsupported: Vec<String> = Vec::new();
    for r in &runs {
        pb.inc(1);
        if skipped.contains(&r.bench) {
            continue;
        }
        pb.message(format!("{} n={} l={} {}", r.bench, r.n, r.bits, r.dist));
        let argv: Vec<String> = [
            "--keys".to_string(),
            r.n.to_string(),
            "--value-bits".into(),
            r.bits.to_string(),
            "--updates".into(),
            sc.updates.min(r.n).to_string(),
            "--dist".into(),
            r.dist.into(),
            "--threads".into(),
            "2".into(),
            "--core".into(),
        ]
        .to_vec();
        let args = Args::parse(&argv).map_err(|e| CliError::usage(&e))?;
        let bench = r.bench;
        let out = std::panic::catch_unwind(|| keyplane_bench::run(bench, &args));
        match out {
            Ok(Err(e)) if e.starts_with("unknown benchmark") => {
                skipped.push(r.bench);
            }
            // A value width the structure does not support is a limit, not a failure.
            Ok(Err(e)) if e.contains("needs --value-bits") => {
                unsupported.push(format!("{} n={} l={} {}: {e}", r.bench, r.n, r.bits, r.dist))
            }
            Ok(Err(e)) => failures.push(format!("{} n={} l={} {}: {e}", r.bench, r.n, r.bits, r.dist)),
            Err(_) => failures.push(format!("{} n={} l={} {}: panicked", r.bench, r.n, r.bits, r.dist)),
            Ok(Ok(recs)) => {
                if !found.contains(&r.bench) {
                    found.push(r.bench);
                }
                for Record(mut m) in recs {
                    m.insert("bench".into(), json!(r.bench));
                    m.insert("dist".into(), json!(r.dist));
                    m.insert("requested_value_bits".into(), json!(r.bits));
                    records.push(Value::Object(m));
                }
            }
        }
    }
    pb.finish();
    let elapsed = started.elapsed().as_secs_f64();
    let meta = json!({
        "scale": scale_name,
        "n": sc.ns,
        "value_bits_sweep_n": sc.sweep_n,
        "value_bits": sc.bits,
        "updates": sc.updates,
        "benchmarks": found,
        "failures": failures,
        "unsupported": unsupported,
        "seconds": elapsed,
        "machine": machine(),
        "load_average_start": load_start,
        "load_average_end": loadavg(),
    });
    let doc = json!({ "meta": meta, "records": records });
    let path = format!("{dir}/results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap_or_default())
        .map_err(|e| CliError::io(&path, e))?;
    let figs = plots(dir, &records, &sc)?;
    index(dir, &doc, &figs, &sc)?;
    eprintln!(
        "report: {} records from {} in {elapsed:.0} s → {dir}/index.md{}",
        records.len(),
        found.join(", "),
        if failures.is_empty() { String::new() } else { format!(" ({} failed runs, listed there)", failures.len()) }
    );
    Ok(())
}

/// Redraws the plots and `index.md` from an existing `DIR/results.json`
/// (no benchmark runs).
pub fn replot(dir: &str) -> Result<(), CliError> {
    let path = format!("{dir}/results.json");
    let bytes = std::fs::read(&path).map_err(|e| CliError::io(&path, e))?;
    let doc: Value =
        serde_json::from_slice(&bytes).map_err(|e| CliError::blob(&path, &format!("not a report: {e}")))?;
    let meta = &doc["meta"];
    let nums = |k: &str| -> Vec<u64> {
        meta[k].as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
    };
    let sc = Scale {
        ns: nums("n"),
        sweep_n: meta["value_bits_sweep_n"].as_u64().unwrap_or(0),
        bits: nums("value_bits"),
        updates: meta["updates"].as_u64().unwrap_or(0),
    };
    let records = doc["records"].as_array().cloned().unwrap_or_default();
    let figs = plots(dir, &records, &sc)?;
    index(dir, &doc, &figs, &sc)
}

/// The 1-minute load average (other processes compete for the cores).
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{cpu}, {cores} cores available")
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// A figure: file name, title, caption.
struct Fig {
    file: String,
    title: String,
    caption: String,
}

/// Series `name → [(x, y)]`, averaged over duplicates (baselines appear once per benchmark).
type Series = BTreeMap<String, Vec<(f64, f64)>>;

fn collect(
    records: &[Value],
    keep: impl Fn(&Value) -> bool,
    x: impl Fn(&Value) -> Option<f64>,
    y: impl Fn(&Value) -> Option<f64>,
) -> Series {
    let mut acc: BTreeMap<String, BTreeMap<u64, (f64, f64, usize)>> = BTreeMap::new();
    for r in records.iter().filter(|r| keep(r)) {
        let (Some(xv), Some(yv)) = (x(r), y(r)) else { continue };
        if yv <= 0.0 {
            continue;
        }
        let e = acc.entry(s(r, "structure").to_string()).or_default().entry(xv.to_bits()).or_insert((xv, 0.0, 0));
        e.1 += yv;
        e.2 += 1;
    }
    acc.into_iter()
        .map(|(k, m)| {
            let mut pts: Vec<(f64, f64)> = m.into_values().map(|(x, y, c)| (x, y / c as f64)).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (k, pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

fn is_baseline(name: &str) -> bool {
    name.starts_with("hashbrown") || name.starts_with("xorf") || name.starts_with("floor") || name.starts_with("std")
}

/// Colours for structures (Tableau 10) and baselines (greys and brown).
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(140, 86, 75),
    RGBColor(31, 60, 120),
];
const BASELINE_COLOURS: [RGBColor; 4] =
    [RGBColor(0, 0, 0), RGBColor(105, 105, 105), RGBColor(160, 160, 160), RGBColor(120, 80, 40)];

/// Axis tick labels: 16K, 1M, 0.5, 120.
fn tick(v: f64) -> String {
    if v >= 1024.0 && (v / 1024.0).fract() == 0.0 {
        human(v)
    } else if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}K", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Draws a line chart with a log-scale y axis (and a log-scale x axis when
/// `log_x`); baselines in greys with crosses, structures in colour with dots.
fn chart(path: &str, title: &str, xlabel: &str, ylabel: &str, series: &Series, log_x: bool) -> Result<(), String> {
    if series.is_empty() {
        return Err("no data".into());
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for p in series.values().flatten() {
        x0 = x0.min(p.0);
        x1 = x1.max(p.0);
        y0 = y0.min(p.1);
        y1 = y1.max(p.1);
    }
    let (x0, x1) = if log_x { (x0 / 1.25, x1 * 1.25) } else { (x0 - 1.0, x1 + 1.0) };
    // Head room above the data for the legend (log scale).
    let rows = series.len() as f64;
    let (y0, y1) = (y0 / 1.5, y1 * (y1 / y0).max(10.0).powf(0.045 * rows + 0.1) * 1.5);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 22)).margin(14).x_label_area_size(48).y_label_area_size(70);
    let (mut ci, mut bi) = (0usize, 0usize);
    let styles: Vec<(bool, ShapeStyle)> = series
        .keys()
        .map(|name| {
            let base = is_baseline(name);
            let color = if base {
                bi += 1;
                BASELINE_COLOURS[(bi - 1) % BASELINE_COLOURS.len()]
            } else {
                ci += 1;
                COLOURS[(ci - 1) % COLOURS.len()]
            };
            (base, ShapeStyle { color: color.to_rgba(), filled: true, stroke_width: if base { 1 } else { 2 } })
        })
        .collect();
    macro_rules! draw {
        ($chart:expr) => {{
            let mut c = $chart;
            c.configure_mesh()
                .x_desc(xlabel)
                .y_desc(ylabel)
                .x_labels(8)
                .y_labels(8)
                .x_label_formatter(&|x| tick(*x))
                .y_label_formatter(&|y| tick(*y))
                .light_line_style(RGBColor(238, 238, 238))
                .draw()
                .map_err(|e| e.to_string())?;
            for ((name, pts), (base, style)) in series.iter().zip(styles.iter().copied()) {
                c.draw_series(LineSeries::new(pts.iter().copied(), style))
                    .map_err(|e| e.to_string())?
                    .label(if base { format!("{name} (baseline)") } else { name.clone() })
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                c.draw_series(pts.iter().map(|p| {
                    if base { Cross::new(*p, 4, style).into_dyn() } else { Circle::new(*p, 3, style).into_dyn() }
                }))
                .map_err(|e| e.to_string())?;
            }
            c.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(RGBColor(180, 180, 180))
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    if log_x {
        draw!(b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale()).map_err(|e| e.to_string())?);
    } else {
        draw!(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale()).map_err(|e| e.to_string())?);
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

fn plots(dir: &str, records: &[Value], sc: &Scale) -> Result<Vec<Fig>, CliError> {
    let mut figs = Vec::new();
    let mut add = |file: &str,
                   title: &str,
                   xl: &str,
                   yl: &str,
                   caption: &str,
                   series: Series,
                   log_x: bool|
     -> Result<(), CliError> {
        let path = format!("{dir}/{file}");
        match chart(&path, title, xl, yl, &series, log_x) {
            Ok(()) => figs.push(Fig { file: file.into(), title: title.into(), caption: caption.into() }),
            Err(e) if e == "no data" => {}
            Err(e) => return Err(CliError::io(&path, std::io::Error::other(e))),
        }
        Ok(())
    };
    let sweep = sc.sweep_n as f64;
    let n_of = |r: &Value| num(r, "n");
    // Memory vs value bits (thesis Fig. 1.2 / 4.12).
    add(
        "bits_per_key_vs_value_bits.svg",
        &format!("Memory vs value width (n = {})", human(sweep)),
        "value bits l",
        "bits per key (log)",
        "Lookup-form memory per key against value width, uniform workload (thesis Fig. 1.2 / 4.12). \
         xorf filters store 8 or 16-bit fingerprints and no values; hashbrown stores full keys.",
        collect(
            records,
            |r| n_of(r) == Some(sweep) && s(r, "dist") == "uniform" && s(r, "structure") != "floor_2_random_reads",
            |r| num(r, "value_bits"),
            |r| num(r, "bits_per_key"),
        ),
        false,
    )?;
    let at8 = |r: &Value| num(r, "requested_value_bits") == Some(8.0);
    for dist in ["uniform", "zipf"] {
        let d = if dist == "zipf" { "Zipf(1)" } else { "uniform" };
        add(
            &format!("lookup_{dist}.svg"),
            &format!("Single-thread lookups, {d} keys (l = 8)"),
            "keys n (log)",
            "million lookups/s (log)",
            &format!("One `get` per key on one core, {d} query stream (Concise Fig. 5, thesis Figs. 4.17–4.18)."),
            collect(records, |r| s(r, "dist") == dist && at8(r), n_of, |r| num(r, "lookup_ns").map(|ns| 1e3 / ns)),
            true,
        )?;
        add(
            &format!("batch_lookup_{dist}.svg"),
            &format!("Batched lookups (get_batch of 16), {d} keys (l = 8)"),
            "keys n (log)",
            "million lookups/s (log)",
            &format!(
                "`get_batch` with software prefetching, {d} query stream; `floor_2_random_reads` is the DRAM floor of two independent random reads per key; \
                 baselines without a batch API (hashbrown, xorf) are shown with single lookups."
            ),
            collect(
                records,
                |r| s(r, "dist") == dist && at8(r),
                n_of,
                |r| {
                    num(r, "batch_lookup_ns")
                        .or_else(|| if is_baseline(s(r, "structure")) { num(r, "lookup_ns") } else { None })
                        .map(|ns| 1e3 / ns)
                },
            ),
            true,
        )?;
    }
    add(
        "update_throughput.svg",
        "Update throughput (l = 8)",
        "keys n (log)",
        "million updates/s (log)",
        "Equal mix of insert / value change / delete, control form producing deltas and the lookup form applying them (thesis Fig. 4.16). \
         Baseline: hashbrown bulk insert rate (no deltas, no compact form).",
        collect(
            records,
            |r| s(r, "dist") == "uniform" && at8(r),
            n_of,
            |r| {
                num(r, "update_ops_per_s")
                    .or_else(|| {
                        if s(r, "structure") == "hashbrown" {
                            num(r, "build_ns_per_key").map(|b| 1e9 / b)
                        } else {
                            None
                        }
                    })
                    .map(|x| x / 1e6)
            },
        ),
        true,
    )?;
    add(
        "construction.svg",
        "Construction time (l = 8)",
        "keys n (log)",
        "ns per key (log)",
        "Bulk construction time per key (thesis Fig. 4.21), with the hashbrown and xorf builds of the same keys.",
        collect(records, |r| s(r, "dist") == "uniform" && at8(r), n_of, |r| num(r, "build_ns_per_key")),
        true,
    )?;
    Ok(figs)
}

fn human(n: f64) -> String {
    if n >= (1u64 << 20) as f64 {
        format!("{}M", n / (1u64 << 20) as f64)
    } else if n >= 1024.0 {
        format!("{}K", n / 1024.0)
    } else {
        format!("{n}")
    }
}

fn index(dir: &str, doc: &Value, figs: &[Fig], sc: &Scale) -> Result<(), CliError> {
    let meta = &doc["meta"];
    let recs = doc["records"].as_array().cloned().unwrap_or_default();
    let mut md = String::new();
    let _ = writeln!(md, "# keyplane benchmark report\n");
    let _ = writeln!(
        md,
        "Scale `{}`: n ∈ {{{}}}, value-width sweep at n = {}, {} updates per run; {} s on {}.\n",
        meta["scale"].as_str().unwrap_or(""),
        sc.ns.iter().map(|&n| human(n as f64)).collect::<Vec<_>>().join(", "),
        human(sc.sweep_n as f64),
        sc.updates,
        meta["seconds"].as_f64().unwrap_or(0.0).round(),
        meta["machine"].as_str().unwrap_or("")
    );
    let _ = writeln!(
        md,
        "Benchmarks run: {}. Regenerate with `cargo run --release -p keyplane-cli -- bench --report {dir} --scale {}`. \
         All numbers are from one run on a shared machine; raw records in [results.json](results.json).\n",
        meta["benchmarks"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
            .unwrap_or_default(),
        meta["scale"].as_str().unwrap_or("small"),
    );
    if let (Some(a), Some(b)) = (meta["load_average_start"].as_f64(), meta["load_average_end"].as_f64()) {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as f64;
        let _ = writeln!(
            md,
            "Load average {a:.1} at the start and {b:.1} at the end of the run{}.\n",
            if a.max(b) > cores {
                " — more runnable processes than cores, so other work competed with the benchmarks: \
                 timings are pessimistic and noisy; memory figures are exact"
            } else {
                ""
            }
        );
    }
    if let Some(f) = meta["unsupported"].as_array().filter(|f| !f.is_empty()) {
        let _ = writeln!(md, "Configurations a structure does not support (skipped):\n");
        for x in f {
            let _ = writeln!(md, "- {}", x.as_str().unwrap_or(""));
        }
        md.push('\n');
    }
    if let Some(f) = meta["failures"].as_array().filter(|f| !f.is_empty()) {
        let _ = writeln!(md, "Failed runs (not plotted):\n");
        for x in f {
            let _ = writeln!(md, "- {}", x.as_str().unwrap_or(""));
        }
        md.push('\n');
    }
    for f in figs {
        let _ = writeln!(md, "## {}\n\n![{}]({})\n\n{}\n", f.title, f.title, f.file, f.caption);
    }
    // Table at the largest n, uniform, l = 8.
    let big = *sc.ns.last().unwrap_or(&0) as f64;
    let _ = writeln!(md, "## Numbers at n = {}, l = 8, uniform\n", human(big));
    let _ = writeln!(
        md,
        "| structure | bits/key | build ns/key | lookup ns | batch ns | Zipf lookup ns | updates/s |\n|---|---|---|---|---|---|---|"
    );
    let pick = |name: &str, dist: &str, k: &str| {
        recs.iter()
            .find(|r| {
                s(r, "structure") == name
                    && s(r, "dist") == dist
                    && num(r, "n") == Some(big)
                    && num(r, "requested_value_bits") == Some(8.0)
            })
            .and_then(|r| num(r, k))
    };
    let mut names: Vec<&str> = Vec::new();
    for r in &recs {
        let n = s(r, "structure");
        if num(r, "n") == Some(big) && !names.contains(&n) {
            names.push(n);
        }
    }
    let f = |x: Option<f64>, p: usize| {
        x.map(|v| if v >= 1e5 { format!("{v:.3e}") } else { format!("{v:.p$}") }).unwrap_or_else(|| "–".into())
    };
    for n in names {
        let _ = writeln!(
            md,
            "| {n} | {} | {} | {} | {} | {} | {} |",
            f(pick(n, "uniform", "bits_per_key"), 2),
            f(pick(n, "uniform", "build_ns_per_key"), 1),
            f(pick(n, "uniform", "lookup_ns"), 1),
            f(pick(n, "uniform", "batch_lookup_ns"), 1),
            f(pick(n, "zipf", "lookup_ns"), 1),
            f(pick(n, "uniform", "update_ops_per_s"), 0),
        );
    }
    let path = format!("{dir}/index.md");
    std::fs::write(&path, md).map_err(|e| CliError::io(&path, e))
}
