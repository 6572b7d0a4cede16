//! The replicated-table engine: one implementation of everything a lookup
//! form does besides looking up and patching (in the spirit of hashbrown's
//! raw table under its map types).
//!
//! A structure is a [`Scheme`]: its snapshot type (what readers load), its
//! whole-table image and in-place patch, how they are encoded, how a patch
//! is applied and how a key is looked up. [`RawLookup`] wraps any scheme with
//! the rest, written once:
//!
//! * the lineage (table id, key format) and the sequence number, checked by
//!   [`crate::lineage::check_next`] before any delta touches the table
//!   (overflow-safe: after `u64::MAX` nothing follows, never a panic);
//! * the writer lock (one writer at a time; blobs are written under it, so a
//!   blob is a consistent snapshot with its sequence number);
//! * whole-table replacement (a rebuild delta: checked by the scheme, built,
//!   published by `Arc` swap so racing readers finish on the old snapshot);
//! * the per-thread reader ([`Reader`], a [`crate::sync::Cached`] handle);
//! * the framing of lookup blobs and deltas: `Writer`/`Frame` with the
//!   scheme's own kind codes, the lineage prologue, and a delta's tag byte
//!   (the scheme's `REPLACE_TAG` for a whole image, its own tags otherwise;
//!   a scheme whose delta bytes predate the engine overrides
//!   `write_delta` / `read_delta`);
//! * a patch that fails half-way (`apply_patch_torn`) poisons the lookup
//!   form (no later delta applies; reload a blob).
//!
//! A structure's public `Lookup` / `Delta` / `Reader` are thin newtypes over
//! [`RawLookup`] / [`RawDelta`] / [`Reader`]; [`lookup_form!`] writes their
//! trait impls (`LookupTable`, `Wire`, `ReadHandle`, `DeltaInfo`). The control
//! side's prologue (value-width limit, value and key checks, default
//! options, bulk-load checks) is [`ControlLimits`], and [`control_form!`]
//! writes the matching head of every `impl ControlTable`. See
//! `docs/design.md`, "The engine".

