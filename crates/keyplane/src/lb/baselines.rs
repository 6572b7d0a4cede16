//! The two stateful load balancers the thesis compares Concury against
//! (§5.6.1), re-implemented in the same crate so that benchmarks and the
//! consistency property test run all three on the same streams:
//!
//! * [`Maglev`] — "hash table with digest" (Eisenbud et al., NSDI'16): per
//!   VIP a Maglev lookup table of prime size (default 65537) filled from the
//!   backends' permutations, plus a per-VIP connection-tracking table
//!   (partial-key (2,4) cuckoo hash table of digests → backend) learned on a
//!   connection's first packet. Per-VIP tables are the thesis' own fix.
//! * [`SilkRoad`] — "multi-level hash tables with digest" (Miao et al.,
//!   SIGCOMM'17): a ConnTable of several hash-table stages holding a 16-bit
//!   connection digest → 6-bit pool version, a VIPTable with each VIP's
//!   current version and a DIPPoolTable per (VIP, version). Pool changes
//!   create a new version; existing connections keep theirs.
//!
//! Both store digests rather than keys, so both have the two problems of
//! §5.2: **false hits** (a new connection whose digest matches a tracked
//! one's in its buckets takes that connection's backend/version) and
//! **digest deletion** (ending a connection deletes the first matching
//! digest, possibly another connection's, which then loses its entry and may
//! be re-balanced elsewhere). [`Balancer::packet`] reports table hits so a
//! simulation that knows which connections are new can count false hits.
//!
//! [`Concury`] wraps [`Control`] + [`DataPlane`] behind the same
//! [`Balancer`] interface.

use super::weights::{Share, apportion};
use super::{Backend, Control, DataPlane, Params, PoolOp, Vip, VipId};
use crate::error::{Error, Result};
use crate::hash::{hash64, mix64};
use crate::mem::prefetch;
use crate::wire::Wire;

/// One packet's outcome in a learning data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Where the packet goes (`None`: unknown VIP or empty pool).
    pub backend: Option<Backend>,
    /// True if the connection table answered (a hit); for a connection the
    /// caller knows to be new, a hit is a false hit.
    pub table_hit: bool,
}

/// The interface the property test and the benchmark drive.
pub trait Balancer {
    /// Name for reports.
    fn name(&self) -> &'static str;
    /// Adds a VIP with its pool.
    fn add_vip(&mut self, vip: Vip, pool: &[(Backend, u32)]) -> Result<VipId>;
    /// Changes a VIP's pool (adds, removals/failures, weights).
    fn update_pool(&mut self, vip: VipId, ops: &[PoolOp]) -> Result<()>;
    /// Read-only data-plane lookup (the throughput path).
    fn lookup(&self, vip: VipId, key: &[u8]) -> Option<Backend>;
    /// Burst of read-only lookups to one VIP.
    fn lookup_batch(&self, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.lookup(vip, k);
        }
    }
    /// A packet through the stateful path: digest designs learn the
    /// connection on a miss; Concury's data plane is read-only.
    fn packet(&mut self, vip: VipId, key: &[u8]) -> Packet;
    /// Host-agent report that a connection started on `backend` (Concury's
    /// control plane input; digest designs learn from packets instead).
    fn connection_start(&mut self, vip: VipId, key: &[u8], backend: Backend) -> Result<()>;
    /// A connection ended (host report, FIN or timeout).
    fn connection_end(&mut self, vip: VipId, key: &[u8]);
    /// Data-plane memory in bytes.
    fn memory_bytes(&self) -> usize;
}

// ---------------------------------------------------------------- pools

/// A pool with stable member slots (removed members leave a hole, so stored
/// backend indices never silently point at a different server).
#[derive(Debug, Clone, Default)]
struct Pool {
    members: Vec<Option<(Backend, u32)>>,
}

