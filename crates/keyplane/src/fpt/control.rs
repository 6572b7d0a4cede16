//! The FPT control form: names, the trie with parent/owner links, update
//! instructions (§7.1).

use super::delta::{Delta, Image, Writes};
use super::{Bits, INTERNAL, LEAF, Lookup, Options, POS_MASK, Params, TAG};
use crate::ControlTable;
use crate::engine::{ControlLimits, RawDelta};
use crate::error::{Error, Result};
use crate::store::{Inserted, KeyStore};

const NONE: u32 = u32::MAX;
const MIN_NODES: usize = 64;

/// FPT control form. See the [module docs](super).
///
/// # Examples
///
/// Build, export, ship the blob, keep the replica current with deltas:
///
/// ```
/// use keyplane::{ControlTable, LookupTable, ReadHandle, Wire, fpt};
///
/// let mut ctl = fpt::Control::with_value_bits(8)?; // empty, 8-bit values
/// ctl.insert(b"10.0.0.1", 5)?;
/// let blob = ctl.export().to_bytes(); // a lookup form, serialised
/// let table = fpt::Lookup::from_bytes(&blob)?; // on the data plane
/// let delta = ctl.insert(b"10.0.0.2", 7)?;
/// table.apply(&fpt::Delta::from_bytes(&delta.to_bytes())?)?;
/// assert_eq!(table.get(b"10.0.0.2"), Some(7));
/// let mut out = [None; 2];
/// table.get_batch(&[b"10.0.0.1".as_slice(), b"10.0.0.2"], &mut out);
/// assert_eq!(out, [Some(5), Some(7)]);
/// let reader = table.reader(); // one per packet thread
/// assert_eq!(reader.get(b"10.0.0.1"), Some(5));
/// # Ok::<(), keyplane::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Control {
    opts: Options,
    p: Params,
    store: KeyStore,
    nodes: Vec<u64>,
    parent: Vec<u32>,
    owner: Vec<u32>,
    leaf_of: Vec<u32>,
    free: Vec<u32>,
    next: usize,
    table: crate::lineage::Lineage,
    seq: u64,
    rebuilds: u64,
}

impl Control {
    /// Empty trie with explicit options.
    pub fn with_options(value_bits: u32, opts: Options) -> Result<Self> {
        Self::check_value_bits(value_bits)?;
        let p = Params { seed: opts.seed, fbits: opts.fingerprint_bits, cbits: opts.check_bits, vbits: value_bits };
        p.validate()?;
        Ok(Self {
            opts,
            p,
            store: KeyStore::new(),
            nodes: vec![0; MIN_NODES],
            parent: vec![NONE; MIN_NODES],
            owner: vec![NONE; MIN_NODES],
            leaf_of: Vec::new(),
            free: Vec::new(),
            next: 2,
            table: crate::lineage::Lineage::random(),
            seq: 0,
            rebuilds: 0,
        })
    }

    /// Bulk construction with explicit options (names inserted one by one;
    /// the trie shape does not depend on the order). A repeated name: the
    /// last value wins.
    pub fn from_items_with<I, K>(items: I, value_bits: u32, opts: Options) -> Result<Self>
    where
        I: IntoIterator<Item = (K, u64)>,
        K: AsRef<[u8]>,
    {
        let mut c = Self::with_options(value_bits, opts)?;
        let it = items.into_iter();
        let n = it.size_hint().0;
        c.reserve(2 * n + 2);
        for (k, v) in it {
            c.insert_inner(k.as_ref(), v)?;
        }
        c.seq = 0;
        Ok(c)
    }

