//! Control-plane benchmark: durable writes/s through gRPC (batches of 1,
//! 100, 1000) on a preloaded table, subscriber catch-up from a blob, and
//! write-ack -> applied-at-subscriber latency under a paced load.
//!
//! `cargo run --release -p keyplane-control --example control_bench -- [KEYS] [SECONDS] [OUT.json] [STRUCTURES] [RUNS]`
//! (defaults 1000000, 3, docs/bench/control.json, othello,ludo, 1). The
//! store is a temporary directory on the same disk as the target
//! directory. Structures alternate within each of the RUNS rounds.
//!
//! Each durable-writes row has the wall-clock rate and the rate per CPU
//! second of the whole process (client and service together; the machine
//! is shared, so wall-clock rates fall with its load) and the writer's own
//! time per batch by phase (apply / store / publish). The latency run
//! offers 10 000 updates/s as one 10-update batch per millisecond, each
//! write on its own task (the pace does not wait for acknowledgements).
//!
//! Environment: `KEYPLANE_BENCH_EXPECTED=N` creates the table with
//! `-O expected_keys=N` (default KEYS + 2 000 000; 0 = not pre-sized, so
//! growth rebuilds run inside the measurement); `KEYPLANE_BENCH_WRITERS=1,4`
//! measures each batch size with each number of concurrent writer tasks
//! (default 1: one client, each batch waits for its acknowledgement);
//! `KEYPLANE_BENCH_BATCHES=1000` measures only these batch sizes (default
//! 1,100,1000).

use keyplane_control::client::{self, insert};
use keyplane_control::follow::{Follower, Subscriber};
use keyplane_control::keys::raw_key;
use keyplane_control::pb;
use keyplane_control::server::{ServeConfig, StoreConfig, start};
use keyplane_control::table::Retain;
use std::time::{Duration, Instant};

