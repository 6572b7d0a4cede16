//! Instructions per single lookup, Concury reader vs Maglev, at a small
//! size (run twice under `valgrind --tool=callgrind` with different round
//! counts and divide the difference by the lookups):
//! `lb_ir concury|maglev|concury-batch|maglev-batch ROUNDS` (the batch
//! modes look up bursts of 32 states of one VIP, as the bench does).
use keyplane::hash::mix64;
use keyplane::lb::baselines::{Balancer, Concury, Maglev};
use keyplane::lb::{Backend, Params, StateKey, Vip, VipId};
use std::net::{IpAddr, Ipv4Addr};

const VIPS: usize = 16;
const BPV: usize = 32;
const PER_VIP: usize = 4_000;

fn keys() -> Vec<(usize, StateKey)> {
    let mut v = Vec::new();
    for vip in 0..VIPS {
        for j in 0..PER_VIP {
            let x = mix64(((vip as u64) << 32 | j as u64) ^ 0x5eed);
            v.push((vip, StateKey::four_tuple(IpAddr::V4(Ipv4Addr::from((x >> 32) as u32)), x as u16, 443, 6)));
        }
    }
    v
}

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

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let rounds: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let ks = keys();
    let mut acc = 0u64;
    // Bursts of 32 keys of one VIP, in the order of `ks` (grouped by VIP).
    let bursts: Vec<(usize, Vec<&[u8]>)> =
        ks.chunks(32).map(|c| (c[0].0, c.iter().map(|(_, k)| k.as_ref()).collect())).collect();
    let mut out = vec![None; 32];
    if which == "concury-batch" || which == "maglev-batch" {
        let lb: Box<dyn Balancer> = if which == "concury-batch" {
            let mut c = Concury::new(Params { max_vips: VIPS as u32, ..Params::default() }, false).unwrap();
            let ids = load(&mut c, &ks);
            for &v in &ids {
                let d = c.control.refresh(v).unwrap();
                c.data.apply(&d).unwrap();
            }
            Box::new(c)
        } else {
            let mut m = Maglev::new(65537, PER_VIP * 2, 32).unwrap();
            load(&mut m, &ks);
            Box::new(m)
        };
        for _ in 0..rounds {
            for (v, keys) in &bursts {
                lb.lookup_batch(*v as VipId, keys, &mut out);
                acc += out[0].map_or(1, |b| b.port as u64);
            }
        }
    } else if which == "concury" {
        let mut c = Concury::new(Params { max_vips: VIPS as u32, ..Params::default() }, false).unwrap();
        let ids = load(&mut c, &ks);
        for &v in &ids {
            let d = c.control.refresh(v).unwrap();
            c.data.apply(&d).unwrap();
        }
        let mut r = c.data.reader();
        for _ in 0..rounds {
            for (v, k) in &ks {
                acc += r.lookup(ids[*v], k.as_ref()).map_or(1, |b| b.port as u64);
            }
        }
    } else {
        let mut m = Maglev::new(65537, PER_VIP * 2, 32).unwrap();
        let ids = load(&mut m, &ks);
        for _ in 0..rounds {
            for (v, k) in &ks {
                acc += m.lookup(ids[*v], k.as_ref()).map_or(1, |b| b.port as u64);
            }
        }
    }
    println!("{acc}");
}
