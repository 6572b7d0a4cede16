//! One table held by the service: control form, delta log, cached
//! snapshot, and (network-wide tables) the per-switch views.

use crate::pb;
use crate::store::{ItemMap, TableRecord};
use crate::topology::{self, Topology};
use keyplane_any::{AnyControl, KeyFormat, Opts};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use tokio::sync::watch;

/// How much delta log each stream keeps before compaction drops the oldest.
#[derive(Debug, Clone, Copy)]
pub struct Retain {
    /// At most this many messages.
    pub messages: usize,
    /// At most this many bytes.
    pub bytes: usize,
}

impl Default for Retain {
    fn default() -> Self {
        Self { messages: 100_000, bytes: 64 << 20 }
    }
}

/// One logged message of a stream.
#[derive(Debug, Clone)]
pub struct LogItem {
    /// Sequence number the subscriber must be at to apply it.
    pub base: u64,
    /// Sequence number after it.
    pub seq: u64,
    /// The message as sent.
    pub msg: Arc<pb::SubscribeResponse>,
    size: usize,
}

/// The in-memory delta log of one stream (a table, or one switch's view).
#[derive(Debug, Default)]
pub struct Log {
    items: VecDeque<LogItem>,
    bytes: usize,
    /// Messages dropped by compaction so far.
    pub compacted: u64,
}

impl Log {
    /// Appends a message; compacts past `retain`.
    pub fn push(&mut self, base: u64, seq: u64, msg: pb::SubscribeResponse, size: usize, retain: Retain) {
        self.items.push_back(LogItem { base, seq, msg: Arc::new(msg), size });
        self.bytes += size;
        while self.items.len() > retain.messages.max(1) || (self.bytes > retain.bytes && self.items.len() > 1) {
            let Some(it) = self.items.pop_front() else { break };
            self.bytes -= it.size;
            self.compacted += 1;
        }
    }

    /// The messages a subscriber at `pos` needs to reach `head`, or `None`
    /// when the log no longer holds them (then it needs a snapshot).
    pub fn since(&self, pos: u64, head: u64, max: usize) -> Option<Vec<Arc<pb::SubscribeResponse>>> {
        if pos == head {
            return Some(Vec::new());
        }
        let i = self.items.binary_search_by_key(&pos, |it| it.base).ok()?;
        Some(self.items.iter().skip(i).take(max).map(|it| it.msg.clone()).collect())
    }

    /// Oldest position a subscriber can resume from with deltas (`head` when empty).
    pub fn first(&self, head: u64) -> u64 {
        self.items.front().map_or(head, |it| it.base)
    }

    /// Messages held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Drops everything (a new epoch).
    pub fn clear(&mut self) {
        self.items.clear();
        self.bytes = 0;
    }
}

/// One switch's view of a network-wide table.
#[derive(Debug)]
pub struct View {
    /// Switch name.
    pub name: String,
    /// The view's current blob.
    pub blob: Arc<Vec<u8>>,
    /// Sequence number of the table when the blob last changed.
    pub seq: u64,
    /// Patches.
    pub log: Log,
}

/// Network-wide state: topology, link states, next hops, views.
#[derive(Debug)]
pub struct Net {
    /// The topology.
    pub topo: Topology,
    /// Indices of failed links.
    pub down: BTreeSet<usize>,
    /// `nh[s][d]`: egress port of switch s toward switch d.
    pub nh: Vec<Vec<u16>>,
    /// One view per switch.
    pub views: Vec<View>,
}

/// A table as the service holds it.
#[derive(Debug)]
pub struct Table {
    /// Durable description (sequence included).
    pub rec: TableRecord,
    /// Key format.
    pub kf: KeyFormat,
    /// The control form.
    pub control: AnyControl,
    /// The committed entries (what the store holds): `Read` answers from
    /// here, and a control form that refused an update mid-batch is
    /// rebuilt from here.
    pub items: ItemMap,
    /// Epoch of the control form.
    pub epoch: u64,
    /// Deltas of the table's own lookup form.
    pub log: Log,
    /// Cached export `(sequence, blob)`.
    pub snapshot: Option<(u64, Arc<Vec<u8>>)>,
    /// Network-wide state.
    pub net: Option<Net>,
    /// Carries the table's sequence to subscribers (a change wakes them).
    pub tx: watch::Sender<u64>,
    /// Connected subscribers.
    pub subscribers: u32,
    /// Control-form rebuilds from the store (start-up, failed batches).
    pub rebuilds: u64,
    /// Identity of this table (kept across rebuilds, new when recreated).
    pub id: u64,
    /// True when the library refused an update mid-batch: the control form
    /// may be half-changed until the writer rebuilds it (a new `Table`).
    pub poisoned: bool,
}

