//! Counters per port and per reason, and per control-side event; printed on
//! exit and served as Prometheus text.
//!
//! Workers add one burst's worth at a time (relaxed atomic adds, one cache
//! line per port), so counting costs a few adds per burst, not per frame.

use crate::decide::Reason;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Per-port frame counters.
pub const PORT_COUNTERS: usize = 4 + Reason::ALL.len();
const RX: usize = 0;
const TX: usize = 1;
const FLOODED: usize = 2;
const UNKNOWN_FLOODED: usize = 3;

/// Counters of one port, padded to a cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PortCounters {
    c: [AtomicU64; PORT_COUNTERS],
}

/// A worker's counts for one burst, added to the shared counters at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Frames received.
    pub rx: u64,
    /// Frames sent (a flooded frame counts once per port it leaves by).
    pub tx: u64,
    /// Frames flooded (counted at the ingress port).
    pub flooded: u64,
    /// Of those, unicast frames flooded because the FIB did not hold their
    /// destination (the rest are broadcast / multicast).
    pub unknown_flooded: u64,
    /// Drops by reason ([`Reason::index`]).
    pub dropped: [u64; Reason::ALL.len()],
}

impl Tally {
    /// Counts one drop.
    #[inline]
    pub fn drop(&mut self, r: Reason) {
        self.dropped[r.index()] += 1;
    }
}

impl PortCounters {
    /// Adds a tally.
    pub fn add(&self, t: &Tally) {
        let add = |i: usize, v: u64| {
            if v != 0 {
                self.c[i].fetch_add(v, Ordering::Relaxed);
            }
        };
        add(RX, t.rx);
        add(TX, t.tx);
        add(FLOODED, t.flooded);
        add(UNKNOWN_FLOODED, t.unknown_flooded);
        for (i, v) in t.dropped.iter().enumerate() {
            add(4 + i, *v);
        }
    }

    /// A snapshot.
    pub fn get(&self) -> Tally {
        let g = |i: usize| self.c[i].load(Ordering::Relaxed);
        let mut t = Tally {
            rx: g(RX),
            tx: g(TX),
            flooded: g(FLOODED),
            unknown_flooded: g(UNKNOWN_FLOODED),
            dropped: [0; Reason::ALL.len()],
        };
        for (i, d) in t.dropped.iter_mut().enumerate() {
            *d = g(4 + i);
        }
        t
    }
}

macro_rules! events {
    ($($name:ident: $help:literal,)*) => {
        /// Control-side events (FIB updates and learning).
        #[derive(Debug, Default)]
        pub struct Events {
            $(#[doc = $help] pub $name: AtomicU64,)*
        }
        impl Events {
            /// `(name, help, value)` of every event counter.
            pub fn list(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$((stringify!($name), $help, self.$name.load(Ordering::Relaxed)),)*]
            }
        }
    };
}

events! {
    deltas_applied: "Deltas applied to the running FIB",
    deltas_refused_lost: "Deltas refused because an earlier one is missing (sequence gap)",
    deltas_refused_repeated: "Deltas refused because they were already applied (old sequence number)",
    deltas_refused_bad: "Deltas refused because they do not decode or do not fit the FIB",
    fib_swaps: "Whole-FIB replacements (new blob, SIGHUP, resync)",
    fib_refused: "FIB blobs refused (corrupt or unusable)",
    learn_reports: "Source-MAC reports sent by the data plane to the control side",
    learn_reports_dropped: "Source-MAC reports dropped by the rate limit or a full channel",
    learned: "MAC addresses inserted by learning",
    moved: "MAC addresses that moved to another port",
    aged: "MAC addresses removed by aging",
    learn_failed: "Learning inserts the control form refused",
}

impl Events {
    /// Adds one to a counter.
    #[inline]
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// All counters of a running switch.
#[derive(Debug)]
pub struct Counters {
    /// Port names, in port order.
    pub names: Vec<String>,
    /// One block per port.
    pub ports: Vec<PortCounters>,
    /// Control-side events.
    pub events: Events,
    /// Sequence number (of the update source, e.g. the `keyplane serve`
    /// table) of the last update applied to the FIB; 0 when the source
    /// numbers none.
    pub applied_sequence: AtomicU64,
}

impl Counters {
    /// Zeroed counters for these ports.
    pub fn new(names: Vec<String>) -> Self {
        let ports = names.iter().map(|_| PortCounters::default()).collect();
        Self { names, ports, events: Events::default(), applied_sequence: AtomicU64::new(0) }
    }

    /// Per-port snapshot.
    pub fn port(&self, i: usize) -> Tally {
        self.ports.get(i).map(|p| p.get()).unwrap_or_default()
    }

