//! Large freed buffers kept for the next allocation of the same size: on the host, what
//! PyTorch's CUDA caching allocator does on the GPU.
//!
//! glibc maps every buffer of 32 MiB or more fresh from the kernel (its largest mmap threshold on
//! 64-bit, [`crate::allocator`]) and unmaps it when it is freed; the kernel then zeroes every
//! page of the next fresh mapping when it is first written. A training step allocates and frees
//! the same tensors every step, so on a graph of 10⁶ nodes every step paid for zeroing gigabytes
//! that the op writing them overwrites anyway: `perf` on GATv2 over `knn:1000000` put a third of
//! the CPU time in the kernel's `clear_page_erms` (docs/performance.md, issue 47).
//!
//! [`KeptBuffers`] holds up to `SLOTS` freed blocks and at most `cap` bytes; an allocation of
//! exactly a kept block's size and alignment takes it back. A block that does not fit under the
//! cap is released, unless blocks kept long ago and never taken back make room. The price is
//! memory: a process holds up to `cap` bytes more than it uses, as PyTorch's "reserved" GPU
//! memory exceeds its "allocated" (the global allocator lets the system reclaim a kept block's
//! pages when memory runs short, but until then they are resident); and a cap below the step's
//! working set of buffers buys little (measured in docs/performance.md), which is why the binary
//! keeps nothing unless asked.
//!
//! This file is the bookkeeping only; it hands back the blocks to release, so that the caller
//! (the global allocator) frees them outside its lock, and it never allocates.

/// A block of memory: its address, its size and the alignment it was allocated with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub ptr: usize,
    pub size: usize,
    pub align: usize,
}

/// Freed blocks kept for reuse (see the module docs), at most `SLOTS` of them.
pub struct KeptBuffers<const SLOTS: usize> {
    /// Each kept block with the tick it was kept at (older: released first).
    slots: [Option<(Block, u64)>; SLOTS],
    tick: u64,
    bytes: usize,
}

impl<const SLOTS: usize> KeptBuffers<SLOTS> {
    /// Keeps after which a block never taken back is stale: released to make room. Four times
    /// the slots: a block a training step frees and takes back comes back within one step.
    pub const STALE: u64 = 4 * SLOTS as u64;

    pub const fn new() -> Self {
        Self {
            slots: [None; SLOTS],
            tick: 0,
            bytes: 0,
        }
    }

    /// A kept block of exactly `size` bytes and alignment `align`, no longer kept.
    pub fn take(&mut self, size: usize, align: usize) -> Option<Block> {
        let k = (0..SLOTS)
            .find(|&k| self.slots[k].is_some_and(|(b, _)| b.size == size && b.align == align))?;
        Some(self.evict(k))
    }

    /// The block kept in slot `k`, no longer kept.
    fn evict(&mut self, k: usize) -> Block {
        let (block, _) = self.slots[k].take().expect("a kept slot");
        self.bytes -= block.size;
        block
    }

    /// Keeps a freed block if it fits under `cap` bytes (one larger than `cap` is released at
    /// once), after releasing blocks kept long ago and never taken back since (more than
    /// [`Self::STALE`] keeps ago, oldest first); otherwise releases the block itself. Blocks
    /// already kept stay rather than the newest: a training step frees its buffers in the order
    /// it allocates them again, so making room for the newest would release each block just
    /// before its reuse. With every slot taken, the least recently
    /// kept block makes way. The blocks to release are written to `out`; returns their number.
    pub fn keep(&mut self, block: Block, cap: usize, out: &mut [Block; SLOTS]) -> usize {
        if block.size > cap {
            // it could never fit: releasing stale blocks for it would only lose them
            out[0] = block;
            return 1;
        }
        let mut n = 0;
        while self.bytes + block.size > cap {
            match self.oldest() {
                Some((k, kept_at)) if self.tick - kept_at > Self::STALE => {
                    out[n] = self.evict(k);
                    n += 1;
                }
                _ => {
                    out[n] = block;
                    return n + 1;
                }
            }
        }
        while self.slots.iter().all(Option::is_some) {
            let (oldest, _) = self.oldest().expect("every slot is taken");
            out[n] = self.evict(oldest);
            n += 1;
        }
        self.tick += 1;
        let free = self.slots.iter_mut().find(|s| s.is_none());
        *free.expect("a slot was just freed if none was") = Some((block, self.tick));
        self.bytes += block.size;
        n
    }

    /// Every kept block, no longer kept, written to `out`; returns their number. For a program
    /// whose next phase allocates other sizes than the last (a measurement after loading its
    /// data): what the last phase left kept would only hold the cap until it went stale.
    pub fn release_all(&mut self, out: &mut [Block; SLOTS]) -> usize {
        let mut n = 0;
        for k in 0..SLOTS {
            if self.slots[k].is_some() {
                out[n] = self.evict(k);
                n += 1;
            }
        }
        n
    }

    /// Bytes kept now.
    #[cfg(test)]
    pub fn kept_bytes(&self) -> usize {
        self.bytes
    }

    /// The slot of the least recently kept block, and the tick it was kept at.
    fn oldest(&self) -> Option<(usize, u64)> {
        (0..SLOTS)
            .filter_map(|k| self.slots[k].map(|(_, tick)| (tick, k)))
            .min()
            .map(|(tick, k)| (k, tick))
    }
}

#[cfg(test)]
mod tests {
    use super::{Block, KeptBuffers};

    fn block(ptr: usize, size: usize) -> Block {
        Block {
            ptr,
            size,
            align: 8,
        }
    }

    const NONE: Block = Block {
        ptr: 0,
        size: 0,
        align: 1,
    };

