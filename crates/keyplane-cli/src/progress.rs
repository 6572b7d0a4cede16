//! Progress for long work, whether or not stderr is a terminal: on a
//! terminal an indicatif bar with ETA (a spinner when the length is
//! unknown), shown once the work has taken a second; otherwise (pipes, CI,
//! log files) one line every 2 s once the work has taken 2 s, e.g.
//! `keyplane: reading keys: 41% (12.3 MB of 30.0 MB), 4 s elapsed, ETA 6 s`.
//! `KEYPLANE_PROGRESS_EVERY=SECONDS` changes the period of those lines.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Shared {
    pos: AtomicU64,
    done: AtomicBool,
    msg: Mutex<String>,
}

/// A progress indicator (see the module docs).
pub struct Progress {
    pb: Option<ProgressBar>,
    start: Instant,
    shown: std::cell::Cell<bool>,
    shared: Arc<Shared>,
}

fn period() -> Duration {
    std::env::var("KEYPLANE_PROGRESS_EVERY")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(2), |s| Duration::from_secs_f64(s.max(0.001)))
}

fn human(x: u64, bytes: bool) -> String {
    if !bytes {
        return x.to_string();
    }
    match x {
        x if x >= 1_000_000_000 => format!("{:.1} GB", x as f64 / 1e9),
        x if x >= 1_000_000 => format!("{:.1} MB", x as f64 / 1e6),
        x if x >= 1_000 => format!("{:.1} kB", x as f64 / 1e3),
        x => format!("{x} B"),
    }
}

impl Progress {
    fn new(what: &str, len: Option<u64>, template: &str, bytes: bool) -> Self {
        let shared =
            Arc::new(Shared { pos: AtomicU64::new(0), done: AtomicBool::new(false), msg: Mutex::new(what.into()) });
        let start = Instant::now();
        let pb = if std::io::stderr().is_terminal() {
            let pb = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden());
            let style = if len.is_some() {
                ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
            } else {
                ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner())
            };
            pb.set_style(style.progress_chars("=> "));
            pb.set_message(what.to_string());
            Some(pb)
        } else {
            let sh = shared.clone();
            let every = period();
            std::thread::spawn(move || {
                let mut next = every;
                while !sh.done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50).min(every));
                    let t = start.elapsed();
                    if t < next || sh.done.load(Ordering::Relaxed) {
                        continue;
                    }
                    next = t + every;
                    let msg = sh.msg.lock().map(|m| m.clone()).unwrap_or_default();
                    let pos = sh.pos.load(Ordering::Relaxed);
                    let secs = t.as_secs_f64();
                    let line = match len {
                        Some(len) if len > 0 => {
                            let f = (pos as f64 / len as f64).min(1.0);
                            let eta =
                                if f > 0.0 { format!(", ETA {:.0} s", secs * (1.0 - f) / f) } else { String::new() };
                            format!(
                                "{msg}: {:.0}% ({} of {}), {secs:.1} s elapsed{eta}",
                                f * 100.0,
                                human(pos, bytes),
                                human(len, bytes)
                            )
                        }
                        _ if pos > 0 => format!("{msg}: {} done, {secs:.1} s elapsed", human(pos, bytes)),
                        _ => format!("{msg}: {secs:.1} s elapsed"),
                    };
                    eprintln!("keyplane: {line}");
                }
            });
            None
        };
        Self { pb, start, shown: std::cell::Cell::new(false), shared }
    }
    /// A bar over bytes of a file.
    pub fn bytes(what: &str, len: Option<u64>) -> Self {
        Self::new(what, len, "{msg} [{bar:40}] {bytes}/{total_bytes} ETA {eta}", true)
    }
    /// A bar over items.
    pub fn items(what: &str, len: Option<u64>) -> Self {
        Self::new(what, len, "{msg} [{bar:40}] {pos}/{len} ETA {eta}", false)
    }
    /// A spinner for a step of unknown length.
    pub fn spinner(what: &str) -> Self {
        let p = Self::new(what, None, "", false);
        if let Some(pb) = &p.pb {
            pb.enable_steady_tick(Duration::from_millis(200));
            let pb = pb.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(1));
                if !pb.is_finished() {
                    pb.set_draw_target(ProgressDrawTarget::stderr());
                }
            });
        }
        p
    }
    fn reveal(&self) {
        if let Some(pb) = &self.pb
            && !self.shown.get()
            && self.start.elapsed() > Duration::from_secs(1)
        {
            self.shown.set(true);
            pb.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
    /// Advances by `n`.
    pub fn inc(&self, n: u64) {
        self.shared.pos.fetch_add(n, Ordering::Relaxed);
        if let Some(pb) = &self.pb {
            pb.inc(n);
            if !self.shown.get() {
                self.reveal();
            }
        }
    }
    /// Sets the message.
    pub fn message(&self, m: String) {
        if let Some(pb) = &self.pb {
            self.reveal();
            pb.set_message(m.clone());
        }
        if let Ok(mut g) = self.shared.msg.lock() {
            *g = m;
        }
    }
    /// Removes the bar (stops the periodic lines).
    pub fn finish(&self) {
        self.shared.done.store(true, Ordering::Relaxed);
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
