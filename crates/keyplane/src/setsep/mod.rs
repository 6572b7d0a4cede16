//! SetSep: ScaleBricks' set-separation table (Zhou, Fan, Lim, Andersen,
//! Kaminsky, Mitzenmacher, Wang, Singh, SIGCOMM 2015, §4 and §5.1).
//!
//! How this structure works, its parameters, guarantees and measured
//! performance: `docs/structures/setsep.md` in the repository. Usage: the
//! examples on [`Control`] and [`Lookup`].

mod control;
mod delta;
mod lookup;
mod records;

pub use control::{Control, Stats};
pub use delta::Delta;
pub use lookup::Lookup;

use crate::error::{Error, Result, mask};
use crate::hash::{hi, mix64, reduce};

/// Buckets per block (§4.4).
pub(crate) const BUCKETS_PER_BLOCK: usize = 256;
/// Groups per block (§4.4).
pub(crate) const GROUPS_PER_BLOCK: usize = 64;
/// Keys per block at the nominal load (4 per bucket, 16 per group).
pub(crate) const KEYS_PER_BLOCK: usize = 1024;
/// Largest number of blocks (2^31 buckets, about 8·10^9 keys).
pub(crate) const MAX_BLOCKS: u32 = 1 << 23;

/// Construction and update options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// `x`: bits of the hash index per value bit (1..=24). Index `2^x − 1` is
    /// reserved as the fallback marker, so `2^x − 1` functions are tried.
    pub index_bits: u32,
    /// `y = m`: bits of the array per value bit (2, 4, 8, 16 or 32).
    pub array_bits: u32,
    /// Threads used for construction (groups of different blocks are
    /// independent, §5.1 "Hardware Accelerated Construction").
    pub threads: usize,
    /// Randomized greedy runs per block; the best assignment is kept (§4.4).
    pub balance_runs: u32,
    /// An update that makes a group larger than this repairs its block first
    /// (brute-force time grows exponentially with the group size).
    pub group_limit: u32,
    /// Hash seed of the skeleton.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            index_bits: 16,
            array_bits: 8,
            threads: 1,
            balance_runs: 8,
            group_limit: 20,
            seed: crate::lineage::random_seed(),
        }
    }
}

impl Options {
    /// The paper's "x+y" configuration with default everything else
    /// (`with_bits(16, 8)` is the default, `(8, 16)` and `(16, 16)` the
    /// alternatives of Table 1).
    pub fn with_bits(index_bits: u32, array_bits: u32) -> Self {
        Self { index_bits, array_bits, ..Self::default() }
    }

    /// Same options with `threads` construction threads.
    pub fn threads(self, threads: usize) -> Self {
        Self { threads, ..self }
    }

    fn validate(&self) -> Result<()> {
        if !(1..=24).contains(&self.index_bits) {
            return Err(Error::InvalidParameter(format!("index_bits {} not in 1..=24", self.index_bits)));
        }
        if !matches!(self.array_bits, 2 | 4 | 8 | 16 | 32) {
            return Err(Error::InvalidParameter(format!("array_bits {} not one of 2, 4, 8, 16, 32", self.array_bits)));
        }
        if self.balance_runs == 0 {
            return Err(Error::InvalidParameter("balance_runs must be at least 1".into()));
        }
        Ok(())
    }
}

/// Candidate groups (within a block) of each of the 256 buckets of a block:
/// four distinct groups per bucket, and every group is a candidate of exactly
/// 16 buckets, 4 in each column (§4.4 "pre-assigned candidate groups ... each
/// group has the same number of associated buckets").
pub(crate) static CANDIDATES: [[u8; 4]; BUCKETS_PER_BLOCK] = build_candidates();

const fn xorshift(mut s: u64) -> u64 {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    s
}

const fn conflicts(t: &[[u8; 4]; 256], j: usize, c: usize, g: u8) -> bool {
    let mut d = 0;
    while d < c {
        if t[j][d] == g {
            return true;
        }
        d += 1;
    }
    false
}