use crate::error::{Error, Result};
use crate::lineage::{self, Lineage};
use crate::sync::{Cached, PerThreadView, Published};
use crate::wire::{Frame, Kind, Reader as WireReader, Writer};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One structure's lookup form, as the engine sees it. Implemented by a
/// zero-sized marker type per structure.
pub(crate) trait Scheme: Sized + Debug + Clone + PartialEq + Send + Sync + 'static {
    /// One snapshot of the lookup form: what readers load and search.
    type Inner: Debug + Send + Sync + 'static;
    /// A whole lookup form: the blob payload after the prologue, and the
    /// body of a rebuild delta.
    type Image: Debug + Clone + PartialEq + Send + Sync + ImageCodec;
    /// An in-place change (the body of every other delta).
    type Patch: Debug + Clone + PartialEq + Send + Sync + PatchCodec;

    /// Wire kind of the lookup blob.
    const LOOKUP_KIND: Kind;
    /// Wire kind of a delta.
    const DELTA_KIND: Kind;
    /// Tag byte of a rebuild delta; [`Scheme::encode_patch`] writes the others.
    const REPLACE_TAG: u8;

    /// A snapshot from an image (decoded from bytes or shipped in a delta).
    fn build(img: Self::Image) -> Result<Self::Inner>;
    /// The image of a snapshot (for blobs).
    fn image(c: &Self::Inner) -> Self::Image;
    /// Writes the blob payload of a snapshot: its image's bytes (override
    /// to write them without building the image first).
    fn encode_inner(c: &Self::Inner, w: &mut Writer) {
        Self::image(c).encode(w);
    }
    /// Expected blob payload size, to size the output once.
    fn payload_hint(_c: &Self::Inner) -> usize {
        64
    }
    /// Refuses a rebuild image that does not fit this table (another value
    /// width or slot layout) with [`Error::DeltaMismatch`].
    fn check_replace(c: &Self::Inner, img: &Self::Image) -> Result<()>;
    /// Applies a patch to snapshot `c`: in place under the snapshot's
    /// seqlocks, or by publishing new snapshots through `cur`. Validates
    /// every index before the first write (a bad patch changes nothing).
    fn apply_patch(cur: &Published<Self::Inner>, c: Arc<Self::Inner>, patch: &Self::Patch) -> Result<()>;
    /// Called on the published snapshot when a whole-table replacement
    /// replaces it, after its last write and before its successor is
    /// published ([`Published::replace_retiring`]). Othello retires the
    /// snapshot's seqlock here, so a reader that kept the snapshot fails
    /// its validation and moves to the current one (its reader checks no
    /// generation per call). Default: nothing.
    fn retire(_c: &Self::Inner) {}
    /// Heap bytes of a snapshot (without the `Inner` header itself).
    fn memory_bytes(c: &Self::Inner) -> usize;
    /// Value width of a snapshot.
    fn value_bits(c: &Self::Inner) -> u32;
    /// Looks a key up in snapshot `c`. `latest` loads the newest snapshot,
    /// for schemes whose readers can find theirs stale (most ignore it).
    fn get(c: &Self::Inner, key: &[u8], latest: impl Fn() -> Arc<Self::Inner>) -> Option<u64>;
    /// `get(c, &key.to_le_bytes(), latest)` (see [`crate::LookupTable::get_u64`]):
    /// override with a path specialised for 8-byte keys.
    #[inline(always)]
    fn get_u64(c: &Self::Inner, key: u64, latest: impl Fn() -> Arc<Self::Inner>) -> Option<u64> {
        Self::get(c, &crate::key::u64_key(key), latest)
    }
    /// Looks many keys up in snapshot `c` (prefetching where it helps).
    fn get_batch(c: &Self::Inner, keys: &[&[u8]], out: &mut [Option<u64>], latest: impl Fn() -> Arc<Self::Inner>) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = Self::get(c, k, &latest);
        }
    }
    /// `get_batch` of 8-byte integer keys (see
    /// [`crate::LookupTable::get_batch_u64`]): override with a path
    /// specialised for the width.
    #[inline]
    fn get_batch_u64(c: &Self::Inner, keys: &[u64], out: &mut [Option<u64>], latest: impl Fn() -> Arc<Self::Inner>) {
        crate::batch_u64_by_bytes(keys, out, |k, o| Self::get_batch(c, k, o, &latest))
    }
    /// Applies a patch whose operations depend on each other and so are
    /// checked one at a time (the full cuckoo map: a rebuild changes what
    /// its later slot writes are checked against). On failure: the error
    /// and whether the table changed before it (`true` poisons the lookup
    /// form: its sequence number becomes `u64::MAX`, so no delta follows
    /// and it has to be reloaded from a fresh blob). The default runs
    /// [`Scheme::apply_patch`], which changes nothing when it fails.
    fn apply_patch_torn(
        cur: &Published<Self::Inner>,
        c: Arc<Self::Inner>,
        patch: &Self::Patch,
    ) -> std::result::Result<(), (Error, bool)> {
        Self::apply_patch(cur, c, patch).map_err(|e| (e, false))
    }
    /// True when a patch rebuilds the table (re-executed from the patch
    /// rather than shipped as an image); reported by `DeltaInfo::is_rebuild`.
    fn patch_rebuilds(_p: &Self::Patch) -> bool {
        false
    }
    /// Writes a lookup blob's payload (after the frame header): the lineage
    /// prologue, then the snapshot. Override only for a structure whose
    /// blobs were laid out otherwise before the engine (LPM).
    fn write_blob(w: &mut Writer, table: Lineage, seq: u64, c: &Self::Inner) {
        lineage::write_prologue(w, table, seq);
        Self::encode_inner(c, w);
    }
    /// Reads what [`Scheme::write_blob`] wrote.
    fn read_blob(r: &mut WireReader<'_>) -> Result<(Lineage, u64, Self::Image)> {
        let (table, seq) = lineage::read_prologue(r)?;
        Ok((table, seq, Self::Image::decode(r)?))
    }
    /// Writes a delta's payload: the lineage prologue, then a patch (its
    /// own tag byte first) or [`Scheme::REPLACE_TAG`] and an image. Override
    /// only to keep a delta layout that predates the engine (LPM's `seq | id`
    /// prologue; the full cuckoo map's untagged operation list).
    fn write_delta(w: &mut Writer, d: &RawDelta<Self>) {
        lineage::write_prologue(w, d.table, d.seq);
        match &d.change {
            Change::Patch(p) => p.encode(w),
            Change::Replace(img) => {
                w.u8(Self::REPLACE_TAG);
                img.encode(w);
            }
        }
    }
    /// Reads what [`Scheme::write_delta`] wrote.
    fn read_delta(r: &mut WireReader<'_>) -> Result<RawDelta<Self>> {
        let (table, seq) = lineage::read_prologue(r)?;
        let change = match r.u8()? {
            t if t == Self::REPLACE_TAG => Change::Replace(Box::new(Self::Image::decode(r)?)),
            t => Change::Patch(Self::Patch::decode(t, r)?),
        };
        Ok(RawDelta { table, seq, change })
    }
}

