use keyplane::ControlTable;
use keyplane::lb::*;
use std::time::Instant;
fn cpu() -> f64 { std::fs::read_to_string("/proc/thread-self/schedstat").unwrap().split_whitespace().next().unwrap().parse::<f64>().unwrap() / 1e6 }
fn main() {
    let n: usize = std::env::args().nth(1).map_or(131072, |s| s.parse().unwrap());
    let mut o = keyplane::othello::Control::with_value_bits(32).unwrap();
    let keys: Vec<Vec<u8>> = (0..n as u64).map(|i| keyplane::hash::mix64(i).to_le_bytes()[..9.min(8)].to_vec()).collect();
    for (i, k) in keys.iter().enumerate() { o.insert(k, i as u64).unwrap(); }
    for _ in 0..3 {
        let t = Instant::now();
        let l = o.export_with(|k| k[0] as u64 & 0xfff).unwrap();
        eprintln!("export_with {n}: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
        drop(l);
    }
    let mut ctl = Control::new(Params { max_vips: 1, ..Params::default() }).unwrap();
    let pool: Vec<(Backend, u32)> = (0..32).map(|i| (Backend::new(std::net::Ipv4Addr::from(i as u32), 80), 1)).collect();
    let (v, _) = ctl.add_vip(Vip::new(std::net::Ipv4Addr::LOCALHOST, 80, 6), &pool).unwrap();
    for (i, k) in keys.iter().enumerate() { ctl.connection_start(v, k, pool[i % 32].0).unwrap(); }
    for r in 0..5 {
        let t = Instant::now(); let c0 = cpu();
        let _ = ctl.set_weight(v, pool[r].0, 2).unwrap();
        eprintln!("update_pool {n}: {:.2} ms wall {:.2} ms cpu", t.elapsed().as_secs_f64() * 1e3, cpu() - c0);
    }
}
