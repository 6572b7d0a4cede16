//! End to end through gRPC against an in-process service: an oracle
//! property test with random batches, subscribers that must equal the
//! control form after every batch, and bad requests that change nothing.

mod common;

use common::TestServer;
use keyplane_control::client::{self, Client, delete, insert, modify};
use keyplane_control::follow::{Follower, Subscriber};
use keyplane_control::keys::raw_key;
use keyplane_control::pb;
use keyplane_control::table::Retain;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::BTreeMap;
use tonic::Code;

fn key(i: u64) -> Vec<u8> {
    i.to_le_bytes().to_vec()
}

async fn create(c: &mut Client, name: &str, structure: &str, bits: u32) {
    c.create_table(pb::CreateTableRequest {
        name: name.into(),
        structure: structure.into(),
        value_bits: bits,
        key_format: pb::KeyFormat::U64 as i32,
        ..Default::default()
    })
    .await
    .expect("create");
}

async fn fresh_blob(url: &str, table: &str) -> Vec<u8> {
    let mut c = client::connect(url).await.unwrap();
    let mut s =
        c.subscribe(pb::SubscribeRequest { table: table.into(), ..Default::default() }).await.unwrap().into_inner();
    match s.message().await.unwrap().unwrap().update {
        Some(pb::subscribe_response::Update::Snapshot(s)) => s.blob,
        other => panic!("a subscriber without state must get a snapshot first, got {other:?}"),
    }
}

async fn check_state(c: &mut Client, table: &str, oracle: &BTreeMap<Vec<u8>, u64>, seq: u64) {
    let (entries, rseq) = client::read_all(c, table, Vec::new()).await.unwrap();
    assert_eq!(rseq, seq, "read reflects the acknowledged sequence");
    let got: BTreeMap<Vec<u8>, u64> = entries.into_iter().collect();
    assert_eq!(&got, oracle, "full scan equals the oracle");
    let d = c.describe_table(pb::DescribeTableRequest { name: table.into() }).await.unwrap().into_inner();
    assert_eq!(d.n, oracle.len() as u64);
    assert_eq!(d.sequence, seq);
}

