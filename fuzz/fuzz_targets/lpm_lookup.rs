#![no_main]
//! LPM lookup forms under arbitrary input, never a panic:
//!
//! * first byte `% 4` = 0 or 1: the rest decoded as an LPM lookup blob (1:
//!   framed with a valid header and checksum, so the payload decoder is
//!   reached) and as a delta; whatever decodes answers IPv4 and IPv6
//!   lookups (single and batched), takes the delta or refuses it, and
//!   re-encodes to bytes that decode to the same bytes;
//! * 2 or 3: the rest is a program of route inserts and removes (IPv4 and
//!   IPv6, all lengths, next hops of 8 bits) applied to a control form and,
//!   through delta bytes, to an exported lookup form; after every step the
//!   lookup form's answer for addresses taken from the input equals a naive
//!   longest-prefix search over a map of the routes.
use keyplane::lpm::{Control, Delta, Lookup, Prefix};
use keyplane::ext::wire::Writer;
use keyplane::{ControlTable, LookupTable, Wire};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::net::IpAddr;

fn addr(v6: bool, b: &[u8]) -> IpAddr {
    let mut x = [0u8; 16];
    for (i, c) in b.iter().take(16).enumerate() {
        x[i] = *c;
    }
    if v6 { IpAddr::V6(x.into()) } else { IpAddr::V4([x[0], x[1], x[2], x[3]].into()) }
}

fn oracle(m: &BTreeMap<Prefix, u64>, a: IpAddr) -> Option<u64> {
    let w = if a.is_ipv4() { 32 } else { 128 };
    (0..=w).rev().find_map(|l| m.get(&Prefix::truncated(a, l).unwrap()).copied())
}

fn decode(data: &[u8], framed: bool) {
    let owned;
    let bytes = if framed {
        let mut w = Writer::new(<keyplane::lpm::Lookup as keyplane::Wire>::KIND);
        w.raw(data);
        owned = w.finish();
        &owned[..]
    } else {
        data
    };
    if let Ok(t) = Lookup::from_bytes(bytes) {
        let k4 = data.get(..4).unwrap_or(&[10, 0, 0, 1]);
        let k6 = data.get(..16).unwrap_or(&[0xfd; 16]);
        let _ = t.get(k4);
        let _ = t.get(k6);
        let _ = t.get(data);
        let mut out = [None; 3];
        t.get_batch(&[k4, k6, data], &mut out);
        let b = t.to_bytes();
        assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
    }
    let mut w = Writer::new(<keyplane::lpm::Delta as keyplane::Wire>::KIND);
    w.raw(data);
    if let Ok(d) = Delta::from_bytes(&w.finish()) {
        let mut c = Control::with_value_bits(8).unwrap();
        c.insert_prefix("10.0.0.0/8".parse().unwrap(), 1).unwrap();
        let t = c.export();
        let _ = t.apply(&d);
        let _ = t.get(&[10, 1, 2, 3]);
    }
}

fn program(data: &[u8]) {
    let mut c = Control::with_value_bits(8).unwrap();
    let t = c.export();
    let mut m = BTreeMap::new();
    let mut seen = Vec::new();
    for step in data.chunks(20).take(64) {
        if step.len() < 4 {
            break;
        }
        let v6 = step[0] & 1 == 1;
        let a = addr(v6, &step[3..]);
        let len = step[1] % if v6 { 129 } else { 33 };
        let p = Prefix::truncated(a, len).unwrap();
        let d = if step[0] & 6 == 6 {
            let d = c.remove_prefix(p).unwrap();
            assert_eq!(d.is_some(), m.remove(&p).is_some());
            d
        } else {
            m.insert(p, step[2] as u64);
            seen.push(p);
            Some(c.insert_prefix(p, step[2] as u64).unwrap())
        };
        if let Some(d) = d {
            t.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        }
        for q in seen.iter().rev().take(6) {
            for a in [q.addr(), addr(q.family() == keyplane::lpm::Family::V6, &step[3..]), a] {
                assert_eq!(t.get_addr(a), oracle(&m, a), "{a} after {p}");
            }
        }
    }
    assert_eq!(c.len(), m.len());
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((f, rest)) => match f % 4 {
            0 => decode(rest, false),
            1 => decode(rest, true),
            _ => program(rest),
        },
        None => decode(data, false),
    }
});
