//! Othello's per-thread reader (the flat view of a snapshot cached in the
//! handle, with one specialised read per plain 8/16/32-bit slot layout and
//! the general read for the others): under a writer that applies value
//! flips, inserts of new keys and the whole-table replacements their growth
//! causes, every answer a reader (and `&self`) gives for a key is one of the
//! key's legal values; a reader made before a replacement reads the new
//! table after it.

use keyplane::key::u64_key;
use keyplane::lineage::DeltaInfo;
use keyplane::{ControlTable, LookupTable, ReadHandle, othello};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

mod support;

use support::pair;

/// Readers (reader handles for the typed and the byte-key path, and
/// `&self`) check the original keys while the writer flips their values,
/// and every 16th delta inserts a fresh key, so the table grows several
/// times (whole-table replacements). Returns (lookups checked, rebuilds).
fn stress(vbits: u32, opts: othello::Options, deltas: usize) -> (u64, usize) {
    let keys: Vec<u64> = (0..2_048u64).map(|i| keyplane::hash::mix64(i ^ 0x5eed ^ (vbits as u64) << 40)).collect();
    let mut ctl =
        othello::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), pair(k, vbits)[0])), vbits, opts).unwrap();
    let table = Arc::new(ctl.export());
    let keys = Arc::new(keys);
    // Reader handles made before any replacement, kept across all of them.
    let legal = move |k| pair(k, vbits);
    let readers = support::Readers::spawn(2, 5, &table, &keys, legal, |t: &othello::Lookup, rd, k, i| match i % 4 {
        0 => t.get_u64(k),
        1 => rd.get(&u64_key(k)),
        _ => rd.get_u64(k),
    });
    let mut state = vec![0usize; keys.len()];
    let mut fresh = Vec::new();
    let mut rebuilds = 0;
    for d in 0..deltas {
        let delta = if d % 16 == 15 {
            let k = keyplane::hash::mix64(d as u64 ^ 0xf00d);
            fresh.push(k);
            ctl.insert(&u64_key(k), pair(k, vbits)[1]).unwrap()
        } else {
            let j = keyplane::hash::mix64(d as u64) as usize % keys.len();
            state[j] ^= 1;
            ctl.insert(&u64_key(keys[j]), pair(keys[j], vbits)[state[j]]).unwrap()
        };
        rebuilds += delta.is_rebuild() as usize;
        table.apply(&delta).unwrap();
    }
    let checked = readers.finish();
    // Finally every key, old and new, reads its last value on every path.
    let rd = table.reader();
    for (j, &k) in keys.iter().enumerate() {
        let want = Some(pair(k, vbits)[state[j]]);
        assert_eq!(table.get_u64(k), want);
        assert_eq!(rd.get_u64(k), want);
        assert_eq!(rd.get(&u64_key(k)), want);
    }
    for &k in &fresh {
        assert_eq!(rd.get_u64(k), Some(pair(k, vbits)[1]));
    }
    (checked, rebuilds)
}

#[test]
fn plain_8_bit_readers_see_legal_values_across_deltas_and_replacements() {
    let (checked, rebuilds) = stress(8, othello::Options { seed: 21, ..Default::default() }, 150_000);
    assert!(checked >= 2_000);
    assert!(rebuilds >= 2, "only {rebuilds} whole-table replacements");
}

#[test]
fn plain_16_bit_readers_see_legal_values_across_deltas_and_replacements() {
    let opts = othello::Options { seed: 22, sizing: othello::Sizing::PowerOfTwo, ..Default::default() };
    let (checked, rebuilds) = stress(16, opts, 150_000);
    assert!(checked >= 2_000);
    assert!(rebuilds >= 1, "no whole-table replacement");
}

