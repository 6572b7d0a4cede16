//! Benchmark (not a test): Concury burst lookups, 64 uniformly mixed VIPs
//! vs one VIP, the same total number of tracked connections, bursts of 32
//! packets through a per-thread `PacketReader`, timed in alternating rounds
//! in this thread's CPU time. Prints one JSON row per size and writes them
//! to `OUT` (default `docs/bench/lb-burst.json`).
//!
//! `cargo run --release -p keyplane-lb --example lb_burst`
//!
//! Env: `STATES` (`1000000,262144,65536`: tracked connections, each size measured
//! separately), `VIPS` (64), `BURST` (32), `ROUNDS` (15), `PASSES` (5, best
//! pass of each series per round), `PACKETS` (131072 packets per pass),
//! `ROWS` (`shared`: every VIP's 8 backends have weight 1, so the 64 VIPs'
//! DIP rows are equal and the data plane keeps one copy; `distinct`: VIP
//! `v`'s first backend has weight `1 + v`, 64 different rows).
//!
//! Series per round (each pass times every series once, in an order that
//! rotates, so load changes on a shared machine hit all of them): `one`: one VIP, `lookup_batch_vip`; `mixed`:
//! 64 VIPs, `lookup_batch` over uniformly mixed bursts; `one_mixed_path`:
//! one VIP through `lookup_batch` (the mixed code on one-VIP data);
//! `single`: 64 VIPs, one `lookup` per packet. `ONLY=mixed` (a series
//! name) times only that series (for `valgrind --tool=callgrind`).

use keyplane::lb::{Backend, Control, DataPlane, Params, StateKey, Vip, VipId};
use std::net::{IpAddr, Ipv4Addr};

fn env(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

fn vip_addr(v: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 100 + (v / 250) as u8, 1 + (v % 250) as u8)
}

/// The 4-tuple state of connection `c` (IPv4, 13 bytes).
fn key(c: u32) -> StateKey {
    StateKey::four_tuple(
        IpAddr::V4(Ipv4Addr::from(0xc613_0000u32 + (c >> 8))),
        1024 + (c & 0xff) as u16 * 64 + (c >> 24) as u16,
        80,
        6,
    )
}

