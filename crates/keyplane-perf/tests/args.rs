//! The benchmarks' clap arguments: every job of every report scale is a
//! command line the parser accepts, values are range-checked while parsing,
//! and the typed flags carry the documented defaults.

use clap::Parser;
use keyplane_perf::args::{Bench, Dist, Setup, Values};
use keyplane_perf::report::{Scale, Work, jobs};
use keyplane_perf::{Cli, run};

fn parse(words: &[&str]) -> Result<Bench, clap::Error> {
    Cli::try_parse_from(std::iter::once("keyplane-bench").chain(words.iter().copied())).map(|c| c.bench)
}

#[test]
fn every_report_job_parses() {
    for scale in ["tiny", "small", "medium", "paper"] {
        let sc = Scale::named(scale).unwrap();
        for j in jobs(&sc) {
            if let Work::Bench(name, flags) = &j.work {
                let words: Vec<&str> = std::iter::once(*name).chain(flags.iter().map(String::as_str)).collect();
                match parse(&words) {
                    Ok(b) => assert_eq!(b.name(), *name, "{}", j.id),
                    // A paper-scale size this machine has no memory for is refused, by design.
                    Err(e) if e.to_string().contains("MemAvailable") => {}
                    Err(e) => panic!("{scale} {}: {e}", j.id),
                }
            }
        }
    }
}

#[test]
fn defaults_and_typed_values() {
    let Bench::Othello(a) = parse(&["othello"]).unwrap() else { panic!() };
    assert_eq!((a.common.keys, a.common.value_bits, a.common.threads, a.fingerprint_bits), (1 << 20, 8, 2, 8));
    assert_eq!((a.common.dist, a.common.core, a.common.json), (Dist::Uniform, false, false));
    let Bench::Cuckoo(a) =
        parse(&["cuckoo", "--keys", "64K", "--batch", "1,16", "--values", "both", "--core"]).unwrap()
    else {
        panic!()
    };
    assert_eq!((a.common.keys, a.batch.clone(), a.values, a.common.core), (64_000, vec![1, 16], Values::Both, true));
    let Bench::Lb(a) = parse(&["lb", "--setup", "dip-v", "--rates", "1Ki,2K"]).unwrap() else { panic!() };
    assert_eq!((a.setup, a.rates.clone(), a.vips), (Setup::DipV, vec![1024, 2000], 128));
    // The alias parses to the canonical benchmark.
    let b = parse(&["pkcuckoo", "--fingerprint-bits", "8,12"]).unwrap();
    assert_eq!(b.name(), "cuckoo-partial");
    let Bench::CuckooPartial(a) = b else { panic!() };
    assert_eq!(a.fingerprint_bits, vec![8, 12]);
}

#[test]
fn bad_values_are_usage_errors_before_anything_runs() {
    for bad in [
        &["othello", "--bogus"][..],
        &["othello", "--value-bits", "99"],
        &["othello", "--value-bits", "0"],
        &["othello", "--keys", "0"],
        &["othello", "--keys", "99999999999999999999"],
        &["othello", "--keys", "16G"],
        &["othello", "--fingerprint-bits", "8,10"],
        &["othello", "--dist", "pareto"],
        &["othello", "--zipf-s", "-1"],
        &["othello", "--json", "extra"],
        &["cfw", "--fingerprint-bits", "33"],
        &["cuckoo", "--batch", "0"],
        &["cuckoo", "--secs", "nan"],
        &["lb", "--setup", "dip-x"],
        &["lb", "--dcode-bits", "2"],
        &["setsep", "--table-bits", "65"],
        &["nosuch"],
    ] {
        let e = parse(bad).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
    }
    // `--help` is not a run.
    assert_eq!(parse(&["othello", "--help"]).unwrap_err().exit_code(), 0);
    assert!(parse(&["fht", "--help"]).unwrap_err().to_string().contains("--share-names"));
}

#[test]
fn a_benchmark_that_cannot_run_is_an_error_not_a_panic() {
    let b = parse(&["cfw", "--value-bits", "64", "--keys", "100", "--core"]).unwrap();
    let e = run(&b).unwrap_err();
    assert!(e.to_string().contains("cfw needs --value-bits"), "{e}");
}
