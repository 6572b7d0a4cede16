//! `keyplane lb` end to end (root; namespaces made and removed by the
//! test): the command serves a VIP, reloads its config on SIGHUP (a pool
//! change), refuses a bad config on SIGHUP and keeps serving, exposes
//! Prometheus metrics, and exits 0 on SIGTERM.

use keyplane_lb::testbed::{self, Testbed, VIP4, backend4};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn config(backend: usize) -> String {
    format!(
        "[lb]\nremove_grace_ms = 0\n[health]\nkind = \"tcp\"\ninterval_ms = 200\n[[vip]]\naddress = \"{VIP4}\"\nport = 80\nprotocol = \"tcp\"\nmethod = \"dsr\"\n[[vip.backend]]\naddress = \"{}\"\n",
        backend4(backend)
    )
}

fn fetch(tb: &Testbed) -> String {
    tb.in_client(0, || testbed::fetch_once(SocketAddr::from((VIP4, 80)), Duration::from_secs(3)))
        .unwrap()
        .unwrap_or_else(|e| format!("error: {e}"))
}

fn metrics(tb: &Testbed) -> String {
    tb.in_lb(|| {
        let mut s = TcpStream::connect("127.0.0.1:19180").ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    })
    .unwrap()
    .unwrap_or_default()
}

fn until(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn lb_command_serves_reloads_on_sighup_and_stops_on_sigterm() {
    if let Some(why) = keyplane_net::testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("lb-cli-{}", std::process::id()));
    let mut tb = Testbed::new("lbcli", 1, 2, &dir).expect("topology");
    let cfg = dir.join("lb.toml");
    std::fs::write(&cfg, config(1)).unwrap();
    let lb = tb.lb.clone();
    let id = tb
        .net
        .spawn(
            &lb,
            &[
                env!("CARGO_BIN_EXE_keyplane"),
                "lb",
                "--port",
                "eth0",
                "--config",
                &cfg.display().to_string(),
                "--metrics",
                "127.0.0.1:19180",
            ],
        )
        .unwrap();
    let pid = tb.net.child(id).unwrap().id() as i32;
    until("the LB to serve b1", || fetch(&tb) == "b1");
    // SIGHUP with a new pool: b2 only.
    std::fs::write(&cfg, config(2)).unwrap();
    // SAFETY: signalling the child this test spawned.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    until("the reload to take b1 out", || fetch(&tb) == "b2");
    assert!(metrics(&tb).contains("keyplane_lb_reloads_total 1"));
    // SIGHUP with a bad file: refused, the LB keeps serving b2.
    std::fs::write(&cfg, config(2).replace("weight", "x").replace("[lb]", "[lb]\nbogus = 1")).unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    until("the refused reload to be counted", || metrics(&tb).contains("keyplane_lb_reload_failures_total 1"));
    assert_eq!(fetch(&tb), "b2");
    let m = metrics(&tb);
    assert!(
        m.contains(&format!("keyplane_lb_backend_packets_total{{vip=\"{VIP4}:80/tcp\",backend=\"{}\"}}", backend4(2))),
        "{m}"
    );
    // SIGTERM: clean exit.
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let child = tb.net.child(id).unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "keyplane lb did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    tb.stop_backend(1);
}
