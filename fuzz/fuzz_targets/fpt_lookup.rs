#![no_main]
//! Decoding arbitrary bytes as an FPT lookup form never panics; whatever
//! decodes answers lookups (walks stay bounded), re-encodes, and decodes
//! again to the same bytes.
use keyplane::{LookupTable, Wire, fpt::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Lookup::from_bytes(data) {
        let _ = t.get(data);
        let _ = t.depth(b"/com/example");
        let b = t.to_bytes();
        assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
    }
});
