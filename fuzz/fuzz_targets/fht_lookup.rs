#![no_main]
//! Decoding arbitrary bytes as an FHT lookup form never panics; whatever
//! decodes answers lookups, re-encodes, and decodes again to the same bytes.
use keyplane::{LookupTable, Wire, fht::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Lookup::from_bytes(data) {
        let _ = t.get(data);
        let _ = t.get_main_only(b"/com/example");
        let mut out = [None; 2];
        t.get_batch(&[data, b""], &mut out);
        let b = t.to_bytes();
        assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
    }
});
