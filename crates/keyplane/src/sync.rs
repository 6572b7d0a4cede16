//! Reader/writer coordination for lookup forms: readers never block and never
//! see a value that is neither a key's old nor its new value.
//!
//! Two mechanisms, both built only from atomics:
//!
//! * [`StripedSeqLock`]: a few thousand version counters. A writer that
//!   changes several slots first makes the counters of *all* touched stripes
//!   odd, writes, then makes them even again; a reader notes the counters of
//!   the stripes it reads before and after, and retries if one was odd or
//!   moved (Boehm's seqlock with fences, "Can seqlocks get along with
//!   programming language memory models?", 2012). This is the CuckooSwitch
//!   version-counter scheme and the role of the Concise FIB's D1/D2 vectors.
//! * [`Published`]: whole-structure replacement (re-seed, growth) by swapping
//!   an `Arc`; readers keep the snapshot they loaded, so a lookup that races a
//!   replacement answers from the complete old structure.
//!
//! The two meet in a **retired** seqlock ([`StripedSeqLock::retire`]): a
//! structure whose snapshots each carry their own seqlock may, when it
//! replaces a snapshot, first set the old snapshot's counters to
//! [`RETIRED`] for good, then publish the new one
//! ([`Published::replace_retiring`]). A reader that caches a snapshot
//! across calls then needs no generation check per call: its validation
//! against the retired counter fails, and its out-of-line retry moves it to
//! the current snapshot (Othello's reader, `othello/lookup.rs`).

use arc_swap::{ArcSwap, Guard};
use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// The value of a retired seqlock counter ([`StripedSeqLock::retire`]):
/// odd, so a reader's "not being written and unchanged" test fails on it,
/// and never reached by writes (2^63 of them).
pub(crate) const RETIRED: u64 = u64::MAX;

/// Striped sequence counters.
#[derive(Debug)]
pub struct StripedSeqLock {
    v: Box<[AtomicU64]>,
    mask: usize,
}

/// A reader's view of a [`StripedSeqLock`] ([`StripedSeqLock::view`]).
#[derive(Clone, Copy, Debug)]
pub struct Stripes<'a> {
    v: &'a [AtomicU64],
    mask: usize,
}

impl Stripes<'_> {
    /// Counter of stripe `i & mask`, without a bounds check.
    #[inline(always)]
    fn counter(&self, i: usize) -> &AtomicU64 {
        // SAFETY: a view's `v` has `mask + 1` counters (`StripedSeqLock::new`
        // makes them so and they never change), so `i & mask` is in bounds.
        unsafe { self.v.get_unchecked(i & self.mask) }
    }

    /// The version of stripe `i` (index `i & mask`) now, without waiting
    /// for a writer to finish (an odd version is one being written:
    /// [`Self::still`] then fails).
    #[inline(always)]
    pub fn peek(&self, i: usize) -> u64 {
        self.counter(i).load(Ordering::Acquire)
    }

    /// After the data loads: true if stripe `i` was not being written
    /// when [`Self::peek`] returned `v` and has not changed since.
    #[inline(always)]
    pub fn still(&self, i: usize, v: u64) -> bool {
        fence(Ordering::Acquire);
        (self.counter(i).load(Ordering::Relaxed) == v) & (v & 1 == 0)
    }
}

impl StripedSeqLock {
    /// `stripes` counters (rounded up to a power of two).
    pub fn new(stripes: usize) -> Self {
        let n = stripes.max(1).next_power_of_two();
        Self { v: (0..n).map(|_| AtomicU64::new(0)).collect(), mask: n - 1 }
    }

    /// Number of stripes.
    pub fn stripes(&self) -> usize {
        self.v.len()
    }

    /// Stripe of an index without mixing: neighbouring indices get
    /// neighbouring stripes (for callers whose indices are already random).
    #[inline(always)]
    pub fn stripe_direct(&self, i: usize) -> usize {
        i & self.mask
    }

