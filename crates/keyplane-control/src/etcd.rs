//! The etcd store (`keyplane serve --etcd URL[,URL]`): tables and the write
//! log live in etcd, so several service instances can run for availability.
//!
//! Layout under the prefix (default `/keyplane/`):
//!
//! * `log/NNNNNNNNNNNNNNNNNNNN`: one key per group commit, in index order,
//!   holding the group's bytes (the same encoding as the embedded store's
//!   log frames, [`crate::store::Group`]). The state is the log replayed
//!   from index 1.
//! * `leader`: the leader's gRPC URL and a unique instance id, attached to
//!   the leader's lease (TTL [`LEASE_TTL`] s, renewed every third of it).
//! * `snapshot`: `"I N"`, the newest complete snapshot: the state after log
//!   group I, in N chunks `snap/IIIIIIIIIIIIIIIIIIII/KKKKKK` (each a group
//!   encoding of records and entries, under 1 MiB so it fits etcd's request
//!   limit). The state is that snapshot plus the log groups after I.
//!
//! **Compaction.** The leader folds the log into a snapshot every
//! [`EtcdStore::set_compact_every`] groups (default [`COMPACT_EVERY`]),
//! from etcd alone (snapshot + log read at one revision; never the
//! service's lock): it writes the chunks, then the `snapshot` pointer (one
//! transaction fenced on leadership), then deletes the log groups ≤ I and
//! older snapshot chunks, and compacts etcd's key history up to the
//! pointer's revision. A crash at any step leaves the old pointer and its
//! chunks or the new ones complete. Readers (start-up, a follower that
//! fell behind or lost its watch) read the pointer and the log at one
//! revision: a reader behind I loads the snapshot first.
//!
//! One leader writes: an instance becomes leader by creating `leader` when
//! it is absent (a transaction), then catches up with the log and starts
//! writing. Every group commit is one transaction that puts the next log
//! key only if `leader` still holds this instance's id, so an instance that
//! lost its lease (paused, partitioned) can never append: its commit fails,
//! the batch is refused, and it steps down. A batch is acknowledged after
//! etcd committed the transaction (a quorum of members has it on disk).
//!
//! The other instances follow: they watch `log/` and apply each group to
//! their own control forms (their own epochs: a subscriber that moves to
//! another instance resyncs from one blob), serve `Read`, `Describe`,
//! `List` and `Subscribe`, and FORWARD `Write`, `CreateTable`, `DropTable`
//! and `SetLink` to the leader's URL. When `leader` disappears (the leader
//! died and its lease expired), a follower takes over within about
//! [`LEASE_TTL`] seconds plus [`CAMPAIGN_EVERY`].

use crate::error::{ControlError, Result};
use etcd_client::{Client, Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Seconds of the leader's lease.
pub const LEASE_TTL: i64 = 2;
/// How often a follower tries to become leader.
pub const CAMPAIGN_EVERY: Duration = Duration::from_millis(250);
/// Largest group one transaction carries (etcd's default request limit is
/// 1.5 MiB; the writer stops adding batches to a group past this).
pub const MAX_GROUP_BYTES: usize = 1 << 20;
/// Default number of log groups between compactions.
pub const COMPACT_EVERY: u64 = 4096;
/// Largest snapshot chunk (bytes of one etcd value).
const SNAP_CHUNK_BYTES: usize = 900 << 10;

/// What a reader must apply to reach the end of the log.
#[derive(Debug)]
pub struct Catchup {
    /// A snapshot to load first (the reader was behind it): the state after
    /// log group `.0`.
    pub snapshot: Option<(u64, crate::store::State)>,
    /// Log groups after the reader's position (or after the snapshot), in order.
    pub log: Vec<(u64, Vec<u8>)>,
    /// The etcd revision everything was read at (watch from the next one).
    pub revision: i64,
}

fn etcd_err(e: etcd_client::Error) -> ControlError {
    ControlError::Etcd(e.to_string())
}

/// The etcd store of one instance.
pub struct EtcdStore {
    client: Client,
    prefix: String,
    /// This instance's id (written into `leader`).
    id: String,
    /// The gRPC URL other instances forward writes to.
    url: String,
    /// Last log index reflected in memory.
    pub index: AtomicU64,
    leader: AtomicBool,
    lease: AtomicU64,
    rt: tokio::runtime::Handle,
    /// The leader's URL as last seen.
    leader_url: Mutex<Option<String>>,
    /// Log index of the newest snapshot this instance knows of.
    snap_index: AtomicU64,
    /// Groups between compactions (0: never).
    compact_every: AtomicU64,
    /// Compactions this instance finished.
    pub compactions: AtomicU64,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EtcdStore({} {})", self.prefix, self.id)
    }
}

