//! The control plane's full key/value state, shared by every structure.
//!
//! Keys of any length live back to back in one arena (no allocation per key);
//! each live key has a stable slot id (`u32`) that structures use as their
//! edge / entry id. Removed ids are recycled; the arena is compacted when more
//! than half of it is garbage. Each key's 32-bit index hash is kept next to
//! its span (in what would be padding), so the index grows and a snapshot
//! loads ([`crate::snapshot`]) without hashing any key again.

use crate::hash::hash64;
use hashbrown::HashTable;

const STORE_SEED: u64 = 0x73_746f_7265; // "store": independent of any structure's seeds
const DEAD: u32 = u32::MAX;

/// Where a key lives in the arena, and its 32-bit index hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    off: u64,
    len: u32,
    h: u32,
}

/// The index's 64-bit hash from the 32 bits kept per key: the low bits
/// (bucket) depend on the low hash bits, the top 7 (hashbrown's tag) on all.
#[inline(always)]
fn spread(h: u32) -> u64 {
    (h as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Key arena plus id map.
#[derive(Debug, Clone, Default)]
pub struct KeyStore {
    arena: Vec<u8>,
    // (offset, length, index hash) per id, together: one cache miss per key
    // compare.
    spans: Vec<Span>,
    values: Vec<u64>,
    map: HashTable<u32>,
    free: Vec<u32>,
    live: usize,
    garbage: usize,
}

/// Outcome of [`KeyStore::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// A new key got this id.
    New(u32),
    /// The key existed with this id and old value.
    Existing(u32, u64),
}

impl Inserted {}

impl KeyStore {
    /// Empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empty store with room for `n` keys of about `avg_len` bytes.
    pub fn with_capacity(n: usize, avg_len: usize) -> Self {
        Self {
            arena: Vec::with_capacity(n * avg_len),
            spans: Vec::with_capacity(n),
            values: Vec::with_capacity(n),
            map: HashTable::with_capacity(n),
            ..Self::default()
        }
    }

    #[inline]
    fn h(key: &[u8]) -> u32 {
        crate::work::hashed(1);
        hash64(key, STORE_SEED) as u32
    }

    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.live
    }
    /// True when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
    /// One past the largest id ever handed out (ids are `< id_bound()`).
    pub fn id_bound(&self) -> usize {
        self.spans.len()
    }
    /// True if `id` names a live key.
    #[inline]
    pub fn is_live(&self, id: u32) -> bool {
        self.spans.get(id as usize).is_some_and(|s| s.len != DEAD)
    }
    /// Key bytes of a live id.
    #[inline]
    pub fn key(&self, id: u32) -> &[u8] {
        let s = self.spans[id as usize];
        &self.arena[s.off as usize..s.off as usize + s.len as usize]
    }
    /// Value of a live id.
    #[inline]
    pub fn value(&self, id: u32) -> u64 {
        self.values[id as usize]
    }
    /// Changes the value of a live id.
    #[inline]
    pub fn set_value(&mut self, id: u32, v: u64) {
        self.values[id as usize] = v;
    }

    /// Id of a key, if present.
    pub fn find(&self, key: &[u8]) -> Option<u32> {
        let h = Self::h(key);
        self.map.find(spread(h), |&id| self.key_eq(id, key)).copied()
    }

    fn key_eq(&self, id: u32, key: &[u8]) -> bool {
        span_eq(&self.arena, self.spans[id as usize], key)
    }

    /// Value of a key, if present.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.find(key).map(|id| self.values[id as usize])
    }

    /// Room for `additional` more keys (of the current average length) in
    /// the id-indexed vectors, so that inserts up to a table's known
    /// capacity do not copy them (a vector at exactly its length after a
    /// bulk build would double, copying every span and value, on the first
    /// insert). The id map grows as before.
    pub fn reserve(&mut self, additional: usize) {
        let avg = if self.spans.is_empty() { 8 } else { self.arena.len().div_ceil(self.spans.len()) };
        self.arena.reserve(additional.saturating_mul(avg));
        self.spans.reserve(additional);
        self.values.reserve(additional);
    }

    /// Inserts or overwrites. Keys longer than `u32::MAX - 1` bytes are the
    /// caller's to refuse (no network key comes close).
    pub fn insert(&mut self, key: &[u8], value: u64) -> Inserted {
        let h = Self::h(key);
        if let Some(&id) = self.map.find(spread(h), |&id| self.key_eq(id, key)) {
            let old = std::mem::replace(&mut self.values[id as usize], value);
            return Inserted::Existing(id, old);
        }
        let off = self.arena.len() as u64;
        self.arena.extend_from_slice(key);
        let span = Span { off, len: key.len() as u32, h };
        let id = match self.free.pop() {
            Some(id) => {
                self.spans[id as usize] = span;
                self.values[id as usize] = value;
                id
            }
            None => {
                let id = self.spans.len() as u32;
                self.spans.push(span);
                self.values.push(value);
                id
            }
        };
        let spans = &self.spans;
        self.map.insert_unique(spread(h), id, |&i| spread(spans[i as usize].h));
        self.live += 1;
        Inserted::New(id)
    }

    /// Removes a key; returns its id and value.
    pub fn remove(&mut self, key: &[u8]) -> Option<(u32, u64)> {
        let h = Self::h(key);
        let (arena, spans) = (&self.arena, &self.spans);
        let entry = self.map.find_entry(spread(h), |&id| span_eq(arena, spans[id as usize], key)).ok()?;
        let (id, _) = entry.remove();
        self.garbage += self.spans[id as usize].len as usize;
        self.spans[id as usize].len = DEAD;
        self.free.push(id);
        self.live -= 1;
        let v = self.values[id as usize];
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
        Some((id, v))
    }

    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for span in self.spans.iter_mut() {
            let (o, l) = (span.off, span.len);
            if l != DEAD {
                span.off = arena.len() as u64;
                arena.extend_from_slice(&self.arena[o as usize..o as usize + l as usize]);
            }
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Live ids in increasing order. A full traversal: counts every live
    /// key in [`crate::work`] (the callers, rebuilds and exports, hash them).
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        crate::work::hashed(self.live);
        (0..self.spans.len() as u32).filter(|&i| self.spans[i as usize].len != DEAD)
    }

    /// Live ids without counting work (for checks that hash nothing).
    pub(crate) fn live_ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.spans.len() as u32).filter(|&i| self.spans[i as usize].len != DEAD)
    }

    /// Live `(id, key, value)` triples in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8], u64)> + '_ {
        self.ids().map(|i| (i, self.key(i), self.values[i as usize]))
    }

    /// Heap bytes held (arena, per-key arrays, hash index).
    pub fn memory_bytes(&self) -> usize {
        self.arena.capacity()
            + self.spans.capacity() * 16
            + self.values.capacity() * 8
            + self.free.capacity() * 4
            + self.map.capacity() * (4 + 1)
    }
}

