//! keyplane benchmark harness: one module per structure, shared machinery in
//! [`common`]. The `keyplane-bench` binary dispatches to them.

pub mod common;
pub mod hashes;
pub mod names;
pub mod othello;

use common::{Args, Record};

/// Usage line.
pub const USAGE: &str = "usage: keyplane-bench <othello|hash|fht|fpt> [--keys N] [--value-bits L] \
[--key-type u64|mac|ipv4|ipv6|fivetuple|name] [--threads T] [--updates N] [--json]";

/// Runs one benchmark by name.
pub fn run(cmd: &str, args: &Args) -> Result<Vec<Record>, String> {
    match cmd {
        "othello" => othello::run(args),
        "hash" => hashes::run(args),
        "fht" => names::run_fht(args),
        "fpt" => names::run_fpt(args),
        other => Err(format!("unknown benchmark {other}")),
    }
}