impl Pool {
    fn slot_of(&self, b: &Backend) -> Option<usize> {
        self.members.iter().position(|m| m.is_some_and(|m| m.0 == *b))
    }
    fn apply(&mut self, ops: &[PoolOp]) -> Result<()> {
        for op in ops {
            match *op {
                PoolOp::Add(b, w) => match self.slot_of(&b) {
                    Some(s) => self.members[s] = Some((b, w)),
                    None => {
                        if self.members.len() >= u16::MAX as usize {
                            return Err(Error::CapacityExceeded("65535 backend slots used".into()));
                        }
                        self.members.push(Some((b, w)))
                    }
                },
                PoolOp::Remove(b) => {
                    let s = self.slot_of(&b).ok_or_else(|| Error::InvalidParameter(format!("{b:?} not in pool")))?;
                    self.members[s] = None;
                }
                PoolOp::SetWeight(b, w) => {
                    let s = self.slot_of(&b).ok_or_else(|| Error::InvalidParameter(format!("{b:?} not in pool")))?;
                    self.members[s] = Some((b, w));
                }
            }
        }
        Ok(())
    }
    fn get(&self, s: u16) -> Option<Backend> {
        self.members.get(s as usize).copied().flatten().map(|m| m.0)
    }
    /// A weighted selection table of `2^bits` slots (largest remainder).
    fn weighted_table(&self, bits: u32) -> Vec<u16> {
        let shares: Vec<Option<Share>> =
            self.members.iter().map(|m| m.map(|(_, w)| Share { weight: w, tracked: 0 })).collect();
        let counts = apportion(&shares, 1 << bits);
        let mut t = Vec::with_capacity(1 << bits);
        for (s, &c) in counts.iter().enumerate() {
            t.extend(std::iter::repeat_n(s as u16, c));
        }
        // Spread members over the table so neighbouring hash values differ.
        let n = t.len();
        if n > 1 {
            let step = (n / 2 + 1) | 1; // odd step, coprime with a power of two
            let mut out = vec![0u16; n];
            for (i, &s) in t.iter().enumerate() {
                out[(i * step) & (n - 1)] = s;
            }
            return out;
        }
        t
    }
}

// ---------------------------------------------------------------- digest tables

const EMPTY: u64 = 0;
const SLOTS: usize = 4;
const MAX_KICKS: usize = 500;

/// Partial-key (2,4) cuckoo table of `digest → value` (digests only, no keys):
/// the alternate bucket is `b ⊕ hash(digest)`, so entries can move without
/// their keys (MemC3 / SilkRoad style). Slot word: `digest << 20 | value`,
/// digest ≠ 0.
#[derive(Debug, Clone)]
pub(crate) struct DigestTable {
    slots: Vec<u64>,
    bmask: usize,
    dbits: u32,
    len: usize,
    rng: u64,
    /// Inserts that failed (table full): the connection stays untracked.
    pub full: u64,
}

const VBITS: u32 = 20;

