//! The LB's data plane: a burst of frames in, forwarded frames and
//! new-flow reports out. Pure over its inputs (the services, the lookup
//! engine, the neighbour table): the packet loop, the pcap-style tests and
//! the fuzz target all run this code.
//!
//! Per burst: every frame is parsed and classified ([`classify`]); the VIP
//! packets' backends come from one batched lookup (Concury: a per-thread
//! [`PacketReader`] over mixed VIPs; Maglev: its table + connection
//! tracking, which learns on a miss); each packet is rewritten (DSR) or
//! encapsulated (IPIP) to its backend's MAC.
//!
//! **New-flow reports** (thesis §5.4.4): a TCP SYN (without ACK) or the
//! first packet of a UDP flow is reported to the control side, which records
//! the connection's state so later pool changes keep it. A small
//! direct-mapped cache of recently reported flows (`FLOW_CACHE` entries of 8
//! bytes, fixed size) recognises a flow's next packet and reports it once as
//! *confirmed* (a spoofed SYN never is), and FIN/RST as *ended*. Reports go
//! through a token bucket (`lb.report_rate` per second) into a bounded
//! channel; both refusals are counted and cost no consistency until the next
//! pool change (a lookup is a pure function of the plane and the key).

use crate::config::Method;
use crate::encap;
use crate::metrics::{Counters, DropReason};
use crate::neigh::{Neighbors, learn};
use crate::packet::{Frame, Ip, parse, tcp};
use keyplane::lb::Balancer;
use keyplane::lb::maglev::Maglev;
use keyplane::lb::{Backend, DataPlane, PacketReader, StateKey, Vip, VipId};
use keyplane_net::{FwdFrame, Verdict};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Most frames in one burst.
pub const BURST: usize = 64;
/// Largest output frame.
pub const FRAME_MAX: usize = 2048;
/// Entries of the per-worker flow cache (power of two).
pub const FLOW_CACHE: usize = 1 << 16;

/// A VIP as the data plane sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    /// Index in the engine.
    pub id: VipId,
    /// The VIP.
    pub vip: Vip,
    /// Forwarding method.
    pub method: Method,
}

/// The services in force (published by the control side; replaced whole).
#[derive(Debug, Clone, Default)]
pub struct Services {
    by_vip: hashbrown::HashMap<Vip, Service>,
    /// Every backend address of every VIP (to resolve).
    pub neighbors: Vec<IpAddr>,
    /// Service per engine index (for counters).
    pub by_id: Vec<Option<Vip>>,
}

impl Services {
    /// Builds the lookup map.
    pub fn new(services: impl IntoIterator<Item = Service>, neighbors: Vec<IpAddr>) -> Self {
        let mut by_vip = hashbrown::HashMap::new();
        let mut by_id = Vec::new();
        for s in services {
            if by_id.len() <= s.id as usize {
                by_id.resize(s.id as usize + 1, None);
            }
            by_id[s.id as usize] = Some(s.vip);
            by_vip.insert(s.vip, s);
        }
        Self { by_vip, neighbors, by_id }
    }
    /// The service of a VIP.
    #[inline]
    pub fn get(&self, v: &Vip) -> Option<&Service> {
        self.by_vip.get(v)
    }
    /// Number of services.
    pub fn len(&self) -> usize {
        self.by_vip.len()
    }
    /// True without services.
    pub fn is_empty(&self) -> bool {
        self.by_vip.is_empty()
    }
}

/// The port the LB runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortInfo {
    /// The port's MAC.
    pub mac: [u8; 6],
    /// Its IPv4 address (outer source of IPIP, ARP sender).
    pub v4: Option<Ipv4Addr>,
    /// Its IPv6 address (outer source of IP6-in-IP6, ND sender).
    pub v6: Option<Ipv6Addr>,
}

/// What a flow event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// First packet (TCP SYN, first UDP packet).
    New,
    /// A later packet of a reported flow (the handshake went on).
    Confirm,
    /// TCP FIN or RST.
    End,
}

/// A new-flow report to the control side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// VIP index.
    pub vip: VipId,
    /// The connection's 4-tuple state id.
    pub key: StateKey,
    /// The backend the data plane chose.
    pub backend: Backend,
    /// What happened.
    pub event: Event,
}

