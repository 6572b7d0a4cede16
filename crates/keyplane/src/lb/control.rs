//! Concury control plane (thesis §5.4.4, §5.4.5): per-VIP OthelloMaps fed by
//! host-agent reports, pool and weight changes, reactive data-plane updates.

use super::plane::{DataPlane, Delta, NO_BACKEND, Op, VipPlane};
use super::weights::{Share, apportion, rebalance};
use super::{Backend, Params, Vip, VipId, spread};
use crate::ControlTable;
use crate::bits::PackedArray;
use crate::error::{Error, Result, mask};
use crate::hash::mix64;
use crate::othello;
use std::collections::HashMap;
use std::sync::Arc;

/// Width of the OthelloMap's index values (array `C` holds < 2^32 entries).
const INDEX_BITS: u32 = 32;
const FREE: u32 = 0;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Pool slot of the backend holding the state.
    backend: u16,
    /// Dcode chosen for the state at the last rebuild ([`NO_BACKEND`] = none yet).
    dcode: u16,
    /// Live connections of the state; 0 marks a free entry.
    conns: u32,
}

/// OthelloMap (thesis §5.4.4, Fig. 5.7, Appendix A.3.4): an array `C` of
/// state → backend entries plus an Othello `O` whose value for a state is its
/// index in `C`.
///
/// * set query: `O` gives the index, `C` the backend — O(1);
/// * add: a known state has its entry revised; a new one takes a free entry
///   of `C` and `⟨state, index⟩` is added to `O` — amortised O(1);
/// * delete: the state's edge leaves `O` and its entry joins a free list —
///   O(1). (The paper moves `C`'s last entry into the hole, which costs a
///   second Othello value change; a free list keeps indices stable and `C`
///   as dense as the peak state count.)
///
/// **The BAS is a bit-slice of `O`.** `O`'s value for a state is
/// `index << l_d | Dcode`. XOR acts bit by bit, so the low `l_d`
/// bits of `O`'s two arrays *are* a BAS mapping every state to its
/// Dcode, on `O`'s own graph (§5.4.5: "re-use the G from the
/// OthelloMap and assign the Dcode values"). Instead of recolouring the
/// whole graph at each pool change ([`OthelloMap::recoloured_bas`], the
/// `export_with` route, kept for comparison), the Dcode part is kept current
/// as states arrive, and a pool change only recolours the trees of states
/// whose Dcode moved, then copies the low bits of the arrays: O(m) sequential
/// work plus O(moved states) tree walks.
///
/// A state may hold several connections (multi-connection states, §5.3): it
/// stays until its last connection ends.
#[derive(Debug, Clone)]
pub struct OthelloMap {
    o: othello::Control,
    c: Vec<Entry>,
    free: Vec<u32>,
    dbits: u32,
}

/// Smallest capacity of a VIP's Othello: arrays of at least `2^min(l_d, 12)`
/// slots a side. An unknown key's Dcode is the XOR of two random free
/// slots, so the Dcode distribution of new connections is made of `ma · mb`
/// equally likely pairs; at `2^l_d` slots a side every Dcode gets about
/// `2^l_d` of them (±1.6% at `l_d` = 12), whatever the VIP's state count.
fn min_bas_capacity(dcode_bits: u32) -> usize {
    1 << dcode_bits.min(12)
}

/// The Dcode among `dcodes` a state uses: spread by a fixed-seed hash.
fn pick(dcodes: &[u16], key: &[u8]) -> u16 {
    if dcodes.is_empty() { NO_BACKEND } else { dcodes[((spread(key) >> 32) % dcodes.len() as u64) as usize] }
}

impl OthelloMap {
    /// Empty map for `dcode_bits`-bit Dcodes whose Othello skeleton uses `seed`.
    pub fn new(seed: u64, dcode_bits: u32) -> Result<Self> {
        crate::check_value_bits(dcode_bits, super::MIN_DCODE_BITS, super::MAX_DCODE_BITS)?;
        let opts = othello::Options { seed, ..othello::Options::default() };
        Ok(Self {
            o: othello::Control::with_min_capacity(INDEX_BITS + dcode_bits, opts, min_bas_capacity(dcode_bits))?,
            c: Vec::new(),
            free: Vec::new(),
            dbits: dcode_bits,
        })
    }

    #[inline]
    fn value(&self, idx: u32, dcode: u16) -> u64 {
        (idx as u64) << self.dbits | (dcode as u64 & mask(self.dbits))
    }

