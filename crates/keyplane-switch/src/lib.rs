//! # keyplane-switch
//!
//! `keyplane switch`: an L2 / L3 software switch whose FIB is a keyplane
//! lookup form (Concise, Yu et al.; thesis ch. 3 CFW / OFW), updated live by
//! deltas while it forwards.
//!
//! * [`decide`]: the forwarding decision as pure functions of a parsed frame
//!   and the FIB's answer (L2 and L3);
//! * [`fib`]: the FIB over any lookup form the blob names, swapped
//!   atomically, patched in place;
//! * [`learn`]: learning through the control side (reports, control form,
//!   deltas, aging);
//! * [`source`]: update sources (watched delta directory, in-memory) and the
//!   sequence-checked updater; [`controller`]: a `keyplane serve` table as
//!   an update source;
//! * [`counters`]: per-port / per-reason counters, Prometheus text.
#![deny(missing_docs)]

pub mod config;
pub mod controller;
pub mod counters;
pub mod decide;
mod error;
pub mod fib;
pub mod learn;
pub mod packet;
pub mod plane;
pub mod routes;
mod runtime;
pub mod source;

pub use config::{Config, Mode};
pub use error::{Result, SwitchError};
pub use keyplane_net::{IoKind, Shutdown};
pub use runtime::{Finished, Running, interface_mac, port_mac, run, start};
