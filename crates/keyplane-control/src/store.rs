//! The durable embedded store: an append-only write log with group commit,
//! compacted into snapshots in the background.
//!
//! What is durable: for every table its record ([`TableRecord`]: structure,
//! options, key format, topology, sequence number) and its entries (key ->
//! value). The store directory holds
//!
//! * `wal-GGGGGGGGGGGGGGGG.log`: write logs. One group commit (every batch
//!   the writer took from its queue meanwhile) is ONE frame appended to the
//!   current log and made durable with ONE `fdatasync` before any batch of
//!   the group is acknowledged. A frame is `len u32 | xxh3 u64 | payload`;
//!   a frame torn by a crash fails its checksum and is cut off at start-up
//!   (it was never acknowledged).
//! * `snapshot-GGGGGGGGGGGGGGGG.kps`: the whole state at the start of log
//!   generation G, in the same frames, ending with an end frame (a snapshot
//!   without one is ignored).
//!
//! The state is the newest complete snapshot S plus every log of generation
//! ≥ S, replayed in order. When the current log grows past
//! [`Options::compact_bytes`] the writer starts log G+1 (a file creation, no
//! copying) and a background thread folds snapshot S and logs S..=G into
//! snapshot G+1 from the files alone — it never takes the service's lock
//! or stalls the writer — then deletes what the new snapshot replaces.
//! A crash at any point leaves either the old or the new snapshot complete,
//! with the logs it needs.
//!
//! What is not durable: the delta log. Deltas only apply to lookup forms
//! exported by the control form that emitted them, and the control form is
//! rebuilt from the entries (`from_items`) when the service starts, which
//! starts a new epoch: subscribers of an older epoch resync from one blob.

use crate::error::{ControlError, Result};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};

/// A table's durable description.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TableRecord {
    /// Table name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Structure name.
    #[prost(string, tag = "2")]
    pub structure: String,
    /// Value bits.
    #[prost(uint32, tag = "3")]
    pub value_bits: u32,
    /// Structure options.
    #[prost(btree_map = "string, string", tag = "4")]
    pub options: BTreeMap<String, String>,
    /// Key format (protocol enum value).
    #[prost(int32, tag = "5")]
    pub key_format: i32,
    /// Sequence number after the last committed update.
    #[prost(uint64, tag = "6")]
    pub sequence: u64,
    /// Topology file text (network-wide tables).
    #[prost(string, tag = "7")]
    pub topology: String,
    /// Failed links of the topology, as "a b" endpoint pairs.
    #[prost(string, repeated, tag = "8")]
    pub down_links: Vec<String>,
}

/// A table's entries.
pub type Entries = ItemMap;

/// A table's entries in memory: key -> value, hashed with foldhash (the
/// default SipHash was ~15% of the writer's time at 1M keys).
pub type ItemMap = HashMap<Vec<u8>, u64, foldhash::fast::RandomState>;

/// One change to the store (decoded form of a group's bytes).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Create or replace a table record (an existing table keeps its entries).
    Record(TableRecord),
    /// Drop a table with its entries.
    Drop(String),
    /// Set (`Some`) or delete (`None`) entries of one table.
    Entries {
        /// Table name.
        table: String,
        /// Keys with their new value or deletion.
        entries: Vec<(Vec<u8>, Option<u64>)>,
    },
}

const TAG_RECORD: u8 = 0;
const TAG_DROP: u8 = 1;
const TAG_ENTRIES: u8 = 2;
const TAG_END: u8 = 3;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// The bytes of one group commit, built while the writer applies the
/// group (no [`Op`] values are materialised on the write path).
#[derive(Debug, Default, Clone)]
pub struct Group {
    buf: Vec<u8>,
    /// Offset of the open entries op's count, and the count.
    open: Option<(usize, u32)>,
    ops: usize,
}

impl Group {
    /// An empty group.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the group changes nothing.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// A mark to roll back to ([`Group::truncate`]).
    pub fn mark(&mut self) -> usize {
        self.close();
        self.buf.len()
    }

    /// Forgets everything after `mark` (a batch that failed validation).
    pub fn truncate(&mut self, mark: usize) {
        self.open = None;
        self.buf.truncate(mark);
    }

    fn close(&mut self) {
        if let Some((at, n)) = self.open.take() {
            self.buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
        }
    }