impl DigestTable {
    /// A table for about `capacity` entries at ≤ 95% load, `digest_bits` (8..=40) per digest.
    pub fn new(capacity: usize, digest_bits: u32) -> Self {
        let buckets = (capacity.max(4) * 100 / 95).div_ceil(SLOTS).next_power_of_two();
        Self { slots: vec![EMPTY; buckets * SLOTS], bmask: buckets - 1, dbits: digest_bits, len: 0, rng: 1, full: 0 }
    }
    #[inline(always)]
    fn digest(&self, h: u64) -> u64 {
        let d = (h >> (64 - self.dbits)) & ((1 << self.dbits) - 1);
        if d == 0 { 1 } else { d }
    }
    #[inline(always)]
    fn alt(&self, b: usize, d: u64) -> usize {
        (b ^ mix64(d) as usize) & self.bmask
    }
    #[inline(always)]
    fn buckets(&self, h: u64) -> (u64, usize, usize) {
        let d = self.digest(h);
        let b1 = h as usize & self.bmask;
        (d, b1, self.alt(b1, d))
    }
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        let (_, b1, b2) = self.buckets(h);
        prefetch(self.slots[b1 * SLOTS..].as_ptr());
        prefetch(self.slots[b2 * SLOTS..].as_ptr());
    }
    #[inline(always)]
    pub fn get(&self, h: u64) -> Option<u32> {
        let (d, b1, b2) = self.buckets(h);
        for b in [b1, b2] {
            for &s in &self.slots[b * SLOTS..b * SLOTS + SLOTS] {
                if s >> VBITS == d {
                    return Some((s & ((1 << VBITS) - 1)) as u32);
                }
            }
        }
        None
    }
    /// Overwrites the first matching digest, or inserts.
    pub fn set(&mut self, h: u64, v: u32) -> bool {
        let (d, b1, b2) = self.buckets(h);
        let word = d << VBITS | v as u64;
        for b in [b1, b2] {
            for s in &mut self.slots[b * SLOTS..b * SLOTS + SLOTS] {
                if *s >> VBITS == d {
                    *s = word;
                    return true;
                }
            }
        }
        for b in [b1, b2] {
            for s in &mut self.slots[b * SLOTS..b * SLOTS + SLOTS] {
                if *s == EMPTY {
                    *s = word;
                    self.len += 1;
                    return true;
                }
            }
        }
        // Kick victims along their alternate buckets.
        let mut b = b1;
        let mut cur = word;
        for _ in 0..MAX_KICKS {
            self.rng = mix64(self.rng);
            let i = b * SLOTS + (self.rng as usize % SLOTS);
            std::mem::swap(&mut cur, &mut self.slots[i]);
            b = self.alt(b, cur >> VBITS);
            for s in &mut self.slots[b * SLOTS..b * SLOTS + SLOTS] {
                if *s == EMPTY {
                    *s = cur;
                    self.len += 1;
                    return true;
                }
            }
        }
        // Put the homeless entry back where it came from is impossible in
        // general: drop it (the table is full; that connection is untracked).
        self.full += 1;
        false
    }
    /// Deletes the first entry with the key's digest in its buckets — which
    /// may be another connection's (the digest-deletion problem).
    pub fn remove(&mut self, h: u64) -> bool {
        let (d, b1, b2) = self.buckets(h);
        for b in [b1, b2] {
            for s in &mut self.slots[b * SLOTS..b * SLOTS + SLOTS] {
                if *s >> VBITS == d {
                    *s = EMPTY;
                    self.len -= 1;
                    return true;
                }
            }
        }
        false
    }
    /// Rewrites every value with `f` (`None` deletes the entry).
    fn retain_map(&mut self, mut f: impl FnMut(u32) -> Option<u32>) {
        for s in self.slots.iter_mut().filter(|s| **s != EMPTY) {
            match f((*s & ((1 << VBITS) - 1)) as u32) {
                Some(v) => *s = (*s >> VBITS) << VBITS | v as u64,
                None => {
                    *s = EMPTY;
                    self.len -= 1;
                }
            }
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * 8
    }
}

// ---------------------------------------------------------------- Maglev

/// Default Maglev lookup-table size (prime).
pub const MAGLEV_TABLE_SIZE: usize = 65537;

#[derive(Debug, Clone)]
struct MaglevVip {
    pool: Pool,
    table: Vec<u16>,
    conns: DigestTable,
}

/// Maglev: per-VIP consistent-hashing lookup table + connection tracking
/// with digests. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Maglev {
    m: usize,
    capacity: usize,
    digest_bits: u32,
    seed: u64,
    vips: Vec<MaglevVip>,
}

impl Maglev {
    /// `table_size` (prime) entries per VIP, connection tables sized for
    /// `conns_per_vip` digests of `digest_bits` bits.
    pub fn new(table_size: usize, conns_per_vip: usize, digest_bits: u32) -> Result<Self> {
        if table_size < 2 || (2..table_size).take_while(|d| d * d <= table_size).any(|d| table_size % d == 0) {
            return Err(Error::InvalidParameter(format!("Maglev table size {table_size} is not prime")));
        }
        if !(8..=40).contains(&digest_bits) {
            return Err(Error::InvalidParameter(format!("digest bits {digest_bits} outside 8..=40")));
        }
        Ok(Self { m: table_size, capacity: conns_per_vip, digest_bits, seed: 0x003a_61e5, vips: Vec::new() })
    }

