//! Concury single lookups at 128 VIPs × 8K states (1M states; `VIPS=n` for n VIPs), keys
//! contiguous in query order as in the bench: independent lookups in a loop
//! vs the same lookups made dependent on each other (the next key's index
//! depends on the previous answer), which shows how far consecutive
//! lookups overlap, and the same for Maglev
//! (`cargo run --release -p keyplane-bench --example lb_single`).
use keyplane::hash::mix64;
use keyplane::lb::Balancer;
use keyplane::lb::maglev::Maglev;
use keyplane::lb::{Backend, Params, VipId};
use keyplane_perf::lb::{Net, load, loaded_concury};
use std::hint::black_box;
use std::time::Instant;

const BPV: usize = 32;
const PER_VIP: usize = 8_192;

fn run(name: &str, vids: &[VipId], flat: &[u8], klen: usize, mut f: impl FnMut(VipId, &[u8]) -> Option<Backend>) {
    let n = vids.len();
    for _ in 0..3 {
        let t = Instant::now();
        let mut acc = 0u64;
        for i in 0..n {
            acc = acc.wrapping_add(f(vids[i], &flat[i * klen..(i + 1) * klen]).map_or(1, |b| b.port as u64));
        }
        let ind = t.elapsed().as_nanos() as f64 / n as f64;
        black_box(acc);
        let zero = black_box(0usize);
        let t = Instant::now();
        let mut dep = 0usize;
        for i in 0..n {
            let j = (i + dep) % n;
            dep = f(vids[j], &flat[j * klen..(j + 1) * klen]).map_or(1, |b| b.port as usize) & zero;
        }
        let d = t.elapsed().as_nanos() as f64 / n as f64;
        black_box(dep);
        println!("{name}: independent {ind:.1} ns, dependent {d:.1} ns");
    }
}

fn main() {
    // `VIPS=n` shrinks the network (n × 8K states) to see the same lookups
    // with the planes in L2 (4 VIPs) or L3 (64 VIPs) instead of 128 VIPs' 5 MB.
    let vips: usize = std::env::var("VIPS").ok().and_then(|v| v.parse().ok()).unwrap_or(128);
    let net = Net::new(vips, BPV, vips * PER_VIP, false);
    let (c, cids) = loaded_concury(Params { max_vips: vips as u32, ..Params::default() }, &net);
    let mut m = Maglev::new(65537, PER_VIP + PER_VIP / 10 + 64, 32).unwrap();
    let mids = load(&mut m, &net);
    let klen = net.key(0).len();
    let order: Vec<usize> = (0..4_000_000u64).map(|i| (mix64(i ^ 77) % net.len() as u64) as usize).collect();
    let mut flat = Vec::with_capacity(order.len() * klen);
    for &i in &order {
        flat.extend_from_slice(net.key(i));
    }
    let cv: Vec<VipId> = order.iter().map(|&i| cids[net.vip_of(i)]).collect();
    let mv: Vec<VipId> = order.iter().map(|&i| mids[net.vip_of(i)]).collect();
    let mut r = c.data.reader();
    run("concury", &cv, &flat, klen, |v, k| r.lookup(v, k));
    run("maglev", &mv, &flat, klen, |v, k| m.lookup(v, k));
}