    /// The counters, for probes that read several stripes at once (the
    /// view lives in registers, so its loads are not repeated after each
    /// acquire load).
    #[inline(always)]
    pub fn view(&self) -> Stripes<'_> {
        Stripes { v: &self.v, mask: self.mask }
    }

    /// Reader: version of a stripe before reading, waiting while a writer
    /// holds it. A [`RETIRED`] counter is returned at once (no writer comes
    /// back to a retired lock, so what it guards no longer changes and
    /// [`Self::read_validate`] then succeeds).
    #[inline(always)]
    pub fn read_begin(&self, stripe: usize) -> u64 {
        loop {
            let v = self.v[stripe].load(Ordering::Acquire);
            if v & 1 == 0 || v == RETIRED {
                return v;
            }
            std::hint::spin_loop();
        }
    }

    /// Reader: true if the stripe did not change since `read_begin` returned `v`.
    /// Call after the data loads; it issues the acquire fence itself.
    #[inline(always)]
    pub fn read_validate(&self, stripe: usize, v: u64) -> bool {
        fence(Ordering::Acquire);
        self.v[stripe].load(Ordering::Relaxed) == v
    }

    /// Reader convenience: runs `f` until it observes the stripes `a` and `b`
    /// stable across the read.
    #[inline(always)]
    pub fn read2<R>(&self, a: usize, b: usize, mut f: impl FnMut() -> R) -> R {
        loop {
            let va = self.read_begin(a);
            let vb = self.read_begin(b);
            let r = f();
            fence(Ordering::Acquire);
            if self.v[a].load(Ordering::Relaxed) == va && self.v[b].load(Ordering::Relaxed) == vb {
                return r;
            }
        }
    }

    /// Writer: marks the given stripes as being written. `stripes` must be
    /// free of duplicates (use [`StripeSet`]). Only one writer at a time.
    pub fn write_begin(&self, stripes: &[usize]) {
        for &s in stripes {
            let was = self.v[s].fetch_add(1, Ordering::Relaxed);
            debug_assert_ne!(was, RETIRED, "a write to a retired seqlock");
        }
        fence(Ordering::Release);
    }

    /// Writer: ends the write started by [`StripedSeqLock::write_begin`].
    pub fn write_end(&self, stripes: &[usize]) {
        for &s in stripes {
            self.v[s].fetch_add(1, Ordering::Release);
        }
    }

    /// Writer: retires the lock for good, after the last write to what it
    /// guards (none may be in progress, none may follow): every counter
    /// becomes [`RETIRED`] (release stores, so a reader that loads a
    /// retired counter sees every write made before). From then on a
    /// reader's validation of a version peeked before the retirement fails,
    /// as does [`Stripes::still`] and any "even and unchanged" test of a
    /// version peeked after it, while [`Self::read_begin`] /
    /// [`Self::read_validate`] / [`Self::read2`] read the final state.
    ///
    /// Readers of a retired lock that loop on [`Stripes::still`] (or on
    /// their own "even" test) would loop for ever: only a lock whose every
    /// reader handles [`RETIRED`] may be retired (Othello's snapshots,
    /// `othello/lookup.rs`).
    pub(crate) fn retire(&self) {
        for c in self.v.iter() {
            c.store(RETIRED, Ordering::Release);
        }
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.v.len() * 8
    }

    /// The counters (a power-of-two count), for readers that cache their
    /// base address in a flat view of a snapshot.
    #[inline(always)]
    pub(crate) fn counters(&self) -> &[AtomicU64] {
        &self.v
    }
}

/// A deduplicating set of stripe indices, reusable across writes.
#[derive(Debug, Default, Clone)]
pub struct StripeSet {
    list: Vec<usize>,
}

impl StripeSet {
    /// Empty set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a stripe.
    pub fn add(&mut self, s: usize) {
        self.list.push(s);
    }
    /// Sorted, duplicate-free stripes.
    pub fn finish(&mut self) -> &[usize] {
        self.list.sort_unstable();
        self.list.dedup();
        &self.list
    }
    /// Empties the set.
    pub fn clear(&mut self) {
        self.list.clear();
    }
}

