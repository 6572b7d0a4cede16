//! The gRPC service: one writer thread applies batches and group-commits
//! them to the store; RPC handlers validate, read and stream.
//!
//! The write path is a two-stage pipeline (pipelined group commit): the
//! writer thread applies group N+1 to the control forms while the commit
//! thread makes group N durable (append + fdatasync) WITHOUT holding the
//! state lock, then takes the lock only to publish group N (delta log,
//! committed entries, acknowledgements). So subscribers and the next apply
//! never wait for an fsync. What stays true:
//!
//! * a batch is acknowledged only after its group's commit returned;
//! * subscribers only see published (durable) deltas, in order: a table's
//!   durable sequence ([`Table::durable`]) can lag `rec.sequence` while a
//!   group is in flight, and snapshots for subscribers are exported only
//!   from a settled control form (else the writer exports one between
//!   groups);
//! * commits happen in apply order; when one fails, every group applied
//!   after it (its state built on the failed one) is refused without being
//!   committed, and the touched tables are rebuilt from their committed
//!   entries (see `undo`);
//! * table creation, drops, link changes and writes to network-wide tables
//!   run as barrier groups (nothing else in flight), so only plain writes
//!   overlap a commit.

use crate::error::Result;
use crate::etcd::EtcdStore;
use crate::metrics::{ServiceMetrics, SubLabel, TableLabel};
use crate::pb::{self, update::Type};
use crate::store::{Group, Op, Store, TableRecord};
use crate::table::{Retain, Table};
use crate::{keys, topology};
use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::oneshot;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// Most write batches one group commit takes.
const MAX_GROUP: usize = 1024;
/// Entries per Read chunk.
const READ_CHUNK: usize = 1024;
/// Messages a subscription takes from the log per lock.
const SUB_CHUNK: usize = 1024;
/// Longest table name.
const MAX_NAME: usize = 128;

/// Tables by name, under one lock (the writer holds it across a group commit).
#[derive(Debug, Default)]
pub struct State {
    /// The tables.
    pub tables: BTreeMap<String, Table>,
}

/// What handlers and the writer share.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<State>,
    store: Backend,
    /// A client to the leader (etcd followers forward writes to it).
    forward: tokio::sync::Mutex<Option<(String, crate::client::Client)>>,
    metrics: Arc<ServiceMetrics>,
    retain: Retain,
    next_table_id: AtomicU64,
    /// Commit failures so far (changed under the state lock by the commit
    /// thread): a group applied under an older count is stale.
    fail_gen: AtomicU64,
    /// The writer's queue (weak, so the writer stops when the last
    /// `Service` handle is dropped); subscriptions ask it for snapshots.
    jobs: tokio::sync::mpsc::WeakSender<JobBox>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied batch
        // visible (deltas are published after commit), so keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

type Reply<T> = oneshot::Sender<Result<T, Status>>;

enum Job {
    Create(pb::CreateTableRequest, Reply<pb::TableInfo>),
    Drop(String, Reply<()>),
    Write(pb::WriteRequest, Reply<u64>),
    SetLink(pb::SetLinkRequest, Reply<u64>),
    /// Export table NAME's lookup form between groups (nothing in flight):
    /// `(sequence, epoch, blob)`.
    Snapshot(String, Reply<(u64, u64, Arc<Vec<u8>>)>),
}

/// The service handle: implements the generated `Control` trait.
#[derive(Debug, Clone)]
pub struct Service {
    shared: Arc<Shared>,
    jobs: tokio::sync::mpsc::Sender<JobBox>,
}

struct JobBox(Job);

impl std::fmt::Debug for JobBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

/// Where the service keeps its tables.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The embedded log store (one directory).
    Log(Arc<Store>),
    /// etcd (several instances, one leader).
    Etcd(Arc<EtcdStore>),
}

impl Backend {
    fn commit(&self, group: &[u8]) -> Result<()> {
        match self {
            Backend::Log(s) => s.commit(group),
            Backend::Etcd(e) => e.commit(group),
        }
    }

    fn max_group_bytes(&self) -> usize {
        match self {
            Backend::Log(_) => usize::MAX,
            Backend::Etcd(_) => crate::etcd::MAX_GROUP_BYTES,
        }
    }
}

impl Service {
    /// Opens the embedded store, rebuilds every table from it (a new epoch
    /// each) and starts the writer thread.
    pub fn open(store: Store, metrics: Arc<ServiceMetrics>, retain: Retain) -> Result<Self> {
        let store = Arc::new(store);
        let tables = store.load()?;
        Self::start(Backend::Log(store), tables, metrics, retain)
    }

    /// Connects to etcd, replays its log, and starts following it (and
    /// campaigning to lead); see [`crate::etcd`].
    pub async fn open_etcd(etcd: EtcdStore, metrics: Arc<ServiceMetrics>, retain: Retain) -> Result<Self> {
        let etcd = Arc::new(etcd);
        let c = etcd.catch_up(0).await?;
        let rev = c.revision;
        let (mut last, mut state) = c.snapshot.unwrap_or_else(|| (0, crate::store::State::new()));
        for (i, g) in c.log {
            let (ops, _) = crate::store::decode_ops(&g)?;
            crate::store::apply_ops(&mut state, ops);
            last = i;
        }
        etcd.index.store(last, Ordering::Release);
        let tables = tokio::task::block_in_place(|| crate::store::into_tables(state));
        let svc = tokio::task::block_in_place(|| Self::start(Backend::Etcd(etcd.clone()), tables, metrics, retain))?;
        tokio::spawn(etcd_role(svc.shared.clone(), etcd, rev));
        Ok(svc)
    }

