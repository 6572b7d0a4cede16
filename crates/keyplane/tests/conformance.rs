//! The conformance suite ([`keyplane::conformance`]) for every structure
//! with a byte-string key space: oracle property runs, reader-vs-writer
//! stress, corruption sweeps of blobs and deltas, hostile payloads, lost /
//! repeated / foreign deltas, sequence numbers at the edges and edge cases.
//! One module per structure (and per extra configuration); the tests
//! specific to a structure stay in its own file. LPM (prefix keys) has its
//! own oracle in `lpm.rs`.

use keyplane::conformance::{Answers, Suite};

mod othello {
    keyplane::conformance_suite!(keyplane::othello::Control);

    /// OFW: fingerprints and emptiness bits change with every update too.
    mod filtered {
        use keyplane::othello::{Control, Options};
        keyplane::configured_table!(Filtered, Control, Options::filtered(6));
        keyplane::conformance_suite!(Filtered, keyplane::conformance::Suite {
            max_value_bits: 32,
            stress_updates: 200_000,
            ..Default::default()
        }; oracle_mixed_keys, oracle_short_sequences, stress_readers_vs_writer, corruption_sweeps,
           hostile_payloads_never_panic, foreign_deltas_refused);
    }
}

mod ludo {
    // Ludo's reader-vs-writer run is its own (it counts the cuckoo moves the
    // writer makes while readers run): `ludo.rs`.
    keyplane::conformance_suite!(keyplane::ludo::Control, super::Suite::default();
        oracle_mixed_keys, oracle_value_widths, oracle_growth_and_shrink, oracle_short_sequences,
        corruption_sweeps, hostile_payloads_never_panic, deltas_apply_in_order_only, foreign_deltas_refused,
        sequence_edges, edge_cases);
}

mod setsep {
    keyplane::conformance_suite!(
        keyplane::setsep::Control,
        super::Suite { value_bits: 3, stress_updates: 500_000, sample_keys: 2_000, ..Default::default() }
    );
}

mod cuckoo {
    keyplane::conformance_suite!(keyplane::cuckoo::Control);

    /// Values in a separate array (wide values).
    mod separate_values {
        use keyplane::cuckoo::{Control, Options, ValueLayout};
        keyplane::configured_table!(Separate, Control, Options { values: ValueLayout::Separate, ..Options::default() });
        keyplane::conformance_suite!(Separate, keyplane::conformance::Suite { value_bits: 64, ..Default::default() };
            oracle_mixed_keys, oracle_growth_and_shrink, corruption_sweeps, hostile_payloads_never_panic);
    }
}

mod partial_cuckoo {
    keyplane::conformance_suite!(
        keyplane::cuckoo::partial::Control,
        // 1 + 16 fingerprint bits + the value fit a word.
        super::Suite { answers: super::Answers::Approximate, max_value_bits: 47, ..Default::default() }
    );
}

mod cfw {
    keyplane::conformance_suite!(keyplane::cfw::Control, super::Suite { max_value_bits: 63, ..Default::default() });
}

mod bfw {
    keyplane::conformance_suite!(
        keyplane::bfw::Control,
        super::Suite {
            answers: super::Answers::Approximate,
            max_value_bits: keyplane::bfw::MAX_VALUE_BITS,
            value_bits: 3,
            oracle_ops: 8_000,
            ..Default::default()
        }
    );
}

mod fht {
    keyplane::conformance_suite!(keyplane::fht::Control, super::Suite { max_value_bits: 48, ..Default::default() });
}

mod fpt {
    keyplane::conformance_suite!(keyplane::fpt::Control, super::Suite { max_value_bits: 62, ..Default::default() });
}
