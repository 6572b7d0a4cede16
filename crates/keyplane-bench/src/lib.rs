//! keyplane benchmark harness: one module per structure, shared machinery in
//! [`common`]. The `keyplane-bench` binary dispatches to them.

pub mod cfw;
pub mod cli;
pub mod common;
pub mod cuckoo;
pub mod dir24;
pub mod hashes;
pub mod lb;
pub mod ludo;
pub mod names;
pub mod othello;
pub mod report;
pub mod setsep;

use common::{Args, Record};

/// Usage line.
pub const USAGE: &str = "usage: keyplane-bench <othello|ludo|cuckoo|cuckoo-partial (alias pkcuckoo)|cfw|bfw|setsep|fht|fpt|lb|hash> \
[--keys N] [--value-bits L] [--key-type u64|mac|ipv4|ipv6|fivetuple|name] [--threads T] [--updates N] \
[--dist uniform|zipf] [--zipf-s S] [--core] [--json]\n\
  --core: the common measurements at --keys only (no paper tables or sweeps at other sizes; lb: one round)";

/// Runs one benchmark by name.
pub fn run(cmd: &str, args: &Args) -> Result<Vec<Record>, String> {
    match cmd {
        "othello" => othello::run(args),
        "cfw" => cfw::run(args),
        "bfw" => cfw::run_bfw(args),
        "cuckoo" => cuckoo::run(args),
        "pkcuckoo" | "cuckoo-partial" => cuckoo::run_partial(args),
        "ludo" => ludo::run(args),
        "setsep" => setsep::run(args),
        "hash" => hashes::run(args),
        "lb" => lb::run(args),
        "fht" => names::run_fht(args),
        "fpt" => names::run_fpt(args),
        other => Err(format!("unknown benchmark {other}")),
    }
}