    fn start(
        store: Backend,
        tables: Vec<(TableRecord, crate::store::Entries)>,
        metrics: Arc<ServiceMetrics>,
        retain: Retain,
    ) -> Result<Self> {
        let mut state = State::default();
        for (rec, entries) in tables {
            let name = rec.name.clone();
            let mut t = Table::build(rec, entries)
                .map_err(|e| crate::ControlError::Store(format!("table {name:?} does not rebuild: {e}")))?;
            t.rebuilds = 1;
            metrics.table_rebuilds.get_or_create(&TableLabel { table: name.clone() }).inc();
            state.tables.insert(name, t);
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<JobBox>(4096);
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            store,
            forward: tokio::sync::Mutex::new(None),
            metrics,
            retain,
            next_table_id: AtomicU64::new(1),
            fail_gen: AtomicU64::new(0),
            jobs: tx.downgrade(),
        });
        {
            let mut st = shared.lock();
            for t in st.tables.values_mut() {
                t.id = shared.next_table_id.fetch_add(1, Ordering::Relaxed);
                publish_gauges(&shared.metrics, t);
            }
        }
        let sh = shared.clone();
        std::thread::Builder::new().name("keyplane-writer".into()).spawn(move || writer(sh, rx))?;
        Ok(Self { shared, jobs: tx })
    }

    async fn submit<T>(&self, make: impl FnOnce(Reply<T>) -> Job) -> Result<T, Status> {
        let (tx, rx) = oneshot::channel();
        // The queue is bounded: a full queue makes this task wait (back-pressure).
        self.jobs.send(JobBox(make(tx))).await.map_err(|_| Status::unavailable("the writer has stopped"))?;
        rx.await.map_err(|_| Status::internal("the writer dropped the request"))?
    }
}

fn invalid(i: usize, m: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("update {i}: {m}"))
}

