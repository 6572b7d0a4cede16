//! The papers, reproduced: `keyplane bench --report DIR --scale S` (and
//! `keyplane-bench report DIR --scale S`) runs the benchmark jobs the
//! figures need, then writes one SVG (and PNG) per reproduced figure or
//! table, `results.json` and `index.md` (claim, plot, the paper's values
//! beside ours, and a one-line verdict per figure).
//!
//! Jobs are the existing benchmark functions ([`crate::run`]) with explicit
//! arguments per scale, plus two memory-only sweeps built here. Each figure
//! names the jobs it reads; `--only` runs just those.

mod figures;
mod lb_setups;
pub mod png;
pub mod svg;

use crate::common::Record;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Instant;

pub use figures::{FIGURES, FigureDef, NOT_REPRODUCED};

/// Sizes of one scale.
#[derive(Debug, Clone)]
pub struct Scale {
    /// `tiny`, `small`, `medium` or `paper`.
    pub name: &'static str,
    /// Table sizes of the per-size figures (Othello, cuckoo, Ludo).
    pub ns: Vec<u64>,
    /// Table sizes of the SetSep per-size runs (l = 20 construction is slow).
    pub setsep_ns: Vec<u64>,
    /// Keys of the value-width sweep and the CFW/BFW runs.
    pub sweep_n: u64,
    /// Value widths of the sweep.
    pub bits: Vec<u32>,
    /// Updates timed per run.
    pub updates: u64,
    /// Concise Table II: paper sizes divided by this.
    pub table2_div: u64,
    /// Keys of the ScaleBricks Table 1 construction runs.
    pub setsep_table_n: u64,
    /// Names of the FHT run (Table 2).
    pub name_n: u64,
    /// Rule-set names of FHT Table 3.
    pub share_names: u64,
    /// Generated names of the FPT depth curve.
    pub depth_names: u64,
    /// Connection states of the load-balancer runs.
    pub lb_ns: Vec<u64>,
    /// VIPs of the load-balancer runs (128 in the thesis).
    pub lb_vips: u64,
    /// Connection states of the Large-network runs (thesis Figs. 5.10–5.11,
    /// 5.14–5.15: 1K–16M) and of the DIP-V Small run (Figs. 5.9, 5.13).
    pub lb_large_ns: Vec<u64>,
    /// Lookups per timed pass of the load-balancer setup runs.
    pub lb_queries: u64,
    /// Interleaved timing rounds of the load-balancer setup runs (best kept).
    pub lb_rounds: u64,
    /// States of the dynamic (Fig. 5.17) run.
    pub lb_dyn_n: u64,
    /// Seconds per arrival rate in the dynamic run.
    pub lb_dyn_secs: f64,
    /// Arrival rates (new states per second) of the dynamic run.
    pub lb_rates: Vec<u64>,
    /// Seconds per timed multi-thread / concurrent-update phase (cuckoo).
    pub secs: f64,
    /// Table size of CuckooSwitch Fig. 10.
    pub fig10_n: u64,
    /// Update rates of CuckooSwitch Fig. 10.
    pub fig10_rates: Vec<u64>,
}

impl Scale {
    /// The named scale.
    pub fn named(name: &str) -> Result<Scale, String> {
        let k = 1_000u64;
        let m = 1_000_000u64;
        let bits = vec![1, 2, 4, 8, 12, 16, 20, 32];
        Ok(match name {
            "tiny" => Scale {
                name: "tiny",
                ns: vec![2 * k, 8 * k],
                setsep_ns: vec![2 * k, 8 * k],
                sweep_n: 4 * k,
                bits: vec![1, 4, 8, 20],
                updates: 500,
                table2_div: 1000,
                setsep_table_n: 4 * k,
                name_n: 4 * k,
                share_names: 8 * k,
                depth_names: 4 * k,
                lb_ns: vec![2 * k, 8 * k],
                lb_vips: 16,
                lb_large_ns: vec![2 * k, 8 * k],
                lb_queries: 20 * k,
                lb_rounds: 1,
                lb_dyn_n: 4 * k,
                lb_dyn_secs: 0.05,
                lb_rates: vec![k, 64 * k],
                secs: 0.02,
                fig10_n: 8 * k,
                fig10_rates: vec![64 * k],
            },
            "small" => Scale {
                name: "small",
                ns: vec![30 * k, 100 * k, 300 * k],
                setsep_ns: vec![30 * k, 100 * k],
                sweep_n: 100 * k,
                bits: bits.clone(),
                updates: 20 * k,
                table2_div: 50,
                setsep_table_n: 100 * k,
                name_n: 100 * k,
                share_names: 300 * k,
                depth_names: 100 * k,
                lb_ns: vec![30 * k, 100 * k, 300 * k],
                lb_vips: 128,
                lb_large_ns: vec![30 * k, 100 * k, 300 * k],
                lb_queries: 300 * k,
                lb_rounds: 1,
                lb_dyn_n: 100 * k,
                lb_dyn_secs: 0.25,
                lb_rates: vec![k, 16 * k, 256 * k],
                secs: 0.1,
                fig10_n: 300 * k,
                fig10_rates: vec![64 * k, 500 * k],
            },
            "medium" => Scale {
                name: "medium",
                ns: vec![100 * k, 300 * k, m],
                setsep_ns: vec![100 * k, 300 * k],
                sweep_n: 300 * k,
                bits: bits.clone(),
                updates: 50 * k,
                table2_div: 10,
                setsep_table_n: 300 * k,
                name_n: 300 * k,
                share_names: m,
                depth_names: 300 * k,
                lb_ns: vec![100 * k, 300 * k, m],
                lb_vips: 128,
                lb_large_ns: vec![100 * k, 300 * k, m],
                lb_queries: m,
                lb_rounds: 2,
                lb_dyn_n: 300 * k,
                lb_dyn_secs: 0.5,
                lb_rates: vec![k, 4 * k, 16 * k, 64 * k, 256 * k],
                secs: 0.25,
                fig10_n: m,
                fig10_rates: vec![16 * k, 64 * k, 256 * k, 500 * k],
            },
            // As close to the papers' sizes as one 24 GiB machine allows
            // (jobs run one at a time; `check_memory` refuses a run whose
            // largest job would not fit): Concise Table II at full size,
            // CuckooSwitch Fig. 10 at its 2M entries, the thesis's Small LB
            // network over its whole 16K–1M range and the Large one to 16M;
            // capped where the papers go beyond memory: per-size runs at 16M
            // keys (Ludo's benchmark peaks near 1 KB per key; the thesis
            // reaches 1B), SetSep Table 1 at 32M keys (paper 64M), FHT shares
            // over 32M names (paper 10^9).
            "paper" => Scale {
                name: "paper",
                ns: vec![m, 4 * m, 16 * m],
                setsep_ns: vec![m, 4 * m, 16 * m],
                sweep_n: 16 * m,
                bits,
                updates: m,
                table2_div: 1,
                setsep_table_n: 32 * m,
                name_n: 16 * m,
                share_names: 32 * m,
                depth_names: 16 * m,
                lb_ns: vec![16 * k, 64 * k, 256 * k, m],
                lb_vips: 128,
                lb_large_ns: vec![64 * k, m, 4 * m, 16 * m],
                lb_queries: 4 * m,
                lb_rounds: 3,
                lb_dyn_n: m,
                lb_dyn_secs: 10.0,
                lb_rates: vec![k, 4 * k, 16 * k, 64 * k, 256 * k],
                secs: 2.0,
                fig10_n: 2 * m,
                fig10_rates: vec![16 * k, 64 * k, 256 * k, 500 * k],
            },
            s => return Err(format!("--scale {s}: expected tiny, small, medium or paper")),
        })
    }
}