#[test]
fn general_layout_readers_see_legal_values_across_deltas_and_replacements() {
    // 13 value bits + 6 fingerprint bits + the emptiness bit: a 20-bit slot
    // that straddles words, decoded by the general read.
    let opts = othello::Options { seed: 23, ..othello::Options::filtered(6) };
    let (checked, rebuilds) = stress(13, opts, 150_000);
    assert!(checked >= 2_000);
    assert!(rebuilds >= 2, "only {rebuilds} whole-table replacements");
}

#[test]
fn a_reader_made_before_a_replacement_reads_the_new_table() {
    let mut ctl = othello::Control::from_items_with(
        (0..100u64).map(|k| (u64_key(k), k & 0xff)),
        8,
        othello::Options { seed: 24, ..Default::default() },
    )
    .unwrap();
    let table = ctl.export();
    let rd = table.reader();
    assert_eq!(rd.get_u64(7), Some(7));
    let mut replaced = 0;
    for k in 100..1_000u64 {
        let d = ctl.insert(&u64_key(k), (k * 3) & 0xff).unwrap();
        replaced += d.is_rebuild() as usize;
        table.apply(&d).unwrap();
        // The old reader answers for the key just inserted, whether the
        // delta patched the arrays in place or replaced the table.
        assert_eq!(rd.get_u64(k), Some((k * 3) & 0xff), "key {k} after delta {}", d.seq());
    }
    assert!(replaced >= 2, "only {replaced} replacements");
    let (ma, mb) = table.sizes();
    assert!(ma as u64 + mb as u64 > 1_000, "the table grew");
    for k in 0..1_000u64 {
        let want = if k < 100 { k & 0xff } else { (k * 3) & 0xff };
        assert_eq!(rd.get_u64(k), Some(want));
        assert_eq!(rd.get(&u64_key(k)), Some(want));
    }
}

#[test]
fn eight_byte_keys_on_get_hash_like_the_generic_path() {
    // `get` sends an 8-byte key through the typed hash; `get_unchecked`
    // still hashes the byte slice with the generic XXH3 path. On a plain
    // layout both give `A ^ B` of the same two slots, for present and absent
    // keys alike, and so do 7- and 9-byte keys (the generic path on both).
    let items: Vec<([u8; 8], u64)> = (0..3_000u64).map(|i| (u64_key(keyplane::hash::mix64(i)), i & 0xff)).collect();
    let ctl = othello::Control::from_items_with(
        items.iter().copied(),
        8,
        othello::Options { seed: 25, ..Default::default() },
    )
    .unwrap();
    let t = ctl.export();
    let rd = t.reader();
    for (k, v) in &items {
        assert_eq!(rd.get(k), Some(*v));
        assert_eq!(t.get(k), Some(*v));
    }
    for i in 0..5_000u64 {
        let k = u64_key(keyplane::hash::mix64(i ^ 0xdead_beef_0000));
        let want = Some(t.get_unchecked(&k));
        assert_eq!(rd.get(&k), want, "absent key {k:x?}");
        assert_eq!(t.get(&k), want);
        for len in [7, 9] {
            let mut long = k.to_vec();
            long.resize(len, 0x5a);
            assert_eq!(rd.get(&long), Some(t.get_unchecked(&long)));
        }
    }
}

/// Each original key's last value, and the fresh keys with theirs.
type FinalValues = (Vec<u64>, Vec<(u64, u64)>);