    /// Creates or replaces a table record.
    pub fn record(&mut self, r: &TableRecord) {
        self.close();
        self.buf.push(TAG_RECORD);
        put_bytes(&mut self.buf, &prost::Message::encode_to_vec(r));
        self.ops += 1;
    }

    /// Drops a table.
    pub fn drop_table(&mut self, name: &str) {
        self.close();
        self.buf.push(TAG_DROP);
        put_bytes(&mut self.buf, name.as_bytes());
        self.ops += 1;
    }

    /// Starts an entries op for `table` (entries follow with [`Group::entry`]).
    pub fn begin_entries(&mut self, table: &str) {
        self.close();
        self.buf.push(TAG_ENTRIES);
        put_bytes(&mut self.buf, table.as_bytes());
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u32.to_le_bytes());
        self.open = Some((at, 0));
        self.ops += 1;
    }

    /// Reserves room for entries of these key lengths (a known batch), at
    /// most the size [`Group::entry`] writes for each: flag byte, length
    /// prefix, key, value.
    pub fn reserve_entries(&mut self, key_lens: impl Iterator<Item = usize>) {
        self.buf.reserve(key_lens.map(|k| 1 + 4 + k + 8).sum());
    }

    /// One entry of the open entries op.
    pub fn entry(&mut self, key: &[u8], value: Option<u64>) {
        let Some((_, n)) = self.open.as_mut() else { return };
        *n += 1;
        self.buf.push(u8::from(value.is_none()));
        put_bytes(&mut self.buf, key);
        if let Some(v) = value {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// The finished bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.close();
        self.buf
    }

    /// The finished bytes (borrowing).
    pub fn bytes(&mut self) -> &[u8] {
        self.close();
        &self.buf
    }
}

/// Encodes ops as a group's bytes.
pub fn encode_ops(ops: &[Op]) -> Vec<u8> {
    let mut g = Group::new();
    for op in ops {
        match op {
            Op::Record(r) => g.record(r),
            Op::Drop(n) => g.drop_table(n),
            Op::Entries { table, entries } => {
                g.begin_entries(table);
                for (k, v) in entries {
                    g.entry(k, *v);
                }
            }
        }
    }
    g.finish()
}

fn bad(what: &str) -> ControlError {
    ControlError::Store(format!(
        "log or snapshot record is corrupt ({what}); restore the store directory from a backup"
    ))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(bad("truncated"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| bad("name is not UTF-8"))
    }
}

/// Decodes a group's bytes (a log frame's payload). Returns the ops and
/// whether the group ends with an end marker (snapshots).
pub fn decode_ops(b: &[u8]) -> Result<(Vec<Op>, bool)> {
    let mut r = Reader(b);
    let mut ops = Vec::new();
    let mut end = false;
    while !r.0.is_empty() {
        if end {
            return Err(bad("bytes after the end marker"));
        }
        let tag = r.take(1)?[0];
        match tag {
            TAG_RECORD => ops.push(Op::Record(
                <TableRecord as prost::Message>::decode(r.bytes()?).map_err(|_| bad("table record"))?,
            )),
            TAG_DROP => ops.push(Op::Drop(r.string()?)),
            TAG_ENTRIES => {
                let table = r.string()?;
                let n = r.u32()? as usize;
                // Each entry takes at least 5 bytes: bound the allocation by the input.
                let mut entries = Vec::with_capacity(n.min(r.0.len() / 5));
                for _ in 0..n {
                    let del = r.take(1)?[0];
                    let key = r.bytes()?.to_vec();
                    let value = match del {
                        0 => Some(r.u64()?),
                        1 => None,
                        _ => return Err(bad("entry kind")),
                    };
                    entries.push((key, value));
                }
                ops.push(Op::Entries { table, entries });
            }
            TAG_END => end = true,
            _ => return Err(bad("unknown op tag")),
        }
    }
    Ok((ops, end))
}

/// The state ops describe: table name -> (record, entries).
pub type State = HashMap<String, (TableRecord, ItemMap)>;

