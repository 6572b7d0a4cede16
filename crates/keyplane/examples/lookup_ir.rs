//! Instruction-count driver for A/B runs of one lookup path at a time under
//! `valgrind --tool=callgrind` (counts do not depend on the machine's load,
//! unlike timings).
//!
//! `lookup_ir STRUCTURE N PATH [QUERIES]` builds STRUCTURE (ludo, setsep,
//! bfw, cfw, cuckoo-partial, fht, fpt) over `N` keys, generates `N / 10`
//! insert and as many remove deltas, then runs only PATH: `none`, `get`,
//! `reader`, `batch`, `reader_batch`, `get_u64`, `reader_u64` (QUERIES
//! lookups, default `N`) or `apply` (applies the deltas). A path's count
//! minus the count of `none` is what the path executed; divide by QUERIES
//! (or by the number of deltas).

use keyplane::describe::{Configure, Opts};
use keyplane::{LookupTable, ReadHandle};
use std::hint::black_box;

fn key(i: u64, names: bool) -> Vec<u8> {
    if names {
        format!("/com/example/n{}/{}", i % 97, i).into_bytes()
    } else {
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes().to_vec()
    }
}

fn run<C: Configure>(n: u64, names: bool, vbits: u32, path: &str, queries: u64) {
    let vmask = (1u64 << vbits) - 1;
    let keys: Vec<Vec<u8>> = (0..n).map(|i| key(i, names)).collect();
    let items = keys.iter().enumerate().map(|(i, k)| (k.as_slice(), (i as u64 * 7) & vmask));
    let mut ctl = C::build_with(items, vbits, &Opts::parse("seed=7").unwrap()).unwrap();
    let table = ctl.export();
    let u = (n / 10).max(1);
    let mut deltas = Vec::new();
    for i in 0..u {
        deltas.push(ctl.insert(&key(n + i, names), i & vmask).unwrap());
    }
    for i in 0..u {
        deltas.extend(ctl.remove(&key(n + i, names)).unwrap());
    }
    let q: Vec<&[u8]> = (0..queries).map(|i| keys[((i * 0x9e37_79b9) % n) as usize].as_slice()).collect();
    let q64: Vec<u64> = q.iter().filter_map(|k| <[u8; 8]>::try_from(*k).ok()).map(u64::from_le_bytes).collect();
    let r = table.reader();
    let mut out = vec![None; 16];
    let mut s = 0u64;
    match path {
        "none" => {}
        "get" => q.iter().for_each(|k| s = s.wrapping_add(table.get(k).unwrap_or(1))),
        "reader" => q.iter().for_each(|k| s = s.wrapping_add(r.get(k).unwrap_or(1))),
        "batch" => q.chunks(16).for_each(|ks| {
            table.get_batch(ks, &mut out[..ks.len()]);
            s = s.wrapping_add(out[0].unwrap_or(1));
        }),
        "reader_batch" => q.chunks(16).for_each(|ks| {
            r.get_batch(ks, &mut out[..ks.len()]);
            s = s.wrapping_add(out[0].unwrap_or(1));
        }),
        "get_u64" => q64.iter().for_each(|&k| s = s.wrapping_add(table.get_u64(k).unwrap_or(1))),
        "reader_u64" => q64.iter().for_each(|&k| s = s.wrapping_add(r.get_u64(k).unwrap_or(1))),
        "apply" => deltas.iter().for_each(|d| table.apply(d).unwrap()),
        other => {
            eprintln!("lookup_ir: unknown path {other:?}");
            std::process::exit(2);
        }
    }
    black_box(s);
    println!("{} {path} {} deltas", C::NAME, deltas.len());
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 3 {
        eprintln!("usage: lookup_ir STRUCTURE N PATH [QUERIES]");
        std::process::exit(2);
    }
    let Ok(n) = a[1].parse::<u64>() else {
        eprintln!("lookup_ir: N must be a number, not {:?}", a[1]);
        std::process::exit(2)
    };
    let n = n.max(1);
    let queries = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(n);
    let path = a[2].as_str();
    match a[0].as_str() {
        "bfw" => run::<keyplane::bfw::Control>(n, false, 4, path, queries),
        "cfw" => run::<keyplane::cfw::Control>(n, false, 8, path, queries),
        "cuckoo-partial" => run::<keyplane::cuckoo::partial::Control>(n, false, 8, path, queries),
        "fht" => run::<keyplane::fht::Control>(n, true, 8, path, queries),
        "fpt" => run::<keyplane::fpt::Control>(n, true, 8, path, queries),
        "ludo" => run::<keyplane::ludo::Control>(n, false, 8, path, queries),
        "setsep" => run::<keyplane::setsep::Control>(n, false, 8, path, queries),
        other => {
            eprintln!("lookup_ir: unknown structure {other:?}");
            std::process::exit(2);
        }
    }
}
