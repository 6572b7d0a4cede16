//! The running switch: ports opened through `keyplane-net`, one worker
//! thread per queue forwarding bursts through [`crate::plane`], one control
//! thread for learning, aging, the update source and SIGHUP reloads, and
//! the optional Prometheus endpoint.

use crate::config::{Config, Mode};
use crate::controller::ControllerSource;
use crate::counters::{Counters, Events, Tally};
use crate::decide::L3Config;
use crate::error::{Result, SwitchError};
use crate::fib::{Fib, FibCell};
use crate::learn::{LearnConfig, Learner, Report, Reporter};
use crate::packet::Mac;
use crate::plane::{L2Plane, L3Plane, MAX_BURST, Sink};
use crate::routes::{RouteCell, Routes};
use crate::source::{DirSource, UpdateSource, Updater};
use keyplane_net::metrics::MetricsServer;
use keyplane_net::{Burst, IoKind, Port, PortOptions, PortStats, Shutdown};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A switch that is forwarding. Stop it with [`Running::stop`] (or the
/// [`Shutdown`] it was started with), then [`Running::join`].
pub struct Running {
    /// Live counters.
    pub counters: Arc<Counters>,
    /// The running L2 FIB (L3: the route table is in `routes`).
    pub fib: Arc<FibCell>,
    /// The running L3 routes.
    pub routes: Option<Arc<RouteCell>>,
    /// The back end the ports use.
    pub io: IoKind,
    shutdown: Shutdown,
    workers: Vec<JoinHandle<Result<Vec<PortStats>>>>,
    control: Option<JoinHandle<()>>,
    metrics: Option<MetricsServer>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("io", &self.io).field("workers", &self.workers.len()).finish()
    }
}

/// What a stopped switch reports.
#[derive(Debug)]
pub struct Finished {
    /// Final counters.
    pub counters: Arc<Counters>,
    /// Per-port I/O statistics summed over workers.
    pub port_stats: Vec<PortStats>,
}

impl Finished {
    /// The exit summary: counters per port and reason, I/O statistics, events.
    pub fn summary(&self) -> String {
        let mut s = self.counters.summary();
        for (n, p) in self.counters.names.iter().zip(&self.port_stats) {
            s.push_str(&format!("io {n}: {p}\n"));
        }
        s
    }
}

impl Running {
    /// Address of the metrics endpoint, if one was started.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(|m| m.local_addr())
    }

    /// Requests a stop.
    pub fn stop(&self) {
        self.shutdown.stop();
    }

    /// Waits for the workers and the control thread (after a stop).
    pub fn join(mut self) -> Result<Finished> {
        let mut stats = vec![PortStats::default(); self.counters.names.len()];
        let mut err = None;
        for h in self.workers.drain(..) {
            match h.join() {
                Ok(Ok(s)) => {
                    for (a, b) in stats.iter_mut().zip(&s) {
                        a.add(b);
                    }
                }
                Ok(Err(e)) => err = Some(e),
                Err(_) => err = Some(SwitchError::config("a worker thread panicked")),
            }
        }
        self.shutdown.stop();
        if let Some(c) = self.control.take() {
            let _ = c.join();
        }
        if let Some(m) = self.metrics.take() {
            m.stop();
        }
        match err {
            Some(e) => Err(e),
            None => Ok(Finished { counters: self.counters.clone(), port_stats: stats }),
        }
    }
}

/// Runs the switch until `shutdown` is set (SIGINT / SIGTERM when it was
/// made with [`Shutdown::with_signals`]).
pub fn run(cfg: &Config, shutdown: &Shutdown) -> Result<Finished> {
    let r = start(cfg, shutdown)?;
    while !shutdown.is_stopped() {
        std::thread::sleep(Duration::from_millis(50));
    }
    r.join()
}

fn read(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| SwitchError::io(path.display().to_string(), e))
}

