//! `keyplane bench --report DIR [--scale tiny|small|medium|paper] [--only FIG,...]`:
//! the papers' figures reproduced, one SVG + PNG per figure, `results.json`
//! and `index.md`. The generator lives in `keyplane_perf::report` (also
//! `keyplane-bench report DIR`); this module maps its errors to exit codes.

use crate::CliError;

fn err(dir: &str, e: String) -> CliError {
    // Bad --scale / --only values are usage errors; the rest are I/O.
    if e.starts_with("--") { CliError::usage(&e) } else { CliError::io(dir, std::io::Error::other(e)) }
}

/// Runs the benchmark jobs the figures need and writes the report.
pub fn run(dir: &str, scale: &str, only: Option<&[String]>) -> Result<(), CliError> {
    let opts = keyplane_perf::report::Options {
        dir: dir.to_string(),
        scale: scale.to_string(),
        only: only.map(<[String]>::to_vec).unwrap_or_default(),
        quiet: true,
        progress: true,
    };
    keyplane_perf::report::run(&opts).map(|_| ()).map_err(|e| err(dir, e))
}

/// Redraws the figures and `index.md` from an existing `DIR/results.json`
/// (no benchmark runs).
pub fn replot(dir: &str) -> Result<(), CliError> {
    keyplane_perf::report::replot(dir).map(|_| ()).map_err(|e| err(dir, e))
}