    /// Maglev's population (Algorithm 1 of the Maglev paper), weighted: a
    /// backend of weight w takes w/max turns per round (weight 0 = none).
    fn populate(&self, pool: &Pool) -> Vec<u16> {
        let m = self.m as u64;
        let live: Vec<(u16, u64, u64, u32)> = pool
            .members
            .iter()
            .enumerate()
            .filter_map(|(s, mm)| {
                mm.map(|(b, w)| {
                    let name = backend_bytes(&b);
                    let off = hash64(&name, self.seed) % m;
                    let skip = hash64(&name, self.seed ^ 0xabc) % (m - 1) + 1;
                    (s as u16, off, skip, w)
                })
            })
            .collect();
        if live.is_empty() {
            return Vec::new();
        }
        let all_zero = live.iter().all(|l| l.3 == 0);
        let wmax = live.iter().map(|l| if all_zero { 1 } else { l.3 }).max().unwrap_or(1) as u64;
        let mut next = vec![0u64; live.len()];
        let mut credit = vec![0u64; live.len()];
        let mut entry = vec![u16::MAX; self.m];
        let mut filled = 0usize;
        while filled < self.m {
            for (i, l) in live.iter().enumerate() {
                let w = if all_zero { 1 } else { l.3 as u64 };
                credit[i] += w;
                if credit[i] < wmax {
                    continue;
                }
                credit[i] -= wmax;
                let mut c = (l.1 + next[i] * l.2) % m;
                while entry[c as usize] != u16::MAX {
                    next[i] += 1;
                    c = (l.1 + next[i] * l.2) % m;
                }
                entry[c as usize] = l.0;
                next[i] += 1;
                filled += 1;
                if filled == self.m {
                    break;
                }
            }
        }
        entry
    }

    #[inline(always)]
    fn select(&self, v: &MaglevVip, h: u64) -> Option<(u16, Backend)> {
        let s = *v.table.get((mix64(h) % self.m as u64) as usize)?;
        Some((s, v.pool.get(s)?))
    }

    /// Connections in a VIP's tracking table.
    pub fn tracked(&self, vip: VipId) -> usize {
        self.vips.get(vip as usize).map_or(0, |v| v.conns.len())
    }
    /// Failed inserts (full tables) over all VIPs.
    pub fn table_full_events(&self) -> u64 {
        self.vips.iter().map(|v| v.conns.full).sum()
    }
}

fn backend_bytes(b: &Backend) -> [u8; 18] {
    let mut o = [0u8; 18];
    match b.addr {
        std::net::IpAddr::V4(a) => o[12..16].copy_from_slice(&a.octets()),
        std::net::IpAddr::V6(a) => o[..16].copy_from_slice(&a.octets()),
    }
    o[16..].copy_from_slice(&b.port.to_be_bytes());
    o
}

