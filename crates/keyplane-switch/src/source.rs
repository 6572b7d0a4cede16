//! Where FIB updates come from, behind one small trait ([`UpdateSource`]:
//! the current lookup form for start-up and resync, plus a stream of blob and
//! delta byte events), and the [`Updater`] that applies them to the running
//! FIB with sequence-number checks.
//!
//! [`DirSource`] watches a directory for delta streams written by
//! `keyplane update --control C --deltas DIR/NAME` (concatenated framed
//! deltas, written to a temporary name and renamed, so a file is complete
//! when it appears) and for whole lookup blobs (`keyplane build --out
//! DIR/NAME`), which replace the FIB atomically. A control-plane
//! subscription ([`crate::controller::ControllerSource`]) implements the
//! same trait.

use crate::counters::Events;
use crate::error::{Result, SwitchError};
use crate::fib::{Fib, FibCell, ObjectKind, classify};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// One update as bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateEvent {
    /// A whole lookup blob: replaces the FIB.
    Blob(Vec<u8>),
    /// One framed delta.
    Delta(Vec<u8>),
    /// Bytes that are neither (named for the log); counted as refused.
    Bad(String),
}

/// A source of FIB updates.
pub trait UpdateSource: Send {
    /// Short description for logs.
    fn describe(&self) -> String;
    /// The whole current FIB, for start-up and resynchronisation (`None`
    /// when the source cannot provide one).
    fn resync(&mut self) -> Result<Option<Vec<u8>>>;
    /// Updates since the last call; waits up to `timeout` when there are none.
    fn poll(&mut self, timeout: Duration) -> Result<Vec<UpdateEvent>>;
    /// Told what became of event `index` of the last [`UpdateSource::poll`];
    /// returns the source's sequence number for it when it was applied (a
    /// source that numbers its events, e.g. a control-plane subscription),
    /// so the switch can report the applied sequence.
    fn feedback(&mut self, index: usize, outcome: Outcome) -> Option<u64> {
        let _ = (index, outcome);
        None
    }
}

/// A watched directory of delta streams and blobs.
#[derive(Debug)]
pub struct DirSource {
    dir: PathBuf,
    fib_path: Option<PathBuf>,
    seen: HashSet<PathBuf>,
    interval: Duration,
}

impl DirSource {
    /// Watches `dir` (created if missing). Files already there at start-up
    /// are applied on the first poll, in sequence order. `fib_path` is the
    /// blob reloaded by [`UpdateSource::resync`] (SIGHUP).
    pub fn new(dir: &Path, fib_path: Option<&Path>) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| SwitchError::io(dir.display().to_string(), e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            fib_path: fib_path.map(Path::to_path_buf),
            seen: HashSet::new(),
            interval: Duration::from_millis(10),
        })
    }

    fn scan(&mut self) -> Result<Vec<UpdateEvent>> {
        let rd = std::fs::read_dir(&self.dir).map_err(|e| SwitchError::io(self.dir.display().to_string(), e))?;
        let mut files = Vec::new();
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            // Temporary names (`x.tmp123`, dot files) are files still being written.
            if name.starts_with('.') || name.contains(".tmp") || self.seen.contains(&p) || !p.is_file() {
                continue;
            }
            files.push((p, name));
        }
        // Several files at once: blobs first, then deltas in sequence order.
        let mut batches: Vec<((u8, u64, String), Vec<UpdateEvent>)> = Vec::new();
        for (p, name) in files {
            self.seen.insert(p.clone());
            let bytes = match std::fs::read(&p) {
                Ok(b) => b,
                Err(e) => {
                    batches.push(((2, 0, name.clone()), vec![UpdateEvent::Bad(format!("{name}: {e}"))]));
                    continue;
                }
            };
            batches.push(split(&name, &bytes));
        }
        batches.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(batches.into_iter().flat_map(|(_, ev)| ev).collect())
    }
}

