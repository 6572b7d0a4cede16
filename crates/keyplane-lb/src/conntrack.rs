//! The control side's record of connections (thesis §5.4: the state the
//! control plane keeps so that pool changes preserve each connection's
//! backend), with a hard bound.
//!
//! **Eviction.** At most `capacity` states. When a new state arrives at a
//! full table, the oldest *unconfirmed* state (a SYN or first UDP packet
//! whose flow never sent a second packet, e.g. a spoofed SYN) is evicted;
//! only when none is left, the oldest *confirmed* one. Every eviction is
//! counted. An evicted state keeps its backend until the next pool change
//! of its VIP (lookups are a pure function of the plane); after that it may
//! move. A SYN flood therefore evicts only other flood entries while
//! established (confirmed) connections stay tracked.
//!
//! **Removing a backend** is O(1): its states are marked gone (every query
//! ignores them from then on, [`ConnTable::len`] no longer counts them) and
//! leave the map in bounded slices ([`ConnTable::sweep`], at most `budget`
//! queue positions per call), so a removal at millions of states never holds
//! the control thread for long.

use keyplane::lb::{Backend, StateKey, VipId};
use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy)]
struct Entry {
    backend: Backend,
    confirmed: bool,
    /// Stamp of this entry's current queue position (lazy deletion).
    stamp: u64,
    /// Stamp at insertion: a backend removal at stamp `t` makes its entries
    /// born before `t` gone.
    born: u64,
}

/// What one [`ConnTable::sweep`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Queue positions looked at (the step's work: at most its budget).
    pub scanned: usize,
    /// Gone states removed from the map.
    pub removed: usize,
    /// Gone states still in the map (0: every removal is swept).
    pub pending: usize,
}

/// Bounded connection table with two FIFO queues (see the module docs).
#[derive(Debug)]
pub struct ConnTable {
    map: HashMap<(VipId, StateKey), Entry>,
    fresh: VecDeque<(u64, VipId, StateKey)>,
    confirmed: VecDeque<(u64, VipId, StateKey)>,
    capacity: usize,
    stamp: u64,
    /// States evicted so far.
    pub evictions: u64,
    /// Live states per (VIP, backend).
    per: HashMap<(VipId, Backend), usize>,
    /// Removed backends: their states born before the stamp are gone.
    gone: HashMap<(VipId, Backend), u64>,
    /// Gone states still in the map.
    pending: usize,
    /// Sweep position: (queue, index; 0 = fresh, 1 = confirmed).
    cursor: (usize, usize),
}

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// A new state.
    New,
    /// The state was known (a retransmitted SYN, a duplicate UDP report).
    Known,
}

impl ConnTable {
    /// A table for at most `capacity` states.
    pub fn new(capacity: usize) -> Self {
        Self {
            map: HashMap::new(),
            fresh: VecDeque::new(),
            confirmed: VecDeque::new(),
            capacity: capacity.max(1),
            stamp: 0,
            evictions: 0,
            per: HashMap::new(),
            gone: HashMap::new(),
            pending: 0,
            cursor: (0, 0),
        }
    }

