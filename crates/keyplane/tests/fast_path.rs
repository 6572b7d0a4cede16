//! The typed single-lookup path (`get_u64`) against the generic `get`: same
//! answers for present and absent keys, on `&self` and on readers, for
//! Othello (every slot layout and sizing), SetSep (every in-memory record
//! layout), the cuckoo map (every fixed-width layout), and the provided default
//! of the other structures; and under concurrent deltas, every answer a
//! reader gets is a value the key held.

use keyplane::key::u64_key;
use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, cuckoo, ludo, othello, setsep};
use proptest::prelude::*;
use std::sync::Arc;

mod support;

/// `get_u64(x) == get(&u64_key(x))` through `&self`, a reader, and a lookup
/// form decoded from the table's bytes.
fn same_answers<L: LookupTable>(t: &L, probes: &[u64]) {
    let rd = t.reader();
    let copy = L::from_bytes(&t.to_bytes()).unwrap();
    let rd2 = copy.reader();
    for &x in probes {
        let want = t.get(&u64_key(x));
        assert_eq!(t.get_u64(x), want, "&self get_u64({x:#x})");
        assert_eq!(rd.get_u64(x), want, "reader get_u64({x:#x})");
        assert_eq!(rd.get(&u64_key(x)), want, "reader get({x:#x})");
        assert_eq!(copy.get_u64(x), want, "decoded get_u64({x:#x})");
        assert_eq!(rd2.get_u64(x), want, "decoded reader get_u64({x:#x})");
    }
    // Typed batches (`get_batch_u64`) of every length up to a few internal
    // rounds, from every offset class: the single lookups' answers.
    let want: Vec<Option<u64>> = probes.iter().map(|&x| t.get(&u64_key(x))).collect();
    for len in [1usize, 5, 16, 17, 31, 64, 100] {
        for (ks, ws) in probes.chunks(len).zip(want.chunks(len)) {
            let mut out = vec![Some(u64::MAX); ks.len()];
            t.get_batch_u64(ks, &mut out);
            assert_eq!(out, ws, "&self get_batch_u64 of {len}");
            rd.get_batch_u64(ks, &mut out);
            assert_eq!(out, ws, "reader get_batch_u64 of {len}");
            copy.get_batch_u64(ks, &mut out);
            assert_eq!(out, ws, "decoded get_batch_u64 of {len}");
        }
    }
    // Mismatched lengths: the shorter one decides, the rest is untouched.
    if probes.len() >= 3 {
        let mut out = vec![Some(7); 2];
        t.get_batch_u64(&probes[..3], &mut out);
        assert_eq!(out, want[..2]);
        let mut out = vec![Some(7); 3];
        rd.get_batch_u64(&probes[..2], &mut out);
        assert_eq!(out[..2], want[..2]);
        assert_eq!(out[2], Some(7));
    }
}

