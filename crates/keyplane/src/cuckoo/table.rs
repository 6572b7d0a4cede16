//! The bucket array shared by the writer, its reader handles and replicas:
//! the read protocol (CuckooSwitch Algorithms 2 and 3) and the writer's
//! primitive steps, BFS path search and deterministic rebuild.

use super::fasthash::hash_packed;
use super::path::{Cap, Policy, Seen, search};
use super::simd::{self, Isa};
use super::{MAX_BUCKETS, MAX_KEY_LEN, Params, SLOTS, STASH};
use crate::error::{Error, Result};
use crate::hash::{hash64, hi, lo, mix64, reduce};
use crate::mem::prefetch;
use crate::sync::{StripeSet, StripedSeqLock};
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, fence};

pub(crate) const INLINE_MAX: usize = 8;
const OOL: u64 = 9;
const OCC: u64 = 1 << 63;
pub(crate) const VAL48: u64 = (1 << 48) - 1;
/// Version counters: 8 KiB, so they stay in L1 next to the lookups they guard.
const MAX_STRIPES: usize = 1024;
const MAX_BFS_NODES: usize = 1024;
const MIN_ARENA: usize = 512;
/// Words of the largest out-of-line arena entry (length word + key words).
pub(crate) const MAX_ENTRY_WORDS: usize = 1 + MAX_KEY_LEN.div_ceil(8);
/// Keys per batch round in `get_batch` (CuckooSwitch uses up to 16 packets).
const BATCH: usize = 16;
/// Load (percent of bucket slots) above which an insert grows a table of
/// four-slot buckets first.
pub(crate) const MAX_LOAD_PCT: u64 = 95;
/// The same for buckets of five to eight slots ((2,8) cuckoo hashing fills
/// beyond 99 %).
pub(crate) const MAX_LOAD_PCT_WIDE_BUCKETS: u64 = 98;

/// One cache line: four (key word, meta word) slots, eight packed slots, or
/// keyed slots (see the module docs).
#[repr(C, align(64))]
#[derive(Default)]
pub(crate) struct Bucket {
    pub w: [AtomicU64; 8],
}

fn zeroed_buckets(n: usize) -> Box<[Bucket]> {
    if n == 0 {
        return Box::new([]);
    }
    let layout = std::alloc::Layout::array::<Bucket>(n).expect("bucket count is bounded by MAX_BUCKETS");
    // SAFETY: the layout has non-zero size; the pointer comes from the
    // global allocator with exactly `Layout::array::<Bucket>(n)`, which is
    // the layout `Box<[Bucket]>` deallocates with; the advice only reads
    // the range's address (a slice of `MaybeUninit`, valid uninitialised);
    // `write_bytes` then initialises all `n` buckets, and an all-zero
    // Bucket is a valid value (AtomicU64 has the bit validity of u64).
    unsafe {
        let p = std::alloc::alloc(layout) as *mut Bucket;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // Huge-page advice before the first touch: `alloc_zeroed` of this
        // 64-byte aligned type is `aligned_alloc` plus a memset, which maps
        // every page as a small page before any advice could apply.
        crate::mem::advise_hugepages(std::slice::from_raw_parts(p as *const std::mem::MaybeUninit<Bucket>, n));
        std::ptr::write_bytes(p, 0, n);
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// The packed word of a key the caller knows to have 8 bytes: one plain
/// load, not [`pack`]'s variable-length copy (0 for any other length).
#[inline(always)]
fn load8(k: &[u8]) -> u64 {
    k.first_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c))
}

/// Little-endian packing of up to 8 bytes.
#[inline(always)]
pub(crate) fn pack(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_le_bytes(b)
}

/// What a key looks like in a table: its buckets, tag and key word.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Probe {
    pub b1: usize,
    pub b2: usize,
    /// 16-bit tag: occupied | length code | fingerprint.
    pub tag: u64,
    /// Inline: the packed key. Out of line: the hash check in the high half.
    pub kw: u64,
    pub ool: bool,
}

impl Params {
    #[inline(always)]
    pub fn buckets_of(&self, h: u64) -> (usize, usize) {
        let b1 = reduce(lo(h), self.nb);
        let mut b2 = reduce(hi(h), self.nb);
        if b2 == b1 {
            b2 = if b1 + 1 == self.nb { 0 } else { b1 + 1 };
        }
        (b1 as usize, b2 as usize)
    }

    /// Hash of a key: XXH3-64 with the seed (computed from the packed word
    /// for 4- to 8-byte keys).
    #[inline(always)]
    pub fn hash(&self, key: &[u8]) -> u64 {
        if (4..=8).contains(&key.len()) {
            hash_packed(pack(key), key.len() as u32, super::fasthash::flip(self.seed))
        } else {
            hash64(key, self.seed)
        }
    }

    /// Tag of every entry of a fixed-width table (no fingerprint).
    #[inline(always)]
    pub fn fixed_tag(&self) -> u64 {
        0x8000 | (self.kl as u64) << 8
    }

    /// Largest load (percent of bucket slots) before an insert grows the table.
    pub fn max_load_pct(&self) -> u64 {
        if self.sb > SLOTS as u32 { MAX_LOAD_PCT_WIDE_BUCKETS } else { MAX_LOAD_PCT }
    }

    #[inline(always)]
    pub fn probe(&self, key: &[u8]) -> Probe {
        let h = self.hash(key);
        if self.kl != 0 && key.len() == self.kl as usize {
            let (b1, b2) = self.buckets_of(h);
            return Probe { b1, b2, tag: self.fixed_tag(), kw: pack(key), ool: false };
        }
        let (b1, b2) = self.buckets_of(h);
        let m = mix64(h);
        let fp = m >> 56;
        if key.len() <= INLINE_MAX {
            Probe { b1, b2, tag: 0x8000 | (key.len() as u64) << 8 | fp, kw: pack(key), ool: false }
        } else {
            Probe { b1, b2, tag: 0x8000 | OOL << 8 | fp, kw: (m >> 24) << 32, ool: true }
        }
    }

    pub fn slots(&self) -> usize {
        self.nb as usize * self.sb as usize
    }

    /// Value mask of a fixed-width slot.
    #[inline(always)]
    fn vmask(&self) -> u64 {
        crate::mask(8 * self.vb)
    }

    /// Occupied marker of a packed word (bit 63) when the key and value
    /// leave it free; 0 when they fill the word.
    #[inline(always)]
    fn mark(&self) -> u64 {
        if self.kl + self.vb < 8 { 1 << 63 } else { 0 }
    }

    /// Packed word of an entry (0 only for the entry a packed table keeps in the stash).
    #[inline(always)]
    fn packed_word(&self, kw: u64, val: u64) -> u64 {
        kw | val << (8 * self.kl) | self.mark()
    }

    /// Byte offset of slot `s`'s value in a keyed bucket.
    #[inline(always)]
    fn keyed_val_off(&self, s: usize) -> usize {
        8 * self.sb as usize + s * self.vb as usize
    }

    /// Reads the value of keyed slot `s` from a bucket's words.
    #[inline(always)]
    fn keyed_val(&self, w: &[u64; 8], s: usize) -> u64 {
        let o = self.keyed_val_off(s);
        let (j, sh) = (o / 8, (o % 8) * 8);
        let mut v = w[j & 7] >> sh;
        if sh + 8 * self.vb as usize > 64 {
            v |= w[(j + 1) & 7] << (64 - sh);
        }
        v & self.vmask()
    }

    /// Normalised (key word, meta word) of bucket slot `s` from the bucket's words.
    #[inline(always)]
    pub fn slot_from_words(&self, w: &[u64; 8], s: usize) -> (u64, u64) {
        if self.kl == 0 {
            return (w[2 * s], w[2 * s + 1]);
        }
        let (k, v) = if self.packed {
            let x = w[s];
            if x == 0 {
                return (0, 0);
            }
            (x & crate::mask(8 * self.kl), (x >> (8 * self.kl)) & self.vmask())
        } else {
            if (w[7] >> 56) >> s & 1 == 0 {
                return (0, 0);
            }
            (w[s], self.keyed_val(w, s))
        };
        (k, OCC | self.fixed_tag() << 48 | v)
    }

    /// Writes normalised (key word, meta word) into bucket slot `s` of `w`
    /// (a meta word of 0 clears the slot).
    pub fn slot_into_words(&self, w: &mut [u64; 8], s: usize, k: u64, m: u64) {
        if self.kl == 0 {
            w[2 * s] = k;
            w[2 * s + 1] = m;
            return;
        }
        let v = if m == 0 { 0 } else { m & VAL48 };
        if self.packed {
            w[s] = if m == 0 { 0 } else { self.packed_word(k, v) };
            return;
        }
        w[s] = k;
        let occ = 1u64 << (56 + s);
        if m == 0 {
            w[7] &= !occ
        } else {
            w[7] |= occ
        }
        let o = self.keyed_val_off(s);
        let (j, sh) = (o / 8, (o % 8) * 8);
        let vm = self.vmask();
        w[j] = (w[j] & !(vm << sh)) | v << sh;
        if sh + 8 * self.vb as usize > 64 {
            let hs = 64 - sh;
            w[j + 1] = (w[j + 1] & !(vm >> hs)) | v >> hs;
        }
    }

