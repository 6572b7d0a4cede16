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

use keyplane::lb::{Backend, StateKey, VipId};
use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy)]
struct Entry {
    backend: Backend,
    confirmed: bool,
    /// Stamp of this entry's current queue position (lazy deletion).
    stamp: u64,
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
        }
    }

    /// States tracked.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The backend of a tracked state.
    pub fn get(&self, vip: VipId, key: &StateKey) -> Option<Backend> {
        self.map.get(&(vip, *key)).map(|e| e.backend)
    }

    /// Records a state; `evicted` receives the state evicted to make room.
    pub fn insert(
        &mut self,
        vip: VipId,
        key: StateKey,
        backend: Backend,
        evicted: &mut Vec<(VipId, StateKey)>,
    ) -> Inserted {
        if self.map.contains_key(&(vip, key)) {
            return Inserted::Known;
        }
        while self.map.len() >= self.capacity {
            match self.pop_oldest() {
                Some(v) => {
                    self.evictions += 1;
                    evicted.push(v);
                }
                None => break,
            }
        }
        self.stamp += 1;
        self.map.insert((vip, key), Entry { backend, confirmed: false, stamp: self.stamp });
        self.fresh.push_back((self.stamp, vip, key));
        self.compact();
        Inserted::New
    }

    fn pop_oldest(&mut self) -> Option<(VipId, StateKey)> {
        for q in 0..2 {
            loop {
                let front = if q == 0 { self.fresh.pop_front() } else { self.confirmed.pop_front() };
                let Some((s, v, k)) = front else { break };
                if self.map.get(&(v, k)).is_some_and(|e| e.stamp == s) {
                    self.map.remove(&(v, k));
                    return Some((v, k));
                }
            }
        }
        None
    }

    /// Marks a state confirmed (its flow sent a second packet).
    pub fn confirm(&mut self, vip: VipId, key: &StateKey) -> bool {
        self.stamp += 1;
        let s = self.stamp;
        match self.map.get_mut(&(vip, *key)) {
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
        self.map.remove(&(vip, *key)).is_some()
    }

    /// Forgets every state of a backend of a VIP (it left the pool).
    pub fn remove_backend(&mut self, vip: VipId, backend: Backend) -> usize {
        let before = self.map.len();
        self.map.retain(|(v, _), e| !(*v == vip && e.backend == backend));
        before - self.map.len()
    }

    /// Forgets every state of a VIP.
    pub fn remove_vip(&mut self, vip: VipId) {
        self.map.retain(|(v, _), _| *v != vip);
    }

    /// Drops stale queue entries once the queues hold twice the states.
    fn compact(&mut self) {
        if self.fresh.len() + self.confirmed.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.fresh.retain(|(s, v, k)| map.get(&(*v, *k)).is_some_and(|e| e.stamp == *s));
            self.confirmed.retain(|(s, v, k)| map.get(&(*v, *k)).is_some_and(|e| e.stamp == *s));
        }
    }

    /// Heap bytes (map slots and queues; estimated from capacities).
    pub fn memory_bytes(&self) -> usize {
        let slot = std::mem::size_of::<((VipId, StateKey), Entry)>() + 1;
        let q = std::mem::size_of::<(u64, VipId, StateKey)>();
        self.map.capacity() * slot + (self.fresh.capacity() + self.confirmed.capacity()) * q
    }

    /// Upper bound of [`Self::memory_bytes`] for a table of `capacity`
    /// states (hash map at its worst load factor, queues at twice the states
    /// plus the compaction slack, rounded up to powers of two).
    pub fn memory_bound(capacity: usize) -> usize {
        let slot = std::mem::size_of::<((VipId, StateKey), Entry)>() + 1;
        let q = std::mem::size_of::<(u64, VipId, StateKey)>();
        let map_slots = (capacity * 8 / 7 + 1).next_power_of_two();
        map_slots * slot + 2 * (2 * capacity + 1024 + 1).next_power_of_two() * q
    }
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
            t.memory_bytes() <= ConnTable::memory_bound(100),
            "{} > {}",
            t.memory_bytes(),
            ConnTable::memory_bound(100)
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
}
