//! LPM tables against a naive longest-prefix oracle.

use keyplane::conformance::Rng;
use keyplane::lpm::{self, Family, Prefix};
use keyplane::{ControlTable, Error, LookupTable, ReadHandle, Wire};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The oracle: every prefix in a map, lengths tried longest first.
#[derive(Default, Clone)]
struct Oracle(BTreeMap<Prefix, u64>);

impl Oracle {
    fn lpm(&self, a: IpAddr) -> Option<u64> {
        let w = if a.is_ipv4() { 32 } else { 128 };
        (0..=w).rev().find_map(|l| self.0.get(&Prefix::truncated(a, l).unwrap()).copied())
    }
}

fn addr(f: Family, bits: u128) -> IpAddr {
    match f {
        Family::V4 => IpAddr::V4(Ipv4Addr::from(bits as u32)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(bits)),
    }
}

fn key(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn rand128(r: &mut Rng) -> u128 {
    (r.next_u64() as u128) << 64 | r.next_u64() as u128
}

/// Prefixes crowded into a few /8 (v4) or /16 (v6) regions so that top
/// blocks, lengths and nesting collide; about half are derived from an
/// existing prefix (longer or shorter), a few are short or the default route.
fn rand_prefix(r: &mut Rng, f: Family, existing: &[Prefix]) -> Prefix {
    let w = f.width();
    if !existing.is_empty() && r.chance(0.5) {
        let base = existing[r.below(existing.len() as u64) as usize];
        if base.family() == f {
            let len = if r.chance(0.7) {
                (base.len() as u64 + 1 + r.below(8)).min(w as u64) as u8
            } else {
                r.below(base.len() as u64 + 1) as u8
            };
            let bits = base.bits() | (rand128(r) & host_mask(w, base.len()));
            return Prefix::truncated(addr(f, bits), len).unwrap();
        }
    }
    let len = match r.below(10) {
        0 => r.below(17) as u8,
        1..=5 => (17 + r.below(w as u64 - 16)) as u8,
        _ => {
            if f == Family::V4 {
                [20u8, 22, 23, 24, 24, 24, 32][r.below(7) as usize]
            } else {
                [32u8, 48, 56, 64, 64, 128][r.below(6) as usize]
            }
        }
    };
    let region: u128 = match f {
        Family::V4 => [10u128, 198, 172][r.below(3) as usize] << 24 | (r.below(4) as u128) << 16,
        Family::V6 => [0xfd00u128, 0xfd01, 0x2001][r.below(3) as usize] << 112,
    };
    let low = rand128(r) & host_mask(w, 16);
    Prefix::truncated(addr(f, region | low), len).unwrap()
}

fn host_mask(w: u32, len: u8) -> u128 {
    let all = u128::MAX >> (128 - w);
    if len as u32 >= w { 0 } else { all >> len }
}

/// Addresses worth asking about: inside, at both ends of and just outside
/// every prefix, plus random ones in the same regions and anywhere.
fn probe_addrs(r: &mut Rng, prefixes: &[Prefix], extra: usize) -> Vec<IpAddr> {
    let mut v = Vec::new();
    for p in prefixes {
        let f = p.family();
        let w = f.width();
        let hm = host_mask(w, p.len());
        let all = u128::MAX >> (128 - w);
        let lo = p.bits();
        let hi = p.bits() | hm;
        v.push(addr(f, lo));
        v.push(addr(f, hi));
        v.push(addr(f, hi.wrapping_add(1) & all));
        v.push(addr(f, lo.wrapping_sub(1) & all));
        v.push(addr(f, lo | (rand128(r) & hm)));
    }
    for i in 0..extra {
        let f = if i % 2 == 0 { Family::V4 } else { Family::V6 };
        let w = f.width();
        let bits = if r.chance(0.5) {
            rand128(r) & (u128::MAX >> (128 - w))
        } else {
            rand_prefix(r, f, &[]).bits() | (rand128(r) & host_mask(w, 24))
        };
        v.push(addr(f, bits));
    }
    v
}

fn check_all(o: &Oracle, t: &lpm::Lookup, addrs: &[IpAddr], what: &str) {
    let keys: Vec<Vec<u8>> = addrs.iter().map(|&a| key(a)).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    let mut batch = vec![None; refs.len()];
    t.get_batch(&refs, &mut batch);
    let reader = t.reader();
    for (i, &a) in addrs.iter().enumerate() {
        let want = o.lpm(a);
        assert_eq!(t.get_addr(a), want, "{what}: get_addr({a})");
        assert_eq!(t.get(&keys[i]), want, "{what}: get({a})");
        assert_eq!(batch[i], want, "{what}: get_batch({a})");
        assert_eq!(reader.get(&keys[i]), want, "{what}: reader.get({a})");
    }
}

/// Random inserts, next-hop changes and removes (v4 and v6 mixed, nested
/// prefixes, default routes); after every step the lookup form that applied
/// every delta (through bytes) answers like the oracle; periodically so do a
/// fresh export and a blob round trip of the updated form.
fn oracle_run(seed: u64, steps: usize, vbits: u32) {
    let mut r = Rng::new(seed);
    let mut o = Oracle::default();
    let mut ctl = lpm::Control::with_value_bits(vbits).unwrap();
    let live = ctl.export();
    let mut known: Vec<Prefix> = Vec::new();
    for step in 0..steps {
        let f = if r.chance(0.6) { Family::V4 } else { Family::V6 };
        let remove = !known.is_empty() && r.chance(0.3);
        let d = if remove {
            let p = known.swap_remove(r.below(known.len() as u64) as usize);
            let d = ctl.remove_prefix(p).unwrap();
            assert_eq!(d.is_some(), o.0.remove(&p).is_some(), "remove reports presence");
            d
        } else {
            let p =
                if r.chance(0.02) { Prefix::truncated(addr(f, 0), 0).unwrap() } else { rand_prefix(&mut r, f, &known) };
            let nh = r.below(1 << vbits);
            if o.0.insert(p, nh).is_none() {
                known.push(p);
            }
            Some(ctl.insert_prefix(p, nh).unwrap())
        };
        if let Some(d) = d {
            let d = lpm::Delta::from_bytes(&d.to_bytes()).unwrap();
            live.apply(&d).unwrap();
        }
        assert_eq!(ctl.len(), o.0.len());
        let recent: Vec<Prefix> = known.iter().rev().take(8).copied().collect();
        let addrs = probe_addrs(&mut r, &recent, 8);
        check_all(&o, &live, &addrs, &format!("seed {seed} step {step} (live)"));
        if step % 50 == 49 || step + 1 == steps {
            let all: Vec<Prefix> = o.0.keys().copied().collect();
            let addrs = probe_addrs(&mut r, &all, 200);
            check_all(&o, &live, &addrs, &format!("seed {seed} step {step} (live, full)"));
            check_all(&o, &ctl.export(), &addrs, &format!("seed {seed} step {step} (fresh export)"));
            let copy = lpm::Lookup::from_bytes(&live.to_bytes()).unwrap();
            check_all(&o, &copy, &addrs, &format!("seed {seed} step {step} (blob)"));
            for &p in &all {
                assert_eq!(ctl.get_prefix(p), o.0.get(&p).copied());
            }
            let mut listed: Vec<(Prefix, u64)> = ctl.prefixes().collect();
            listed.sort();
            assert_eq!(listed, o.0.iter().map(|(p, v)| (*p, *v)).collect::<Vec<_>>());
        }
    }
}

#[test]
fn random_updates_match_the_oracle() {
    for seed in 0..6 {
        oracle_run(seed, 600, if seed % 2 == 0 { 8 } else { 16 });
    }
}

#[test]
fn bulk_build_matches_the_oracle_and_inserts_continue() {
    let mut r = Rng::new(42);
    let mut o = Oracle::default();
    let mut list: Vec<Prefix> = Vec::new();
    for _ in 0..5000 {
        let f = if r.chance(0.7) { Family::V4 } else { Family::V6 };
        let p = rand_prefix(&mut r, f, &list);
        o.0.insert(p, r.below(1 << 12));
        list.push(p);
    }
    o.0.insert("0.0.0.0/0".parse().unwrap(), 7);
    let items: Vec<(Vec<u8>, u64)> = o.0.iter().map(|(p, v)| (p.to_key(), *v)).collect();
    let mut ctl = lpm::Control::from_items(items, 12).unwrap();
    assert_eq!(ctl.len(), o.0.len());
    let t = ctl.export();
    let all: Vec<Prefix> = o.0.keys().copied().collect();
    let addrs = probe_addrs(&mut r, &all, 5000);
    check_all(&o, &t, &addrs, "bulk");
    // The default route answers every IPv4 address no other prefix covers.
    assert_eq!(t.get_v4(Ipv4Addr::new(1, 2, 3, 4)), o.lpm("1.2.3.4".parse().unwrap()));
    assert!(t.get_v4(Ipv4Addr::new(1, 2, 3, 4)).is_some());
    // Updates on a bulk-built table (slot arrays full: growth).
    for _ in 0..500 {
        let p = rand_prefix(&mut r, Family::V4, &list);
        let nh = r.below(1 << 12);
        o.0.insert(p, nh);
        t.apply(&ctl.insert_prefix(p, nh).unwrap()).unwrap();
    }
    for p in all.iter().take(2000) {
        if let Some(d) = ctl.remove_prefix(*p).unwrap() {
            o.0.remove(p);
            t.apply(&d).unwrap();
        }
    }
    let all: Vec<Prefix> = o.0.keys().copied().collect();
    let addrs = probe_addrs(&mut r, &all, 5000);
    check_all(&o, &t, &addrs, "bulk + updates");
    check_all(&o, &ctl.export(), &addrs, "bulk + updates, fresh export");
}

#[test]
fn no_route_is_none_and_default_route_is_the_fallback() {
    let mut ctl = lpm::Control::with_value_bits(8).unwrap();
    let t = ctl.export();
    assert_eq!(t.get(&[10, 0, 0, 1]), None);
    assert_eq!(t.get(&[0u8; 16]), None);
    t.apply(&ctl.insert_prefix("10.0.0.0/8".parse().unwrap(), 1).unwrap()).unwrap();
    t.apply(&ctl.insert_prefix("10.1.2.0/24".parse().unwrap(), 2).unwrap()).unwrap();
    t.apply(&ctl.insert_prefix("10.1.2.3/32".parse().unwrap(), 3).unwrap()).unwrap();
    t.apply(&ctl.insert_prefix("fd00::/16".parse().unwrap(), 4).unwrap()).unwrap();
    t.apply(&ctl.insert_prefix("fd00:1::/32".parse().unwrap(), 5).unwrap()).unwrap();
    assert_eq!(t.get_v4(Ipv4Addr::new(10, 1, 2, 3)), Some(3));
    assert_eq!(t.get_v4(Ipv4Addr::new(10, 1, 2, 4)), Some(2));
    assert_eq!(t.get_v4(Ipv4Addr::new(10, 1, 3, 4)), Some(1));
    assert_eq!(t.get_v4(Ipv4Addr::new(11, 1, 3, 4)), None);
    assert_eq!(t.get_v6("fd00:1::9".parse().unwrap()), Some(5));
    assert_eq!(t.get_v6("fd00:2::9".parse().unwrap()), Some(4));
    assert_eq!(t.get_v6("fd01::1".parse().unwrap()), None);
    // Keys of other lengths are no address.
    assert_eq!(t.get(&[10, 1, 2]), None);
    assert_eq!(t.get(&[]), None);
    t.apply(&ctl.insert_prefix("0.0.0.0/0".parse().unwrap(), 9).unwrap()).unwrap();
    assert_eq!(t.get_v4(Ipv4Addr::new(11, 1, 3, 4)), Some(9));
    assert_eq!(t.get_v6("fd01::1".parse().unwrap()), None, "an IPv4 default route is no IPv6 route");
    t.apply(&ctl.insert_prefix("::/0".parse().unwrap(), 8).unwrap()).unwrap();
    assert_eq!(t.get_v6("fd01::1".parse().unwrap()), Some(8));
    t.apply(&ctl.remove_prefix("10.1.2.3/32".parse().unwrap()).unwrap().unwrap()).unwrap();
    assert_eq!(t.get_v4(Ipv4Addr::new(10, 1, 2, 3)), Some(2));
    assert_eq!(ctl.remove_prefix("10.1.2.3/32".parse().unwrap()).unwrap(), None);
    t.apply(&ctl.remove_prefix("10.0.0.0/8".parse().unwrap()).unwrap().unwrap()).unwrap();
    assert_eq!(t.get_v4(Ipv4Addr::new(10, 1, 3, 4)), Some(9));
    assert_eq!(t.lengths(Family::V4), vec![24]);
}

#[test]
fn bad_input_is_an_error() {
    assert!(matches!(lpm::Control::with_value_bits(0), Err(Error::InvalidValueBits { .. })));
    assert!(matches!(lpm::Control::with_value_bits(32), Err(Error::InvalidValueBits { .. })));
    let mut ctl = lpm::Control::with_value_bits(8).unwrap();
    let p: Prefix = "10.0.0.0/8".parse().unwrap();
    assert!(matches!(ctl.insert_prefix(p, 256), Err(Error::ValueTooWide { .. })));
    assert!(ctl.insert(b"nonsense", 1).is_err());
    assert!(ctl.insert(&[33, 10, 0, 0, 0], 1).is_err(), "length beyond 32");
    assert!(ctl.insert(&[8, 10, 0, 0, 1], 1).is_err(), "host bits set");
    for bad in ["10.0.0.0/33", "10.0.0.1/8", "10.0.0/8", "fd00::/129", "x/1", "10.0.0.0/", ""] {
        assert!(bad.parse::<Prefix>().is_err(), "{bad:?} parsed");
    }
    assert_eq!("10.0.0.1".parse::<Prefix>().unwrap().len(), 32);
    assert_eq!("fd00::/16".parse::<Prefix>().unwrap().to_string(), "fd00::/16");
    assert_eq!(ctl.len(), 0);
}

/// A delta refused (lost, repeated, other table) leaves the table unchanged.
#[test]
fn out_of_order_and_foreign_deltas_are_refused() {
    let mut a = lpm::Control::with_value_bits(8).unwrap();
    let t = a.export();
    let d1 = a.insert_prefix("198.18.0.0/24".parse().unwrap(), 1).unwrap();
    let d2 = a.insert_prefix("198.18.1.0/24".parse().unwrap(), 2).unwrap();
    assert!(matches!(t.apply(&d2), Err(Error::DeltaMismatch(_))));
    t.apply(&d1).unwrap();
    assert!(matches!(t.apply(&d1), Err(Error::DeltaMismatch(_))));
    t.apply(&d2).unwrap();
    // A delta from another control form with the same sequence number.
    let mut b = lpm::Control::with_value_bits(8).unwrap();
    for i in 0..2 {
        b.insert_prefix(Prefix::v4(Ipv4Addr::new(198, 19, i, 0), 24).unwrap(), 1).unwrap();
    }
    let foreign = b.insert_prefix("198.19.7.0/25".parse().unwrap(), 3).unwrap();
    let before = t.to_bytes();
    assert!(t.apply(&foreign).is_err());
    assert_eq!(t.to_bytes(), before, "a refused delta changed the table");
    assert_eq!(t.get_v4(Ipv4Addr::new(198, 18, 1, 9)), Some(2));
}

fn sample_table() -> (lpm::Control, lpm::Lookup) {
    let mut r = Rng::new(7);
    let mut list = Vec::new();
    let mut items = Vec::new();
    for i in 0..60 {
        let f = if i % 3 == 0 { Family::V6 } else { Family::V4 };
        let p = rand_prefix(&mut r, f, &list);
        list.push(p);
        items.push((p, r.below(200)));
    }
    let ctl = lpm::Control::from_prefixes(items, 8).unwrap();
    let t = ctl.export();
    (ctl, t)
}

#[test]
fn blob_round_trip_and_corruption_sweep() {
    let (ctl, t) = sample_table();
    let blob = t.to_bytes();
    let copy = lpm::Lookup::from_bytes(&blob).unwrap();
    assert_eq!(copy.to_bytes(), blob);
    let prefixes: Vec<Prefix> = ctl.prefixes().map(|(p, _)| p).collect();
    let o = Oracle(ctl.prefixes().collect());
    check_all(&o, &copy, &probe_addrs(&mut Rng::new(1), &prefixes, 300), "round trip");
    for n in (0..blob.len()).step_by(1 + blob.len() / 3000) {
        assert!(lpm::Lookup::from_bytes(&blob[..n]).is_err(), "truncated at {n}");
    }
    let mut r = Rng::new(3);
    for _ in 0..3000 {
        let mut c = blob.clone();
        let i = r.below(c.len() as u64) as usize;
        c[i] ^= 1 << r.below(8);
        assert!(lpm::Lookup::from_bytes(&c).is_err(), "flip at {i} accepted");
    }
    assert!(matches!(lpm::Delta::from_bytes(&blob), Err(Error::KindMismatch { .. })));
}

#[test]
fn delta_round_trip_and_corruption_sweep() {
    let (mut ctl, _) = sample_table();
    let mut deltas = Vec::new();
    deltas.push(ctl.insert_prefix("10.3.4.0/24".parse().unwrap(), 5).unwrap()); // slot + index + mask
    deltas.push(ctl.insert_prefix("10.0.0.0/12".parse().unwrap(), 6).unwrap()); // short runs
    deltas.push(ctl.insert_prefix("fd09::/100".parse().unwrap(), 6).unwrap()); // new length
    deltas.push(ctl.remove_prefix("fd09::/100".parse().unwrap()).unwrap().unwrap()); // drop length
    for d in &deltas {
        let b = d.to_bytes();
        assert_eq!(&lpm::Delta::from_bytes(&b).unwrap(), d);
        for n in 0..b.len() {
            assert!(lpm::Delta::from_bytes(&b[..n]).is_err());
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[i] ^= 1 << bit;
                assert!(lpm::Delta::from_bytes(&c).is_err(), "flip at {i}:{bit}");
            }
        }
    }
}

