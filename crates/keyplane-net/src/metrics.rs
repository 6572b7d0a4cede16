//! A tiny Prometheus text endpoint: one thread, `std::net`, `GET /metrics` answered with whatever
//! the caller's render closure returns. Requests are bounded (8 KiB of headers, 2 s to send them);
//! anything else gets 404 / 405 / 431. [`MetricsServer::stop`] (or drop) stops the thread.
//!
//! ```
//! use keyplane_net::metrics::MetricsServer;
//! use std::io::{Read, Write};
//! let srv = MetricsServer::start("127.0.0.1:0", || "kp_rx_frames_total 42\n".to_string()).unwrap();
//! let mut s = std::net::TcpStream::connect(srv.local_addr()).unwrap();
//! s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
//! let mut body = String::new();
//! s.read_to_string(&mut body).unwrap();
//! assert!(body.starts_with("HTTP/1.1 200") && body.ends_with("kp_rx_frames_total 42\n"));
//! srv.stop();
//! ```

use crate::{Error, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most bytes of request head read before answering 431.
pub const MAX_REQUEST: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A running metrics endpoint. Dropping it stops the thread.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listen on `addr` (`"0.0.0.0:9100"`, `"[::1]:0"`, ...) and serve `render()` on `/metrics`.
    pub fn start<F>(addr: impl ToSocketAddrs + std::fmt::Debug, render: F) -> Result<Self>
    where
        F: Fn() -> String + Send + 'static,
    {
        let what = format!("listen on {addr:?} for metrics");
        let listener = TcpListener::bind(&addr).map_err(|e| Error::Sys { what: what.clone(), source: e })?;
        listener.set_nonblocking(true).map_err(|e| Error::Sys { what: what.clone(), source: e })?;
        let local = listener.local_addr().map_err(|e| Error::Sys { what, source: e })?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kp-metrics".into())
            .spawn(move || serve(listener, s2, render))
            .map_err(|e| Error::Sys { what: "spawn metrics thread".into(), source: e })?;
        Ok(MetricsServer { addr: local, stop, thread: Some(thread) })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop serving and join the thread (at most ~50 ms plus one request in progress).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn serve(listener: TcpListener, stop: Arc<AtomicBool>, render: impl Fn() -> String) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                if let Err(e) = handle(s, &render) {
                    log::debug!("metrics request failed: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                log::warn!("metrics accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn handle(mut s: TcpStream, render: &impl Fn() -> String) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = [0u8; MAX_REQUEST];
    let mut n = 0;
    let head_end = loop {
        if let Some(p) = buf[..n].windows(4).position(|w| w == b"\r\n\r\n") {
            break Some(p);
        }
        if n == buf.len() {
            break None;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf[n..]) {
            Ok(0) => return Ok(()),
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    let Some(end) = head_end else {
        return respond(&mut s, "431 Request Header Fields Too Large", "request too large\n");
    };
    let line = buf[..end].split(|&c| c == b'\r').next().unwrap_or(&[]);
    let mut parts = line.split(|&c| c == b' ');
    let (method, path) = (parts.next().unwrap_or(&[]), parts.next().unwrap_or(&[]));
    if method != b"GET" && method != b"HEAD" {
        return respond(&mut s, "405 Method Not Allowed", "only GET /metrics\n");
    }
    if path != b"/metrics" && !path.starts_with(b"/metrics?") {
        return respond(&mut s, "404 Not Found", "try /metrics\n");
    }
    let body = render();
    if method == b"HEAD" {
        let h = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        return s.write_all(h.as_bytes());
    }
    respond_typed(&mut s, "200 OK", "text/plain; version=0.0.4", &body)
}

fn respond(s: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    respond_typed(s, status, "text/plain", body)
}

fn respond_typed(s: &mut TcpStream, status: &str, ctype: &str, body: &str) -> std::io::Result<()> {
    let h = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(h.as_bytes())?;
    s.write_all(body.as_bytes())?;
    s.flush()
}
