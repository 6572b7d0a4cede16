//! keyplane-net's frame parser and in-place rewrite helpers on arbitrary bytes: never a panic,
//! offsets inside the frame, TTL / hop-limit decrements keep headers valid, and the pcap reader
//! refuses or reads any file.
#![no_main]

use keyplane_net::checksum;
use keyplane_net::parse::{L3, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = parse(data) {
        assert!(p.l3_offset <= data.len() && p.l4_offset <= data.len() && p.l3_end <= data.len());
        let _ = keyplane_net::parse::nd_target(data, &p);
        let _ = checksum::l4_checksum_valid(data, &p);
        let mut f = data.to_vec();
        match p.l3 {
            L3::Ipv4(ip) => {
                let valid = checksum::ipv4_header_valid(&f, p.l3_offset);
                match checksum::ipv4_decrement_ttl(&mut f, p.l3_offset) {
                    Ok(Some(t)) => {
                        assert_eq!(t, ip.ttl - 1);
                        // RFC 1624: a valid header stays valid after the incremental update.
                        assert!(!valid || checksum::ipv4_header_valid(&f, p.l3_offset));
                    }
                    Ok(None) => assert!(ip.ttl <= 1 && f == data),
                    Err(e) => panic!("parsed IPv4 header refused: {e}"),
                }
                if checksum::set_l4_checksum(&mut f, &p).is_ok() {
                    assert!(checksum::l4_checksum_valid(&f, &p));
                }
            }
            L3::Ipv6(ip) => {
                let r = checksum::ipv6_decrement_hop_limit(&mut f, p.l3_offset).expect("parsed IPv6 header refused");
                assert_eq!(r, (ip.hop_limit > 1).then(|| ip.hop_limit - 1));
                if checksum::set_l4_checksum(&mut f, &p).is_ok() {
                    assert!(checksum::l4_checksum_valid(&f, &p));
                }
            }
            _ => {}
        }
    }
    if let Ok(mut r) = keyplane_net::pcap::PcapReader::new(data, "fuzz") {
        for _ in 0..64 {
            match r.next_record() {
                Ok(Some(rec)) => assert!(rec.data.len() <= data.len()),
                _ => break,
            }
        }
    }
});
