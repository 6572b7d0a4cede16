//! Thin, checked wrappers over the system calls the back ends share.

use crate::{Error, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The index of interface `name` in the current network namespace.
pub(crate) fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name).map_err(|_| Error::InvalidParameter(format!("interface name {name:?} contains NUL")))?;
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(Error::InvalidParameter(format!("interface name {name:?}: 1 to 15 bytes")));
    }
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 { Err(Error::NoSuchInterface(name.to_string())) } else { Ok(i) }
}

/// `socket(domain, ty, proto)` as an owned fd.
pub(crate) fn socket(domain: i32, ty: i32, proto: i32, what: &str) -> Result<OwnedFd> {
    // SAFETY: plain system call; the result is checked before being wrapped.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(Error::last_os(what));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain-old-data value.
pub(crate) fn setsockopt<T: Copy>(fd: &OwnedFd, level: i32, name: i32, val: &T, what: &str) -> Result<()> {
    // SAFETY: `val` points to `size_of::<T>()` readable bytes; the kernel copies them.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 { Err(Error::last_os(what)) } else { Ok(()) }
}

/// `getsockopt` into a plain-old-data value (zero-initialised first).
pub(crate) fn getsockopt<T: Copy>(fd: RawFd, level: i32, name: i32, what: &str) -> Result<T> {
    // SAFETY: T is plain old data (Copy, repr(C) at the call sites); all-zero is a valid value.
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` has `len` writable bytes; the kernel writes at most `len`.
    let r = unsafe { libc::getsockopt(fd, level, name, &mut v as *mut T as *mut libc::c_void, &mut len) };
    if r != 0 { Err(Error::last_os(what)) } else { Ok(v) }
}

/// `poll()` one fd for `events`; `Ok(true)` when some of them (or an error condition) are ready.
pub(crate) fn poll1(fd: RawFd, events: i16, timeout: Duration) -> Result<bool> {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(Error::Sys { what: "poll".into(), source: e });
    }
    Ok(r > 0)
}

/// A shared memory mapping unmapped on drop.
pub(crate) struct Mmap {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access is synchronised by the owner.
unsafe impl Send for Mmap {}

impl Mmap {
    /// `mmap(fd, offset)` shared read-write (`fd` None: anonymous memory).
    pub(crate) fn map(fd: Option<RawFd>, len: usize, offset: i64, extra_flags: i32, what: &str) -> Result<Mmap> {
        let flags = match fd {
            Some(_) => libc::MAP_SHARED | libc::MAP_POPULATE,
            None => libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
        } | extra_flags;
        // SAFETY: a new mapping at an address of the kernel's choice; checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd.unwrap_or(-1), offset)
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os(what));
        }
        Ok(Mmap { ptr: p as *mut u8, len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; nothing refers to it after drop.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Set or clear IFF_PROMISC through a PACKET_MR_PROMISC membership (dropped with the socket).
pub(crate) fn packet_promisc(fd: &OwnedFd, ifindex: u32, what: &str) -> Result<()> {
    /// `struct packet_mreq` of <linux/if_packet.h>.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct PacketMreq {
        ifindex: i32,
        ty: u16,
        alen: u16,
        address: [u8; 8],
    }
    const PACKET_ADD_MEMBERSHIP: i32 = 1;
    const PACKET_MR_PROMISC: u16 = 1;
    let mr = PacketMreq { ifindex: ifindex as i32, ty: PACKET_MR_PROMISC, alen: 0, address: [0; 8] };
    setsockopt(fd, libc::SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, what)
}

/// Run ethtool command `T` (whose first field is the command number) on interface `name`.
pub(crate) fn ethtool<T>(name: &str, data: &mut T) -> Option<()> {
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut libc::c_void,
        _pad: [u8; 16],
    }
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return None;
    }
    let sock = socket(libc::AF_INET, libc::SOCK_DGRAM, 0, "socket for SIOCETHTOOL").ok()?;
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: data as *mut T as *mut libc::c_void, _pad: [0; 16] };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: SIOCETHTOOL with a valid ifreq whose data points to a live, writable ethtool
    // structure of the size the kernel writes for the command in its first field.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) };
    (r == 0).then_some(())
}

/// The driver name of interface `name` (ETHTOOL_GDRVINFO), e.g. `"veth"`, if the kernel says.
pub(crate) fn driver_name(name: &str) -> Option<String> {
    #[repr(C)]
    struct DrvInfo {
        cmd: u32,
        driver: [u8; 32],
        rest: [u8; 32 * 4 + 12 + 4 * 5],
    }
    let mut info = DrvInfo { cmd: 3, driver: [0; 32], rest: [0; 32 * 4 + 12 + 4 * 5] };
    ethtool(name, &mut info)?;
    let end = info.driver.iter().position(|&c| c == 0).unwrap_or(32);
    Some(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

/// Receive queues of interface `name` (ETHTOOL_GCHANNELS: rx + combined), if the driver says.
pub(crate) fn rx_queues(name: &str) -> Option<u32> {
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined, rx_count, tx_count,
    // other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = 0x3c;
    ethtool(name, &mut ch)?;
    Some(ch[5] + ch[8])
}

/// Turn transmit checksum offload of interface `name` on or off (ETHTOOL_STXCSUM).
pub(crate) fn set_tx_checksum_offload(name: &str, on: bool) -> Result<()> {
    // struct ethtool_value { cmd, data }.
    let mut v = [0x17u32, on as u32];
    ethtool(name, &mut v).ok_or_else(|| Error::last_os(format!("ETHTOOL_STXCSUM on {name}")))
}

/// The hardware (MAC) address of interface `name` in the calling thread's network namespace
/// (`SIOCGIFHWADDR`).
pub fn interface_mac(name: &str) -> Result<crate::MacAddr> {
    ifindex(name)?;
    let sock = socket(libc::AF_INET, libc::SOCK_DGRAM, 0, &format!("socket for SIOCGIFHWADDR on {name}"))?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR reads ifr_name (NUL-terminated: the name is shorter than IFNAMSIZ,
    // checked by `ifindex`) and writes ifr_hwaddr inside the ifreq we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr) } != 0 {
        return Err(Error::last_os(format!("SIOCGIFHWADDR (read the MAC address of {name})")));
    }
    // SAFETY: after a successful SIOCGIFHWADDR the union holds a sockaddr in ifru_hwaddr.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut m = [0u8; 6];
    for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(crate::MacAddr(m))
}