/// Applies decoded ops to a state.
pub fn apply_ops(state: &mut State, ops: Vec<Op>) {
    for op in ops {
        match op {
            Op::Record(r) => match state.get_mut(&r.name) {
                Some(t) => t.0 = r,
                None => {
                    state.insert(r.name.clone(), (r, ItemMap::default()));
                }
            },
            Op::Drop(n) => {
                state.remove(&n);
            }
            Op::Entries { table, entries } => {
                let Some((_, m)) = state.get_mut(&table) else { continue };
                for (k, v) in entries {
                    match v {
                        Some(v) => {
                            m.insert(k, v);
                        }
                        None => {
                            m.remove(&k);
                        }
                    }
                }
            }
        }
    }
}

/// A state as the service loads it: records with their entries, by name.
pub fn into_tables(state: State) -> Vec<(TableRecord, Entries)> {
    let mut out: Vec<(TableRecord, Entries)> = state.into_values().collect();
    out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    out
}

const FRAME_HEAD: usize = 12;
/// Largest frame accepted when reading (bounds allocation on a damaged file).
const MAX_FRAME: usize = 1 << 31;

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + FRAME_HEAD);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a file's bytes into frame payloads; stops at the first torn or
/// damaged frame and returns the byte length of the valid prefix.
fn frames(b: &[u8]) -> (Vec<&[u8]>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    while b.len() - at >= FRAME_HEAD {
        let len = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
        let mut h = [0u8; 8];
        h.copy_from_slice(&b[at + 4..at + 12]);
        let end = at + FRAME_HEAD + len;
        if len > MAX_FRAME || end > b.len() {
            break;
        }
        let p = &b[at + FRAME_HEAD..end];
        if xxhash_rust::xxh3::xxh3_64(p) != u64::from_le_bytes(h) {
            break;
        }
        out.push(p);
        at = end;
    }
    (out, at)
}

const SNAP_MAGIC: &[u8; 8] = b"KPSNAP01";
const WAL_MAGIC: &[u8; 8] = b"KPWAL001";

fn wal_path(dir: &Path, g: u64) -> PathBuf {
    dir.join(format!("wal-{g:016x}.log"))
}

fn snap_path(dir: &Path, g: u64) -> PathBuf {
    dir.join(format!("snapshot-{g:016x}.kps"))
}

fn gen_of(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let hex = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// The generations of the snapshots and logs in `dir`.
fn listing(dir: &Path) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut snaps = Vec::new();
    let mut wals = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(g) = gen_of(name, "snapshot-", ".kps") {
            snaps.push(g);
        } else if let Some(g) = gen_of(name, "wal-", ".log") {
            wals.push(g);
        }
    }
    snaps.sort_unstable();
    wals.sort_unstable();
    Ok((snaps, wals))
}

/// Reads a snapshot: its state, or `None` when incomplete or damaged.
fn read_snapshot(path: &Path) -> Result<Option<State>> {
    let b = std::fs::read(path)?;
    if b.len() < 8 || &b[..8] != SNAP_MAGIC {
        return Ok(None);
    }
    let (fs, _) = frames(&b[8..]);
    let mut state = State::new();
    for p in fs {
        let Ok((ops, end)) = decode_ops(p) else { return Ok(None) };
        apply_ops(&mut state, ops);
        if end {
            return Ok(Some(state));
        }
    }
    Ok(None)
}

/// Replays one log into `state`; returns the length of its valid prefix.
fn replay_wal(path: &Path, state: &mut State) -> Result<u64> {
    let mut b = Vec::new();
    File::open(path)?.read_to_end(&mut b)?;
    if b.len() < 8 || &b[..8] != WAL_MAGIC {
        return Ok(0);
    }
    let (fs, valid) = frames(&b[8..]);
    for p in fs {
        let (ops, _) = decode_ops(p)?;
        apply_ops(state, ops);
    }
    Ok(8 + valid as u64)
}

/// Writes `state` as snapshot `g` (temp file, fsync, rename, fsync dir).
fn write_snapshot(dir: &Path, g: u64, state: &State) -> Result<()> {
    let tmp = dir.join(format!("snapshot-{g:016x}.tmp"));
    let mut f = std::io::BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    f.write_all(SNAP_MAGIC)?;
    let mut names: Vec<&String> = state.keys().collect();
    names.sort();
    for name in names {
        let (rec, m) = &state[name];
        let mut g = Group::new();
        g.record(rec);
        f.write_all(&frame(&g.finish()))?;
        let mut g = Group::new();
        let mut n = 0;
        for (k, v) in m {
            if n == 0 {
                g.begin_entries(name);
            }
            g.entry(k, Some(*v));
            n += 1;
            if n == 65_536 {
                f.write_all(&frame(&std::mem::take(&mut g).finish()))?;
                n = 0;
            }
        }
        if n > 0 {
            f.write_all(&frame(&g.finish()))?;
        }
    }
    f.write_all(&frame(&[TAG_END]))?;
    let f = f.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, snap_path(dir, g))?;
    sync_dir(dir)
}

