//! Helpers shared by several test files (each says `mod support;`).

// Each test file compiles its own copy and uses only some of the helpers.
#![allow(dead_code)]

use keyplane::LookupTable;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// The two legal values of key `k` at `vbits` bits (always different): a
/// writer flips a key between them, so a reader's answer outside the pair
/// is a torn read.
pub fn pair(k: u64, vbits: u32) -> [u64; 2] {
    let m = keyplane::mask(vbits);
    let a = keyplane::hash::mix64(k) & m;
    let d = (keyplane::hash::mix64(!k) & m).max(1);
    [a, a ^ d]
}

/// Reader threads that look keys up in a shared lookup form while the test
/// applies deltas to it, asserting that every answer for key `k` is one of
/// its two legal values `legal(k)` (a torn read shows as a value the key
/// never held). Reader `r` starts at key `r * stride` and takes the keys in
/// order; lookup number `i` goes through `read(table, its reader handle, k,
/// i)`, so the test chooses the path (`&self`, handle, typed or byte key)
/// by `i`. The handle is made when the thread starts, before the writer's
/// first delta, and kept across every whole-table replacement.
pub struct Readers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl Readers {
    /// Starts `n` readers over `keys`.
    pub fn spawn<L, F, R>(n: usize, stride: usize, table: &Arc<L>, keys: &Arc<Vec<u64>>, legal: F, read: R) -> Self
    where
        L: LookupTable + 'static,
        F: Fn(u64) -> [u64; 2] + Send + Copy + 'static,
        R: Fn(&L, &L::Reader<'_>, u64, usize) -> Option<u64> + Send + Copy + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|r| {
                let (table, keys, stop) = (table.clone(), keys.clone(), stop.clone());
                std::thread::spawn(move || {
                    let rd = table.reader();
                    let (mut checked, mut i) = (0u64, r * stride);
                    while !stop.load(Ordering::Relaxed) || checked < 1_000 {
                        let k = keys[i % keys.len()];
                        let got = read(&table, &rd, k, i);
                        let ok = legal(k);
                        assert!(got == Some(ok[0]) || got == Some(ok[1]), "key {k:#x}: {got:?} is neither of {ok:x?}");
                        checked += 1;
                        i += 1;
                    }
                    checked
                })
            })
            .collect();
        Readers { stop, threads }
    }

    /// Stops the readers (each finishes its first 1,000 lookups at least)
    /// and returns the number of lookups they checked; a reader's failed
    /// assertion fails the test here.
    pub fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.into_iter().map(|h| h.join().unwrap()).sum()
    }
}
