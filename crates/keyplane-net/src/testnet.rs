//! Network-namespace topologies for integration tests (and a guard that removes them).
//!
//! [`TestNet`] creates uniquely named namespaces (`kp<pid>x<counter><tag>`), veth pairs and Linux
//! bridges inside them, assigns addresses from 198.18.0.0/15 ([`v4`]) and fd00::/8 ([`v6`]), runs
//! commands inside (`ip netns exec`), enters a namespace from the current thread ([`TestNet::enter`])
//! to open sockets there, and on drop — also when the test panics — kills what it spawned and
//! deletes every namespace it made (which removes their interfaces). Traffic stays inside the
//! namespaces: no interface is created in the caller's namespace.
//!
//! ```no_run
//! use keyplane_net::testnet::{self, TestNet};
//! if let Some(why) = testnet::skip_reason() {
//!     eprintln!("skipping: {why}");
//!     return;
//! }
//! let mut net = TestNet::new("demo").unwrap();
//! let a = net.add_ns("a").unwrap();
//! let b = net.add_ns("b").unwrap();
//! net.veth(&a, "eth0", &b, "eth0").unwrap();
//! net.addr(&a, "eth0", &format!("{}/24", testnet::v4(0, 1))).unwrap();
//! net.addr(&b, "eth0", &format!("{}/24", testnet::v4(0, 2))).unwrap();
//! net.run(&a, &["ping", "-c", "1", "-W", "2", &testnet::v4(0, 2).to_string()]).unwrap();
//! // dropping `net` deletes both namespaces
//! ```

use crate::parse::MacAddr;
use crate::{Error, Result};
use std::ffi::CString;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// 198.18.`subnet`.`host` (inside the benchmarking range 198.18.0.0/15).
pub fn v4(subnet: u8, host: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, subnet, host)
}

/// fd00::`subnet`:0:0:`host` — a unique-local address (fd00::/8) for `subnet` / `host`.
pub fn v6(subnet: u16, host: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, subnet, 0, 0, 0, host)
}

/// A locally administered unicast MAC 02:6b:70:xx:xx:xx for `n`.
pub fn mac(n: u32) -> MacAddr {
    let b = n.to_be_bytes();
    MacAddr([0x02, 0x6b, b[0], b[1], b[2], b[3]])
}

/// `None` when this process can create network namespaces; otherwise why not (for the one-line
/// skip of a network test).
pub fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root (run the tests as root)".into());
    }
    let probe = format!("kp{}probe{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    match Command::new("ip").args(["netns", "add", &probe]).stderr(Stdio::piped()).output() {
        Err(e) => Some(format!("cannot run `ip` (install iproute2): {e}")),
        Ok(o) if !o.status.success() => {
            Some(format!("`ip netns add` failed: {}", String::from_utf8_lossy(&o.stderr).trim()))
        }
        Ok(_) => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).output();
            None
        }
    }
}

/// `true` when namespaces can be created here (see [`skip_reason`]).
pub fn available() -> bool {
    skip_reason().is_none()
}

