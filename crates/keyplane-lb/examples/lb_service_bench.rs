//! Benchmark of `keyplane lb` (not a test): prints one JSON object per
//! measurement and writes them all to `docs/bench/lb-service.json` (or the
//! path in `OUT`).
//!
//! 1. Packet path per core, in memory: the worker's whole burst path
//!    (parse, classify, lookup, DSR rewrite, counters) on 64- and 1500-byte
//!    frames, one VIP and 64 mixed VIPs, 1M tracked connections, Concury vs
//!    Maglev mode; and the bare Concury burst lookups (one-VIP vs mixed).
//! 2. New-connection rate of the control side (reports recorded per second).
//! 3. Memory at 1M (and `CONNS_10M=1`: 10M) connections: Concury data plane
//!    vs Maglev table + connection tracking.
//! 4. Pool change → data plane updated, at 1M connections.
//! 5. (`NET=1`, root) pps through the LB on the namespace testbed (Concury
//!    `--io xdp`, Concury / Maglev on AF_XDP or AF_PACKET), and the
//!    nftables LB on the same topology and generator.
//! 6. (`XDP_POOL=1`, root) pool change → `--io xdp` data plane updated, at
//!    `CONNS` connections on one VIP.
//!
//! `cargo run --release -p keyplane-lb --example lb_service_bench`
//! (`NET=1 ONLY_NET=1 OUT=...`: only the namespace run; `ONLY_MEM=1
//! CONNS_10M=1 OUT=...`: only the memory and pool-change rows; `ONLY_BURST=1
//! OUT=...`: only the bare Concury burst lookups; `ONLY_NEW=1 OUT=...`: only
//! the new-connection rate.)

use keyplane::lb::Balancer;
use keyplane::lb::maglev::{DEFAULT_TABLE_SIZE, Maglev};
use keyplane::lb::{Backend, Control, Params, PoolOp, StateKey, Vip};
use keyplane_lb::config::Config;
use keyplane_lb::control::{ControlSide, Mode};
use keyplane_lb::dataplane::{Engine, Event, PortInfo, Report, TxBatch, Worker};
use keyplane_lb::metrics::Counters;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

struct Out(Vec<String>);
impl Out {
    fn put(&mut self, j: String) {
        println!("{j}");
        self.0.push(j);
    }
}

fn vip_addr(v: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 100 + (v / 250) as u8, 1 + (v % 250) as u8)
}

fn config(vips: usize) -> String {
    let mut s = format!("[lb]\nmax_connections = {}\n[health]\nkind = \"none\"\n", env("CONNS", 1_000_000));
    for v in 0..vips {
        s += &format!("[[vip]]\naddress = \"{}\"\nport = 80\nprotocol = \"tcp\"\nmethod = \"dsr\"\n", vip_addr(v));
        for b in 0..8 {
            s += &format!("[[vip.backend]]\naddress = \"198.18.0.{}\"\n", 11 + b);
        }
    }
    s
}

/// Pool change → `--io xdp` data plane updated, at `conns` tracked
/// connections on one VIP (root: the XDP program's maps are made, the
/// program is loaded, not attached): a reload that reweights one backend
/// (`ControlSide::apply_config`: `Control::update_pool` + `DataPlane::apply`),
/// then the publication into the inactive generation and the flip
/// (`Program::publish`: `DataPlane::images`, copies, VIP-map updates, one
/// atomic store, then the wait until no run of the program still reads the
/// old generation).
fn xdp_pool(out: &mut Out, conns: u32) {
    use keyplane_lb::xdp::{Program, Sizes};
    let t = Instant::now();
    let (mut ctl, _) = loaded(Mode::Concury, 1, conns);
    eprintln!("xdp pool change: {conns} connections loaded in {:.1} s", t.elapsed().as_secs_f64());
    let Engine::Concury(dp) = ctl.engine() else { unreachable!("Concury") };
    let mut prog = Program::load(Sizes::for_config(conns as usize, 1, 12)).expect("XDP program (root)");
    prog.set_port(&PORT).unwrap();
    let mac = |_: &IpAddr| Some([2, 0xb, 0, 0, 0, 1]);
    let (_, images) = dp.images();
    let first = prog.publish(&images, &ctl.services().load(), &mac).unwrap();
    let rounds = env("XDP_POOL_ROUNDS", 10);
    let mm = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        format!("[{:.2},{:.2},{:.2}]", v[0], v[v.len() / 2], v[v.len() - 1])
    };
    // Spaced changes (100 ms apart: the grace period of the last flip has
    // passed), then back-to-back changes (every publication may wait).
    for (spacing, what) in [(100u64, "spaced_100ms"), (0, "back_to_back")] {
        let (mut apply, mut publish, mut waited, mut write) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            std::thread::sleep(Duration::from_millis(spacing));
            let mut text = config(1);
            text = text.replacen(
                "address = \"198.18.0.11\"\n",
                &format!("address = \"198.18.0.11\"\nweight = {}\n", 2 + r % 3),
                1,
            );
            let cfg = Config::parse(&text, &[]).unwrap();
            let t = Instant::now();
            ctl.apply_config(cfg).unwrap();
            apply.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let (_, images) = dp.images();
            let p = prog.publish(&images, &ctl.services().load(), &mac).unwrap();
            publish.push(t.elapsed().as_secs_f64() * 1e3);
            write.push(p.write_us as f64 / 1e3);
            waited.push(p.grace_us as f64 / 1e3);
        }
        let mut total: Vec<f64> = apply.iter().zip(&publish).map(|(a, b)| a + b).collect();
        out.put(format!(
            "{{\"bench\":\"xdp_pool_change\",\"changes_spacing\":\"{what}\",\"connections\":{conns},\"vips\":1,\"changes\":{rounds},\"heap_words\":{},\"apply_ms_min_median_max\":{},\"xdp_publish_ms_min_median_max\":{},\"xdp_write_flip_ms_min_median_max\":{},\"quiesce_ms_min_median_max\":{},\"pool_change_to_xdp_ms_min_median_max\":{},\"what\":\"reload reweighting one backend (ControlSide::apply_config) + DataPlane::images and Program::publish: write the next generation, flip, wait until no program run still reads the old one (per-CPU kp_epoch)\"}}",
            first.words,
            mm(&mut apply),
            mm(&mut publish),
            mm(&mut write),
            mm(&mut waited),
            mm(&mut total),
        ));
    }
}