fn k(i: u64) -> Vec<u8> {
    i.to_le_bytes().to_vec()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keys: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let out = args.get(3).cloned().unwrap_or_else(|| "docs/bench/control.json".into());
    let structures: Vec<String> =
        args.get(4).map_or_else(|| vec!["othello".into(), "ludo".into()], |s| s.split(',').map(String::from).collect());
    let runs: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(1);
    // "etcd:URL,URL": the etcd store (a fresh key prefix per run).
    let etcd: Option<Vec<String>> =
        args.get(6).and_then(|s| s.strip_prefix("etcd:")).map(|s| s.split(',').map(String::from).collect());
    let store_name = if etcd.is_some() { "etcd" } else { "log" };
    // Tables are created with `-O expected_keys=N` (default KEYS + 2M, so
    // no growth rebuild runs during the measurement); 0 = not pre-sized.
    let expected: u64 =
        std::env::var("KEYPLANE_BENCH_EXPECTED").ok().and_then(|s| s.parse().ok()).unwrap_or(keys + 2_000_000);
    // Concurrent writer tasks in the durable-writes rows (group commit
    // takes every batch queued while the previous group was committed).
    // A comma-separated list: each batch size is measured with each count.
    let writer_counts: Vec<u64> = std::env::var("KEYPLANE_BENCH_WRITERS")
        .unwrap_or_else(|_| "1".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .map(|w: u64| w.max(1))
        .collect();
    let batches: Vec<u64> = std::env::var("KEYPLANE_BENCH_BATCHES")
        .unwrap_or_else(|_| "1,100,1000".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .map(|b: u64| b.max(1))
        .collect();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("load average at start: {load}");
    let mut rows = Vec::new();
    for (run, structure) in (0..runs).flat_map(|r| structures.iter().map(move |s| (r, s.as_str()))) {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            store: match &etcd {
                Some(eps) => StoreConfig::Etcd {
                    endpoints: eps.clone(),
                    prefix: format!("/kpbench-{}-{run}-{structure}/", std::process::id()),
                },
                None => StoreConfig::Dir(dir.path().to_path_buf()),
            },
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            tls: None,
            retain: Retain::default(),
        };
        let srv = start(cfg).await.unwrap();
        let url = format!("http://{}", srv.addr);
        let mut c = client::connect(&url).await.unwrap();
        // The etcd store needs a moment to elect this instance.
        for _ in 0..100 {
            if c.list_tables(pb::ListTablesRequest {}).await.is_ok() && etcd.is_none() {
                break;
            }
            if etcd.is_some() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let probe = c
                    .create_table(pb::CreateTableRequest {
                        name: "probe".into(),
                        structure: structure.into(),
                        value_bits: 8,
                        ..Default::default()
                    })
                    .await;
                if probe.is_ok() {
                    break;
                }
            }
        }
        let options = if expected > 0 {
            [(keyplane_control::table::EXPECTED_KEYS.to_string(), expected.to_string())].into()
        } else {
            Default::default()
        };
        let tc = Instant::now();
        c.create_table(pb::CreateTableRequest {
            name: "t".into(),
            structure: structure.into(),
            value_bits: 8,
            options,
            ..Default::default()
        })
        .await
        .unwrap();
        eprintln!("{structure}: created (expected_keys {expected}) in {:.2} s", tc.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let mut next = 0u64;
        while next < keys {
            let n = (keys - next).min(10_000);
            let ups = (next..next + n).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
            c.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.unwrap();
            next += n;
        }
        // The table's sequence (one per update); `next` is the next fresh key.
        let mut seq = next;
        eprintln!("{structure}: preloaded {keys} keys in {:.1} s", t0.elapsed().as_secs_f64());
        for (batch, writers) in batches.iter().flat_map(|&b| writer_counts.iter().map(move |&w| (b, w))) {
            let ph0 = phases(srv.metrics).await;
            let cpu0 = cpu_seconds();
            let t = Instant::now();
            // Each writer task writes its own key range (stride `writers`
            // batches), each batch waiting for its acknowledgement.
            let mut tasks = Vec::new();
            for w in 0..writers {
                let mut c = c.clone();
                let start = next + w * batch;
                tasks.push(tokio::spawn(async move {
                    let (mut at, mut done, mut nb) = (start, 0u64, 0u64);
                    while t.elapsed().as_secs_f64() < secs {
                        let ups = (at..at + batch).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
                        c.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.unwrap();
                        at += batch * writers;
                        done += batch;
                        nb += 1;
                    }
                    (at, done, nb)
                }));
            }
            let (mut done, mut nb) = (0u64, 0u64);
            let mut top = next;
            for task in tasks {
                let (at, d, b) = task.await.unwrap();
                top = top.max(at);
                done += d;
                nb += b;
            }
            next = top;
            seq += done;
            let wall = t.elapsed().as_secs_f64();
            let cpu = cpu_seconds() - cpu0;
            let ph1 = phases(srv.metrics).await;
            let ms = |p: usize| (ph1[p] - ph0[p]) / nb as f64 * 1e3;
            let rate = done as f64 / wall;
            let cpu_rate = done as f64 / cpu.max(1e-9);
            eprintln!(
                "{structure} batch {batch}: {rate:.0} durable updates/s wall, {cpu_rate:.0} per CPU second; writer ms/batch apply {:.3} store {:.3} publish {:.3}",
                ms(0),
                ms(1),
                ms(2)
            );
            rows.push(format!(
                "{{\"bench\":\"durable_writes\",\"store\":\"{store_name}\",\"run\":{run},\"structure\":\"{structure}\",\"keys\":{keys},\"batch\":{batch},\"writers\":{writers},\"expected_keys\":{expected},\"updates_per_s\":{rate:.0},\"updates_per_cpu_s\":{cpu_rate:.0},\"writer_ms_per_batch\":{{\"apply\":{:.4},\"store\":{:.4},\"publish\":{:.4}}},\"loadavg\":{}}}",
                ms(0),
                ms(1),
                ms(2),
                loadavg()
            ));
            eprintln!("  ({writers} writer task(s), {nb} batches)");
        }
        // Catch-up: a new subscriber loads the whole blob.
        let t = Instant::now();
        let mut f = Follower::new(Subscriber::new(&url, "t"));
        f.wait_for(seq).await.unwrap();
        let catch = t.elapsed().as_secs_f64();
        let blob = f.handle().current().unwrap().to_bytes().len();
        eprintln!("{structure}: catch-up from a {blob}-byte blob in {catch:.3} s");
        rows.push(format!(
            "{{\"bench\":\"catch_up\",\"store\":\"{store_name}\",\"run\":{run},\"structure\":\"{structure}\",\"keys\":{},\"blob_bytes\":{blob},\"seconds\":{catch:.4}}}",
            seq
        ));
        // Latency at a paced 10K updates/s (batches of 10 every ms): ack -> applied.
        let h = f.handle();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, Instant)>();
        let applier = tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut pending: std::collections::VecDeque<(u64, Instant)> = Default::default();
            loop {
                let s = tokio::select! {
                    r = f.step() => r.unwrap(),
                    m = rx.recv() => match m { Some(x) => { pending.push_back(x); continue } None => break },
                };
                while let Ok(x) = rx.try_recv() {
                    pending.push_back(x);
                }
                while pending.front().is_some_and(|(q, _)| *q <= s) {
                    let (_, at) = pending.pop_front().unwrap();
                    lat.push(at.elapsed().as_secs_f64());
                }
            }
            drop(h);
            lat
        });
        let t = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut sent = 0u64;
        let mut inflight = Vec::new();
        while t.elapsed().as_secs_f64() < secs {
            tick.tick().await;
            // Offered at the pace, not at the acknowledgement rate: each
            // write is in flight on its own task.
            let ups = (next..next + 10).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
            let mut c2 = c.clone();
            let tx2 = tx.clone();
            inflight.push(tokio::spawn(async move {
                let r = c2.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.unwrap().into_inner();
                let _ = tx2.send((r.sequence, Instant::now()));
            }));
            next += 10;
            seq += 10;
            sent += 10;
        }
        for w in inflight {
            w.await.unwrap();
        }
        let rate = sent as f64 / t.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(tx);
        let mut lat =
            tokio::time::timeout(Duration::from_secs(10), applier).await.map(|r| r.unwrap()).unwrap_or_default();
        lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let pct = |p: f64| {
            lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(f64::NAN)
                * 1e3
        };
        eprintln!(
            "{structure}: at {rate:.0} updates/s, ack->applied p50 {:.3} ms p99 {:.3} ms ({} samples)",
            pct(0.5),
            pct(0.99),
            lat.len()
        );
        rows.push(format!(
            "{{\"bench\":\"ack_to_applied\",\"store\":\"{store_name}\",\"run\":{run},\"structure\":\"{structure}\",\"keys\":{seq},\"expected_keys\":{expected},\"offered_updates_per_s\":{rate:.0},\"batch\":10,\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"samples\":{},\"loadavg\":{}}}",
            pct(0.5),
            pct(0.99),
            pct(1.0),
            lat.len(),
            loadavg()
        ));
        srv.stop().await.unwrap();
    }
    let json = format!("[\n  {}\n]\n", rows.join(",\n  "));
    if let Some(p) = std::path::Path::new(&out).parent() {
        let _ = std::fs::create_dir_all(p);
    }
    std::fs::write(&out, json).unwrap();
    eprintln!("wrote {out}");
}

/// Process CPU seconds (user + system, all threads) from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

fn loadavg() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    l.split_whitespace().next().unwrap_or("0").to_string()
}

/// Writer phase seconds so far: apply, store, publish.
async fn phases(m: Option<std::net::SocketAddr>) -> [f64; 3] {
    let mut out = [0.0; 3];
    let Some(m) = m else { return out };
    for l in metrics_text(m).await.lines() {
        for (i, p) in ["apply", "store", "publish"].iter().enumerate() {
            if l.starts_with(&format!("keyplane_writer_phase_seconds_sum{{phase=\"{p}\"}}")) {
                out[i] = l.rsplit(' ').next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
            }
        }
    }
    out
}

async fn metrics_text(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