/// What a job runs.
pub enum Work {
    /// A registered benchmark with these arguments.
    Bench(&'static str, Vec<String>),
    /// A sweep built in this module.
    Custom(fn(&Scale) -> Result<Vec<Record>, String>),
    /// A load-balancer setup ([`lb_setups::SETUPS`] index) at this many states.
    LbSetup(usize, u64),
}

/// One benchmark run, shared by the figures that read it.
pub struct Job {
    /// Unique id; figures select jobs by id prefix.
    pub id: String,
    /// What to run.
    pub work: Work,
    /// Estimated seconds (for the time-left estimate; corrected as jobs finish).
    pub estimate: f64,
}

impl Job {
    /// The run, as shown in `index.md`.
    pub fn describe(&self) -> String {
        match &self.work {
            Work::Bench(b, a) => format!("{b} {}", a.join(" ")),
            Work::Custom(_) => "(built in the report module)".into(),
            Work::LbSetup(i, n) => {
                let s = &lb_setups::SETUPS[*i];
                format!("(report module) Concury, Maglev, SilkRoad: {} {} network, {n} states", s.setup, s.network)
            }
        }
    }
}

fn args(list: &[(&str, String)], flags: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    for (k, x) in list {
        v.push(format!("--{k}"));
        v.push(x.clone());
    }
    for f in flags {
        v.push(format!("--{f}"));
    }
    v
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// Every job of a scale, in run order.
pub fn jobs(sc: &Scale) -> Vec<Job> {
    let mut out = Vec::new();
    let u = |n: u64| sc.updates.min(n).to_string();
    let s = |x: u64| x.to_string();
    for &n in &sc.ns {
        out.push(Job {
            id: format!("othello/n={n}"),
            work: Work::Bench(
                "othello",
                args(
                    &[("keys", s(n)), ("key-type", "mac".into()), ("value-bits", "8".into()), ("updates", u(n))],
                    &["core"],
                ),
            ),
            estimate: 2.0 + n as f64 * 4e-6,
        });
        out.push(Job {
            id: format!("cuckoo/n={n}"),
            work: Work::Bench(
                "cuckoo",
                args(
                    &[
                        ("keys", s(n)),
                        ("key-type", "mac".into()),
                        ("value-bits", "8".into()),
                        ("updates", u(n)),
                        ("batch", "1,2,4,8,12,16".into()),
                        ("secs", sc.secs.to_string()),
                    ],
                    &["core"],
                ),
            ),
            estimate: 2.0 + n as f64 * 4e-6 + 7.0 * sc.secs,
        });
        for dist in ["uniform", "zipf"] {
            out.push(Job {
                id: format!("ludo/{dist}/n={n}"),
                work: Work::Bench(
                    "ludo",
                    args(
                        &[
                            ("keys", s(n)),
                            ("value-bits", "20".into()),
                            ("updates", u(n)),
                            ("dist", dist.into()),
                            ("secs", (sc.secs * 4.0).to_string()),
                        ],
                        &["core"],
                    ),
                ),
                estimate: 2.0 + n as f64 * 10e-6,
            });
        }
    }
    for &n in &sc.setsep_ns {
        out.push(Job {
            id: format!("setsep/n={n}"),
            work: Work::Bench(
                "setsep",
                args(
                    &[
                        ("keys", s(n)),
                        ("value-bits", "20".into()),
                        ("updates", u(n)),
                        ("max-updates", sc.updates.min(n).min(2000).to_string()),
                        ("rounds", "1".into()),
                        ("growth-keys", s(n.min(50_000))),
                    ],
                    &["core"],
                ),
            ),
            estimate: 2.0 + n as f64 * 15e-6,
        });
    }
    out.push(Job {
        id: "setsep-table1".into(),
        work: Work::Bench(
            "setsep",
            args(
                &[
                    ("keys", s(sc.setsep_table_n)),
                    ("value-bits", "2".into()),
                    ("updates", u(sc.setsep_table_n)),
                    ("max-updates", "1000".into()),
                    ("rounds", "1".into()),
                    ("growth-keys", s(sc.setsep_table_n.min(50_000))),
                    ("table-bits", "1,2,3,4".into()),
                    ("table-threads", "1,2".into()),
                ],
                &[],
            ),
        ),
        estimate: 3.0 + sc.setsep_table_n as f64 * 25e-6,
    });
    out.push(Job {
        id: "vbits".into(),
        work: Work::Custom(vbits),
        estimate: sc.sweep_n as f64 * 6e-6 * sc.bits.len() as f64,
    });
    out.push(Job {
        id: "concise-table2".into(),
        work: Work::Custom(concise_table2),
        estimate: 1.0 + 10e6 / sc.table2_div as f64 * 1.5e-6,
    });
    out.push(Job {
        id: "cuckoo-fig10".into(),
        work: Work::Bench(
            "cuckoo",
            args(
                &[
                    ("keys", s(sc.fig10_n)),
                    ("key-type", "mac".into()),
                    ("value-bits", "8".into()),
                    ("updates", u(sc.fig10_n)),
                    ("batch", "16".into()),
                    ("rates", join(&sc.fig10_rates)),
                    ("secs", sc.secs.to_string()),
                    ("reps", "1".into()),
                ],
                &[],
            ),
        ),
        estimate: 3.0 + sc.fig10_n as f64 * 4e-6 + (5.0 + 3.0 * (1 + sc.fig10_rates.len()) as f64) * sc.secs,
    });
    out.push(Job {
        id: "cfw".into(),
        work: Work::Bench(
            "cfw",
            args(
                &[("keys", s(sc.sweep_n)), ("updates", u(sc.sweep_n)), ("fingerprint-bits", "4,6,8,10,12,16".into())],
                &[],
            ),
        ),
        estimate: 2.0 + sc.sweep_n as f64 * 20e-6,
    });
    out.push(Job {
        id: "bfw".into(),
        work: Work::Bench(
            "bfw",
            args(&[("keys", s(sc.sweep_n)), ("updates", u(sc.sweep_n)), ("hashes", "2,4,7".into())], &[]),
        ),
        estimate: 2.0 + sc.sweep_n as f64 * 15e-6,
    });
    for fp in [4u32, 12, 16] {
        out.push(Job {
            id: format!("ofw/f={fp}"),
            work: Work::Bench(
                "othello",
                args(
                    &[("keys", s(sc.sweep_n)), ("updates", u(sc.sweep_n)), ("fingerprint-bits", fp.to_string())],
                    &["core"],
                ),
            ),
            estimate: 2.0 + sc.sweep_n as f64 * 4e-6,
        });
    }
    out.push(Job {
        id: "fht".into(),
        work: Work::Bench(
            "fht",
            args(&[("keys", s(sc.name_n)), ("updates", u(sc.name_n)), ("share-names", s(sc.share_names))], &[]),
        ),
        estimate: 3.0 + sc.name_n as f64 * 12e-6 + sc.share_names as f64 * 6e-6,
    });
    out.push(Job {
        id: "fpt".into(),
        work: Work::Bench(
            "fpt",
            args(
                &[("keys", s(sc.name_n.min(200_000))), ("updates", u(sc.name_n)), ("depth-names", s(sc.depth_names))],
                &[],
            ),
        ),
        estimate: 5.0 + sc.depth_names as f64 * 20e-6,
    });
    for &n in &sc.lb_ns {
        out.push(Job {
            id: format!("lb/n={n}"),
            work: Work::Bench(
                "lb",
                args(&[("keys", s(n)), ("vips", s(sc.lb_vips)), ("rounds", "1".into())], &["core"]),
            ),
            estimate: 2.0 + n as f64 * 8e-6,
        });
    }
    out.push(Job {
        id: "lb-dynamic".into(),
        work: Work::Bench(
            "lb",
            args(
                &[
                    ("keys", s(sc.lb_dyn_n)),
                    ("vips", s(sc.lb_vips)),
                    ("rounds", "1".into()),
                    ("dyn-secs", sc.lb_dyn_secs.to_string()),
                    ("pool-every-ms", ((sc.lb_dyn_secs * 1000.0 / 3.0).max(10.0) as u64).to_string()),
                    ("rates", join(&sc.lb_rates)),
                    ("response-states", join(&[8_000.min(sc.lb_dyn_n), 32_000.min(sc.lb_dyn_n)])),
                ],
                &[],
            ),
        ),
        estimate: 3.0 + sc.lb_dyn_n as f64 * 10e-6 + 4.5 * sc.lb_dyn_secs * sc.lb_rates.len() as f64,
    });
    for (i, setup) in lb_setups::SETUPS.iter().enumerate() {
        let ns = if setup.network == "large" { &sc.lb_large_ns } else { &sc.lb_ns };
        for &n in ns {
            out.push(Job {
                id: format!("{}/n={n}", setup.id),
                work: Work::LbSetup(i, n),
                estimate: 1.0 + n as f64 * 12e-6 + sc.lb_queries as f64 * sc.lb_rounds as f64 * 12.0 * 0.3e-6,
            });
        }
    }
    out.push(Job { id: "setsep-gpt".into(), work: Work::Custom(setsep_gpt), estimate: sc.sweep_n as f64 * 40e-6 });
    out
}

/// SetSep memory for the GPT value widths of 2–32 servers (l = 1..=5, the
/// ScaleBricks per-node memory and Fig. 11 formulas).
fn setsep_gpt(sc: &Scale) -> Result<Vec<Record>, String> {
    use crate::common::KeyType;
    use keyplane::{ControlTable, LookupTable};
    let n = sc.sweep_n as usize;
    let keys: Vec<[u8; 8]> = (0..n as u64).map(|i| keyplane::hash::mix64(i ^ 0x6e7).to_le_bytes()).collect();
    let mut out = Vec::new();
    for l in 1..=5u32 {
        let vals = (0..n as u64).map(|i| keyplane::hash::mix64(i.rotate_left(9) ^ 0x9a1) & keyplane::mask(l));
        let t = std::time::Instant::now();
        let c = keyplane::setsep::Control::from_items(keys.iter().zip(vals), l)
            .map_err(|e| format!("setsep l = {l}: {e}"))?;
        let secs = t.elapsed().as_secs_f64();
        let b = c.export().memory_bytes();
        let mut r = Record::new("setsep", n, l, KeyType::U64);
        r.set("memory_bytes", b).set("bits_per_key", b as f64 * 8.0 / n as f64).set("build_s", secs);
        out.push(r);
    }
    Ok(out)
}

/// Memory of each structure across value widths at `sweep_n` keys (thesis
/// Fig. 1.2 / 4.12, ScaleBricks Table 1's bits per key, its Fig. 11 formula).
fn vbits(sc: &Scale) -> Result<Vec<Record>, String> {
    use crate::common::{KeyType, gen_keys, gen_values};
    use keyplane::{ControlTable, LookupTable};
    let n = sc.sweep_n as usize;
    let keys = gen_keys(KeyType::U64, n, 1);
    let mut out = Vec::new();
    fn mem<C: ControlTable>(keys: &crate::common::KeySet, vals: &[u64], l: u32) -> Result<usize, String> {
        let c = C::from_items(keys.iter().zip(vals.iter().copied()), l).map_err(|e| e.to_string())?;
        Ok(c.export().memory_bytes())
    }
    for &l in &sc.bits {
        let vals = gen_values(n, l, 2);
        let mut rows: Vec<(&str, Result<usize, String>)> = vec![
            ("othello", mem::<keyplane::othello::Control>(&keys, &vals, l)),
            ("ludo", mem::<keyplane::ludo::Control>(&keys, &vals, l)),
            ("setsep", mem::<keyplane::setsep::Control>(&keys, &vals, l)),
            ("cuckoo", mem::<keyplane::cuckoo::Control>(&keys, &vals, l)),
            ("cfw", mem::<keyplane::cfw::Control>(&keys, &vals, l)),
        ];
        // BFW keeps one Bloom filter per port (2^l of them): l ≤ 8 here.
        if l <= 8 {
            rows.push(("bfw", mem::<keyplane::bfw::Control>(&keys, &vals, l)));
        }
        let f = 30u32.min(63 - l);
        let opts =
            keyplane::cuckoo::partial::Options { fingerprint_bits: f, ..keyplane::cuckoo::partial::Options::default() };
        rows.push((
            "pkcuckoo_f30",
            keyplane::cuckoo::partial::Control::from_items_with(keys.iter().zip(vals.iter().copied()), l, opts)
                .map(|c| c.export().memory_bytes())
                .map_err(|e| e.to_string()),
        ));
        rows.push(("ptrhash_mphf_values", Ok(crate::ludo::mphf_memory(&keys, &vals, l))));
        for (name, m) in rows {
            let mut r = Record::new(name, n, l, KeyType::U64);
            match m {
                Ok(b) => {
                    r.set("memory_bytes", b).set("bits_per_key", b as f64 * 8.0 / n as f64);
                }
                Err(e) => {
                    r.set("error", e);
                }
            }
            out.push(r);
        }
    }
    Ok(out)
}

/// Concise Table II rows: (label, key type, names, actions' value bits,
/// paper's Concise MB, paper's Cuckoo MB).
pub const TABLE2_ROWS: &[(&str, &str, u64, u32, f64, f64)] = &[
    ("MAC, 7e5 names, 16 actions", "mac", 700_000, 4, 1.0, 5.62),
    ("MAC, 5e6 names, 256 actions", "mac", 5_000_000, 8, 16.0, 40.15),
    ("IPv4, 1e6 names, 16 actions", "ipv4", 1_000_000, 4, 1.5, 4.27),
    ("IPv6, 2e6 names, 256 actions", "ipv6", 2_000_000, 8, 4.0, 34.13),
    ("file names, 359194, 16 actions", "name", 359_194, 4, 0.5, 19.32),
];

/// Concise Table II: memory of Concise (Othello) and (2,4) cuckoo for the
/// paper's FIB examples, at the paper's sizes divided by `table2_div`.
fn concise_table2(sc: &Scale) -> Result<Vec<Record>, String> {
    use crate::common::{KeyType, gen_keys, gen_values};
    use keyplane::{ControlTable, LookupTable};
    let mut out = Vec::new();
    for (i, &(label, kt, n_paper, l, _, _)) in TABLE2_ROWS.iter().enumerate() {
        let kt = KeyType::parse(kt)?;
        let n = (n_paper / sc.table2_div).max(1000) as usize;
        let keys = if kt == KeyType::Name { crate::names::gen_names(n, 0) } else { gen_keys(kt, n, 1) };
        let vals = gen_values(n, l, 2);
        for name in ["othello", "cuckoo"] {
            let b = if name == "othello" {
                keyplane::othello::Control::from_items(keys.iter().zip(vals.iter().copied()), l)
                    .map(|c| c.export().memory_bytes())
            } else {
                keyplane::cuckoo::Control::from_items(keys.iter().zip(vals.iter().copied()), l)
                    .map(|c| c.export().memory_bytes())
            }
            .map_err(|e| format!("{label}: {e}"))?;
            let mut r = Record::new(name, n, l, kt);
            r.set("row", i)
                .set("row_label", label)
                .set("memory_bytes", b)
                .set("bits_per_key", b as f64 * 8.0 / n as f64);
            r.set("avg_key_bytes", keys.bytes() as f64 / n as f64);
            out.push(r);
        }
    }
    Ok(out)
}

/// Report options.
pub struct Options {
    /// Output directory.
    pub dir: String,
    /// Scale name.
    pub scale: String,
    /// Figure ids (or prefixes such as `concise`) to produce; all when empty.
    pub only: Vec<String>,
    /// Send the benchmarks' own output to `DIR/bench.log` (keeps the
    /// terminal to the progress lines).
    pub quiet: bool,
    /// Print progress lines on stderr.
    pub progress: bool,
}

/// The machine, for captions.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| format!(", {:.0} GiB", kb / 1048576.0))
        .unwrap_or_default();
    format!("{cpu}, {cores} cores{mem}")
}

fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The figures `only` selects (ids or id prefixes); all when empty.
pub fn select(only: &[String]) -> Result<Vec<&'static FigureDef>, String> {
    if only.is_empty() {
        return Ok(FIGURES.iter().collect());
    }
    let mut out: Vec<&FigureDef> = Vec::new();
    for o in only {
        let hits: Vec<&FigureDef> = FIGURES.iter().filter(|f| f.id == o || f.id.starts_with(o.as_str())).collect();
        if hits.is_empty() {
            return Err(format!(
                "--only {o}: no such figure (known: {})",
                FIGURES.iter().map(|f| f.id).collect::<Vec<_>>().join(", ")
            ));
        }
        for h in hits {
            if !out.iter().any(|f| f.id == h.id) {
                out.push(h);
            }
        }
    }
    Ok(out)
}