/// A structure that can be replaced as a whole while readers use it.
///
/// `&self` loads ([`Published::load`]) pin the snapshot with arc-swap's debt
/// slots, which costs a locked instruction per call: a full barrier, so
/// back-to-back lookups cannot overlap their cache misses. Threads that do
/// many lookups should hold a [`Cached`] handle instead ([`Published::cached`]):
/// it keeps the current snapshot and checks a generation counter with one
/// plain load per access.
#[derive(Debug)]
pub struct Published<T> {
    cur: ArcSwap<T>,
    /// Bumped after every replacement, so cached handles notice it.
    generation: AtomicU64,
}

impl<T> Published<T> {
    /// Publishes `t`.
    pub fn new(t: T) -> Self {
        Self { cur: ArcSwap::from_pointee(t), generation: AtomicU64::new(0) }
    }
    /// Cheap snapshot for one read (or a batch of reads).
    #[inline(always)]
    pub fn load(&self) -> Guard<Arc<T>> {
        self.cur.load()
    }
    /// Snapshot that can be held for long.
    pub fn load_full(&self) -> Arc<T> {
        self.cur.load_full()
    }
    /// Number of replacements so far (acquire: a snapshot loaded after it
    /// is at least that new).
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    /// Replaces the structure; readers holding the old one finish on it.
    pub fn replace(&self, t: T) {
        self.cur.store(Arc::new(t));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// [`Published::replace`], calling `retire` on the structure being
    /// replaced first (for example [`StripedSeqLock::retire`] of its
    /// seqlock), before the new one is published: the retirement's stores
    /// come before the publication's (arc-swap's store is a sequentially
    /// consistent swap, the generation bump a release), so a thread that
    /// loads the new snapshot or the new generation also sees the old one
    /// retired. Nothing between the two can fail (the `Arc` is allocated
    /// before). Only one thread may replace at a time (the caller's lock),
    /// so the structure retired is the one replaced.
    pub(crate) fn replace_retiring(&self, t: T, retire: impl FnOnce(&T)) {
        let new = Arc::new(t);
        retire(&self.cur.load());
        self.cur.store(new);
        self.generation.fetch_add(1, Ordering::Release);
    }
    /// A per-thread handle that caches the current snapshot, borrowing the
    /// publisher. ([`Cached::new`] takes any owner, e.g. an `Arc<Published<T>>`.)
    pub fn cached(&self) -> Cached<&Self, T> {
        Cached::new(self)
    }
}

/// A per-thread read handle on a [`Published`] structure reached through
/// `P` (a reference or an `Arc`): it caches the current snapshot and, on
/// every access, compares the publisher's generation counter with the one
/// it cached (one acquire load, no read-modify-write). After a replacement
/// the next access picks up the new snapshot; an idle handle keeps the old
/// one alive until its next access or until it is dropped. `Send`, not
/// `Sync`: give each thread its own (`clone` makes another).
#[derive(Debug)]
pub struct Cached<P: Deref<Target = Published<T>>, T> {
    src: P,
    cache: RefCell<(u64, Arc<T>)>,
}

impl<P: Deref<Target = Published<T>> + Clone, T> Clone for Cached<P, T> {
    fn clone(&self) -> Self {
        Cached::new(self.src.clone())
    }
}

impl<P: Deref<Target = Published<T>>, T> Cached<P, T> {
    /// A handle on the publisher `src` points to.
    pub fn new(src: P) -> Self {
        // Generation first: if a replacement lands in between, the next
        // access sees a newer generation and reloads.
        let g = src.generation.load(Ordering::Acquire);
        let t = src.cur.load_full();
        Cached { src, cache: RefCell::new((g, t)) }
    }

    /// Runs `f` on the current snapshot.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&Arc<T>) -> R) -> R {
        let g = self.src.generation.load(Ordering::Acquire);
        let mut c = self.cache.borrow_mut();
        if c.0 != g {
            Self::refresh(&self.src, &mut c, g);
        }
        f(&c.1)
    }

    /// Out of line: a replacement is rare, and the arc-swap load and
    /// reference counting would otherwise bloat every inlined lookup.
    #[cold]
    #[inline(never)]
    fn refresh(src: &P, c: &mut (u64, Arc<T>), g: u64) {
        *c = (g, src.cur.load_full());
    }

