//! Counters per VIP and backend (packets, bytes, new connections,
//! consistency-preserving remaps, drops by reason) and their Prometheus
//! text, served on `--metrics` by `keyplane_net::metrics::MetricsServer`.

use crate::dataplane::Services;
use keyplane::lb::{Backend, Vip};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonically increasing counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// Sets (gauges).
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The frame did not parse.
    Malformed,
    /// An IP fragment to a VIP (ports unknown).
    Fragment,
    /// The VIP's pool is empty.
    NoBackend,
    /// The backend's MAC is not resolved yet.
    NoNeighbor,
    /// No port address of the backend's family for the outer header.
    NoSourceAddress,
    /// The encapsulated frame would not fit.
    TooBig,
    /// The transmit batch was full.
    TxFull,
    /// The port refused to send.
    TxError,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 8] = [
        DropReason::Malformed,
        DropReason::Fragment,
        DropReason::NoBackend,
        DropReason::NoNeighbor,
        DropReason::NoSourceAddress,
        DropReason::TooBig,
        DropReason::TxFull,
        DropReason::TxError,
    ];
    /// Label value.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::Fragment => "fragment",
            DropReason::NoBackend => "no_backend",
            DropReason::NoNeighbor => "no_neighbor",
            DropReason::NoSourceAddress => "no_source_address",
            DropReason::TooBig => "too_big",
            DropReason::TxFull => "tx_full",
            DropReason::TxError => "tx_error",
        }
    }
}

/// Per (VIP, backend) counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BackendCounts {
    /// Packets forwarded.
    pub packets: u64,
    /// Bytes forwarded (input frame bytes).
    pub bytes: u64,
    /// New connections (reported flows).
    pub new_connections: u64,
}

/// Per VIP counts kept by the control side.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct VipCounts {
    /// Packets dropped for this VIP (no backend, no neighbour, too big).
    pub drops: u64,
    /// Tracked states re-pinned to keep their backend across pool changes
    /// (Concury's consistency-preserving remaps).
    pub remaps: u64,
    /// Pool updates applied to the data plane.
    pub pool_updates: u64,
}