/// Opens the ports, loads the FIB and starts the threads. Ports are opened
/// on the calling thread, so a caller inside a network namespace gets
/// sockets there.
pub fn start(cfg: &Config, shutdown: &Shutdown) -> Result<Running> {
    cfg.validate()?;
    let counters = Arc::new(Counters::new(cfg.ports.clone()));
    // The controller subscription starts first: without a local FIB its first blob is the FIB.
    let mut controller = match (&cfg.controller, &cfg.table) {
        (Some(u), Some(t)) => Some(ControllerSource::new(u, t)?),
        _ => None,
    };
    let (blob, what) = match controller.as_mut() {
        Some(c) if cfg.fib.as_os_str().is_empty() => {
            let (seq, b) = c.first_blob(cfg.controller_wait)?;
            counters.applied_sequence.store(seq, std::sync::atomic::Ordering::Relaxed);
            (b, c.describe())
        }
        _ => (read(&cfg.fib)?, cfg.fib.display().to_string()),
    };
    let (fib, routes) = match cfg.mode {
        Mode::L2 => (Arc::new(FibCell::new(Fib::from_bytes(&what, &blob)?)), None),
        Mode::L3 => {
            let r = Routes::from_bytes(&what, &blob)?;
            // The L2 cell is unused in L3 mode but keeps one shape for `Running`.
            let empty = keyplane_any::AnyControl::empty("cuckoo", 1, &keyplane_any::Opts::new())
                .map_err(|e| SwitchError::table("an empty placeholder table", e))?;
            (Arc::new(FibCell::new(Fib::new(empty.export()))), Some(Arc::new(RouteCell::new(r))))
        }
    };
    // Ports: every worker opens every port (AF_PACKET fanout spreads a port's traffic).
    let mut opts = PortOptions::default();
    let mut per_worker: Vec<Vec<Box<dyn Port>>> = Vec::new();
    for w in 0..cfg.workers {
        let mut v = Vec::new();
        for (i, name) in cfg.ports.iter().enumerate() {
            if cfg.workers > 1 {
                opts.fanout_group = Some(((std::process::id() as usize * 64 + i) & 0xffff) as u16);
            }
            let p = keyplane_net::open(name, cfg.io, w as u32, &opts)
                .map_err(|e| SwitchError::Port { port: name.clone(), msg: e.to_string() })?;
            v.push(p);
        }
        per_worker.push(v);
    }
    let io = per_worker.first().and_then(|v| v.first()).map(|p| p.kind()).unwrap_or(cfg.io);
    let plane = match cfg.mode {
        Mode::L2 => {
            PlaneKind::L2(L2Plane { ports: cfg.ports.len() as u16, unknown: cfg.unknown, learn: cfg.learning() })
        }
        Mode::L3 => {
            let nh = crate::config::read_next_hops(cfg.next_hops.as_deref().unwrap_or("".as_ref()), &cfg.ports)?;
            let mut port_macs = Vec::new();
            for (i, p) in cfg.ports.iter().enumerate() {
                port_macs.push(port_mac(p, i)?);
            }
            let (mut own_v4, mut own_v6) = (Vec::new(), Vec::new());
            for a in &cfg.addresses {
                match a {
                    IpAddr::V4(a) => own_v4.push(*a),
                    IpAddr::V6(a) => own_v6.push(*a),
                }
            }
            PlaneKind::L3(L3Plane { cfg: L3Config { port_macs, own_v4, own_v6, next_hops: nh } })
        }
    };
    // Learning.
    let lcfg = LearnConfig { age: cfg.age, ..LearnConfig::default() };
    let (tx, rx) = crate::learn::channel(&lcfg);
    let learner =
        if cfg.learning() { Some(Learner::new(fib.load().empty_control()?, fib.clone(), &lcfg)) } else { None };
    let source: Option<Box<dyn UpdateSource>> = match (&cfg.deltas, controller) {
        (_, Some(c)) => Some(Box::new(c)),
        (Some(d), None) => Some(Box::new(DirSource::new(d, Some(&cfg.fib))?)),
        (None, None) => None,
    };
    let metrics = match &cfg.metrics {
        Some(addr) => {
            let c = counters.clone();
            Some(
                MetricsServer::start(addr.as_str(), move || c.prometheus())
                    .map_err(|e| SwitchError::config(format!("--metrics {addr}: {e}")))?,
            )
        }
        None => None,
    };
    let mut workers = Vec::new();
    for (w, ports) in per_worker.into_iter().enumerate() {
        let ctx = WorkerState {
            ports,
            plane: plane.clone(),
            fib: fib.clone(),
            routes: routes.clone(),
            counters: counters.clone(),
            reporter: cfg.learning().then(|| Reporter::new(tx.clone(), &lcfg)),
            shutdown: shutdown.clone(),
            burst: cfg.burst,
        };
        let h = std::thread::Builder::new()
            .name(format!("kp-switch-{w}"))
            .spawn(move || ctx.run())
            .map_err(|e| SwitchError::config(format!("cannot start worker {w}: {e}")))?;
        workers.push(h);
    }
    drop(tx);
    let control = {
        let ctl = Control {
            fib: fib.clone(),
            routes: routes.clone(),
            counters: counters.clone(),
            learner,
            rx,
            source,
            shutdown: shutdown.clone(),
            fib_path: cfg.fib.clone(),
            lcfg,
            mode: cfg.mode,
        };
        std::thread::Builder::new()
            .name("kp-switch-ctl".into())
            .spawn(move || ctl.run())
            .map_err(|e| SwitchError::config(format!("cannot start the control thread: {e}")))?
    };
    Ok(Running { counters, fib, routes, io, shutdown: shutdown.clone(), workers, control: Some(control), metrics })
}