/// `&self` lookups (each thread's cached snapshot inside the table) on a
/// shared table while a writer flips values and inserts fresh keys whose
/// growth replaces the whole table: every answer during the run is one of
/// the key's two legal values, and afterwards every thread, whose cache
/// still holds a snapshot from before the last replacement, reads every
/// key's last value and every fresh key through `&self`.
#[test]
fn self_lookups_see_legal_values_across_deltas_and_replacements() {
    let vbits = 8;
    let keys: Vec<u64> = (0..2_048u64).map(|i| keyplane::hash::mix64(i ^ 0xcace)).collect();
    let mut ctl = othello::Control::from_items_with(
        keys.iter().map(|&k| (u64_key(k), pair(k, vbits)[0])),
        vbits,
        othello::Options { seed: 26, ..Default::default() },
    )
    .unwrap();
    let table = Arc::new(ctl.export());
    let keys = Arc::new(keys);
    let stop = Arc::new(AtomicBool::new(false));
    // Filled by the writer when it is done: (each key's last value, the fresh keys).
    let last: Arc<std::sync::OnceLock<FinalValues>> = Arc::new(std::sync::OnceLock::new());
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (table, keys, stop, last) = (table.clone(), keys.clone(), stop.clone(), last.clone());
            std::thread::spawn(move || {
                let (mut checked, mut i) = (0u64, r * 7);
                while !stop.load(Ordering::Acquire) || checked < 1_000 {
                    let k = keys[i % keys.len()];
                    let got = if i % 2 == 0 { table.get_u64(k) } else { table.get(&u64_key(k)) };
                    let ok = pair(k, vbits);
                    assert!(got == Some(ok[0]) || got == Some(ok[1]), "key {k:#x}: {got:?} is neither of {ok:x?}");
                    checked += 1;
                    i += 1;
                }
                let (vals, fresh) = last.get().expect("the writer set the final values before stopping");
                for (&k, &v) in keys.iter().zip(vals) {
                    assert_eq!(table.get_u64(k), Some(v), "key {k:#x} after the run");
                    assert_eq!(table.get(&u64_key(k)), Some(v));
                }
                for &(k, v) in fresh {
                    assert_eq!(table.get_u64(k), Some(v), "fresh key {k:#x} after the run");
                }
                checked
            })
        })
        .collect();
    let mut state = vec![0usize; keys.len()];
    let mut fresh = Vec::new();
    let mut rebuilds = 0;
    for d in 0..100_000usize {
        let delta = if d % 16 == 15 {
            let k = keyplane::hash::mix64(d as u64 ^ (1 << 40));
            fresh.push((k, pair(k, vbits)[1]));
            ctl.insert(&u64_key(k), pair(k, vbits)[1]).unwrap()
        } else {
            let j = keyplane::hash::mix64(d as u64 ^ 0x77) as usize % keys.len();
            state[j] ^= 1;
            ctl.insert(&u64_key(keys[j]), pair(keys[j], vbits)[state[j]]).unwrap()
        };
        rebuilds += delta.is_rebuild() as usize;
        table.apply(&delta).unwrap();
    }
    let vals = keys.iter().zip(&state).map(|(&k, &s)| pair(k, vbits)[s]).collect();
    assert!(last.set((vals, fresh)).is_ok());
    stop.store(true, Ordering::Release);
    let checked: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(checked >= 3_000);
    assert!(rebuilds >= 2, "only {rebuilds} whole-table replacements");
}

/// One thread alternates `&self` lookups over many tables (each with its
/// own values), while some of them are replaced whole between its calls:
/// every answer comes from the right table and its current snapshot.
#[test]
fn one_thread_alternating_over_many_tables_reads_each_ones_values() {
    let n_tables = 12u64;
    let mut ctls: Vec<_> = (0..n_tables)
        .map(|t| {
            othello::Control::from_items_with(
                (0..200u64).map(|k| (u64_key(k), (k + t) & 0xff)),
                8,
                othello::Options { seed: 30 + t, ..Default::default() },
            )
            .unwrap()
        })
        .collect();
    let tables: Vec<_> = ctls.iter().map(|c| c.export()).collect();
    let mut next = 200u64;
    let mut replaced = 0;
    for round in 0..40u64 {
        for (t, table) in tables.iter().enumerate() {
            let t = t as u64;
            for k in (round % 7..next).step_by(13) {
                let want = if k < 200 { (k + t) & 0xff } else { (k * 5 + t) & 0xff };
                assert_eq!(table.get_u64(k), Some(want), "table {t} key {k} round {round}");
                assert_eq!(table.get(&u64_key(k)), Some(want));
            }
        }
        // Every table takes 25 fresh keys: growth replaces tables whole now
        // and then, while this thread's cache holds their old snapshots.
        for (t, (ctl, table)) in ctls.iter_mut().zip(&tables).enumerate() {
            let t = t as u64;
            for k in next..next + 25 {
                let d = ctl.insert(&u64_key(k), (k * 5 + t) & 0xff).unwrap();
                replaced += d.is_rebuild() as usize;
                table.apply(&d).unwrap();
            }
        }
        next += 25;
    }
    assert!(replaced >= 6, "only {replaced} whole-table replacements");
}

