//! `keyplane serve` / `ctl` / `follow` end to end with real processes:
//! the ctl commands, a follower process, crash safety under kill -9, and a
//! Python client generated from the .proto.

mod common;

use common::{bin, ok, run};
use keyplane_control::client::{self, delete, insert};
use keyplane_control::follow::{Follower, Subscriber};
use keyplane_control::keys::raw_key;
use keyplane_control::pb;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `keyplane serve` process, killed (SIGKILL) on drop.
struct Serve {
    child: Child,
    url: String,
}

impl Serve {
    fn start(store: &Path, port: u16) -> Self {
        let mut child = Command::new(bin())
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--store"])
            .arg(store)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start keyplane serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("keyplane serve: listening on ").unwrap_or_else(|| panic!("{line}"));
        let addr = addr.split_whitespace().next().unwrap().to_string();
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn ctl_and_follow_commands() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Serve::start(&dir.path().join("store"), 0);
    let u = srv.url.as_str();
    ok(&run(&[
        "ctl",
        "--server",
        u,
        "create",
        "fib",
        "--structure",
        "othello",
        "--value-bits",
        "8",
        "-O",
        "fingerprint_bits=8",
        "--key-format",
        "ipv4",
    ]));
    let input = dir.path().join("fib.tsv");
    std::fs::write(&input, "10.0.0.1\t5\n10.0.0.2\t7\n10.0.0.3\t9\n").unwrap();
    let w = ok(&run(&["ctl", "--server", u, "write", "fib", "-i", input.to_str().unwrap()]));
    assert_eq!(w.trim(), "3 updates applied; sequence 3");
    assert_eq!(ok(&run(&["ctl", "--server", u, "read", "fib"])), "10.0.0.1\t5\n10.0.0.2\t7\n10.0.0.3\t9\n");
    assert_eq!(
        ok(&run(&["ctl", "--server", u, "read", "fib", "--key", "10.0.0.2", "--key", "10.9.9.9"])),
        "10.0.0.2\t7\n"
    );
    // Writing a present key modifies it.
    std::fs::write(&input, "10.0.0.1\t6\n").unwrap();
    ok(&run(&["ctl", "--server", u, "write", "fib", "-i", input.to_str().unwrap()]));
    let del = dir.path().join("del.txt");
    std::fs::write(&del, "10.0.0.3\n").unwrap();
    ok(&run(&["ctl", "--server", u, "write", "fib", "-i", del.to_str().unwrap(), "--delete"]));
    assert_eq!(ok(&run(&["ctl", "--server", u, "read", "fib"])), "10.0.0.1\t6\n10.0.0.2\t7\n");
    let d = ok(&run(&["ctl", "--server", u, "describe", "fib"]));
    assert!(d.contains("n\t2\n") && d.contains("sequence\t5\n") && d.contains("options\tfingerprint_bits=8\n"), "{d}");
    assert!(ok(&run(&["ctl", "--server", u, "list"])).starts_with("fib\tothello\tn=2\tsequence=5"));
    // The service refuses bad batches, naming the entry: a malformed key
    // for the table's format, a DELETE of an absent key.
    std::fs::write(&del, "10.0.0.1\n10.0.0.7\n").unwrap();
    for (kf, msg) in
        [("text", "update 0: ipv4 key must be 4 bytes, got 8"), ("ipv4", "update 1: DELETE of a key that is absent")]
    {
        let o =
            run(&["ctl", "--server", u, "write", "fib", "-i", del.to_str().unwrap(), "--delete", "--key-format", kf]);
        assert_eq!(o.status.code(), Some(7));
        assert!(String::from_utf8_lossy(&o.stderr).contains(msg), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(
        ok(&run(&["ctl", "--server", u, "read", "fib"])),
        "10.0.0.1\t6\n10.0.0.2\t7\n",
        "refused batches change nothing"
    );
    // A follower process keeps a blob file current.
    let out = dir.path().join("fib.kpl");
    let f = ok(&run(&[
        "follow",
        "--controller",
        u,
        "--table",
        "fib",
        "--out",
        out.to_str().unwrap(),
        "--until-sequence",
        "5",
    ]));
    assert!(f.contains("at sequence 5"), "{f}");
    let t = keyplane_any::AnyLookup::from_bytes(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(t.get(&[10, 0, 0, 1]), Some(6));
    assert_eq!(t.get(&[10, 0, 0, 2]), Some(7));
    // (10.0.0.3 was deleted: Othello leaves its slots as they were, so the
    // lookup form may still answer it; the control form no longer has it.)
    ok(&run(&["ctl", "--server", u, "drop", "fib"]));
    let o = run(&["ctl", "--server", u, "describe", "fib"]);
    assert_eq!(o.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
}

async fn fresh_blob(url: &str) -> (u64, Vec<u8>) {
    let mut c = client::connect(url).await.unwrap();
    let mut s =
        c.subscribe(pb::SubscribeRequest { table: "t".into(), ..Default::default() }).await.unwrap().into_inner();
    match s.message().await.unwrap().unwrap().update {
        Some(pb::subscribe_response::Update::Snapshot(s)) => (s.sequence, s.blob),
        other => panic!("snapshot expected, got {other:?}"),
    }
}

/// Trials: KEYPLANE_CRASH_TRIALS (default 10; the 100-trial run is the
/// `crash_trials` example of keyplane-control). After each trial's checks
/// the oldest keys beyond 20 000 are deleted, so every trial costs about
/// the same (an only-growing table made each restart, full read and
/// convergence slower than the last: 100 trials did not finish in 200 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_safety_kill9_under_write_load() {
    let trials: usize = std::env::var("KEYPLANE_CRASH_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    const KEEP: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let port = free_port();
    let mut srv = Serve::start(&store, port);
    let url = srv.url.clone();
    let mut c = client::connect(&url).await.unwrap();
    c.create_table(pb::CreateTableRequest {
        name: "t".into(),
        structure: "othello".into(),
        value_bits: 16,
        key_format: pb::KeyFormat::U64 as i32,
        ..Default::default()
    })
    .await
    .unwrap();
    // A follower that lives across every crash.
    let sub = Subscriber::new(&url, "t").backoff(Duration::from_millis(10), Duration::from_millis(100));
    let mut follower = Follower::new(sub);
    let fh = follower.handle();
    let applied = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let ap = applied.clone();
    let ftask = tokio::spawn(async move {
        loop {
            if let Ok(s) = follower.step().await {
                ap.store(s, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let mut rng = StdRng::seed_from_u64(17);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut updates_applied = 0u64;
    let mut total_acked = 0usize;
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
                    let first = next.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                    let keys: Vec<u64> = (first..first + n).collect();
                    let updates = keys.iter().map(|&k| insert(raw_key(k.to_le_bytes().to_vec()), k & 0xffff)).collect();
                    match c.write(pb::WriteRequest { table: "t".into(), updates }).await {
                        Ok(_) => acks.lock().unwrap().push(keys),
                        Err(_) => {
                            lost.lock().unwrap().push(keys);
                            return;
                        }
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..400))).await;
        srv.kill9();
        for w in writers {
            w.await.unwrap();
        }
        srv = Serve::start(&store, port);
        let mut c = client::connect(&srv.url).await.unwrap();
        let (entries, seq) = client::read_all(&mut c, "t", Vec::new()).await.unwrap();
        let got: BTreeMap<u64, u64> =
            entries.into_iter().map(|(k, v)| (u64::from_le_bytes(k.try_into().expect("8-byte keys")), v)).collect();
        for b in acks.lock().unwrap().iter() {
            total_acked += b.len();
            updates_applied += b.len() as u64;
            for &k in b {
                acked.insert(k, k & 0xffff);
            }
        }
        for (k, v) in &acked {
            assert_eq!(got.get(k), Some(v), "trial {trial}: acknowledged key {k} lost");
        }
        // Batches cut by the kill are all or nothing.
        for b in lost.lock().unwrap().iter() {
            let present = b.iter().filter(|k| got.contains_key(k)).count();
            assert!(present == 0 || present == b.len(), "trial {trial}: a batch half applied ({present}/{})", b.len());
            if present > 0 {
                updates_applied += b.len() as u64;
                for &k in b {
                    acked.insert(k, k & 0xffff);
                }
            }
        }
        assert_eq!(got.len(), acked.len(), "trial {trial}: nothing beyond whole batches");
        assert_eq!(seq, updates_applied, "trial {trial}: the sequence counts the updates applied");
        // The follower reconnects, resyncs and converges to a fresh export's bytes.
        let deadline = Instant::now() + Duration::from_secs(20);
        while applied.load(std::sync::atomic::Ordering::SeqCst) != seq
            || fh.current().is_none_or(|t| t.to_bytes() != futures_blob(&srv.url, seq))
        {
            assert!(Instant::now() < deadline, "trial {trial}: follower did not converge");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Keep the table bounded: delete the oldest keys beyond KEEP
        // (durable DELETE batches; the next trial checks them gone).
        if acked.len() > KEEP {
            let old: Vec<u64> = acked.keys().take(acked.len() - KEEP).copied().collect();
            for chunk in old.chunks(10_000) {
                let updates = chunk.iter().map(|&k| delete(raw_key(k.to_le_bytes().to_vec()))).collect();
                c.write(pb::WriteRequest { table: "t".into(), updates }).await.unwrap();
                updates_applied += chunk.len() as u64;
                for k in chunk {
                    acked.remove(k);
                }
            }
        }
        let _ = fresh_blob;
    }
    ftask.abort();
    eprintln!("crash safety: {trials} kill -9 trials, {total_acked} acknowledged inserts, 0 lost");
}

/// A fresh export of the table at `seq`, fetched from a blocking helper
/// thread (the caller is inside the runtime).
fn futures_blob(url: &str, seq: u64) -> Vec<u8> {
    let url = url.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (s, b) = rt.block_on(fresh_blob(&url));
        if s == seq { b } else { Vec::new() }
    })
    .join()
    .unwrap()
}

#[test]
fn python_client_from_the_proto() {
    let py = std::env::var("KEYPLANE_PYTHON").unwrap_or_else(|_| {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/pyenv/bin/python");
        if Path::new(venv).exists() { venv.to_string() } else { "python3".to_string() }
    });
    let probe = Command::new(&py).args(["-c", "import grpc, grpc_tools"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("KEYPLANE_REQUIRE_PYTHON_GRPC").is_err(),
            "{py} lacks grpcio / grpcio-tools (scripts/test.sh installs them)"
        );
        println!(
            "python_client_from_the_proto: skipped, {py} has no grpcio + grpcio-tools (scripts/test.sh installs them)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stubs = dir.path().join("gen");
    std::fs::create_dir_all(&stubs).unwrap();
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let o = Command::new(&py)
        .args(["-m", "grpc_tools.protoc", "-I", proto, "--python_out"])
        .arg(&stubs)
        .arg("--grpc_python_out")
        .arg(&stubs)
        .arg(format!("{proto}/keyplane/v1/control.proto"))
        .output()
        .unwrap();
    ok(&o);
    // Regular packages, not namespace ones: an installed `keyplane` Python
    // package (keyplane-py) would otherwise shadow the generated `keyplane.v1`.
    for pkg in ["keyplane", "keyplane/v1"] {
        std::fs::write(stubs.join(pkg).join("__init__.py"), "").unwrap();
    }
    let srv = Serve::start(&dir.path().join("store"), 0);
    let o = Command::new(&py)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/control_client.py"))
        .arg(&stubs)
        .arg(srv.url.trim_start_matches("http://"))
        .output()
        .unwrap();
    assert_eq!(ok(&o).trim(), "python client ok");
}
