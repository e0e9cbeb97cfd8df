//! glibc's `malloc` settings for a program that frees and reallocates tensor-sized buffers.
//!
//! Every candle op allocates its output, and candle's backward pass allocates a zero tensor and a
//! sum for each gradient, so a training step allocates and frees dozens of buffers of a few MiB.
//! With glibc's defaults such buffers are mapped fresh from the kernel (above the mmap threshold,
//! 128 KiB at first) or handed back to it when they sit at the top of the heap (above the trim
//! threshold), and the next step pays a page fault for every 4 KiB it writes: on a mini-batch of
//! `csbm:100000` (GATv2, one thread, `perf`) over a quarter of the step was the kernel zeroing
//! pages. Raising both thresholds keeps freed buffers in the process for reuse.
//!
//! The training steps run on a thread of the CPU pool (`workbook::ops::on_cpu_pool`), and glibc
//! gives threads other than `main` arenas of their own, made of heaps of at most 64 MiB that are
//! unmapped once empty: a full-batch `csbm:100000` epoch allocates buffers of tens of MiB, which
//! then came fresh from the kernel again (GATv2 epoch 10-30% slower than on `main`). One arena for
//! all threads keeps every buffer in the heap the thresholds govern; the pool has a few threads,
//! which allocate per tensor op, not per element, so they rarely wait for each other there.
//!
//! None of this changes a value computed, only where memory comes from. Library users set the
//! same with `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912:glibc.malloc.arena_max=1`.
//!
//! [`HugePageAlloc`], the binary's global allocator, asks for 2 MiB pages under every fresh
//! mapping glibc makes for a buffer of [`HUGE_ADVICE_BYTES`] or more, before anything touches
//! it: a node table of 10⁶ rows gathered at random then costs one TLB entry per 2 MiB instead
//! of 512. On `csbm:1000000` (docs/performance.md, issue 47; on and off back to back, CPU time)
//! it made `csr_spmm` 1.2× (GCN's width) to 2.6× (GATv2's) and `gat_scores` 2.1× faster, as
//! glibc's `glibc.malloc.hugetlb=1` does for the whole heap, while rebuilding written buffers
//! afterwards (`MADV_COLLAPSE`) cost more than it saved. `WORKBOOK_HUGE_PAGES=0` turns it off.
//!
//! Buffers of that size, which glibc unmaps when they are freed, [`HugePageAlloc`] can keep
//! instead for the next allocation of the same size ([`crate::kept_buffers`]), so that the kernel
//! does not zero them afresh every training step: `WORKBOOK_KEEP_BUFFERS=6G` keeps up to 6 GiB.
//! Off by default: it trades memory for time (on GATv2 over `knn:1000000`, 21-30% off a training
//! step for 2 GB more peak memory, and nothing gained below the step's working set of buffers;
//! docs/performance.md).

/// Keeps buffers up to 32 MiB (glibc's largest mmap threshold on 64-bit) in the heap, up to
/// 512 MiB of freed heap in the process, and one arena for all threads. Other platforms:
/// nothing to do.
pub fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes glibc's allocator parameters; it is called first thing in
        // `main`, before any other thread exists, with parameters glibc documents for it. A
        // rejected value (return 0) leaves glibc's default in place, which is still correct.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

use crate::kept_buffers::{Block, KeptBuffers};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Buffers from this size on are mapped by glibc on their own (the mmap threshold set above),
/// so the advice covers a fresh mapping, never the shared heap.
pub const HUGE_ADVICE_BYTES: usize = 32 << 20;

static HUGE_PAGES: AtomicBool = AtomicBool::new(true);

/// Reads `WORKBOOK_HUGE_PAGES` (`0`: no advice) once, first thing in `main`; the allocator itself
/// must not read the environment, which allocates.
pub fn configure_huge_pages() {
    let off = std::env::var("WORKBOOK_HUGE_PAGES").is_ok_and(|v| v.trim() == "0");
    HUGE_PAGES.store(!off, Ordering::Relaxed);
}

/// Bytes of freed large buffers kept for reuse; 0: none. Set by [`configure_kept_buffers`].
static KEEP_CAP: AtomicUsize = AtomicUsize::new(0);

/// Freed buffers kept for reuse: a training step frees and allocates a few dozen large ones.
const KEPT_SLOTS: usize = 64;
static KEPT: Mutex<KeptBuffers<KEPT_SLOTS>> = Mutex::new(KeptBuffers::new());

/// Reads `WORKBOOK_KEEP_BUFFERS` once, first thing in `main`: how many bytes of freed large
/// buffers to keep (`6G`, `512M`; unset or `0`: none, every large buffer goes back to the kernel
/// when freed). An unreadable value is said, and nothing kept.
pub fn configure_kept_buffers() {
    let cap = match std::env::var("WORKBOOK_KEEP_BUFFERS") {
        Err(_) => 0,
        Ok(v) if v.trim() == "0" => 0,
        Ok(v) => workbook::limits::parse_bytes(v.trim()).map_or_else(
            |e| {
                eprintln!("warning: WORKBOOK_KEEP_BUFFERS={v:?}: {e}; no freed buffer is kept (give a size such as 6G, or 0)");
                0
            },
            |bytes| usize::try_from(bytes).unwrap_or(usize::MAX),
        ),
    };
    KEEP_CAP.store(cap, Ordering::Relaxed);
}

/// Bytes of freed large buffers this process may keep (`WORKBOOK_KEEP_BUFFERS`; 0: none), for
/// the measurements that report it.
pub fn kept_buffers_cap() -> usize {
    KEEP_CAP.load(Ordering::Relaxed)
}