/// The lookup engine behind the data plane.
#[derive(Debug, Clone)]
pub enum Engine {
    /// Concury: read-only data plane, state on the control side.
    Concury(Arc<DataPlane>),
    /// Maglev: table + connection tracking, learned on the packet path.
    Maglev(Arc<Mutex<Maglev>>),
}

enum Reader<'a> {
    Concury(PacketReader<'a>),
    Maglev(&'a Mutex<Maglev>),
}

/// A frame's class before the lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// To a VIP: look it up.
    Vip {
        /// The service.
        svc: Service,
        /// The parsed packet.
        ip: Ip,
        /// Its state id.
        key: StateKey,
    },
    /// Not for the LB (the kernel has its own copy).
    Ignore,
    /// Dropped before the lookup.
    Drop(DropReason),
}

/// Classifies a frame against the services (no engine involved).
#[inline]
pub fn classify(services: &Services, frame: &[u8]) -> Class {
    let ip = match parse(frame) {
        Frame::Ip(ip) => ip,
        Frame::Malformed => return Class::Drop(DropReason::Malformed),
        _ => return Class::Ignore,
    };
    let vip = Vip { addr: ip.dst, port: ip.dport, proto: ip.proto };
    match services.get(&vip) {
        Some(svc) => {
            if ip.fragment {
                return Class::Drop(DropReason::Fragment);
            }
            Class::Vip { svc: *svc, ip, key: StateKey::four_tuple(ip.src, ip.sport, ip.dport, ip.proto) }
        }
        None if ip.fragment && services.by_vip.keys().any(|v| v.addr == ip.dst) => Class::Drop(DropReason::Fragment),
        None => Class::Ignore,
    }
}

/// Output of one burst: frames to transmit.
pub struct TxBatch {
    bufs: Vec<[u8; FRAME_MAX]>,
    lens: Vec<usize>,
}

impl Default for TxBatch {
    fn default() -> Self {
        Self { bufs: vec![[0u8; FRAME_MAX]; BURST + 8], lens: Vec::with_capacity(BURST + 8) }
    }
}

impl TxBatch {
    /// Frames ready to send.
    pub fn frames(&self) -> impl Iterator<Item = &[u8]> {
        self.lens.iter().enumerate().map(|(i, &n)| &self.bufs[i][..n])
    }
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.lens.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }
    /// Empties the batch.
    pub fn clear(&mut self) {
        self.lens.clear();
    }
    fn slot(&mut self) -> Option<&mut [u8; FRAME_MAX]> {
        let i = self.lens.len();
        self.bufs.get_mut(i)
    }
    fn push_len(&mut self, n: usize) {
        self.lens.push(n);
    }
    /// Appends a frame (neighbour requests).
    pub fn push(&mut self, f: &[u8]) -> bool {
        match self.slot() {
            Some(b) if f.len() <= FRAME_MAX => {
                b[..f.len()].copy_from_slice(f);
                self.push_len(f.len());
                true
            }
            _ => false,
        }
    }
}

/// Token bucket for reports.
#[derive(Debug)]
pub(crate) struct Bucket {
    rate: f64,
    cap: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub(crate) fn new(rate: u64) -> Self {
        let cap = (rate as f64 / 10.0).max(64.0);
        Self { rate: rate as f64, cap, tokens: cap, last: Instant::now() }
    }
    pub(crate) fn refill(&mut self, now: Instant) {
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.cap);
    }
    #[inline]
    pub(crate) fn take(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Per-(VIP, backend) counts kept by a worker between flushes.
#[derive(Debug, Default)]
struct Local {
    per: Vec<Vec<(Backend, [u64; 3])>>,
    vip_drops: Vec<u64>,
}

impl Local {
    #[inline]
    fn add(&mut self, vip: VipId, b: Backend, bytes: usize, new: bool) {
        let v = vip as usize;
        if self.per.len() <= v {
            self.per.resize_with(v + 1, Vec::new);
        }
        let row = &mut self.per[v];
        let e = match row.iter().position(|e| e.0 == b) {
            Some(i) => &mut row[i].1,
            None => {
                row.push((b, [0; 3]));
                &mut row.last_mut().expect("just pushed").1
            }
        };
        e[0] += 1;
        e[1] += bytes as u64;
        e[2] += new as u64;
    }
    fn drop_at(&mut self, vip: VipId) {
        let v = vip as usize;
        if self.vip_drops.len() <= v {
            self.vip_drops.resize(v + 1, 0);
        }
        self.vip_drops[v] += 1;
    }
}

/// One packet thread's data plane.
pub struct Worker<'a> {
    reader: Reader<'a>,
    port: PortInfo,
    /// The port's neighbours (learned by this worker from the frames it sees).
    pub neighbors: Neighbors,
    reports: Option<SyncSender<Report>>,
    bucket: Bucket,
    cache: Box<[u64]>,
    counters: Arc<Counters>,
    local: Local,
    last_flush: Instant,
    // scratch
    class: Vec<Class>,
    vips: Vec<VipId>,
    keys: Vec<StateKey>,
    out: Vec<Option<Backend>>,
    /// [`flow_hash`] of each VIP packet of the burst.
    hashes: Vec<u64>,
    steps: Vec<Step>,
}

