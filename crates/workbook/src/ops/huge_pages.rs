//! 2 MiB pages for a tensor's host buffer: fewer TLB misses when a kernel gathers random rows.
//!
//! A gather over a node table larger than the caches misses the cache on every edge, and with
//! 4 KiB pages the TLB as well: a 64 MiB table spans 16,384 pages, far more than the TLB holds,
//! so each miss waits for a page walk too. In 2 MiB pages the same table is 32 entries. candle's
//! CPU storage is a `Vec` that nobody advises, and Linux in THP `madvise` mode (the default of
//! many distributions) backs it with 4 KiB pages. [`advise_huge_pages`] asks the kernel for
//! 2 MiB pages on the 2 MiB-aligned interior of a tensor's buffer (`MADV_HUGEPAGE`), and, since
//! the buffer is already written, to rebuild it in huge pages now (`MADV_COLLAPSE`, Linux 6.1).
//! Both are advice: the bytes, their addresses and the allocation's owner stay as they are, so
//! every result is unchanged; where the kernel declines, the report says why and nothing else
//! happens.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::huge_pages::advise_huge_pages;
//! let x = Tensor::zeros((1024, 1024), workbook::candle_core::DType::F32, &Device::Cpu).unwrap();
//! let advice = advise_huge_pages(&x, true);
//! // 4 MiB: at least one aligned 2 MiB page inside, unless the system declined (then a note)
//! assert!(advice.advised_bytes > 0 || advice.note.is_some());
//! ```

use candle_core::{CpuStorage, Storage, Tensor};

/// The size of a transparent huge page on x86_64 and most aarch64 kernels.
pub const HUGE_PAGE: usize = 2 << 20;

/// What [`advise_huge_pages`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HugePageAdvice {
    /// Bytes of the buffer's 2 MiB-aligned interior that were advised (0: none).
    pub advised_bytes: usize,
    /// Whether the kernel also rebuilt the advised range in huge pages (`MADV_COLLAPSE`).
    pub collapsed: bool,
    /// Why less than asked was done (no CPU tensor, buffer under 2 MiB, kernel refusal).
    pub note: Option<String>,
}

/// The start address and length in bytes of a CPU tensor's whole buffer.
fn host_bytes(t: &Tensor) -> Result<(usize, usize), String> {
    fn span<T>(v: &[T]) -> (usize, usize) {
        (v.as_ptr() as usize, std::mem::size_of_val(v))
    }
    let (storage, _) = t.storage_and_layout();
    match &*storage {
        Storage::Cpu(cpu) => match cpu {
            CpuStorage::F32(v) => Ok(span(v)),
            CpuStorage::F64(v) => Ok(span(v)),
            CpuStorage::U32(v) => Ok(span(v)),
            CpuStorage::I64(v) => Ok(span(v)),
            CpuStorage::U8(v) => Ok(span(v)),
            CpuStorage::BF16(v) => Ok(span(v)),
            CpuStorage::F16(v) => Ok(span(v)),
            other => Err(format!(
                "{:?} buffers are not advised",
                candle_core::backend::BackendStorage::dtype(other)
            )),
        },
        _ => Err(format!("not a CPU tensor ({:?})", t.device())),
    }
}

/// The 2 MiB-aligned part of `[start, start + len)`, if it holds at least one huge page.
pub fn aligned_interior(start: usize, len: usize) -> Option<(usize, usize)> {
    let a = start.checked_next_multiple_of(HUGE_PAGE)?;
    let b = (start + len) / HUGE_PAGE * HUGE_PAGE;
    // (`then`, not `then_some`: `b - a` must not be computed when the span holds no page)
    (b > a).then(|| (a, b - a))
}

