#![no_main]
//! Decoding arbitrary bytes as a Ludo lookup form never panics; whatever
//! decodes answers lookups (single and batched), re-encodes, and decodes
//! again to the same bytes.
use keyplane::{LookupTable, Wire, ludo::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    // Raw bytes (framing errors) and the same bytes as a correctly framed,
    // checksummed payload (so the fuzzer reaches the payload decoder).
    let mut w = keyplane::ext::wire::Writer::new(<keyplane::ludo::Lookup as keyplane::Wire>::KIND);
    w.raw(raw);
    let framed = w.finish();
    for data in [raw, framed.as_slice()] {
        if let Ok(t) = Lookup::from_bytes(data) {
            let _ = t.get(data);
            let mut out = [None; 3];
            t.get_batch(&[data, b"", b"k"], &mut out);
            let b = t.to_bytes();
            assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
        }
    }
});
