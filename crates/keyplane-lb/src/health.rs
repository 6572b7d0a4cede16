//! Health checks run by the control side: TCP connect or HTTP GET, every
//! `interval_ms`, each with `timeout_ms`; `fall` consecutive failures take
//! an up backend down, `rise` consecutive successes bring it back. Backends
//! start up (a fresh LB serves at once). Checks of one round run in
//! parallel, one short-lived thread each.

use crate::config::CheckKind;
use crate::control::Target;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One check: `true` if the backend answered.
pub fn check(t: &Target) -> bool {
    let to = Duration::from_millis(t.health.timeout_ms);
    let addr = SocketAddr::new(t.addr, t.port);
    let Ok(mut s) = TcpStream::connect_timeout(&addr, to) else { return false };
    match t.health.kind {
        CheckKind::None | CheckKind::Tcp => true,
        CheckKind::Http => {
            let _ = s.set_read_timeout(Some(to));
            let _ = s.set_write_timeout(Some(to));
            let host = match t.addr {
                IpAddr::V4(a) => a.to_string(),
                IpAddr::V6(a) => format!("[{a}]"),
            };
            let req =
                format!("GET {} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: keyplane-lb-health\r\n\r\n", t.health.path);
            if s.write_all(req.as_bytes()).is_err() {
                return false;
            }
            let mut buf = [0u8; 64];
            let mut n = 0;
            let deadline = Instant::now() + to;
            while n < 12 && Instant::now() < deadline {
                match s.read(&mut buf[n..]) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k,
                }
            }
            // "HTTP/1.x 2xx" or "3xx".
            n >= 12 && buf.starts_with(b"HTTP/1.") && matches!(buf[9], b'2' | b'3')
        }
    }
}

/// Rise/fall state of one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Current verdict.
    pub up: bool,
    /// Consecutive results against the verdict.
    streak: u32,
    next: Instant,
}

/// The checker's state over all targets.
#[derive(Debug, Default)]
pub struct Checker {
    states: HashMap<(keyplane::lb::Vip, IpAddr), State>,
}

impl Checker {
    /// Runs every check that is due among `targets` (in parallel) and
    /// returns the transitions `(target, now up)`.
    pub fn round(&mut self, targets: &[Target], now: Instant) -> Vec<(Target, bool)> {
        self.states.retain(|k, _| targets.iter().any(|t| (t.vip, t.addr) == *k));
        let due: Vec<&Target> =
            targets.iter().filter(|t| self.states.get(&(t.vip, t.addr)).is_none_or(|s| s.next <= now)).collect();
        if due.is_empty() {
            return Vec::new();
        }
        let results: Vec<bool> = std::thread::scope(|sc| {
            let hs: Vec<_> = due.iter().map(|t| sc.spawn(move || check(t))).collect();
            hs.into_iter().map(|h| h.join().unwrap_or(false)).collect()
        });
        let mut out = Vec::new();
        for (t, ok) in due.into_iter().zip(results) {
            let next = now + Duration::from_millis(t.health.interval_ms);
            let s = self.states.entry((t.vip, t.addr)).or_insert(State { up: true, streak: 0, next });
            if let Some(up) = step(s, ok, t.health.rise, t.health.fall) {
                out.push((t.clone(), up));
            }
            s.next = next;
        }
        out
    }
}

/// One result into the rise/fall machine; `Some(up)` on a transition.
fn step(s: &mut State, ok: bool, rise: u32, fall: u32) -> Option<bool> {
    if ok == s.up {
        s.streak = 0;
        return None;
    }
    s.streak += 1;
    let need = if s.up { fall } else { rise };
    if s.streak >= need {
        s.up = ok;
        s.streak = 0;
        Some(ok)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Health;
    use std::net::TcpListener;

    #[test]
    fn rise_and_fall_need_consecutive_results() {
        let mut s = State { up: true, streak: 0, next: Instant::now() };
        assert_eq!(step(&mut s, false, 2, 3), None);
        assert_eq!(step(&mut s, false, 2, 3), None);
        assert_eq!(step(&mut s, true, 2, 3), None, "a success resets the fall streak");
        assert_eq!(step(&mut s, false, 2, 3), None);
        assert_eq!(step(&mut s, false, 2, 3), None);
        assert_eq!(step(&mut s, false, 2, 3), Some(false));
        assert_eq!(step(&mut s, true, 2, 3), None);
        assert_eq!(step(&mut s, true, 2, 3), Some(true));
    }

    #[test]
    fn tcp_and_http_checks_against_local_servers() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let srv = std::thread::spawn(move || {
            for (i, c) in l.incoming().take(3).enumerate() {
                let mut c = c.unwrap();
                let mut b = [0u8; 256];
                let _ = c.read(&mut b);
                let status = if i == 1 { "200 OK" } else { "503 Unavailable" };
                let _ = c.write_all(format!("HTTP/1.0 {status}\r\n\r\n").as_bytes());
            }
        });
        let mut t = Target {
            vip: keyplane::lb::Vip::new(IpAddr::from([198, 18, 100, 1]), 80, 6),
            addr: "127.0.0.1".parse().unwrap(),
            port,
            health: Health { kind: CheckKind::Tcp, timeout_ms: 1000, ..Health::default() },
        };
        assert!(check(&t), "tcp connect");
        t.health.kind = CheckKind::Http;
        assert!(check(&t), "HTTP 200");
        assert!(!check(&t), "HTTP 503");
        srv.join().unwrap();
        assert!(!check(&t), "nothing listening");
    }
}
