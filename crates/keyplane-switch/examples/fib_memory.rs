//! FIB memory per MAC and alien filtering of the L2 FIB structures (issue #16 target
//! "OFW at l = 8: ≤ 2.4·l + f bits per MAC"). Not a test.
//!
//! ```text
//! cargo run --release -p keyplane-switch --example fib_memory [-- MACS]
//! ```
//!
//! For each candidate FIB (l = 8 value bits) over `MACS` random unicast MACs (default 2^20):
//! lookup-form bytes (`memory_bytes`) per MAC, the fraction of 2^20 never-inserted MACs it
//! claims as known (alien false positives), that every inserted MAC reads its port, and live
//! updates: 10,000 port moves and 10,000 inserts of new MACs made by the control form and applied
//! to the running lookup form as deltas (all must apply; the moved / new MACs must read their new
//! port). JSON lines to `docs/bench/fib_memory.json` (`FIB_MEMORY_JSON` to change) and stdout.

use keyplane_any::{AnyControl, Opts};
use std::io::Write;
use std::time::Instant;

fn mac(i: u64, alien: bool) -> [u8; 6] {
    // Unicast, locally administered, distinct for distinct i < 2^24 (the low three bytes are i);
    // aliens differ in the first byte.
    let b = keyplane_hash(i).to_le_bytes();
    [if alien { 0x06 } else { 0x02 }, b[0], b[1], (i >> 16) as u8, (i >> 8) as u8, i as u8]
}

fn keyplane_hash(x: u64) -> u64 {
    // splitmix64: distinct inputs give distinct outputs.
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let json_path = std::env::var("FIB_MEMORY_JSON").unwrap_or_else(|_| "docs/bench/fib_memory.json".into());
    let l = 8u32;
    let ports = 48u64;
    // (label, structure, options, f for the literal bound 2.4·l + f)
    let cands: &[(&str, &str, &str, u32)] = &[
        ("othello (Concise, no filtering)", "othello", "", 0),
        ("OFW f=8 + emptiness (9-bit field)", "othello", "filtered=8", 8),
        ("OFW thesis layout l_f=8 (7 + emptiness)", "othello", "filtered=7", 8),
        ("OFW l_f=3 (2 + emptiness)", "othello", "filtered=2", 2),
        ("ludo f=8", "ludo", "fingerprint_bits=8", 8),
        ("ludo f=0 (no filtering)", "ludo", "", 0),
        ("cfw f=8", "cfw", "fingerprint_bits=8", 8),
        ("cfw (12-bit fingerprints, the default)", "cfw", "", 12),
    ];
    let mut out = Vec::new();
    for &(label, s, o, f) in cands {
        let items = (0..n).map(|i| (mac(i, false).to_vec(), i % ports));
        let t = Instant::now();
        let mut ctl = AnyControl::build(s, items, l, &Opts::parse(o).unwrap()).unwrap();
        let build_s = t.elapsed().as_secs_f64();
        let look = ctl.export();
        let bytes = look.memory_bytes();
        let bits = bytes as f64 * 8.0 / n as f64;
        let wrong = (0..n).filter(|&i| look.get(&mac(i, false)) != Some(i % ports)).count();
        let aliens = 1u64 << 20;
        let claimed = (0..aliens).filter(|&i| look.get(&mac(i, true)).is_some()).count();
        // Live updates: moves of existing MACs, then inserts of new ones, as deltas.
        let t = Instant::now();
        let mut deltas = Vec::with_capacity(20_000);
        for i in 0..10_000u64 {
            deltas.push(ctl.insert(&mac(i, false), (i + 1) % ports).unwrap());
        }
        for i in 0..10_000u64 {
            deltas.push(ctl.insert(&mac(n + i, false), i % ports).unwrap());
        }
        let make_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut failed = 0;
        for d in &deltas {
            if look.apply_bytes(d).is_err() {
                failed += 1;
            }
        }
        let apply_s = t.elapsed().as_secs_f64();
        let moved_ok = (0..10_000u64).all(|i| look.get(&mac(i, false)) == Some((i + 1) % ports));
        let added_ok = (0..10_000u64).all(|i| look.get(&mac(n + i, false)) == Some(i % ports));
        let bytes_after = look.memory_bytes();
        let bound = 2.4 * l as f64 + f as f64;
        eprintln!(
            "{label:<42} {bits:>6.2} bits/MAC (literal bound 2.4·l+f = {bound:.1}: {}), aliens claimed {claimed}/{aliens} = {:.4} %, \
             wrong {wrong}, build {build_s:.2} s, 20,000 deltas made {make_s:.2} s applied {apply_s:.2} s ({failed} refused), \
             moves ok {moved_ok}, inserts ok {added_ok}, bytes after {bytes_after}",
            if bits <= bound { "within" } else { "over" },
            claimed as f64 * 100.0 / aliens as f64
        );
        out.push(format!(
            "{{\"bench\":\"fib_memory\",\"fib\":\"{label}\",\"structure\":\"{s}\",\"options\":\"{o}\",\"value_bits\":{l},\"macs\":{n},\
             \"bytes\":{bytes},\"bits_per_mac\":{bits:.2},\"literal_bound_bits\":{bound:.1},\"aliens\":{aliens},\"aliens_claimed\":{claimed},\
             \"wrong_answers\":{wrong},\"build_s\":{build_s:.2},\"deltas\":20000,\"deltas_refused\":{failed},\"delta_apply_s\":{apply_s:.3},\
             \"moves_ok\":{moved_ok},\"inserts_ok\":{added_ok},\"bytes_after_updates\":{bytes_after}}}"
        ));
    }
    let mut fh = std::fs::File::create(&json_path).unwrap();
    for l in &out {
        writeln!(fh, "{l}").unwrap();
        println!("{l}");
    }
}
