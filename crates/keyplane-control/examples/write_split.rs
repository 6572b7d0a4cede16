//! Where the service's write path spends its time, per update, at a given
//! table size: the library's `get` (the presence check of validation), its
//! `insert` (delta included, as `AnyControl::insert` returns the encoded
//! delta), the store encoding of the group, the committed-entries map and
//! the delta-log messages (publish). No gRPC, no fsync (those are the
//! `store` phase of `control_bench`).
//!
//! `cargo run --release -p keyplane-control --example write_split -- [KEYS] [BATCHES] [STRUCTURES]`
//! (defaults 1000000, 200, othello,ludo; batches of 1000 fresh keys; the
//! table is pre-sized for KEYS + 2M like the benchmark).

use keyplane::{ControlTable, Wire};
use keyplane_any::AnyControl;
use keyplane_control::pb;
use keyplane_control::store::{Group, TableRecord};
use keyplane_control::table::{EXPECTED_KEYS, Table};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keys: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let batches: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200);
    let structures: Vec<String> =
        args.get(3).map_or_else(|| vec!["othello".into(), "ludo".into()], |s| s.split(',').map(String::from).collect());
    for s in &structures {
        let rec = TableRecord {
            name: "t".into(),
            structure: s.clone(),
            value_bits: 8,
            options: [(EXPECTED_KEYS.to_string(), (keys + 2_000_000).to_string())].into(),
            key_format: 0,
            sequence: 0,
            topology: String::new(),
            down_links: Vec::new(),
        };
        let t0 = Instant::now();
        let mut t = Table::build(rec, (0..keys).map(|i| (i.to_le_bytes().to_vec(), i & 0xff))).expect("builds");
        eprintln!("{s}: built {keys} keys in {:.1} s", t0.elapsed().as_secs_f64());
        let (mut get, mut ins, mut enc, mut items, mut msgs, mut denc) = (0f64, 0f64, 0f64, 0f64, 0f64, 0f64);
        let mut next = keys;
        let mut sink = 0u64;
        for _ in 0..batches {
            let batch: Vec<(Vec<u8>, u64)> =
                (next..next + 1000).map(|i| (i.to_le_bytes().to_vec(), i & 0xff)).collect();
            next += 1000;
            let a = Instant::now();
            for (k, _) in &batch {
                sink += t.control.get(k).is_some() as u64;
            }
            let b = Instant::now();
            let mut deltas = Vec::with_capacity(batch.len());
            // The typed insert, then the delta's encoding, timed apart.
            let mut b2 = b;
            match &mut t.control {
                AnyControl::Ludo(c) => {
                    let ds: Vec<_> = batch.iter().map(|(k, v)| c.insert(k, *v).expect("insert")).collect();
                    b2 = Instant::now();
                    deltas.extend(ds.iter().map(|d| d.to_bytes()));
                }
                AnyControl::Othello(c) => {
                    let ds: Vec<_> = batch.iter().map(|(k, v)| c.insert(k, *v).expect("insert")).collect();
                    b2 = Instant::now();
                    deltas.extend(ds.iter().map(|d| d.to_bytes()));
                }
                other => {
                    for (k, v) in &batch {
                        deltas.push(other.insert(k, *v).expect("insert"));
                    }
                }
            }
            let c = Instant::now();
            denc += (c - b2).as_secs_f64();
            let mut g = Group::new();
            g.begin_entries("t");
            for (k, v) in &batch {
                g.entry(k, Some(*v));
            }
            g.record(&t.rec);
            sink += g.finish().len() as u64;
            let d = Instant::now();
            for (k, v) in batch {
                t.items.insert(k, v);
            }
            let e = Instant::now();
            for (i, delta) in deltas.into_iter().enumerate() {
                let seq = t.rec.sequence + 1 + i as u64;
                let size = delta.len() + 32;
                let msg = pb::SubscribeResponse {
                    update: Some(pb::subscribe_response::Update::Delta(pb::Delta { sequence: seq, epoch: 1, delta })),
                };
                t.log.push(seq - 1, seq, msg, size, Default::default());
            }
            t.rec.sequence += 1000;
            let f = Instant::now();
            get += (b - a).as_secs_f64();
            ins += (c - b).as_secs_f64();
            enc += (d - c).as_secs_f64();
            items += (e - d).as_secs_f64();
            msgs += (f - e).as_secs_f64();
        }
        let n = (batches * 1000) as f64 / 1e9;
        let total = get + ins + enc + items + msgs;
        println!(
            "{{\"structure\":\"{s}\",\"keys\":{keys},\"updates\":{},\"ns_per_update\":{{\"get\":{:.0},\"insert_and_delta\":{:.0},\"of_which_delta_to_bytes\":{:.0},\"store_encode\":{:.0},\"entries_map\":{:.0},\"log_messages\":{:.0},\"total\":{:.0}}},\"library_share\":{:.3},\"sink\":{sink}}}",
            batches * 1000,
            get / n,
            ins / n,
            denc / n,
            enc / n,
            items / n,
            msgs / n,
            total / n,
            (get + ins) / total
        );
    }
}
