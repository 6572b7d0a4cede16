#![no_main]
//! Decoding arbitrary bytes as a SetSep delta never panics, and applying a
//! decoded delta to a small table (with and without fallback groups) either
//! works or returns an error; the table keeps answering lookups. The input
//! is tried both as a whole frame and as a payload inside a valid frame.
use keyplane::setsep::{Control, Delta, Options};
use keyplane::ext::wire::Writer;
use keyplane::{ControlTable, LookupTable, Wire};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut w = Writer::new(<keyplane::setsep::Delta as keyplane::Wire>::KIND);
    w.raw(data);
    let framed = w.finish();
    for input in [data, &framed[..]] {
        check(input);
    }
});

fn check(data: &[u8]) {
    if let Ok(d) = Delta::from_bytes(data) {
        assert_eq!(Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
        let items = || (0..200u64).map(|i| (i.to_le_bytes(), i & 0xf));
        let plain = Control::from_items_with(items(), 4, Options { seed: 1, ..Options::default() }).unwrap();
        let tiny = Options { index_bits: 2, array_bits: 2, seed: 1, ..Options::default() };
        let fb = Control::from_items_with(items(), 4, tiny).unwrap();
        for mut ctl in [plain, fb] {
            // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
            ctl.set_table_id(keyplane::TableId::from_u128(0));
            let t = ctl.export();
            let _ = t.apply(&d);
            let _ = t.get(b"x");
            let _ = t.get(&7u64.to_le_bytes());
            let _ = t.to_bytes();
        }
    }
}