/// A TCP frame of `size` bytes from connection `c` to VIP `v`.
fn frame(c: u32, v: usize, size: usize, flags: u8) -> Vec<u8> {
    let mut f = vec![0u8; size.max(54)];
    f[0..6].copy_from_slice(&[2, 0x1b, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0xc, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[8, 0]);
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&(0xc613_0000u32 + (c >> 8)).to_be_bytes());
    f[30..34].copy_from_slice(&vip_addr(v).octets());
    f[34..36].copy_from_slice(&(1024 + (c & 0xff) as u16 * 64 + (c >> 24) as u16).to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[46] = 0x50;
    f[47] = flags;
    f
}

fn key(c: u32) -> StateKey {
    StateKey::four_tuple(
        IpAddr::V4(Ipv4Addr::from(0xc613_0000u32 + (c >> 8))),
        1024 + (c & 0xff) as u16 * 64 + (c >> 24) as u16,
        80,
        6,
    )
}

const PORT: PortInfo = PortInfo { mac: [2, 0x1b, 0, 0, 0, 1], v4: Some(Ipv4Addr::new(198, 18, 0, 2)), v6: None };

/// Builds a control side with `conns` connections tracked over `vips` VIPs
/// (Concury: reported; Maglev: learned by their first packet).
fn loaded(mode: Mode, vips: usize, conns: u32) -> (ControlSide, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let mut ctl = ControlSide::new(mode, Config::parse(&config(vips), &[]).unwrap(), counters.clone()).unwrap();
    let engine = ctl.engine();
    match &engine {
        Engine::Concury(dp) => {
            let ids: Vec<u32> = (0..vips).map(|v| ctl.vip_id(&Vip::new(vip_addr(v), 80, 6)).unwrap()).collect();
            for c in 0..conns {
                let v = c as usize % vips;
                let k = key(c);
                let b = dp.lookup(ids[v], k.as_ref()).unwrap();
                ctl.report(Report { vip: ids[v], key: k, backend: b, event: Event::New });
            }
        }
        Engine::Maglev(m) => {
            let mut m = m.lock().unwrap();
            for c in 0..conns {
                let v = c as usize % vips;
                let id = ctl.vip_id(&Vip::new(vip_addr(v), 80, 6)).unwrap();
                m.packet(id, key(c).as_ref());
            }
        }
    }
    ctl.refresh_all().unwrap();
    (ctl, counters)
}

fn neighbors(w: &mut Worker) {
    let all: Vec<IpAddr> = (0..8).map(|b| IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11 + b))).collect();
    w.neighbors.due(&all, Instant::now());
    for a in all {
        w.neighbors.learn(a, [2, 0xb, 0, 0, 0, 1], Instant::now());
    }
}

/// ns per packet through `Worker::process` over `frames`, best of `reps`.
fn path_ns(ctl: &ControlSide, frames: &[Vec<u8>], reps: usize) -> f64 {
    let engine = ctl.engine();
    let services = ctl.services();
    let svc = services.load();
    let mut w = Worker::new(&engine, PORT, None, 1, Arc::new(Counters::default()));
    neighbors(&mut w);
    let mut tx = TxBatch::default();
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        for chunk in refs.chunks(32) {
            tx.clear();
            w.process(&svc, chunk, &mut tx);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / refs.len() as f64);
    }
    best
}

