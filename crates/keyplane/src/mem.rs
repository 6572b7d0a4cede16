//! Memory helpers: transparent huge pages for big tables.

/// Allocations below this many bytes get no huge-page advice (at most a few
/// 2 MiB pages: not worth splitting the mapping).
pub(crate) const HUGE_ADVICE_MIN_BYTES: usize = 8 << 20;
/// [`HUGE_ADVICE_MIN_BYTES`] in 64-bit words.
pub(crate) const HUGE_ADVICE_MIN_WORDS: usize = HUGE_ADVICE_MIN_BYTES / 8;

/// Asks the kernel to back a large allocation with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`). Lookups in tables of many megabytes are
/// dominated by TLB misses without them. Small allocations and non-Linux
/// targets are left alone; failures are ignored (the advice is optional).
pub fn advise_hugepages<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = std::mem::size_of_val(v);
        if bytes < HUGE_ADVICE_MIN_BYTES {
            return;
        }
        let start = v.as_ptr() as usize;
        let aligned = start.next_multiple_of(HUGE);
        let end = (start + bytes) & !(HUGE - 1);
        if end > aligned {
            // SAFETY: madvise only changes paging advice for pages that lie
            // entirely inside this live allocation; it never touches contents.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// `n` copies of `fill` in a vector whose pages got huge-page advice before
/// they were first touched (big arrays read at random: without huge pages every
/// access is also a TLB miss).
pub(crate) fn advised_vec<T: Clone>(n: usize, fill: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: a slice of `MaybeUninit<T>` over the vector's allocated (not
    // yet initialised) capacity is valid; it is only used for its address
    // range and dropped before the vector is written.
    let spare = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const std::mem::MaybeUninit<T>, n) };
    advise_hugepages(spare);
    v.resize(n, fill);
    v
}

/// Prefetches the cache line at `p` into all cache levels. A no-op on
/// targets without a prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, even on invalid addresses.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    #[test]
    fn advising_a_large_buffer_is_harmless() {
        let v = vec![7u64; 4 << 20];
        super::advise_hugepages(&v);
        super::prefetch(v.as_ptr());
        assert!(v.iter().all(|&x| x == 7));
    }
}