impl Balancer for Maglev {
    fn name(&self) -> &'static str {
        "maglev"
    }
    fn add_vip(&mut self, _vip: Vip, pool: &[(Backend, u32)]) -> Result<VipId> {
        let mut p = Pool::default();
        p.apply(&pool.iter().map(|&(b, w)| PoolOp::Add(b, w)).collect::<Vec<_>>())?;
        let table = self.populate(&p);
        self.vips.push(MaglevVip { pool: p, table, conns: DigestTable::new(self.capacity, self.digest_bits) });
        Ok((self.vips.len() - 1) as VipId)
    }
    fn update_pool(&mut self, vip: VipId, ops: &[PoolOp]) -> Result<()> {
        let mut pool =
            self.vips.get(vip as usize).ok_or_else(|| Error::InvalidParameter("no such VIP".into()))?.pool.clone();
        pool.apply(ops)?;
        let table = self.populate(&pool);
        let v = &mut self.vips[vip as usize];
        // Entries of removed backends are useless: drop them.
        v.conns.retain_map(|s| pool.get(s as u16).map(|_| s));
        v.pool = pool;
        v.table = table;
        Ok(())
    }
    #[inline]
    fn lookup(&self, vip: VipId, key: &[u8]) -> Option<Backend> {
        let v = self.vips.get(vip as usize)?;
        let h = hash64(key, self.seed);
        if let Some(s) = v.conns.get(h)
            && let Some(b) = v.pool.get(s as u16)
        {
            return Some(b);
        }
        self.select(v, h).map(|x| x.1)
    }
    fn lookup_batch(&self, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
        let Some(v) = self.vips.get(vip as usize) else { return };
        let mut hs = [0u64; 16];
        for (ks, os) in keys.chunks(16).zip(out.chunks_mut(16)) {
            for (k, h) in ks.iter().zip(hs.iter_mut()) {
                *h = hash64(k, self.seed);
                v.conns.prefetch(*h);
            }
            for (h, o) in hs.iter().zip(os.iter_mut()) {
                *o = match v.conns.get(*h).and_then(|s| v.pool.get(s as u16)) {
                    Some(b) => Some(b),
                    None => self.select(v, *h).map(|x| x.1),
                };
            }
        }
    }
    fn packet(&mut self, vip: VipId, key: &[u8]) -> Packet {
        let h = hash64(key, self.seed);
        let Some(v) = self.vips.get(vip as usize) else { return Packet { backend: None, table_hit: false } };
        if let Some(s) = v.conns.get(h)
            && let Some(b) = v.pool.get(s as u16)
        {
            return Packet { backend: Some(b), table_hit: true };
        }
        let sel = self.select(v, h);
        if let Some((s, _)) = sel {
            self.vips[vip as usize].conns.set(h, s as u32);
        }
        Packet { backend: sel.map(|x| x.1), table_hit: false }
    }
    fn connection_start(&mut self, _vip: VipId, _key: &[u8], _backend: Backend) -> Result<()> {
        Ok(())
    }
    fn connection_end(&mut self, vip: VipId, key: &[u8]) {
        let h = hash64(key, self.seed);
        if let Some(v) = self.vips.get_mut(vip as usize) {
            v.conns.remove(h);
        }
    }
    fn memory_bytes(&self) -> usize {
        self.vips.iter().map(|v| v.table.capacity() * 2 + v.conns.memory_bytes() + v.pool.members.capacity() * 24).sum()
    }
}

// ---------------------------------------------------------------- SilkRoad

/// Versions per VIP (SilkRoad uses 6-bit version numbers).
pub const SILKROAD_VERSIONS: usize = 64;

#[derive(Debug, Clone)]
struct Version {
    /// Weighted selection table of this pool version (DIPPoolTable).
    table: Vec<u16>,
    /// ConnTable entries referring to this version.
    refs: u64,
    /// Creation order (for reuse of the oldest version number).
    born: u64,
}

#[derive(Debug, Clone)]
struct SilkVip {
    pool: Pool,
    current: usize,
    versions: Vec<Option<Version>>,
}

/// One stage of the ConnTable: buckets of 4 `(digest, version)` words.
#[derive(Debug, Clone)]
struct Stage {
    slots: Vec<u32>,
    bmask: usize,
}

/// SilkRoad-style multi-level digest tables. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct SilkRoad {
    stages: Vec<Stage>,
    digest_bits: u32,
    sel_bits: u32,
    vips: Vec<SilkVip>,
    clock: u64,
    seed: u64,
    /// Connections remapped because their version number was recycled.
    pub recycled_version_conns: u64,
    /// Inserts that found every stage's bucket full.
    pub full: u64,
}

const SR_VERSION_BITS: u32 = 6;

