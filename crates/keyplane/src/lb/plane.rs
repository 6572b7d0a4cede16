//! Concury data plane (thesis §5.4.2, Fig. 5.2, Algorithm 7) and its update
//! message (Algorithm 8).

use super::{Backend, MAX_DCODE_BITS, MIN_DCODE_BITS, Vip, VipId, get_backend, get_vip, put_backend, put_vip};
use crate::bits::PackedArray;
use crate::error::{Error, Result, mask};
use crate::mem::prefetch;
use crate::othello;
use crate::wire::{Frame, Kind, Reader, Wire, Writer};
use arc_swap::{ArcSwap, Cache};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const BATCH: usize = 16;
/// Layout tag of an encoded VIP plane. 0xC3: a tracked state's BAS value is
/// its Dcode XOR [`super::whitening`] of its key (seed-independent), so
/// BASes are sized to their states (no floor). Refused: 0xC2 (BAS values
/// were plain Dcodes; free slots random) and the untagged layout before it
/// (a different whitening hash).
const PLANE_LAYOUT: u8 = 0xC3;
/// The layout before [`PLANE_LAYOUT`] (named in the refusal).
const PLANE_LAYOUT_PLAIN: u8 = 0xC2;
/// "No backend" marker in control-side DIP rows.
pub(crate) const NO_BACKEND: u16 = u16::MAX;

/// One VIP's part of the data plane: its BAS, its DIP-array row and its
/// backend list. Immutable once built; updates replace it as a whole.
///
/// The layout serves the lookup, which is one hash and four reads (two BAS
/// slots, the DIP-row entry, the answer) with no bounds checks and no
/// branch beyond the row's width: [`VipPlane::new`] checks once that every
/// position a lookup can compute lies inside its array.
#[derive(Debug)]
pub(crate) struct VipPlane {
    pub vip: Vip,
    pub generation: u64,
    pub dbits: u32,
    dmask: u32,
    /// The BAS skeleton (seed, sizes, slot width = `dbits`).
    p: othello::Params,
    /// The BAS arrays A and B as the little-endian bytes of their packed
    /// words (padding word included): a slot of ≤ 16 bits is one unaligned
    /// 32-bit load and one shift ([`slot`]). Shared with the control plane,
    /// which copies them only when it next patches them (copy on write), so
    /// publishing a plane does not copy the BAS.
    a: Arc<[u8]>,
    b: Arc<[u8]>,
    /// `DA[vip][Dcode]`, `2^dbits` entries: an index into `outs` (l_v = 8
    /// bits when the pool has at most 256 backends, else 16).
    da: DipRow,
    /// `log2` of the row's entry width in bytes and the entry mask, so a
    /// mixed-VIP burst reads any row without a branch ([`Self::answer_of`]).
    rshift: u32,
    rmask: u32,
    /// The answers `DA` points at: `Some(backend)` for each pool member in
    /// pool order, or a single `None` for an empty pool (whose row is all
    /// zeros), so a lookup copies its answer without a branch.
    outs: Box<[Option<Backend>]>,
}

/// The slot starting at bit `bit` of a packed byte image (bits above the
/// slot are garbage; the caller masks). Slots are at most
/// [`MAX_DCODE_BITS`] = 16 bits and start at bit `bit & 7 ≤ 7` of the
/// load, so one 32-bit load holds the whole slot.
///
/// # Safety
/// `(bit >> 3) + 4 <= bytes.len()`.
#[inline(always)]
unsafe fn slot(bytes: &[u8], bit: usize) -> u32 {
    debug_assert!((bit >> 3) + 4 <= bytes.len());
    // SAFETY: the caller guarantees the four bytes are inside `bytes`.
    let w = unsafe { bytes.as_ptr().add(bit >> 3).cast::<u32>().read_unaligned() };
    u32::from_le(w) >> (bit & 7)
}

/// A packed array's words as little-endian bytes.
fn image_bytes(a: &PackedArray) -> Box<[u8]> {
    a.to_words().iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The packed array an image came from (for encoding).
fn image_array(bytes: &[u8], len: u32, bits: u32) -> PackedArray {
    let words = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk"))).collect();
    PackedArray::from_words(words, len as usize, bits).expect("image made from a packed array of this shape")
}

impl VipPlane {
    /// Validates and assembles a plane from a BAS lookup form.
    pub fn new(
        vip: Vip,
        generation: u64,
        dbits: u32,
        bas: othello::Lookup,
        da: Box<[u16]>,
        backends: &[Backend],
    ) -> Result<Self> {
        if bas.value_bits() != dbits || bas.fingerprint_bits() != 0 || bas.has_emptiness() {
            return Err(Error::Corrupt(format!(
                "BAS has {} value bits / {} fingerprint bits / emptiness {}, expected {dbits} / 0 / false",
                bas.value_bits(),
                bas.fingerprint_bits(),
                bas.has_emptiness()
            )));
        }
        let snap = bas.snapshot_arc();
        let (a, b) = (image_bytes(&snap.a).into(), image_bytes(&snap.b).into());
        Self::from_images(vip, generation, dbits, snap.p, a, b, da, backends)
    }

    /// Validates and assembles a plane from the BAS arrays' byte images
    /// (little-endian packed words of `dbits`-bit slots, padding included),
    /// the form the control plane keeps current.
    #[allow(clippy::too_many_arguments)]
    pub fn from_images(
        vip: Vip,
        generation: u64,
        dbits: u32,
        p: othello::Params,
        a: Arc<[u8]>,
        b: Arc<[u8]>,
        da: Box<[u16]>,
        backends: &[Backend],
    ) -> Result<Self> {
        if !(MIN_DCODE_BITS..=MAX_DCODE_BITS).contains(&dbits) {
            return Err(Error::Corrupt(format!("dcode bits {dbits} out of range")));
        }
        if p.vbits != dbits || p.fbits != 0 || p.empt {
            return Err(Error::Corrupt(format!(
                "BAS has {} value bits / {} fingerprint bits / emptiness {}, expected {dbits} / 0 / false",
                p.vbits, p.fbits, p.empt
            )));
        }
        let max_b = (1usize << dbits) / super::DCODES_PER_BACKEND;
        if backends.len() > max_b {
            return Err(Error::Corrupt(format!("{} backends exceed 2^{dbits}/8 = {max_b}", backends.len())));
        }
        let want = if backends.is_empty() { 0 } else { 1usize << dbits };
        if da.len() != want {
            return Err(Error::Corrupt(format!("DIP row has {} entries, expected {want}", da.len())));
        }
        if let Some(&bad) = da.iter().find(|&&i| i as usize >= backends.len()) {
            return Err(Error::Corrupt(format!("DIP row names backend #{bad} of {}", backends.len())));
        }
        // Every slot a lookup reads: index < m (Lemire reduction), so its
        // first bit is at most (m - 1)·dbits and its load ends 4 bytes on.
        // The encoder needs the packed array's exact word count.
        for (name, m, img) in [("A", p.ma, &a), ("B", p.mb, &b)] {
            let need = (((m.max(1) as usize - 1) * dbits as usize) >> 3) + 4;
            if img.len() < need || img.len() != crate::bits::words_for(m as usize, dbits) * 8 {
                return Err(Error::Corrupt(format!("BAS array {name}: {} bytes for {m} slots", img.len())));
            }
        }
        let (da, outs): (DipRow, Box<[Option<Backend>]>) = if backends.is_empty() {
            (DipRow::new(&vec![0; 1 << dbits], 1), Box::new([None]))
        } else {
            (DipRow::new(&da, backends.len()), backends.iter().map(|&b| Some(b)).collect())
        };
        let (rshift, rmask) = if da.wide { (1, 0xffff) } else { (0, 0xff) };
        Ok(Self { vip, generation, dbits, dmask: mask(dbits) as u32, p, a, b, da, rshift, rmask, outs })
    }

    /// The same plane reading `row` (equal to its own) instead of its own
    /// copy: BAS images shared, answers copied (a few bytes per backend).
    fn with_row(&self, row: &DipRow) -> Self {
        debug_assert!(row.bytes == self.da.bytes && row.wide == self.da.wide);
        Self {
            vip: self.vip,
            generation: self.generation,
            dbits: self.dbits,
            dmask: self.dmask,
            p: self.p,
            a: self.a.clone(),
            b: self.b.clone(),
            da: row.clone(),
            rshift: self.rshift,
            rmask: self.rmask,
            outs: self.outs.clone(),
        }
    }

    /// The VIP's backends, in pool order.
    pub fn backends(&self) -> impl Iterator<Item = &Backend> {
        self.outs.iter().flatten()
    }

    /// Dcode of a key (Algorithm 7, step 2): one hash, two slots, the
    /// key's whitening XORed back.
    #[inline(always)]
    pub fn dcode(&self, key: &[u8]) -> usize {
        self.dcode_at(self.slots(key))
    }

    /// Bit positions of a key's two BAS slots and its whitening (the
    /// single lookup's step 2; the burst loops check theirs against it).
    #[inline(always)]
    fn slots(&self, key: &[u8]) -> (usize, usize, u32) {
        let (_, ia, ib) = self.p.locate(key);
        (ia * self.dbits as usize, ib * self.dbits as usize, super::whitening(key))
    }

    /// The Dcode at two slot positions and a whitening from [`Self::slots`].
    #[inline(always)]
    fn dcode_at(&self, s: (usize, usize, u32)) -> usize {
        // SAFETY: `slots` derives each position from an index below the
        // array's slot count, and `new` checked that the image holds the
        // 4-byte load of every such position.
        let (x, y) = unsafe { (slot(&self.a, s.0), slot(&self.b, s.1)) };
        ((x ^ y ^ s.2) & self.dmask) as usize
    }

    /// Step 3: DIP array and backend list, for a Dcode from [`Self::dcode_at`].
    #[inline(always)]
    fn resolve(&self, d: usize) -> Option<Backend> {
        *self.answer_of(d)
    }

    /// [`Self::resolve`] in place (batches copy it out with [`put`]), for
    /// a row of either width without a branch: a 2-byte load at
    /// `d << rshift`, masked to the entry width.
    #[inline(always)]
    fn answer_of(&self, d: usize) -> &Option<Backend> {
        debug_assert!(d < self.da.len);
        // SAFETY: `d` is masked to `dbits` bits; the row's bytes hold
        // `2^dbits << rshift` bytes of entries plus one padding byte, so the
        // 2-byte load at `d << rshift` is inside them; `new` checked that
        // every entry indexes `outs`.
        unsafe {
            let p = self.da.bytes.as_ptr().add(d << self.rshift);
            let i = (u16::from_le(p.cast::<u16>().read_unaligned()) as u32 & self.rmask) as usize;
            debug_assert!(i < self.outs.len());
            self.outs.get_unchecked(i)
        }
    }

    /// The answer `outs[DA[d]]` in place, for a row whose width is known at
    /// compile time (one-VIP bursts).
    #[inline(always)]
    fn answer<const WIDE: bool>(&self, row: &[u8], d: usize) -> &Option<Backend> {
        debug_assert!(d < self.da.len && self.da.wide == WIDE);
        // SAFETY: as in `answer_of`; a narrow row's entry is byte `d`, a
        // wide row's the two bytes at `2d`.
        unsafe {
            let i = if WIDE {
                u16::from_le(row.as_ptr().add(2 * d).cast::<u16>().read_unaligned()) as usize
            } else {
                *row.get_unchecked(d) as usize
            };
            debug_assert!(i < self.outs.len());
            self.outs.get_unchecked(i)
        }
    }

    /// `DA[vip][d]` for any `d` (checked; for tests and tools).
    fn entry(&self, d: usize) -> Option<Backend> {
        if d >> self.dbits != 0 { None } else { self.resolve(d) }
    }

    #[inline(always)]
    pub fn lookup(&self, key: &[u8]) -> Option<Backend> {
        self.resolve(self.dcode(key))
    }

    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes_without_row() + self.da.bytes()
    }

    /// [`Self::memory_bytes`] less the DIP row (which planes may share).
    fn memory_bytes_without_row(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.a.len()
            + self.b.len()
            + self.outs.len() * std::mem::size_of::<Option<Backend>>()
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u8(PLANE_LAYOUT);
        put_vip(w, &self.vip);
        let nb = self.backends().count();
        w.u64(self.generation).u8(self.dbits as u8).u32(nb as u32);
        for b in self.backends() {
            put_backend(w, b);
        }
        // An empty pool's all-zero row is not part of the message.
        let row = if nb == 0 { 0 } else { self.da.len() };
        w.u64(row as u64);
        for d in 0..row {
            w.u16(self.da.get(d).unwrap_or(0));
        }
        let (a, b) = (image_array(&self.a, self.p.ma, self.dbits), image_array(&self.b, self.p.mb, self.dbits));
        let img = othello::Image { p: self.p, a, b };
        w.bytes(&othello::Lookup::from_image(img, crate::lineage::Lineage::EMBEDDED, 0).to_bytes());
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let layout = r.u8()?;
        Reader::ensure(layout == PLANE_LAYOUT, || {
            if layout == PLANE_LAYOUT_PLAIN {
                format!(
                    "VIP plane layout {layout:#x}, expected {PLANE_LAYOUT:#x}: this plane's BAS holds plain \
                     Dcodes (keyplane before whitened, state-sized BASes) and would give wrong Dcodes; \
                     re-export the data plane from its control plane with this keyplane"
                )
            } else {
                format!(
                    "VIP plane layout {layout:#x}, expected {PLANE_LAYOUT:#x} (planes from an older keyplane \
                     use another Dcode encoding; re-export them)"
                )
            }
        })?;
        let vip = get_vip(r)?;
        let generation = r.u64()?;
        let dbits = r.u8()? as u32;
        let nb = r.u32()? as usize;
        // Each backend takes at least 7 bytes: refuse impossible counts before allocating.
        Reader::ensure(nb.saturating_mul(7) <= r.remaining(), || format!("backend count {nb} too large"))?;
        let mut backends = Vec::with_capacity(nb);
        for _ in 0..nb {
            backends.push(get_backend(r)?);
        }
        let n = r.count(2)?;
        let mut da = Vec::with_capacity(n);
        for _ in 0..n {
            da.push(r.u16()?);
        }
        let bas = othello::Lookup::from_bytes(r.bytes()?)?;
        Self::new(vip, generation, dbits, bas, da.into(), &backends)
    }
}

