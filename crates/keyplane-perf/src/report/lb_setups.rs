//! Thesis Figs. 5.9–5.11 and 5.13–5.16: Concury against the Maglev and
//! SilkRoad-style baselines in the thesis's other setups (§5.6.1): DIP-V
//! (pools of 8–64 DIPs, 32 on average) in the Small network, and DIP-E (128
//! DIPs per VIP) and DIP-V (32–256, 128 on average) in the Large network.
//!
//! One job per (setup, number of states): memory of each design's data
//! plane, single-thread lookups (wall and on-CPU time) and lookups/s with 1
//! and 2 threads. Every timed phase is sized by the scale
//! ([`super::Scale::lb_queries`] lookups, [`super::Scale::lb_rounds`]
//! interleaved rounds, best taken), so `tiny` stays a smoke run.

use super::Scale;
use crate::common::{KeyType, Record};
use crate::lb::{Net, load, loaded_concury};
use keyplane::hash::{mix64, reduce64};
use keyplane::lb::Params;
use keyplane::lb::{Balancer, maglev::Maglev, silkroad::SilkRoad};
use std::hint::black_box;
use std::time::Instant;

/// A setup of §5.6.1.
pub struct Setup {
    /// Job-id stem, e.g. `lb-dipv-small`.
    pub id: &'static str,
    /// `dip-e` (equal pools) or `dip-v` (varied pools).
    pub setup: &'static str,
    /// `small` (32 DIPs per VIP on average) or `large` (128).
    pub network: &'static str,
    /// Average DIPs per VIP.
    pub bpv: usize,
    /// Pools vary between `bpv/4` and `2 bpv`.
    pub varied: bool,
}

/// The setups measured here (DIP-E Small is the `lb/` bench job).
pub const SETUPS: &[Setup] = &[
    Setup { id: "lb-dipv-small", setup: "dip-v", network: "small", bpv: 32, varied: true },
    Setup { id: "lb-dipe-large", setup: "dip-e", network: "large", bpv: 128, varied: false },
    Setup { id: "lb-dipv-large", setup: "dip-v", network: "large", bpv: 128, varied: true },
];

/// On-CPU time of this thread in ms (0 where unavailable).
fn thread_cpu_ms() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()))
        .map_or(0.0, |ns| ns / 1e6)
}

/// (wall, cpu) ns per lookup of one timed pass after one warm-up pass.
fn per_lookup(ops: usize, mut f: impl FnMut() -> u64) -> (f64, f64) {
    black_box(f());
    let c0 = thread_cpu_ms();
    let t = Instant::now();
    black_box(f());
    let wall = t.elapsed().as_nanos() as f64 / ops as f64;
    (wall, (thread_cpu_ms() - c0) * 1e6 / ops as f64)
}

/// Million lookups/s of `threads` threads splitting the query stream.
fn threaded<F: FnMut(u32, &[u8]) -> u64>(keys: &[u8], q: &[u32], threads: usize, make: impl Fn() -> F + Sync) -> f64 {
    const K: usize = 9;
    let t = Instant::now();
    std::thread::scope(|s| {
        for (c, part) in q.chunks(q.len().div_ceil(threads)).enumerate() {
            let make = &make;
            let base = c * q.len().div_ceil(threads);
            s.spawn(move || {
                let mut f = make();
                let mut acc = 0u64;
                for (j, &v) in part.iter().enumerate() {
                    let i = base + j;
                    acc = acc.wrapping_add(f(v, &keys[i * K..(i + 1) * K]));
                }
                black_box(acc);
            });
        }
    });
    q.len() as f64 / t.elapsed().as_secs_f64() / 1e6
}