#[derive(Debug, Clone)]
enum PlaneKind {
    L2(L2Plane),
    L3(L3Plane),
}

struct WorkerState {
    ports: Vec<Box<dyn Port>>,
    plane: PlaneKind,
    fib: Arc<FibCell>,
    routes: Option<Arc<RouteCell>>,
    counters: Arc<Counters>,
    reporter: Option<Reporter>,
    shutdown: Shutdown,
    burst: usize,
}

/// Stages frames on the worker's own port handles; remembers which to flush.
struct PortSink<'a> {
    ports: &'a mut [Box<dyn Port>],
    dirty: u64,
    refused: &'a mut [u64],
}

impl Sink for PortSink<'_> {
    fn send(&mut self, port: u16, frame: &[u8]) {
        let Some(p) = self.ports.get_mut(port as usize) else { return };
        match p.tx_stage(frame) {
            Ok(true) => self.dirty |= 1 << port,
            _ => self.refused[port as usize] += 1,
        }
    }
}

impl WorkerState {
    fn run(mut self) -> Result<Vec<PortStats>> {
        let n = self.ports.len();
        let mut burst = Burst::with_capacity(self.burst);
        let mut tally = vec![Tally::default(); n];
        let mut refused = vec![0u64; n];
        let mut l3buf = crate::plane::L3Scratch::default();
        let mut fds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .filter_map(|p| p.raw_fd())
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        let events = &self.counters.events;
        while !self.shutdown.is_stopped() {
            let mut got = 0usize;
            for i in 0..n {
                let k = self.ports[i].recv(&mut burst).map_err(|e| SwitchError::Port {
                    port: self.counters.names[i].clone(),
                    msg: format!("receive: {e}"),
                })?;
                if k == 0 {
                    continue;
                }
                got += k;
                let now = Instant::now();
                let mut refs: [&[u8]; MAX_BURST] = [&[]; MAX_BURST];
                let mut sink = PortSink { ports: &mut self.ports, dirty: 0, refused: &mut refused };
                for start in (0..burst.len()).step_by(MAX_BURST) {
                    let m = (burst.len() - start).min(MAX_BURST);
                    for (j, r) in refs.iter_mut().take(m).enumerate() {
                        *r = burst.frame(start + j);
                    }
                    let refs = &refs[..m];
                    match &self.plane {
                        PlaneKind::L2(p) => {
                            let fib = self.fib.load();
                            let rep = &mut self.reporter;
                            p.process(&fib, i as u16, refs, &mut sink, &mut tally, |mac: Mac, port, _known| {
                                if let Some(r) = rep.as_mut() {
                                    r.report(mac, port, now, events);
                                }
                            });
                        }
                        PlaneKind::L3(p) => {
                            if let Some(rc) = &self.routes {
                                let r = rc.load();
                                p.process(&**r, i as u16, refs, &mut sink, &mut tally, &mut l3buf);
                            }
                        }
                    }
                }
                let dirty = sink.dirty;
                for (j, port) in self.ports.iter_mut().enumerate() {
                    if dirty & (1 << j) != 0 {
                        port.tx_flush().map_err(|e| SwitchError::Port {
                            port: self.counters.names[j].clone(),
                            msg: format!("transmit: {e}"),
                        })?;
                    }
                }
                for (j, t) in tally.iter_mut().enumerate() {
                    t.tx -= refused[j].min(t.tx);
                    t.dropped[crate::decide::Reason::TxFull.index()] += refused[j];
                    refused[j] = 0;
                    if *t != Tally::default() {
                        self.counters.ports[j].add(t);
                        *t = Tally::default();
                    }
                }
            }
            if got == 0 {
                for f in fds.iter_mut() {
                    f.revents = 0;
                }
                // SAFETY: `fds` is a valid array of pollfd of the given length, owned by this frame.
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 5) };
            }
        }
        Ok(self.ports.iter().map(|p| p.stats()).collect())
    }
}