    /// Keeps and takes back a small block (pointer 9) until every block kept before is stale.
    fn make_stale<const S: usize>(kept: &mut KeptBuffers<S>, size: usize, cap: usize) {
        let mut out = [NONE; S];
        for _ in 0..=KeptBuffers::<S>::STALE {
            assert_eq!(kept.keep(block(9, size), cap, &mut out), 0);
            assert_eq!(kept.take(size, 8), Some(block(9, size)));
        }
    }

    #[test]
    fn release_all_hands_back_every_kept_block_once() {
        let mut kept = KeptBuffers::<4>::new();
        let mut out = [NONE; 4];
        for (p, size) in [(0x1000, 64), (0x2000, 128), (0x3000, 64)] {
            assert_eq!(kept.keep(block(p, size), 1000, &mut out), 0);
        }
        assert_eq!(kept.release_all(&mut out), 3);
        let mut released: Vec<usize> = out[..3].iter().map(|b| b.ptr).collect();
        released.sort_unstable();
        assert_eq!(released, [0x1000, 0x2000, 0x3000]);
        assert_eq!(kept.kept_bytes(), 0);
        assert_eq!(kept.take(64, 8), None);
        assert_eq!(kept.release_all(&mut out), 0);
        // the full cap is free again
        assert_eq!(kept.keep(block(0x4000, 1000), 1000, &mut out), 0);
    }

    #[test]
    fn a_freed_block_comes_back_for_its_size_and_alignment_only() {
        let mut kept = KeptBuffers::<4>::new();
        let mut out = [NONE; 4];
        assert_eq!(kept.keep(block(0x1000, 64), 1000, &mut out), 0);
        assert_eq!(kept.take(32, 8), None, "another size");
        assert_eq!(kept.take(64, 64), None, "another alignment");
        assert_eq!(kept.take(64, 8), Some(block(0x1000, 64)));
        assert_eq!(kept.take(64, 8), None, "taken once");
        assert_eq!(kept.kept_bytes(), 0);
    }

    #[test]
    fn over_the_cap_the_newest_is_released_unless_old_blocks_went_stale() {
        let mut kept = KeptBuffers::<4>::new();
        let mut out = [NONE; 4];
        for (k, size) in [30, 20, 50].into_iter().enumerate() {
            assert_eq!(kept.keep(block(k + 1, size), 100, &mut out), 0);
        }
        let n = kept.keep(block(4, 40), 100, &mut out);
        assert_eq!(&out[..n], [block(4, 40)], "the kept ones stay");
        assert_eq!(kept.kept_bytes(), 100);
        // a small block kept and taken back again and again: the three above go stale
        make_stale(&mut kept, 1, 200);
        let n = kept.keep(block(5, 40), 100, &mut out);
        let released = [block(1, 30), block(2, 20)];
        assert_eq!(
            &out[..n],
            released,
            "stale, oldest first, as many as needed"
        );
        assert_eq!(kept.kept_bytes(), 50 + 40);
    }

    #[test]
    fn a_block_larger_than_the_cap_is_released_and_nothing_else() {
        let mut kept = KeptBuffers::<3>::new();
        let mut out = [NONE; 3];
        assert_eq!(kept.keep(block(1, 10), 20, &mut out), 0);
        assert_eq!(kept.keep(block(2, 10), 20, &mut out), 0);
        // both go stale
        make_stale(&mut kept, 0, 20);
        // it could never fit: the stale blocks stay, only the block itself is released
        let n = kept.keep(block(3, 21), 20, &mut out);
        assert_eq!(&out[..n], [block(3, 21)]);
        assert_eq!(kept.kept_bytes(), 20);
    }

    #[test]
    fn full_slots_give_up_their_oldest_block() {
        let mut kept = KeptBuffers::<2>::new();
        let mut out = [NONE; 2];
        assert_eq!(kept.keep(block(1, 10), 1000, &mut out), 0);
        assert_eq!(kept.keep(block(2, 10), 1000, &mut out), 0);
        let n = kept.keep(block(3, 10), 1000, &mut out);
        assert_eq!(&out[..n], [block(1, 10)]);
        let mut back = [kept.take(10, 8), kept.take(10, 8)].map(|b| b.map(|b| b.ptr));
        back.sort();
        assert_eq!(back, [Some(2), Some(3)], "the two newest stayed");
    }

    /// A random workload replayed through the allocator's rules: never more than the cap kept,
    /// every block either live, kept or released exactly once, and a repeated step served from
    /// what the previous step freed.
    #[test]
    fn the_cap_holds_and_every_block_is_accounted_for() {
        const CAP: usize = 400;
        let mut kept = KeptBuffers::<8>::new();
        let mut live: Vec<Block> = Vec::new();
        let mut released = std::collections::BTreeSet::new();
        let (mut next, mut hits) = (0usize, 0usize);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for _ in 0..10_000 {
            if live.is_empty() || rand(2) == 0 {
                let size = [32, 48, 64, 96, 128][rand(5)];
                let b = kept
                    .take(size, 8)
                    .inspect(|_| hits += 1)
                    .unwrap_or_else(|| {
                        next += 1;
                        block(next, size)
                    });
                assert!(!released.contains(&b.ptr), "a released block handed out");
                live.push(b);
            } else {
                let b = live.swap_remove(rand(live.len()));
                let mut out = [NONE; 8];
                let n = kept.keep(b, CAP, &mut out);
                for r in &out[..n] {
                    assert!(released.insert(r.ptr), "released twice");
                }
            }
            assert!(kept.kept_bytes() <= CAP);
        }
        assert!(hits > 1000, "freed blocks are reused ({hits} hits)");
    }
}
