//! The `keyplane` command: build, query, inspect, update, apply and
//! benchmark keyplane tables. Run `keyplane --help` for the commands and
//! `keyplane structures` for the structures and their options.
//!
//! Exit codes (also in `keyplane --help`):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | `query --checked`: at least one key was absent |
//! | 2 | usage error: unknown command, flag, structure or option |
//! | 3 | bad input file: a key, value or operation line that does not parse (the message names file and line or byte offset) |
//! | 4 | bad blob, delta or control-state file: not keyplane, corrupted, wrong kind, unsupported |
//! | 5 | a delta does not fit the table (out of order, other table) |
//! | 6 | I/O error (file missing, unreadable, unwritable) |
//! | 7 | the table refused an operation (value too wide, construction failed, capacity) |
//! | 8 | `demo` verification or `bench` failed |

#![deny(missing_docs)]

mod cmd;
mod control;
mod input;
mod report;
mod state;

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  query --checked: at least one key was absent
  2  usage error (unknown command, flag, structure or option)
  3  bad input file (names the file and the line or byte offset)
  4  bad blob, delta or control-state file (not keyplane, corrupted, wrong kind, unsupported)
  5  a delta does not fit the table (out of order or from another table)
  6  I/O error
  7  the table refused an operation (value too wide, construction failed, capacity)
  8  demo verification or benchmark failed";

/// The keyplane command-line tool.
#[derive(Parser, Debug)]
#[command(name = "keyplane", version, about = "Compact, fast, dynamic key→value lookup tables for network data planes", after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    cmd: cmd::Command,
}

/// An error with its exit code; printed as one line `keyplane: <msg>`.
#[derive(Debug)]
pub struct CliError {
    /// Exit code (see the table in the crate docs).
    pub code: u8,
    /// One-line message.
    pub msg: String,
}

impl CliError {
    /// Usage error (exit 2).
    pub fn usage(m: &str) -> Self {
        Self { code: 2, msg: m.to_string() }
    }
    /// Bad line in a text input file (exit 3).
    pub fn input(path: &str, line: usize, m: &str) -> Self {
        Self { code: 3, msg: format!("{}:{line}: {m}", shown(path)) }
    }
    /// Bad record in a binary input file (exit 3).
    pub fn input_at(path: &str, offset: u64, m: &str) -> Self {
        Self { code: 3, msg: format!("{}: byte offset {offset}: {m}", shown(path)) }
    }
    /// Bad blob, delta or state file (exit 4).
    pub fn blob(path: &str, m: &str) -> Self {
        Self { code: 4, msg: format!("{}: {m}", shown(path)) }
    }
    /// I/O error (exit 6).
    pub fn io(path: &str, e: std::io::Error) -> Self {
        Self { code: 6, msg: format!("{}: {e}", shown(path)) }
    }
    /// Failure reported by the library, classified by kind.
    pub fn lib(path: &str, e: keyplane::Error) -> Self {
        use keyplane::Error as E;
        let code = match &e {
            E::InvalidParameter(_) | E::InvalidValueBits { .. } => 2,
            E::Truncated { .. }
            | E::BadMagic
            | E::UnsupportedVersion { .. }
            | E::KindMismatch { .. }
            | E::ChecksumMismatch { .. }
            | E::Corrupt(_) => 4,
            E::DeltaMismatch(_) => 5,
            _ => 7,
        };
        let msg = if path.is_empty() { e.to_string() } else { format!("{}: {e}", shown(path)) };
        Self { code, msg }
    }
    /// Verification failure (exit 8).
    pub fn failed(m: &str) -> Self {
        Self { code: 8, msg: m.to_string() }
    }
}

fn shown(path: &str) -> &str {
    if path == "-" { "<stdin>" } else { path }
}

/// A progress bar that stays hidden for the first second, and entirely when
/// stderr is not a terminal, so quick commands and scripts print nothing.
pub struct Progress {
    pb: ProgressBar,
    start: Instant,
    shown: std::cell::Cell<bool>,
}

impl Progress {
    fn new(what: &str, len: Option<u64>, template: &str) -> Self {
        let pb = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden());
        let style = if len.is_some() {
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
        } else {
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
        };
        pb.set_style(style.progress_chars("=> "));
        pb.set_message(what.to_string());
        Self { pb, start: Instant::now(), shown: std::cell::Cell::new(false) }
    }
    /// A bar over bytes of a file.
    pub fn bytes(what: &str, len: Option<u64>) -> Self {
        Self::new(what, len, "{msg} [{bar:40}] {bytes}/{total_bytes} {eta}")
    }
    /// A bar over items.
    pub fn items(what: &str, len: Option<u64>) -> Self {
        Self::new(what, len, "{msg} [{bar:40}] {pos}/{len} {eta}")
    }
    /// A spinner for a step of unknown length (ticks in the background).
    pub fn spinner(what: &str) -> Self {
        let p = Self::new(what, None, "");
        p.pb.enable_steady_tick(Duration::from_millis(200));
        let pb = p.pb.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            if !pb.is_finished() {
                pb.set_draw_target(ProgressDrawTarget::stderr());
            }
        });
        p
    }
    fn reveal(&self) {
        if !self.shown.get() && self.start.elapsed() > Duration::from_secs(1) {
            self.shown.set(true);
            self.pb.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
    /// Advances by `n`.
    pub fn inc(&self, n: u64) {
        self.pb.inc(n);
        if !self.shown.get() {
            self.reveal();
        }
    }
    /// Sets the message.
    pub fn message(&self, m: String) {
        self.reveal();
        self.pb.set_message(m);
    }
    /// Removes the bar.
    pub fn finish(&self) {
        self.pb.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.pb.finish_and_clear();
    }
}

fn main() -> ExitCode {
    // One-line messages for panics too (a benchmark's bad argument, or a bug).
    std::panic::set_hook(Box::new(|info| {
        let p = info.payload();
        let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
        eprintln!("keyplane: {}", msg.unwrap_or_else(|| "internal error".into()));
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cmd::run(cli.cmd) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("keyplane: {}", e.msg);
            ExitCode::from(e.code)
        }
    }
}
