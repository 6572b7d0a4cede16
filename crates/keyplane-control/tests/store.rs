//! The log-structured store against an in-memory oracle: group commits,
//! log rotation with background compaction into snapshots, restarts that
//! replay the logs, and a torn log tail cut off at start-up.

use keyplane_control::store::{Op, Options, Store, TableRecord, encode_ops};
use std::collections::BTreeMap;

type Oracle = BTreeMap<String, (u64, BTreeMap<Vec<u8>, u64>)>;

fn rec(name: &str, sequence: u64) -> TableRecord {
    TableRecord { name: name.into(), structure: "othello".into(), value_bits: 8, sequence, ..Default::default() }
}

/// xorshift, so the op mix is reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn check(store: &Store, oracle: &Oracle) {
    let got: Oracle = store
        .load()
        .unwrap()
        .into_iter()
        .map(|(r, e)| (r.name.clone(), (r.sequence, e.into_iter().collect())))
        .collect();
    assert_eq!(&got, oracle);
}

fn random_group(rng: &mut Rng, oracle: &mut Oracle) -> Vec<Op> {
    let mut ops = Vec::new();
    for _ in 0..(1 + rng.next() % 6) {
        let name = if rng.next() % 2 == 0 { "a" } else { "b" };
        match rng.next() % 20 {
            0 => {
                ops.push(Op::Drop(name.into()));
                oracle.remove(name);
            }
            1 | 2 => {
                let e = oracle.entry(name.into()).or_default();
                e.0 += 1;
                ops.push(Op::Record(rec(name, e.0)));
            }
            _ => {
                let Some(e) = oracle.get_mut(name) else { continue };
                let mut entries = Vec::new();
                for _ in 0..(1 + rng.next() % 50) {
                    let key = (rng.next() % 300).to_le_bytes().to_vec();
                    if rng.next() % 4 == 0 {
                        e.1.remove(&key);
                        entries.push((key, None));
                    } else {
                        let v = rng.next() % 1000;
                        e.1.insert(key.clone(), v);
                        entries.push((key, Some(v)));
                    }
                }
                ops.push(Op::Entries { table: name.into(), entries });
            }
        }
    }
    ops
}

#[test]
fn log_compaction_and_restarts_keep_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    // Small logs: many rotations and background compactions.
    let opts = Options { compact_bytes: 4096 };
    let mut store = Store::open_with(dir.path(), opts).unwrap();
    let mut oracle: Oracle = BTreeMap::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..400u64 {
        let ops = random_group(&mut rng, &mut oracle);
        store.commit(&encode_ops(&ops)).unwrap();
        if round % 41 == 0 {
            let (_, err) = store.wait_compaction();
            assert_eq!(err, None);
            check(&store, &oracle);
        }
        if round % 67 == 0 {
            // Restart without waiting for a compaction that may be running.
            drop(store);
            store = Store::open_with(dir.path(), opts).unwrap();
            check(&store, &oracle);
        }
    }
    let (done, err) = store.wait_compaction();
    assert_eq!(err, None);
    assert!(done > 5, "only {done} compactions ran");
    check(&store, &oracle);
    drop(store);
    // Compaction removed what its snapshots replace: few files remain.
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(files <= 6, "{files} files left in the store directory");
    let store = Store::open_with(dir.path(), opts).unwrap();
    check(&store, &oracle);
}

#[test]
fn torn_log_tail_is_cut_and_the_rest_replays() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut oracle: Oracle = BTreeMap::new();
    let mut rng = Rng(42);
    for _ in 0..30 {
        let ops = random_group(&mut rng, &mut oracle);
        store.commit(&encode_ops(&ops)).unwrap();
    }
    drop(store);
    // A crash in the middle of an append: half a frame at the end.
    let wal = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max()
        .unwrap();
    let frame_of_next = {
        let mut o2 = oracle.clone();
        encode_ops(&random_group(&mut rng, &mut o2))
    };
    let mut torn = (frame_of_next.len() as u32 + 100).to_le_bytes().to_vec();
    torn.extend_from_slice(&[7u8; 8]);
    torn.extend_from_slice(&frame_of_next[..frame_of_next.len() / 2]);
    let mut b = std::fs::read(&wal).unwrap();
    let before = b.len();
    b.extend_from_slice(&torn);
    std::fs::write(&wal, &b).unwrap();
    let store = Store::open(dir.path()).unwrap();
    check(&store, &oracle);
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), before as u64, "the torn tail is cut off");
    // A second service on the same directory is refused while this one runs.
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("in use by another keyplane serve"), "{err}");
    // Writes after the restart land after the cut and replay too.
    let ops = random_group(&mut rng, &mut oracle);
    store.commit(&encode_ops(&ops)).unwrap();
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    check(&store, &oracle);
}
