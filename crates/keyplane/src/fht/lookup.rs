//! The FHT data-plane form: fingerprint-only d-left table plus collision table.

use super::ct::Ct;
use super::delta::{Delta, Image, Ops, TAG_REPLACE};
use super::{Loc, LookupOrder, MAX_SUBTABLES, Params};
use crate::bits::PackedArray;
use crate::engine::{RawLookup, Scheme};
use crate::error::{Error, Result, check_value};
use crate::mem::prefetch;
use crate::sync::{Published, StripeSet, StripedSeqLock};
use crate::wire::Kind;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

const MAX_STRIPES: usize = 4096;
const BATCH: usize = 16;
const D: usize = MAX_SUBTABLES as usize;

#[derive(Debug)]
pub(crate) struct Inner {
    pub p: Params,
    pub table: Arc<PackedArray>,
    /// The collision table, immutable: a CT change publishes a new `Inner`
    /// that shares the main table and lock with the old
    /// one, so a lookup needs one snapshot load (each `ArcSwap` load ends
    /// in a locked instruction, which would stop lookups from overlapping).
    pub ct: Arc<Ct>,
    lock: Arc<StripedSeqLock>,
    /// The shape [`Inner::get24`] serves: four subtables of 8 entries
    /// of a 16-bit fingerprint over an 8-bit value, collision table first.
    fast24: bool,
}

/// An answer from one snapshot, or word that the snapshot is stale.
enum Ans {
    Done(Option<u64>),
    Stale,
}

/// Result of scanning the candidate buckets.
enum Scan {
    Miss,
    Hit(u64),
}

impl Inner {
    fn new(img: Image) -> Self {
        let mut ct = img.build_ct();
        ct.seal();
        let buckets = img.p.d as usize * img.p.b as usize;
        let lock = StripedSeqLock::new((buckets / 256).clamp(64, MAX_STRIPES));
        Self {
            p: img.p,
            table: Arc::new(img.table),
            ct: Arc::new(ct),
            lock: Arc::new(lock),
            fast24: Self::is_fast24(&img.p),
        }
    }

    fn is_fast24(p: &Params) -> bool {
        p.bytes24() && p.d == 4
    }

    /// The same main table with another collision table.
    fn with_ct(&self, mut ct: Ct) -> Self {
        ct.seal();
        Self { p: self.p, table: self.table.clone(), ct: Arc::new(ct), lock: self.lock.clone(), fast24: self.fast24 }
    }

    /// Seqlock stripe of bucket `k` (bucket indices are already random).
    #[inline(always)]
    fn stripe(&self, k: usize) -> usize {
        self.lock.stripe_direct(k)
    }

