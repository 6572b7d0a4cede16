//! The one cuckoo-path breadth-first search of the crate, used by the full
//! cuckoo map, partial-key cuckoo, CFW's level 1 and Ludo.
//!
//! A table is a [`Graph`]: buckets of `slots()` slots, the other bucket of
//! each occupant, which slots are free. [`search`] looks for a cuckoo path
//! from a set of full root buckets to a free slot: a list of slots in
//! which the key of each slot moves to the next one, the last slot free.
//! The search is breadth-first, so a shortest path (in the order of
//! discovery) is found; buckets are checked for a free slot when they are
//! discovered, and the alternates of one bucket are computed (and
//! prefetched) together before any of them is inspected.
//!
//! The structures kept their own searches for years and those differ in
//! details that decide which path is chosen, and so the delta bytes. The
//! [`Policy`] names those details, so each structure still chooses the
//! paths it always chose (its pinned deltas do not change):
//!
//! * [`Seen`]: a bucket may appear once per path (`OnPath`: the full and
//!   the partial-key cuckoo map) or once per search (`Marks`: CFW, Ludo).
//!   Both find the same first free bucket (a bucket reached again has the
//!   alternates it had the first time); they differ only in how fast the
//!   node cap fills.
//! * [`Cap`]: what happens at the node cap: stop queueing but keep looking
//!   at the alternates of queued buckets (`Queue`), or stop (`Expand`).
//! * `max_moves`: the longest path (Ludo's `max_cuckoo_path`).
//! * `roots_free`: check the roots themselves for a free slot first (CFW,
//!   Ludo inserts); otherwise the caller has.
//!
//! A [`Graph`] may also refuse a move (`may_leave`, `may_take`): Ludo's
//! overflow-avoiding search keeps to buckets whose new key sets still have
//! an inline slot-locator seed.

/// A cuckoo table as the search sees it.
pub(crate) trait Graph {
    /// Slots per bucket (at most [`MAX_SLOTS`]).
    fn slots(&self) -> usize;
    /// The other bucket of the key in slot `s` of bucket `b`; `None` for an
    /// empty slot.
    fn alt(&mut self, b: usize, s: usize) -> Option<usize>;
    /// The first free slot of bucket `b`.
    fn free(&self, b: usize) -> Option<usize>;
    /// Hint: bucket `b` will be inspected soon.
    #[inline(always)]
    fn prefetch(&self, _b: usize) {}
    /// May the key in slot `s` of bucket `b` leave while the key of slot
    /// `enter` moves in (`None`: the key being placed at a root)?
    fn may_leave(&self, _b: usize, _s: usize, _enter: Option<(usize, usize)>) -> bool {
        true
    }
    /// May bucket `b`, which has a free slot, take the key of slot `enter`
    /// (`None`: the key being placed at a root)?
    fn may_take(&self, _b: usize, _enter: Option<(usize, usize)>) -> bool {
        true
    }
}

use super::MAX_SLOTS;

/// How often a bucket may be queued (see the [module docs](self)).
#[derive(Debug)]
pub(crate) enum Seen<'a> {
    /// Once per path: a bucket is skipped only when it is on the path
    /// being extended.
    OnPath,
    /// Once per search: `marks[b] == *epoch` marks bucket `b` seen
    /// (`marks` covers every bucket; the epoch advances per search).
    Marks(&'a mut [u32], &'a mut u32),
}

/// What the search does when `cap` buckets are queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap {
    /// Queue no more buckets, but keep inspecting the alternates of the
    /// queued ones for a free slot.
    Queue(usize),
    /// Stop (checked before each bucket is expanded).
    Expand(usize),
}

/// The rules that decide which path is found (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct Policy<'a> {
    pub seen: Seen<'a>,
    pub cap: Cap,
    /// Longest path, in moves.
    pub max_moves: usize,
    /// Check the roots for a free slot before searching.
    pub roots_free: bool,
}

/// A queued bucket: its parent node and the slot of the parent whose key
/// moves here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Node {
    b: u32,
    parent: u32,
    slot: u8,
    depth: u32,
}

const NONE: u32 = u32::MAX;

