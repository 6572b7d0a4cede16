//! End-to-end tests of the `keyplane` command: build → query → update →
//! apply → query, binary key files, bad input files with their exact error
//! messages and exit codes, corrupted blobs and deltas, the demo and the
//! benchmark report.

mod common;

use common::*;

#[test]
fn build_query_update_apply_query() {
    let d = dir("e2e");
    let keys = p(&d, "keys.tsv");
    let mut s = String::from("# routes\n\n");
    for i in 0..2000 {
        s.push_str(&format!("10.0.{}.{}\t{}\n", i / 256, i % 256, i % 200));
    }
    std::fs::write(&keys, &s).unwrap();
    let blob = p(&d, "t.kpl");
    let state = p(&d, "t.kpc");
    ok(&run(&[
        "build",
        "-i",
        &keys,
        "-l",
        "8",
        "--key-format",
        "ipv4",
        "-O",
        "filtered=8",
        "--out",
        &blob,
        "--control",
        &state,
    ]));
    // Query the build file itself: every line answers its own value.
    let out = ok(&run(&["query", &blob, "--keys", &keys, "--key-format", "ipv4", "--checked"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2000);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(*l, format!("10.0.{}.{}\t{}", i / 256, i % 256, i % 200));
    }
    // Update: change one value, add one key, remove one key.
    let ops = p(&d, "ops.txt");
    std::fs::write(&ops, "set 10.0.0.1 77\nset 192.168.1.1 5\ndel 10.0.0.2\ndel 1.2.3.4\n").unwrap();
    let deltas = p(&d, "d.kpd");
    ok(&run(&[
        "update",
        "--control",
        &state,
        "--ops",
        &ops,
        "--set",
        "10.0.0.3=9",
        "--key-format",
        "ipv4",
        "--deltas",
        &deltas,
    ]));
    // Old blob does not know the changes yet.
    let q = "10.0.0.1\n192.168.1.1\n10.0.0.3\n10.0.0.4\n";
    let before = ok(&run_stdin(&["query", &blob, "--key-format", "ipv4", "--values-only"], q));
    assert_eq!(before.lines().next(), Some("1"));
    ok(&run(&["apply", &blob, &deltas]));
    let after = ok(&run_stdin(&["query", &blob, "--key-format", "ipv4"], q));
    assert_eq!(after, "10.0.0.1\t77\n192.168.1.1\t5\n10.0.0.3\t9\n10.0.0.4\t4\n");
    // A second update continues the sequence; applying the old stream again is refused.
    let deltas2 = p(&d, "d2.kpd");
    ok(&run(&["update", "--control", &state, "--set", "10.0.0.4=100", "--key-format", "ipv4", "--deltas", &deltas2]));
    let o = run(&["apply", &blob, &deltas]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(&format!("keyplane: {deltas}: frame 1 at byte offset 0: delta does not fit this table")),
        "{}",
        stderr(&o)
    );
    ok(&run(&["apply", &blob, &deltas2, "--out", &p(&d, "t2.kpl")]));
    let v = ok(&run_stdin(&["query", &p(&d, "t2.kpl"), "--key-format", "ipv4", "--values-only"], "10.0.0.4\n"));
    assert_eq!(v, "100\n");
    // --checked: an absent key gives exit code 1 and a `-`.
    let o = run_stdin(&["query", &p(&d, "t2.kpl"), "--key-format", "ipv4", "--checked"], "10.0.0.4\n8.8.8.8\n");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "10.0.0.4\t100\n8.8.8.8\t-\n");
    // inspect: blob, delta stream and control state.
    let i = ok(&run(&["inspect", &blob, &deltas, &state]));
    assert!(i.contains("othello lookup"), "{i}");
    assert!(i.contains("fingerprint_bits: 8"), "{i}");
    assert!(i.contains("checksum:         OK"), "{i}");
    assert!(i.contains("delta stream of 4 frame(s)"), "{i}");
    // `del 1.2.3.4` removed nothing, so it was not recorded.
    assert!(i.contains("updates:          5"), "{i}");
}