/// A DIP-array row with the narrowest index width that fits the pool
/// (§5.4.2: "DA[i][Dcode] can be a DIP index"): the row is the largest part
/// of a small VIP's plane, and it is read on every lookup. Entries are one
/// byte (at most 256 backends) or two little-endian bytes, followed by one
/// padding byte so that a 2-byte load at any entry stays inside.
///
/// Rows are shared: VIPs whose rows are equal (the same number of
/// backends, weights and history, as with many same-shaped pools) read one
/// copy within a data plane ([`PlaneSet::new`] interns them by `hash`), so a
/// data plane of many small VIPs does not carry one 4 KiB row per VIP into
/// the cache.
#[derive(Debug, Clone)]
struct DipRow {
    bytes: Arc<[u8]>,
    wide: bool,
    len: usize,
    /// A hash of `bytes` (to find equal rows without comparing them all).
    hash: u64,
}

impl DipRow {
    fn new(row: &[u16], backends: usize) -> Self {
        let wide = backends > 256;
        let mut bytes = Vec::with_capacity((row.len() << wide as usize) + 1);
        for &i in row {
            if wide {
                bytes.extend_from_slice(&i.to_le_bytes());
            } else {
                bytes.push(i as u8);
            }
        }
        bytes.push(0);
        let hash = crate::hash::hash64(&bytes, 0x0d1b_2d0e_5eed) ^ wide as u64;
        Self { bytes: bytes.into(), wide, len: row.len(), hash }
    }
    fn get(&self, d: usize) -> Option<u16> {
        if d >= self.len {
            None
        } else if self.wide {
            Some(u16::from_le_bytes([self.bytes[2 * d], self.bytes[2 * d + 1]]))
        } else {
            Some(self.bytes[d] as u16)
        }
    }
    fn len(&self) -> usize {
        self.len
    }
    fn bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// The whole data plane at one point in time: the VIP array.
#[derive(Debug)]
struct PlaneSet {
    table: crate::lineage::Lineage,
    seq: u64,
    dbits: u32,
    vips: Box<[Option<Arc<VipPlane>>]>,
    /// One empty plane (empty pool: every lookup answers `None`) that a
    /// mixed-VIP burst reads for unused VIP indices, so it selects a
    /// packet's plane without a test of its own; `hdrs`' last entry.
    none: Arc<VipPlane>,
    by_addr: HashMap<Vip, VipId>,
    /// Mixed-VIP bursts: `slot[vip]` is the byte offset of the VIP's entry
    /// in `hdrs` (unused indices and the one extra entry past the VIP array:
    /// the last header, the empty plane's; an offset saves the burst a
    /// shift per packet), and `hdrs` holds one cache line per VIP in use
    /// with everything a lookup reads of its plane.
    slot: Box<[u32]>,
    hdrs: Box<[Hdr]>,
    /// Every row's entries are one byte (no pool has more than 256 backends).
    narrow: bool,
}

/// What a mixed-VIP burst reads of a VIP's plane, in one cache line: the
/// hash seed and array sizes (step 2), the BAS images, the DIP row and its
/// entry width, the answers. [`PlaneSet`] keeps one per VIP in use in a
/// contiguous array, so a packet selects its VIP with two L1 loads (slot,
/// header) instead of following the VIP array's `Arc` into a plane whose
/// fields span three lines scattered over the heap.
#[repr(C, align(64))]
#[derive(Debug)]
struct Hdr {
    /// The seed's XXH3 input flips for 9- to 16-byte keys ([`hash_9_16`]):
    /// IPv4 states are 13 bytes.
    flo: u64,
    fhi: u64,
    a: *const u8,
    b: *const u8,
    row: *const u8,
    outs: *const Option<Backend>,
    ma: u32,
    mb: u32,
    dmask: u16,
    rmask: u16,
    dbits: u8,
    rshift: u8,
}

/// XXH3's 64-bit words for keys of 9 to 16 bytes: `secret[24..32] ^
/// secret[32..40]` and `secret[40..48] ^ secret[48..56]`.
const XXH3_LO: u64 = 0x6782_737b_ea42_39b9;
const XXH3_HI: u64 = 0xaf56_bc3b_0996_523a;

/// `hash64` out of the burst loop (IPv6 states, 37 bytes, and odd keys).
#[cold]
#[inline(never)]
fn hash_cold(key: &[u8], seed: u64) -> u64 {
    crate::hash::hash64(key, seed)
}

/// `hash64(key, seed)` for a key of 9 to 16 bytes, bit for bit (XXH3's
/// `len_9to16` path), with the seed's flips `XXH3_LO + seed` and
/// `XXH3_HI - seed` computed once per VIP instead of once per packet.
#[inline(always)]
fn hash_9_16(first: u64, last: u64, n: usize, flo: u64, fhi: u64) -> u64 {
    debug_assert!((9..=16).contains(&n));
    let lo = first ^ flo;
    let hi = last ^ fhi;
    let m = lo as u128 * hi as u128;
    let acc = (n as u64).wrapping_add(lo.swap_bytes()).wrapping_add(hi).wrapping_add(m as u64 ^ (m >> 64) as u64);
    let v = (acc ^ (acc >> 37)).wrapping_mul(0x1656_6791_9E37_79F9);
    v ^ (v >> 32)
}

// SAFETY: a header's pointers point into the BAS images, DIP row and answer
// list of a `VipPlane` that the same `PlaneSet` owns through an `Arc` (in
// `vips`, or `none`) and that is immutable; they are only read, so sharing
// or sending the header is as safe as sharing the plane.
unsafe impl Send for Hdr {}
// SAFETY: as for `Send`: read-only pointers into immutable, co-owned data.
unsafe impl Sync for Hdr {}

impl Hdr {
    fn of(p: &VipPlane) -> Self {
        Self {
            flo: XXH3_LO.wrapping_add(p.p.seed()),
            fhi: XXH3_HI.wrapping_sub(p.p.seed()),
            a: p.a.as_ptr(),
            b: p.b.as_ptr(),
            row: p.da.bytes.as_ptr(),
            outs: p.outs.as_ptr(),
            ma: p.p.ma,
            mb: p.p.mb,
            dmask: p.dmask as u16,
            rmask: p.rmask as u16,
            dbits: p.dbits as u8,
            rshift: p.rshift as u8,
        }
    }

