//! The metrics endpoint over real TCP: GET /metrics serves the render closure's text; other
//! paths, methods and oversized requests get errors; a silent client does not wedge it; stop()
//! closes the port.

use keyplane_net::metrics::MetricsServer;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn request(addr: std::net::SocketAddr, req: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serves_prometheus_text_and_refuses_the_rest() {
    let hits = Arc::new(AtomicU64::new(0));
    let h = hits.clone();
    let srv = MetricsServer::start("127.0.0.1:0", move || {
        let n = h.fetch_add(1, Ordering::Relaxed) + 1;
        format!("# TYPE kp_scrapes_total counter\nkp_scrapes_total {n}\n")
    })
    .unwrap();
    let addr = srv.local_addr();
    let r = request(addr, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.contains("Content-Type: text/plain; version=0.0.4\r\n"));
    assert!(r.ends_with("kp_scrapes_total 1\n"), "{r}");
    let body_len = "# TYPE kp_scrapes_total counter\nkp_scrapes_total 1\n".len();
    assert!(r.contains(&format!("Content-Length: {body_len}\r\n")));
    let r = request(addr, b"GET /metrics HTTP/1.0\r\n\r\n");
    assert!(r.ends_with("kp_scrapes_total 2\n"));
    assert!(request(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(request(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 20_000));
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(&big); // the server may close before reading it all
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 431"), "{out}");
    // A client that connects and says nothing is dropped after the request timeout.
    let _silent = TcpStream::connect(addr).unwrap();
    let r = request(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(r.ends_with("kp_scrapes_total 3\n"), "{r}");
    assert_eq!(hits.load(Ordering::Relaxed), 3, "the closure runs once per GET /metrics only");
    srv.stop();
    assert!(TcpStream::connect(addr).is_err(), "port closed after stop");
}
