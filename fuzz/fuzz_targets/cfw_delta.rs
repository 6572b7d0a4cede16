#![no_main]
//! Decoding arbitrary bytes as a CFW delta never panics, and applying a
//! decoded delta to a small table either works or returns an error.
use keyplane::{ControlTable, LookupTable, Wire, cfw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = cfw::Delta::from_bytes(data) {
        let opts = cfw::Options { seed: 1, ..cfw::Options::with_fingerprint_bits(3) };
        let mut ctl = cfw::Control::from_items_with((0..64u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, opts).unwrap();
        // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
        ctl.set_table_id(keyplane::TableId::from_u128(0));
        let t = ctl.export();
        let _ = t.apply(&d);
        let _ = t.get(b"x");
        let _ = t.get(&3u64.to_le_bytes());
        assert_eq!(cfw::Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
    }
});
