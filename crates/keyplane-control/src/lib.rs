//! # keyplane-control
//!
//! `keyplane serve`: the control-plane service that holds every table's
//! control form, applies batched writes durably, and streams deltas to the
//! data planes that follow the tables. See docs/control.md.
//!
//! * [`pb`]: the protocol (`proto/keyplane/v1/control.proto`);
//! * [`server`]: start a service ([`server::ServeConfig`]);
//! * [`follow`]: the subscriber client library data planes use;
//! * [`client`]: the `keyplane ctl` client calls.
#![deny(missing_docs)]

pub mod client;
pub mod error;
pub mod etcd;
pub mod follow;
pub mod keys;
pub mod metrics;
pub mod server;
pub mod service;
pub mod store;
pub mod table;
pub mod topology;

pub use error::{ControlError, Result};

/// Generated protocol types and gRPC stubs (`keyplane.v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("keyplane.v1");
}
