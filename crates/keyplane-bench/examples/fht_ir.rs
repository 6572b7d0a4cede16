//! Instructions per lookup (run twice under `valgrind --tool=callgrind`
//! with different lookup counts and divide the difference): FHT reader
//! `get` vs the hashbrown baseline, at a cache-resident size.
use keyplane::{ControlTable, LookupTable, ReadHandle, fht, name};
use keyplane_perf::common::KeySet;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let reps: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let n = 100_000u64;
    let mut keys = KeySet::default();
    for i in 0..n {
        keys.push(&name::generate(i, (i % 3) as usize, 1));
    }
    let mut acc = 0u64;
    if which == "fht" {
        let ctl = fht::Control::from_items_with(keys.iter().map(|k| (k, 1)), 8, fht::Options::default()).unwrap();
        let t = ctl.export();
        let rd = t.reader();
        for r in 0..reps {
            for k in keys.iter() {
                acc = acc.wrapping_add(rd.get(k).unwrap_or(r as u64));
            }
        }
    } else if which == "xxh3" {
        // The hash alone (what every FHT lookup starts with).
        for r in 0..reps {
            for k in keys.iter() {
                acc = acc.wrapping_add(keyplane::hash::hash64(k, r as u64));
            }
        }
    } else if which == "foldhash" {
        use std::hash::BuildHasher;
        let b = foldhash::fast::FixedState::with_seed(7);
        for r in 0..reps {
            for k in keys.iter() {
                acc = acc.wrapping_add(b.hash_one(k) ^ r as u64);
            }
        }
    } else {
        let mut m: hashbrown::HashMap<Box<[u8]>, u64> = hashbrown::HashMap::with_capacity(n as usize);
        for k in keys.iter() {
            m.insert(k.into(), 1);
        }
        for r in 0..reps {
            for k in keys.iter() {
                acc = acc.wrapping_add(m.get(k).copied().unwrap_or(r as u64));
            }
        }
    }
    println!("{acc}");
}