    /// Options in force.
    pub fn options(&self) -> Options {
        self.opts
    }
    /// Sequence number of the last delta emitted.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Node words of the lookup form (used and free).
    pub fn node_capacity(&self) -> usize {
        self.nodes.len()
    }
    /// Node array growths (each emitted a rebuild delta).
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }
    /// Iterates over stored `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.store.iter().map(|(_, k, v)| (k, v))
    }

    /// `(sum of leaf depths, leaves, maximum depth)`; depth = internal nodes
    /// on the root-to-leaf path.
    pub fn depth_stats(&self) -> (u64, u64, u32) {
        if self.nodes[0] == 0 {
            return (0, 0, 0);
        }
        let (mut sum, mut leaves, mut max) = (0u64, 0u64, 0u32);
        let mut stack = vec![(0usize, 0u32)];
        while let Some((i, d)) = stack.pop() {
            let w = self.nodes[i];
            if w & TAG == LEAF {
                sum += d as u64;
                leaves += 1;
                max = max.max(d);
            } else {
                let left = (w & 0xffff_ffff) as usize;
                stack.push((left, d + 1));
                stack.push((left + 1, d + 1));
            }
        }
        (sum, leaves, max)
    }

    /// Average leaf depth (Fig. 3 of the paper); 0 for an empty trie.
    pub fn avg_leaf_depth(&self) -> f64 {
        let (s, n, _) = self.depth_stats();
        if n == 0 { 0.0 } else { s as f64 / n as f64 }
    }

    fn reserve(&mut self, n: usize) {
        let n = n.max(MIN_NODES).next_multiple_of(2);
        if self.nodes.len() < n {
            self.nodes.resize(n, 0);
            self.parent.resize(n, NONE);
            self.owner.resize(n, NONE);
        }
    }

    fn bits<'a>(&self, key: &'a [u8]) -> Bits<'a> {
        self.p.bits(key)
    }

    /// Walks to the leaf `key` reaches.
    fn reach(&self, b: &Bits<'_>) -> usize {
        let mut i = 0usize;
        loop {
            let w = self.nodes[i];
            if w & TAG != INTERNAL {
                return i;
            }
            i = (w & 0xffff_ffff) as usize + b.bit((w >> 32) & POS_MASK) as usize;
        }
    }

    /// A free sibling pair; `true` in the second field if the array grew.
    fn alloc(&mut self) -> Result<(usize, bool)> {
        if let Some(a) = self.free.pop() {
            return Ok((a as usize, false));
        }
        let a = self.next;
        let mut grew = false;
        if a + 2 > self.nodes.len() {
            let n = self.nodes.len() * 2;
            if n > u32::MAX as usize {
                return Err(Error::CapacityExceeded("more than 2^31 trie nodes".into()));
            }
            self.reserve(n);
            grew = true;
        }
        self.next += 2;
        Ok((a, grew))
    }

    /// Moves node word `from` to `to` with its links (children's parent or leaf owner).
    fn move_node(&mut self, from: usize, to: usize) {
        let w = self.nodes[from];
        self.nodes[to] = w;
        if w & TAG == LEAF {
            let o = self.owner[from];
            self.owner[to] = o;
            self.leaf_of[o as usize] = to as u32;
        } else {
            self.owner[to] = NONE;
            let left = (w & 0xffff_ffff) as usize;
            self.parent[left] = to as u32;
            self.parent[left + 1] = to as u32;
        }
    }

    fn insert_inner(&mut self, key: &[u8], value: u64) -> Result<Option<Vec<(u32, u64)>>> {
        Self::check_item(key, value, self.p.vbits)?;
        let b = self.bits(key);
        let leaf = self.p.leaf(value, b.check);
        match self.store.insert(key, value) {
            Inserted::Existing(id, _) => {
                let c = self.leaf_of[id as usize] as usize;
                if self.nodes[c] == leaf {
                    return Ok(Some(Vec::new()));
                }
                self.nodes[c] = leaf;
                Ok(Some(vec![(c as u32, leaf)]))
            }
            Inserted::New(id) => {
                if self.leaf_of.len() <= id as usize {
                    self.leaf_of.resize(id as usize + 1, NONE);
                }
                if self.nodes[0] == 0 {
                    self.nodes[0] = leaf;
                    self.owner[0] = id;
                    self.leaf_of[id as usize] = 0;
                    return Ok(Some(vec![(0, leaf)]));
                }
                let l = self.reach(&b);
                let other = self.store.key(self.owner[l]);
                let ob = self.bits(other);
                let Some(pos) = b.first_difference(&ob) else {
                    unreachable!("distinct names have distinct bit strings")
                };
                if pos > POS_MASK {
                    self.store.remove(key);
                    return Err(Error::InvalidParameter("names differ only beyond bit 2^30".into()));
                }
                // Insertion point: first node on the path testing a later bit.
                let mut i = 0usize;
                loop {
                    let w = self.nodes[i];
                    if w & TAG != INTERNAL || (w >> 32) & POS_MASK > pos {
                        break;
                    }
                    i = (w & 0xffff_ffff) as usize + b.bit((w >> 32) & POS_MASK) as usize;
                }
                let (a, grew) = match self.alloc() {
                    Ok(x) => x,
                    Err(e) => {
                        self.store.remove(key);
                        return Err(e);
                    }
                };
                let side = b.bit(pos) as usize;
                self.move_node(i, a + 1 - side);
                self.nodes[a + side] = leaf;
                self.owner[a + side] = id;
                self.leaf_of[id as usize] = (a + side) as u32;
                self.parent[a] = i as u32;
                self.parent[a + 1] = i as u32;
                self.nodes[i] = INTERNAL | pos << 32 | a as u64;
                self.owner[i] = NONE;
                if grew {
                    return Ok(None);
                }
                let ws = vec![(a as u32, self.nodes[a]), (a as u32 + 1, self.nodes[a + 1]), (i as u32, self.nodes[i])];
                Ok(Some(ws))
            }
        }
    }

    fn writes_delta(&mut self, writes: Vec<(u32, u64)>) -> Delta {
        crate::lineage::bump(&mut self.seq);
        let w = Writes { seed: self.p.seed, nodes: self.nodes.len() as u32, writes };
        Delta(RawDelta::patch(self.table, self.seq, w))
    }

    fn image(&self) -> Image {
        Image { p: self.p, nodes: self.nodes.clone() }
    }
}

