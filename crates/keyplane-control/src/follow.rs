//! The subscriber client library: follow a table from `keyplane serve`.
//!
//! Two layers:
//!
//! * [`Subscriber`] yields byte [`Event`]s in order — a whole lookup blob,
//!   or one delta with its sequence number — and owns the connection:
//!   reconnects with exponential backoff, resumes from its applied
//!   sequence, refuses out-of-order messages (then reconnects, and the
//!   service answers with a blob when the log no longer covers the gap),
//!   and turns network-wide view patches into whole blobs.
//! * [`Follower`] keeps an [`AnyLookup`] current from a `Subscriber`:
//!   deltas are applied in place (readers keep reading), blobs replace the
//!   table atomically. The lookup form's own sequence check stays the last
//!   line of defence: a delta it refuses triggers a resync.
//!
//! ```no_run
//! # async fn f() -> keyplane_control::Result<()> {
//! use keyplane_control::follow::{Follower, Subscriber};
//! let mut f = Follower::new(Subscriber::new("http://127.0.0.1:7000", "fib"));
//! let handle = f.handle();                 // give this to packet threads
//! tokio::spawn(async move { f.run().await });
//! // later, on a packet thread:
//! if let Some(t) = handle.current() { let _port = t.get(b"\x0a\x00\x00\x01"); }
//! # Ok(()) }
//! ```

use crate::error::{ControlError, Result};
use crate::metrics::SubscriberMetrics;
use crate::pb::{self, subscribe_response::Update};
use arc_swap::ArcSwapOption;
use keyplane_any::AnyLookup;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// One step of a subscription, in order.
#[derive(Debug, Clone)]
pub enum Event {
    /// A whole lookup form: replace what you hold.
    Blob {
        /// Sequence number it reflects.
        sequence: u64,
        /// Epoch of the service's control form.
        epoch: u64,
        /// The framed blob (`AnyLookup::from_bytes`).
        bytes: Arc<Vec<u8>>,
    },
    /// One delta: apply it to the lookup form of `sequence - 1`.
    Delta {
        /// Sequence number after it.
        sequence: u64,
        /// Epoch.
        epoch: u64,
        /// The framed delta (`AnyLookup::apply_bytes`).
        bytes: Vec<u8>,
    },
}

/// A subscription to one table (or one switch's view of a network-wide table).
pub struct Subscriber {
    url: String,
    table: String,
    view: String,
    name: String,
    backoff: (Duration, Duration),
    delay: Duration,
    stream: Option<tonic::Streaming<pb::SubscribeResponse>>,
    applied: u64,
    epoch: u64,
    blob: Option<Arc<Vec<u8>>>,
    connected: bool,
    metrics: Arc<SubscriberMetrics>,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subscriber({} {} at {})", self.url, self.table, self.applied)
    }
}

impl Subscriber {
    /// Follows `table` at the service `url` (`http://host:port`).
    pub fn new(url: &str, table: &str) -> Self {
        Self {
            url: crate::client::normalize_url(url),
            table: table.to_string(),
            view: String::new(),
            name: String::new(),
            backoff: (Duration::from_millis(50), Duration::from_secs(5)),
            delay: Duration::from_millis(50),
            stream: None,
            applied: 0,
            epoch: 0,
            blob: None,
            connected: false,
            metrics: Arc::new(SubscriberMetrics::default()),
        }
    }

    /// Follows one switch's view of a network-wide table.
    pub fn view(mut self, view: &str) -> Self {
        self.view = view.to_string();
        self
    }