#[test]
fn binary_key_files() {
    let d = dir("bin");
    let f = p(&d, "keys.bin");
    let mut b = Vec::new();
    for i in 0u64..1000 {
        b.extend_from_slice(&(i * 7919).to_be_bytes()[2..]); // 6-byte keys
        b.extend_from_slice(&[(i % 16) as u8, 0]); // 2-byte values
    }
    std::fs::write(&f, &b).unwrap();
    let blob = p(&d, "t.kpl");
    ok(&run(&["build", "-i", &f, "--key-width", "6", "--value-bytes", "2", "-l", "4", "--out", &blob]));
    let out = ok(&run(&["query", &blob, "--keys", &f, "--key-width", "6", "--value-bytes", "2", "--values-only"]));
    let want: String = (0..1000).map(|i| format!("{}\n", i % 16)).collect();
    assert_eq!(out, want);
    let hexq = ok(&run(&["query", &blob, "--keys", &f, "--key-width", "6", "--value-bytes", "2"]));
    assert_eq!(hexq.lines().nth(1), Some("000000001eef\t1"));
    // Truncated record: names the byte offset.
    std::fs::write(&f, &b[..b.len() - 3]).unwrap();
    fails(
        &run(&["build", "-i", &f, "--key-width", "6", "--value-bytes", "2", "-l", "4", "--out", &blob]),
        3,
        &format!("{f}: byte offset 7992: truncated record: 5 of 8 bytes (records are 6 key + 2 value bytes)"),
    );
    // A value too wide for the table, at its record.
    let mut w = b.clone();
    w[8 * 3 + 6] = 200;
    std::fs::write(&f, &w).unwrap();
    fails(
        &run(&["build", "-i", &f, "--key-width", "6", "--value-bytes", "2", "-l", "4", "--out", &blob]),
        7,
        &format!("{f}: byte offset 24: value 200 does not fit in 4 value bits (widen -l or mask the value)"),
    );
}

#[test]
fn bad_text_inputs_name_file_and_line() {
    let d = dir("badtext");
    let f = p(&d, "k.csv");
    let blob = p(&d, "t.kpl");
    let cases: &[(&str, &[&str], &str)] = &[
        ("a,1\nb,x\n", &[], "2: value \"x\" is not an unsigned integer"),
        ("# c\na,1\n\nb,2,3\n", &[], "4: expected KEY<sep>VALUE, found 3 field(s)"),
        ("0a,1\nzz,2\n", &["--key-format", "hex"], "2: bad hex key \"zz\""),
        ("10.0.0.1,1\n10.0.0,2\n", &["--key-format", "ipv4"], "2: bad IPv4 address \"10.0.0\""),
        ("key,value\na,1\nb,-1\n", &["--header"], "3: value \"-1\" is not an unsigned integer"),
    ];
    for (content, extra, msg) in cases {
        std::fs::write(&f, content).unwrap();
        let mut args = vec!["build", "-i", f.as_str(), "--out", blob.as_str()];
        args.extend_from_slice(extra);
        fails(&run(&args), 3, &format!("{f}:{msg}"));
    }
    std::fs::write(&f, [b'a', b',', 0xff, b'\n']).unwrap();
    fails(
        &run(&["build", "-i", &f, "--out", &blob]),
        3,
        &format!("{f}:1: not valid UTF-8 (use --key-width for binary key files)"),
    );
    let missing = p(&d, "missing.tsv");
    fails(
        &run(&["build", "-i", &missing, "--out", &blob]),
        6,
        &format!("{missing}: No such file or directory (os error 2)"),
    );
    // Ops files.
    std::fs::write(&f, "a,1\n").unwrap();
    let st = p(&d, "s.kpc");
    ok(&run(&["build", "-i", &f, "--out", &blob, "--control", &st]));
    let ops = p(&d, "ops");
    std::fs::write(&ops, "set a 2\nput b 3\n").unwrap();
    fails(
        &run(&["update", "--control", &st, "--ops", &ops, "--deltas", &p(&d, "d")]),
        3,
        &format!("{ops}:2: expected `set KEY VALUE` or `del KEY`"),
    );
    std::fs::write(&ops, "set a 999\n").unwrap();
    fails(
        &run(&["update", "--control", &st, "--ops", &ops, "--deltas", &p(&d, "d")]),
        7,
        &format!("{ops}:1: value 999 does not fit in 8 value bits (widen -l or mask the value)"),
    );
    // The table records its key format: a conflicting --key-format is refused.
    fails(
        &run_stdin(&["query", &blob, "--key-format", "u64"], "12\n"),
        2,
        "--key-format u64 conflicts with the table's key format text (recorded when it was built); \
         drop --key-format or pass --key-format text",
    );
    // Query keys from stdin with a bad key (the recorded format is used).
    std::fs::write(&f, "12,1\n").unwrap();
    ok(&run(&["build", "-i", &f, "--key-format", "u64", "--out", &blob]));
    // (query answers every other key and reports the bad lines at the end)
    fails(
        &run_stdin(&["query", &blob], "12\nabc\n"),
        3,
        "<stdin>:2: bad u64 key \"abc\"\nkeyplane: 1 line(s) with a key that does not parse were skipped (every other key was answered; --strict stops at the first)",
    );
}

