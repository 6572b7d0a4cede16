//! `keyplane serve`, `keyplane ctl` and `keyplane follow`: flag parsing
//! only; the work is in keyplane-control.

use crate::CliError;
use crate::input::{self, Format, Sep};
use clap::{Args, Subcommand};
use keyplane_any::KeyFormat;
use keyplane_control::client::{self, delete, insert, modify};
use keyplane_control::follow::{Follower, Subscriber};
use keyplane_control::keys::{self, raw_key};
use keyplane_control::pb;
use keyplane_control::server::{ServeConfig, StoreConfig};
use keyplane_control::table::Retain;
use std::io::Write;
use std::time::Duration;

/// `keyplane serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// gRPC listen address (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:7700")]
    listen: String,
    /// Directory of the embedded store (created if missing).
    #[arg(long, required_unless_present = "etcd")]
    store: Option<String>,
    /// etcd endpoints (URL[,URL]) instead of the embedded store.
    #[arg(long)]
    etcd: Option<String>,
    /// Prometheus metrics address (text exposition on any path).
    #[arg(long)]
    metrics: Option<String>,
    /// TLS certificate (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<String>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<String>,
    /// Deltas kept per table before the log is compacted (older subscribers get a blob).
    #[arg(long, default_value_t = 100_000)]
    log_retain: usize,
    /// Bytes of deltas kept per table before compaction.
    #[arg(long, default_value_t = 64 << 20)]
    log_bytes: usize,
}

/// `keyplane ctl`.
#[derive(Args, Debug, Clone)]
pub struct CtlArgs {
    /// The service (http://HOST:PORT or HOST:PORT).
    #[arg(long, default_value = "http://127.0.0.1:7700")]
    server: String,
    #[command(subcommand)]
    cmd: CtlCommand,
}

/// `keyplane ctl` sub-commands.
#[derive(Subcommand, Debug, Clone)]
pub enum CtlCommand {
    /// Create a table.
    Create {
        /// Table name.
        name: String,
        /// Structure (see `keyplane structures`).
        #[arg(short, long, default_value = "othello")]
        structure: String,
        /// Value bits.
        #[arg(short = 'l', long)]
        value_bits: u32,
        /// Structure option NAME=VALUE (repeatable).
        #[arg(short = 'O', long = "opt")]
        opt: Vec<String>,
        /// Key format: text, hex, u64, ipv4, ipv6, mac, name.
        #[arg(long, default_value = "text")]
        key_format: String,
        /// Network-wide table over this topology file (docs/control.md).
        #[arg(long)]
        topology: Option<String>,
    },
    /// Write entries from a file (`KEY<sep>VALUE` lines; with --delete one key a line).
    Write {
        /// Table name.
        name: String,
        /// Input file (`-` for stdin).
        #[arg(short, long)]
        input: String,
        /// Key format of the file (default: the table's).
        #[arg(long)]
        key_format: Option<String>,
        /// Text separator: auto, csv, tsv, ws.
        #[arg(long, default_value = "auto")]
        format: String,
        /// Delete the listed keys.
        #[arg(long)]
        delete: bool,
    },
    /// Print entries as KEY<TAB>VALUE (all, or --key K ...).
    Read {
        /// Table name.
        name: String,
        /// Keys to read (repeatable); none: every entry.
        #[arg(long)]
        key: Vec<String>,
    },
    /// Describe a table.
    Describe {
        /// Table name.
        name: String,
    },
    /// List the tables.
    List,
    /// Drop a table.
    Drop {
        /// Table name.
        name: String,
    },
    /// Set a link of a network-wide table up or down.
    Link {
        /// Table name.
        name: String,
        /// One end (SWITCH:PORT).
        a: String,
        /// Other end (SWITCH:PORT).
        b: String,
        /// `up` or `down`.
        state: String,
    },
}

/// `keyplane follow`.
#[derive(Args, Debug, Clone)]
pub struct FollowArgs {
    /// The service (http://HOST:PORT).
    #[arg(long)]
    controller: String,
    /// Table to follow.
    #[arg(long)]
    table: String,
    /// Switch view of a network-wide table.
    #[arg(long)]
    view: Option<String>,
    /// Blob file kept current (written atomically when the stream goes idle).
    #[arg(long)]
    out: String,
    /// Prometheus metrics address.
    #[arg(long)]
    metrics: Option<String>,
    /// Exit once this sequence number is applied and written.
    #[arg(long)]
    until_sequence: Option<u64>,
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError { code: 6, msg: format!("cannot start the async runtime: {e}") })
}

fn ctl_err(e: keyplane_control::ControlError) -> CliError {
    use keyplane_control::ControlError as E;
    let code = match &e {
        E::Connect { .. } | E::Io(_) => 6,
        E::Config(_) | E::Topology(_) => 2,
        _ => 7,
    };
    CliError { code, msg: e.to_string() }
}

fn status_err(s: tonic::Status) -> CliError {
    ctl_err(keyplane_control::ControlError::Status(s))
}