const fn build_candidates() -> [[u8; 4]; 256] {
    let mut t = [[0u8; 4]; 256];
    let mut s: u64 = 0x5e75_e9ca_d1da_7e01;
    let mut c = 0;
    while c < 4 {
        // Column c: a random permutation of 0..256, group = slot / 4.
        let mut perm = [0u16; 256];
        let mut i = 0;
        while i < 256 {
            perm[i] = i as u16;
            i += 1;
        }
        let mut i = 255;
        while i > 0 {
            s = xorshift(s);
            let j = (s % (i as u64 + 1)) as usize;
            let x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
            i -= 1;
        }
        let mut j = 0;
        while j < 256 {
            t[j][c] = (perm[j] >> 2) as u8;
            j += 1;
        }
        // Repair rows whose candidate repeats an earlier column by swapping
        // within the column (keeps 4 buckets per group per column).
        let mut j = 0;
        while j < 256 {
            if conflicts(&t, j, c, t[j][c]) {
                loop {
                    s = xorshift(s);
                    let k = (s % 256) as usize;
                    let a = t[j][c];
                    let b = t[k][c];
                    if k != j && !conflicts(&t, j, c, b) && !conflicts(&t, k, c, a) {
                        t[j][c] = b;
                        t[k][c] = a;
                        break;
                    }
                }
            }
            j += 1;
        }
        c += 1;
    }
    t
}

/// Skeleton and layout every lookup form carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    pub seed: u64,
    pub blocks: u32,
    pub vbits: u32,
    pub xbits: u32,
    pub ybits: u32,
}

/// Per-key hash material: bucket and the two base hashes `G1`, `G2`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHash {
    pub bucket: usize,
    pub g1: u32,
    pub g2: u32,
}

impl Params {
    pub fn validate(&self) -> Result<()> {
        crate::error::check_value_bits(self.vbits, 1, 64)?;
        Options { index_bits: self.xbits, array_bits: self.ybits, ..Options::default() }.validate()?;
        if self.blocks == 0 || self.blocks > MAX_BLOCKS {
            return Err(Error::InvalidParameter(format!("{} blocks not in 1..={MAX_BLOCKS}", self.blocks)));
        }
        Ok(())
    }

    #[inline(always)]
    pub fn buckets(&self) -> usize {
        self.blocks as usize * BUCKETS_PER_BLOCK
    }
    #[inline(always)]
    pub fn groups(&self) -> usize {
        self.blocks as usize * GROUPS_PER_BLOCK
    }
    /// Bits of one (index, array) pair.
    #[inline(always)]
    pub fn width(&self) -> u32 {
        self.xbits + self.ybits
    }
    /// Reserved index value marking a fallback group (in value bit 0).
    #[inline(always)]
    pub fn marker(&self) -> u64 {
        mask(self.xbits)
    }
    #[inline(always)]
    fn shift(&self) -> u32 {
        32 - self.ybits.trailing_zeros()
    }

    /// Bucket and base hashes of a key hash (`hash64(key, seed)`): the bucket
    /// from the high 32 bits, `G1`/`G2` from an independent mix of all 64.
    #[inline(always)]
    pub fn key_hash(&self, h: u64) -> KeyHash {
        let t = mix64(h);
        KeyHash { bucket: reduce(hi(h), self.buckets() as u32) as usize, g1: t as u32, g2: (t >> 32) as u32 }
    }

    /// Group of a bucket under a 2-bit choice.
    #[inline(always)]
    pub fn group(&self, bucket: usize, choice: u64) -> usize {
        (bucket / BUCKETS_PER_BLOCK) * GROUPS_PER_BLOCK
            + CANDIDATES[bucket % BUCKETS_PER_BLOCK][(choice & 3) as usize] as usize
    }

    /// Array position `H_i(x)` (most significant `log2 m` bits).
    #[inline(always)]
    pub fn pos(&self, i: u32, g1: u32, g2: u32) -> u32 {
        g1.wrapping_add(i.wrapping_mul(g2)) >> self.shift()
    }

    /// One value bit from a group record element (the reference for the
    /// lookup form's decoder, used by the tests).
    #[cfg(test)]
    pub fn eval(&self, elem: u64, g1: u32, g2: u32) -> u64 {
        let i = (elem & self.marker()) as u32;
        (elem >> self.xbits >> self.pos(i, g1, g2)) & 1
    }

    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u64(self.seed).u32(self.blocks).u8(self.vbits as u8).u8(self.xbits as u8).u8(self.ybits as u8);
    }

    pub fn decode(r: &mut crate::wire::Reader<'_>) -> Result<Self> {
        let p = Params {
            seed: r.u64()?,
            blocks: r.u32()?,
            vbits: r.u8()? as u32,
            xbits: r.u8()? as u32,
            ybits: r.u8()? as u32,
        };
        p.validate().map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(p)
    }
}