    /// Scans the d candidate buckets `ks` (bucket indices) for the
    /// fingerprint, each bucket under its seqlock stripe, stopping at the
    /// first bucket with a match. Validating bucket by bucket is enough: a
    /// name's entry never moves while the name stays stored (deltas rewrite
    /// a group's entry in place, and promotion keeps the slot), so a
    /// consistent read of the one bucket holding it finds it. Fingerprints
    /// are unique within a name's candidate buckets (collisions go to the
    /// CT) and never 0 (empty), so the first match is the only one.
    ///
    /// Buckets of 8 entries of 8..=32 bits (every width the paper uses)
    /// take a decoder specialised for the width: the bucket's words are
    /// loaded once, the eight entries cut out with constant shifts and
    /// compared without branches (a `PackedArray::get` per entry took
    /// 903 instructions per lookup against 657 with this, callgrind).
    #[inline(always)]
    fn scan(&self, l: &Loc, ks: &[usize; D]) -> Scan {
        macro_rules! fixed {
            ($($w:literal)*) => {
                match self.p.width() {
                    $($w => return self.scan8::<$w>(l, ks),)*
                    _ => {}
                }
            };
        }
        if self.p.bytes24() {
            return self.scan24(l, ks);
        }
        if self.p.e == 8 {
            fixed!(8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
        }
        self.scan_any(l, ks)
    }

    #[inline(always)]
    fn scan8<const W: usize>(&self, l: &Loc, ks: &[usize; D]) -> Scan {
        let fm = crate::mask(self.p.fbits) << self.p.vbits;
        let target = l.f << self.p.vbits;
        for &k in &ks[..self.p.d as usize] {
            let s = self.stripe(k);
            loop {
                let v = self.lock.read_begin(s);
                let e = bucket8::<W>(&self.table, k);
                let mut m = 0u32;
                for (j, x) in e.iter().enumerate() {
                    m |= ((x & fm == target) as u32) << j;
                }
                if self.lock.read_validate(s, v) {
                    if m != 0 {
                        return Scan::Hit(e[m.trailing_zeros() as usize]);
                    }
                    break;
                }
            }
        }
        Scan::Miss
    }

    /// [`Self::scan`] for the default layout (8 entries of a 16-bit
    /// fingerprint over an 8-bit value: 24-byte buckets, three whole words
    /// each): the eight fingerprints are compared in place ([`Fp24`]: two
    /// SSE2 byte compares), and only a match's value byte is cut out. Kept beside
    /// [`Self::scan8`]: `scan8::<24>` (whole entries decoded into an array)
    /// made `get_batch` at 16.8M names 59–62 ns against 50–52 ns with this
    /// (A/B, two alternating pairs).
    #[inline(always)]
    fn scan24(&self, l: &Loc, ks: &[usize; D]) -> Scan {
        let pat = Fp24::new(l.f as u16);
        // Views in registers: the acquire loads below do not make them reload.
        let (lock, table) = (self.lock.view(), self.table.raw_words());
        for &k in &ks[..self.p.d as usize] {
            loop {
                let v = lock.peek(k);
                let w = match table.get(3 * k..3 * k + 3) {
                    Some(w) => [w[0].load(Relaxed), w[1].load(Relaxed), w[2].load(Relaxed)],
                    None => [0; 3],
                };
                let m = pat.hits(&w);
                if lock.still(k, v) {
                    if m != 0 {
                        // The value byte sits just before the fingerprint.
                        let byte = m.trailing_zeros() as usize - 1;
                        return Scan::Hit((l.f << 8) | (w[(byte / 8) % 3] >> (8 * (byte % 8))) & 0xff);
                    }
                    break;
                }
            }
        }
        Scan::Miss
    }

    /// `get` for the default table (four subtables of 8 entries of a
    /// 16-bit fingerprint over an 8-bit value, collision table first): the
    /// generic path's steps written out for constant sizes, which keeps a
    /// lookup short (callgrind: 361 instructions against 573, including the
    /// caller's loop). Short enough that consecutive single lookups overlap
    /// their cache misses in the out-of-order window: reader `get` at 16.8M
    /// names 137–140 ns against 188–195 ns (see docs/structures/fht.md).
    #[inline(always)]
    fn get24(&self, key: &[u8]) -> Option<u64> {
        use crate::hash::{hash64, hi, lo, reduce};
        // `Params::locate` with the 16-bit fingerprint folded in (its
        // general form cost 15 more instructions per lookup, callgrind).
        let h = hash64(key, self.p.seed);
        let l = Loc { h, b0: reduce(hi(h), self.p.b), f: 1 + reduce(lo(h), 0xffff) as u64 };
        debug_assert_eq!((l.b0, l.f), (self.p.locate(key).b0, self.p.locate(key).f));
        let mut ks = [0usize; D];
        for (i, k) in ks[..4].iter_mut().enumerate() {
            *k = self.p.bucket_index(i as u32, &l);
        }
        // `Self::prefetch` with the 24-byte bucket stride folded in (33 fewer
        // instructions per lookup than its general loop).
        let bytes = self.table.words_ptr() as *const u8;
        for &k in &ks[..4] {
            prefetch(bytes.wrapping_add(24 * k));
            prefetch(bytes.wrapping_add(24 * k + 23));
        }
        if self.ct.may_contain(h)
            && let Some(e) = self.ct.get(h, key)
        {
            return e.val();
        }
        match self.scan24(&l, &ks) {
            Scan::Hit(w) => Some(w & 0xff),
            Scan::Miss => None,
        }
    }

    /// [`Self::scan`] for any shape, one `PackedArray::get` per entry.
    #[inline(never)]
    fn scan_any(&self, l: &Loc, ks: &[usize; D]) -> Scan {
        let p = &self.p;
        let e = p.e as usize;
        let fm = crate::mask(p.fbits);
        for &k in &ks[..p.d as usize] {
            let s = self.stripe(k);
            loop {
                let v = self.lock.read_begin(s);
                let mut found = None;
                for j in 0..e {
                    let w = self.table.get(k * e + j);
                    if (w >> p.vbits) & fm == l.f {
                        found = Some(w);
                        break;
                    }
                }
                if self.lock.read_validate(s, v) {
                    if let Some(w) = found {
                        return Scan::Hit(w);
                    }
                    break;
                }
            }
        }
        Scan::Miss
    }

    /// Candidate bucket indices of the d subtables.
    #[inline(always)]
    fn bases(&self, l: &Loc) -> [usize; D] {
        let mut b = [0usize; D];
        for (i, x) in b.iter_mut().enumerate().take(self.p.d as usize) {
            *x = self.p.bucket_index(i as u32, l);
        }
        b
    }

    /// Prefetches the d candidate buckets so their cache misses overlap
    /// (§8.1: "all of the d subtables are fetched at the same time"): the
    /// lines of each bucket's first and last entries (a quarter of the
    /// 24-byte buckets straddle two lines). The width-specialised decoder
    /// reads whole buckets, so an unprefetched second line is a dependent
    /// miss: prefetching only the first lines made `get_batch` at 16.8M
    /// names 84–96 ns against 48–51 ns with both (A/B, alternating runs).
    #[inline(always)]
    fn prefetch(&self, base: &[usize; D]) {
        let bb = self.p.e as usize * self.p.width() as usize;
        let words = self.table.words_ptr();
        for &k in &base[..self.p.d as usize] {
            let first = k * bb;
            prefetch(words.wrapping_add(first >> 6));
            prefetch(words.wrapping_add((first + bb - 1) >> 6));
        }
    }

    /// The answer from this snapshot. `Stale` (main-first only): a
    /// flagged entry whose name the snapshot's CT lacks — the flag is newer
    /// than the snapshot (its CT entries were published first), so the
    /// caller retries on the current snapshot.
    #[inline(always)]
    fn answer(&self, key: &[u8], l: &Loc, base: &[usize; D]) -> Ans {
        let vm = crate::mask(self.p.vbits);
        if !self.p.flag {
            if self.ct.may_contain(l.h)
                && let Some(e) = self.ct.get(l.h, key)
            {
                return Ans::Done(e.val());
            }
            Ans::Done(match self.scan(l, base) {
                Scan::Hit(w) => Some(w & vm),
                Scan::Miss => None,
            })
        } else {
            match self.scan(l, base) {
                Scan::Hit(w) if w & self.p.flag_bit() == 0 => Ans::Done(Some(w & vm)),
                Scan::Hit(_) => match self.ct.get(l.h, key) {
                    Some(e) => Ans::Done(e.val()),
                    None => Ans::Stale,
                },
                Scan::Miss => Ans::Done(self.ct.get(l.h, key).and_then(|e| e.val())),
            }
        }
    }

    fn image(&self) -> Image {
        Image {
            p: self.p,
            table: (*self.table).clone(),
            ct: self.ct.sorted().into_iter().map(|(n, v)| (n.to_vec(), v)).collect(),
        }
    }
}

impl Inner {
    #[inline(always)]
    fn get(&self, key: &[u8], latest: impl Fn() -> Arc<Inner>) -> Option<u64> {
        if self.fast24 {
            return self.get24(key);
        }
        let l = self.p.locate(key);
        let base = self.bases(&l);
        self.prefetch(&base);
        match self.answer(key, &l, &base) {
            Ans::Done(v) => v,
            Ans::Stale => get_fresh(key, self, latest),
        }
    }

