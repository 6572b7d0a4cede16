#![no_main]
//! Decoding arbitrary bytes as a partial-key cuckoo delta never panics, and
//! applying a decoded delta either works or returns an error.
use keyplane::{ControlTable, LookupTable, Wire, cuckoo::partial};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    // Also frame the input as a payload with a valid header and checksum, so
    // the fuzzer reaches the payload decoder, not only the frame check.
    let mut w = keyplane::ext::wire::Writer::new(<keyplane::cuckoo::partial::Delta as keyplane::Wire>::KIND);
    w.raw(raw);
    let framed = w.finish();
    for data in [raw, framed.as_slice()] {
        if let Ok(d) = partial::Delta::from_bytes(data) {
            let mut ctl = partial::Control::from_items_with((0..64u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, partial::Options { seed: 1, ..partial::Options::default() }).unwrap();
            // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
            ctl.set_table_id(keyplane::TableId::from_u128(0));
            let t = ctl.export();
            let _ = t.apply(&d);
            let _ = t.get(b"x");
            assert_eq!(partial::Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
        }
    }
});
