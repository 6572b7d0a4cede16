//! Whole-bucket key compares for the fixed-width lookups: which of a
//! bucket's eight words equal a key word, for two buckets at once.
//!
//! The portable form is eight relaxed atomic loads and compares per bucket.
//! On x86-64 CPUs with AVX-512F (or AVX2), one `asm!` block broadcasts the
//! key word and compares both buckets' whole cache lines with it (AVX-512:
//! two `vpcmpeqq k, zmm, [mem]`; AVX2: four `vpcmpeqq ymm, ymm, [mem]` and
//! `vmovmskpd`). The instruction set is detected at run time once per table
//! ([`Isa::detect`], stored in the table), because the build sets no
//! `target-cpu`.
//!
//! Why `asm!` and not `core::arch` intrinsics: the buckets are written
//! concurrently by the writer through `AtomicU64` stores (under the stripe
//! seqlock), and a plain (non-atomic) SIMD load of memory that another
//! thread writes atomically is a data race in Rust's memory model, however
//! the result is used afterwards. An `asm!` block is opaque to the compiler:
//! its memory reads are the hardware's loads, which on x86-64 read each
//! aligned 8-byte element of the line as a single-copy-atomic access (the
//! effect is that of eight relaxed `AtomicU64` loads, possibly from
//! different moments of the writer's step, like the portable form's eight
//! loads). This is the pattern `atomic-memcpy` uses for seqlock reads. As
//! with the portable loads, a bucket read while a writer changes it may
//! give a mix of old and new words; the caller's seqlock validation (the
//! stripe versions before and after) discards such an answer.

use super::table::Bucket;
use std::sync::atomic::Ordering::Relaxed;

/// The compare implementation a table uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// Eight atomic loads and compares per bucket (every CPU).
    Portable,
    /// x86-64 AVX2 (and BMI1): two 256-bit compares per bucket.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    /// x86-64 AVX-512F (and BMI1): one 512-bit compare per bucket.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
}

impl Isa {
    /// The fastest implementation this CPU runs (std caches the CPUID query).
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("bmi1") {
                if std::is_x86_feature_detected!("avx512f") {
                    return Isa::Avx512;
                }
                if std::is_x86_feature_detected!("avx2") {
                    return Isa::Avx2;
                }
            }
        }
        Isa::Portable
    }

    /// Every implementation this CPU runs (for tests comparing them).
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Self> {
        #[allow(unused_mut)]
        let mut v = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("bmi1") && std::is_x86_feature_detected!("avx2") {
                v.push(Isa::Avx2);
            }
            if std::is_x86_feature_detected!("bmi1") && std::is_x86_feature_detected!("avx512f") {
                v.push(Isa::Avx512);
            }
        }
        v
    }
}

/// Bit `i` set when word `i` of `bk` equals `kw` (eight relaxed loads).
#[inline(always)]
pub(crate) fn eq_mask_portable(bk: &Bucket, kw: u64) -> u32 {
    let mut m = 0u32;
    for (i, w) in bk.w.iter().enumerate() {
        m |= ((w.load(Relaxed) == kw) as u32) << i;
    }
    m
}

