//! The interface every load balancer in [`lb`](super) offers
//! ([`Balancer`]), Concury behind it ([`Concury`]), and what the digest
//! designs ([`maglev`](super::maglev), [`silkroad`](super::silkroad)) share:
//! pools with stable member slots and partial-key cuckoo tables of
//! connection digests.

use super::weights::{Share, apportion};
use super::{Backend, Control, DataPlane, Params, PoolOp, Vip, VipId};
use crate::error::{Error, Result};
use crate::hash::mix64;
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
pub(super) struct Pool {
    pub(super) members: Vec<Option<(Backend, u32)>>,
}

impl Pool {
    pub(super) fn slot_of(&self, b: &Backend) -> Option<usize> {
        self.members.iter().position(|m| m.is_some_and(|m| m.0 == *b))
    }
    pub(super) fn apply(&mut self, ops: &[PoolOp]) -> Result<()> {
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
    pub(super) fn get(&self, s: u16) -> Option<Backend> {
        self.members.get(s as usize).copied().flatten().map(|m| m.0)
    }
    /// A weighted selection table of `2^bits` slots (largest remainder).
    pub(super) fn weighted_table(&self, bits: u32) -> Vec<u16> {
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
pub(super) const SLOTS: usize = 4;
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
    pub(super) fn digest(&self, h: u64) -> u64 {
        let d = (h >> (64 - self.dbits)) & ((1 << self.dbits) - 1);
        if d == 0 { 1 } else { d }
    }
    #[inline(always)]
    pub(super) fn alt(&self, b: usize, d: u64) -> usize {
        (b ^ mix64(d) as usize) & self.bmask
    }
    #[inline(always)]
    pub(super) fn buckets(&self, h: u64) -> (u64, usize, usize) {
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
    pub(super) fn retain_map(&mut self, mut f: impl FnMut(u32) -> Option<u32>) {
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