/// Stderr sent to a log file while a benchmark runs (Linux), restored on drop.
struct Quiet {
    #[cfg(target_os = "linux")]
    saved: i32,
}

impl Quiet {
    #[cfg(target_os = "linux")]
    fn new(log: &std::fs::File) -> Option<Quiet> {
        use std::os::fd::AsRawFd;
        let _ = std::io::stderr().flush();
        // SAFETY: dup/dup2 on valid descriptors (2 is stderr, `log` is an
        // open file we hold for the duration); failures are checked.
        let saved = unsafe { libc::dup(2) };
        if saved < 0 {
            return None;
        }
        // SAFETY: as above.
        if unsafe { libc::dup2(log.as_raw_fd(), 2) } < 0 {
            // SAFETY: `saved` is the descriptor dup returned above.
            unsafe { libc::close(saved) };
            return None;
        }
        Some(Quiet { saved })
    }
    #[cfg(not(target_os = "linux"))]
    fn new(_: &std::fs::File) -> Option<Quiet> {
        None
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        {
            let _ = std::io::stderr().flush();
            // SAFETY: `saved` is a descriptor we own (from dup); 2 is stderr.
            unsafe {
                libc::dup2(self.saved, 2);
                libc::close(self.saved);
            }
        }
    }
}

fn mmss(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
}

