#![no_main]
//! Decoding arbitrary bytes as a CFW lookup form never panics; whatever
//! decodes answers lookups, re-encodes, and decodes again to the same bytes.
use keyplane::{LookupTable, Wire, cfw::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Lookup::from_bytes(data) {
        let _ = t.get(data);
        let _ = t.get(b"");
        let b = t.to_bytes();
        assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
    }
});