/// Searches `g` for a cuckoo path from `roots`. On success `path` holds
/// `(bucket, slot)` from a root to a free slot: the key in `path[j]` moves
/// to `path[j + 1]`, the last slot is free (a single entry: a root had a
/// free slot). Returns whether a path was found and how many buckets were
/// expanded. `nodes` is scratch.
pub(crate) fn search<G: Graph>(
    g: &mut G,
    roots: &[u32],
    mut policy: Policy<'_>,
    nodes: &mut Vec<Node>,
    path: &mut Vec<(u32, u8)>,
) -> (bool, u64) {
    path.clear();
    nodes.clear();
    if policy.roots_free {
        for &b in roots {
            if let Some(f) = g.free(b as usize)
                && g.may_take(b as usize, None)
            {
                path.push((b, f as u8));
                return (true, 0);
            }
        }
    }
    if policy.max_moves == 0 {
        return (false, 0);
    }
    if let Seen::Marks(marks, epoch) = &mut policy.seen {
        **epoch = epoch.wrapping_add(1);
        if **epoch == 0 {
            marks.iter_mut().for_each(|m| *m = 0);
            **epoch = 1;
        }
        for &b in roots {
            marks[b as usize] = **epoch;
        }
    }
    for &b in roots {
        nodes.push(Node { b, parent: NONE, slot: 0, depth: 0 });
    }
    let sb = g.slots();
    let mut expanded = 0;
    let mut head = 0;
    while head < nodes.len() {
        if let Cap::Expand(cap) = policy.cap
            && nodes.len() >= cap
        {
            break;
        }
        let q = nodes[head];
        if q.depth as usize >= policy.max_moves {
            head += 1;
            continue;
        }
        expanded += 1;
        let b = q.b as usize;
        let enter = (q.parent != NONE).then(|| (nodes[q.parent as usize].b as usize, q.slot as usize));
        let mut alts = [None; MAX_SLOTS];
        for (s, a) in alts[..sb].iter_mut().enumerate() {
            *a = g.alt(b, s);
            if let Some(x) = *a {
                g.prefetch(x);
            }
        }
        for (s, &alt) in alts[..sb].iter().enumerate() {
            let Some(alt) = alt else { continue };
            let fresh = match &mut policy.seen {
                Seen::OnPath => {
                    let mut cur = head as u32;
                    while cur != NONE && nodes[cur as usize].b as usize != alt {
                        cur = nodes[cur as usize].parent;
                    }
                    cur == NONE
                }
                Seen::Marks(marks, epoch) => marks[alt] != **epoch,
            };
            if !fresh || !g.may_leave(b, s, enter) {
                continue;
            }
            if let Seen::Marks(marks, epoch) = &mut policy.seen {
                marks[alt] = **epoch;
            }
            if let Some(f) = g.free(alt)
                && g.may_take(alt, Some((b, s)))
            {
                path.push((alt as u32, f as u8));
                path.push((q.b, s as u8));
                let mut i = head;
                while nodes[i].parent != NONE {
                    let n = nodes[i];
                    path.push((nodes[n.parent as usize].b, n.slot));
                    i = n.parent as usize;
                }
                path.reverse();
                return (true, expanded);
            }
            let queue = match policy.cap {
                Cap::Queue(cap) => nodes.len() < cap,
                Cap::Expand(_) => true,
            };
            if queue && (q.depth as usize) + 2 <= policy.max_moves {
                nodes.push(Node { b: alt as u32, parent: head as u32, slot: s as u8, depth: q.depth + 1 });
            }
        }
        head += 1;
    }
    (false, expanded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A small table: each slot empty or holding a key's two buckets.
    #[derive(Debug, Clone)]
    struct Small {
        sb: usize,
        slots: Vec<Option<(u32, u32)>>,
    }

    impl Graph for Small {
        fn slots(&self) -> usize {
            self.sb
        }
        fn alt(&mut self, b: usize, s: usize) -> Option<usize> {
            self.slots[b * self.sb + s].map(|(x, y)| if x as usize == b { y as usize } else { x as usize })
        }
        fn free(&self, b: usize) -> Option<usize> {
            (0..self.sb).find(|&s| self.slots[b * self.sb + s].is_none())
        }
    }

    /// Shortest path length (moves) from full `roots` to a free slot, by
    /// exhaustive search over every sequence of at most `max` moves.
    fn oracle(t: &mut Small, roots: &[u32], max: usize) -> Option<usize> {
        fn go(t: &mut Small, b: usize, left: usize) -> bool {
            if left == 0 {
                return false;
            }
            (0..t.sb).any(|s| match t.alt(b, s) {
                Some(a) => t.free(a).is_some() || go(t, a, left - 1),
                None => false,
            })
        }
        (1..=max).find(|&m| roots.iter().any(|&r| go(t, r as usize, m)))
    }

    /// Builds a table of `nb` buckets from key bucket pairs, each key in
    /// the first of its buckets with room (keys without room are dropped).
    /// With the two buckets of a new key `new` as roots; `None` when a
    /// root has room (no search needed).
    fn table(nb: usize, sb: usize, keys: &[(u32, u32)], new: (u32, u32)) -> Option<(Small, [u32; 2])> {
        let mut t = Small { sb, slots: vec![None; nb * sb] };
        for &(x, y) in keys {
            let (x, y) = (x % nb as u32, y % nb as u32);
            if let Some(b) = [x, y].into_iter().find(|&b| t.free(b as usize).is_some()) {
                let s = t.free(b as usize).unwrap();
                t.slots[b as usize * sb + s] = Some((x, y));
            }
        }
        let roots = [new.0 % nb as u32, new.1 % nb as u32];
        roots.iter().all(|&r| t.free(r as usize).is_none()).then_some((t, roots))
    }

    fn check_path(t: &Small, roots: &[u32], path: &[(u32, u8)]) {
        let sb = t.sb;
        let at = |(b, s): (u32, u8)| b as usize * sb + s as usize;
        assert!(roots.contains(&path[0].0), "path starts at a root");
        let last = *path.last().unwrap();
        assert!(t.slots[at(last)].is_none(), "path ends at a free slot");
        let mut after = t.slots.clone();
        for w in path.windows(2).rev() {
            let key = after[at(w[0])].expect("every slot but the last holds a key");
            assert!(key.0 == w[1].0 || key.1 == w[1].0, "a key moves only to its other bucket");
            after[at(w[1])] = Some(key);
            after[at(w[0])] = None;
        }
        for (i, k) in after.iter().enumerate() {
            if let Some((x, y)) = k {
                assert!([*x, *y].contains(&((i / sb) as u32)), "every key stays in one of its buckets");
            }
        }
        let before = t.slots.iter().flatten().count();
        assert_eq!(after.iter().flatten().count(), before, "no key lost or doubled");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn finds_a_shortest_path_whenever_one_exists(
            nb in 3usize..12,
            sb in 1usize..=4,
            keys in proptest::collection::vec((0u32..64, 0u32..64), 1..60),
            new in (0u32..64, 0u32..64),
            max in 1usize..6,
            global in any::<bool>(),
        ) {
            let Some((mut t, roots)) = table(nb, sb, &keys, new) else { return Err(TestCaseError::reject("room at a root")) };
            let want = oracle(&mut t, &roots, max);
            let (mut marks, mut epoch) = (vec![0u32; nb], 0u32);
            let seen = if global { Seen::Marks(&mut marks, &mut epoch) } else { Seen::OnPath };
            let cap = if global { Cap::Expand(usize::MAX) } else { Cap::Queue(usize::MAX) };
            let policy = Policy { seen, cap, max_moves: max, roots_free: false };
            let (mut nodes, mut path) = (Vec::new(), Vec::new());
            let mut g = t.clone();
            let (found, _) = search(&mut g, &roots, policy, &mut nodes, &mut path);
            prop_assert_eq!(found, want.is_some());
            if found {
                prop_assert_eq!(path.len() - 1, want.unwrap(), "breadth-first: a shortest path");
                check_path(&t, &roots, &path);
            }
        }

        /// Both visited-set rules choose the same path (without a node cap).
        #[test]
        fn visited_rules_choose_the_same_path(
            nb in 3usize..16,
            sb in 1usize..=4,
            keys in proptest::collection::vec((0u32..64, 0u32..64), 1..80),
            new in (0u32..64, 0u32..64),
        ) {
            let Some((t, roots)) = table(nb, sb, &keys, new) else { return Err(TestCaseError::reject("room at a root")) };
            let (mut marks, mut epoch) = (vec![0u32; nb], 0u32);
            let mut paths = Vec::new();
            for seen in [Seen::OnPath, Seen::Marks(&mut marks, &mut epoch)] {
                let policy = Policy { seen, cap: Cap::Queue(usize::MAX), max_moves: usize::MAX, roots_free: false };
                let mut path = Vec::new();
                search(&mut t.clone(), &roots, policy, &mut Vec::new(), &mut path);
                paths.push(path);
            }
            prop_assert_eq!(&paths[0], &paths[1]);
        }
    }
}
