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
//! [`HugePageAlloc`], the binary's global allocator, maps every buffer of [`HUGE_ADVICE_BYTES`]
//! or more itself ([`crate::mapped_buffers`]), as glibc would, but starting on a 2 MiB boundary
//! where glibc starts 16 bytes in: rows of a node table then straddle no cache line they need
//! not (on `csbm:1000000` `gcn_spmm` 1.4× faster), and it asks for 2 MiB pages under the whole
//! mapping before anything touches it: a node table of 10⁶ rows gathered at random then costs one
//! TLB entry per 2 MiB instead of 512. On `csbm:1000000` (docs/performance.md, issue 47; on and
//! off back to back, CPU time) the pages made `csr_spmm` 1.2× (GCN's width) to 2.6× (GATv2's)
//! and `gat_scores` 2.1× faster, as glibc's `glibc.malloc.hugetlb=1` does for the whole heap,
//! while rebuilding written buffers afterwards (`MADV_COLLAPSE`) cost more than it saved.
//! `WORKBOOK_HUGE_PAGES=0` turns the pages off.
//!
//! Buffers of that size, which glibc unmaps when they are freed, [`HugePageAlloc`] can keep
//! instead for the next allocation of the same size ([`crate::kept_buffers`]), so that the kernel
//! does not zero them afresh every training step: `WORKBOOK_KEEP_BUFFERS=6G` keeps up to 6 GiB.
//! Off by default: it trades memory for time (on GATv2 over `knn:1000000`, 21-30% off a training
//! step for 2 GB more peak memory, and nothing gained below the step's working set of buffers;
//! docs/performance.md). A kept buffer's pages are the system's to reclaim while it is kept
//! (`MADV_FREE`, [`crate::mapped_buffers::may_reclaim`]), so keeping cannot run the machine out
//! of memory; they still count as the process's resident memory until the system takes them.

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
use crate::mapped_buffers;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Buffers from this size on are mapped on their own ([`crate::mapped_buffers`]), at the mmap
/// threshold set above, below which glibc keeps buffers in its heap.
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

/// Keeps up to `bytes` of freed large buffers from now on, for a command whose measurement
/// needs it (`bench --roofline` compares kernels with STREAM, whose arrays are written before
/// they are timed); a larger cap already set stays.
pub fn keep_at_least(bytes: usize) {
    KEEP_CAP.fetch_max(bytes, Ordering::Relaxed);
}

/// Releases every freed buffer kept so far: for a command whose next phase allocates other
/// sizes (`bench --roofline` after loading its graph), so that what the last phase left does
/// not hold the cap.
pub fn release_kept_buffers() {
    let mut out = [Block {
        ptr: 0,
        size: 0,
        align: 1,
    }; KEPT_SLOTS];
    let n = kept().release_all(&mut out);
    // SAFETY: every kept block is a mapping of its size from `mapped_buffers` whose owner freed
    // it, and `release_all` hands each out once, no longer kept.
    unsafe { release(&out[..n]) }
}

/// Unmaps the blocks the bookkeeping let go of, outside its lock.
///
/// # Safety
/// Each block is a live mapping of its size from [`mapped_buffers`] that its owner freed,
/// nothing uses, and nothing else will release.
unsafe fn release(blocks: &[Block]) {
    for b in blocks {
        // SAFETY: the caller's contract.
        unsafe { mapped_buffers::unmap(b.ptr as *mut u8, b.size) }
    }
}

fn kept() -> MutexGuard<'static, KeptBuffers<KEPT_SLOTS>> {
    // nothing panics while the lock is held; a poisoned lock still holds valid bookkeeping
    KEPT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a buffer of this layout is mapped by [`mapped_buffers`] rather than by `System`: the
/// sizes glibc would map on their own, at an alignment a mapping's start gives.
fn mapped(layout: &Layout) -> bool {
    cfg!(target_os = "linux")
        && layout.size() >= HUGE_ADVICE_BYTES
        && layout.align() <= mapped_buffers::MAX_ALIGN
}

/// Whether a buffer of this layout is kept when freed: the mapped ones.
fn keeps(layout: &Layout) -> bool {
    mapped(layout) && KEEP_CAP.load(Ordering::Relaxed) > 0
}

/// A block for a layout that is [`mapped`]: a kept buffer of exactly its size and alignment
/// (zeroed when `zeroed`), else a fresh mapping (which the kernel zeroes); `None` for the
/// layouts the system's allocator serves.
fn mapped_block(layout: &Layout, zeroed: bool) -> Option<*mut u8> {
    if !mapped(layout) {
        return None;
    }
    let taken = if keeps(layout) {
        kept().take(layout.size(), layout.align())
    } else {
        None
    };
    let Some(b) = taken else {
        return Some(mapped_buffers::map(
            layout.size(),
            HUGE_PAGES.load(Ordering::Relaxed),
        ));
    };
    let p = b.ptr as *mut u8;
    if zeroed {
        // SAFETY: `p` is a live block of `layout.size()` bytes that nothing else references: its
        // last owner freed it, and `take` hands each kept block out once.
        unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
    }
    Some(p)
}

/// The system allocator, plus large buffers mapped on a 2 MiB boundary with `MADV_HUGEPAGE`, and
/// large freed buffers kept for reuse (see the module docs).
pub struct HugePageAlloc;

