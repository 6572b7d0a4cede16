//! The BFW control form: every key, one counting Bloom filter per port.

use super::delta::{Delta, Image, Op, Ops};
use super::{Lookup, Options, Params, bit, step_of};
use crate::ControlTable;
use crate::engine::{ControlLimits, RawDelta};
use crate::error::Result;
use crate::hash::hash64;
use crate::store::{Inserted, KeyStore};

/// Smallest filter capacity (keys).
const MIN_CAP: usize = 16;

#[derive(Debug, Clone)]
struct Port {
    keys: Vec<u32>,
    /// Counting Bloom filter: 8-bit counters, sticky at 255.
    cbf: Vec<u8>,
    cap: usize,
}

impl Port {
    fn m(&self) -> u64 {
        self.cbf.len() as u64
    }

    fn words(&self) -> Vec<u64> {
        let mut w = vec![0u64; self.cbf.len().div_ceil(64)];
        for (i, &c) in self.cbf.iter().enumerate() {
            if c != 0 {
                w[i >> 6] |= 1 << (i & 63);
            }
        }
        w
    }

    /// Counts a key in; returns the positions that became non-zero.
    fn add(&mut self, h: u64, hashes: u32, set: &mut Vec<u64>) {
        let (step, m) = (step_of(h), self.m());
        for t in 0..hashes {
            let b = bit(h, step, t, m);
            let c = &mut self.cbf[b as usize];
            if *c == 0 {
                set.push(b);
            }
            *c = c.saturating_add(1);
        }
    }

    /// Counts a key out; returns the positions that returned to zero.
    fn sub(&mut self, h: u64, hashes: u32, clear: &mut Vec<u64>) {
        let (step, m) = (step_of(h), self.m());
        for t in 0..hashes {
            let b = bit(h, step, t, m);
            let c = &mut self.cbf[b as usize];
            if *c != u8::MAX && *c != 0 {
                *c -= 1;
                if *c == 0 {
                    clear.push(b);
                }
            }
        }
    }
}

/// BFW control form. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, bfw};
///
/// let mut ctl = bfw::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = bfw::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&bfw::Delta::from_bytes(&delta.to_bytes())?)?;
/// // Stored keys always read some value; a key may read another value (Bloom false positives).
/// assert!(table.get(b"10.0.0.2").is_some());
/// let mut out = [None; 2];
/// table.get_batch(&[b"10.0.0.1".as_slice(), b"10.0.0.2"], &mut out);
/// assert!(out.iter().all(Option::is_some));
/// let reader = table.reader(); // one per packet thread
/// assert_eq!(reader.get(b"10.0.0.1"), table.get(b"10.0.0.1"));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Control {
    opts: Options,
    p: Params,
    store: KeyStore,
    ports: hashbrown::HashMap<u32, Port>,
    /// Per key id: index in its port's key list.
    pos: Vec<u32>,
    table: crate::lineage::Lineage,
    seq: u64,
    filter_rebuilds: u64,
}

impl Control {
    crate::engine::options_constructors!(build);

    fn build(store: KeyStore, value_bits: u32, opts: Options) -> Result<Self> {
        Self::check_value_bits(value_bits)?;
        let p = Params { seed: opts.seed, vbits: value_bits, hashes: opts.hashes };
        p.validate()?;
        let mut c = Control {
            opts,
            p,
            store,
            ports: hashbrown::HashMap::new(),
            pos: Vec::new(),
            table: crate::lineage::Lineage::random(),
            seq: 0,
            filter_rebuilds: 0,
        };
        c.pos = vec![0; c.store.id_bound()];
        let mut groups: hashbrown::HashMap<u32, Vec<u32>> = hashbrown::HashMap::new();
        for (id, _, v) in c.store.iter() {
            let g = groups.entry(v as u32).or_default();
            c.pos[id as usize] = g.len() as u32;
            g.push(id);
        }
        for (port, keys) in groups {
            let cap = keys.len().max(MIN_CAP);
            let port_state = c.fill(keys, cap);
            c.ports.insert(port, port_state);
        }
        Ok(c)
    }