fn check_name(name: &str) -> Result<(), Status> {
    if name.is_empty()
        || name.len() > MAX_NAME
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(Status::invalid_argument(format!(
            "table name {name:?}: use 1..{MAX_NAME} characters of A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

fn no_table(name: &str) -> Status {
    Status::not_found(format!("no table {name:?} (keyplane ctl list shows the tables)"))
}

fn publish_gauges(m: &ServiceMetrics, t: &mut Table) {
    let l = TableLabel { table: t.rec.name.clone() };
    m.table_keys.get_or_create(&l).set(t.control.len() as i64);
    m.table_sequence.get_or_create(&l).set(t.rec.sequence as i64);
    m.table_log_length.get_or_create(&l).set(t.log.len() as i64);
    m.table_subscribers.get_or_create(&l).set(t.subscribers as i64);
}

fn forget_gauges(m: &ServiceMetrics, name: &str) {
    let l = TableLabel { table: name.to_string() };
    m.table_keys.remove(&l);
    m.table_sequence.remove(&l);
    m.table_log_length.remove(&l);
    m.table_subscribers.remove(&l);
    m.table_memory_bytes.remove(&l);
}

/// What a job did in memory, published once the store has committed.
enum Effect {
    Created(Reply<pb::TableInfo>, String),
    /// The dropped table is kept until the commit (a failed commit puts it back).
    Dropped(Reply<()>, Box<Table>),
    Wrote {
        reply: Reply<u64>,
        table: String,
        epoch: u64,
        base: u64,
        /// The table's sequence after the batch.
        end: u64,
        deltas: Vec<Vec<u8>>,
        net: Option<NetChange>,
        /// The entries the batch changed (committed to `Table::items` on publish).
        changes: Vec<(Vec<u8>, Option<u64>)>,
    },
}

struct NetChange {
    skeleton: bool,
    keys: Vec<(Vec<u8>, Option<u64>)>,
    old_nh: Option<Vec<Vec<u16>>>,
}

fn phase(sh: &Shared, name: &str, since: Instant) {
    let l = crate::metrics::PhaseLabel { phase: name.to_string() };
    sh.metrics.writer_phase_seconds.get_or_create(&l).observe(since.elapsed().as_secs_f64());
}

/// One applied group on its way to the commit thread.
struct Pending {
    /// `Shared::fail_gen` when the group was applied.
    fails: u64,
    bytes: Vec<u8>,
    effects: Vec<Effect>,
    /// Each table touched by the group with its record before the group
    /// (`None`: it did not exist), to undo the group if it is not committed.
    before: HashMap<String, Option<TableRecord>>,
    ngroup: usize,
}

/// True for jobs that must not overlap a commit in flight: everything but
/// plain writes (creates, drops, link changes, snapshots, writes to
/// network-wide tables, whose views are computed at publish).
fn is_barrier(st: &State, job: &Job) -> bool {
    match job {
        Job::Write(r, _) => st.tables.get(&r.table).is_some_and(|t| t.net.is_some()),
        _ => true,
    }
}

/// The apply stage: takes queued jobs, applies a group to the control forms
/// under the state lock, and hands it to the commit thread (a rendezvous:
/// at most one group is applied ahead of the one being committed).
fn writer(sh: Arc<Shared>, mut rx: tokio::sync::mpsc::Receiver<JobBox>) {
    let (to_commit, pending) = std::sync::mpsc::sync_channel::<Pending>(0);
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    let csh = sh.clone();
    let committer = match std::thread::Builder::new()
        .name("keyplane-commit".into())
        .spawn(move || commit_stage(csh, pending, done_tx))
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("keyplane serve: cannot start the commit thread: {e}; writes are refused");
            return;
        }
    };
    // Groups handed to the commit thread and not yet published.
    let mut inflight = 0usize;
    let drain = |inflight: &mut usize| {
        while *inflight > 0 && done.recv().is_ok() {
            *inflight -= 1;
        }
    };
    let mut stash: Option<Job> = None;
    loop {
        let first = match stash.take() {
            Some(j) => j,
            None => match rx.blocking_recv() {
                Some(JobBox(j)) => j,
                None => break,
            },
        };
        while inflight > 0 && done.try_recv().is_ok() {
            inflight -= 1;
        }
        let t_apply = Instant::now();
        let mut st = sh.lock();
        let barrier = is_barrier(&st, &first);
        if barrier && inflight > 0 {
            drop(st);
            drain(&mut inflight);
            st = sh.lock();
        }
        if let Job::Snapshot(name, reply) = first {
            // Nothing in flight and no poisoned form (rebuilt right after
            // its group): the control form is the durable state.
            let r = st.tables.get_mut(&name).map(|t| {
                let (seq, blob) = t.snapshot();
                (seq, t.epoch, blob)
            });
            let _ = reply.send(r.ok_or_else(|| no_table(&name)));
            continue;
        }
        let fails = sh.fail_gen.load(Ordering::Acquire);
        let mut group = Group::new();
        let mut effects: Vec<Effect> = Vec::new();
        let mut before: HashMap<String, Option<TableRecord>> = HashMap::new();
        // Tables whose control form refused an update mid-batch.
        let mut poisoned: Vec<String> = Vec::new();
        let cap = sh.store.max_group_bytes();
        let mut ngroup = 0;
        let mut next = Some(first);
        while let Some(job) = next.take().or_else(|| {
            // Take more batches while the group is small enough.
            if poisoned.is_empty() && ngroup < MAX_GROUP && group.len() < cap {
                rx.try_recv().ok().map(|JobBox(j)| j)
            } else {
                None
            }
        }) {
            if matches!(job, Job::Snapshot(..)) || (!barrier && is_barrier(&st, &job)) {
                // Runs first in a group of its own.
                stash = Some(job);
                break;
            }
            ngroup += 1;
            let name = match &job {
                Job::Create(r, _) => r.name.clone(),
                Job::Drop(n, _) => n.clone(),
                Job::Write(r, _) => r.table.clone(),
                Job::SetLink(r, _) => r.table.clone(),
                Job::Snapshot(n, _) => n.clone(),
            };
            if !before.contains_key(&name) {
                let rec = st.tables.get(&name).map(|t| t.rec.clone());
                before.insert(name.clone(), rec);
            }
            match job {
                Job::Create(req, reply) => match create(&sh, &mut st, req, &mut group) {
                    Ok(name) => effects.push(Effect::Created(reply, name)),
                    Err(s) => {
                        let _ = reply.send(Err(s));
                    }
                },
                Job::Drop(name, reply) => {
                    if let Some(t) = st.tables.remove(&name) {
                        forget_gauges(&sh.metrics, &name);
                        group.drop_table(&name);
                        effects.push(Effect::Dropped(reply, Box::new(t)));
                    } else {
                        let _ = reply.send(Err(no_table(&name)));
                    }
                }
                Job::Write(req, reply) => {
                    let mark = group.mark();
                    let table = req.table.clone();
                    match write(&mut st, req, &mut group) {
                        Ok(w) => effects.push(Effect::Wrote {
                            reply,
                            table,
                            epoch: w.epoch,
                            base: w.base,
                            end: w.end,
                            deltas: w.deltas,
                            net: w.net,
                            changes: w.changes,
                        }),
                        Err((s, poison)) => {
                            group.truncate(mark);
                            sh.metrics.write_errors.inc();
                            if poison {
                                // The control form may be half-changed: end
                                // the group here; once everything before is
                                // published it is rebuilt from the committed
                                // entries (a new epoch).
                                if let Some(t) = st.tables.get_mut(&table) {
                                    t.poisoned = true;
                                }
                                poisoned.push(table);
                            }
                            let _ = reply.send(Err(s));
                        }
                    }
                }
                Job::SetLink(req, reply) => match set_link(&mut st, &req, &mut group) {
                    Ok((epoch, base, old_nh)) => effects.push(Effect::Wrote {
                        reply,
                        table: req.table,
                        epoch,
                        base,
                        end: base + 1,
                        deltas: Vec::new(),
                        net: Some(NetChange { skeleton: false, keys: Vec::new(), old_nh: Some(old_nh) }),
                        changes: Vec::new(),
                    }),
                    Err(s) => {
                        let _ = reply.send(Err(s));
                    }
                },
                Job::Snapshot(..) => unreachable!("snapshots are stashed above"),
            }
        }
        drop(st);
        phase(&sh, "apply", t_apply);
        let p = Pending { fails, bytes: group.finish(), effects, before, ngroup };
        if to_commit.send(p).is_err() {
            break;
        }
        inflight += 1;
        if barrier || !poisoned.is_empty() {
            drain(&mut inflight);
        }
        if !poisoned.is_empty() {
            let mut st = sh.lock();
            for name in poisoned {
                rebuild(&sh, &mut st, &name, None, std::iter::empty());
            }
        }
    }
    drop(to_commit);
    let _ = committer.join();
}

/// The commit stage: makes each group durable without the state lock, then
/// publishes it under the lock (or, when it is not committed, undoes it).
fn commit_stage(sh: Arc<Shared>, pending: std::sync::mpsc::Receiver<Pending>, done: std::sync::mpsc::Sender<()>) {
    // Tables rebuilt since the last commit failure, with their epoch then.
    let mut restored: HashMap<String, u64> = HashMap::new();
    while let Ok(p) = pending.recv() {
        // Only this thread changes `fail_gen`.
        let stale = p.fails != sh.fail_gen.load(Ordering::Acquire);
        let t0 = Instant::now();
        let res = if stale {
            Err("an earlier group's store commit failed, so this group (applied on top of it) was not committed".into())
        } else {
            let r = sh.store.commit(&p.bytes).map_err(|e| e.to_string());
            sh.metrics.store_commit_seconds.observe(t0.elapsed().as_secs_f64());
            sh.metrics.group_size.observe(p.ngroup as f64);
            phase(&sh, "store", t0);
            r
        };
        let t_pub = Instant::now();
        let mut st = sh.lock();
        match res {
            Ok(()) => {
                for e in p.effects {
                    publish(&sh, &mut st, e);
                }
            }
            Err(err) => {
                if !stale {
                    sh.fail_gen.fetch_add(1, Ordering::AcqRel);
                    restored.clear();
                }
                undo(&sh, &mut st, p.effects, p.before, &mut restored, &err);
            }
        }
        drop(st);
        phase(&sh, "publish", t_pub);
        if done.send(()).is_err() {
            break;
        }
    }
}

/// A group that was not committed: refuse its batches and rebuild the
/// tables it touched from their committed entries (new epochs). A table
/// already rebuilt after the same failure and untouched since (same epoch)
/// is left alone: that rebuild also discarded this group's changes.
fn undo(
    sh: &Shared,
    st: &mut State,
    effects: Vec<Effect>,
    before: HashMap<String, Option<TableRecord>>,
    restored: &mut HashMap<String, u64>,
    err: &str,
) {
    let mut replies: Vec<Box<dyn FnOnce(Status)>> = Vec::new();
    for e in effects {
        match e {
            Effect::Created(r, _) => replies.push(Box::new(move |s| drop(r.send(Err(s))))),
            Effect::Dropped(r, t) => {
                st.tables.entry(t.rec.name.clone()).or_insert(*t);
                replies.push(Box::new(move |s| drop(r.send(Err(s)))));
            }
            Effect::Wrote { reply, .. } => replies.push(Box::new(move |s| drop(reply.send(Err(s))))),
        }
    }
    for (name, rec) in before {
        if let Some(&ep) = restored.get(&name) {
            if st.tables.get(&name).is_some_and(|t| t.epoch == ep) {
                continue;
            }
        }
        match rec {
            None => {
                if st.tables.remove(&name).is_some() {
                    forget_gauges(&sh.metrics, &name);
                }
            }
            Some(rec) => {
                rebuild(sh, st, &name, Some(rec), std::iter::empty());
                if let Some(t) = st.tables.get(&name) {
                    restored.insert(name, t.epoch);
                }
            }
        }
    }
    for r in replies {
        sh.metrics.write_errors.inc();
        r(Status::unavailable(format!("store commit failed, batch not applied: {err}")));
    }
}

fn publish(sh: &Shared, st: &mut State, e: Effect) {
    match e {
        Effect::Created(reply, name) => {
            let info = st.tables.get_mut(&name).map(|t| {
                publish_gauges(&sh.metrics, t);
                t.info()
            });
            let _ = reply.send(info.ok_or_else(|| no_table(&name)));
        }
        Effect::Dropped(reply, _) => {
            let _ = reply.send(Ok(()));
        }
        Effect::Wrote { reply, table, epoch, base, end, deltas, net, changes } => {
            let Some(t) = st.tables.get_mut(&table) else {
                let _ = reply.send(Err(no_table(&table)));
                return;
            };
            let n = (end - base) as usize;
            sh.metrics.updates.inc_by(n as u64);
            sh.metrics.batches.inc();
            sh.metrics.batch_size.observe(n as f64);
            for (k, v) in changes {
                match v {
                    Some(v) => {
                        t.items.insert(k, v);
                    }
                    None => {
                        t.items.remove(&k);
                    }
                }
            }
            // A later failure in the group may have rebuilt the table: its
            // new epoch starts after this batch, so the deltas are moot.
            if t.epoch == epoch {
                if let Some(nc) = net {
                    t.refresh_views(nc.skeleton, &nc.keys, nc.old_nh.as_deref(), sh.retain);
                } else {
                    for (i, d) in deltas.into_iter().enumerate() {
                        let seq = base + 1 + i as u64;
                        let size = d.len() + 32;
                        let msg = pb::SubscribeResponse {
                            update: Some(pb::subscribe_response::Update::Delta(pb::Delta {
                                sequence: seq,
                                epoch,
                                delta: d,
                            })),
                        };
                        t.log.push(seq - 1, seq, msg, size, sh.retain);
                    }
                }
            }
            t.tx.send_replace(end);
            publish_gauges(&sh.metrics, t);
            let _ = reply.send(Ok(end));
        }
    }
}

/// Rebuilds table `name`'s control form (a new epoch) from its committed
/// entries with `pending` changes on top, under record `rec` (default: the
/// table's current record).
fn rebuild<'a>(
    sh: &Shared,
    st: &mut State,
    name: &str,
    rec: Option<TableRecord>,
    pending: impl Iterator<Item = &'a [(Vec<u8>, Option<u64>)]>,
) {
    let Some(old) = st.tables.remove(name) else { return };
    let mut items = old.items.clone();
    for changes in pending {
        for (k, v) in changes {
            match v {
                Some(v) => {
                    items.insert(k.clone(), *v);
                }
                None => {
                    items.remove(k);
                }
            }
        }
    }
    let rec = rec.unwrap_or_else(|| old.rec.clone());
    match Table::build_from(rec, items) {
        Ok(mut t) => {
            // The committed entries stay as they were (pending ones are
            // committed on publish).
            t.items = old.items;
            t.id = old.id;
            t.subscribers = old.subscribers;
            t.rebuilds = old.rebuilds + 1;
            t.tx = old.tx;
            sh.metrics.table_rebuilds.get_or_create(&TableLabel { table: name.to_string() }).inc();
            t.tx.send_replace(t.rec.sequence);
            publish_gauges(&sh.metrics, &mut t);
            st.tables.insert(name.to_string(), t);
        }
        Err(e) => {
            eprintln!("keyplane serve: table {name:?} does not rebuild from its entries: {e}; keeping the old form");
            st.tables.insert(name.to_string(), old);
        }
    }
}

fn create(sh: &Shared, st: &mut State, req: pb::CreateTableRequest, group: &mut Group) -> Result<String, Status> {
    check_name(&req.name)?;
    if st.tables.contains_key(&req.name) {
        return Err(Status::already_exists(format!("table {:?} exists (drop it first to recreate)", req.name)));
    }
    let kf = keys::from_pb(req.key_format)
        .ok_or_else(|| Status::invalid_argument(format!("unknown key format {}", req.key_format)))?;
    let mut entries = Vec::new();
    if !req.topology.is_empty() {
        let topo = topology::Topology::parse(&req.topology).map_err(|e| Status::invalid_argument(e.to_string()))?;
        for (k, v) in &topo.hosts {
            let raw = keys::resolve(kf, Some(&keys::text_key(k)))
                .map_err(|m| Status::invalid_argument(format!("topology host {k:?}: {m}")))?;
            entries.push((raw, *v));
        }
    }
    let rec = TableRecord {
        name: req.name.clone(),
        structure: req.structure.clone(),
        value_bits: req.value_bits,
        options: req.options.into_iter().collect(),
        key_format: req.key_format,
        sequence: 0,
        topology: req.topology,
        down_links: Vec::new(),
    };
    let mut t = Table::build(rec, entries).map_err(Status::invalid_argument)?;
    group.record(&t.rec);
    if !t.items.is_empty() {
        group.begin_entries(&req.name);
        for (k, v) in &t.items {
            group.entry(k, Some(*v));
        }
    }
    t.id = sh.next_table_id.fetch_add(1, Ordering::Relaxed);
    st.tables.insert(req.name.clone(), t);
    Ok(req.name)
}

/// What `write` applied.
struct Wrote {
    epoch: u64,
    base: u64,
    end: u64,
    deltas: Vec<Vec<u8>>,
    net: Option<NetChange>,
    changes: Vec<(Vec<u8>, Option<u64>)>,
}

/// Validates the whole batch, then applies it to the control form. The
/// bool of an error is true when the control form may be half-changed.
fn write(st: &mut State, req: pb::WriteRequest, group: &mut Group) -> Result<Wrote, (Status, bool)> {
    let t = st.tables.get_mut(&req.table).ok_or_else(|| (no_table(&req.table), false))?;
    let vb = t.rec.value_bits;
    let nswitches = t.net.as_ref().map(|n| n.topo.switches.len());
    let mut resolved: Vec<(Vec<u8>, Type, u64)> = Vec::with_capacity(req.updates.len());
    // Pass 1: types, keys, values (no table access).
    for (i, u) in req.updates.into_iter().enumerate() {
        let e = (|| {
            let ty = Type::try_from(u.r#type).ok().filter(|t| *t != Type::Unspecified).ok_or_else(|| {
                invalid(i, format!("update type {} is not INSERT (1), MODIFY (2) or DELETE (3)", u.r#type))
            })?;
            let entry = u.entry.ok_or_else(|| invalid(i, "update has no entry"))?;
            let value = entry.value;
            let key = keys::resolve_owned(t.kf, entry.key).map_err(|m| invalid(i, m))?;
            if ty != Type::Delete {
                keyplane::check_value(value, vb).map_err(|e| invalid(i, e))?;
                if let Some(n) = nswitches {
                    let (s, p) = topology::detach(value);
                    if s >= n || p == 0 {
                        return Err(invalid(
                            i,
                            format!(
                                "attachment {value:#x} is not switch_index << 16 | port (port ≥ 1) of the {n} switches"
                            ),
                        ));
                    }
                }
            }
            Ok((key, ty, value))
        })();
        resolved.push(e.map_err(|s| (s, false))?);
    }
    // Pass 2: presence, with the batch's own earlier updates overlaid:
    // each update's previous update of the same key in this batch (no table
    // access); a key's first update asks the table, in one loop of
    // independent lookups whose cache misses overlap on big tables. The
    // checks then run in order, so the first bad update is the one named.
    let earlier: Vec<Option<usize>> = {
        let mut last: HashMap<&[u8], usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(resolved.len(), Default::default());
        resolved.iter().enumerate().map(|(i, (key, _, _))| last.insert(key.as_slice(), i)).collect()
    };
    let in_table: Vec<bool> =
        resolved.iter().zip(&earlier).map(|((key, _, _), e)| e.is_none() && t.control.get(key).is_some()).collect();
    for (i, (_, ty, _)) in resolved.iter().enumerate() {
        let present = match earlier[i] {
            None => in_table[i],
            Some(p) => resolved[p].1 != Type::Delete,
        };
        match (ty, present) {
            (Type::Insert, true) => {
                return Err((
                    Status::already_exists(format!("update {i}: INSERT of a key that is present (use MODIFY)")),
                    false,
                ));
            }
            (Type::Modify | Type::Delete, false) => {
                return Err((
                    Status::not_found(format!("update {i}: {} of a key that is absent", ty.as_str_name())),
                    false,
                ));
            }
            _ => {}
        }
    }
    let base = t.rec.sequence;
    let net = t.net.is_some();
    let mut deltas = Vec::with_capacity(if net { 0 } else { resolved.len() });
    let mut changes = Vec::with_capacity(resolved.len());
    let mut nc = NetChange { skeleton: false, keys: Vec::new(), old_nh: None };
    let n = resolved.len() as u64;
    if n > 0 {
        group.begin_entries(&req.table);
        group.reserve_entries(resolved.iter().map(|(k, _, _)| k.len()));
    }
    for (i, (key, ty, value)) in resolved.into_iter().enumerate() {
        let old = if net { t.control.get(&key) } else { None };
        let d = match ty {
            Type::Delete => t
                .control
                .remove(&key)
                .and_then(|d| d.ok_or_else(|| keyplane::Error::InvalidParameter("validated key vanished".into()))),
            _ => t.control.insert(&key, value),
        };
        let d = d.map_err(|e| (Status::resource_exhausted(format!("update {i}: the table refused it: {e}")), true))?;
        let v = (ty != Type::Delete).then_some(value);
        group.entry(&key, v);
        if net {
            nc.skeleton |= ty != Type::Modify;
            nc.keys.push((key.clone(), old));
        } else {
            deltas.push(d);
        }
        changes.push((key, v));
    }
    t.rec.sequence += n;
    t.snapshot = None;
    if n > 0 {
        group.record(&t.rec);
    }
    Ok(Wrote { epoch: t.epoch, base, end: t.rec.sequence, deltas, net: net.then_some(nc), changes })
}

fn set_link(st: &mut State, req: &pb::SetLinkRequest, group: &mut Group) -> Result<(u64, u64, Vec<Vec<u16>>), Status> {
    let t = st.tables.get_mut(&req.table).ok_or_else(|| no_table(&req.table))?;
    let net = t.net.as_mut().ok_or_else(|| {
        Status::failed_precondition(format!("table {:?} is not network-wide (create it with a topology)", req.table))
    })?;
    let a = net.topo.endpoint(&req.a).map_err(Status::invalid_argument)?;
    let b = net.topo.endpoint(&req.b).map_err(Status::invalid_argument)?;
    let li = net
        .topo
        .link_index(a, b)
        .ok_or_else(|| Status::not_found(format!("no link {} {} in the topology", req.a, req.b)))?;
    if req.up {
        net.down.remove(&li);
    } else {
        net.down.insert(li);
    }
    let old_nh = std::mem::replace(&mut net.nh, net.topo.next_hops(&net.down));
    let sw = &net.topo.switches;
    t.rec.down_links = net
        .down
        .iter()
        .map(|&i| {
            let ((sa, pa), (sb, pb)) = net.topo.links[i];
            format!("{}:{pa} {}:{pb}", sw[sa], sw[sb])
        })
        .collect();
    let base = t.rec.sequence;
    t.rec.sequence += 1;
    group.record(&t.rec);
    Ok((t.epoch, base, old_nh))
}

/// The etcd role loop: follow the log (apply each group) and campaign;
/// once elected, catch up and let the writer commit until leadership ends.
async fn etcd_role(sh: Arc<Shared>, etcd: Arc<EtcdStore>, mut rev: i64) {
    loop {
        if etcd.is_leader() {
            tokio::time::sleep(crate::etcd::CAMPAIGN_EVERY).await;
            if let Err(e) = etcd.maybe_compact().await {
                eprintln!("keyplane serve: etcd log compaction failed: {e}; the log is kept and it is retried");
            }
            continue;
        }
        // Follower: catch up (a watch may have ended because etcd's history
        // was compacted), then watch the log after what we have, campaign meanwhile.
        match catch_up(&sh, &etcd).await {
            Ok(r) => rev = r,
            Err(e) => {
                eprintln!("keyplane serve: cannot catch up with the etcd log: {e}; retrying");
                tokio::time::sleep(crate::etcd::CAMPAIGN_EVERY).await;
            }
        }
        let mut watch = match etcd.watch_log(rev + 1).await {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!("keyplane serve: cannot watch the etcd log: {e}; retrying");
                None
            }
        };
        let mut tick = tokio::time::interval(crate::etcd::CAMPAIGN_EVERY);
        loop {
            let msg = async {
                match watch.as_mut() {
                    Some(w) => w.message().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                m = msg => match m {
                    Ok(Some(resp)) => {
                        let mut gap = false;
                        for ev in resp.events() {
                            let Some(kv) = ev.kv() else { continue };
                            if ev.event_type() != etcd_client::EventType::Put {
                                continue;
                            }
                            let Some(i) = etcd.index_of(kv.key()) else { continue };
                            let have = etcd.index.load(Ordering::Acquire);
                            if i <= have {
                                continue;
                            }
                            if i != have + 1 {
                                gap = true;
                                break;
                            }
                            follow_group(&sh, &etcd, i, kv.value());
                            rev = rev.max(kv.mod_revision());
                        }
                        if gap {
                            match catch_up(&sh, &etcd).await {
                                Ok(r) => rev = r,
                                Err(e) => eprintln!("keyplane serve: cannot catch up with the etcd log: {e}; retrying"),
                            }
                        }
                    }
                    _ => break, // the watch ended: start another
                },
                _ = tick.tick() => {
                    match etcd.campaign().await {
                        Ok(true) => {
                            // Elected: nothing can be appended by anyone else
                            // now; take everything up to the end, then lead.
                            match catch_up(&sh, &etcd).await {
                                Ok(r) => {
                                    rev = r;
                                    etcd.lead();
                                    eprintln!("keyplane serve: leading (etcd log index {})", etcd.index.load(Ordering::Acquire));
                                }
                                Err(e) => eprintln!("keyplane serve: elected but cannot read the log: {e}"),
                            }
                            break;
                        }
                        Ok(false) => {}
                        Err(e) => eprintln!("keyplane serve: campaign failed: {e}"),
                    }
                }
            }
        }
        // After leading, resume following from what the writer committed.
        if !etcd.is_leader() {
            if let Ok(r) = catch_up(&sh, &etcd).await {
                rev = r;
            }
        }
    }
}

/// Reads what this instance lacks from etcd (a snapshot first when it fell
/// behind the log's start) and applies it; returns the revision read at.
async fn catch_up(sh: &Shared, etcd: &EtcdStore) -> Result<i64> {
    let c = etcd.catch_up(etcd.index.load(Ordering::Acquire)).await?;
    if let Some((index, state)) = c.snapshot {
        tokio::task::block_in_place(|| load_snapshot(sh, etcd, index, state));
    }
    for (i, g) in c.log {
        follow_group(sh, etcd, i, &g);
    }
    Ok(c.revision)
}

/// Replaces every table with the state of an etcd snapshot (a follower
/// that fell behind the compacted log): new epochs, subscribers kept.
fn load_snapshot(sh: &Shared, etcd: &EtcdStore, index: u64, state: crate::store::State) {
    let mut built = Vec::new();
    for (rec, entries) in crate::store::into_tables(state) {
        let name = rec.name.clone();
        match Table::build(rec, entries) {
            Ok(t) => built.push(t),
            Err(e) => eprintln!("keyplane serve: table {name:?} from the etcd snapshot does not build: {e}"),
        }
    }
    let mut st = sh.lock();
    let keep: std::collections::HashSet<String> = built.iter().map(|t| t.rec.name.clone()).collect();
    let gone: Vec<String> = st.tables.keys().filter(|n| !keep.contains(*n)).cloned().collect();
    for name in gone {
        st.tables.remove(&name);
        forget_gauges(&sh.metrics, &name);
    }
    for mut t in built {
        let name = t.rec.name.clone();
        match st.tables.remove(&name) {
            Some(old) => {
                t.id = old.id;
                t.subscribers = old.subscribers;
                t.rebuilds = old.rebuilds + 1;
                t.tx = old.tx;
            }
            None => t.id = sh.next_table_id.fetch_add(1, Ordering::Relaxed),
        }
        sh.metrics.table_rebuilds.get_or_create(&TableLabel { table: name.clone() }).inc();
        t.tx.send_replace(t.rec.sequence);
        publish_gauges(&sh.metrics, &mut t);
        st.tables.insert(name, t);
    }
    etcd.index.store(index, Ordering::Release);
}

/// Applies log group `i` (written by the leader) to this follower's tables.
fn follow_group(sh: &Shared, etcd: &EtcdStore, i: u64, bytes: &[u8]) {
    let ops = match crate::store::decode_ops(bytes) {
        Ok((ops, _)) => ops,
        Err(e) => {
            eprintln!("keyplane serve: etcd log entry {i} does not decode: {e}; skipping it");
            etcd.index.store(i, Ordering::Release);
            return;
        }
    };
    let mut st = sh.lock();
    // The sequence a table has after the group is its last record's.
    let mut seqs: HashMap<String, u64> = HashMap::new();
    for op in ops {
        match op {
            Op::Record(rec) => {
                let name = rec.name.clone();
                seqs.insert(name.clone(), rec.sequence);
                match st.tables.get_mut(&name) {
                    Some(t) if t.rec.down_links == rec.down_links => {
                        t.rec = rec;
                        t.snapshot = None;
                        t.tx.send_replace(t.rec.sequence);
                        publish_gauges(&sh.metrics, t);
                    }
                    Some(_) => rebuild(sh, &mut st, &name, Some(rec), std::iter::empty()),
                    None => match Table::build(rec, Vec::new()) {
                        Ok(mut t) => {
                            t.id = sh.next_table_id.fetch_add(1, Ordering::Relaxed);
                            publish_gauges(&sh.metrics, &mut t);
                            st.tables.insert(name, t);
                        }
                        Err(e) => eprintln!("keyplane serve: table {name:?} from the etcd log does not build: {e}"),
                    },
                }
            }
            Op::Drop(name) => {
                if st.tables.remove(&name).is_some() {
                    forget_gauges(&sh.metrics, &name);
                }
            }
            Op::Entries { table, entries } => {
                let Some(t) = st.tables.get_mut(&table) else { continue };
                let epoch = t.epoch;
                let mut failed = false;
                let net = t.net.is_some();
                for (k, v) in entries {
                    if !failed {
                        let d = match v {
                            Some(v) => t.control.insert(&k, v).map(Some),
                            None => t.control.remove(&k),
                        };
                        match d {
                            Ok(Some(d)) if !net => {
                                let seq = t.rec.sequence + 1;
                                let msg = pb::SubscribeResponse {
                                    update: Some(pb::subscribe_response::Update::Delta(pb::Delta {
                                        sequence: seq,
                                        epoch,
                                        delta: d.clone(),
                                    })),
                                };
                                t.log.push(seq - 1, seq, msg, d.len() + 32, sh.retain);
                                t.rec.sequence = seq;
                            }
                            Ok(_) => t.rec.sequence += 1,
                            Err(_) => failed = true,
                        }
                    }
                    match v {
                        Some(v) => {
                            t.items.insert(k, v);
                        }
                        None => {
                            t.items.remove(&k);
                        }
                    }
                }
                t.snapshot = None;
                if net {
                    t.refresh_views(true, &[], None, sh.retain);
                }
                if failed {
                    rebuild(sh, &mut st, &table, None, std::iter::empty());
                }
            }
        }
    }
    for (name, seq) in seqs {
        if let Some(t) = st.tables.get_mut(&name) {
            t.rec.sequence = seq;
        }
    }
    for t in st.tables.values_mut() {
        t.tx.send_replace(t.rec.sequence);
        publish_gauges(&sh.metrics, t);
    }
    etcd.index.store(i, Ordering::Release);
}

impl Service {
    /// For etcd followers: the leader's client, or `None` when this instance
    /// writes itself.
    async fn leader_client(&self) -> Result<Option<crate::client::Client>, Status> {
        let Backend::Etcd(e) = &self.shared.store else { return Ok(None) };
        if e.is_leader() {
            return Ok(None);
        }
        let url = e.leader_url().ok_or_else(|| Status::unavailable("no leader elected yet; retry in a second"))?;
        let mut f = self.shared.forward.lock().await;
        if let Some((u, c)) = f.as_ref() {
            if *u == url {
                return Ok(Some(c.clone()));
            }
        }
        let c = crate::client::connect(&url)
            .await
            .map_err(|err| Status::unavailable(format!("cannot reach the leader at {url}: {err}; retry")))?;
        *f = Some((url, c.clone()));
        Ok(Some(c))
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl pb::control_server::Control for Service {
    async fn create_table(&self, req: Request<pb::CreateTableRequest>) -> Result<Response<pb::TableInfo>, Status> {
        let r = req.into_inner();
        if let Some(mut c) = self.leader_client().await? {
            return c.create_table(r).await;
        }
        self.submit(|tx| Job::Create(r, tx)).await.map(Response::new)
    }

    async fn list_tables(&self, _: Request<pb::ListTablesRequest>) -> Result<Response<pb::ListTablesResponse>, Status> {
        let mut st = self.shared.lock();
        let tables = st.tables.values_mut().map(|t| t.info()).collect();
        Ok(Response::new(pb::ListTablesResponse { tables }))
    }

    async fn describe_table(&self, req: Request<pb::DescribeTableRequest>) -> Result<Response<pb::TableInfo>, Status> {
        let name = req.into_inner().name;
        let mut st = self.shared.lock();
        let t = st.tables.get_mut(&name).ok_or_else(|| no_table(&name))?;
        let info = t.info();
        self.shared.metrics.table_memory_bytes.get_or_create(&TableLabel { table: name }).set(info.memory_bytes as i64);
        Ok(Response::new(info))
    }

    async fn drop_table(&self, req: Request<pb::DropTableRequest>) -> Result<Response<pb::DropTableResponse>, Status> {
        let name = req.into_inner().name;
        if let Some(mut c) = self.leader_client().await? {
            return c.drop_table(pb::DropTableRequest { name }).await;
        }
        self.submit(|tx| Job::Drop(name, tx)).await.map(|()| Response::new(pb::DropTableResponse {}))
    }

    async fn write(&self, req: Request<pb::WriteRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let r = req.into_inner();
        if let Some(mut c) = self.leader_client().await? {
            return c.write(r).await;
        }
        self.submit(|tx| Job::Write(r, tx)).await.map(|sequence| Response::new(pb::WriteResponse { sequence }))
    }

    async fn set_link(&self, req: Request<pb::SetLinkRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let r = req.into_inner();
        if let Some(mut c) = self.leader_client().await? {
            return c.set_link(r).await;
        }
        self.submit(|tx| Job::SetLink(r, tx)).await.map(|sequence| Response::new(pb::WriteResponse { sequence }))
    }

    type ReadStream = BoxStream<pb::ReadResponse>;

    async fn read(&self, req: Request<pb::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let r = req.into_inner();
        let kf = {
            let st = self.shared.lock();
            st.tables.get(&r.table).ok_or_else(|| no_table(&r.table))?.kf
        };
        let keys = if r.keys.is_empty() {
            None
        } else {
            let mut ks = Vec::with_capacity(r.keys.len());
            for (i, k) in r.keys.iter().enumerate() {
                ks.push(keys::resolve(kf, Some(k)).map_err(|m| Status::invalid_argument(format!("key {i}: {m}")))?);
            }
            Some(ks)
        };
        // One consistent cut under the lock (committed entries only); the
        // sort and the stream run without it.
        let (seq, mut entries) = {
            let st = self.shared.lock();
            let t = st.tables.get(&r.table).ok_or_else(|| no_table(&r.table))?;
            let entries: Vec<(Vec<u8>, u64)> = match &keys {
                Some(ks) => ks.iter().filter_map(|k| t.items.get(k).map(|v| (k.clone(), *v))).collect(),
                None => t.items.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            };
            (t.durable(), entries)
        };
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::ReadResponse, Status>>(4);
        let scan = keys.is_none();
        tokio::task::spawn_blocking(move || {
            if scan {
                entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            }
            let mut it = entries.into_iter().peekable();
            loop {
                let chunk: Vec<pb::Entry> = it
                    .by_ref()
                    .take(READ_CHUNK)
                    .map(|(k, v)| pb::Entry { key: Some(keys::raw_key(k)), value: v })
                    .collect();
                let last = it.peek().is_none();
                if tx.blocking_send(Ok(pb::ReadResponse { entries: chunk, sequence: seq })).is_err() || last {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    type SubscribeStream = BoxStream<pb::SubscribeResponse>;

    async fn subscribe(&self, req: Request<pb::SubscribeRequest>) -> Result<Response<Self::SubscribeStream>, Status> {
        let peer = req.remote_addr().map_or_else(|| "unknown".to_string(), |a| a.to_string());
        let r = req.into_inner();
        let view = {
            let st = self.shared.lock();
            let t = st.tables.get(&r.table).ok_or_else(|| no_table(&r.table))?;
            match (&t.net, r.view.is_empty()) {
                (None, true) => None,
                (None, false) => {
                    return Err(Status::failed_precondition(format!(
                        "table {:?} has no views (not network-wide)",
                        r.table
                    )));
                }
                (Some(_), true) => {
                    return Err(Status::failed_precondition(format!(
                        "table {:?} is network-wide: subscribe to a switch's view (views: {})",
                        r.table,
                        t.net.as_ref().map_or(String::new(), |n| n.topo.switches.join(", "))
                    )));
                }
                (Some(n), false) => Some(n.topo.switches.iter().position(|s| *s == r.view).ok_or_else(|| {
                    Status::not_found(format!(
                        "table {:?} has no view {:?} (views: {})",
                        r.table,
                        r.view,
                        n.topo.switches.join(", ")
                    ))
                })?),
            }
        };
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let sub = if r.subscriber.is_empty() { peer } else { r.subscriber.clone() };
        tokio::spawn(subscription(self.shared.clone(), r, view, sub, tx));
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }
}

fn snapshot_msg(sh: &Shared, seq: u64, epoch: u64, blob: &[u8]) -> Arc<pb::SubscribeResponse> {
    sh.metrics.snapshots_sent.inc();
    let snap = pb::Snapshot { sequence: seq, epoch, blob: blob.to_vec() };
    Arc::new(pb::SubscribeResponse { update: Some(pb::subscribe_response::Update::Snapshot(snap)) })
}

/// Decrements the subscriber count when a subscription ends.
struct SubGuard {
    shared: Arc<Shared>,
    table: String,
    id: u64,
    label: SubLabel,
}

impl Drop for SubGuard {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if let Some(t) = st.tables.get_mut(&self.table) {
            if t.id == self.id {
                t.subscribers = t.subscribers.saturating_sub(1);
                publish_gauges(&self.shared.metrics, t);
            }
        }
        self.shared.metrics.subscriber_lag.remove(&self.label);
    }
}

async fn subscription(
    sh: Arc<Shared>,
    r: pb::SubscribeRequest,
    view: Option<usize>,
    sub: String,
    tx: tokio::sync::mpsc::Sender<Result<pb::SubscribeResponse, Status>>,
) {
    let mut pos = r.from_sequence;
    let mut epoch = r.epoch;
    let mut rx: Option<tokio::sync::watch::Receiver<u64>> = None;
    let label = SubLabel {
        table: if r.view.is_empty() { r.table.clone() } else { format!("{}/{}", r.table, r.view) },
        subscriber: sub,
    };
    let mut guard: Option<SubGuard> = None;
    loop {
        // A guard replaced under the lock is dropped after it (its Drop locks).
        let mut stale: Option<SubGuard> = None;
        let found = 'lock: {
            let mut st = sh.lock();
            let Some(t) = st.tables.get_mut(&r.table) else { break 'lock None };
            if guard.as_ref().is_none_or(|g| g.id != t.id) {
                if guard.is_some() {
                    // Dropped and recreated under the same name: follow the new table.
                    epoch = 0;
                    stale = guard.take();
                }
                t.subscribers += 1;
                publish_gauges(&sh.metrics, t);
                guard = Some(SubGuard { shared: sh.clone(), table: r.table.clone(), id: t.id, label: label.clone() });
            }
            if rx.is_none() {
                rx = Some(t.tx.subscribe());
            }
            let head;
            let logged = match view {
                None => {
                    head = t.durable();
                    (epoch == t.epoch).then(|| t.log.since(pos, head, SUB_CHUNK)).flatten()
                }
                Some(v) => {
                    let vw = &t.net.as_ref().expect("views exist on network-wide tables").views[v];
                    head = vw.seq;
                    (epoch == t.epoch).then(|| vw.log.since(pos, head, SUB_CHUNK)).flatten()
                }
            };
            let msgs = match logged {
                Some(m) => Some(m),
                None => {
                    let snap = match view {
                        // Only a settled form (the durable state) is exported
                        // here; otherwise the writer exports between groups.
                        None => t.settled().then(|| t.snapshot()),
                        Some(v) => {
                            let vw = &t.net.as_ref().expect("views exist on network-wide tables").views[v];
                            Some((vw.seq, vw.blob.clone()))
                        }
                    };
                    snap.map(|(seq, blob)| vec![snapshot_msg(&sh, seq, t.epoch, &blob)])
                }
            };
            if msgs.is_some() {
                epoch = t.epoch;
            }
            Some((msgs, head))
        };
        drop(stale);
        let Some((msgs, head)) = found else {
            let _ = tx.send(Err(no_table(&r.table))).await;
            return;
        };
        let msgs = match msgs {
            Some(m) => m,
            None => {
                // A group is in flight: ask the writer for an export between groups.
                let (rtx, rrx) = oneshot::channel();
                let Some(jobs) = sh.jobs.upgrade() else {
                    let _ = tx.send(Err(Status::unavailable("the service is stopping"))).await;
                    return;
                };
                if jobs.send(JobBox(Job::Snapshot(r.table.clone(), rtx))).await.is_err() {
                    let _ = tx.send(Err(Status::unavailable("the writer has stopped"))).await;
                    return;
                }
                drop(jobs);
                match rrx.await {
                    Ok(Ok((seq, ep, blob))) => {
                        epoch = ep;
                        vec![snapshot_msg(&sh, seq, ep, &blob)]
                    }
                    Ok(Err(s)) => {
                        let _ = tx.send(Err(s)).await;
                        return;
                    }
                    Err(_) => {
                        let _ = tx.send(Err(Status::unavailable("the writer has stopped"))).await;
                        return;
                    }
                }
            }
        };
        let more = msgs.len() == SUB_CHUNK;
        for m in msgs {
            match &m.update {
                Some(pb::subscribe_response::Update::Delta(d)) => pos = d.sequence,
                Some(pb::subscribe_response::Update::Snapshot(s)) => pos = s.sequence,
                Some(pb::subscribe_response::Update::Patch(p)) => pos = p.sequence,
                None => {}
            }
            if tx.send(Ok(m.as_ref().clone())).await.is_err() {
                return;
            }
        }
        sh.metrics.subscriber_lag.get_or_create(&label).set(head.saturating_sub(pos) as i64);
        if more {
            continue;
        }
        let Some(w) = rx.as_mut() else { continue };
        tokio::select! {
            changed = w.changed() => {
                if changed.is_err() {
                    // The table was dropped (and maybe recreated): look again.
                    rx = None;
                }
            }
            _ = tx.closed() => return,
        }
    }
}
