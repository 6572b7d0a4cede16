//! FIB updates from a `keyplane serve` table: [`ControllerSource`] runs the
//! control crate's [`Subscriber`] on a small thread of its own (a
//! current-thread tokio runtime) and hands its blobs and deltas to the
//! switch's control thread through the ordinary [`UpdateSource`] trait, so
//! the [`crate::source::Updater`]'s sequence checks apply as for any other
//! source. A delta the running FIB refuses (gap or bad bytes) makes the
//! subscriber forget its state; the service then answers with a whole blob.

use crate::error::{Result, SwitchError};
use crate::source::{Outcome, UpdateEvent, UpdateSource};
use keyplane_control::follow::{Event, Subscriber};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A subscription to one table of a `keyplane serve` service.
#[derive(Debug)]
pub struct ControllerSource {
    url: String,
    table: String,
    rx: Receiver<(u64, UpdateEvent)>,
    want_resync: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    /// Service sequence numbers of the events the last poll returned.
    seqs: Vec<u64>,
    thread: Option<JoinHandle<()>>,
}

impl ControllerSource {
    /// Starts following `table` at `url` (`http://host:port` or
    /// `host:port`). Connecting happens in the background, with the
    /// subscriber's reconnect backoff; the connection is made in the
    /// calling thread's network namespace.
    pub fn new(url: &str, table: &str) -> Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let want_resync = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SwitchError::config(format!("cannot start the controller subscription's runtime: {e}")))?;
        let sub = Subscriber::new(url, table).name("keyplane-switch");
        let (w, s, e) = (want_resync.clone(), stop.clone(), error.clone());
        let thread = std::thread::Builder::new()
            .name("kp-switch-sub".into())
            .spawn(move || rt.block_on(follow(sub, tx, w, s, e)))
            .map_err(|e| SwitchError::config(format!("cannot start the controller subscription thread: {e}")))?;
        Ok(Self {
            url: url.to_string(),
            table: table.to_string(),
            rx,
            want_resync,
            stop,
            error,
            seqs: Vec::new(),
            thread: Some(thread),
        })
    }

    fn failure(&self) -> SwitchError {
        let why = self.error.lock().ok().and_then(|g| g.clone()).unwrap_or_else(|| "subscription ended".into());
        SwitchError::config(format!(
            "--controller {} --table {}: {why} (check the URL, the table name and that the table is a lookup table)",
            self.url, self.table
        ))
    }

    /// Waits up to `timeout` for the first whole blob (start-up without
    /// `--fib`); returns its service sequence number and bytes. Deltas
    /// before it (there are none from a fresh subscription) are skipped.
    pub fn first_blob(&mut self, timeout: Duration) -> Result<(u64, Vec<u8>)> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((seq, UpdateEvent::Blob(b))) => return Ok((seq, b)),
                Ok(_) => continue,
                Err(RecvTimeoutError::Disconnected) => return Err(self.failure()),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(SwitchError::config(format!(
                        "--controller {} --table {}: no FIB from the service within {} s (is `keyplane serve` running there?)",
                        self.url,
                        self.table,
                        timeout.as_secs()
                    )));
                }
            }
        }
    }
}

async fn follow(
    mut sub: Subscriber,
    tx: Sender<(u64, UpdateEvent)>,
    want_resync: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
) {
    while !stop.load(Ordering::Relaxed) {
        if want_resync.swap(false, Ordering::Relaxed) {
            sub.resync();
        }
        // Bounded waits so that a stop is noticed; `next` resumes cleanly.
        let ev = match tokio::time::timeout(Duration::from_millis(100), sub.next()).await {
            Err(_) => continue,
            Ok(Ok(ev)) => ev,
            Ok(Err(e)) => {
                if let Ok(mut g) = error.lock() {
                    *g = Some(e.to_string());
                }
                return;
            }
        };
        let item = match ev {
            Event::Blob { sequence, bytes, .. } => (sequence, UpdateEvent::Blob(bytes.to_vec())),
            Event::Delta { sequence, bytes, .. } => (sequence, UpdateEvent::Delta(bytes)),
        };
        if tx.send(item).is_err() {
            return;
        }
    }
}

impl UpdateSource for ControllerSource {
    fn describe(&self) -> String {
        format!("table {} at {}", self.table, self.url)
    }

    /// Asks the service for a whole blob; it arrives as a later event.
    fn resync(&mut self) -> Result<Option<Vec<u8>>> {
        self.want_resync.store(true, Ordering::Relaxed);
        Ok(None)
    }

    fn poll(&mut self, timeout: Duration) -> Result<Vec<UpdateEvent>> {
        self.seqs.clear();
        let mut v = Vec::new();
        match self.rx.recv_timeout(timeout) {
            Ok((s, e)) => {
                self.seqs.push(s);
                v.push(e);
                for (s, e) in self.rx.try_iter().take(4096) {
                    self.seqs.push(s);
                    v.push(e);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(self.failure()),
        }
        Ok(v)
    }

    fn feedback(&mut self, index: usize, outcome: Outcome) -> Option<u64> {
        match outcome {
            Outcome::Applied | Outcome::Swapped => self.seqs.get(index).copied(),
            Outcome::Lost | Outcome::Bad => {
                self.want_resync.store(true, Ordering::Relaxed);
                None
            }
            Outcome::Repeated => None,
        }
    }
}

impl Drop for ControllerSource {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
