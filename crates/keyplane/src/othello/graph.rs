//! The Othello bipartite graph as per-slot singly linked edge lists, shared
//! by Othello's control form and Ludo's bucket locator (a 1-bit Othello over
//! Ludo's own key ids). Vertices are slot indices, `SIDE_B`-tagged for
//! array B; edge `id` joins the two slots of key `id`.

use super::SIDE_B;

/// End of an edge list / no edge.
pub(crate) const NONE: u32 = u32::MAX;

/// One key's edge: its slots in A and B and the next edges of their lists.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Edge {
    pub a: u32,
    pub b: u32,
    pub na: u32,
    pub nb: u32,
}

/// An unused edge record.
pub(crate) const NO_EDGE: Edge = Edge { a: NONE, b: NONE, na: NONE, nb: NONE };

/// Outcome of [`walk`].
pub(crate) enum Walk {
    /// The start vertices are connected (without the skipped edge).
    Connected,
    /// Separate trees; `side` names the smaller one, whose vertices are in `q[side]`.
    Separate(usize),
}

#[inline]
fn head(head_a: &[u32], head_b: &[u32], v: u32) -> u32 {
    if v & SIDE_B != 0 { head_b[(v & !SIDE_B) as usize] } else { head_a[v as usize] }
}

/// Walks the trees of `s0` and `s1` in lock step (never crossing edge
/// `skip`) until one is exhausted or the walks meet. `q[s]` receives the
/// `(vertex, edge it was reached by)` pairs of walk `s`.
pub(crate) fn walk(
    edges: &[Edge],
    head_a: &[u32],
    head_b: &[u32],
    q: &mut [Vec<(u32, u32)>; 2],
    s0: u32,
    s1: u32,
    skip: u32,
) -> Walk {
    let starts = [s0, s1];
    let mut pos = [0usize; 2];
    for (q, &st) in q.iter_mut().zip(&starts) {
        q.clear();
        q.push((st, skip));
    }
    // An isolated start vertex is a whole tree by itself: no walk at all
    // (about 40% of inserts at full compact load).
    for (s, &st) in starts.iter().enumerate() {
        if head(head_a, head_b, st) == NONE {
            return Walk::Separate(s);
        }
    }
    loop {
        for s in 0..2 {
            let (v, parent) = q[s][pos[s]];
            pos[s] += 1;
            let side_b = v & SIDE_B != 0;
            let mut e = head(head_a, head_b, v);
            while e != NONE {
                let ed = edges[e as usize];
                let (w, next) = if side_b { (ed.a, ed.nb) } else { (ed.b | SIDE_B, ed.na) };
                if e != parent {
                    if w == starts[1 - s] {
                        return Walk::Connected;
                    }
                    q[s].push((w, e));
                }
                e = next;
            }
            // Exhausted without meeting the other start: this tree is the smaller one.
            if pos[s] == q[s].len() {
                return Walk::Separate(s);
            }
        }
    }
}

/// Removes edge `id` from the list of slot `at` on side B (`side_b`) or A.
pub(crate) fn unlink(edges: &mut [Edge], head_a: &mut [u32], head_b: &mut [u32], side_b: bool, at: usize, id: u32) {
    let next = |e: &Edge| if side_b { e.nb } else { e.na };
    let after = next(&edges[id as usize]);
    let head = if side_b { &mut head_b[at] } else { &mut head_a[at] };
    if *head == id {
        *head = after;
        return;
    }
    let mut cur = *head;
    while cur != NONE {
        let ed = &mut edges[cur as usize];
        if next(ed) == id {
            if side_b {
                ed.nb = after
            } else {
                ed.na = after
            }
            return;
        }
        cur = next(ed);
    }
}

/// The forest's adjacency lists for edges `ids` with slot pairs `ends`
/// (indexed by id): `(head_a, head_b, edges)` for arrays of `ma` and `mb`
/// slots, with `edge_len` ≥ every id entries of edge links. Allocated with
/// huge-page advice (the walks read them at random).
pub(crate) fn link_all(
    ids: &[u32],
    ends: &[(u32, u32)],
    ma: usize,
    mb: usize,
    edge_len: usize,
) -> (Vec<u32>, Vec<u32>, Vec<Edge>) {
    let mut head_a = crate::mem::advised_vec(ma, NONE);
    let mut head_b = crate::mem::advised_vec(mb, NONE);
    let mut edges = crate::mem::advised_vec(edge_len, NO_EDGE);
    for &id in ids {
        let (i, j) = ends[id as usize];
        edges[id as usize] = Edge { a: i, b: j, na: head_a[i as usize], nb: head_b[j as usize] };
        head_a[i as usize] = id;
        head_b[j as usize] = id;
    }
    (head_a, head_b, edges)
}

/// Checks a loaded graph (control-form snapshots): every edge list ends,
/// holds exactly the edges `live` whose endpoint it is, each once; every
/// other edge record is unused; and the graph is a forest (the walks and
/// recolouring rely on it). Fails with [`crate::Error::Corrupt`].
pub(crate) fn check_forest(edges: &[Edge], head_a: &[u32], head_b: &[u32], live: &[u32]) -> crate::Result<()> {
    use crate::snapshot::ensure;
    let (ma, mb, n) = (head_a.len(), head_b.len(), edges.len());
    let mut is_live = vec![false; n];
    for &id in live {
        ensure((id as usize) < n, || format!("key {id} has no edge record"))?;
        let e = edges[id as usize];
        ensure((e.a as usize) < ma && (e.b as usize) < mb, || format!("edge {id} lies outside the arrays"))?;
        is_live[id as usize] = true;
    }
    // Walk every list once; count each edge's appearances per side.
    let mut seen = vec![0u8; n];
    for (side_b, heads) in [(false, head_a), (true, head_b)] {
        for (at, &h) in heads.iter().enumerate() {
            let mut e = h;
            while e != NONE {
                let i = e as usize;
                ensure(i < n && is_live[i], || format!("edge list of slot {at} holds unused edge {e}"))?;
                let ed = edges[i];
                let (end, next) = if side_b { (ed.b, ed.nb) } else { (ed.a, ed.na) };
                let bit = 1u8 << side_b as u8;
                ensure(end as usize == at && seen[i] & bit == 0, || format!("edge {e} is listed at the wrong slot"))?;
                seen[i] |= bit;
                e = next;
            }
        }
    }
    ensure(live.iter().all(|&id| seen[id as usize] == 3), || "an edge is missing from its slots' lists".into())?;
    // Union-find: a cycle means an edge joins two slots already connected.
    let mut parent: Vec<u32> = (0..(ma + mb) as u32).collect();
    fn root(p: &mut [u32], mut x: u32) -> u32 {
        while p[x as usize] != x {
            let up = p[p[x as usize] as usize];
            p[x as usize] = up;
            x = up;
        }
        x
    }
    for &id in live {
        let e = edges[id as usize];
        let (x, y) = (root(&mut parent, e.a), root(&mut parent, ma as u32 + e.b));
        ensure(x != y, || format!("edge {id} closes a cycle; the graph must be a forest"))?;
        parent[x as usize] = y;
    }
    Ok(())
}