/// Structurally valid but hostile payloads (checksums recomputed) decode to
/// an error or to a table whose lookups and updates do not panic.
#[test]
fn hostile_payloads_with_valid_checksums_never_panic() {
    let (mut ctl, t) = sample_table();
    let blob = t.to_bytes();
    let d = ctl.insert_prefix("172.16.9.0/24".parse().unwrap(), 5).unwrap().to_bytes();
    let mut r = Rng::new(11);
    let reframe = |mut c: Vec<u8>| {
        let end = c.len() - 8;
        let sum = keyplane::ext::wire::checksum(&c[..end]);
        c[end..].copy_from_slice(&sum.to_le_bytes());
        c
    };
    for _ in 0..2000 {
        let mut c = blob.clone();
        for _ in 0..1 + r.below(3) {
            let i = 16 + r.below((c.len() - 24) as u64) as usize;
            c[i] = r.next_u64() as u8;
        }
        if let Ok(x) = lpm::Lookup::from_bytes(&reframe(c)) {
            for k in 0..64u8 {
                let _ = x.get(&[10, k, k, 1]);
                let _ = x.get(&[0xfd, 0, k, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, k]);
            }
            if let Ok(dd) = lpm::Delta::from_bytes(&d) {
                let _ = x.apply(&dd);
            }
        }
        let mut c = d.clone();
        let i = 16 + r.below((c.len() - 24) as u64) as usize;
        c[i] = r.next_u64() as u8;
        if let Ok(dd) = lpm::Delta::from_bytes(&reframe(c)) {
            let x = ctl.export();
            let _ = x.apply(&dd);
            let _ = x.get(&[172, 16, 9, 1]);
        }
    }
}

