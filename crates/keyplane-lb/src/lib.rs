//! `keyplane lb`: a layer-4 load balancer on the Concury lookup
//! (`keyplane::lb`, thesis ch. 5), with a Maglev mode on the same packet
//! path. One-armed on a single port: VIP packets come in, are looked up in
//! bursts and leave on the same port to their backend by L2 direct server
//! return (destination-MAC rewrite) or IP-in-IP encapsulation; the LB
//! resolves backends' MACs itself (ARP / ND). See `docs/lb-service.md`.
//!
//! Threads: one packet worker ([`dataplane::Worker`] over a
//! `keyplane-net` port opened by [`io::open`]), the control side ([`control::ControlSide`]: new-flow
//! reports, pool changes, reloads), the health checker, and the metrics
//! endpoint.
//!
//! ```no_run
//! # fn main() -> keyplane_lb::Result<()> {
//! use keyplane_lb::{Lb, Options};
//! let lb = Lb::start(Options::new("eth0", "lb.toml"))?;
//! lb.reload()?;            // what SIGHUP does
//! print!("{}", lb.counters().prometheus());
//! lb.stop();
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod config;
pub mod conntrack;
pub mod control;
pub mod dataplane;
pub mod encap;
mod error;
pub mod health;
pub mod io;
pub mod metrics;
pub mod neigh;
pub mod packet;
pub mod testbed;
pub mod xdp;

pub use control::Mode;
pub use error::{Error, Result};

use config::{Config, Prefix};
use control::{ControlSide, Target};
use dataplane::{Engine, PortInfo, Report, TxBatch, Worker};
use keyplane_net::metrics::MetricsServer;
use metrics::Counters;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use keyplane_net::IoKind;

/// How to run an LB.
#[derive(Debug, Clone)]
pub struct Options {
    /// The one port (interface name).
    pub port: String,
    /// The TOML configuration file.
    pub config: PathBuf,
    /// Lookup engine.
    pub mode: Mode,
    /// Packet I/O.
    pub io: IoKind,
    /// Prometheus endpoint.
    pub metrics: Option<SocketAddr>,
    /// `--io xdp`: the in-kernel XDP fast path ([`xdp`]) on the port, with
    /// `io` (AF_PACKET under `Auto`) as the user-space path for everything
    /// the program passes on. Concury mode only.
    pub xdp: bool,
}

impl Options {
    /// Concury mode, automatic I/O, no metrics endpoint.
    pub fn new(port: impl Into<String>, config: impl Into<PathBuf>) -> Self {
        Self {
            port: port.into(),
            config: config.into(),
            mode: Mode::Concury,
            io: IoKind::Auto,
            metrics: None,
            xdp: false,
        }
    }
}

enum Command {
    Reload(Box<Config>, SyncSender<std::result::Result<(), String>>),
    Health(Target, bool),
}

/// A running LB. Dropping it stops it.
pub struct Lb {
    opts: Options,
    prefixes: Vec<Prefix>,
    cmd: Sender<Command>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
    metrics: Option<MetricsServer>,
    /// Serialises reloads (file read + apply).
    reload_lock: Mutex<()>,
}