/// Store tuning.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Bytes of write log after which the log rotates and a snapshot is
    /// compacted in the background.
    pub compact_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { compact_bytes: 256 << 20 }
    }
}

struct Wal {
    file: File,
    generation: u64,
    len: u64,
    /// A write or fsync failed and the file could not be cut back: refuse
    /// every later commit (the page cache can no longer be trusted).
    broken: Option<String>,
}

/// What the compactor thread shares with the store.
#[derive(Default)]
struct Compaction {
    /// Compactions finished / running.
    running: bool,
    done: u64,
    last_error: Option<String>,
}

/// The embedded store in one directory.
pub struct Store {
    dir: PathBuf,
    opts: Options,
    wal: Mutex<Wal>,
    /// Newest complete snapshot generation.
    snap: Arc<Mutex<u64>>,
    comp: Arc<(Mutex<Compaction>, Condvar)>,
    compact_tx: Mutex<Option<mpsc::Sender<u64>>>,
    initial: Mutex<Option<State>>,
    /// Held for the store's lifetime (`LOCK`, an advisory file lock).
    _lock: File,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.dir.display())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Store {
    /// Opens (or creates) the store in `dir` with default options.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with(dir, Options::default())
    }

    /// Opens (or creates) the store in `dir`: loads the newest complete
    /// snapshot, replays the logs after it (cutting a torn tail off), and
    /// starts a new log generation.
    pub fn open_with(dir: &Path, opts: Options) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        // One service per directory: two appending to the same log would
        // interleave frames. The lock goes with the process (also on kill -9).
        let lock_file = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("LOCK"))?;
        // SAFETY: `flock` on a descriptor this function owns (kept open in
        // the store, so the lock lives as long as the store); no memory is
        // passed to the kernel.
        let locked = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock_file), libc::LOCK_EX | libc::LOCK_NB) };
        if locked != 0 {
            return Err(ControlError::Store(format!(
                "{} is in use by another keyplane serve (its LOCK file is held)",
                dir.display()
            )));
        }
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "tmp") {
                let _ = std::fs::remove_file(&p);
            }
        }
        let (snaps, wals) = listing(dir)?;
        let mut state = None;
        let mut base = 0;
        for &g in snaps.iter().rev() {
            if let Some(s) = read_snapshot(&snap_path(dir, g))? {
                state = Some(s);
                base = g;
                break;
            }
        }
        let mut state = state.unwrap_or_default();
        let live: Vec<u64> = wals.iter().copied().filter(|&g| g >= base).collect();
        for (i, &g) in live.iter().enumerate() {
            let p = wal_path(dir, g);
            let valid = replay_wal(&p, &mut state)?;
            let len = std::fs::metadata(&p)?.len();
            if valid < len {
                if i + 1 != live.len() {
                    return Err(ControlError::Store(format!(
                        "{} is damaged at byte {valid} but is not the newest log; restore the store directory from a backup",
                        p.display()
                    )));
                }
                // A torn tail: never acknowledged. Cut it off.
                let f = OpenOptions::new().write(true).open(&p)?;
                f.set_len(valid)?;
                f.sync_all()?;
            }
        }
        // Remove what the snapshot replaces.
        for &g in &snaps {
            if g < base {
                let _ = std::fs::remove_file(snap_path(dir, g));
            }
        }
        for &g in &wals {
            if g < base {
                let _ = std::fs::remove_file(wal_path(dir, g));
            }
        }
        let generation = live.last().map_or(base, |g| g + 1).max(base);
        let wal = Self::create_wal(dir, generation)?;
        let store = Self {
            dir: dir.to_path_buf(),
            opts,
            wal: Mutex::new(Wal { file: wal, generation, len: 8, broken: None }),
            snap: Arc::new(Mutex::new(base)),
            comp: Arc::new((Mutex::new(Compaction::default()), Condvar::new())),
            compact_tx: Mutex::new(None),
            initial: Mutex::new(Some(state)),
            _lock: lock_file,
        };
        store.start_compactor()?;
        if generation > base {
            // Logs from before this start: fold them now, in the background.
            store.request_compaction(generation);
        }
        Ok(store)
    }

    fn create_wal(dir: &Path, g: u64) -> Result<File> {
        let p = wal_path(dir, g);
        let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(&p)?;
        f.write_all(WAL_MAGIC)?;
        f.sync_all()?;
        sync_dir(dir)?;
        Ok(f)
    }

    fn start_compactor(&self) -> Result<()> {
        let (tx, rx) = mpsc::channel::<u64>();
        let dir = self.dir.clone();
        let snap = self.snap.clone();
        let comp = self.comp.clone();
        std::thread::Builder::new().name("keyplane-compact".into()).spawn(move || {
            while let Ok(mut upto) = rx.recv() {
                while let Ok(u) = rx.try_recv() {
                    upto = upto.max(u);
                }
                let base = *lock(&snap);
                let res = compact(&dir, base, upto);
                if res.is_ok() {
                    *lock(&snap) = upto;
                }
                let (m, cv) = &*comp;
                let mut c = lock(m);
                c.running = false;
                c.done += 1;
                c.last_error = res.err().map(|e| e.to_string());
                if let Some(e) = &c.last_error {
                    eprintln!("keyplane serve: store compaction failed: {e}; the logs are kept and it is retried");
                }
                cv.notify_all();
            }
        })?;
        *lock(&self.compact_tx) = Some(tx);
        Ok(())
    }

    fn request_compaction(&self, upto: u64) {
        let (m, _) = &*self.comp;
        lock(m).running = true;
        if let Some(tx) = lock(&self.compact_tx).as_ref() {
            let _ = tx.send(upto);
        }
    }

    /// The state found at open (taken once; later calls replay the files).
    pub fn load(&self) -> Result<Vec<(TableRecord, Entries)>> {
        if let Some(s) = lock(&self.initial).take() {
            return Ok(into_tables(s));
        }
        // Holding the log lock stops rotations, so no compaction starts
        // while the files are read; wait out a running one.
        let _w = lock(&self.wal);
        self.wait_compaction();
        let base = *lock(&self.snap);
        let mut state = if base == 0 && !snap_path(&self.dir, 0).exists() {
            State::new()
        } else {
            read_snapshot(&snap_path(&self.dir, base))?.ok_or_else(|| bad("newest snapshot"))?
        };
        let (_, wals) = listing(&self.dir)?;
        for g in wals.into_iter().filter(|&g| g >= base) {
            replay_wal(&wal_path(&self.dir, g), &mut state)?;
        }
        Ok(into_tables(state))
    }

    /// Appends one group's bytes as one frame and fdatasyncs it; every
    /// batch of the group is durable when this returns `Ok`. Rotates the
    /// log (and starts a background compaction) past the size limit.
    pub fn commit(&self, group: &[u8]) -> Result<()> {
        if group.is_empty() {
            return Ok(());
        }
        let f = frame(group);
        let mut w = lock(&self.wal);
        if let Some(e) = &w.broken {
            return Err(ControlError::Store(format!(
                "an earlier log write failed ({e}); restart `keyplane serve` to recover from the log"
            )));
        }
        let res = w.file.write_all(&f).and_then(|_| w.file.sync_data());
        if let Err(e) = res {
            // Cut the partial frame off so the log stays a clean prefix.
            let len = w.len;
            let cut = w.file.set_len(len).and_then(|_| w.file.sync_data());
            if let Err(c) = cut {
                w.broken = Some(format!("{e}; cutting the log back failed: {c}"));
            }
            return Err(e.into());
        }
        w.len += f.len() as u64;
        if w.len >= self.opts.compact_bytes && !lock(&self.comp.0).running {
            let next = w.generation + 1;
            match Self::create_wal(&self.dir, next) {
                Ok(file) => {
                    w.file = file;
                    w.generation = next;
                    w.len = 8;
                    drop(w);
                    self.request_compaction(next);
                }
                Err(e) => eprintln!("keyplane serve: cannot start a new store log: {e}; keeping the current one"),
            }
        }
        Ok(())
    }

    /// Waits until no compaction runs; returns how many finished and the
    /// last error (tests and benchmarks).
    pub fn wait_compaction(&self) -> (u64, Option<String>) {
        let (m, cv) = &*self.comp;
        let mut c = lock(m);
        while c.running {
            c = cv.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        (c.done, c.last_error.clone())
    }

    /// Bytes in the current log.
    pub fn log_bytes(&self) -> u64 {
        lock(&self.wal).len
    }
}

