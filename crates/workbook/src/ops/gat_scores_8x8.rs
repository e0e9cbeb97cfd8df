//! GATv2's scores for one edge at its default width, 8 heads of 8 `f32`, in 256-bit vector code
//! where the CPU has AVX, with exactly the arithmetic of the portable loop.
//!
//! The portable loop ([`super::gat_scores`]'s `edge_scores_fixed`) compiles for the x86-64
//! baseline, 128-bit SSE: per edge 16 vectors of LeakyReLU terms, then each head's eight terms
//! summed as a balanced tree, one head at a time. After a node order puts the rows in the cache,
//! that arithmetic is what `gat_scores` waits on (120 ms on `knn:1000000` after RCM, against
//! 56 ms for its rows at the measured random-read rate; docs/performance.md, issue 47).
//!
//! Here each head's eight values are one 256-bit vector, and the three levels of the tree run
//! for all heads at once: the halves of two heads added in one instruction (value `k` plus
//! value `k + 4`), then pairs of those (`k` plus `k + 2`), then the last pair. The same
//! additions in the same order as the portable loop, so the same bits; `f64` and other widths
//! keep the portable loop, and so does a CPU without AVX (checked once per call of the op). The
//! tests, against the portable loop bit for bit, are in `gat_scores.rs`, which owns that loop.

/// `se[h] = Σ_c att[h, c] · LeakyReLU(ri[h, c] + lj[h, c])` for 8 heads of 8, the sum over `c`
/// as the balanced tree of the portable loop. The caller checked
/// [`avx`](super::kernel_support::avx).
#[cfg(target_arch = "x86_64")]
pub(super) fn edge_scores(
    lj: &[f32; 64],
    ri: &[f32; 64],
    att: &[f32; 64],
    slope: f32,
    se: &mut [f32; 8],
) {
    debug_assert!(super::kernel_support::avx());
    // SAFETY: `avx()` said this CPU has AVX, the only feature `avx_edge_scores` enables;
    // the arguments are fixed-size arrays, so every load and store below is in bounds.
    unsafe { avx_edge_scores(lj, ri, att, slope, se) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn avx_edge_scores(lj: &[f32; 64], ri: &[f32; 64], att: &[f32; 64], slope: f32, se: &mut [f32; 8]) {
    use std::arch::x86_64::*;
    // SAFETY (each intrinsic): AVX is enabled on this function, and every unaligned load reads
    // 8 values at `8 · head` of a 64-value array, in bounds; the store writes the 8 of `se`.
    unsafe {
        let zero = _mm256_setzero_ps();
        let slope = _mm256_set1_ps(slope);
        // the LeakyReLU terms of head `h`: z = ri + lj; z > 0 ? z : z · slope; times att, as the
        // portable loop computes them (a NaN z is not > 0 and gives z · slope there too)
        let term = |h: usize| {
            let z = _mm256_add_ps(
                _mm256_loadu_ps(ri.as_ptr().add(8 * h)),
                _mm256_loadu_ps(lj.as_ptr().add(8 * h)),
            );
            let positive = _mm256_cmp_ps::<_CMP_GT_OQ>(z, zero);
            let leaky = _mm256_blendv_ps(_mm256_mul_ps(z, slope), z, positive);
            _mm256_mul_ps(leaky, _mm256_loadu_ps(att.as_ptr().add(8 * h)))
        };
        // level 1, two heads a vector: value k + value k + 4 (k < 4) of head h in the low half,
        // of head h + 1 in the high half
        let halves = |h: usize| {
            let (a, b) = (term(h), term(h + 1));
            _mm256_add_ps(
                _mm256_permute2f128_ps::<0x20>(a, b),
                _mm256_permute2f128_ps::<0x31>(a, b),
            )
        };
        let (y0, y1, y2, y3) = (halves(0), halves(2), halves(4), halves(6));
        // level 2: k + k + 2 (k < 2); per 128-bit half [p0, p1, q0, q1] for the heads of y_p
        // and y_q in that half
        let pairs = |p: __m256, q: __m256| {
            _mm256_add_ps(
                _mm256_shuffle_ps::<0b01_00_01_00>(p, q),
                _mm256_shuffle_ps::<0b11_10_11_10>(p, q),
            )
        };
        let (z0, z1) = (pairs(y0, y1), pairs(y2, y3));
        // level 3: the last pair; low half heads 0, 2, 4, 6, high half heads 1, 3, 5, 7
        let s = _mm256_add_ps(
            _mm256_shuffle_ps::<0b10_00_10_00>(z0, z1),
            _mm256_shuffle_ps::<0b11_01_11_01>(z0, z1),
        );
        // interleave the halves back into head order 0..8
        let lo = _mm256_unpacklo_ps(s, _mm256_permute2f128_ps::<0x01>(s, s));
        let hi = _mm256_unpackhi_ps(s, _mm256_permute2f128_ps::<0x01>(s, s));
        let ordered = _mm256_permute2f128_ps::<0x20>(lo, hi);
        _mm256_storeu_ps(se.as_mut_ptr(), ordered);
    }
}