    /// The newest snapshot, loaded through the publisher without touching
    /// the cache (slow path, callable inside [`Cached::with`]: for a reader
    /// that found its snapshot stale).
    pub fn latest(&self) -> Arc<T> {
        self.src.cur.load_full()
    }

    /// The publisher this handle reads from.
    pub(crate) fn source(&self) -> &P {
        &self.src
    }
}

/// A per-thread read handle like [`Cached`] that also keeps a `Copy` view
/// of its snapshot by value (for example array base addresses and layout
/// constants), so that a lookup reads its constants from the handle
/// instead of loading them through the `Arc` and no `RefCell` borrow is
/// taken per call. The view is made by `make` from the snapshot the handle
/// holds and replaced only together with it, in [`CachedView::with`]
/// before `f` runs: a view passed to `f` describes a snapshot this handle
/// keeps alive at least until its next `with` call. `f` must not call
/// `with` on the same handle if it uses the view afterwards.
///
/// Without the generation check: [`CachedView::with_held`] runs `f` on the
/// view of the snapshot held, current or not, and [`CachedView::reload`]
/// moves the handle to the current snapshot. For a lookup whose own
/// validation fails on every replaced snapshot (its seqlock retired before
/// the replacement, [`Published::replace_retiring`]): it reads through the
/// held view and, when the validation fails, reloads (after `f` returned)
/// and looks up again.
pub(crate) struct CachedView<'a, T, V: Copy> {
    src: &'a Published<T>,
    generation: Cell<u64>,
    view: Cell<V>,
    keep: Cell<Arc<T>>,
    make: fn(&T) -> V,
}

/// One cached snapshot, its generation and its view: each thread's entry
/// in a [`PerThreadView`] (the same state as a [`CachedView`]'s, which
/// keeps its own fields: as one nested struct the reader's inlined lookup
/// took one more instruction).
struct ViewSlot<T, V: Copy> {
    generation: Cell<u64>,
    view: Cell<V>,
    keep: Cell<Arc<T>>,
}

impl<T, V: Copy> ViewSlot<T, V> {
    fn new(src: &Published<T>, make: fn(&T) -> V) -> Self {
        // Generation first, as in `Cached::new`.
        let g = src.generation.load(Ordering::Acquire);
        let t = src.cur.load_full();
        ViewSlot { generation: Cell::new(g), view: Cell::new(make(&t)), keep: Cell::new(t) }
    }

    /// See [`CachedView::with`]; `src` must be the publisher this slot was
    /// made from (its generations are compared with this slot's).
    ///
    /// # Safety
    ///
    /// `f` must not call `with` on this same slot.
    #[inline(always)]
    unsafe fn with<R>(&self, src: &Published<T>, make: fn(&T) -> V, f: impl FnOnce(&V) -> R) -> R {
        let g = src.generation.load(Ordering::Acquire);
        if g != self.generation.get() {
            self.refresh(src, make, g);
        }
        // SAFETY: the view is written only by `refresh`, above and before
        // `f` runs, and the caller guarantees that `f` does not call `with`
        // (the only caller of `refresh`) on this slot; a slot is not `Sync`
        // (a `PerThreadView` hands each thread its own), so no other thread
        // writes it either. So nothing writes the view while `f` holds this
        // shared reference, and `keep` holds the snapshot it describes.
        f(unsafe { &*self.view.as_ptr() })
    }

    #[cold]
    #[inline(never)]
    fn refresh(&self, src: &Published<T>, make: fn(&T) -> V, g: u64) {
        let t = src.cur.load_full();
        self.view.set(make(&t));
        self.generation.set(g);
        // The old snapshot goes last, after nothing refers to it any more.
        drop(self.keep.replace(t));
    }

    /// See [`CachedView::with_held`].
    ///
    /// # Safety
    ///
    /// As for [`ViewSlot::with`] (`f` must not reload this slot either).
    #[inline(always)]
    unsafe fn with_held<R>(&self, f: impl FnOnce(&V) -> R) -> R {
        // SAFETY: as in `with`: only `refresh` writes the view, and the
        // caller guarantees `f` does not reach it on this slot.
        f(unsafe { &*self.view.as_ptr() })
    }

