//! `keyplane-bench NAME [FLAGS]` and `keyplane-bench report DIR ...`: the
//! `keyplane-perf` suite without the rest of the `keyplane` command (the
//! same benchmarks as `keyplane bench NAME`, the same report as
//! `keyplane bench --report DIR`).
//!
//! Every run measures the structure and same-run baselines on the same keys
//! and prints a table (and one JSON object per measurement with `--json`).

use clap::Parser;
use keyplane_perf::{Bench, emit, report, run};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "keyplane-bench", about = "keyplane benchmarks with same-run baselines")]
enum Cmd {
    #[command(flatten)]
    Bench(Bench),
    /// The papers' figures, reproduced: SVG + PNG per figure, results.json, index.md.
    Report {
        /// Output directory.
        dir: String,
        /// tiny, small, medium or paper.
        #[arg(long, default_value = "small")]
        scale: String,
        /// Figure ids or prefixes (comma-separated).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Redraw from DIR/results.json.
        #[arg(long)]
        plot_only: bool,
    },
}

fn main() -> ExitCode {
    let cmd = match Cmd::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let res = match cmd {
        Cmd::Bench(b) => run(&b).map(|recs| emit(&recs, b.common().json)).map_err(|e| e.to_string()),
        Cmd::Report { dir, plot_only: true, .. } => report::replot(&dir).map(|_| ()),
        Cmd::Report { dir, scale, only, .. } => {
            report::run(&report::Options { dir, scale, only, quiet: true, progress: true }).map(|_| ())
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keyplane-bench: {e}");
            ExitCode::from(2)
        }
    }
}