impl ControlLimits for Control {
    type Options = Options;
    const MAX_VALUE_BITS: u32 = 64;
    const MAX_KEY_LEN: usize = super::MAX_NAME_LEN;
}

impl ControlTable for Control {
    crate::engine::control_form!(lineage: table, keys: store, value_bits: p.vbits);

    fn insert(&mut self, key: &[u8], value: u64) -> Result<Delta> {
        match self.insert_inner(key, value)? {
            Some(w) => Ok(self.writes_delta(w)),
            None => {
                self.rebuilds += 1;
                crate::lineage::bump(&mut self.seq);
                Ok(Delta(RawDelta::replace(self.table, self.seq, self.image())))
            }
        }
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Delta>> {
        let Some((id, _)) = self.store.remove(key) else { return Ok(None) };
        let c = self.leaf_of[id as usize] as usize;
        self.leaf_of[id as usize] = NONE;
        self.owner[c] = NONE;
        if c == 0 {
            self.nodes[0] = 0;
            return Ok(Some(self.writes_delta(vec![(0, 0)])));
        }
        let par = self.parent[c] as usize;
        let a = c & !1;
        self.move_node(c ^ 1, par);
        self.nodes[a] = 0;
        self.nodes[a + 1] = 0;
        self.owner[a] = NONE;
        self.owner[a + 1] = NONE;
        self.parent[a] = NONE;
        self.parent[a + 1] = NONE;
        self.free.push(a as u32);
        let ws = vec![(par as u32, self.nodes[par]), (a as u32, 0), (a as u32 + 1, 0)];
        Ok(Some(self.writes_delta(ws)))
    }

    fn export(&self) -> Lookup {
        Lookup::from_image(self.image(), self.table, self.seq)
    }

    fn memory_bytes(&self) -> usize {
        self.store.memory_bytes()
            + self.nodes.capacity() * 8
            + (self.parent.capacity() + self.owner.capacity() + self.leaf_of.capacity() + self.free.capacity()) * 4
    }
}

crate::snapshot::persist!(Options { fingerprint_bits, check_bits, seed });
crate::snapshot::persist_codec!(Params);
crate::snapshot::control_snapshot!(
    Control, super::CONTROL_KIND, lineage: table, seq: seq,
    state { opts, p, store, nodes, parent, owner, leaf_of, free, next, rebuilds },
    check: Control::check_snapshot,
);

impl Control {
    /// Invariants of a loaded snapshot that later operations index by.
    fn check_snapshot(&self) -> Result<()> {
        use crate::snapshot::{check_ids, ensure};
        let n = self.nodes.len();
        ensure(self.parent.len() == n && self.owner.len() == n && self.next <= n && n >= MIN_NODES, || {
            "fpt node arrays".into()
        })?;
        check_ids("fpt parent", &self.parent, n, NONE)?;
        check_ids("fpt free list", &self.free, n, NONE)?;
        check_ids("fpt leaf", &self.leaf_of, n, NONE)?;
        check_ids("fpt owner", &self.owner, self.store.id_bound(), NONE)?;
        ensure(self.leaf_of.len() + 1 >= self.store.id_bound(), || "fpt key leaves".into())
    }
}