    #[inline]
    fn index(&self, state: &[u8]) -> Option<u32> {
        self.o.get(state).map(|v| (v >> self.dbits) as u32)
    }

    /// Set query: `(backend slot, live connections)` of a state.
    pub fn get(&self, state: &[u8]) -> Option<(u16, u32)> {
        let e = self.c.get(self.index(state)? as usize)?;
        (e.conns != FREE).then_some((e.backend, e.conns))
    }

    /// The Dcode recorded for a state ([`u16::MAX`] before its first pin at
    /// `l_d < 16`).
    pub fn dcode(&self, state: &[u8]) -> Option<u16> {
        let e = self.c.get(self.index(state)? as usize)?;
        (e.conns != FREE).then_some(e.dcode)
    }

    /// Adds a connection of `state` on backend slot `backend`, which owns the
    /// Dcodes `dcodes` (the state takes one of them). A known state counts
    /// one more connection and moves to `backend` if it differs (the host
    /// agent is authoritative). Returns the previous backend of a known state.
    pub fn add(&mut self, state: &[u8], backend: u16, dcodes: &[u16]) -> Result<Option<u16>> {
        if let Some(i) = self.index(state) {
            let e = self.c[i as usize];
            if e.backend != backend {
                let d = pick(dcodes, state);
                let v = self.value(i, d);
                self.o.insert(state, v)?;
                self.c[i as usize].dcode = d;
            }
            let e2 = &mut self.c[i as usize];
            e2.conns = e2.conns.saturating_add(1);
            e2.backend = backend;
            return Ok(Some(e.backend));
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                if self.c.len() >= u32::MAX as usize {
                    return Err(Error::CapacityExceeded("OthelloMap holds 2^32-1 states".into()));
                }
                self.c.push(Entry { backend: 0, dcode: NO_BACKEND, conns: FREE });
                (self.c.len() - 1) as u32
            }
        };
        let d = pick(dcodes, state);
        if let Err(e) = self.o.insert(state, self.value(i, d)) {
            self.free.push(i);
            return Err(e);
        }
        self.c[i as usize] = Entry { backend, dcode: d, conns: 1 };
        Ok(None)
    }

    /// Ends one connection of `state`; the state is deleted with its last
    /// connection. Returns whether the state was known.
    pub fn end(&mut self, state: &[u8]) -> Result<bool> {
        let Some(i) = self.index(state) else { return Ok(false) };
        let e = &mut self.c[i as usize];
        e.conns -= 1;
        if e.conns == FREE {
            self.delete_at(state, i)?;
        }
        Ok(true)
    }

    /// Deletes a state regardless of its connection count.
    pub fn delete(&mut self, state: &[u8]) -> Result<bool> {
        let Some(i) = self.index(state) else { return Ok(false) };
        self.delete_at(state, i)?;
        Ok(true)
    }

    fn delete_at(&mut self, state: &[u8], i: u32) -> Result<()> {
        self.o.remove(state)?;
        self.c[i as usize].conns = FREE;
        self.free.push(i);
        Ok(())
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.o.len()
    }

    /// True when no state is tracked.
    pub fn is_empty(&self) -> bool {
        self.o.is_empty()
    }

    /// Iterates over `(state, backend slot, connections)`.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u16, u32)> + '_ {
        self.o.iter().map(|(k, v)| {
            let e = self.c[(v >> self.dbits) as usize];
            (k, e.backend, e.conns)
        })
    }

    /// Heap bytes: the Othello (keys, graph, arrays), `C` and the free list.
    pub fn memory_bytes(&self) -> usize {
        self.o.memory_bytes() + self.c.capacity() * std::mem::size_of::<Entry>() + self.free.capacity() * 4
    }

    /// The states of a backend slot.
    fn states_of(&self, backend: u16) -> Vec<Vec<u8>> {
        self.iter().filter(|&(_, b, _)| b == backend).map(|(k, _, _)| k.to_vec()).collect()
    }

    /// Re-pins every state whose Dcode no longer points at its backend to one
    /// of the backend's Dcodes (`dcodes_of[slot]`); the others keep theirs.
    fn repin(&mut self, row: &[u16], dcodes_of: &[Vec<u16>]) -> Result<usize> {
        let stale: Vec<(Vec<u8>, u32)> = self
            .o
            .iter()
            .filter_map(|(k, v)| {
                let i = (v >> self.dbits) as u32;
                let e = self.c[i as usize];
                let ok = row.get(e.dcode as usize).is_some_and(|&s| s == e.backend);
                (!ok).then(|| (k.to_vec(), i))
            })
            .collect();
        for (k, i) in &stale {
            let b = self.c[*i as usize].backend;
            let d = pick(dcodes_of.get(b as usize).map_or(&[][..], |x| x), k);
            let v = self.value(*i, d);
            self.o.insert(k, v)?;
            self.c[*i as usize].dcode = d;
        }
        Ok(stale.len())
    }

    /// The VIP's BAS: the low `l_d` bits of `O`'s arrays.
    fn bas(&self) -> othello::Lookup {
        narrow(&self.o.export(), self.dbits)
    }

    /// The same BAS built the §5.4.5 way: recolour `O`'s graph from scratch
    /// with every state's Dcode ([`othello::Control::export_with`])
    /// and narrow it. Answers exactly like the incremental BAS for every
    /// state; kept to compare response times.
    pub fn recoloured_bas(&self) -> Result<othello::Lookup> {
        let dm = mask(self.dbits);
        // export_with visits the keys in store order, which is the order of
        // `iter()`: follow along and fall back to a set query on a mismatch.
        let mut it = self.o.iter();
        let wide = self.o.export_with(|k| {
            let v = match it.next() {
                Some((k2, v)) if k2 == k => v,
                _ => self.o.get(k).unwrap_or(0),
            };
            v & dm
        })?;
        Ok(narrow(&wide, self.dbits))
    }
}