#[test]
fn bad_blobs_deltas_and_usage() {
    let d = dir("badblob");
    let blob = p(&d, "t.kpl");
    let st = p(&d, "t.kpc");
    ok(&run(&["build", "--generate", "1000", "--out", &blob, "--control", &st]));
    let good = std::fs::read(&blob).unwrap();
    let bad = p(&d, "bad.kpl");
    let mut c = good.clone();
    let mid = c.len() / 2;
    c[mid] ^= 1;
    std::fs::write(&bad, &c).unwrap();
    let o = run(&["query", &bad]);
    assert_eq!(o.status.code(), Some(4));
    assert!(stderr(&o).starts_with(&format!("keyplane: {bad}: checksum mismatch (stored ")), "{}", stderr(&o));
    assert!(stderr(&o).trim_end().ends_with("): the input is corrupted"));
    std::fs::write(&bad, b"hello").unwrap();
    fails(&run(&["inspect", &bad]), 4, &format!("{bad}: not a keyplane blob or delta (bad magic bytes)"));
    std::fs::write(&bad, &good[..40]).unwrap();
    fails(
        &run(&["query", &bad]),
        4,
        &format!("{bad}: truncated input: needed {} more bytes at offset 16, only 24 left", good.len() - 16),
    );
    // A delta is not a blob, a blob is not a delta.
    let dl = p(&d, "d.kpd");
    ok(&run(&["update", "--control", &st, "--set", "78=1", "--deltas", &dl]));
    fails(
        &run(&["query", &dl]),
        4,
        &format!("{dl}: wrong kind of object: expected a lookup blob, found othello delta"),
    );
    let blob2 = p(&d, "copy.kpl");
    std::fs::copy(&blob, &blob2).unwrap();
    fails(
        &run(&["apply", &blob, &blob2]),
        4,
        &format!(
            "{blob2}: frame 1 at byte offset 0: wrong kind of object: expected othello delta, found othello lookup"
        ),
    );
    let dd = std::fs::read(&dl).unwrap();
    std::fs::write(&bad, &dd[..dd.len() - 1]).unwrap();
    fails(
        &run(&["apply", &blob, &bad]),
        4,
        &format!(
            "{bad}: corrupt encoding: frame 1 at byte offset 0: truncated input: needed {} more bytes at offset 16, only {} left",
            dd.len() - 16,
            dd.len() - 17
        ),
    );
    // Corrupt control state.
    let mut s = std::fs::read(&st).unwrap();
    s[10] ^= 1;
    std::fs::write(&bad, &s).unwrap();
    fails(
        &run(&["update", "--control", &bad, "--set", "79=1", "--deltas", &dl]),
        4,
        &format!("{bad}: not a valid control state: checksum mismatch: the file is corrupted"),
    );
    // Usage errors.
    fails(
        &run(&["build", "-s", "nosuch", "--generate", "10", "--out", &blob]),
        2,
        &format!(
            "unknown structure \"nosuch\" (known: {})",
            keyplane_any::STRUCTURES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        ),
    );
    fails(
        &run(&["build", "-O", "fingerprint_bitz=3", "--generate", "10", "--out", &blob]),
        2,
        "invalid parameter: othello has no option \"fingerprint_bitz\" (options: sizing, fingerprint_bits, emptiness, filtered, headroom_percent, hash, seed)",
    );
    fails(
        &run(&["build", "-l", "65", "--generate", "10", "--out", &blob]),
        2,
        "--value-bits 65: must be between 1 and 64",
    );
    fails(&run(&["build", "--out", &blob]), 2, "build needs --input FILE or --generate N");
    fails(
        &run(&["query", &blob, "--checked"]),
        2,
        &format!(
            "{blob}: this othello table cannot tell absent keys from present ones, so --checked is not supported; \
             rebuild it with an option that stores fingerprints (e.g. --opt filtered=8)"
        ),
    );
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(run(&["bench", "nosuch"]).status.code(), Some(2));
    fails(
        &run(&["bench", "--report", &p(&d, "r"), "--scale", "huge"]),
        2,
        "--scale huge: expected tiny, small, medium or paper",
    );
    let h = ok(&run(&["--help"]));
    assert!(h.contains("Exit codes:"), "{h}");
    let s = ok(&run(&["structures"]));
    assert!(s.starts_with("othello"), "{s}");
}