/// Runs the jobs the selected figures need and writes the report.
pub fn run(o: &Options) -> Result<Summary, String> {
    let sc = Scale::named(&o.scale)?;
    let figs = select(&o.only)?;
    let all = jobs(&sc);
    let needed: Vec<&Job> =
        all.iter().filter(|j| figs.iter().any(|f| f.jobs.iter().any(|p| j.id.starts_with(p)))).collect();
    // Refuse before running anything if a job would not fit in memory.
    check_memory(&sc, &needed, mem_available())?;
    // `--only` into a directory that holds a report of the same scale merges:
    // the selected figures' jobs are rerun, every other record is kept.
    let previous = if o.only.is_empty() { None } else { previous_report(&o.dir, sc.name)? };
    std::fs::create_dir_all(&o.dir).map_err(|e| format!("{}: {e}", o.dir))?;
    let total_est: f64 = needed.iter().map(|j| j.estimate).sum();
    let log = if o.quiet {
        let p = format!("{}/bench.log", o.dir);
        Some(std::fs::File::create(&p).map_err(|e| format!("{p}: {e}"))?)
    } else {
        None
    };
    let started = Instant::now();
    let load_start = loadavg();
    let mut records: Vec<Value> = Vec::new();
    let mut job_meta = Vec::new();
    let mut done_est = 0.0;
    for (i, j) in needed.iter().enumerate() {
        if o.progress {
            let el = started.elapsed().as_secs_f64();
            let left = if done_est > 0.0 { el / done_est * (total_est - done_est) } else { total_est };
            let fig = figs.iter().find(|f| f.jobs.iter().any(|p| j.id.starts_with(p))).map_or("", |f| f.id);
            let width = 24usize;
            let filled = ((done_est / total_est.max(1e-9)) * width as f64).round() as usize;
            eprintln!(
                "report [{}{}] {:>2}/{} {fig}: {} · {} elapsed, ~{} left",
                "#".repeat(filled.min(width)),
                "-".repeat(width - filled.min(width)),
                i + 1,
                needed.len(),
                j.id,
                mmss(el),
                mmss(left)
            );
        }
        let t0 = Instant::now();
        let res = {
            let _q = log.as_ref().and_then(Quiet::new);
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &j.work {
                Work::Bench(b, a) => crate::run_words(b, a),
                Work::Custom(f) => f(&sc),
                Work::LbSetup(i, n) => lb_setups::measure(&sc, &lb_setups::SETUPS[*i], *n),
            }))
        };
        let secs = t0.elapsed().as_secs_f64();
        done_est += j.estimate;
        let err = match res {
            Ok(Ok(recs)) => {
                for Record(mut m) in recs {
                    m.insert("job".into(), json!(j.id));
                    records.push(Value::Object(m));
                }
                None
            }
            Ok(Err(e)) => Some(e),
            Err(p) => Some(
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".into()),
            ),
        };
        if let (Some(e), true) = (&err, o.progress) {
            eprintln!("report: job {} failed: {e}", j.id);
        }
        let args = j.describe();
        job_meta.push(json!({ "id": j.id, "run": args, "seconds": secs, "estimate_s": j.estimate, "error": err }));
    }
    let seconds = started.elapsed().as_secs_f64();
    let meta = json!({
        "scale": sc.name,
        "machine": machine(),
        "seconds": seconds,
        "load_average_start": load_start,
        "load_average_end": loadavg(),
        "figures_requested": figs.iter().map(|f| f.id).collect::<Vec<_>>(),
        "sizes": {
            "n": sc.ns, "setsep_n": sc.setsep_ns, "sweep_n": sc.sweep_n, "value_bits": sc.bits,
            "updates": sc.updates, "table2_div": sc.table2_div, "setsep_table_n": sc.setsep_table_n,
            "name_n": sc.name_n, "share_names": sc.share_names, "depth_names": sc.depth_names,
            "lb_n": sc.lb_ns, "lb_vips": sc.lb_vips, "lb_dyn_n": sc.lb_dyn_n, "lb_dyn_secs": sc.lb_dyn_secs, "lb_rates": sc.lb_rates,
            "timed_phase_secs": sc.secs, "fig10_n": sc.fig10_n, "fig10_rates": sc.fig10_rates,
        },
    });
    let mut doc = json!({ "meta": meta, "jobs": job_meta, "records": records });
    let figs = match previous {
        Some(prev) => merge(prev, &mut doc, &figs),
        None => figs,
    };
    let summary = render(&o.dir, &mut doc, &figs)?;
    if o.progress {
        eprintln!(
            "report: {} figures ({} reproduced) and {} records in {} → {}/index.md",
            summary.figures,
            summary.reproduced,
            doc["records"].as_array().map_or(0, Vec::len),
            mmss(seconds),
            o.dir
        );
    }
    Ok(summary)
}