    /// Builds a port's counting filter for `cap` keys from its key ids.
    fn fill(&self, keys: Vec<u32>, cap: usize) -> Port {
        let m = self.p.filter_bits(cap);
        let mut port = Port { keys, cbf: vec![0; m as usize], cap };
        let mut scratch = Vec::new();
        for i in 0..port.keys.len() {
            let h = hash64(self.store.key(port.keys[i]), self.p.seed);
            port.add(h, self.p.hashes, &mut scratch);
            scratch.clear();
        }
        port
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// Number of ports holding keys.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }
    /// Per-port filter rebuilds (resizes) so far.
    pub fn filter_rebuilds(&self) -> u64 {
        self.filter_rebuilds
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Iterates over `(key, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.store.iter().map(|(_, k, v)| (k, v))
    }

    fn image(&self) -> Image {
        let mut filters: Vec<(u32, u64, Vec<u64>)> =
            self.ports.iter().map(|(&port, st)| (port, st.m(), st.words())).collect();
        filters.sort_unstable_by_key(|f| f.0);
        Image { p: self.p, filters }
    }

    fn delta(&mut self, ops: Vec<Op>) -> Delta {
        crate::lineage::bump(&mut self.seq);
        Delta(RawDelta::patch(self.table, self.seq, Ops { seed: self.p.seed, ops }))
    }

    /// Adds key `id` (hash `h`) to `port`.
    fn add_to(&mut self, port: u32, id: u32, h: u64, ops: &mut Vec<Op>) {
        let i = id as usize;
        if self.pos.len() <= i {
            self.pos.resize(i + 1, 0);
        }
        match self.ports.get_mut(&port) {
            None => {
                self.pos[i] = 0;
                let st = self.fill(vec![id], MIN_CAP);
                ops.push(Op::Filter { port, m: st.m(), words: st.words() });
                self.ports.insert(port, st);
            }
            Some(st) => {
                self.pos[i] = st.keys.len() as u32;
                st.keys.push(id);
                if st.keys.len() > st.cap {
                    let keys = std::mem::take(&mut st.keys);
                    let cap = keys.len() * 2;
                    let fresh = self.fill(keys, cap);
                    ops.push(Op::Filter { port, m: fresh.m(), words: fresh.words() });
                    self.ports.insert(port, fresh);
                    self.filter_rebuilds += 1;
                } else {
                    let mut set = Vec::new();
                    st.add(h, self.p.hashes, &mut set);
                    if !set.is_empty() {
                        ops.push(Op::Set { port, bits: set });
                    }
                }
            }
        }
    }

    /// Removes key `id` (hash `h`) from `port`.
    fn remove_from(&mut self, port: u32, id: u32, h: u64, ops: &mut Vec<Op>) {
        let Some(st) = self.ports.get_mut(&port) else { return };
        let at = self.pos[id as usize] as usize;
        st.keys.swap_remove(at);
        if let Some(&moved) = st.keys.get(at) {
            self.pos[moved as usize] = at as u32;
        }
        if st.keys.is_empty() {
            self.ports.remove(&port);
            ops.push(Op::Filter { port, m: 0, words: Vec::new() });
        } else if st.keys.len() * 4 < st.cap && st.cap > MIN_CAP {
            let keys = std::mem::take(&mut st.keys);
            let cap = (keys.len() * 2).max(MIN_CAP);
            let fresh = self.fill(keys, cap);
            ops.push(Op::Filter { port, m: fresh.m(), words: fresh.words() });
            self.ports.insert(port, fresh);
            self.filter_rebuilds += 1;
        } else {
            let mut clear = Vec::new();
            st.sub(h, self.p.hashes, &mut clear);
            if !clear.is_empty() {
                ops.push(Op::Clear { port, bits: clear });
            }
        }
    }
}

/// `value_bits` must be 1..=16 (one filter per port).
impl ControlLimits for Control {
    type Options = Options;
    const MAX_VALUE_BITS: u32 = super::MAX_VALUE_BITS;
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, keys: store, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        Self::check_item(key, value, self.p.vbits)?;
        let h = hash64(key, self.p.seed);
        let mut ops = Vec::new();
        match self.store.insert(key, value) {
            Inserted::Existing(id, old) => {
                if old != value {
                    // The delta sets the new port's bits before clearing the old
                    // port's (applied atomically anyway, under the seqlock).
                    let mut rm = Vec::new();
                    self.remove_from(old as u32, id, h, &mut rm);
                    self.add_to(value as u32, id, h, &mut ops);
                    ops.extend(rm);
                }
            }
            Inserted::New(id) => self.add_to(value as u32, id, h, &mut ops),
        }
        Ok(self.delta(ops))
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some((id, v)) = self.store.remove(key) else { return Ok(None) };
        let h = hash64(key, self.p.seed);
        let mut ops = Vec::new();
        self.remove_from(v as u32, id, h, &mut ops);
        Ok(Some(self.delta(ops)))
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(&self.image(), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.store.memory_bytes()
            + self.pos.capacity() * 4
            + self.ports.values().map(|p| p.cbf.capacity() + p.keys.capacity() * 4 + 64).sum::<usize>()
    }
}

crate::snapshot::persist!(Options { hashes, seed });
crate::snapshot::persist_codec!(Params);
crate::snapshot::persist!(Port { keys, cbf, cap });
crate::snapshot::control_snapshot!(
    Control, super::CONTROL_KIND, lineage: table, seq: seq,
    state { opts, p, store, ports, pos, filter_rebuilds },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::ensure;
        let bound = self.store.id_bound();
        ensure(self.pos.len() >= bound.saturating_sub(1), || "bfw key positions".into())?;
        let mut seen = 0;
        for (port, st) in &self.ports {
            ensure(!st.cbf.is_empty() && st.cbf.len() % 64 == 0 || st.cbf.is_empty() && st.keys.is_empty(), || {
                format!("bfw port {port} filter size")
            })?;
            for (i, &id) in st.keys.iter().enumerate() {
                let ok = (id as usize) < bound.min(self.pos.len())
                    && self.store.is_live(id)
                    && self.store.value(id) == *port as u64
                    && self.pos[id as usize] as usize == i;
                ensure(ok, || format!("bfw port {port} lists key id {id} wrongly"))?;
                seen += 1;
            }
        }
        ensure(seen == self.store.len(), || "a bfw key is in no port".into())
    }
}