    fn get_batch(&self, keys: &[&[u8]], out: &mut [Option<u64>], latest: impl Fn() -> Arc<Inner>) {
        let mut locs = [(Loc { h: 0, b0: 0, f: 0 }, [0usize; D]); BATCH];
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for (k, slot) in ks.iter().zip(locs.iter_mut()) {
                let l = self.p.locate(k);
                let base = self.bases(&l);
                self.prefetch(&base);
                *slot = (l, base);
            }
            for ((k, (l, base)), o) in ks.iter().zip(locs.iter()).zip(os.iter_mut()) {
                *o = match self.answer(k, l, base) {
                    Ans::Done(v) => v,
                    Ans::Stale => get_fresh(k, self, &latest),
                };
            }
        }
    }
}

/// Main-first lookup that met a flagged entry its snapshot's CT does not
/// know. Either the flag is newer than the snapshot (its CT entries were
/// published just before it, so a newer snapshot exists and the lookup
/// starts over on it), or the snapshot is current and the name is not in
/// the group (an alien name with the group's fingerprint): `None`.
#[cold]
fn get_fresh(key: &[u8], stale: &Inner, latest: impl Fn() -> Arc<Inner>) -> Option<u64> {
    let mut c = latest();
    if std::ptr::eq(&*c, stale) {
        return None;
    }
    loop {
        let l = c.p.locate(key);
        let base = c.bases(&l);
        if let Ans::Done(v) = c.answer(key, &l, &base) {
            return v;
        }
        let n = latest();
        if Arc::ptr_eq(&n, &c) {
            return None;
        }
        c = n;
    }
}