/// Measures one setup at `n` states.
pub fn measure(sc: &Scale, s: &Setup, n: u64) -> Result<Vec<Record>, String> {
    const K: usize = 9;
    let n = n as usize;
    let vips = sc.lb_vips as usize;
    let dbits = 12u32;
    let net = Net::new(vips, s.bpv, n, s.varied);
    if net.is_empty() {
        return Err(format!("{}: no states", s.id));
    }
    // States per VIP (the Maglev per-VIP table is sized for the largest).
    let mut per_vip = vec![0usize; vips];
    for i in 0..net.len() {
        per_vip[net.vip_of(i)] += 1;
    }
    let maxn = per_vip.iter().copied().max().unwrap_or(1);
    let params = Params { dcode_bits: dbits, max_vips: vips as u32, ..Params::default() };
    let t = Instant::now();
    let (con, cids) = loaded_concury(params, &net);
    let tc = t.elapsed().as_secs_f64();
    let mut mg = Maglev::new(65537, maxn + maxn / 10 + 64, 32).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let mids = load(&mut mg, &net);
    let tm = t.elapsed().as_secs_f64();
    let mut sr = SilkRoad::new(n + n / 10 + 64, 4, 16, dbits).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let sids = load(&mut sr, &net);
    let ts = t.elapsed().as_secs_f64();

    // The query stream: uniformly random tracked states (the thesis's LFSR),
    // keys copied contiguously in stream order.
    let len = sc.lb_queries as usize;
    let mut keys = Vec::with_capacity(len * K);
    let mut vip_of = Vec::with_capacity(len);
    let mut wrong = 0usize;
    for j in 0..len as u64 {
        let i = reduce64(mix64(j ^ 0x5e7u64.rotate_left(21)), net.len() as u64) as usize;
        let v = net.vip_of(i);
        keys.extend_from_slice(net.key(i));
        vip_of.push(v as u32);
        // Concury's data plane must send a tracked state to the DIP its control plane holds.
        let c = con.lookup(cids[v], net.key(i));
        if c.is_none() || c != con.control.backend_of(cids[v], net.key(i)) {
            wrong += 1;
        }
    }
    let key = |i: usize| &keys[i * K..(i + 1) * K];
    let inf = (f64::MAX, f64::MAX);
    let (mut c1, mut m1, mut s1) = (inf, inf, inf);
    let mut thr = [[0f64; 2]; 3];
    let min2 = |a: (f64, f64), b: (f64, f64)| (a.0.min(b.0), a.1.min(b.1));
    let port = |b: Option<keyplane::lb::Backend>| b.map_or(0, |b| b.port as u64);
    for _ in 0..sc.lb_rounds.max(1) {
        {
            let mut r = con.data.reader();
            c1 = min2(
                c1,
                per_lookup(len, || {
                    (0..len).fold(0u64, |a, i| a.wrapping_add(port(r.lookup(cids[vip_of[i] as usize], key(i)))))
                }),
            );
        }
        m1 = min2(
            m1,
            per_lookup(len, || {
                (0..len).fold(0u64, |a, i| a.wrapping_add(port(mg.lookup(mids[vip_of[i] as usize], key(i)))))
            }),
        );
        s1 = min2(
            s1,
            per_lookup(len, || {
                (0..len).fold(0u64, |a, i| a.wrapping_add(port(sr.lookup(sids[vip_of[i] as usize], key(i)))))
            }),
        );
        for (ti, t) in [1usize, 2].into_iter().enumerate() {
            let cref: &[keyplane::lb::VipId] = &cids;
            let c = threaded(&keys, &vip_of, t, || {
                let mut r = con.data.reader();
                move |v: u32, k: &[u8]| port(r.lookup(cref[v as usize], k))
            });
            let m = threaded(&keys, &vip_of, t, || |v: u32, k: &[u8]| port(mg.lookup(mids[v as usize], k)));
            let s = threaded(&keys, &vip_of, t, || |v: u32, k: &[u8]| port(sr.lookup(sids[v as usize], k)));
            thr[0][ti] = thr[0][ti].max(c);
            thr[1][ti] = thr[1][ti].max(m);
            thr[2][ti] = thr[2][ti].max(s);
        }
    }
    let mems = [con.memory_bytes(), mg.memory_bytes(), sr.memory_bytes()];
    let mut out = Vec::new();
    for (d, (name, ns, build)) in
        [("concury", c1, tc), ("maglev", m1, tm), ("silkroad", s1, ts)].into_iter().enumerate()
    {
        let mut r = Record::new(name, n, dbits, KeyType::FiveTuple);
        r.set("setup", s.setup)
            .set("network", s.network)
            .set("vips", vips)
            .set("backends_per_vip_avg", s.bpv)
            .set("memory_bytes", mems[d])
            .set("bits_per_key", mems[d] as f64 * 8.0 / n as f64)
            .set("build_ns_per_key", build * 1e9 / n as f64)
            .set("lookup_ns", ns.0)
            .set("lookup_cpu_ns", ns.1)
            .set("lookups_per_s_1t", 1e9 / ns.0)
            .set("lookups_per_s_1t_cpu", 1e9 / ns.1)
            .set("threaded_lookups_per_s_1t", thr[d][0] * 1e6)
            .set("threaded_lookups_per_s_2t", thr[d][1] * 1e6)
            .set("queries", len)
            .set("rounds", sc.lb_rounds.max(1));
        if name == "concury" {
            r.set("memory_ratio_vs_maglev", mems[0] as f64 / mems[1] as f64)
                .set("memory_ratio_vs_silkroad", mems[0] as f64 / mems[2] as f64)
                .set("queries_misrouted", wrong);
        }
        out.push(r);
    }
    if wrong > 0 {
        return Err(format!("{} at n = {n}: {wrong} of {len} tracked states got a wrong or no DIP", s.id));
    }
    Ok(out)
}