fn main() {
    let mut out = Out(Vec::new());
    let conns = env("CONNS", 1_000_000) as u32;
    let n_frames = env("FRAMES", 1 << 18);
    let reps = env("REPS", 5);
    let host = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    eprintln!("host: {host}");

    let only_mem = env("ONLY_MEM", 0) == 1;
    let only_burst = env("ONLY_BURST", 0) == 1;
    let only_new = env("ONLY_NEW", 0) == 1;
    let only_net = env("ONLY_NET", 0) == 1 || only_mem || only_burst || only_new;
    // 1. Packet path per core.
    for mode in [Mode::Concury, Mode::Maglev] {
        if only_net {
            break;
        }
        for vips in [1usize, 64] {
            let t = Instant::now();
            let (ctl, counters) = loaded(mode, vips, conns);
            eprintln!("{mode:?} {vips} VIPs: {conns} connections loaded in {:.1} s", t.elapsed().as_secs_f64());
            for size in [64usize, 1500] {
                // Established traffic: random tracked connections (ACK packets).
                let mut x = 0x9e37_79b9u64;
                let frames: Vec<Vec<u8>> = (0..n_frames)
                    .map(|_| {
                        x = keyplane::hash::mix64(x);
                        let c = (x % conns as u64) as u32;
                        frame(c, c as usize % vips, size, 0x10)
                    })
                    .collect();
                let ns = path_ns(&ctl, &frames, reps);
                out.put(format!(
                    "{{\"bench\":\"packet_path\",\"mode\":\"{mode:?}\",\"vips\":{vips},\"frame_bytes\":{size},\"tracked\":{conns},\"ns_per_packet\":{ns:.2},\"mpps_per_core\":{:.3},\"io\":\"in-memory (Worker::process)\"}}",
                    1e3 / ns
                ));
            }
            let mem = counters.dataplane_bytes.get();
            out.put(format!(
                "{{\"bench\":\"memory\",\"mode\":\"{mode:?}\",\"vips\":{vips},\"connections\":{conns},\"dataplane_bytes\":{mem},\"bytes_per_connection\":{:.2},\"control_bytes\":{}}}",
                mem as f64 / conns as f64,
                counters.control_bytes.get()
            ));
        }
    }

    // 1b. Bare Concury burst lookups: one VIP vs 64 mixed VIPs (1M states).
    // Both data planes are built first, then timed in alternation (one VIP,
    // mixed, one VIP, ...) so that load changes on a shared machine hit both.
    if (!only_net || only_burst) && !only_new {
        let mut planes = Vec::new();
        for vips in [1usize, 64] {
            let mut ctl = Control::new(Params::default()).unwrap();
            let pool: Vec<(Backend, u32)> =
                (0..8).map(|b| (Backend::new(Ipv4Addr::new(198, 18, 0, 11 + b), 80), 1)).collect();
            let ids: Vec<u32> =
                (0..vips).map(|v| ctl.add_vip(Vip::new(vip_addr(v), 80, 6), &pool).unwrap().0).collect();
            for c in 0..conns {
                let b = pool[(c % 8) as usize].0;
                ctl.connection_start(ids[c as usize % vips], key(c).as_ref(), b).unwrap();
            }
            for &id in &ids {
                ctl.refresh(id).unwrap();
            }
            let vv: Vec<u32> =
                (0..n_frames).map(|i| ids[(keyplane::hash::mix64(i as u64) as u32 % conns) as usize % vips]).collect();
            planes.push((vips, ctl.export(), ids, vv));
        }
        let keys: Vec<StateKey> =
            (0..n_frames as u32).map(|i| key(keyplane::hash::mix64(i as u64) as u32 % conns)).collect();
        let krefs: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        // Third series: the mixed-VIP code path (`lookup_batch`) on the
        // one-VIP bursts: it separates the code's cost from the data's.
        let one_ids = vec![planes[0].2[0]; n_frames];
        let mut ns: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        let mut o = vec![None; 16];
        for _ in 0..env("BURST_ROUNDS", 15) {
            for (j, (vips, dp, ids, vv)) in planes.iter().chain(std::iter::once(&planes[0])).enumerate() {
                let vv = if j == 2 { &one_ids } else { vv };
                let mut r = dp.reader();
                let mut best = f64::MAX;
                for _ in 0..3 {
                    // This thread's CPU time: preemption by other processes
                    // on a shared machine is not in it.
                    let t = keyplane_net::cpu::this_thread_cpu_ns();
                    for (i, ks) in krefs.chunks(16).enumerate() {
                        if *vips == 1 && j == 0 {
                            r.lookup_batch_vip(ids[0], ks, &mut o);
                        } else {
                            r.lookup_batch(&vv[i * 16..i * 16 + ks.len()], ks, &mut o);
                        }
                    }
                    let ns = keyplane_net::cpu::this_thread_cpu_ns() - t;
                    best = best.min(ns as f64 / krefs.len() as f64);
                }
                ns[j].push(best);
            }
        }
        std::hint::black_box(&o);
        let ratios: Vec<f64> = ns[1].iter().zip(&ns[0]).map(|(m, one)| m / one).collect();
        let mm = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            (v[0], v[v.len() / 2], v[v.len() - 1])
        };
        let (a, b, c) = (mm(&ns[0]), mm(&ns[1]), mm(&ratios));
        let d = mm(&ns[2]);
        out.put(format!(
            "{{\"bench\":\"concury_burst_lookup\",\"states\":{conns},\"rounds\":{},\"one_vip_ns_min_med_max\":[{:.2},{:.2},{:.2}],\"mixed_64_vips_ns_min_med_max\":[{:.2},{:.2},{:.2}],\"ratio_per_round_min_med_max\":[{:.2},{:.2},{:.2}],\"mixed_path_one_vip_ns_min_med_max\":[{:.2},{:.2},{:.2}],\"what\":\"PacketReader bursts of 16: lookup_batch_vip (1 VIP) vs lookup_batch (64 mixed VIPs), alternating rounds, best of 3 passes each, thread CPU time\"}}",
            ns[0].len(),
            a.0, a.1, a.2, b.0, b.1, b.2, c.0, c.1, c.2, d.0, d.1, d.2
        ));
    }

    // 2. New-connection rate of the control side (Concury reports).
    if !only_net || only_new {
        let counters = Arc::new(Counters::default());
        let mut ctl = ControlSide::new(Mode::Concury, Config::parse(&config(1), &[]).unwrap(), counters).unwrap();
        let id = ctl.vip_id(&Vip::new(vip_addr(0), 80, 6)).unwrap();
        let b = Backend::new(Ipv4Addr::new(198, 18, 0, 11), 80);
        let n = 500_000u32;
        let t = Instant::now();
        for c in 0..n {
            ctl.report(Report { vip: id, key: key(c), backend: b, event: Event::New });
        }
        let s = t.elapsed().as_secs_f64();
        out.put(format!(
            "{{\"bench\":\"new_connections\",\"mode\":\"Concury\",\"reports\":{n},\"per_second\":{:.0}}}",
            n as f64 / s
        ));
    }

    // 3 + 4. Memory at 1M / 10M, pool change time at 1M.
    let sizes: Vec<u32> = if (only_net && !only_mem) || only_burst || only_new {
        vec![]
    } else if env("CONNS_10M", 0) == 1 {
        vec![1_000_000, 10_000_000]
    } else {
        vec![1_000_000]
    };
    for &n in &sizes {
        let mut ctl = Control::new(Params::default()).unwrap();
        let pool: Vec<(Backend, u32)> =
            (0..8).map(|b| (Backend::new(Ipv4Addr::new(198, 18, 0, 11 + b), 80), 1)).collect();
        let (id, _) = ctl.add_vip(Vip::new(vip_addr(0), 80, 6), &pool).unwrap();
        for c in 0..n {
            ctl.connection_start(id, key(c).as_ref(), pool[(c % 8) as usize].0).unwrap();
        }
        ctl.refresh(id).unwrap();
        let dp = Arc::new(ctl.export());
        let mut mg = Maglev::new(DEFAULT_TABLE_SIZE, n as usize, 32).unwrap();
        let mid = mg.add_vip(Vip::new(vip_addr(0), 80, 6), &pool).unwrap();
        for c in 0..n {
            mg.packet(mid, key(c).as_ref());
        }
        let (cm, mm) = (dp.memory_bytes(), mg.memory_bytes());
        // The service's control side: the Concury control plane and its
        // bounded connection table, both holding every connection.
        let cc = ctl.memory_bytes() - dp.memory_bytes();
        let mut ct = keyplane_lb::conntrack::ConnTable::new(n as usize);
        let mut ev = Vec::new();
        for c in 0..n {
            ct.insert(id, key(c), pool[(c % 8) as usize].0, &mut ev);
        }
        let ctb = ct.memory_bytes();
        // The connection table's share of a removal: O(1) mark, then sweeps
        // of REAP_BUDGET queue positions, each timed.
        let t = Instant::now();
        ct.remove_backend(id, pool[0].0);
        let ct_remove_ms = t.elapsed().as_secs_f64() * 1e3;
        let (mut ct_steps, mut ct_step_max) = (0, 0f64);
        while ct.sweep_pending() > 0 {
            let t = keyplane_net::cpu::this_thread_cpu_ns();
            ct.sweep(keyplane_lb::control::SWEEP_BUDGET);
            ct_step_max = ct_step_max.max((keyplane_net::cpu::this_thread_cpu_ns() - t) as f64 / 1e6);
            ct_steps += 1;
        }
        drop(ct);
        out.put(format!(
            "{{\"bench\":\"memory_per_connection\",\"connections\":{n},\"concury_dataplane_bytes\":{cm},\"maglev_dataplane_bytes\":{mm},\"concury_b_per_conn\":{:.2},\"maglev_b_per_conn\":{:.2},\"ratio\":{:.3},\"maglev_tracked\":{},\"concury_control_plane_bytes\":{cc},\"lb_conntrack_bytes\":{ctb},\"concury_control_b_per_conn\":{:.1},\"lb_conntrack_b_per_conn\":{:.1},\"conntrack_remove_backend_ms\":{ct_remove_ms:.3},\"conntrack_sweep_steps\":{ct_steps},\"conntrack_sweep_step_ms_max\":{ct_step_max:.2}}}",
            cm as f64 / n as f64,
            mm as f64 / n as f64,
            cm as f64 / mm as f64,
            mg.tracked(mid),
            cc as f64 / n as f64,
            ctb as f64 / n as f64
        ));
        // Pool change → data plane updated: `Control::update_pool` (rebalance,
        // re-pin, plane from the patched BAS slice) + `DataPlane::apply`.
        // Cycles of: add a 9th backend, reweight, drain, undrain, remove (its
        // states dropped), each op timed alone; the reaping of the removed
        // backend's states (after the data plane is updated) is timed apart.
        let extra = Backend::new(Ipv4Addr::new(198, 18, 1, 1), 80);
        let cycle: Vec<(&str, PoolOp)> = vec![
            ("add", PoolOp::Add(extra, 1)),
            ("reweight", PoolOp::SetWeight(pool[1].0, 3)),
            ("drain", PoolOp::SetWeight(pool[2].0, 0)),
            ("undrain", PoolOp::SetWeight(pool[2].0, 1)),
            ("reweight_back", PoolOp::SetWeight(pool[1].0, 1)),
            ("remove", PoolOp::Remove(extra)),
        ];
        let mut times: Vec<(&str, f64)> = Vec::new();
        let mut reap_ms = Vec::new();
        let mut reap_totals: Vec<(usize, f64)> = Vec::new();
        let before = ctl.stats();
        for round in 0..env("POOL_ROUNDS", if n > 2_000_000 { 2 } else { 5 }) {
            for (name, op) in &cycle {
                let t = Instant::now();
                let d = ctl.update_pool(id, std::slice::from_ref(op)).unwrap();
                dp.apply(&d).unwrap();
                times.push((name, t.elapsed().as_secs_f64() * 1e3));
                if matches!(op, PoolOp::Remove(_)) {
                    // Reaped as the service does: bounded steps, each timed.
                    let (mut steps, mut total) = (0usize, 0f64);
                    while ctl.dropped_pending() > 0 {
                        // Thread CPU time: what a step costs the control
                        // thread, without other processes' preemption.
                        let t = keyplane_net::cpu::this_thread_cpu_ns();
                        ctl.reap_step(keyplane_lb::control::REAP_BUDGET).unwrap();
                        let ms = (keyplane_net::cpu::this_thread_cpu_ns() - t) as f64 / 1e6;
                        reap_ms.push(ms);
                        total += ms;
                        steps += 1;
                    }
                    reap_totals.push((steps, total));
                }
                // The added backend gets tracked states before it leaves.
                if *name == "add" {
                    for c in 0..(n / 9) {
                        let k = key(n + round as u32 * n + c);
                        ctl.connection_start(id, k.as_ref(), extra).unwrap();
                    }
                }
            }
        }
        let after = ctl.stats();
        let mut all: Vec<f64> = times.iter().map(|t| t.1).collect();
        all.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let per: Vec<String> = cycle
            .iter()
            .map(|(name, _)| {
                let mut v: Vec<f64> = times.iter().filter(|t| t.0 == *name).map(|t| t.1).collect();
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                format!("\"{name}\":[{:.2},{:.2}]", v[0], v[v.len() - 1])
            })
            .collect();
        reap_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        out.put(format!(
            "{{\"bench\":\"pool_change\",\"connections\":{n},\"changes\":{},\"ms_min\":{:.2},\"ms_median\":{:.2},\"ms_max\":{:.2},\"ms_by_op_min_max\":{{{}}},\"states_repinned\":{},\"states_dropped\":{},\"reap_step_ms_min_median_max\":[{:.2},{:.2},{:.2}],\"reap_steps_per_removal\":{:?},\"reap_total_ms_per_removal\":{:?},\"what\":\"Control::update_pool + DataPlane::apply, one op each; the removed backend's states reaped after it in Control::reap_step slices of REAP_BUDGET key ids (step times: thread CPU time)\"}}",
            all.len(),
            all[0],
            all[all.len() / 2],
            all[all.len() - 1],
            per.join(","),
            after.states_repinned - before.states_repinned,
            after.states_dropped - before.states_dropped,
            reap_ms[0],
            reap_ms[reap_ms.len() / 2],
            reap_ms[reap_ms.len() - 1],
            reap_totals.iter().map(|x| x.0).collect::<Vec<_>>(),
            reap_totals.iter().map(|x| (x.1 * 10.0).round() / 10.0).collect::<Vec<_>>(),
        ));
    }

    if env("XDP_POOL", 0) == 1 {
        xdp_pool(&mut out, conns);
    }

    if env("NET", 0) == 1 {
        net::run(&mut out, env("NET_SECONDS", 5) as u64);
    }

    let path = std::env::var("OUT")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/bench/lb-service.json").into());
    let _ = std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap());
    let body = format!("[\n{}\n]\n", out.0.join(",\n"));
    std::fs::write(&path, body).expect("writing the JSON");
    eprintln!("wrote {path}");
    let _ = Duration::from_secs(0);
}

