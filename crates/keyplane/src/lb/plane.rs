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
/// Layout tag of an encoded VIP plane. 0xC2: BAS values are plain Dcodes
/// (free slots random); the untagged layout before it XORed a whitening
/// hash of the key into every Dcode, so its planes are refused.
const PLANE_LAYOUT: u8 = 0xC2;
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

    /// The VIP's backends, in pool order.
    pub fn backends(&self) -> impl Iterator<Item = &Backend> {
        self.outs.iter().flatten()
    }

    /// Dcode of a key (Algorithm 7, step 2): one hash, two slots.
    #[inline(always)]
    pub fn dcode(&self, key: &[u8]) -> usize {
        self.dcode_at(self.slots(key))
    }

    /// Bit positions of a key's two BAS slots: computed once in a batch for
    /// the prefetch ([`Self::prefetch_slots`]) and the read ([`Self::dcode_at`]).
    #[inline(always)]
    fn slots(&self, key: &[u8]) -> (usize, usize) {
        let (_, ia, ib) = self.p.locate(key);
        (ia * self.dbits as usize, ib * self.dbits as usize)
    }

    #[inline(always)]
    fn prefetch_slots(&self, s: (usize, usize)) {
        prefetch(self.a.as_ptr().wrapping_add(s.0 >> 3));
        prefetch(self.b.as_ptr().wrapping_add(s.1 >> 3));
    }

    /// The Dcode at two slot positions from [`Self::slots`].
    #[inline(always)]
    fn dcode_at(&self, s: (usize, usize)) -> usize {
        // SAFETY: `slots` derives each position from an index below the
        // array's slot count, and `new` checked that the image holds the
        // 4-byte load of every such position.
        let (x, y) = unsafe { (slot(&self.a, s.0), slot(&self.b, s.1)) };
        ((x ^ y) & self.dmask) as usize
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
        std::mem::size_of::<Self>()
            + self.a.len()
            + self.b.len()
            + self.da.bytes()
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
            format!(
                "VIP plane layout {layout:#x}, expected {PLANE_LAYOUT:#x} (planes from keyplane before the \
                 random-free-slot BAS XOR a whitening hash in; re-export them)"
            )
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
#[derive(Debug)]
struct DipRow {
    bytes: Box<[u8]>,
    wide: bool,
    len: usize,
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
        Self { bytes: bytes.into(), wide, len: row.len() }
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
    /// The same array with every unused index holding one empty plane
    /// (empty pool: every lookup answers `None`), so a mixed-VIP burst
    /// selects a packet's plane with one load and no test of its own.
    dense: Box<[Arc<VipPlane>]>,
    none: Arc<VipPlane>,
    by_addr: HashMap<Vip, VipId>,
}

impl PlaneSet {
    fn new(table: crate::lineage::Lineage, seq: u64, dbits: u32, vips: Vec<Option<Arc<VipPlane>>>) -> Result<Self> {
        let by_addr = Self::index(&vips)?;
        let words = crate::bits::words_for(1, dbits) * 8;
        let p = othello::Params { seed: 0, ma: 1, mb: 1, vbits: dbits, fbits: 0, empt: false };
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
        let dense = vips.iter().map(|v| v.clone().unwrap_or_else(|| none.clone())).collect();
        Ok(Self { table, seq, dbits, vips: vips.into(), dense, none, by_addr })
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
#[derive(Debug)]
pub struct DataPlane {
    cur: ArcSwap<PlaneSet>,
    writer: Mutex<()>,
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

fn batch_mixed(g: &PlaneSet, vips: &[VipId], keys: &[&[u8]], out: &mut [Option<Backend>]) {
    let n = vips.len().min(keys.len()).min(out.len());
    let (vips, keys, out) = (&vips[..n], &keys[..n], &mut out[..n]);
    // Two stages, as one-VIP bursts: hash and prefetch the BAS slots of 16
    // packets, then read them, the DIP-row entry (any width, no branch) and
    // the answer. (A third stage prefetching the row entries cost 18
    // instructions per packet for rows that sit in L1/L2: 64 VIPs' rows are
    // 256 KiB.)
    let mut loc: [(&VipPlane, (usize, usize)); BATCH] = [(&g.none, (0, 0)); BATCH];
    for ((vs, ks), os) in vips.chunks(BATCH).zip(keys.chunks(BATCH)).zip(out.chunks_mut(BATCH)) {
        for ((v, k), l) in vs.iter().zip(ks).zip(loc.iter_mut()) {
            // An index outside the array reads a key-independent plane that
            // answers `None` (any unused index's); inside, one load.
            let p: &VipPlane = g.dense.get(*v as usize).unwrap_or(&g.none);
            let s = p.slots(k);
            p.prefetch_slots(s);
            *l = (p, s);
        }
        for (o, (p, s)) in os.iter_mut().zip(loc.iter()) {
            put(o, p.answer_of(p.dcode_at(*s)));
        }
    }
}

fn batch_vip(g: &PlaneSet, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
    let Some(p) = g.vips.get(vip as usize).and_then(|p| p.as_deref()) else {
        out.iter_mut().take(keys.len()).for_each(|o| *o = None);
        return;
    };
    // One row type per burst, so the per-packet loop has no dispatch.
    if p.da.wide { batch_row::<true>(p, keys, out) } else { batch_row::<false>(p, keys, out) }
}

/// Copies an answer into a batch's output as 20 plain bytes: a typed copy
/// of `Option<Backend>` moves it field by field through the stack (10
/// instructions instead of 4).
#[inline(always)]
fn put(o: &mut Option<Backend>, a: &Option<Backend>) {
    // SAFETY: both are valid, aligned and distinct (`o` is a unique borrow).
    unsafe { std::ptr::copy_nonoverlapping(a, o, 1) }
}

/// [`batch_vip`] for one DIP-row type: hash and prefetch the two BAS slots
/// of every packet of a chunk, then read them. Not inlined into
/// `batch_vip`: 84 instead of 89 instructions per packet (callgrind,
/// `examples/lb_ir.rs concury-batch`).
#[inline(never)]
fn batch_row<const WIDE: bool>(p: &VipPlane, keys: &[&[u8]], out: &mut [Option<Backend>]) {
    let row = &p.da.bytes[..];
    let mut loc = [(0usize, 0usize); BATCH];
    for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
        for (k, l) in ks.iter().zip(loc.iter_mut()) {
            let s = p.slots(k);
            p.prefetch_slots(s);
            *l = s;
        }
        for (l, o) in loc.iter().zip(os.iter_mut()) {
            put(o, p.answer::<WIDE>(row, p.dcode_at(*l)));
        }
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

    /// Every heap byte: VIP array, BASes, DIP arrays, backend lists.
    pub fn memory_bytes(&self) -> usize {
        let g = self.cur.load();
        std::mem::size_of::<Self>()
            + std::mem::size_of::<PlaneSet>()
            + g.vips.len() * std::mem::size_of::<Option<Arc<VipPlane>>>() * 2
            + g.vips.iter().flatten().map(|p| p.memory_bytes()).sum::<usize>()
            + g.by_addr.capacity() * (std::mem::size_of::<(Vip, VipId)>() + 1)
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
}