/// Estimated peak resident bytes of a job: per-key costs measured with
/// `/usr/bin/time` (keys, the structure's control and lookup forms, and the
/// same-run baselines), rounded up.
pub fn job_memory(j: &Job, sc: &Scale) -> f64 {
    let n_of = |id: &str| id.rsplit("n=").next().and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    let id = j.id.as_str();
    let per = |n: f64, b: f64| 64e6 + n * b;
    if id.starts_with("othello/") {
        per(n_of(id), MEM_PER_KEY.othello)
    } else if id.starts_with("cuckoo/") {
        per(n_of(id), MEM_PER_KEY.cuckoo)
    } else if id.starts_with("ludo/") {
        per(n_of(id), MEM_PER_KEY.ludo)
    } else if id.starts_with("setsep/") {
        per(n_of(id), MEM_PER_KEY.setsep)
    } else if id == "setsep-table1" {
        per(sc.setsep_table_n as f64, MEM_PER_KEY.setsep)
    } else if id == "setsep-gpt" {
        per(sc.sweep_n as f64, MEM_PER_KEY.setsep)
    } else if id == "vbits" {
        per(sc.sweep_n as f64, MEM_PER_KEY.vbits)
    } else if id == "concise-table2" {
        per(TABLE2_ROWS.iter().map(|r| r.2).max().unwrap_or(0) as f64 / sc.table2_div as f64, MEM_PER_KEY.cuckoo)
    } else if id == "cuckoo-fig10" {
        per(sc.fig10_n as f64, MEM_PER_KEY.cuckoo)
    } else if id == "cfw" || id == "bfw" || id.starts_with("ofw/") {
        per(sc.sweep_n as f64, MEM_PER_KEY.cuckoo)
    } else if id == "fht" {
        per(sc.name_n as f64 + sc.share_names as f64, MEM_PER_KEY.names)
    } else if id == "fpt" {
        per(sc.depth_names as f64, MEM_PER_KEY.trie)
    } else if id == "lb-dynamic" {
        per(sc.lb_dyn_n as f64, MEM_PER_KEY.lb)
    } else if id.starts_with("lb") {
        per(n_of(id), MEM_PER_KEY.lb)
    } else {
        64e6
    }
}