/// A scheme's whole-table image on the wire.
pub(crate) trait ImageCodec: Sized {
    /// Writes the image.
    fn encode(&self, w: &mut Writer);
    /// Reads an image, validating every field.
    fn decode(r: &mut WireReader<'_>) -> Result<Self>;
}

/// A scheme's in-place patch on the wire.
pub(crate) trait PatchCodec: Sized {
    /// Writes the patch: its tag byte (not the scheme's `REPLACE_TAG`), then its body.
    fn encode(&self, w: &mut Writer);
    /// Reads the body of a patch whose tag byte was `tag`.
    fn decode(tag: u8, r: &mut WireReader<'_>) -> Result<Self>;
}

/// A whole-table replacement or an in-place patch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change<S: Scheme> {
    /// In-place change.
    Patch(S::Patch),
    /// Whole new lookup form (growth, re-seed, rebuild).
    Replace(Box<S::Image>),
}

/// A delta: lineage, sequence number and the change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawDelta<S: Scheme> {
    pub table: Lineage,
    pub seq: u64,
    pub change: Change<S>,
}

impl<S: Scheme> RawDelta<S> {
    /// A patch delta.
    pub fn patch(table: Lineage, seq: u64, p: S::Patch) -> Self {
        RawDelta { table, seq, change: Change::Patch(p) }
    }

    /// A rebuild delta.
    pub fn replace(table: Lineage, seq: u64, img: S::Image) -> Self {
        RawDelta { table, seq, change: Change::Replace(Box::new(img)) }
    }

    /// True for a whole-table replacement or a patch that rebuilds.
    pub fn is_rebuild(&self) -> bool {
        match &self.change {
            Change::Replace(_) => true,
            Change::Patch(p) => S::patch_rebuilds(p),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        // One update's patch often outgrows the default 64-byte start, and
        // the reallocations cost about 500 instructions of a Ludo update in
        // `serve` (callgrind, session 9): start at 256.
        let mut w = Writer::with_capacity(S::DELTA_KIND, 256);
        S::write_delta(&mut w, self);
        w.finish()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, S::DELTA_KIND)?;
        let d = S::read_delta(&mut r)?;
        r.finish()?;
        Ok(d)
    }
}

impl<S: Scheme> Eq for RawDelta<S>
where
    S::Image: Eq,
    S::Patch: Eq,
{
}

/// A lookup form: the scheme's current snapshot plus everything shared.
#[derive(Debug)]
pub(crate) struct RawLookup<S: Scheme> {
    table: Lineage,
    cur: Published<S::Inner>,
    seq: AtomicU64,
    /// The writer lock, holding the writer's own reference to the current
    /// snapshot with the generation it was loaded at: `apply` clones it
    /// (one reference-count increment) instead of an arc-swap load, and
    /// reloads it only after a replacement.
    writer: Mutex<WriterSnapshot<S::Inner>>,
}

/// The writer's reference to the published snapshot (see `RawLookup::writer`).
#[derive(Debug)]
struct WriterSnapshot<T> {
    generation: u64,
    cur: Arc<T>,
}

impl<T> WriterSnapshot<T> {
    fn new(p: &Published<T>) -> Self {
        // Generation first, as in `Cached::new`.
        let generation = p.generation();
        WriterSnapshot { generation, cur: p.load_full() }
    }

    /// Follows a replacement (only writers replace, and they hold the lock).
    #[inline]
    fn refresh(&mut self, p: &Published<T>) {
        if p.generation() != self.generation {
            *self = Self::new(p);
        }
    }
}

impl<S: Scheme> RawLookup<S> {
    /// A lookup form at sequence number `seq` of lineage `table`.
    pub fn new(inner: S::Inner, table: Lineage, seq: u64) -> Self {
        let cur = Published::new(inner);
        let writer = Mutex::new(WriterSnapshot::new(&cur));
        Self { table, cur, seq: AtomicU64::new(seq), writer }
    }

    /// From an image (a control form's export).
    pub fn from_image(img: S::Image, table: Lineage, seq: u64) -> Result<Self> {
        Ok(Self::new(S::build(img)?, table, seq))
    }

    /// Table id and key format.
    pub fn lineage(&self) -> Lineage {
        self.table
    }

    /// Sequence number of the last delta applied (or of the export).
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// The current snapshot, pinned for one call.
    #[inline(always)]
    pub fn load(&self) -> arc_swap::Guard<Arc<S::Inner>> {
        self.cur.load()
    }

