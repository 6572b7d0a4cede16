//! Worker threads: one per queue of a 2-queue veth, each with its own AF_XDP (or AF_PACKET
//! queue-mapped fanout) port opened inside its thread; every frame sent is counted exactly once across the
//! workers, and stop() ends them with their counters.

use keyplane_net::testnet::{self, TestNet};
use keyplane_net::workers::spawn_workers;
use keyplane_net::{Burst, FanoutMode, IoKind, PortOptions, PortStats, Shutdown, open};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const ETHERTYPE_TEST: u16 = 0x88b5;

fn run(kind: IoKind, tag: &str) {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let mut net = TestNet::new(tag).unwrap();
    let a = net.add_ns("a").unwrap();
    let b = net.add_ns("b").unwrap();
    net.veth_queues(&a, "va", &b, "vb", 2).unwrap();
    let stop = Shutdown::new();
    let seen = Arc::new(AtomicU64::new(0));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (ns, seen2) = (b.clone(), seen.clone());
    let pool = spawn_workers(2, &stop, move |ctx| {
        let opts = PortOptions { fanout_group: Some(4242), fanout_mode: FanoutMode::Queue, ..Default::default() };
        let mut port = keyplane_net::testnet::enter(&ns, || open("vb", kind, ctx.queue, &opts))??;
        ready_tx.send(()).unwrap();
        let mut burst = Burst::new();
        let mut mine = 0u64;
        while !ctx.is_stopped() {
            port.recv_timeout(&mut burst, Duration::from_millis(20))?;
            let n = burst.iter().filter(|f| f.len() >= 14 && f[12..14] == ETHERTYPE_TEST.to_be_bytes()).count();
            mine += n as u64;
            seen2.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok((mine, port.stats()))
    })
    .unwrap();
    for _ in 0..2 {
        ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    // Send from both TX queues of the peer (AF_XDP sockets on queues 0 and 1), with varied
    // source MACs so that flow hashing spreads them.
    let opts = PortOptions::default();
    let mut txs: Vec<_> =
        (0..2).map(|q| net.enter(&a, || open("va", IoKind::AfXdp, q, &opts)).unwrap().unwrap()).collect();
    let total = 2000u64;
    for i in 0..total {
        let mut f = vec![0u8; 60 + (i as usize % 200)];
        f[0..6].copy_from_slice(&testnet::mac(2).0);
        f[6..12].copy_from_slice(&testnet::mac(i as u32).0);
        f[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
        let t = &mut txs[i as usize % 2];
        assert!(t.tx_stage(&f).unwrap());
        if i % 32 == 31 {
            for t in &mut txs {
                t.tx_flush().unwrap();
            }
            // Pace: bounded wait for the receivers to keep up (the veth backlog holds 1000).
            let deadline = Instant::now() + Duration::from_secs(2);
            while seen.load(Ordering::Relaxed) + 64 < i && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    for t in &mut txs {
        t.tx_flush().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.load(Ordering::Relaxed) < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.stop();
    let results: Vec<(u64, PortStats)> = pool.join().into_iter().map(|r| r.unwrap()).collect();
    let counts: Vec<u64> = results.iter().map(|r| r.0).collect();
    eprintln!("{kind}: frames per worker {counts:?}");
    assert_eq!(counts.iter().sum::<u64>(), total, "{kind}: every frame counted exactly once");
    // Frames sent on TX queue q of the peer arrive on RX queue q: each worker gets its half.
    assert!(counts.iter().all(|&c| c > 0), "{kind}: a worker got nothing: {counts:?}");
    let stats_total: u64 = results.iter().map(|r| r.1.rx_frames).sum();
    assert!(stats_total >= total);
}

#[test]
fn af_xdp_workers_one_per_queue() {
    run(IoKind::AfXdp, "wx");
}

#[test]
fn af_packet_workers_share_by_fanout() {
    run(IoKind::AfPacket, "wp");
}