    /// Step 2's slot indices of a key (`othello::Params::locate`) and its
    /// whitening ([`super::whitening`]).
    #[inline(always)]
    fn locate(&self, key: &[u8]) -> (usize, usize, u32) {
        let (ia, ib, w) = locate_key(key, self.flo, self.fhi, self.ma, self.mb);
        debug_assert_eq!(
            (ia, ib),
            {
                let seed = self.flo.wrapping_sub(XXH3_LO);
                let p =
                    othello::Params::new(seed, self.ma, self.mb, self.dbits as u32, 0, false, othello::KeyHash::Xxh3);
                let (_, a, b) = p.locate(key);
                (a, b)
            },
            "mixed-burst slot indices differ from the BAS's"
        );
        (ia, ib, w)
    }
}

/// A key's BAS slot indices in arrays of `ma` and `mb` slots
/// (`othello::Params::locate` for the seed whose XXH3 flips are `flo`,
/// `fhi`) and its whitening ([`super::whitening`]): both burst loops' step
/// 2. A 9- to 16-byte key (IPv4 states) is hashed inline from two words that
/// also give its whitening; other lengths go out of line.
#[inline(always)]
fn locate_key(key: &[u8], flo: u64, fhi: u64, ma: u32, mb: u32) -> (usize, usize, u32) {
    let n = key.len();
    let (h, w) = if n.wrapping_sub(9) < 8 {
        let word = |i: usize| u64::from_le_bytes(key.get(i..i + 8).and_then(|s| s.try_into().ok()).unwrap_or_default());
        let (first, last) = (word(0), word(n - 8));
        (hash_9_16(first, last, n, flo, fhi), super::white_words(first, last))
    } else {
        (hash_cold(key, flo.wrapping_sub(XXH3_LO)), super::white_cold(key))
    };
    debug_assert_eq!(w, super::whitening(key));
    let (ia, ib) = (crate::hash::reduce(h as u32, ma), crate::hash::reduce((h >> 32) as u32, mb));
    (ia as usize, ib as usize, w)
}

impl PlaneSet {
    fn new(table: crate::lineage::Lineage, seq: u64, dbits: u32, mut vips: Vec<Option<Arc<VipPlane>>>) -> Result<Self> {
        let by_addr = Self::index(&vips)?;
        // Equal DIP rows are read from one copy: a plane whose row equals an
        // earlier plane's takes that row (planes that already share it are
        // left alone; the copy is a new `VipPlane` around the same BAS).
        let mut rows: HashMap<u64, Vec<usize>> = HashMap::new();
        for i in 0..vips.len() {
            let Some(p) = vips[i].as_ref() else { continue };
            let same = rows.get(&p.da.hash).and_then(|c| {
                c.iter().copied().find(|&j| {
                    let q = vips[j].as_ref().map(|q| &q.da);
                    q.is_some_and(|q| q.wide == p.da.wide && q.bytes == p.da.bytes)
                })
            });
            match same {
                Some(j) => {
                    let first = vips[j].as_ref().map(|q| q.da.clone());
                    if let Some(first) = first
                        && !Arc::ptr_eq(&first.bytes, &p.da.bytes)
                    {
                        vips[i] = Some(Arc::new(p.with_row(&first)));
                    }
                }
                None => rows.entry(p.da.hash).or_default().push(i),
            }
        }
        // The mixed-burst loops take the table's Dcode length for every
        // plane's (they mask Dcodes with it): refuse a plane of another.
        if let Some(p) = vips.iter().flatten().find(|p| p.dbits != dbits) {
            return Err(Error::Corrupt(format!("VIP {:?} has {}-bit Dcodes, table {dbits}", p.vip, p.dbits)));
        }
        let words = crate::bits::words_for(1, dbits) * 8;
        let p = othello::Params::new(0, 1, 1, dbits, 0, false, othello::KeyHash::Xxh3);
        let none = Arc::new(VipPlane::from_images(
            Vip::new(std::net::Ipv4Addr::UNSPECIFIED, 0, 0),
            0,
            dbits,
            p,
            vec![0; words].into(),
            vec![0; words].into(),
            Box::new([]),
            &[],
        )?);
        let mut hdrs = Vec::with_capacity(by_addr.len() + 1);
        let slot = vips
            .iter()
            .map(|v| match v {
                Some(p) => {
                    hdrs.push(Hdr::of(p));
                    hdrs.len() as u32 - 1
                }
                None => u32::MAX,
            })
            .collect::<Vec<u32>>();
        hdrs.push(Hdr::of(&none));
        let none_ix = hdrs.len() as u32 - 1;
        // One entry past the VIP array: the mixed burst clamps indices to it.
        let slot = slot
            .into_iter()
            .map(|i| if i == u32::MAX { none_ix } else { i })
            .chain(std::iter::once(none_ix))
            .map(|i| i * size_of::<Hdr>() as u32)
            .collect();
        let narrow = hdrs.iter().all(|h| h.rshift == 0);
        Ok(Self { table, seq, dbits, vips: vips.into(), none, by_addr, slot, hdrs: hdrs.into(), narrow })
    }

    fn index(vips: &[Option<Arc<VipPlane>>]) -> Result<HashMap<Vip, VipId>> {
        let mut m = HashMap::new();
        for (i, p) in vips.iter().enumerate() {
            if let Some(p) = p
                && m.insert(p.vip, i as VipId).is_some()
            {
                return Err(Error::Corrupt(format!("VIP {:?} appears twice in the VIP array", p.vip)));
            }
        }
        Ok(m)
    }
}

/// The Concury data plane: VIP array → per-VIP BAS → Dcode → DIP array →
/// backend. See the [module docs](super).
///
/// Lookups take `&self`, never allocate and never block; [`DataPlane::apply`]
/// (one writer at a time) replaces whole VIP planes while lookups continue.
/// A packet-processing thread should take a [`PacketReader`] ([`DataPlane::reader`]):
/// it caches the current snapshot and checks for a newer one with a single
/// load, where `&self` lookups pay an atomic read-modify-write pair to pin
/// the snapshot (`arc-swap`'s debt slots).
///
/// # Examples
///
/// [`Control`](super::Control#examples) shows the whole cycle; the lookups:
///
/// ```
/// use keyplane::lb::{Backend, Control, Params, Vip};
/// use std::net::Ipv4Addr;
///
/// let mut ctl = Control::new(Params::default())?;
/// let (a, b) = (Backend::new(Ipv4Addr::new(10, 0, 0, 1), 80), Backend::new(Ipv4Addr::new(10, 0, 0, 2), 80));
/// let (vip, _) = ctl.add_vip(Vip::new(Ipv4Addr::new(192, 0, 2, 1), 80, 6), &[(a, 1), (b, 1)])?;
/// let dp = ctl.export();
/// let conn = [7u8; 9]; // a state id, e.g. a StateKey's bytes
/// let backend = dp.lookup(vip, &conn).unwrap(); // always a backend of the pool
/// assert!(backend == a || backend == b);
/// let mut out = [None; 2];
/// dp.lookup_batch(&[vip, vip], &[conn.as_slice(), &[8u8; 9]], &mut out);
/// assert_eq!(out[0], Some(backend));
/// let mut reader = dp.reader(); // one per packet thread
/// assert_eq!(reader.lookup(vip, &conn), Some(backend));
/// assert_eq!(dp.lookup(vip + 1, &conn), None); // no such VIP
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug)]
pub struct DataPlane {
    cur: ArcSwap<PlaneSet>,
    writer: Mutex<()>,
}

/// One VIP's plane as plain data ([`DataPlane::images`]), for a data plane
/// outside this process that runs the same lookup (the LB's in-kernel XDP
/// program reads these from BPF maps): `Dcode = (slot_A ^ slot_B ^
/// whitening(key)) & (2^dbits - 1)` with the slots located by
/// `othello::Params::locate` (XXH3 under `seed`, [`crate::hash::reduce`]
/// of the hash's low half into `ma`, of its high half into `mb`), then
/// `backends[row[Dcode]]`.
#[derive(Debug, Clone)]
pub struct PlaneImage {
    /// Index in the VIP array.
    pub id: VipId,
    /// The VIP.
    pub vip: Vip,
    /// Generation of the VIP's plane.
    pub generation: u64,
    /// Dcode length.
    pub dbits: u32,
    /// The BAS hash seed.
    pub seed: u64,
    /// Slots of BAS array A and B.
    pub ma: u32,
    /// Slots of BAS array B.
    pub mb: u32,
    /// BAS array A: little-endian bytes of its packed words of `dbits`-bit slots (padding word included).
    pub a: Arc<[u8]>,
    /// BAS array B, as `a`.
    pub b: Arc<[u8]>,
    /// The DIP row, `2^dbits` entries (indices into `backends`); empty for an empty pool.
    pub row: Vec<u16>,
    /// The pool in force, in pool order.
    pub backends: Vec<Backend>,
}

/// A per-thread handle on a [`DataPlane`] for the packet path: the same
/// lookups with a cached snapshot (`arc_swap::Cache`). Every call first
/// checks (one atomic load) whether an update was published and switches to
/// it, so a reader never answers from a plane older than the one current
/// when the call began. It keeps the last snapshot alive between calls.
pub struct PacketReader<'a> {
    cache: Cache<&'a ArcSwap<PlaneSet>, Arc<PlaneSet>>,
}

