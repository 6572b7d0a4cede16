//! L3 routes: the running longest-prefix-match table (`keyplane::lpm`,
//! prefix keys built by `keyplane build`), swapped whole by a new blob and
//! patched by its deltas with the same sequence checks as the L2 FIB.

use crate::counters::Events;
use crate::decide;
use crate::error::{Result, SwitchError};
use crate::source::UpdateEvent;
use arc_swap::ArcSwap;
use keyplane::lpm;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// A route table as the switch uses it.
pub trait RouteTable: Send + Sync + std::fmt::Debug {
    /// Next hop of the longest IPv4 prefix covering `a`.
    fn v4(&self, a: Ipv4Addr) -> Option<u64>;
    /// Next hop of the longest IPv6 prefix covering `a`.
    fn v6(&self, a: Ipv6Addr) -> Option<u64>;
    /// Sequence number of the last delta applied.
    fn seq(&self) -> u64;
    /// Applies one framed delta.
    fn apply_bytes(&self, delta: &[u8]) -> keyplane::Result<()>;
}

/// The running route table.
#[derive(Debug)]
pub struct Routes {
    table: Box<dyn RouteTable>,
}

impl Routes {
    /// Wraps a route table.
    pub fn new(table: Box<dyn RouteTable>) -> Self {
        Self { table }
    }

    /// Decodes an LPM lookup blob (`what` names it in errors).
    pub fn from_bytes(what: &str, bytes: &[u8]) -> Result<Self> {
        decode(bytes).map(Self::new).map_err(|e| SwitchError::table(what, e))
    }

    /// The table.
    pub fn table(&self) -> &dyn RouteTable {
        &*self.table
    }
}

impl decide::Routes for Routes {
    #[inline]
    fn route_v4(&self, a: Ipv4Addr) -> Option<u64> {
        self.table.v4(a)
    }
    #[inline]
    fn route_v6(&self, a: Ipv6Addr) -> Option<u64> {
        self.table.v6(a)
    }
}

/// Decodes a route-table blob: a `keyplane::lpm` lookup form (Chisel-style
/// LPM over Othello indexes, exact for every address).
fn decode(bytes: &[u8]) -> keyplane::Result<Box<dyn RouteTable>> {
    Ok(Box::new(<lpm::Lookup as keyplane::Wire>::from_bytes(bytes)?))
}

impl RouteTable for lpm::Lookup {
    #[inline]
    fn v4(&self, a: Ipv4Addr) -> Option<u64> {
        self.get_v4(a)
    }
    #[inline]
    fn v6(&self, a: Ipv6Addr) -> Option<u64> {
        self.get_v6(a)
    }
    fn seq(&self) -> u64 {
        lpm::Lookup::seq(self)
    }
    fn apply_bytes(&self, delta: &[u8]) -> keyplane::Result<()> {
        let d = <lpm::Delta as keyplane::Wire>::from_bytes(delta)?;
        keyplane::LookupTable::apply(self, &d)
    }
}

/// The running route table, swapped atomically.
#[derive(Debug)]
pub struct RouteCell {
    cur: ArcSwap<Routes>,
}

impl RouteCell {
    /// A cell holding `r`.
    pub fn new(r: Routes) -> Self {
        Self { cur: ArcSwap::from_pointee(r) }
    }

    /// The current table (hold it for one burst).
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<Routes>> {
        self.cur.load()
    }

    /// Applies an update event (blob: swap; delta: sequence-checked apply).
    pub fn apply(&self, e: &UpdateEvent, ev: &Events) {
        match e {
            UpdateEvent::Blob(b) => match Routes::from_bytes("route blob", b) {
                Ok(r) => {
                    self.cur.store(Arc::new(r));
                    Events::inc(&ev.fib_swaps);
                }
                Err(_) => Events::inc(&ev.fib_refused),
            },
            UpdateEvent::Delta(d) => {
                let r = self.load();
                let have = r.table().seq();
                let seq = match crate::fib::classify(d) {
                    Ok(crate::fib::ObjectKind::Delta { seq }) => seq,
                    _ => {
                        Events::inc(&ev.deltas_refused_bad);
                        return;
                    }
                };
                match seq {
                    Some(s) if s <= have => Events::inc(&ev.deltas_refused_repeated),
                    Some(s) if s > have + 1 => Events::inc(&ev.deltas_refused_lost),
                    _ => match r.table().apply_bytes(d) {
                        Ok(()) => Events::inc(&ev.deltas_applied),
                        Err(_) => Events::inc(&ev.deltas_refused_bad),
                    },
                }
            }
            UpdateEvent::Bad(_) => Events::inc(&ev.deltas_refused_bad),
        }
    }
}