impl Drop for Store {
    /// Stops the compactor and waits out a running compaction before the
    /// directory's LOCK is released (the lock file is a field, dropped after
    /// this): a store reopened on the directory right away never races a
    /// compaction of the closed one over the same files.
    fn drop(&mut self) {
        *lock(&self.compact_tx) = None;
        self.wait_compaction();
    }
}

/// Folds snapshot `base` and logs `base..upto` into snapshot `upto`, then
/// removes what it replaces.
fn compact(dir: &Path, base: u64, upto: u64) -> Result<()> {
    let mut state = if snap_path(dir, base).exists() {
        read_snapshot(&snap_path(dir, base))?.ok_or_else(|| bad("snapshot being compacted"))?
    } else {
        State::new()
    };
    let (_, wals) = listing(dir)?;
    for &g in wals.iter().filter(|&&g| g >= base && g < upto) {
        replay_wal(&wal_path(dir, g), &mut state)?;
    }
    write_snapshot(dir, upto, &state)?;
    for &g in wals.iter().filter(|&&g| g < upto) {
        let _ = std::fs::remove_file(wal_path(dir, g));
    }
    let (snaps, _) = listing(dir)?;
    for g in snaps.into_iter().filter(|&g| g < upto) {
        let _ = std::fs::remove_file(snap_path(dir, g));
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Op> {
        vec![
            Op::Record(TableRecord { name: "t".into(), sequence: 7, ..Default::default() }),
            Op::Entries { table: "t".into(), entries: vec![(vec![1, 2, 3], Some(u64::MAX)), (vec![9], None)] },
            Op::Drop("u".into()),
        ]
    }

    #[test]
    fn group_round_trips() {
        let b = encode_ops(&sample());
        let (back, end) = decode_ops(&b).unwrap();
        assert!(!end);
        assert_eq!(back, sample());
    }

    #[test]
    fn group_mark_and_truncate_drop_a_failed_batch() {
        let mut g = Group::new();
        g.begin_entries("t");
        g.entry(b"a", Some(1));
        let m = g.mark();
        g.begin_entries("t");
        g.entry(b"b", Some(2));
        g.truncate(m);
        g.entry(b"c", Some(3)); // no open op after truncate: ignored
        let (ops, _) = decode_ops(&g.finish()).unwrap();
        assert_eq!(ops, vec![Op::Entries { table: "t".into(), entries: vec![(b"a".to_vec(), Some(1))] }]);
    }

    #[test]
    fn damaged_group_is_an_error_not_a_panic() {
        let b = encode_ops(&sample());
        // A prefix decodes to fewer ops (cut at an op boundary; frames carry
        // the checksum that catches that) or fails, never panics.
        for n in 1..b.len() {
            if let Ok((ops, _)) = decode_ops(&b[..n]) {
                assert!(ops.len() < sample().len() && ops[..] == sample()[..ops.len()], "prefix of {n} bytes");
            }
        }
        let mut bad_tag = b.clone();
        bad_tag[0] = 9;
        assert!(decode_ops(&bad_tag).is_err());
        // A huge declared count does not allocate or panic.
        assert!(decode_ops(&[TAG_ENTRIES, 1, 0, 0, 0, b't', 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn torn_frames_stop_the_scan() {
        let mut b = frame(b"one");
        b.extend(frame(b"two"));
        let full = b.len();
        let (f, n) = frames(&b);
        assert_eq!((f.len(), n), (2, full));
        for cut in 0..full {
            let (f, n) = frames(&b[..cut]);
            assert!(n <= cut && f.len() <= 1 + usize::from(cut == full));
        }
        b[FRAME_HEAD + 1] ^= 1;
        assert_eq!(frames(&b).0.len(), 0, "a flipped byte fails the checksum");
    }
}