fn kept() -> MutexGuard<'static, KeptBuffers<KEPT_SLOTS>> {
    // nothing panics while the lock is held; a poisoned lock still holds valid bookkeeping
    KEPT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a buffer of this layout is kept when freed: those glibc maps on their own.
fn keeps(layout: &Layout) -> bool {
    layout.size() >= HUGE_ADVICE_BYTES && KEEP_CAP.load(Ordering::Relaxed) > 0
}

/// A kept buffer of exactly `layout`'s size and alignment, zeroed when `zeroed`.
fn kept_for(layout: &Layout, zeroed: bool) -> Option<*mut u8> {
    let b = kept().take(layout.size(), layout.align())?;
    let p = b.ptr as *mut u8;
    if zeroed {
        // SAFETY: `p` is a live block of `layout.size()` bytes that nothing else references: its
        // last owner freed it, and `take` hands each kept block out once.
        unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
    }
    Some(p)
}

/// The system allocator, plus `MADV_HUGEPAGE` on large fresh buffers and large freed buffers
/// kept for reuse (see the module docs).
pub struct HugePageAlloc;

/// Advises the 2 MiB-aligned interior of `[ptr, ptr + size)`; never allocates, ignores refusals
/// (the buffer then keeps 4 KiB pages, which is only slower).
fn advise(ptr: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if ptr.is_null() || size < HUGE_ADVICE_BYTES || !HUGE_PAGES.load(Ordering::Relaxed) {
            return;
        }
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + size) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside the allocation just returned to us; MADV_HUGEPAGE
            // changes only which physical pages will back it, never its contents, addresses or
            // owner; a refusal is an error return, ignored on purpose.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, size);
}

// SAFETY: every block handed out is a `System` block of at least the layout asked for: either
// fresh from `System` with the caller's arguments, or a kept one of exactly the same size and
// alignment that its previous owner freed and nothing references any more (zeroed when asked).
// Every block is released to `System` exactly once, with the layout it was allocated with. The
// advice does not touch the memory.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if keeps(&layout) {
            if let Some(p) = kept_for(&layout, false) {
                return p;
            }
        }
        // SAFETY: forwarded with the caller's contract for `alloc`.
        let p = unsafe { System.alloc(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if keeps(&layout) {
            if let Some(p) = kept_for(&layout, true) {
                return p;
            }
        }
        // SAFETY: forwarded with the caller's contract for `alloc_zeroed`.
        let p = unsafe { System.alloc_zeroed(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !keeps(&layout) {
            // SAFETY: forwarded with the caller's contract for `dealloc`.
            return unsafe { System.dealloc(ptr, layout) };
        }
        let block = Block {
            ptr: ptr as usize,
            size: layout.size(),
            align: layout.align(),
        };
        let mut out = [block; KEPT_SLOTS];
        let cap = KEEP_CAP.load(Ordering::Relaxed);
        let n = kept().keep(block, cap, &mut out);
        for b in &out[..n] {
            // SAFETY: each block was allocated by `System` with this size and alignment and
            // freed by its owner; `keep` releases it exactly once.
            unsafe {
                System.dealloc(
                    b.ptr as *mut u8,
                    Layout::from_size_align_unchecked(b.size, b.align),
                )
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's contract for `realloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        advise(p, new_size);
        p
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// Whether the mapping holding `addr` carries `MADV_HUGEPAGE` (`hg` in its smaps VmFlags).
    fn advised(addr: usize) -> bool {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.split_whitespace().any(|f| f == "hg");
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn large_fresh_buffers_are_advised_and_small_ones_are_not() {
        // the test binary runs with the binary's global allocator; main() did not run here
        super::HUGE_PAGES.store(true, super::Ordering::Relaxed);
        let big = vec![0u8; 64 << 20];
        let small = vec![0u8; 1 << 20];
        let interior = (big.as_ptr() as usize).next_multiple_of(2 << 20);
        assert!(advised(interior), "a 64 MiB buffer was not advised");
        assert!(
            !advised(small.as_ptr() as usize),
            "a 1 MiB buffer was advised"
        );
        // the advice changes no value
        assert!(big.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_freed_large_buffer_is_reused_and_zeroed_when_asked() {
        // the test binary runs with the binary's global allocator; main() did not run here
        super::KEEP_CAP.store(1 << 30, super::Ordering::Relaxed);
        // a size no other test allocates, so that no other thread takes the kept block
        let size = (48 << 20) + 12_345;
        let mut first = Vec::<u8>::with_capacity(size);
        first.resize(size, 7);
        let at = first.as_ptr() as usize;
        drop(first);
        // kept, not unmapped (an address alone could be the kernel's reuse of a fresh mapping)
        let block = super::kept()
            .take(size, 1)
            .expect("the freed buffer is kept");
        assert_eq!(block.ptr, at);
        let mut out = [block; super::KEPT_SLOTS];
        assert_eq!(super::kept().keep(block, 1 << 30, &mut out), 0);
        let again = Vec::<u8>::with_capacity(size);
        assert_eq!(again.as_ptr() as usize, at, "the freed buffer came back");
        drop(again);
        // vec![0; n] asks for zeroed memory: a kept buffer that held 7s is zeroed first
        let zeroed = vec![0u8; size];
        assert_eq!(zeroed.as_ptr() as usize, at);
        assert!(
            zeroed.iter().all(|&b| b == 0),
            "a kept buffer handed out unzeroed"
        );
    }
}
