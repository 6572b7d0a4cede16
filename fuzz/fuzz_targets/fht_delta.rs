#![no_main]
//! Decoding arbitrary bytes as an FHT delta never panics, and applying a
//! decoded delta to a small table either works or returns an error.
use keyplane::{ControlTable, LookupTable, Wire, fht};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = fht::Delta::from_bytes(data) {
        let opts = fht::Options { seed: 1, ..fht::Options::with_fingerprint_bits(3) };
        let mut ctl = fht::Control::from_items_with((0..64u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, opts).unwrap();
        // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
        ctl.set_table_id(keyplane::TableId::from_u128(0));
        let t = ctl.export();
        let _ = t.apply(&d);
        let _ = t.get(b"x");
        assert_eq!(fht::Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
    }
});