/// Peak bytes per key (or state, or name) of the job families.
struct PerKey {
    othello: f64,
    cuckoo: f64,
    ludo: f64,
    setsep: f64,
    vbits: f64,
    names: f64,
    trie: f64,
    lb: f64,
}

// Measured peak RSS per key at 100K–300K keys on this machine (othello 250,
// cuckoo 190, ludo 970, setsep 250, lb 490, fht 220, fpt 730 bytes), with
// about 1.3× headroom.
const MEM_PER_KEY: PerKey = PerKey {
    othello: 330.0,
    cuckoo: 300.0,
    ludo: 1300.0,
    setsep: 350.0,
    vbits: 350.0,
    names: 300.0,
    trie: 1000.0,
    lb: 700.0,
};

/// `MemAvailable` of `/proc/meminfo` in bytes (`None` where unknown).
fn mem_available() -> Option<f64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let l = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
    Some(l.split_whitespace().nth(1)?.parse::<f64>().ok()? * 1024.0)
}

/// Refuses a run whose largest job would not fit in the available memory
/// (jobs run one at a time, so the peak is the largest job's).
pub fn check_memory(sc: &Scale, needed: &[&Job], available: Option<f64>) -> Result<(), String> {
    let Some(avail) = available else { return Ok(()) };
    let Some(big) = needed.iter().max_by(|a, b| job_memory(a, sc).total_cmp(&job_memory(b, sc))) else {
        return Ok(());
    };
    let need = job_memory(big, sc);
    if need > avail * 0.9 {
        let gib = |b: f64| b / 1073741824.0;
        return Err(format!(
            "--scale {}: job `{}` needs about {:.1} GiB but only {:.1} GiB of memory is available \
             (MemAvailable); free memory, or choose a smaller scale (medium needs about {:.1} GiB), \
             or select figures with --only",
            sc.name,
            big.id,
            gib(need),
            gib(avail),
            gib(Scale::named("medium").map(|m| scale_peak(&m)).unwrap_or(0.0)),
        ));
    }
    Ok(())
}

/// Peak memory estimate of a whole scale (its largest job).
pub fn scale_peak(sc: &Scale) -> f64 {
    jobs(sc).iter().map(|j| job_memory(j, sc)).fold(0.0, f64::max)
}

/// `DIR/results.json` if it holds a report of scale `scale`; an error if
/// it holds another scale (merging would mix sizes); `None` if absent.
fn previous_report(dir: &str, scale: &str) -> Result<Option<Value>, String> {
    let path = format!("{dir}/results.json");
    let Ok(bytes) = std::fs::read(&path) else { return Ok(None) };
    let doc: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{path}: not a report ({e}); remove it or write the report to another directory"))?;
    match doc["meta"]["scale"].as_str() {
        Some(s) if s == scale => Ok(Some(doc)),
        other => Err(format!(
            "{path} holds a report at scale `{}`; --only merges into a report of the same scale: \
             pass --scale {0} or write to another directory",
            other.unwrap_or("?")
        )),
    }
}

