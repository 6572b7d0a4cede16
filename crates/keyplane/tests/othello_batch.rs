//! Othello's batched lookups (`get_batch`, `get_batch_u64`, on `&self` and
//! on a reader): every batch answers exactly what the single lookups answer
//! for the same keys (present, absent, 8-byte and other lengths, every slot
//! layout, batches of any length); under a writer applying deltas and the
//! whole-table replacements of growth, every batched answer is one of the
//! key's legal values, and a batch of up to 16 keys is read from one state
//! of the table.

use keyplane::key::u64_key;
use keyplane::lineage::DeltaInfo;
use keyplane::{ControlTable, LookupTable, ReadHandle, othello};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

mod support;
use support::pair;

/// Slot layouts: (value bits, options). Plain 8/16/32-bit slots (their
/// own read loops), a plain 5-bit slot, fingerprints without and with the
/// emptiness bit (straddling words: the general read).
fn layouts() -> Vec<(u32, othello::Options)> {
    let pow2 = othello::Options { sizing: othello::Sizing::PowerOfTwo, ..Default::default() };
    vec![
        (8, othello::Options { seed: 31, ..Default::default() }),
        (16, othello::Options { seed: 32, ..pow2 }),
        (32, othello::Options { seed: 33, ..Default::default() }),
        (5, othello::Options { seed: 34, ..Default::default() }),
        (8, othello::Options { seed: 35, fingerprint_bits: 8, ..Default::default() }),
        (13, othello::Options { seed: 36, ..othello::Options::filtered(6) }),
    ]
}

#[test]
fn batches_answer_exactly_what_single_lookups_answer() {
    for (vbits, opts) in layouts() {
        let m = keyplane::mask(vbits);
        let present: Vec<u64> = (0..3_000u64).map(|i| keyplane::hash::mix64(i ^ (vbits as u64) << 50)).collect();
        let ctl = othello::Control::from_items_with(
            present.iter().map(|&k| (u64_key(k), keyplane::hash::mix64(!k) & m)),
            vbits,
            opts,
        )
        .unwrap();
        let t = ctl.export();
        let rd = t.reader();
        // Present and absent keys interleaved, as integers and as bytes;
        // every third byte key has another length (the generic hash).
        let ints: Vec<u64> =
            (0..4_000u64)
                .map(|i| {
                    if i % 2 == 0 {
                        present[(i as usize * 7) % present.len()]
                    } else {
                        keyplane::hash::mix64(i ^ 0xabcd)
                    }
                })
                .collect();
        let bytes: Vec<Vec<u8>> = ints
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let mut b = u64_key(k).to_vec();
                if i % 3 == 0 {
                    b.resize(5 + i % 9, 0x77);
                }
                b
            })
            .collect();
        let refs: Vec<&[u8]> = bytes.iter().map(|b| b.as_slice()).collect();
        let want_b: Vec<Option<u64>> = refs.iter().map(|k| t.get(k)).collect();
        let want_i: Vec<Option<u64>> = ints.iter().map(|&k| t.get_u64(k)).collect();
        for (&k, w) in ints.iter().zip(&want_i) {
            assert_eq!(*w, rd.get_u64(k));
        }
        // Batch lengths around the internal batch of 16, and one big batch.
        let mut at = 0;
        for len in [0usize, 1, 2, 7, 15, 16, 17, 31, 32, 33, 48, 100, 1_000].into_iter().cycle().take(40) {
            if at + len > ints.len() {
                at = 0;
            }
            let r = at..at + len;
            let sentinel = Some(u64::MAX);
            let mut out = vec![sentinel; len + 3];
            t.get_batch(&refs[r.clone()], &mut out[..len]);
            assert_eq!(&out[..len], &want_b[r.clone()], "vbits {vbits}, &self get_batch of {len}");
            rd.get_batch(&refs[r.clone()], &mut out[..len]);
            assert_eq!(&out[..len], &want_b[r.clone()], "vbits {vbits}, reader get_batch of {len}");
            t.get_batch_u64(&ints[r.clone()], &mut out[..len]);
            assert_eq!(&out[..len], &want_i[r.clone()], "vbits {vbits}, &self get_batch_u64 of {len}");
            rd.get_batch_u64(&ints[r.clone()], &mut out[..len]);
            assert_eq!(&out[..len], &want_i[r.clone()], "vbits {vbits}, reader get_batch_u64 of {len}");
            // A longer `out` than keys: the extra entries are left alone.
            out.iter_mut().for_each(|o| *o = sentinel);
            rd.get_batch_u64(&ints[r.clone()], &mut out);
            assert_eq!(&out[..len], &want_i[r.clone()]);
            assert!(out[len..].iter().all(|o| *o == sentinel), "entries past the keys were written");
            // A shorter `out` than keys: only its length is answered.
            if len > 1 {
                let mut short = vec![sentinel; len - 1];
                t.get_batch(&refs[r.clone()], &mut short);
                assert_eq!(&short[..], &want_b[at..at + len - 1]);
            }
            at += len;
        }
    }
}

