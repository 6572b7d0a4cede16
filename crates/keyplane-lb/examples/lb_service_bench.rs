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
//! 5. (`NET=1`, root) pps through the LB on the namespace testbed over
//!    AF_PACKET, and the nftables LB on the same topology and generator.
//!
//! `cargo run --release -p keyplane-lb --example lb_service_bench`
//! (`NET=1 ONLY_NET=1 OUT=...`: only the namespace run; `ONLY_MEM=1
//! CONNS_10M=1 OUT=...`: only the memory and pool-change rows; `ONLY_BURST=1
//! OUT=...`: only the bare Concury burst lookups.)

use keyplane::lb::baselines::{Balancer, MAGLEV_TABLE_SIZE, Maglev};
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
    let only_net = env("ONLY_NET", 0) == 1 || only_mem || only_burst;
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
    for vips in [1usize, 64] {
        if only_net && !only_burst {
            break;
        }
        let mut ctl = Control::new(Params::default()).unwrap();
        let pool: Vec<(Backend, u32)> =
            (0..8).map(|b| (Backend::new(Ipv4Addr::new(198, 18, 0, 11 + b), 80), 1)).collect();
        let ids: Vec<u32> = (0..vips).map(|v| ctl.add_vip(Vip::new(vip_addr(v), 80, 6), &pool).unwrap().0).collect();
        for c in 0..conns {
            let b = pool[(c % 8) as usize].0;
            ctl.connection_start(ids[c as usize % vips], key(c).as_ref(), b).unwrap();
        }
        for &id in &ids {
            ctl.refresh(id).unwrap();
        }
        let dp = ctl.export();
        let keys: Vec<StateKey> =
            (0..n_frames as u32).map(|i| key(keyplane::hash::mix64(i as u64) as u32 % conns)).collect();
        let krefs: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        let vv: Vec<u32> = keys
            .iter()
            .enumerate()
            .map(|(i, _)| ids[(keyplane::hash::mix64(i as u64) as u32 % conns) as usize % vips])
            .collect();
        let mut o = vec![None; 16];
        let mut r = dp.reader();
        let mut best = f64::MAX;
        for _ in 0..reps {
            let t = Instant::now();
            for (i, ks) in krefs.chunks(16).enumerate() {
                if vips == 1 {
                    r.lookup_batch_vip(ids[0], ks, &mut o);
                } else {
                    r.lookup_batch(&vv[i * 16..i * 16 + ks.len()], ks, &mut o);
                }
            }
            best = best.min(t.elapsed().as_nanos() as f64 / krefs.len() as f64);
        }
        std::hint::black_box(&o);
        out.put(format!(
            "{{\"bench\":\"concury_burst_lookup\",\"vips\":{vips},\"states\":{conns},\"path\":\"{}\",\"ns_per_packet\":{best:.2}}}",
            if vips == 1 { "lookup_batch_vip" } else { "lookup_batch (mixed VIPs)" }
        ));
    }

    // 2. New-connection rate of the control side (Concury reports).
    if !only_net {
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
    let sizes: Vec<u32> = if (only_net && !only_mem) || only_burst {
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
        let mut mg = Maglev::new(MAGLEV_TABLE_SIZE, n as usize, 32).unwrap();
        let mid = mg.add_vip(Vip::new(vip_addr(0), 80, 6), &pool).unwrap();
        for c in 0..n {
            mg.packet(mid, key(c).as_ref());
        }
        let (cm, mm) = (dp.memory_bytes(), mg.memory_bytes());
        out.put(format!(
            "{{\"bench\":\"memory_per_connection\",\"connections\":{n},\"concury_dataplane_bytes\":{cm},\"maglev_dataplane_bytes\":{mm},\"concury_b_per_conn\":{:.2},\"maglev_b_per_conn\":{:.2},\"ratio\":{:.3},\"maglev_tracked\":{}}}",
            cm as f64 / n as f64,
            mm as f64 / n as f64,
            cm as f64 / mm as f64,
            mg.tracked(mid)
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
        let before = ctl.stats();
        for round in 0..env("POOL_ROUNDS", if n > 2_000_000 { 2 } else { 5 }) {
            for (name, op) in &cycle {
                let t = Instant::now();
                let d = ctl.update_pool(id, std::slice::from_ref(op)).unwrap();
                dp.apply(&d).unwrap();
                times.push((name, t.elapsed().as_secs_f64() * 1e3));
                if matches!(op, PoolOp::Remove(_)) {
                    let t = Instant::now();
                    ctl.reap_dropped().unwrap();
                    reap_ms.push(t.elapsed().as_secs_f64() * 1e3);
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
            "{{\"bench\":\"pool_change\",\"connections\":{n},\"changes\":{},\"ms_min\":{:.2},\"ms_median\":{:.2},\"ms_max\":{:.2},\"ms_by_op_min_max\":{{{}}},\"states_repinned\":{},\"states_dropped\":{},\"reap_ms_min_max\":[{:.1},{:.1}],\"what\":\"Control::update_pool + DataPlane::apply, one op each\"}}",
            all.len(),
            all[0],
            all[all.len() / 2],
            all[all.len() - 1],
            per.join(","),
            after.states_repinned - before.states_repinned,
            after.states_dropped - before.states_dropped,
            reap_ms[0],
            reap_ms[reap_ms.len() - 1],
        ));
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
    //! pps through the LB on the testbed (AF_PACKET generator in a client
    //! namespace → LB → backends), and through the nftables LB.
    use super::Out;
    use keyplane_lb::testbed::{self, Testbed, VIP4};
    use keyplane_lb::{IoKind, Lb, Mode, Options};
    use std::time::{Duration, Instant};

    fn rx_packets(tb: &Testbed) -> u64 {
        tb.backends
            .iter()
            .map(|b| {
                let s = tb.net.run(b, &["cat", "/sys/class/net/eth0/statistics/rx_packets"]).unwrap_or_default();
                s.trim().parse::<u64>().unwrap_or(0)
            })
            .sum()
    }

    /// Sends UDP-less TCP ACK frames of `size` bytes (flows spread over
    /// `flows` sources) to the LB's MAC for `secs`; returns frames sent.
    fn generate(tb: &Testbed, lbmac: [u8; 6], size: usize, secs: u64) -> u64 {
        tb.in_client(0, || {
            let own = keyplane_lb::io::port_info("eth0").unwrap().0.mac;
            let mut p =
                keyplane_net::open("eth0", keyplane_net::IoKind::AfPacket, 0, &keyplane_net::PortOptions::default())
                    .unwrap();
            // 4096 flows, checksummed (conntrack drops bad TCP checksums).
            let frames: Vec<Vec<u8>> = (0..4096u32)
                .map(|c| {
                    let mut f = super::frame(0, 0, size, 0x10);
                    f[0..6].copy_from_slice(&lbmac);
                    f[6..12].copy_from_slice(&own);
                    f[26..30].copy_from_slice(&[198, 18, 0, 100]);
                    f[30..34].copy_from_slice(&VIP4.octets());
                    f[34..36].copy_from_slice(&(1024 + c as u16).to_be_bytes());
                    let ck = keyplane_net::checksum::internet_checksum(&f[14..34]);
                    f[24..26].copy_from_slice(&ck.to_be_bytes());
                    let l4 = f.len() - 34;
                    let mut sum = 6u32 + l4 as u32;
                    for w in f[26..34].chunks_exact(2) {
                        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
                    }
                    let ck = keyplane_net::checksum::fold(keyplane_net::checksum::sum(&f[34..], sum as u64));
                    f[50..52].copy_from_slice(&ck.to_be_bytes());
                    f
                })
                .collect();
            let t0 = Instant::now();
            let mut sent = 0u64;
            while t0.elapsed() < Duration::from_secs(secs) {
                for f in frames[(sent as usize % 4096)..].iter().take(64) {
                    let _ = p.tx_stage(f);
                }
                let _ = p.tx_flush();
                sent += 64;
            }
            sent
        })
        .unwrap()
    }

    pub fn run(out: &mut Out, secs: u64) {
        let dir = std::env::temp_dir().join(format!("lb-bench-{}", std::process::id()));
        let tb = Testbed::new("bench", 1, 4, &dir).expect("testbed (root)");
        let lbmac = tb.in_lb(|| keyplane_lb::io::port_info("eth0").unwrap().0.mac).unwrap();
        let mut cfg = String::from("[health]\nkind = \"none\"\n");
        cfg += &format!("[[vip]]\naddress = \"{VIP4}\"\nport = 80\nprotocol = \"tcp\"\nmethod = \"dsr\"\n");
        for i in 1..=4 {
            cfg += &format!("[[vip.backend]]\naddress = \"{}\"\n", testbed::backend4(i));
        }
        let path = dir.join("lb.toml");
        std::fs::write(&path, &cfg).unwrap();
        for size in [64usize, 1400] {
            for mode in [Mode::Concury, Mode::Maglev] {
                let opts = Options { mode, io: IoKind::AfPacket, ..Options::new("eth0", &path) };
                let lb = tb.in_lb(|| Lb::start(opts)).unwrap().unwrap();
                std::thread::sleep(Duration::from_millis(500));
                let before = rx_packets(&tb);
                let sent = generate(&tb, lbmac, size, secs);
                std::thread::sleep(Duration::from_millis(300));
                let got = rx_packets(&tb) - before;
                let fwd = lb.counters().tx.get();
                lb.stop();
                out.put(format!(
                    "{{\"bench\":\"net_pps\",\"lb\":\"{mode:?}\",\"io\":\"AF_PACKET (TPACKET_V3 rx, sendmmsg tx), 1 worker thread\",\"frame_bytes\":{size},\"seconds\":{secs},\"sent\":{sent},\"forwarded\":{fwd},\"received_by_backends\":{got},\"pps\":{:.0}}}",
                    got as f64 / secs as f64
                ));
            }
            tb.nft_lb(VIP4, &[(1, 1), (2, 1), (3, 1), (4, 1)]).unwrap();
            let before = rx_packets(&tb);
            let sent = generate(&tb, lbmac, size, secs);
            std::thread::sleep(Duration::from_millis(300));
            let got = rx_packets(&tb) - before;
            tb.nft_clear().unwrap();
            out.put(format!(
                "{{\"bench\":\"net_pps\",\"lb\":\"nftables\",\"io\":\"kernel forwarding, DNAT numgen vmap + conntrack + masquerade\",\"frame_bytes\":{size},\"seconds\":{secs},\"sent\":{sent},\"received_by_backends\":{got},\"pps\":{:.0}}}",
                got as f64 / secs as f64
            ));
        }
    }
}
