//! The FIB from a `keyplane serve` table: an in-process service (in the
//! switch namespace, on 127.0.0.1 there), an othello MAC table written
//! through the gRPC client (what `keyplane ctl write` sends), and the switch
//! following it with `--controller` semantics (no local FIB, no learning,
//! unknown destinations dropped). Writes to the table change forwarding
//! live: a host whose MAC is moved to another port becomes unreachable
//! from the others, and reachable again when moved back.

mod common;

use common::*;
use keyplane_control::client::{self, insert, modify};
use keyplane_control::keys::raw_key;
use keyplane_control::pb;
use keyplane_control::server::{self, ServeConfig, StoreConfig};
use keyplane_switch::decide::{Reason, Unknown};
use keyplane_switch::{Config, Running, Shutdown};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Waits (bounded) until the switch has applied the table's `seq`.
fn wait_seq(sw: &Running, seq: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while sw.counters.applied_sequence.load(Ordering::Relaxed) < seq {
        assert!(Instant::now() < deadline, "the switch did not reach sequence {seq}: {}", sw.counters.summary());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn l2_fib_follows_a_serve_table() {
    if skip() {
        return;
    }
    let t = Topo::new("ctl", 3, false);
    // The service lives in the switch namespace (sockets made there stay there).
    let rt = t
        .net
        .enter(&t.sw, || tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build())
        .unwrap()
        .unwrap();
    let cfg = ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreConfig::Dir(t.dir.join("store")),
        metrics: None,
        tls: None,
        retain: Default::default(),
    };
    let srv = t.net.enter(&t.sw, || rt.block_on(server::start(cfg))).unwrap().unwrap();
    let url = format!("http://{}", srv.addr);
    let write = |updates: Vec<pb::Update>| -> u64 {
        t.net
            .enter(&t.sw, || {
                rt.block_on(async {
                    let mut c = client::connect(&url).await.unwrap();
                    c.write(pb::WriteRequest { table: "fib".into(), updates }).await.unwrap().into_inner().sequence
                })
            })
            .unwrap()
    };
    t.net
        .enter(&t.sw, || {
            rt.block_on(async {
                let mut c = client::connect(&url).await.unwrap();
                c.create_table(pb::CreateTableRequest {
                    name: "fib".into(),
                    structure: "othello".into(),
                    value_bits: 4,
                    options: [("filtered".to_string(), "8".to_string())].into(),
                    key_format: pb::KeyFormat::Mac as i32,
                    ..Default::default()
                })
                .await
                .unwrap();
            })
        })
        .unwrap();
    assert_eq!(write((0..3).map(|i| insert(raw_key(host_mac(i).to_vec()), i as u64)).collect()), 3);

    // `keyplane switch --controller URL --table fib --no-learn --unknown drop` (no --fib).
    let mut cfg = Config::new(t.ports(), "");
    cfg.controller = Some(url.clone());
    cfg.table = Some("fib".into());
    cfg.learn = Some(false);
    cfg.unknown = Unknown::Drop;
    cfg.validate().unwrap();
    let stop = Shutdown::new();
    let sw = t.start(&cfg, &stop);
    wait_seq(&sw, 3);
    for i in 0..3 {
        assert_eq!(sw.fib.load().table().get(&host_mac(i)), Some(i as u64), "h{i} on port {i} from the service");
    }
    for (a, b) in [(0, 1), (1, 0), (0, 2), (2, 1)] {
        let (s, r) = t.ping(a, t.v4(b), 3, "0.05");
        assert!(s == 3 && r > 0, "h{a} -> h{b} through the service's FIB: {r}/{s}");
    }

    // Move h2's MAC to port 0 in the table (an Othello delete leaves the
    // key's slots, so a move is the deterministic change): frames for h2 now
    // go out p0, so h1 no longer reaches it and h0's are dropped as
    // "destination behind the ingress port".
    assert_eq!(write(vec![modify(raw_key(host_mac(2).to_vec()), 0)]), 4);
    wait_seq(&sw, 4);
    assert_eq!(sw.fib.load().table().get(&host_mac(2)), Some(0), "h2 moved to port 0 in the running FIB");
    let filtered_before = sw.counters.total().dropped[Reason::Filtered.index()];
    let (s, r) = t.ping(1, t.v4(2), 3, "0.05");
    assert_eq!((s, r), (3, 0), "h1 -> h2 fails once h2's MAC points at port 0");
    let (s, r) = t.ping(0, t.v4(2), 3, "0.05");
    assert_eq!((s, r), (3, 0), "h0 -> h2 fails: the FIB sends it back to its own port");
    assert!(sw.counters.total().dropped[Reason::Filtered.index()] >= filtered_before + 3, "{}", sw.counters.summary());
    let (s, r) = t.ping(0, t.v4(1), 3, "0.05");
    assert!(s == 3 && r > 0, "h0 -> h1 unaffected: {r}/{s}");

    // Move it back: reachable again, through a live delta (no blob swap after the first).
    assert_eq!(write(vec![modify(raw_key(host_mac(2).to_vec()), 2)]), 5);
    wait_seq(&sw, 5);
    let (s, r) = t.ping(1, t.v4(2), 3, "0.05");
    assert!(s == 3 && r > 0, "h1 -> h2 after moving back: {r}/{s}");
    let ev = &sw.counters.events;
    assert_eq!(ev.deltas_applied.load(Ordering::Relaxed), 2, "{}", sw.counters.summary());
    assert_eq!(ev.deltas_refused_lost.load(Ordering::Relaxed), 0);
    assert!(sw.counters.prometheus().contains("keyplane_switch_applied_sequence 5\n"));

    stop.stop();
    let fin = sw.join().unwrap();
    assert!(fin.summary().contains("applied_sequence: 5"), "{}", fin.summary());
    t.net.enter(&t.sw, || rt.block_on(srv.stop())).unwrap().unwrap();
}

#[test]
fn controller_config_is_checked() {
    let mut c = Config::new(vec!["p0".into()], "");
    assert!(c.validate().unwrap_err().to_string().contains("--fib"));
    c.controller = Some("http://127.0.0.1:1".into());
    assert!(c.validate().unwrap_err().to_string().contains("--table"));
    c.table = Some("fib".into());
    c.validate().unwrap();
    assert!(!c.learning(), "a controller owns the FIB: no learning");
    c.deltas = Some("/tmp/x".into());
    assert!(c.validate().unwrap_err().to_string().contains("--deltas"));
    c.deltas = None;
    c.learn = Some(true);
    assert!(c.validate().is_err());
}