/// For both buckets: bit `i` of each mask set when word `i` of that bucket
/// equals `kw`. `isa` must be one [`Isa::detect`] (or, in tests,
/// `Isa::available`) returned on this CPU; [`Isa::Portable`] always is.
#[inline(always)]
pub(crate) fn eq_masks(isa: Isa, b1: &Bucket, b2: &Bucket, kw: u64) -> (u32, u32) {
    #[cfg(target_arch = "x86_64")]
    {
        let (p1, p2) = (b1 as *const Bucket, b2 as *const Bucket);
        match isa {
            Isa::Avx512 => {
                let (m1, m2): (u32, u32);
                // SAFETY: `isa` is `Avx512` only when AVX-512F (and BMI1) was detected
                // on this CPU (`Isa::detect`, or `Isa::available` in
                // tests), so every instruction exists.
                // Memory: the block only reads, the 64 bytes at `p1` and
                // at `p2`; each is a live `Bucket` borrowed for the call
                // (64-byte aligned by `repr(align(64))`, so each
                // `zmmword` operand is one aligned line). Concurrent
                // writer stores to those words are atomic; the block's
                // reads are the hardware's loads, equivalent to relaxed
                // atomic loads of the eight words (see the module docs),
                // so there is no data race, and torn combinations are
                // discarded by the caller's seqlock validation. Registers:
                // `zmm16` (only addressable with AVX-512, never used by
                // this crate's non-AVX-512 code, and declared clobbered as
                // `xmm16`) and `k1` (declared clobbered) are the only ones
                // written besides the outputs; using only `zmm16` leaves
                // the upper halves of `ymm0..15` clean, so no `vzeroupper`
                // is needed. No stack use, flags untouched.
                unsafe {
                    std::arch::asm!(
                        "vpbroadcastq zmm16, {kw}",
                        "vpcmpeqq k1, zmm16, zmmword ptr [{p1}]",
                        "kmovw {m1:e}, k1",
                        "vpcmpeqq k1, zmm16, zmmword ptr [{p2}]",
                        "kmovw {m2:e}, k1",
                        kw = in(reg) kw,
                        p1 = in(reg) p1,
                        p2 = in(reg) p2,
                        m1 = out(reg) m1,
                        m2 = out(reg) m2,
                        out("k1") _,
                        out("xmm16") _,
                        options(nostack, preserves_flags, readonly),
                    );
                }
                return (m1 & 0xff, m2 & 0xff);
            }
            Isa::Avx2 => {
                let (a, b, c, d): (u32, u32, u32, u32);
                // SAFETY: `isa` is `Avx2` only when AVX2 (and BMI1) was detected on
                // this CPU (`Isa::detect`, or `Isa::available` in tests), so
                // every instruction exists. Memory: as
                // for AVX-512, only reads of the two live, 64-byte aligned
                // buckets (each `ymmword` operand is an aligned half line),
                // equivalent to relaxed atomic loads of their words; torn
                // combinations are discarded by the caller's seqlock
                // validation. Registers: `xmm0`/`xmm1` are declared
                // clobbered; their upper halves (which this crate's
                // non-AVX code never holds values in) are zeroed by the
                // closing `vzeroupper` together with every other ymm
                // register's, which leaves the SSE code that follows
                // without a transition penalty. No stack use, flags
                // untouched.
                unsafe {
                    std::arch::asm!(
                        "vmovq xmm0, {kw}",
                        "vpbroadcastq ymm0, xmm0",
                        "vpcmpeqq ymm1, ymm0, ymmword ptr [{p1}]",
                        "vmovmskpd {a:e}, ymm1",
                        "vpcmpeqq ymm1, ymm0, ymmword ptr [{p1} + 32]",
                        "vmovmskpd {b:e}, ymm1",
                        "vpcmpeqq ymm1, ymm0, ymmword ptr [{p2}]",
                        "vmovmskpd {c:e}, ymm1",
                        "vpcmpeqq ymm1, ymm0, ymmword ptr [{p2} + 32]",
                        "vmovmskpd {d:e}, ymm1",
                        "vzeroupper",
                        kw = in(reg) kw,
                        p1 = in(reg) p1,
                        p2 = in(reg) p2,
                        a = out(reg) a,
                        b = out(reg) b,
                        c = out(reg) c,
                        d = out(reg) d,
                        out("xmm0") _,
                        out("xmm1") _,
                        options(nostack, preserves_flags, readonly),
                    );
                }
                return (a | b << 4, c | d << 4);
            }
            Isa::Portable => {}
        }
    }
    let _ = isa;
    (eq_mask_portable(b1, kw), eq_mask_portable(b2, kw))
}

/// The end of both `keyed7` asm blocks, once the 16-bit compare mask of the
/// two buckets is in `{h}`: keep only occupied slots (bits 0–6 of byte 63 of
/// each bucket), take the lowest hit (`tzcnt`: 32 when there is none), pick
/// its bucket (`{p}` becomes `{p2}` for bits 8 and up) and load its value
/// byte (byte `56 + slot`; with no hit, a byte of bucket 2 that the caller
/// ignores). Uses `{o}` as scratch and leaves the byte in `{v}`.
#[cfg(target_arch = "x86_64")]
macro_rules! keyed7_pick {
    () => {
        concat!(
            "movzx {o:e}, byte ptr [{p2} + 63]\n",
            "shl {o:e}, 8\n",
            "mov {o:l}, byte ptr [{p} + 63]\n",
            "and {o:e}, 0x7f7f\n",
            "and {h:e}, {o:e}\n",
            "tzcnt {o:e}, {h:e}\n",
            "cmp {o:e}, 8\n",
            "cmovae {p}, {p2}\n",
            "and {o:e}, 7\n",
            "movzx {v:e}, byte ptr [{p} + {o} + 56]",
        )
    };
}

