//! The benchmark command line, parsed with clap like the `keyplane`
//! command: `NAME --help` prints that benchmark's flags and runs nothing,
//! unknown flags and bad numbers are usage errors (exit 2), and values are
//! checked before any key is generated.

use crate::common::{Args, parse_num};
use clap::{Arg, ArgAction, Command};

/// (benchmark, summary, its own flags: (name, takes a value, help)).
type Spec = (&'static str, &'static str, &'static [(&'static str, bool, &'static str)]);

const FP: (&str, bool, &str) =
    ("fingerprint-bits", true, "fingerprint width(s) in bits (a number or a comma-separated list)");

/// Every benchmark with its specific flags (the common ones are added to all).
pub const BENCHMARKS: &[Spec] = &[
    ("othello", "Othello / Concise FIB / OFW", &[FP]),
    (
        "ludo",
        "Ludo hashing",
        &[
            FP,
            ("memory-only", false, "only the memory figures"),
            ("no-fingerprints", false, "skip the fingerprinted variant"),
            ("concurrent-updates-per-s", true, "update rate during the concurrent lookup run"),
            ("secs", true, "seconds of the concurrent lookup run (default 3)"),
        ],
    ),
    (
        "setsep",
        "ScaleBricks SetSep",
        &[
            ("no-table", false, "skip the paper table"),
            ("growth-keys", true, "keys inserted in the growth run"),
            ("max-updates", true, "updates in the update run"),
            ("rounds", true, "repetitions"),
            ("table-bits", true, "value widths of the paper table (list)"),
            ("table-threads", true, "thread counts of the paper table (list)"),
        ],
    ),
    (
        "cuckoo",
        "CuckooSwitch (2,4) cuckoo hash",
        &[
            FP,
            ("reps", true, "repetitions"),
            ("batch", true, "batch sizes (list)"),
            ("rates", true, "update rates for the concurrent run (list)"),
            ("secs", true, "seconds per concurrent run"),
            ("values", true, "value kind"),
        ],
    ),
    (
        "cuckoo-partial",
        "partial-key cuckoo (alias: pkcuckoo)",
        &[
            FP,
            ("reps", true, "repetitions"),
            ("batch", true, "batch sizes (list)"),
            ("rates", true, "update rates for the concurrent run (list)"),
            ("secs", true, "seconds per concurrent run"),
            ("values", true, "value kind"),
        ],
    ),
    ("cfw", "Cuckoo Filtable forwarder", &[FP, ("hashes", true, "Bloom hash counts (list)")]),
    ("bfw", "Bloom forwarder", &[FP, ("hashes", true, "Bloom hash counts (list)")]),
    (
        "fht",
        "fingerprint hash table for names",
        &[
            FP,
            ("depth-names", true, "names in the depth experiment"),
            ("share-names", true, "names in the distributed-share experiment"),
            ("widths", true, "fingerprint widths (list)"),
        ],
    ),
    (
        "fpt",
        "fingerprint Patricia trie for names",
        &[
            FP,
            ("depth-names", true, "names in the depth experiment"),
            ("share-names", true, "names in the distributed-share experiment"),
            ("widths", true, "fingerprint widths (list)"),
        ],
    ),
    (
        "lb",
        "Concury load balancer with Maglev and SilkRoad baselines",
        &[
            ("skip-dynamic", false, "skip the dynamic pool-change run"),
            ("skip-response", false, "skip the response-time run"),
            ("backends-per-vip", true, "DIPs per VIP"),
            ("dcode-bits", true, "Dcode width"),
            ("dyn-secs", true, "seconds of the dynamic run"),
            ("maglev-digest-bits", true, "Maglev connection-table digest bits"),
            ("silkroad-digest-bits", true, "SilkRoad digest bits"),
            ("pool-every-ms", true, "pool change period"),
            ("rounds", true, "repetitions"),
            ("states", true, "connection states"),
            ("vips", true, "VIPs"),
            ("rates", true, "pool-change rates (list)"),
            ("response-states", true, "state counts of the response run (list)"),
            ("setup", true, "setup name"),
        ],
    ),
    ("hash", "hash functions", &[]),
];

/// Flags every benchmark takes.
const COMMON: &[(&str, bool, &str)] = &[
    ("keys", true, "number of keys: 1000, 64K (= 64,000), 1M, 1Mi (= 1,048,576); default 1Mi"),
    ("value-bits", true, "value width in bits, 1..=64 (default 8)"),
    ("key-type", true, "u64, mac, ipv4, ipv6, fivetuple or name (default u64)"),
    ("threads", true, "threads for the multi-threaded figure (default 2)"),
    ("updates", true, "updates to time"),
    ("dist", true, "query distribution: uniform or zipf"),
    ("zipf-s", true, "Zipf exponent (default 1)"),
    ("core", false, "the common measurements at --keys only (no paper tables or sweeps)"),
    ("json", false, "print one JSON object per measurement"),
];

/// Flags whose value is a count list (numbers or comma-separated numbers).
fn is_list(name: &str) -> bool {
    matches!(
        name,
        "fingerprint-bits"
            | "hashes"
            | "batch"
            | "rates"
            | "table-bits"
            | "table-threads"
            | "widths"
            | "response-states"
    )
}

/// The dispatch name of a benchmark (`pkcuckoo` is an alias of `cuckoo-partial`).
pub fn canonical(name: &str) -> &str {
    match name {
        "pkcuckoo" | "partial" => "cuckoo-partial",
        n => n,
    }
}

/// A benchmark's peak bytes per key (keys, queries, the structure and its
/// baselines); 16M keys peak near 4 GB.
const BYTES_PER_KEY: u128 = 200;

/// `MemAvailable` from /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let l = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
    l.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb.saturating_mul(1024))
}