    /// Searches a fixed-width bucket's words for the packed key `kw`,
    /// without branches on the data: (hit, slot, value). Every slot
    /// position is compared (a fixed, unrolled loop); occupancy masks out
    /// empty slots and, in keyed buckets, the value and occupancy words.
    #[inline(always)]
    pub fn match_fixed(&self, w: &[u64; 8], kw: u64) -> (bool, usize, u64) {
        if self.packed {
            let cm = crate::mask(8 * self.kl) | self.mark();
            let target = kw | self.mark();
            let mut hits = 0u32;
            for (s, &x) in w.iter().enumerate() {
                hits |= (((((x ^ target) & cm) == 0) & (x != 0)) as u32) << s;
            }
            let s = hits.trailing_zeros() as usize & 7;
            // A miss reads 0 (callers OR the two buckets' answers).
            let vm = self.vmask() & 0u64.wrapping_sub((hits != 0) as u64);
            (hits != 0, s, (w[s] >> (8 * self.kl)) & vm)
        } else {
            let mut hits = 0u32;
            for (s, &x) in w[..7].iter().enumerate() {
                hits |= ((x == kw) as u32) << s;
            }
            hits &= (w[7] >> 56) as u32;
            let s = hits.trailing_zeros() as usize & 7;
            (hits != 0, s, self.keyed_val(w, s) & 0u64.wrapping_sub((hits != 0) as u64))
        }
    }

    /// [`Self::match_fixed`] reading the bucket's atomics in place (no
    /// copy of the line): (hit, value, 0 on a miss).
    #[inline(always)]
    pub fn match_bucket(&self, bk: &Bucket, kw: u64) -> (bool, u64) {
        if self.packed {
            let hits = self.packed_hits(bk, kw);
            let s = hits.trailing_zeros() as usize & 7;
            let vm = self.vmask() & 0u64.wrapping_sub((hits != 0) as u64);
            (hits != 0, (bk.w[s].load(Relaxed) >> (8 * self.kl)) & vm)
        } else {
            self.keyed_hit(bk, simd::eq_mask_portable(bk, kw))
        }
    }

    /// Bit `s` set for each occupied slot `s` of packed bucket `bk` that
    /// holds the packed key `kw` (an occupied slot's word is never 0).
    #[inline(always)]
    pub fn packed_hits(&self, bk: &Bucket, kw: u64) -> u32 {
        let cm = crate::mask(8 * self.kl) | self.mark();
        let target = kw | self.mark();
        let mut hits = 0u32;
        for (s, x) in bk.w.iter().enumerate() {
            let x = x.load(Relaxed);
            hits |= ((((x ^ target) & cm) == 0) as u32 & (x != 0) as u32) << s;
        }
        hits
    }

    /// The answer of a keyed bucket whose key-word equality mask is `eq`
    /// (bit `s` set when word `s` equals the key; [`simd::eq_masks`]):
    /// occupancy masks out empty slots and the value and occupancy words.
    /// (hit, value, 0 on a miss).
    #[inline(always)]
    pub fn keyed_hit(&self, bk: &Bucket, eq: u32) -> (bool, u64) {
        let w7 = bk.w[7].load(Relaxed);
        let hits = eq & (w7 >> 56) as u32 & 0x7f;
        let s = hits.trailing_zeros() as usize & 7;
        let o = self.keyed_val_off(s);
        let (j, sh) = (o / 8, (o % 8) * 8);
        let mut v = bk.w[j & 7].load(Relaxed) >> sh;
        if sh + 8 * self.vb as usize > 64 {
            v |= bk.w[(j + 1) & 7].load(Relaxed) << (64 - sh);
        }
        (hits != 0, v & self.vmask() & 0u64.wrapping_sub((hits != 0) as u64))
    }

    /// False for the one entry a packed bucket cannot hold (all-zero key
    /// and value filling the word): it lives in the stash.
    #[inline(always)]
    pub fn bucket_can_hold(&self, k: u64, m: u64) -> bool {
        !(self.packed && m != 0 && self.packed_word(k, m & VAL48) == 0)
    }
}

/// One slot write of a step. `val` is the separate-array value (0 when interleaved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotWrite {
    pub slot: u64,
    pub key: u64,
    pub meta: u64,
    pub val: u64,
}

impl SlotWrite {
    pub fn clear(slot: usize) -> Self {
        SlotWrite { slot: slot as u64, key: 0, meta: 0, val: 0 }
    }
}

/// A writer operation: what deltas carry and what the writer applies to its own table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Append an out-of-line key entry (length word, key words) at `off`.
    Arena { off: u64, words: Vec<u64> },
    /// Slot writes that readers observe atomically.
    Step(Vec<SlotWrite>),
    /// Rebuild into a new table (grown, shrunk, or at the same size with a
    /// compacted arena that has room for `extra` more words); `nb` is the
    /// resulting bucket count.
    Rebuild { mode: Resize, extra: u32, nb: u32 },
}

/// What a rebuild does to the bucket count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resize {
    /// Same size (arena compaction).
    Same = 0,
    /// Double (load above 95 % or a full stash).
    Grow = 1,
    /// Halve (load below 20 % after a remove).
    Shrink = 2,
    /// Leave a fixed-width layout for the wide one (a key of another length
    /// arrived); doubles the bucket count when buckets get fewer slots.
    Widen = 3,
    /// Take the fixed-width layout for keys of `extra` bytes (empty table).
    Narrow = 4,
}

impl Resize {
    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(Resize::Same),
            1 => Some(Resize::Grow),
            2 => Some(Resize::Shrink),
            3 => Some(Resize::Widen),
            4 => Some(Resize::Narrow),
            _ => None,
        }
    }
}

/// Load (percent of bucket slots) below which a remove shrinks the table.
pub(crate) const MIN_LOAD_PCT: u64 = 20;

/// Where the writer's operations go: applied always, recorded when `on`.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    pub on: bool,
    pub ops: Vec<Op>,
}

impl Sink {
    pub fn push(&mut self, op: Op) {
        if self.on {
            self.ops.push(op);
        }
    }
}

/// Counters the writer keeps about its work.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriteStats {
    pub moves: u64,
    pub bfs_nodes: u64,
    pub stashed: u64,
}

/// The table as the shared cuckoo-path search sees it.
struct PathGraph<'a> {
    t: &'a Table,
    buf: Vec<u8>,
}

impl super::path::Graph for PathGraph<'_> {
    fn slots(&self) -> usize {
        self.t.p.sb as usize
    }
    fn alt(&mut self, b: usize, s: usize) -> Option<usize> {
        let t = self.t;
        let (k, m) = t.bucket_slot(b, s);
        if m == 0 {
            return None;
        }
        let (b1, b2) = if t.p.kl != 0 {
            let pr = t.probe_fixed(k);
            (pr.b1, pr.b2)
        } else {
            t.key_of(k, m, &mut self.buf);
            t.p.buckets_of(t.p.hash(&self.buf))
        };
        Some(if b1 == b { b2 } else { b1 })
    }
    fn free(&self, b: usize) -> Option<usize> {
        self.t.free_in(b).map(|s| s % self.t.p.sb as usize)
    }
    #[inline(always)]
    fn prefetch(&self, b: usize) {
        prefetch(&self.t.buckets[b] as *const Bucket);
    }
}

/// The table: buckets, stash, optional value array, key arena, counters.
pub(crate) struct Table {
    pub p: Params,
    buckets: Box<[Bucket]>,
    /// Separate layout: one value per slot (bucket slots, then stash slots).
    vals: Box<[AtomicU64]>,
    /// STASH (key word, meta word) pairs.
    stash: Box<[AtomicU64]>,
    arena: Box<[AtomicU64]>,
    arena_used: AtomicU64,
    /// Arena words referenced by live slots.
    arena_live: AtomicU64,
    len: AtomicU64,
    stash_n: AtomicU64,
    lock: StripedSeqLock,
    smask: usize,
    /// `fasthash::flip(p.seed)`, for the fixed-width lookups.
    flip: u64,
    /// `Some(isa)` for the keyed layout with 7 slots of 8-byte keys and
    /// 1-byte values (the layout of 8-byte keys with values of up to 8
    /// bits): its values and occupancy byte all sit in the bucket's last
    /// word, at constant offsets ([`simd::keyed7`]).
    keyed7: Option<Isa>,
    /// Key compares of the fixed-width lookups ([`simd`]), detected once.
    isa: Isa,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuckoo::Table")
            .field("params", &self.p)
            .field("len", &self.len())
            .field("stash", &self.stash_len())
            .field("arena_used", &self.arena_used.load(Relaxed))
            .field("arena_cap", &self.arena.len())
            .finish()
    }
}

pub(crate) fn arena_cap_for(live: usize, extra: usize) -> usize {
    (2 * (live + extra)).max(MIN_ARENA)
}

