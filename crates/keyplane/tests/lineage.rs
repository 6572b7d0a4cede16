//! Sequence numbers at the edges (0, u64::MAX - 1, u64::MAX) in deltas and
//! blobs give a typed error for every structure, never a panic, in every
//! build profile (run also with `--release`, where overflow checks are off).

use keyplane::wire::{HEADER_LEN, TRAILER_LEN, checksum};
use keyplane::{ControlTable, Error, LookupTable, Wire};

/// Offset of the sequence number in a blob or delta payload (after the
/// 16-byte table id of the lineage prologue).
const SEQ_AT: usize = HEADER_LEN + 16;

/// Overwrites the u64 at `at` and recomputes the frame checksum, so the
/// bytes pass every framing check and only the sequence number is wrong.
fn patch_u64(bytes: &[u8], at: usize, v: u64) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    let end = b.len() - TRAILER_LEN;
    let sum = checksum(&b[..end]);
    b[end..].copy_from_slice(&sum.to_le_bytes());
    b
}

fn keys(n: u32) -> Vec<(Vec<u8>, u64)> {
    (0..n).map(|i| (format!("key-{i}").into_bytes(), u64::from(i % 13))).collect()
}

/// The edges for one structure.
fn sequence_edges<C: ControlTable>(name: &str) {
    let mut ctl = C::from_items(keys(300), 4).unwrap_or_else(|e| panic!("{name}: build: {e}"));
    let table = ctl.export();
    let delta = ctl.insert(b"one more key", 9).unwrap_or_else(|e| panic!("{name}: insert: {e}"));
    let dbytes = delta.to_bytes();
    assert_eq!(u64::from_le_bytes(dbytes[SEQ_AT..SEQ_AT + 8].try_into().unwrap()), 1, "{name}: delta seq layout");
    for seq in [u64::MAX, u64::MAX - 1, 0, 2] {
        let bad = patch_u64(&dbytes, SEQ_AT, seq);
        let d = C::Delta::from_bytes(&bad).unwrap_or_else(|e| panic!("{name}: a re-numbered delta decodes: {e}"));
        match table.apply(&d) {
            Err(Error::DeltaMismatch(_)) => {}
            other => panic!("{name}: delta #{seq} on a table at #0 gave {other:?}"),
        }
    }
    // A blob at the last sequence number loads (or is refused), and then
    // refuses every delta.
    let blob = patch_u64(&table.to_bytes(), SEQ_AT, u64::MAX);
    if let Ok(at_max) = C::Lookup::from_bytes(&blob) {
        for seq in [u64::MAX, u64::MAX - 1, 0, 1] {
            let d = C::Delta::from_bytes(&patch_u64(&dbytes, SEQ_AT, seq)).unwrap();
            match at_max.apply(&d) {
                Err(Error::DeltaMismatch(_)) => {}
                other => panic!("{name}: delta #{seq} on a table at u64::MAX gave {other:?}"),
            }
        }
    }
    // A delta of another table with the same structure, parameters and keys
    // is refused and changes nothing.
    let mut other = C::from_items(keys(300), 4).unwrap();
    assert_ne!(other.table_id(), ctl.table_id(), "{name}: two tables share an id");
    let alien = other.insert(b"one more key", 3).unwrap();
    assert_eq!(alien.to_bytes()[SEQ_AT..SEQ_AT + 8], dbytes[SEQ_AT..SEQ_AT + 8], "{name}");
    match table.apply(&C::Delta::from_bytes(&alien.to_bytes()).unwrap()) {
        Err(Error::DeltaMismatch(m)) => assert!(m.contains("belongs to table"), "{name}: {m}"),
        r => panic!("{name}: another table's delta gave {r:?}"),
    }
    // The genuine delta still applies: the refusals changed nothing.
    table.apply(&delta).unwrap_or_else(|e| panic!("{name}: genuine delta: {e}"));
    assert_eq!(table.get(b"one more key"), Some(9), "{name}");
}

#[test]
fn othello_sequence_edges() {
    sequence_edges::<keyplane::othello::Control>("othello");
}
#[test]
fn ludo_sequence_edges() {
    sequence_edges::<keyplane::ludo::Control>("ludo");
}
#[test]
fn setsep_sequence_edges() {
    sequence_edges::<keyplane::setsep::Control>("setsep");
}
#[test]
fn cuckoo_sequence_edges() {
    sequence_edges::<keyplane::cuckoo::Control>("cuckoo");
}
#[test]
fn partial_cuckoo_sequence_edges() {
    sequence_edges::<keyplane::cuckoo::partial::Control>("cuckoo-partial");
}
#[test]
fn cfw_sequence_edges() {
    sequence_edges::<keyplane::cfw::Control>("cfw");
}
#[test]
fn bfw_sequence_edges() {
    sequence_edges::<keyplane::bfw::Control>("bfw");
}
#[test]
fn fht_sequence_edges() {
    sequence_edges::<keyplane::fht::Control>("fht");
}
#[test]
fn fpt_sequence_edges() {
    sequence_edges::<keyplane::fpt::Control>("fpt");
}

#[test]
fn lb_plane_sequence_edges() {
    use keyplane::lb::{Backend, Control, DataPlane, Delta, Params, Vip};
    use std::net::Ipv4Addr;
    let mut ctl = Control::new(Params { max_vips: 4, ..Params::default() }).unwrap();
    let vip = Vip::new(Ipv4Addr::new(198, 18, 0, 1), 80, 6);
    let pool: Vec<(Backend, u32)> = (0..4).map(|i| (Backend::new(Ipv4Addr::new(198, 18, 1, i), 80), 1)).collect();
    let plane = ctl.export();
    let (_, delta) = ctl.add_vip(vip, &pool).unwrap();
    let dbytes = delta.to_bytes();
    for seq in [u64::MAX, u64::MAX - 1, 0, 2] {
        let d = Delta::from_bytes(&patch_u64(&dbytes, SEQ_AT, seq)).unwrap();
        assert!(matches!(plane.apply(&d), Err(Error::DeltaMismatch(_))), "lb delta #{seq}");
    }
    let blob = patch_u64(&plane.to_bytes(), SEQ_AT, u64::MAX);
    if let Ok(at_max) = DataPlane::from_bytes(&blob) {
        for seq in [u64::MAX, 0, 1] {
            let d = Delta::from_bytes(&patch_u64(&dbytes, SEQ_AT, seq)).unwrap();
            assert!(matches!(at_max.apply(&d), Err(Error::DeltaMismatch(_))), "lb at MAX, delta #{seq}");
        }
    }
    let mut other = Control::new(Params { max_vips: 4, ..Params::default() }).unwrap();
    let (_, alien) = other.add_vip(vip, &pool).unwrap();
    assert!(matches!(plane.apply(&alien), Err(Error::DeltaMismatch(_))), "another table's lb delta");
    plane.apply(&delta).unwrap();
    assert_eq!(plane.seq(), 1);
}