/// Readers run while a writer churns prefixes (inserts, next-hop changes,
/// removes; growth, shrinking and new/dropped lengths), sharing top blocks
/// and lengths with the stable routes. Every address whose route never
/// changes must always read exactly that route.
#[test]
fn readers_during_updates_see_only_valid_answers() {
    let mut r = Rng::new(99);
    // Stable: /24s and /32s under 10.1/16 and fd00:1::/32, plus covering
    // shorter prefixes the churn never touches.
    let mut stable: Vec<(Prefix, u64)> = vec![("10.0.0.0/8".parse().unwrap(), 1), ("fd00::/16".parse().unwrap(), 2)];
    for i in 0..64u8 {
        stable.push((Prefix::v4(Ipv4Addr::new(10, 1, i * 2, 0), 24).unwrap(), 10 + i as u64));
        stable.push((Prefix::v6(Ipv6Addr::new(0xfd00, 1, i as u16 * 2, 0, 0, 0, 0, 0), 48).unwrap(), 100 + i as u64));
    }
    let mut ctl = lpm::Control::from_prefixes(stable.clone(), 8).unwrap();
    let table = Arc::new(ctl.export());
    // Probe addresses: inside the stable /24s and /48s but outside every
    // churn prefix (churn lives in the odd /24s and /48s and in 10.2/16).
    let o = Oracle(stable.iter().copied().collect());
    let mut probes: Vec<(Vec<u8>, u64)> = Vec::new();
    for i in 0..64u8 {
        let a = IpAddr::V4(Ipv4Addr::new(10, 1, i * 2, r.below(256) as u8));
        probes.push((key(a), o.lpm(a).unwrap()));
        let a = IpAddr::V6(Ipv6Addr::new(0xfd00, 1, i as u16 * 2, 0, 0, 0, 0, r.below(65536) as u16));
        probes.push((key(a), o.lpm(a).unwrap()));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|tid| {
            let (table, stop, reads, probes) = (table.clone(), stop.clone(), reads.clone(), probes.clone());
            std::thread::spawn(move || {
                let reader = table.reader();
                let refs: Vec<&[u8]> = probes.iter().map(|(k, _)| k.as_slice()).collect();
                let mut out = vec![None; refs.len()];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for (k, want) in &probes {
                        let got = if tid == 0 { reader.get(k) } else { table.get(k) };
                        assert_eq!(got, Some(*want), "address {k:?}");
                    }
                    reader.get_batch(&refs, &mut out);
                    for (o, (_, want)) in out.iter().zip(&probes) {
                        assert_eq!(*o, Some(*want));
                    }
                    n += 1;
                }
                reads.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let mut churn: Vec<Prefix> = Vec::new();
    for step in 0..6000u32 {
        let d = if !churn.is_empty() && r.chance(0.4) {
            let p = churn.swap_remove(r.below(churn.len() as u64) as usize);
            ctl.remove_prefix(p).unwrap().unwrap()
        } else {
            let p = match r.below(4) {
                0 => Prefix::v4(
                    Ipv4Addr::new(10, 1, r.below(128) as u8 * 2 + 1, r.below(256) as u8),
                    24 + r.below(9) as u8,
                ),
                1 => Prefix::v4(Ipv4Addr::new(10, 2, r.below(256) as u8, r.below(256) as u8), 17 + r.below(16) as u8),
                2 => Prefix::v6(
                    Ipv6Addr::new(0xfd00, 1, r.below(32768) as u16 * 2 + 1, r.below(65536) as u16, 0, 0, 0, 0),
                    48 + r.below(30) as u8,
                ),
                _ => ["10.2.0.0/16", "10.1.0.0/16", "10.0.0.0/12", "fd00:1::/32", "fd00::/12"][r.below(5) as usize]
                    .parse::<Prefix>(),
            }
            .unwrap();
            if !churn.contains(&p) {
                churn.push(p);
            }
            ctl.insert_prefix(p, r.below(256)).unwrap()
        };
        table.apply(&d).unwrap();
        if step % 1000 == 0 {
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        h.join().expect("a reader saw a wrong answer");
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    let all: Vec<Prefix> = ctl.prefixes().map(|(p, _)| p).collect();
    let o = Oracle(ctl.prefixes().collect());
    check_all(&o, &table, &probe_addrs(&mut r, &all, 500), "after the stress run");
}

#[test]
fn memory_is_reported_and_grows_with_prefixes() {
    let small = lpm::Control::from_prefixes([("10.0.0.0/24".parse().unwrap(), 1)], 8).unwrap().export();
    let items =
        (0..20000u32).map(|i| (Prefix::v4(Ipv4Addr::from(0x0a00_0000 | i << 8), 24).unwrap(), (i % 200) as u64));
    let big = lpm::Control::from_prefixes(items, 8).unwrap().export();
    assert!(small.memory_bytes() >= 65536 * 12, "the top array is counted");
    let per = (big.memory_bytes() - small.memory_bytes()) as f64 / 20000.0;
    assert!(per > 8.0 && per < 40.0, "{per} bytes per /24 prefix");
}

#[test]
fn garbage_payloads_are_refused_without_panics() {
    keyplane::conformance::garbage_sweep::<lpm::Lookup>(<keyplane::lpm::Lookup as keyplane::Wire>::KIND, 20_000, 5);
    keyplane::conformance::garbage_sweep::<lpm::Delta>(<keyplane::lpm::Delta as keyplane::Wire>::KIND, 20_000, 6);
}
