//! `keyplane-bench <structure> [--keys N] [--value-bits L] [--key-type T] [--threads T] [--json]`
//!
//! Every run measures the structure and same-run baselines on the same keys
//! and prints one JSON object per measurement (`--json`) and a table.

use keyplane_bench::common::emit;
use keyplane_bench::{USAGE, run};

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    if matches!(cmd.as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}");
        return;
    }
    let args = match keyplane_bench::cli::parse(cmd, &argv[1..]) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.exit_code() == 0 { 0 } else { 2 });
        }
    };
    let cmd = keyplane_bench::cli::canonical(cmd);
    match run(cmd, &args) {
        Ok(records) => emit(&records, args.flag("json")),
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            std::process::exit(2);
        }
    }
}
