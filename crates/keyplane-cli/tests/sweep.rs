//! A property test over argument vectors for every subcommand: flags of the
//! subcommand (and of others), values that are empty, zero, negative, huge,
//! fractional, suffixed, garbage, arbitrary Unicode, and paths to good,
//! wrong, missing and unwritable files. Every run must end with an exit code
//! of the documented table (0..=8) and no panic text on stderr; commands that
//! serve until stopped (`serve`, `follow`, `lb`, `switch`) may instead still
//! be running after a short while (then they are killed).
//!
//! Cases: `KEYPLANE_SWEEP_CASES` (default 400; the generated sizes are kept
//! small or absurd, so a case takes milliseconds, or seconds for a server).

mod common;

use common::{bin, code, dir, run_in};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// (subcommand, its flags (`?` marks a flag without a value, or a ctl command), serves until stopped).
const SUBS: &[(&str, &[&str], bool)] = &[
    (
        "build",
        &[
            "-s",
            "-l",
            "-O",
            "-i",
            "--generate",
            "--gen-key-type",
            "--key-format",
            "--format",
            "--key-width",
            "--value-bytes",
            "--out",
            "--control",
            "--dump-keys",
            "--seed",
            "?--header",
        ],
        false,
    ),
    (
        "query",
        &[
            "--keys",
            "--key-format",
            "--format",
            "--key-width",
            "--value-bytes",
            "?--checked",
            "?--lpm",
            "?--values-only",
        ],
        false,
    ),
    ("inspect", &[], false),
    ("update", &["--control", "--ops", "--set", "--del", "--key-format", "--format", "--deltas"], false),
    ("apply", &["--out"], false),
    ("export", &["--control", "--out"], false),
    ("demo", &["--keys", "--value-bits", "-s", "--dir"], false),
    (
        "bench",
        &[
            "--keys",
            "--value-bits",
            "--threads",
            "--key-type",
            "--fingerprint-bits",
            "?--json",
            "?--core",
            "--only",
            "?--plot-only",
            "--report",
        ],
        false,
    ),
    ("structures", &[], false),
    (
        "ctl",
        &[
            "?create",
            "?write",
            "?read",
            "?describe",
            "?list",
            "?drop",
            "?link",
            "--structure",
            "--value-bits",
            "-i",
            "--key",
            "?--delete",
            "--key-format",
        ],
        false,
    ),
    ("serve", &["--store", "--metrics", "--log-retain", "--log-bytes", "--tls-cert", "--tls-key"], true),
    ("follow", &["--controller", "--table", "--view", "--out", "--metrics", "--until-sequence"], true),
    ("lb", &["--port", "--config", "--mode", "--io", "--metrics"], true),
    (
        "switch",
        &[
            "--port",
            "--fib",
            "--mode",
            "--next-hops",
            "--address",
            "--io",
            "--deltas",
            "--unknown",
            "--workers",
            "--age-secs",
            "?--no-learn",
            "--metrics",
        ],
        true,
    ),
    ("frobnicate", &["--x"], false),
];

/// Values: counts (small or absurd: a sweep must not build big tables),
/// numbers, garbage, paths.
const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "3",
    "-1",
    "2Ki",
    "1T",
    "1e308",
    "1.5",
    "NaN",
    "inf",
    "99999999999999999999",
    "340282366920938463463374607431768211456",
    "0x",
    "0xffffffffffffffff",
    "x",
    "--",
    "-",
    "=",
    "a=b",
    "fingerprint_bits=99",
    "filtered=8",
    "check_bits=40",
    "10.0.0.1=5",
    "10.0.0.0/8",
    "::",
    "othello",
    "fpt",
    "cuckoo-partial",
    "lb",
    "ipv4",
    "name",
    "fivetuple",
    "hex",
    "u64",
    "ws",
    "tsv",
    "small",
    "tiny",
    "fib.kpl",
    "fib.kpc",
    "routes.tsv",
    "junk",
    "empty",
    "missing",
    "sub/../fib.kpl",
    ".",
    "/nonexistent/x",
    "http://127.0.0.1:1",
    "127.0.0.1:0",
    "\u{feff}",
    "ü",
];

fn arg() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(VALUES).prop_map(str::to_string),
        1 => any::<u128>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => "\\PC{0,12}",
    ]
}