impl std::fmt::Debug for PacketReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("lb::PacketReader")
    }
}

impl PacketReader<'_> {
    /// [`DataPlane::lookup`] through the cached snapshot.
    #[inline]
    pub fn lookup(&mut self, vip: VipId, key: &[u8]) -> Option<Backend> {
        let g = self.cache.load();
        g.vips.get(vip as usize)?.as_ref()?.lookup(key)
    }

    /// [`DataPlane::lookup_batch`] through the cached snapshot.
    pub fn lookup_batch(&mut self, vips: &[VipId], keys: &[&[u8]], out: &mut [Option<Backend>]) {
        batch_mixed(self.cache.load(), vips, keys, out)
    }

    /// [`DataPlane::lookup_batch_vip`] through the cached snapshot.
    pub fn lookup_batch_vip(&mut self, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
        batch_vip(self.cache.load(), vip, keys, out)
    }
}

/// A packet of a burst between the hash pass and the read pass: its BAS
/// slots' byte addresses and bit shifts and its key's whitening. (Its VIP's
/// header, in a mixed burst, is in the burst's header array.)
#[derive(Clone, Copy)]
struct Loc {
    pa: *const u8,
    pb: *const u8,
    /// The key's whitening ([`super::whitening`], 16 bits).
    w: u16,
    sa: u8,
    sb: u8,
}

const NO_LOC: Loc = Loc { pa: std::ptr::null(), pb: std::ptr::null(), w: 0, sa: 0, sb: 0 };

/// A 9- to 16-byte key's first and last 8 bytes (little endian), the words
/// its BAS hash and whitening read; `None` for other lengths (the burst
/// loops flag those packets and hash them out of line).
#[inline(always)]
fn words_9_16(key: &[u8]) -> Option<(u64, u64)> {
    let n = key.len();
    if n.wrapping_sub(9) < 8 {
        // SAFETY: 9 <= n <= 16, so bytes 0..8 and n-8..n are inside the key.
        unsafe {
            let p = key.as_ptr();
            Some((
                u64::from_le(p.cast::<u64>().read_unaligned()),
                u64::from_le(p.add(n - 8).cast::<u64>().read_unaligned()),
            ))
        }
    } else {
        None
    }
}

/// The [`Loc`] of slot indices `ia`, `ib` and whitening `w` in BAS images
/// `a`, `b` of `dbits`-bit slots, with both slots' lines prefetched.
#[inline(always)]
fn loc_at(a: *const u8, b: *const u8, dbits: usize, ia: usize, ib: usize, w: u32) -> Loc {
    let (sa, sb) = (ia * dbits, ib * dbits);
    let (pa, pb) = (a.wrapping_add(sa >> 3), b.wrapping_add(sb >> 3));
    prefetch(pa);
    prefetch(pb);
    Loc { pa, pb, w: w as u16, sa: (sa & 7) as u8, sb: (sb & 7) as u8 }
}

/// The whitened Dcode a [`Loc`] points at, masked with `dmask`.
///
/// # Safety
/// `l` was made by [`loc_at`] from slot indices below the arrays' slot
/// counts of images that `VipPlane::from_images` checked (every such
/// position's 4-byte load lies inside the image) and that are still alive.
#[inline(always)]
unsafe fn dcode_of(l: &Loc, dmask: u32) -> usize {
    // SAFETY: by the caller's guarantee.
    let (x, y) = unsafe {
        (
            u32::from_le(l.pa.cast::<u32>().read_unaligned()) >> l.sa,
            u32::from_le(l.pb.cast::<u32>().read_unaligned()) >> l.sb,
        )
    };
    ((x ^ y ^ l.w as u32) & dmask) as usize
}

/// A burst of packets to any VIPs, in three passes over chunks of 16
/// packets: (1) resolve each packet's VIP to its header (`slot`, one
/// clamped load; no branch) and prefetch the header; (2) hash each key
/// with its header's seed flips and array sizes, prefetch its two BAS
/// slots; (3) read them, the DIP-row entry and the answer. The passes keep
/// the per-packet dependency chains short (header → hash → slots), so the
/// header loads of a chunk overlap, and per-VIP shapes (array sizes, row
/// width) are arithmetic on header fields, not branches. Keys outside 9..=16
/// bytes (IPv6 states) are hashed out of line after pass 2, so the pass
/// makes no call and keeps its state in registers. See
/// docs/structures/lb.md.
fn batch_mixed(g: &PlaneSet, vips: &[VipId], keys: &[&[u8]], out: &mut [Option<Backend>]) {
    // Dcode length and row width are the same for every packet of a data
    // plane (one `dbits` per table; rows are narrow unless a pool has more
    // than 256 backends): the default shape gets its own loop with both as
    // constants (no multiply by `dbits`, a one-byte row read).
    match (g.dbits, g.narrow) {
        (super::DEFAULT_DCODE_BITS, true) => mixed_run::<{ super::DEFAULT_DCODE_BITS }, true>(g, vips, keys, out),
        (_, true) => mixed_run::<0, true>(g, vips, keys, out),
        _ => mixed_run::<0, false>(g, vips, keys, out),
    }
}

/// [`batch_mixed`] for Dcodes of `D` bits (0: the header's) and narrow rows
/// (`NARROW`: every row's entries are one byte) or rows of any width.
#[inline(never)]
fn mixed_run<const D: u32, const NARROW: bool>(
    g: &PlaneSet,
    vips: &[VipId],
    keys: &[&[u8]],
    out: &mut [Option<Backend>],
) {
    let n = vips.len().min(keys.len()).min(out.len());
    let (vips, keys, out) = (&vips[..n], &keys[..n], &mut out[..n]);
    let base = g.hdrs.as_ptr();
    let slots = g.slot.as_ptr();
    // `slot` has one entry past the VIP array (the empty plane's header):
    // every index above it is clamped onto it, without a branch.
    let top = g.slot.len() - 1;
    let mut hs = [base; BATCH];
    let mut loc = [NO_LOC; BATCH];
    for ((vs, ks), os) in vips.chunks(BATCH).zip(keys.chunks(BATCH)).zip(out.chunks_mut(BATCH)) {
        // Pass 1: each packet's VIP header.
        for (v, h) in vs.iter().zip(hs.iter_mut()) {
            // SAFETY: the index is clamped to `slot`'s last entry, and
            // `PlaneSet::new` fills `slot` with byte offsets of `hdrs`
            // entries.
            *h = unsafe {
                let off = *slots.add((*v as usize).min(top)) as usize;
                debug_assert!(off % size_of::<Hdr>() == 0 && off / size_of::<Hdr>() < g.hdrs.len());
                base.byte_add(off)
            };
            prefetch(*h);
        }
        // Pass 2: hash, locate and prefetch the BAS slots.
        let mut odd = 0u32;
        for j in 0..ks.len() {
            // SAFETY: `j < ks.len() <= BATCH`; pass 1 pointed `hs[j]` into
            // `g.hdrs`.
            let (k, h) = unsafe { (*ks.get_unchecked(j), &**hs.get_unchecked(j)) };
            let Some((first, last)) = words_9_16(k) else {
                odd |= 1 << j;
                continue;
            };
            debug_assert!(D == 0 || h.dbits as u32 == D);
            let dbits = if D == 0 { h.dbits as usize } else { D as usize };
            let hv = hash_9_16(first, last, k.len(), h.flo, h.fhi);
            let (ia, ib) = (crate::hash::reduce(hv as u32, h.ma), crate::hash::reduce((hv >> 32) as u32, h.mb));
            let w = super::white_words(first, last);
            debug_assert_eq!((ia as usize, ib as usize, w), h.locate(k));
            // SAFETY: `j < BATCH`.
            unsafe { *loc.get_unchecked_mut(j) = loc_at(h.a, h.b, dbits, ia as usize, ib as usize, w) };
        }
        if odd != 0 {
            mixed_odd::<D>(&hs, ks, &mut loc, odd);
        }
        // Pass 3: read the slots, the row entry and the answer.
        for ((o, l), h) in os.iter_mut().zip(loc.iter()).zip(hs.iter()) {
            // SAFETY: `h` points into `g.hdrs`, whose pointers are valid
            // while `g` lives (see `Hdr`); `l` was made for this packet by
            // `loc_at` from that header (pass 2 or `mixed_odd`); the Dcode
            // is masked to `dbits` bits, so the row read at `d << rshift`
            // (two bytes; one for a narrow row, whose `rshift` is 0) is
            // inside the row (entries + padding byte), and every row entry
            // indexes `outs`.
            unsafe {
                let h = &**h;
                let dmask = if D == 0 { h.dmask as u32 } else { (1u32 << D) - 1 };
                let d = dcode_of(l, dmask);
                let e = if NARROW {
                    debug_assert!(h.rshift == 0);
                    *h.row.add(d) as usize
                } else {
                    (u16::from_le(h.row.add(d << h.rshift).cast::<u16>().read_unaligned()) & h.rmask) as usize
                };
                put(o, &*h.outs.add(e));
            }
        }
    }
}

/// Pass 2 of [`mixed_run`] for the packets of a chunk whose keys are not
/// 9 to 16 bytes long (bit `j` of `odd`): out of line, so the common pass
/// makes no call.
#[cold]
#[inline(never)]
fn mixed_odd<const D: u32>(hs: &[*const Hdr; BATCH], ks: &[&[u8]], loc: &mut [Loc; BATCH], odd: u32) {
    for (j, k) in ks.iter().enumerate().filter(|(j, _)| odd >> j & 1 != 0) {
        // SAFETY: pass 1 pointed `hs[j]` into the burst's `hdrs`.
        let h = unsafe { &*hs[j] };
        let dbits = if D == 0 { h.dbits as usize } else { D as usize };
        let (ia, ib, w) = h.locate(k);
        loc[j] = loc_at(h.a, h.b, dbits, ia, ib, w);
    }
}