/// A key of a group as the search sees it.
pub(crate) type GroupKey = (u32, u32, u64);

/// Recomputes the arrays of a group record (`elems`, one per value bit) for
/// the keys' current values under each bit's current index. Returns the mask
/// of value bits whose index no longer separates the group (two keys on one
/// array position with different bits), which must be searched again.
pub(crate) fn refit(p: &Params, keys: &[GroupKey], elems: &mut [u64]) -> u64 {
    let mut need = 0u64;
    for (b, e) in elems.iter_mut().enumerate() {
        let i = (*e & p.marker()) as u32;
        if i as u64 == p.marker() {
            need |= 1 << b;
            continue;
        }
        let (mut taken, mut arr, mut bad) = (0u64, 0u64, false);
        for &(g1, g2, v) in keys {
            let pos = p.pos(i, g1, g2);
            let bit = (v >> b) & 1;
            if taken >> pos & 1 == 1 {
                if (arr >> pos) & 1 != bit {
                    bad = true;
                    break;
                }
            } else {
                taken |= 1 << pos;
                arr |= bit << pos;
            }
        }
        if bad {
            need |= 1 << b;
        } else {
            *e = i as u64 | arr << p.xbits;
        }
    }
    need
}

/// Brute-force search (§4.1–4.2) for the value bits in `need`, all at once
/// per hash index (§6.1.1): for `i = 0, 1, …, 2^x − 2` the keys are placed at
/// `H_i` and every still-unsolved bit is tested in the same pass (the
/// register form [`search_lanes`] for a few bits, the OR/AND form
/// [`search_or_and`] for many). Branch-free per key. Solved bits get
/// `i | array << x` in `elems`. Returns the trials made and whether every
/// bit was solved.
pub(crate) fn search(p: &Params, keys: &[GroupKey], mut need: u64, elems: &mut [u64]) -> (u64, bool) {
    let mut i = 0u32;
    let end = p.marker() as u32;
    while i < end && need != 0 {
        let lanes = 64 / (2 * p.ybits);
        if need.count_ones() <= lanes && keys.len() <= MAX_FAST_KEYS {
            let (next, solved) = search_lanes(p, keys, need, i, elems);
            need &= !solved;
            i = next;
        } else {
            let (next, solved) = search_or_and(p, keys, need, i, elems);
            need &= !solved;
            i = next;
        }
    }
    (i as u64, need == 0)
}

/// Groups larger than this always take the general path.
const MAX_FAST_KEYS: usize = 64;

/// The register form of the combined iteration, for up to `64 / 2m` value
/// bits at once: each value bit owns a lane of `2m` bits of one u64, a key
/// sets bit `pos` of the lane's low half (value bit 0) or high half (1), and
/// a lane whose halves overlap has a conflict. One shift and one OR per key.
/// Runs from index `i` until at least one bit is solved (or the range ends);
/// returns the next index and the solved bits.
fn search_lanes(p: &Params, keys: &[GroupKey], need: u64, mut i: u32, elems: &mut [u64]) -> (u32, u64) {
    let shift = p.shift();
    let m = p.ybits;
    let end = p.marker() as u32;
    let mut bits = [0u32; 32];
    let mut nb = 0usize;
    let mut t = need;
    while t != 0 {
        bits[nb] = t.trailing_zeros();
        t &= t - 1;
        nb += 1;
    }
    let mut pat = [(0u32, 0u32, 0u64); MAX_FAST_KEYS];
    for (k, &(g1, g2, v)) in pat.iter_mut().zip(keys) {
        let mut x = 0u64;
        for (lane, &b) in bits[..nb].iter().enumerate() {
            x |= 1u64 << (lane as u32 * 2 * m + m * ((v >> b) & 1) as u32);
        }
        *k = (g1, g2, x);
    }
    let pat = &pat[..keys.len()];
    let low = mask(m);
    let mut lows = 0u64;
    for lane in 0..nb {
        lows |= low << (lane as u32 * 2 * m);
    }
    while i < end {
        let mut acc = 0u64;
        for &(g1, g2, x) in pat {
            acc |= x << (g1.wrapping_add(i.wrapping_mul(g2)) >> shift);
        }
        let c = acc & (acc >> m) & lows;
        if (0..nb).any(|lane| (c >> (lane as u32 * 2 * m)) & low == 0) {
            let mut solved = 0u64;
            for (lane, &b) in bits[..nb].iter().enumerate() {
                let off = lane as u32 * 2 * m;
                if (c >> off) & low == 0 {
                    solved |= 1 << b;
                    let arr = (acc >> (off + m)) & low;
                    elems[b as usize] = i as u64 | arr << p.xbits;
                }
            }
            return (i + 1, solved);
        }
        i += 1;
    }
    (i, 0)
}