/// An argument vector: a subcommand, then flag / value pairs (flags mostly
/// its own, sometimes another's), sometimes a positional value.
fn argv() -> impl Strategy<Value = (usize, Vec<String>)> {
    let sub = prop_oneof![4 => 0..10usize, 1 => 10..SUBS.len()];
    sub.prop_flat_map(|i| {
        let own = SUBS[i].1;
        let flag = prop_oneof![
            5 => if own.is_empty() { Just("--help".to_string()).boxed() } else { proptest::sample::select(own).prop_map(str::to_string).boxed() },
            1 => proptest::sample::select(SUBS[0].1).prop_map(str::to_string),
            1 => arg(),
        ];
        (Just(i), proptest::option::weighted(0.2, arg()), proptest::collection::vec((flag, arg()), 0..5))
    })
    .prop_flat_map(|(i, pos, pairs)| (Just(i), Just(pos), Just(pairs), any::<bool>()))
    .prop_map(|(i, pos, pairs, based)| {
        let mut v = vec![SUBS[i].0.to_string()];
        // Half the vectors start from the required arguments of a working
        // command, so that the flags after them reach past the parser.
        if based {
            let base: &[&str] = match SUBS[i].0 {
                "build" => &["-i", "routes.tsv", "--out", "out.kpl"],
                "query" => &["fib.kpl", "--keys", "routes.tsv"],
                "inspect" => &["fib.kpl"],
                "update" => &["--control", "fib.kpc", "--deltas", "d.kpd"],
                "apply" => &["fib.kpl", "d.kpd"],
                "export" => &["--control", "fib.kpc", "--out", "e.kpl"],
                "bench" => &["othello", "--keys", "200", "?--core"],
                "switch" => &["--port", "kpsweep0", "--fib", "fib.kpl"],
                "lb" => &["--port", "kpsweep0", "--config", "lb.toml"],
                "follow" => &["--controller", "http://127.0.0.1:1", "--table", "t", "--out", "f.kpl"],
                _ => &[],
            };
            v.extend(base.iter().map(|s| s.to_string()));
        }
        match SUBS[i].0 {
            // Never reach a real service: a closed port.
            "ctl" => v.extend(["--server".into(), "http://127.0.0.1:1".into()]),
            "serve" => v.extend(["--listen".into(), "127.0.0.1:0".into()]),
            // Keep sizes small: a demo without --keys builds 1M keys.
            "demo" => v.extend(["--keys".into(), "300".into()]),
            _ => {}
        }
        v.extend(pos);
        for (f, val) in pairs {
            match f.strip_prefix('?') {
                Some(flag) => v.push(flag.to_string()),
                None => v.extend([f, val]),
            }
        }
        (i, v)
    })
}

/// Runs one vector in `d`; returns (exit code or None when still running at the deadline, stderr).
fn run_bounded(d: &Path, args: &[String], deadline: Duration) -> (Option<i32>, String) {
    let errf = d.join(".stderr");
    let mut c = Command::new(bin())
        .current_dir(d)
        .args(args)
        .env("KEYPLANE_PROGRESS_EVERY", "3600")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errf).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = c.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = String::from_utf8_lossy(&std::fs::read(&errf).unwrap_or_default()).into_owned();
    match status {
        Some(s) => (Some(s.code().unwrap_or(-1)), err),
        None => (None, err),
    }
}

#[test]
fn argument_vectors_never_panic_and_exit_with_documented_codes() {
    let d = dir("sweep");
    std::fs::write(d.join("routes.tsv"), "10.0.0.1\t5\n10.0.0.2\t7\n").unwrap();
    code(
        &run_in(
            &d,
            &[
                "build",
                "-i",
                "routes.tsv",
                "--key-format",
                "ipv4",
                "-O",
                "filtered=8",
                "--out",
                "fib.kpl",
                "--control",
                "fib.kpc",
            ],
        ),
        0,
    );
    code(
        &run_in(
            &d,
            &["update", "--control", "fib.kpc", "--set", "10.0.0.3=1", "--key-format", "ipv4", "--deltas", "d.kpd"],
        ),
        0,
    );
    let pristine: Vec<(&str, Vec<u8>)> =
        ["fib.kpl", "fib.kpc", "d.kpd"].into_iter().map(|f| (f, std::fs::read(d.join(f)).unwrap())).collect();
    std::fs::write(d.join("lb.toml"), "[[vip]]\naddress = \"198.18.0.1\"\nport = 80\n").unwrap();
    std::fs::write(d.join("junk"), b"KPCS\x01\x00garbage").unwrap();
    std::fs::write(d.join("empty"), b"").unwrap();
    std::fs::create_dir_all(d.join("sub")).unwrap();
    let cases = std::env::var("KEYPLANE_SWEEP_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    let mut runner =
        TestRunner::new(Config { cases, failure_persistence: None, max_shrink_iters: 300, ..Config::default() });
    let stats = std::cell::RefCell::new([0usize; 10]);
    runner
        .run(&argv(), |(i, args)| {
            // A full benchmark report runs for minutes: only --plot-only redraws are swept.
            prop_assume!(!args.iter().any(|a| a == "--report") || args.iter().any(|a| a == "--plot-only"));
            // Every case starts from the same files (an earlier case may have rewritten them).
            for (f, b) in &pristine {
                std::fs::write(d.join(f), b).unwrap();
            }
            let serves = SUBS[i].2;
            let deadline = Duration::from_secs(if serves { 2 } else { 120 });
            let (c, err) = run_bounded(&d, &args, deadline);
            prop_assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{args:?}: {err}");
            match c {
                Some(c) => {
                    prop_assert!((0..=8).contains(&c), "{args:?}: exit {c}\n{err}");
                    stats.borrow_mut()[c as usize] += 1;
                }
                None => {
                    prop_assert!(serves, "{args:?} still running after {deadline:?}\n{err}");
                    stats.borrow_mut()[9] += 1;
                }
            }
            Ok(())
        })
        .unwrap();
    let s = stats.into_inner();
    eprintln!("exit codes 0..=8: {:?}; servers still running when stopped: {}", &s[..9], s[9]);
    // The sweep reaches past the parser: usage errors and errors of later stages both occur.
    assert!(s[2] > 0 && s[0] + s[3] + s[4] + s[6] + s[7] > 0, "{s:?}");
}
