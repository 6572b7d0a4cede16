//! Control-form snapshots, every structure: a loaded snapshot continues
//! exactly where the saved control form stopped (same table id, same
//! deltas, same exported blobs, for the same random updates), loading
//! hashes no key, every byte flip and truncation is an error, and one
//! structure's snapshot is refused by every other.

use keyplane::Wire;
use keyplane::key::KeyFormat;
use keyplane::{ControlTable, Error, Snapshot, work};

/// splitmix64: a small deterministic generator (no test dependency).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Keys of varied lengths (1 to 40 bytes, so long keys reach the cuckoo
/// arena); names for the name tables (FHT, FPT).
fn key(i: u64, names: bool) -> Vec<u8> {
    if names {
        format!("/com/example/n{}/{}", i % 97, i).into_bytes()
    } else {
        let len = 1 + (i.wrapping_mul(0x9e37) % 40) as usize;
        let mut k = i.to_le_bytes().to_vec();
        k.resize(len.max(8), (i % 251) as u8);
        k
    }
}

struct Case {
    n: u64,
    ops: usize,
    vbits: u32,
    names: bool,
}

fn bytes_of<T: Wire>(d: &T) -> Vec<u8> {
    d.to_bytes()
}

/// Applies the same random updates to `a` and `b`; every delta (and
/// every "absent" answer) must be identical.
fn same_updates<C: ControlTable>(a: &mut C, b: &mut C, rng: &mut Rng, c: &Case, key_space: u64) {
    let vmask = if c.vbits >= 64 { u64::MAX } else { (1u64 << c.vbits) - 1 };
    for step in 0..c.ops {
        let k = key(rng.below(key_space), c.names);
        if rng.below(10) < 3 {
            let (da, db) = (a.remove(&k).unwrap(), b.remove(&k).unwrap());
            assert!(da.as_ref().map(bytes_of) == db.as_ref().map(bytes_of), "remove at step {step}");
        } else {
            let v = rng.next() & vmask;
            let (da, db) = (a.insert(&k, v).unwrap(), b.insert(&k, v).unwrap());
            assert!(da.to_bytes() == db.to_bytes(), "insert at step {step}");
        }
    }
    assert_eq!(a.len(), b.len());
}

fn round_trip<C: ControlTable + Snapshot>(c: Case) {
    let mut rng = Rng(c.n ^ c.vbits as u64);
    let vmask = if c.vbits >= 64 { u64::MAX } else { (1u64 << c.vbits) - 1 };
    let items: Vec<(Vec<u8>, u64)> = (0..c.n).map(|i| (key(i, c.names), rng.next() & vmask)).collect();
    let before = work::keys_hashed();
    let mut a = C::from_items(items.clone(), c.vbits).unwrap();
    // The counter sees construction: every key at least once.
    assert!(work::keys_hashed() - before >= c.n, "building hashed {} keys", work::keys_hashed() - before);
    a.set_key_format(Some(if c.names { KeyFormat::Name } else { KeyFormat::Hex }));
    // Some history first, so sequence numbers, free lists and garbage are not trivial.
    let mut warm = C::from_snapshot(&a.snapshot()).unwrap();
    same_updates(&mut a, &mut warm, &mut rng, &Case { ops: c.ops / 2, ..c }, c.n * 2 + 100);

    let snap = a.snapshot();
    let before = work::keys_hashed();
    let mut b = C::from_snapshot(&snap).unwrap();
    assert_eq!(work::keys_hashed(), before, "loading a snapshot hashes no key");
    assert!(b.snapshot() == snap, "a loaded snapshot saves to the same bytes");
    assert_eq!(b.lineage(), a.lineage());
    assert_eq!(b.key_format(), a.key_format());
    assert_eq!(b.len(), a.len());
    assert_eq!(b.value_bits(), a.value_bits());
    assert!(b.export().to_bytes() == a.export().to_bytes(), "exported lookup blobs");
    for (k, _) in items.iter().take(200) {
        assert_eq!(b.get(k), a.get(k));
    }
    same_updates(&mut a, &mut b, &mut rng, &c, c.n * 2 + 100);
    assert!(b.export().to_bytes() == a.export().to_bytes(), "exported lookup blobs after updates");
    // (The snapshots themselves may now differ in timing counters such as
    // SetSep's build time; a fresh round trip of each must still agree.)
    let (a2, b2) = (C::from_snapshot(&a.snapshot()).unwrap(), C::from_snapshot(&b.snapshot()).unwrap());
    assert!(a2.export().to_bytes() == b2.export().to_bytes(), "exports after a second round trip");
}