    /// See [`CachedView::reload`]; `src` as in [`ViewSlot::with`].
    #[inline(always)]
    fn reload(&self, src: &Published<T>, make: fn(&T) -> V) {
        // Generation first, as in `Cached::new`.
        let g = src.generation.load(Ordering::Acquire);
        self.refresh(src, make, g);
    }

    /// See [`CachedView::update`].
    #[inline(always)]
    fn update(&self, f: impl FnOnce(&mut V)) {
        let mut v = self.view.get();
        f(&mut v);
        self.view.set(v);
    }
}

impl<'a, T, V: Copy> CachedView<'a, T, V> {
    /// A handle on `src` whose view of each snapshot is `make(snapshot)`.
    pub fn new(src: &'a Published<T>, make: fn(&T) -> V) -> Self {
        // Generation first, as in `Cached::new`.
        let g = src.generation.load(Ordering::Acquire);
        let t = src.cur.load_full();
        let view = Cell::new(make(&t));
        CachedView { src, generation: Cell::new(g), view, keep: Cell::new(t), make }
    }

    /// Runs `f` on the view of the current snapshot: one acquire load of
    /// the publisher's generation and one compare per call; the view is
    /// passed by reference (not copied), valid for the whole call.
    ///
    /// # Safety
    ///
    /// `f` must not call `with` on this same handle (a refresh there would
    /// overwrite the view `f` holds a reference to and drop its snapshot).
    #[inline(always)]
    pub unsafe fn with<R>(&self, f: impl FnOnce(&V) -> R) -> R {
        let g = self.src.generation.load(Ordering::Acquire);
        if g != self.generation.get() {
            self.refresh(g);
        }
        // SAFETY: the view is written only by `refresh`, above and before
        // `f` runs, and the caller guarantees that `f` does not call `with`
        // (the only caller of `refresh`) on this handle; the handle is not
        // `Sync`, so no other thread writes it either. So nothing writes the
        // view while `f` holds this shared reference.
        f(unsafe { &*self.view.as_ptr() })
    }

    #[cold]
    #[inline(never)]
    fn refresh(&self, g: u64) {
        let t = self.src.cur.load_full();
        self.view.set((self.make)(&t));
        self.generation.set(g);
        // The old snapshot goes last, after nothing refers to it any more.
        drop(self.keep.replace(t));
    }

    /// Runs `f` on the view of the snapshot this handle holds, with no
    /// generation check (the snapshot may have been replaced since; the
    /// handle keeps it alive).
    ///
    /// # Safety
    ///
    /// `f` must not call `with`, `with_held`, `reload` or `update` on this
    /// same handle (they may overwrite the view `f` holds a reference to
    /// and drop its snapshot).
    #[inline(always)]
    pub unsafe fn with_held<R>(&self, f: impl FnOnce(&V) -> R) -> R {
        // SAFETY: as in `with`: only `refresh` writes the view, and the
        // caller guarantees that `f` does not reach it on this handle.
        f(unsafe { &*self.view.as_ptr() })
    }

    /// Out of line: moves the handle to the publisher's current snapshot,
    /// whatever the generation says (the snapshot held before may be
    /// dropped). Not to be called inside `f` of `with` / `with_held`.
    #[cold]
    #[inline(never)]
    pub fn reload(&self) {
        // Generation first, as in `Cached::new`.
        let g = self.src.generation.load(Ordering::Acquire);
        self.refresh(g);
    }

    /// Changes the view of the snapshot held (for state the view caches
    /// about its snapshot, such as a seqlock version last seen). Not to be
    /// called inside `f` of `with` / `with_held`.
    pub fn update(&self, f: impl FnOnce(&mut V)) {
        let mut v = self.view.get();
        f(&mut v);
        self.view.set(v);
    }
}

impl<T, V: Copy> Clone for CachedView<'_, T, V> {
    fn clone(&self) -> Self {
        CachedView::new(self.src, self.make)
    }
}