impl SilkRoad {
    /// A ConnTable of `stages` hash-table stages sized together for
    /// `capacity` connections (all VIPs share it, as in the switch), with
    /// `digest_bits`-bit digests (SilkRoad: 16) and pool tables of
    /// `2^sel_bits` entries.
    pub fn new(capacity: usize, stages: usize, digest_bits: u32, sel_bits: u32) -> Result<Self> {
        if !(4..=25).contains(&digest_bits) || stages == 0 || !(4..=16).contains(&sel_bits) {
            return Err(Error::InvalidParameter("SilkRoad: 4..=25 digest bits, ≥1 stage, 4..=16 sel bits".into()));
        }
        let per = (capacity.max(4) * 100 / 90).div_ceil(stages * SLOTS).next_power_of_two();
        let stages = (0..stages).map(|_| Stage { slots: vec![0; per * SLOTS], bmask: per - 1 }).collect();
        Ok(Self {
            stages,
            digest_bits,
            sel_bits,
            vips: Vec::new(),
            clock: 0,
            seed: 0x0511_c0ad,
            recycled_version_conns: 0,
            full: 0,
        })
    }

    #[inline(always)]
    fn word(&self, vip: VipId, h: u64) -> (u32, [usize; 8]) {
        // The digest covers the VIP too (the ConnTable is shared by all VIPs).
        let hv = h ^ mix64(vip as u64 + 1);
        let d = ((hv >> (64 - self.digest_bits)) as u32).max(1);
        let mut b = [0usize; 8];
        let mut x = hv;
        for (i, st) in self.stages.iter().enumerate().take(8) {
            x = mix64(x.wrapping_add(i as u64));
            b[i] = x as usize & st.bmask;
        }
        (d, b)
    }

    #[inline(always)]
    fn find(&self, vip: VipId, h: u64) -> Option<(usize, usize)> {
        let (d, b) = self.word(vip, h);
        for (i, st) in self.stages.iter().enumerate().take(8) {
            for j in 0..SLOTS {
                let s = st.slots[b[i] * SLOTS + j];
                if s != 0 && s >> SR_VERSION_BITS == d {
                    return Some((i, b[i] * SLOTS + j));
                }
            }
        }
        None
    }

    fn new_version(&mut self, vip: VipId) {
        let sel = self.sel_bits;
        self.clock += 1;
        let born = self.clock;
        let v = &mut self.vips[vip as usize];
        let table = v.pool.weighted_table(sel);
        let cur = v.current;
        // A free version number, else recycle the oldest one in use.
        let slot = (0..SILKROAD_VERSIONS)
            .find(|&i| i != cur && v.versions[i].as_ref().is_none_or(|x| x.refs == 0))
            .unwrap_or_else(|| {
                (0..SILKROAD_VERSIONS)
                    .filter(|&i| i != cur)
                    .min_by_key(|&i| v.versions[i].as_ref().map_or(0, |x| x.born))
                    .unwrap_or(0)
            });
        if let Some(old) = &v.versions[slot] {
            self.recycled_version_conns += old.refs;
        }
        v.versions[slot] = Some(Version { table, refs: v.versions[slot].as_ref().map_or(0, |x| x.refs), born });
        v.current = slot;
        // Drop unreferenced old versions.
        for (i, x) in v.versions.iter_mut().enumerate() {
            if i != slot && x.as_ref().is_some_and(|x| x.refs == 0) {
                *x = None;
            }
        }
    }

    #[inline(always)]
    fn pick(&self, v: &SilkVip, version: usize, h: u64) -> Option<Backend> {
        let t = &v.versions.get(version)?.as_ref()?.table;
        let s = *t.get((mix64(h ^ self.seed) as usize) & (t.len().max(1) - 1))?;
        v.pool.get(s)
    }

    /// Failed inserts plus recycled-version remaps.
    pub fn table_full_events(&self) -> u64 {
        self.full
    }
}

