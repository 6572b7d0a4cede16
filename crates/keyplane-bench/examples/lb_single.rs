//! Concury single lookups at 128 VIPs × 8K states (1M states), keys
//! contiguous in query order as in the bench: independent lookups in a loop
//! vs the same lookups made dependent on each other (the next key's index
//! depends on the previous answer), which shows how far consecutive
//! lookups overlap, and the same for Maglev
//! (`cargo run --release -p keyplane-bench --example lb_single`).
use keyplane::hash::mix64;
use keyplane::lb::baselines::{Balancer, Concury, Maglev};
use keyplane::lb::{Backend, Params, StateKey, Vip, VipId};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

const VIPS: usize = 128;
const BPV: usize = 32;
const PER_VIP: usize = 8_192;

fn load<B: Balancer>(lb: &mut B, ks: &[(usize, StateKey)]) -> Vec<VipId> {
    let ids: Vec<VipId> = (0..VIPS)
        .map(|v| {
            let pool: Vec<(Backend, u32)> = (0..BPV)
                .map(|i| (Backend::new(Ipv4Addr::from(0x0a00_0000 | ((v as u32) << 10) | i as u32), 8080), 1))
                .collect();
            lb.add_vip(Vip::new(Ipv4Addr::from(0xc000_0200 + v as u32), 80, 6), &pool).unwrap()
        })
        .collect();
    for (v, k) in ks {
        let b = lb.packet(ids[*v], k.as_ref()).backend.unwrap();
        lb.connection_start(ids[*v], k.as_ref(), b).unwrap();
    }
    ids
}

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
    let mut ks = Vec::new();
    for vip in 0..VIPS {
        for j in 0..PER_VIP {
            let x = mix64(((vip as u64) << 32 | j as u64) ^ 0x5eed);
            ks.push((vip, StateKey::four_tuple(IpAddr::V4(Ipv4Addr::from((x >> 32) as u32)), x as u16, 443, 6)));
        }
    }
    let mut c = Concury::new(Params { max_vips: VIPS as u32, ..Params::default() }, false).unwrap();
    let cids = load(&mut c, &ks);
    for &v in &cids {
        let d = c.control.refresh(v).unwrap();
        c.data.apply(&d).unwrap();
    }
    let mut m = Maglev::new(65537, PER_VIP + PER_VIP / 10 + 64, 32).unwrap();
    let mids = load(&mut m, &ks);
    let klen = ks[0].1.as_ref().len();
    let order: Vec<usize> = (0..4_000_000u64).map(|i| (mix64(i ^ 77) % ks.len() as u64) as usize).collect();
    let mut flat = Vec::with_capacity(order.len() * klen);
    for &i in &order {
        flat.extend_from_slice(ks[i].1.as_ref());
    }
    let cv: Vec<VipId> = order.iter().map(|&i| cids[ks[i].0]).collect();
    let mv: Vec<VipId> = order.iter().map(|&i| mids[ks[i].0]).collect();
    let mut r = c.data.reader();
    run("concury", &cv, &flat, klen, |v, k| r.lookup(v, k));
    run("maglev", &mv, &flat, klen, |v, k| m.lookup(v, k));
}