/// Asks for 2 MiB pages under `t`'s host buffer (see the module docs); with `collapse`, also
/// rebuilds its already-written pages as huge pages now, which copies the range once (tens of
/// milliseconds per 100 MiB) and is worth it for a tensor gathered many times, such as node
/// features over a training run. Never fails: what could not be done is in the report's note.
pub fn advise_huge_pages(t: &Tensor, collapse: bool) -> HugePageAdvice {
    let (start, len) = match host_bytes(t) {
        Ok(span) => span,
        Err(note) => {
            return HugePageAdvice {
                note: Some(note),
                ..Default::default()
            }
        }
    };
    let Some((a, n)) = aligned_interior(start, len) else {
        return HugePageAdvice {
            note: Some(format!("{len} bytes hold no aligned 2 MiB page")),
            ..Default::default()
        };
    };
    // The storage stays borrowed by `t` (and alive) for the whole call.
    advise_range(a, n, collapse)
}

/// `MADV_COLLAPSE` (Linux 6.1, `include/uapi/asm-generic/mman-common.h`); the libc crate does
/// not name it yet.
#[cfg(target_os = "linux")]
const MADV_COLLAPSE: libc::c_int = 25;

/// Advises the 2 MiB-aligned range `[start, start + len)` of live memory of this process.
#[cfg(target_os = "linux")]
pub fn advise_range(start: usize, len: usize, collapse: bool) -> HugePageAdvice {
    let call = |advice: libc::c_int| -> Result<(), std::io::Error> {
        // SAFETY: madvise with MADV_HUGEPAGE or MADV_COLLAPSE only changes which physical pages
        // back the range, never its contents, addresses, protection or owner, so no Rust
        // reference into it is invalidated; the range is page-aligned and lies inside memory
        // the caller keeps alive for the call; a range the kernel does not accept is an error
        // return, not undefined behaviour.
        let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, advice) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    if let Err(e) = call(libc::MADV_HUGEPAGE) {
        return HugePageAdvice {
            note: Some(format!("MADV_HUGEPAGE refused ({e}): 4 KiB pages stay")),
            ..Default::default()
        };
    }
    let mut advice = HugePageAdvice {
        advised_bytes: len,
        ..Default::default()
    };
    if collapse {
        match call(MADV_COLLAPSE) {
            Ok(()) => advice.collapsed = true,
            Err(e) => {
                advice.note = Some(format!(
                    "MADV_COLLAPSE refused ({e}): only pages faulted from now on are huge"
                ))
            }
        }
    }
    advice
}

/// Elsewhere there is nothing to advise.
#[cfg(not(target_os = "linux"))]
pub fn advise_range(_start: usize, _len: usize, _collapse: bool) -> HugePageAdvice {
    HugePageAdvice {
        note: Some("huge-page advice is only implemented on Linux".into()),
        ..Default::default()
    }
}

/// Bytes of `[start, start + len)` backed by transparent huge pages, from `/proc/self/smaps`:
/// the `AnonHugePages` of each mapping overlapping the range, at most the overlap. Exact when
/// [`advise_range`] split the mapping at the range's ends (it does, unless the mapping was
/// already advised, e.g. by the allocator); otherwise an upper bound. `None` where smaps
/// cannot be read.
pub fn huge_page_bytes(start: usize, len: usize) -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let end = start + len;
    let mut overlap = 0usize;
    let mut total = 0usize;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                overlap = b.min(end).saturating_sub(a.max(start));
                continue;
            }
        }
        if overlap > 0 {
            if let Some(kb) = line.strip_prefix("AnonHugePages:") {
                let kb: usize = kb.trim().trim_end_matches("kB").trim().parse().ok()?;
                total += (kb * 1024).min(overlap);
            }
        }
    }
    Some(total)
}

/// Bytes of `t`'s 2 MiB-aligned buffer interior in huge pages ([`huge_page_bytes`]); `None` for
/// a tensor that is not on the CPU, holds no aligned page, or where smaps cannot be read.
pub fn tensor_huge_page_bytes(t: &Tensor) -> Option<usize> {
    let (start, len) = host_bytes(t).ok()?;
    let (a, n) = aligned_interior(start, len)?;
    huge_page_bytes(a, n)
}