// SAFETY: a layout is either `mapped` or not, the same test on every call: a block that is not
// comes from `System` with the caller's arguments and goes back to it. A mapped block is a
// fresh mapping of at least its size, page-aligned (at least its alignment, which `mapped`
// bounds), zeroed by the kernel; or a kept one of exactly the same size and alignment that its
// previous owner freed and nothing references any more (zeroed when asked); or a mapping
// `mremap` resized, page-aligned. Every block is released exactly once, to where it came from.
// The advice does not touch the memory.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's contract for `alloc`.
        mapped_block(&layout, false).unwrap_or_else(|| unsafe { System.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's contract for `alloc_zeroed`.
        mapped_block(&layout, true).unwrap_or_else(|| unsafe { System.alloc_zeroed(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !mapped(&layout) {
            // SAFETY: forwarded with the caller's contract for `dealloc`.
            return unsafe { System.dealloc(ptr, layout) };
        }
        let block = Block {
            ptr: ptr as usize,
            size: layout.size(),
            align: layout.align(),
        };
        let mut out = [block; KEPT_SLOTS];
        let n = if keeps(&layout) {
            // Marked before it is kept, while no other thread can take it: a kept buffer's pages
            // are the system's to reclaim if memory runs short, so keeping cannot run a machine
            // out of memory (in a 6 GiB cgroup, GATv2 on knn:1000000 with 6G kept was killed
            // without the mark and ran 22% faster than nothing kept with it; docs/performance.md).
            // SAFETY: the block is a live mapping of this size whose owner freed it.
            unsafe { mapped_buffers::may_reclaim(ptr, layout.size()) };
            kept().keep(block, KEEP_CAP.load(Ordering::Relaxed), &mut out)
        } else {
            1
        };
        // SAFETY: each block is a mapping of this size from `mapped_buffers`, freed by its
        // owner; `keep` releases a block exactly once, and an unkept one is released here.
        unsafe { release(&out[..n]) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`: `new_size` with `layout`'s alignment is a
        // valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (mapped(&layout), mapped(&new)) {
            (false, false) => {
                // SAFETY: forwarded with the caller's contract for `realloc`.
                unsafe { System.realloc(ptr, layout, new_size) }
            }
            (true, true) => {
                // SAFETY: a mapped layout's block is a mapping of its size from
                // `mapped_buffers`, live, whose address the caller gives up on success.
                unsafe { mapped_buffers::remap(ptr, layout.size(), new_size) }
            }
            _ => {
                // between the system's heap and a mapping: move the contents over
                // SAFETY: `new` is a valid non-zero layout (the caller's contract); on success
                // the old block, which the caller gives up, is copied up to the smaller size
                // and freed with its own layout.
                unsafe {
                    let p = self.alloc(new);
                    if !p.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    p
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The lines of `/proc/self/smaps` about the mapping that holds `addr`.
    fn mapping(addr: usize) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = Vec::new();
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    if inside {
                        break;
                    }
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
            if inside {
                lines.push(line.to_string());
            }
        }
        assert!(!lines.is_empty(), "no mapping holds {addr:#x}");
        lines
    }

    /// Whether the mapping holding `addr` carries `MADV_HUGEPAGE` (`hg` in its smaps VmFlags).
    fn advised(addr: usize) -> bool {
        mapping(addr).iter().any(|l| {
            l.strip_prefix("VmFlags:")
                .is_some_and(|flags| flags.split_whitespace().any(|f| f == "hg"))
        })
    }

    /// KiB of the mapping holding `addr` that the system may reclaim (`MADV_FREE`, not written
    /// since).
    fn lazy_free_kib(addr: usize) -> u64 {
        mapping(addr)
            .iter()
            .find_map(|l| l.strip_prefix("LazyFree:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("smaps gives LazyFree")
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
    fn large_buffers_start_on_a_cache_line_and_keep_their_contents_when_resized() {
        // glibc's own mappings start 16 bytes in, so 64-byte rows straddled two cache lines
        let mut v = vec![0u32; (33 << 20) / 4];
        assert_eq!(
            v.as_ptr() as usize % (2 << 20),
            0,
            "not on a 2 MiB boundary"
        );
        v[0] = 1;
        *v.last_mut().unwrap() = 2;
        let n = v.len();
        // mapping to mapping (mremap), then to the system's heap and back
        v.resize(3 * n, 3);
        assert_eq!((v[0], v[n - 1], v[n], v[3 * n - 1]), (1, 2, 3, 3));
        assert!(
            advised(v.as_ptr() as usize + (64 << 20)),
            "the grown part is not advised"
        );
        v.truncate(10);
        v.shrink_to_fit();
        assert_eq!(v[..2], [1, 0]);
        v.resize(n, 4);
        v.shrink_to_fit();
        v.reserve_exact(n);
        assert_eq!((v[0], v[9], v[10], v[n - 1]), (1, 0, 4, 4));
        assert_eq!(v.as_ptr() as usize % 64, 0);
        // a small buffer stays the system's: glibc's 16-byte alignment, not a mapping's
        let small = [vec![0u8; 100], vec![0u8; 100]];
        assert!(small
            .iter()
            .any(|b| !(b.as_ptr() as usize).is_multiple_of(4096)));
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
        assert_eq!(lazy_free_kib(at), 0);
        drop(first);
        // kept for the system to reclaim if memory runs short: its written pages are marked
        assert!(
            lazy_free_kib(at) >= 40 << 10,
            "the kept buffer's pages are not marked: {} KiB",
            lazy_free_kib(at)
        );
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
        // written again: the pages are the program's once more
        assert_eq!(lazy_free_kib(at), 0);
    }
}