/// The keyed layout of 7 slots of 8-byte keys with 1-byte values (the
/// table's `keyed7`; slot `s`'s key is word `s`, its value byte `s` of word
/// 7, its occupancy bit `56 + s` of word 7) searched in both buckets at
/// once: `(hits, value)`, where bit `s` (bucket 1) or `8 + s` (bucket 2) of
/// `hits` is set for an occupied slot holding `kw`, and `value` is the value
/// byte of the lowest set bit's slot (meaningless when `hits` is 0).
/// Without branches on the data. `isa` as for [`eq_masks`].
#[inline(always)]
pub(crate) fn keyed7(isa: Isa, b1: &Bucket, b2: &Bucket, kw: u64) -> (u32, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        let (p1, p2) = (b1 as *const Bucket, b2 as *const Bucket);
        let (hits, value): (u32, u64);
        match isa {
            Isa::Avx512 => {
                // SAFETY: as in `eq_masks` (AVX-512F and BMI1 detected;
                // reads only, of the two live, aligned 64-byte buckets, each
                // access within one of them: `p + 63` and `p + 56 + (t & 7)`
                // are bytes of the line, read as the hardware's loads, which
                // amount to relaxed atomic loads of the words; torn
                // combinations are discarded by the caller's seqlock
                // validation). Registers: `zmm16`, `k1` and `k2` are declared
                // clobbered (no `vzeroupper` needed, see `eq_masks`), `p`
                // is an in-out scratch copy of `p1`; flags are clobbered (not
                // `preserves_flags`). No stack use.
                unsafe {
                    std::arch::asm!(
                        "vpbroadcastq zmm16, {kw}",
                        "vpcmpeqq k1, zmm16, zmmword ptr [{p}]",
                        "vpcmpeqq k2, zmm16, zmmword ptr [{p2}]",
                        "kunpckbw k1, k2, k1",
                        "kmovw {h:e}, k1",
                        keyed7_pick!(),
                        kw = in(reg) kw,
                        p = inout(reg) p1 => _,
                        p2 = in(reg) p2,
                        h = out(reg) hits,
                        o = out(reg) _,
                        v = out(reg) value,
                        out("k1") _,
                        out("k2") _,
                        out("xmm16") _,
                        options(nostack, readonly),
                    );
                }
                return (hits, value);
            }
            Isa::Avx2 => {
                // SAFETY: as for `Avx512` above, with AVX2 (and BMI1)
                // detected, `xmm0..xmm2` declared clobbered and the closing
                // `vzeroupper` of `eq_masks`.
                unsafe {
                    std::arch::asm!(
                        "vmovq xmm0, {kw}",
                        "vpbroadcastq ymm0, xmm0",
                        "vpcmpeqq ymm1, ymm0, ymmword ptr [{p}]",
                        "vpcmpeqq ymm2, ymm0, ymmword ptr [{p} + 32]",
                        "vmovmskpd {h:e}, ymm1",
                        "vmovmskpd {o:e}, ymm2",
                        "shl {o:e}, 4",
                        "or {h:e}, {o:e}",
                        "vpcmpeqq ymm1, ymm0, ymmword ptr [{p2}]",
                        "vpcmpeqq ymm2, ymm0, ymmword ptr [{p2} + 32]",
                        "vmovmskpd {o:e}, ymm1",
                        "shl {o:e}, 8",
                        "or {h:e}, {o:e}",
                        "vmovmskpd {o:e}, ymm2",
                        "shl {o:e}, 12",
                        "or {h:e}, {o:e}",
                        "vzeroupper",
                        keyed7_pick!(),
                        kw = in(reg) kw,
                        p = inout(reg) p1 => _,
                        p2 = in(reg) p2,
                        h = out(reg) hits,
                        o = out(reg) _,
                        v = out(reg) value,
                        out("xmm0") _,
                        out("xmm1") _,
                        out("xmm2") _,
                        options(nostack, readonly),
                    );
                }
                return (hits, value);
            }
            Isa::Portable => {}
        }
    }
    let _ = isa;
    keyed7_portable(b1, b2, kw)
}

