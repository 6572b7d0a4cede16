#![no_main]
//! Decoding arbitrary bytes as a Concury data plane never panics; whatever
//! decodes answers every lookup with a member of the VIP's own pool (the
//! batch path the same as single lookups) and re-encodes to the same bytes.
use keyplane::Wire;
use keyplane::lb::DataPlane;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(dp) = DataPlane::from_bytes(data) {
        for v in 0..dp.max_vips().min(8) as u32 {
            let pool = dp.pool(v);
            let keys = [&b""[..], b"a", b"0123456789abcdef0123"];
            let mut out = [None; 3];
            dp.lookup_batch_vip(v, &keys, &mut out);
            for (k, o) in keys.iter().zip(out) {
                let b = dp.lookup(v, k);
                assert_eq!(b, o);
                if let Some(b) = b {
                    assert!(pool.as_ref().is_some_and(|p| p.contains(&b)));
                }
            }
        }
        assert_eq!(dp.to_bytes(), data);
    }
});
