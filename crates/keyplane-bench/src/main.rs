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
    if cmd == "report" {
        std::process::exit(report(&argv[1..]));
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

/// `keyplane-bench report DIR [--scale tiny|small|medium|paper] [--only FIG,...] [--plot-only]`.
fn report(argv: &[String]) -> i32 {
    use clap::{Arg, ArgAction, Command};
    let c = Command::new("report")
        .about("The papers' figures, reproduced: SVG + PNG per figure, results.json, index.md")
        .no_binary_name(true)
        .arg(Arg::new("dir").required(true).help("output directory"))
        .arg(Arg::new("scale").long("scale").default_value("small").help("tiny, small, medium or paper"))
        .arg(Arg::new("only").long("only").num_args(1..).value_delimiter(',').help("figure ids or prefixes"))
        .arg(Arg::new("plot-only").long("plot-only").action(ArgAction::SetTrue).help("redraw from DIR/results.json"));
    let m = match c.try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return if e.exit_code() == 0 { 0 } else { 2 };
        }
    };
    let dir = m.get_one::<String>("dir").cloned().unwrap_or_default();
    let res = if m.get_flag("plot-only") {
        keyplane_bench::report::replot(&dir)
    } else {
        keyplane_bench::report::run(&keyplane_bench::report::Options {
            dir,
            scale: m.get_one::<String>("scale").cloned().unwrap_or_default(),
            only: m.get_many::<String>("only").map(|v| v.cloned().collect()).unwrap_or_default(),
            quiet: true,
            progress: true,
        })
    };
    match res {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}