fn batch_vip(g: &PlaneSet, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
    let Some(p) = g.vips.get(vip as usize).and_then(|p| p.as_deref()) else {
        out.iter_mut().take(keys.len()).for_each(|o| *o = None);
        return;
    };
    // One row type and Dcode length per burst, so the per-packet loop has
    // no dispatch; the default Dcode length is a constant.
    const D: u32 = super::DEFAULT_DCODE_BITS;
    match (p.da.wide, p.dbits == D) {
        (false, true) => batch_row::<false, D>(p, keys, out),
        (false, false) => batch_row::<false, 0>(p, keys, out),
        (true, true) => batch_row::<true, D>(p, keys, out),
        (true, false) => batch_row::<true, 0>(p, keys, out),
    }
}

/// Copies an answer into a batch's output as 20 plain bytes: a typed copy
/// of `Option<Backend>` moves it field by field through the stack (10
/// instructions instead of 4).
#[inline(always)]
fn put(o: &mut Option<Backend>, a: &Option<Backend>) {
    // SAFETY: both are valid, aligned and distinct (`o` is a unique borrow).
    unsafe { std::ptr::copy_nonoverlapping(a, o, 1) }
}

/// [`batch_vip`] for one DIP-row type and Dcodes of `D` bits (0: the
/// plane's): hash and prefetch the two BAS slots of every packet of a
/// chunk, then read them. Keys outside 9..=16 bytes are hashed out of line
/// after the hash pass ([`row_odd`]), so that pass makes no call and keeps
/// the plane's seed flips, sizes and bases in registers. Not inlined into
/// `batch_vip` (fewer instructions per packet, callgrind).
#[inline(never)]
fn batch_row<const WIDE: bool, const D: u32>(p: &VipPlane, keys: &[&[u8]], out: &mut [Option<Backend>]) {
    debug_assert!(D == 0 || p.dbits == D);
    let row = &p.da.bytes[..];
    let (flo, fhi) = (XXH3_LO.wrapping_add(p.p.seed()), XXH3_HI.wrapping_sub(p.p.seed()));
    let (ma, mb) = (p.p.ma, p.p.mb);
    let dbits = if D == 0 { p.dbits as usize } else { D as usize };
    let dmask = if D == 0 { p.dmask } else { (1u32 << D) - 1 };
    let (a, b) = (p.a.as_ptr(), p.b.as_ptr());
    let mut loc = [NO_LOC; BATCH];
    for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
        let mut odd = 0u32;
        for j in 0..ks.len() {
            // SAFETY: `j < ks.len() <= BATCH`.
            let k = unsafe { *ks.get_unchecked(j) };
            let Some((first, last)) = words_9_16(k) else {
                odd |= 1 << j;
                continue;
            };
            let hv = hash_9_16(first, last, k.len(), flo, fhi);
            let (ia, ib) = (crate::hash::reduce(hv as u32, ma), crate::hash::reduce((hv >> 32) as u32, mb));
            let w = super::white_words(first, last);
            debug_assert_eq!((ia as usize * dbits, ib as usize * dbits, w), p.slots(k));
            // SAFETY: `j < BATCH`.
            unsafe { *loc.get_unchecked_mut(j) = loc_at(a, b, dbits, ia as usize, ib as usize, w) };
        }
        if odd != 0 {
            row_odd(p, ks, &mut loc, odd);
        }
        for (l, o) in loc.iter().zip(os.iter_mut()) {
            // SAFETY: `l` was made by `loc_at` for this packet from indices
            // below `p`'s slot counts (`slots` / `Params::locate`), and `p`
            // owns the images.
            let d = unsafe { dcode_of(l, dmask) };
            put(o, p.answer::<WIDE>(row, d));
        }
    }
}

/// The hash pass of [`batch_row`] for keys that are not 9 to 16 bytes long
/// (bit `j` of `odd`).
#[cold]
#[inline(never)]
fn row_odd(p: &VipPlane, ks: &[&[u8]], loc: &mut [Loc; BATCH], odd: u32) {
    for (j, k) in ks.iter().enumerate().filter(|(j, _)| odd >> j & 1 != 0) {
        let (_, ia, ib) = p.p.locate(k);
        loc[j] = loc_at(p.a.as_ptr(), p.b.as_ptr(), p.dbits as usize, ia, ib, super::whitening(k));
    }
}

impl DataPlane {
    pub(crate) fn from_parts(
        table: crate::lineage::Lineage,
        seq: u64,
        dbits: u32,
        vips: Vec<Option<Arc<VipPlane>>>,
    ) -> Result<Self> {
        Ok(Self { cur: ArcSwap::from_pointee(PlaneSet::new(table, seq, dbits, vips)?), writer: Mutex::new(()) })
    }

    /// The backend for a packet of state `key` sent to VIP `vip`
    /// (Algorithm 7). `None` only when the VIP index is unused or the VIP's
    /// pool is empty. The same code path for new and known connections.
    #[inline]
    pub fn lookup(&self, vip: VipId, key: &[u8]) -> Option<Backend> {
        let g = self.cur.load();
        g.vips.get(vip as usize)?.as_ref()?.lookup(key)
    }

    /// Like [`DataPlane::lookup`], resolving the VIP from its address (a
    /// hash-map probe; pass the index where the packet path can compute it).
    pub fn lookup_vip(&self, vip: &Vip, key: &[u8]) -> Option<Backend> {
        let g = self.cur.load();
        let i = *g.by_addr.get(vip)?;
        g.vips[i as usize].as_ref()?.lookup(key)
    }

    /// Index of a VIP in the VIP array.
    pub fn vip_id(&self, vip: &Vip) -> Option<VipId> {
        self.cur.load().by_addr.get(vip).copied()
    }

    /// A burst of packets, possibly to different VIPs: `out[i]` is the
    /// backend of `(vips[i], keys[i])`. All lookups of the burst read one
    /// snapshot of the data plane; hashing and prefetching of 16 packets run
    /// ahead of their reads. Entries beyond the shortest slice are untouched.
    pub fn lookup_batch(&self, vips: &[VipId], keys: &[&[u8]], out: &mut [Option<Backend>]) {
        batch_mixed(&self.cur.load(), vips, keys, out)
    }

    /// Burst to a single VIP: `out[i]` is the backend of `keys[i]`.
    pub fn lookup_batch_vip(&self, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
        batch_vip(&self.cur.load(), vip, keys, out)
    }

    /// The sequence number and every VIP's plane as plain data (one
    /// snapshot; the BAS images are shared, not copied). For data planes
    /// outside this process; see [`PlaneImage`].
    pub fn images(&self) -> (u64, Vec<PlaneImage>) {
        let g = self.cur.load();
        let out = g
            .vips
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = p.as_ref()?;
                let backends: Vec<Backend> = p.backends().copied().collect();
                let row = if backends.is_empty() {
                    Vec::new()
                } else {
                    (0..p.da.len()).map(|d| p.da.get(d).unwrap_or(0)).collect()
                };
                Some(PlaneImage {
                    id: i as VipId,
                    vip: p.vip,
                    generation: p.generation,
                    dbits: p.dbits,
                    seed: p.p.seed(),
                    ma: p.p.ma,
                    mb: p.p.mb,
                    a: p.a.clone(),
                    b: p.b.clone(),
                    row,
                    backends,
                })
            })
            .collect();
        (g.seq, out)
    }

    /// A per-thread reader with a cached snapshot (see [`PacketReader`]).
    pub fn reader(&self) -> PacketReader<'_> {
        PacketReader { cache: Cache::new(&self.cur) }
    }

    /// The Dcode the VIP's BAS gives `key` (step 2 only), for tests and tools.
    pub fn dcode(&self, vip: VipId, key: &[u8]) -> Option<u32> {
        let g = self.cur.load();
        Some(g.vips.get(vip as usize)?.as_ref()?.dcode(key) as u32)
    }

    /// `DA[vip][dcode]`, for tests and tools.
    pub fn dip_array_entry(&self, vip: VipId, dcode: u32) -> Option<Backend> {
        let g = self.cur.load();
        g.vips.get(vip as usize)?.as_ref()?.entry(dcode as usize)
    }

    /// The VIP's backend list (allocates; not for the packet path).
    pub fn pool(&self, vip: VipId) -> Option<Vec<Backend>> {
        let g = self.cur.load();
        Some(g.vips.get(vip as usize)?.as_ref()?.backends().copied().collect())
    }

    /// The VIP at an index.
    pub fn vip(&self, vip: VipId) -> Option<Vip> {
        let g = self.cur.load();
        Some(g.vips.get(vip as usize)?.as_ref()?.vip)
    }

    /// Generation of a VIP's plane (bumped by every update of that VIP).
    pub fn generation(&self, vip: VipId) -> Option<u64> {
        let g = self.cur.load();
        Some(g.vips.get(vip as usize)?.as_ref()?.generation)
    }

    /// Number of VIPs in use.
    pub fn vip_count(&self) -> usize {
        self.cur.load().by_addr.len()
    }

    /// Size of the VIP array.
    pub fn max_vips(&self) -> usize {
        self.cur.load().vips.len()
    }

    /// Dcode length `l_d`.
    pub fn dcode_bits(&self) -> u32 {
        self.cur.load().dbits
    }

    /// Sequence number of the last delta applied.
    pub fn seq(&self) -> u64 {
        self.cur.load().seq
    }

    /// The table lineage of this data plane (see [`crate::lineage`]).
    pub fn table_id(&self) -> crate::TableId {
        self.cur.load().table.id
    }

    /// Every heap byte: VIP array, BASes, DIP arrays (a row that several
    /// VIPs share counted once), backend lists.
    pub fn memory_bytes(&self) -> usize {
        let g = self.cur.load();
        std::mem::size_of::<Self>()
            + std::mem::size_of::<PlaneSet>()
            + g.vips.len() * (std::mem::size_of::<Option<Arc<VipPlane>>>() + std::mem::size_of::<u32>())
            + g.hdrs.len() * std::mem::size_of::<Hdr>()
            + g.none.memory_bytes()
            + g.vips.iter().flatten().map(|p| p.memory_bytes_without_row()).sum::<usize>()
            + Self::row_bytes(&g)
            + g.by_addr.capacity() * (std::mem::size_of::<(Vip, VipId)>() + 1)
    }

    /// Bytes of the planes' DIP rows, each shared row once.
    fn row_bytes(g: &PlaneSet) -> usize {
        let mut seen = std::collections::HashSet::new();
        g.vips.iter().flatten().filter(|p| seen.insert(p.da.bytes.as_ptr())).map(|p| p.da.bytes()).sum()
    }

    /// Distinct DIP rows the data plane holds (VIPs whose rows are equal
    /// share one; see [`DataPlane::memory_bytes`]).
    pub fn distinct_rows(&self) -> usize {
        let g = self.cur.load();
        let mut seen = std::collections::HashSet::new();
        g.vips.iter().flatten().filter(|p| seen.insert(p.da.bytes.as_ptr())).count()
    }

    /// Applies a delta (Algorithm 8): replaces or removes the planes of the
    /// VIPs it names in one atomic publication. One writer at a time;
    /// lookups continue and see the old or the new planes, never a mix
    /// within a VIP. Deltas must arrive in order (`seq + 1`).
    pub fn apply(&self, delta: &Delta) -> Result<()> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let c = self.cur.load_full();
        crate::lineage::check_next(c.table, c.seq, delta.table, delta.seq)?;
        if delta.dbits != c.dbits {
            return Err(Error::DeltaMismatch(format!("delta has {}-bit Dcodes, table {}", delta.dbits, c.dbits)));
        }
        let mut vips = c.vips.to_vec();
        for op in &delta.ops {
            let (i, new) = match op {
                Op::Set(i, p) => (*i, Some(p.clone())),
                Op::Remove(i) => (*i, None),
            };
            let slot = vips.get_mut(i as usize).ok_or_else(|| {
                Error::DeltaMismatch(format!("VIP index {i} outside the VIP array of {}", c.vips.len()))
            })?;
            *slot = new;
        }
        let set = PlaneSet::new(c.table, delta.seq, c.dbits, vips).map_err(|e| Error::DeltaMismatch(e.to_string()))?;
        self.cur.store(Arc::new(set));
        Ok(())
    }
}