fn addr(s: &str, flag: &str) -> Result<std::net::SocketAddr, CliError> {
    use std::net::ToSocketAddrs;
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| CliError::usage(&format!("{flag} {s}: expected HOST:PORT")))
}

/// Runs `keyplane serve` until Ctrl-C / SIGTERM.
pub fn serve(a: &ServeArgs) -> Result<u8, CliError> {
    let store = match (&a.etcd, &a.store) {
        (Some(urls), _) => {
            let endpoints: Vec<String> = urls
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(|u| if u.contains("://") { u.to_string() } else { format!("http://{u}") })
                .collect();
            if endpoints.is_empty() {
                return Err(CliError::usage("--etcd URL[,URL]: no endpoint given"));
            }
            StoreConfig::Etcd { endpoints, prefix: "/keyplane/".into() }
        }
        (None, Some(dir)) => StoreConfig::Dir(dir.into()),
        (None, None) => return Err(CliError::usage("--store DIR or --etcd URL[,URL] is required")),
    };
    let cfg = ServeConfig {
        listen: addr(&a.listen, "--listen")?,
        store,
        metrics: a.metrics.as_deref().map(|m| addr(m, "--metrics")).transpose()?,
        tls: a.tls_cert.clone().zip(a.tls_key.clone()).map(|(c, k)| (c.into(), k.into())),
        retain: Retain { messages: a.log_retain, bytes: a.log_bytes },
    };
    runtime()?.block_on(async {
        let running = keyplane_control::server::start(cfg).await.map_err(ctl_err)?;
        let mut line = format!("keyplane serve: listening on {}", running.addr);
        if let Some(m) = running.metrics {
            line.push_str(&format!(" metrics on {m}"));
        }
        println!("{line}");
        let _ = std::io::stdout().flush();
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| CliError { code: 6, msg: format!("signal handler: {e}") })?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        running.stop().await.map_err(ctl_err)?;
        Ok(0)
    })
}

fn key_format(s: &str) -> Result<KeyFormat, CliError> {
    KeyFormat::from_name(s).ok_or_else(|| CliError::usage(&format!("--key-format {s}: unknown key format")))
}

/// Runs `keyplane ctl`.
pub fn ctl(a: &CtlArgs) -> Result<u8, CliError> {
    runtime()?.block_on(async {
        let mut c = client::connect(&a.server).await.map_err(ctl_err)?;
        match &a.cmd {
            CtlCommand::Create { name, structure, value_bits, opt, key_format: kf, topology } => {
                let mut options = std::collections::HashMap::new();
                for o in opt {
                    for (k, v) in keyplane_any::Opts::parse(o).map_err(|e| CliError::lib("", e))?.iter() {
                        options.insert(k.to_string(), v.to_string());
                    }
                }
                let topology = match topology {
                    Some(p) => std::fs::read_to_string(p).map_err(|e| CliError::io(p, e))?,
                    None => String::new(),
                };
                let info = c
                    .create_table(pb::CreateTableRequest {
                        name: name.clone(),
                        structure: structure.clone(),
                        value_bits: *value_bits,
                        options,
                        key_format: keys::to_pb(key_format(kf)?) as i32,
                        topology,
                    })
                    .await
                    .map_err(status_err)?
                    .into_inner();
                print_info(&info);
            }
            CtlCommand::Write { name, input: path, key_format: kf, format, delete: del } => {
                let info = c
                    .describe_table(pb::DescribeTableRequest { name: name.clone() })
                    .await
                    .map_err(status_err)?
                    .into_inner();
                let kf = match kf {
                    Some(k) => key_format(k)?,
                    None => keys::from_pb(info.key_format).unwrap_or_default(),
                };
                let sep = Sep::from_format(format)
                    .ok_or_else(|| CliError::usage("--format: expected auto, csv, tsv or ws"))?;
                let fmt = Format { sep, key: kf, header: false, key_width: None, value_bytes: 8 };
                let updates = if *del {
                    let mut ks = Vec::new();
                    let bad = input::read_keys(path, &fmt, |_, k| {
                        ks.push(delete(raw_key(k.to_vec())));
                        Ok(())
                    })?;
                    // Nothing is deleted when a line did not parse.
                    crate::warn::bad_lines(&bad)?;
                    ks
                } else {
                    let items = input::read_items(path, &fmt, info.value_bits)?;
                    // INSERT new keys, MODIFY present ones.
                    let (present, _) =
                        client::read_all(&mut c, name, items.iter().map(|(k, _)| raw_key(k.clone())).collect())
                            .await
                            .map_err(ctl_err)?;
                    let present: std::collections::HashSet<Vec<u8>> = present.into_iter().map(|(k, _)| k).collect();
                    let mut seen = std::collections::HashSet::new();
                    items
                        .into_iter()
                        .map(|(k, v)| {
                            let known = present.contains(&k) || !seen.insert(k.clone());
                            if known { modify(raw_key(k), v) } else { insert(raw_key(k), v) }
                        })
                        .collect()
                };
                let n = updates.len();
                let r =
                    c.write(pb::WriteRequest { table: name.clone(), updates }).await.map_err(status_err)?.into_inner();
                println!("{n} updates applied; sequence {}", r.sequence);
            }
            CtlCommand::Read { name, key } => {
                let info = c
                    .describe_table(pb::DescribeTableRequest { name: name.clone() })
                    .await
                    .map_err(status_err)?
                    .into_inner();
                let kf = keys::from_pb(info.key_format).unwrap_or_default();
                let ks = key.iter().map(|k| keys::text_key(k)).collect();
                let (entries, _) = client::read_all(&mut c, name, ks).await.map_err(ctl_err)?;
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                for (k, v) in entries {
                    let _ = writeln!(out, "{}\t{v}", keys::render(kf, &k));
                }
            }
            CtlCommand::Describe { name } => {
                let info = c
                    .describe_table(pb::DescribeTableRequest { name: name.clone() })
                    .await
                    .map_err(status_err)?
                    .into_inner();
                print_info(&info);
            }
            CtlCommand::List => {
                let l = c.list_tables(pb::ListTablesRequest {}).await.map_err(status_err)?.into_inner();
                for t in l.tables {
                    println!("{}\t{}\tn={}\tsequence={}", t.name, t.structure, t.n, t.sequence);
                }
            }
            CtlCommand::Drop { name } => {
                c.drop_table(pb::DropTableRequest { name: name.clone() }).await.map_err(status_err)?;
                println!("dropped {name}");
            }
            CtlCommand::Link { name, a: ea, b: eb, state } => {
                let up = match state.as_str() {
                    "up" => true,
                    "down" => false,
                    s => return Err(CliError::usage(&format!("link state {s:?}: expected up or down"))),
                };
                let r = c
                    .set_link(pb::SetLinkRequest { table: name.clone(), a: ea.clone(), b: eb.clone(), up })
                    .await
                    .map_err(status_err)?
                    .into_inner();
                println!("link {ea} {eb} {state}; sequence {}", r.sequence);
            }
        }
        Ok(0)
    })
}