    /// The current snapshot, held as long as needed.
    pub fn load_full(&self) -> Arc<S::Inner> {
        self.cur.load_full()
    }

    /// Value width.
    pub fn value_bits(&self) -> u32 {
        S::value_bits(&self.cur.load())
    }

    #[inline(always)]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        S::get(&self.cur.load(), key, || self.cur.load_full())
    }

    #[inline(always)]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        S::get_u64(&self.cur.load(), key, || self.cur.load_full())
    }

    #[inline]
    pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        S::get_batch(&self.cur.load(), keys, out, || self.cur.load_full())
    }

    #[inline]
    pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        S::get_batch_u64(&self.cur.load(), keys, out, || self.cur.load_full())
    }

    /// The publisher of the snapshots (for a scheme whose lookup form
    /// keeps per-thread caches of them: see [`lookup_form!`]'s `local`).
    #[allow(dead_code)]
    pub(crate) fn publisher(&self) -> &Published<S::Inner> {
        &self.cur
    }

    /// A per-thread reader.
    pub fn reader(&self) -> Reader<'_, S> {
        Reader(self.cur.cached())
    }

    /// Applies a delta: lineage and sequence checks, then the patch or the
    /// replacement, then the new sequence number; one writer at a time.
    pub fn apply(&self, d: &RawDelta<S>) -> Result<()> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        lineage::check_next(self.table, self.seq.load(Ordering::Relaxed), d.table, d.seq)?;
        w.refresh(&self.cur);
        let c = w.cur.clone();
        match &d.change {
            Change::Patch(p) => {
                let r = S::apply_patch_torn(&self.cur, c, p);
                // A patch may publish a new snapshot (a rebuild inside it):
                // drop the old one now rather than at the next delta.
                w.refresh(&self.cur);
                if let Err((e, torn)) = r {
                    if torn {
                        // Half applied: refuse every later delta (see `apply_patch_torn`).
                        self.seq.store(u64::MAX, Ordering::Release);
                    }
                    return Err(e);
                }
            }
            Change::Replace(img) => {
                S::check_replace(&c, img)?;
                drop(c);
                let inner = S::build((**img).clone()).map_err(|e| Error::DeltaMismatch(e.to_string()))?;
                self.cur.replace_retiring(inner, S::retire);
                w.refresh(&self.cur);
            }
        }
        self.seq.store(d.seq, Ordering::Release);
        Ok(())
    }

    /// Every heap byte plus the headers.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + std::mem::size_of::<S::Inner>() + S::memory_bytes(&self.cur.load())
    }

    /// The lookup blob, written under the writer lock (a consistent
    /// snapshot with its sequence number).
    pub fn to_bytes(&self) -> Vec<u8> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.cur.load();
        let mut w = Writer::with_capacity(S::LOOKUP_KIND, S::payload_hint(&c));
        S::write_blob(&mut w, self.table, self.seq.load(Ordering::Acquire), &c);
        w.finish()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, S::LOOKUP_KIND)?;
        let (table, seq, img) = S::read_blob(&mut r)?;
        r.finish()?;
        Self::from_image(img, table, seq)
    }
}

/// The address of one snapshot, the view a [`LocalSnapshots`] slot keeps
/// next to the `Arc` that keeps the snapshot alive.
///
/// Validity: made only by [`LocalSnapshots`] (through `snapshot_ref`) from
/// a live snapshot and used only inside [`PerThreadView::with`], whose slot
/// holds the `Arc` it was made from for the whole call (the type is private
/// to this module).
struct SnapshotRef<T>(*const T);

impl<T> Clone for SnapshotRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SnapshotRef<T> {}

// SAFETY: a `SnapshotRef` only points to a snapshot (`Send + Sync`, see
// `Scheme::Inner`) kept alive by the slot that holds the reference (see the
// type's docs), so moving one to another thread is no different from
// moving that `Arc`.
unsafe impl<T: Send + Sync> Send for SnapshotRef<T> {}

impl<T> SnapshotRef<T> {
    #[inline(always)]
    fn get(&self) -> &T {
        // SAFETY: the snapshot is alive while the reference is used (type docs).
        unsafe { &*self.0 }
    }
}

fn snapshot_ref<T>(t: &T) -> SnapshotRef<T> {
    SnapshotRef(t)
}

