//! Instructions per lookup, Concury vs Maglev, at a small size (run twice
//! under `valgrind --tool=callgrind` with different round counts and divide
//! the difference by the lookups):
//! `lb_ir concury|maglev|concury-batch|maglev-batch|concury-mixed ROUNDS`.
//! Single lookups go through Concury's per-thread reader; the batch modes
//! look up bursts of 32 states of one VIP, as the bench does;
//! `concury-mixed` looks up bursts of 32 packets, each to the next VIP
//! (the mixed-VIP `lookup_batch`).
use keyplane::lb::Balancer;
use keyplane::lb::maglev::Maglev;
use keyplane::lb::{Params, VipId};
use keyplane_perf::lb::{Net, load, loaded_concury};

const VIPS: usize = 16;
const BPV: usize = 32;
const PER_VIP: usize = 4_000;

/// The VIP id of every state, outside the timed loops.
fn vip_ids(net: &Net, ids: &[VipId]) -> Vec<VipId> {
    (0..net.len()).map(|i| ids[net.vip_of(i)]).collect()
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let rounds: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let net = Net::new(VIPS, BPV, VIPS * PER_VIP, false);
    let params = Params { max_vips: VIPS as u32, ..Params::default() };
    let mut acc = 0u64;
    match which.as_str() {
        "concury" => {
            let (c, ids) = loaded_concury(params, &net);
            let vid = vip_ids(&net, &ids);
            let mut r = c.data.reader();
            for _ in 0..rounds {
                for (i, &v) in vid.iter().enumerate() {
                    acc += r.lookup(v, net.key(i)).map_or(1, |b| b.port as u64);
                }
            }
        }
        "concury-mixed" => {
            let (c, ids) = loaded_concury(params, &net);
            // Interleave VIPs: packet j of the stream is state (j % VIPS)·PER_VIP + j / VIPS.
            let order: Vec<usize> = (0..net.len()).map(|j| (j % VIPS) * PER_VIP + j / VIPS).collect();
            let vid: Vec<VipId> = order.iter().map(|&i| ids[net.vip_of(i)]).collect();
            let keys: Vec<&[u8]> = order.iter().map(|&i| net.key(i)).collect();
            let mut r = c.data.reader();
            let mut out = vec![None; 32];
            for _ in 0..rounds {
                for (v, k) in vid.chunks(32).zip(keys.chunks(32)) {
                    r.lookup_batch(v, k, &mut out);
                    acc += out[0].map_or(1, |b| b.port as u64);
                }
            }
        }
        "concury-batch" | "maglev-batch" => {
            let (lb, ids): (Box<dyn Balancer>, _) = if which == "concury-batch" {
                let (c, ids) = loaded_concury(params, &net);
                (Box::new(c), ids)
            } else {
                let mut m = Maglev::new(65537, PER_VIP * 2, 32).unwrap();
                let ids = load(&mut m, &net);
                (Box::new(m), ids)
            };
            // Bursts of 32 states of one VIP (VIP v holds states v·PER_VIP..).
            let bursts: Vec<(usize, Vec<&[u8]>)> = (0..net.len())
                .step_by(32)
                .map(|i| {
                    let end = (i + 32).min((i / PER_VIP + 1) * PER_VIP);
                    (net.vip_of(i), (i..end).map(|j| net.key(j)).collect())
                })
                .collect();
            let mut out = vec![None; 32];
            for _ in 0..rounds {
                for (v, keys) in &bursts {
                    lb.lookup_batch(ids[*v], keys, &mut out);
                    acc += out[0].map_or(1, |b| b.port as u64);
                }
            }
        }
        _ => {
            let mut m = Maglev::new(65537, PER_VIP * 2, 32).unwrap();
            let vid = vip_ids(&net, &load(&mut m, &net));
            for _ in 0..rounds {
                for (i, &v) in vid.iter().enumerate() {
                    acc += m.lookup(v, net.key(i)).map_or(1, |b| b.port as u64);
                }
            }
        }
    }
    println!("{acc}");
}