#[inline]
fn span_eq(arena: &[u8], s: Span, key: &[u8]) -> bool {
    let (o, l) = (s.off, s.len);
    l as usize == key.len() && l != DEAD && &arena[o as usize..o as usize + l as usize] == key
}

/// Arena, spans (with the index hashes), values, free list and counters
/// as they are; the index is rebuilt from the stored hashes (no key is
/// hashed) and every invariant is checked.
impl crate::snapshot::Persist for KeyStore {
    fn put(&self, w: &mut crate::wire::Writer) {
        w.u64(self.arena.len() as u64).raw(&self.arena);
        w.u64(self.spans.len() as u64);
        for s in &self.spans {
            w.u64(s.off).u32(s.len).u32(s.h);
        }
        w.u64s(&self.values).u32s(&self.free).u64(self.live as u64).u64(self.garbage as u64);
    }

    fn take(r: &mut crate::wire::Reader<'_>) -> crate::Result<Self> {
        use crate::snapshot::ensure;
        let n = r.count(1)?;
        let arena = r.raw(n)?.to_vec();
        let n = r.count(16)?;
        let mut spans = Vec::with_capacity(n);
        for _ in 0..n {
            spans.push(Span { off: r.u64()?, len: r.u32()?, h: r.u32()? });
        }
        let values = r.u64s()?;
        let free = r.u32s()?;
        let live = r.u64()? as usize;
        let garbage = r.u64()? as usize;
        ensure(values.len() == spans.len(), || "key store: one value per id".into())?;
        ensure(spans.len() < DEAD as usize, || "key store: too many ids".into())?;
        let mut dead = vec![false; spans.len()];
        let mut live_n = 0;
        for (i, s) in spans.iter().enumerate() {
            if s.len == DEAD {
                dead[i] = true;
            } else {
                live_n += 1;
                ensure(s.off.checked_add(s.len as u64).is_some_and(|e| e <= arena.len() as u64), || {
                    format!("key store: key {i} lies outside the arena")
                })?;
            }
        }
        ensure(live_n == live && live + free.len() == spans.len(), || "key store: live count".into())?;
        for &f in &free {
            let ok = (f as usize) < dead.len() && std::mem::replace(&mut dead[f as usize], false);
            ensure(ok, || format!("key store: free id {f} is live or repeated"))?;
        }
        ensure(garbage <= arena.len(), || "key store: garbage count".into())?;
        let mut map = HashTable::with_capacity(live);
        for (id, s) in spans.iter().enumerate() {
            if s.len == DEAD {
                continue;
            }
            let key = &arena[s.off as usize..s.off as usize + s.len as usize];
            let h = spread(s.h);
            match map.entry(h, |&j: &u32| span_eq(&arena, spans[j as usize], key), |&j| spread(spans[j as usize].h)) {
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert(id as u32);
                }
                hashbrown::hash_table::Entry::Occupied(_) => {
                    return Err(crate::Error::Corrupt(format!("key store: key {id} is stored twice")));
                }
            }
        }
        Ok(KeyStore { arena, spans, values, map, free, live, garbage })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_hashmap() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut s = KeyStore::new();
        let mut o: HashMap<Vec<u8>, u64> = HashMap::new();
        for step in 0..50_000 {
            let k: Vec<u8> = (0..rng.gen_range(0..12)).map(|_| rng.gen_range(0..4u8)).collect();
            match rng.gen_range(0..3) {
                0 | 1 => {
                    let v = rng.r#gen();
                    let r = s.insert(&k, v);
                    match o.insert(k.clone(), v) {
                        Some(old) => assert!(matches!(r, Inserted::Existing(_, x) if x == old)),
                        None => assert!(matches!(r, Inserted::New(_))),
                    }
                }
                _ => assert_eq!(s.remove(&k).map(|x| x.1), o.remove(&k)),
            }
            assert_eq!(s.len(), o.len());
            if step % 5000 == 0 {
                for (k, v) in &o {
                    assert_eq!(s.get(k), Some(*v));
                    assert_eq!(s.key(s.find(k).unwrap()), &k[..]);
                }
                assert_eq!(s.iter().count(), o.len());
            }
        }
    }
}
