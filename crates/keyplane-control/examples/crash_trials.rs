//! Crash-safety trials: `kill -9` of a service at random moments under a
//! write load, then restart on the same store and port.
//!
//! `cargo run --release -p keyplane-control --example crash_trials -- [TRIALS] [OUT.json] [KEEP]`
//! (defaults 100, docs/bench/crash.json, 50000). The service is this same
//! executable re-run as `crash_trials --serve DIR PORT` (a child process,
//! killed with SIGKILL). Each trial: two writers insert fresh keys in
//! batches of 1..300 until the kill (20..400 ms after the trial starts);
//! the service restarts; a full read must hold every acknowledged insert,
//! each batch cut by the kill all or nothing, the sequence must equal the
//! updates applied; a follower that lives across all the crashes must
//! converge to the bytes of a fresh export. After the checks, the oldest
//! keys beyond KEEP are deleted (durable DELETE batches) so that every trial
//! costs about the same (KEEP = 0: the table only grows, as in the
//! session-6 run that did not finish). Per trial the JSON records the
//! restart time (spawn to listening, which includes replaying the store and
//! rebuilding the table), the read/verify time and the convergence time.

use keyplane_control::client::{self, delete, insert};
use keyplane_control::follow::{Follower, Subscriber};
use keyplane_control::keys::raw_key;
use keyplane_control::pb;
use keyplane_control::server::{ServeConfig, StoreConfig, start};
use keyplane_control::table::Retain;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The service as a child process, SIGKILLed on drop.
struct Serve {
    child: Child,
    url: String,
}

impl Serve {
    fn start(store: &Path, port: u16) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .arg("--serve")
            .arg(store)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the service child");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).expect("read the child's line");
        let addr = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("service child said {line:?}"));
        Self { child, url: format!("http://{addr}") }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn serve_child(dir: &str, port: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let cfg = ServeConfig {
            listen: format!("127.0.0.1:{port}").parse().expect("port"),
            store: StoreConfig::Dir(dir.into()),
            metrics: None,
            tls: None,
            retain: Retain::default(),
        };
        let running = start(cfg).await.expect("service starts");
        println!("listening on {}", running.addr);
        running.wait().await.expect("service runs");
    });
}

async fn fresh_blob(url: &str) -> (u64, Vec<u8>) {
    let mut c = client::connect(url).await.expect("connect");
    let mut s = c
        .subscribe(pb::SubscribeRequest { table: "t".into(), ..Default::default() })
        .await
        .expect("subscribe")
        .into_inner();
    match s.message().await.expect("message").expect("one message").update {
        Some(pb::subscribe_response::Update::Snapshot(s)) => (s.sequence, s.blob),
        other => panic!("snapshot expected, got {other:?}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve") {
        serve_child(&args[2], &args[3]);
        return;
    }
    let trials: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    let out = args.get(2).cloned().unwrap_or_else(|| "docs/bench/crash.json".into());
    let keep: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50_000);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(run(trials, &out, keep));
}