/// Fingerprint matcher for buckets of eight 24-bit entries (value byte,
/// then the 16-bit fingerprint, little-endian): entry j's fingerprint is
/// bytes 3j+1 and 3j+2 of the bucket's 24 bytes.
struct Fp24 {
    /// The fingerprint at every entry's position, as the bucket's three words.
    p: [u64; 3],
}

impl Fp24 {
    /// Bytes 3j+1 of a 24-byte mask.
    const FP_BYTES: u32 = 0x0049_2492;

    #[inline(always)]
    fn new(f: u16) -> Self {
        let f = f as u64;
        Self { p: [f << 8 | f << 32 | f << 56, f >> 8 | f << 16 | f << 40, f | f << 24 | f << 48] }
    }

    /// Mask with bit 3j+1 set iff entry j holds the fingerprint.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn hits(&self, w: &[u64; 3]) -> u32 {
        use std::arch::x86_64::*;
        // Bytes 0..16 and 8..24 of the bucket, compared bytewise with the
        // pattern; an entry matches if both of its fingerprint bytes do.
        // SAFETY: SSE2 is part of the x86-64 baseline (every x86-64 CPU has
        // it, and the target enables it), and these intrinsics only touch
        // registers.
        let (ml, mh) = unsafe {
            let lo = _mm_set_epi64x(w[1] as i64, w[0] as i64);
            let hi = _mm_set_epi64x(w[2] as i64, w[1] as i64);
            let plo = _mm_set_epi64x(self.p[1] as i64, self.p[0] as i64);
            let phi = _mm_set_epi64x(self.p[2] as i64, self.p[1] as i64);
            (_mm_movemask_epi8(_mm_cmpeq_epi8(lo, plo)) as u32, _mm_movemask_epi8(_mm_cmpeq_epi8(hi, phi)) as u32)
        };
        let m = ml | mh << 8;
        m & (m >> 1) & Self::FP_BYTES
    }

    /// Mask with bit 3j+1 set iff entry j holds the fingerprint.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn hits(&self, w: &[u64; 3]) -> u32 {
        self.hits_portable(w)
    }

    /// [`Self::hits`] without SIMD: entry by entry.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    #[inline(always)]
    fn hits_portable(&self, w: &[u64; 3]) -> u32 {
        let f = (self.p[2] & 0xffff) as u16;
        let fp = [
            (w[0] >> 8) as u16,
            (w[0] >> 32) as u16,
            ((w[0] >> 56) | (w[1] << 8)) as u16,
            (w[1] >> 16) as u16,
            (w[1] >> 40) as u16,
            w[2] as u16,
            (w[2] >> 24) as u16,
            (w[2] >> 48) as u16,
        ];
        let mut m = 0u32;
        for (j, &x) in fp.iter().enumerate() {
            m |= ((x == f) as u32) << (3 * j + 1);
        }
        m
    }
}