fn check_value(name: &'static str) -> impl Fn(&str) -> Result<String, String> + Clone + Send + Sync + 'static {
    move |v: &str| {
        let nums = |v: &str| -> Result<Vec<u64>, String> {
            v.split(',')
                .map(|x| parse_num(x).ok_or_else(|| format!("{x:?} is not a count (1000, 64K, 1M, 1Mi)")))
                .collect()
        };
        match name {
            "keys" => match parse_num(v) {
                Some(0) => Err("must be at least 1".into()),
                Some(n) if n > 1 << 34 => Err(format!("{n} keys is more than this harness generates (at most 2^34)")),
                Some(n) if mem_available().is_some_and(|m| n as u128 * BYTES_PER_KEY > m as u128) => Err(format!(
                    "{n} keys need about {:.1} GB, more than the {:.1} GB available (MemAvailable)",
                    n as f64 * BYTES_PER_KEY as f64 / 1e9,
                    mem_available().unwrap_or(0) as f64 / 1e9
                )),
                Some(_) => Ok(v.to_string()),
                None => Err(format!("{v:?} is not a count (1000, 64K, 1M, 1Mi)")),
            },
            "value-bits" => match parse_num(v) {
                Some(1..=64) => Ok(v.to_string()),
                _ => Err(format!("{v:?}: value widths are 1..=64 bits")),
            },
            "threads" => match parse_num(v) {
                Some(1..=1024) => Ok(v.to_string()),
                _ => Err(format!("{v:?}: 1..=1024 threads")),
            },
            "key-type" => crate::common::KeyType::parse(v).map(|_| v.to_string()).map_err(String::from),
            "dist" => {
                matches!(v, "uniform" | "zipf").then(|| v.to_string()).ok_or_else(|| "expected uniform or zipf".into())
            }
            "zipf-s" | "secs" | "dyn-secs" => v
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .map(|_| v.to_string())
                .ok_or_else(|| format!("{v:?} is not a non-negative number")),
            "setup" | "values" => Ok(v.to_string()),
            n if is_list(n) => nums(v).and_then(|l| {
                if l.contains(&0) && matches!(n, "batch" | "hashes" | "table-threads" | "fingerprint-bits" | "widths") {
                    Err("0 is not allowed here".into())
                } else if n == "fingerprint-bits" && l.iter().any(|&f| f > 32)
                    || n == "widths" && l.iter().any(|&f| f > 32)
                {
                    Err("fingerprints are 1..=32 bits".into())
                } else if n == "table-bits" && l.iter().any(|&f| f == 0 || f > 64) {
                    Err("value widths are 1..=64 bits".into())
                } else {
                    Ok(v.to_string())
                }
            }),
            _ => match parse_num(v) {
                Some(_) => Ok(v.to_string()),
                None => Err(format!("{v:?} is not a count (1000, 64K, 1M, 1Mi)")),
            },
        }
    }
}

fn arg(name: &'static str, value: bool, help: &'static str) -> Arg {
    let a = Arg::new(name).long(name).help(help);
    if value { a.num_args(1).value_parser(check_value(name)) } else { a.action(ArgAction::SetTrue) }
}

/// The clap command for one benchmark.
pub fn command(bench: &str) -> Option<Command> {
    let (name, about, own) = BENCHMARKS.iter().find(|(n, _, _)| *n == canonical(bench))?;
    let mut c = Command::new(*name).about(*about).no_binary_name(true);
    let mut seen = Vec::new();
    for &(n, v, h) in COMMON.iter().chain(own.iter()) {
        if !seen.contains(&n) {
            seen.push(n);
            c = c.arg(arg(n, v, h));
        }
    }
    Some(c)
}

/// Parses a benchmark's flags (without its name). `Err` is clap's error:
/// print it and exit with `e.exit_code()` (0 for `--help`, 2 otherwise).
pub fn parse(bench: &str, argv: &[String]) -> Result<Args, clap::Error> {
    let Some(c) = command(bench) else {
        let names: Vec<&str> = BENCHMARKS.iter().map(|b| b.0).collect();
        return Err(clap::Error::raw(
            clap::error::ErrorKind::InvalidSubcommand,
            format!("unknown benchmark {bench:?} (known: {}, pkcuckoo)\n", names.join(", ")),
        ));
    };
    let m = c.clone().try_get_matches_from(argv)?;
    let mut words = Vec::new();
    for a in c.get_arguments() {
        let id = a.get_id().as_str();
        if a.get_action().takes_values() {
            if let Some(v) = m.get_one::<String>(id) {
                words.push(format!("--{id}={v}"));
            }
        } else if m.get_flag(id) {
            words.push(format!("--{id}"));
        }
    }
    Args::parse(&words).map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn flags_are_checked_and_help_is_not_a_run() {
        let a = parse("othello", &v(&["--keys", "1K", "--json", "--fingerprint-bits", "8"])).unwrap();
        assert_eq!(a.num("keys", 0), 1000);
        assert!(a.flag("json"));
        assert_eq!(a.nums("fingerprint-bits", &[]), vec![8]);
        assert_eq!(parse("othello", &v(&["--help"])).unwrap_err().exit_code(), 0);
        for bad in [
            &["--bogus"][..],
            &["--value-bits", "99"],
            &["--value-bits", "0"],
            &["--keys", "0"],
            &["--keys", "99999999999999999999"],
            &["--keys", "16G"],
            &["--dist", "pareto"],
            &["--json", "extra"],
        ] {
            let e = parse("othello", &v(bad)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        assert!(parse("nope", &[]).is_err());
        assert!(parse("pkcuckoo", &v(&["--reps", "1"])).is_ok());
        // Every benchmark has a command.
        for (n, _, _) in BENCHMARKS {
            assert!(command(n).is_some());
        }
    }
}