async fn run(trials: usize, out: &str, keep: usize) {
    let t_all = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut srv = Serve::start(&store, port);
    let url = srv.url.clone();
    let mut c = client::connect(&url).await.expect("connect");
    c.create_table(pb::CreateTableRequest {
        name: "t".into(),
        structure: "othello".into(),
        value_bits: 16,
        key_format: pb::KeyFormat::U64 as i32,
        ..Default::default()
    })
    .await
    .expect("create");
    let sub = Subscriber::new(&url, "t").backoff(Duration::from_millis(10), Duration::from_millis(100));
    let mut follower = Follower::new(sub);
    let fh = follower.handle();
    let applied = Arc::new(AtomicU64::new(0));
    let ap = applied.clone();
    let ftask = tokio::spawn(async move {
        loop {
            if let Ok(s) = follower.step().await {
                ap.store(s, SeqCst);
            }
        }
    });
    let mut rng = StdRng::seed_from_u64(17);
    let next = Arc::new(AtomicU64::new(1));
    // Keys present (all inserted with value k & 0xffff), oldest first.
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut updates_applied = 0u64;
    let mut total_acked = 0usize;
    let mut rows = Vec::new();
    for trial in 0..trials {
        let acks: Arc<Mutex<Vec<Vec<u64>>>> = Arc::default();
        let lost: Arc<Mutex<Vec<Vec<u64>>>> = Arc::default();
        let mut writers = Vec::new();
        for w in 0..2u64 {
            let (acks, lost, next, url) = (acks.clone(), lost.clone(), next.clone(), url.clone());
            let mut wr = StdRng::seed_from_u64(trial as u64 * 31 + w);
            writers.push(tokio::spawn(async move {
                let Ok(mut c) = client::connect(&url).await else { return };
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline {
                    let n = wr.gen_range(1..300u64);
                    let first = next.fetch_add(n, SeqCst);
                    let keys: Vec<u64> = (first..first + n).collect();
                    let updates = keys.iter().map(|&k| insert(raw_key(k.to_le_bytes().to_vec()), k & 0xffff)).collect();
                    match c.write(pb::WriteRequest { table: "t".into(), updates }).await {
                        Ok(_) => acks.lock().expect("lock").push(keys),
                        Err(_) => {
                            lost.lock().expect("lock").push(keys);
                            return;
                        }
                    }
                }
            }));
        }
        let kill_ms = rng.gen_range(20..400);
        tokio::time::sleep(Duration::from_millis(kill_ms)).await;
        srv.kill9();
        for w in writers {
            w.await.expect("writer task");
        }
        let t_restart = Instant::now();
        srv = Serve::start(&store, port);
        let restart_s = t_restart.elapsed().as_secs_f64();
        let t_verify = Instant::now();
        let mut c = client::connect(&srv.url).await.expect("connect after restart");
        let (entries, seq) = client::read_all(&mut c, "t", Vec::new()).await.expect("read all");
        let got: BTreeMap<u64, u64> =
            entries.into_iter().map(|(k, v)| (u64::from_le_bytes(k.try_into().expect("8-byte keys")), v)).collect();
        let mut trial_acked = 0usize;
        for b in acks.lock().expect("lock").iter() {
            trial_acked += b.len();
            updates_applied += b.len() as u64;
            for &k in b {
                acked.insert(k, k & 0xffff);
            }
        }
        total_acked += trial_acked;
        for (k, v) in &acked {
            assert_eq!(got.get(k), Some(v), "trial {trial}: acknowledged key {k} lost");
        }
        let mut cut_applied = 0;
        for b in lost.lock().expect("lock").iter() {
            let present = b.iter().filter(|k| got.contains_key(k)).count();
            assert!(present == 0 || present == b.len(), "trial {trial}: a batch half applied ({present}/{})", b.len());
            if present > 0 {
                cut_applied += 1;
                updates_applied += b.len() as u64;
                for &k in b {
                    acked.insert(k, k & 0xffff);
                }
            }
        }
        assert_eq!(got.len(), acked.len(), "trial {trial}: nothing beyond whole batches");
        assert_eq!(seq, updates_applied, "trial {trial}: the sequence counts the updates applied");
        let verify_s = t_verify.elapsed().as_secs_f64();
        let t_conv = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if applied.load(SeqCst) == seq {
                let (s, blob) = fresh_blob(&srv.url).await;
                if s == seq && fh.current().is_some_and(|t| t.to_bytes() == blob) {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "trial {trial}: the follower did not converge in 60 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let converge_s = t_conv.elapsed().as_secs_f64();
        let keys_at_restart = got.len();
        // Keep the table bounded: delete the oldest keys beyond `keep`.
        let mut deleted = 0usize;
        if keep > 0 && acked.len() > keep {
            let old: Vec<u64> = acked.keys().take(acked.len() - keep).copied().collect();
            for chunk in old.chunks(10_000) {
                let updates = chunk.iter().map(|&k| delete(raw_key(k.to_le_bytes().to_vec()))).collect();
                c.write(pb::WriteRequest { table: "t".into(), updates }).await.expect("delete batch");
                updates_applied += chunk.len() as u64;
                for k in chunk {
                    acked.remove(k);
                }
                deleted += chunk.len();
            }
        }
        eprintln!(
            "trial {trial}: kill at {kill_ms} ms, {trial_acked} acked, {cut_applied} cut batches applied, {keys_at_restart} keys; restart {restart_s:.3} s, verify {verify_s:.3} s, converge {converge_s:.3} s, deleted {deleted}"
        );
        rows.push(format!(
            "{{\"trial\":{trial},\"kill_ms\":{kill_ms},\"acked\":{trial_acked},\"keys\":{keys_at_restart},\"restart_s\":{restart_s:.4},\"verify_s\":{verify_s:.4},\"converge_s\":{converge_s:.4},\"deleted\":{deleted}}}"
        ));
    }
    ftask.abort();
    let total_s = t_all.elapsed().as_secs_f64();
    eprintln!(
        "crash safety: {trials} kill -9 trials, {total_acked} acknowledged inserts, 0 lost, follower converged every trial ({total_s:.1} s)"
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let json = format!(
        "{{\"bench\":\"crash_trials\",\"trials\":{trials},\"keep\":{keep},\"acknowledged_inserts\":{total_acked},\"lost\":0,\"seconds\":{total_s:.1},\"loadavg\":\"{}\",\"rows\":[\n  {}\n]}}\n",
        load.trim(),
        rows.join(",\n  ")
    );
    if let Some(p) = Path::new(out).parent() {
        let _ = std::fs::create_dir_all(p);
    }
    std::fs::write(out, json).expect("write the JSON");
    eprintln!("wrote {out}");
}
