#![no_main]
//! Decoding arbitrary bytes as a partial-key cuckoo lookup form never
//! panics; whatever decodes answers lookups and round-trips.
use keyplane::{LookupTable, Wire, cuckoo::partial::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &[u8]| {
    // Also frame the input as a payload with a valid header and checksum, so
    // the fuzzer reaches the payload decoder, not only the frame check.
    let mut w = keyplane::ext::wire::Writer::new(<keyplane::cuckoo::partial::Lookup as keyplane::Wire>::KIND);
    w.raw(raw);
    let framed = w.finish();
    for data in [raw, framed.as_slice()] {
        if let Ok(t) = Lookup::from_bytes(data) {
            let _ = t.get(data);
            let keys: Vec<&[u8]> = data.chunks(3).collect();
            let mut out = vec![None; keys.len()];
            t.get_batch(&keys, &mut out);
            let b = t.to_bytes();
            assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
        }
    }
});
