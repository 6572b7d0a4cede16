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
//! | 3 | bad input file: a key, value or operation line that does not parse, a key too long for the structure (the message names file and line or byte offset); a warning under `--strict` |
//! | 4 | bad blob, delta or control-state file: not keyplane, corrupted, wrong kind, unsupported |
//! | 5 | a delta does not fit the table (out of order, other table) |
//! | 6 | I/O error (file missing, unreadable, unwritable) |
//! | 7 | the table refused an operation (value too wide, construction failed, capacity), or a build would need more memory than is available |
//! | 8 | `demo` verification or `bench` failed |

#![deny(missing_docs)]

mod approx;
mod checks;
mod cmd;
mod control;
mod export;
mod input;
mod lb;
mod limits;
mod lpm;
mod name_lpm;
mod paths;
mod progress;
mod report;
mod state;
mod switch;
mod warn;

use clap::Parser;
pub use progress::Progress;
use std::process::ExitCode;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  query --checked: at least one key was absent
  2  usage error (unknown command, flag, structure or option)
  3  bad input file (names the file and the line or byte offset; also a key too long for
     the structure, query lines that did not parse, and any warning under --strict)
  4  bad blob, delta or control-state file (not keyplane, corrupted, wrong kind, unsupported)
  5  a delta does not fit the table (out of order or from another table)
  6  I/O error
  7  the table refused an operation (value too wide, construction failed, capacity), or a
     build would need more memory than is available
  8  demo verification or benchmark failed";

/// The keyplane command-line tool.
#[derive(Parser, Debug)]
#[command(name = "keyplane", version, about = "Compact, fast, dynamic key→value lookup tables for network data planes", after_help = EXIT_CODES)]
struct Cli {
    /// Treat warnings (duplicate keys, empty input, a BOM, deleting absent keys, an existing delta file) as errors (exit 3); query stops at the first bad line.
    #[arg(long, global = true)]
    strict: bool,
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

fn main() -> ExitCode {
    // One-line messages for panics too (a bug).
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
    warn::set_strict(cli.strict);
    let res = cmd::run(cli.cmd);
    if warn::count() > 0 {
        eprintln!("keyplane: {} warning(s) (use --strict to make them errors)", warn::count());
    }
    match res {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("keyplane: {}", warn::clip(&e.msg));
            ExitCode::from(e.code)
        }
    }
}
