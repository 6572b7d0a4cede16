//! `keyplane-bench hash`: the key-hash candidates on 6-, 16- and 40-byte keys.

use crate::common::*;
use serde_json::json;
use std::hash::{BuildHasher, Hasher};
use std::hint::black_box;

type HashFn = Box<dyn Fn(&[u8]) -> u64>;

/// Measures XXH3-64 (the library's choice), hardware CRC32c and foldhash.
pub fn run(a: &HashArgs) -> Result<Vec<Record>, String> {
    let n = a.common.keys as usize;
    let mut out = Vec::new();
    for len in [6usize, 16, 40] {
        let mut data = vec![0u8; n * len];
        for (i, b) in data.iter_mut().enumerate() {
            *b = mix(i as u64) as u8;
        }
        let keys: Vec<&[u8]> = data.chunks_exact(len).collect();
        let fold = foldhash::fast::FixedState::with_seed(7);
        let cands: Vec<(&str, HashFn)> = vec![
            ("xxh3_64", Box::new(|k: &[u8]| keyplane::hash::hash64(k, 7))),
            ("crc32c", Box::new(|k: &[u8]| crc32c::crc32c_append(7, k) as u64)),
            (
                "foldhash",
                Box::new(move |k: &[u8]| {
                    let mut h = fold.build_hasher();
                    h.write(k);
                    h.finish()
                }),
            ),
        ];
        for (name, f) in &cands {
            let ns = best_ns(5, keys.len(), || {
                let mut acc = 0u64;
                for k in &keys {
                    acc = acc.wrapping_add(f(k));
                }
                black_box(acc);
            });
            let mut r = Record::default();
            r.set("structure", format!("hash_{name}")).set("key_len", len).set("hash_ns", ns);
            r.set("output_bits", json!(if *name == "crc32c" { 32 } else { 64 }));
            out.push(r);
        }
    }
    Ok(out)
}
