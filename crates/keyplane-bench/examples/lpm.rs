//! LPM benchmark (issue #16, "LPM lookups per second and memory per prefix"):
//! `keyplane::lpm` against a DIR-24-8 array (`keyplane_perf::dir24`) and
//! the Linux kernel's own IPv4 FIB, on one synthetic table of IPv4 prefixes
//! with a realistic length distribution.
//!
//! ```text
//! cargo run --release -p keyplane-bench --example lpm -- [--prefixes 1000000] [--lookups 4000000] [--rounds 3] \
//!     [--updates 200000] [--kernel-gets 20000] [--no-kernel] [--json docs/bench/lpm.json]
//! ```
//!
//! Measured, one core, rounds alternating the implementations:
//! * lookups per second, single calls (`Reader::get_v4`) and batches of 32
//!   (`ReadHandle::get_batch`), on two address streams: `matched` (a random
//!   address inside a random prefix of the table) and `uniform` (random
//!   32-bit addresses, many under short prefixes or no route);
//! * memory per prefix (`memory_bytes`; DIR-24-8: its two arrays);
//! * updates: control-form inserts / next-hop changes / removes per second
//!   (delta generation) and delta applications per second on the lookup form;
//! * the kernel (root only): route insertion with `ip -batch` into a fresh
//!   network namespace (removed afterwards, also on failure), the slab
//!   memory the routes took, and `ip route get` through netlink — a
//!   syscall-and-netlink round trip per lookup, NOT the FIB's own lookup
//!   cost, reported as such; its answers are cross-checked with ours.

use clap::Parser;
use keyplane::lpm::{self, Prefix};
use keyplane::{ControlTable, LookupTable, ReadHandle};
use keyplane_keygen::parse_num;
use keyplane_perf::dir24::Dir24;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::hint::black_box;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::Instant;

/// xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// Length distribution (per mille), shaped like a BGP table: most /24, then
/// /22–/23, /16–/21, a few shorter, a few longer than /24.
const LENS: &[(u8, u32)] = &[
    (8, 1),
    (10, 1),
    (12, 2),
    (13, 2),
    (14, 3),
    (15, 4),
    (16, 15),
    (17, 10),
    (18, 17),
    (19, 30),
    (20, 45),
    (21, 50),
    (22, 120),
    (23, 100),
    (24, 590),
    (25, 3),
    (26, 3),
    (27, 2),
    (28, 1),
    (32, 1),
];

fn pick_len(r: &mut Rng) -> u8 {
    let mut x = r.below(1000) as u32;
    for &(l, w) in LENS {
        if x < w {
            return l;
        }
        x -= w;
    }
    24
}

/// `n` distinct prefixes in unicast space (1.0.0.0–223.255.255.255), next hops below 2^vbits.
fn routes(n: usize, vbits: u32, seed: u64) -> Vec<(Prefix, u64)> {
    let mut r = Rng(seed | 1);
    let mut seen = HashSet::with_capacity(n);
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let a = 0x0100_0000 + r.below(0xdf00_0000 - 0x0100_0000) as u32;
        let p = Prefix::v4(Ipv4Addr::from(a), pick_len(&mut r)).expect("length ≤ 32");
        if seen.insert(p) {
            v.push((p, r.below(1 << vbits)));
        }
    }
    v
}

fn dir_routes(rs: &[(Prefix, u64)]) -> Vec<(u32, u8, u16)> {
    rs.iter().map(|(p, v)| (p.bits() as u32, p.len(), *v as u16)).collect()
}

fn matched(rs: &[(Prefix, u64)], n: usize, seed: u64) -> Vec<u32> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| {
            let p = rs[r.below(rs.len() as u64) as usize].0;
            let host = if p.len() == 32 { 0 } else { (r.next() as u32) >> p.len() };
            p.bits() as u32 | host
        })
        .collect()
}

fn uniform(n: usize, seed: u64) -> Vec<u32> {
    let mut r = Rng(seed | 1);
    (0..n).map(|_| r.next() as u32).collect()
}

