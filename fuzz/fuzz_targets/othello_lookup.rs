#![no_main]
//! Decoding arbitrary bytes as an Othello lookup form never panics; whatever
//! decodes answers lookups, re-encodes, and decodes again to the same bytes.
//! Odd first byte: the rest is framed with a valid header and checksum, so
//! the fuzzer reaches the payload decoder instead of the checksum.
use keyplane::ext::wire::Writer;
use keyplane::{LookupTable, Wire, othello::Lookup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let framed;
    let bytes = match data.split_first() {
        Some((f, rest)) if f & 1 == 1 => {
            let mut w = Writer::new(<keyplane::othello::Lookup as keyplane::Wire>::KIND);
            w.raw(rest);
            framed = w.finish();
            &framed[..]
        }
        _ => data,
    };
    if let Ok(t) = Lookup::from_bytes(bytes) {
        let _ = t.get(data);
        let mut out = [None; 3];
        t.get_batch(&[b"a", b"", data], &mut out);
        let b = t.to_bytes();
        assert_eq!(Lookup::from_bytes(&b).expect("re-decode").to_bytes(), b);
    }
});
