//! Ludo's control-plane key arena: keys back to back, stable `u32` ids, and
//! each id's value next to its key span (one cache miss for both).
//!
//! Unlike [`crate::store::KeyStore`] it has no hash index of its own: the
//! source cuckoo table is the index (a key with hash `h` sits in bucket
//! `h0(h)` or `h1(h)`, or in the small fallback map), so an update probes
//! memory the maintenance structure needs anyway instead of a second table.

const DEAD: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Rec {
    off: u64,
    len: u32,
    value: u64,
}

/// Key arena with stable ids (removed ids are recycled; the arena is
/// compacted when more than half of it is garbage).
#[derive(Debug, Clone, Default)]
pub(crate) struct Keys {
    arena: Vec<u8>,
    recs: Vec<Rec>,
    free: Vec<u32>,
    live: usize,
    garbage: usize,
}

impl Keys {
    pub fn with_capacity(n: usize, avg_len: usize) -> Self {
        let recs = Vec::with_capacity(n);
        // SAFETY: as in `advised_vec`: the spare capacity is only used for its address range.
        let spare = unsafe { std::slice::from_raw_parts(recs.as_ptr() as *const std::mem::MaybeUninit<Rec>, n) };
        crate::mem::advise_hugepages(spare);
        Self { arena: Vec::with_capacity(n * avg_len), recs, ..Self::default() }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    /// One past the largest id ever handed out.
    pub fn id_bound(&self) -> usize {
        self.recs.len()
    }

    #[inline]
    pub fn key(&self, id: u32) -> &[u8] {
        let r = &self.recs[id as usize];
        &self.arena[r.off as usize..r.off as usize + r.len as usize]
    }

    #[inline]
    pub fn value(&self, id: u32) -> u64 {
        self.recs[id as usize].value
    }

    #[inline]
    pub fn set_value(&mut self, id: u32, v: u64) {
        self.recs[id as usize].value = v;
    }

    /// True if live id `id` holds `key`.
    #[inline]
    pub fn is(&self, id: u32, key: &[u8]) -> bool {
        let r = &self.recs[id as usize];
        r.len as usize == key.len() && &self.arena[r.off as usize..r.off as usize + r.len as usize] == key
    }

    /// Adds a key (the caller knows it is absent); returns its id.
    pub fn add(&mut self, key: &[u8], value: u64) -> u32 {
        let rec = Rec { off: self.arena.len() as u64, len: key.len() as u32, value };
        self.arena.extend_from_slice(key);
        self.live += 1;
        match self.free.pop() {
            Some(id) => {
                self.recs[id as usize] = rec;
                id
            }
            None => {
                self.recs.push(rec);
                (self.recs.len() - 1) as u32
            }
        }
    }

    /// Removes live id `id`; returns its value.
    pub fn remove(&mut self, id: u32) -> u64 {
        let r = &mut self.recs[id as usize];
        self.garbage += r.len as usize;
        r.len = DEAD;
        let v = r.value;
        self.free.push(id);
        self.live -= 1;
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
        v
    }

    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for r in self.recs.iter_mut() {
            if r.len != DEAD {
                let o = r.off as usize;
                r.off = arena.len() as u64;
                arena.extend_from_slice(&self.arena[o..o + r.len as usize]);
            }
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// True if `id` names a live key.
    pub fn is_live(&self, id: u32) -> bool {
        self.recs.get(id as usize).is_some_and(|r| r.len != DEAD)
    }

    /// Checks a loaded arena (control-form snapshots).
    pub fn check(&self) -> crate::Result<()> {
        use crate::snapshot::ensure;
        let mut dead = vec![false; self.recs.len()];
        let mut live = 0;
        for (i, r) in self.recs.iter().enumerate() {
            if r.len == DEAD {
                dead[i] = true;
            } else {
                live += 1;
                let end = r.off.checked_add(r.len as u64);
                ensure(end.is_some_and(|e| e <= self.arena.len() as u64), || {
                    format!("ludo key {i} lies outside the arena")
                })?;
            }
        }
        ensure(live == self.live && live + self.free.len() == self.recs.len(), || "ludo key count".into())?;
        for &f in &self.free {
            let ok = (f as usize) < dead.len() && std::mem::replace(&mut dead[f as usize], false);
            ensure(ok, || format!("ludo free id {f} is live or repeated"))?;
        }
        ensure(self.garbage <= self.arena.len() && self.recs.len() < DEAD as usize, || "ludo arena counters".into())
    }

    /// Live ids in increasing order (a full traversal: counted in [`crate::work`]).
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        crate::work::hashed(self.live);
        (0..self.recs.len() as u32).filter(|&i| self.recs[i as usize].len != DEAD)
    }

    /// Live `(key, value)` pairs in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.ids().map(|i| (self.key(i), self.value(i)))
    }

    pub fn memory_bytes(&self) -> usize {
        self.arena.capacity() + self.recs.capacity() * std::mem::size_of::<Rec>() + self.free.capacity() * 4
    }
}

crate::snapshot::persist!(Rec { off, len, value });
crate::snapshot::persist!(Keys { arena, recs, free, live, garbage });
