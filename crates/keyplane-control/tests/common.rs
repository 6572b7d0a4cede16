//! Shared test helpers: an in-process service on a free 127.0.0.1 port
//! over a temporary store directory (removed on drop).
#![allow(dead_code)]

use keyplane_control::server::{Running, ServeConfig, StoreConfig, start};
use keyplane_control::table::Retain;

/// A running service and its store directory.
pub struct TestServer {
    /// The service (None once stopped).
    pub running: Option<Running>,
    /// The store directory.
    pub dir: tempfile::TempDir,
    /// `http://127.0.0.1:port` of the gRPC endpoint.
    pub url: String,
}

impl TestServer {
    /// Starts a service over a new temporary store.
    pub async fn start(retain: Retain) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::start_in(dir, retain).await
    }

    /// Starts a service over the store in `dir` (e.g. one a stopped service left).
    pub async fn start_in(dir: tempfile::TempDir, retain: Retain) -> Self {
        let cfg = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            store: StoreConfig::Dir(dir.path().to_path_buf()),
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            tls: None,
            retain,
        };
        // An in-process restart: the stopped service's connection tasks may
        // still be draining and hold the store's LOCK for a moment (a real
        // restart is a new process, whose exit releases it at once).
        let t0 = std::time::Instant::now();
        let running = loop {
            match start(cfg.clone()).await {
                Err(e) if e.to_string().contains("LOCK file is held") && t0.elapsed().as_secs() < 20 => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                r => break r.expect("service starts"),
            }
        };
        let url = format!("http://{}", running.addr);
        Self { running: Some(running), dir, url }
    }

    /// Stops the service, keeping the store directory.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(r) = self.running.take() {
            r.stop().await.expect("clean stop");
        }
        self.dir
    }
}