impl Lb {
    /// Validates the configuration, opens the port and starts the threads.
    pub fn start(opts: Options) -> Result<Self> {
        let (port, prefixes) = io::port_info(&opts.port)?;
        if port.v4.is_none() && port.v6.is_none() {
            return Err(Error::Setup(format!(
                "{} has no IPv4 or global IPv6 address (the LB needs one to resolve backends)",
                opts.port
            )));
        }
        let config = Config::load(&opts.config, &prefixes)?;
        let counters = Arc::new(Counters::default());
        if opts.xdp && opts.mode != Mode::Concury {
            return Err(Error::Setup("--io xdp runs the Concury lookup in the kernel: use --mode concury".into()));
        }
        if opts.xdp && opts.io == IoKind::AfXdp {
            return Err(Error::Setup(
                "--io xdp keeps AF_PACKET as its user-space path (AF_XDP would need the port's XDP hook)".into(),
            ));
        }
        // The XDP program is loaded before anything starts (a build without
        // it, or a kernel that refuses it, fails here with the reason).
        let program = if opts.xdp {
            let sizes = xdp::Sizes::for_config(config.lb.max_connections, config.vips.len(), config.lb.dcode_bits);
            let p = xdp::Program::load(sizes)?;
            p.set_port(&port)?;
            Some(p)
        } else {
            None
        };
        let mut ctl = ControlSide::new(opts.mode, config.clone(), counters.clone())?;
        let sock = io::open(&opts.port, opts.io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (rtx, rrx) = sync_channel::<Report>(config.lb.report_queue);
        let (ctx, crx) = channel::<Command>();
        let services = ctl.services();
        let engine = ctl.engine();
        let targets = Arc::new(arc_swap::ArcSwap::from_pointee(ctl.targets()));
        let mut threads = Vec::new();

        let rate = config.lb.report_rate;
        let neigh = Arc::new(NeighShare::default());
        let mut sync = None;
        if let Some(mut p) = program {
            let Engine::Concury(dp) = &engine else { unreachable!("--io xdp is Concury only") };
            let mut x = XdpSync::new(dp.clone(), neigh.clone());
            x.sync_now(&mut p, &services, &counters, None)?;
            let how = p.attach(&opts.port)?;
            eprintln!("keyplane lb: XDP program attached to {} ({how} XDP)", opts.port);
            let feed = p.feed()?;
            let (r2, c3, sv, s5) = (rtx.clone(), counters.clone(), services.clone(), stop.clone());
            threads.push(spawn("lb-xdp", move || xdp_loop(feed, r2, rate, c3, sv, s5))?);
            x.prog = Some(p);
            sync = Some(x);
        }
        let reports = (opts.mode == Mode::Concury).then_some(rtx);
        let (c2, s2, n2) = (counters.clone(), stop.clone(), sync.as_ref().map(|_| neigh.clone()));
        threads.push(spawn("lb-worker", move || worker_loop(sock, engine, port, services, reports, rate, c2, s2, n2))?);

        let (t2, s3) = (targets.clone(), stop.clone());
        threads.push(spawn("lb-control", move || control_loop(&mut ctl, rrx, crx, t2, s3, sync))?);

        let (c4, s4) = (ctx.clone(), stop.clone());
        threads.push(spawn("lb-health", move || {
            let mut ck = health::Checker::default();
            while !s4.load(Ordering::Relaxed) {
                let ts = targets.load_full();
                for (t, up) in ck.round(&ts, Instant::now()) {
                    let _ = c4.send(Command::Health(t, up));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })?);
        let metrics = match opts.metrics {
            Some(a) => {
                let c = counters.clone();
                Some(MetricsServer::start(a, move || c.prometheus()).map_err(|e| Error::Setup(e.to_string()))?)
            }
            None => None,
        };
        Ok(Self { opts, prefixes, cmd: ctx, stop, threads, counters, metrics, reload_lock: Mutex::new(()) })
    }

    /// Re-reads the configuration file and applies it (SIGHUP). A bad file
    /// is refused with a one-line error and the running configuration stays.
    pub fn reload(&self) -> Result<()> {
        let _g = self.reload_lock.lock().unwrap_or_else(|e| e.into_inner());
        let r = Config::load(&self.opts.config, &self.prefixes).and_then(|c| {
            let (tx, rx) = sync_channel(1);
            self.cmd.send(Command::Reload(Box::new(c), tx)).map_err(|_| Error::Setup("the LB has stopped".into()))?;
            rx.recv().map_err(|_| Error::Setup("the LB has stopped".into()))?.map_err(Error::Config)
        });
        match &r {
            Ok(()) => self.counters.reloads_ok.inc(),
            Err(_) => self.counters.reloads_failed.inc(),
        }
        r
    }

    /// The counters.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// Where the metrics endpoint listens.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }

    /// True while every thread runs.
    pub fn running(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Stops the threads and waits for them.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(m) = self.metrics.take() {
            m.stop();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl std::ops::Drop for Lb {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f).map_err(|e| Error::io(format!("starting thread {name}"), e))
}

#[allow(clippy::too_many_arguments)]
fn worker_loop(
    mut sock: Box<dyn keyplane_net::Port>,
    engine: Engine,
    port: PortInfo,
    services: Arc<arc_swap::ArcSwap<dataplane::Services>>,
    reports: Option<SyncSender<Report>>,
    rate: u64,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    neigh_out: Option<Arc<NeighShare>>,
) {
    let mut w = Worker::new(&engine, port, reports, rate, counters.clone());
    let mut tx = TxBatch::default();
    // Frames are rewritten where they were received and sent from there
    // (`Port::forward_burst`: on AF_XDP no copy in user space).
    let mut scratch = keyplane_net::FwdScratch::new(dataplane::BURST);
    let mut last_resolve = Instant::now() - Duration::from_secs(1);
    while !stop.load(Ordering::Relaxed) {
        let svc = services.load();
        if last_resolve.elapsed() >= Duration::from_millis(100) {
            tx.clear();
            w.resolve(&svc, &mut tx);
            counters
                .neighbors_resolved
                .set(svc.neighbors.iter().filter(|a| w.neighbors.get(a).is_some()).count() as u64);
            last_resolve = Instant::now();
            if let Some(n) = &neigh_out {
                n.update(svc.neighbors.iter().filter_map(|a| w.neighbors.get(a).map(|m| (*a, m))).collect());
            }
            if !tx.is_empty() {
                let mut sent = 0;
                for f in tx.frames() {
                    sent += matches!(sock.tx_stage(f), Ok(true)) as usize;
                }
                let _ = sock.tx_flush();
                counters.tx.add(sent as u64);
                for _ in sent..tx.len() {
                    counters.count_drop(metrics::DropReason::TxError);
                }
            }
        }
        let r = sock.forward_burst(dataplane::BURST, &mut scratch, &mut |frames| {
            counters.rx.add(frames.len() as u64);
            w.process_in_place(&svc, frames);
        });
        match r {
            Ok(r) if r.rx > 0 => {
                counters.tx.add(r.tx as u64);
                for _ in 0..r.tx_failed {
                    counters.count_drop(metrics::DropReason::TxError);
                }
            }
            Ok(_) => {
                if sock.wait_rx(Duration::from_millis(50)).is_err() {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    w.flush(&services.load());
}

fn control_loop(
    ctl: &mut ControlSide,
    reports: Receiver<Report>,
    cmds: Receiver<Command>,
    targets: Arc<arc_swap::ArcSwap<Vec<Target>>>,
    stop: Arc<AtomicBool>,
    mut xdp: Option<XdpSync>,
) {
    let mut last_tick = Instant::now();
    let services = ctl.services();
    let counters = ctl.counters();
    while !stop.load(Ordering::Relaxed) {
        // The XDP program's copy of the data plane follows every change
        // (pool, services, neighbours).
        if let Some(x) = xdp.as_mut() {
            x.sync(&services, &counters, None);
        }
        ctl.drain(&reports);
        if last_tick.elapsed() >= Duration::from_millis(200) {
            last_tick = Instant::now();
            let before = ctl.targets().len();
            match ctl.tick(last_tick) {
                Ok(n) if n > 0 || ctl.targets().len() != before => targets.store(Arc::new(ctl.targets())),
                Ok(_) => {}
                Err(e) => eprintln!("keyplane lb: finishing a graceful removal failed: {e}"),
            }
        }
        // Removals leave reaping behind: one bounded slice per turn, and no
        // waiting for commands while some is left.
        let mut wait = Duration::from_millis(5);
        if ctl.reap_pending() > 0 {
            match ctl.reap_step() {
                Ok((_, left)) if left > 0 => wait = Duration::ZERO,
                Ok(_) => {}
                Err(e) => eprintln!("keyplane lb: reaping removed backends' states failed: {e}"),
            }
        }
        match cmds.recv_timeout(wait) {
            Ok(Command::Reload(c, reply)) => {
                let t0 = Instant::now();
                ctl.drain(&reports);
                let r = ctl.apply_config(*c).map_err(|e| e.to_string());
                if let Some(x) = xdp.as_mut() {
                    x.sync(&services, &counters, Some(t0));
                }
                targets.store(Arc::new(ctl.targets()));
                let _ = reply.send(r);
            }
            Ok(Command::Health(t, up)) => {
                let t0 = Instant::now();
                ctl.drain(&reports);
                if let Err(e) = ctl.set_health(t.vip, t.addr, up) {
                    eprintln!("keyplane lb: health change of {} not applied: {e}", t.addr);
                }
                if let Some(x) = xdp.as_mut() {
                    x.sync(&services, &counters, Some(t0));
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// The backends' next-hop MACs as the worker resolved them, for the XDP
/// program's backend entries (the worker learns them from the frames the
/// XDP program passes on).
#[derive(Debug, Default)]
struct NeighShare {
    version: std::sync::atomic::AtomicU64,
    map: Mutex<std::collections::HashMap<std::net::IpAddr, [u8; 6]>>,
}

impl NeighShare {
    fn update(&self, now: std::collections::HashMap<std::net::IpAddr, [u8; 6]>) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if *m != now {
            *m = now;
            self.version.fetch_add(1, Ordering::Release);
        }
    }
}

/// Keeps the XDP program's maps equal to the data plane, the services and
/// the resolved neighbours (control thread).
struct XdpSync {
    prog: Option<xdp::Program>,
    dp: Arc<keyplane::lb::DataPlane>,
    neigh: Arc<NeighShare>,
    /// (data-plane seq, services pointer, neighbour version) last published.
    last: Option<(u64, usize, u64)>,
    failed: bool,
}

impl XdpSync {
    fn new(dp: Arc<keyplane::lb::DataPlane>, neigh: Arc<NeighShare>) -> Self {
        Self { prog: None, dp, neigh, last: None, failed: false }
    }

    fn state(&self, services: &arc_swap::ArcSwap<dataplane::Services>) -> (u64, usize, u64) {
        let svc = services.load();
        (self.dp.seq(), Arc::as_ptr(&*svc) as usize, self.neigh.version.load(Ordering::Acquire))
    }

    /// Publishes when something changed (`t0`: when the pool change began,
    /// for the pool-change latency gauge).
    fn sync(&mut self, services: &arc_swap::ArcSwap<dataplane::Services>, counters: &Counters, t0: Option<Instant>) {
        let Some(mut p) = self.prog.take() else { return };
        if self.last != Some(self.state(services))
            && let Err(e) = self.sync_now(&mut p, services, counters, t0)
        {
            if !self.failed {
                eprintln!(
                    "keyplane lb: updating the XDP program's maps failed (its VIP packets keep the last data plane): {e}"
                );
            }
            self.failed = true;
        }
        self.prog = Some(p);
    }

    fn sync_now(
        &mut self,
        p: &mut xdp::Program,
        services: &arc_swap::ArcSwap<dataplane::Services>,
        counters: &Counters,
        t0: Option<Instant>,
    ) -> Result<()> {
        let t = t0.unwrap_or_else(Instant::now);
        let state = self.state(services);
        let svc = services.load_full();
        let (_, images) = self.dp.images();
        let neigh = self.neigh.map.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let r = p.publish(&images, &svc, &|a| neigh.get(a).copied())?;
        if r.skipped > 0 && !self.failed {
            eprintln!(
                "keyplane lb: {} VIPs do not fit the XDP program's maps (sized at start for lb.max_connections); \
                 their packets take the user-space path",
                r.skipped
            );
        }
        xdp::record(counters, &r, t.elapsed().as_micros() as u64);
        self.last = Some(state);
        self.failed = false;
        Ok(())
    }
}

/// The XDP program's reports (into the control side's report channel,
/// through the same token bucket as the worker's) and counters (into
/// [`Counters`] every 100 ms).
fn xdp_loop(
    mut feed: xdp::Feed,
    reports: SyncSender<Report>,
    rate: u64,
    counters: Arc<Counters>,
    services: Arc<arc_swap::ArcSwap<dataplane::Services>>,
    stop: Arc<AtomicBool>,
) {
    let mut bucket = dataplane::Bucket::new(rate);
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        bucket.refill(Instant::now());
        let n = feed.reports(|r| {
            if !bucket.take() {
                counters.reports_rate_limited.inc();
                return;
            }
            match reports.try_send(r) {
                Ok(()) => counters.reports_sent.inc(),
                Err(std::sync::mpsc::TrySendError::Full(_)) => counters.reports_queue_full.inc(),
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => {}
            }
        });
        if last.elapsed() >= Duration::from_millis(100) {
            feed.fold(&counters, &services.load());
            last = Instant::now();
        }
        if n == 0 {
            feed.wait(Duration::from_millis(20));
        }
    }
    feed.fold(&counters, &services.load());
}