mod net {
    //! Packets per forwarding-core-second through the LB on the namespace
    //! testbed: a generator in the client namespace (pinned to CPU `GEN_CPU`,
    //! default 0) sends TCP frames at the LB's MAC; the LB worker thread is
    //! pinned to CPU `LB_CPU` (default 1); frames received by the 4
    //! backends are counted (backends drop them at their netdev ingress hook,
    //! so no reply traffic loads the path). The same generator drives the
    //! nftables LB (kube-proxy style DNAT + conntrack) in the LB namespace.
    //!
    //! CPU actually consumed by the forwarding work, from /proc:
    //! * keyplane (Concury / Maglev, AF_XDP or AF_PACKET): the `lb-worker`
    //!   thread's utime + stime (`/proc/self/task/<tid>/stat`) plus the
    //!   softirq time of its CPU (`/proc/stat`: its transmissions' bridge
    //!   and backend-ingress processing) = `lb`; plus the softirq time of the
    //!   generator's CPU (the kernel delivering frames to the LB's socket) =
    //!   `all_in`;
    //! * nftables: the softirq time of both CPUs (the NAT runs in the
    //!   generator's CPU's softirq, from the client veth through the bridge,
    //!   conntrack, DNAT, forwarding and the bridge again) = `lb` = `all_in`.
    //!
    //! `all_in` charges both kinds of LB for the same kernel path from the
    //! generator's veth on; `lb` leaves out keyplane's socket delivery.
    //! The generator (`GEN`, see `Gen`) is the same for every LB of a run;
    //! its own sending (AF_PACKET's sendmsg, or the XDP test run's program,
    //! page pool and `ndo_xdp_xmit`) is system time of its thread and
    //! charged to none; everything the frames cause after the client's veth
    //! (including `af_packet_pp`'s copy into page-pool memory at the
    //! client's bridge port) runs in softirq and is charged as above.
    //! Runs alternate (every LB once per repetition, every variant once per
    //! LB start), and every figure is reported per run. Ticks are 10 ms.
    use super::{Out, env};
    use keyplane_lb::testbed::{self, Testbed};
    use keyplane_lb::xdp::generator::{Flows, Generator};
    use keyplane_lb::{IoKind, Lb, Mode, Options};
    use keyplane_net::cpu;
    use std::net::Ipv4Addr;
    use std::time::{Duration, Instant};

    /// conntrack counters of the LB namespace summed over CPUs: (insert,
    /// drop, early_drop) from /proc/net/stat/nf_conntrack.
    fn ct_stats(tb: &Testbed) -> [u64; 3] {
        let s = tb.net.run(&tb.lb, &["cat", "/proc/net/stat/nf_conntrack"]).unwrap_or_default();
        let mut t = [0u64; 3];
        for l in s.lines().skip(1) {
            let f: Vec<u64> = l.split_whitespace().map(|x| u64::from_str_radix(x, 16).unwrap_or(0)).collect();
            for (d, i) in t.iter_mut().zip([8, 10, 11]) {
                *d += f.get(i).copied().unwrap_or(0);
            }
        }
        t
    }