    /// States tracked (gone states not swept yet are not counted).
    pub fn len(&self) -> usize {
        self.map.len() - self.pending
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn is_gone(&self, vip: VipId, e: &Entry) -> bool {
        !self.gone.is_empty() && self.gone.get(&(vip, e.backend)).is_some_and(|&t| e.born < t)
    }

    /// Takes a state out of the map and the counts; returns it and whether
    /// it was gone.
    fn take(&mut self, vip: VipId, key: &StateKey) -> Option<(Entry, bool)> {
        let e = self.map.remove(&(vip, *key))?;
        let gone = self.is_gone(vip, &e);
        if gone {
            self.pending -= 1;
        } else if let Some(n) = self.per.get_mut(&(vip, e.backend)) {
            *n -= 1;
            if *n == 0 {
                self.per.remove(&(vip, e.backend));
            }
        }
        Some((e, gone))
    }

    /// The live entry of a state; a gone one met on the way leaves the map.
    fn live_mut(&mut self, vip: VipId, key: &StateKey) -> Option<&mut Entry> {
        let gone = self.is_gone(vip, self.map.get(&(vip, *key))?);
        if gone {
            self.take(vip, key);
            return None;
        }
        self.map.get_mut(&(vip, *key))
    }
    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The backend of a tracked state.
    pub fn get(&self, vip: VipId, key: &StateKey) -> Option<Backend> {
        self.map.get(&(vip, *key)).filter(|e| !self.is_gone(vip, e)).map(|e| e.backend)
    }

    /// Records a state; `evicted` receives the state evicted to make room.
    pub fn insert(
        &mut self,
        vip: VipId,
        key: StateKey,
        backend: Backend,
        evicted: &mut Vec<(VipId, StateKey)>,
    ) -> Inserted {
        if self.live_mut(vip, &key).is_some() {
            return Inserted::Known;
        }
        while self.map.len() >= self.capacity {
            match self.pop_oldest() {
                Some(Some(v)) => {
                    self.evictions += 1;
                    evicted.push(v);
                }
                Some(None) => {}
                None => break,
            }
        }
        self.stamp += 1;
        self.map.insert((vip, key), Entry { backend, confirmed: false, stamp: self.stamp, born: self.stamp });
        *self.per.entry((vip, backend)).or_insert(0) += 1;
        self.fresh.push_back((self.stamp, vip, key));
        self.compact();
        Inserted::New
    }

    /// Takes the oldest state out: `Some(Some(state))` evicted, `Some(None)`
    /// a gone state left (room made, no eviction), `None` nothing left.
    fn pop_oldest(&mut self) -> Option<Option<(VipId, StateKey)>> {
        for q in 0..2 {
            loop {
                let front = if q == 0 { self.fresh.pop_front() } else { self.confirmed.pop_front() };
                let Some((s, v, k)) = front else { break };
                if self.cursor.0 == q {
                    self.cursor.1 = self.cursor.1.saturating_sub(1);
                }
                if self.map.get(&(v, k)).is_some_and(|e| e.stamp == s) {
                    // A gone state leaves without counting as an eviction.
                    let (_, gone) = self.take(v, &k)?;
                    return Some((!gone).then_some((v, k)));
                }
            }
        }
        None
    }

    /// Marks a state confirmed (its flow sent a second packet).
    pub fn confirm(&mut self, vip: VipId, key: &StateKey) -> bool {
        self.stamp += 1;
        let s = self.stamp;
        match self.live_mut(vip, key) {
            Some(e) if !e.confirmed => {
                e.confirmed = true;
                e.stamp = s;
                self.confirmed.push_back((s, vip, *key));
                self.compact();
                true
            }
            _ => false,
        }
    }

    /// Forgets a state; returns whether it was tracked.
    pub fn remove(&mut self, vip: VipId, key: &StateKey) -> bool {
        matches!(self.take(vip, key), Some((_, false)))
    }

    /// Forgets every state of a backend of a VIP (it left the pool), in
    /// O(1): they are gone for every query at once and leave the map in
    /// later [`Self::sweep`]s. Returns how many.
    pub fn remove_backend(&mut self, vip: VipId, backend: Backend) -> usize {
        let n = self.per.remove(&(vip, backend)).unwrap_or(0);
        self.stamp += 1;
        self.gone.insert((vip, backend), self.stamp);
        self.pending += n;
        if self.pending == 0 {
            self.gone.clear();
        }
        n
    }

    /// Gone states still in the map (removed backends not swept yet).
    pub fn sweep_pending(&self) -> usize {
        self.pending
    }

    /// Removes gone states from the map, looking at no more than `budget`
    /// queue positions (every state sits at one of them), resuming where the
    /// last sweep stopped; a whole pass over the queues finds them all.
    pub fn sweep(&mut self, budget: usize) -> Swept {
        let mut r = Swept::default();
        let mut idle = 0usize;
        while self.pending > 0 && r.scanned < budget {
            let (q, i) = self.cursor;
            let queue = if q == 0 { &self.fresh } else { &self.confirmed };
            r.scanned += 1;
            idle += 1;
            if idle > self.fresh.len() + self.confirmed.len() + 2 {
                debug_assert!(false, "{} gone states counted but none found", self.pending);
                self.pending = 0;
                break;
            }
            let Some(&(s, v, k)) = queue.get(i) else {
                self.cursor = (1 - q, 0);
                continue;
            };
            self.cursor.1 += 1;
            let gone = self.map.get(&(v, k)).is_some_and(|e| e.stamp == s && self.is_gone(v, e));
            if gone {
                self.take(v, &k);
                r.removed += 1;
                idle = 0;
            }
        }
        if self.pending == 0 {
            self.gone.clear();
        }
        r.pending = self.pending;
        r
    }

    /// Forgets every state of a VIP.
    pub fn remove_vip(&mut self, vip: VipId) {
        let gone = std::mem::take(&mut self.gone);
        let mut pending = self.pending;
        self.map.retain(|(v, _), e| {
            let keep = *v != vip;
            if !keep && gone.get(&(*v, e.backend)).is_some_and(|&t| e.born < t) {
                pending -= 1;
            }
            keep
        });
        self.pending = pending;
        self.gone = gone;
        self.gone.retain(|(v, _), _| *v != vip);
        self.per.retain(|(v, _), _| *v != vip);
        if self.pending == 0 {
            self.gone.clear();
        }
    }

    /// Drops stale queue entries once the queues hold twice the states.
    fn compact(&mut self) {
        if self.fresh.len() + self.confirmed.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.fresh.retain(|(s, v, k)| map.get(&(*v, *k)).is_some_and(|e| e.stamp == *s));
            self.confirmed.retain(|(s, v, k)| map.get(&(*v, *k)).is_some_and(|e| e.stamp == *s));
            self.cursor = (0, 0);
        }
    }