/// Service-level table option (`-O expected_keys=N` at create): build the
/// control form sized for N keys, so that inserts up to N never stop the
/// writer for a growth rebuild (an O(n) rebuild of a 1M-key Othello is
/// ~100 ms). Kept in the table's record, so restarts and rebuilds size the
/// form the same way.
pub const EXPECTED_KEYS: &str = "expected_keys";

/// Largest `expected_keys` accepted (bounds memory on a bad request).
pub const MAX_EXPECTED_KEYS: usize = 1 << 30;

fn parse_expected(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .ok()
        .filter(|n| *n <= MAX_EXPECTED_KEYS)
        .ok_or_else(|| format!("option {EXPECTED_KEYS}={v:?}: give a whole number of keys up to {MAX_EXPECTED_KEYS}"))
}

/// Placeholder key `i` used to pre-size a control form: 17 bytes no key
/// format produces (0xFE, salt, counter), skipped when a real key equals it.
fn placeholder(salt: u64, i: u64) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = 0xfe;
    k[1..9].copy_from_slice(&salt.to_le_bytes());
    k[9..].copy_from_slice(&i.to_le_bytes());
    k
}

/// Builds `structure` from `items`, sized for at least `expected` keys:
/// bulk construction over the items plus placeholder keys, which are then
/// removed again (the structures never shrink on removal, so the capacity
/// stays). `expected <= items.len()` is a plain build.
fn build_sized(
    structure: &str,
    items: &ItemMap,
    value_bits: u32,
    opts: &Opts,
    expected: usize,
) -> Result<AnyControl, String> {
    let pad = expected.saturating_sub(items.len()) as u64;
    let salt = new_epoch();
    let fake = |i: u64| Some(placeholder(salt, i)).filter(|k| !items.contains_key(k.as_slice()));
    let real = items.iter().map(|(k, v)| (std::borrow::Cow::Borrowed(k.as_slice()), *v));
    let pads = (0..pad).filter_map(fake).map(|k| (std::borrow::Cow::Owned(k.to_vec()), 0u64));
    let mut control = AnyControl::build(structure, real.chain(pads), value_bits, opts).map_err(|e| e.to_string())?;
    for k in (0..pad).filter_map(fake) {
        control.remove(&k).map_err(|e| format!("pre-sizing for {expected} keys: {e}"))?;
    }
    Ok(control)
}

/// A fresh epoch number: time and process id, never 0.
pub fn new_epoch() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let x =
        t ^ ((std::process::id() as u64) << 40) ^ N.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x.max(1)
}

impl Table {
    /// Builds the control form (and views) from a record and its entries.
    pub fn build(rec: TableRecord, entries: impl IntoIterator<Item = (Vec<u8>, u64)>) -> Result<Self, String> {
        Self::build_from(rec, entries.into_iter().collect())
    }

