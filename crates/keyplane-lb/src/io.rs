//! Packet I/O on the LB's port: an `AF_PACKET` raw socket with burst
//! receive (`recvmmsg`) and send (`sendmmsg`), and the port's MAC and
//! addresses (`getifaddrs`).
//!
//! (A local piece: the shared packet crate `keyplane-net`, with AF_XDP, was
//! being written in parallel. `AF_PACKET` sees a copy of every frame while
//! the kernel keeps its own, so the LB's namespace must not forward: frames
//! to a VIP are dropped by the kernel as not local, ARP and ND for the
//! port's own addresses are answered by the kernel.)

use crate::config::Prefix;
use crate::dataplane::{BURST, PortInfo};
use crate::error::{Error, Result};
use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const ETH_P_ALL: u16 = 0x0003;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Largest frame received.
pub const RX_FRAME: usize = 2048;

/// An `AF_PACKET` socket bound to one interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    /// Interface index.
    pub ifindex: i32,
    rx: Vec<[u8; RX_FRAME]>,
    lens: Vec<usize>,
}

/// Index of an interface.
pub fn ifindex(name: &str) -> Result<i32> {
    let c = CString::new(name).map_err(|_| Error::Setup(format!("interface name {name:?} contains a NUL")))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(Error::Setup(format!("no interface {name:?} in this network namespace (check --port)")));
    }
    Ok(i as i32)
}

/// The port's MAC and addresses, and its on-link prefixes.
pub fn port_info(name: &str) -> Result<(PortInfo, Vec<Prefix>)> {
    let mac_s = std::fs::read_to_string(format!("/sys/class/net/{name}/address"))
        .map_err(|e| Error::io(format!("reading the MAC of {name}"), e))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = mac_s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(Error::Setup(format!("{name} has no Ethernet MAC ({})", mac_s.trim())));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| Error::Setup(format!("bad MAC {mac_s:?} on {name}")))?;
    }
    let mut prefixes = Vec::new();
    let mut ifa: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut ifa) } != 0 {
        return Err(Error::last_os("getifaddrs"));
    }
    let mut p = ifa;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let a = unsafe { &*p };
        p = a.ifa_next;
        if a.ifa_addr.is_null() || a.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let n = unsafe { std::ffi::CStr::from_ptr(a.ifa_name) };
        if n.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr / ifa_netmask point at sockaddrs of the family in sa_family.
        unsafe {
            match (*a.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let s = &*(a.ifa_addr as *const libc::sockaddr_in);
                    let m = &*(a.ifa_netmask as *const libc::sockaddr_in);
                    let addr = Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
                    let len = u32::from_be(m.sin_addr.s_addr).count_ones() as u8;
                    prefixes.push(Prefix { addr: addr.into(), len });
                }
                libc::AF_INET6 => {
                    let s = &*(a.ifa_addr as *const libc::sockaddr_in6);
                    let m = &*(a.ifa_netmask as *const libc::sockaddr_in6);
                    let addr = Ipv6Addr::from(s.sin6_addr.s6_addr);
                    let len = m.sin6_addr.s6_addr.iter().map(|b| b.count_ones()).sum::<u32>() as u8;
                    prefixes.push(Prefix { addr: addr.into(), len });
                }
                _ => {}
            }
        }
    }
    // SAFETY: `ifa` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(ifa) };
    let v4 = prefixes.iter().find_map(|p| match p.addr {
        IpAddr::V4(a) => Some(a),
        _ => None,
    });
    let v6 = prefixes.iter().find_map(|p| match p.addr {
        IpAddr::V6(a) if a.segments()[0] & 0xffc0 != 0xfe80 => Some(a),
        _ => None,
    });
    Ok((PortInfo { mac, v4, v6 }, prefixes))
}

