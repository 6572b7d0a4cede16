//! AF_XDP back end (being written; [`XdpPort::open`] reports it unavailable so `IoKind::Auto`
//! falls back to AF_PACKET).

use crate::port::{IoKind, Port, PortOptions, PortStats};
use crate::{Error, Result};
use std::time::Duration;

/// One AF_XDP socket bound to one queue of one interface.
pub struct XdpPort {
    name: String,
    stats: PortStats,
}

impl XdpPort {
    /// Open an AF_XDP socket on queue `queue` of `ifname`.
    pub fn open(ifname: &str, _queue: u32, _opts: &PortOptions) -> Result<Self> {
        Err(Error::Unsupported { kind: "AF_XDP", ifname: ifname.to_string(), reason: "not built yet".into() })
    }
}

impl Port for XdpPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> IoKind {
        IoKind::AfXdp
    }
    fn rx_burst_with(&mut self, _max: usize, _f: &mut dyn FnMut(&mut [u8])) -> Result<usize> {
        Ok(0)
    }
    fn tx_stage(&mut self, _frame: &[u8]) -> Result<bool> {
        Ok(false)
    }
    fn tx_flush(&mut self) -> Result<usize> {
        Ok(0)
    }
    fn wait_rx(&mut self, _timeout: Duration) -> Result<bool> {
        Ok(false)
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
}