impl Wire for DataPlane {
    const KIND: Kind = super::LOOKUP_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let g = self.cur.load();
        let mut w = Writer::new(super::LOOKUP_KIND);
        crate::lineage::write_prologue(&mut w, g.table, g.seq);
        w.u8(g.dbits as u8).u32(g.vips.len() as u32);
        let used: Vec<(usize, &Arc<VipPlane>)> =
            g.vips.iter().enumerate().filter_map(|(i, p)| p.as_ref().map(|p| (i, p))).collect();
        w.u32(used.len() as u32);
        for (i, p) in used {
            w.u32(i as u32);
            p.encode(&mut w);
        }
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, super::LOOKUP_KIND)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let dbits = r.u8()? as u32;
        crate::check_value_bits(dbits, MIN_DCODE_BITS, MAX_DCODE_BITS).map_err(|e| Error::Corrupt(e.to_string()))?;
        let max = r.u32()?;
        Reader::ensure((1..=super::MAX_VIPS).contains(&max), || format!("VIP array size {max}"))?;
        let n = r.u32()? as usize;
        Reader::ensure(n <= max as usize, || format!("{n} VIPs in an array of {max}"))?;
        let mut vips: Vec<Option<Arc<VipPlane>>> = vec![None; max as usize];
        for _ in 0..n {
            let i = r.u32()? as usize;
            Reader::ensure(i < max as usize, || format!("VIP index {i} outside {max}"))?;
            Reader::ensure(vips[i].is_none(), || format!("VIP index {i} twice"))?;
            let p = VipPlane::decode(&mut r)?;
            Reader::ensure(p.dbits == dbits, || format!("VIP {i} has {}-bit Dcodes, table {dbits}", p.dbits))?;
            vips[i] = Some(Arc::new(p));
        }
        r.finish()?;
        Self::from_parts(table, seq, dbits, vips)
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Replace (or create) the plane of a VIP.
    Set(VipId, Arc<VipPlane>),
    /// Remove a VIP.
    Remove(VipId),
}

/// An update message for [`DataPlane`]: new planes for the VIPs whose pools
/// changed (BAS + DIP-array row + backend list each) and removed VIPs
/// (§5.4.5: "only the BAS related to v_i and the i-th dimension of the DIP
/// array needs to be updated"). Numbered like every keyplane delta.
#[derive(Debug, Clone)]
pub struct Delta {
    pub(crate) table: crate::lineage::Lineage,
    pub(crate) seq: u64,
    pub(crate) dbits: u32,
    pub(crate) ops: Vec<Op>,
}

impl Delta {
    /// Sequence number (the data plane's after applying it).
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// The table this delta belongs to (see [`crate::lineage`]).
    pub fn table_id(&self) -> crate::TableId {
        self.table.id
    }
    /// VIPs this delta replaces or removes.
    pub fn vips(&self) -> Vec<VipId> {
        self.ops
            .iter()
            .map(|o| match o {
                Op::Set(i, _) | Op::Remove(i) => *i,
            })
            .collect()
    }
}

const TAG_SET: u8 = 1;
const TAG_REMOVE: u8 = 2;

