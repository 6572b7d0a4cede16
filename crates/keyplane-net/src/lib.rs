//! Packet I/O for keyplane network functions.
//!
//! One burst interface ([`Port`]) over three back ends:
//!
//! * **AF_XDP** ([`IoKind::AfXdp`]): an `AF_XDP` socket per queue with its own UMEM, fed by a
//!   ten-instruction XDP redirect program assembled in Rust (no clang, no libbpf);
//! * **AF_PACKET** ([`IoKind::AfPacket`]): a `TPACKET_V3` block ring for RX (read with `poll()`),
//!   `sendmmsg` for TX, `PACKET_FANOUT` for several queues;
//! * **pcap files** (`open("pcap:IN:OUT", ..)` or [`pcap::PcapPort`]): deterministic tests and replays.
//!
//! [`IoKind::Auto`] tries AF_XDP and falls back to AF_PACKET, logging why.
//!
//! Around the ports: zero-copy frame parsing ([`mod@parse`]), checksum helpers ([`checksum`]),
//! ARP / neighbour-discovery frame builders ([`build`]), a per-queue worker pool ([`workers`]),
//! SIGINT / SIGTERM / SIGHUP flags ([`shutdown`]), a Prometheus text endpoint ([`metrics`]), the
//! network-namespace test helper ([`testnet`]) and benchmarks' CPU-time readers ([`cpu`]). See
//! `docs/net.md`.
//!
//! # Example: a two-port forwarder loop
//!
//! ```no_run
//! use keyplane_net::{open, IoKind, PortOptions, BURST};
//! use std::time::Duration;
//! # fn main() -> Result<(), keyplane_net::Error> {
//! let opts = PortOptions::default();
//! let mut a = open("veth0", IoKind::Auto, 0, &opts)?;
//! let mut b = open("veth1", IoKind::Auto, 0, &opts)?;
//! loop {
//!     if a.wait_rx(Duration::from_millis(100))? {
//!         // Frames are borrowed from the RX ring, may be rewritten in place, and are copied
//!         // once into b's TX ring: no per-packet allocation.
//!         a.rx_burst_with(BURST, &mut |frame: &mut [u8]| {
//!             let _ = b.tx_stage(frame);
//!         })?;
//!         b.tx_flush()?;
//!     }
//! #   break;
//! }
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod afpacket;
pub mod afxdp;
pub mod bpf;
pub mod build;
mod burst;
pub mod checksum;
pub mod cpu;
mod error;
mod forward;
pub mod metrics;
pub mod parse;
pub mod pcap;
mod port;
pub mod shutdown;
mod sys;
pub mod testnet;
pub mod workers;

pub use burst::Burst;
pub use error::{Error, Result};
pub use forward::{FWD_HEADROOM, FWD_MAX, Forwarded, FwdFrame, FwdScratch, Verdict};
pub use parse::{MacAddr, Packet, ParseError, parse};
pub use port::{
    BURST, FRAME_CAPACITY, FanoutMode, IoKind, OtherPorts, Port, PortOptions, PortStats, XdpCopy, XdpMode, open,
    split_at_port,
};
pub use shutdown::Shutdown;
pub use sys::interface_mac;
