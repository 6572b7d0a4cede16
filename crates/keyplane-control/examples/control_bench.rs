//! Control-plane benchmark: durable writes/s through gRPC (batches of 1,
//! 100, 1000) on a preloaded table, subscriber catch-up from a blob, and
//! write-ack -> applied-at-subscriber latency under a paced load.
//!
//! `cargo run --release -p keyplane-control --example control_bench -- [KEYS] [SECONDS] [OUT.json]`
//! (defaults 1000000, 3, docs/bench/control.json). The store is a
//! temporary directory on the same disk as the target directory.

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
    let mut rows = Vec::new();
    for structure in ["othello", "ludo"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            store: StoreConfig::Dir(dir.path().to_path_buf()),
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            tls: None,
            retain: Retain::default(),
        };
        let srv = start(cfg).await.unwrap();
        let url = format!("http://{}", srv.addr);
        let mut c = client::connect(&url).await.unwrap();
        c.create_table(pb::CreateTableRequest {
            name: "t".into(),
            structure: structure.into(),
            value_bits: 8,
            ..Default::default()
        })
        .await
        .unwrap();
        let t0 = Instant::now();
        let mut next = 0u64;
        while next < keys {
            let n = (keys - next).min(10_000);
            let ups = (next..next + n).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
            c.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.unwrap();
            next += n;
        }
        eprintln!("{structure}: preloaded {keys} keys in {:.1} s", t0.elapsed().as_secs_f64());
        for batch in [1u64, 100, 1000] {
            let t = Instant::now();
            let mut done = 0u64;
            while t.elapsed().as_secs_f64() < secs {
                let ups = (next..next + batch).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
                c.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.unwrap();
                next += batch;
                done += batch;
            }
            let rate = done as f64 / t.elapsed().as_secs_f64();
            eprintln!("{structure} batch {batch}: {rate:.0} durable updates/s");
            if let Some(m) = srv.metrics {
                for l in metrics_text(m).await.lines() {
                    if l.starts_with("keyplane_writer_phase_seconds_sum") || l.starts_with("keyplane_writer_phase_seconds_count") {
                        eprintln!("  {l}");
                    }
                }
            }
            rows.push(format!(
                "{{\"bench\":\"durable_writes\",\"store\":\"redb\",\"structure\":\"{structure}\",\"keys\":{keys},\"batch\":{batch},\"updates_per_s\":{rate:.0}}}"
            ));
        }
        // Catch-up: a new subscriber loads the whole blob.
        let t = Instant::now();
        let mut f = Follower::new(Subscriber::new(&url, "t"));
        f.wait_for(next).await.unwrap();
        let catch = t.elapsed().as_secs_f64();
        let blob = f.handle().current().unwrap().to_bytes().len();
        eprintln!("{structure}: catch-up from a {blob}-byte blob in {catch:.3} s");
        rows.push(format!(
            "{{\"bench\":\"catch_up\",\"store\":\"redb\",\"structure\":\"{structure}\",\"keys\":{},\"blob_bytes\":{blob},\"seconds\":{catch:.4}}}",
            next
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
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sent = 0u64;
        while t.elapsed().as_secs_f64() < secs {
            tick.tick().await;
            let ups = (next..next + 10).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
            let r = c.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.unwrap().into_inner();
            let _ = tx.send((r.sequence, Instant::now()));
            next += 10;
            sent += 10;
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
            "{{\"bench\":\"ack_to_applied\",\"store\":\"redb\",\"structure\":\"{structure}\",\"offered_updates_per_s\":{rate:.0},\"batch\":10,\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"samples\":{}}}",
            pct(0.5),
            pct(0.99),
            lat.len()
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

async fn metrics_text(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