    fn vip(v: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 100, 1 + v as u8)
    }

    /// Source address and port of flow `f` (198.19.0.0/16, 1024 ports each).
    fn flow(f: u32) -> ([u8; 4], u16) {
        let a = 0xc613_0000u32 + (f >> 10);
        (a.to_be_bytes(), 1024 + (f & 1023) as u16)
    }

    /// A checksummed TCP frame of `size` bytes of flow `f` to VIP `v`.
    fn frame(lbmac: [u8; 6], own: [u8; 6], f: u32, v: usize, size: usize, flags: u8) -> Vec<u8> {
        let mut b = super::frame(0, 0, size, flags);
        b[0..6].copy_from_slice(&lbmac);
        b[6..12].copy_from_slice(&own);
        let (src, sport) = flow(f);
        b[26..30].copy_from_slice(&src);
        b[30..34].copy_from_slice(&vip(v).octets());
        b[34..36].copy_from_slice(&sport.to_be_bytes());
        b[38..42].copy_from_slice(&1u32.to_be_bytes());
        b[42..46].copy_from_slice(&1u32.to_be_bytes());
        b[48..50].copy_from_slice(&64000u16.to_be_bytes());
        let ck = keyplane_net::checksum::internet_checksum(&b[14..34]);
        b[24..26].copy_from_slice(&ck.to_be_bytes());
        let l4 = b.len() - 34;
        let mut sum = 6u32 + l4 as u32;
        for w in b[26..34].chunks_exact(2) {
            sum += u16::from_be_bytes([w[0], w[1]]) as u32;
        }
        let ck = keyplane_net::checksum::fold(keyplane_net::checksum::sum(&b[34..], sum as u64));
        b[50..52].copy_from_slice(&ck.to_be_bytes());
        b
    }

    fn rx_packets(tb: &Testbed) -> u64 {
        tb.backends
            .iter()
            .map(|b| {
                let s = tb.net.run(b, &["cat", "/sys/class/net/eth0/statistics/rx_packets"]).unwrap_or_default();
                s.trim().parse::<u64>().unwrap_or(0)
            })
            .sum()
    }

    /// Sends `frames` round robin for `secs` from client 0, pinned to `cpu`;
    /// returns frames handed to the kernel.
    fn send(tb: &Testbed, frames: &[Vec<u8>], secs: f64, cpu: usize) -> u64 {
        tb.in_client(0, || {
            let _ = cpu::pin(0, cpu);
            let mut p =
                keyplane_net::open("eth0", keyplane_net::IoKind::AfPacket, 0, &keyplane_net::PortOptions::default())
                    .expect("generator port");
            let t0 = Instant::now();
            let mut sent = 0u64;
            let mut i = 0usize;
            while t0.elapsed().as_secs_f64() < secs {
                for _ in 0..64 {
                    if matches!(p.tx_stage(&frames[i]), Ok(true)) {
                        sent += 1;
                    }
                    i = (i + 1) % frames.len();
                }
                let _ = p.tx_flush();
            }
            sent
        })
        .expect("client namespace")
    }

    /// The measured traffic's generator (`GEN=xdp|af_packet`; the warm-up
    /// always sends with AF_PACKET).
    enum Gen {
        /// AF_PACKET (TPACKET TX ring) from client 0: veth copies these
        /// frames before the LB's XDP program sees them (kmalloc'ed head,
        /// little headroom).
        AfPacket,
        /// AF_PACKET as above, with a generic XDP pass program (frags
        /// support) on client 0's peer port: the kernel moves every frame
        /// into page-pool memory with full headroom there, on the
        /// generator's side of the bridge, for every LB alike; the frames
        /// reach the LB's port as a NIC driver's would.
        AfPacketPp,
        /// XDP live frames (`BPF_PROG_TEST_RUN`) on client 0's eth0
        /// (ifindex), one program per variant: page-pool frames, as a NIC's.
        Xdp(Vec<Generator>, u32),
    }

    /// Frames per live-frames test run: ~10-40 ms at the rates seen here.
    const XDP_REPEAT: u32 = 8192;

    /// Loads one XDP generator per variant and checks that it makes the
    /// AF_PACKET generator's frames (bit for bit, at 257 sample indices),
    /// attaches the pass program to client 0's peer port and sends a few
    /// frames live; an error says why not.
    fn xdp_gen(tb: &Testbed, traffic: &[Vec<Vec<u8>>], variants: &[(usize, usize)], base: u32) -> Result<Gen, String> {
        let mut gs = Vec::new();
        for (frames, &(_, vips)) in traffic.iter().zip(variants) {
            let sample = frames.len() as u32;
            let first = frames.first().ok_or("empty sample")?;
            let g = Generator::load(first, Flows { sample, base, vips: vips as u32 }).map_err(|e| e.to_string())?;
            for k in (0..=256u64).map(|j| j * (sample as u64 - 1) / 256) {
                g.seek(k).map_err(|e| e.to_string())?;
                let f = g.next_frame().map_err(|e| e.to_string())?;
                if f != frames[k as usize] {
                    return Err(format!("frame {k} of the {vips}-VIP sample differs from the AF_PACKET generator's"));
                }
            }
            g.seek(0).map_err(|e| e.to_string())?;
            gs.push(g);
        }
        tb.client_peer_napi().map_err(|e| e.to_string())?;
        let ifindex = tb
            .in_client(0, || keyplane_lb::io::ifindex("eth0"))
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())? as u32;
        let g = gs.first().ok_or("no variants")?;
        tb.in_client(0, || g.send(ifindex, 64)).map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
        Ok(Gen::Xdp(gs, ifindex))
    }

    /// Sends with `g` for `secs` from client 0, pinned to `cpu`, in test
    /// runs of [`XDP_REPEAT`] frames (at most 10M frames a second's worth);
    /// returns frames run through the program (every one `XDP_TX`).
    fn send_xdp(tb: &Testbed, g: &Generator, ifindex: u32, secs: f64, cpu: usize) -> u64 {
        tb.in_client(0, || {
            let _ = cpu::pin(0, cpu);
            if let Err(e) = g.seek(0) {
                eprintln!("XDP generator: {e}");
                return 0;
            }
            let max_runs = (secs * 1e7 / XDP_REPEAT as f64) as u64 + 1;
            let t0 = Instant::now();
            let mut sent = 0u64;
            for _ in 0..max_runs {
                if t0.elapsed().as_secs_f64() >= secs {
                    break;
                }
                match g.send(ifindex, XDP_REPEAT) {
                    Ok(()) => sent += XDP_REPEAT as u64,
                    Err(e) => {
                        eprintln!("XDP generator: {e}");
                        break;
                    }
                }
            }
            sent
        })
        .expect("client namespace")
    }

    /// Flow `i` of the measured sample: spread over the `base` flows.
    fn sample_flow(i: u32, base: u32, sample: u32) -> u32 {
        (i as u64 * base as u64 / sample as u64) as u32
    }

    /// One 64-byte frame per tracked flow (`flags`), `flows` in all: flows
    /// `0..flows - sample` to VIP `f % 64` (the 64-VIP runs measure
    /// `sample` of them), then the sample's flows to VIP 0 (the one-VIP
    /// runs use them; other tuples, so they are tracked flows of their own).
    fn warm_frames(lbmac: [u8; 6], own: [u8; 6], flows: u32, sample: u32, flags: u8) -> Vec<u8> {
        let base = flows - sample;
        let mut all = Vec::with_capacity(flows as usize * 64);
        for f in 0..base {
            all.extend_from_slice(&frame(lbmac, own, f, f as usize % 64, 64, flags));
        }
        for i in 0..sample {
            all.extend_from_slice(&frame(lbmac, own, sample_flow(i, base, sample), 0, 64, flags));
        }
        all
    }

    /// Sends `frames` (64-byte frames back to back) once, paced so that a
    /// user-space LB keeps up; returns frames sent.
    fn warm(tb: &Testbed, frames: &[u8], cpu: usize, pause: Duration) -> u64 {
        tb.in_client(0, || {
            let _ = cpu::pin(0, cpu);
            let mut p =
                keyplane_net::open("eth0", keyplane_net::IoKind::AfPacket, 0, &keyplane_net::PortOptions::default())
                    .expect("generator port");
            let mut n = 0u64;
            for b in frames.chunks(64 * 64) {
                for x in b.chunks(64) {
                    n += matches!(p.tx_stage(x), Ok(true)) as u64;
                }
                let _ = p.tx_flush();
                std::thread::sleep(pause);
            }
            n
        })
        .expect("client namespace")
    }

    fn config(flows: u32, weight4: u32) -> String {
        let mut cfg = format!(
            "[lb]\nmax_connections = {}\nreport_rate = 1000000\nreport_queue = 262144\n[health]\nkind = \"none\"\n",
            flows as usize * 5 / 4
        );
        for v in 0..64 {
            cfg += &format!("[[vip]]\naddress = \"{}\"\nport = 80\nprotocol = \"tcp\"\nmethod = \"dsr\"\n", vip(v));
            for i in 1..=4 {
                cfg += &format!(
                    "[[vip.backend]]\naddress = \"{}\"\nweight = {}\n",
                    testbed::backend4(i),
                    if i == 4 { weight4 } else { 1 }
                );
            }
        }
        cfg
    }

    /// Flows one source address can masquerade to the 4 backends
    /// (64,512 ports per backend address).
    const FLOWS_PER_SNAT_ADDR: usize = 4 * 64_512;

    /// Source addresses the nftables LB needs to hold `flows` tracked flows
    /// with 10 % to spare: 1 (masquerade to the port's address) up to
    /// ~234K flows, else a pool of [`snat_pool`] addresses.
    fn snat_addrs(flows: usize) -> usize {
        (flows + flows / 10).div_ceil(FLOWS_PER_SNAT_ADDR).max(1)
    }

    /// The `n`-address SNAT pool on the LB's port (198.18.0.240 on), used
    /// when one address cannot hold the flows (as a kube-proxy node with
    /// that many connections would SNAT to several addresses).
    fn snat_pool(n: usize) -> Vec<Ipv4Addr> {
        (0..n).map(|i| keyplane_net::testnet::v4(0, 240 + i as u8)).collect()
    }

    /// kube-proxy style: a vmap from VIP:port to a service chain, `numgen
    /// random mod 4` to endpoint chains that DNAT; masquerade, or SNAT to
    /// `pool` when it has more than one address.
    fn nft_rules(pool: &[Ipv4Addr]) -> String {
        let mut s = String::from("table ip kplb {}\nflush table ip kplb\ntable ip kplb {\n");
        for i in 1..=4 {
            s += &format!("  chain ep{i} {{ dnat to {}; }}\n", testbed::backend4(i));
        }
        s += "  chain svc { numgen random mod 4 vmap { 0 : jump ep1, 1 : jump ep2, 2 : jump ep3, 3 : jump ep4 }; }\n";
        let elems: Vec<String> = (0..64).map(|v| format!("{} . 80 : jump svc", vip(v))).collect();
        s += &format!(
            "  chain pre {{ type nat hook prerouting priority dstnat; ip daddr . tcp dport vmap {{ {} }}; }}\n",
            elems.join(", ")
        );
        let nat = match pool {
            [] | [_] => "masquerade".to_string(),
            [first, .., last] => format!("snat to {first}-{last}"),
        };
        s += &format!("  chain post {{ type nat hook postrouting priority srcnat; ct status dnat {nat}; }}\n}}\n");
        s
    }

    /// A sysctl file's old value, put back on drop.
    struct Restore(&'static str, Option<String>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(v) = &self.1 {
                let _ = std::fs::write(self.0, v);
            }
        }
    }

    /// Raises the sysctl at `path` to at least `need`, returning the guard
    /// that restores it.
    fn raise(path: &'static str, need: usize) -> Restore {
        let cur: usize = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        if cur < need {
            let _ = std::fs::write(path, need.to_string());
            Restore(path, Some(cur.to_string()))
        } else {
            Restore(path, None)
        }
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Kind {
        Keyplane(Mode, IoKind),
        /// Concury with `--io xdp` (the XDP program forwards in softirq).
        Xdp,
        Nft,
    }

    impl Kind {
        fn name(self) -> String {
            match self {
                Kind::Keyplane(m, io) => format!("{m:?} {}", io.as_str()),
                Kind::Xdp => "Concury xdp".into(),
                Kind::Nft => "nftables".into(),
            }
        }
    }

    pub fn run(out: &mut Out, _secs: u64) {
        let secs = env("NET_SECONDS", 3) as f64;
        let flows = env("FLOWS", 200_000) as u32;
        let reps = env("REPS_NET", 3);
        let (gen_cpu, lb_cpu) = (env("GEN_CPU", 0), env("LB_CPU", 1));
        let dir = std::env::temp_dir().join(format!("lb-bench-{}", std::process::id()));
        // conntrack must hold every flow for the nftables LB (a global
        // limit, copied into a namespace when it is created: raised before
        // the testbed; the old values are put back on exit). Warm-up
        // creates FLOWS entries: room for twice that, and a quarter as
        // many hash buckets (kube-proxy's hashsize = max / 4). What else
        // bounds nftables is NAT's source ports: one address reaches the
        // 4 backends with 4 x 64,512 ports, so above ~234K flows the LB
        // SNATs to a pool of addresses (`snat_addrs`).
        let ct_need = flows as usize * 2;
        let _restore_max = raise("/proc/sys/net/netfilter/nf_conntrack_max", ct_need);
        let _restore_buckets = raise("/proc/sys/net/netfilter/nf_conntrack_buckets", ct_need / 4);
        let pool = snat_pool(snat_addrs(flows as usize));
        let tb = Testbed::new("bench", 1, 4, &dir).expect("testbed (root)");
        // Backends drop the frames at ingress: rx_packets counts them, no
        // TCP reset comes back through the LB.
        let drop = dir.join("drop.nft");
        std::fs::write(
            &drop,
            "table netdev kpdrop {\n  chain ingress_drop {\n    type filter hook ingress device eth0 priority 0;\n    \
             ip protocol tcp drop\n  }\n}\n",
        )
        .unwrap();
        for b in &tb.backends {
            tb.net.run(b, &["nft", "-f", &drop.display().to_string()]).expect("backend drop rule");
        }
        // Full-size frames leave the client as they are (DSR adds nothing).
        tb.net.ip(&tb.clients[0], &["link", "set", "eth0", "mtu", "1500"]).expect("client MTU");
        let lbmac = tb.in_lb(|| keyplane_lb::io::port_info("eth0").unwrap().0.mac).unwrap();
        let own = tb.in_client(0, || keyplane_lb::io::port_info("eth0").unwrap().0.mac).unwrap();
        for v in 1..64 {
            let _ = tb.net.ip(&tb.lb, &["route", "add", "blackhole", &format!("{}/32", vip(v))]);
        }
        let path = dir.join("lb.toml");
        // Measured traffic: 65,536 of the tracked flows (spread over all of
        // them), one VIP or 64 VIPs.
        let flows = flows.max(2);
        let sample = 65_536u32.min(flows / 2);
        let base = flows - sample;
        let variants: Vec<(usize, usize)> = vec![(64, 1), (64, 64), (1500, 1), (1500, 64)];
        let traffic: Vec<Vec<Vec<u8>>> = variants
            .iter()
            .map(|&(size, vips)| {
                (0..sample)
                    .map(|i| {
                        let f = sample_flow(i, base, sample);
                        frame(lbmac, own, f, if vips == 1 { 0 } else { f as usize % 64 }, size, 0x10)
                    })
                    .collect()
            })
            .collect();
        let kinds: Vec<Kind> = env_kinds();
        // GEN=xdp (the default) falls back to af_packet_pp, that to
        // af_packet, each time saying why.
        let want = std::env::var("GEN").unwrap_or_else(|_| "xdp".into());
        let mut generator = None;
        if want == "xdp" {
            match xdp_gen(&tb, &traffic, &variants, base) {
                Ok(g) => generator = Some(g),
                Err(why) => {
                    eprintln!("GEN=xdp unavailable ({why}), trying af_packet_pp");
                    tb.client_peer_napi_off();
                }
            }
        }
        if generator.is_none() && (want == "xdp" || want == "af_packet_pp") {
            match tb.client_peer_cow() {
                Ok(()) => generator = Some(Gen::AfPacketPp),
                Err(why) => eprintln!("GEN=af_packet_pp unavailable ({why}), generating with AF_PACKET"),
            }
        }
        let generator = generator.unwrap_or(Gen::AfPacket);
        let gen_name = match generator {
            Gen::AfPacket => "af_packet",
            Gen::AfPacketPp => "af_packet_pp",
            Gen::Xdp(..) => "xdp",
        };
        eprintln!("generator: {gen_name}");
        let warm_syn = warm_frames(lbmac, own, flows, sample, 0x02);
        let warm_ack = warm_frames(lbmac, own, flows, sample, 0x10);
        for rep in 0..reps {
            for &kind in &kinds {
                let t0 = Instant::now();
                std::fs::write(&path, config(flows, 1)).unwrap();
                // XDP_TX on the LB's veth needs an XDP program on its peer
                // (XDP_PASS); the other LBs run without it.
                if kind == Kind::Xdp {
                    tb.lb_peer_napi().expect("XDP_PASS program on the LB's peer port");
                } else {
                    tb.lb_peer_napi_off();
                }
                let lb = match kind {
                    Kind::Keyplane(..) | Kind::Xdp => {
                        let (mode, io, xdp) = match kind {
                            Kind::Keyplane(m, io) => (m, io, false),
                            _ => (Mode::Concury, IoKind::AfPacket, true),
                        };
                        let opts = Options { mode, io, xdp, ..Options::new("eth0", &path) };
                        match tb.in_lb(|| Lb::start(opts)).unwrap() {
                            Ok(lb) => Some(lb),
                            Err(e) => {
                                eprintln!("{}: not started: {e}", kind.name());
                                continue;
                            }
                        }
                    }
                    Kind::Nft => {
                        let f = dir.join("kplb.nft");
                        std::fs::write(&f, nft_rules(&pool)).unwrap();
                        tb.net.run(&tb.lb, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]).unwrap();
                        if pool.len() > 1 {
                            for a in &pool {
                                // Already there from an earlier round: fine.
                                let _ = tb.net.ip(&tb.lb, &["addr", "add", &format!("{a}/24"), "dev", "eth0"]);
                            }
                        }
                        tb.net.run(&tb.lb, &["nft", "-f", &f.display().to_string()]).unwrap();
                        None
                    }
                };
                if let Some(lb) = &lb {
                    std::thread::sleep(Duration::from_millis(300));
                    if let Some(tid) = cpu::thread_named("lb-worker") {
                        let _ = cpu::pin(tid, lb_cpu);
                    }
                    // Neighbours resolved before traffic.
                    let t = Instant::now();
                    while lb.counters().neighbors_resolved.get() < 4 && t.elapsed() < Duration::from_secs(5) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
                // Every flow once: SYN for keyplane (Concury records it from
                // the report; Maglev learns it), ACK for nftables (conntrack
                // picks established flows up); then a pool change (weight of
                // backend 4: 1 → 2) so Concury's BAS holds the states.
                // (nftables: slower, conntrack entries cost more to create.)
                let warmed = match kind {
                    Kind::Nft => {
                        warm(&tb, &warm_ack, gen_cpu, Duration::from_micros(env("NFT_WARM_PAUSE_US", 500) as u64))
                    }
                    _ => warm(&tb, &warm_syn, gen_cpu, Duration::from_micros(500)),
                };
                std::thread::sleep(Duration::from_millis(500));
                let mut pool_change = String::new();
                let tracked = match &lb {
                    Some(lb) => {
                        std::fs::write(&path, config(flows, 2)).unwrap();
                        let t = Instant::now();
                        lb.reload().expect("reload");
                        let c = lb.counters();
                        pool_change = format!(
                            ",\"reload_ms\":{:.2},\"last_vip_update_us\":{},\"xdp_pool_change_us\":{},\"xdp_publish_us\":{},\"xdp_grace_us\":{}",
                            t.elapsed().as_secs_f64() * 1e3,
                            c.last_update_us.get(),
                            c.xdp_pool_change_us.get(),
                            c.xdp_publish_us.get(),
                            c.xdp_grace_us.get()
                        );
                        // Maglev tracks in its data plane (learned from the
                        // warm-up frames), not on the control side.
                        if matches!(kind, Kind::Keyplane(Mode::Maglev, _)) {
                            warmed
                        } else {
                            lb.counters().tracked.get()
                        }
                    }
                    None => tb
                        .net
                        .run(
                            &tb.lb,
                            &["sh", "-c", "conntrack -C 2>/dev/null || cat /proc/sys/net/netfilter/nf_conntrack_count"],
                        )
                        .unwrap_or_default()
                        .trim()
                        .parse()
                        .unwrap_or(0),
                };
                let warm_s = t0.elapsed().as_secs_f64();
                for (vi, &(size, vips)) in variants.iter().enumerate() {
                    let la = cpu::loadavg();
                    let worker = cpu::thread_named("lb-worker");
                    // --io xdp: the LB's user-space threads (slow path,
                    // reports and counters, control) are charged too.
                    let extra: Vec<i32> = if kind == Kind::Xdp {
                        ["lb-xdp", "lb-control", "lb-health"].iter().filter_map(|n| cpu::thread_named(n)).collect()
                    } else {
                        Vec::new()
                    };
                    let wrt = || {
                        worker.map_or(0, cpu::thread_runtime_ns)
                            + extra.iter().map(|&t| cpu::thread_runtime_ns(t)).sum::<u64>()
                    };
                    let (rx0, si0, w0, k0, ct0) = (
                        rx_packets(&tb),
                        cpu::softirq_ticks(),
                        wrt(),
                        cpu::ksoftirqd_runtime_ns(lb_cpu),
                        ct_stats(&tb),
                    );
                    let t = Instant::now();
                    let sent = match &generator {
                        Gen::AfPacket | Gen::AfPacketPp => send(&tb, &traffic[vi], secs, gen_cpu),
                        Gen::Xdp(gs, ifindex) => send_xdp(&tb, &gs[vi], *ifindex, secs, gen_cpu),
                    };
                    std::thread::sleep(Duration::from_millis(200));
                    let el = t.elapsed().as_secs_f64();
                    let (rx1, si1, w1, k1, ct1) = (
                        rx_packets(&tb),
                        cpu::softirq_ticks(),
                        wrt(),
                        cpu::ksoftirqd_runtime_ns(lb_cpu),
                        ct_stats(&tb),
                    );
                    let got = rx1 - rx0;
                    let si = |c: usize| si1.get(c).unwrap_or(&0) - si0.get(c).unwrap_or(&0);
                    let (si_lb, si_gen) = (si(lb_cpu) as f64 / cpu::USER_HZ, si(gen_cpu) as f64 / cpu::USER_HZ);
                    // keyplane: the worker's exact runtime (its transmissions'
                    // softirq runs in its context and is part of it) plus the
                    // LB CPU's ksoftirqd; the softirq ticks of the LB CPU
                    // overlap these and are not added. nftables: softirq of
                    // both CPUs (it forwards in softirq only).
                    let worker_s = (w1 - w0) as f64 / 1e9;
                    let ksirq_lb_s = k1.saturating_sub(k0) as f64 / 1e9;
                    let (lb_s, all_s) = match kind {
                        Kind::Nft => (si_lb + si_gen, si_lb + si_gen),
                        // The XDP program runs in softirq (mostly the
                        // generator CPU's, as nftables does): both CPUs'
                        // softirq as for nftables, plus the LB's threads.
                        Kind::Xdp => (si_lb + si_gen + worker_s, si_lb + si_gen + worker_s),
                        _ => (worker_s + ksirq_lb_s, worker_s + ksirq_lb_s + si_gen),
                    };
                    let per = |c: f64| if c > 0.0 { got as f64 / c } else { 0.0 };
                    let ct: Vec<u64> = ct1.iter().zip(&ct0).map(|(a, b)| a - b).collect();
                    let xdp_extra = match (&lb, kind) {
                        (Some(lb), Kind::Xdp) => {
                            let c = lb.counters();
                            // XDP_TX frames the veth could not hand to its peer (cumulative).
                            let st = tb.net.run(&tb.lb, &["ethtool", "-S", "eth0"]).unwrap_or_default();
                            let tx_err: u64 = st
                                .lines()
                                .filter(|l| l.contains("xdp_tx_errors"))
                                .filter_map(|l| l.rsplit(':').next()?.trim().parse::<u64>().ok())
                                .sum();
                            format!(
                                ",\"xdp_transmitted_total\":{},\"xdp_slow_path_total\":{},\"xdp_report_ring_full_total\":{},\"veth_xdp_tx_errors_total\":{tx_err},\"xdp_mode\":\"{}\"",
                                c.xdp_tx.get(),
                                c.xdp_slow.get(),
                                c.xdp_ring_full.get(),
                                std::env::var("KEYPLANE_LB_XDP_MODE").unwrap_or_else(|_| "auto (native)".into())
                            )
                        }
                        _ => String::new(),
                    };
                    out.put(format!(
                        "{{\"bench\":\"net_pps\",\"gen\":\"{gen_name}\",\"rep\":{rep},\"lb\":\"{}\",\"frame_bytes\":{size},\"vips\":{vips},\"flows_warmed\":{warmed},\"tracked\":{tracked},\"seconds\":{el:.2},\"sent\":{sent},\"delivered\":{got},\"pps\":{:.0},\"worker_cpu_s\":{worker_s:.3},\"ksoftirqd_lb_cpu_s\":{ksirq_lb_s:.3},\"softirq_lb_cpu_s\":{si_lb:.2},\"softirq_gen_cpu_s\":{si_gen:.2},\"pps_per_core_lb\":{:.0},\"pps_per_core_all_in\":{:.0},\"conntrack_insert_drop_early_drop\":{ct:?},\"loadavg\":\"{la}\",\"warmup_s\":{warm_s:.1}{pool_change}{xdp_extra}}}",
                        kind.name(),
                        got as f64 / el,
                        per(lb_s),
                        per(all_s),
                    ));
                }
                match lb {
                    Some(lb) => {
                        lb.stop();
                        tb.lb_peer_napi_off();
                    }
                    None => {
                        tb.nft_clear().unwrap();
                    }
                }
            }
        }
    }

    /// `LBS=concury-xdp,concury-af_xdp,maglev-af_xdp,nftables` (the
    /// default; also `concury-af_packet`, `maglev-af_packet`).
    fn env_kinds() -> Vec<Kind> {
        let s = std::env::var("LBS").unwrap_or_else(|_| "concury-xdp,concury-af_xdp,maglev-af_xdp,nftables".into());
        s.split(',')
            .filter_map(|k| {
                let (m, io) = k.split_once('-').unwrap_or((k, ""));
                if (m, io) == ("concury", "xdp") {
                    return Some(Kind::Xdp);
                }
                let io = match io {
                    "af_xdp" => IoKind::AfXdp,
                    _ => IoKind::AfPacket,
                };
                match m {
                    "concury" => Some(Kind::Keyplane(Mode::Concury, io)),
                    "maglev" => Some(Kind::Keyplane(Mode::Maglev, io)),
                    "nftables" => Some(Kind::Nft),
                    _ => None,
                }
            })
            .collect()
    }
}