impl Table {
    pub fn new(p: Params, arena_cap: usize) -> Self {
        let nb = p.nb as usize;
        let buckets = zeroed_buckets(nb);
        let vals = if p.separate { crate::bits::zeroed_atomics(p.slots() + STASH) } else { Box::new([]) };
        let lock = StripedSeqLock::new(nb.next_power_of_two().clamp(64, MAX_STRIPES));
        let smask = lock.stripes() - 1;
        Table {
            p,
            buckets,
            vals,
            stash: crate::bits::zeroed_atomics(2 * STASH),
            arena: crate::bits::zeroed_atomics(arena_cap),
            arena_used: AtomicU64::new(0),
            arena_live: AtomicU64::new(0),
            len: AtomicU64::new(0),
            stash_n: AtomicU64::new(0),
            lock,
            smask,
            flip: super::fasthash::flip(p.seed),
            keyed7: (p.kl == 8 && !p.packed && p.sb == 7 && p.vb == 1).then(Isa::detect),
            isa: Isa::detect(),
        }
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed) as usize
    }
    pub fn stash_len(&self) -> usize {
        self.stash_n.load(Relaxed) as usize
    }
    pub fn arena_cap(&self) -> usize {
        self.arena.len()
    }
    pub fn arena_used(&self) -> usize {
        self.arena_used.load(Relaxed) as usize
    }
    pub fn arena_live(&self) -> usize {
        self.arena_live.load(Relaxed) as usize
    }
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.buckets.len() * 64
            + (self.vals.len() + self.stash.len() + self.arena.len()) * 8
            + self.lock.memory_bytes()
    }

    #[inline(always)]
    fn stripe(&self, b: usize) -> usize {
        b & self.smask
    }
    #[inline(always)]
    fn stash_stripe(&self) -> usize {
        self.smask
    }
    #[inline(always)]
    fn stripe_of_slot(&self, slot: usize) -> usize {
        if slot < self.p.slots() { self.stripe(slot / self.p.sb as usize) } else { self.stash_stripe() }
    }

    #[inline(always)]
    fn stash_pair(&self, i: usize) -> (&AtomicU64, &AtomicU64) {
        (&self.stash[2 * i], &self.stash[2 * i + 1])
    }

    /// The eight words of bucket `b` (plain loads).
    #[inline(always)]
    pub fn words(&self, b: usize) -> [u64; 8] {
        let bk = &self.buckets[b];
        std::array::from_fn(|i| bk.w[i].load(Relaxed))
    }

    /// Raw (key word, meta word, separate value) of a slot, normalised to
    /// the wide layout's words whatever the table's layout.
    #[inline]
    pub fn raw(&self, slot: usize) -> (u64, u64, u64) {
        let main = self.p.slots();
        let v = if self.p.separate { self.vals[slot].load(Relaxed) } else { 0 };
        if slot < main {
            let sb = self.p.sb as usize;
            let (k, m) = self.bucket_slot(slot / sb, slot % sb);
            (k, m, v)
        } else {
            let (k, m) = self.stash_pair(slot - main);
            (k.load(Relaxed), m.load(Relaxed), v)
        }
    }

    /// [`Params::slot_from_words`] of slot `s` of bucket `b`, loading only
    /// the words that slot occupies (its key word; in keyed buckets the
    /// occupancy word and the value's one or two words).
    #[inline(always)]
    fn bucket_slot(&self, b: usize, s: usize) -> (u64, u64) {
        let p = &self.p;
        let bk = &self.buckets[b];
        if p.kl == 0 {
            return (bk.w[2 * s].load(Relaxed), bk.w[2 * s + 1].load(Relaxed));
        }
        let (k, v) = if p.packed {
            let x = bk.w[s & 7].load(Relaxed);
            if x == 0 {
                return (0, 0);
            }
            (x & crate::mask(8 * p.kl), (x >> (8 * p.kl)) & p.vmask())
        } else {
            let w7 = bk.w[7].load(Relaxed);
            if (w7 >> 56) >> s & 1 == 0 {
                return (0, 0);
            }
            let o = p.keyed_val_off(s);
            let (j, sh) = (o / 8, (o % 8) * 8);
            let word = |i: usize| if i == 7 { w7 } else { bk.w[i & 7].load(Relaxed) };
            let mut v = word(j) >> sh;
            if sh + 8 * p.vb as usize > 64 {
                v |= word(j + 1) << (64 - sh);
            }
            (bk.w[s & 7].load(Relaxed), v & p.vmask())
        };
        (k, OCC | p.fixed_tag() << 48 | v)
    }

    /// [`Params::slot_into_words`] of slot `s` of bucket `b` in place: one
    /// read-modify-write of only the words the slot occupies (the writer,
    /// under the bucket's stripe). The bucket's bits end up exactly as
    /// `slot_into_words` would leave them.
    #[inline(always)]
    fn store_bucket_slot(&self, b: usize, s: usize, k: u64, m: u64) {
        let p = &self.p;
        let bk = &self.buckets[b];
        if p.kl == 0 {
            bk.w[2 * s].store(k, Relaxed);
            bk.w[2 * s + 1].store(m, Relaxed);
            return;
        }
        let v = if m == 0 { 0 } else { m & VAL48 };
        if p.packed {
            bk.w[s & 7].store(if m == 0 { 0 } else { p.packed_word(k, v) }, Relaxed);
            return;
        }
        bk.w[s & 7].store(k, Relaxed);
        let occ = 1u64 << (56 + s);
        let mut w7 = bk.w[7].load(Relaxed);
        w7 = if m == 0 { w7 & !occ } else { w7 | occ };
        let o = p.keyed_val_off(s);
        let (j, sh) = (o / 8, (o % 8) * 8);
        let vm = p.vmask();
        let mut put = |i: usize, clear: u64, set: u64| {
            if i == 7 {
                w7 = (w7 & !clear) | set;
            } else {
                let x = &bk.w[i & 7];
                x.store((x.load(Relaxed) & !clear) | set, Relaxed);
            }
        };
        put(j, vm << sh, v << sh);
        if sh + 8 * p.vb as usize > 64 {
            let hs = 64 - sh;
            put(j + 1, vm >> hs, v >> hs);
        }
        bk.w[7].store(w7, Relaxed);
    }

    /// Stores a normalised entry into a slot (writer, under the slot's stripe).
    #[inline]
    fn store(&self, slot: usize, k: u64, m: u64, v: u64) {
        let main = self.p.slots();
        if self.p.separate {
            self.vals[slot].store(v, Relaxed);
        }
        if slot < main {
            let sb = self.p.sb as usize;
            self.store_bucket_slot(slot / sb, slot % sb, k, m);
        } else {
            let (kk, mm) = self.stash_pair(slot - main);
            kk.store(k, Relaxed);
            mm.store(m, Relaxed);
        }
    }

    #[inline(always)]
    fn value_of(&self, slot: usize, meta: u64) -> u64 {
        if self.p.separate { self.vals[slot].load(Relaxed) } else { meta & VAL48 }
    }

    fn arena_eq(&self, off: usize, key: &[u8]) -> bool {
        let words = key.len().div_ceil(8);
        match off.checked_add(1 + words) {
            Some(end) if end <= self.arena.len() => {}
            _ => return false,
        }
        if self.arena[off].load(Relaxed) != key.len() as u64 {
            return false;
        }
        key.chunks(8).enumerate().all(|(i, c)| self.arena[off + 1 + i].load(Relaxed) == pack(c))
    }

    #[inline(always)]
    fn slot_matches(&self, kword: u64, pr: &Probe, key: &[u8]) -> bool {
        if !pr.ool { kword == pr.kw } else { kword >> 32 == pr.kw >> 32 && self.arena_eq(kword as u32 as usize, key) }
    }

    /// Searches one bucket: (slot, value).
    #[inline(always)]
    fn find_in(&self, b: usize, pr: &Probe, key: &[u8]) -> Option<(usize, u64)> {
        if self.p.kl != 0 {
            if pr.tag != self.p.fixed_tag() {
                return None;
            }
            let (hit, s, v) = self.p.match_fixed(&self.words(b), pr.kw);
            return hit.then_some((b * self.p.sb as usize + s, v));
        }
        let bk = &self.buckets[b];
        for s in 0..SLOTS {
            let meta = bk.w[2 * s + 1].load(Relaxed);
            if meta >> 48 == pr.tag && self.slot_matches(bk.w[2 * s].load(Relaxed), pr, key) {
                let slot = b * SLOTS + s;
                return Some((slot, self.value_of(slot, meta)));
            }
        }
        None
    }

    fn find_stash(&self, pr: &Probe, key: &[u8]) -> Option<(usize, u64)> {
        let main = self.p.slots();
        for i in 0..STASH {
            let meta = self.stash[2 * i + 1].load(Relaxed);
            if meta >> 48 == pr.tag && self.slot_matches(self.stash[2 * i].load(Relaxed), pr, key) {
                return Some((main + i, self.value_of(main + i, meta)));
            }
        }
        None
    }

    /// Unsynchronised search (writer on its own table, or inside a validated read).
    #[inline(always)]
    fn find_raw(&self, pr: &Probe, key: &[u8]) -> Option<(usize, u64)> {
        self.find_in(pr.b1, pr, key)
            .or_else(|| self.find_in(pr.b2, pr, key))
            .or_else(|| if self.stash_n.load(Relaxed) != 0 { self.find_stash(pr, key) } else { None })
    }

    /// Writer-side lookup (no concurrent writer exists).
    pub fn find_writer(&self, pr: &Probe, key: &[u8]) -> Option<(usize, u64)> {
        if self.p.kl != 0 && pr.tag == self.p.fixed_tag() {
            // Fixed width: compare the key words in place (no copy of the lines).
            let sb = self.p.sb as usize;
            for b in [pr.b1, pr.b2] {
                if let Some(s) = self.fixed_slot(b, pr.kw) {
                    return Some((b * sb + s, self.bucket_slot(b, s).1 & VAL48));
                }
            }
            return if self.stash_n.load(Relaxed) != 0 { self.find_stash(pr, key) } else { None };
        }
        self.find_raw(pr, key)
    }

    /// Slot of the packed key `kw` in fixed-width bucket `b`.
    #[inline(always)]
    fn fixed_slot(&self, b: usize, kw: u64) -> Option<usize> {
        let p = &self.p;
        let bk = &self.buckets[b];
        let hits = if p.packed {
            p.packed_hits(bk, kw)
        } else {
            // Key words 0..7 occupied (word 7 holds the values and the
            // occupancy byte, so its compare bit is masked off).
            simd::eq_mask_portable(bk, kw) & (bk.w[7].load(Relaxed) >> 56) as u32 & 0x7f
        };
        (hits != 0).then(|| hits.trailing_zeros() as usize)
    }

    /// Optimistic read (CuckooSwitch Algorithm 2).
    #[inline]
    pub fn get_probe(&self, pr: &Probe, key: &[u8]) -> Option<u64> {
        let (s1, s2) = (self.stripe(pr.b1), self.stripe(pr.b2));
        // Without a batch, the alternate bucket is the only thing to prefetch (§3.4).
        prefetch(&self.buckets[pr.b2] as *const Bucket);
        loop {
            let v1 = self.lock.read_begin(s1);
            let v2 = self.lock.read_begin(s2);
            let mut r = self.find_in(pr.b1, pr, key).or_else(|| self.find_in(pr.b2, pr, key));
            let mut vs = None;
            if r.is_none() && self.stash_n.load(Relaxed) != 0 {
                let ss = self.stash_stripe();
                let v = self.lock.read_begin(ss);
                r = self.find_stash(pr, key);
                vs = Some((ss, v));
            }
            if self.lock.read_validate(s1, v1)
                && self.lock.read_validate(s2, v2)
                && vs.is_none_or(|(ss, v)| self.lock.read_validate(ss, v))
            {
                return r.map(|x| x.1);
            }
        }
    }

    /// Fixed-width lookup of the packed key `kw` whose hash is `h`: both
    /// buckets are loaded up front and searched without data-dependent
    /// branches, and the stripe versions are checked with plain loads, so
    /// consecutive calls overlap their cache misses. The stash (rarely
    /// non-empty) and a failed validation take the general path.
    #[inline(always)]
    pub fn get_fixed(&self, kw: u64, h: u64) -> Option<u64> {
        let (b1, b2) = self.p.buckets_of(h);
        debug_assert!(b1 < self.buckets.len() && b2 < self.buckets.len());
        // SAFETY: `buckets_of` reduces into `0..p.nb` (`reduce(_, nb) < nb`,
        // and the adjusted `b2` is `b1 + 1 < nb` or 0), and `Table::new`
        // allocates exactly `p.nb` buckets; `p` never changes afterwards (a
        // resize builds a new table).
        let (bk1, bk2) = unsafe { (self.buckets.get_unchecked(b1), self.buckets.get_unchecked(b2)) };
        prefetch(bk2 as *const Bucket);
        let l = self.lock.view();
        let (v1, v2) = (l.peek(b1), l.peek(b2));
        let ((h1, x1), (h2, x2)) = if self.keyed7.is_some() {
            let (hits, x) = simd::keyed7(self.isa, bk1, bk2, kw);
            ((hits != 0, x & 0u64.wrapping_sub((hits != 0) as u64)), (false, 0))
        } else if !self.p.packed {
            let (e1, e2) = simd::eq_masks(self.isa, bk1, bk2, kw);
            (self.p.keyed_hit(bk1, e1), self.p.keyed_hit(bk2, e2))
        } else {
            (self.p.match_bucket(bk1, kw), self.p.match_bucket(bk2, kw))
        };
        let stash = self.stash_n.load(Relaxed);
        if l.still(b1, v1) & l.still(b2, v2) & (h1 | h2 | (stash == 0)) {
            return (h1 | h2).then_some(x1 | x2);
        }
        self.get_fixed_retry(kw, b1, b2)
    }

    /// [`Self::get_fixed`]'s general path (a writer in a stripe, or a miss
    /// with keys in the stash), out of line.
    #[cold]
    #[inline(never)]
    fn get_fixed_retry(&self, kw: u64, b1: usize, b2: usize) -> Option<u64> {
        let pr = Probe { b1, b2, tag: self.p.fixed_tag(), kw, ool: false };
        self.get_probe(&pr, &[])
    }

    /// This table's lookups with the key compares of `isa` (one
    /// `Isa::available` on this CPU), for tests comparing the paths.
    #[cfg(test)]
    pub(crate) fn force_isa(&mut self, isa: Isa) {
        self.isa = isa;
        self.keyed7 = self.keyed7.map(|_| isa);
    }

    /// Exact lookup.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        if key.len() == 8 {
            if self.keyed7 == Some(Isa::Avx512) {
                return self.get_keyed7(Isa::Avx512, pack(key));
            } else if self.keyed7 == Some(Isa::Avx2) {
                return self.get_keyed7(Isa::Avx2, pack(key));
            }
        }
        if self.p.kl == 0 {
            // The wide layout inline, as before the fixed-width layouts: no
            // out-of-line call and no layout re-checks (an out-of-line
            // `get_other` cost name-key lookups 26 more instructions, 6 %).
            return self.get_probe(&self.p.probe(key), key);
        }
        self.get_other(key)
    }

    /// [`Self::get`] for every layout but `keyed7`'s 8-byte keys on a SIMD
    /// CPU.
    #[inline(never)]
    fn get_other(&self, key: &[u8]) -> Option<u64> {
        if let (Some(isa), 8) = (self.keyed7, key.len()) {
            return self.get_keyed7(isa, pack(key));
        }
        if self.p.kl != 0 {
            if key.len() != self.p.kl as usize {
                return None;
            }
            let kw = pack(key);
            let h = if (4..=8).contains(&key.len()) {
                hash_packed(kw, key.len() as u32, self.flip)
            } else {
                hash64(key, self.p.seed)
            };
            return self.get_fixed(kw, h);
        }
        let pr = self.p.probe(key);
        self.get_probe(&pr, key)
    }

    /// Exact lookup of an 8-byte key given as an integer (its little-endian
    /// bytes), hashed from the integer directly.
    #[inline(always)]
    pub fn get_u64(&self, key: u64) -> Option<u64> {
        // One compare on an AVX-512 CPU; the portable path and the other
        // layouts out of line.
        if self.keyed7 == Some(Isa::Avx512) {
            self.get_keyed7(Isa::Avx512, key)
        } else if self.keyed7 == Some(Isa::Avx2) {
            self.get_keyed7(Isa::Avx2, key)
        } else {
            self.get_u64_other(key)
        }
    }

    /// [`Self::get_u64`] for every layout but `keyed7` on a SIMD CPU.
    #[inline(never)]
    fn get_u64_other(&self, key: u64) -> Option<u64> {
        if let Some(isa) = self.keyed7 {
            return self.get_keyed7(isa, key);
        }
        if self.p.kl == 8 {
            return self.get_fixed(key, hash_packed(key, 8, self.flip));
        }
        if self.p.kl != 0 {
            return None;
        }
        self.get(&key.to_le_bytes())
    }

    /// [`Self::get_fixed`] of an 8-byte key in the `keyed7` layout, with
    /// the layout's constants in the code and both buckets searched by
    /// [`simd::keyed7`] with `isa` (the table's `keyed7` instruction set).
    #[inline(always)]
    fn get_keyed7(&self, isa: Isa, kw: u64) -> Option<u64> {
        debug_assert_eq!(self.keyed7, Some(isa));
        let (b1, b2) = self.p.buckets_of(hash_packed(kw, 8, self.flip));
        debug_assert!(b1 < self.buckets.len() && b2 < self.buckets.len());
        // SAFETY: as in `get_fixed`: `buckets_of` gives indices below
        // `p.nb`, the number of buckets `Table::new` allocated.
        let (bk1, bk2) = unsafe { (self.buckets.get_unchecked(b1), self.buckets.get_unchecked(b2)) };
        let l = self.lock.view();
        let (v1, v2) = (l.peek(b1), l.peek(b2));
        let (hits, x) = simd::keyed7(isa, bk1, bk2, kw);
        let stash = self.stash_n.load(Relaxed);
        // Seqlock validation with one branch: the data loads above, an
        // acquire fence, the versions again (`Stripes::still` for both
        // stripes, folded); a miss also goes the long way when the stash
        // holds keys.
        fence(Acquire);
        let moved = (l.peek(b1) ^ v1) | (l.peek(b2) ^ v2) | ((v1 | v2) & 1);
        if moved | (stash & 0u64.wrapping_sub((hits == 0) as u64)) == 0 {
            return (hits != 0).then_some(x);
        }
        self.get_fixed_retry(kw, b1, b2)
    }

    /// First slot of bucket `b` whose tag and key word (inline key) or hash
    /// check (out-of-line key) match: (slot, key word, meta word).
    #[inline(always)]
    fn candidate_in(&self, b: usize, pr: &Probe) -> Option<(usize, u64, u64)> {
        if self.p.kl != 0 {
            if pr.tag != self.p.fixed_tag() {
                return None;
            }
            let (hit, s, v) = self.p.match_fixed(&self.words(b), pr.kw);
            return hit.then_some((b * self.p.sb as usize + s, pr.kw, OCC | pr.tag << 48 | v));
        }
        let bk = &self.buckets[b];
        for s in 0..SLOTS {
            let meta = bk.w[2 * s + 1].load(Relaxed);
            if meta >> 48 == pr.tag {
                let k = bk.w[2 * s].load(Relaxed);
                if (!pr.ool && k == pr.kw) || (pr.ool && k >> 32 == pr.kw >> 32) {
                    return Some((b * SLOTS + s, k, meta));
                }
            }
        }
        None
    }

    /// Batched lookup. A `keyed7` round whose keys all have 8 bytes takes
    /// `batch_keyed7`. Otherwise two-round prefetching (CuckooSwitch Algorithm 3):
    /// hash every key of a round of up to 16 and prefetch its first bucket;
    /// snapshot versions and search the first buckets, prefetching the second
    /// bucket only for misses; search those; validate each key's versions
    /// and redo only the keys whose buckets changed. When a candidate slot
    /// needs one more memory access — the arena entry of a long key, the
    /// separate value array — those are prefetched for the whole round and
    /// read in a third pass, so they overlap as well.
    pub fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        let Some(isa) = self.keyed7 else {
            return self.get_batch_general(keys, out);
        };
        let n = keys.len().min(out.len());
        let (keys, out) = (&keys[..n], &mut out[..n]);
        if keys.iter().all(|k| k.len() == 8) {
            // Every key has 8 bytes: `load8`, not `pack`.
            return match isa {
                Isa::Avx512 => self.batch_keyed7(Isa::Avx512, keys, load8, out),
                Isa::Avx2 => self.batch_keyed7(Isa::Avx2, keys, load8, out),
                Isa::Portable => self.batch_keyed7(Isa::Portable, keys, load8, out),
            };
        }
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            if ks.iter().all(|k| k.len() == 8) {
                match isa {
                    Isa::Avx512 => self.batch_keyed7(Isa::Avx512, ks, load8, os),
                    Isa::Avx2 => self.batch_keyed7(Isa::Avx2, ks, load8, os),
                    Isa::Portable => self.batch_keyed7(Isa::Portable, ks, load8, os),
                }
            } else {
                self.get_batch_general(ks, os);
            }
        }
    }

    /// Batched lookup of the 8-byte keys `keys` (packed by `load`) of the
    /// `keyed7` layout, in rounds of `BATCH` keys: a round hashes every key
    /// and prefetches both its buckets (one [`simd::keyed7`] search covers
    /// both, so the second bucket is not worth a round of its own), then
    /// searches and validates each key as [`Self::get_keyed7`] does; a moved
    /// version or a miss with keys in the stash takes the general path for
    /// that key. Rounds are software-pipelined: the next round's hashes and
    /// prefetches are issued before this round's searches, so a call of
    /// more than `BATCH` keys overlaps one round's misses with the previous
    /// round's work (a call of at most `BATCH` keys is one round).
    #[inline(always)]
    fn batch_keyed7<K: Copy>(&self, isa: Isa, keys: &[K], load: impl Fn(K) -> u64, out: &mut [Option<u64>]) {
        let n = keys.len().min(out.len());
        let (mut cur, mut next) = ([(0usize, 0usize, 0u64); BATCH], [(0usize, 0usize, 0u64); BATCH]);
        self.keyed7_stage(&keys[..n.min(BATCH)], &load, &mut cur);
        let mut base = 0;
        while base < n {
            let m = (n - base).min(BATCH);
            let after = base + m;
            if after < n {
                self.keyed7_stage(&keys[after..n.min(after + BATCH)], &load, &mut next);
            }
            self.keyed7_search(isa, &cur[..m], &mut out[base..after]);
            std::mem::swap(&mut cur, &mut next);
            base = after;
        }
    }

    /// A round's first stage: `keys` (at most `BATCH`) hashed into `at`
    /// and both buckets of each prefetched.
    #[inline(always)]
    fn keyed7_stage<K: Copy>(&self, keys: &[K], load: &impl Fn(K) -> u64, at: &mut [(usize, usize, u64); BATCH]) {
        for (&k, a) in keys.iter().zip(at.iter_mut()) {
            let kw = load(k);
            let (b1, b2) = self.p.buckets_of(hash_packed(kw, 8, self.flip));
            debug_assert!(b1 < self.buckets.len() && b2 < self.buckets.len());
            // SAFETY: `buckets_of` gives indices below `p.nb`, the number
            // of buckets `Table::new` allocated (see `get_fixed`).
            let (bk1, bk2) = unsafe { (self.buckets.get_unchecked(b1), self.buckets.get_unchecked(b2)) };
            prefetch(bk1 as *const Bucket);
            prefetch(bk2 as *const Bucket);
            *a = (b1, b2, kw);
        }
    }

    /// A round's second stage: each staged key searched and validated.
    #[inline(always)]
    fn keyed7_search(&self, isa: Isa, at: &[(usize, usize, u64)], os: &mut [Option<u64>]) {
        let l = self.lock.view();
        for (&(b1, b2, kw), o) in at.iter().zip(os.iter_mut()) {
            // SAFETY: every entry of `at` is either made by `keyed7_stage`,
            // whose indices come from `buckets_of` (below `p.nb`, the number
            // of buckets `Table::new` allocated), or the initial `(0, 0, 0)`
            // (bucket 0 exists: `p.nb >= 1`); this private function is only
            // called by `batch_keyed7` with such entries.
            let (bk1, bk2) = unsafe { (self.buckets.get_unchecked(b1), self.buckets.get_unchecked(b2)) };
            let (v1, v2) = (l.peek(b1), l.peek(b2));
            let (hits, x) = simd::keyed7(isa, bk1, bk2, kw);
            let stash = self.stash_n.load(Relaxed);
            fence(Acquire);
            let moved = (l.peek(b1) ^ v1) | (l.peek(b2) ^ v2) | ((v1 | v2) & 1);
            *o = if moved | (stash & 0u64.wrapping_sub((hits == 0) as u64)) == 0 {
                (hits != 0).then_some(x)
            } else {
                self.get_fixed_retry(kw, b1, b2)
            };
        }
    }

    /// [`Self::get_batch`] of 8-byte integer keys (`get_u64` of each key):
    /// the `keyed7` layout takes its batch rounds straight from the
    /// integers; other layouts run `get_batch` on the keys' bytes.
    pub fn get_batch_u64(&self, keys: &[u64], out: &mut [Option<u64>]) {
        let Some(isa) = self.keyed7 else {
            return crate::batch_u64_by_bytes(keys, out, |k, o| self.get_batch_general(k, o));
        };
        let id = |k: u64| k;
        match isa {
            Isa::Avx512 => self.batch_keyed7(Isa::Avx512, keys, id, out),
            Isa::Avx2 => self.batch_keyed7(Isa::Avx2, keys, id, out),
            Isa::Portable => self.batch_keyed7(Isa::Portable, keys, id, out),
        }
    }

    /// [`Self::get_batch`] for every layout (and for rounds with keys of
    /// other lengths in `keyed7`).
    fn get_batch_general(&self, keys: &[&[u8]], out: &mut [Option<u64>]) {
        const DONE: u8 = 0;
        const SECOND: u8 = 1;
        const CAND: u8 = 2;
        const REDO: u8 = 3;
        let n = keys.len().min(out.len());
        let mut pr = [Probe::default(); BATCH];
        let mut ver = [(0u64, 0u64); BATCH];
        let mut state = [DONE; BATCH];
        let mut cand = [(0usize, 0u64, 0u64); BATCH];
        let separate = self.p.separate;
        let mut start = 0;
        while start < n {
            let m = (n - start).min(BATCH);
            let ks = &keys[start..start + m];
            let os = &mut out[start..start + m];
            for i in 0..m {
                pr[i] = self.p.probe(ks[i]);
                prefetch(&self.buckets[pr[i].b1] as *const Bucket);
            }
            // Found a candidate: either the answer, or prefetch what it still needs.
            let mut found = |i: usize, c: (usize, u64, u64), p: &Probe, os: &mut [Option<u64>]| {
                if !p.ool && !separate {
                    os[i] = Some(c.2 & VAL48);
                    DONE
                } else {
                    if p.ool {
                        if let Some(w) = self.arena.get(c.1 as u32 as usize) {
                            prefetch(w as *const AtomicU64);
                        }
                    }
                    if separate {
                        prefetch(&self.vals[c.0] as *const AtomicU64);
                    }
                    cand[i] = c;
                    CAND
                }
            };
            for i in 0..m {
                let p = &pr[i];
                ver[i] = (self.lock.read_begin(self.stripe(p.b1)), self.lock.read_begin(self.stripe(p.b2)));
                state[i] = match self.candidate_in(p.b1, p) {
                    Some(c) => found(i, c, p, os),
                    None => {
                        prefetch(&self.buckets[p.b2] as *const Bucket);
                        SECOND
                    }
                };
            }
            let stash = self.stash_n.load(Relaxed) != 0;
            for i in 0..m {
                if state[i] == SECOND {
                    let p = &pr[i];
                    state[i] = match self.candidate_in(p.b2, p) {
                        Some(c) => found(i, c, p, os),
                        None if stash => REDO,
                        None => {
                            os[i] = None;
                            DONE
                        }
                    };
                }
            }
            for i in 0..m {
                if state[i] == CAND {
                    let (slot, k, meta) = cand[i];
                    if pr[i].ool && !self.arena_eq(k as u32 as usize, ks[i]) {
                        // A 40-bit tag-and-check collision (or a torn read): take the slow path.
                        state[i] = REDO;
                    } else {
                        os[i] = Some(self.value_of(slot, meta));
                    }
                }
            }
            for i in 0..m {
                let p = &pr[i];
                let ok = self.lock.read_validate(self.stripe(p.b1), ver[i].0)
                    && self.lock.read_validate(self.stripe(p.b2), ver[i].1);
                if !ok || state[i] == REDO {
                    os[i] = self.get_probe(p, ks[i]);
                }
            }
            start += m;
        }
    }

    // ---------------------------------------------------------------- writer

    /// Checks that a slot write is well formed for this table.
    fn check_write(&self, w: &SlotWrite) -> Result<()> {
        let bad = |m: String| Err(Error::DeltaMismatch(m));
        if w.slot >= (self.p.slots() + STASH) as u64 {
            return bad(format!("slot {} outside the table's {} slots", w.slot, self.p.slots() + STASH));
        }
        if (w.slot as usize) < self.p.slots() && !self.p.bucket_can_hold(w.key, w.meta) {
            return bad("the all-zero packed entry belongs in the stash".into());
        }
        self.check_entry(w.key, w.meta, w.val, self.arena_used()).or_else(bad)
    }

    /// Checks a (key word, meta word, value) triple; arena references must lie below `used`.
    pub fn check_entry(&self, key: u64, meta: u64, val: u64, used: usize) -> std::result::Result<(), String> {
        if meta == 0 {
            return if key == 0 && val == 0 { Ok(()) } else { Err("empty slot with a key or value".into()) };
        }
        if meta & OCC == 0 {
            return Err("meta word without the occupied bit".into());
        }
        let v = if self.p.separate {
            if meta & VAL48 != 0 {
                return Err("value bits in the meta word of a separate-value table".into());
            }
            val
        } else {
            if val != 0 {
                return Err("separate value in an interleaved table".into());
            }
            meta & VAL48
        };
        if self.p.vbits < 64 && v >> self.p.vbits != 0 {
            return Err(format!("value {v:#x} wider than {} bits", self.p.vbits));
        }
        let code = (meta >> 56) & 0x7f;
        if self.p.kl != 0 && meta >> 48 != self.p.fixed_tag() {
            return Err(format!("entry tag {:#x} in a table of {}-byte keys", meta >> 48, self.p.kl));
        }
        match code {
            0..=8 => {
                if code < 8 && key >> (8 * code) != 0 {
                    return Err("inline key word has bytes beyond the key length".into());
                }
            }
            OOL => {
                let off = key as u32 as usize;
                if off >= used {
                    return Err(format!("arena offset {off} beyond the {used} words written"));
                }
                let len = self.arena[off].load(Relaxed) as usize;
                if !(INLINE_MAX + 1..=MAX_KEY_LEN).contains(&len) || off + 1 + len.div_ceil(8) > used {
                    return Err(format!("arena entry at {off} has a bad length {len}"));
                }
            }
            c => return Err(format!("bad key length code {c}")),
        }
        Ok(())
    }

    fn ool_words(&self, key: u64, meta: u64) -> u64 {
        if meta & OCC != 0 && (meta >> 56) & 0x7f == OOL {
            let off = key as u32 as usize;
            let len = self.arena.get(off).map_or(0, |w| w.load(Relaxed));
            1 + len.div_ceil(8)
        } else {
            0
        }
    }

    /// Applies one step under the stripes of every bucket it touches.
    pub fn apply_step(&self, ws: &[SlotWrite]) -> Result<()> {
        for w in ws {
            self.check_write(w)?;
        }
        // Stripe set: on the stack for the writer's own steps (≤ 2 slots).
        let mut small = [0usize; 8];
        let mut big = StripeSet::new();
        let stash = ws.iter().any(|w| w.slot as usize >= self.p.slots());
        let st: &[usize] = if ws.len() <= small.len() {
            let mut n = 0;
            for w in ws {
                let s = self.stripe_of_slot(w.slot as usize);
                if !small[..n].contains(&s) {
                    small[n] = s;
                    n += 1;
                }
            }
            &small[..n]
        } else {
            for w in ws {
                big.add(self.stripe_of_slot(w.slot as usize));
            }
            big.finish()
        };
        self.lock.write_begin(st);
        let (mut len, mut live) = (self.len.load(Relaxed), self.arena_live.load(Relaxed));
        for w in ws {
            let slot = w.slot as usize;
            let (ok, om, _) = self.raw(slot);
            live = live.saturating_sub(self.ool_words(ok, om)) + self.ool_words(w.key, w.meta);
            len = len.saturating_sub((om != 0) as u64) + (w.meta != 0) as u64;
            self.store(slot, w.key, w.meta, w.val);
        }
        self.len.store(len, Relaxed);
        self.arena_live.store(live, Relaxed);
        if stash {
            let n = (0..STASH).filter(|i| self.stash[2 * i + 1].load(Relaxed) != 0).count();
            self.stash_n.store(n as u64, Relaxed);
        }
        self.lock.write_end(st);
        Ok(())
    }

    /// Appends an out-of-line key entry; only the next free offset is accepted.
    pub fn apply_arena(&self, off: u64, words: &[u64]) -> Result<()> {
        let used = self.arena_used() as u64;
        if off != used {
            return Err(Error::DeltaMismatch(format!("arena append at {off}, table has {used} words written")));
        }
        let len = words.first().copied().unwrap_or(0) as usize;
        if !(INLINE_MAX + 1..=MAX_KEY_LEN).contains(&len) || words.len() != 1 + len.div_ceil(8) {
            return Err(Error::DeltaMismatch("malformed arena entry".into()));
        }
        if used as usize + words.len() > self.arena.len() {
            return Err(Error::DeltaMismatch("arena append beyond the arena's capacity".into()));
        }
        for (i, &w) in words.iter().enumerate() {
            self.arena[used as usize + i].store(w, Relaxed);
        }
        self.arena_used.store(used + words.len() as u64, Relaxed);
        Ok(())
    }

    /// Arena words encoding `key` (length word then key words).
    pub fn arena_entry(key: &[u8]) -> Vec<u64> {
        let mut v = Vec::with_capacity(1 + key.len().div_ceil(8));
        v.push(key.len() as u64);
        v.extend(key.chunks(8).map(pack));
        v
    }

    /// Key bytes stored in a slot (writer side), appended to `buf`.
    pub fn key_of(&self, kword: u64, meta: u64, buf: &mut Vec<u8>) {
        buf.clear();
        let code = ((meta >> 56) & 0x7f) as usize;
        if code <= INLINE_MAX {
            buf.extend_from_slice(&kword.to_le_bytes()[..code]);
        } else {
            let off = kword as u32 as usize;
            let len = self.arena.get(off).map_or(0, |w| w.load(Relaxed) as usize).min(MAX_KEY_LEN);
            for i in 0..len.div_ceil(8) {
                let w = self.arena.get(off + 1 + i).map_or(0, |w| w.load(Relaxed));
                let take = (len - 8 * i).min(8);
                buf.extend_from_slice(&w.to_le_bytes()[..take]);
            }
        }
    }

    /// The slot entry for a new key.
    pub fn entry(&self, slot: usize, pr: &Probe, kword: u64, val: u64) -> SlotWrite {
        let (meta_v, v) = if self.p.separate { (0, val) } else { (val, 0) };
        SlotWrite { slot: slot as u64, key: kword, meta: pr.tag << 48 | meta_v, val: v }
    }

    /// First free slot of bucket `b`, from the words that mark occupancy
    /// (wide: the meta words; packed: the slot words; keyed: the
    /// occupancy byte).
    #[inline]
    fn free_in(&self, b: usize) -> Option<usize> {
        let p = &self.p;
        let bk = &self.buckets[b];
        let sb = p.sb as usize;
        let s = if p.kl == 0 {
            (0..SLOTS).find(|&s| bk.w[2 * s + 1].load(Relaxed) == 0)
        } else if p.packed {
            (0..sb).find(|&s| bk.w[s & 7].load(Relaxed) == 0)
        } else {
            let free = !(bk.w[7].load(Relaxed) >> 56) & crate::mask(sb as u32);
            (free != 0).then(|| free.trailing_zeros() as usize)
        };
        s.map(|s| b * sb + s)
    }

    /// Breadth-first search for a cuckoo path from `b1`/`b2` to a free slot
    /// (the shared [`super::path::search`]; a bucket once per path, at most
    /// [`MAX_BFS_NODES`] queued). Returns the moves (from, to), leaf first,
    /// and the freed root slot.
    fn bfs(&self, b1: usize, b2: usize, st: &mut WriteStats) -> Option<(Vec<(usize, usize)>, usize)> {
        let mut g = PathGraph { t: self, buf: Vec::new() };
        let policy =
            Policy { seen: Seen::OnPath, cap: Cap::Queue(MAX_BFS_NODES), max_moves: usize::MAX, roots_free: false };
        let mut path = Vec::new();
        let (found, expanded) = search(&mut g, &[b1 as u32, b2 as u32], policy, &mut Vec::new(), &mut path);
        st.bfs_nodes += expanded;
        if !found {
            return None;
        }
        let sb = self.p.sb as usize;
        let slot = |(b, s): (u32, u8)| b as usize * sb + s as usize;
        let moves = path.windows(2).rev().map(|w| (slot(w[0]), slot(w[1]))).collect();
        Some((moves, slot(path[0])))
    }

    /// Inserts a key known to be absent whose key word (arena offset for
    /// long keys) is ready. Returns false, changing nothing, when neither a
    /// free slot, a cuckoo path nor a stash slot exists.
    pub fn insert_absent(
        &self,
        pr: &Probe,
        kword: u64,
        val: u64,
        sink: &mut Sink,
        st: &mut WriteStats,
    ) -> Result<bool> {
        let in_buckets = self.p.bucket_can_hold(kword, OCC | val);
        let free = if in_buckets { self.free_in(pr.b1).or_else(|| self.free_in(pr.b2)) } else { None };
        let bfs = if in_buckets && free.is_none() { self.bfs(pr.b1, pr.b2, st) } else { None };
        let target = match free {
            Some(s) => s,
            None => match bfs {
                Some((moves, root)) => {
                    for (from, to) in moves {
                        let (k, m, v) = self.raw(from);
                        self.step(
                            &[SlotWrite { slot: to as u64, key: k, meta: m, val: v }, SlotWrite::clear(from)],
                            sink,
                        )?;
                        st.moves += 1;
                    }
                    root
                }
                None => {
                    let main = self.p.slots();
                    match (0..STASH).find(|i| self.stash[2 * i + 1].load(Relaxed) == 0) {
                        Some(i) => {
                            st.stashed += 1;
                            main + i
                        }
                        None => return Ok(false),
                    }
                }
            },
        };
        self.step(&[self.entry(target, pr, kword, val)], sink)?;
        Ok(true)
    }

    /// Applies a step and records it in `sink` (a heap copy only when the
    /// sink records: rebuilds and bulk loads apply without one).
    #[inline]
    fn step(&self, ws: &[SlotWrite], sink: &mut Sink) -> Result<()> {
        self.apply_step(ws)?;
        if sink.on {
            sink.ops.push(Op::Step(ws.to_vec()));
        }
        Ok(())
    }

    /// [`Params::probe`] of the key of a fixed-width table whose packed
    /// word is `kw` (a key of `p.kl` bytes), without its bytes.
    #[inline(always)]
    fn probe_fixed(&self, kw: u64) -> Probe {
        debug_assert!(self.p.kl != 0);
        let kl = self.p.kl as usize;
        let h = if (4..=8).contains(&kl) {
            hash_packed(kw, kl as u32, self.flip)
        } else {
            hash64(&kw.to_le_bytes()[..kl.min(8)], self.p.seed)
        };
        let (b1, b2) = self.p.buckets_of(h);
        Probe { b1, b2, tag: self.p.fixed_tag(), kw, ool: false }
    }

    /// After a remove: moves stashed keys whose buckets now have room back
    /// into them (one step per key).
    pub fn drain_stash(&self, sink: &mut Sink) -> Result<()> {
        if self.stash_len() == 0 {
            return Ok(());
        }
        let main = self.p.slots();
        let mut buf = Vec::new();
        for i in 0..STASH {
            let (k, m, v) = self.raw(main + i);
            if m == 0 {
                continue;
            }
            if !self.p.bucket_can_hold(k, m) {
                continue;
            }
            self.key_of(k, m, &mut buf);
            let (b1, b2) = self.p.buckets_of(self.p.hash(&buf));
            if let Some(to) = self.free_in(b1).or_else(|| self.free_in(b2)) {
                self.step(&[SlotWrite { slot: to as u64, key: k, meta: m, val: v }, SlotWrite::clear(main + i)], sink)?;
            }
        }
        Ok(())
    }

    /// True when a remove should shrink the table (load below 20 %).
    pub fn wants_shrink(&self) -> bool {
        self.p.nb > 2 && (self.len() as u64) * 100 < self.p.slots() as u64 * MIN_LOAD_PCT
    }

    /// True when an insert must grow the table first (load above 95 %).
    pub fn needs_grow(&self) -> bool {
        (self.len() as u64 + 1) * 100 > self.p.slots() as u64 * self.p.max_load_pct()
    }

    /// Deterministic rebuild: every key, in slot order, into a new table of
    /// the same or doubled size whose arena is compacted with room for
    /// `extra` more words; doubles again until every key fits. Writer and
    /// replicas run the same code and obtain identical tables.
    pub fn rebuild(&self, mode: Resize, extra: usize) -> Result<Table> {
        let next = |nb: u32| -> Result<u32> {
            let n = nb.checked_mul(2).filter(|&n| n <= MAX_BUCKETS);
            n.ok_or_else(|| Error::CapacityExceeded(format!("more than {MAX_BUCKETS} buckets needed")))
        };
        let mut nb = match mode {
            Resize::Same => self.p.nb,
            Resize::Grow => next(self.p.nb)?,
            Resize::Shrink => (self.p.nb / 2).max(2),
            Resize::Widen if self.p.sb > SLOTS as u32 => next(self.p.nb)?,
            Resize::Widen | Resize::Narrow => self.p.nb,
        };
        let (kl, extra) = match mode {
            Resize::Widen => (0, extra),
            Resize::Narrow => (extra as u32, 0),
            _ => (self.p.kl, extra),
        };
        loop {
            let t = Table::new(self.p.relayout(kl, nb), arena_cap_for(self.arena_live(), extra));
            if self.refill(&t)? {
                return Ok(t);
            }
            nb = next(nb)?;
        }
    }

    /// Inserts every key of this table into `t`, in slot order (bucket
    /// slots, then the stash); false when one does not fit. Keys of the
    /// same fixed width move as their packed words (no key bytes, no
    /// slot-number division).
    fn refill(&self, t: &Table) -> Result<bool> {
        let mut buf = Vec::new();
        let mut st = WriteStats::default();
        let mut sink = Sink::default();
        let same_width = self.p.kl != 0 && t.p.kl == self.p.kl;
        let mut place = |slot: usize, k: u64, m: u64| -> Result<bool> {
            if m == 0 {
                return Ok(true);
            }
            let pr = if same_width {
                t.probe_fixed(k)
            } else {
                self.key_of(k, m, &mut buf);
                t.p.probe(&buf)
            };
            let kword = if pr.ool {
                let off = t.arena_used() as u64;
                t.apply_arena(off, &Table::arena_entry(&buf))?;
                pr.kw | off
            } else {
                pr.kw
            };
            let val = if self.p.separate { self.vals[slot].load(Relaxed) } else { m & VAL48 };
            t.insert_absent(&pr, kword, val, &mut sink, &mut st)
        };
        let sb = self.p.sb as usize;
        for b in 0..self.p.nb as usize {
            for s in 0..sb {
                let (k, m) = self.bucket_slot(b, s);
                if !place(b * sb + s, k, m)? {
                    return Ok(false);
                }
            }
        }
        let main = self.p.slots();
        for i in 0..STASH {
            let (k, m) = self.stash_pair(i);
            if !place(main + i, k.load(Relaxed), m.load(Relaxed))? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A copy of the table (export).
    pub fn clone_table(&self) -> Table {
        let t = Table::new(self.p, self.arena.len());
        for (a, b) in self.buckets.iter().zip(t.buckets.iter()) {
            for i in 0..8 {
                b.w[i].store(a.w[i].load(Relaxed), Relaxed);
            }
        }
        for (src, dst) in [(&self.vals, &t.vals), (&self.stash, &t.stash), (&self.arena, &t.arena)] {
            for (a, b) in src.iter().zip(dst.iter()) {
                b.store(a.load(Relaxed), Relaxed);
            }
        }
        for (a, b) in [
            (&self.arena_used, &t.arena_used),
            (&self.arena_live, &t.arena_live),
            (&self.len, &t.len),
            (&self.stash_n, &t.stash_n),
        ] {
            b.store(a.load(Relaxed), Relaxed);
        }
        t
    }

    /// Wire encoding of the table.
    pub fn encode(&self, w: &mut crate::wire::Writer) {
        self.p.encode(w);
        w.u64(self.arena.len() as u64);
        let words: Vec<u64> = self.buckets.iter().flat_map(|b| b.w.iter().map(|x| x.load(Relaxed))).collect();
        w.u64s(&words);
        let load = |v: &[AtomicU64]| v.iter().map(|x| x.load(Relaxed)).collect::<Vec<u64>>();
        w.u64s(&load(&self.vals));
        w.u64s(&load(&self.stash));
        w.u64s(&load(&self.arena[..self.arena_used()]));
    }

    /// Decodes and validates every slot.
    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Table> {
        let p = Params::decode(r)?;
        let cap = r.u64()?;
        let corrupt = |m: &str| Error::Corrupt(m.to_string());
        let words = r.count(8)?;
        if words != p.nb as usize * 8 {
            return Err(corrupt("bucket words do not match the bucket count"));
        }
        let bucket_words = r.raw(words * 8)?;
        let vals = r.u64s()?;
        if vals.len() != if p.separate { p.slots() + STASH } else { 0 } {
            return Err(corrupt("value array length does not match the layout"));
        }
        let stash = r.u64s()?;
        if stash.len() != 2 * STASH {
            return Err(corrupt("stash length"));
        }
        let arena = r.u64s()?;
        if cap < arena.len() as u64 || cap as usize > arena_cap_for(arena.len(), MAX_ENTRY_WORDS).max(MIN_ARENA) {
            return Err(corrupt("arena capacity out of range"));
        }
        let t = Table::new(p, cap as usize);
        for (i, c) in bucket_words.chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            t.buckets[i / 8].w[i % 8].store(u64::from_le_bytes(b), Relaxed);
        }
        for (dst, src) in [(&t.vals, &vals), (&t.stash, &stash), (&t.arena, &arena)] {
            for (d, &s) in dst.iter().zip(src.iter()) {
                d.store(s, Relaxed);
            }
        }
        t.arena_used.store(arena.len() as u64, Relaxed);
        if p.kl != 0 {
            // Fixed-width buckets: every bit must be what the entries they
            // hold encode to (no stray bits in padding, values or occupancy).
            let sb = p.sb as usize;
            for b in 0..p.nb as usize {
                let w = t.words(b);
                let mut canon = [0u64; 8];
                for s in 0..sb {
                    let (k, m) = p.slot_from_words(&w, s);
                    if !p.bucket_can_hold(k, m) {
                        return Err(corrupt("the all-zero packed entry in a bucket"));
                    }
                    p.slot_into_words(&mut canon, s, k, m);
                }
                if canon != w {
                    return Err(Error::Corrupt(format!("bucket {b} has bits outside its {sb} fixed-width slots")));
                }
            }
        }
        let (mut len, mut live, mut sn) = (0u64, 0u64, 0u64);
        for slot in 0..p.slots() + STASH {
            let (k, m, v) = t.raw(slot);
            t.check_entry(k, m, v, arena.len()).map_err(|e| Error::Corrupt(format!("slot {slot}: {e}")))?;
            if m != 0 {
                len += 1;
                live += t.ool_words(k, m);
                sn += (slot >= p.slots()) as u64;
            }
        }
        t.len.store(len, Relaxed);
        t.arena_live.store(live, Relaxed);
        t.stash_n.store(sn, Relaxed);
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuckoo::Options;

    fn replay(mirror: &Table, ops: &[Op], keys: &[(Vec<u8>, u64)]) {
        for op in ops {
            match op {
                Op::Arena { off, words } => mirror.apply_arena(*off, words).unwrap(),
                Op::Step(ws) => mirror.apply_step(ws).unwrap(),
                Op::Rebuild { .. } => panic!("no rebuild expected"),
            }
            // A validating reader observes exactly these step boundaries.
            for (k, v) in keys {
                assert_eq!(mirror.get(k), Some(*v), "key {k:02x?} hidden between steps");
            }
        }
    }

    /// Exhaustive over step boundaries: every insert (free slot, BFS path,
    /// stash) and every remove (with stash draining) of a tiny table is
    /// replayed one step at a time on a copy, and every resident key must be
    /// found after each step. Within a step, the seqlock makes the step
    /// atomic for readers; across steps, this shows no intermediate state
    /// ever hides a key.
    #[test]
    fn every_step_boundary_holds_every_resident_key() {
        // Wide, keyed (8-byte keys) and packed (6-byte keys, full and spare-bit words).
        for (kl, bits) in [(0, 8), (8, 8), (6, 16), (6, 8)] {
            step_boundaries(kl, bits);
        }
    }

    fn step_boundaries(kl: u32, bits: u32) {
        // A seed known to fill the table and its stash before an insert fails.
        let p = Params::new(bits, &Options { seed: 0xc0c0_0005_17c4, ..Options::default() }, 16).unwrap();
        let p = p.relayout(kl, 16);
        let t = Table::new(p, 4096);
        let mirror = t.clone_table();
        let mut keys: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut st = WriteStats::default();
        let mut sink = Sink { on: true, ops: Vec::new() };
        for i in 0u64..10_000 {
            let k: Vec<u8> = if kl != 0 {
                if i == 0 { vec![0; kl as usize] } else { crate::hash::mix64(i).to_le_bytes()[..kl as usize].to_vec() }
            } else if i % 3 == 0 {
                format!("long-key-{i:08}").into_bytes()
            } else {
                crate::hash::mix64(i).to_le_bytes()[..(i % 8 + 1) as usize].to_vec()
            };
            let pr = t.p.probe(&k);
            if t.find_writer(&pr, &k).is_some() {
                continue;
            }
            sink.ops.clear();
            let kword = if pr.ool {
                let off = t.arena_used() as u64;
                let e = Table::arena_entry(&k);
                t.apply_arena(off, &e).unwrap();
                sink.push(Op::Arena { off, words: e });
                pr.kw | off
            } else {
                pr.kw
            };
            if !t.insert_absent(&pr, kword, i & 0xff, &mut sink, &mut st).unwrap() {
                break;
            }
            replay(&mirror, &sink.ops, &keys);
            keys.push((k, i & 0xff));
            assert_eq!(mirror.get(&keys[keys.len() - 1].0), Some(i & 0xff));
        }
        assert_eq!(t.stash_len(), STASH, "stash filled");
        assert!(t.len() > p.slots() * 9 / 10, "{} of {} slots", t.len(), p.slots());
        assert!(st.moves > 0 && st.stashed == STASH as u64, "{st:?}");
        // Removes, oldest first, with stashed keys moving back into buckets.
        while let Some((k, _)) = (!keys.is_empty()).then(|| keys.remove(0)) {
            let pr = t.p.probe(&k);
            let (slot, _) = t.find_writer(&pr, &k).unwrap();
            sink.ops.clear();
            let w = SlotWrite::clear(slot);
            t.apply_step(&[w]).unwrap();
            sink.push(Op::Step(vec![w]));
            t.drain_stash(&mut sink).unwrap();
            replay(&mirror, &sink.ops, &keys);
            assert_eq!(mirror.get(&k), None);
        }
        assert_eq!(mirror.len(), 0);
        assert_eq!(mirror.stash_len(), 0);
    }

    /// The in-place slot reads and writes of the writer (`bucket_slot`,
    /// `store_bucket_slot`) agree bit for bit with the word-array forms the
    /// blob validation uses (`slot_from_words`, `slot_into_words`), in every
    /// fixed-width layout and the wide one, for random entries and clears.
    #[test]
    fn in_place_slot_access_matches_the_word_forms() {
        let mut x = 7u64;
        for (kl, bits) in [(0, 8), (8, 8), (8, 16), (6, 16), (6, 8), (4, 24), (3, 8), (2, 16), (1, 4), (5, 40)] {
            let p = Params::new(bits, &Options::default(), 8).unwrap().relayout(kl, 8);
            let t = Table::new(p, 64);
            let sb = p.sb as usize;
            for _ in 0..4000 {
                x = crate::hash::mix64(x);
                let (b, s) = ((x % 8) as usize, ((x >> 8) % sb as u64) as usize);
                let (k, m) = if x >> 60 < 4 {
                    (0, 0)
                } else if kl == 0 {
                    (crate::hash::mix64(x ^ 1) & 0xff_ffff, OCC | 3 << 56 | (x >> 16) & crate::mask(bits))
                } else {
                    let k = crate::hash::mix64(x ^ 1) & crate::mask(8 * kl);
                    let m = OCC | p.fixed_tag() << 48 | (x >> 16) & crate::mask(bits);
                    if !p.bucket_can_hold(k, m) {
                        continue;
                    }
                    (k, m)
                };
                let mut w = t.words(b);
                p.slot_into_words(&mut w, s, k, m);
                t.store_bucket_slot(b, s, k, m);
                assert_eq!(t.words(b), w, "layout kl={kl} bits={bits} slot {s}");
                for s2 in 0..sb {
                    assert_eq!(t.bucket_slot(b, s2), p.slot_from_words(&w, s2), "layout kl={kl} bits={bits}");
                }
                assert_eq!(t.free_in(b), (0..sb).find(|&s2| p.slot_from_words(&w, s2).1 == 0).map(|s2| b * sb + s2));
                if kl != 0 && m != 0 {
                    let key = k.to_le_bytes();
                    let pr = p.probe(&key[..kl as usize]);
                    let q = t.probe_fixed(k);
                    assert_eq!((q.b1, q.b2, q.tag, q.kw), (pr.b1, pr.b2, pr.tag, pr.kw));
                }
            }
        }
    }

    #[test]
    fn torn_words_never_panic_a_reader() {
        // Garbage in every word (as a torn read could observe) is bounds-checked.
        let p = Params::new(8, &Options::default(), 4).unwrap();
        let t = Table::new(p, 16);
        let mut x = 1u64;
        for b in t.buckets.iter() {
            for w in b.w.iter() {
                x = crate::hash::mix64(x);
                w.store(x | OCC, Relaxed);
            }
        }
        t.stash_n.store(1, Relaxed);
        for i in 0..1000u64 {
            let k = format!("key number {i}");
            let _ = t.get(k.as_bytes());
            let _ = t.get(&i.to_le_bytes());
        }
    }

    /// The SIMD key compares answer as the portable path does, in every
    /// fixed-width layout (packed with and without a spare bit, keyed with
    /// 4 to 7 slots, `keyed7`) and the wide one: `get`, `get_u64` and the
    /// batch for every resident key (also the ones in the stash) and for
    /// absent keys, on a table filled to its first failed insert.
    #[test]
    fn every_isa_answers_like_the_portable_path_in_every_layout() {
        let isas = crate::cuckoo::simd::Isa::available();
        let layouts = [
            (8, 8),
            (8, 1),
            (8, 16),
            (8, 24),
            (8, 48),
            (7, 8),
            (6, 16),
            (6, 8),
            (5, 40),
            (4, 8),
            (4, 32),
            (2, 8),
            (0, 8),
        ];
        for (li, (kl, bits)) in layouts.into_iter().enumerate() {
            let p = Params::new(bits, &Options { seed: 0x5eed_0000 + li as u64, ..Options::default() }, 64).unwrap();
            let p = p.relayout(kl, 64);
            let t = Table::new(p, 4096);
            let (mut st, mut sink) = (WriteStats::default(), Sink::default());
            let mut keys: Vec<(Vec<u8>, u64)> = Vec::new();
            let width = if kl == 0 { 8 } else { kl as usize };
            for i in 0u64..100_000 {
                let v = crate::hash::mix64(i ^ 0x77) & crate::mask(bits);
                let k = if i == 0 { vec![0; width] } else { crate::hash::mix64(i).to_le_bytes()[..width].to_vec() };
                let pr = t.p.probe(&k);
                if t.find_writer(&pr, &k).is_some() {
                    continue;
                }
                if !t.insert_absent(&pr, pr.kw, v, &mut sink, &mut st).unwrap() {
                    break;
                }
                keys.push((k, v));
            }
            assert!(t.len() > p.slots() * 9 / 10, "layout {kl}/{bits}: {} of {} slots", t.len(), p.slots());
            let absent: Vec<Vec<u8>> =
                (0..2000u64).map(|i| crate::hash::mix64(i ^ 1 << 50).to_le_bytes()[..width].to_vec()).collect();
            let mut portable = t.clone_table();
            portable.force_isa(crate::cuckoo::simd::Isa::Portable);
            for &isa in &isas {
                let mut u = t.clone_table();
                u.force_isa(isa);
                for (k, v) in &keys {
                    assert_eq!(portable.get(k), Some(*v), "layout {kl}/{bits}");
                    assert_eq!(u.get(k), Some(*v), "layout {kl}/{bits} {isa:?}");
                    if k.len() == 8 {
                        let w = u64::from_le_bytes(k[..].try_into().unwrap());
                        assert_eq!(u.get_u64(w), Some(*v), "layout {kl}/{bits} {isa:?} get_u64");
                    }
                }
                for k in &absent {
                    let want = keys.iter().find(|(kk, _)| kk == k).map(|(_, v)| *v);
                    assert_eq!(portable.get(k), want);
                    assert_eq!(u.get(k), want, "layout {kl}/{bits} {isa:?} absent key");
                    if k.len() == 8 {
                        let w = u64::from_le_bytes(k[..].try_into().unwrap());
                        assert_eq!(u.get_u64(w), want, "layout {kl}/{bits} {isa:?} absent get_u64");
                    }
                }
                let ks: Vec<&[u8]> = keys.iter().map(|(k, _)| &k[..]).chain(absent.iter().map(|k| &k[..])).collect();
                let mut out = vec![None; ks.len()];
                u.get_batch(&ks, &mut out);
                for (i, k) in ks.iter().enumerate() {
                    assert_eq!(out[i], portable.get(k), "layout {kl}/{bits} {isa:?} batch");
                }
                // A round with a key of another length takes the general path.
                let odd = [&keys[0].0[..], &keys[1].0[..width - 1], &keys[2].0[..], &[1u8; 9][..]];
                let mut out = [Some(u64::MAX); 4];
                u.get_batch(&odd, &mut out);
                assert_eq!(out, odd.map(|k| portable.get(k)), "layout {kl}/{bits} {isa:?} mixed lengths");
            }
        }
    }
}
