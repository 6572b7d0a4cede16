#![no_main]
//! Decoding arbitrary bytes as a BFW delta never panics, and applying a
//! decoded delta to a small table either works or returns an error.
use keyplane::{ControlTable, LookupTable, Wire, bfw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = bfw::Delta::from_bytes(data) {
        let mut ctl = bfw::Control::from_items_with((0..64u64).map(|i| (i.to_le_bytes(), i & 0x7)), 3, bfw::Options { seed: 1, ..bfw::Options::default() }).unwrap();
        // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
        ctl.set_table_id(keyplane::TableId::from_u128(0));
        let t = ctl.export();
        let _ = t.apply(&d);
        let _ = t.get(b"x");
        assert_eq!(bfw::Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
    }
});
