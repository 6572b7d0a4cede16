#![no_main]
//! Decoding arbitrary bytes as a Concury delta never panics, and applying a
//! decoded delta to a small data plane either works or returns an error.
use keyplane::Wire;
use keyplane::lb::{Backend, Control, Delta, Params, Vip};
use libfuzzer_sys::fuzz_target;
use std::net::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = Delta::from_bytes(data) {
        let mut ctl = Control::new(Params { max_vips: 4, dcode_bits: 6, seed: 1 }).unwrap();
        // Fuzzed deltas whose table id is 0 reach the structure-specific checks.
        ctl.set_table_id(keyplane::TableId::from_u128(0));
        let dp = ctl.export();
        let pool = [(Backend::new(Ipv4Addr::new(10, 0, 0, 1), 80), 1)];
        let (_, first) = ctl.add_vip(Vip::new(Ipv4Addr::new(192, 0, 2, 1), 80, 6), &pool).unwrap();
        dp.apply(&first).unwrap();
        let _ = dp.apply(&d);
        let _ = dp.lookup(0, b"x");
        assert_eq!(d.to_bytes(), data);
    }
});
