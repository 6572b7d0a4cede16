//! The etcd store: a three-member etcd cluster started by the test on
//! local ports, two `keyplane serve` instances (child processes re-running
//! this test binary); writes under load, the leader is killed with SIGKILL,
//! the follower takes over, and every acknowledged write is there.

use keyplane_control::client::{self, insert};
use keyplane_control::follow::{Follower, Subscriber};
use keyplane_control::keys::raw_key;
use keyplane_control::pb;
use keyplane_control::server::{ServeConfig, StoreConfig, start};
use keyplane_control::table::Retain;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A process killed (SIGKILL) and reaped on drop, also on panic.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Etcd {
    _members: Vec<Proc>,
    _dirs: Vec<tempfile::TempDir>,
    clients: Vec<String>,
}

fn etcd_cluster() -> Etcd {
    let n = 3;
    let client_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let peer_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let cluster: Vec<String> = (0..n).map(|i| format!("m{i}=http://127.0.0.1:{}", peer_ports[i])).collect();
    let token = format!("kp-{}-{}", std::process::id(), client_ports[0]);
    let mut members = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..n {
        let dir = tempfile::tempdir().unwrap();
        let c = format!("http://127.0.0.1:{}", client_ports[i]);
        let p = format!("http://127.0.0.1:{}", peer_ports[i]);
        let child = Command::new("etcd")
            .args(["--name", &format!("m{i}")])
            .args(["--data-dir", dir.path().to_str().unwrap()])
            .args(["--listen-client-urls", &c, "--advertise-client-urls", &c])
            .args(["--listen-peer-urls", &p, "--initial-advertise-peer-urls", &p])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-token", &token, "--initial-cluster-state", "new"])
            .args(["--max-request-bytes", "33554432", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd starts");
        members.push(Proc(child));
        dirs.push(dir);
    }
    Etcd {
        _members: members,
        _dirs: dirs,
        clients: client_ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect(),
    }
}

async fn wait_etcd(endpoints: &[String]) {
    let t = Instant::now();
    loop {
        if let Ok(mut c) = etcd_client::Client::connect(endpoints, None).await {
            if c.put("/kp-health", "1", None).await.is_ok() {
                return;
            }
        }
        assert!(t.elapsed() < Duration::from_secs(30), "etcd cluster did not come up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The child side: a service on the etcd endpoints in KP_ETCD.
#[test]
#[ignore = "run by etcd_leader_failover_loses_no_acknowledged_write as a child process"]
fn etcd_child_server() {
    let Ok(eps) = std::env::var("KP_ETCD") else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async move {
        let cfg = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            store: StoreConfig::Etcd {
                endpoints: eps.split(',').map(String::from).collect(),
                prefix: "/keyplane/".into(),
            },
            metrics: None,
            tls: None,
            retain: Retain::default(),
        };
        let r = start(cfg).await.expect("service starts");
        println!("LISTEN {}", r.addr);
        r.wait().await.unwrap();
    });
}

fn spawn_server(endpoints: &[String]) -> (Proc, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "etcd_child_server", "--nocapture", "--test-threads", "1"])
        .env("KP_ETCD", endpoints.join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let p = Proc(child);
    loop {
        let l = lines.next().expect("child printed its address").unwrap();
        // libtest prints "test NAME ... " first, on the same line.
        if let Some(a) = l.split("LISTEN ").nth(1) {
            let url = format!("http://{}", a.trim());
            // Keep draining the pipe so the child never blocks on it.
            std::thread::spawn(move || for _ in lines {});
            return (p, url);
        }
    }
}

fn key(i: u64) -> Vec<u8> {
    i.to_le_bytes().to_vec()
}

async fn write_batch(url: &str, first: u64, n: u64) -> Result<u64, tonic::Status> {
    let mut c = client::connect(url).await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let ups = (first..first + n).map(|i| insert(raw_key(key(i)), i % 251)).collect();
    let r =
        tokio::time::timeout(Duration::from_secs(10), c.write(pb::WriteRequest { table: "t".into(), updates: ups }))
            .await
            .map_err(|_| tonic::Status::deadline_exceeded("write timed out"))??;
    Ok(r.into_inner().sequence)
}

async fn read_all(url: &str) -> BTreeMap<Vec<u8>, u64> {
    let mut c = client::connect(url).await.unwrap();
    let mut s = c.read(pb::ReadRequest { table: "t".into(), keys: Vec::new() }).await.unwrap().into_inner();
    let mut out = BTreeMap::new();
    while let Some(m) = s.message().await.unwrap() {
        for e in m.entries {
            let Some(pb::key::Key::Raw(k)) = e.key.and_then(|k| k.key) else { panic!("raw keys") };
            out.insert(k, e.value);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_leader_failover_loses_no_acknowledged_write() {
    if Command::new("etcd").arg("--version").output().is_err() {
        println!("skipping: no etcd binary (apt-get install etcd-server)");
        return;
    }
    let etcd = etcd_cluster();
    wait_etcd(&etcd.clients).await;
    let (a, url_a) = spawn_server(&etcd.clients);
    // A is alone: it becomes leader; create the table through it.
    let t0 = Instant::now();
    loop {
        let mut c = client::connect(&url_a).await.unwrap();
        let r = c
            .create_table(pb::CreateTableRequest {
                name: "t".into(),
                structure: "othello".into(),
                value_bits: 8,
                ..Default::default()
            })
            .await;
        if r.is_ok() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "A never led: {r:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("A leads at {url_a}; table created");
    let (_b, url_b) = spawn_server(&etcd.clients);
    eprintln!("B follows at {url_b}");
    let mut acked: Vec<(u64, u64)> = Vec::new(); // (first key, count)
    let mut next = 0u64;
    // Writes through A, and through B (a follower: it forwards to A).
    for round in 0..60 {
        let url = if round % 3 == 2 { &url_b } else { &url_a };
        match write_batch(url, next, 10).await {
            Ok(_) => acked.push((next, 10)),
            Err(s) => assert!(round % 3 == 2, "write through the leader failed: {s}"),
        }
        next += 10;
    }
    assert!(acked.len() >= 40, "only {} of 60 batches acknowledged before the kill", acked.len());
    eprintln!("{} batches acknowledged before the kill", acked.len());
    // B follows the log: it reads what A acknowledged.
    let t1 = Instant::now();
    loop {
        let b = read_all(&url_b).await;
        if acked.iter().all(|&(f, n)| (f..f + n).all(|i| b.get(&key(i)) == Some(&(i % 251)))) {
            break;
        }
        assert!(t1.elapsed() < Duration::from_secs(10), "B does not follow A's writes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Under load: a writer task keeps writing to A while A is killed.
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let ua = url_a.clone();
    let ub = url_b.clone();
    let load = tokio::spawn(async move {
        let mut acked = Vec::new();
        let mut first_on_b: Option<Instant> = None;
        let mut target = ua.clone();
        let started = Instant::now();
        let mut killed_at: Option<Instant> = None;
        while started.elapsed() < Duration::from_secs(60) {
            if killed_at.is_none() && stop_rx.try_recv().is_ok() {
                killed_at = Some(Instant::now());
            }
            match write_batch(&target, next, 10).await {
                Ok(_) => {
                    acked.push((next, 10));
                    if target == ub && first_on_b.is_none() {
                        first_on_b = Some(Instant::now());
                    }
                }
                Err(_) => {
                    target = ub.clone();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            next += 10;
            if first_on_b.is_some() && acked.len() > 100 {
                break;
            }
        }
        let takeover = killed_at.zip(first_on_b).map(|(k, f)| f.saturating_duration_since(k));
        (acked, takeover)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(a); // SIGKILL: the lease is no longer renewed
    let _ = stop_tx.send(());
    let (more, takeover) = load.await.unwrap();
    let takeover = takeover.expect("B took over and acknowledged writes");
    println!("takeover: first write acknowledged by B {:.2} s after the leader was killed", takeover.as_secs_f64());
    acked.extend(more);
    let got = read_all(&url_b).await;
    let mut n = 0;
    for &(f, c) in &acked {
        for i in f..f + c {
            assert_eq!(got.get(&key(i)), Some(&(i % 251)), "acknowledged key {i} lost");
            n += 1;
        }
    }
    println!("{n} acknowledged updates, all present after the failover");
    // A subscriber on the new leader converges to its table.
    let mut c = client::connect(&url_b).await.unwrap();
    let d = c.describe_table(pb::DescribeTableRequest { name: "t".into() }).await.unwrap().into_inner();
    let mut f = Follower::new(Subscriber::new(&url_b, "t"));
    tokio::time::timeout(Duration::from_secs(10), f.wait_for(d.sequence)).await.unwrap().unwrap();
    let t = f.handle().current().unwrap();
    for (k, v) in &got {
        assert_eq!(t.get(k), Some(*v));
    }
}
