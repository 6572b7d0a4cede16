#![no_main]
//! Decoding arbitrary bytes as an FPT delta never panics, and applying a
//! decoded delta to a small trie either works or returns an error; lookups
//! afterwards terminate.
use keyplane::{ControlTable, LookupTable, Wire, fpt};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = fpt::Delta::from_bytes(data) {
        let mut ctl = fpt::Control::from_items_with((0..16u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, fpt::Options { seed: 1, ..fpt::Options::default() }).unwrap();
        // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
        ctl.set_table_id(keyplane::TableId::from_u128(0));
        let t = ctl.export();
        let _ = t.apply(&d);
        for i in 0..16u64 {
            let _ = t.get(&i.to_le_bytes());
        }
        assert_eq!(fpt::Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
    }
});
