//! Plumbing the structures share, public for keyplane's own front ends,
//! benchmarks and fuzz targets (and for structures written outside the
//! crate): the blob and delta frame ([`wire`]), the bit-packed value array
//! ([`bits`]), memory hints ([`mem`]). Not part of the table contract
//! ([`ControlTable`](crate::ControlTable), [`LookupTable`](crate::LookupTable),
//! [`Wire`](crate::Wire)); these may change between releases. Inside the
//! crate they keep their short paths (`crate::wire`, `crate::bits`,
//! `crate::mem`).

#[path = "bits.rs"]
pub mod bits;
#[path = "mem.rs"]
pub mod mem;
#[path = "wire.rs"]
pub mod wire;
