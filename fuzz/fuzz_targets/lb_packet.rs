//! keyplane-lb's packet path on arbitrary frames: the parser, the
//! classification against the services and the whole burst decision
//! (Concury lookup, DSR / IPIP rewrite, flow reports) never panic; every
//! output frame parses as IP and goes to a configured backend's MAC.
#![no_main]

use keyplane_lb::config::Config;
use keyplane_lb::control::{ControlSide, Mode};
use keyplane_lb::dataplane::{PortInfo, Report, TxBatch, Worker, classify};
use keyplane_lb::metrics::Counters;
use keyplane_lb::packet::{Frame, parse};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

const CONFIG: &str = r#"
[health]
kind = "none"
[[vip]]
address = "198.18.100.1"
port = 80
protocol = "tcp"
method = "dsr"
[[vip.backend]]
address = "198.18.0.11"
[[vip.backend]]
address = "198.18.0.12"
weight = 3
[[vip]]
address = "fd00:100::1"
port = 53
protocol = "udp"
method = "ipip"
[[vip.backend]]
address = "fd00::11"
[[vip.backend]]
address = "198.18.0.13"
"#;

fuzz_target!(|data: &[u8]| {
    let counters = Arc::new(Counters::default());
    let ctl = ControlSide::new(Mode::Concury, Config::parse(CONFIG, &[]).unwrap(), counters.clone()).unwrap();
    let engine = ctl.engine();
    let services = ctl.services();
    let svc = services.load();
    let port = PortInfo { mac: [2, 0, 0, 0, 0, 1], v4: Some("198.18.0.2".parse().unwrap()), v6: Some("fd00::2".parse().unwrap()) };
    let (tx, _rx) = sync_channel::<Report>(64);
    let mut w = Worker::new(&engine, port, Some(tx), 1000, counters);
    w.neighbors.due(&svc.neighbors, Instant::now());
    for (i, a) in svc.neighbors.iter().enumerate() {
        w.neighbors.learn(*a, [2, 0xb, 0, 0, 0, i as u8], Instant::now());
    }
    // Frames: 2-byte length prefixes; the destination MAC is forced to the port's.
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 && frames.len() < 64 {
        let n = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2).min(2048);
        let mut f = rest[2..2 + n].to_vec();
        if f.len() >= 6 {
            f[..6].copy_from_slice(&port.mac);
        }
        let _ = parse(&f);
        let _ = classify(&svc, &f);
        frames.push(f);
        rest = &rest[2 + n..];
    }
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let mut out = TxBatch::default();
    w.process(&svc, &refs, &mut out);
    assert!(out.len() <= refs.len());
    for f in out.frames() {
        assert!(matches!(parse(f), Frame::Ip(_)), "output frame does not parse");
        assert_eq!(&f[6..12], &port.mac);
        assert_eq!(&f[..5], &[2, 0xb, 0, 0, 0], "output goes to a backend's MAC");
    }
});