/// CPU time this thread has used, in ns (`getrusage(RUSAGE_THREAD)`): time
/// the shared machine's scheduler gave to other processes is not in it.
fn thread_cpu_ns() -> u64 {
    // SAFETY: an all-zero `rusage` is a valid value (plain integers).
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable `rusage`; RUSAGE_THREAD is valid on Linux.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(r.ru_utime) + us(r.ru_stime)) * 1000
}

/// (wall ns per op, thread CPU ns in total) of `f` over `n` ops.
fn ns_per(n: usize, f: impl FnOnce()) -> (f64, u64) {
    let c = thread_cpu_ns();
    let t = Instant::now();
    f();
    (t.elapsed().as_nanos() as f64 / n as f64, thread_cpu_ns() - c)
}

const CHUNK: usize = 8192;

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

fn range(v: &[f64]) -> (f64, f64) {
    (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(0.0, f64::max))
}

/// A network namespace, deleted on drop (also when the benchmark panics).
struct Netns(String);
impl Netns {
    fn create(name: String) -> Result<Self, String> {
        run_ip(&["netns", "add", &name])?;
        let ns = Netns(name);
        for cmd in [
            vec!["link", "add", "kplpma", "type", "veth", "peer", "name", "kplpmb"],
            vec!["link", "set", "kplpma", "up"],
            vec!["link", "set", "kplpmb", "up"],
            vec!["addr", "add", "198.18.0.1/15", "dev", "kplpma"],
        ] {
            let mut a = vec!["-n", &ns.0];
            a.extend(cmd);
            run_ip(&a)?;
        }
        Ok(ns)
    }
}
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run_ip(args: &[&str]) -> Result<String, String> {
    let o = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if !o.status.success() {
        return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Runs `ip -n NS -batch -` over `lines`; returns (seconds, stdout).
fn ip_batch(ns: &str, lines: &str) -> Result<(f64, String), String> {
    let t = Instant::now();
    let mut c = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("ip: {e}"))?;
    let mut stdin = c.stdin.take().ok_or("no stdin")?;
    let body = lines.to_string();
    let feeder = std::thread::spawn(move || stdin.write_all(body.as_bytes()));
    let o = c.wait_with_output().map_err(|e| e.to_string())?;
    let _ = feeder.join();
    if !o.status.success() {
        return Err(format!("ip -batch: {}", String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("")));
    }
    Ok((t.elapsed().as_secs_f64(), String::from_utf8_lossy(&o.stdout).into_owned()))
}

fn meminfo_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// Bytes held by the FIB trie's own slab caches (ip_fib_trie, ip_fib_alias).
fn fib_slab_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/slabinfo").ok()?;
    Some(
        s.lines()
            .filter(|l| l.starts_with("ip_fib_trie ") || l.starts_with("ip_fib_alias "))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some(f.get(2)?.parse::<u64>().ok()? * f.get(3)?.parse::<u64>().ok()?)
            })
            .sum(),
    )
}

