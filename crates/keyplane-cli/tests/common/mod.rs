//! Helpers shared by the `keyplane` command's integration tests: run the
//! built binary (optionally in a directory, optionally with stdin), read its
//! output, and assert exit codes and messages.

// Each test binary uses a subset of these.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The built `keyplane` binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_keyplane")
}

/// A fresh, empty directory under target/ for one test, named after the
/// test binary and `name` so that test files never share one.
pub fn dir(name: &str) -> PathBuf {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .and_then(|s| s.to_str())
        .and_then(|s| s.split('-').next())
        .unwrap_or("test")
        .to_string();
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{stem}-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `d/f` as a string.
pub fn p(d: &Path, f: &str) -> String {
    d.join(f).display().to_string()
}

/// Runs `keyplane ARGS` in the current directory with no stdin.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).stdin(Stdio::null()).output().expect("run keyplane")
}

/// Runs `keyplane ARGS` in directory `d` with no stdin.
pub fn run_in(d: &Path, args: &[&str]) -> Output {
    Command::new(bin()).current_dir(d).args(args).stdin(Stdio::null()).output().expect("run keyplane")
}

/// Runs `keyplane ARGS` with `input` on stdin.
pub fn run_stdin(args: &[&str], input: impl AsRef<[u8]>) -> Output {
    run_stdin_in(Path::new("."), args, input)
}

/// Runs `keyplane ARGS` in directory `d` with `input` on stdin.
pub fn run_stdin_in(d: &Path, args: &[&str], input: impl AsRef<[u8]>) -> Output {
    let mut c = Command::new(bin())
        .current_dir(d)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run keyplane");
    // A command refused before it reads stdin closes the pipe: ignore EPIPE.
    let _ = c.stdin.take().unwrap().write_all(input.as_ref());
    c.wait_with_output().unwrap()
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns standard output.
#[track_caller]
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "failed ({:?}): {}", o.status.code(), stderr(o));
    stdout(o)
}

/// Asserts the exit code.
#[track_caller]
pub fn code(o: &Output, want: i32) {
    assert_eq!(o.status.code(), Some(want), "stdout: {}\nstderr: {}", stdout(o), stderr(o));
}

/// Asserts the exit code and the exact one-line error message.
#[track_caller]
pub fn fails(o: &Output, code: i32, msg: &str) {
    assert_eq!(o.status.code(), Some(code), "stderr: {}", stderr(o));
    assert_eq!(stderr(o).trim_end(), format!("keyplane: {msg}"));
}

/// Asserts the exit code and that standard error contains `msg`.
#[track_caller]
pub fn fails_with(o: &Output, code: i32, msg: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(msg), "stderr {err:?} lacks {msg:?}");
}