/// The general form of the combined iteration (any number of value bits):
/// per array position the OR and the AND of the values of its keys;
/// `OR & !AND` marks the value bits two keys disagree on. One index.
fn search_or_and(p: &Params, keys: &[GroupKey], need: u64, i: u32, elems: &mut [u64]) -> (u32, u64) {
    let shift = p.shift();
    let m = p.ybits as usize;
    let mut or = [0u64; 32];
    let mut and = [!0u64; 32];
    for &(g1, g2, v) in keys {
        let pos = (g1.wrapping_add(i.wrapping_mul(g2)) >> shift) as usize & 31;
        or[pos] |= v;
        and[pos] &= v;
    }
    let mut conflict = 0u64;
    for q in 0..m {
        conflict |= or[q] & !and[q];
    }
    let solved = need & !conflict;
    let mut good = solved;
    while good != 0 {
        let b = good.trailing_zeros();
        good &= good - 1;
        let mut arr = 0u64;
        for (q, o) in or[..m].iter().enumerate() {
            arr |= ((o >> b) & 1) << q;
        }
        elems[b as usize] = i as u64 | arr << p.xbits;
    }
    (i + 1, solved)
}

/// Solves a group: refit the old record when there is one, search the rest.
/// Returns (trials, success). On failure `elems` is unspecified.
pub(crate) fn solve_group(p: &Params, keys: &[GroupKey], old: Option<&[u64]>, elems: &mut [u64]) -> (u64, bool) {
    let need = match old {
        Some(o) if o[0] & p.marker() != p.marker() => {
            elems.copy_from_slice(o);
            refit(p, keys, elems)
        }
        _ => {
            elems.iter_mut().for_each(|e| *e = 0);
            mask(p.vbits)
        }
    };
    if need == 0 {
        return (0, true);
    }
    search(p, keys, need, elems)
}

/// Sets the fallback marker record.
pub(crate) fn mark_fallback(p: &Params, elems: &mut [u64]) {
    elems.iter_mut().for_each(|e| *e = 0);
    elems[0] = p.marker();
}

/// Greedy bucket-to-group balancing of one block (§4.4): `runs` randomized
/// runs (buckets by size descending, random order among equal sizes, each to
/// its least-loaded candidate, random among ties); the run with the smallest
/// maximum load, then smallest sum of squared loads, wins. Returns the
/// choices and the group loads.
pub(crate) fn balance(sizes: &[u32; BUCKETS_PER_BLOCK], runs: u32, seed: u64) -> ([u8; 256], [u32; 64]) {
    let mut rng = crate::hash::SeedSeq::new(seed);
    type Assignment = ((u32, u64), [u8; BUCKETS_PER_BLOCK], [u32; GROUPS_PER_BLOCK]);
    let mut best: Option<Assignment> = None;
    let mut order = [0u64; BUCKETS_PER_BLOCK];
    for _ in 0..runs {
        let mut r = rng.next();
        for (j, o) in order.iter_mut().enumerate() {
            if j % 4 == 0 {
                r = rng.next();
            }
            let tie = (r >> ((j % 4) * 16)) & 0xffff;
            *o = (sizes[j] as u64) << 32 | tie << 8 | j as u64;
        }
        order.sort_unstable_by(|a, b| b.cmp(a));
        let mut loads = [0u32; GROUPS_PER_BLOCK];
        let mut choice = [0u8; BUCKETS_PER_BLOCK];
        let mut rr = rng.next();
        for &o in &order {
            let j = (o & 0xff) as usize;
            let s = (o >> 32) as u32;
            if s == 0 {
                break;
            }
            let cand = &CANDIDATES[j];
            let min = cand.iter().map(|&g| loads[g as usize]).min().unwrap_or(0);
            // Random choice among the least-loaded candidates.
            let ties: u32 = (0..4).filter(|&c| loads[cand[c] as usize] == min).fold(0, |m, c| m | 1 << c);
            let k = ties.count_ones();
            rr = crate::hash::mix64(rr);
            let mut pick = (rr % k as u64) as u32;
            let mut t = ties;
            let mut c = 0;
            while t != 0 {
                c = t.trailing_zeros();
                if pick == 0 {
                    break;
                }
                pick -= 1;
                t &= t - 1;
            }
            choice[j] = c as u8;
            loads[cand[c as usize] as usize] += s;
        }
        let max = *loads.iter().max().unwrap_or(&0);
        let sq: u64 = loads.iter().map(|&l| (l as u64) * (l as u64)).sum();
        if best.as_ref().is_none_or(|(score, _, _)| (max, sq) < *score) {
            best = Some(((max, sq), choice, loads));
        }
    }
    match best {
        Some((_, c, l)) => (c, l),
        None => ([0; 256], [0; 64]),
    }
}

