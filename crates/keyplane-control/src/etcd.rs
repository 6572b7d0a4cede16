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
use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
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
        })
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

    /// Log groups with index > `after`, in order, and the etcd revision of the read.
    pub async fn read_log(&self, after: u64) -> Result<(Vec<(u64, Vec<u8>)>, i64)> {
        let mut kv = self.client.kv_client();
        let start = self.log_key(after + 1);
        let end = format!("{}log0", self.prefix); // '0' follows '/'
        let r = kv.get(start, Some(GetOptions::new().with_range(end))).await.map_err(etcd_err)?;
        let rev = r.header().map_or(0, |h| h.revision());
        let mut out = Vec::new();
        for kv in r.kvs() {
            if let Some(i) = self.index_of(kv.key()) {
                out.push((i, kv.value().to_vec()));
            }
        }
        out.sort_by_key(|(i, _)| *i);
        Ok((out, rev))
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