#[test]
fn demo_runs_through_the_cli_paths() {
    let d = dir("demo");
    let out = ok(&run(&["demo", "--keys", "5000", "--dir", &d.display().to_string()]));
    assert!(out.contains("demo OK"), "{out}");
    assert!(out.contains(", 0 wrong"), "{out}");
    assert!(d.join("changes.kpd").exists());
}

#[test]
fn bench_report_writes_json_and_plots() {
    let d = dir("report");
    let r = d.display().to_string();
    ok(&run(&["bench", "--report", &r, "--scale", "tiny", "--only", "concise-fig5"]));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["meta"]["figures_requested"], serde_json::json!(["concise-fig5"]));
    let recs = json["records"].as_array().unwrap();
    for name in ["othello_compact", "cuckoo", "hashbrown", "xorf_binary_fuse8"] {
        assert!(recs.iter().any(|x| x["structure"] == name), "{name} missing");
    }
    let svg = std::fs::read_to_string(d.join("concise-fig5.svg")).unwrap();
    let series = keyplane_perf::report::check_svg(&svg).unwrap();
    assert!(
        series.iter().any(|s| s.contains("Othello")) && series.iter().any(|s| s.contains("hashbrown")),
        "{series:?}"
    );
    assert!(d.join("concise-fig5.png").exists());
    let idx = std::fs::read_to_string(d.join("index.md")).unwrap();
    assert!(idx.contains("![Concise Fig. 5](concise-fig5.svg)") && idx.contains("| quantity | paper |"), "{idx}");
    // Unknown figure names are usage errors.
    let o = run(&["bench", "--report", &r, "--only", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--only nosuch: no such figure (known: concise-table2,"), "{}", stderr(&o));
}

/// `keyplane switch` refuses bad flags and files with the documented exit codes and a message
/// naming what is wrong (no namespaces needed: it fails before opening a port).
#[test]
fn switch_usage_errors() {
    let dir = std::env::temp_dir().join(format!("kp-cli-switch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fib = dir.join("fib.kpl");
    let none = dir.join("none.tsv");
    std::fs::write(&none, "").unwrap();
    let o =
        run(&["build", "-i", none.to_str().unwrap(), "--key-format", "mac", "-l", "2", "--out", fib.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = fib.to_str().unwrap();
    for (args, code, what) in [
        (vec!["switch", "--port", "x0", "--fib", f, "--mode", "l4"], 2, "expected l2 or l3"),
        (vec!["switch", "--port", "x0", "--fib", f, "--mode", "l3"], 2, "--next-hops"),
        (vec!["switch", "--port", "x0", "--fib", f, "--unknown", "maybe"], 2, "flood or drop"),
        (vec!["switch", "--port", "x0", "--port", "x0", "--fib", f], 2, "twice"),
        (vec!["switch", "--port", "x0", "--fib", f, "--io", "dpdk"], 2, "--io"),
        (vec!["switch", "--port", "x0", "--fib", f, "--address", "1.2.3"], 2, "not an IP address"),
        (vec!["switch", "--port", "x0", "--fib", "/nonexistent/fib.kpl"], 6, "/nonexistent/fib.kpl"),
        (vec!["switch", "--port", "x0", "--fib", none.to_str().unwrap()], 4, "none.tsv"),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every structure with the options that make it detect absent keys (or
/// none), and the `inspect` line it must print.
const EVERY: &[(&str, &[&str], &str)] = &[
    ("othello", &[], "not detected"),
    ("othello", &["-O", "filtered=8"], "8 fingerprint bits + emptiness bits"),
    ("ludo", &[], "not detected"),
    ("ludo", &["-O", "fingerprint_bits=8"], "8 fingerprint bits"),
    ("setsep", &[], "not detected"),
    ("cuckoo", &[], "exact (full keys stored)"),
    ("cuckoo", &["-O", "values=separate"], "exact (full keys stored)"),
    ("cuckoo-partial", &["-O", "fingerprint_bits=12"], "12 fingerprint bits"),
    ("cfw", &["-O", "fingerprint_bits=12"], "12 fingerprint bits"),
    ("bfw", &["-O", "hashes=5"], "Bloom filters (5 hashes)"),
    ("fht", &["-O", "fingerprint_bits=16"], "16 fingerprint bits"),
    ("fpt", &[], "not detected"),
    ("fpt", &["-O", "check_bits=8"], "8 fingerprint bits"),
];

#[test]
fn checked_inspect_and_options_for_every_structure() {
    let d = dir("every");
    let keys = p(&d, "k.tsv");
    let lines: String = (0..300).map(|i| format!("key-{i}\t{}\n", i % 100)).collect();
    std::fs::write(&keys, &lines).unwrap();
    let present: String = (0..300).map(|i| format!("key-{i}\n")).collect();
    for (i, (name, opts, absent)) in EVERY.iter().enumerate() {
        let blob = p(&d, &format!("t{i}.kpl"));
        let mut args = vec!["build", "-s", name, "-i", &keys, "--out", &blob];
        args.extend_from_slice(opts);
        ok(&run(&args));
        let ins = ok(&run(&["inspect", &blob]));
        assert!(ins.contains(&format!("structure:        {name}")), "{name}: {ins}");
        assert!(ins.contains(&format!("absent keys:      {absent}")), "{name} {opts:?}: {ins}");
        assert!(ins.contains("key format:       text"), "{name}: {ins}");
        assert!(ins.contains("value_bits:       8"), "{name}: {ins}");
        assert!(ins.contains("seq:              0"), "{name}: {ins}");
        if let ["-O", o] = opts {
            let (k, v) = o.split_once('=').unwrap();
            let k = if k == "filtered" { "fingerprint_bits" } else { k };
            assert!(ins.contains(&format!("{k}:")) && ins.contains(v), "{name}: option {o} not shown: {ins}");
        }
        let checked = run_stdin(&["query", &blob, "--checked", "--values-only"], &present);
        if *absent == "not detected" {
            assert_eq!(checked.status.code(), Some(2), "{name} {opts:?}: {}", stderr(&checked));
            assert!(stderr(&checked).contains("cannot tell absent keys"), "{}", stderr(&checked));
        } else {
            // Every stored key present (exit 0), with its value where the
            // structure is exact for stored keys.
            let out = ok(&checked);
            let exact = !["bfw", "cuckoo-partial"].contains(name);
            for (j, v) in out.lines().enumerate() {
                assert_ne!(v, "-", "{name}: stored key-{j} reported absent");
                if exact {
                    assert_eq!(v, (j % 100).to_string(), "{name}: key-{j}");
                }
            }
            // Absent keys: exit 1 when any is reported absent (exact: all are).
            let aliens: String = (0..200).map(|i| format!("alien-{i}\n")).collect();
            let o = run_stdin(&["query", &blob, "--checked", "--values-only"], &aliens);
            assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
            let reported = stdout(&o).lines().filter(|l| *l == "-").count();
            if *absent == "exact (full keys stored)" {
                assert_eq!(reported, 200, "{name}");
            } else {
                assert!(reported > 150, "{name}: only {reported} of 200 absent keys reported absent");
            }
        }
    }
    // An option a structure does not have is refused by the structure.
    fails(
        &run(&["build", "-s", "setsep", "-i", &keys, "-O", "fingerprint_bits=8", "--out", &p(&d, "x.kpl")]),
        2,
        &format!(
            "{keys}: invalid parameter: setsep has no option \"fingerprint_bits\" (options: index_bits, array_bits, \
             threads, balance_runs, group_limit, seed)"
        ),
    );
}

#[test]
fn foreign_deltas_are_refused_with_exit_5_for_every_structure() {
    let d = dir("foreign");
    for name in ["othello", "ludo", "setsep", "cuckoo", "cuckoo-partial", "cfw", "bfw", "fht", "fpt"] {
        // Two tables of the same structure, parameters and keys.
        let (a, b, sa, sb) = (p(&d, "a.kpl"), p(&d, "b.kpl"), p(&d, "a.kpc"), p(&d, "b.kpc"));
        ok(&run(&["build", "-s", name, "--generate", "1000", "--out", &a, "--control", &sa]));
        ok(&run(&["build", "-s", name, "--generate", "1000", "--out", &b, "--control", &sb]));
        let da = p(&d, "a.kpd");
        // `update` never overwrites a delta file (it would write a.2.kpd): start clean.
        let _ = std::fs::remove_file(&da);
        ok(&run(&["update", "--control", &sa, "--set", "0a00000000000002=91", "--deltas", &da]));
        let before = std::fs::read(&b).unwrap();
        let o = run(&["apply", &b, &da]);
        assert_eq!(o.status.code(), Some(5), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("delta does not fit this table: delta belongs to table"), "{}", stderr(&o));
        assert_eq!(std::fs::read(&b).unwrap(), before, "{name}: a refused delta changed the blob");
        // The table it was made for takes it.
        ok(&run(&["apply", &a, &da]));
        let v = ok(&run_stdin(&["query", &a, "--values-only"], "0a00000000000002\n"));
        assert_eq!(v.trim(), "91", "{name}");
    }
    // A reproducible build: the same --seed gives the same blob and lineage.
    let (a, b) = (p(&d, "s1.kpl"), p(&d, "s2.kpl"));
    for out in [&a, &b] {
        ok(&run(&["build", "-s", "ludo", "--generate", "500", "--seed", "0x5eed", "--out", out]));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn key_format_is_recorded_and_used() {
    let d = dir("keyformat");
    let f = p(&d, "k.csv");
    std::fs::write(&f, "10.0.0.1,7\n10.0.0.2,8\n").unwrap();
    let (blob, st, dl) = (p(&d, "t.kpl"), p(&d, "t.kpc"), p(&d, "t.kpd"));
    ok(&run(&["build", "-s", "cuckoo", "-i", &f, "--key-format", "ipv4", "--out", &blob, "--control", &st]));
    assert!(ok(&run(&["inspect", &blob])).contains("key format:       ipv4"));
    // No --key-format: the recorded one.
    assert_eq!(ok(&run_stdin(&["query", &blob, "--values-only"], "10.0.0.2\n")).trim(), "8");
    fails(
        &run_stdin(&["query", &blob, "--key-format", "text"], "10.0.0.2\n"),
        2,
        "--key-format text conflicts with the table's key format ipv4 (recorded when it was built); \
         drop --key-format or pass --key-format ipv4",
    );
    // update inserts the IPv4 key, not the text "10.0.0.3".
    ok(&run(&["update", "--control", &st, "--set", "10.0.0.3=9", "--deltas", &dl]));
    ok(&run(&["apply", &blob, &dl]));
    assert_eq!(ok(&run_stdin(&["query", &blob, "--values-only", "--checked"], "10.0.0.3\n")).trim(), "9");
    fails(
        &run(&["update", "--control", &st, "--set", "10.0.0.4=9", "--key-format", "hex", "--deltas", &dl]),
        2,
        "--key-format hex conflicts with the table's key format ipv4 (recorded when it was built); \
         drop --key-format or pass --key-format ipv4",
    );
}

#[test]
fn concury_blobs_are_inspectable() {
    use keyplane::Wire;
    use keyplane::lb::{Backend, Control, Params, Vip};
    use std::net::Ipv4Addr;
    let d = dir("concury");
    let mut ctl = Control::new(Params { max_vips: 8, ..Params::default() }).unwrap();
    let pool: Vec<(Backend, u32)> = (0..3).map(|i| (Backend::new(Ipv4Addr::new(198, 18, 1, i), 80), 1)).collect();
    ctl.add_vip(Vip::new(Ipv4Addr::new(198, 18, 0, 1), 80, 6), &pool).unwrap();
    let blob = p(&d, "lb.kpl");
    std::fs::write(&blob, ctl.export().to_bytes()).unwrap();
    let ins = ok(&run(&["inspect", &blob]));
    assert!(ins.contains("structure:        concury"), "{ins}");
    assert!(ins.contains("VIPs in use:      1"), "{ins}");
    assert!(ins.contains("3 backend(s)"), "{ins}");
    assert!(ins.contains(&format!("table id:         {}", ctl.table_id())), "{ins}");
}