/// Every counter of one LB.
#[derive(Debug, Default)]
pub struct Counters {
    drops: [Counter; 8],
    /// Frames not for a VIP (left to the kernel).
    pub ignored: Counter,
    /// Flow reports sent to the control side.
    pub reports_sent: Counter,
    /// Flow reports refused by the rate limit.
    pub reports_rate_limited: Counter,
    /// Flow reports refused because the channel was full.
    pub reports_queue_full: Counter,
    /// ARP / ND requests sent.
    pub neighbor_requests: Counter,
    /// Connection states tracked by the control side (gauge).
    pub tracked: Counter,
    /// Tracked states evicted because the table was full.
    pub evictions: Counter,
    /// Bytes of the control side's connection state (gauge).
    pub control_bytes: Counter,
    /// Bytes of the data plane's lookup structure (gauge).
    pub dataplane_bytes: Counter,
    /// Successful reloads.
    pub reloads_ok: Counter,
    /// Refused reloads (the old config stays).
    pub reloads_failed: Counter,
    /// Microseconds the last pool change took until the data plane had it (gauge).
    pub last_update_us: Counter,
    /// Health-check transitions.
    pub health_transitions: Counter,
    /// Backends whose MAC is resolved (gauge).
    pub neighbors_resolved: Counter,
    /// Frames received.
    pub rx: Counter,
    /// Frames sent.
    pub tx: Counter,
    /// `--io xdp`: frames the XDP program transmitted.
    pub xdp_tx: Counter,
    /// `--io xdp`: frames the XDP program passed on as not its own (non-VIP).
    pub xdp_pass: Counter,
    /// `--io xdp`: VIP frames the XDP program left to the user-space path.
    pub xdp_slow: Counter,
    /// `--io xdp`: new-flow reports lost because the ring buffer was full.
    pub xdp_ring_full: Counter,
    /// `--io xdp`: data-plane publications (generation flips).
    pub xdp_publishes: Counter,
    /// `--io xdp`: microseconds the last publication took to write and flip (gauge).
    pub xdp_publish_us: Counter,
    /// `--io xdp`: microseconds the last publication waited after its flip for program runs still reading the old generation (gauge).
    pub xdp_grace_us: Counter,
    /// `--io xdp`: microseconds from the last pool change's start to the XDP flip (gauge).
    pub xdp_pool_change_us: Counter,
    per: Mutex<BTreeMap<(Vip, Backend), BackendCounts>>,
    per_vip: Mutex<BTreeMap<Vip, VipCounts>>,
    health: Mutex<BTreeMap<(Vip, IpAddr), (bool, u32)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Counters {
    /// Counts a drop.
    #[inline]
    pub fn count_drop(&self, d: DropReason) {
        self.drops[d as usize].inc();
    }
    /// Drops of one reason.
    pub fn drops(&self, d: DropReason) -> u64 {
        self.drops[d as usize].get()
    }
    /// Adds a worker's local counts (and zeroes them).
    pub(crate) fn merge(&self, s: &Services, per: &mut [Vec<(Backend, [u64; 3])>], drops: &mut [u64]) {
        let mut m = lock(&self.per);
        for (id, row) in per.iter_mut().enumerate() {
            let Some(Some(vip)) = s.by_id.get(id) else {
                row.clear();
                continue;
            };
            for (b, c) in row.drain(..) {
                let e = m.entry((*vip, b)).or_default();
                e.packets += c[0];
                e.bytes += c[1];
                e.new_connections += c[2];
            }
        }
        drop(m);
        let mut v = lock(&self.per_vip);
        for (id, d) in drops.iter_mut().enumerate() {
            if *d != 0
                && let Some(Some(vip)) = s.by_id.get(id)
            {
                v.entry(*vip).or_default().drops += *d;
            }
            *d = 0;
        }
    }
    /// Records a pool update of a VIP.
    pub fn pool_update(&self, vip: Vip, remaps: u64, micros: u64) {
        let mut v = lock(&self.per_vip);
        let e = v.entry(vip).or_default();
        e.remaps += remaps;
        e.pool_updates += 1;
        self.last_update_us.set(micros);
    }
    /// Records a backend's health (up, weight in force).
    pub fn set_health(&self, vip: Vip, addr: IpAddr, up: bool, weight: u32) {
        lock(&self.health).insert((vip, addr), (up, weight));
    }
    /// Forgets the health entries of a VIP's removed backends.
    pub fn retain_health(&self, keep: impl Fn(&Vip, &IpAddr) -> bool) {
        lock(&self.health).retain(|(v, a), _| keep(v, a));
    }
    /// Per (VIP, backend) counts so far (flushed by the workers every 100 ms).
    pub fn backends(&self) -> BTreeMap<(Vip, Backend), BackendCounts> {
        lock(&self.per).clone()
    }
    /// Per VIP counts.
    pub fn vips(&self) -> BTreeMap<Vip, VipCounts> {
        lock(&self.per_vip).clone()
    }

    /// Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let vl =
            |v: &Vip| format!("vip=\"{}:{}/{}\"", fmt_ip(v.addr), v.port, if v.proto == 17 { "udp" } else { "tcp" });
        let mut g = |name: &str, help: &str, kind: &str, v: u64| {
            let _ = writeln!(
                s,
                "# HELP keyplane_lb_{name} {help}\n# TYPE keyplane_lb_{name} {kind}\nkeyplane_lb_{name} {v}"
            );
        };
        g("frames_received_total", "Frames received on the port.", "counter", self.rx.get());
        g("frames_sent_total", "Frames sent on the port.", "counter", self.tx.get());
        g("ignored_total", "Frames not for a VIP.", "counter", self.ignored.get());
        g("reports_sent_total", "New-flow reports sent to the control side.", "counter", self.reports_sent.get());
        g(
            "reports_rate_limited_total",
            "Reports refused by the rate limit.",
            "counter",
            self.reports_rate_limited.get(),
        );
        g("reports_queue_full_total", "Reports refused by the full channel.", "counter", self.reports_queue_full.get());
        g("neighbor_requests_total", "ARP/ND requests sent.", "counter", self.neighbor_requests.get());
        g("tracked_connections", "Connection states tracked by the control side.", "gauge", self.tracked.get());
        g("evictions_total", "Tracked states evicted (table full).", "counter", self.evictions.get());
        g("control_state_bytes", "Bytes of control-side connection state.", "gauge", self.control_bytes.get());
        g("dataplane_bytes", "Bytes of the data-plane lookup structure.", "gauge", self.dataplane_bytes.get());
        g("reloads_total", "Configuration reloads applied.", "counter", self.reloads_ok.get());
        g("reload_failures_total", "Configuration reloads refused.", "counter", self.reloads_failed.get());
        g("last_pool_update_microseconds", "Pool change to data plane updated.", "gauge", self.last_update_us.get());
        g("neighbors_resolved", "Backend MACs resolved.", "gauge", self.neighbors_resolved.get());
        g("health_transitions_total", "Backend health transitions.", "counter", self.health_transitions.get());
        g("xdp_transmitted_total", "Frames the XDP program transmitted (--io xdp).", "counter", self.xdp_tx.get());
        g(
            "xdp_passed_total",
            "Frames the XDP program passed to the kernel as not a VIP packet.",
            "counter",
            self.xdp_pass.get(),
        );
        g(
            "xdp_slow_path_total",
            "VIP frames the XDP program left to the user-space path.",
            "counter",
            self.xdp_slow.get(),
        );
        g(
            "xdp_report_ring_full_total",
            "New-flow reports lost because the XDP ring buffer was full.",
            "counter",
            self.xdp_ring_full.get(),
        );
        g(
            "xdp_publications_total",
            "XDP data-plane publications (generation flips).",
            "counter",
            self.xdp_publishes.get(),
        );
        g(
            "xdp_last_publish_microseconds",
            "Writing and flipping the last XDP generation.",
            "gauge",
            self.xdp_publish_us.get(),
        );
        g(
            "xdp_last_grace_microseconds",
            "Time the last XDP publication waited after its flip for program runs still reading the old generation.",
            "gauge",
            self.xdp_grace_us.get(),
        );
        g(
            "xdp_last_pool_change_microseconds",
            "Last pool change until the XDP program used it.",
            "gauge",
            self.xdp_pool_change_us.get(),
        );
        s.push_str(
            "# HELP keyplane_lb_drops_total Packets dropped, by reason.\n# TYPE keyplane_lb_drops_total counter\n",
        );
        for d in DropReason::ALL {
            let _ = writeln!(s, "keyplane_lb_drops_total{{reason=\"{}\"}} {}", d.name(), self.drops(d));
        }
        let per = self.backends();
        for (name, help, f) in [
            ("packets_total", "Packets forwarded.", (|c: &BackendCounts| c.packets) as fn(&BackendCounts) -> u64),
            ("bytes_total", "Bytes forwarded.", |c| c.bytes),
            ("new_connections_total", "New connections.", |c| c.new_connections),
        ] {
            let _ = writeln!(s, "# HELP keyplane_lb_backend_{name} {help}\n# TYPE keyplane_lb_backend_{name} counter");
            for ((v, b), c) in &per {
                let _ = writeln!(s, "keyplane_lb_backend_{name}{{{},backend=\"{}\"}} {}", vl(v), fmt_ip(b.addr), f(c));
            }
        }
        let vips = self.vips();
        for (name, help, f) in [
            ("vip_drops_total", "Packets to the VIP dropped.", (|c: &VipCounts| c.drops) as fn(&VipCounts) -> u64),
            ("vip_remaps_total", "Consistency-preserving remaps of tracked states.", |c| c.remaps),
            ("vip_pool_updates_total", "Pool updates applied.", |c| c.pool_updates),
        ] {
            let _ = writeln!(s, "# HELP keyplane_lb_{name} {help}\n# TYPE keyplane_lb_{name} counter");
            for (v, c) in &vips {
                let _ = writeln!(s, "keyplane_lb_{name}{{{}}} {}", vl(v), f(c));
            }
        }
        s.push_str("# HELP keyplane_lb_backend_up Backend health (1 up).\n# TYPE keyplane_lb_backend_up gauge\n");
        let h = lock(&self.health).clone();
        for ((v, a), (up, _)) in &h {
            let _ = writeln!(s, "keyplane_lb_backend_up{{{},backend=\"{}\"}} {}", vl(v), fmt_ip(*a), *up as u8);
        }
        s.push_str("# HELP keyplane_lb_backend_weight Weight in force.\n# TYPE keyplane_lb_backend_weight gauge\n");
        for ((v, a), (_, w)) in &h {
            let _ = writeln!(s, "keyplane_lb_backend_weight{{{},backend=\"{}\"}} {w}", vl(v), fmt_ip(*a));
        }
        s
    }
}

fn fmt_ip(a: IpAddr) -> String {
    match a {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}