/// Keeps the low `bits` of every slot of an Othello lookup form. XOR is
/// bitwise, so every key whose value fits in `bits` reads it unchanged.
fn narrow(l: &othello::Lookup, bits: u32) -> othello::Lookup {
    let s = l.snapshot_arc();
    let p = othello::Params { vbits: bits, fbits: 0, empt: false, ..s.p };
    let m = mask(bits);
    let a = PackedArray::new(p.ma as usize, bits);
    for i in 0..p.ma as usize {
        a.set(i, s.a.get(i) & m);
    }
    let b = PackedArray::new(p.mb as usize, bits);
    for i in 0..p.mb as usize {
        b.set(i, s.b.get(i) & m);
    }
    othello::Lookup::from_image(othello::Image { p, a, b }, crate::lineage::Lineage::EMBEDDED, 0)
}

/// A pool member.
#[derive(Debug, Clone, Copy)]
struct Member {
    backend: Backend,
    weight: u32,
    /// States tracked on this backend.
    tracked: u32,
}

#[derive(Debug, Clone)]
struct VipCtl {
    vip: Vip,
    pool: Vec<Option<Member>>,
    map: OthelloMap,
    /// Dcode → pool slot.
    row: Vec<u16>,
    /// Pool slot → its Dcodes.
    dcodes_of: Vec<Vec<u16>>,
    plane: Arc<VipPlane>,
    generation: u64,
}

/// A change to a VIP's backend pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolOp {
    /// Adds a backend with a weight (or sets the weight of a present one).
    Add(Backend, u32),
    /// Removes a backend (removal or failure): its tracked states are
    /// forgotten; their next packets are new connections.
    Remove(Backend),
    /// Changes the weight of a present backend (0 = drain).
    SetWeight(Backend, u32),
}

/// Counters of the control plane's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Data-plane VIP rebuilds (one per pool update of a VIP).
    pub rebuilds: u64,
    /// Dcodes that changed backend over all rebalances.
    pub dcodes_moved: u64,
    /// States whose Dcode had to change to stay on their backend.
    pub states_repinned: u64,
    /// States dropped because their backend was removed.
    pub states_dropped: u64,
    /// Connection reports processed.
    pub reports: u64,
}

/// Concury control plane. See the [module docs](super).
#[derive(Debug, Clone)]
pub struct Control {
    p: Params,
    vips: Vec<Option<VipCtl>>,
    by_addr: HashMap<Vip, VipId>,
    table: crate::lineage::Lineage,
    seq: u64,
    stats: Stats,
}

impl Control {
    /// An empty control plane (no VIPs).
    pub fn new(p: Params) -> Result<Self> {
        p.validate()?;
        Ok(Self {
            p,
            vips: vec![None; p.max_vips as usize],
            by_addr: HashMap::new(),
            table: crate::lineage::Lineage::random(),
            seq: 0,
            stats: Stats::default(),
        })
    }

    /// Parameters in force.
    pub fn params(&self) -> Params {
        self.p
    }
    /// Work counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// The table lineage (random at creation; see [`crate::lineage`]).
    pub fn table_id(&self) -> crate::TableId {
        self.table.id
    }
    /// Sets the lineage id (reproducible builds); call it before exporting.
    pub fn set_table_id(&mut self, id: crate::TableId) {
        self.table.id = id;
    }