impl<T, V: Copy> std::fmt::Debug for CachedView<'_, T, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedView").field("generation", &self.generation.get()).finish_non_exhaustive()
    }
}

/// A [`CachedView`] for every thread that reads one [`Published`]
/// structure through a shared reference (`&self` lookups): owned by the
/// table (next to its publisher), it holds one [`ViewSlot`] per thread
/// that has read it ([`thread_local::ThreadLocal`]). A lookup finds its
/// thread's slot (a thread-local id and two loads) and checks the
/// generation, like a reader handle: no arc-swap pin, no locked
/// instruction, so consecutive `&self` lookups overlap their misses.
///
/// Lifetime of snapshots: a thread's slot keeps the snapshot it last read
/// alive until that thread's next lookup on this table (which moves it to
/// the current one) or until the table is dropped, which drops every
/// thread's slot. A thread that exits leaves its slot to the next thread
/// given its id (thread ids are reused), or to the table's drop. Nothing
/// global refers to a table's slots, so a dropped table keeps nothing
/// alive.
///
/// Finding the thread's slot: each thread remembers, in one thread-local
/// memo, the id of the `PerThreadView` it read last and its slot there
/// (a raw pointer: the memo keeps nothing alive). Ids are never reused, so
/// a matching id means the slot belongs to `self`, which is alive; a
/// mismatch (another table read in between, or the first read) takes the
/// `ThreadLocal` lookup, out of line, and updates the memo.
pub(crate) struct PerThreadView<T: Send + Sync, V: Copy + Send> {
    /// Never reused across all `PerThreadView`s of the process.
    id: u64,
    /// Boxed: a `ThreadLocal` is about 500 bytes inline, and the fast path
    /// reaches the slot through the memo without touching it.
    slots: Box<thread_local::ThreadLocal<ViewSlot<T, V>>>,
    make: fn(&T) -> V,
}

/// The next [`PerThreadView`] id (0 is the memo's "none").
static NEXT_VIEW_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The id of the [`PerThreadView`] this thread read last and the
    /// address of this thread's slot in it.
    static LAST_VIEW: Cell<(u64, *const ())> = const { Cell::new((0, std::ptr::null())) };
}

impl<T: Send + Sync, V: Copy + Send> PerThreadView<T, V> {
    /// No slots yet; each thread's view of a snapshot is `make(snapshot)`.
    pub fn new(make: fn(&T) -> V) -> Self {
        // 2^64 ids are never used up, so an id is never given twice.
        let id = NEXT_VIEW_ID.fetch_add(1, Ordering::Relaxed);
        PerThreadView { id, slots: Box::new(thread_local::ThreadLocal::new()), make }
    }

    /// This thread's slot, through the memo.
    #[inline(always)]
    fn slot(&self, src: &Published<T>) -> &ViewSlot<T, V> {
        let (id, p) = LAST_VIEW.with(Cell::get);
        if id == self.id {
            // SAFETY: the memo is this thread's, and only `slot_slow` sets
            // it, to (`self.id`, this thread's slot in `self.slots`) of the
            // `PerThreadView` with that id. Ids are never reused, so that
            // `PerThreadView` is `self`, alive for `&self`; a `ThreadLocal`
            // never moves or frees an entry before it is dropped (`self`
            // never clears it), and the entry stays this thread's while the
            // thread runs. So `p` points to a live `ViewSlot<T, V>` that
            // only this thread uses.
            unsafe { &*(p as *const ViewSlot<T, V>) }
        } else {
            self.slot_slow(src)
        }
    }

    #[cold]
    #[inline(never)]
    fn slot_slow(&self, src: &Published<T>) -> &ViewSlot<T, V> {
        let make = self.make;
        let slot = self.slots.get_or(|| ViewSlot::new(src, make));
        LAST_VIEW.with(|m| m.set((self.id, slot as *const ViewSlot<T, V> as *const ())));
        slot
    }