/// Prefetches the cache line at `p` (a hint: never faults).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, even on an invalid address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How a looked-up packet leaves.
#[derive(Debug, Clone, Copy)]
enum How {
    Dsr,
    Ipip { src: IpAddr, flow: u32 },
}

/// A VIP packet to forward: frame index, VIP, backend, next hop, method.
#[derive(Debug, Clone, Copy)]
struct Step {
    frame: usize,
    vip: VipId,
    backend: Backend,
    mac: [u8; 6],
    how: How,
    ip: Ip,
    new: bool,
}

#[inline]
fn flow_hash(k: &StateKey, vip: VipId) -> u64 {
    let b = k.as_ref();
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ vip as u64;
    for c in b.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = keyplane::hash::mix64(h ^ u64::from_le_bytes(w));
    }
    h
}

impl<'a> Worker<'a> {
    /// A worker over an engine. `reports` is the channel to the control side
    /// (`None`: nothing is reported, e.g. Maglev mode or a benchmark).
    pub fn new(
        engine: &'a Engine,
        port: PortInfo,
        reports: Option<SyncSender<Report>>,
        report_rate: u64,
        counters: Arc<Counters>,
    ) -> Self {
        let reader = match engine {
            Engine::Concury(dp) => Reader::Concury(dp.reader()),
            Engine::Maglev(m) => Reader::Maglev(m),
        };
        Self {
            reader,
            port,
            neighbors: Neighbors::default(),
            reports,
            bucket: Bucket::new(report_rate),
            cache: vec![0u64; FLOW_CACHE].into_boxed_slice(),
            counters,
            local: Local::default(),
            last_flush: Instant::now(),
            class: Vec::with_capacity(BURST),
            vips: Vec::with_capacity(BURST),
            keys: Vec::with_capacity(BURST),
            out: Vec::with_capacity(BURST),
            hashes: Vec::with_capacity(BURST),
            steps: Vec::with_capacity(BURST),
        }
    }

    /// Processes a burst (at most [`BURST`] frames are looked at): learns
    /// neighbours, forwards VIP packets into `tx`, reports flow events,
    /// counts everything.
    pub fn process(&mut self, services: &Services, frames: &[&[u8]], tx: &mut TxBatch) {
        let frames = &frames[..frames.len().min(BURST)];
        let now = self.plan(services, frames.len(), |i| frames[i]);
        let steps = std::mem::take(&mut self.steps);
        for s in &steps {
            let f = frames[s.frame];
            let Some(buf) = tx.slot() else {
                self.counters.count_drop(DropReason::TxFull);
                continue;
            };
            let n = match s.how {
                How::Dsr => encap::dsr(f, s.mac, self.port.mac, buf),
                How::Ipip { src, flow } => {
                    encap::ipip(f, &s.ip, (s.mac, self.port.mac), src, s.backend.addr, flow, buf)
                }
            };
            if let Some(n) = n {
                tx.push_len(n);
            }
            self.finish(s, n.is_some(), f.len());
        }
        self.steps = steps;
        self.end_burst(services, now);
    }

