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
