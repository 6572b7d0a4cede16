//! `keyplane lb`: flag parsing for the layer-4 load balancer (the work is in
//! `keyplane-lb`). SIGHUP reloads the config file; SIGINT / SIGTERM stop.

use crate::CliError;
use clap::Args;
use keyplane_lb::{IoKind, Lb, Mode, Options};
use std::time::Duration;

/// Flags of `keyplane lb`.
#[derive(Args, Debug)]
pub struct LbArgs {
    /// The LB's one port (interface name); VIP packets arrive and leave here.
    #[arg(long)]
    port: String,
    /// TOML configuration ([[vip]] address/port/protocol/method, [[vip.backend]] address/weight); SIGHUP reloads it.
    #[arg(long)]
    config: String,
    /// Lookup engine: concury (stateless data plane) or maglev (table + connection tracking).
    #[arg(long, default_value = "concury")]
    mode: String,
    /// Packet I/O: auto (= af_packet for the LB), xdp (Concury in an in-kernel XDP program, af_packet for the rest), af_xdp (dedicated port: the kernel sees none of its frames), af_packet.
    #[arg(long, default_value = "auto")]
    io: String,
    /// Serve Prometheus metrics on ADDR:PORT.
    #[arg(long)]
    metrics: Option<String>,
}

/// Runs the LB until SIGINT / SIGTERM.
pub fn run(a: &LbArgs) -> Result<u8, CliError> {
    let mode = match a.mode.as_str() {
        "concury" => Mode::Concury,
        "maglev" => Mode::Maglev,
        m => return Err(CliError::usage(&format!("--mode {m}: use concury or maglev"))),
    };
    let (io, xdp) = match a.io.as_str() {
        "auto" => (IoKind::Auto, false),
        "xdp" => (IoKind::AfPacket, true),
        "af_xdp" => (IoKind::AfXdp, false),
        "af_packet" => (IoKind::AfPacket, false),
        m => return Err(CliError::usage(&format!("--io {m}: use auto, xdp, af_xdp or af_packet"))),
    };
    let metrics = match &a.metrics {
        Some(m) => Some(m.parse().map_err(|_| CliError::usage(&format!("--metrics {m}: give ADDR:PORT")))?),
        None => None,
    };
    let stop = keyplane_net::Shutdown::with_signals().map_err(|e| CliError { code: 6, msg: e.to_string() })?;
    let opts = Options { port: a.port.clone(), config: a.config.clone().into(), mode, io, metrics, xdp };
    let lb = Lb::start(opts).map_err(|e| match e {
        keyplane_lb::Error::Config(_) => CliError { code: 3, msg: e.to_string() },
        e => CliError { code: 6, msg: e.to_string() },
    })?;
    if let Some(m) = lb.metrics_addr() {
        eprintln!("keyplane lb: metrics on http://{m}/metrics");
    }
    eprintln!("keyplane lb: running on {} ({:?} mode); SIGHUP reloads {}", a.port, mode, a.config);
    while !stop.is_stopped() {
        if stop.take_reload() {
            match lb.reload() {
                Ok(()) => eprintln!("keyplane lb: reloaded {}", a.config),
                Err(e) => eprintln!("keyplane lb: reload refused, old config kept: {e}"),
            }
        }
        if !lb.running() {
            return Err(CliError { code: 6, msg: "a worker thread stopped".into() });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    lb.stop();
    Ok(0)
}
