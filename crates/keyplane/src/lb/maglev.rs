//! Maglev (Eisenbud et al., NSDI'16), "hash table with digest" (thesis
//! §5.6.1): per VIP a Maglev lookup table of prime size
//! ([`DEFAULT_TABLE_SIZE`]) filled from the backends' permutations, plus a
//! per-VIP connection-tracking table (partial-key (2,4) cuckoo hash table of
//! digests → backend) learned on a connection's first packet. Per-VIP
//! tables are the thesis' own fix. `keyplane-lb`'s Maglev mode runs it.
//!
//! Digests rather than keys give it the two problems of §5.2: **false hits**
//! (a new connection whose digest matches a tracked one's takes that
//! connection's backend) and **digest deletion** (ending a connection
//! deletes the first matching digest, possibly another connection's).
//! [`Balancer::packet`] reports table hits so a simulation that knows which
//! connections are new can count false hits.
//!
//! ```
//! use keyplane::lb::maglev::{DEFAULT_TABLE_SIZE, Maglev};
//! use keyplane::lb::{Backend, Balancer, Vip};
//! let mut m = Maglev::new(DEFAULT_TABLE_SIZE, 1000, 32).unwrap();
//! let vip = Vip { addr: "198.18.0.1".parse().unwrap(), port: 80, proto: 6 };
//! let pool: Vec<(Backend, u32)> =
//!     (1..=4).map(|i| (Backend { addr: format!("198.18.1.{i}").parse().unwrap(), port: 80 }, 1)).collect();
//! let id = m.add_vip(vip, &pool).unwrap();
//! let first = m.packet(id, b"flow-1");
//! assert!(!first.table_hit && first.backend.is_some());
//! // The connection is tracked: later packets hit the table, same backend.
//! assert_eq!(m.packet(id, b"flow-1"), keyplane::lb::Packet { table_hit: true, ..first });
//! ```

use super::balancer::{DigestTable, Pool};
use super::{Backend, Balancer, Packet, PoolOp, Vip, VipId};
use crate::error::{Error, Result};
use crate::hash::{hash64, mix64};
/// Default Maglev lookup-table size (prime).
pub const DEFAULT_TABLE_SIZE: usize = 65537;

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
