//! `keyplane switch`: parses the flags and runs [`keyplane_switch::run`].

use crate::CliError;
use clap::Args;
use keyplane_switch::{Config, IoKind, Mode, Shutdown, SwitchError};
use std::time::Duration;

/// `keyplane switch`.
#[derive(Args, Debug, Clone)]
pub struct SwitchArgs {
    /// Interface to forward on (repeatable; port index = position, from 0).
    #[arg(long = "port", required = true)]
    ports: Vec<String>,
    /// FIB blob: L2 a MAC table (`keyplane build --key-format mac`, value = port index), L3 a prefix table.
    /// Optional with --controller (the service's first blob is the FIB).
    #[arg(long, required_unless_present = "controller")]
    fib: Option<String>,
    /// l2 (destination MAC → port) or l3 (longest prefix → next hop).
    #[arg(long, default_value = "l2")]
    mode: String,
    /// L3: next-hop file, lines `INDEX PORT DST_MAC` (PORT: an interface name or a port index).
    #[arg(long)]
    next_hops: Option<String>,
    /// L3: an address of the switch (repeatable); ARP and neighbour solicitations are answered for these only.
    #[arg(long = "address")]
    addresses: Vec<String>,
    /// Packet I/O: auto (AF_XDP, else AF_PACKET), af_xdp, af_packet.
    #[arg(long, default_value = "auto")]
    io: String,
    /// Watch this directory for delta streams (`keyplane update --deltas DIR/NAME`) and blobs; disables learning.
    #[arg(long)]
    deltas: Option<String>,
    /// Follow a `keyplane serve` table (http://HOST:PORT): its blobs and deltas update the FIB live; disables learning.
    #[arg(long, requires = "table", conflicts_with = "deltas")]
    controller: Option<String>,
    /// The table followed at --controller.
    #[arg(long, requires = "controller")]
    table: Option<String>,
    /// Serve Prometheus counters at http://ADDR:PORT/metrics.
    #[arg(long)]
    metrics: Option<String>,
    /// L2: what to do with a destination the FIB does not hold: flood or drop.
    #[arg(long, default_value = "flood")]
    unknown: String,
    /// Worker threads (each serves every port through its own socket).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// L2: turn learning off (the FIB then changes only by --deltas, SIGHUP or a new blob).
    #[arg(long)]
    no_learn: bool,
    /// L2: remove learned MACs not seen for this many seconds.
    #[arg(long, default_value_t = 300)]
    age_secs: u64,
}

fn usage(e: SwitchError) -> CliError {
    CliError::usage(&e.to_string())
}

/// Runs the switch until SIGINT / SIGTERM; prints the counters on exit.
pub fn run(a: &SwitchArgs) -> Result<u8, CliError> {
    let mut cfg = Config::new(a.ports.clone(), a.fib.as_deref().unwrap_or(""));
    cfg.controller = a.controller.clone();
    cfg.table = a.table.clone();
    cfg.mode = a.mode.parse::<Mode>().map_err(usage)?;
    cfg.next_hops = a.next_hops.as_ref().map(Into::into);
    for s in &a.addresses {
        cfg.addresses.push(s.parse().map_err(|_| CliError::usage(&format!("--address {s}: not an IP address")))?);
    }
    cfg.io = a.io.parse::<IoKind>().map_err(|e| CliError::usage(&format!("--io: {e}")))?;
    if cfg.io == IoKind::Pcap {
        return Err(CliError::usage("--io pcap: name pcap ports as --port pcap:IN:OUT instead"));
    }
    cfg.deltas = a.deltas.as_ref().map(Into::into);
    cfg.metrics = a.metrics.clone();
    cfg.unknown = a.unknown.parse().map_err(usage)?;
    cfg.workers = a.workers;
    cfg.learn = if a.no_learn { Some(false) } else { None };
    cfg.age = Duration::from_secs(a.age_secs.max(1));
    cfg.validate().map_err(usage)?;
    let stop =
        Shutdown::with_signals().map_err(|e| CliError::failed(&format!("cannot install signal handlers: {e}")))?;
    let running = keyplane_switch::start(&cfg, &stop).map_err(|e| match e {
        SwitchError::Io { path, source } => CliError::io(&path, source),
        SwitchError::Table { what, source } => CliError::lib(&what, source),
        SwitchError::Input { path, line, msg } => CliError::input(&path, line, &msg),
        e => CliError { code: 6, msg: e.to_string() },
    })?;
    eprintln!(
        "keyplane switch: {} port(s) on {}, {} mode, FIB {} ({}){}{}",
        a.ports.len(),
        running.io,
        a.mode,
        a.fib.clone().unwrap_or_else(|| format!(
            "table {} at {}",
            cfg.table.as_deref().unwrap_or(""),
            cfg.controller.as_deref().unwrap_or("")
        )),
        running.fib.load().table().name(),
        if cfg.learning() { ", learning" } else { "" },
        running.metrics_addr().map(|m| format!(", metrics on http://{m}/metrics")).unwrap_or_default()
    );
    while !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let fin = running.join().map_err(|e| CliError { code: 6, msg: e.to_string() })?;
    eprint!("{}", fin.summary());
    Ok(0)
}