async fn oracle_run(structure: &str, seed: u64) {
    let srv = TestServer::start(Retain::default()).await;
    let mut c = client::connect(&srv.url).await.unwrap();
    create(&mut c, "t", structure, 8).await;
    let mut f = Follower::new(Subscriber::new(&srv.url, "t").name("oracle-follower"));
    let handle = f.handle();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut oracle: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut seq = 0u64;
    let mut next_key = 0u64;
    for round in 0..60 {
        let n = rng.gen_range(1..80);
        let mut batch = Vec::new();
        let mut shadow = oracle.clone();
        for _ in 0..n {
            let r = rng.gen_range(0..10);
            let existing: Vec<Vec<u8>> = shadow.keys().cloned().collect();
            if r < 6 || existing.is_empty() {
                next_key += 1 + rng.gen_range(0..3);
                let k = key(next_key);
                let v = rng.gen_range(0..256);
                shadow.insert(k.clone(), v);
                batch.push(insert(raw_key(k), v));
            } else if r < 8 {
                let k = existing[rng.gen_range(0..existing.len())].clone();
                let v = rng.gen_range(0..256);
                shadow.insert(k.clone(), v);
                batch.push(modify(raw_key(k), v));
            } else {
                let k = existing[rng.gen_range(0..existing.len())].clone();
                shadow.remove(&k);
                batch.push(delete(raw_key(k)));
            }
        }
        if round % 4 == 3 {
            // Poison one entry; the whole batch must fail and change nothing.
            let i = rng.gen_range(0..batch.len());
            let (bad, code) = match rng.gen_range(0..5) {
                0 => (insert(raw_key(key(next_key + 1000)), 256), Code::InvalidArgument),
                1 => (modify(raw_key(key(u64::MAX)), 1), Code::NotFound),
                2 => (delete(raw_key(key(u64::MAX - 1))), Code::NotFound),
                3 => (insert(raw_key(vec![1, 2, 3]), 1), Code::InvalidArgument),
                _ => (pb::Update { r#type: 0, entry: batch[0].entry.clone() }, Code::InvalidArgument),
            };
            batch[i] = bad;
            let err = c.write(pb::WriteRequest { table: "t".into(), updates: batch }).await.unwrap_err();
            // An INSERT earlier in the batch may make a later one collide; the
            // status names the first bad index, which is at most `i`.
            let msg = err.message().to_string();
            let idx: usize = msg
                .strip_prefix("update ")
                .and_then(|m| m.split(':').next())
                .and_then(|x| x.parse().ok())
                .unwrap_or_else(|| panic!("status names the entry: {msg}"));
            assert!(idx <= i, "{msg}");
            if idx == i {
                assert_eq!(err.code(), code, "{msg}");
            }
            check_state(&mut c, "t", &oracle, seq).await;
            continue;
        }
        let r = c.write(pb::WriteRequest { table: "t".into(), updates: batch.clone() }).await.unwrap().into_inner();
        seq += batch.len() as u64;
        assert_eq!(r.sequence, seq);
        oracle = shadow;
        f.wait_for(seq).await.unwrap();
        assert_eq!(f.subscriber().applied_sequence(), seq);
        let t = handle.current().unwrap();
        for (k, v) in &oracle {
            assert_eq!(t.get(k), Some(*v), "{structure}: subscriber answers every key (round {round})");
        }
        assert_eq!(t.to_bytes(), fresh_blob(&srv.url, "t").await, "{structure}: subscriber equals a fresh export");
        if round % 10 == 0 {
            check_state(&mut c, "t", &oracle, seq).await;
        }
    }
    check_state(&mut c, "t", &oracle, seq).await;
    // Exact reads: present keys answered, absent ones left out.
    let ks: Vec<Vec<u8>> = oracle.keys().take(5).cloned().chain([key(u64::MAX)]).collect();
    let (got, _) = client::read_all(&mut c, "t", ks.iter().cloned().map(raw_key).collect()).await.unwrap();
    assert_eq!(got.len(), ks.len() - 1);
    for (k, v) in got {
        assert_eq!(oracle.get(&k), Some(&v));
    }
    drop(srv.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_othello() {
    oracle_run("othello", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_ludo() {
    oracle_run("ludo", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_cuckoo() {
    oracle_run("cuckoo", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_management_and_bad_requests() {
    let srv = TestServer::start(Retain::default()).await;
    let mut c = client::connect(&srv.url).await.unwrap();
    create(&mut c, "a", "othello", 8).await;
    let e = c
        .create_table(pb::CreateTableRequest {
            name: "a".into(),
            structure: "ludo".into(),
            value_bits: 8,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);
    for (req, code) in [
        (
            pb::CreateTableRequest { name: "b".into(), structure: "nope".into(), value_bits: 8, ..Default::default() },
            Code::InvalidArgument,
        ),
        (
            pb::CreateTableRequest {
                name: "bad name".into(),
                structure: "ludo".into(),
                value_bits: 8,
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
        (
            pb::CreateTableRequest {
                name: "b".into(),
                structure: "othello".into(),
                value_bits: 0,
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
        (
            pb::CreateTableRequest {
                name: "b".into(),
                structure: "othello".into(),
                value_bits: 8,
                options: [("nope".to_string(), "1".to_string())].into(),
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
    ] {
        assert_eq!(c.create_table(req).await.unwrap_err().code(), code);
    }
    let l = c.list_tables(pb::ListTablesRequest {}).await.unwrap().into_inner();
    assert_eq!(l.tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a"]);
    let e =
        c.write(pb::WriteRequest { table: "zz".into(), updates: vec![insert(raw_key(key(1)), 1)] }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Text keys are parsed with the table's key format.
    let ok = c
        .write(pb::WriteRequest {
            table: "a".into(),
            updates: vec![
                insert(keyplane_control::keys::text_key("7"), 3),
                insert(keyplane_control::keys::text_key("0x10"), 4),
            ],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.sequence, 2);
    let e = c
        .write(pb::WriteRequest {
            table: "a".into(),
            updates: vec![insert(raw_key(key(100)), 1), insert(keyplane_control::keys::text_key("x7"), 3)],
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("update 1:"), "{}", e.message());
    let (all, seq) = client::read_all(&mut c, "a", Vec::new()).await.unwrap();
    assert_eq!(seq, 2);
    assert_eq!(all, vec![(key(7), 3), (key(16), 4)]);
    // An empty batch is valid and returns the sequence.
    assert_eq!(
        c.write(pb::WriteRequest { table: "a".into(), updates: vec![] }).await.unwrap().into_inner().sequence,
        2
    );
    // A subscriber to a table that does not exist is refused.
    let e = c.subscribe(pb::SubscribeRequest { table: "zz".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Drop: the table and its subscribers' streams end.
    let mut s =
        c.subscribe(pb::SubscribeRequest { table: "a".into(), ..Default::default() }).await.unwrap().into_inner();
    assert!(s.message().await.unwrap().is_some());
    c.drop_table(pb::DropTableRequest { name: "a".into() }).await.unwrap();
    let end = s.message().await;
    assert_eq!(end.unwrap_err().code(), Code::NotFound);
    assert_eq!(c.drop_table(pb::DropTableRequest { name: "a".into() }).await.unwrap_err().code(), Code::NotFound);
    assert!(c.list_tables(pb::ListTablesRequest {}).await.unwrap().into_inner().tables.is_empty());
    // Metrics are exposed.
    let m = srv.running.as_ref().unwrap().metrics.unwrap();
    let text = http_get(m).await;
    assert!(text.contains("keyplane_updates_total 2"), "{text}");
    assert!(text.contains("keyplane_store_commit_seconds"), "{text}");
    drop(srv.stop().await);
}

/// The raw HTTP response to `GET /metrics` at `addr`.
pub async fn http_get(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// `-O expected_keys=N` sizes the control form up front: inserting up to N
/// keys never grows it (the lookup form's memory stays the same), the keys
/// read back, a follower equals a fresh export, the sizing survives a
/// restart, and bad values are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_keys_presizes_tables() {
    let srv = TestServer::start(Retain::default()).await;
    let mut c = client::connect(&srv.url).await.unwrap();
    for bad in ["abc", "-1", "99999999999999"] {
        let e = c
            .create_table(pb::CreateTableRequest {
                name: "bad".into(),
                structure: "othello".into(),
                value_bits: 8,
                options: [("expected_keys".to_string(), bad.to_string())].into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "expected_keys={bad}");
        assert!(e.message().contains("expected_keys"), "{}", e.message());
    }
    let describe = |c: &mut Client, name: &'static str| {
        let mut c = c.clone();
        async move { c.describe_table(pb::DescribeTableRequest { name: name.into() }).await.unwrap().into_inner() }
    };
    for (name, structure, expected) in [("o", "othello", Some(3000)), ("l", "ludo", Some(3000)), ("g", "othello", None)]
    {
        let options = expected.map(|n: u64| [("expected_keys".to_string(), n.to_string())].into()).unwrap_or_default();
        c.create_table(pb::CreateTableRequest {
            name: name.into(),
            structure: structure.into(),
            value_bits: 8,
            key_format: pb::KeyFormat::U64 as i32,
            options,
            ..Default::default()
        })
        .await
        .unwrap();
        let m0 = describe(&mut c, name).await;
        assert_eq!(m0.n, 0, "the placeholder keys are gone");
        let mut f = Follower::new(Subscriber::new(&srv.url, name));
        f.wait_for(0).await.unwrap();
        let mut oracle = BTreeMap::new();
        for b in 0..5u64 {
            let ups = (b * 500..(b + 1) * 500).map(|i| insert(raw_key(key(i)), i & 0xff)).collect();
            c.write(pb::WriteRequest { table: name.into(), updates: ups }).await.unwrap();
            oracle.extend((b * 500..(b + 1) * 500).map(|i| (key(i), i & 0xff)));
        }
        check_state(&mut c, name, &oracle, 2500).await;
        f.wait_for(2500).await.unwrap();
        assert_eq!(f.handle().current().unwrap().to_bytes(), fresh_blob(&srv.url, name).await);
        let m1 = describe(&mut c, name).await;
        if expected.is_some() && structure == "othello" {
            assert_eq!(m1.memory_bytes, m0.memory_bytes, "{name}: no growth below expected_keys");
        }
        if expected.is_none() {
            assert!(m1.memory_bytes > m0.memory_bytes, "{name}: without expected_keys the table grows");
        }
    }
    let before = describe(&mut c, "o").await;
    let srv = TestServer::start_in(srv.stop().await, Retain::default()).await;
    let mut c = client::connect(&srv.url).await.unwrap();
    let after = describe(&mut c, "o").await;
    assert_eq!(after.memory_bytes, before.memory_bytes, "restart keeps the sizing");
    assert_eq!(after.n, 2500);
    let (entries, _) = client::read_all(&mut c, "o", Vec::new()).await.unwrap();
    assert_eq!(entries.len(), 2500);
    assert!(entries.iter().all(|(k, v)| u64::from_le_bytes(k.as_slice().try_into().unwrap()) & 0xff == *v));
}

/// Updates of one key within a batch see the batch's own earlier updates:
/// INSERT, DELETE, INSERT, MODIFY of a key succeed in one batch; a second
/// INSERT of a key inserted earlier in the batch, or a MODIFY after its
/// DELETE, fails the whole batch naming that update, and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_updates_within_a_batch() {
    let srv = TestServer::start(Retain::default()).await;
    let mut c = client::connect(&srv.url).await.unwrap();
    create(&mut c, "t", "ludo", 8).await;
    let mut oracle = BTreeMap::new();
    let w = |updates: Vec<pb::Update>| pb::WriteRequest { table: "t".into(), updates };
    let ok = vec![
        insert(raw_key(key(1)), 5),
        insert(raw_key(key(2)), 6),
        delete(raw_key(key(1))),
        insert(raw_key(key(1)), 7),
        modify(raw_key(key(1)), 8),
        modify(raw_key(key(2)), 9),
    ];
    assert_eq!(c.write(w(ok)).await.unwrap().into_inner().sequence, 6);
    oracle.insert(key(1), 8);
    oracle.insert(key(2), 9);
    check_state(&mut c, "t", &oracle, 6).await;
    for (bad, code, at) in [
        (vec![insert(raw_key(key(3)), 1), insert(raw_key(key(3)), 2)], Code::AlreadyExists, 1),
        (vec![delete(raw_key(key(1))), modify(raw_key(key(1)), 2)], Code::NotFound, 1),
        (vec![modify(raw_key(key(2)), 1), delete(raw_key(key(2))), delete(raw_key(key(2)))], Code::NotFound, 2),
        (vec![insert(raw_key(key(4)), 1), insert(raw_key(key(2)), 2)], Code::AlreadyExists, 1),
    ] {
        let e = c.write(w(bad)).await.unwrap_err();
        assert_eq!(e.code(), code, "{}", e.message());
        assert!(e.message().starts_with(&format!("update {at}:")), "{}", e.message());
        check_state(&mut c, "t", &oracle, 6).await;
    }
}