    /// Heap bytes (map slots and queues; estimated from capacities).
    pub fn memory_bytes(&self) -> usize {
        let slot = std::mem::size_of::<((VipId, StateKey), Entry)>() + 1;
        let q = std::mem::size_of::<(u64, VipId, StateKey)>();
        self.map.capacity() * slot
            + (self.fresh.capacity() + self.confirmed.capacity()) * q
            + (self.per.capacity() + self.gone.capacity()) * 64
    }

    /// Upper bound of [`Self::memory_bytes`] for a table of `capacity`
    /// states (hash map at its worst load factor, queues at twice the states
    /// plus the compaction slack, rounded up to powers of two).
    ///
    /// The per-(VIP, backend) counts and the removed backends being swept
    /// are charged [`Self::BYTES_PER_VIP`] a VIP: at most 512 backends a
    /// VIP (`2^12 / 8` Dcodes) in each of the two maps, at their worst load.
    pub fn memory_bound(capacity: usize, vips: usize) -> usize {
        let slot = std::mem::size_of::<((VipId, StateKey), Entry)>() + 1;
        let q = std::mem::size_of::<(u64, VipId, StateKey)>();
        let map_slots = (capacity * 8 / 7 + 1).next_power_of_two();
        map_slots * slot + 2 * (2 * capacity + 1024 + 1).next_power_of_two() * q + vips * Self::BYTES_PER_VIP
    }

    /// Bound on the backend maps' bytes per VIP (see [`Self::memory_bound`]).
    pub const BYTES_PER_VIP: usize = 2 * 1024 * 64;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(i: u32) -> StateKey {
        StateKey::four_tuple(Ipv4Addr::from(0xc612_0000 + i).into(), (i % 60000) as u16, 80, 6)
    }