    /// [`process`](Worker::process) in place, for
    /// [`Port::forward_burst`](keyplane_net::Port::forward_burst): each VIP
    /// packet is rewritten in its own buffer (DSR: MACs; IP-in-IP: grown at
    /// the front by the outer header) and given [`Verdict::Transmit`]; every
    /// other frame gets [`Verdict::Drop`] (neighbours are learned from them
    /// here, as `process` does; frames beyond the first [`BURST`] are not
    /// looked at and dropped). The transmitted frames, in order, are
    /// byte for byte the frames `process` puts into its [`TxBatch`], and the
    /// reports and counters are the same.
    pub fn process_in_place(&mut self, services: &Services, frames: &mut [FwdFrame<'_>]) {
        for f in frames.iter_mut() {
            f.verdict = Verdict::Drop;
        }
        let n = frames.len().min(BURST);
        let frames = &mut frames[..n];
        let now = {
            let fr: &[FwdFrame<'_>] = frames;
            self.plan(services, n, |i| fr[i].frame())
        };
        let steps = std::mem::take(&mut self.steps);
        for s in &steps {
            let fr = &mut frames[s.frame];
            let len = fr.len();
            let n = match s.how {
                How::Dsr => encap::dsr_in_place(fr.frame_mut(), s.mac, self.port.mac, FRAME_MAX),
                How::Ipip { src, flow } => {
                    encap::ipip_in_place(fr, &s.ip, (s.mac, self.port.mac), src, s.backend.addr, flow, FRAME_MAX)
                }
            };
            if n.is_some() {
                fr.verdict = Verdict::Transmit;
            }
            self.finish(s, n.is_some(), len);
        }
        self.steps = steps;
        self.end_burst(services, now);
    }

    /// Classifies `n` frames, looks the VIP packets up, reports flow events
    /// and leaves in `self.steps` the packets to forward (drops counted).
    fn plan<'f>(&mut self, services: &Services, n: usize, frame: impl Fn(usize) -> &'f [u8]) -> Instant {
        let now = Instant::now();
        self.bucket.refill(now);
        self.class.clear();
        self.vips.clear();
        self.keys.clear();
        self.steps.clear();
        self.hashes.clear();
        // The headers were just written by the kernel, often on another
        // core: start every frame's miss at once.
        for i in 0..n {
            let f = frame(i);
            prefetch(f.as_ptr());
            prefetch(f.as_ptr().wrapping_add(64));
        }
        for i in 0..n {
            let f = frame(i);
            // Only frames to the port (or broadcast / multicast), never our own.
            let c = if f.len() >= 12 && (f[6..12] == self.port.mac || (f[0] & 1 == 0 && f[0..6] != self.port.mac)) {
                Class::Ignore
            } else {
                classify(services, f)
            };
            match c {
                Class::Vip { svc, key, .. } => {
                    self.vips.push(svc.id);
                    self.keys.push(key);
                    // The flow cache slot is read after the lookup: fetch it now.
                    let h = flow_hash(&key, svc.id);
                    if self.reports.is_some() {
                        prefetch(&self.cache[(h as usize) & (FLOW_CACHE - 1)]);
                    }
                    self.hashes.push(h);
                }
                Class::Ignore => {
                    if let Some((a, mac)) = learn(f) {
                        self.neighbors.learn(a, mac, now);
                    }
                    self.counters.ignored.inc();
                }
                Class::Drop(d) => self.counters.count_drop(d),
            }
            self.class.push(c);
        }
        self.lookup();
        let mut j = 0;
        for i in 0..n {
            let Class::Vip { svc, ip, key } = self.class[i] else { continue };
            let (b, h) = (self.out[j], self.hashes[j]);
            j += 1;
            let Some(b) = b else {
                self.counters.count_drop(DropReason::NoBackend);
                self.local.drop_at(svc.id);
                continue;
            };
            let event = self.flow_event(h, &ip);
            if let Some(e) = event {
                self.report(Report { vip: svc.id, key, backend: b, event: e });
            }
            let Some(mac) = self.neighbors.get(&b.addr) else {
                self.counters.count_drop(DropReason::NoNeighbor);
                self.local.drop_at(svc.id);
                continue;
            };
            let how = match svc.method {
                Method::Dsr => How::Dsr,
                Method::Ipip => {
                    let src = match b.addr {
                        IpAddr::V4(_) => self.port.v4.map(IpAddr::V4),
                        IpAddr::V6(_) => self.port.v6.map(IpAddr::V6),
                    };
                    match src {
                        Some(src) => How::Ipip { src, flow: h as u32 },
                        None => {
                            self.counters.count_drop(DropReason::NoSourceAddress);
                            self.local.drop_at(svc.id);
                            continue;
                        }
                    }
                }
            };
            self.steps.push(Step { frame: i, vip: svc.id, backend: b, mac, how, ip, new: event == Some(Event::New) });
        }
        now
    }

    /// Counts one forwarded (`ok`) or too big packet of `len` bytes.
    #[inline]
    fn finish(&mut self, s: &Step, ok: bool, len: usize) {
        if ok {
            self.local.add(s.vip, s.backend, len, s.new);
        } else {
            self.counters.count_drop(DropReason::TooBig);
            self.local.drop_at(s.vip);
        }
    }

    fn end_burst(&mut self, services: &Services, now: Instant) {
        if now.duration_since(self.last_flush).as_millis() >= 100 {
            self.flush(services);
            self.last_flush = now;
        }
    }

    /// Publishes the worker's per-(VIP, backend) counts.
    pub fn flush(&mut self, services: &Services) {
        self.counters.merge(services, &mut self.local.per, &mut self.local.vip_drops);
    }

    fn lookup(&mut self) {
        let n = self.vips.len();
        self.out.clear();
        self.out.resize(n, None);
        match &mut self.reader {
            Reader::Concury(r) => {
                let mut krefs: [&[u8]; BURST] = [&[]; BURST];
                for (k, r) in self.keys.iter().zip(krefs.iter_mut()) {
                    *r = k.as_ref();
                }
                r.lookup_batch(&self.vips, &krefs[..n], &mut self.out);
            }
            Reader::Maglev(m) => {
                let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
                let mut j = 0;
                for c in &self.class {
                    if let Class::Vip { svc, ip, key } = c {
                        self.out[j] = m.packet(svc.id, key.as_ref()).backend;
                        if ip.proto == 6 && ip.flags & (tcp::FIN | tcp::RST) != 0 {
                            m.connection_end(svc.id, key.as_ref());
                        }
                        j += 1;
                    }
                }
            }
        }
    }

    /// The flow event of a VIP packet whose [`flow_hash`] is `h`, kept in
    /// the flow cache.
    #[inline]
    fn flow_event(&mut self, h: u64, ip: &Ip) -> Option<Event> {
        self.reports.as_ref()?;
        let slot = &mut self.cache[(h as usize) & (FLOW_CACHE - 1)];
        let tag = h | 3;
        let (new, seen) = (tag ^ 2, tag ^ 1); // low bits: 01 reported, 10 confirmed
        if ip.proto == 6 {
            if ip.flags & (tcp::FIN | tcp::RST) != 0 {
                if *slot | 3 == tag {
                    *slot = 0;
                }
                return Some(Event::End);
            }
            if ip.flags & (tcp::SYN | tcp::ACK) == tcp::SYN {
                *slot = new;
                return Some(Event::New);
            }
            if *slot == new {
                *slot = seen;
                return Some(Event::Confirm);
            }
            None
        } else if *slot | 3 != tag {
            *slot = new;
            Some(Event::New)
        } else if *slot == new {
            *slot = seen;
            Some(Event::Confirm)
        } else {
            None
        }
    }

    #[inline]
    fn report(&mut self, r: Report) {
        let Some(tx) = &self.reports else { return };
        if !self.bucket.take() {
            self.counters.reports_rate_limited.inc();
            return;
        }
        match tx.try_send(r) {
            Ok(()) => self.counters.reports_sent.inc(),
            Err(TrySendError::Full(_)) => self.counters.reports_queue_full.inc(),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Neighbour requests due for the services' backends, appended to `tx`.
    pub fn resolve(&mut self, services: &Services, tx: &mut TxBatch) {
        let now = Instant::now();
        for a in self.neighbors.due(&services.neighbors, now) {
            if let Some(f) = Neighbors::request(self.port.mac, self.port.v4, self.port.v6, a)
                && tx.push(&f)
            {
                self.counters.neighbor_requests.inc();
            }
        }
    }
}
