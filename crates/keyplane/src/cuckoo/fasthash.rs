//! XXH3-64 of a 4- to 8-byte key computed from its little-endian packed
//! word: the same value as [`crate::hash::hash64`] on the key bytes (XXH3's
//! `len_4to8` path), without the length dispatch or a slice, so fixed-width
//! lookups (`get_u64`, 6-byte MACs) hash in a handful of instructions.

/// Bytes 8..24 of XXH3's default secret, folded as `len_4to8` uses them.
const SECRET_FLIP: u64 = {
    let a = u64::from_le_bytes([0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c]);
    let b = u64::from_le_bytes([0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb]);
    a ^ b
};

/// The per-seed constant of [`hash_packed`].
pub(crate) const fn flip(seed: u64) -> u64 {
    let seed = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
    SECRET_FLIP.wrapping_sub(seed)
}

/// XXH3-64 (seeded through `flip`) of the `kl`-byte key packed
/// little-endian in `kw`; `kl` must be in 4..=8.
#[inline(always)]
pub(crate) fn hash_packed(kw: u64, kl: u32, flip: u64) -> u64 {
    debug_assert!((4..=8).contains(&kl));
    let in1 = kw as u32;
    let in2 = (kw >> (8 * (kl - 4))) as u32;
    let mut v = ((in2 as u64).wrapping_add((in1 as u64) << 32)) ^ flip;
    v ^= v.rotate_left(49) ^ v.rotate_left(24);
    v = v.wrapping_mul(0x9FB2_1C65_1E98_DF25);
    v ^= (v >> 35).wrapping_add(kl as u64);
    v = v.wrapping_mul(0x9FB2_1C65_1E98_DF25);
    v ^ (v >> 28)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_xxh3_for_every_length_4_to_8() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for i in 0..20_000u64 {
            x = crate::hash::mix64(x ^ i);
            let seed = crate::hash::mix64(i);
            for kl in 4..=8u32 {
                let bytes = &x.to_le_bytes()[..kl as usize];
                let kw = crate::cuckoo::table::pack(bytes);
                assert_eq!(hash_packed(kw, kl, flip(seed)), crate::hash::hash64(bytes, seed), "kl {kl} seed {seed:#x}");
            }
        }
    }
}