/// The eight `W`-bit entries of bucket `k` of a table of 8-entry buckets
/// (bucket `k` starts at bit `8 W k`). The bucket's words are loaded once
/// (`ceil(8 W / 64) + 1` of them: the array's padding word keeps the last
/// bucket's loads in bounds), funnel-shifted to start at bit 0, and cut
/// with shifts the compiler folds to constants.
#[inline(always)]
fn bucket8<const W: usize>(t: &PackedArray, k: usize) -> [u64; 8] {
    let nw = (8 * W).div_ceil(64);
    let bit = k * 8 * W;
    let w0 = bit >> 6;
    let sh = (bit & 63) as u32;
    // Words past the bucket's last one are not needed (their bits land
    // beyond bit 8W of the funnel): re-read the last word instead, so a
    // bucket that ends a cache line does not touch the next one.
    let last = (bit + 8 * W - 1) >> 6;
    let mut ws = [0u64; 5];
    for (i, x) in ws.iter_mut().enumerate().take(nw + 1) {
        *x = t.word((w0 + i).min(last));
    }
    let mut b = [0u64; 5];
    for i in 0..nw {
        // `(x << 1) << (63 - sh)` is `x << (64 - sh)` without the
        // overflowing shift by 64 when `sh` is 0.
        b[i] = (ws[i] >> sh) | ((ws[i + 1] << 1) << (63 - sh));
    }
    let m = crate::mask(W as u32);
    let mut e = [0u64; 8];
    for (j, x) in e.iter_mut().enumerate() {
        let (q, r) = ((j * W) / 64, (j * W) % 64);
        let mut v = b[q] >> r;
        if r + W > 64 {
            v |= b[q + 1] << (64 - r);
        }
        *x = v & m;
    }
    e
}

/// A per-thread read handle ([`crate::LookupTable::reader`]): the same
/// answers as [`Lookup`]'s `get` / `get_batch` without the per-call snapshot
/// pinning (see `Cached`). Applied deltas are visible to it.
#[derive(Debug, Clone)]
pub struct Reader<'a>(crate::engine::Reader<'a, Fht>);

/// FHT lookup form. See the [module docs](super).
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle: `export`, `to_bytes` /
/// `from_bytes`, [`apply`](crate::LookupTable::apply),
/// [`get`](crate::LookupTable::get), [`get_batch`](crate::LookupTable::get_batch)
/// and a per-thread [`reader`](crate::LookupTable::reader).
#[derive(Debug)]
pub struct Lookup {
    raw: RawLookup<Fht>,
}

crate::engine::lookup_form!(Fht);

impl Lookup {
    pub(crate) fn from_image(img: Image, table: crate::lineage::Lineage, seq: u64) -> Self {
        Self::from_raw(RawLookup::new(Inner::new(img), table, seq))
    }

    /// Fingerprint bits w.
    pub fn fingerprint_bits(&self) -> u32 {
        self.raw.load().p.fbits
    }
    /// `(subtables d, buckets per subtable B, entries per bucket E)`.
    pub fn shape(&self) -> (u32, u32, u32) {
        let c = self.raw.load();
        (c.p.d, c.p.b, c.p.e)
    }
    /// Lookup order in force.
    pub(crate) fn order(&self) -> LookupOrder {
        if self.raw.load().p.flag { LookupOrder::MainFirst } else { LookupOrder::CollisionTableFirst }
    }
    /// Entries in the collision table.
    pub fn collision_table_entries(&self) -> usize {
        self.raw.load().ct.len()
    }
    /// Heap bytes of the main d-left table.
    pub fn main_table_bytes(&self) -> usize {
        self.raw.load().table.memory_bytes()
    }
    /// Heap bytes of the collision table (entries and names).
    pub fn collision_table_bytes(&self) -> usize {
        self.raw.load().ct.memory_bytes()
    }

    /// Lookup that skips the collision table (the paper's "w/o CT" figure:
    /// the latency when the CT is offloaded to separate hardware). Correct
    /// only for names that live in the main table.
    pub fn get_main_only(&self, key: &[u8]) -> Option<u64> {
        let c = self.raw.load();
        let l = c.p.locate(key);
        let base = c.bases(&l);
        c.prefetch(&base);
        match c.scan(&l, &base) {
            Scan::Hit(w) => Some(w & crate::mask(c.p.vbits)),
            Scan::Miss => None,
        }
    }
}

/// The FHT scheme (see [`crate::engine`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fht;

impl Scheme for Fht {
    type Inner = Inner;
    type Image = Image;
    type Patch = Ops;
    const LOOKUP_KIND: Kind = super::LOOKUP_KIND;
    const DELTA_KIND: Kind = super::DELTA_KIND;
    const REPLACE_TAG: u8 = TAG_REPLACE;

