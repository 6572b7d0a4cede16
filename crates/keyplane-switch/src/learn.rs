//! Learning through the control side (Concise §V-C, thesis §3.3.1): the data
//! plane never stores keys. A worker reports a source MAC the FIB does not
//! place on the ingress port over a bounded channel, rate-limited by a token
//! bucket and de-duplicated by a small table of recent report hashes; the
//! control side ([`Learner`]) inserts MAC → ingress port into its control
//! form and applies the resulting delta to the running FIB. Known sources
//! are re-reported at most once per refresh interval so the control side
//! can age out MACs not seen for [`LearnConfig::age`].

use crate::counters::Events;
use crate::fib::{Fib, FibCell};
use crate::packet::Mac;
use keyplane_any::AnyControl;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

/// One source-MAC report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// The source MAC.
    pub mac: Mac,
    /// The port it was seen on.
    pub port: u16,
}

/// Learning parameters.
#[derive(Debug, Clone, Copy)]
pub struct LearnConfig {
    /// Remove MACs not seen for this long.
    pub age: Duration,
    /// Reports per second one worker may send.
    pub rate: u32,
    /// Capacity of the report channel.
    pub channel: usize,
}

impl Default for LearnConfig {
    fn default() -> Self {
        Self { age: Duration::from_secs(300), rate: 10_000, channel: 4096 }
    }
}

/// Creates the report channel: one [`Reporter`] per worker from the sender.
pub fn channel(cfg: &LearnConfig) -> (SyncSender<Report>, Receiver<Report>) {
    sync_channel(cfg.channel.max(1))
}

const DEDUPE: usize = 1024;

/// A worker's side of learning: rate limit and de-duplication in front of
/// the bounded channel. Holds 64-bit hashes of recently reported MACs (a
/// rate limiter's memory, not a table the data plane forwards by).
#[derive(Debug)]
pub struct Reporter {
    tx: SyncSender<Report>,
    recent: Box<[(u64, u16, Instant)]>,
    refresh: Duration,
    tokens: f64,
    rate: f64,
    last: Instant,
}

fn mac_hash(m: &Mac) -> u64 {
    let mut b = [0u8; 8];
    b[..6].copy_from_slice(m);
    keyplane::hash::mix64(u64::from_le_bytes(b) ^ 0x5eed_1ea4)
}

impl Reporter {
    /// A reporter over `tx`.
    pub fn new(tx: SyncSender<Report>, cfg: &LearnConfig) -> Self {
        let now = Instant::now();
        let old = now.checked_sub(Duration::from_secs(3600)).unwrap_or(now);
        Self {
            tx,
            recent: vec![(0u64, u16::MAX, old); DEDUPE].into_boxed_slice(),
            refresh: cfg.age / 4,
            tokens: cfg.rate as f64,
            rate: cfg.rate as f64,
            last: now,
        }
    }

    /// Reports `mac` seen on `port` unless it was reported for that port
    /// within the refresh interval; `known` says the FIB already places it
    /// there (a refresh for aging, not a learning event). Returns whether a
    /// report was sent; `dropped` is incremented when the rate limit or a
    /// full channel refused it.
    pub fn report(&mut self, mac: Mac, port: u16, now: Instant, events: &Events) -> bool {
        let h = mac_hash(&mac);
        let slot = &mut self.recent[(h as usize) & (DEDUPE - 1)];
        if slot.0 == h && slot.1 == port && now.saturating_duration_since(slot.2) < self.refresh {
            return false;
        }
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.rate.max(1.0));
        if self.tokens < 1.0 {
            Events::inc(&events.learn_reports_dropped);
            return false;
        }
        match self.tx.try_send(Report { mac, port }) {
            Ok(()) => {
                self.tokens -= 1.0;
                *slot = (h, port, now);
                Events::inc(&events.learn_reports);
                true
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                Events::inc(&events.learn_reports_dropped);
                false
            }
        }
    }
}

/// The control side of learning: the control form (keys live here), the
/// last time each MAC was seen, and the running FIB it patches.
#[derive(Debug)]
pub struct Learner {
    ctl: AnyControl,
    seen: HashMap<Mac, (u16, Instant)>,
    age: Duration,
    fib: Arc<FibCell>,
}

impl Learner {
    /// A learner whose control form starts as `ctl` (its export is
    /// published as the running FIB).
    pub fn new(ctl: AnyControl, fib: Arc<FibCell>, cfg: &LearnConfig) -> Self {
        fib.swap(Fib::new(ctl.export()));
        Self { ctl, seen: HashMap::new(), age: cfg.age, fib }
    }

    /// Number of MACs learned and not aged out.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when nothing is learned.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The port a MAC is learned on.
    pub fn port_of(&self, mac: &Mac) -> Option<u16> {
        self.seen.get(mac).map(|s| s.0)
    }

