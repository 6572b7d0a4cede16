//! SilkRoad (Miao et al., SIGCOMM'17), "multi-level hash tables with
//! digest" (thesis §5.6.1): a ConnTable of several hash-table stages
//! holding a 16-bit connection digest → 6-bit pool version, a VIPTable with
//! each VIP's current version and a DIPPoolTable per (VIP, version). Pool
//! changes create a new version; existing connections keep theirs. Like
//! [`maglev`](super::maglev) it stores digests, so it has false hits and
//! digest deletion (§5.2).

use super::balancer::{Pool, SLOTS};
use super::{Backend, Balancer, Packet, PoolOp, Vip, VipId};
use crate::error::{Error, Result};
use crate::hash::{hash64, mix64};
use crate::mem::prefetch;
/// Versions per VIP (SilkRoad uses 6-bit version numbers).
pub(crate) const VERSIONS: usize = 64;

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
    pub(crate) full: u64,
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
        let slot = (0..VERSIONS)
            .find(|&i| i != cur && v.versions[i].as_ref().is_none_or(|x| x.refs == 0))
            .unwrap_or_else(|| {
                (0..VERSIONS)
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
        self.vips.push(SilkVip { pool: p, current: 0, versions: vec![None; VERSIONS] });
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
