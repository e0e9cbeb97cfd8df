//! Large buffers mapped by the binary's allocator itself, each starting on a 2 MiB boundary.
//!
//! glibc maps a buffer of 32 MiB or more on its own (its mmap threshold, [`crate::allocator`])
//! but hands out the address 16 bytes past the mapping's start, where it keeps the chunk's
//! header. A node table of 16 `f32` channels then has every 64-byte row straddling two cache
//! lines, and a gather at random pays two misses per row where one would do; 8 heads of 8
//! channels (256 bytes) cost five lines instead of four. On `csbm:1000000`, whose every edge
//! reads a random row, buffers of this module made `gcn_spmm` 1.4× and `csr_spmm` at 8 × 8
//! 1.5× faster than glibc's (docs/performance.md, issue 47).
//!
//! [`map`] starts each buffer on a 2 MiB boundary, so that the 2 MiB pages the allocator asks
//! for cover it from its first byte, and every row of a power-of-two size up to 2 MiB sits within
//! as few cache lines as it can. [`remap`] grows or shrinks one with `mremap`, as glibc's
//! `realloc` does, without copying. [`map`] and [`unmap`] work on every Unix (the gather
//! micro-benchmark's table is one such mapping); [`remap`] and the huge-page advice on Linux
//! only, where the binary's allocator uses them; elsewhere it keeps to the system's allocator.

/// Where each mapping starts: the size of a huge page on x86-64 and aarch64 with 4 KiB pages.
pub const ALIGN: usize = 2 << 20;

/// The largest alignment a caller may count on: [`remap`] keeps only the page's.
pub const MAX_ALIGN: usize = 4096;

fn pages(size: usize) -> Option<usize> {
    size.checked_next_multiple_of(4096)
}

/// A fresh, zeroed, private mapping of `size` bytes starting on an [`ALIGN`] boundary, or null
/// when the system refuses (out of memory, or not Unix), advised into 2 MiB pages when `huge`
/// (Linux). Never allocates from the heap.
pub fn map(size: usize, huge: bool) -> *mut u8 {
    #[cfg(unix)]
    {
        // `over` leaves room to move the start up to the next ALIGN boundary
        let over = size.checked_add(ALIGN).and_then(pages);
        let (Some(len), Some(over)) = (pages(size), over) else {
            return std::ptr::null_mut();
        };
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let base = base as usize;
        let start = base.next_multiple_of(ALIGN);
        let end = start + len;
        // SAFETY: both ranges lie inside the mapping just made, outside `[start, end)`, and
        // nothing references them yet; a failed unmap only leaves the spare pages mapped.
        unsafe {
            if start > base {
                libc::munmap(base as *mut libc::c_void, start - base);
            }
            if base + over > end {
                libc::munmap(end as *mut libc::c_void, base + over - end);
            }
        }
        #[cfg(target_os = "linux")]
        if huge {
            // The whole mapping, its last partial 2 MiB included (only whole aligned 2 MiB
            // stretches get huge pages): advice on part of it would split it in two, and
            // `mremap` cannot move a range that spans more than one mapping.
            // SAFETY: the range is the mapping just made; MADV_HUGEPAGE changes which physical
            // pages will back it, never its contents or addresses; a refusal (THP off) is
            // ignored on purpose, the buffer then keeps 4 KiB pages, which is only slower.
            unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = huge;
        start as *mut u8
    }
    #[cfg(not(unix))]
    {
        let _ = (size, huge);
        std::ptr::null_mut()
    }
}

/// Releases a buffer of `size` bytes from [`map`] or [`remap`].
///
/// # Safety
/// `ptr` and `size` are those of a live buffer from [`map`] or [`remap`], which nothing uses
/// any more.
pub unsafe fn unmap(ptr: *mut u8, size: usize) {
    #[cfg(unix)]
    if let Some(len) = pages(size) {
        // SAFETY: the caller's contract: the range is a whole mapping of ours, no longer used.
        unsafe { libc::munmap(ptr as *mut libc::c_void, len) };
    }
    #[cfg(not(unix))]
    let _ = (ptr, size);
}

/// Lets the system take back the pages of a buffer of `size` bytes from [`map`] or [`remap`]
/// that the program keeps for later (`MADV_FREE`): until they are written again, the system may
/// reclaim them when memory runs short, instead of running out, and a page it took reads as
/// zeros. Writing a page keeps it. Refused (before Linux 4.5) or elsewhere: nothing happens.
///
/// # Safety
/// `ptr` and `size` are those of a live buffer from [`map`] or [`remap`] whose contents nobody
/// needs any more: nothing else may use it until it is handed out again.
pub unsafe fn may_reclaim(ptr: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    if let Some(len) = pages(size) {
        // SAFETY: the caller's contract: the range is a whole mapping of ours whose contents
        // are not needed; MADV_FREE changes no address, and a refusal is ignored on purpose.
        unsafe { libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_FREE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, size);
}

/// The buffer of `old` bytes at `ptr` resized to `new` bytes (moved if need be, its contents
/// kept up to the smaller size), or null when the system refuses, the old buffer then unchanged.
/// The new start keeps only the page alignment that `mremap` gives.
///
/// # Safety
/// `ptr` and `old` are those of a live buffer from [`map`] or [`remap`]; on success the old
/// address is no longer valid.
pub unsafe fn remap(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
    #[cfg(target_os = "linux")]
    {
        let (Some(old), Some(new)) = (pages(old), pages(new)) else {
            return std::ptr::null_mut();
        };
        // SAFETY: the caller's contract: `[ptr, ptr + old)` is a whole mapping of ours; MAYMOVE
        // lets the kernel move it, which the caller accepts by taking the new address.
        let p = unsafe { libc::mremap(ptr as *mut libc::c_void, old, new, libc::MREMAP_MAYMOVE) };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p as *mut u8
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ptr, old, new);
        std::ptr::null_mut()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_starts_on_a_huge_page_boundary_zeroed_and_resizes_keeping_its_contents() {
        let size = (40 << 20) + 123;
        let p = map(size, true);
        assert!(!p.is_null());
        assert_eq!(p as usize % ALIGN, 0);
        // SAFETY: `p` is a fresh private mapping of `size` bytes that only this test uses; after
        // `remap` only the new address is used, and it is unmapped with its new size.
        unsafe {
            assert_eq!(*p.add(size - 1), 0, "fresh pages are zeroed");
            *p = 7;
            *p.add(size - 1) = 9;
            let q = remap(p, size, 2 * size);
            assert!(!q.is_null());
            assert_eq!(q as usize % MAX_ALIGN, 0);
            assert_eq!((*q, *q.add(size - 1), *q.add(2 * size - 1)), (7, 9, 0));
            unmap(q, 2 * size);
        }
    }

    #[test]
    fn a_size_the_system_cannot_map_gives_null() {
        assert!(map(usize::MAX - 10, true).is_null());
        assert!(map(1 << 62, false).is_null());
    }
}