fn kernel(rs: &[(Prefix, u64)], t: &lpm::Lookup, gets: usize, out: &mut Vec<Value>) -> Result<(), String> {
    let ns = Netns::create(format!("kplpm-{}-0", std::process::id()))?;
    let body: String =
        rs.iter().map(|(p, v)| format!("route add {p} via 198.18.1.{} dev kplpma\n", v & 0xff)).collect();
    let (slab0, fib0) = (meminfo_kb("Slab:"), fib_slab_bytes());
    let (secs, _) = ip_batch(&ns.0, &body)?;
    let (slab1, fib1) = (meminfo_kb("Slab:"), fib_slab_bytes());
    let n = rs.len();
    let count = run_ip(&["-n", &ns.0, "-4", "route", "show"])?.lines().count();
    let slab_delta = slab1.zip(slab0).map(|(a, b)| (a as i64 - b as i64) * 1024);
    let fib_delta = fib1.zip(fib0).map(|(a, b)| a as i64 - b as i64);
    eprintln!(
        "kernel: {n} routes inserted in {secs:.2} s ({:.0} routes/s); {count} routes listed; slab +{:?} bytes \
         (fib caches +{:?} bytes)",
        n as f64 / secs,
        slab_delta,
        fib_delta
    );
    out.push(json!({"bench": "lpm", "impl": "linux-fib", "metric": "insert", "prefixes": n,
        "seconds": secs, "routes_per_s": n as f64 / secs, "routes_listed": count,
        "slab_delta_bytes": slab_delta, "slab_bytes_per_prefix": slab_delta.map(|d| d as f64 / n as f64),
        "fib_cache_delta_bytes": fib_delta, "fib_cache_bytes_per_prefix": fib_delta.map(|d| d as f64 / n as f64),
        "how": "ip -batch 'route add P via 198.18.1.X dev veth' into a fresh netns; memory = /proc/meminfo Slab delta (whole machine, noisy) and the ip_fib_trie + ip_fib_alias slab caches"}));
    // `ip route get` through netlink, cross-checked with keyplane::lpm.
    let addrs = matched(rs, gets, 77);
    let body: String = addrs.iter().map(|a| format!("route get {}\n", Ipv4Addr::from(*a))).collect();
    let (secs, text) = ip_batch(&ns.0, &body)?;
    let mut agree = 0usize;
    let mut answered = 0usize;
    for (line, a) in text.lines().filter(|l| !l.starts_with(' ') && !l.trim().is_empty()).zip(&addrs) {
        answered += 1;
        let via = line.split_whitespace().skip_while(|w| *w != "via").nth(1).and_then(|g| g.rsplit('.').next());
        let kernel_nh = via.and_then(|x| x.parse::<u64>().ok());
        let ours = t.get_v4(Ipv4Addr::from(*a)).map(|v| v & 0xff);
        agree += (kernel_nh == ours) as usize;
    }
    eprintln!(
        "kernel: {gets} `ip route get` in {secs:.2} s ({:.0} lookups/s through netlink); {agree}/{answered} answers \
         agree with keyplane::lpm",
        gets as f64 / secs
    );
    out.push(json!({"bench": "lpm", "impl": "linux-fib", "metric": "ip_route_get", "lookups": gets,
        "seconds": secs, "lookups_per_s": gets as f64 / secs, "answers_agreeing_with_keyplane": agree,
        "answers": answered,
        "how": "ip -batch 'route get A': one netlink request and reply per lookup; dominated by the syscall and netlink, NOT the FIB trie's own lookup cost"}));
    drop(ns);
    Ok(())
}

/// The example's flags (counts accept 1M, 64K, 1e6).
#[derive(Parser, Debug)]
struct Flags {
    /// IPv4 prefixes in the table.
    #[arg(long, default_value = "1000000", value_parser = count)]
    prefixes: usize,
    /// Lookups per round.
    #[arg(long, default_value = "4000000", value_parser = count)]
    lookups: usize,
    /// Rounds (best of).
    #[arg(long, default_value = "3", value_parser = count)]
    rounds: usize,
    /// Route updates to time.
    #[arg(long, default_value = "200000", value_parser = count)]
    updates: usize,
    /// `ip route get` lookups against the kernel FIB.
    #[arg(long, default_value = "20000", value_parser = count)]
    kernel_gets: usize,
    /// Skip the kernel FIB comparison.
    #[arg(long)]
    no_kernel: bool,
    /// Write the JSON here instead of stdout.
    #[arg(long)]
    json: Option<String>,
}

fn count(v: &str) -> Result<usize, String> {
    parse_num(v).map(|n| n as usize).ok_or_else(|| format!("{v:?} is not a count (1000, 64K, 1M)"))
}

