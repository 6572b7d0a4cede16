//! The pps benchmark's XDP live-frames generator (`bpf/gen_xdp.c`): frames
//! leave a veth as a NIC driver's `XDP_TX` frames would (page-pool pages
//! with full headroom), so the receiving veth builds skbs around them and
//! the LB's veth runs its XDP program without copying the frame first (an
//! AF_PACKET sender's skbs have a kmalloc'ed head and little headroom, and
//! veth copies those). Frame `i` is flow `i * base / sample` of the measured
//! sample (see the C file); the template sets every other byte.

use super::{elf, sys};
use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, OwnedFd};

#[cfg(kp_gen_obj)]
static OBJECT: Option<&[u8]> = Some(include_bytes!(concat!(env!("OUT_DIR"), "/gen_xdp.o")));
#[cfg(not(kp_gen_obj))]
static OBJECT: Option<&[u8]> = None;

/// Bytes of `struct gen` in `gen_xdp.c`.
const PARAM_BYTES: usize = 32;

/// Which flows the generator's frames carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flows {
    /// Frames in the sample (frame `i` is sample entry `i % sample`); > 0.
    pub sample: u32,
    /// Flows the sample is spread over.
    pub base: u32,
    /// 1: every frame to VIP 198.18.100.1; else VIP 198.18.100.1 + flow % 64.
    pub vips: u32,
}

/// The loaded generator program with its parameters.
#[derive(Debug)]
pub struct Generator {
    prog: OwnedFd,
    map: OwnedFd,
    template: Vec<u8>,
    params: [u8; PARAM_BYTES],
}

/// 16-bit one's-complement sum of `b` (big-endian words, an odd last byte
/// padded with zero), folded to 16 bits (not inverted).
fn sum16(b: &[u8], acc: u64) -> u32 {
    let mut s = acc;
    for w in b.chunks(2) {
        s += u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u64;
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u32
}

impl Generator {
    /// Loads the program (root) for `template`: an Ethernet + IPv4 (20-byte
    /// header) + TCP (20-byte header) frame whose addresses, source port
    /// and checksums the program rewrites on every run.
    pub fn load(template: &[u8], flows: Flows) -> Result<Self> {
        if template.len() < 54 || template.len() > 3000 || template[12..14] != [8, 0] || template[14] != 0x45 {
            return Err(Error::Setup("generator template: not an Ethernet/IPv4/TCP frame of 54-3000 bytes".into()));
        }
        if flows.sample == 0 {
            return Err(Error::Setup("generator: empty sample".into()));
        }
        let obj = OBJECT
            .ok_or_else(|| Error::Setup("built without bpf/gen_xdp.c (clang was missing at build time)".into()))?;
        let obj = elf::parse(obj, "xdp")?;
        let [d] = obj.maps.as_slice() else {
            return Err(Error::Setup("gen_xdp.o: expected one map".into()));
        };
        if d.value as usize != PARAM_BYTES {
            return Err(Error::Setup("gen_xdp.o: parameter size".into()));
        }
        let map = sys::map_create(&d.name, d.ty, d.key, d.value, d.entries, d.flags)?;
        let mut insns = obj.insns.clone();
        for &(i, _) in &obj.relocs {
            let fd = map.as_raw_fd() as u32 as u64;
            insns[i] = (insns[i] & 0x0000_0000_ffff_0fff) | (1 << 12) | (fd << 32);
            insns[i + 1] &= 0x0000_0000_ffff_ffff;
        }
        let prog = sys::prog_load("kp_gen", &insns)?;
        // Sums of the template with the fields the program writes zeroed.
        let mut t = template.to_vec();
        t[24..36].fill(0);
        t[50..52].fill(0);
        let ip_sum = sum16(&t[14..34], 0);
        let l4 = (t.len() - 34) as u64;
        let tcp_sum = sum16(&t[34..], 6 + l4);
        let mut params = [0u8; PARAM_BYTES];
        params[8..12].copy_from_slice(&flows.sample.to_ne_bytes());
        params[12..16].copy_from_slice(&flows.base.to_ne_bytes());
        params[16..20].copy_from_slice(&flows.vips.to_ne_bytes());
        params[20..24].copy_from_slice(&ip_sum.to_ne_bytes());
        params[24..28].copy_from_slice(&tcp_sum.to_ne_bytes());
        let g = Self { prog, map, template: template.to_vec(), params };
        g.seek(0)?;
        Ok(g)
    }

    /// The next run makes frame `i`.
    pub fn seek(&self, i: u64) -> Result<()> {
        let mut p = self.params;
        p[0..8].copy_from_slice(&i.to_ne_bytes());
        sys::map_update(self.map.as_raw_fd(), &0u32.to_ne_bytes(), &p)
    }

    /// Runs the program once, not live: the next frame, as it would be sent.
    pub fn next_frame(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.template.len()];
        let (verdict, n) = sys::test_run(&self.prog, &self.template, &mut out)?;
        if verdict != super::XDP_TX || n != out.len() {
            return Err(Error::Setup(format!("generator: verdict {verdict}, {n} bytes")));
        }
        Ok(out)
    }

    /// Sends the next `repeat` frames on `ifindex` (of the calling thread's
    /// namespace) with `XDP_TX` in live-frames mode; the device's peer
    /// needs an XDP program (veth takes `ndo_xdp_xmit` frames only then).
    pub fn send(&self, ifindex: u32, repeat: u32) -> Result<()> {
        sys::test_run_live(self.prog.as_raw_fd(), &self.template, ifindex, repeat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_fold_and_pad() {
        assert_eq!(sum16(&[0xff, 0xff, 0, 1], 0), 1);
        assert_eq!(sum16(&[1], 0), 0x100);
        assert_eq!(sum16(&[], 0x1_0000), 1);
    }

    #[test]
    fn bad_templates_are_errors() {
        let f = Flows { sample: 1, base: 1, vips: 1 };
        assert!(Generator::load(&[0u8; 20], f).is_err());
        let mut t = vec![0u8; 64];
        assert!(Generator::load(&t, f).is_err());
        t[12] = 8;
        t[14] = 0x45;
        assert!(Generator::load(&t, Flows { sample: 0, ..f }).is_err());
    }
}