/// [`keyed7`] with relaxed atomic loads (every CPU; the reference the
/// SIMD forms are tested against).
#[inline(always)]
pub(crate) fn keyed7_portable(b1: &Bucket, b2: &Bucket, kw: u64) -> (u32, u64) {
    let (e1, e2) = (eq_mask_portable(b1, kw), eq_mask_portable(b2, kw));
    let (w1, w2) = (b1.w[7].load(Relaxed), b2.w[7].load(Relaxed));
    // Occupancy bits 0..7 (bit 7 masks out word 7's own compare).
    let hits = (e1 & (w1 >> 56) as u32 & 0x7f) | (e2 & (w2 >> 56) as u32 & 0x7f) << 8;
    let t = hits.trailing_zeros();
    let w = if t < 8 { w1 } else { w2 };
    (hits, (w >> (8 * (t & 7))) & 0xff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn bucket(w: [u64; 8]) -> Bucket {
        Bucket { w: w.map(AtomicU64::new) }
    }

    /// Every implementation gives the portable masks, for words equal to
    /// the key in every subset of positions, random words, and keys at
    /// the extremes (0, all ones, only the top bit).
    #[test]
    fn every_isa_equals_the_portable_masks() {
        let isas = Isa::available();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x = crate::hash::mix64(x);
            x
        };
        for round in 0..4096u32 {
            let kw = match round % 4 {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << 63,
                _ => next(),
            };
            // Words equal to the key at the positions in `sub`; elsewhere
            // random words or the key with one bit flipped.
            let pick = |sub: u32, n: &mut dyn FnMut() -> u64| -> [u64; 8] {
                std::array::from_fn(|i| match (sub >> i & 1, n() % 3) {
                    (1, _) => kw,
                    (_, 0) => kw ^ 1 << (n() % 64),
                    _ => n(),
                })
            };
            let w1 = pick(round & 0xff, &mut next);
            let w2 = pick((round >> 4) & 0xff ^ 0x5a, &mut next);
            let (b1, b2) = (bucket(w1), bucket(w2));
            let want = (eq_mask_portable(&b1, kw), eq_mask_portable(&b2, kw));
            let by_hand = |w: &[u64; 8]| (0..8).filter(|&i| w[i] == kw).fold(0u32, |m, i| m | 1 << i);
            assert_eq!(want, (by_hand(&w1), by_hand(&w2)));
            for &isa in &isas {
                assert_eq!(eq_masks(isa, &b1, &b2, kw), want, "{isa:?} key {kw:#x} round {round}");
                assert_eq!(eq_masks(isa, &b2, &b1, kw), (want.1, want.0), "{isa:?} swapped");
            }
        }
    }

    /// Every implementation answers the keyed7 search as the portable one
    /// does (hits, and the value whenever there is a hit), for random
    /// occupancy, keys in several slots of either bucket, and key words equal
    /// to the value/occupancy word.
    #[test]
    fn every_isa_answers_keyed7_as_the_portable_form() {
        let isas = Isa::available();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x = crate::hash::mix64(x);
            x
        };
        let mut hits_seen = [0u32; 2];
        for round in 0..8192u32 {
            let kw = if round % 5 == 0 { 0 } else { next() };
            let make = |n: &mut dyn FnMut() -> u64| -> [u64; 8] {
                let mut w: [u64; 8] = std::array::from_fn(|_| if n() % 4 == 0 { kw } else { n() });
                if n() % 8 == 0 {
                    w[7] = kw;
                }
                w
            };
            let (w1, w2) = (make(&mut next), make(&mut next));
            let (b1, b2) = (bucket(w1), bucket(w2));
            let want = keyed7_portable(&b1, &b2, kw);
            // By hand: the first occupied matching slot, bucket 1 first.
            let slot = |w: &[u64; 8]| (0..7).find(|&s| w[s] == kw && (w[7] >> (56 + s)) & 1 == 1);
            match (slot(&w1), slot(&w2)) {
                (Some(s), _) => assert_eq!(want.1, (w1[7] >> (8 * s)) & 0xff),
                (None, Some(s)) => assert_eq!(want.1, (w2[7] >> (8 * s)) & 0xff),
                (None, None) => assert_eq!(want.0, 0),
            }
            assert_eq!(want.0 != 0, slot(&w1).is_some() || slot(&w2).is_some());
            hits_seen[(want.0 != 0) as usize] += 1;
            for &isa in &isas {
                let got = keyed7(isa, &b1, &b2, kw);
                assert_eq!(got.0, want.0, "{isa:?} hits, round {round}");
                if want.0 != 0 {
                    assert_eq!(got.1, want.1, "{isa:?} value, round {round}");
                }
            }
        }
        assert!(hits_seen[0] > 1000 && hits_seen[1] > 1000, "{hits_seen:?}");
    }
}
