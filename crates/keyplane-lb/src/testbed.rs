//! The test and benchmark topology: client namespace(s) → a one-armed LB
//! namespace → backend namespaces running nginx that answers with its own
//! identity, all on one Linux bridge (built with `keyplane_net::testnet`,
//! removed on drop, also on panic). Plus a keep-alive HTTP client and the
//! nftables load balancer (kube-proxy's nftables mode: `numgen random`
//! over a verdict map of endpoint chains that DNAT, with conntrack).
//!
//! Addresses: port subnet 198.18.0.0/24 and fd00::/64; LB .2 / ::2,
//! backend `i` (1-based) .(10+i) / ::(10+i), clients .100, .101 (/ ::100);
//! VIPs ([`VIP4`], [`VIP6`] for DSR, [`VIP4_IPIP`], [`VIP6_IPIP`] for IPIP)
//! are routed by the clients via the LB and held on every backend's `lo`.

use crate::error::{Error, Result};
use keyplane_net::testnet::{self, TestNet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// DSR VIP (IPv4).
pub const VIP4: Ipv4Addr = Ipv4Addr::new(198, 18, 100, 1);
/// IPIP VIP (IPv4).
pub const VIP4_IPIP: Ipv4Addr = Ipv4Addr::new(198, 18, 101, 1);
/// DSR VIP (IPv6): fd00:0:0:100::1.
pub const VIP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0x100, 0, 0, 0, 1);
/// IPIP VIP (IPv6): fd00:0:0:101::1.
pub const VIP6_IPIP: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0x101, 0, 0, 0, 1);

/// IPv4 address of backend `i` (1-based).
pub fn backend4(i: usize) -> Ipv4Addr {
    testnet::v4(0, 10 + i as u8)
}
/// IPv6 address of backend `i`.
pub fn backend6(i: usize) -> Ipv6Addr {
    testnet::v6(0, 10 + i as u16)
}
/// The LB port's IPv4 address.
pub fn lb4() -> Ipv4Addr {
    testnet::v4(0, 2)
}
/// The LB port's IPv6 address.
pub fn lb6() -> Ipv6Addr {
    testnet::v6(0, 2)
}
/// Client `i`'s IPv4 address (0-based).
pub fn client4(i: usize) -> Ipv4Addr {
    testnet::v4(0, 100 + i as u8)
}
/// Client `i`'s IPv6 address.
pub fn client6(i: usize) -> Ipv6Addr {
    testnet::v6(0, 100 + i as u16)
}

fn e(x: keyplane_net::Error) -> Error {
    Error::Setup(x.to_string())
}

/// The topology. Dropping it kills the servers and deletes the namespaces.
pub struct Testbed {
    /// The namespaces (public for tests that run commands).
    pub net: TestNet,
    /// The LB's namespace (its port is `eth0`).
    pub lb: String,
    /// Client namespaces.
    pub clients: Vec<String>,
    /// Backend namespaces (backend `i` is `backends[i - 1]`).
    pub backends: Vec<String>,
    /// The switch namespace (bridge `br0`; the LB's peer port is `p0`).
    pub sw: String,
    /// The XDP_PASS program's link on the LB's peer port, while attached.
    peer_xdp: std::sync::Mutex<Option<std::os::fd::OwnedFd>>,
    /// The XDP_PASS program's link on client 0's peer port, while attached.
    client_peer_xdp: std::sync::Mutex<Option<std::os::fd::OwnedFd>>,
    dir: PathBuf,
    nginx: Vec<Option<usize>>,
}

