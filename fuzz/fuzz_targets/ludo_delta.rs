#![no_main]
//! Decoding arbitrary bytes as a Ludo delta never panics, and applying a
//! decoded delta to a small table either works or returns an error; lookups
//! afterwards never panic.
use keyplane::{ControlTable, LookupTable, Wire, ludo};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    // Raw bytes (framing errors) and the same bytes as a correctly framed,
    // checksummed payload (so the fuzzer reaches the payload decoder).
    let mut w = keyplane::ext::wire::Writer::new(<keyplane::ludo::Delta as keyplane::Wire>::KIND);
    w.raw(raw);
    let framed = w.finish();
    for data in [raw, framed.as_slice()] {
        if let Ok(d) = ludo::Delta::from_bytes(data) {
            let mut ctl = ludo::Control::from_items_with((0..64u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, ludo::Options { seed: 1, ..ludo::Options::default() }).unwrap();
            // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
            ctl.set_table_id(keyplane::TableId::from_u128(0));
            let t = ctl.export();
            let _ = t.apply(&d);
            let _ = t.get(b"x");
            let mut out = [None; 2];
            t.get_batch(&[b"a", &3u64.to_le_bytes()], &mut out);
            assert_eq!(ludo::Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
        }
    }
});
