//! Othello's batched update path: `Control::insert_batch` gives the same
//! results, deltas (byte for byte) and table as one `insert` per item —
//! across growth rebuilds, value changes of present keys, refused items and
//! both sizings — and `Lookup::apply_batch` leaves a replica byte for byte
//! where one `apply` per delta does, stopping at the first refused delta.

use keyplane::lineage::DeltaInfo;
use keyplane::{ControlTable, Error, LookupTable, Wire, othello};

fn key(i: u64) -> Vec<u8> {
    // 8-byte keys and, every fifth, a 12-byte one.
    let mut k = keyplane::hash::mix64(i ^ 0x0b47).to_le_bytes().to_vec();
    if i % 5 == 0 {
        k.extend_from_slice(&[1, 2, 3, 4]);
    }
    k
}

#[test]
fn insert_batch_equals_one_insert_per_item() {
    for sizing in [othello::Sizing::PowerOfTwo, othello::Sizing::Compact] {
        let opts = othello::Options { sizing, seed: 51, ..Default::default() };
        let base = othello::Control::from_items_with((0..500u64).map(|i| (key(i), i & 0xff)), 8, opts).unwrap();
        let (mut one, mut many) = (base.clone(), base);
        let (table_one, table_many) = (one.export(), many.export());
        let mut next = 500u64;
        let mut rebuilds = 0;
        for round in 0..40u64 {
            // New keys, present keys with new and with equal values, a
            // duplicate inside the batch, and a value too wide (refused).
            let len = 1 + (keyplane::hash::mix64(round) % 90) as usize;
            let mut items: Vec<(Vec<u8>, u64)> = Vec::with_capacity(len);
            for j in 0..len as u64 {
                let r = keyplane::hash::mix64(round << 20 | j);
                items.push(match r % 10 {
                    0 => (key(r % next), r >> 56),
                    1 => (key(r % next), 0x1ff),
                    2 if !items.is_empty() => items[(r >> 8) as usize % items.len()].clone(),
                    _ => {
                        next += 1;
                        (key(next), r >> 56)
                    }
                });
            }
            let got = many.insert_batch(&items);
            assert_eq!(got.len(), items.len());
            let mut deltas = Vec::new();
            for ((k, v), g) in items.iter().zip(got) {
                let want = one.insert(k, *v);
                match (want, g) {
                    (Ok(w), Ok(g)) => {
                        assert_eq!(w.to_bytes(), g.to_bytes(), "sizing {sizing:?}, round {round}");
                        rebuilds += g.is_rebuild() as usize;
                        table_one.apply(&w).unwrap();
                        deltas.push(g);
                    }
                    (Err(Error::ValueTooWide { .. }), Err(Error::ValueTooWide { .. })) => {}
                    (w, g) => panic!("insert gave {w:?}, insert_batch {g:?}"),
                }
            }
            table_many.apply_batch(&deltas).unwrap();
            assert_eq!(table_one.to_bytes(), table_many.to_bytes(), "round {round}");
        }
        assert!(rebuilds >= 1, "{sizing:?}: no growth rebuild inside a batch");
        assert_eq!(one.len(), many.len());
        for (k, v) in one.iter() {
            assert_eq!(table_many.get(k), Some(v));
        }
    }
}

#[test]
fn apply_batch_stops_at_the_first_refused_delta() {
    let mut ctl = othello::Control::from_items((0..200u64).map(|i| (key(i), i & 0xff)), 8).unwrap();
    let table = ctl.export();
    let replica = othello::Lookup::from_bytes(&table.to_bytes()).unwrap();
    let deltas: Vec<othello::Delta> = (200..260u64).map(|i| ctl.insert(&key(i), i & 0xff).unwrap()).collect();
    // Delta 31 is left out: 32 onwards are out of sequence.
    let mut gapped = deltas[..31].to_vec();
    gapped.extend_from_slice(&deltas[32..]);
    assert!(table.apply_batch(&gapped).is_err());
    // The deltas before the refused one stay applied, and no later one.
    for d in &deltas[..31] {
        replica.apply(d).unwrap();
    }
    assert_eq!(table.to_bytes(), replica.to_bytes());
    // The rest, in order, completes it.
    table.apply_batch(&deltas[31..]).unwrap();
    for i in 0..260u64 {
        assert_eq!(table.get(&key(i)), Some(i & 0xff));
    }
    // An empty batch is a no-op.
    table.apply_batch(&[]).unwrap();
}
