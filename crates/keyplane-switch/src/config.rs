//! Configuration of a running switch and the text inputs it reads
//! (`--next-hops`).

use crate::decide::{NextHop, Unknown};
use crate::error::{Result, SwitchError};
use crate::packet::Mac;
use keyplane_net::IoKind;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Forwarding mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Destination MAC → port.
    #[default]
    L2,
    /// Destination IP → longest prefix → next hop.
    L3,
}

impl std::str::FromStr for Mode {
    type Err = SwitchError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "l2" | "L2" => Ok(Mode::L2),
            "l3" | "L3" => Ok(Mode::L3),
            _ => Err(SwitchError::config(format!("--mode {s}: expected l2 or l3"))),
        }
    }
}

impl std::str::FromStr for Unknown {
    type Err = SwitchError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "flood" => Ok(Unknown::Flood),
            "drop" => Ok(Unknown::Drop),
            _ => Err(SwitchError::config(format!("--unknown {s}: expected flood or drop"))),
        }
    }
}

/// Everything `keyplane switch` is told on its command line.
#[derive(Debug, Clone)]
pub struct Config {
    /// Interfaces, in port order (port index = position).
    pub ports: Vec<String>,
    /// The FIB blob: L2 a MAC table (key format `mac`, value = port index);
    /// L3 a prefix table built by `keyplane build` from prefix keys.
    pub fib: PathBuf,
    /// L2 or L3.
    pub mode: Mode,
    /// L3: the next-hop file (`INDEX PORT DST_MAC` lines).
    pub next_hops: Option<PathBuf>,
    /// L3: the switch's own addresses (answered for ARP / ND).
    pub addresses: Vec<IpAddr>,
    /// Packet-I/O back end.
    pub io: IoKind,
    /// Watched directory of delta streams and blobs.
    pub deltas: Option<PathBuf>,
    /// A `keyplane serve` service (`http://host:port`) whose table
    /// [`Config::table`] is the FIB: its blobs replace the FIB, its deltas
    /// are applied live. With a controller, an empty [`Config::fib`] path
    /// means "no local blob": start-up waits for the service's first one.
    pub controller: Option<String>,
    /// The table followed at [`Config::controller`].
    pub table: Option<String>,
    /// How long start-up without a local FIB waits for the service's first blob.
    pub controller_wait: Duration,
    /// Prometheus endpoint address.
    pub metrics: Option<String>,
    /// L2: what to do with unknown destinations.
    pub unknown: Unknown,
    /// Worker threads (each serves every port through its own socket).
    pub workers: usize,
    /// L2 learning through the control side. Default: on in L2 mode unless
    /// `deltas` or `controller` names an external source of FIB updates.
    pub learn: Option<bool>,
    /// Learned MACs not seen for this long are removed.
    pub age: Duration,
    /// Frames per receive burst.
    pub burst: usize,
}

impl Config {
    /// Defaults for the given ports and FIB.
    pub fn new(ports: Vec<String>, fib: impl Into<PathBuf>) -> Self {
        Self {
            ports,
            fib: fib.into(),
            mode: Mode::L2,
            next_hops: None,
            addresses: Vec::new(),
            io: IoKind::Auto,
            deltas: None,
            controller: None,
            table: None,
            controller_wait: Duration::from_secs(30),
            metrics: None,
            unknown: Unknown::Flood,
            workers: 1,
            learn: None,
            age: Duration::from_secs(300),
            burst: keyplane_net::BURST,
        }
    }

    /// Whether learning is on.
    pub fn learning(&self) -> bool {
        self.mode == Mode::L2 && self.learn.unwrap_or(self.deltas.is_none() && self.controller.is_none())
    }