    /// Builds the control form (and views) from a record and its entries.
    /// The service option [`EXPECTED_KEYS`] (not passed to the structure)
    /// sizes the control form for that many keys up front.
    pub fn build_from(rec: TableRecord, mut items: ItemMap) -> Result<Self, String> {
        let kf =
            crate::keys::from_pb(rec.key_format).ok_or_else(|| format!("unknown key format {}", rec.key_format))?;
        let mut opts = Opts::new();
        let mut expected = 0usize;
        for (k, v) in &rec.options {
            if k == EXPECTED_KEYS {
                expected = parse_expected(v)?;
            } else {
                opts.push(k, v);
            }
        }
        items.reserve(expected.saturating_sub(items.len()));
        let control = build_sized(&rec.structure, &items, rec.value_bits, &opts, expected)?;
        let net = if rec.topology.is_empty() {
            None
        } else {
            if !matches!(control, AnyControl::Othello(_) | AnyControl::Cfw(_)) {
                return Err(format!(
                    "structure {} has no export_with: network-wide tables need othello or cfw",
                    rec.structure
                ));
            }
            let topo = Topology::parse(&rec.topology).map_err(|e| e.to_string())?;
            let mut down = BTreeSet::new();
            for l in &rec.down_links {
                let (a, b) = l.split_once(' ').ok_or("bad down-link record")?;
                let i = topo.link_index(topo.endpoint(a)?, topo.endpoint(b)?).ok_or("down link not in topology")?;
                down.insert(i);
            }
            let nh = topo.next_hops(&down);
            Some(Net { topo, down, nh, views: Vec::new() })
        };
        let (tx, _) = watch::channel(rec.sequence);
        let mut t = Table {
            rec,
            kf,
            control,
            items,
            epoch: new_epoch(),
            log: Log::default(),
            snapshot: None,
            net,
            tx,
            subscribers: 0,
            rebuilds: 0,
            id: 0,
            poisoned: false,
        };
        if let Some(net) = &t.net {
            let mut views = Vec::new();
            for (s, name) in net.topo.switches.iter().enumerate() {
                let blob = t.export_view(s).map_err(|e| e.to_string())?;
                views.push(View { name: name.clone(), blob: Arc::new(blob), seq: t.rec.sequence, log: Log::default() });
            }
            if let Some(net) = &mut t.net {
                net.views = views;
            }
        }
        Ok(t)
    }

    /// The lookup blob of switch `s`'s view (shared skeleton, `export_with`).
    pub fn export_view(&self, s: usize) -> keyplane::Result<Vec<u8>> {
        let Some(net) = &self.net else {
            return Err(keyplane::Error::InvalidParameter("not a network-wide table".into()));
        };
        let nh = &net.nh;
        let vb = self.rec.value_bits;
        let port = |k: &[u8]| -> u64 {
            let v = self.control.get(k).map_or(topology::NO_ROUTE, |v| topology::port_at(nh, s, v));
            if vb < 64 && v >> vb != 0 { topology::NO_ROUTE } else { v }
        };
        use keyplane::Wire;
        match &self.control {
            AnyControl::Othello(c) => Ok(c.export_with(port)?.to_bytes()),
            AnyControl::Cfw(c) => Ok(c.export_with(port)?.to_bytes()),
            _ => Err(keyplane::Error::Unsupported("export_with".into())),
        }
    }

    /// The durable sequence: every update up to it is committed to the
    /// store and its deltas are in the log. `rec.sequence` can be ahead of
    /// it while the writer applies the next group during a commit.
    pub fn durable(&self) -> u64 {
        *self.tx.borrow()
    }

    /// True when the control form holds exactly the durable state (nothing
    /// applied beyond the last commit, not half-changed), so an export of
    /// it may go to subscribers.
    pub fn settled(&self) -> bool {
        !self.poisoned && self.rec.sequence == self.durable()
    }

    /// The current lookup blob `(sequence, blob)`, cached until the next change.
    pub fn snapshot(&mut self) -> (u64, Arc<Vec<u8>>) {
        let seq = self.rec.sequence;
        if let Some((s, b)) = &self.snapshot {
            if *s == seq {
                return (seq, b.clone());
            }
        }
        let b = Arc::new(self.control.export().to_bytes());
        self.snapshot = Some((seq, b.clone()));
        (seq, b)
    }

    /// Protocol description of the table.
    pub fn info(&mut self) -> pb::TableInfo {
        let (_, blob) = self.snapshot();
        pb::TableInfo {
            name: self.rec.name.clone(),
            structure: self.rec.structure.clone(),
            value_bits: self.rec.value_bits,
            options: self.rec.options.clone().into_iter().collect(),
            key_format: self.rec.key_format,
            n: self.control.len() as u64,
            memory_bytes: keyplane_any::AnyLookup::from_bytes(&blob)
                .map_or(blob.len() as u64, |l| l.memory_bytes() as u64),
            control_memory_bytes: self.control.memory_bytes() as u64,
            sequence: self.durable(),
            epoch: self.epoch,
            log_first_sequence: self.log.first(self.durable()),
            log_length: self.log.len() as u64,
            subscribers: self.subscribers,
            views: self.net.as_ref().map_or_else(Vec::new, |n| n.views.iter().map(|v| v.name.clone()).collect()),
        }
    }

