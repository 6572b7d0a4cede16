//! keyplane benchmark harness: one module per structure, shared machinery in
//! [`common`]. The `keyplane-bench` binary dispatches to them.

pub mod common;
pub mod hashes;
pub mod othello;
pub mod setsep;

use common::{Args, Record};

/// Usage line.
pub const USAGE: &str = "usage: keyplane-bench <othello|hash> [--keys N] [--value-bits L] \
[--key-type u64|mac|ipv4|ipv6|fivetuple|name] [--threads T] [--updates N] [--json]";

/// Runs one benchmark by name.
pub fn run(cmd: &str, args: &Args) -> Result<Vec<Record>, String> {
    match cmd {
        "othello" => othello::run(args),
        "setsep" => setsep::run(args),
        "hash" => hashes::run(args),
        other => Err(format!("unknown benchmark {other}")),
    }
}