/// Splits one file into events; the sort key puts blobs first and orders
/// delta streams by their first sequence number.
fn split(name: &str, bytes: &[u8]) -> ((u8, u64, String), Vec<UpdateEvent>) {
    let frames = match keyplane_any::split_frames(bytes) {
        Ok(f) if !f.is_empty() => f,
        Ok(_) => return ((2, 0, name.into()), vec![UpdateEvent::Bad(format!("{name}: empty file"))]),
        Err(e) => return ((2, 0, name.into()), vec![UpdateEvent::Bad(format!("{name}: {e}"))]),
    };
    let mut key = (1u8, u64::MAX, name.to_string());
    let mut ev = Vec::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        match classify(f) {
            Ok(ObjectKind::Blob) => {
                if i == 0 {
                    key.0 = 0;
                }
                ev.push(UpdateEvent::Blob(f.to_vec()));
            }
            Ok(ObjectKind::Delta { seq }) => {
                if i == 0 {
                    key.1 = seq.unwrap_or(u64::MAX);
                }
                ev.push(UpdateEvent::Delta(f.to_vec()));
            }
            Err(e) => ev.push(UpdateEvent::Bad(format!("{name}: frame {}: {e}", i + 1))),
        }
    }
    (key, ev)
}

impl UpdateSource for DirSource {
    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }

    fn resync(&mut self) -> Result<Option<Vec<u8>>> {
        match &self.fib_path {
            Some(p) => std::fs::read(p).map(Some).map_err(|e| SwitchError::io(p.display().to_string(), e)),
            None => Ok(None),
        }
    }

    fn poll(&mut self, timeout: Duration) -> Result<Vec<UpdateEvent>> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let ev = self.scan()?;
            if !ev.is_empty() || std::time::Instant::now() >= deadline {
                return Ok(ev);
            }
            std::thread::sleep(self.interval.min(deadline.saturating_duration_since(std::time::Instant::now())));
        }
    }
}

/// An in-memory source (tests, embedding): events pushed through a channel.
#[derive(Debug)]
pub struct ChannelSource {
    rx: std::sync::mpsc::Receiver<UpdateEvent>,
    blob: Option<Vec<u8>>,
}

impl ChannelSource {
    /// A source fed by the returned sender; `blob` answers resync.
    pub fn new(blob: Option<Vec<u8>>) -> (std::sync::mpsc::Sender<UpdateEvent>, Self) {
        let (tx, rx) = std::sync::mpsc::channel();
        (tx, Self { rx, blob })
    }
}

impl UpdateSource for ChannelSource {
    fn describe(&self) -> String {
        "in-memory channel".into()
    }
    fn resync(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.blob.clone())
    }
    fn poll(&mut self, timeout: Duration) -> Result<Vec<UpdateEvent>> {
        let mut v = Vec::new();
        if let Ok(e) = self.rx.recv_timeout(timeout) {
            v.push(e);
            v.extend(self.rx.try_iter());
        }
        Ok(v)
    }
}

/// What happened to one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Delta applied.
    Applied,
    /// FIB replaced.
    Swapped,
    /// Delta refused: an earlier delta is missing.
    Lost,
    /// Delta refused: already applied.
    Repeated,
    /// Refused: does not decode or does not fit.
    Bad,
}

/// Applies update events to the running FIB. A delta is applied only if its
/// sequence number is the FIB's plus one (for structures that number their
/// deltas); otherwise it is refused and counted, never applied.
#[derive(Debug)]
pub struct Updater {
    fib: Arc<FibCell>,
}

impl Updater {
    /// An updater of `fib`.
    pub fn new(fib: Arc<FibCell>) -> Self {
        Self { fib }
    }

    /// Applies one event.
    pub fn apply(&self, ev: &UpdateEvent, events: &Events) -> Outcome {
        let out = match ev {
            UpdateEvent::Blob(b) => match Fib::from_bytes("FIB blob", b) {
                Ok(f) => {
                    self.fib.swap(f);
                    Outcome::Swapped
                }
                Err(_) => {
                    Events::inc(&events.fib_refused);
                    return Outcome::Bad;
                }
            },
            UpdateEvent::Delta(d) => self.delta(d),
            UpdateEvent::Bad(_) => Outcome::Bad,
        };
        Events::inc(match out {
            Outcome::Applied => &events.deltas_applied,
            Outcome::Swapped => &events.fib_swaps,
            Outcome::Lost => &events.deltas_refused_lost,
            Outcome::Repeated => &events.deltas_refused_repeated,
            Outcome::Bad => &events.deltas_refused_bad,
        });
        out
    }