impl Balancer for SilkRoad {
    fn name(&self) -> &'static str {
        "silkroad"
    }
    fn add_vip(&mut self, _vip: Vip, pool: &[(Backend, u32)]) -> Result<VipId> {
        let mut p = Pool::default();
        p.apply(&pool.iter().map(|&(b, w)| PoolOp::Add(b, w)).collect::<Vec<_>>())?;
        self.vips.push(SilkVip { pool: p, current: 0, versions: vec![None; SILKROAD_VERSIONS] });
        let id = (self.vips.len() - 1) as VipId;
        let table = self.vips[id as usize].pool.weighted_table(self.sel_bits);
        self.vips[id as usize].versions[0] = Some(Version { table, refs: 0, born: 0 });
        Ok(id)
    }
    fn update_pool(&mut self, vip: VipId, ops: &[PoolOp]) -> Result<()> {
        let v = self.vips.get_mut(vip as usize).ok_or_else(|| Error::InvalidParameter("no such VIP".into()))?;
        let mut pool = v.pool.clone();
        pool.apply(ops)?;
        v.pool = pool;
        self.new_version(vip);
        Ok(())
    }
    #[inline]
    fn lookup(&self, vip: VipId, key: &[u8]) -> Option<Backend> {
        let v = self.vips.get(vip as usize)?;
        let h = hash64(key, self.seed);
        if let Some((i, j)) = self.find(vip, h) {
            let ver = (self.stages[i].slots[j] & ((1 << SR_VERSION_BITS) - 1)) as usize;
            if let Some(b) = self.pick(v, ver, h) {
                return Some(b);
            }
        }
        self.pick(v, v.current, h)
    }
    fn lookup_batch(&self, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
        let mut hs = [0u64; 16];
        for (ks, os) in keys.chunks(16).zip(out.chunks_mut(16)) {
            for (k, h) in ks.iter().zip(hs.iter_mut()) {
                *h = hash64(k, self.seed);
                let (_, b) = self.word(vip, *h);
                for (st, &bi) in self.stages.iter().zip(b.iter()) {
                    prefetch(st.slots[bi * SLOTS..].as_ptr());
                }
            }
            let Some(v) = self.vips.get(vip as usize) else { return };
            for (h, o) in hs.iter().zip(os.iter_mut()) {
                let hit = self.find(vip, *h).and_then(|(i, j)| {
                    self.pick(v, (self.stages[i].slots[j] & ((1 << SR_VERSION_BITS) - 1)) as usize, *h)
                });
                *o = hit.or_else(|| self.pick(v, v.current, *h));
            }
        }
    }
    fn packet(&mut self, vip: VipId, key: &[u8]) -> Packet {
        let h = hash64(key, self.seed);
        let Some(v) = self.vips.get(vip as usize) else { return Packet { backend: None, table_hit: false } };
        if let Some((i, j)) = self.find(vip, h) {
            let ver = (self.stages[i].slots[j] & ((1 << SR_VERSION_BITS) - 1)) as usize;
            if let Some(b) = self.pick(v, ver, h) {
                return Packet { backend: Some(b), table_hit: true };
            }
            // Its backend is gone: re-learn with the current version.
            let cur = v.current;
            let d = self.stages[i].slots[j] >> SR_VERSION_BITS;
            self.stages[i].slots[j] = d << SR_VERSION_BITS | cur as u32;
            let v = &mut self.vips[vip as usize];
            if let Some(x) = v.versions[ver].as_mut() {
                x.refs = x.refs.saturating_sub(1);
            }
            if let Some(x) = v.versions[cur].as_mut() {
                x.refs += 1;
            }
            return Packet { backend: self.pick(&self.vips[vip as usize], cur, h), table_hit: false };
        }
        let cur = v.current;
        let b = self.pick(v, cur, h);
        if b.is_some() {
            let (d, bs) = self.word(vip, h);
            let mut placed = false;
            'outer: for (i, &bi) in bs.iter().enumerate().take(self.stages.len()) {
                for j in 0..SLOTS {
                    let s = &mut self.stages[i].slots[bi * SLOTS + j];
                    if *s == 0 {
                        *s = d << SR_VERSION_BITS | cur as u32;
                        placed = true;
                        break 'outer;
                    }
                }
            }
            if placed {
                if let Some(x) = self.vips[vip as usize].versions[cur].as_mut() {
                    x.refs += 1;
                }
            } else {
                self.full += 1;
            }
        }
        Packet { backend: b, table_hit: false }
    }
    fn connection_start(&mut self, _vip: VipId, _key: &[u8], _backend: Backend) -> Result<()> {
        Ok(())
    }
    fn connection_end(&mut self, vip: VipId, key: &[u8]) {
        let h = hash64(key, self.seed);
        if let Some((i, j)) = self.find(vip, h) {
            let ver = (self.stages[i].slots[j] & ((1 << SR_VERSION_BITS) - 1)) as usize;
            self.stages[i].slots[j] = 0;
            if let Some(v) = self.vips.get_mut(vip as usize)
                && let Some(x) = v.versions[ver].as_mut()
            {
                x.refs = x.refs.saturating_sub(1);
            }
        }
    }
    fn memory_bytes(&self) -> usize {
        self.stages.iter().map(|s| s.slots.capacity() * 4).sum::<usize>()
            + self
                .vips
                .iter()
                .map(|v| v.versions.iter().flatten().map(|x| x.table.capacity() * 2 + 24).sum::<usize>() + 64)
                .sum::<usize>()
    }
}