fn othello_options(layout: u8, seed: u64) -> othello::Options {
    let base = match layout % 3 {
        0 => othello::Options::default(),
        1 => othello::Options::filtered(8),
        _ => othello::Options { fingerprint_bits: 5, ..Default::default() },
    };
    let sizing = if layout / 3 % 2 == 0 { othello::Sizing::Compact } else { othello::Sizing::PowerOfTwo };
    let hash = if layout / 6 == 0 { othello::KeyHash::Mum8 } else { othello::KeyHash::Xxh3 };
    othello::Options { sizing, seed, hash, ..base }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn othello_get_u64_matches_get(
        keys in proptest::collection::hash_set(any::<u64>(), 1..400),
        absent in proptest::collection::vec(any::<u64>(), 0..200),
        vbits in prop::sample::select(vec![1u32, 7, 8, 13, 16, 32]),
        layout in 0u8..12,
        seed in any::<u64>(),
    ) {
        let items: Vec<([u8; 8], u64)> =
            keys.iter().map(|&k| (u64_key(k), k.rotate_left(9) & keyplane::mask(vbits))).collect();
        let opts = othello_options(layout, seed);
        let ctl = othello::Control::from_items_with(items.iter().copied(), vbits, opts).unwrap();
        let t = ctl.export();
        prop_assert_eq!(t.key_hash(), opts.hash);
        for (k, v) in &items {
            prop_assert_eq!(t.get_u64(u64::from_le_bytes(*k)), Some(*v));
        }
        let probes: Vec<u64> = keys.iter().copied().chain(absent.iter().copied()).collect();
        same_answers(&t, &probes);
        // Against the control side's hashing (`get_unchecked`: the key's
        // bytes hashed as the control form hashes them, the two slots read
        // through the packed arrays, not the lookup's typed path): a plain
        // layout answers exactly its raw XOR for every key, present or not;
        // a filtered one, when it answers, the XOR's value bits.
        let plain = opts.fingerprint_bits == 0 && !opts.emptiness;
        let rd = t.reader();
        // `Reader8` (specialised for plain 8-bit `Mum8` tables) answers as
        // the generic path on every layout, present keys or not.
        let rd8 = t.reader8();
        for &x in &probes {
            prop_assert_eq!(rd8.get_u64(x), t.get(&u64_key(x)));
            prop_assert_eq!(rd8.get(&u64_key(x)), t.get(&u64_key(x)));
        }
        for &x in &probes {
            let raw = t.get_unchecked(&u64_key(x));
            if plain {
                prop_assert_eq!(t.get_u64(x), Some(raw));
                prop_assert_eq!(rd.get_u64(x), Some(raw));
            } else if let Some(v) = rd.get_u64(x) {
                prop_assert_eq!(v, raw);
            }
        }
    }

    #[test]
    fn setsep_get_u64_matches_get(
        keys in proptest::collection::hash_set(any::<u64>(), 1..3000),
        absent in proptest::collection::vec(any::<u64>(), 0..200),
        vbits in prop::sample::select(vec![1u32, 4, 8]),
        seed in any::<u64>(),
    ) {
        let items: Vec<([u8; 8], u64)> =
            keys.iter().map(|&k| (u64_key(k), k.rotate_left(5) & keyplane::mask(vbits))).collect();
        let opts = setsep::Options { seed, ..setsep::Options::default() };
        let ctl = setsep::Control::from_items_with(items.iter().copied(), vbits, opts).unwrap();
        let t = ctl.export();
        for (k, v) in &items {
            prop_assert_eq!(t.get_u64(u64::from_le_bytes(*k)), Some(*v));
        }
        let probes: Vec<u64> = keys.iter().copied().chain(absent.iter().copied()).collect();
        same_answers(&t, &probes);
    }
}

#[test]
fn setsep_fallback_groups_answer_on_the_typed_path() {
    // A tiny index range makes groups fail and land in the fallback table,
    // which compares full keys: the typed path must hand it the key bytes.
    let keys: Vec<u64> = (0..20_000u64).map(|i| keyplane::hash::mix64(i + 1)).collect();
    let opts = setsep::Options { index_bits: 2, array_bits: 2, seed: 3, ..setsep::Options::default() };
    let ctl = setsep::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), k & 0xf)), 4, opts).unwrap();
    let t = ctl.export();
    assert!(t.fallback_size().1 > 0, "the configuration should put keys in the fallback table");
    for &k in &keys {
        assert_eq!(t.get_u64(k), Some(k & 0xf));
    }
    let absent: Vec<u64> = (0..2_000u64).map(|i| keyplane::hash::mix64(i + 1_000_000)).collect();
    same_answers(&t, &keys.iter().chain(&absent).copied().collect::<Vec<_>>());
}

#[test]
fn default_get_u64_is_the_generic_get() {
    // Ludo keeps the provided `get_u64`: the same answers by definition,
    // checked so that an override added later keeps them.
    let items: Vec<([u8; 8], u64)> = (0..5_000u64).map(|i| (u64_key(i * 31 + 7), i & 0xff)).collect();
    let t = ludo::Control::from_items(items.iter().copied(), 8).unwrap().export();
    let probes: Vec<u64> = (0..6_000u64).map(|i| i * 31 + 7).collect();
    same_answers(&t, &probes);
}