    /// Checks the combination of options.
    pub fn validate(&self) -> Result<()> {
        if self.ports.is_empty() {
            return Err(SwitchError::config("give at least one --port IFNAME"));
        }
        if self.ports.len() > 64 {
            return Err(SwitchError::config(format!("{} ports: at most 64 are supported", self.ports.len())));
        }
        for (i, p) in self.ports.iter().enumerate() {
            if self.ports[..i].contains(p) {
                return Err(SwitchError::config(format!("--port {p} is given twice")));
            }
        }
        if !(1..=64).contains(&self.workers) {
            return Err(SwitchError::config(format!("--workers {}: use 1 to 64", self.workers)));
        }
        if !(1..=1024).contains(&self.burst) {
            return Err(SwitchError::config(format!("burst {}: use 1 to 1024", self.burst)));
        }
        if self.mode == Mode::L3 && self.next_hops.is_none() {
            return Err(SwitchError::config("--mode l3 needs --next-hops FILE (lines INDEX PORT DST_MAC)"));
        }
        if self.learn == Some(true) && self.deltas.is_some() {
            return Err(SwitchError::config(
                "learning and --deltas both write the FIB; the delta directory's controller owns it, so learning is off with --deltas",
            ));
        }
        if self.controller.is_some() && self.deltas.is_some() {
            return Err(SwitchError::config(
                "--controller and --deltas are two sources of FIB updates; give one of them",
            ));
        }
        match (&self.controller, &self.table) {
            (Some(_), None) => return Err(SwitchError::config("--controller URL needs --table NAME")),
            (None, Some(_)) => return Err(SwitchError::config("--table NAME needs --controller URL")),
            _ => {}
        }
        if self.learn == Some(true) && self.controller.is_some() {
            return Err(SwitchError::config(
                "learning and --controller both write the FIB; the service owns it, so learning is off with --controller",
            ));
        }
        if self.fib.as_os_str().is_empty() && self.controller.is_none() {
            return Err(SwitchError::config("give --fib FILE (or --controller URL --table NAME)"));
        }
        Ok(())
    }
}

/// Parses `aa:bb:cc:dd:ee:ff` (or with `-`).
pub fn parse_mac(s: &str) -> Option<Mac> {
    keyplane::key::parse_mac(s)
}

/// Reads a next-hop file: lines `INDEX PORT DST_MAC` (`#` comments), where
/// PORT is an interface name from `ports` or a 0-based port index.
pub fn read_next_hops(path: &std::path::Path, ports: &[String]) -> Result<Vec<Option<NextHop>>> {
    let text = std::fs::read_to_string(path).map_err(|e| SwitchError::io(path.display().to_string(), e))?;
    parse_next_hops(&path.display().to_string(), &text, ports)
}

/// Parses next-hop lines (see [`read_next_hops`]).
pub fn parse_next_hops(name: &str, text: &str, ports: &[String]) -> Result<Vec<Option<NextHop>>> {
    let mut out: Vec<Option<NextHop>> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |msg: String| SwitchError::Input { path: name.to_string(), line: i + 1, msg };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let [idx, port, mac] = f[..] else {
            return Err(bad(format!("expected `INDEX PORT DST_MAC`, got {} field(s)", f.len())));
        };
        let idx: usize = idx
            .parse()
            .ok()
            .filter(|&x: &usize| x < 1 << 20)
            .ok_or_else(|| bad(format!("next-hop index {idx:?} is not a number below 1048576")))?;
        let port = match ports.iter().position(|p| p == port) {
            Some(p) => p,
            None => port.parse::<usize>().ok().filter(|&p| p < ports.len()).ok_or_else(|| {
                bad(format!(
                    "port {port:?} is neither one of the --port names ({}) nor an index below {}",
                    ports.join(", "),
                    ports.len()
                ))
            })?,
        };
        let mac = parse_mac(mac).ok_or_else(|| bad(format!("{mac:?} is not a MAC address (aa:bb:cc:dd:ee:ff)")))?;
        if out.len() <= idx {
            out.resize(idx + 1, None);
        }
        if out[idx].is_some() {
            return Err(bad(format!("next hop {idx} is defined twice")));
        }
        out[idx] = Some(NextHop { port: port as u16, mac });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_hops_parse_and_errors_name_the_line() {
        let ports = vec!["p0".to_string(), "p1".to_string()];
        let nh =
            parse_next_hops("f", "# comment\n0 p1 02:00:00:00:00:01\n\n3 0 02:00:00:00:00:03 # x\n", &ports).unwrap();
        assert_eq!(nh.len(), 4);
        assert_eq!(nh[0], Some(NextHop { port: 1, mac: [2, 0, 0, 0, 0, 1] }));
        assert_eq!(nh[3], Some(NextHop { port: 0, mac: [2, 0, 0, 0, 0, 3] }));
        assert!(nh[1].is_none());
        for (text, what) in [
            ("0 p9 02:00:00:00:00:01", "neither"),
            ("0 p0 zz", "not a MAC"),
            ("x p0 02:00:00:00:00:01", "not a number"),
            ("0 p0", "2 field"),
            ("0 p0 02:00:00:00:00:01\n0 p1 02:00:00:00:00:01", "twice"),
        ] {
            let e = parse_next_hops("f", text, &ports).unwrap_err().to_string();
            assert!(e.contains(what) && e.starts_with("f:"), "{e}");
        }
    }
}