fn main() {
    let args = Flags::parse();
    let n = args.prefixes.max(1);
    let lookups = args.lookups.max(1);
    let rounds = args.rounds.max(1);
    let updates = args.updates;
    let gets = args.kernel_gets;
    let vbits = 8;
    let mut out: Vec<Value> = Vec::new();

    eprintln!("generating {n} IPv4 prefixes");
    let rs = routes(n, vbits, 1);
    let mut hist = [0usize; 33];
    for (p, _) in &rs {
        hist[p.len() as usize] += 1;
    }
    let t0 = Instant::now();
    let ctl = lpm::Control::from_prefixes(rs.iter().copied(), vbits).expect("build");
    let build_s = t0.elapsed().as_secs_f64();
    let table = ctl.export();
    let t0 = Instant::now();
    let dir = Dir24::build(&dir_routes(&rs)).expect("dir24");
    let dir_build_s = t0.elapsed().as_secs_f64();
    let (mem, dmem) = (table.memory_bytes(), dir.memory_bytes());
    eprintln!(
        "keyplane::lpm: built in {build_s:.2} s, {mem} bytes = {:.2} bytes/prefix; lengths {:?}",
        mem as f64 / n as f64,
        table.lengths(lpm::Family::V4)
    );
    eprintln!(
        "DIR-24-8:      built in {dir_build_s:.2} s, {dmem} bytes = {:.2} bytes/prefix ({} tbl8 groups)",
        dmem as f64 / n as f64,
        dir.groups()
    );
    // Both must agree everywhere we look (a check, not a measurement).
    for a in matched(&rs, 200_000, 5).into_iter().chain(uniform(200_000, 6)) {
        assert_eq!(table.get_v4(Ipv4Addr::from(a)), dir.get(a).map(u64::from), "disagree at {}", Ipv4Addr::from(a));
    }
    let hist_json: Vec<Value> =
        hist.iter().enumerate().filter(|(_, c)| **c > 0).map(|(l, c)| json!({"len": l, "count": c})).collect();
    out.push(json!({"bench": "lpm", "impl": "keyplane-lpm", "metric": "memory", "prefixes": n, "value_bits": vbits,
        "memory_bytes": mem, "bytes_per_prefix": mem as f64 / n as f64, "build_s": build_s,
        "lengths_with_tables": table.lengths(lpm::Family::V4).len(), "length_histogram": hist_json}));
    out.push(json!({"bench": "lpm", "impl": "dir-24-8", "metric": "memory", "prefixes": n,
        "memory_bytes": dmem, "bytes_per_prefix": dmem as f64 / n as f64, "build_s": dir_build_s,
        "tbl8_groups": dir.groups()}));

    let reader = table.reader();
    for (wl, addrs) in [("matched", matched(&rs, lookups, 3)), ("uniform", uniform(lookups, 4))] {
        let keys: Vec<[u8; 4]> = addrs.iter().map(|a| a.to_be_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let mut res = vec![None; 32];
        let (mut single, mut batch, mut base) = (Vec::new(), Vec::new(), Vec::new());
        let mut cpu = [0u64; 3];
        // Chunks of CHUNK lookups timed one by one, the implementations
        // alternating chunk by chunk: on a shared machine a chunk that was
        // descheduled shows up as an outlier instead of inflating the mean.
        for _ in 0..rounds {
            for (ac, rc) in addrs.chunks(CHUNK).zip(refs.chunks(CHUNK)) {
                let (w, c) = ns_per(ac.len(), || {
                    let mut s = 0u64;
                    for &a in ac {
                        s = s.wrapping_add(reader.get_v4(Ipv4Addr::from(a)).unwrap_or(7));
                    }
                    black_box(s);
                });
                single.push(w);
                cpu[0] += c;
                let (w, c) = ns_per(ac.len(), || {
                    let mut s = 0u64;
                    for &a in ac {
                        s = s.wrapping_add(dir.get(a).map_or(7, u64::from));
                    }
                    black_box(s);
                });
                base.push(w);
                cpu[2] += c;
                let (w, c) = ns_per(ac.len(), || {
                    let mut s = 0u64;
                    for c in rc.chunks(32) {
                        reader.get_batch(c, &mut res[..c.len()]);
                        s = s.wrapping_add(res[..c.len()].iter().map(|v| v.unwrap_or(7)).sum::<u64>());
                    }
                    black_box(s);
                });
                batch.push(w);
                cpu[1] += c;
            }
        }
        let total = (addrs.len() * rounds) as f64;
        for (j, (name, v)) in
            [("keyplane-lpm", &single), ("keyplane-lpm-batch32", &batch), ("dir-24-8", &base)].into_iter().enumerate()
        {
            let cpu_ns = cpu[j] as f64 / total;
            let (lo, _) = range(v);
            let (q1, med) = (quantile(v, 0.25), quantile(v, 0.5));
            eprintln!(
                "{wl:8} {name:22} CPU {cpu_ns:6.1} ns/lookup ({:.1} M/s); wall: best chunk {lo:6.1}, q1 {q1:6.1}, median {med:6.1}",
                1e3 / cpu_ns
            );
            out.push(json!({"bench": "lpm", "impl": name, "metric": "lookup", "workload": wl, "prefixes": n,
                "cpu_ns_per_lookup": cpu_ns, "mlookups_per_s_cpu": 1e3 / cpu_ns,
                "lookups_per_chunk": CHUNK, "chunks": v.len(), "ns_per_lookup_best": lo,
                "ns_per_lookup_q1": q1, "ns_per_lookup_median": med,
                "mlookups_per_s_best": 1e3 / lo, "mlookups_per_s_median": 1e3 / med}));
        }
    }

    // Updates: 50% new prefixes, 25% next-hop changes, 25% removes.
    let mut ctl = ctl;
    let mut r = Rng(99);
    let mut live: Vec<Prefix> = rs.iter().map(|(p, _)| *p).collect();
    let fresh = routes(n + updates, vbits, 1);
    let mut next_new = n;
    let mut deltas = Vec::with_capacity(updates);
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    for _ in 0..updates {
        let k = r.below(4);
        let d = if k < 2 && next_new < fresh.len() {
            let (p, v) = fresh[next_new];
            next_new += 1;
            live.push(p);
            ctl.insert_prefix(p, v).expect("insert")
        } else if k == 2 {
            let p = live[r.below(live.len() as u64) as usize];
            ctl.insert_prefix(p, r.below(1 << vbits)).expect("change")
        } else {
            let i = r.below(live.len() as u64) as usize;
            let p = live.swap_remove(i);
            ctl.remove_prefix(p).expect("remove").expect("present")
        };
        deltas.push(d);
    }
    let ctl_s = t0.elapsed().as_secs_f64();
    let ctl_cpu = (thread_cpu_ns() - c0) as f64 / 1e9;
    let structural = deltas.iter().filter(|d| d.replaces_a_length()).count();
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    for d in &deltas {
        table.apply(d).expect("apply");
    }
    let apply_s = t0.elapsed().as_secs_f64();
    let apply_cpu = (thread_cpu_ns() - c0) as f64 / 1e9;
    eprintln!(
        "updates: {updates} on the control form in {ctl_cpu:.2} s CPU ({:.0}/s; wall {ctl_s:.2} s), applied in \
         {apply_cpu:.2} s CPU ({:.0}/s; wall {apply_s:.2} s); {structural} replaced a whole length table",
        updates as f64 / ctl_cpu,
        updates as f64 / apply_cpu
    );
    out.push(json!({"bench": "lpm", "impl": "keyplane-lpm", "metric": "update", "prefixes": n, "updates": updates,
        "mix": "50% insert new, 25% next-hop change, 25% remove",
        "control_updates_per_s_cpu": updates as f64 / ctl_cpu, "apply_updates_per_s_cpu": updates as f64 / apply_cpu,
        "control_updates_per_s_wall": updates as f64 / ctl_s, "apply_updates_per_s_wall": updates as f64 / apply_s, "deltas_replacing_a_length": structural}));
    // Same answers as a fresh export after all updates (a check).
    let fresh_t = ctl.export();
    for a in matched(&rs, 100_000, 8) {
        let a = Ipv4Addr::from(a);
        assert_eq!(table.get_v4(a), fresh_t.get_v4(a));
    }
    drop(fresh_t);

    if !args.no_kernel {
        let cur: Vec<(Prefix, u64)> = ctl.prefixes().collect();
        if let Err(e) = kernel(&cur, &table, gets, &mut out) {
            eprintln!("kernel FIB not measured: {e}");
        }
    }
    let text = serde_json::to_string_pretty(&out).expect("json");
    match &args.json {
        None => println!("{text}"),
        Some(path) => std::fs::write(path, text + "\n").expect("write json"),
    }
}
