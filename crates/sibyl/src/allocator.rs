//! The process's allocator: mimalloc, called as its own C API expects.
//!
//! The `mimalloc` crate's `GlobalAlloc` asks `mi_malloc_aligned` for every
//! allocation, whatever its alignment. In mimalloc 3 that call takes the
//! fast path only while the size class's page has a free block at the
//! right alignment; otherwise (every time a page's free list runs out, which
//! under a server's churn is often) it falls to the generic aligned path,
//! which for any size that is not a power of two over-allocates into a
//! larger size class. Under latte writes that path was 7.5% of the server's
//! instructions (callgrind, `bench/callgrind_ops.sh`). Rust's ordinary
//! alignments (at most 16, and at most the size) are what `mi_malloc`
//! guarantees anyway, so those go to `mi_malloc`, whose slow path refills
//! the page's free list; only larger alignments (tokio's 128-byte task
//! cells) use the aligned calls.

#![allow(unsafe_code)]

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use libmimalloc_sys as mi;

/// The alignment every `mi_malloc` block of at least this size has
/// (`MI_MAX_ALIGN_SIZE` on 64-bit targets).
const NATURAL_ALIGN: usize = 16;

pub struct Mimalloc;

/// mimalloc 3's `mi_option_purge_delay` (its `mi_option_e`).
const MI_OPTION_PURGE_DELAY: core::ffi::c_int = 15;

/// How long memory freed stays with the process before mimalloc gives it
/// back to the OS, unless `MIMALLOC_PURGE_DELAY` says otherwise: 10 s, not
/// mimalloc's 1 s. A flushed memtable's memory is then what the next
/// memtable grows into, instead of pages handed back and faulted in again
/// (zeroed by the kernel) on the event loops: under latte writes at 128 in
/// flight, 0.0056-0.0064 page faults per write on the event loop with the
/// default, 0.0011-0.0012 with 10 s (bench/README.md, 2026-12-02). Memory
/// still goes back once a load is over.
const PURGE_DELAY_MS: core::ffi::c_long = 10_000;

extern "C" {
    fn mi_option_set(option: core::ffi::c_int, value: core::ffi::c_long);
    #[cfg(test)]
    fn mi_option_get(option: core::ffi::c_int) -> core::ffi::c_long;
}

/// Sets the allocator's options the node runs with (at start, before its
/// threads).
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's option setter, with one of its options and a
        // value in that option's range.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

#[inline]
fn natural(layout: &Layout) -> bool {
    layout.align() <= NATURAL_ALIGN && layout.align() <= layout.size()
}

// SAFETY: every pointer handed out comes from mimalloc with at least the
// layout's alignment (`natural` above, or the aligned calls), and is given
// back to `mi_free`/`mi_realloc*`, which accept blocks from either family.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if natural(&layout) {
            mi::mi_malloc(layout.size()) as *mut u8
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if natural(&layout) {
            mi::mi_zalloc(layout.size()) as *mut u8
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr as *mut c_void);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= NATURAL_ALIGN && layout.align() <= new_size {
            mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
        } else {
            mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_stays_ten_seconds_unless_the_environment_says() {
        // SAFETY: mimalloc's option getter, with one of its options.
        let get = || unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
        let before = get();
        configure();
        match std::env::var("MIMALLOC_PURGE_DELAY") {
            Ok(v) => assert_eq!(get().to_string(), v),
            Err(_) => {
                // the option is the purge delay: mimalloc 3's default first
                assert_eq!(before, 1000);
                assert_eq!(get(), 10_000);
            }
        }
    }

    #[test]
    fn blocks_have_their_layouts_alignment() {
        let a = Mimalloc;
        for &(size, align) in &[
            (1, 1),
            (8, 8),
            (24, 8),
            (40, 16),
            (100, 4),
            (4, 8),
            (200, 128),
            (1 << 20, 64),
        ] {
            let l = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = a.alloc(l);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "size {size} align {align}");
                p.write_bytes(0xab, size);
                let q = a.realloc(p, l, size * 3);
                assert_eq!(q as usize % align, 0);
                assert_eq!(*q, 0xab);
                a.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                let z = a.alloc_zeroed(l);
                assert_eq!(z as usize % align, 0);
                assert!((0..size).all(|i| *z.add(i) == 0));
                a.dealloc(z, l);
            }
        }
    }
}