impl Wire for Delta {
    const KIND: Kind = super::DELTA_KIND;
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(super::DELTA_KIND);
        crate::lineage::write_prologue(&mut w, self.table, self.seq);
        w.u8(self.dbits as u8).u32(self.ops.len() as u32);
        for op in &self.ops {
            match op {
                Op::Set(i, p) => {
                    w.u8(TAG_SET).u32(*i);
                    p.encode(&mut w);
                }
                Op::Remove(i) => {
                    w.u8(TAG_REMOVE).u32(*i);
                }
            }
        }
        w.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = Frame::open(bytes, super::DELTA_KIND)?;
        let (table, seq) = crate::lineage::read_prologue(&mut r)?;
        let dbits = r.u8()? as u32;
        crate::check_value_bits(dbits, MIN_DCODE_BITS, MAX_DCODE_BITS).map_err(|e| Error::Corrupt(e.to_string()))?;
        let n = r.u32()? as usize;
        Reader::ensure(n.saturating_mul(5) <= r.remaining(), || format!("op count {n} too large"))?;
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            match r.u8()? {
                TAG_SET => {
                    let i = r.u32()?;
                    let p = VipPlane::decode(&mut r)?;
                    Reader::ensure(p.dbits == dbits, || format!("plane has {}-bit Dcodes, delta {dbits}", p.dbits))?;
                    ops.push(Op::Set(i, Arc::new(p)));
                }
                TAG_REMOVE => ops.push(Op::Remove(r.u32()?)),
                t => return Err(Error::Corrupt(format!("unknown lb delta op {t}"))),
            }
        }
        r.finish()?;
        Ok(Delta { table, seq, dbits, ops })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::mix64;

    /// The byte-image slot reader agrees with `PackedArray::get` for every
    /// Dcode width and slot, including the last slot of tiny arrays, and
    /// every load it makes is inside the image (the bound `VipPlane::new`
    /// checks).
    #[test]
    fn image_slots_match_the_packed_array() {
        for bits in MIN_DCODE_BITS..=MAX_DCODE_BITS {
            for len in [1usize, 2, 3, 5, 7, 8, 63, 64, 65, 1000] {
                let a = PackedArray::new(len, bits);
                for i in 0..len {
                    a.set(i, mix64((bits as u64) << 32 | i as u64) & mask(bits));
                }
                let img = image_bytes(&a);
                let m = mask(bits) as u32;
                for i in 0..len {
                    let bit = i * bits as usize;
                    assert!((bit >> 3) + 4 <= img.len(), "bits {bits} len {len} slot {i}");
                    // SAFETY: asserted just above.
                    assert_eq!((unsafe { slot(&img, bit) } & m) as u64, a.get(i), "bits {bits} len {len} slot {i}");
                }
                assert_eq!(image_array(&img, len as u32, bits), a);
            }
        }
    }

    use super::super::{Control, DEFAULT_DCODE_BITS, Params, PoolOp, StateKey};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A small deterministic generator (`mix64` of a counter).
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 += 1;
            mix64(self.0)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn be(i: u32) -> Backend {
        if i % 3 == 2 {
            Backend::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, (i >> 16) as u16, i as u16), 8000 + (i % 7) as u16)
        } else {
            Backend::new(Ipv4Addr::from(0xc612_0000 + i), 80)
        }
    }

    fn vip(i: u32) -> Vip {
        if i % 2 == 1 {
            Vip::new(Ipv6Addr::new(0xfd00, 0xdb8, 0, 0, 0, 0, 0, i as u16), 443, 6)
        } else {
            Vip::new(Ipv4Addr::new(198, 18, 1, i as u8), 80, 17)
        }
    }

    /// State `i`: IPv4 4-tuples (13 bytes: the inlined 9-16-byte hash),
    /// IPv6 ones (37 bytes) and, with `odd`, keys of 0 to 40 bytes.
    fn state(i: u64, odd: bool) -> Vec<u8> {
        match i % 5 {
            0 => StateKey::four_tuple(IpAddr::V6(Ipv6Addr::from((i as u128) << 64 | 7)), i as u16, 443, 6)
                .as_ref()
                .to_vec(),
            1 if odd => (0..(mix64(i) % 41) as usize).map(|j| (mix64(i + j as u64) >> 8) as u8).collect(),
            _ => StateKey::four_tuple(IpAddr::V4(Ipv4Addr::from(mix64(i) as u32)), (i >> 3) as u16, 80, 6)
                .as_ref()
                .to_vec(),
        }
    }

    /// Every burst answer of `dp` (shared and per-thread forms) equals the
    /// per-packet lookup, for random bursts of 0 to 70 packets over every
    /// VIP index in use, unused ones and ones outside the VIP array.
    /// A mixed burst over one snapshot answers what that snapshot's
    /// per-packet lookups answer (`out` holds at least `vs.len()` entries).
    fn burst_equals_single_lookups(snap: &PlaneSet, vs: &[VipId], ks: &[&[u8]], out: &mut [Option<Backend>]) {
        batch_mixed(snap, vs, ks, out);
        for (j, (v, k)) in vs.iter().zip(ks).enumerate() {
            let want = snap.vips.get(*v as usize).and_then(|p| p.as_ref()).and_then(|p| p.lookup(k));
            assert_eq!(out[j], want, "VIP {v} seq {}", snap.seq);
        }
    }

    fn check_bursts(dp: &DataPlane, ids: &[VipId], g: &mut Gen, bursts: usize) {
        let max = dp.max_vips() as u32;
        let mut r = dp.reader();
        for _ in 0..bursts {
            let n = g.below(71) as usize;
            let (mut vs, mut ks) = (Vec::new(), Vec::new());
            for _ in 0..n {
                vs.push(match g.below(10) {
                    0 => g.below(max as u64 + 3) as u32,
                    1 => [u32::MAX, max, max - 1][g.below(3) as usize],
                    _ => ids[g.below(ids.len() as u64) as usize],
                });
                ks.push(state(g.below(5_000), true));
            }
            let krefs: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
            let want: Vec<Option<Backend>> = vs.iter().zip(&krefs).map(|(v, k)| dp.lookup(*v, k)).collect();
            // One extra output slot: entries beyond the burst stay untouched.
            let sentinel = Some(be(999_999));
            let mut out = vec![sentinel; n + 1];
            dp.lookup_batch(&vs, &krefs, &mut out);
            assert_eq!(&out[..n], &want[..], "shared lookup_batch, VIPs {vs:?}");
            assert_eq!(out[n], sentinel);
            let mut out = vec![sentinel; n + 1];
            r.lookup_batch(&vs, &krefs, &mut out);
            assert_eq!(&out[..n], &want[..], "reader lookup_batch, VIPs {vs:?}");
            assert_eq!(out[n], sentinel);
        }
    }

    /// The mixed-burst path (per-VIP headers, the constant-Dcode loop and
    /// the generic ones) returns exactly the per-packet answers: pools of 0
    /// to 300 backends (narrow and wide DIP rows), IPv4 / IPv6 / odd-length
    /// keys, removed VIPs, unused and out-of-range indices, the default and
    /// other Dcode lengths.
    #[test]
    fn mixed_bursts_equal_per_packet_lookups() {
        for (dbits, wide) in
            [(DEFAULT_DCODE_BITS, false), (DEFAULT_DCODE_BITS, true), (8, false), (13, true), (4, false)]
        {
            let mut ctl = Control::new(Params { dcode_bits: dbits, max_vips: 40, ..Params::default() }).unwrap();
            let max_b = ((1u32 << dbits) / 8).min(if wide { 300 } else { 40 });
            let mut ids = Vec::new();
            let mut g = Gen(dbits as u64 * 1000 + wide as u64);
            for v in 0..24u32 {
                let nb = match v % 6 {
                    0 => 0,
                    1 => 1,
                    5 => max_b,
                    _ => 1 + g.below(max_b as u64) as u32,
                };
                let pool: Vec<(Backend, u32)> = (0..nb).map(|b| (be(v * 1000 + b), 1 + b % 3)).collect();
                ids.push(ctl.add_vip(vip(v), &pool).unwrap().0);
            }
            // Tracked connections on some VIPs, a removed VIP.
            let pools: Vec<Vec<(Backend, u32, u32, usize)>> = ids.iter().map(|&id| ctl.pool(id)).collect();
            for i in 0..3_000u64 {
                let id = ids[(i % 24) as usize];
                let pool = &pools[(i % 24) as usize];
                if !pool.is_empty() {
                    let b = pool[(i % pool.len() as u64) as usize].0;
                    ctl.connection_start(id, &state(i, false), b).unwrap();
                }
            }
            for &id in &ids {
                ctl.refresh(id).unwrap();
            }
            ctl.remove_vip(ids[7]).unwrap();
            let dp = ctl.export();
            {
                let snap = dp.cur.load();
                assert_eq!(snap.narrow, !wide, "dbits {dbits}");
                assert_eq!(snap.hdrs.len(), 24, "23 VIPs in use + the empty plane");
            }
            check_bursts(&dp, &ids, &mut g, 300);
        }
    }

    /// Equal DIP rows are one copy in a data plane (built by the control
    /// plane, decoded from a blob, or updated by deltas): same-shaped pools
    /// share, a pool change gives the changed VIP its own row again and a
    /// later change back shares it again; memory counts a shared row once;
    /// every lookup (per packet, one-VIP and mixed bursts) answers as before.
    #[test]
    fn equal_dip_rows_are_shared_and_lookups_unchanged() {
        let mut ctl = Control::new(Params { max_vips: 16, ..Params::default() }).unwrap();
        let mut ids = Vec::new();
        for v in 0..12u32 {
            // Three pool shapes: 4 equal backends, 5 equal, 4 weighted 1:2:1:1.
            let pool: Vec<(Backend, u32)> = match v % 3 {
                0 => (0..4).map(|b| (be(v * 10 + b), 1)).collect(),
                1 => (0..5).map(|b| (be(v * 10 + b), 1)).collect(),
                _ => (0..4).map(|b| (be(v * 10 + b), if b == 1 { 2 } else { 1 })).collect(),
            };
            ids.push(ctl.add_vip(vip(v), &pool).unwrap().0);
        }
        let dp = ctl.export();
        assert_eq!(dp.distinct_rows(), 3);
        {
            let g = dp.cur.load();
            let each: usize = g.vips.iter().flatten().map(|p| p.memory_bytes()).sum();
            let without: usize = g.vips.iter().flatten().map(|p| p.memory_bytes_without_row()).sum();
            assert_eq!(each - without, 12 * 4097, "every plane's row is 4,097 bytes");
            assert_eq!(DataPlane::row_bytes(&g), 3 * 4097, "three rows counted once each");
        }
        let blob = DataPlane::from_bytes(&dp.to_bytes()).unwrap();
        assert_eq!(blob.distinct_rows(), 3);
        assert_eq!(blob.memory_bytes(), dp.memory_bytes());
        let mut g = Gen(3);
        check_bursts(&dp, &ids, &mut g, 100);
        for i in 0..2_000u64 {
            let (v, k) = (ids[(i % 12) as usize], state(i, true));
            assert_eq!(blob.lookup(v, &k), dp.lookup(v, &k));
        }
        // VIP 0 changes weight: its own row; VIP 3 (same shape) makes the
        // same change: the two share the new row.
        let d = ctl.update_pool(ids[0], &[PoolOp::SetWeight(be(0), 3)]).unwrap();
        dp.apply(&d).unwrap();
        blob.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        assert_eq!((dp.distinct_rows(), blob.distinct_rows()), (4, 4));
        check_bursts(&dp, &ids, &mut g, 100);
        let d = ctl.update_pool(ids[3], &[PoolOp::SetWeight(be(30), 3)]).unwrap();
        dp.apply(&d).unwrap();
        blob.apply(&Delta::from_bytes(&d.to_bytes()).unwrap()).unwrap();
        assert_eq!((dp.distinct_rows(), blob.distinct_rows()), (4, 4));
        assert_eq!(blob.memory_bytes(), dp.memory_bytes());
        check_bursts(&dp, &ids, &mut g, 100);
        check_bursts(&blob, &ids, &mut g, 100);
        let fresh = ctl.export();
        for i in 0..2_000u64 {
            let (v, k) = (ids[(i % 12) as usize], state(i, true));
            assert_eq!(fresh.lookup(v, &k), dp.lookup(v, &k));
        }
    }

    /// Mixed bursts during concurrent pool changes (bounded): a writer adds,
    /// reweights, drains and removes backends that hold no tracked state and
    /// removes / re-adds a VIP of its own, publishing every change; readers
    /// meanwhile check that (1) a burst equals the per-packet lookups of the
    /// snapshot it read, and (2) every tracked connection, through the
    /// public per-thread reader, gets its recorded backend in every burst
    /// (Concury's per-connection consistency).
    #[test]
    fn mixed_bursts_during_concurrent_pool_changes() {
        let mut ctl = Control::new(Params { max_vips: 32, ..Params::default() }).unwrap();
        let vips = 16u32;
        let ids: Vec<VipId> = (0..vips)
            .map(|v| {
                let pool: Vec<(Backend, u32)> = (0..4).map(|b| (be(v * 100 + b), 1)).collect();
                ctl.add_vip(vip(v), &pool).unwrap().0
            })
            .collect();
        let mut tracked = Vec::new();
        for i in 0..4_000u64 {
            let v = (mix64(i) % vips as u64) as usize;
            let b = be(v as u32 * 100 + (i % 4) as u32);
            let k = state(i, false);
            ctl.connection_start(ids[v], &k, b).unwrap();
            tracked.push((ids[v], k, b));
        }
        for &id in &ids {
            ctl.refresh(id).unwrap();
        }
        let churn_vip = vip(31);
        let (churn, _) = ctl.add_vip(churn_vip, &[(be(5000), 1)]).unwrap();
        let dp = ctl.export();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let (dp, done, tracked, ids) = (&dp, &done, &tracked, &ids);
            let readers: Vec<_> = (0..2u64)
                .map(|t| {
                    s.spawn(move || {
                        let mut g = Gen(77 + t);
                        let mut r = dp.reader();
                        let mut bursts = 0u64;
                        let mut out = vec![None; 64];
                        // Bounded: stops when the writer is done, or after 20,000 bursts.
                        while bursts < 20_000 && !(done.load(Ordering::Acquire) && bursts >= 50) {
                            let n = 1 + g.below(64) as usize;
                            let pick: Vec<usize> = (0..n).map(|_| g.below(tracked.len() as u64) as usize).collect();
                            let mut vs: Vec<VipId> = pick.iter().map(|&i| tracked[i].0).collect();
                            let ks: Vec<&[u8]> = pick.iter().map(|&i| tracked[i].1.as_slice()).collect();
                            r.lookup_batch(&vs, &ks, &mut out);
                            for (j, &i) in pick.iter().enumerate() {
                                assert_eq!(out[j], Some(tracked[i].2), "tracked connection {i} moved");
                            }
                            // Same snapshot for the burst and the oracle; add
                            // the churned VIP and unused indices.
                            for v in vs.iter_mut().step_by(3) {
                                *v = [churn, 30, 1000, ids[0]][g.below(4) as usize];
                            }
                            burst_equals_single_lookups(&dp.cur.load_full(), &vs, &ks, &mut out);
                            bursts += 1;
                        }
                        bursts
                    })
                })
                .collect();
            let mut g = Gen(5);
            let mut added: Vec<Vec<Backend>> = vec![Vec::new(); vips as usize];
            let mut churn_id = Some(churn);
            for step in 0..300u32 {
                let v = g.below(vips as u64) as usize;
                let delta = match g.below(5) {
                    0 | 1 => {
                        let b = be(v as u32 * 100 + 10 + step);
                        added[v].push(b);
                        ctl.update_pool(ids[v], &[PoolOp::Add(b, 1 + g.below(4) as u32)]).unwrap()
                    }
                    2 => {
                        // Reweight or drain a tracked backend: its states stay.
                        let b = be(v as u32 * 100 + g.below(4) as u32);
                        ctl.update_pool(ids[v], &[PoolOp::SetWeight(b, g.below(3) as u32)]).unwrap()
                    }
                    3 if !added[v].is_empty() => {
                        let b = added[v].swap_remove(0);
                        ctl.update_pool(ids[v], &[PoolOp::Remove(b)]).unwrap()
                    }
                    _ => match churn_id.take() {
                        Some(id) => ctl.remove_vip(id).unwrap(),
                        None => {
                            let (id, d) = ctl.add_vip(churn_vip, &[(be(5000 + step), 1), (be(6000), 2)]).unwrap();
                            churn_id = Some(id);
                            d
                        }
                    },
                };
                dp.apply(&delta).unwrap();
                if step % 50 == 0 {
                    std::thread::yield_now();
                }
            }
            done.store(true, Ordering::Release);
            for r in readers {
                assert!(r.join().unwrap() >= 50);
            }
        });
        assert!(dp.seq() >= 300);
    }

    /// A burst of `n` packets over `vips` whose keys are IPv4 states, with
    /// IPv6 and odd-length keys placed by `pattern`: 0 none, 1 one at a
    /// random position per 16-packet chunk, 2 every key odd, 3 random (1 in 4).
    fn mixed_burst(g: &mut Gen, vips: &[VipId], n: usize, pattern: u64) -> (Vec<VipId>, Vec<Vec<u8>>) {
        let lone = g.below(16) as usize;
        let vs = (0..n).map(|_| vips[g.below(vips.len() as u64) as usize]).collect();
        let ks = (0..n)
            .map(|j| {
                let i = g.below(20_000);
                let odd = match pattern {
                    0 => false,
                    1 => j % 16 == lone,
                    2 => true,
                    _ => g.below(4) == 0,
                };
                // `state(i, _)` is IPv6 for i % 5 == 0 and odd-length for 1.
                let i = if odd { i - i % 5 + g.below(2) } else { i - i % 5 + 2 + g.below(3) };
                state(i, true)
            })
            .collect();
        (vs, ks)
    }

    /// The three-pass mixed burst equals per-packet single lookups over 48
    /// VIPs whose BASes differ in size (0 to 12,000 tracked states: arrays
    /// of 16 slots up to tens of thousands) and whose pools differ (1 to 300
    /// backends: narrow and wide rows), for bursts of 1 to 100 packets
    /// (partial chunks) where IPv6 / odd-length keys (hashed out of line)
    /// sit nowhere, once per chunk, everywhere or at random; then again
    /// while a writer grows BASes (new connections + refresh), changes pools
    /// and removes and re-adds a VIP: readers check every burst against
    /// single lookups of the same snapshot and that tracked connections keep
    /// their backends.
    #[test]
    fn mixed_bursts_over_vips_of_different_sizes_equal_single_lookups() {
        let mut ctl = Control::new(Params { max_vips: 64, ..Params::default() }).unwrap();
        let nv = 48u32;
        let mut g = Gen(4242);
        let ids: Vec<VipId> = (0..nv)
            .map(|v| {
                let nb = match v % 8 {
                    0 => 300,
                    1 => 1,
                    _ => 2 + g.below(12) as u32,
                };
                let pool: Vec<(Backend, u32)> = (0..nb).map(|b| (be(v * 1000 + b), 1 + b % 4)).collect();
                ctl.add_vip(vip(v), &pool).unwrap().0
            })
            .collect();
        // VIP v tracks about 12,000 / 1.25^v states (VIP 0 the most; the
        // last ones none): BAS sizes spread over three orders of magnitude.
        let mut tracked = Vec::new();
        let mut next = 1_000_000u64;
        for (v, &id) in ids.iter().enumerate() {
            let pool = ctl.pool(id);
            let n = (12_000.0 / 1.25f64.powi(v as i32)) as u64;
            for _ in 0..n {
                next += 1;
                let k = state(next * 5 + 2, false);
                let b = pool[(next % pool.len() as u64) as usize].0;
                ctl.connection_start(id, &k, b).unwrap();
                tracked.push((id, k, b));
            }
        }
        for &id in &ids {
            ctl.refresh(id).unwrap();
        }
        let dp = ctl.export();
        let rows: std::collections::HashSet<usize> = {
            let snap = dp.cur.load();
            snap.hdrs.iter().map(|h| h.ma as usize).collect()
        };
        assert!(rows.len() >= 10, "BAS sizes differ across VIPs: {rows:?}");
        let check = |dp: &DataPlane, g: &mut Gen, bursts: usize| {
            let mut r = dp.reader();
            for b in 0..bursts {
                let n = 1 + g.below(100) as usize;
                let (vs, ks) = mixed_burst(g, &ids, n, b as u64 % 4);
                let krefs: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
                let want: Vec<Option<Backend>> = vs.iter().zip(&krefs).map(|(v, k)| dp.lookup(*v, k)).collect();
                let mut out = vec![None; n];
                r.lookup_batch(&vs, &krefs, &mut out);
                assert_eq!(out, want, "burst {b} ({n} packets, pattern {})", b % 4);
            }
        };
        check(&dp, &mut g, 400);
        // Tracked connections in mixed bursts answer their backends.
        let mut r = dp.reader();
        for c in tracked.chunks(37) {
            let vs: Vec<VipId> = c.iter().map(|t| t.0).collect();
            let ks: Vec<&[u8]> = c.iter().map(|t| t.1.as_slice()).collect();
            let mut out = vec![None; c.len()];
            r.lookup_batch(&vs, &ks, &mut out);
            assert!(out.iter().zip(c).all(|(o, t)| *o == Some(t.2)), "a tracked connection moved");
        }
        drop(r);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let (dp, done, tracked, ids) = (&dp, &done, &tracked, &ids);
            let readers: Vec<_> = (0..2u64)
                .map(|t| {
                    s.spawn(move || {
                        let mut g = Gen(900 + t);
                        let mut r = dp.reader();
                        let mut bursts = 0u64;
                        let mut out = vec![None; 100];
                        // Bounded: stops when the writer is done, or after 20,000 bursts.
                        while bursts < 20_000 && !(done.load(Ordering::Acquire) && bursts >= 50) {
                            let n = 1 + g.below(64) as usize;
                            let pick: Vec<usize> = (0..n).map(|_| g.below(tracked.len() as u64) as usize).collect();
                            let vs: Vec<VipId> = pick.iter().map(|&i| tracked[i].0).collect();
                            let ks: Vec<&[u8]> = pick.iter().map(|&i| tracked[i].1.as_slice()).collect();
                            r.lookup_batch(&vs, &ks, &mut out);
                            for (j, &i) in pick.iter().enumerate() {
                                assert_eq!(out[j], Some(tracked[i].2), "tracked connection {i} moved");
                            }
                            let (vs, ks) = mixed_burst(&mut g, ids, n, bursts % 4);
                            let krefs: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
                            burst_equals_single_lookups(&dp.cur.load_full(), &vs, &krefs, &mut out);
                            bursts += 1;
                        }
                        bursts
                    })
                })
                .collect();
            let mut g = Gen(17);
            let mut added: Vec<Vec<Backend>> = vec![Vec::new(); nv as usize];
            let extra = vip(60);
            let mut extra_id: Option<VipId> = None;
            for step in 0..240u32 {
                // The last VIPs (no tracked states) are the ones that grow,
                // change pools or come and go, so tracked backends stay.
                let v = (nv as u64 - 1 - g.below(12)) as usize;
                let delta = match g.below(5) {
                    0 => {
                        let pool = ctl.pool(ids[v]);
                        for i in 0..(1 + g.below(400)) {
                            let k = state((5_000_000 + step as u64 * 1000 + i) * 5 + 3, false);
                            ctl.connection_start(ids[v], &k, pool[(i % pool.len() as u64) as usize].0).unwrap();
                        }
                        ctl.refresh(ids[v]).unwrap()
                    }
                    1 => {
                        let b = be(v as u32 * 1000 + 500 + step);
                        added[v].push(b);
                        ctl.update_pool(ids[v], &[PoolOp::Add(b, 1 + g.below(4) as u32)]).unwrap()
                    }
                    2 if !added[v].is_empty() => {
                        let b = added[v].swap_remove(0);
                        ctl.update_pool(ids[v], &[PoolOp::Remove(b)]).unwrap()
                    }
                    _ => match extra_id.take() {
                        Some(id) => ctl.remove_vip(id).unwrap(),
                        None => {
                            let (id, d) = ctl.add_vip(extra, &[(be(70_000 + step), 1)]).unwrap();
                            extra_id = Some(id);
                            d
                        }
                    },
                };
                dp.apply(&delta).unwrap();
            }
            done.store(true, Ordering::Release);
            for r in readers {
                assert!(r.join().unwrap() >= 50);
            }
        });
        check(&dp, &mut g, 200);
    }
}
