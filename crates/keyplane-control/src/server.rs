//! Starting a service: `keyplane serve` and tests call [`start`].

use crate::error::{ControlError, Result};
use crate::metrics::ServiceMetrics;
use crate::pb::control_server::ControlServer;
use crate::service::Service;
use crate::store::Store;
use crate::table::Retain;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Largest message the service accepts or sends (snapshots of big tables).
pub const MAX_MESSAGE: usize = 1 << 30;

/// Where the tables live.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// The embedded log store in this directory.
    Dir(PathBuf),
    /// etcd: endpoints and key prefix (see [`crate::etcd`]).
    Etcd {
        /// Endpoints (`http://host:port`).
        endpoints: Vec<String>,
        /// Key prefix, e.g. `/keyplane/`.
        prefix: String,
    },
}

/// `keyplane serve` options.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// gRPC listen address (port 0: any free port).
    pub listen: SocketAddr,
    /// The store.
    pub store: StoreConfig,
    /// Prometheus text exposition address.
    pub metrics: Option<SocketAddr>,
    /// TLS certificate and key (PEM files).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Delta-log retention per stream.
    pub retain: Retain,
}

/// A running service.
#[derive(Debug)]
pub struct Running {
    /// The gRPC address bound.
    pub addr: SocketAddr,
    /// The metrics address bound.
    pub metrics: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Running {
    /// Stops serving: open calls get up to one second to finish (open
    /// subscriptions never do), then the server task is aborted.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match tokio::time::timeout(std::time::Duration::from_secs(1), &mut self.task).await {
            Ok(r) => r.map_err(|e| ControlError::Config(format!("server task failed: {e}")))?,
            Err(_) => {
                self.task.abort();
                Ok(())
            }
        }
    }

    /// Waits until the server ends (an error, or [`Running::stop`] elsewhere).
    pub async fn wait(mut self) -> Result<()> {
        (&mut self.task).await.map_err(|e| ControlError::Config(format!("server task failed: {e}")))?
    }
}

/// Opens the store, rebuilds the tables and starts serving in the background.
pub async fn start(cfg: ServeConfig) -> Result<Running> {
    let mut reg = Registry::default();
    let metrics = ServiceMetrics::register(&mut reg);
    let listener = tokio::net::TcpListener::bind(cfg.listen).await?;
    let addr = listener.local_addr()?;
    let svc = match &cfg.store {
        StoreConfig::Dir(d) => {
            let store = Store::open(d)?;
            tokio::task::block_in_place(|| Service::open(store, metrics, cfg.retain))?
        }
        StoreConfig::Etcd { endpoints, prefix } => {
            let ip = if addr.ip().is_unspecified() { std::net::Ipv4Addr::LOCALHOST.into() } else { addr.ip() };
            let url = format!("http://{}", SocketAddr::new(ip, addr.port()));
            let etcd = crate::etcd::EtcdStore::connect(endpoints, prefix, &url).await?;
            Service::open_etcd(etcd, metrics, cfg.retain).await?
        }
    };
    let reg = Arc::new(Mutex::new(reg));
    let metrics = match cfg.metrics {
        Some(a) => Some(crate::metrics::spawn(a, reg).await?),
        None => None,
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some((cert, key)) = &cfg.tls {
        let identity = tonic::transport::Identity::from_pem(std::fs::read(cert)?, std::fs::read(key)?);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(|e| ControlError::Config(format!("TLS: {e}")))?;
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let server = builder.add_service(
        ControlServer::new(svc).max_decoding_message_size(MAX_MESSAGE).max_encoding_message_size(MAX_MESSAGE),
    );
    // Small messages (acks, deltas) must not wait for the peer's delayed ACK
    // (Nagle: up to 40 ms): no-delay on every accepted connection.
    use tokio_stream::StreamExt;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|s| {
        if let Ok(s) = &s {
            let _ = s.set_nodelay(true);
        }
        s
    });
    let task = tokio::spawn(async move {
        server
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            })
            .await
            .map_err(|e| ControlError::Config(format!("gRPC server: {e}")))
    });
    Ok(Running { addr, metrics, stop: Some(stop), task })
}