    /// Handles one report.
    pub fn handle(&mut self, r: Report, now: Instant, events: &Events) {
        match self.seen.get_mut(&r.mac) {
            Some(s) if s.0 == r.port => {
                s.1 = now;
                return;
            }
            Some(_) => Events::inc(&events.moved),
            None => Events::inc(&events.learned),
        }
        match self.ctl.insert(&r.mac, r.port as u64) {
            Ok(d) => {
                self.seen.insert(r.mac, (r.port, now));
                self.publish(&d, events);
            }
            Err(_) => Events::inc(&events.learn_failed),
        }
    }

    /// Removes MACs not seen since `now - age`.
    pub fn age_out(&mut self, now: Instant, events: &Events) {
        let old: Vec<Mac> =
            self.seen.iter().filter(|(_, s)| now.saturating_duration_since(s.1) >= self.age).map(|(m, _)| *m).collect();
        for m in old {
            self.seen.remove(&m);
            if let Ok(Some(d)) = self.ctl.remove(&m) {
                Events::inc(&events.aged);
                self.publish(&d, events);
            }
        }
    }

    /// Applies a delta of the control form to the running FIB; if the FIB
    /// refuses it (it was swapped underneath), republishes the whole export.
    fn publish(&self, delta: &[u8], events: &Events) {
        match self.fib.load().table().apply_bytes(delta) {
            Ok(()) => Events::inc(&events.deltas_applied),
            Err(_) => {
                Events::inc(&events.deltas_refused_bad);
                self.fib.swap(Fib::new(self.ctl.export()));
                Events::inc(&events.fib_swaps);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyplane_any::Opts;

    fn mac(i: u32) -> Mac {
        let b = i.to_be_bytes();
        [2, 0, b[0], b[1], b[2], b[3]]
    }

    #[test]
    fn learns_moves_and_ages_into_the_running_fib() {
        let ctl =
            AnyControl::build("othello", Vec::<(Vec<u8>, u64)>::new(), 8, &Opts::parse("filtered=8").unwrap()).unwrap();
        let fib = Arc::new(FibCell::new(Fib::new(ctl.export())));
        let cfg = LearnConfig { age: Duration::from_secs(10), ..LearnConfig::default() };
        let mut l = Learner::new(ctl, fib.clone(), &cfg);
        let ev = Events::default();
        let t0 = Instant::now();
        for i in 0..2000 {
            l.handle(Report { mac: mac(i), port: (i % 5) as u16 }, t0, &ev);
        }
        for i in 0..2000 {
            assert_eq!(fib.load().table().get(&mac(i)), Some((i % 5) as u64));
        }
        l.handle(Report { mac: mac(7), port: 4 }, t0 + Duration::from_secs(6), &ev);
        assert_eq!(fib.load().table().get(&mac(7)), Some(4));
        l.handle(Report { mac: mac(8), port: 3 }, t0 + Duration::from_secs(6), &ev); // refresh, same port
        l.age_out(t0 + Duration::from_secs(11), &ev);
        assert_eq!(l.len(), 2);
        assert_eq!(fib.load().table().get(&mac(7)), Some(4));
        assert_eq!(fib.load().table().get(&mac(8)), Some(3));
        let gone = (0..2000).filter(|&i| i != 7 && i != 8 && fib.load().table().get(&mac(i)).is_none()).count();
        // OFW f=8 + emptiness: a removed key reads absent except with probability < 2^-8.
        assert!(gone >= 1990, "{gone}");
        let e = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!((e(&ev.learned), e(&ev.moved), e(&ev.aged)), (2000, 1, 1998));
        assert_eq!(e(&ev.deltas_applied) + e(&ev.deltas_refused_bad), 2000 + 1 + 1998);
    }

    #[test]
    fn reporter_dedupes_and_rate_limits() {
        let cfg = LearnConfig { age: Duration::from_secs(40), rate: 100, channel: 1000 };
        let (tx, rx) = channel(&cfg);
        let mut r = Reporter::new(tx, &cfg);
        let ev = Events::default();
        let t = Instant::now();
        assert!(r.report(mac(1), 0, t, &ev));
        assert!(!r.report(mac(1), 0, t, &ev), "repeat within the refresh interval");
        assert!(r.report(mac(1), 1, t, &ev), "a move is reported at once");
        assert!(r.report(mac(1), 1, t + Duration::from_secs(11), &ev), "refresh after age/4");
        // Token bucket: 100 per second, starting full.
        let sent = (2..1000).filter(|&i| r.report(mac(i), 0, t + Duration::from_secs(11), &ev)).count();
        assert!((95..=100).contains(&sent), "{sent}");
        assert_eq!(rx.try_iter().count(), 3 + sent);
    }
}