    /// Names this subscriber in the service's metrics.
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Reconnect backoff: first delay and cap (doubling in between).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = (min, max.max(min));
        self.delay = min;
        self
    }

    /// Reports into these metrics ([`SubscriberMetrics::register`]).
    pub fn metrics(mut self, m: Arc<SubscriberMetrics>) -> Self {
        self.metrics = m;
        self
    }

    /// Sequence number of the last event handed out.
    pub fn applied_sequence(&self) -> u64 {
        self.applied
    }

    /// Epoch of the last event handed out (0: none yet).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Forgets the current state: the next event is a whole blob. Call it
    /// when an event could not be applied.
    pub fn resync(&mut self) {
        self.epoch = 0;
        self.blob = None;
        self.stream = None;
    }

    fn drop_stream(&mut self) {
        self.stream = None;
    }

    async fn connect(&mut self) -> Result<()> {
        loop {
            let res = async {
                let mut c = crate::client::connect(&self.url).await?;
                let req = pb::SubscribeRequest {
                    table: self.table.clone(),
                    from_sequence: self.applied,
                    epoch: self.epoch,
                    view: self.view.clone(),
                    subscriber: self.name.clone(),
                };
                Ok::<_, ControlError>(c.subscribe(req).await?.into_inner())
            }
            .await;
            match res {
                Ok(s) => {
                    if self.connected {
                        self.metrics.reconnects.inc();
                    }
                    self.connected = true;
                    self.stream = Some(s);
                    return Ok(());
                }
                Err(ControlError::Status(s)) if permanent(s.code()) => return Err(ControlError::Status(s)),
                Err(_) => {
                    tokio::time::sleep(self.delay).await;
                    self.delay = (self.delay * 2).min(self.backoff.1);
                }
            }
        }
    }

    /// The next event, reconnecting as needed. Errors only for permanent
    /// refusals (unknown table or view, wrong kind of table).
    pub async fn next(&mut self) -> Result<Event> {
        loop {
            if self.stream.is_none() {
                self.connect().await?;
            }
            let Some(stream) = self.stream.as_mut() else { continue };
            let msg = match stream.message().await {
                Ok(Some(m)) => m,
                Ok(None) => {
                    self.drop_stream();
                    continue;
                }
                Err(s) if permanent(s.code()) => {
                    self.drop_stream();
                    return Err(ControlError::Status(s));
                }
                Err(_) => {
                    self.drop_stream();
                    tokio::time::sleep(self.delay).await;
                    self.delay = (self.delay * 2).min(self.backoff.1);
                    continue;
                }
            };
            self.delay = self.backoff.0;
            match msg.update {
                Some(Update::Snapshot(s)) => {
                    let bytes = Arc::new(s.blob);
                    self.applied = s.sequence;
                    self.epoch = s.epoch;
                    if !self.view.is_empty() {
                        self.blob = Some(bytes.clone());
                    }
                    self.metrics.snapshots.inc();
                    self.metrics.applied_sequence.set(s.sequence as i64);
                    return Ok(Event::Blob { sequence: s.sequence, epoch: s.epoch, bytes });
                }
                Some(Update::Delta(d)) => {
                    if d.epoch != self.epoch || d.sequence != self.applied + 1 {
                        // Out of order: refuse, reconnect from what we hold.
                        self.metrics.refused.inc();
                        self.drop_stream();
                        continue;
                    }
                    self.applied = d.sequence;
                    self.metrics.deltas.inc();
                    self.metrics.applied_sequence.set(d.sequence as i64);
                    return Ok(Event::Delta { sequence: d.sequence, epoch: d.epoch, bytes: d.delta });
                }
                Some(Update::Patch(p)) => {
                    let patched = match &self.blob {
                        Some(b) if p.epoch == self.epoch && p.base_sequence == self.applied => {
                            crate::table::apply_patch(b, &p).ok()
                        }
                        _ => None,
                    };
                    let Some(nb) = patched else {
                        self.metrics.refused.inc();
                        self.resync();
                        continue;
                    };
                    let bytes = Arc::new(nb);
                    self.blob = Some(bytes.clone());
                    self.applied = p.sequence;
                    self.metrics.deltas.inc();
                    self.metrics.applied_sequence.set(p.sequence as i64);
                    return Ok(Event::Blob { sequence: p.sequence, epoch: p.epoch, bytes });
                }
                None => continue,
            }
        }
    }
}

fn permanent(c: Code) -> bool {
    matches!(c, Code::NotFound | Code::FailedPrecondition | Code::InvalidArgument | Code::PermissionDenied)
}

/// A shareable handle on the lookup form a [`Follower`] keeps current.
#[derive(Debug, Clone, Default)]
pub struct FollowHandle {
    table: Arc<ArcSwapOption<AnyLookup>>,
}

impl FollowHandle {
    /// The current lookup form (`None` before the first blob). Deltas are
    /// applied to it in place; a resync swaps in a new one, so long-lived
    /// readers should call this again now and then (e.g. per burst).
    pub fn current(&self) -> Option<Arc<AnyLookup>> {
        self.table.load_full()
    }
}

/// Keeps a lookup form current from a [`Subscriber`].
#[derive(Debug)]
pub struct Follower {
    sub: Subscriber,
    handle: FollowHandle,
}

impl Follower {
    /// Wraps a subscriber.
    pub fn new(sub: Subscriber) -> Self {
        Self { sub, handle: FollowHandle::default() }
    }

    /// The handle readers use.
    pub fn handle(&self) -> FollowHandle {
        self.handle.clone()
    }

    /// The subscriber (applied sequence, epoch).
    pub fn subscriber(&self) -> &Subscriber {
        &self.sub
    }

    /// Waits for one event and applies it; returns the applied sequence.
    pub async fn step(&mut self) -> Result<u64> {
        loop {
            let ev = self.sub.next().await?;
            let ok = match ev {
                Event::Blob { bytes, .. } => match AnyLookup::from_bytes(&bytes) {
                    Ok(t) => {
                        self.handle.table.store(Some(Arc::new(t)));
                        true
                    }
                    Err(_) => false,
                },
                Event::Delta { bytes, .. } => match self.handle.table.load_full() {
                    Some(t) => t.apply_bytes(&bytes).is_ok(),
                    None => false,
                },
            };
            if ok {
                return Ok(self.sub.applied_sequence());
            }
            // The lookup form refused it (its own sequence check, or bad bytes): resync.
            self.sub.metrics.refused.inc();
            self.sub.resync();
        }
    }

    /// Applies events until `sequence` is reached (or passed).
    pub async fn wait_for(&mut self, sequence: u64) -> Result<()> {
        while self.handle.current().is_none() || self.sub.applied_sequence() < sequence {
            self.step().await?;
        }
        Ok(())
    }

    /// Follows forever (until a permanent error).
    pub async fn run(mut self) -> Result<()> {
        loop {
            self.step().await?;
        }
    }
}