/// Readers look keys up in batches (`&self` and reader, byte and integer
/// keys) while the writer flips the values of the original keys, inserts
/// a fresh key every 16th delta (the table grows: whole-table
/// replacements), and every 8th delta pair writes a step counter `s` into
/// key X and then into key Y. Every answer must be one of its key's legal
/// values, and X − Y (mod 256) must be 0 or 1 within every batch of up to
/// 16 keys (one internal batch, one validation): such a batch is one state
/// of the table (with per-key validation it could read X before the
/// writer's later steps and Y after them).
/// Returns (batches checked, replacements).
fn stress(vbits: u32, opts: othello::Options, deltas: usize) -> (u64, usize) {
    let keys: Vec<u64> = (0..2_000u64).map(|i| keyplane::hash::mix64(i ^ 0xba7c ^ (vbits as u64) << 40)).collect();
    let (x, y) = (u64::MAX - 1, u64::MAX - 2);
    let mut ctl = othello::Control::from_items_with(
        keys.iter().map(|&k| (u64_key(k), pair(k, vbits)[0])).chain([(u64_key(x), 0), (u64_key(y), 0)]),
        vbits,
        opts,
    )
    .unwrap();
    let table = Arc::new(ctl.export());
    let keys = Arc::new(keys);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (table, keys, stop) = (table.clone(), keys.clone(), stop.clone());
            std::thread::spawn(move || {
                let rd = table.reader();
                let (mut batches, mut consistent, mut i) = (0u64, 0u64, r);
                let mut ints = Vec::new();
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) || consistent < 200 {
                    // A batch of 3..40 keys: X first, random keys, Y last.
                    let len = 3 + keyplane::hash::mix64(i as u64) as usize % 38;
                    // Up to 16 keys are one internal batch: one validation.
                    ints.clear();
                    ints.push(x);
                    ints.extend(
                        (1..len - 1).map(|j| keys[keyplane::hash::mix64((i * 64 + j) as u64) as usize % keys.len()]),
                    );
                    ints.push(y);
                    out.clear();
                    out.resize(len, None);
                    match i % 4 {
                        0 => table.get_batch_u64(&ints, &mut out),
                        1 => rd.get_batch_u64(&ints, &mut out),
                        2 => {
                            let b: Vec<[u8; 8]> = ints.iter().map(|&k| u64_key(k)).collect();
                            let refs: Vec<&[u8]> = b.iter().map(|k| k.as_slice()).collect();
                            rd.get_batch(&refs, &mut out)
                        }
                        _ => {
                            let b: Vec<[u8; 8]> = ints.iter().map(|&k| u64_key(k)).collect();
                            let refs: Vec<&[u8]> = b.iter().map(|k| k.as_slice()).collect();
                            table.get_batch(&refs, &mut out)
                        }
                    }
                    for (&k, &got) in ints[1..len - 1].iter().zip(&out[1..len - 1]) {
                        let ok = pair(k, vbits);
                        assert!(got == Some(ok[0]) || got == Some(ok[1]), "key {k:#x}: {got:?} is neither of {ok:x?}");
                    }
                    let (gx, gy) = (out[0].expect("X is present"), out[len - 1].expect("Y is present"));
                    let lag = gx.wrapping_sub(gy) & 0xff;
                    assert!(len > 16 || lag <= 1, "one batch read X = {gx} and Y = {gy}: not one state of the table");
                    consistent += (len <= 16) as u64;
                    batches += 1;
                    i += 2;
                }
                batches
            })
        })
        .collect();
    let mut state = vec![0usize; keys.len()];
    let mut fresh = Vec::new();
    let mut replaced = 0;
    let mut step = 0u64;
    for d in 0..deltas {
        let ds = if d % 16 == 15 {
            let k = keyplane::hash::mix64(d as u64 ^ 0xf00d);
            fresh.push(k);
            vec![ctl.insert(&u64_key(k), pair(k, vbits)[1]).unwrap()]
        } else if d % 8 == 0 {
            step += 1;
            let s = step & 0xff & keyplane::mask(vbits);
            vec![ctl.insert(&u64_key(x), s).unwrap(), ctl.insert(&u64_key(y), s).unwrap()]
        } else {
            let j = keyplane::hash::mix64(d as u64) as usize % keys.len();
            state[j] ^= 1;
            vec![ctl.insert(&u64_key(keys[j]), pair(keys[j], vbits)[state[j]]).unwrap()]
        };
        for delta in ds {
            replaced += delta.is_rebuild() as usize;
            table.apply(&delta).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let batches = readers.into_iter().map(|h| h.join().unwrap()).sum();
    // Quiet again: batched answers equal single answers for every key.
    let all: Vec<u64> = keys.iter().chain(&fresh).copied().chain([x, y]).collect();
    let mut out = vec![None; all.len()];
    table.reader().get_batch_u64(&all, &mut out);
    for (&k, &got) in all.iter().zip(&out) {
        assert_eq!(got, table.get_u64(k), "key {k:#x}");
    }
    for (j, &k) in keys.iter().enumerate() {
        assert_eq!(out[j], Some(pair(k, vbits)[state[j]]));
    }
    (batches, replaced)
}

#[test]
fn plain_8_bit_batches_are_legal_and_consistent_across_deltas_and_replacements() {
    let (batches, replaced) = stress(8, othello::Options { seed: 41, ..Default::default() }, 200_000);
    assert!(batches >= 400);
    assert!(replaced >= 2, "only {replaced} whole-table replacements");
}

#[test]
fn general_layout_batches_are_legal_and_consistent_across_deltas_and_replacements() {
    // 13 value bits + 6 fingerprint bits + the emptiness bit.
    let (batches, replaced) = stress(13, othello::Options { seed: 42, ..othello::Options::filtered(6) }, 200_000);
    assert!(batches >= 400);
    assert!(replaced >= 2, "only {replaced} whole-table replacements");
}
