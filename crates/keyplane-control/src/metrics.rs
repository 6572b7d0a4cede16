//! Prometheus metrics (text exposition) for the service and for subscribers.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Label: table name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabel {
    /// Table name.
    pub table: String,
}

/// Labels: table and subscriber.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SubLabel {
    /// Table name (and view, as `table/view`).
    pub table: String,
    /// Subscriber name.
    pub subscriber: String,
}

/// Label: a phase of the writer's group commit.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    /// `apply` (validate, parse keys, control-form updates, deltas),
    /// `store` (durable commit, fsync included), `publish` (delta log,
    /// subscriber wake-up, replies).
    pub phase: String,
}

/// Declares a metrics struct and its `register`: one line per metric
/// (field, Prometheus name, type, constructor); the doc line is both the
/// field's documentation and the metric's help text.
macro_rules! metrics {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $( #[doc = $help:literal] $field:ident : $ty:ty = $init:expr => $metric:literal, )*
        }
    ) => {
        $(#[$attr])*
        pub struct $name {
            $( #[doc = $help] pub $field: $ty, )*
        }

        impl $name {
            /// Registers every metric in `reg`.
            pub fn register(reg: &mut Registry) -> Arc<Self> {
                let m = Self { $( $field: $init, )* };
                $( reg.register($metric, $help.trim(), m.$field.clone()); )*
                Arc::new(m)
            }
        }
    };
}

fn histogram(start: f64, factor: f64, n: u16) -> Histogram {
    Histogram::new(exponential_buckets(start, factor, n))
}

metrics! {
    /// The service's metrics. Writes/s is `rate(keyplane_updates_total[1m])`.
    #[derive(Debug)]
    pub struct ServiceMetrics {
        /// Updates applied and acknowledged.
        updates: Counter = Counter::default() => "keyplane_updates",
        /// Write batches acknowledged.
        batches: Counter = Counter::default() => "keyplane_write_batches",
        /// Write batches refused (bad entry, unknown table, store failure).
        write_errors: Counter = Counter::default() => "keyplane_write_errors",
        /// Updates per acknowledged Write batch.
        batch_size: Histogram = histogram(1.0, 4.0, 9) => "keyplane_write_batch_size",
        /// Write batches per group commit.
        group_size: Histogram = histogram(1.0, 2.0, 11) => "keyplane_group_commit_batches",
        /// Seconds per store commit (fsync or etcd transaction included).
        store_commit_seconds: Histogram = histogram(0.000_05, 2.0, 16) => "keyplane_store_commit_seconds",
        /// Seconds per writer phase (apply, store, publish) per group commit.
        writer_phase_seconds: Family<PhaseLabel, Histogram> =
            Family::new_with_constructor(|| histogram(0.000_005, 2.0, 20)) => "keyplane_writer_phase_seconds",
        /// Keys per table.
        table_keys: Family<TableLabel, Gauge> = Family::default() => "keyplane_table_keys",
        /// Lookup-form bytes per table.
        table_memory_bytes: Family<TableLabel, Gauge> = Family::default() => "keyplane_table_memory_bytes",
        /// Sequence number per table.
        table_sequence: Family<TableLabel, Gauge> = Family::default() => "keyplane_table_sequence",
        /// Delta-log messages per table.
        table_log_length: Family<TableLabel, Gauge> = Family::default() => "keyplane_table_log_length",
        /// Connected subscribers per table.
        table_subscribers: Family<TableLabel, Gauge> = Family::default() => "keyplane_table_subscribers",
        /// Control-form rebuilds per table (start-up, refused updates, follower changes).
        table_rebuilds: Family<TableLabel, Counter> = Family::default() => "keyplane_table_rebuilds",
        /// Sequence numbers a subscriber is behind.
        subscriber_lag: Family<SubLabel, Gauge> = Family::default() => "keyplane_subscriber_lag",
        /// Whole lookup blobs sent to subscribers.
        snapshots_sent: Counter = Counter::default() => "keyplane_snapshots_sent",
    }
}

metrics! {
    /// A subscriber's metrics.
    #[derive(Debug, Default)]
    pub struct SubscriberMetrics {
        /// Sequence number of the lookup form held.
        applied_sequence: Gauge = Gauge::default() => "keyplane_follow_applied_sequence",
        /// Deltas and patches applied.
        deltas: Counter = Counter::default() => "keyplane_follow_deltas",
        /// Whole blobs loaded (first sync and resyncs).
        snapshots: Counter = Counter::default() => "keyplane_follow_snapshots",
        /// Connections made after the first.
        reconnects: Counter = Counter::default() => "keyplane_follow_reconnects",
        /// Messages refused as out of order (followed by a resync).
        refused: Counter = Counter::default() => "keyplane_follow_refused",
    }
}

/// Text exposition of a registry.
pub fn render(reg: &Registry) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut s, reg);
    s
}

/// Serves `GET /metrics` (any path) on `addr` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, reg: Arc<std::sync::Mutex<Registry>>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else { continue };
        let reg = reg.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            let mut got = 0;
            // Read the request head (bounded); the answer is the same for any path.
            while got < buf.len() {
                match tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf[got..])).await {
                    Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
                    Ok(Ok(n)) => {
                        got += n;
                        if buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                }
            }
            let body = match reg.lock() {
                Ok(r) => render(&r),
                Err(_) => String::new(),
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
        });
    }
}

/// Binds `addr` and serves metrics in a background task.
pub async fn spawn(addr: SocketAddr, reg: Arc<std::sync::Mutex<Registry>>) -> std::io::Result<SocketAddr> {
    let l = tokio::net::TcpListener::bind(addr).await?;
    let local = l.local_addr()?;
    tokio::spawn(serve(l, reg));
    Ok(local)
}