    fn build(img: Image) -> Result<Inner> {
        Ok(Inner::new(img))
    }
    fn image(c: &Inner) -> Image {
        c.image()
    }
    fn payload_hint(c: &Inner) -> usize {
        c.table.memory_bytes() + 64
    }
    fn check_replace(c: &Inner, img: &Image) -> Result<()> {
        if img.p.vbits != c.p.vbits || img.p.flag != c.p.flag {
            return Err(Error::DeltaMismatch("rebuild delta has a different entry layout".into()));
        }
        Ok(())
    }
    fn apply_patch(cur: &Published<Inner>, c: Arc<Inner>, patch: &Ops) -> Result<()> {
        let Ops { seed, buckets, puts, slots, dels } = patch;
        if *seed != c.p.seed || *buckets != c.p.b {
            return Err(Error::DeltaMismatch(format!(
                "delta is for table (seed {seed:#x}, {buckets} buckets), this one is (seed {:#x}, {} buckets)",
                c.p.seed, c.p.b
            )));
        }
        let wm = crate::mask(c.p.width());
        for (_, v) in puts {
            if let Some(v) = v {
                check_value(*v, c.p.vbits).map_err(|e| Error::DeltaMismatch(e.to_string()))?;
            }
        }
        let n = c.p.slots() as u64;
        let mut stripes = StripeSet::new();
        for &(s, w) in slots {
            if s >= n {
                return Err(Error::DeltaMismatch(format!("slot {s} outside a table of {n}")));
            }
            if w & !wm != 0 {
                return Err(Error::DeltaMismatch("slot word wider than an entry".into()));
            }
            stripes.add(c.stripe(s as usize / c.p.e as usize));
        }
        if !puts.is_empty() {
            let mut ct = (*c.ct).clone();
            for (name, v) in puts {
                ct.put(crate::hash::hash64(name, c.p.seed), name, *v);
            }
            cur.replace(c.with_ct(ct));
        }
        if !slots.is_empty() {
            let st = stripes.finish();
            c.lock.write_begin(st);
            for &(s, w) in slots {
                c.table.set(s as usize, w);
            }
            c.lock.write_end(st);
        }
        if !dels.is_empty() {
            let now = cur.load_full();
            let mut ct = (*now.ct).clone();
            for name in dels {
                ct.del(crate::hash::hash64(name, c.p.seed), name);
            }
            cur.replace(now.with_ct(ct));
        }
        Ok(())
    }

    fn memory_bytes(c: &Inner) -> usize {
        c.table.memory_bytes() + c.ct.memory_bytes() + c.lock.memory_bytes()
    }
    fn value_bits(c: &Inner) -> u32 {
        c.p.vbits
    }
    #[inline(always)]
    fn get(c: &Inner, key: &[u8], latest: impl Fn() -> Arc<Inner>) -> Option<u64> {
        c.get(key, latest)
    }
    fn get_batch(c: &Inner, keys: &[&[u8]], out: &mut [Option<u64>], latest: impl Fn() -> Arc<Inner>) {
        c.get_batch(keys, out, latest)
    }
}

#[cfg(test)]
mod tests {
    use super::Fp24;
    use crate::bits::PackedArray;
    use crate::hash::mix64;

    /// The matcher against a plain decode of each entry, on buckets whose
    /// entries share one or both fingerprint bytes with the target (so a
    /// half match must not count) and on entries that straddle words.
    #[test]
    fn fp24_matches_entry_by_entry_decode() {
        let mut checked = 0;
        for t in 0..20_000u64 {
            let r = mix64(t);
            let f = (r as u16).max(1);
            let a = PackedArray::new(8, 24);
            for j in 0..8 {
                let x = mix64(r ^ (j + 1));
                let fp = match x % 4 {
                    0 => f,
                    1 => (f & 0xff00) | (x >> 8) as u16 & 0xff,
                    2 => (f & 0x00ff) | (x >> 8) as u16 & 0xff00,
                    _ => (x >> 16) as u16,
                };
                a.set(j as usize, ((fp as u64) << 8) | (x >> 40) & 0xff);
            }
            let w = [a.word(0), a.word(1), a.word(2)];
            let mut want = 0u32;
            for j in 0..8 {
                if (a.get(j) >> 8) as u16 == f {
                    want |= 1 << (3 * j + 1);
                }
            }
            let p = Fp24::new(f);
            assert_eq!(p.hits(&w), want, "f={f:#x} w={w:x?}");
            assert_eq!(p.hits_portable(&w), want, "f={f:#x} w={w:x?}");
            checked += want.count_ones();
        }
        assert!(checked > 10_000, "too few matching entries exercised: {checked}");
    }
}