fn run_cmd(cmd: &mut Command) -> Result<Output> {
    let line = format!("{cmd:?}");
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| Error::Sys { what: line.clone(), source: e })?;
    if !out.status.success() {
        return Err(Error::Command {
            cmd: line,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out)
}

/// A set of namespaces (and processes in them) removed on drop.
pub struct TestNet {
    prefix: String,
    namespaces: Vec<String>,
    children: Vec<Child>,
}

impl TestNet {
    /// A new, empty topology; `tag` (a few letters) goes into every namespace name.
    pub fn new(tag: &str) -> Result<Self> {
        if !tag.chars().all(|c| c.is_ascii_alphanumeric()) || tag.len() > 12 {
            return Err(Error::InvalidParameter(format!("testnet tag {tag:?}: up to 12 letters or digits")));
        }
        let prefix = format!("kp{}x{}{tag}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        Ok(TestNet { prefix, namespaces: Vec::new(), children: Vec::new() })
    }

    /// Create namespace `<prefix>-<short>` with loopback up; returns its full name.
    pub fn add_ns(&mut self, short: &str) -> Result<String> {
        if !short.chars().all(|c| c.is_ascii_alphanumeric()) || short.is_empty() || short.len() > 16 {
            return Err(Error::InvalidParameter(format!("namespace name {short:?}: 1 to 16 letters or digits")));
        }
        let name = format!("{}-{short}", self.prefix);
        run_cmd(Command::new("ip").args(["netns", "add", &name]))?;
        self.namespaces.push(name.clone());
        self.ip(&name, &["link", "set", "lo", "up"])?;
        Ok(name)
    }

    /// The namespaces made so far.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// `ip -n NS ARGS...`; returns its standard output.
    pub fn ip(&self, ns: &str, args: &[&str]) -> Result<String> {
        let out = run_cmd(Command::new("ip").arg("-n").arg(ns).args(args))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A veth pair `if_a` (in `ns_a`) <-> `if_b` (in `ns_b`), both up. Interface names: 1 to 15 bytes.
    pub fn veth(&mut self, ns_a: &str, if_a: &str, ns_b: &str, if_b: &str) -> Result<()> {
        self.veth_queues(ns_a, if_a, ns_b, if_b, 1)
    }

    /// Like [`veth`](TestNet::veth) with `queues` RX and TX queues on each end (for multi-queue
    /// AF_XDP / fanout tests).
    pub fn veth_queues(&mut self, ns_a: &str, if_a: &str, ns_b: &str, if_b: &str, queues: u32) -> Result<()> {
        let q = queues.to_string();
        run_cmd(Command::new("ip").args([
            "-n",
            ns_a,
            "link",
            "add",
            if_a,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            if_b,
            "netns",
            ns_b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]))?;
        self.up(ns_a, if_a)?;
        self.up(ns_b, if_b)
    }

    /// A Linux bridge `br` in `ns`, up, with no STP and no forwarding delay.
    pub fn bridge(&mut self, ns: &str, br: &str) -> Result<()> {
        self.ip(ns, &["link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"])?;
        self.up(ns, br)
    }

    /// Make `ifname` a port of bridge `br` (both in `ns`).
    pub fn attach(&self, ns: &str, ifname: &str, br: &str) -> Result<()> {
        self.ip(ns, &["link", "set", ifname, "master", br]).map(|_| ())
    }

    /// Set `ifname` up.
    pub fn up(&self, ns: &str, ifname: &str) -> Result<()> {
        self.ip(ns, &["link", "set", ifname, "up"]).map(|_| ())
    }

    /// Add address `cidr` (IPv4 or IPv6; IPv6 without duplicate-address detection) to `ifname`.
    pub fn addr(&self, ns: &str, ifname: &str, cidr: &str) -> Result<()> {
        let mut args = vec!["addr", "add", cidr, "dev", ifname];
        if cidr.contains(':') {
            args.push("nodad");
        }
        self.ip(ns, &args).map(|_| ())
    }

    /// Set `ifname`'s MAC address.
    pub fn set_mac(&self, ns: &str, ifname: &str, mac: MacAddr) -> Result<()> {
        self.ip(ns, &["link", "set", ifname, "address", &mac.to_string()]).map(|_| ())
    }

    /// Turn transmit checksum offload of `ifname` in `ns` on or off (what `ethtool -K IF tx off`
    /// does, without needing `ethtool`). With it on (the veth default), TCP / UDP frames that a
    /// namespace's own stack sends leave with only a partial checksum, to be completed by
    /// "hardware" that a veth peer read through AF_XDP never provides; see `docs/net.md`.
    pub fn tx_checksum_offload(&self, ns: &str, ifname: &str, on: bool) -> Result<()> {
        enter(ns, || crate::sys::set_tx_checksum_offload(ifname, on))?
    }

    /// Run `cmd` in `ns` and wait; its output whatever the exit status.
    pub fn exec(&self, ns: &str, cmd: &[&str]) -> Result<Output> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(cmd).stdin(Stdio::null());
        c.output().map_err(|e| Error::Sys { what: format!("{c:?}"), source: e })
    }

    /// Run `cmd` in `ns`; its standard output, or [`Error::Command`] on a non-zero exit.
    pub fn run(&self, ns: &str, cmd: &[&str]) -> Result<String> {
        let out = run_cmd(Command::new("ip").args(["netns", "exec", ns]).args(cmd))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Start `cmd` in `ns` in the background (stdout / stderr piped). It is killed when the
    /// `TestNet` drops; returns its index for [`child`](TestNet::child).
    pub fn spawn(&mut self, ns: &str, cmd: &[&str]) -> Result<usize> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(cmd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = c.spawn().map_err(|e| Error::Sys { what: format!("{c:?}"), source: e })?;
        self.children.push(child);
        Ok(self.children.len() - 1)
    }

    /// A process started with [`spawn`](TestNet::spawn).
    pub fn child(&mut self, id: usize) -> Option<&mut Child> {
        self.children.get_mut(id)
    }

    /// Run `f` on this thread inside network namespace `ns` (sockets opened there stay there),
    /// then return the thread to its namespace, also if `f` panics.
    pub fn enter<R>(&self, ns: &str, f: impl FnOnce() -> R) -> Result<R> {
        enter(ns, f)
    }
}

fn open_ro(path: &str) -> Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| Error::InvalidParameter(format!("path {path:?} contains NUL")))?;
    // SAFETY: valid NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(Error::last_os(format!("open {path}")));
    }
    // SAFETY: fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Run `f` on this thread inside the named network namespace `ns` (from `ip netns add`), then
/// switch back, also if `f` panics.
pub fn enter<R>(ns: &str, f: impl FnOnce() -> R) -> Result<R> {
    if ns.contains('/') || ns.is_empty() {
        return Err(Error::InvalidParameter(format!("namespace name {ns:?}")));
    }
    let target = open_ro(&format!("/run/netns/{ns}"))?;
    let home = open_ro("/proc/thread-self/ns/net")?;
    struct Back(OwnedFd);
    impl Drop for Back {
        fn drop(&mut self) {
            // SAFETY: setns on a namespace fd we opened; restores this thread's namespace.
            if unsafe { libc::setns(self.0.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                // The thread would keep running in the wrong namespace: that must not go unnoticed.
                panic!("cannot return to the original network namespace: {}", std::io::Error::last_os_error());
            }
        }
    }
    // SAFETY: setns on a namespace fd we opened, affecting only this thread.
    if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(Error::last_os(format!("setns into {ns}")));
    }
    let _back = Back(home);
    Ok(f())
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self.namespaces.iter().rev() {
            // Kill anything still running in the namespace (e.g. a daemon a command forked).
            if let Ok(o) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    if let Ok(p) = pid.parse::<i32>() {
                        // SAFETY: sending SIGKILL to a process inside our own test namespace.
                        unsafe { libc::kill(p, libc::SIGKILL) };
                    }
                }
            }
            match Command::new("ip").args(["netns", "del", ns]).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => {
                    eprintln!("testnet: could not delete namespace {ns}: {}", String::from_utf8_lossy(&o.stderr).trim())
                }
                Err(e) => eprintln!("testnet: could not run `ip netns del {ns}`: {e}"),
            }
        }
    }
}
