//! `keyplane build -s lpm` with IPv4 / IPv6 prefix keys and `keyplane query
//! --lpm`, against a naive longest-prefix oracle.

mod common;

use common::{dir, fails_with as fails, ok, run, run_stdin};
use keyplane::lpm::Prefix;
use std::collections::BTreeMap;
use std::net::IpAddr;
fn oracle(routes: &BTreeMap<Prefix, u64>, a: IpAddr) -> Option<u64> {
    let w = if a.is_ipv4() { 32 } else { 128 };
    (0..=w).rev().find_map(|l| routes.get(&Prefix::truncated(a, l).unwrap()).copied())
}

const ROUTES: &str = "# a small FIB\n\
0.0.0.0/0\t9\n\
10.0.0.0/8\t1\n\
10.1.2.0/24\t2\n\
10.1.2.3/32\t3\n\
198.18.0.0/15,4\n\
fd00::/16 5\n\
fd00:1::/32\t6\n\
fd00:1:2::1\t7\n";

#[test]
fn build_with_prefix_keys_and_query_lpm() {
    let d = dir("basic");
    let (routes, fib) = (d.join("routes.txt"), d.join("fib.kpl"));
    std::fs::write(&routes, ROUTES).unwrap();
    let (r, f) = (routes.to_str().unwrap(), fib.to_str().unwrap());
    let o = run(&["build", "-s", "lpm", "-i", r, "--out", f]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("built lpm over 8 prefixes (5 IPv4, 3 IPv6)"));
    let addrs = "10.1.2.3\n10.1.2.4\n10.200.0.1\n11.0.0.1\n198.19.255.255\n198.20.0.0\n\
                 fd00:1:2::1\nfd00:1:2::2\nfd00:9::1\nfd01::1\n";
    let want = "10.1.2.3\t3\n10.1.2.4\t2\n10.200.0.1\t1\n11.0.0.1\t9\n198.19.255.255\t4\n198.20.0.0\t9\n\
                fd00:1:2::1\t7\nfd00:1:2::2\t6\nfd00:9::1\t5\nfd01::1\t-\n";
    assert_eq!(ok(&run_stdin(&["query", "--lpm", f], addrs)), want);
    // An LPM blob is queried by longest prefix with or without --lpm.
    assert_eq!(ok(&run_stdin(&["query", f], addrs)), want);
    let vals = ok(&run_stdin(&["query", "--lpm", "--values-only", f], "10.1.2.3\nfd01::1\n"));
    assert_eq!(vals, "3\n-\n");
    // --checked: exit 1 when an address has no route.
    assert_eq!(run_stdin(&["query", "--lpm", "--checked", f], "fd01::1\n").status.code(), Some(1));
    assert_eq!(run_stdin(&["query", "--lpm", "--checked", f], "10.0.0.1\n").status.code(), Some(0));
    // --key-format prefix selects LPM too.
    let f2 = d.join("fib2.kpl");
    ok(&run(&["build", "--key-format", "prefix", "-i", r, "--out", f2.to_str().unwrap()]));
    assert_eq!(ok(&run_stdin(&["query", "--lpm", f2.to_str().unwrap()], addrs)), want);
    let info = ok(&run(&["inspect", f]));
    assert!(info.contains("lpm lookup"), "{info}");
    assert!(info.contains("IPv4 tables:      /32 /24"), "{info}");
    assert!(info.contains("IPv6 tables:      /128 /32"), "{info}");
}