// ---------------------------------------------------------------- Concury

/// Concury behind the [`Balancer`] interface: a [`Control`] and a
/// [`DataPlane`] kept in step by applying every delta (round-tripped
/// through the wire format when `wire` is set).
#[derive(Debug)]
pub struct Concury {
    /// Control plane.
    pub control: Control,
    /// Data plane.
    pub data: DataPlane,
    wire: bool,
}

impl Concury {
    /// A fresh instance; `wire` sends every delta through `to_bytes`/`from_bytes`.
    pub fn new(p: Params, wire: bool) -> Result<Self> {
        let control = Control::new(p)?;
        let data = control.export();
        Ok(Self { control, data, wire })
    }
    /// Wraps an existing control plane with a data plane exported from it.
    pub fn from_control(control: Control, wire: bool) -> Self {
        let data = control.export();
        Self { control, data, wire }
    }
    fn ship(&self, d: super::Delta) -> Result<()> {
        if self.wire { self.data.apply(&super::Delta::from_bytes(&d.to_bytes())?) } else { self.data.apply(&d) }
    }
}

impl Balancer for Concury {
    fn name(&self) -> &'static str {
        "concury"
    }
    fn add_vip(&mut self, vip: Vip, pool: &[(Backend, u32)]) -> Result<VipId> {
        let (id, d) = self.control.add_vip(vip, pool)?;
        self.ship(d)?;
        Ok(id)
    }
    fn update_pool(&mut self, vip: VipId, ops: &[PoolOp]) -> Result<()> {
        let d = self.control.update_pool(vip, ops)?;
        self.ship(d)
    }
    #[inline]
    fn lookup(&self, vip: VipId, key: &[u8]) -> Option<Backend> {
        self.data.lookup(vip, key)
    }
    fn lookup_batch(&self, vip: VipId, keys: &[&[u8]], out: &mut [Option<Backend>]) {
        self.data.lookup_batch_vip(vip, keys, out)
    }
    fn packet(&mut self, vip: VipId, key: &[u8]) -> Packet {
        Packet { backend: self.data.lookup(vip, key), table_hit: false }
    }
    fn connection_start(&mut self, vip: VipId, key: &[u8], backend: Backend) -> Result<()> {
        self.control.connection_start(vip, key, backend)
    }
    fn connection_end(&mut self, vip: VipId, key: &[u8]) {
        let _ = self.control.connection_end(vip, key);
    }
    fn memory_bytes(&self) -> usize {
        self.data.memory_bytes()
    }
}
