//! A DIR-24-8 longest-prefix-match array (Gupta, Lin, McKeown, "Routing
//! lookups in hardware at memory access speeds", INFOCOM 1998; the layout
//! of DPDK's `rte_lpm`): the baseline for `keyplane::lpm` in
//! `examples/lpm.rs`.
//!
//! `tbl24` has one 16-bit entry per /24: `next_hop + 1` (0 = no route) of
//! the longest prefix of length ≤ 24 covering it, or, with the top bit set,
//! the number of a 256-entry `tbl8` group that resolves the last 8 bits for
//! /24s holding longer prefixes. One memory read for most addresses, two
//! for addresses under a longer-than-/24 prefix. Static: built once from a
//! route list (the benchmark measures lookups and memory, not updates).

/// DIR-24-8 table over IPv4 routes (next hops below 2^15 − 1).
#[derive(Debug, Clone)]
pub struct Dir24 {
    tbl24: Vec<u16>,
    tbl8: Vec<u16>,
}

const PTR: u16 = 0x8000;

impl Dir24 {
    /// Builds from `(network bits, length, next hop)`; host bits ignored.
    /// Fails beyond 32,767 tbl8 groups or for next hops ≥ 32,767.
    pub fn build(routes: &[(u32, u8, u16)]) -> Result<Self, String> {
        let mut sorted: Vec<(u32, u8, u16)> = routes.to_vec();
        sorted.sort_by_key(|r| r.1);
        let mut tbl24 = vec![0u16; 1 << 24];
        crate_advise(&tbl24);
        let mut tbl8: Vec<u16> = Vec::new();
        for &(a, len, nh) in &sorted {
            if nh >= PTR - 1 {
                return Err(format!("next hop {nh} too wide for DIR-24-8's 15-bit entries"));
            }
            let a = if len == 0 { 0 } else { a & (u32::MAX << (32 - len as u32)) };
            if len <= 24 {
                let first = (a >> 8) as usize;
                let n = 1usize << (24 - len as u32);
                // Ascending lengths: a longer prefix overwrites a shorter one.
                tbl24[first..first + n].fill(nh + 1);
            } else {
                let i = (a >> 8) as usize;
                let g = if tbl24[i] & PTR != 0 {
                    (tbl24[i] & !PTR) as usize
                } else {
                    let g = tbl8.len() / 256;
                    if g >= PTR as usize {
                        return Err("more than 32,767 tbl8 groups".into());
                    }
                    tbl8.extend(std::iter::repeat_n(tbl24[i], 256));
                    tbl24[i] = PTR | g as u16;
                    g
                };
                let first = g * 256 + (a & 0xff) as usize;
                tbl8[first..first + (1usize << (32 - len as u32))].fill(nh + 1);
            }
        }
        Ok(Self { tbl24, tbl8 })
    }

    /// Longest-prefix match.
    #[inline(always)]
    pub fn get(&self, addr: u32) -> Option<u16> {
        let e = self.tbl24[(addr >> 8) as usize];
        let e = if e & PTR != 0 { self.tbl8[((e & !PTR) as usize) << 8 | (addr & 0xff) as usize] } else { e };
        e.checked_sub(1)
    }

    /// Bytes held by both tables.
    pub fn memory_bytes(&self) -> usize {
        self.tbl24.len() * 2 + self.tbl8.len() * 2
    }

    /// tbl8 groups in use.
    pub fn groups(&self) -> usize {
        self.tbl8.len() / 256
    }
}

fn crate_advise<T>(v: &[T]) {
    keyplane::ext::mem::advise_hugepages(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_naive_search() {
        let routes = [
            (0u32, 0u8, 9u16),
            (0x0a00_0000, 8, 1),
            (0x0a01_0200, 24, 2),
            (0x0a01_0203, 32, 3),
            (0x0a01_0280, 25, 4),
            (0x0a01_0000, 16, 5),
        ];
        let t = Dir24::build(&routes).unwrap();
        let naive = |a: u32| {
            routes
                .iter()
                .filter(|&&(n, l, _)| l == 0 || (a ^ n) >> (32 - l as u32) == 0)
                .max_by_key(|r| r.1)
                .map(|r| r.2)
        };
        for a in [0x0a01_0203u32, 0x0a01_0204, 0x0a01_0281, 0x0a01_0301, 0x0a02_0000, 0x0b00_0000, 0x0a01_02ff] {
            assert_eq!(t.get(a), naive(a), "{a:#x}");
        }
        assert_eq!(t.groups(), 1);
    }
}
