#![no_main]
//! Decoding arbitrary bytes as a SetSep lookup form never panics; whatever
//! decodes answers lookups (single and batched), re-encodes, and decodes
//! again to the same bytes. The input is tried both as a whole frame and as
//! a payload inside a valid frame (so mutations get past the checksum).
use keyplane::ext::wire::Writer;
use keyplane::{LookupTable, Wire, setsep::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut w = Writer::new(<keyplane::setsep::Lookup as keyplane::Wire>::KIND);
    w.raw(data);
    let framed = w.finish();
    for input in [data, &framed[..]] {
        check(input);
    }
});

fn check(data: &[u8]) {
    if let Ok(t) = Lookup::from_bytes(data) {
        let _ = t.get(data);
        let keys: Vec<&[u8]> = data.chunks(3).collect();
        let mut out = vec![None; keys.len()];
        t.get_batch(&keys, &mut out);
        let b = t.to_bytes();
        assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
    }
}