/// Frame kinds of this structure (lookup blob, delta, control snapshot).
pub(crate) const LOOKUP_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0701, "setsep lookup");
pub(crate) const DELTA_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0702, "setsep delta");
pub(crate) const CONTROL_KIND: crate::wire::Kind = crate::wire::Kind::new(0x0703, "setsep control snapshot");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_distinct_and_balanced() {
        let mut per_group = [0u32; 64];
        for row in CANDIDATES.iter() {
            for c in 0..4 {
                assert!((row[c] as usize) < 64);
                for d in 0..c {
                    assert_ne!(row[c], row[d]);
                }
                per_group[row[c] as usize] += 1;
            }
        }
        assert!(per_group.iter().all(|&n| n == 16), "{per_group:?}");
    }

    #[test]
    fn search_separates_random_groups() {
        let p = Params { seed: 1, blocks: 1, vbits: 5, xbits: 16, ybits: 8 };
        let mut rng = crate::conformance::Rng::new(3);
        for k in 0..20usize {
            let keys: Vec<GroupKey> =
                (0..k).map(|_| (rng.next_u64() as u32, rng.next_u64() as u32, rng.next_u64() & 31)).collect();
            let mut e = vec![0u64; 5];
            let (_, ok) = solve_group(&p, &keys, None, &mut e);
            assert!(ok, "group of {k}");
            for &(g1, g2, v) in &keys {
                let got: u64 = (0..5).map(|b| p.eval(e[b], g1, g2) << b).sum();
                assert_eq!(got, v);
            }
            // Refit keeps a valid record unchanged.
            let mut e2 = e.clone();
            assert_eq!(refit(&p, &keys, &mut e2), 0);
            assert_eq!(e, e2);
        }
    }

    #[test]
    fn tiny_index_range_fails_on_big_groups() {
        let p = Params { seed: 1, blocks: 1, vbits: 1, xbits: 1, ybits: 2 };
        let mut rng = crate::conformance::Rng::new(4);
        let keys: Vec<GroupKey> = (0..16).map(|i| (rng.next_u64() as u32, rng.next_u64() as u32, i & 1)).collect();
        let mut e = vec![0u64; 1];
        let (trials, ok) = solve_group(&p, &keys, None, &mut e);
        assert!(!ok);
        assert_eq!(trials, 1);
    }

    #[test]
    fn balance_beats_direct_hashing() {
        let mut rng = crate::conformance::Rng::new(5);
        let mut sizes = [0u32; 256];
        for _ in 0..1024 {
            sizes[rng.below(256) as usize] += 1;
        }
        let (choice, loads) = balance(&sizes, 8, 9);
        let mut check = [0u32; 64];
        for j in 0..256 {
            check[CANDIDATES[j][choice[j] as usize] as usize] += sizes[j];
        }
        assert_eq!(check, loads);
        assert_eq!(loads.iter().sum::<u32>(), 1024);
        assert!(*loads.iter().max().unwrap() <= 20, "{loads:?}");
    }
}