struct Control {
    fib: Arc<FibCell>,
    routes: Option<Arc<RouteCell>>,
    counters: Arc<Counters>,
    learner: Option<Learner>,
    rx: Receiver<Report>,
    source: Option<Box<dyn UpdateSource>>,
    shutdown: Shutdown,
    fib_path: std::path::PathBuf,
    lcfg: LearnConfig,
    mode: Mode,
}

impl Control {
    fn run(mut self) {
        let counters = self.counters.clone();
        let ev = &counters.events;
        let updater = Updater::new(self.fib.clone());
        let age_every = (self.lcfg.age / 8).max(Duration::from_millis(100));
        let mut last_age = Instant::now();
        while !self.shutdown.is_stopped() {
            if self.shutdown.take_reload() {
                self.reload(ev);
            }
            if let Some(l) = self.learner.as_mut() {
                if let Ok(r) = self.rx.recv_timeout(Duration::from_millis(10)) {
                    let now = Instant::now();
                    l.handle(r, now, ev);
                    // Drain what queued meanwhile without waiting.
                    for r in self.rx.try_iter().take(65536) {
                        l.handle(r, now, ev);
                    }
                }
                if last_age.elapsed() >= age_every {
                    last_age = Instant::now();
                    l.age_out(last_age, ev);
                }
            }
            match self.source.as_mut() {
                Some(s) => match s.poll(Duration::from_millis(10)) {
                    Ok(list) => {
                        for (i, e) in list.iter().enumerate() {
                            let out = match (self.mode, &self.routes) {
                                (Mode::L3, Some(r)) => {
                                    r.apply(e, ev);
                                    None
                                }
                                _ => Some(updater.apply(e, ev)),
                            };
                            if let Some(seq) = out.and_then(|o| s.feedback(i, o)) {
                                counters.applied_sequence.store(seq, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                },
                None if self.learner.is_none() => std::thread::sleep(Duration::from_millis(10)),
                None => {}
            }
        }
    }

    /// SIGHUP: reload the FIB blob and swap it in as a whole (without a
    /// local blob: ask the update source, i.e. the service, for a fresh one).
    fn reload(&mut self, ev: &Events) {
        if self.fib_path.as_os_str().is_empty() {
            if let Some(s) = self.source.as_mut() {
                let _ = s.resync();
            }
            return;
        }
        let Ok(bytes) = std::fs::read(&self.fib_path) else {
            Events::inc(&ev.fib_refused);
            return;
        };
        match (self.mode, &self.routes) {
            (Mode::L3, Some(r)) => r.apply(&crate::source::UpdateEvent::Blob(bytes), ev),
            _ => match Fib::from_bytes("FIB", &bytes) {
                Ok(f) => {
                    if self.learner.is_some() {
                        match f.empty_control() {
                            Ok(c) => self.learner = Some(Learner::new(c, self.fib.clone(), &self.lcfg)),
                            Err(_) => Events::inc(&ev.fib_refused),
                        }
                    } else {
                        self.fib.swap(f);
                    }
                    Events::inc(&ev.fib_swaps);
                }
                Err(_) => Events::inc(&ev.fib_refused),
            },
        }
    }
}

/// The MAC of port `i`: the interface's own, or `02:6b:70:ff:00:<i>` for a
/// pcap port (which has none).
pub fn port_mac(name: &str, i: usize) -> Result<Mac> {
    if name.starts_with("pcap:") { Ok([0x02, 0x6b, 0x70, 0xff, 0, i as u8]) } else { interface_mac(name) }
}

/// The MAC address of interface `name` in the calling thread's network
/// namespace (`keyplane_net::interface_mac`, errors as [`SwitchError::Port`]).
pub fn interface_mac(name: &str) -> Result<Mac> {
    keyplane_net::interface_mac(name)
        .map(|m| m.0)
        .map_err(|e| SwitchError::Port { port: name.to_string(), msg: format!("cannot read its MAC address: {e}") })
}