impl Testbed {
    /// Builds the topology with `clients` client and `backends` backend
    /// namespaces, nginx running on every backend; `dir` holds the
    /// nginx files. Frame offloads are off on every port (the LB forwards
    /// what it receives: no partial checksums, no GRO super-frames); the
    /// clients' MTU is 1400 so encapsulated packets fit 1500.
    pub fn new(tag: &str, clients: usize, backends: usize, dir: &Path) -> Result<Self> {
        let mut net = TestNet::new(tag).map_err(e)?;
        let sw = net.add_ns("sw").map_err(e)?;
        net.bridge(&sw, "br0").map_err(e)?;
        // The bridge only switches: no netfilter hooks for bridged frames
        // (br_netfilter's per-frame work would load every design's path,
        // and no deployment puts it between clients and an LB).
        for k in ["iptables", "ip6tables", "arptables"] {
            let _ = net.run(&sw, &["sysctl", "-qw", &format!("net.bridge.bridge-nf-call-{k}=0")]);
        }
        let lb = net.add_ns("lb").map_err(e)?;
        let cs: Vec<String> =
            (0..clients).map(|i| net.add_ns(&format!("c{i}"))).collect::<keyplane_net::Result<_>>().map_err(e)?;
        let bs: Vec<String> =
            (1..=backends).map(|i| net.add_ns(&format!("b{i}"))).collect::<keyplane_net::Result<_>>().map_err(e)?;
        let mut all: Vec<(String, Ipv4Addr, Ipv6Addr)> = vec![(lb.clone(), lb4(), lb6())];
        all.extend(cs.iter().enumerate().map(|(i, c)| (c.clone(), client4(i), client6(i))));
        all.extend(bs.iter().enumerate().map(|(i, b)| (b.clone(), backend4(i + 1), backend6(i + 1))));
        for (k, (ns, a4, a6)) in all.iter().enumerate() {
            let p = format!("p{k}");
            net.veth(ns, "eth0", &sw, &p).map_err(e)?;
            net.attach(&sw, &p, "br0").map_err(e)?;
            net.addr(ns, "eth0", &format!("{a4}/24")).map_err(e)?;
            net.addr(ns, "eth0", &format!("{a6}/64")).map_err(e)?;
            let _ = net.exec(ns, &["ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off", "gro", "off"]);
        }
        for c in &cs {
            net.ip(c, &["link", "set", "eth0", "mtu", "1400"]).map_err(e)?;
            for v in [VIP4, VIP4_IPIP] {
                net.ip(c, &["route", "add", &format!("{v}/32"), "via", &lb4().to_string()]).map_err(e)?;
            }
            for v in [VIP6, VIP6_IPIP] {
                net.ip(c, &["-6", "route", "add", &format!("{v}/128"), "via", &lb6().to_string()]).map_err(e)?;
            }
        }
        // The LB's kernel sees the VIP packets too (AF_PACKET copies them):
        // blackhole routes drop them silently (IPv6 would answer "no route").
        for v in [VIP4.to_string() + "/32", VIP4_IPIP.to_string() + "/32"] {
            net.ip(&lb, &["route", "add", "blackhole", &v]).map_err(e)?;
        }
        for v in [VIP6.to_string() + "/128", VIP6_IPIP.to_string() + "/128"] {
            net.ip(&lb, &["-6", "route", "add", "blackhole", &v]).map_err(e)?;
        }
        for b in &bs {
            for v in [
                VIP4.to_string() + "/32",
                VIP4_IPIP.to_string() + "/32",
                VIP6.to_string() + "/128",
                VIP6_IPIP.to_string() + "/128",
            ] {
                net.ip(b, &["addr", "add", &v, "dev", "lo"]).map_err(e)?;
            }
            for k in [
                "net.ipv4.conf.all.arp_ignore=1",
                "net.ipv4.conf.all.arp_announce=2",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.eth0.rp_filter=0",
            ] {
                net.run(b, &["sysctl", "-qw", k]).map_err(e)?;
            }
        }
        std::fs::create_dir_all(dir).map_err(|x| Error::io(format!("creating {}", dir.display()), x))?;
        let mut tb = Testbed {
            net,
            lb,
            clients: cs,
            backends: bs,
            sw,
            peer_xdp: std::sync::Mutex::new(None),
            client_peer_xdp: std::sync::Mutex::new(None),
            dir: dir.to_path_buf(),
            nginx: vec![None; backends],
        };
        for i in 1..=backends {
            tb.start_backend(i)?;
        }
        Ok(tb)
    }