/// Every single-byte change and every truncation of a snapshot is an error.
fn corruption_sweep<C: ControlTable + Snapshot>(names: bool) {
    let items: Vec<(Vec<u8>, u64)> = (0..40).map(|i| (key(i, names), i % 16)).collect();
    let mut c = C::from_items(items, 4).unwrap();
    c.remove(&key(3, names)).unwrap();
    c.insert(&key(99, names), 5).unwrap();
    let snap = c.snapshot();
    C::from_snapshot(&snap).unwrap();
    for n in 0..snap.len() {
        assert!(C::from_snapshot(&snap[..n]).is_err(), "truncation to {n} bytes");
    }
    let mut longer = snap.clone();
    longer.push(0);
    assert!(C::from_snapshot(&longer).is_err(), "a trailing byte");
    for i in 0..snap.len() {
        for x in [0x01u8, 0x80, 0xff] {
            let mut bad = snap.clone();
            bad[i] ^= x;
            assert!(C::from_snapshot(&bad).is_err(), "byte {i} xor {x:#x}");
        }
    }
}

/// A snapshot of `C` is refused by `D`, with the kind named.
fn refused_by<C: ControlTable + Snapshot, D: Snapshot>(names: bool) {
    let c = C::from_items((0..20).map(|i| (key(i, names), 1u64)), 4).unwrap();
    match D::from_snapshot(&c.snapshot()) {
        Err(Error::KindMismatch { expected, found }) => {
            assert!(expected.contains("control snapshot") && found.contains("control snapshot"));
            assert_ne!(expected, found);
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a foreign snapshot was accepted"),
    }
    // Nor is a lookup blob or a delta a snapshot.
    assert!(matches!(D::from_snapshot(&c.export().to_bytes()), Err(Error::KindMismatch { .. })));
}

macro_rules! structures {
    ($($name:ident: $t:ty, names = $names:expr, vbits = $vb:expr;)*) => {
        mod round_trip {
            use super::*;
            $(#[test]
            fn $name() {
                round_trip::<$t>(Case { n: 3_000, ops: 3_000, vbits: $vb, names: $names });
                round_trip::<$t>(Case { n: 0, ops: 500, vbits: 1, names: $names });
            })*
        }
        mod corruption {
            use super::*;
            $(#[test]
            fn $name() {
                corruption_sweep::<$t>($names);
            })*
        }
        mod foreign {
            use super::*;
            /// Each structure's snapshot against every structure's loader.
            fn against_all<C: ControlTable + Snapshot>(names: bool, own: &str) {
                $(if own != stringify!($name) {
                    refused_by::<C, $t>(names);
                })*
            }
            $(#[test]
            fn $name() {
                against_all::<$t>($names, stringify!($name));
            })*
        }
    };
}

structures! {
    othello: keyplane::othello::Control, names = false, vbits = 7;
    ludo: keyplane::ludo::Control, names = false, vbits = 9;
    setsep: keyplane::setsep::Control, names = false, vbits = 3;
    cuckoo: keyplane::cuckoo::Control, names = false, vbits = 20;
    cuckoo_partial: keyplane::cuckoo::partial::Control, names = false, vbits = 12;
    cfw: keyplane::cfw::Control, names = false, vbits = 8;
    bfw: keyplane::bfw::Control, names = false, vbits = 4;
    fht: keyplane::fht::Control, names = true, vbits = 16;
    fpt: keyplane::fpt::Control, names = true, vbits = 16;
}

/// LPM (`keyplane::lpm`): prefixes as keys (`Prefix::to_key`), IPv4 and
/// IPv6, short and long lengths (the direct tables and the per-length
/// Othello indexes).
mod lpm {
    use super::*;
    use keyplane::LookupTable;
    use keyplane::lpm::{Control, Prefix};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    fn prefix(rng: &mut Rng) -> Vec<u8> {
        let r = rng.next();
        let p = if r % 4 == 0 {
            let len = (r % 129) as u32;
            let a =
                ((r as u128) << 64 | rng.next() as u128).checked_shr(128 - len).unwrap_or(0) << (128 - len).min(127);
            let a = if len == 0 { 0 } else { a };
            Prefix::new(IpAddr::V6(Ipv6Addr::from(a)), len as u8)
        } else {
            let len = (8 + r % 25) as u32;
            Prefix::new(IpAddr::V4(Ipv4Addr::from((r as u32) >> (32 - len) << (32 - len))), len as u8)
        };
        p.unwrap().to_key()
    }

    #[test]
    fn round_trip_continues_the_same_lineage() {
        let mut rng = Rng(17);
        let items: Vec<(Vec<u8>, u64)> = (0..3000).map(|_| (prefix(&mut rng), rng.below(1 << 12))).collect();
        let mut a = Control::from_items(items, 12).unwrap();
        let snap = a.snapshot();
        let before = work::keys_hashed();
        let mut b = Control::from_snapshot(&snap).unwrap();
        assert_eq!(work::keys_hashed(), before);
        assert!(b.snapshot() == snap, "a loaded snapshot saves to the same bytes");
        assert_eq!((b.lineage(), b.len()), (a.lineage(), a.len()));
        assert!(b.export().to_bytes() == a.export().to_bytes());
        // The loaded form continues the lineage: its deltas patch a replica
        // of the saved table into exactly its own exports, and it answers
        // like the original after the same updates. (Unlike the nine
        // structures above, LPM's deltas after a load are not yet
        // byte-identical to the original's: not met, see docs/structures/lpm.md.)
        let replica = keyplane::lpm::Lookup::from_bytes(&a.export().to_bytes()).unwrap();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for _ in 0..3000 {
            let k = if keys.is_empty() || rng.below(3) > 0 {
                prefix(&mut rng)
            } else {
                keys[rng.below(keys.len() as u64) as usize].clone()
            };
            if rng.below(10) < 3 {
                a.remove(&k).unwrap();
                if let Some(d) = b.remove(&k).unwrap() {
                    replica.apply(&keyplane::lpm::Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
                }
            } else {
                let v = rng.below(1 << 12);
                a.insert(&k, v).unwrap();
                let d = b.insert(&k, v).unwrap();
                replica.apply(&keyplane::lpm::Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
                keys.push(k);
            }
        }
        assert_eq!(a.len(), b.len());
        for k in &keys {
            assert_eq!(a.get(k), b.get(k));
        }
        assert!(replica.to_bytes() == b.export().to_bytes(), "the loaded form's deltas patch the saved table");
    }

    #[test]
    fn corruption_and_foreign_kinds_are_errors() {
        let mut rng = Rng(3);
        let items: Vec<(Vec<u8>, u64)> = (0..30).map(|_| (prefix(&mut rng), 1)).collect();
        let snap = Control::from_items(items, 4).unwrap().snapshot();
        for n in 0..snap.len() {
            assert!(Control::from_snapshot(&snap[..n]).is_err(), "truncation to {n}");
        }
        assert!(Control::from_snapshot(&snap).is_ok());
        // Every byte of the header and prologue, then a stride over the
        // (large, mostly direct-table) rest: each flip costs a checksum of
        // the whole blob.
        for i in (0..snap.len()).filter(|&i| i < 256 || i % 997 == 0 || i + 16 >= snap.len()) {
            let mut bad = snap.clone();
            bad[i] ^= 0x41;
            assert!(Control::from_snapshot(&bad).is_err(), "byte {i}");
        }
        assert!(matches!(keyplane::othello::Control::from_snapshot(&snap), Err(Error::KindMismatch { .. })));
        refused_by::<keyplane::othello::Control, Control>(false);
    }
}

/// The Concury control plane (`keyplane::lb::Control`, not a
/// `ControlTable`): VIPs, pools, tracked connections, dropped states
/// waiting to be reaped. A loaded snapshot saves to the same bytes, exports
/// the same data plane and emits the same deltas as the saved control plane
/// for the same later operations; every truncation and byte change is an
/// error; other kinds are refused.
mod lb {
    use super::*;
    use keyplane::lb::{Backend, Control, Params, PoolOp, StateKey, Vip, VipId};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn be(i: u32) -> Backend {
        if i % 3 == 2 {
            Backend::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i as u16), 8443)
        } else {
            Backend::new(Ipv4Addr::from(0x0a00_0000 + i), 80)
        }
    }

    fn state(i: u64) -> Vec<u8> {
        StateKey::four_tuple(Ipv4Addr::from(0x6400_0000 ^ (i >> 16) as u32).into(), i as u16, 443, 6).as_ref().to_vec()
    }

    /// Two VIPs with tracked connections, ended connections, a drained and a
    /// removed backend (its states dropped, not all reaped yet).
    fn built(seed: u64) -> (Control, Vec<VipId>) {
        let mut ctl = Control::new(Params { max_vips: 8, dcode_bits: 10, seed }).unwrap();
        let mut ids = Vec::new();
        for v in 0..2u32 {
            let pool: Vec<(Backend, u32)> = (0..6).map(|i| (be(v * 10 + i), 1 + i % 3)).collect();
            ctl.add_vip_at(v * 3, Vip::new(Ipv4Addr::new(192, 0, 2, v as u8), 80, 6), &pool).unwrap();
            ids.push(v * 3);
        }
        let dp = ctl.export();
        for i in 0..3_000u64 {
            let id = ids[(i % 2) as usize];
            let k = state(i);
            let b = dp.lookup(id, &k).unwrap();
            ctl.connection_start(id, &k, b).unwrap();
            if i % 7 == 0 {
                ctl.connection_end(id, &k).unwrap();
            }
        }
        ctl.update_pool(ids[0], &[PoolOp::SetWeight(be(1), 0), PoolOp::Remove(be(2))]).unwrap();
        ctl.update_pool(ids[1], &[PoolOp::Add(be(99), 2)]).unwrap();
        (ctl, ids)
    }

    #[test]
    fn round_trip_continues_the_same_lineage() {
        let (mut a, ids) = built(5);
        assert!(a.dropped_pending() > 0, "the snapshot must hold dropped states waiting for the reap");
        let snap = a.snapshot();
        let before = work::keys_hashed();
        let mut b = Control::from_snapshot(&snap).unwrap();
        // No rebuild: the one pass over the states is the post-load check that
        // every state's index lies inside array C (counted as a traversal).
        let loaded = work::keys_hashed() - before;
        assert!(loaded <= 3_000, "loading counted {loaded} keys: more than one pass over the states");
        assert!(b.snapshot() == snap, "a loaded snapshot saves to the same bytes");
        assert_eq!((b.table_id(), b.seq(), b.stats()), (a.table_id(), a.seq(), a.stats()));
        assert!(b.export().to_bytes() == a.export().to_bytes());
        // The same operations on both: identical deltas, answers and exports.
        let replica = keyplane::lb::DataPlane::from_bytes(&a.export().to_bytes()).unwrap();
        let same = |da: keyplane::lb::Delta, db: keyplane::lb::Delta| {
            assert!(da.to_bytes() == db.to_bytes(), "deltas differ");
            replica.apply(&keyplane::lb::Delta::from_bytes(&db.to_bytes()).unwrap()).unwrap();
        };
        assert_eq!(a.reap_step(200).unwrap(), b.reap_step(200).unwrap());
        for i in 3_000..5_000u64 {
            let id = ids[(i % 2) as usize];
            let k = state(i);
            let bk = replica.lookup(id, &k).unwrap();
            a.connection_start(id, &k, bk).unwrap();
            b.connection_start(id, &k, bk).unwrap();
        }
        same(
            a.update_pool(ids[0], &[PoolOp::Remove(be(3))]).unwrap(),
            b.update_pool(ids[0], &[PoolOp::Remove(be(3))]).unwrap(),
        );
        let v = Vip::new(Ipv6Addr::LOCALHOST, 443, 6);
        assert!(a.snapshot() == b.snapshot(), "equal states, equal snapshots (after pool changes)");
        same(a.add_vip(v, &[(be(40), 1)]).unwrap().1, b.add_vip(v, &[(be(40), 1)]).unwrap().1);
        // A VIP created after the load: its embedded Othello map carries the
        // fixed embedded lineage, so the snapshots stay byte-identical.
        assert!(a.snapshot() == b.snapshot(), "equal states, equal snapshots (after a new VIP)");
        same(a.remove_vip(ids[1]).unwrap(), b.remove_vip(ids[1]).unwrap());
        for i in 0..5_000u64 {
            assert_eq!(a.backend_of(ids[0], &state(i)), b.backend_of(ids[0], &state(i)), "state {i}");
        }
        // Same exported plane and snapshot after the same operations.
        assert!(a.export().to_bytes() == b.export().to_bytes());
        assert!(a.snapshot() == b.snapshot(), "equal states, equal snapshots");
        assert!(replica.to_bytes() == b.export().to_bytes(), "the loaded form's deltas patch the saved plane");
    }

    #[test]
    fn corruption_and_foreign_kinds_are_errors() {
        let (c, _) = built(9);
        let snap = c.snapshot();
        assert!(Control::from_snapshot(&snap).is_ok());
        // Every truncation; every byte of the header and prologue, then a
        // stride over the rest and the trailer (each flip costs a checksum
        // of the whole blob).
        for n in (0..snap.len()).filter(|&n| n < 512 || n % 101 == 0 || n + 64 >= snap.len()) {
            assert!(Control::from_snapshot(&snap[..n]).is_err(), "truncation to {n}");
        }
        let mut longer = snap.clone();
        longer.push(0);
        assert!(Control::from_snapshot(&longer).is_err(), "a trailing byte");
        for i in (0..snap.len()).filter(|&i| i < 256 || i % 499 == 0 || i + 16 >= snap.len()) {
            for x in [0x01u8, 0x80] {
                let mut bad = snap.clone();
                bad[i] ^= x;
                assert!(Control::from_snapshot(&bad).is_err(), "byte {i} xor {x:#x}");
            }
        }
        // Another structure's snapshot, a data-plane blob and a delta are not lb snapshots, and
        // an lb snapshot is no othello snapshot.
        let oth = keyplane::othello::Control::from_items([(b"a", 1u64)], 4).unwrap();
        assert!(matches!(Control::from_snapshot(&oth.snapshot()), Err(Error::KindMismatch { .. })));
        assert!(matches!(Control::from_snapshot(&c.export().to_bytes()), Err(Error::KindMismatch { .. })));
        assert!(matches!(keyplane::othello::Control::from_snapshot(&snap), Err(Error::KindMismatch { .. })));
        assert_eq!(keyplane::snapshot::peek(&snap).unwrap().seq, c.seq());
    }
}
