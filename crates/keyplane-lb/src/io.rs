//! The LB's port: its MAC (`keyplane_net::interface_mac`), addresses and
//! on-link prefixes (`getifaddrs`), and opening it with `keyplane-net`.
//!
//! **Which I/O.** With `AF_PACKET` the LB sees a copy of every frame while
//! the kernel keeps its own: the kernel answers ARP / ND for the port's own
//! addresses and carries the health checks' TCP connections, and, with
//! forwarding off in the LB's namespace, drops the VIP packets as not
//! local. `AF_XDP` (the XDP redirect program of `keyplane-net`) takes every
//! frame of the port away from the kernel: no ARP / ND answers for the
//! port, no health-check replies. So `--io auto` means `AF_PACKET` for the
//! LB; `--io af_xdp` is for a dedicated port (health `kind = "none"`,
//! static neighbour entries on the senders), as used by the benchmark.

use crate::config::Prefix;
use crate::dataplane::PortInfo;
use crate::error::{Error, Result};
use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
    // The MAC from SIOCGIFHWADDR on a socket of the calling thread's
    // namespace (/sys shows the namespace sysfs was mounted in).
    let mac = keyplane_net::interface_mac(name)
        .map_err(|e| Error::Setup(format!("{name}: no Ethernet MAC ({e}; check --port)")))?
        .0;
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

/// Opens the LB's port (see the module docs for what `Auto` means here).
pub fn open(name: &str, kind: keyplane_net::IoKind) -> Result<Box<dyn keyplane_net::Port>> {
    let kind = match kind {
        keyplane_net::IoKind::Auto => keyplane_net::IoKind::AfPacket,
        k => k,
    };
    let opts = keyplane_net::PortOptions { promiscuous: false, ..keyplane_net::PortOptions::default() };
    keyplane_net::open(name, kind, 0, &opts).map_err(|e| Error::Setup(format!("opening {name}: {e}")))
}