/// The `&self` lookups' per-thread snapshot cache of any scheme (a
/// [`PerThreadView`] of snapshot references; Othello keeps a flatter view
/// of its own): each thread that looks a key up through a `Lookup`'s
/// `&self` keeps, inside that table, its own snapshot `Arc`, checked
/// against the generation per call like a [`Reader`]'s, instead of pinning
/// the snapshot with arc-swap on every call (a locked read-modify-write,
/// which keeps consecutive lookups from overlapping their cache misses). A
/// structure names the field in [`lookup_form!`]'s third argument; its
/// docs state the one-stale-snapshot-per-thread rule.
pub(crate) struct LocalSnapshots<S: Scheme>(PerThreadView<S::Inner, SnapshotRef<S::Inner>>);

impl<S: Scheme> Default for LocalSnapshots<S> {
    fn default() -> Self {
        LocalSnapshots(PerThreadView::new(snapshot_ref))
    }
}

impl<S: Scheme> Debug for LocalSnapshots<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<S: Scheme> LocalSnapshots<S> {
    /// Runs `f` on this thread's current snapshot of `raw`.
    ///
    /// # Safety
    ///
    /// `f` must not look up through this cache (a refresh there would drop
    /// the snapshot `f` holds a reference to). `raw` should be the
    /// `RawLookup` owned next to this cache in the same `Lookup` (the same
    /// publisher on every call; another one gives answers from the wrong
    /// table, never a dangling reference: the slot keeps its snapshot alive).
    #[inline(always)]
    unsafe fn with<R>(&self, raw: &RawLookup<S>, f: impl FnOnce(&S::Inner) -> R) -> R {
        // SAFETY: the caller's promise on `f` is `PerThreadView::with`'s.
        unsafe {
            self.0.with(
                &raw.cur,
                #[inline(always)]
                |v| f(v.get()),
            )
        }
    }

    // The lookups below are called by `lookup_form!`'s `&self` methods
    // (and structures' inherent `get_u64`) with `&self.raw`, the
    // `RawLookup` next to this cache. Their closures run a scheme's lookup
    // on a snapshot, which never reaches this cache.

    #[inline(always)]
    pub fn get(&self, raw: &RawLookup<S>, key: &[u8]) -> Option<u64> {
        // SAFETY: see the comment above.
        unsafe {
            self.with(
                raw,
                #[inline(always)]
                |c| S::get(c, key, || raw.cur.load_full()),
            )
        }
    }

    #[inline(always)]
    pub fn get_u64(&self, raw: &RawLookup<S>, key: u64) -> Option<u64> {
        // SAFETY: see the comment above.
        unsafe {
            self.with(
                raw,
                #[inline(always)]
                |c| S::get_u64(c, key, || raw.cur.load_full()),
            )
        }
    }

    #[inline]
    pub fn get_batch(&self, raw: &RawLookup<S>, keys: &[&[u8]], out: &mut [Option<u64>]) {
        // SAFETY: see the comment above.
        unsafe { self.with(raw, |c| S::get_batch(c, keys, out, || raw.cur.load_full())) }
    }

    #[inline]
    pub fn get_batch_u64(&self, raw: &RawLookup<S>, keys: &[u64], out: &mut [Option<u64>]) {
        // SAFETY: see the comment above.
        unsafe { self.with(raw, |c| S::get_batch_u64(c, keys, out, || raw.cur.load_full())) }
    }
}

/// The per-thread reader of any scheme: a cached snapshot (see
/// [`Cached`]); `latest` for stale snapshots goes through the publisher.
#[derive(Debug)]
pub(crate) struct Reader<'a, S: Scheme>(Cached<&'a Published<S::Inner>, S::Inner>);

impl<S: Scheme> Clone for Reader<'_, S> {
    fn clone(&self) -> Self {
        Reader(self.0.clone())
    }
}

impl<'a, S: Scheme> Reader<'a, S> {
    /// The publisher this reader follows (for a scheme whose public reader
    /// keeps its own cache of the snapshot, built from this one through
    /// `From`: see [`lookup_form!`]).
    #[allow(dead_code)]
    pub(crate) fn publisher(&self) -> &'a Published<S::Inner> {
        self.0.source()
    }

    /// Runs `f` on the reader's current snapshot (a scheme's own typed
    /// lookups, e.g. LPM's `get_v4`).
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&S::Inner) -> R) -> R {
        self.0.with(
            #[inline(always)]
            |c| f(c),
        )
    }

    #[inline(always)]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.0.with(
            #[inline(always)]
            |c| S::get(c, key, || self.0.latest()),
        )
    }

    #[inline(always)]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        self.0.with(
            #[inline(always)]
            |c| S::get_u64(c, key, || self.0.latest()),
        )
    }

    #[inline]
    pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        self.0.with(|c| S::get_batch(c, keys, out, || self.0.latest()))
    }

    #[inline]
    pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        self.0.with(|c| S::get_batch_u64(c, keys, out, || self.0.latest()))
    }
}