    /// Starts (or restarts) nginx on backend `i`, answering `b<i>`, and
    /// waits until it accepts connections.
    pub fn start_backend(&mut self, i: usize) -> Result<()> {
        self.stop_backend(i);
        let d = self.dir.join(format!("b{i}"));
        std::fs::create_dir_all(&d).map_err(|x| Error::io("nginx dir", x))?;
        let ds = d.display();
        let conf = format!(
            "daemon off; master_process off; worker_processes 1; pid {ds}/nginx.pid; error_log {ds}/error.log warn;\n\
             events {{ worker_connections 16384; }}\n\
             http {{ access_log off; client_body_temp_path {ds}/t1; proxy_temp_path {ds}/t2; fastcgi_temp_path {ds}/t3;\n\
             uwsgi_temp_path {ds}/t4; scgi_temp_path {ds}/t5; keepalive_requests 10000000; keepalive_timeout 600s;\n\
             server {{ listen 80 backlog=8192 reuseport; listen [::]:80 backlog=8192 reuseport; location / {{ return 200 \"b{i}\\n\"; }} }} }}\n"
        );
        let cf = d.join("nginx.conf");
        std::fs::write(&cf, conf).map_err(|x| Error::io("writing nginx.conf", x))?;
        let ns = self.backends[i - 1].clone();
        let id = self
            .net
            .spawn(
                &ns,
                &["nginx", "-p", &ds.to_string(), "-e", &format!("{ds}/error.log"), "-c", &cf.display().to_string()],
            )
            .map_err(e)?;
        self.nginx[i - 1] = Some(id);
        let t0 = Instant::now();
        loop {
            let ok = testnet::enter(&ns, || {
                TcpStream::connect_timeout(&SocketAddr::from((backend4(i), 80)), Duration::from_millis(200)).is_ok()
            })
            .map_err(e)?;
            if ok {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(Error::Setup(format!("nginx on backend {i} did not start (see {ds}/error.log)")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills nginx on backend `i` (a failed server: its connections break).
    pub fn stop_backend(&mut self, i: usize) {
        if let Some(id) = self.nginx.get_mut(i - 1).and_then(|x| x.take())
            && let Some(c) = self.net.child(id)
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Compiles `bpf/decap.c` into `dir` (clang) and attaches it to every
    /// backend's port (native XDP, else generic).
    pub fn attach_decap(&self) -> Result<()> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf/decap.c");
        let obj = self.dir.join("decap.o");
        let inc = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
        let out = std::process::Command::new("clang")
            .args(["-O2", "-g", "-target", "bpf", &inc, "-c"])
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .output()
            .map_err(|x| Error::io("running clang (install clang, llvm and libbpf-dev)", x))?;
        if !out.status.success() {
            return Err(Error::Setup(format!(
                "clang failed on decap.c: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let o = obj.display().to_string();
        for b in &self.backends {
            if self.net.ip(b, &["link", "set", "dev", "eth0", "xdp", "obj", &o, "sec", "xdp"]).is_err() {
                self.net.ip(b, &["link", "set", "dev", "eth0", "xdpgeneric", "obj", &o, "sec", "xdp"]).map_err(e)?;
            }
        }
        Ok(())
    }

    /// Attaches an `XDP_PASS` program to the LB's peer port (`p0` on the
    /// bridge; native XDP). `--io xdp` transmits with `XDP_TX`, which on a
    /// veth puts the frame on the peer's XDP ring; the peer takes frames off
    /// it in NAPI, and veth schedules that NAPI after an `XDP_TX` only when
    /// the peer has an XDP program (with GRO alone the ring fills up and
    /// every later frame is dropped as `rx_queue_0_xdp_tx_errors`, except
    /// when the LB's own kernel traffic happens to schedule the NAPI).
    pub fn lb_peer_napi(&self) -> Result<()> {
        self.peer_pass(&self.peer_xdp, "p0")
    }

    /// Attaches an `XDP_PASS` program to client 0's peer port (`p1`): the
    /// XDP generator's frames (`ndo_xdp_xmit` on the client's `eth0`) are
    /// taken only by a peer with NAPI (see [`Self::lb_peer_napi`]).
    pub fn client_peer_napi(&self) -> Result<()> {
        self.peer_pass(&self.client_peer_xdp, "p1")
    }

    /// Attaches a generic (skb-mode) `XDP_PASS` program with frags support
    /// to client 0's peer port (`p1`): every frame client 0 sends is moved
    /// into page-pool memory with full XDP headroom there, before the
    /// bridge (see [`crate::xdp::sys::pass_program_frags`]), so the frames
    /// reach the LB's port as a NIC driver's would (no copy at a veth with
    /// an XDP program). Detach with [`Self::client_peer_napi_off`].
    pub fn client_peer_cow(&self) -> Result<()> {
        let mut g = self.client_peer_xdp.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_some() {
            return Ok(());
        }
        let link = testnet::enter(&self.sw, || -> Result<std::os::fd::OwnedFd> {
            let prog = crate::xdp::sys::pass_program_frags()?;
            let ifindex = crate::io::ifindex("p1")? as u32;
            crate::xdp::sys::xdp_link(
                std::os::fd::AsRawFd::as_raw_fd(&prog),
                ifindex,
                crate::xdp::sys::XDP_FLAGS_SKB_MODE,
            )
        })
        .map_err(e)??;
        *g = Some(link);
        Ok(())
    }

    /// Detaches [`Self::client_peer_napi`]'s program.
    pub fn client_peer_napi_off(&self) {
        self.client_peer_xdp.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn peer_pass(&self, slot: &std::sync::Mutex<Option<std::os::fd::OwnedFd>>, port: &str) -> Result<()> {
        let mut g = slot.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_some() {
            return Ok(());
        }
        let link = testnet::enter(&self.sw, || -> Result<std::os::fd::OwnedFd> {
            let prog = crate::xdp::sys::pass_program()?;
            let ifindex = crate::io::ifindex(port)? as u32;
            crate::xdp::sys::xdp_link(
                std::os::fd::AsRawFd::as_raw_fd(&prog),
                ifindex,
                crate::xdp::sys::XDP_FLAGS_DRV_MODE,
            )
        })
        .map_err(e)??;
        *g = Some(link);
        Ok(())
    }

    /// Detaches [`Self::lb_peer_napi`]'s program (the testbed's state).
    pub fn lb_peer_napi_off(&self) {
        self.peer_xdp.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Runs `f` on this thread inside client `i`'s namespace.
    pub fn in_client<R>(&self, i: usize, f: impl FnOnce() -> R) -> Result<R> {
        testnet::enter(&self.clients[i], f).map_err(e)
    }

    /// Runs `f` on this thread inside the LB's namespace (threads it starts stay there).
    pub fn in_lb<R>(&self, f: impl FnOnce() -> R) -> Result<R> {
        testnet::enter(&self.lb, f).map_err(e)
    }

    /// A directory for the test's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Installs the nftables load balancer in the LB namespace for `vip`:80
    /// over `pool` (backend index, weight), kube-proxy style: `numgen random
    /// mod N vmap` over endpoint chains that DNAT, masquerade so replies
    /// return through conntrack. Forwarding is turned on. Call again to
    /// change the pool (the dispatch chain is replaced atomically; existing
    /// connections keep their conntrack entries).
    pub fn nft_lb(&self, vip: Ipv4Addr, pool: &[(usize, u32)]) -> Result<()> {
        self.net.run(&self.lb, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]).map_err(e)?;
        let mut s = String::from("table ip kplb {}\nflush table ip kplb\ntable ip kplb {\n");
        for i in 1..=self.backends.len() {
            s += &format!("  chain ep{i} {{ dnat to {}; }}\n", backend4(i));
        }
        let mut elems = Vec::new();
        for &(i, w) in pool {
            for _ in 0..w {
                elems.push(format!("{} : jump ep{i}", elems.len()));
            }
        }
        s += &format!("  chain svc {{ numgen random mod {} vmap {{ {} }}; }}\n", elems.len().max(1), elems.join(", "));
        s += &format!(
            "  chain pre {{ type nat hook prerouting priority dstnat; ip daddr {vip} tcp dport 80 jump svc; }}\n"
        );
        s += "  chain post { type nat hook postrouting priority srcnat; ct status dnat masquerade; }\n}\n";
        let f = self.dir.join("kplb.nft");
        std::fs::write(&f, s).map_err(|x| Error::io("writing nft rules", x))?;
        self.net.run(&self.lb, &["nft", "-f", &f.display().to_string()]).map_err(e)?;
        Ok(())
    }

    /// Removes the nftables load balancer and turns forwarding off.
    pub fn nft_clear(&self) -> Result<()> {
        let _ = self.net.run(&self.lb, &["nft", "delete", "table", "ip", "kplb"]);
        self.net.run(&self.lb, &["sysctl", "-qw", "net.ipv4.ip_forward=0"]).map_err(e)?;
        let _ = self.net.run(&self.lb, &["conntrack", "-F"]);
        Ok(())
    }
}

/// A keep-alive HTTP/1.1 connection that records the backend of every reply.
pub struct Conn {
    r: BufReader<TcpStream>,
    host: String,
}

impl Conn {
    /// Connects (from the calling thread's namespace) with a timeout.
    pub fn open(addr: SocketAddr, timeout: Duration) -> std::io::Result<Self> {
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)?;
        let host = match addr.ip() {
            IpAddr::V4(a) => a.to_string(),
            IpAddr::V6(a) => format!("[{a}]"),
        };
        Ok(Self { r: BufReader::new(s), host })
    }

    /// One request; the body of the reply (the backend's identity).
    pub fn get(&mut self) -> std::io::Result<String> {
        write!(self.r.get_mut(), "GET / HTTP/1.1\r\nHost: {}\r\n\r\n", self.host)?;
        read_reply(&mut self.r)
    }
}

fn read_reply(r: &mut BufReader<TcpStream>) -> std::io::Result<String> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    if !line.starts_with("HTTP/1.1 200") {
        return Err(bad(&format!("status {}", line.trim())));
    }
    let mut len = None;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad("headers cut"));
        }
        let l = line.trim();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let n = len.ok_or_else(|| bad("no content-length"))?;
    let mut body = vec![0u8; n.min(4096)];
    r.read_exact(&mut body)?;
    Ok(String::from_utf8_lossy(&body).trim().to_string())
}

/// One request on a fresh connection (closed after); the backend's identity.
pub fn fetch_once(addr: SocketAddr, timeout: Duration) -> std::io::Result<String> {
    let mut c = Conn::open(addr, timeout)?;
    c.get()
}

/// Outcome of a churn run for one connection.
#[derive(Debug, Clone, Default)]
pub struct ConnRecord {
    /// Backend of the first reply.
    pub first: String,
    /// Replies from a different backend.
    pub changes: u32,
    /// Errors (reset, timeout, closed): the connection broke.
    pub broken: bool,
    /// Replies received.
    pub replies: u64,
}

/// Drives `conns` (each with the backend of its first reply) in `threads`
/// threads, round after round, until `stop`: every reply's backend is
/// compared with the first one. Records come back in the order given.
pub fn drive(conns: Vec<(Conn, String)>, threads: usize, stop: &std::sync::atomic::AtomicBool) -> Vec<ConnRecord> {
    let mut parts: Vec<Vec<(Conn, ConnRecord)>> = (0..threads.max(1)).map(|_| Vec::new()).collect();
    let n = parts.len();
    let total = conns.len();
    for (i, (c, first)) in conns.into_iter().enumerate() {
        parts[i % n].push((c, ConnRecord { first, replies: 1, ..ConnRecord::default() }));
    }
    std::thread::scope(|s| {
        let hs: Vec<_> = parts
            .into_iter()
            .map(|mut part| {
                s.spawn(move || {
                    loop {
                        let last = stop.load(std::sync::atomic::Ordering::Relaxed);
                        for (c, r) in part.iter_mut() {
                            if r.broken {
                                continue;
                            }
                            match c.get() {
                                Ok(b) => {
                                    if r.first != b {
                                        r.changes += 1;
                                    }
                                    r.replies += 1;
                                }
                                Err(_) => r.broken = true,
                            }
                        }
                        if last {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    part.into_iter().map(|(_, r)| r).collect::<Vec<_>>()
                })
            })
            .collect();
        let per: Vec<Vec<ConnRecord>> = hs.into_iter().map(|h| h.join().unwrap_or_default()).collect();
        // Back to the original order (connection i went to part i % n).
        let mut out = Vec::with_capacity(total);
        let mut its: Vec<_> = per.into_iter().map(|v| v.into_iter()).collect();
        for i in 0..total {
            if let Some(r) = its[i % n].next() {
                out.push(r);
            }
        }
        out
    })
}
