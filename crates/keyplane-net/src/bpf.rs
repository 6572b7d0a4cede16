//! The raw `bpf()` system call, shared by the AF_XDP attachment (`afxdp`) and
//! keyplane-lb's XDP loader: `union bpf_attr` as bytes and the call itself.
//! Each user wraps [`call`] in its own error type and states, per command,
//! that the pointer fields it set are valid.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `union bpf_attr`, as bytes: each command fills the fields it uses, the
/// rest stays zero.
#[repr(C, align(8))]
pub struct Attr([u8; 128]);

impl Default for Attr {
    fn default() -> Self {
        Self::new()
    }
}

impl Attr {
    /// All zeros.
    pub fn new() -> Self {
        Attr([0; 128])
    }
    /// Sets the native-endian `u32` at byte `off` (panics past 124: a
    /// programming error, offsets are constants).
    pub fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    /// Sets the native-endian `u64` at byte `off`.
    pub fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    /// The native-endian `u32` at byte `off` (what the kernel wrote back).
    pub fn get_u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.0[off..off + 4].try_into().expect("4 bytes"))
    }
    /// Copies `name` (at most 15 bytes, NUL-terminated by the zeros after
    /// it) to byte `off` (`map_name`, `prog_name`).
    pub fn name(&mut self, off: usize, name: &str) -> &mut Self {
        let n = name.as_bytes();
        let k = n.len().min(15);
        self.0[off..off + k].copy_from_slice(&n[..k]);
        self
    }
}

/// `bpf(cmd, attr, sizeof attr)`: the call's non-negative result, or the OS
/// error.
///
/// # Safety
///
/// Every pointer field `attr` carries for `cmd` points to a buffer that is
/// valid (for writes where the kernel writes) for the size passed with it,
/// and outlives the call.
pub unsafe fn call(cmd: i32, attr: &mut Attr) -> std::io::Result<i64> {
    // SAFETY: `attr` is a 128-byte, 8-aligned bpf_attr; the caller vouches
    // for the pointers in it; the kernel reads at most the size passed.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as u32) };
    if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(r) }
}

/// As [`call`], for a command that returns a new file descriptor (map or
/// program creation, links), which the result then owns.
///
/// # Safety
///
/// As for [`call`], and `cmd` is a command whose result is a descriptor.
pub unsafe fn call_fd(cmd: i32, attr: &mut Attr) -> std::io::Result<OwnedFd> {
    // SAFETY: forwarded from the caller.
    let r = unsafe { call(cmd, attr) }?;
    // SAFETY: the caller guarantees `cmd` returns a fresh descriptor, which
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}
