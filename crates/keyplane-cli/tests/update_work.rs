//! `keyplane update` is O(update): it loads the control snapshot, applies
//! the operations and saves it again, hashing only the updated keys (the
//! core's work counter, reported with `KEYPLANE_REPORT_WORK`), not the
//! million keys of the table; and its deltas still fit the deployed blob.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keyplane"))
        .args(args)
        .env("KEYPLANE_REPORT_WORK", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run keyplane")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "failed ({:?}): {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `work: N keys hashed` figure of an update.
fn hashed(stderr: &str) -> u64 {
    let line = stderr.lines().find(|l| l.starts_with("work: ")).unwrap_or_else(|| panic!("no work line: {stderr}"));
    line["work: ".len()..].split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn update_of_a_million_key_table_hashes_only_the_updated_keys() {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-update-work");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let p = |f: &str| d.join(f).display().to_string();
    let (blob, state) = (p("t.kpl"), p("t.kpc"));
    ok(&run(&["build", "--generate", "1000000", "--out", &blob, "--control", &state]));

    let e = ok(&run(&[
        "update",
        "--control",
        &state,
        "--set",
        "00ff00ff00ff00f1=1",
        "--set",
        "00ff00ff00ff00f2=2",
        "--set",
        "00ff00ff00ff00f3=3",
        "--deltas",
        &p("d1.kpd"),
    ]));
    let n1 = hashed(&e);
    // Three inserts: a handful of hashes, never the table (1,000,000 keys).
    assert!((3..100).contains(&n1), "first update hashed {n1} keys: {e}");
    let e = ok(&run(&[
        "update",
        "--control",
        &state,
        "--set",
        "00ff00ff00ff00f1=7",
        "--del",
        "00ff00ff00ff00f2",
        "--deltas",
        &p("d2.kpd"),
    ]));
    let n2 = hashed(&e);
    assert!((2..100).contains(&n2), "second update hashed {n2} keys: {e}");

    // The deltas of both updates fit the blob built a million keys ago.
    ok(&run(&["apply", &blob, &p("d1.kpd"), &p("d2.kpd"), "--out", &p("t2.kpl")]));
    let mut q = Command::new(env!("CARGO_BIN_EXE_keyplane"))
        .args(["query", &p("t2.kpl"), "--values-only"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut q.stdin.take().unwrap(), b"00ff00ff00ff00f1\n00ff00ff00ff00f3\n").unwrap();
    let out = q.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "7\n3\n", "{}", String::from_utf8_lossy(&out.stderr));
    // And `export` from the state gives the same table as the patched blob.
    ok(&run(&["export", "--control", &state, "--out", &p("t3.kpl")]));
    assert!(
        std::fs::read(p("t3.kpl")).unwrap() == std::fs::read(p("t2.kpl")).unwrap(),
        "export differs from the patched blob"
    );
}