/// The control-form prologue every structure runs: value width in
/// `1..=MAX_VALUE_BITS`, values that fit it, keys that fit the key store,
/// and the default options of `with_value_bits` / `from_items`. Written
/// once here; a structure states its limits and its `Options` type, and
/// [`control_form!`] writes the `ControlTable` methods that use them.
pub(crate) trait ControlLimits: Sized {
    /// The structure's build options (`with_options` / `from_items_with`).
    type Options;
    /// Widest value the structure stores.
    const MAX_VALUE_BITS: u32 = 64;
    /// Longest key (bytes) the structure accepts.
    const MAX_KEY_LEN: usize = u32::MAX as usize - 1;

    /// The options `with_value_bits` and `from_items` build with (override
    /// where they depend on the value width).
    fn default_options(_value_bits: u32) -> Result<Self::Options>
    where
        Self::Options: Default,
    {
        Ok(Self::Options::default())
    }

    /// Checks a value width for a new table.
    fn check_value_bits(value_bits: u32) -> Result<()> {
        crate::check_value_bits(value_bits, 1, Self::MAX_VALUE_BITS)
    }

    /// Checks a key and its value before an insert.
    #[inline]
    fn check_item(key: &[u8], value: u64, value_bits: u32) -> Result<()> {
        crate::check_value(value, value_bits)?;
        if key.len() > Self::MAX_KEY_LEN {
            return Err(Error::InvalidParameter(format!(
                "key of {} bytes is longer than the {} bytes this table takes",
                key.len(),
                Self::MAX_KEY_LEN
            )));
        }
        Ok(())
    }

    /// The bulk-construction prologue: checks the value width and every
    /// item, and collects the items into a key store sized for them (a
    /// repeated key: the last value wins, as the store decides).
    fn collect_items<S: ItemStore, I, K>(items: I, value_bits: u32) -> Result<S>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        Self::check_value_bits(value_bits)?;
        let it = items.into_iter();
        let mut store = S::sized(it.size_hint().0);
        for (k, v) in it {
            Self::check_item(k.as_ref(), v, value_bits)?;
            store.put(k.as_ref(), v);
        }
        Ok(store)
    }
}

/// A control form's key store, as [`ControlLimits::collect_items`] fills it.
pub(crate) trait ItemStore {
    /// An empty store with room for about `n` keys.
    fn sized(n: usize) -> Self;
    /// Adds (or overwrites) a checked item.
    fn put(&mut self, key: &[u8], value: u64);
}

impl ItemStore for crate::store::KeyStore {
    fn sized(n: usize) -> Self {
        Self::with_capacity(n, 16)
    }
    fn put(&mut self, key: &[u8], value: u64) {
        self.insert(key, value);
    }
}

/// Writes the shared part of a structure's `impl ControlTable for Control`
/// (call it inside the impl block): the associated types `Delta` /
/// `Lookup`, `lineage` / `set_lineage` over the field given (`lineage:
/// table`; `also: loc` forwards a new lineage to a part that carries it
/// too), `with_value_bits` / `from_items` through the structure's inherent
/// `with_options` / `from_items_with` with
/// [`ControlLimits::default_options`], and optionally `get` / `len` over
/// the key store (`keys: store`) and `value_bits` (`value_bits: p.vbits`).
/// The structure writes the rest (`insert`, `remove`, `export`,
/// `memory_bytes`, and what it did not name).
macro_rules! control_form {
    (
        lineage: $field:ident $(, also: $also:ident)?
        $(, keys: $keys:ident)? $(, value_bits: $($vb:ident).+)? $(,)?
    ) => {
        $(
            fn get(&self, key: &[u8]) -> Option<u64> {
                self.$keys.get(key)
            }

            fn len(&self) -> usize {
                self.$keys.len()
            }
        )?

        $(
            fn value_bits(&self) -> u32 {
                self.$($vb).+
            }
        )?

        type Delta = Delta;
        type Lookup = Lookup;

        fn lineage(&self) -> $crate::lineage::Lineage {
            self.$field
        }

        fn set_lineage(&mut self, l: $crate::lineage::Lineage) {
            self.$field = l;
            $(self.$also.set_lineage(l);)?
        }

        fn with_value_bits(value_bits: u32) -> $crate::Result<Self> {
            Self::with_options(value_bits, <Self as $crate::engine::ControlLimits>::default_options(value_bits)?)
        }

        fn from_items<I, K>(items: I, value_bits: u32) -> $crate::Result<Self>
        where
            I: IntoIterator<Item = (K, u64)>,
            K: AsRef<[u8]>,
        {
            let opts = <Self as $crate::engine::ControlLimits>::default_options(value_bits)?;
            Self::from_items_with(items, value_bits, opts)
        }
    };
}
pub(crate) use control_form;

