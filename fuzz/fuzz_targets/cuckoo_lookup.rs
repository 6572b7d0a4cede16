#![no_main]
//! Decoding arbitrary bytes as a cuckoo lookup form never panics; whatever
//! decodes answers lookups (single and batched), re-encodes, and decodes
//! again to the same bytes.
use keyplane::{LookupTable, Wire, cuckoo::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    // Also frame the input as a payload with a valid header and checksum, so
    // the fuzzer reaches the payload decoder, not only the frame check.
    let mut w = keyplane::ext::wire::Writer::new(<keyplane::cuckoo::Lookup as keyplane::Wire>::KIND);
    w.raw(raw);
    let framed = w.finish();
    for data in [raw, framed.as_slice()] {
        if let Ok(t) = Lookup::from_bytes(data) {
            let _ = t.get(data);
            let _ = t.get(&data[..data.len().min(8)]);
            let keys: Vec<&[u8]> = data.chunks(5).collect();
            let mut out = vec![None; keys.len()];
            t.get_batch(&keys, &mut out);
            let b = t.to_bytes();
            assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
        }
    }
});