/// Readers on the typed path (a reader handle and `&self`) while a writer
/// applies `deltas` value flips: every key alternates between two random
/// 32-bit values, so a torn read (slots from two different states) shows as
/// a value the key never held (a chance of about 2^-31 per lookup to pass
/// unnoticed). Returns the number of lookups checked.
fn flip_stress<C, F>(mut ctl: C, keys: &[u64], deltas: usize, pair: F) -> u64
where
    C: ControlTable,
    C::Lookup: 'static,
    F: Fn(u64) -> [u64; 2] + Send + Sync + Copy + 'static,
{
    let table = Arc::new(ctl.export());
    let keys: Arc<Vec<u64>> = Arc::new(keys.to_vec());
    let readers = support::Readers::spawn(2, 7, &table, &keys, pair, |t: &C::Lookup, rd, k, i| {
        // Every typed path, `&self` and the handle's, single and
        // batched (a batch of one key: the helper checks one key
        // at a time), and `&self` byte-key `get`.
        let mut o = [None];
        match i % 6 {
            0 => t.get_u64(k),
            1 => rd.get_u64(k),
            2 => t.get(&u64_key(k)),
            3 => {
                t.get_batch_u64(&[k], &mut o);
                o[0]
            }
            4 => {
                rd.get_batch_u64(&[k], &mut o);
                o[0]
            }
            _ => {
                t.get_batch(&[&u64_key(k)[..]], &mut o);
                o[0]
            }
        }
    });
    let mut state = vec![0usize; keys.len()];
    for d in 0..deltas {
        let j = keyplane::hash::mix64(d as u64) as usize % keys.len();
        state[j] ^= 1;
        let delta = ctl.insert(&u64_key(keys[j]), pair(keys[j])[state[j]]).unwrap();
        table.apply(&delta).unwrap();
    }
    let checked = readers.finish();
    // Finally every key reads its last value on every path.
    for (j, &k) in keys.iter().enumerate() {
        assert_eq!(table.get_u64(k), Some(pair(k)[state[j]]));
        assert_eq!(table.reader().get_u64(k), table.get(&u64_key(k)));
    }
    checked
}

fn flip_pair(k: u64) -> [u64; 2] {
    let a = keyplane::hash::mix64(k) & 0xffff_ffff;
    [a, a ^ (1 + (keyplane::hash::mix64(!k) & 0x7fff_ffff))]
}

#[test]
fn othello_typed_readers_see_old_or_new_values_under_deltas() {
    let keys: Vec<u64> = (0..4_096u64).map(|i| keyplane::hash::mix64(i ^ 0xabc)).collect();
    let opts = othello::Options { seed: 11, ..Default::default() };
    let ctl = othello::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), flip_pair(k)[0])), 32, opts).unwrap();
    let checked = flip_stress(ctl, &keys, 200_000, flip_pair);
    assert!(checked >= 2_000);
}

#[test]
fn setsep_typed_readers_see_old_or_new_values_under_deltas() {
    let keys: Vec<u64> = (0..8_192u64).map(|i| keyplane::hash::mix64(i ^ 0xdef)).collect();
    let opts = setsep::Options { seed: 12, ..Default::default() };
    let ctl = setsep::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), flip_pair(k)[0])), 32, opts).unwrap();
    let checked = flip_stress(ctl, &keys, 20_000, flip_pair);
    assert!(checked >= 2_000);
}

/// SetSep's in-memory record layouts: word-aligned (l a multiple of 8,
/// x = 16, y = 8; the inlined l = 8 form and the general one) and the
/// packed wire form for every other shape. Every path answers like the
/// oracle, and the lookup form's bytes are the control form's export bytes
/// (the in-memory layout never reaches the wire), also after deltas.
#[test]
fn setsep_every_record_layout_answers_and_keeps_its_bytes() {
    // (value bits, index bits x, array bits y)
    let shapes =
        [(8, 16, 8), (16, 16, 8), (24, 16, 8), (24, 10, 8), (8, 12, 4), (8, 16, 2), (4, 16, 8), (8, 16, 16), (1, 8, 8)];
    for (i, &(vbits, x, y)) in shapes.iter().enumerate() {
        let keys: Vec<u64> = (0..3_000u64).map(|j| keyplane::hash::mix64(j ^ (i as u64) << 32)).collect();
        let val = |k: u64| keyplane::hash::mix64(k ^ 0x77) & keyplane::mask(vbits);
        let opts = setsep::Options { index_bits: x, array_bits: y, seed: 40 + i as u64, ..setsep::Options::default() };
        let mut ctl =
            setsep::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), val(k))), vbits, opts).unwrap();
        let t = ctl.export();
        assert_eq!(t.to_bytes(), ctl.export().to_bytes(), "shape {:?}: blob bytes", shapes[i]);
        for &k in &keys {
            assert_eq!(t.get_u64(k), Some(val(k)), "shape {:?}", shapes[i]);
        }
        let absent: Vec<u64> = (0..500u64).map(|j| keyplane::hash::mix64(j + 9_000_000)).collect();
        same_answers(&t, &keys.iter().chain(&absent).copied().collect::<Vec<_>>());
        // Deltas rewrite records in place: new values, removals, new keys.
        let mut want: std::collections::HashMap<u64, u64> = keys.iter().map(|&k| (k, val(k))).collect();
        for (j, &k) in keys.iter().enumerate().take(600) {
            let d = if j % 3 == 0 {
                want.remove(&k);
                ctl.remove(&u64_key(k)).unwrap().expect("a present key's removal is a delta")
            } else {
                let v = val(k) ^ 1;
                want.insert(k, v);
                ctl.insert(&u64_key(k), v).unwrap()
            };
            t.apply(&d).unwrap();
        }
        for j in 0..300u64 {
            let k = keyplane::hash::mix64(j + 5_000_000);
            want.insert(k, j & keyplane::mask(vbits));
            t.apply(&ctl.insert(&u64_key(k), j & keyplane::mask(vbits)).unwrap()).unwrap();
        }
        for (&k, &v) in &want {
            assert_eq!(t.get_u64(k), Some(v), "shape {:?} after deltas", shapes[i]);
        }
        assert_eq!(t.to_bytes(), ctl.export().to_bytes(), "shape {:?}: bytes after deltas", shapes[i]);
        same_answers(&t, &want.keys().chain(&absent).copied().collect::<Vec<_>>());
    }
}

