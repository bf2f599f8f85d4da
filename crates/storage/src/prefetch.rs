//! A hint to the CPU that memory will be read soon: the memtable's read
//! asks for a value's cache line when it finds the value, long before the
//! response copies it (see `memtable::prefetch_values`).
//!
//! `unsafe` only because the intrinsic is a `#[target_feature]` function:
//! a prefetch reads nothing and faults on no address, so any pointer is
//! sound. With `mapped.rs` and `background.rs`, the storage engine's only
//! unsafe code.

#![allow(unsafe_code)]

/// Asks for the cache line of `p` (a no-op where there is no such hint).
#[inline]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64's baseline, and a prefetch neither
    // dereferences `p` nor faults, whatever it points at
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