/// Writes a control form's inherent `with_options` / `from_items_with`
/// (the public constructors with explicit options) around the bodies
/// given: `|value_bits, opts| empty: <empty table>, items(items): <bulk
/// construction>`; `build` for the common pair "an empty key store" /
/// "the checked items" handed to `Self::build(store, value_bits, opts)`.
macro_rules! options_constructors {
    (build) => {
        $crate::engine::options_constructors! {
            |value_bits, opts|
            empty: Self::build($crate::engine::ItemStore::sized(0), value_bits, opts),
            items(items): Self::build(Self::collect_items(items, value_bits)?, value_bits, opts),
        }
    };
    (|$vb:ident, $opts:ident| empty: $empty:expr, items($items:ident): $full:expr $(,)?) => {
        /// Empty table with explicit options.
        pub fn with_options($vb: u32, $opts: Options) -> Result<Self> {
            $empty
        }

        /// Bulk construction with explicit options. A repeated key: the last value wins.
        pub fn from_items_with<I, K>($items: I, $vb: u32, $opts: Options) -> Result<Self>
        where
            I: IntoIterator<Item = (K, u64)>,
            K: AsRef<[u8]>,
        {
            $full
        }
    };
}
pub(crate) use options_constructors;

/// Writes a scheme's lookups as calls of the snapshot's own inherent methods
/// of the same names (`get`, `get_batch`, `get_u64`: list those it has), for
/// schemes whose snapshots never go stale under a reader (the `latest`
/// argument is unused). Inlined: the same code as writing them by hand.
macro_rules! inner_lookups {
    ($($m:ident),+ $(,)?) => {
        $($crate::engine::inner_lookups!(@one $m);)+
    };
    (@one get) => {
        #[inline(always)]
        fn get(c: &Self::Inner, key: &[u8], _: impl Fn() -> std::sync::Arc<Self::Inner>) -> Option<u64> {
            c.get(key)
        }
    };
    (@one get_batch) => {
        #[inline]
        fn get_batch(
            c: &Self::Inner,
            keys: &[&[u8]],
            out: &mut [Option<u64>],
            _: impl Fn() -> std::sync::Arc<Self::Inner>,
        ) {
            c.get_batch(keys, out)
        }
    };
    (@one get_batch_u64) => {
        #[inline]
        fn get_batch_u64(
            c: &Self::Inner,
            keys: &[u64],
            out: &mut [Option<u64>],
            _: impl Fn() -> std::sync::Arc<Self::Inner>,
        ) {
            c.get_batch_u64(keys, out)
        }
    };
    (@one get_u64) => {
        #[inline(always)]
        fn get_u64(c: &Self::Inner, key: u64, _: impl Fn() -> std::sync::Arc<Self::Inner>) -> Option<u64> {
            c.get_u64(key)
        }
    };
}
pub(crate) use inner_lookups;

