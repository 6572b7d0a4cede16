//! The collision table: full names for fingerprint collisions, bucket
//! overflows and "not stored" markers (§5.1, §6.2).

use crate::error::Result;
use crate::wire::{Reader, Writer};
use hashbrown::HashTable;

/// Value word of a "not stored" marker (FHT values are at most 63 bits wide).
const MARKER: u64 = u64::MAX;

/// One CT entry (24 bytes plus the name): a full name and either a value or
/// the "not stored" marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CtEntry {
    pub name: Box<[u8]>,
    raw: u64,
}

impl CtEntry {
    /// `None`: the name is known not to be stored here (default port).
    #[inline]
    pub fn val(&self) -> Option<u64> {
        (self.raw != MARKER).then_some(self.raw)
    }
}

/// Collision table keyed by the structure's own name hash (one hash per
/// lookup; rehashing recomputes it from the name and the seed).
#[derive(Debug, Clone)]
pub(crate) struct Ct {
    t: HashTable<CtEntry>,
    seed: u64,
    name_bytes: usize,
    /// Lookup-side prefilter: one bit per hash bucket of the entries' name
    /// hashes (8–32 bits per entry). A clear bit means "not in the CT",
    /// which saves the hash-table probe on most lookups. `None` until
    /// [`Ct::seal`]: then every name may be present.
    hint: Option<Box<[u64]>>,
}

impl Ct {
    pub fn new(seed: u64) -> Self {
        Self { t: HashTable::new(), seed, name_bytes: 0, hint: None }
    }

    #[inline(always)]
    fn hint_bit(h: u64, bits: usize) -> usize {
        (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & (bits - 1)
    }

    /// Makes the prefilter cover the current entries (lookup forms call it
    /// before publishing a CT). `put` keeps an existing prefilter current
    /// and deletes leave stale bits (false "maybe"s only), so this rebuilds
    /// only when there is none or it has grown too dense (under 8 bits per
    /// entry): publishing a changed CT does not rehash every name.
    pub fn seal(&mut self) {
        if self.hint.as_ref().is_some_and(|h| h.len() * 64 >= self.t.len() * 8) {
            return;
        }
        let bits = (self.t.len() * 16).next_power_of_two().max(512);
        let mut hint = vec![0u64; bits / 64].into_boxed_slice();
        for e in self.t.iter() {
            let b = Self::hint_bit(crate::hash::hash64(&e.name, self.seed), bits);
            hint[b / 64] |= 1 << (b % 64);
        }
        self.hint = Some(hint);
    }

    /// False only if no entry has hash `h` (then `get` would miss).
    #[inline(always)]
    pub fn may_contain(&self, h: u64) -> bool {
        match &self.hint {
            Some(hint) => {
                let b = Self::hint_bit(h, hint.len() * 64);
                hint[b / 64] >> (b % 64) & 1 != 0
            }
            None => !self.t.is_empty(),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.t.len()
    }

    #[inline]
    pub fn get(&self, h: u64, name: &[u8]) -> Option<&CtEntry> {
        self.t.find(h, |e| &*e.name == name)
    }

    pub fn put(&mut self, h: u64, name: &[u8], val: Option<u64>) {
        if let Some(hint) = &mut self.hint {
            let b = Self::hint_bit(h, hint.len() * 64);
            hint[b / 64] |= 1 << (b % 64);
        }
        let raw = val.unwrap_or(MARKER);
        match self.t.find_mut(h, |e| &*e.name == name) {
            Some(e) => e.raw = raw,
            None => {
                self.name_bytes += name.len();
                let seed = self.seed;
                self.t.insert_unique(h, CtEntry { name: name.into(), raw }, |e| crate::hash::hash64(&e.name, seed));
            }
        }
    }

    pub fn del(&mut self, h: u64, name: &[u8]) -> bool {
        match self.t.find_entry(h, |e| &*e.name == name) {
            Ok(e) => {
                let (e, _) = e.remove();
                self.name_bytes -= e.name.len();
                true
            }
            Err(_) => false,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &CtEntry> + '_ {
        self.t.iter()
    }

    /// Heap bytes: table slots, control bytes and the names.
    pub fn memory_bytes(&self) -> usize {
        self.t.capacity() * (std::mem::size_of::<CtEntry>() + 1)
            + self.name_bytes
            + self.hint.as_ref().map_or(0, |h| h.len() * 8)
    }

    /// Entries as a sorted list (deterministic encoding).
    pub fn sorted(&self) -> Vec<(&[u8], Option<u64>)> {
        let mut v: Vec<(&[u8], Option<u64>)> = self.t.iter().map(|e| (&*e.name, e.val())).collect();
        v.sort_unstable();
        v
    }
}

pub(crate) fn encode_val(w: &mut Writer, v: Option<u64>) {
    match v {
        None => {
            w.u8(0);
        }
        Some(v) => {
            w.u8(1).varint(v);
        }
    }
}

pub(crate) fn decode_val(r: &mut Reader<'_>, vbits: u32) -> Result<Option<u64>> {
    match r.u8()? {
        0 => Ok(None),
        1 => {
            let v = r.varint()?;
            Reader::ensure(v & !crate::mask(vbits) == 0, || format!("CT value {v:#x} wider than {vbits} bits"))?;
            Ok(Some(v))
        }
        t => Err(crate::Error::Corrupt(format!("CT value tag {t}"))),
    }
}

/// Entries with their name hashes (computed on save: the collision table
/// keeps no hashes; it holds only the few names that collided or
/// overflowed), so loading hashes nothing.
impl crate::snapshot::Persist for Ct {
    fn put(&self, w: &mut Writer) {
        w.u64(self.seed).u64(self.t.len() as u64);
        crate::work::hashed(self.t.len());
        for e in self.t.iter() {
            w.u64(crate::hash::hash64(&e.name, self.seed)).u64(e.raw).bytes(&e.name);
        }
        crate::snapshot::Persist::put(&self.hint, w);
    }

    fn take(r: &mut Reader<'_>) -> Result<Self> {
        let seed = r.u64()?;
        let n = r.count(20)?;
        let mut ct = Ct { t: HashTable::with_capacity(n), seed, name_bytes: 0, hint: None };
        for _ in 0..n {
            let (h, raw, name) = (r.u64()?, r.u64()?, r.bytes()?);
            crate::snapshot::ensure(ct.get(h, name).is_none(), || "collision table holds a name twice".into())?;
            ct.name_bytes += name.len();
            // The capacity covers every entry: the hasher never runs here.
            ct.t.insert_unique(h, CtEntry { name: name.into(), raw }, |e| crate::hash::hash64(&e.name, seed));
        }
        ct.hint = crate::snapshot::Persist::take(r)?;
        if let Some(hint) = &ct.hint {
            crate::snapshot::ensure(hint.len().is_power_of_two() && hint.len() >= 8, || "collision table hint".into())?;
        }
        Ok(ct)
    }
}

impl Ct {
    /// The name hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}
