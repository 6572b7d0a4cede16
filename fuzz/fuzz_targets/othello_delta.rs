#![no_main]
//! Decoding arbitrary bytes as an Othello delta never panics, and applying a
//! decoded delta to a small table either works or returns an error.
//! Odd first byte: the rest is framed with a valid header and checksum.
use keyplane::ext::wire::Writer;
use keyplane::{ControlTable, LookupTable, Wire, othello};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let framed;
    let bytes = match data.split_first() {
        Some((f, rest)) if f & 1 == 1 => {
            let mut w = Writer::new(<keyplane::othello::Delta as keyplane::Wire>::KIND);
            w.raw(rest);
            framed = w.finish();
            &framed[..]
        }
        _ => data,
    };
    if let Ok(d) = othello::Delta::from_bytes(bytes) {
        let mut ctl = othello::Control::from_items_with((0..64u64).map(|i| (i.to_le_bytes(), i & 0xff)), 8, othello::Options { seed: 1, ..othello::Options::default() }).unwrap();
        // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
        ctl.set_table_id(keyplane::TableId::from_u128(0));
        let t = ctl.export();
        let _ = t.apply(&d);
        let _ = t.get(b"x");
        assert_eq!(othello::Delta::from_bytes(&d.to_bytes()).expect("re-decode"), d);
    }
});