impl PacketSocket {
    /// Opens a raw socket on `name` that receives every frame addressed to
    /// the host (not its own transmissions) with a receive timeout.
    pub fn open(name: &str, timeout_ms: u32) -> Result<Self> {
        let ifindex = ifindex(name)?;
        // SAFETY: plain socket(2) call.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (ETH_P_ALL.to_be()) as i32) };
        if fd < 0 {
            return Err(Error::last_os("socket(AF_PACKET) (needs CAP_NET_RAW: run as root)"));
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain data; zero is a valid start.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r != 0 {
            return Err(Error::last_os(format!("binding a packet socket to {name}")));
        }
        let one: libc::c_int = 1;
        set(&fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &one)?;
        let buf: libc::c_int = 8 << 20;
        let _ = set(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &buf);
        let _ = set(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &buf);
        let tv = libc::timeval { tv_sec: (timeout_ms / 1000) as _, tv_usec: ((timeout_ms % 1000) * 1000) as _ };
        set(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
        Ok(Self { fd, ifindex, rx: vec![[0u8; RX_FRAME]; BURST], lens: vec![0; BURST] })
    }

    /// Receives up to [`BURST`] frames (waits for the first up to the
    /// timeout); frames addressed to other hosts are skipped. Returns the
    /// frames of this burst.
    pub fn recv(&mut self) -> Vec<&[u8]> {
        // SAFETY: arrays of plain C structs; zero is valid.
        let mut hdrs: [libc::mmsghdr; BURST] = unsafe { std::mem::zeroed() };
        let mut iov: [libc::iovec; BURST] = unsafe { std::mem::zeroed() };
        let mut from: [libc::sockaddr_ll; BURST] = unsafe { std::mem::zeroed() };
        for i in 0..BURST {
            iov[i] = libc::iovec { iov_base: self.rx[i].as_mut_ptr().cast(), iov_len: RX_FRAME };
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
            hdrs[i].msg_hdr.msg_name = (&mut from[i] as *mut libc::sockaddr_ll).cast();
            hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        }
        // SAFETY: every header points at a live iovec over a buffer of
        // RX_FRAME bytes and a sockaddr_ll of the size given.
        let n = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                BURST as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n <= 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            self.lens[i] = (hdrs[i].msg_len as usize).min(RX_FRAME);
            // PACKET_HOST, BROADCAST, MULTICAST; not OTHERHOST (3) / OUTGOING (4).
            if from[i].sll_pkttype <= 2 && hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC == 0 {
                out.push(&self.rx[i][..self.lens[i]]);
            }
        }
        out
    }

    /// Sends frames; returns how many the kernel took.
    pub fn send<'a>(&self, frames: impl Iterator<Item = &'a [u8]>) -> usize {
        // SAFETY: arrays of plain C structs; zero is valid.
        let mut hdrs: [libc::mmsghdr; BURST + 8] = unsafe { std::mem::zeroed() };
        let mut iov: [libc::iovec; BURST + 8] = unsafe { std::mem::zeroed() };
        let mut n = 0;
        for f in frames.take(BURST + 8) {
            iov[n] = libc::iovec { iov_base: f.as_ptr() as *mut _, iov_len: f.len() };
            hdrs[n].msg_hdr.msg_iov = &mut iov[n];
            hdrs[n].msg_hdr.msg_iovlen = 1;
            n += 1;
        }
        let mut sent = 0;
        while sent < n {
            // SAFETY: headers sent..n point at live iovecs over the frames.
            let r = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), hdrs[sent..].as_mut_ptr(), (n - sent) as u32, 0) };
            if r <= 0 {
                break;
            }
            sent += r as usize;
        }
        sent
    }
}

fn set<T>(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, v: &T) -> Result<()> {
    // SAFETY: `v` is a valid value of the size passed.
    let r = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, opt, (v as *const T).cast(), std::mem::size_of::<T>() as u32)
    };
    if r != 0 { Err(Error::last_os(format!("setsockopt({level}, {opt})"))) } else { Ok(()) }
}