    /// [`CachedView::with_held`] on this thread's slot (made on its first
    /// call): `f` runs on the view of the snapshot the slot holds, current
    /// or not (no generation check).
    ///
    /// # Safety
    ///
    /// `src` must be the same publisher on every call (the one owned next
    /// to this value), and `f` must not call `with`, `with_held`, `reload`
    /// or `update` on this same value.
    #[inline(always)]
    pub unsafe fn with_held<R>(&self, src: &Published<T>, f: impl FnOnce(&V) -> R) -> R {
        let slot = self.slot(src);
        // SAFETY: the slot belongs to this thread and was made from `src`
        // (the caller's promise); the caller's promise on `f` is the slot's.
        unsafe { slot.with_held(f) }
    }

    /// [`CachedView::reload`] of this thread's slot: out of line, moves it
    /// to `src`'s current snapshot (the one held before may be dropped).
    ///
    /// # Safety
    ///
    /// `src` as for [`PerThreadView::with_held`]; not to be called inside
    /// `f` of `with` / `with_held`.
    #[cold]
    #[inline(never)]
    pub unsafe fn reload(&self, src: &Published<T>) {
        self.slot(src).reload(src, self.make)
    }

    /// [`CachedView::update`] of this thread's slot.
    ///
    /// # Safety
    ///
    /// As for [`PerThreadView::reload`].
    pub unsafe fn update(&self, src: &Published<T>, f: impl FnOnce(&mut V)) {
        self.slot(src).update(f)
    }

    /// Runs `f` on this thread's view of `src`'s current snapshot (the
    /// thread's slot is made on its first call).
    ///
    /// # Safety
    ///
    /// `src` must be the same publisher on every call (the one owned next
    /// to this value), and `f` must not call `with` on this same value.
    #[inline(always)]
    pub unsafe fn with<R>(&self, src: &Published<T>, f: impl FnOnce(&V) -> R) -> R {
        let slot = self.slot(src);
        // SAFETY: the slot belongs to this thread and was made from `src`
        // (the caller's promise); the caller's promise on `f` is the slot's.
        unsafe { slot.with(src, self.make, f) }
    }
}

impl<T: Send + Sync, V: Copy + Send> std::fmt::Debug for PerThreadView<T, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerThreadView").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn readers_never_see_a_torn_pair() {
        // Two values that must always be equal; the writer updates both under the lock.
        let lock = Arc::new(StripedSeqLock::new(64));
        let a = Arc::new(AtomicU64::new(0));
        let b = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (lock, a, b, stop) = (lock.clone(), a.clone(), b.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let (x, y) = lock.read2(3, 9, || (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)));
                        assert_eq!(x, y, "torn read");
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        let mut set = StripeSet::new();
        for i in 1..=200_000u64 {
            set.clear();
            set.add(9);
            set.add(3);
            set.add(9);
            let s = set.finish().to_vec();
            lock.write_begin(&s);
            a.store(i, Ordering::Relaxed);
            b.store(i, Ordering::Relaxed);
            lock.write_end(&s);
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    }

    #[test]
    fn published_replacement_keeps_old_snapshots_alive() {
        let p = Published::new(vec![1, 2, 3]);
        let old = p.load_full();
        p.replace(vec![4]);
        assert_eq!(*old, vec![1, 2, 3]);
        assert_eq!(**p.load(), vec![4]);
    }

    #[test]
    fn cached_handle_follows_replacements() {
        let p = Published::new(1u32);
        let c = p.cached();
        assert_eq!(c.with(|v| **v), 1);
        p.replace(2);
        assert_eq!(c.with(|v| **v), 2);
        let c2 = c.clone();
        p.replace(3);
        assert_eq!(c2.with(|v| **v), 3);
        assert_eq!(*c.latest(), 3);
        // Concurrent: a handle on another thread always sees a published
        // value, and finally the last one.
        let p = Arc::new(Published::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let h = {
            let (c, stop) = (Cached::new(p.clone()), stop.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                while !stop.load(Ordering::Acquire) {
                    let v = c.with(|v| **v);
                    assert!(v >= last, "went back from {last} to {v}");
                    last = v;
                }
                c.with(|v| **v)
            })
        };
        for i in 1..=20_000u64 {
            p.replace(i);
        }
        stop.store(true, Ordering::Release);
        assert_eq!(h.join().unwrap(), 20_000);
    }
}