/// A data plane with `conns` connections tracked over `vips` VIPs of 8
/// backends each (connection `c` on VIP `c % vips`; with `distinct`, VIP
/// `v`'s first backend has weight `1 + v`), and the VIP ids.
fn plane(vips: usize, conns: u32, distinct: bool) -> (DataPlane, Vec<VipId>) {
    let mut ctl = Control::new(Params::default()).expect("default params");
    let pool: Vec<(Backend, u32)> = (0..8).map(|b| (Backend::new(Ipv4Addr::new(198, 18, 0, 11 + b), 80), 1)).collect();
    let ids: Vec<VipId> = (0..vips)
        .map(|v| {
            let mut pool = pool.clone();
            if distinct {
                pool[0].1 = 1 + v as u32;
            }
            ctl.add_vip(Vip::new(vip_addr(v), 80, 6), &pool).expect("add VIP").0
        })
        .collect();
    for c in 0..conns {
        let b = pool[(c % 8) as usize].0;
        ctl.connection_start(ids[c as usize % vips], key(c).as_ref(), b).expect("connection");
    }
    for &id in &ids {
        ctl.refresh(id).expect("refresh");
    }
    (ctl.export(), ids)
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn main() {
    let sizes: Vec<u32> = std::env::var("STATES")
        .unwrap_or_else(|_| "1000000,262144,65536".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let nvips = env("VIPS", 64).max(1);
    let burst = env("BURST", 32).max(1);
    let rounds = env("ROUNDS", 15).max(1);
    let passes = env("PASSES", 5).max(1);
    let npk = env("PACKETS", 1 << 17).max(burst);
    let only = std::env::var("ONLY").ok();
    let distinct = std::env::var("ROWS").is_ok_and(|r| r == "distinct");
    let out_path = std::env::var("OUT").unwrap_or_else(|_| "docs/bench/lb-burst.json".into());
    let host = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut rows = Vec::new();
    for &conns in &sizes {
        let conns = conns.max(1);
        let t = std::time::Instant::now();
        let (one, one_ids) = plane(1, conns, distinct);
        let (mix, mix_ids) = plane(nvips, conns, distinct);
        eprintln!("{conns} states: planes built in {:.1} s", t.elapsed().as_secs_f64());
        // The packet stream: uniformly random tracked connections; a
        // connection's VIP is the one it was recorded on.
        let conn: Vec<u32> =
            (0..npk).map(|i| (keyplane::hash::mix64(i as u64 ^ 0x5eed) % conns as u64) as u32).collect();
        let keys: Vec<StateKey> = conn.iter().map(|&c| key(c)).collect();
        let krefs: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        let mix_v: Vec<VipId> = conn.iter().map(|&c| mix_ids[c as usize % nvips]).collect();
        let one_v: Vec<VipId> = vec![one_ids[0]; npk];
        // The answers must agree with per-packet lookups (and be backends).
        let mut out = vec![None; burst];
        let mut r1 = one.reader();
        let mut rm = mix.reader();
        for (j, ks) in krefs.chunks(burst).enumerate().take(64) {
            let vs = &mix_v[j * burst..j * burst + ks.len()];
            rm.lookup_batch(vs, ks, &mut out);
            for (i, k) in ks.iter().enumerate() {
                assert_eq!(out[i], mix.lookup(vs[i], k));
                assert!(out[i].is_some());
            }
            r1.lookup_batch_vip(one_ids[0], ks, &mut out);
            for (i, k) in ks.iter().enumerate() {
                assert_eq!(out[i], one.lookup(one_ids[0], k));
            }
        }
        const SERIES: [&str; 4] = ["one", "mixed", "one_mixed_path", "single"];
        let mut ns: [Vec<f64>; 4] = Default::default();
        let mut acc = 0u64;
        for round in 0..rounds {
            // Passes interleave the series (one pass of each, rotated), so
            // each series' best pass of a round comes from the same window.
            let mut best = [f64::MAX; 4];
            for pass in 0..passes {
                for s in 0..4 {
                    let s = (s + round + pass) % 4;
                    if only.as_deref().is_some_and(|o| o != SERIES[s]) {
                        best[s] = f64::NAN;
                        continue;
                    }
                    let t = keyplane_net::cpu::this_thread_cpu_ns();
                    match s {
                        0 => {
                            for ks in krefs.chunks(burst) {
                                r1.lookup_batch_vip(one_ids[0], ks, &mut out);
                                acc = acc.wrapping_add(out[0].map_or(1, |b| b.port as u64));
                            }
                        }
                        1 => {
                            for (vs, ks) in mix_v.chunks(burst).zip(krefs.chunks(burst)) {
                                rm.lookup_batch(vs, ks, &mut out);
                                acc = acc.wrapping_add(out[0].map_or(1, |b| b.port as u64));
                            }
                        }
                        2 => {
                            for (vs, ks) in one_v.chunks(burst).zip(krefs.chunks(burst)) {
                                r1.lookup_batch(vs, ks, &mut out);
                                acc = acc.wrapping_add(out[0].map_or(1, |b| b.port as u64));
                            }
                        }
                        _ => {
                            for (v, k) in mix_v.iter().zip(&krefs) {
                                acc = acc.wrapping_add(rm.lookup(*v, k).map_or(1, |b| b.port as u64));
                            }
                        }
                    }
                    let dt = keyplane_net::cpu::this_thread_cpu_ns() - t;
                    best[s] = best[s].min(dt as f64 / npk as f64);
                }
            }
            for (v, b) in ns.iter_mut().zip(best) {
                v.push(b);
            }
        }
        std::hint::black_box(acc);
        let ratios: Vec<f64> = ns[1].iter().zip(&ns[0]).map(|(m, o)| m / o).collect();
        let code_ratios: Vec<f64> = ns[2].iter().zip(&ns[0]).map(|(m, o)| m / o).collect();
        let f = |v: &[f64]| {
            let (a, b, c) = stats(v);
            format!("[{a:.3},{b:.3},{c:.3}]")
        };
        let per_round = |v: &[f64]| v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(",");
        let mut row = format!(
            "{{\"bench\":\"concury_burst_mixed_vs_one\",\"states\":{conns},\"vips\":{nvips},\"burst\":{burst},\"packets_per_pass\":{npk},\"rounds\":{rounds},\"passes\":{passes},\"target_ratio\":1.3,\"ratio_mixed_over_one_min_med_max\":{},\"ratio_per_round\":[{}]",
            f(&ratios),
            per_round(&ratios)
        );
        for (s, name) in SERIES.iter().enumerate() {
            row += &format!(",\"{name}_ns_min_med_max\":{},\"{name}_ns_per_round\":[{}]", f(&ns[s]), per_round(&ns[s]));
        }
        row += &format!(
            ",\"ratio_one_mixed_path_over_one_min_med_max\":{},\"host\":\"{host}\",\"loadavg_start\":\"{}\",\"what\":\"ns per packet (thread CPU time, best of {passes} passes per round, every pass times each series once in rotating order): one = lookup_batch_vip on a 1-VIP plane; mixed = lookup_batch over uniformly mixed {nvips}-VIP bursts; one_mixed_path = lookup_batch on the 1-VIP plane; single = per-packet lookup on the {nvips}-VIP plane\"}}",
            f(&code_ratios),
            load.trim()
        );
        // Data-plane bytes (BASes sized to their states; a DIP row of
        // 2^l_d entries per distinct row).
        row.insert_str(
            row.len() - 1,
            &format!(
                ",\"rows\":\"{}\",\"mixed_distinct_rows\":{},\"one_plane_bytes\":{},\"mixed_plane_bytes\":{}",
                if distinct { "distinct" } else { "shared" },
                mix.distinct_rows(),
                one.memory_bytes(),
                mix.memory_bytes()
            ),
        );
        println!("{row}");
        rows.push(row);
    }
    if let Err(e) = std::fs::write(&out_path, rows.join("\n") + "\n") {
        eprintln!("cannot write {out_path}: {e}");
    }
}