    #[test]
    fn flood_evicts_unconfirmed_before_confirmed() {
        let b = Backend::new(Ipv4Addr::new(198, 18, 0, 11), 80);
        let mut t = ConnTable::new(100);
        let mut ev = Vec::new();
        for i in 0..50 {
            assert_eq!(t.insert(0, key(i), b, &mut ev), Inserted::New);
            assert!(t.confirm(0, &key(i)));
        }
        assert_eq!(t.insert(0, key(3), b, &mut ev), Inserted::Known);
        // A flood of 10,000 never-confirmed states.
        for i in 1000..11_000 {
            t.insert(0, key(i), b, &mut ev);
            assert!(t.len() <= 100);
        }
        assert_eq!(t.evictions, 10_000 - 50);
        assert_eq!(ev.len(), 10_000 - 50);
        for i in 0..50 {
            assert_eq!(t.get(0, &key(i)), Some(b), "established {i} evicted");
        }
        assert!(ev.iter().all(|(_, k)| (0..50).all(|i| key(i) != *k)));
        assert!(
            t.memory_bytes() <= ConnTable::memory_bound(100, 1),
            "{} > {}",
            t.memory_bytes(),
            ConnTable::memory_bound(100, 1)
        );
        // Confirmed ones go when nothing else is left, oldest first.
        let mut t2 = ConnTable::new(2);
        for i in 0..2 {
            t2.insert(0, key(i), b, &mut ev);
            t2.confirm(0, &key(i));
        }
        ev.clear();
        t2.insert(0, key(9), b, &mut ev);
        assert_eq!(ev, vec![(0, key(0))]);
        assert_eq!(t2.remove_backend(0, b), 2);
        assert!(t2.is_empty());
    }

    /// Removing a backend is O(1) and its states leave in sweeps of at most
    /// `budget` queue positions, a pass over the queues in all, interleaved
    /// with inserts, confirmations, evictions and the same backend coming
    /// back; the other states are untouched.
    #[test]
    fn backend_removal_is_swept_in_bounded_steps() {
        let b = |i: u8| Backend::new(Ipv4Addr::new(198, 18, 0, 10 + i), 80);
        let mut t = ConnTable::new(30_000);
        let mut ev = Vec::new();
        for i in 0..20_000 {
            t.insert(0, key(i), b((i % 4) as u8), &mut ev);
            if i % 3 == 0 {
                t.confirm(0, &key(i));
            }
        }
        assert_eq!(t.remove_backend(0, b(0)), 5_000);
        assert_eq!(t.len(), 15_000);
        assert_eq!(t.sweep_pending(), 5_000);
        assert_eq!(t.get(0, &key(0)), None);
        assert_eq!(t.get(0, &key(1)), Some(b(1)));
        // A gone state is not known: a new report of it starts afresh.
        assert_eq!(t.insert(0, key(4), b(1), &mut ev), Inserted::New);
        assert_eq!(t.get(0, &key(4)), Some(b(1)));
        assert!(!t.remove(0, &key(8)), "a gone state is not tracked");
        // The backend comes back: its new states are live.
        t.insert(0, key(100_000), b(0), &mut ev);
        let budget = 1_000;
        let queue_positions = 20_000 + 20_000 / 3 + 10;
        let mut steps = 0;
        let mut next = 100_001;
        while t.sweep_pending() > 0 {
            let r = t.sweep(budget);
            assert!(r.scanned <= budget);
            assert_eq!(r.pending, t.sweep_pending());
            steps += 1;
            for _ in 0..20 {
                t.insert(0, key(next), b((next % 4) as u8), &mut ev);
                t.confirm(0, &key(next - 1));
                next += 1;
            }
            assert!(steps <= queue_positions / budget + 4, "{steps} steps");
        }
        assert_eq!(t.get(0, &key(100_000)), Some(b(0)));
        assert_eq!(t.map.len(), t.len(), "every gone state left the map");
        for i in 0..20_000 {
            let want = if i == 4 {
                Some(b(1))
            } else if i % 4 == 0 {
                None
            } else {
                Some(b((i % 4) as u8))
            };
            assert_eq!(t.get(0, &key(i)), want);
        }
        assert_eq!(t.evictions, 0);
        // Evictions never count a gone state.
        let mut t = ConnTable::new(10);
        for i in 0..10 {
            t.insert(0, key(i), b(0), &mut ev);
        }
        t.remove_backend(0, b(0));
        ev.clear();
        for i in 10..20 {
            t.insert(0, key(i), b(1), &mut ev);
        }
        assert!(ev.is_empty() && t.evictions == 0 && t.len() == 10 && t.sweep_pending() == 0);
    }
}
