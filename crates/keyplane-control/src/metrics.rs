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

/// The service's metrics. Writes/s is `rate(keyplane_updates_total[1m])`.
#[derive(Debug)]
pub struct ServiceMetrics {
    /// Updates applied (acknowledged).
    pub updates: Counter,
    /// Write batches acknowledged.
    pub batches: Counter,
    /// Write batches refused (bad entry, unknown table, store failure).
    pub write_errors: Counter,
    /// Updates per acknowledged batch.
    pub batch_size: Histogram,
    /// Write batches per group commit.
    pub group_size: Histogram,
    /// Seconds per store commit (fsync included).
    pub store_commit_seconds: Histogram,
    /// Seconds per writer phase per group commit.
    pub writer_phase_seconds: Family<PhaseLabel, Histogram>,
    /// Per table: keys.
    pub table_keys: Family<TableLabel, Gauge>,
    /// Per table: lookup-form bytes.
    pub table_memory_bytes: Family<TableLabel, Gauge>,
    /// Per table: sequence number.
    pub table_sequence: Family<TableLabel, Gauge>,
    /// Per table: messages in the delta log.
    pub table_log_length: Family<TableLabel, Gauge>,
    /// Per table: connected subscribers.
    pub table_subscribers: Family<TableLabel, Gauge>,
    /// Per table: control-form rebuilds from the store.
    pub table_rebuilds: Family<TableLabel, Counter>,
    /// Per subscriber: sequence numbers not yet sent.
    pub subscriber_lag: Family<SubLabel, Gauge>,
    /// Snapshots (whole blobs) sent to subscribers.
    pub snapshots_sent: Counter,
}

impl ServiceMetrics {
    /// Registers every metric in `reg`.
    pub fn register(reg: &mut Registry) -> Arc<Self> {
        let m = Self {
            updates: Counter::default(),
            batches: Counter::default(),
            write_errors: Counter::default(),
            batch_size: Histogram::new(exponential_buckets(1.0, 4.0, 9)),
            group_size: Histogram::new(exponential_buckets(1.0, 2.0, 11)),
            store_commit_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            writer_phase_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_005, 2.0, 20))
            }),
            table_keys: Family::default(),
            table_memory_bytes: Family::default(),
            table_sequence: Family::default(),
            table_log_length: Family::default(),
            table_subscribers: Family::default(),
            table_rebuilds: Family::default(),
            subscriber_lag: Family::default(),
            snapshots_sent: Counter::default(),
        };
        reg.register("keyplane_updates", "Updates applied and acknowledged", m.updates.clone());
        reg.register("keyplane_write_batches", "Write batches acknowledged", m.batches.clone());
        reg.register("keyplane_write_errors", "Write batches refused", m.write_errors.clone());
        reg.register("keyplane_write_batch_size", "Updates per acknowledged Write batch", m.batch_size.clone());
        reg.register("keyplane_group_commit_batches", "Write batches per store commit", m.group_size.clone());
        reg.register(
            "keyplane_store_commit_seconds",
            "Store commit latency (fsync included)",
            m.store_commit_seconds.clone(),
        );
        reg.register(
            "keyplane_writer_phase_seconds",
            "Seconds per writer phase (apply, store, publish) per group commit",
            m.writer_phase_seconds.clone(),
        );
        reg.register("keyplane_table_keys", "Keys per table", m.table_keys.clone());
        reg.register("keyplane_table_memory_bytes", "Lookup-form bytes per table", m.table_memory_bytes.clone());
        reg.register("keyplane_table_sequence", "Sequence number per table", m.table_sequence.clone());
        reg.register("keyplane_table_log_length", "Delta-log messages per table", m.table_log_length.clone());
        reg.register("keyplane_table_subscribers", "Connected subscribers per table", m.table_subscribers.clone());
        reg.register(
            "keyplane_table_rebuilds",
            "Control-form rebuilds from the store per table",
            m.table_rebuilds.clone(),
        );
        reg.register("keyplane_subscriber_lag", "Sequence numbers a subscriber is behind", m.subscriber_lag.clone());
        reg.register("keyplane_snapshots_sent", "Whole lookup blobs sent to subscribers", m.snapshots_sent.clone());
        Arc::new(m)
    }
}

/// A subscriber's metrics.
#[derive(Debug, Default)]
pub struct SubscriberMetrics {
    /// Sequence number of the lookup form held.
    pub applied_sequence: Gauge,
    /// Deltas and patches applied.
    pub deltas: Counter,
    /// Whole blobs loaded (first sync and resyncs).
    pub snapshots: Counter,
    /// Connections made after the first.
    pub reconnects: Counter,
    /// Messages refused as out of order (followed by a resync).
    pub refused: Counter,
}

impl SubscriberMetrics {
    /// Registers every metric in `reg`.
    pub fn register(reg: &mut Registry) -> Arc<Self> {
        let m = Self::default();
        reg.register(
            "keyplane_follow_applied_sequence",
            "Sequence number of the lookup form held",
            m.applied_sequence.clone(),
        );
        reg.register("keyplane_follow_deltas", "Deltas and patches applied", m.deltas.clone());
        reg.register("keyplane_follow_snapshots", "Whole blobs loaded", m.snapshots.clone());
        reg.register("keyplane_follow_reconnects", "Reconnections", m.reconnects.clone());
        reg.register("keyplane_follow_refused", "Messages refused as out of order", m.refused.clone());
        Arc::new(m)
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