#[test]
fn a_random_route_table_matches_the_oracle_through_the_cli() {
    let d = dir("random");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut routes = BTreeMap::new();
    let mut text = String::new();
    for i in 0..3000 {
        let p = if i % 4 == 3 {
            let a = IpAddr::V6(((0xfd00u128 << 112) | (next() as u128) << 48).into());
            Prefix::truncated(a, 16 + (next() % 80) as u8).unwrap()
        } else {
            let a = IpAddr::V4((0x0a00_0000 | (next() as u32 & 0x00ff_ffff)).into());
            Prefix::truncated(a, [8u8, 12, 16, 18, 20, 22, 23, 24, 24, 24, 28, 32][(next() % 12) as usize]).unwrap()
        };
        let v = next() % 1000;
        routes.insert(p, v);
        text.push_str(&format!("{p}\t{v}\n"));
    }
    let (r, f) = (d.join("routes.tsv"), d.join("fib.kpl"));
    std::fs::write(&r, &text).unwrap();
    let o = run(&["build", "-s", "lpm", "-l", "10", "-i", r.to_str().unwrap(), "--out", f.to_str().unwrap()]);
    ok(&o);
    let mut addrs = Vec::new();
    for (p, _) in routes.iter().step_by(3) {
        addrs.push(p.addr());
        let host = match p.addr() {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) | (next() as u32 >> p.len().min(31))).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) | ((next() as u128) >> p.len().min(63) as u32)).into()),
        };
        addrs.push(host);
    }
    for _ in 0..500 {
        addrs.push(IpAddr::V4((next() as u32).into()));
    }
    let input: String = addrs.iter().map(|a| format!("{a}\n")).collect();
    let got = ok(&run_stdin(&["query", "--lpm", f.to_str().unwrap(), "-k", "-"], &input));
    let want: String = addrs
        .iter()
        .map(|&a| format!("{a}\t{}\n", oracle(&routes, a).map_or("-".to_string(), |v| v.to_string())))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn bad_routes_and_queries_give_the_documented_exit_codes() {
    let d = dir("errors");
    let f = d.join("fib.kpl");
    let f = f.to_str().unwrap();
    fails(
        &run_stdin(&["build", "-s", "lpm", "-i", "-", "--out", f], "10.0.0.1/8 1\n"),
        3,
        "<stdin>:1: invalid parameter: 10.0.0.1/8 has host bits set below the prefix length; did you mean 10.0.0.0/8?",
    );
    fails(
        &run_stdin(&["build", "-s", "lpm", "-i", "-", "--out", f], "# c\n10.0.0.0/33 1\n"),
        3,
        "<stdin>:2: invalid parameter: bad prefix length",
    );
    fails(
        &run_stdin(&["build", "-s", "lpm", "-i", "-", "--out", f], "10.0.0.0/8\n"),
        3,
        "<stdin>:1: expected PREFIX and NEXT_HOP",
    );
    fails(
        &run_stdin(&["build", "-s", "lpm", "-i", "-", "--out", f], "10.0.0.0/8 x\n"),
        3,
        "<stdin>:1: bad next hop \"x\"",
    );
    fails(
        &run_stdin(&["build", "-s", "lpm", "-l", "4", "-i", "-", "--out", f], "10.0.0.0/8 16\n"),
        7,
        "<stdin>:1: next hop 16 does not fit in 4 value bits",
    );
    fails(
        &run_stdin(&["build", "-s", "lpm", "-l", "32", "-i", "-", "--out", f], "10.0.0.0/8 1\n"),
        2,
        "--value-bits 32",
    );
    fails(&run(&["build", "-s", "lpm", "--generate", "10", "--out", f]), 2, "needs --input");
    fails(
        &run_stdin(&["build", "-s", "lpm", "-i", "-", "--out", f, "--control", "c.kpc"], "10.0.0.0/8 1\n"),
        2,
        "--control is not supported",
    );
    let o = run_stdin(&["build", "-s", "lpm", "-i", "-", "--out", f], "10.0.0.0/8 1\n10.0.0.0/8 2\n");
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: 1 duplicate prefix line(s) (first at line 2)"));
    assert_eq!(ok(&run_stdin(&["query", f], "10.0.0.1\n")), "10.0.0.1\t2\n");
    // Bad address lines are skipped and reported; the others are answered.
    let o = run_stdin(&["query", "--lpm", f], "10.0.0.1\nnot-an-address\n10.0.0.2\n");
    fails(
        &o,
        3,
        "<stdin>: 1 line(s) skipped: not an IPv4 or IPv6 address (first: line 2: bad address \"not-an-address\")",
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "10.0.0.1\t2\n10.0.0.2\t2\n");
    // --lpm on a table that is not an LPM table.
    let o_blob = d.join("o.kpl");
    ok(&run_stdin(&["build", "-i", "-", "--out", o_blob.to_str().unwrap()], "a\t1\n"));
    fails(
        &run_stdin(&["query", "--lpm", o_blob.to_str().unwrap()], "10.0.0.1\n"),
        2,
        "or an IP prefix table (build -s lpm), this is othello",
    );
    // A corrupted LPM blob.
    let mut b = std::fs::read(f).unwrap();
    let n = b.len();
    b[n / 2] ^= 1;
    let bad = d.join("bad.kpl");
    std::fs::write(&bad, &b).unwrap();
    fails(&run_stdin(&["query", bad.to_str().unwrap()], "10.0.0.1\n"), 4, "checksum mismatch");
}