    /// Index of a VIP.
    pub fn vip_id(&self, vip: &Vip) -> Option<VipId> {
        self.by_addr.get(vip).copied()
    }

    fn ctl(&self, id: VipId) -> Result<&VipCtl> {
        self.vips
            .get(id as usize)
            .and_then(|v| v.as_ref())
            .ok_or_else(|| Error::InvalidParameter(format!("no VIP with index {id}")))
    }

    fn ctl_mut(&mut self, id: VipId) -> Result<&mut VipCtl> {
        self.vips
            .get_mut(id as usize)
            .and_then(|v| v.as_mut())
            .ok_or_else(|| Error::InvalidParameter(format!("no VIP with index {id}")))
    }

    fn delta(&mut self, ops: Vec<Op>) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta { table: self.table, seq: self.seq, dbits: self.p.dcode_bits, ops }
    }

    /// Adds a VIP with an initial pool at the lowest free index (§5.5 "VIP
    /// changes"). Returns its index and the delta adding its plane.
    pub fn add_vip(&mut self, vip: Vip, pool: &[(Backend, u32)]) -> Result<(VipId, Delta)> {
        if self.by_addr.contains_key(&vip) {
            return Err(Error::InvalidParameter(format!("VIP {vip:?} already exists")));
        }
        let id = self
            .vips
            .iter()
            .position(|v| v.is_none())
            .ok_or_else(|| Error::CapacityExceeded(format!("all {} VIP indices in use", self.p.max_vips)))?
            as VipId;
        self.add_vip_at(id, vip, pool).map(|d| (id, d))
    }

    /// Adds a VIP at a chosen index (e.g. derived from its address, §5.4.2 step 1).
    pub fn add_vip_at(&mut self, id: VipId, vip: Vip, pool: &[(Backend, u32)]) -> Result<Delta> {
        if self.by_addr.contains_key(&vip) {
            return Err(Error::InvalidParameter(format!("VIP {vip:?} already exists")));
        }
        match self.vips.get(id as usize) {
            None => return Err(Error::InvalidParameter(format!("VIP index {id} outside 0..{}", self.p.max_vips))),
            Some(Some(_)) => return Err(Error::InvalidParameter(format!("VIP index {id} in use"))),
            Some(None) => {}
        }
        let seed = mix64(self.p.seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let map = OthelloMap::new(seed, self.p.dcode_bits)?;
        let empty = VipPlane::new(vip, 0, self.p.dcode_bits, map.bas(), Box::new([]), &[])?;
        let mut v = VipCtl {
            vip,
            pool: Vec::new(),
            map,
            row: vec![NO_BACKEND; 1 << self.p.dcode_bits],
            dcodes_of: Vec::new(),
            plane: Arc::new(empty),
            generation: 0,
        };
        let ops: Vec<PoolOp> = pool.iter().map(|&(b, w)| PoolOp::Add(b, w)).collect();
        Self::validate_ops(&self.p, &v, &ops)?;
        Self::apply_ops(&mut v, &ops, &mut self.stats)?;
        Self::rebuild(&self.p, &mut v, &mut self.stats)?;
        let plane = v.plane.clone();
        self.vips[id as usize] = Some(v);
        self.by_addr.insert(vip, id);
        Ok(self.delta(vec![Op::Set(id, plane)]))
    }

    /// Removes a VIP and everything tracked for it.
    pub fn remove_vip(&mut self, id: VipId) -> Result<Delta> {
        let vip = self.ctl(id)?.vip;
        self.vips[id as usize] = None;
        self.by_addr.remove(&vip);
        Ok(self.delta(vec![Op::Remove(id)]))
    }

    /// Applies pool changes to one VIP and emits the delta replacing its
    /// plane (§5.4.5): DIP row rebalanced with the fewest moves, tracked
    /// states re-pinned, BAS recoloured on the OthelloMap's graph. All
    /// changes are checked before any takes effect.
    pub fn update_pool(&mut self, id: VipId, ops: &[PoolOp]) -> Result<Delta> {
        let p = self.p;
        let mut stats = self.stats;
        let v = self.ctl_mut(id)?;
        Self::validate_ops(&p, v, ops)?;
        Self::apply_ops(v, ops, &mut stats)?;
        Self::rebuild(&p, v, &mut stats)?;
        let plane = v.plane.clone();
        self.stats = stats;
        Ok(self.delta(vec![Op::Set(id, plane)]))
    }

    /// Adds a backend to a VIP (or re-weights it if present).
    pub fn add_backend(&mut self, id: VipId, backend: Backend, weight: u32) -> Result<Delta> {
        self.update_pool(id, &[PoolOp::Add(backend, weight)])
    }

    /// Removes (or fails) a backend.
    pub fn remove_backend(&mut self, id: VipId, backend: Backend) -> Result<Delta> {
        self.update_pool(id, &[PoolOp::Remove(backend)])
    }

    /// Changes a backend's weight (0 = drain).
    pub fn set_weight(&mut self, id: VipId, backend: Backend, weight: u32) -> Result<Delta> {
        self.update_pool(id, &[PoolOp::SetWeight(backend, weight)])
    }

    /// Rebuilds a VIP's plane without a pool change (e.g. to stop pinning a
    /// drained backend whose states all ended).
    pub fn refresh(&mut self, id: VipId) -> Result<Delta> {
        self.update_pool(id, &[])
    }

    fn validate_ops(p: &Params, v: &VipCtl, ops: &[PoolOp]) -> Result<()> {
        let mut present: Vec<Backend> = v.pool.iter().flatten().map(|m| m.backend).collect();
        let absent = |b: &Backend| Error::InvalidParameter(format!("{b:?} not in the pool"));
        for op in ops {
            match op {
                PoolOp::Add(b, _) => {
                    if !present.contains(b) {
                        if present.len() >= p.max_backends() {
                            return Err(Error::CapacityExceeded(format!(
                                "a VIP holds at most 2^{}/8 = {} backends",
                                p.dcode_bits,
                                p.max_backends()
                            )));
                        }
                        present.push(*b);
                    }
                }
                PoolOp::Remove(b) => {
                    let i = present.iter().position(|x| x == b).ok_or_else(|| absent(b))?;
                    present.swap_remove(i);
                }
                PoolOp::SetWeight(b, _) => {
                    if !present.contains(b) {
                        return Err(absent(b));
                    }
                }
            }
        }
        Ok(())
    }

    fn apply_ops(v: &mut VipCtl, ops: &[PoolOp], stats: &mut Stats) -> Result<()> {
        for op in ops {
            match *op {
                PoolOp::Add(b, w) => match v.slot_of(&b) {
                    Some(s) => v.pool[s].as_mut().map_or((), |m| m.weight = w),
                    None => {
                        let m = Member { backend: b, weight: w, tracked: 0 };
                        match v.pool.iter().position(|s| s.is_none()) {
                            Some(s) => v.pool[s] = Some(m),
                            None => v.pool.push(Some(m)),
                        }
                    }
                },
                PoolOp::Remove(b) => {
                    let s = v.slot_of(&b).ok_or_else(|| Error::InvalidParameter(format!("{b:?} not in the pool")))?;
                    let gone = v.map.states_of(s as u16);
                    for k in &gone {
                        v.map.delete(k)?;
                    }
                    stats.states_dropped += gone.len() as u64;
                    v.pool[s] = None;
                }
                PoolOp::SetWeight(b, w) => {
                    let s = v.slot_of(&b).ok_or_else(|| Error::InvalidParameter(format!("{b:?} not in the pool")))?;
                    if let Some(m) = v.pool[s].as_mut() {
                        m.weight = w;
                    }
                }
            }
        }
        Ok(())
    }

    fn rebuild(p: &Params, v: &mut VipCtl, stats: &mut Stats) -> Result<()> {
        let total = 1usize << p.dcode_bits;
        let shares: Vec<Option<Share>> =
            v.pool.iter().map(|m| m.map(|m| Share { weight: m.weight, tracked: m.tracked })).collect();
        let target = apportion(&shares, total);
        stats.dcodes_moved += rebalance(&mut v.row, &target) as u64;
        // Each slot's Dcodes; re-pin states whose Dcode moved; slice the BAS.
        let mut dcodes_of = vec![Vec::new(); v.pool.len()];
        for (d, &s) in v.row.iter().enumerate() {
            if let Some(l) = dcodes_of.get_mut(s as usize) {
                l.push(d as u16);
            }
        }
        v.dcodes_of = dcodes_of;
        stats.states_repinned += v.map.repin(&v.row, &v.dcodes_of)? as u64;
        let bas = v.map.bas();
        let mut compact = vec![NO_BACKEND; v.pool.len()];
        let mut backends = Vec::new();
        for (s, m) in v.pool.iter().enumerate() {
            if let Some(m) = m {
                compact[s] = backends.len() as u16;
                backends.push(m.backend);
            }
        }
        let da: Box<[u16]> =
            if backends.is_empty() { Box::new([]) } else { v.row.iter().map(|&s| compact[s as usize]).collect() };
        v.generation += 1;
        v.plane = Arc::new(VipPlane::new(v.vip, v.generation, p.dcode_bits, bas, da, &backends)?);
        stats.rebuilds += 1;
        Ok(())
    }

    /// Host-agent report: a connection of `state` started on `backend`
    /// (§5.4.4 "Interaction of Concury-CP and Host Agents"). Never produces a
    /// data-plane update (§5.4.5). The backend must be in the VIP's pool.
    pub fn connection_start(&mut self, id: VipId, state: &[u8], backend: Backend) -> Result<()> {
        let v = self.ctl_mut(id)?;
        let s = v
            .slot_of(&backend)
            .ok_or_else(|| Error::InvalidParameter(format!("{backend:?} is not in the pool of VIP {id}")))?;
        let dcodes = v.dcodes_of.get(s).map_or(&[][..], |x| x);
        if let Some(old) = v.map.add(state, s as u16, dcodes)? {
            if let Some(m) = v.pool.get_mut(old as usize).and_then(|m| m.as_mut()) {
                m.tracked -= 1;
            }
        }
        if let Some(m) = v.pool[s].as_mut() {
            m.tracked += 1;
        }
        self.stats.reports += 1;
        Ok(())
    }

    /// Host-agent report: a connection of `state` ended. The state is
    /// forgotten with its last connection. Returns whether it was known.
    pub fn connection_end(&mut self, id: VipId, state: &[u8]) -> Result<bool> {
        let v = self.ctl_mut(id)?;
        let before = v.map.get(state);
        let known = v.map.end(state)?;
        if let Some((b, 1)) = before
            && let Some(m) = v.pool.get_mut(b as usize).and_then(|m| m.as_mut())
        {
            m.tracked -= 1;
        }
        self.stats.reports += 1;
        Ok(known)
    }

    /// Set query: the backend a tracked state is on.
    pub fn backend_of(&self, id: VipId, state: &[u8]) -> Option<Backend> {
        let v = self.ctl(id).ok()?;
        let (s, _) = v.map.get(state)?;
        v.pool.get(s as usize)?.map(|m| m.backend)
    }

    /// States tracked for a VIP.
    pub fn states(&self, id: VipId) -> usize {
        self.ctl(id).map_or(0, |v| v.map.len())
    }

    /// The VIP's OthelloMap.
    pub fn othello_map(&self, id: VipId) -> Option<&OthelloMap> {
        self.ctl(id).ok().map(|v| &v.map)
    }

    /// The VIP's pool as `(backend, weight, tracked states, Dcodes)`.
    pub fn pool(&self, id: VipId) -> Vec<(Backend, u32, u32, usize)> {
        let Ok(v) = self.ctl(id) else { return Vec::new() };
        v.pool
            .iter()
            .enumerate()
            .filter_map(|(s, m)| {
                m.map(|m| (m.backend, m.weight, m.tracked, v.row.iter().filter(|&&x| x as usize == s).count()))
            })
            .collect()
    }

    /// A data plane holding exactly the planes of the deltas emitted so far.
    pub fn export(&self) -> DataPlane {
        let vips = self.vips.iter().map(|v| v.as_ref().map(|v| v.plane.clone())).collect();
        DataPlane::from_parts(self.table, self.seq, self.p.dcode_bits, vips)
            .unwrap_or_else(|_| unreachable!("the control plane never holds a VIP twice"))
    }

    /// Heap bytes of the control plane (OthelloMaps, pools, DIP rows and the
    /// current planes it shares with the data plane).
    pub fn memory_bytes(&self) -> usize {
        self.vips.capacity() * std::mem::size_of::<Option<VipCtl>>()
            + self
                .vips
                .iter()
                .flatten()
                .map(|v| {
                    v.map.memory_bytes()
                        + v.pool.capacity() * std::mem::size_of::<Option<Member>>()
                        + v.row.capacity() * 2
                        + v.plane.memory_bytes()
                })
                .sum::<usize>()
    }
}

impl VipCtl {
    fn slot_of(&self, b: &Backend) -> Option<usize> {
        self.pool.iter().position(|m| m.is_some_and(|m| m.backend == *b))
    }
}
