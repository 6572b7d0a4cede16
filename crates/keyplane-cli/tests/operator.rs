//! Operator-facing behaviour of the `keyplane` command (issue 19): recovery
//! from a lost delta, numbered delta files, refused in-place outputs, exit
//! codes, warnings, progress and the bench front end.

mod common;

use common::{bin, code, dir, run_in, run_stdin_in as run_stdin, stderr as err, stdout as out};
use std::path::Path;
use std::process::Command;

fn routes(d: &Path) {
    std::fs::write(d.join("routes.tsv"), "10.0.0.1\t5\n10.0.0.2\t7\n10.0.0.4\t1\n").unwrap();
    code(
        &run_in(
            d,
            &[
                "build",
                "-i",
                "routes.tsv",
                "--key-format",
                "ipv4",
                "-l",
                "8",
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
}

fn q(d: &Path, blob: &str, key: &str) -> String {
    let o = run_stdin(d, &["query", blob, "--key-format", "ipv4", "--values-only"], key.as_bytes());
    code(&o, 0);
    out(&o).trim().to_string()
}

#[test]
fn lost_delta_is_recovered_with_one_export() {
    let d = dir("lost");
    routes(&d);
    std::fs::copy(d.join("fib.kpl"), d.join("replica.kpl")).unwrap();
    code(
        &run_in(
            &d,
            &["update", "--control", "fib.kpc", "--set", "10.0.0.3=9", "--key-format", "ipv4", "--deltas", "d1.kpd"],
        ),
        0,
    );
    code(
        &run_in(
            &d,
            &["update", "--control", "fib.kpc", "--set", "10.0.0.5=11", "--key-format", "ipv4", "--deltas", "d2.kpd"],
        ),
        0,
    );
    // d1 is lost: applying d2 alone is refused (exit 5) and leaves the replica as it was.
    std::fs::remove_file(d.join("d1.kpd")).unwrap();
    code(&run_in(&d, &["apply", "replica.kpl", "d2.kpd"]), 5);
    assert_eq!(q(&d, "replica.kpl", "10.0.0.5"), "-");
    // Recovery: one command.
    let o = run_in(&d, &["export", "--control", "fib.kpc", "--out", "replica.kpl"]);
    code(&o, 0);
    assert!(err(&o).contains("2 updates since the build"), "{}", err(&o));
    for (k, v) in [("10.0.0.1", "5"), ("10.0.0.2", "7"), ("10.0.0.3", "9"), ("10.0.0.4", "1"), ("10.0.0.5", "11")] {
        assert_eq!(q(&d, "replica.kpl", k), v, "{k}");
    }
    // Later deltas apply to the recovered blob.
    code(
        &run_in(
            &d,
            &["update", "--control", "fib.kpc", "--set", "10.0.0.6=12", "--key-format", "ipv4", "--deltas", "d3.kpd"],
        ),
        0,
    );
    code(&run_in(&d, &["apply", "replica.kpl", "d3.kpd"]), 0);
    assert_eq!(q(&d, "replica.kpl", "10.0.0.6"), "12");
}

#[test]
fn update_never_overwrites_unapplied_deltas() {
    let d = dir("numbered");
    routes(&d);
    for (i, kv) in ["10.0.0.3=9", "10.0.0.5=11", "10.0.0.6=12"].iter().enumerate() {
        let o =
            run_in(&d, &["update", "--control", "fib.kpc", "--set", kv, "--key-format", "ipv4", "--deltas", "d.kpd"]);
        code(&o, 0);
        if i > 0 {
            let name = format!("d.{}.kpd", i + 1);
            assert!(err(&o).contains(&format!("the new deltas went to {name}")), "{}", err(&o));
        }
    }
    assert!(d.join("d.2.kpd").exists() && d.join("d.3.kpd").exists());
    // With --strict the redirect is an error: nothing is written, the state is unchanged.
    let o = run_in(
        &d,
        &[
            "update",
            "--strict",
            "--control",
            "fib.kpc",
            "--set",
            "10.0.0.7=1",
            "--key-format",
            "ipv4",
            "--deltas",
            "d.kpd",
        ],
    );
    code(&o, 3);
    assert!(!d.join("d.4.kpd").exists());
    code(&run_in(&d, &["apply", "fib.kpl", "d.kpd", "d.2.kpd", "d.3.kpd"]), 0);
    for (k, v) in [("10.0.0.3", "9"), ("10.0.0.5", "11"), ("10.0.0.6", "12")] {
        assert_eq!(q(&d, "fib.kpl", k), v, "{k}");
    }
}

#[test]
fn outputs_equal_to_inputs_are_refused() {
    let d = dir("same");
    routes(&d);
    std::fs::create_dir_all(d.join("sub")).unwrap();
    let before = std::fs::read(d.join("fib.kpc")).unwrap();
    let cases: &[&[&str]] = &[
        &["build", "-i", "routes.tsv", "--key-format", "ipv4", "--out", "./sub/../routes.tsv"],
        &["build", "-i", "routes.tsv", "--key-format", "ipv4", "--out", "x.kpl", "--control", "x.kpl"],
        &["build", "--generate", "10", "--dump-keys", "k.tsv", "--out", "sub/../k.tsv"],
        &["update", "--control", "fib.kpc", "--set", "10.0.0.9=1", "--key-format", "ipv4", "--deltas", "fib.kpc"],
        &[
            "update",
            "--control",
            "fib.kpc",
            "--set",
            "10.0.0.9=1",
            "--key-format",
            "ipv4",
            "--deltas",
            "sub/../fib.kpc",
        ],
        &["export", "--control", "fib.kpc", "--out", "./fib.kpc"],
        &["apply", "fib.kpl", "fib.kpl"],
        &["apply", "fib.kpl", "d.kpd", "--out", "d.kpd"],
    ];
    std::fs::write(d.join("d.kpd"), b"").unwrap();
    for args in cases {
        let o = run_in(&d, args);
        code(&o, 2);
        assert!(err(&o).contains("same file"), "{args:?}: {}", err(&o));
    }
    assert_eq!(std::fs::read(d.join("fib.kpc")).unwrap(), before, "the control state was not touched");
    assert_eq!(std::fs::read_to_string(d.join("routes.tsv")).unwrap().lines().count(), 3);
}

/// One test per documented exit code (0..=8), each through the situation
/// the table names.
#[test]
fn every_documented_exit_code() {
    let d = dir("codes");
    routes(&d);
    // 0: success.
    code(&run_in(&d, &["inspect", "fib.kpl"]), 0);
    // 1: query --checked with an absent key.
    code(&run_stdin(&d, &["query", "fib.kpl", "--key-format", "ipv4", "--checked"], b"10.9.9.9\n"), 1);
    // 2: usage errors, including counts that do not fit and --generate garbage.
    for args in [
        &["frobnicate"][..],
        &["build", "--generate", "99999999999999999999", "--out", "x.kpl"],
        &["build", "--generate", "-5", "--out", "x.kpl"],
        &["build", "-s", "nope", "--generate", "10", "--out", "x.kpl"],
        &["build", "-l", "99", "--generate", "10", "--out", "x.kpl"],
        &["update", "--control", "fib.kpc", "--set", "novalue", "--deltas", "z.kpd"],
        &["bench", "othello", "--bogus"],
        &["bench", "othello", "--value-bits", "99"],
        &["bench", "othello", "--keys", "0"],
        &["demo", "--keys", "0"],
    ] {
        code(&run_in(&d, args), 2);
    }
    // 3: a line that does not parse, and an over-long cuckoo key with its line number.
    std::fs::write(d.join("bad.tsv"), "10.0.0.1\t5\nnot-an-ip\t1\n").unwrap();
    let o = run_in(&d, &["build", "-i", "bad.tsv", "--key-format", "ipv4", "--out", "x.kpl"]);
    code(&o, 3);
    assert!(err(&o).contains("bad.tsv:2:"), "{}", err(&o));
    let long = format!("a\t1\nb\t2\n{}\t3\n", "k".repeat(70_000));
    std::fs::write(d.join("long.tsv"), long).unwrap();
    let o = run_in(&d, &["build", "-s", "cuckoo", "-i", "long.tsv", "--out", "x.kpl"]);
    code(&o, 3);
    assert!(err(&o).contains("long.tsv:3: key too long"), "{}", err(&o));
    assert!(err(&o).len() < 300, "the key is not echoed: {}", err(&o));
    // 4: not a blob.
    std::fs::write(d.join("junk.kpl"), b"hello").unwrap();
    code(&run_in(&d, &["inspect", "junk.kpl"]), 4);
    // 5: a delta out of order.
    code(
        &run_in(
            &d,
            &["update", "--control", "fib.kpc", "--set", "10.0.0.3=9", "--key-format", "ipv4", "--deltas", "a.kpd"],
        ),
        0,
    );
    code(
        &run_in(
            &d,
            &["update", "--control", "fib.kpc", "--set", "10.0.0.8=9", "--key-format", "ipv4", "--deltas", "b.kpd"],
        ),
        0,
    );
    code(&run_in(&d, &["apply", "fib.kpl", "b.kpd"]), 5);
    // 6: I/O.
    code(&run_in(&d, &["query", "missing.kpl"]), 6);
    code(&run_in(&d, &["build", "--generate", "10", "--out", "no/such/dir/x.kpl"]), 6);
    // 7: value too wide (file, --set, binary record) and a build larger than memory.
    std::fs::write(d.join("wide.tsv"), "a\t1\nb\t256\n").unwrap();
    let o = run_in(&d, &["build", "-i", "wide.tsv", "-l", "8", "--out", "x.kpl"]);
    code(&o, 7);
    assert!(err(&o).contains("wide.tsv:2: value 256 does not fit in 8 value bits"), "{}", err(&o));
    code(
        &run_in(
            &d,
            &["update", "--control", "fib.kpc", "--set", "10.0.0.9=300", "--key-format", "ipv4", "--deltas", "w.kpd"],
        ),
        7,
    );
    std::fs::write(d.join("rec.bin"), [1u8, 2, 0xff, 0xff]).unwrap();
    code(
        &run_in(&d, &["build", "-i", "rec.bin", "--key-width", "2", "--value-bytes", "2", "-l", "8", "--out", "x.kpl"]),
        7,
    );
    let o = run_in(&d, &["build", "--generate", "1T", "--out", "x.kpl"]);
    code(&o, 7);
    assert!(err(&o).contains("of memory, but only"), "{}", err(&o));
    // 8: a benchmark that cannot run (a run error, not a usage error).
    let o = run_in(&d, &["bench", "cfw", "--value-bits", "64", "--keys", "100", "--core"]);
    code(&o, 8);
    assert!(err(&o).contains("cfw needs --value-bits"), "{}", err(&o));
}

#[test]
fn warnings_are_counted_and_fatal_only_with_strict() {
    let d = dir("warn");
    routes(&d);
    // Duplicate keys: count and line numbers; last value wins.
    std::fs::write(d.join("dup.tsv"), "a\t1\nb\t2\na\t3\nb\t4\nc\t5\n").unwrap();
    let o = run_in(&d, &["build", "-i", "dup.tsv", "-O", "filtered=8", "--out", "dup.kpl"]);
    code(&o, 0);
    assert!(
        err(&o).contains("2 duplicate key(s), the last value of each wins (line 3 repeats 1, line 4 repeats 2)"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("keyplane: 1 warning(s)"), "{}", err(&o));
    let o = run_stdin(&d, &["query", "dup.kpl", "--values-only"], b"a\nb\n");
    assert_eq!(out(&o), "3\n4\n");
    code(&run_in(&d, &["build", "--strict", "-i", "dup.tsv", "--out", "dup2.kpl"]), 3);
    assert!(!d.join("dup2.kpl").exists());
    // Empty input.
    std::fs::write(d.join("empty.tsv"), "# nothing\n").unwrap();
    let o = run_in(&d, &["build", "-i", "empty.tsv", "--out", "e.kpl"]);
    code(&o, 0);
    assert!(err(&o).contains("empty.tsv: no keys"), "{}", err(&o));
    code(&run_in(&d, &["build", "-i", "empty.tsv", "--out", "e.kpl", "--strict"]), 3);
    // A BOM is stripped: the first key is "a", not "\u{feff}a".
    std::fs::write(d.join("bom.tsv"), "\u{feff}a\t7\nb\t8\n").unwrap();
    let o = run_in(&d, &["build", "-i", "bom.tsv", "-s", "cuckoo", "--out", "bom.kpl"]);
    code(&o, 0);
    assert!(err(&o).contains("byte-order mark"), "{}", err(&o));
    assert_eq!(out(&run_stdin(&d, &["query", "bom.kpl", "--values-only"], b"a\n")), "7\n");
    // Deleting an absent key: warned, not recorded in the journal.
    let o = run_in(
        &d,
        &["update", "--control", "fib.kpc", "--del", "10.0.0.77", "--key-format", "ipv4", "--deltas", "x.kpd"],
    );
    code(&o, 0);
    assert!(err(&o).contains("the key is not in the table; nothing deleted"), "{}", err(&o));
    let ins = out(&run_in(&d, &["inspect", "fib.kpc"]));
    assert!(ins.contains("updates:          0"), "{ins}");
    // Query continues past bad lines, reports them at the end (exit 3); --strict stops at the first.
    let o = run_stdin(
        &d,
        &["query", "fib.kpl", "--key-format", "ipv4", "--values-only"],
        b"10.0.0.1\nbad\n10.0.0.2\nworse\n",
    );
    code(&o, 3);
    assert_eq!(out(&o), "5\n7\n");
    assert!(err(&o).contains("<stdin>:2:") && err(&o).contains("<stdin>:4:"), "{}", err(&o));
    assert!(err(&o).contains("2 line(s) with a key that does not parse were skipped"), "{}", err(&o));
    let o = run_stdin(
        &d,
        &["query", "--strict", "fib.kpl", "--key-format", "ipv4", "--values-only"],
        b"10.0.0.1\nbad\n10.0.0.2\n",
    );
    code(&o, 3);
    assert_eq!(out(&o), "5\n");
    // A 100 KB key is quoted with at most 80 bytes.
    let big = format!("{}\n", "9".repeat(100_000));
    let o = run_stdin(&d, &["query", "fib.kpl", "--key-format", "ipv4"], big.as_bytes());
    code(&o, 3);
    assert!(err(&o).len() < 600, "{} bytes of stderr", err(&o).len());
    assert!(err(&o).contains(&format!("\"{}…\" (100000 bytes)", "9".repeat(80))), "{}", err(&o));
}

#[test]
fn bench_flags_are_parsed_like_the_cli() {
    let d = dir("bench");
    let o = run_in(&d, &["bench", "othello", "--help"]);
    code(&o, 0);
    assert!(out(&o).contains("--keys") && out(&o).contains("--fingerprint-bits"), "{}", out(&o));
    assert!(!err(&o).contains("generated"), "help ran nothing: {}", err(&o));
    let o = run_in(&d, &["bench", "othello", "--bogus"]);
    code(&o, 2);
    assert!(err(&o).contains("--bogus"), "{}", err(&o));
    let o = run_in(&d, &["bench", "othello", "--value-bits", "99"]);
    code(&o, 2);
    assert!(err(&o).contains("1..=64"), "{}", err(&o));
    let o = run_in(&d, &["bench", "othello", "--keys", "0"]);
    code(&o, 2);
    assert!(err(&o).contains("at least 1"), "{}", err(&o));
    code(&run_in(&d, &["bench", "nosuch"]), 2);
    // More keys than memory allows: refused before any allocation.
    let o = run_in(&d, &["bench", "othello", "--keys", "10G"]);
    code(&o, 2);
    assert!(err(&o).contains("available (MemAvailable)"), "{}", err(&o));
    // The alias and the documented name run the same benchmark.
    let o = run_in(&d, &["bench", "pkcuckoo", "--help"]);
    code(&o, 0);
    assert!(out(&o).contains("partial-key cuckoo"), "{}", out(&o));
    // Lists of counts are checked element by element; a single-width flag refuses a list.
    let o = run_in(&d, &["bench", "cuckoo-partial", "--fingerprint-bits", "8,40"]);
    code(&o, 2);
    assert!(err(&o).contains("1..=32"), "{}", err(&o));
    code(&run_in(&d, &["bench", "othello", "--fingerprint-bits", "8,10"]), 2);
    // No benchmark and no --report: a usage error naming both.
    let o = run_in(&d, &["bench"]);
    code(&o, 2);
    assert!(err(&o).contains("benchmark name or --report"), "{}", err(&o));
}

#[test]
fn structure_alias_builds_the_canonical_structure() {
    let d = dir("alias");
    code(&run_in(&d, &["build", "-s", "pkcuckoo", "--generate", "300", "--out", "pk.kpl"]), 0);
    let o = run_in(&d, &["inspect", "pk.kpl"]);
    code(&o, 0);
    assert!(out(&o).contains("cuckoo-partial") && !out(&o).contains("pkcuckoo"), "{}", out(&o));
    let list = out(&run_in(&d, &["structures"]));
    assert!(list.lines().any(|l| l.starts_with("cuckoo-partial") && l.contains("(alias: pkcuckoo)")), "{list}");
}

#[test]
fn progress_lines_when_stderr_is_not_a_terminal() {
    let d = dir("progress");
    // 1M keys with a 1 ms period: even a fast machine spends many
    // periods reading and building them.
    let keys: String = (0..1_000_000u64).map(|i| format!("{i}\t{}\n", i % 2)).collect();
    std::fs::write(d.join("k.tsv"), keys).unwrap();
    let o = Command::new(bin())
        .current_dir(&d)
        .env("KEYPLANE_PROGRESS_EVERY", "0.001")
        .args(["build", "-i", "k.tsv", "--key-format", "u64", "-l", "1", "--out", "k.kpl"])
        .output()
        .unwrap();
    code(&o, 0);
    let e = err(&o);
    let lines: Vec<&str> = e
        .lines()
        .filter(|l| l.starts_with("keyplane: reading keys: ") || l.starts_with("keyplane: building "))
        .collect();
    assert!(!lines.is_empty(), "no progress lines: {e}");
    for l in e.lines().filter(|l| l.starts_with("keyplane: reading keys: ")) {
        assert!(l.contains("% (") && l.contains(" elapsed"), "{l}");
    }
    // Quick work prints none at the default period.
    let o = run_in(&d, &["build", "--generate", "100", "--out", "s.kpl"]);
    code(&o, 0);
    assert!(!err(&o).contains("elapsed"), "{}", err(&o));
}

#[test]
fn counts_take_decimal_and_binary_suffixes() {
    let d = dir("counts");
    let o = run_in(&d, &["build", "--generate", "2K", "--out", "a.kpl"]);
    code(&o, 0);
    assert!(err(&o).contains("over 2000 keys"), "{}", err(&o));
    let o = run_in(&d, &["build", "--generate", "2Ki", "--out", "b.kpl"]);
    code(&o, 0);
    assert!(err(&o).contains("over 2048 keys"), "{}", err(&o));
}

#[test]
fn demo_runs_for_every_structure() {
    let d = dir("demo");
    let list = out(&run_in(&d, &["structures"]));
    let names: Vec<&str> =
        list.lines().filter(|l| !l.starts_with(' ')).filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"lb") && names.contains(&"cuckoo-partial"), "{list}");
    // Aligned: every summary starts in the same column.
    let cols: std::collections::BTreeSet<usize> = list
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| {
            l.find(|c: char| c.is_whitespace()).unwrap() + l[l.find(' ').unwrap()..].len()
                - l[l.find(' ').unwrap()..].trim_start().len()
        })
        .collect();
    assert_eq!(cols.len(), 1, "{list}");
    for s in names.iter().filter(|s| **s != "lb") {
        let o = run_in(&d, &["demo", "-s", s, "--keys", "4K"]);
        code(&o, 0);
        assert!(out(&o).contains("demo OK"), "{s}: {}", out(&o));
        if matches!(*s, "bfw" | "cuckoo-partial") {
            assert!(
                out(&o).contains("approximately by design") && out(&o).contains("expected rate"),
                "{s}: {}",
                out(&o)
            );
        }
    }
    code(&run_in(&d, &["demo", "-s", "nope", "--keys", "10"]), 2);
}

#[test]
fn query_lpm_on_name_tables() {
    let d = dir("lpm");
    std::fs::write(d.join("names.tsv"), "/com\t1\n/com/example/www\t3\n/org/x\t4\n").unwrap();
    code(&run_in(&d, &["build", "-s", "fht", "-i", "names.tsv", "--key-format", "name", "--out", "n.kpl"]), 0);
    let q = b"/com/example/www/x\n/com/example/mail\n/net/y\nwww.example.com\n";
    let o = run_stdin(&d, &["query", "n.kpl", "--key-format", "name", "--lpm"], q);
    code(&o, 0);
    assert_eq!(out(&o), "/com/example/www/x\t3\n/com/example/mail\t1\n/net/y\t-\nwww.example.com\t3\n");
    // Without --lpm the match is exact.
    let o = run_stdin(&d, &["query", "n.kpl", "--key-format", "name", "--values-only"], b"/com/example/www/x\n");
    assert_eq!(out(&o), "-\n");
    // FPT with check bits answers the same (stored prefixes are exact; an absent name is `-`
    // except for a 2^-c false positive per probed prefix).
    code(
        &run_in(
            &d,
            &[
                "build",
                "-s",
                "fpt",
                "-O",
                "check_bits=20",
                "--seed",
                "5",
                "-i",
                "names.tsv",
                "--key-format",
                "name",
                "--out",
                "pc.kpl",
            ],
        ),
        0,
    );
    let o = run_stdin(&d, &["query", "pc.kpl", "--key-format", "name", "--lpm"], q);
    code(&o, 0);
    assert_eq!(out(&o), "/com/example/www/x\t3\n/com/example/mail\t1\n/net/y\t-\nwww.example.com\t3\n");
    // The plain speculative trie (no check bits) answers every name: refused with a hint.
    code(&run_in(&d, &["build", "-s", "fpt", "-i", "names.tsv", "--key-format", "name", "--out", "p.kpl"]), 0);
    let o = run_stdin(&d, &["query", "p.kpl", "--key-format", "name", "--lpm"], q);
    code(&o, 2);
    assert!(err(&o).contains("speculative") && err(&o).contains("check_bits"), "{}", err(&o));
    code(&run_in(&d, &["build", "--generate", "10", "--out", "o.kpl"]), 0);
    code(&run_stdin(&d, &["query", "o.kpl", "--lpm"], b"x\n"), 2);
}

/// Keys with spaces when a line has no tab: `KEY VALUE` input splits at the
/// last run of whitespace, a query line is one whole key; both warn (once
/// per file) under the detected separator, neither with an explicit one.
#[test]
fn keys_with_spaces_without_tabs() {
    let d = dir("spaces");
    // Build from stdin: "my key" and "other key" are keys, the last field the value.
    let o =
        run_stdin(&d, &["build", "-i", "-", "-s", "cuckoo", "--out", "t.kpl"], b"my key 5\nother key  7\nplain 3\n");
    code(&o, 0);
    assert!(
        err(&o).contains("<stdin>: 2 key(s) contain spaces (first at line 1: \"my key\"): each line was split at its last run of whitespace"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("keyplane: 1 warning(s)"), "{}", err(&o));
    // Query: a line without tabs is one key.
    let o = run_stdin(&d, &["query", "t.kpl"], b"my key\nplain\nother key\nnot there\n");
    code(&o, 0);
    assert_eq!(out(&o), "my key\t5\nplain\t3\nother key\t7\nnot there\t-\n");
    assert!(err(&o).contains("3 key(s) contain spaces") && err(&o).contains("looked up whole"), "{}", err(&o));
    // Explicit separators say what is meant: no warning.
    let o = run_stdin(&d, &["query", "t.kpl", "--format", "tsv"], b"my key\n");
    assert_eq!((out(&o).as_str(), err(&o).as_str()), ("my key\t5\n", ""));
    let o = run_stdin(&d, &["query", "t.kpl", "--format", "ws", "--values-only"], b"my key 5\nplain 3\n");
    assert_eq!((out(&o).as_str(), err(&o).as_str()), ("5\n3\n", ""));
    // --strict: the first such key is an error naming its line.
    let o = run_stdin(&d, &["query", "--strict", "t.kpl"], b"plain\nmy key\n");
    code(&o, 3);
    assert!(err(&o).contains("<stdin>:2: key \"my key\" contains spaces"), "{}", err(&o));
    // Operations: `set KEY VALUE` (key between the op and the last field), `del KEY` (the rest).
    code(&run_stdin(&d, &["build", "-i", "-", "-s", "cuckoo", "--out", "u.kpl", "--control", "u.kpc"], b"a b 1\n"), 0);
    std::fs::write(d.join("ops"), "set x  y 9\ndel a b\n").unwrap();
    let o = run_in(&d, &["update", "--control", "u.kpc", "--ops", "ops", "--deltas", "e.kpd"]);
    code(&o, 0);
    assert!(err(&o).contains("ops: 2 key(s) contain spaces"), "{}", err(&o));
    code(&run_in(&d, &["apply", "u.kpl", "e.kpd"]), 0);
    let o = run_stdin(&d, &["query", "u.kpl", "--format", "tsv"], b"x  y\na b\n");
    assert_eq!(out(&o), "x  y\t9\na b\t-\n");
    // Key formats without spaces keep whitespace as a field separator.
    let o = run_stdin(&d, &["build", "-i", "-", "--key-format", "ipv4", "--out", "v.kpl"], b"10.0.0.1 5 6\n");
    code(&o, 3);
    assert!(err(&o).contains("<stdin>:1: expected KEY<sep>VALUE, found 3 field(s)"), "{}", err(&o));
    code(&run_stdin(&d, &["build", "-i", "-", "--key-format", "ipv4", "--out", "v.kpl"], b"10.0.0.1 5\n"), 0);
    let o = run_stdin(&d, &["query", "v.kpl", "--values-only"], b"10.0.0.1 5\n");
    assert_eq!((out(&o).as_str(), err(&o).as_str()), ("5\n", ""));
    // 5-tuple keys contain commas: a comma never separates fields there.
    let o = run_stdin(
        &d,
        &["build", "-i", "-", "--key-format", "fivetuple", "-s", "cuckoo", "--out", "f.kpl"],
        b"6,10.0.0.1,1000,10.0.0.2,80 4\n",
    );
    code(&o, 0);
    let o = run_stdin(&d, &["query", "f.kpl", "--values-only"], b"6,10.0.0.1,1000,10.0.0.2,80\n");
    assert_eq!(out(&o), "4\n");
}