    /// After updates: recomputes the views whose ports changed and logs a
    /// patch for each. `skeleton` is true when keys were added or removed
    /// (the shared graph changed, so every view changes).
    pub fn refresh_views(
        &mut self,
        skeleton: bool,
        changed_keys: &[(Vec<u8>, Option<u64>)],
        old_nh: Option<&[Vec<u16>]>,
        retain: Retain,
    ) {
        let Some(n) = self.net.as_ref().map(|n| n.views.len()) else { return };
        for s in 0..n {
            let net = self.net.as_ref().expect("checked above");
            let affected = skeleton
                || changed_keys.iter().any(|(k, old)| {
                    let new = self.control.get(k);
                    let onh = old_nh.unwrap_or(&net.nh);
                    old.map(|v| topology::port_at(onh, s, v)) != new.map(|v| topology::port_at(&net.nh, s, v))
                })
                || old_nh.is_some_and(|onh| {
                    // A link change: does any host's port at s change?
                    keys_of(&self.control)
                        .iter()
                        .any(|(_, v)| topology::port_at(onh, s, *v) != topology::port_at(&net.nh, s, *v))
                });
            if !affected {
                continue;
            }
            let Ok(blob) = self.export_view(s) else { continue };
            let seq = self.rec.sequence;
            let epoch = self.epoch;
            let net = self.net.as_mut().expect("checked above");
            let v = &mut net.views[s];
            let msg = if blob.len() == v.blob.len() {
                let ranges = diff(&v.blob, &blob);
                let size = ranges.iter().map(|r| r.data.len() + 16).sum::<usize>();
                let patch = pb::Patch { base_sequence: v.seq, sequence: seq, epoch, length: blob.len() as u64, ranges };
                (pb::SubscribeResponse { update: Some(pb::subscribe_response::Update::Patch(patch)) }, size)
            } else {
                let size = blob.len();
                let snap = pb::Snapshot { sequence: seq, epoch, blob: blob.clone() };
                (pb::SubscribeResponse { update: Some(pb::subscribe_response::Update::Snapshot(snap)) }, size)
            };
            v.log.push(v.seq, seq, msg.0, msg.1, retain);
            v.blob = Arc::new(blob);
            v.seq = seq;
        }
    }
}

/// Every `(key, value)` of a control form that can list them (the
/// network-wide structures).
fn keys_of(c: &AnyControl) -> Vec<(Vec<u8>, u64)> {
    match c {
        AnyControl::Othello(c) => c.iter().map(|(k, v)| (k.to_vec(), v)).collect(),
        AnyControl::Cfw(c) => c.iter().map(|(k, v)| (k.to_vec(), v)).collect(),
        _ => Vec::new(),
    }
}

/// Byte ranges where `new` differs from `old` (same length), merging ranges
/// closer than 16 bytes.
pub fn diff(old: &[u8], new: &[u8]) -> Vec<pb::Range> {
    let mut out: Vec<pb::Range> = Vec::new();
    let mut i = 0;
    while i < new.len() {
        if old.get(i) == Some(&new[i]) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < new.len() && j < end + 16 {
            if old.get(j) != Some(&new[j]) {
                end = j + 1;
            }
            j += 1;
        }
        out.push(pb::Range { offset: start as u64, data: new[start..end].to_vec() });
        i = end;
    }
    out
}

/// Applies a patch's ranges to `base`, producing the new blob (bounds checked).
pub fn apply_patch(base: &[u8], p: &pb::Patch) -> Result<Vec<u8>, String> {
    if p.length as usize != base.len() {
        return Err(format!("patch for a {}-byte blob, ours has {} bytes", p.length, base.len()));
    }
    let mut out = base.to_vec();
    for r in &p.ranges {
        let o = usize::try_from(r.offset).map_err(|_| "patch offset overflows")?;
        let end = o.checked_add(r.data.len()).filter(|e| *e <= out.len()).ok_or("patch range past the blob's end")?;
        out[o..end].copy_from_slice(&r.data);
    }
    Ok(out)
}