impl EtcdStore {
    /// Connects to the endpoints.
    pub async fn connect(endpoints: &[String], prefix: &str, url: &str) -> Result<Self> {
        let opts = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(3))
            .with_timeout(Duration::from_secs(5));
        let client = Client::connect(endpoints, Some(opts)).await.map_err(etcd_err)?;
        let id = format!("{url} {:016x}", crate::table::new_epoch());
        Ok(Self {
            client,
            prefix: prefix.to_string(),
            id,
            url: url.to_string(),
            index: AtomicU64::new(0),
            leader: AtomicBool::new(false),
            lease: AtomicU64::new(0),
            rt: tokio::runtime::Handle::current(),
            leader_url: Mutex::new(None),
            snap_index: AtomicU64::new(0),
            compact_every: AtomicU64::new(COMPACT_EVERY),
            compactions: AtomicU64::new(0),
        })
    }

    /// Folds the log into a snapshot every `groups` log groups (0: never).
    pub fn set_compact_every(&self, groups: u64) {
        self.compact_every.store(groups, Ordering::Release);
    }

    fn snap_key(&self) -> String {
        format!("{}snapshot", self.prefix)
    }

    fn chunk_key(&self, i: u64, k: usize) -> String {
        format!("{}snap/{i:020}/{k:06}", self.prefix)
    }

    /// Everything after log index `after`: the snapshot first when the log
    /// no longer holds `after + 1`, then the log; all read at one revision.
    pub async fn catch_up(&self, after: u64) -> Result<Catchup> {
        let mut kv = self.client.kv_client();
        let r = kv.get(self.snap_key(), None).await.map_err(etcd_err)?;
        let revision = r.header().map_or(0, |h| h.revision());
        let pointer = match r.kvs().first() {
            Some(kv) => {
                let v = std::str::from_utf8(kv.value()).unwrap_or("");
                let mut it = v.split(' ').map(|x| x.parse::<u64>());
                match (it.next(), it.next()) {
                    (Some(Ok(i)), Some(Ok(n))) => Some((i, n as usize)),
                    _ => return Err(ControlError::Etcd(format!("bad snapshot pointer {v:?} in etcd"))),
                }
            }
            None => None,
        };
        let mut snapshot = None;
        let mut from = after;
        if let Some((si, n)) = pointer {
            self.snap_index.fetch_max(si, Ordering::AcqRel);
            if after < si {
                let opts = GetOptions::new().with_range(self.chunk_key(si, n)).with_revision(revision);
                let r = kv.get(self.chunk_key(si, 0), Some(opts)).await.map_err(etcd_err)?;
                if r.kvs().len() != n {
                    return Err(ControlError::Etcd(format!(
                        "snapshot {si} has {} of its {n} chunks in etcd",
                        r.kvs().len()
                    )));
                }
                let mut state = crate::store::State::new();
                for kv in r.kvs() {
                    let (ops, _) = crate::store::decode_ops(kv.value())?;
                    crate::store::apply_ops(&mut state, ops);
                }
                snapshot = Some((si, state));
                from = si;
            }
        }
        let log = self.read_log_at(from, revision).await?;
        if let Some(&(first, _)) = log.first() {
            if first != from + 1 {
                return Err(ControlError::Etcd(format!(
                    "the etcd log starts at group {first}, after {from} was expected (compacted without a snapshot?)"
                )));
            }
        }
        Ok(Catchup { snapshot, log, revision })
    }

    async fn read_log_at(&self, after: u64, revision: i64) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut kv = self.client.kv_client();
        let end = format!("{}log0", self.prefix); // '0' follows '/'
        let r = kv
            .get(self.log_key(after + 1), Some(GetOptions::new().with_range(end).with_revision(revision)))
            .await
            .map_err(etcd_err)?;
        let mut out = Vec::new();
        for kv in r.kvs() {
            if let Some(i) = self.index_of(kv.key()) {
                out.push((i, kv.value().to_vec()));
            }
        }
        out.sort_by_key(|(i, _)| *i);
        Ok(out)
    }

    /// On the leader: when [`Self::set_compact_every`] groups were
    /// committed since the last snapshot, folds the log into a new one (see
    /// the module docs). Returns the snapshot's index when it made one.
    pub async fn maybe_compact(&self) -> Result<Option<u64>> {
        let every = self.compact_every.load(Ordering::Acquire);
        let last = self.snap_index.load(Ordering::Acquire);
        if every == 0 || !self.is_leader() || self.index.load(Ordering::Acquire) < last + every {
            return Ok(None);
        }
        // Fold from etcd alone (older snapshot + log at one revision).
        let c = self.catch_up(0).await?;
        let (base, mut state) = c.snapshot.unwrap_or_else(|| (0, crate::store::State::new()));
        let mut upto = base;
        for (i, g) in &c.log {
            let (ops, _) = crate::store::decode_ops(g)?;
            crate::store::apply_ops(&mut state, ops);
            upto = *i;
        }
        if upto <= base {
            return Ok(None);
        }
        let chunks = snapshot_chunks(&state);
        let mut client = self.client.clone();
        let fence = || Compare::value(self.leader_key(), CompareOp::Equal, self.id.clone());
        for (k, chunk) in chunks.iter().enumerate() {
            let txn = Txn::new().when([fence()]).and_then([TxnOp::put(self.chunk_key(upto, k), chunk.clone(), None)]);
            if !client.txn(txn).await.map_err(etcd_err)?.succeeded() {
                return Err(ControlError::Etcd("leadership lost during compaction".into()));
            }
        }
        // The pointer, then the log and chunks it replaces.
        let del = |from: String, to: String| TxnOp::delete(from, Some(DeleteOptions::new().with_range(to)));
        let snap = format!("{}snap/", self.prefix);
        let txn = Txn::new().when([fence()]).and_then([
            TxnOp::put(self.snap_key(), format!("{upto} {}", chunks.len()), None),
            del(self.log_key(0), self.log_key(upto + 1)),
            del(snap, format!("{}snap/{upto:020}/", self.prefix)),
            del(format!("{}snap/{:020}/", self.prefix, upto + 1), format!("{}snap0", self.prefix)),
        ]);
        let r = client.txn(txn).await.map_err(etcd_err)?;
        if !r.succeeded() {
            return Err(ControlError::Etcd("leadership lost during compaction".into()));
        }
        self.snap_index.fetch_max(upto, Ordering::AcqRel);
        // Drop etcd's history of the deleted keys too.
        if let Some(rev) = r.header().map(|h| h.revision()) {
            client.compact(rev, None).await.map_err(etcd_err)?;
        }
        self.compactions.fetch_add(1, Ordering::AcqRel);
        Ok(Some(upto))
    }

    fn log_key(&self, i: u64) -> String {
        format!("{}log/{i:020}", self.prefix)
    }

    fn leader_key(&self) -> String {
        format!("{}leader", self.prefix)
    }

    /// Log index of a log key.
    pub fn index_of(&self, key: &[u8]) -> Option<u64> {
        std::str::from_utf8(key).ok()?.strip_prefix(&format!("{}log/", self.prefix))?.parse().ok()
    }

    /// True while this instance is the leader.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }

    /// The leader's URL (None: no leader known).
    pub fn leader_url(&self) -> Option<String> {
        if self.is_leader() {
            return Some(self.url.clone());
        }
        self.leader_url.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Tries to become leader (creates `leader` with a fresh lease when it is
    /// absent). Returns true on success; refreshes the known leader URL.
    pub async fn campaign(&self) -> Result<bool> {
        let mut c = self.client.clone();
        let lease = c.lease_grant(LEASE_TTL, None).await.map_err(etcd_err)?.id();
        let key = self.leader_key();
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), self.id.clone(), Some(PutOptions::new().with_lease(lease)))])
            .or_else([TxnOp::get(key.clone(), None)]);
        let r = c.txn(txn).await.map_err(etcd_err)?;
        if r.succeeded() {
            self.lease.store(lease as u64, Ordering::Release);
            return Ok(true);
        }
        let _ = c.lease_revoke(lease).await;
        for op in r.op_responses() {
            if let etcd_client::TxnOpResponse::Get(g) = op {
                if let Some(kv) = g.kvs().first() {
                    let v = String::from_utf8_lossy(kv.value());
                    let url = v.split(' ').next().unwrap_or("").to_string();
                    *self.leader_url.lock().unwrap_or_else(|p| p.into_inner()) = Some(url);
                }
            }
        }
        Ok(false)
    }

    /// Starts writing as leader (after catching up to `index`), and keeps
    /// the lease alive until it fails; then steps down.
    pub fn lead(self: &std::sync::Arc<Self>) {
        self.leader.store(true, Ordering::Release);
        let me = self.clone();
        tokio::spawn(async move {
            let lease = me.lease.load(Ordering::Acquire) as i64;
            let mut c = me.client.clone();
            let ok = async {
                let (mut keeper, mut stream) = c.lease_keep_alive(lease).await.ok()?;
                loop {
                    tokio::time::sleep(Duration::from_millis((LEASE_TTL as u64 * 1000) / 3)).await;
                    if !me.is_leader() {
                        return Some(());
                    }
                    keeper.keep_alive().await.ok()?;
                    let r = stream.message().await.ok()??;
                    if r.ttl() <= 0 {
                        return None;
                    }
                }
            }
            .await;
            if ok.is_none() {
                eprintln!("keyplane serve: the etcd lease was lost; stepping down");
            }
            me.step_down();
        });
    }

    /// Stops acting as leader.
    pub fn step_down(&self) {
        self.leader.store(false, Ordering::Release);
    }

    /// Appends one group as the next log key, fenced on leadership (called
    /// from the writer thread). Acknowledgeable when it returns `Ok`.
    pub fn commit(&self, group: &[u8]) -> Result<()> {
        if group.is_empty() {
            return Ok(());
        }
        if !self.is_leader() {
            return Err(ControlError::Etcd("this instance is not the leader (writes go to the leader)".into()));
        }
        let i = self.index.load(Ordering::Acquire) + 1;
        let txn = Txn::new()
            .when([Compare::value(self.leader_key(), CompareOp::Equal, self.id.clone())])
            .and_then([TxnOp::put(self.log_key(i), group.to_vec(), None)]);
        let mut c = self.client.clone();
        let r = self.rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), c.txn(txn)).await });
        match r {
            Ok(Ok(r)) if r.succeeded() => {
                self.index.store(i, Ordering::Release);
                Ok(())
            }
            Ok(Ok(_)) => {
                self.step_down();
                Err(ControlError::Etcd("leadership lost before the commit (another instance leads now)".into()))
            }
            Ok(Err(e)) => Err(etcd_err(e)),
            Err(_) => Err(ControlError::Etcd("etcd commit timed out after 5 s".into())),
        }
    }

    /// Watches `log/` from `revision` (a stream of put events).
    pub async fn watch_log(&self, revision: i64) -> Result<etcd_client::WatchStream> {
        let mut c = self.client.clone();
        let opts = etcd_client::WatchOptions::new().with_prefix().with_start_revision(revision);
        c.watch(format!("{}log/", self.prefix), Some(opts)).await.map_err(etcd_err)
    }
}

/// A state as snapshot chunks: per table its record, then its entries, in
/// group encodings of at most about [`SNAP_CHUNK_BYTES`] each.
fn snapshot_chunks(state: &crate::store::State) -> Vec<Vec<u8>> {
    use crate::store::Group;
    let mut out = Vec::new();
    let mut names: Vec<&String> = state.keys().collect();
    names.sort();
    for name in names {
        let (rec, m) = &state[name];
        let mut g = Group::new();
        g.record(rec);
        out.push(g.finish());
        let mut g = Group::new();
        for (k, v) in m {
            if g.is_empty() {
                g.begin_entries(name);
            }
            g.entry(k, Some(*v));
            if g.len() >= SNAP_CHUNK_BYTES {
                out.push(std::mem::take(&mut g).finish());
            }
        }
        if !g.is_empty() {
            out.push(g.finish());
        }
    }
    out
}