    /// Sum over ports.
    pub fn total(&self) -> Tally {
        let mut s = Tally::default();
        for p in &self.ports {
            let t = p.get();
            s.rx += t.rx;
            s.tx += t.tx;
            s.flooded += t.flooded;
            s.unknown_flooded += t.unknown_flooded;
            for (a, b) in s.dropped.iter_mut().zip(t.dropped) {
                *a += b;
            }
        }
        s
    }

    /// Prometheus text exposition (format 0.0.4).
    pub fn prometheus(&self) -> String {
        let mut o = String::new();
        let mut family = |name: &str, help: &str, f: &dyn Fn(&Tally) -> u64| {
            let _ = writeln!(o, "# HELP keyplane_switch_{name}_total {help}");
            let _ = writeln!(o, "# TYPE keyplane_switch_{name}_total counter");
            for (i, n) in self.names.iter().enumerate() {
                let _ = writeln!(o, "keyplane_switch_{name}_total{{port=\"{}\"}} {}", escape(n), f(&self.port(i)));
            }
        };
        family("rx_frames", "Frames received", &|t| t.rx);
        family("tx_frames", "Frames sent", &|t| t.tx);
        family("flooded_frames", "Frames flooded (counted at the ingress port)", &|t| t.flooded);
        family(
            "flooded_unknown_frames",
            "Unicast frames flooded because the FIB does not hold their destination",
            &|t| t.unknown_flooded,
        );
        for r in Reason::ALL {
            let help = match r {
                Reason::Malformed => "Frames dropped as malformed",
                Reason::Unknown => "Frames dropped: unknown destination, no route or no next hop",
                Reason::Filtered => "Frames dropped: destination behind the ingress port",
                Reason::TtlExpired => "Frames dropped: TTL or hop limit expired",
                Reason::NotForUs => "Frames dropped: not addressed to this switch",
                Reason::TxFull => "Frames dropped: transmit ring of the egress port full",
            };
            family(r.name(), help, &|t| t.dropped[r.index()]);
        }
        for (name, help, v) in self.events.list() {
            let _ = writeln!(o, "# HELP keyplane_switch_{name}_total {help}");
            let _ = writeln!(o, "# TYPE keyplane_switch_{name}_total counter");
            let _ = writeln!(o, "keyplane_switch_{name}_total {v}");
        }
        let _ = writeln!(
            o,
            "# HELP keyplane_switch_applied_sequence Sequence number of the last update applied (update source's numbering)"
        );
        let _ = writeln!(o, "# TYPE keyplane_switch_applied_sequence gauge");
        let _ = writeln!(o, "keyplane_switch_applied_sequence {}", self.applied_sequence.load(Ordering::Relaxed));
        o
    }

    /// The human summary printed on exit.
    pub fn summary(&self) -> String {
        let mut o = String::new();
        let _ = write!(o, "{:<16} {:>12} {:>12} {:>10} {:>10}", "port", "rx", "tx", "flooded", "unk_flood");
        for r in Reason::ALL {
            let _ = write!(o, " {:>12}", r.name().trim_start_matches("dropped_"));
        }
        o.push('\n');
        let line = |o: &mut String, n: &str, t: &Tally| {
            let _ = write!(o, "{n:<16} {:>12} {:>12} {:>10} {:>10}", t.rx, t.tx, t.flooded, t.unknown_flooded);
            for d in t.dropped {
                let _ = write!(o, " {d:>12}");
            }
            o.push('\n');
        };
        for (i, n) in self.names.iter().enumerate() {
            line(&mut o, n, &self.port(i));
        }
        line(&mut o, "total", &self.total());
        for (name, _, v) in self.events.list() {
            let _ = writeln!(o, "{name}: {v}");
        }
        let _ = writeln!(o, "applied_sequence: {}", self.applied_sequence.load(Ordering::Relaxed));
        o
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_add_up_and_render() {
        let c = Counters::new(vec!["a".into(), "b\"x".into()]);
        let mut t = Tally { rx: 3, tx: 2, flooded: 1, ..Tally::default() };
        t.drop(Reason::TtlExpired);
        c.ports[0].add(&t);
        c.ports[0].add(&t);
        c.ports[1].add(&Tally { rx: 5, ..Tally::default() });
        Events::inc(&c.events.deltas_applied);
        assert_eq!(c.port(0).rx, 6);
        assert_eq!(c.port(0).dropped[Reason::TtlExpired.index()], 2);
        assert_eq!(c.total().rx, 11);
        let p = c.prometheus();
        assert!(p.contains("keyplane_switch_rx_frames_total{port=\"a\"} 6\n"), "{p}");
        assert!(p.contains("keyplane_switch_rx_frames_total{port=\"b\\\"x\"} 5\n"), "{p}");
        assert!(p.contains("keyplane_switch_ttl_expired_total{port=\"a\"} 2\n"), "{p}");
        assert!(p.contains("keyplane_switch_deltas_applied_total 1\n"), "{p}");
        assert!(c.summary().contains("deltas_applied: 1"));
    }
}
