//! Operator-facing behaviour of the `keyplane` command (issue 19): recovery
//! from a lost delta, numbered delta files, refused in-place outputs, exit
//! codes, warnings, progress and the bench front end.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_keyplane")
}

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("op-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run_in(d: &Path, args: &[&str]) -> Output {
    Command::new(bin()).current_dir(d).args(args).stdin(Stdio::null()).output().expect("run keyplane")
}

fn run_stdin(d: &Path, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut c = Command::new(bin())
        .current_dir(d)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input).unwrap();
    c.wait_with_output().unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[track_caller]
fn code(o: &Output, want: i32) {
    assert_eq!(o.status.code(), Some(want), "stdout: {}\nstderr: {}", out(o), err(o));
}

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
    assert!(err(&o).contains("2 updates replayed"), "{}", err(&o));
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
