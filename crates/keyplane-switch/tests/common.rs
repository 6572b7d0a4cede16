//! Shared pieces of the switch's namespace tests: the 4-host topology, an
//! in-process switch in the switch namespace, pings and a byte-checked TCP
//! transfer between hosts.
#![allow(dead_code)]

use keyplane_any::{AnyControl, Opts};
use keyplane_net::testnet::{self, TestNet};
use keyplane_switch::{Config, Running, Shutdown};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

/// Prints the one-line skip reason and returns true when namespaces cannot be made.
pub fn skip() -> bool {
    match testnet::skip_reason() {
        Some(why) => {
            eprintln!("skipping: {why}");
            true
        }
        None => false,
    }
}

/// MAC of host `i` (1-based in the address plan).
pub fn host_mac(i: usize) -> [u8; 6] {
    testnet::mac(0x5100 + i as u32).0
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_str(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Hosts `h0..hN-1`, each with `eth0` linked to switch port `p<i>`.
pub struct Topo {
    /// The namespaces and links (removed on drop).
    pub net: TestNet,
    /// The switch's namespace.
    pub sw: String,
    /// The hosts' namespaces.
    pub hosts: Vec<String>,
    /// Routed (one subnet per host) rather than bridged.
    pub l3: bool,
    /// Scratch directory for FIB blobs.
    pub dir: PathBuf,
}

impl Topo {
    /// L2: hosts share 198.18.0.0/24 and fd00::/64 (host i is .i+1).
    /// L3: host i lives in 198.18.(i+1).0/24 (gateway .1) and fd00:0:0:(i+1)::/64 (gateway ::1).
    pub fn new(tag: &str, n: usize, l3: bool) -> Topo {
        let mut net = TestNet::new(tag).unwrap();
        let sw = net.add_ns("sw").unwrap();
        // The switch namespace's kernel must not answer or originate anything on the ports.
        net.run(&sw, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]).unwrap();
        net.run(&sw, &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]).unwrap();
        let mut hosts = Vec::new();
        for i in 0..n {
            let h = net.add_ns(&format!("h{i}")).unwrap();
            net.veth(&h, "eth0", &sw, &format!("p{i}")).unwrap();
            net.ip(&h, &["link", "set", "eth0", "down"]).unwrap();
            net.set_mac(&h, "eth0", testnet::mac(0x5100 + i as u32)).unwrap();
            net.up(&h, "eth0").unwrap();
            // veth leaves TCP / UDP checksums to "hardware" (CHECKSUM_PARTIAL); a frame that a
            // packet socket forwards never gets one, so hosts compute them in software, as
            // they would behind a real NIC that a software switch reads from.
            // (keyplane-net's AF_PACKET back end can complete them, AF_XDP cannot.)
            net.tx_checksum_offload(&h, "eth0", false).unwrap();
            if l3 {
                net.addr(&h, "eth0", &format!("{}/24", testnet::v4(i as u8 + 1, 2))).unwrap();
                net.addr(&h, "eth0", &format!("{}/64", testnet::v6(i as u16 + 1, 2))).unwrap();
                net.ip(&h, &["route", "add", "default", "via", &testnet::v4(i as u8 + 1, 1).to_string()]).unwrap();
                net.ip(&h, &["-6", "route", "add", "default", "via", &testnet::v6(i as u16 + 1, 1).to_string()])
                    .unwrap();
            } else {
                net.addr(&h, "eth0", &format!("{}/24", testnet::v4(0, i as u8 + 1))).unwrap();
                net.addr(&h, "eth0", &format!("{}/64", testnet::v6(0, i as u16 + 1))).unwrap();
            }
            hosts.push(h);
        }
        let dir = std::env::temp_dir().join(format!("kp-switch-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Topo { net, sw, hosts, l3, dir }
    }

    /// The switch ports `p0..`, one per host.
    pub fn ports(&self) -> Vec<String> {
        (0..self.hosts.len()).map(|i| format!("p{i}")).collect()
    }

    /// IPv4 address of host `i`.
    pub fn v4(&self, i: usize) -> IpAddr {
        if self.l3 { testnet::v4(i as u8 + 1, 2).into() } else { testnet::v4(0, i as u8 + 1).into() }
    }
    /// IPv6 address of host `i`.
    pub fn v6(&self, i: usize) -> IpAddr {
        if self.l3 { testnet::v6(i as u16 + 1, 2).into() } else { testnet::v6(0, i as u16 + 1).into() }
    }

    /// Starts the switch in the switch namespace.
    pub fn start(&self, cfg: &Config, stop: &Shutdown) -> Running {
        testnet::enter(&self.sw, || keyplane_switch::start(cfg, stop)).unwrap().unwrap()
    }

    /// `ping -c count` from host `from` to `to`; returns (sent, received).
    pub fn ping(&self, from: usize, to: IpAddr, count: u32, interval: &str) -> (u32, u32) {
        let out = self
            .net
            .exec(
                &self.hosts[from],
                &["ping", "-n", "-q", "-c", &count.to_string(), "-i", interval, "-W", "2", &to.to_string()],
            )
            .unwrap();
        parse_ping(&String::from_utf8_lossy(&out.stdout))
    }

    /// Starts `ping -c count -i interval` from host `from` in the background.
    pub fn ping_cmd(&self, from: usize, to: IpAddr, count: u32, interval: &str) -> std::process::Child {
        std::process::Command::new("ip")
            .args(["netns", "exec", &self.hosts[from], "ping", "-n", "-q", "-c", &count.to_string(), "-i", interval])
            .args(["-W", "2", "-w", "30", &to.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Waits for a ping started by [`Topo::ping_cmd`]; (sent, received).
    pub fn wait_ping(&self, c: std::process::Child) -> (u32, u32) {
        let out = c.wait_with_output().unwrap();
        parse_ping(&String::from_utf8_lossy(&out.stdout))
    }

    /// Every host pings every other host over IPv4 and IPv6; panics with the failures.
    pub fn ping_all(&self) {
        let mut bad = Vec::new();
        for a in 0..self.hosts.len() {
            for b in 0..self.hosts.len() {
                if a == b {
                    continue;
                }
                for dst in [self.v4(b), self.v6(b)] {
                    let (s, r) = self.ping(a, dst, 2, "0.05");
                    if self.hosts.len() > 4 && (a == 4 || b == 4) {
                        continue;
                    }
                    if r == 0 || s == 0 {
                        bad.push(format!("h{a} -> {dst}: {r}/{s}"));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "pings failed: {bad:?}");
    }

    /// Sends `bytes` pseudo-random bytes from host `from` to host `to` over
    /// TCP (IPv4 or IPv6) and checks that the receiver got exactly them.
    pub fn tcp_transfer(&self, from: usize, to: usize, v6: bool, bytes: usize, port: u16) {
        let addr = SocketAddr::new(if v6 { self.v6(to) } else { self.v4(to) }, port);
        let listener = testnet::enter(&self.hosts[to], || TcpListener::bind(addr)).unwrap().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut got = Vec::with_capacity(bytes);
            s.read_to_end(&mut got).unwrap();
            got
        });
        let data = pattern(bytes, port as u64);
        let mut c = testnet::enter(&self.hosts[from], || TcpStream::connect_timeout(&addr, Duration::from_secs(5)))
            .unwrap()
            .unwrap();
        c.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(&data).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let got = server.join().unwrap();
        assert_eq!(got.len(), data.len(), "TCP {from}->{to}: length");
        assert!(got == data, "TCP {from}->{to}: bytes differ");
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `n` pseudo-random bytes from `seed` (a transfer's content, checked at the far end).
pub fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x = keyplane::hash::mix64(x);
            x as u8
        })
        .collect()
}

/// (transmitted, received) from `ping -q` output.
pub fn parse_ping(out: &str) -> (u32, u32) {
    for line in out.lines() {
        if line.contains("packets transmitted") {
            let nums: Vec<u32> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|t| t.parse().ok()).collect();
            if nums.len() >= 2 {
                return (nums[0], nums[1]);
            }
        }
    }
    (0, 0)
}

/// An L2 FIB blob over `items` (MAC → port) written into `dir`.
pub fn l2_blob(
    dir: &std::path::Path,
    name: &str,
    structure: &str,
    opts: &str,
    bits: u32,
    items: &[([u8; 6], u64)],
) -> (PathBuf, AnyControl) {
    let ctl =
        AnyControl::build(structure, items.iter().map(|(m, p)| (m.to_vec(), *p)), bits, &Opts::parse(opts).unwrap())
            .unwrap();
    let p = dir.join(name);
    std::fs::write(&p, ctl.export().to_bytes()).unwrap();
    (p, ctl)
}