/// Merges this run (`doc`) into the previous report: records and job rows
/// of the jobs rerun replace the old ones, the others are kept; returns
/// the figures to draw (the previous report's and the selected ones, in
/// report order). The run time adds up and each run is listed in
/// `meta.runs`.
fn merge(mut prev: Value, doc: &mut Value, figs: &[&'static FigureDef]) -> Vec<&'static FigureDef> {
    let rerun: Vec<String> = doc["jobs"]
        .as_array()
        .map(|a| a.iter().filter_map(|j| j["id"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let kept = |v: &Value, key: &str| -> Vec<Value> {
        v[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|r| {
                        !r[if key == "jobs" { "id" } else { "job" }]
                            .as_str()
                            .is_some_and(|j| rerun.iter().any(|x| x == j))
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut records = kept(&prev, "records");
    records.extend(doc["records"].as_array().cloned().unwrap_or_default());
    let mut jobs = kept(&prev, "jobs");
    jobs.extend(doc["jobs"].as_array().cloned().unwrap_or_default());
    let old_figs: Vec<String> = prev["meta"]["figures_requested"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let out: Vec<&'static FigureDef> =
        FIGURES.iter().filter(|f| old_figs.iter().any(|o| o == f.id) || figs.iter().any(|g| g.id == f.id)).collect();
    let this_run = json!({
        "figures": figs.iter().map(|f| f.id).collect::<Vec<_>>(),
        "seconds": doc["meta"]["seconds"],
        "load_average_start": doc["meta"]["load_average_start"],
        "load_average_end": doc["meta"]["load_average_end"],
    });
    let mut runs = prev["meta"]["runs"].as_array().cloned().unwrap_or_else(|| {
        vec![json!({
            "figures": old_figs,
            "seconds": prev["meta"]["seconds"],
            "load_average_start": prev["meta"]["load_average_start"],
            "load_average_end": prev["meta"]["load_average_end"],
        })]
    });
    runs.push(this_run);
    let meta = prev["meta"].as_object_mut().map(std::mem::take).unwrap_or_default();
    let mut meta = Value::Object(meta);
    meta["seconds"] = json!(runs.iter().filter_map(|r| r["seconds"].as_f64()).sum::<f64>());
    meta["load_average_end"] = doc["meta"]["load_average_end"].clone();
    meta["figures_requested"] = json!(out.iter().map(|f| f.id).collect::<Vec<_>>());
    meta["sizes"] = doc["meta"]["sizes"].clone();
    meta["machine"] = doc["meta"]["machine"].clone();
    meta["runs"] = Value::Array(runs);
    *doc = json!({ "meta": meta, "jobs": jobs, "records": records });
    out
}

/// What a report run produced.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Figures written.
    pub figures: usize,
    /// Of which the claim was reproduced.
    pub reproduced: usize,
    /// Figure ids whose plot could not be drawn (no data), with the reason.
    pub missing: Vec<(String, String)>,
}

/// Redraws the figures, `results.json`'s figure list and `index.md` from
/// `DIR/results.json` (no benchmark runs).
pub fn replot(dir: &str) -> Result<Summary, String> {
    let path = format!("{dir}/results.json");
    let bytes = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
    let mut doc: Value = serde_json::from_slice(&bytes).map_err(|e| format!("{path}: not a report: {e}"))?;
    let wanted: Vec<String> = doc["meta"]["figures_requested"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let figs: Vec<&FigureDef> =
        FIGURES.iter().filter(|f| wanted.is_empty() || wanted.iter().any(|w| w == f.id)).collect();
    render(dir, &mut doc, &figs)
}

/// Draws every figure from the records in `doc`, writes the files.
fn render(dir: &str, doc: &mut Value, figs: &[&FigureDef]) -> Result<Summary, String> {
    let data = figures::Data::new(doc["records"].as_array().cloned().unwrap_or_default());
    let scale = doc["meta"]["scale"].as_str().unwrap_or("?").to_string();
    let machine = doc["meta"]["machine"].as_str().unwrap_or("?").to_string();
    let sizes = doc["meta"]["sizes"].clone();
    let ctx = figures::Ctx { scale: scale.clone(), machine: machine.clone(), sizes };
    let mut summary = Summary::default();
    let mut fig_json = Vec::new();
    let mut sections = String::new();
    let mut verdicts = String::new();
    for f in figs {
        let out = (f.build)(&data, &ctx);
        let mut chart = out.chart;
        chart.caption = format!(
            "{}\nMachine: {machine}. Scale: {scale}. keyplane, one run; the paper's values are in index.md.",
            chart.caption
        );
        let file = format!("{}.svg", f.id);
        let (drawn, why) = match svg::render(&chart) {
            Ok(s) => {
                let p = format!("{dir}/{file}");
                std::fs::write(&p, &s).map_err(|e| format!("{p}: {e}"))?;
                let png = format!("{dir}/{}.png", f.id);
                if let Err(e) = png::write(&s, &png) {
                    eprintln!("report: {png}: {e}");
                }
                (true, String::new())
            }
            Err(e) => (false, e),
        };
        let (mark, word) = match out.verdict {
            figures::Verdict::Yes(_) => ("✅", "Reproduced"),
            figures::Verdict::Partly(_) => ("🟡", "Partly reproduced"),
            figures::Verdict::No(_) => ("❌", "Not reproduced"),
        };
        let reason = out.verdict.text().to_string();
        if drawn {
            summary.figures += 1;
        } else {
            summary.missing.push((f.id.to_string(), why.clone()));
        }
        if matches!(out.verdict, figures::Verdict::Yes(_)) {
            summary.reproduced += 1;
        }
        let _ = writeln!(verdicts, "| {} {} | [{}](#{}) | {mark} {word}: {} |", f.paper, f.figure, f.id, f.id, reason);
        let _ = writeln!(sections, "<a id=\"{}\"></a>\n## {} — {}: {}\n", f.id, f.paper, f.figure, f.title);
        let _ = writeln!(sections, "**Claim** ({}): {}\n", f.cite, f.claim);
        if drawn {
            let _ = writeln!(sections, "![{} {}]({file})\n", f.paper, f.figure);
        } else {
            let _ = writeln!(sections, "_No plot: {why} (the jobs this figure reads failed or were not run)._\n");
        }
        if !out.rows.is_empty() {
            let _ = writeln!(sections, "| quantity | paper | keyplane (this run) |\n|---|---|---|");
            for (q, p, k) in &out.rows {
                let _ = writeln!(sections, "| {q} | {p} | {k} |");
            }
            sections.push('\n');
        }
        let _ = writeln!(sections, "**{mark} {word}:** {reason}\n");
        fig_json.push(json!({
            "id": f.id, "paper": f.paper, "figure": f.figure, "title": f.title, "claim": f.claim, "cite": f.cite,
            "file": if drawn { Value::from(file.clone()) } else { Value::Null },
            "png": if drawn { Value::from(format!("{}.png", f.id)) } else { Value::Null },
            "series": chart.series.iter().filter(|s| !s.points.is_empty()).map(|s| s.name.clone()).collect::<Vec<_>>(),
            "verdict": word, "reason": reason,
            "rows": out.rows.iter().map(|(q, p, k)| json!({"quantity": q, "paper": p, "keyplane": k})).collect::<Vec<_>>(),
        }));
    }
    doc["figures"] = Value::Array(fig_json);
    let path = format!("{dir}/results.json");
    std::fs::write(&path, serde_json::to_string_pretty(doc).unwrap_or_default()).map_err(|e| format!("{path}: {e}"))?;
    // index.md
    let meta = &doc["meta"];
    let mut md = String::new();
    let _ = writeln!(md, "# The papers, reproduced\n");
    let _ = writeln!(
        md,
        "Each section takes one figure or table of the papers keyplane implements (Concise/Othello, ScaleBricks/SetSep, \
         CuckooSwitch, fingerprint name forwarding FHT/FPT, and the thesis's CFW/OFW/BFW, Ludo and Concury chapters), \
         states its claim, plots keyplane's measurement with same-run baselines, puts the paper's published numbers beside \
         ours and says in one line whether this machine reproduces the claim.\n"
    );
    let _ = writeln!(
        md,
        "Scale `{scale}`, generated in {} on {machine}. Regenerate with \
         `cargo run --release -p keyplane-cli -- bench --report DIR --scale {scale}` (or `keyplane-bench report DIR --scale {scale}`); \
         redraw from `results.json` with `--plot-only`. Raw records: [results.json](results.json).\n",
        mmss(meta["seconds"].as_f64().unwrap_or(0.0))
    );
    if let (Some(a), Some(b)) = (meta["load_average_start"].as_f64(), meta["load_average_end"].as_f64()) {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as f64;
        let _ = writeln!(
            md,
            "Load average {a:.1} at the start and {b:.1} at the end{}. The papers ran on dedicated multi-core servers \
             with 4–16 lookup threads; keyplane's throughput figures here are single-thread unless a figure says otherwise, \
             so absolute rates are compared per thread and the claims are checked as ratios against the same-run baselines.\n",
            if a.max(b) > cores {
                " — more runnable processes than cores: other work competed with the benchmarks, so timings are \
                 pessimistic and noisy; memory figures are exact"
            } else {
                ""
            }
        );
    }
    if let Some(runs) = meta["runs"].as_array().filter(|r| r.len() > 1) {
        let parts: Vec<String> = runs
            .iter()
            .map(|r| {
                let figs = r["figures"].as_array().map_or(0, Vec::len);
                format!(
                    "{} ({} figure{}, load {}–{})",
                    mmss(r["seconds"].as_f64().unwrap_or(0.0)),
                    if figs == 0 { "all".to_string() } else { figs.to_string() },
                    if figs == 1 { "" } else { "s" },
                    r["load_average_start"].as_f64().map_or("?".into(), |v| format!("{v:.1}")),
                    r["load_average_end"].as_f64().map_or("?".into(), |v| format!("{v:.1}")),
                )
            })
            .collect();
        let _ = writeln!(
            md,
            "Assembled from {} runs at this scale (`--only` merges the selected figures' jobs into the existing \
             `results.json`): {}.\n",
            runs.len(),
            parts.join("; ")
        );
    }
    let failed: Vec<String> = doc["jobs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|j| !j["error"].is_null())
                .map(|j| format!("- `{}`: {}", j["id"].as_str().unwrap_or(""), j["error"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if !failed.is_empty() {
        let _ = writeln!(md, "Failed benchmark jobs (their figures lack those points):\n\n{}\n", failed.join("\n"));
    }
    let count_of = |w: &str| doc["figures"].as_array().map_or(0, |a| a.iter().filter(|f| f["verdict"] == w).count());
    let _ = writeln!(
        md,
        "## Claims at a glance\n\n{} figures and tables: ✅ {} reproduced, 🟡 {} partly reproduced, ❌ {} not reproduced \
         on this machine.\n\n| paper, figure | section | verdict on this machine |\n|---|---|---|\n{verdicts}",
        doc["figures"].as_array().map_or(0, Vec::len),
        count_of("Reproduced"),
        count_of("Partly reproduced"),
        count_of("Not reproduced"),
    );
    md.push_str(&sections);
    let _ = writeln!(md, "## Figures not reproduced here\n");
    for (what, why) in NOT_REPRODUCED {
        let _ = writeln!(md, "- **{what}**: {why}");
    }
    let _ = writeln!(md, "\n## Jobs and their wall time\n\n| job | run | seconds |\n|---|---|---|");
    if let Some(a) = doc["jobs"].as_array() {
        for j in a {
            let _ = writeln!(
                md,
                "| {} | `{}` | {:.1} |",
                j["id"].as_str().unwrap_or(""),
                j["run"].as_str().unwrap_or(""),
                j["seconds"].as_f64().unwrap_or(0.0)
            );
        }
    }
    let p = format!("{dir}/index.md");
    std::fs::write(&p, md).map_err(|e| format!("{p}: {e}"))?;
    Ok(summary)
}

/// Checks one of our SVGs: series count, axis labels, legend outside the
/// plotting area. Returns the series names.
pub fn check_svg(svg: &str) -> Result<Vec<String>, String> {
    fn attr(tag: &str, name: &str) -> Option<String> {
        let k = format!(" {name}=\"");
        let i = tag.find(&k)? + k.len();
        Some(tag[i..].split('"').next()?.to_string())
    }
    fn rect(svg: &str, class: &str) -> Result<(f64, f64, f64, f64), String> {
        let k = format!("class=\"{class}\"");
        let i = svg.find(&k).ok_or_else(|| format!("no {class}"))?;
        let start = svg[..i].rfind('<').ok_or("bad svg")?;
        let end = i + svg[i..].find('>').ok_or("bad svg")?;
        let tag = &svg[start..end];
        let g = |n: &str| attr(tag, n).and_then(|v| v.parse::<f64>().ok()).ok_or_else(|| format!("{class}: no {n}"));
        Ok((g("x")?, g("y")?, g("width")?, g("height")?))
    }
    if !svg.trim_start().starts_with("<svg") || !svg.trim_end().ends_with("</svg>") {
        return Err("not an SVG document".into());
    }
    let names: Vec<String> = svg
        .match_indices("<g class=\"series\"")
        .filter_map(|(i, _)| attr(&svg[i..i + svg[i..].find('>').unwrap_or(0)], "data-name"))
        .collect();
    if names.is_empty() || names.len() > svg::MAX_SERIES {
        return Err(format!("{} series", names.len()));
    }
    for axis in ["x", "y"] {
        let k = format!("class=\"axis-label {axis}\"");
        let i = svg.find(&k).ok_or_else(|| format!("no {axis} axis label"))?;
        let text = svg[i..].split('>').nth(1).and_then(|t| t.split('<').next()).unwrap_or("");
        if text.trim().is_empty() {
            return Err(format!("empty {axis} axis label"));
        }
    }
    let (px, py, pw, ph) = rect(svg, "plot-area")?;
    let (lx, ly, lw, lh) = rect(svg, "legend-box")?;
    let overlap = lx < px + pw && px < lx + lw && ly < py + ph && py < ly + lh;
    if overlap {
        return Err("the legend box overlaps the plotting area".into());
    }
    Ok(names)
}