/// 8-bit value pairs for the l = 8 stress (a torn read shows as a value the
/// key never held with probability about 254/256).
fn flip_pair8(k: u64) -> [u64; 2] {
    let a = keyplane::hash::mix64(k) & 0xff;
    [a, a ^ (1 + keyplane::hash::mix64(!k) % 255)]
}

#[test]
fn setsep_l8_typed_readers_see_old_or_new_values_under_deltas() {
    // l = 8, x = 16, y = 8: the inlined word-aligned record path.
    let keys: Vec<u64> = (0..8_192u64).map(|i| keyplane::hash::mix64(i ^ 0x5e8)).collect();
    let opts = setsep::Options { seed: 13, ..Default::default() };
    let ctl = setsep::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), flip_pair8(k)[0])), 8, opts).unwrap();
    let checked = flip_stress(ctl, &keys, 20_000, flip_pair8);
    assert!(checked >= 2_000);
}

#[test]
fn cuckoo_get_u64_matches_get_in_every_layout() {
    // 8-byte keys: keyed 7-slot buckets (8-bit values), keyed 6-slot
    // (16-bit), the wide layout (56-bit values, separate array); then the
    // typed path on a table of 6-byte keys (answers None, like `get` of an
    // 8-byte key there).
    for (i, vbits) in [8u32, 16, 56].into_iter().enumerate() {
        let keys: Vec<u64> = (0..5_000u64).map(|j| keyplane::hash::mix64(j ^ (i as u64) << 40)).collect();
        let val = |k: u64| keyplane::hash::mix64(k ^ 0x99) & keyplane::mask(vbits);
        let opts = cuckoo::Options { seed: 50 + i as u64, ..Default::default() };
        let ctl = cuckoo::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), val(k))), vbits, opts).unwrap();
        let t = ctl.export();
        for &k in &keys {
            assert_eq!(t.get_u64(k), Some(val(k)), "{vbits}-bit values");
        }
        let absent: Vec<u64> = (0..1_000u64).map(|j| keyplane::hash::mix64(j + 7_000_000)).collect();
        same_answers(&t, &keys.iter().chain(&absent).copied().collect::<Vec<_>>());
    }
    let macs: Vec<[u8; 6]> =
        (0..2_000u64).map(|j| keyplane::hash::mix64(j).to_le_bytes()[..6].try_into().unwrap()).collect();
    let t = cuckoo::Control::from_items(macs.iter().map(|m| (*m, 3u64)), 8).unwrap().export();
    assert_eq!(t.key_width(), Some(6));
    let probes: Vec<u64> =
        macs.iter().map(|m| u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0])).collect();
    same_answers(&t, &probes);
}

#[test]
fn cuckoo_typed_readers_see_old_or_new_values_under_deltas() {
    // 8-bit values: the keyed 7-slot path with its constants inlined;
    // 32-bit values: the general fixed-width path.
    let keys: Vec<u64> = (0..8_192u64).map(|i| keyplane::hash::mix64(i ^ 0xc0c)).collect();
    let opts = cuckoo::Options { seed: 14, ..Default::default() };
    let ctl = cuckoo::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), flip_pair8(k)[0])), 8, opts).unwrap();
    assert!(flip_stress(ctl, &keys, 100_000, flip_pair8) >= 2_000);
    let ctl = cuckoo::Control::from_items_with(keys.iter().map(|&k| (u64_key(k), flip_pair(k)[0])), 32, opts).unwrap();
    assert!(flip_stress(ctl, &keys, 100_000, flip_pair) >= 2_000);
}