fn print_info(t: &pb::TableInfo) {
    let kf = keys::from_pb(t.key_format).unwrap_or_default();
    println!("name\t{}", t.name);
    println!("structure\t{}", t.structure);
    println!("value_bits\t{}", t.value_bits);
    let mut opts: Vec<_> = t.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
    opts.sort();
    println!("options\t{}", opts.join(","));
    println!("key_format\t{}", kf.name());
    println!("n\t{}", t.n);
    println!("memory_bytes\t{}", t.memory_bytes);
    println!("control_memory_bytes\t{}", t.control_memory_bytes);
    println!("sequence\t{}", t.sequence);
    println!("epoch\t{:#x}", t.epoch);
    println!("log_first_sequence\t{}", t.log_first_sequence);
    println!("log_length\t{}", t.log_length);
    println!("subscribers\t{}", t.subscribers);
    if !t.views.is_empty() {
        println!("views\t{}", t.views.join(","));
    }
}

/// Runs `keyplane follow`.
pub fn follow(a: &FollowArgs) -> Result<u8, CliError> {
    runtime()?.block_on(async {
        let mut reg = prometheus_client::registry::Registry::default();
        let m = keyplane_control::metrics::SubscriberMetrics::register(&mut reg);
        if let Some(ma) = &a.metrics {
            let bound = keyplane_control::metrics::spawn(
                addr(ma, "--metrics")?,
                std::sync::Arc::new(std::sync::Mutex::new(reg)),
            )
            .await
            .map_err(|e| CliError { code: 6, msg: format!("--metrics: {e}") })?;
            eprintln!("keyplane follow: metrics on {bound}");
        }
        let mut sub = Subscriber::new(&a.controller, &a.table).metrics(m).name(&format!("follow:{}", a.out));
        if let Some(v) = &a.view {
            sub = sub.view(v);
        }
        let mut f = Follower::new(sub);
        let h = f.handle();
        let mut dirty = false;
        let mut written = None;
        loop {
            match tokio::time::timeout(Duration::from_millis(if dirty { 20 } else { 3_600_000 }), f.step()).await {
                Ok(r) => {
                    r.map_err(ctl_err)?;
                    dirty = true;
                }
                Err(_) => {
                    if let Some(t) = h.current() {
                        let tmp = format!("{}.tmp{}", a.out, std::process::id());
                        std::fs::write(&tmp, t.to_bytes()).map_err(|e| CliError::io(&a.out, e))?;
                        std::fs::rename(&tmp, &a.out).map_err(|e| CliError::io(&a.out, e))?;
                        written = Some(f.subscriber().applied_sequence());
                        dirty = false;
                    }
                }
            }
            if let (Some(u), Some(w)) = (a.until_sequence, written)
                && w >= u
                && !dirty
            {
                println!("keyplane follow: {} at sequence {w}", a.out);
                return Ok(0);
            }
        }
    })
}
