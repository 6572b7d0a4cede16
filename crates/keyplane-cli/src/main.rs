//! The `keyplane` command.
//!
//! `keyplane demo [--keys N] [--value-bits L]` builds each table from a
//! generated key set, verifies every key through the lookup form, a blob round
//! trip and a delta-fed replica, and prints memory and speed.

use keyplane::{ControlTable, LookupTable, Wire, othello};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: keyplane demo [--keys N] [--value-bits L]";

fn parse_flag(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => {
            let v = args.get(i + 1).ok_or_else(|| format!("{name} needs a value"))?;
            v.parse().map_err(|_| format!("{name}: not a number: {v}"))
        }
    }
}

fn key(i: u64) -> [u8; 8] {
    keyplane::hash::mix64(i).to_le_bytes()
}

/// Builds, verifies and times one structure.
fn demo_one<C: ControlTable>(name: &str, n: u64, bits: u32) -> Result<(), String> {
    let vm = keyplane::mask(bits);
    let value = |i: u64| keyplane::hash::mix64(i ^ 0x55) & vm;
    let t0 = Instant::now();
    let mut ctl = C::from_items((0..n).map(|i| (key(i), value(i))), bits).map_err(|e| e.to_string())?;
    let build = t0.elapsed().as_secs_f64();
    let table = ctl.export();
    let blob = table.to_bytes();
    let replica = C::Lookup::from_bytes(&blob).map_err(|e| e.to_string())?;
    let t1 = Instant::now();
    let mut wrong = 0u64;
    for i in 0..n {
        if table.get(&key(i)) != Some(value(i)) {
            wrong += 1;
        }
    }
    let lookup_ns = t1.elapsed().as_nanos() as f64 / n as f64;
    // Updates: change 10% of the values and insert 10% new keys, shipping deltas as bytes.
    let upd = (n / 10).max(1);
    let t2 = Instant::now();
    for i in 0..upd {
        let d = ctl.insert(&key(i), (value(i) + 1) & vm).map_err(|e| e.to_string())?;
        replica.apply(&C::Delta::from_bytes(&d.to_bytes()).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        let d = ctl.insert(&key(n + i), value(n + i)).map_err(|e| e.to_string())?;
        replica.apply(&C::Delta::from_bytes(&d.to_bytes()).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    let upd_s = t2.elapsed().as_secs_f64();
    for i in 0..n + upd {
        let want = if i < upd { (value(i) + 1) & vm } else { value(i) };
        if replica.get(&key(i)) != Some(want) {
            wrong += 1;
        }
    }
    let mem = replica.memory_bytes();
    println!(
        "{name:<10} n={n:<9} value_bits={bits:<2} build {:>6.0} ns/key  lookup {lookup_ns:>6.1} ns  \
         updates {:>9.0}/s  lookup form {:>8} bytes = {:>5.2} bits/key  blob {} bytes  wrong {wrong}",
        build * 1e9 / n as f64,
        (2 * upd) as f64 / upd_s,
        mem,
        mem as f64 * 8.0 / (n + upd) as f64,
        blob.len(),
    );
    if wrong > 0 {
        return Err(format!("{name}: {wrong} keys returned a wrong value"));
    }
    Ok(())
}

fn demo(args: &[String]) -> Result<(), String> {
    let n = parse_flag(args, "--keys", 1_000_000)?;
    let bits = parse_flag(args, "--value-bits", 8)? as u32;
    if n == 0 {
        return Err("--keys must be at least 1".into());
    }
    println!("keyplane demo: {n} generated 8-byte keys, {bits}-bit values; every key is verified");
    demo_one::<othello::Control>("othello", n, bits)?;
    println!("all keys verified");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let res = match args.first().map(String::as_str) {
        Some("demo") => demo(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(USAGE.to_string()),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keyplane: {e}");
            ExitCode::from(2)
        }
    }
}
