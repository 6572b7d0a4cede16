//! keyplane's benchmark suite as a library: one runner per structure, each
//! measuring the structure and same-run baselines (hashbrown, xorf, PtrHash,
//! dashmap, Maglev, SilkRoad, DIR-24-8, ...) on the same keys, and the
//! papers' figures reproduced ([`report`]).
//!
//! The `keyplane bench` command and the `keyplane-bench` binary are thin
//! front ends over this crate. Its stable API:
//!
//! * [`Bench`]: every benchmark with its typed flags (clap derive; embed it
//!   as a subcommand, or parse a command line with [`Cli`]);
//! * [`run`]: runs one benchmark, returning its [`Record`]s;
//! * [`emit`]: prints records as a table (and JSON lines);
//! * [`report::run`] / [`report::replot`]: the reproduced-papers report.
//!
//! The per-structure modules and [`common`] are the runners' building
//! blocks, public for keyplane's profiling examples; they may change.
//!
//! ```
//! use clap::Parser;
//! let cli = keyplane_perf::Cli::try_parse_from(["keyplane-bench", "hash", "--keys", "1K"]).unwrap();
//! let records = keyplane_perf::run(&cli.bench).unwrap();
//! assert!(records.iter().any(|r| r.0["structure"] == "hash_xxh3_64" && r.num("hash_ns").is_some()));
//! // Bad flags are clap's usage errors, before anything runs.
//! let e = keyplane_perf::Cli::try_parse_from(["keyplane-bench", "othello", "--value-bits", "99"]).unwrap_err();
//! assert_eq!(e.exit_code(), 2);
//! ```

pub mod args;
pub mod cfw;
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

pub use args::Bench;
pub use common::{Record, emit};

/// What went wrong in a benchmark run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The benchmark could not run with these flags (e.g. a value width the
    /// structure does not support), or a measurement failed.
    #[error("{bench} benchmark: {msg}")]
    Failed {
        /// Canonical benchmark name.
        bench: &'static str,
        /// What failed.
        msg: String,
    },
}

/// The standalone command line: `keyplane-bench NAME [FLAGS]`.
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "keyplane-bench", about = "keyplane benchmarks with same-run baselines")]
pub struct Cli {
    /// The benchmark and its flags.
    #[command(subcommand)]
    pub bench: Bench,
}

/// Runs one benchmark.
pub fn run(b: &Bench) -> Result<Vec<Record>, Error> {
    let res = match b {
        Bench::Othello(a) => othello::run(a),
        Bench::Ludo(a) => ludo::run(a),
        Bench::Setsep(a) => setsep::run(a),
        Bench::Cuckoo(a) => cuckoo::run(a),
        Bench::CuckooPartial(a) => cuckoo::run_partial(a),
        Bench::Cfw(a) => cfw::run(a),
        Bench::Bfw(a) => cfw::run_bfw(a),
        Bench::Fht(a) => names::run_fht(a),
        Bench::Fpt(a) => names::run_fpt(a),
        Bench::Lb(a) => lb::run(a),
        Bench::Hash(a) => hashes::run(a),
    };
    res.map_err(|msg| Error::Failed { bench: b.name(), msg })
}

/// Parses `name` and its flags (`["--keys", "1M", "--core"]`) with clap and
/// runs the benchmark: the report's jobs are such command lines.
pub fn run_words(name: &str, flags: &[String]) -> Result<Vec<Record>, String> {
    use clap::Parser;
    let argv = ["keyplane-bench", name].into_iter().map(str::to_string).chain(flags.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    run(&cli.bench).map_err(|e| e.to_string())
}
