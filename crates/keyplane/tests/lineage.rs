//! Sequence numbers at the edges (0, u64::MAX - 1, u64::MAX) in the Concury
//! data plane's deltas and blobs give a typed error, never a panic, in every
//! build profile (run also with `--release`, where overflow checks are off).
//! The structures with a [`keyplane::ControlTable`] run the same checks in
//! the conformance suite (`conformance.rs`, `sequence_edges`).

use keyplane::conformance::patch_framed;
use keyplane::{Error, Wire};

/// Offset of the sequence number in a blob or delta (after the frame header
/// and the 16-byte table id of the lineage prologue).
const SEQ_AT: usize = 16 + 16;

fn patch_u64(bytes: &[u8], at: usize, v: u64) -> Vec<u8> {
    patch_framed(bytes, at, &v.to_le_bytes())
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
