//! Network-wide FIBs (Concise; thesis §3.4.3 OthelloSet): a topology of
//! switches, links and host attachment points, and every switch's
//! shortest-path egress port toward every switch.
//!
//! Topology file (one statement a line, `#` starts a comment):
//!
//! ```text
//! switch s1 s2 s3 s4          # switch names (index = order of appearance)
//! link s1:1 s2:1              # s1's port 1 is wired to s2's port 1
//! host 10.0.0.1 s1:10         # initial entry: host key attached at s1 port 10
//! ```
//!
//! A table value is an attachment point: `switch_index << 16 | port`
//! ([`attach`]). A switch's view holds, for every host key, the port the
//! switch forwards to: the attachment port at the host's own switch, the
//! first hop of a shortest path (fewest links; ties to the lowest port)
//! elsewhere, and [`NO_ROUTE`] when no path is up.

use crate::error::{ControlError, Result};
use std::collections::{BTreeSet, VecDeque};

/// The port value of a view when the host cannot be reached.
pub const NO_ROUTE: u64 = 0;

/// Attachment point value: `switch_index << 16 | port`.
pub fn attach(switch: usize, port: u16) -> u64 {
    ((switch as u64) << 16) | port as u64
}

/// `(switch_index, port)` of an attachment value.
pub fn detach(v: u64) -> (usize, u16) {
    ((v >> 16) as usize, (v & 0xffff) as u16)
}

/// A parsed topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Switch names; a switch's index is its position.
    pub switches: Vec<String>,
    /// Links `((switch, port), (switch, port))`.
    pub links: Vec<((usize, u16), (usize, u16))>,
    /// Initial host entries `(key text, attachment value)`.
    pub hosts: Vec<(String, u64)>,
}

impl Topology {
    /// Parses the topology file text.
    pub fn parse(text: &str) -> Result<Self> {
        let mut t = Topology { switches: Vec::new(), links: Vec::new(), hosts: Vec::new() };
        let err = |line: usize, m: String| ControlError::Topology(format!("line {line}: {m}"));
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            let mut w = line.split_whitespace();
            match w.next() {
                None => {}
                Some("switch") => {
                    for name in w {
                        if t.switches.iter().any(|s| s == name) {
                            return Err(err(i + 1, format!("switch {name:?} declared twice")));
                        }
                        t.switches.push(name.to_string());
                    }
                }
                Some("link") => {
                    let (Some(a), Some(b), None) = (w.next(), w.next(), w.next()) else {
                        return Err(err(i + 1, "expected `link SWITCH:PORT SWITCH:PORT`".into()));
                    };
                    let a = t.endpoint(a).map_err(|m| err(i + 1, m))?;
                    let b = t.endpoint(b).map_err(|m| err(i + 1, m))?;
                    if a.0 == b.0 {
                        return Err(err(i + 1, "a link joins two different switches".into()));
                    }
                    t.links.push((a, b));
                }
                Some("host") => {
                    let (Some(k), Some(at), None) = (w.next(), w.next(), w.next()) else {
                        return Err(err(i + 1, "expected `host KEY SWITCH:PORT`".into()));
                    };
                    let (s, p) = t.endpoint(at).map_err(|m| err(i + 1, m))?;
                    t.hosts.push((k.to_string(), attach(s, p)));
                }
                Some(other) => return Err(err(i + 1, format!("unknown statement {other:?} (switch, link, host)"))),
            }
        }
        if t.switches.is_empty() {
            return Err(ControlError::Topology("no `switch` line".into()));
        }
        let mut used = BTreeSet::new();
        for &(a, b) in &t.links {
            for e in [a, b] {
                if !used.insert(e) {
                    return Err(ControlError::Topology(format!(
                        "port {}:{} is used by two links",
                        t.switches[e.0], e.1
                    )));
                }
            }
        }
        Ok(t)
    }

    /// Parses `switch:port` against the declared switches.
    pub fn endpoint(&self, s: &str) -> std::result::Result<(usize, u16), String> {
        let (name, port) = s.rsplit_once(':').ok_or_else(|| format!("{s:?} is not SWITCH:PORT"))?;
        let idx = self.switches.iter().position(|x| x == name).ok_or_else(|| format!("unknown switch {name:?}"))?;
        let port: u16 = port.parse().map_err(|_| format!("bad port in {s:?}"))?;
        if port == 0 {
            return Err(format!("port 0 in {s:?}: ports start at 1 (0 means no route)"));
        }
        Ok((idx, port))
    }

    /// Index of the link joining endpoints `a` and `b` (either order).
    pub fn link_index(&self, a: (usize, u16), b: (usize, u16)) -> Option<usize> {
        self.links.iter().position(|&(x, y)| (x, y) == (a, b) || (x, y) == (b, a))
    }

    /// Egress port of every switch toward every switch: `nh[s][d]`
    /// (0 when `s == d` or unreachable). Links whose index is in `down` are skipped.
    pub fn next_hops(&self, down: &BTreeSet<usize>) -> Vec<Vec<u16>> {
        let n = self.switches.len();
        // adjacency: (neighbour, local port)
        let mut adj: Vec<Vec<(usize, u16)>> = vec![Vec::new(); n];
        for (i, &((sa, pa), (sb, pb))) in self.links.iter().enumerate() {
            if !down.contains(&i) {
                adj[sa].push((sb, pa));
                adj[sb].push((sa, pb));
            }
        }
        let mut nh = vec![vec![0u16; n]; n];
        for d in 0..n {
            // BFS from the destination gives every switch's distance to it.
            let mut dist = vec![usize::MAX; n];
            dist[d] = 0;
            let mut q = VecDeque::from([d]);
            while let Some(u) = q.pop_front() {
                for &(v, _) in &adj[u] {
                    if dist[v] == usize::MAX {
                        dist[v] = dist[u] + 1;
                        q.push_back(v);
                    }
                }
            }
            for s in 0..n {
                if s == d || dist[s] == usize::MAX {
                    continue;
                }
                nh[s][d] = adj[s].iter().filter(|&&(v, _)| dist[v] + 1 == dist[s]).map(|&(_, p)| p).min().unwrap_or(0);
            }
        }
        nh
    }
}

/// The port switch `s` forwards to for a host attached at `value`.
pub fn port_at(nh: &[Vec<u16>], s: usize, value: u64) -> u64 {
    let (d, p) = detach(value);
    if d == s {
        p as u64
    } else if d < nh.len() {
        nh[s][d] as u64
    } else {
        NO_ROUTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_next_hops() {
        let t = Topology::parse(
            "switch s1 s2 s3 s4\nlink s1:1 s2:1\nlink s2:2 s3:1\nlink s3:2 s4:1\nlink s4:2 s1:2\nhost h1 s1:9\n",
        )
        .unwrap();
        let nh = t.next_hops(&BTreeSet::new());
        assert_eq!(nh[0][1], 1);
        assert_eq!(nh[0][3], 2);
        assert_eq!(nh[0][2], 1, "tie between ports 1 and 2 goes to the lower port");
        let down: BTreeSet<usize> = [0].into();
        let nh = t.next_hops(&down);
        assert_eq!(nh[0][1], 2, "s1 reaches s2 the long way round");
        assert_eq!(port_at(&nh, 0, t.hosts[0].1), 9);
        assert!(Topology::parse("link a:1 b:1").is_err());
        assert!(Topology::parse("switch a b\nlink a:1 b:1\nlink a:1 b:2").is_err());
    }
}