/// Writes the trait impls of a structure's public `Lookup { raw:
/// RawLookup<S> }`, `Delta(RawDelta<S>)` and `Reader<'a>(engine::Reader<'a,
/// S>)`, all delegating to the engine: `LookupTable` (with `get_u64` and
/// `get_batch_u64`), `Wire` (both), `ReadHandle` (the same), `DeltaInfo`,
/// and the accessors `lineage`, `seq`, `value_bits` (crate-internal, or of
/// the visibility given as a second argument). With a third argument, the
/// name of a field of `Lookup` whose type has `Default` and `get(&raw,
/// key)`, `get_u64`, `get_batch` and `get_batch_u64` of the same shape (a
/// per-thread snapshot cache: Othello's, cuckoo's), `&self` lookups go
/// through that field instead of pinning the snapshot per call.
macro_rules! lookup_form {
    ($scheme:ty) => {
        $crate::engine::lookup_form!($scheme, pub(crate));
    };
    (@self_gets) => {
        #[inline]
        fn get(&self, key: &[u8]) -> Option<u64> {
            self.raw.get(key)
        }
        #[inline]
        fn get_u64(&self, key: u64) -> Option<u64> {
            self.raw.get_u64(key)
        }
        #[inline]
        fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
            self.raw.get_batch(keys, out)
        }
        #[inline]
        fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
            self.raw.get_batch_u64(keys, out)
        }
    };
    // Through the per-thread cache: as short as a reader's lookup, so
    // `get_u64` is inlined like `ReadHandle::get_u64`.
    (@self_gets $local:ident) => {
        #[inline]
        fn get(&self, key: &[u8]) -> Option<u64> {
            self.$local.get(&self.raw, key)
        }
        #[inline(always)]
        fn get_u64(&self, key: u64) -> Option<u64> {
            self.$local.get_u64(&self.raw, key)
        }
        #[inline]
        fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
            self.$local.get_batch(&self.raw, keys, out)
        }
        #[inline]
        fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
            self.$local.get_batch_u64(&self.raw, keys, out)
        }
    };
    // `$vis`: visibility of the inherent accessors (`pub` for a structure
    // whose `seq` / `value_bits` were public before it moved onto the engine).
    ($scheme:ty, $vis:vis $(, $local:ident)?) => {
        impl $crate::LookupTable for Lookup {
            type Delta = Delta;
            type Reader<'a> = Reader<'a>;

            // `into`: a structure's reader may wrap its own handle made
            // from the engine's reader (Othello's flat view); for the
            // others it is the identity.
            #[allow(clippy::useless_conversion)]
            fn reader(&self) -> Reader<'_> {
                Reader(self.raw.reader().into())
            }
            $crate::engine::lookup_form!(@self_gets $($local)?);
            fn apply(&self, delta: &Delta) -> $crate::Result<()> {
                self.raw.apply(&delta.0)
            }
            fn memory_bytes(&self) -> usize {
                self.raw.memory_bytes()
            }
        }

        impl $crate::Wire for Lookup {
            const KIND: $crate::wire::Kind = <$scheme as $crate::engine::Scheme>::LOOKUP_KIND;
            fn to_bytes(&self) -> Vec<u8> {
                self.raw.to_bytes()
            }
            fn from_bytes(bytes: &[u8]) -> $crate::Result<Self> {
                Ok(Lookup::from_raw($crate::engine::RawLookup::from_bytes(bytes)?))
            }
        }

        impl $crate::Wire for Delta {
            const KIND: $crate::wire::Kind = <$scheme as $crate::engine::Scheme>::DELTA_KIND;
            fn to_bytes(&self) -> Vec<u8> {
                self.0.to_bytes()
            }
            fn from_bytes(bytes: &[u8]) -> $crate::Result<Self> {
                Ok(Delta($crate::engine::RawDelta::from_bytes(bytes)?))
            }
        }

        impl $crate::ReadHandle for Reader<'_> {
            #[inline]
            fn get(&self, key: &[u8]) -> Option<u64> {
                self.0.get(key)
            }
            #[inline]
            fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
                self.0.get_batch(keys, out)
            }
            #[inline(always)]
            fn get_u64(&self, key: u64) -> Option<u64> {
                self.0.get_u64(key)
            }
            #[inline]
            fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
                self.0.get_batch_u64(keys, out)
            }
        }

        impl $crate::lineage::DeltaInfo for Delta {
            fn table_id(&self) -> $crate::TableId {
                self.0.table.id
            }
            fn seq(&self) -> u64 {
                self.0.seq
            }
            fn is_rebuild(&self) -> bool {
                self.0.is_rebuild()
            }
        }

        impl Lookup {
            /// A lookup form from an image (the control form's export).
            pub(crate) fn from_raw(raw: $crate::engine::RawLookup<$scheme>) -> Self {
                Lookup { raw $(, $local: Default::default())? }
            }
            /// Table id and key format (see [`crate::lineage`]).
            $vis fn lineage(&self) -> $crate::lineage::Lineage {
                self.raw.lineage()
            }
            /// Sequence number of the last delta applied (or of the export).
            $vis fn seq(&self) -> u64 {
                self.raw.seq()
            }
            /// Value bits.
            $vis fn value_bits(&self) -> u32 {
                self.raw.value_bits()
            }
        }

        impl Delta {
            /// Sequence number of this delta.
            #[allow(dead_code)]
            $vis fn seq(&self) -> u64 {
                self.0.seq
            }
            /// The table this delta belongs to (see [`crate::lineage`]).
            #[allow(dead_code)]
            $vis fn table_id(&self) -> $crate::TableId {
                self.0.table.id
            }
            /// True if this delta replaces the whole lookup form.
            #[allow(dead_code)]
            $vis fn is_rebuild(&self) -> bool {
                self.0.is_rebuild()
            }
        }
    };
}
pub(crate) use lookup_form;