/// The value of tracked key `k` at version `ver` in
/// [`no_answer_comes_from_a_replaced_snapshot`].
fn versioned(k: u64, ver: u64, vbits: u32) -> u64 {
    keyplane::hash::mix64(k ^ ver.wrapping_mul(0x9e37_79b9_7f4a_7c15)) & keyplane::mask(vbits)
}

/// Readers on every single-lookup path (a reader handle's `get_u64` and
/// `get`, a `Reader8`'s `get_u64`, `&self` `get_u64` and `get`, and a one-key
/// `get_batch_u64`)
/// while the writer changes the values of tracked keys, and churns other
/// keys (a remove and an insert of a fresh key: now and then the insert
/// closes a cycle and re-seeds the whole table) and inserts fresh keys (the
/// table grows): many whole-table replacements, each of which retires the
/// old snapshot's seqlock, with the readers' handles and per-thread views
/// holding replaced snapshots in between (some readers pause now and then,
/// so their view is several replacements old). Every answer must be a
/// value the key had in a state current during the call: the writer
/// announces version `s` of a key (`begun`) before it applies the delta
/// and publishes it (`applied`) after, and a reader accepts only versions
/// from the one applied before its call began to the one begun when it
/// ended. A reader that answered from a replaced snapshot (no generation
/// check, a retirement missed) would give a version older than
/// `applied`; a torn read, a value of no version.
fn no_answer_comes_from_a_replaced_snapshot(vbits: u32, opts: othello::Options, deltas: usize) {
    use std::sync::atomic::AtomicU64;
    const TRACKED: usize = 256;
    let tracked: Vec<u64> =
        (0..TRACKED as u64).map(|i| keyplane::hash::mix64(i ^ 0x7ac4 ^ (vbits as u64) << 32)).collect();
    let churn_key = |i: u64| keyplane::hash::mix64(i ^ 0xc4c4_0000_0000 ^ (vbits as u64) << 48);
    let mut churn: Vec<u64> = (0..TRACKED as u64).map(churn_key).collect();
    let mut next_churn = TRACKED as u64;
    let items = tracked
        .iter()
        .map(|&k| (u64_key(k), versioned(k, 0, vbits)))
        .chain(churn.iter().map(|&k| (u64_key(k), k & keyplane::mask(vbits))));
    let mut ctl = othello::Control::from_items_with(items, vbits, opts).unwrap();
    let table = Arc::new(ctl.export());
    let tracked = Arc::new(tracked);
    let begun: Arc<Vec<AtomicU64>> = Arc::new((0..TRACKED).map(|_| AtomicU64::new(0)).collect());
    let applied: Arc<Vec<AtomicU64>> = Arc::new((0..TRACKED).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3usize)
        .map(|r| {
            let (table, tracked, begun, applied, stop) =
                (table.clone(), tracked.clone(), begun.clone(), applied.clone(), stop.clone());
            std::thread::spawn(move || {
                let rd = table.reader();
                let rd8 = table.reader8();
                let mut out = [None];
                let (mut checked, mut i) = (0u64, r * 31);
                while !stop.load(Ordering::Relaxed) || checked < 2_000 {
                    let j = i % TRACKED;
                    let k = tracked[j];
                    let lo = applied[j].load(Ordering::Acquire);
                    let got = match (i / TRACKED + r) % 6 {
                        5 => rd8.get_u64(k),
                        0 => rd.get_u64(k),
                        1 => rd.get(&u64_key(k)),
                        2 => table.get_u64(k),
                        3 => table.get(&u64_key(k)),
                        _ => {
                            rd.get_batch_u64(&[k], &mut out);
                            out[0]
                        }
                    };
                    let hi = begun[j].load(Ordering::Acquire);
                    assert!(
                        (lo..=hi).any(|s| got == Some(versioned(k, s, vbits))),
                        "reader {r}: key {k:#x} answered {got:?}, not a value of versions {lo}..={hi}"
                    );
                    checked += 1;
                    i += 1;
                    // Readers 1 and 2 pause now and then: their handle and
                    // per-thread view then hold a snapshot that may have
                    // been replaced several times.
                    if r > 0 && i % (512 * r) == 0 {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
                checked
            })
        })
        .collect();
    let mut ver = vec![0u64; TRACKED];
    for d in 0..deltas {
        let x = keyplane::hash::mix64(d as u64 ^ 0x5151);
        if d % 3 == 0 {
            let j = x as usize % TRACKED;
            let k = tracked[j];
            ver[j] += 1;
            begun[j].store(ver[j], Ordering::Release);
            table.apply(&ctl.insert(&u64_key(k), versioned(k, ver[j], vbits)).unwrap()).unwrap();
            applied[j].store(ver[j], Ordering::Release);
        } else if d % 97 == 1 {
            // A fresh key, kept: the table grows.
            let k = churn_key(next_churn);
            next_churn += 1;
            churn.push(k);
            table.apply(&ctl.insert(&u64_key(k), k & keyplane::mask(vbits)).unwrap()).unwrap();
        } else {
            // Churn: one key out, a fresh one in (inserts close cycles now
            // and then, which re-seeds the table).
            let c = x as usize % churn.len();
            let old = std::mem::replace(&mut churn[c], churn_key(next_churn));
            next_churn += 1;
            table.apply(&ctl.remove(&u64_key(old)).unwrap().unwrap()).unwrap();
            let k = churn[c];
            table.apply(&ctl.insert(&u64_key(k), k & keyplane::mask(vbits)).unwrap()).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let checked: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(checked >= 6_000);
    let s = ctl.stats();
    assert!(s.cycle_rebuilds >= 5, "only {} re-seeds", s.cycle_rebuilds);
    assert!(s.grow_rebuilds >= 1, "no growth");
    // Afterwards every path reads every tracked key's last version.
    let rd = table.reader();
    let rd8 = table.reader8();
    for (j, &k) in tracked.iter().enumerate() {
        let want = Some(versioned(k, ver[j], vbits));
        assert_eq!(rd8.get_u64(k), want);
        assert_eq!(rd.get_u64(k), want);
        assert_eq!(rd.get(&u64_key(k)), want);
        assert_eq!(table.get_u64(k), want);
        assert_eq!(table.get(&u64_key(k)), want);
    }
}

#[test]
fn no_answer_comes_from_a_replaced_snapshot_plain_8_bit() {
    no_answer_comes_from_a_replaced_snapshot(8, othello::Options { seed: 40, ..Default::default() }, 60_000);
}

#[test]
fn no_answer_comes_from_a_replaced_snapshot_plain_16_bit_pow2_xxh3() {
    let opts = othello::Options {
        seed: 41,
        sizing: othello::Sizing::PowerOfTwo,
        hash: othello::KeyHash::Xxh3,
        ..Default::default()
    };
    no_answer_comes_from_a_replaced_snapshot(16, opts, 60_000);
}

#[test]
fn no_answer_comes_from_a_replaced_snapshot_general_layout() {
    let opts = othello::Options { seed: 42, ..othello::Options::filtered(6) };
    no_answer_comes_from_a_replaced_snapshot(13, opts, 60_000);
}