    fn delta(&self, d: &[u8]) -> Outcome {
        let fib = self.fib.load();
        let seq = match classify(d) {
            Ok(ObjectKind::Delta { seq }) => seq,
            _ => return Outcome::Bad,
        };
        if let (Some(s), Some(have)) = (seq, fib.seq()) {
            if s <= have {
                return Outcome::Repeated;
            }
            if s > have + 1 {
                return Outcome::Lost;
            }
        }
        match fib.table().apply_bytes(d) {
            Ok(()) => Outcome::Applied,
            Err(keyplane::Error::DeltaMismatch(m)) if m.contains("lost or repeated") => Outcome::Lost,
            Err(_) => Outcome::Bad,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyplane_any::{AnyControl, Opts};

    #[test]
    fn deltas_apply_in_order_and_gaps_and_repeats_are_refused() {
        let items: Vec<(Vec<u8>, u64)> = (0..100u32).map(|i| (i.to_le_bytes().to_vec(), (i % 4) as u64)).collect();
        for s in ["othello", "cfw", "cuckoo", "ludo"] {
            let mut ctl = AnyControl::build(s, items.clone(), 8, &Opts::new()).unwrap();
            let fib = Arc::new(FibCell::new(Fib::new(ctl.export())));
            let up = Updater::new(fib.clone());
            let ev = Events::default();
            let d1 = ctl.insert(b"k1", 1).unwrap();
            let d2 = ctl.insert(b"k2", 2).unwrap();
            let d3 = ctl.insert(b"k3", 3).unwrap();
            assert_eq!(up.apply(&UpdateEvent::Delta(d2.clone()), &ev), Outcome::Lost, "{s}");
            assert_eq!(up.apply(&UpdateEvent::Delta(d1.clone()), &ev), Outcome::Applied, "{s}");
            assert_eq!(up.apply(&UpdateEvent::Delta(d1.clone()), &ev), Outcome::Repeated, "{s}");
            assert_eq!(up.apply(&UpdateEvent::Delta(d2), &ev), Outcome::Applied, "{s}");
            let mut bad = d3.clone();
            let n = bad.len();
            bad[n / 2] ^= 0x40;
            assert_eq!(up.apply(&UpdateEvent::Delta(bad), &ev), Outcome::Bad, "{s}");
            assert_eq!(up.apply(&UpdateEvent::Delta(d3), &ev), Outcome::Applied, "{s}");
            for (k, v) in [(&b"k1"[..], 1), (b"k2", 2), (b"k3", 3)] {
                assert_eq!(fib.load().table().get(k), Some(v), "{s}");
            }
            // A new blob replaces the FIB; the old chain of deltas no longer fits.
            let other = AnyControl::build(s, vec![(b"z".to_vec(), 5u64)], 8, &Opts::new()).unwrap();
            assert_eq!(up.apply(&UpdateEvent::Blob(other.export().to_bytes()), &ev), Outcome::Swapped);
            assert_eq!(fib.load().table().get(b"z"), Some(5));
            assert_eq!(fib.swaps(), 1);
        }
    }

    #[test]
    fn dir_source_orders_streams_by_sequence_and_skips_temporaries() {
        let dir = std::env::temp_dir().join(format!("kp-switch-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut src = DirSource::new(&dir, None).unwrap();
        let mut ctl = AnyControl::build("othello", vec![(b"a".to_vec(), 1u64)], 8, &Opts::new()).unwrap();
        let blob = ctl.export().to_bytes();
        let mut s1 = ctl.insert(b"b", 2).unwrap();
        s1.extend(ctl.insert(b"c", 3).unwrap());
        let s2 = ctl.insert(b"d", 4).unwrap();
        // Names sort the wrong way round on purpose; sequence numbers decide.
        std::fs::write(dir.join("a-second.kpd"), &s2).unwrap();
        std::fs::write(dir.join("z-first.kpd"), &s1).unwrap();
        std::fs::write(dir.join("x.kpd.tmp99"), b"partial").unwrap();
        std::fs::write(dir.join("garbage.kpd"), b"not keyplane").unwrap();
        let ev = src.poll(Duration::from_millis(1)).unwrap();
        assert_eq!(ev.len(), 4, "{ev:?}");
        let fib = Arc::new(FibCell::new(Fib::from_bytes("b", &blob).unwrap()));
        let up = Updater::new(fib.clone());
        let e = Events::default();
        let outs: Vec<Outcome> = ev.iter().map(|x| up.apply(x, &e)).collect();
        assert_eq!(outs, [Outcome::Applied, Outcome::Applied, Outcome::Applied, Outcome::Bad]);
        assert_eq!(fib.load().table().get(b"d"), Some(4));
        assert!(src.poll(Duration::from_millis(1)).unwrap().is_empty(), "files are read once");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
