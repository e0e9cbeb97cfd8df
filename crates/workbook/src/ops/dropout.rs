//! Seeded dropout that gives the same masks on every CPU-backed device.
//!
//! candle cannot seed its CPU random generator, so `candle_nn::ops::dropout` differs from run to
//! run. Here masks for host-memory tensors come from a seeded ChaCha generator, so a training run
//! is reproducible bit for bit; on CUDA they come from the device's generator, seeded once.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::Dropout;
//! let x = Tensor::ones((2, 4), workbook::candle_core::DType::F32, &Device::Cpu).unwrap();
//! let a = Dropout::new(7, &Device::Cpu).apply(&x, 0.5).unwrap();
//! let b = Dropout::new(7, &Device::Cpu).apply(&x, 0.5).unwrap();
//! assert_eq!(a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap()); // same seed, same mask
//! ```

use super::kernel_support::{host_slice, with_host, ELEMENTS_PER_TASK};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Shape, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::sync::Arc;

/// A source of dropout masks.
#[derive(Debug)]
pub struct Dropout {
    rng: ChaCha8Rng,
}

impl Dropout {
    /// A mask source seeded with `seed`; also seeds `device`'s generator when it has one.
    pub fn new(seed: u64, device: &Device) -> Self {
        if device.is_cuda() {
            // Only CUDA can be seeded; on the CPU candle reports an error we do not need.
            let _ = device.set_seed(seed);
        }
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// `n` mask values, element `k` kept (1) when the generator's `k`-th `random::<f64>()` is at
    /// least `p`. That draw is `(u >> 11) · 2⁻⁵³` for the next `u64` `u`, so the test is the
    /// integer comparison `u >> 11 >= ceil(p · 2⁵³)`, and the `u64`s can be generated in bulk
    /// and in parallel: ChaCha can seek, so chunk `c` starts at its own offset in the one stream.
    /// Same masks as drawing one by one, several times faster (issue 9: this was most of a GCN
    /// epoch on Cora).
    ///
    /// One byte per element: the mask is kept for the backward pass, and as `f32` it was four
    /// times the traffic (on GATv2's attention, `[E, 8]`, 352 MB a step on a graph of 10⁷ edges).
    fn host_mask(&mut self, n: usize, p: f64) -> Vec<u8> {
        const CHUNK: usize = 1 << 16;
        // Random words are made and used in blocks that stay in the L1 cache.
        const BLOCK: usize = 2048;
        let threshold = (p * (1u64 << 53) as f64).ceil() as u64;
        let start = self.rng.get_word_pos();
        let mut keep = vec![0u8; n];
        keep.par_chunks_mut(CHUNK).enumerate().for_each_init(
            || (self.rng.clone(), [0u64; BLOCK]),
            |(rng, words), (c, out)| {
                // two 32-bit words per u64
                rng.set_word_pos(start + 2 * (c * CHUNK) as u128);
                let t = threshold;
                for out in out.chunks_mut(BLOCK) {
                    let words = &mut words[..out.len()];
                    rng.fill(words);
                    for (o, &u) in out.iter_mut().zip(words.iter()) {
                        *o = u8::from(u >> 11 >= t);
                    }
                }
            },
        );
        self.rng.set_word_pos(start + 2 * n as u128);
        keep
    }

    /// The entries at `positions` (ascending) of the mask [`Dropout::host_mask`] would draw for
    /// `n` elements, `true` = kept; the generator ends where that mask leaves it. Only the
    /// ChaCha blocks holding those positions are computed, one 16-word block each
    /// ([`ChaCha8Blocks`]), which is what makes dropout on sparse features cheap
    /// ([`crate::ops::sparse_features::dropout`]). A seek of `ChaCha8Rng` would compute four
    /// blocks for the one word pair: in a notebook, where evcxr builds everything unoptimised,
    /// that was 40% of a mini-batch epoch on Cora (issue 48).
    pub(crate) fn host_keep_at(&mut self, n: usize, p: f64, positions: &[u64]) -> Vec<bool> {
        const CHUNK: usize = 4096;
        let threshold = (p * (1u64 << 53) as f64).ceil() as u64;
        let start = self.rng.get_word_pos();
        let blocks = ChaCha8Blocks::of(&self.rng);
        let mut keep = vec![false; positions.len()];
        keep.par_chunks_mut(CHUNK)
            .zip(positions.par_chunks(CHUNK))
            .for_each_init(
                || (u64::MAX, [0u32; 16]),
                |(at, block), (out, pos)| {
                    let mut word = |w: u128| {
                        let b = (w / 16) as u64;
                        if b != *at {
                            *block = blocks.block(b);
                            *at = b;
                        }
                        block[(w % 16) as usize]
                    };
                    for (o, &k) in out.iter_mut().zip(pos) {
                        // next_u64: the word at the position, then the next one as the high half
                        let w = start + 2 * k as u128;
                        let (lo, hi) = (word(w), word(w + 1));
                        *o = (u64::from(hi) << 32 | u64::from(lo)) >> 11 >= threshold;
                    }
                },
            );
        self.rng.set_word_pos(start + 2 * n as u128);
        keep
    }

    /// Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)`.
    pub fn apply(&mut self, x: &Tensor, p: f64) -> candle_core::Result<Tensor> {
        if p <= 0.0 {
            return Ok(x.clone());
        }
        if p >= 1.0 {
            return x.zeros_like();
        }
        let scale = 1.0 / (1.0 - p);
        let mask = if x.device().is_cuda() {
            Tensor::rand(0f32, 1f32, x.shape(), x.device())?
                .ge(p)?
                .to_dtype(x.dtype())?
        } else {
            let keep = self.host_mask(x.elem_count(), p);
            if x.device().is_cpu() && matches!(x.dtype(), DType::F32 | DType::F64) {
                return x.contiguous()?.apply_op1(MaskScale {
                    keep: Arc::new(keep),
                    scale,
                });
            }
            let keep: Vec<f32> = keep.into_iter().map(f32::from).collect();
            Tensor::from_vec(keep, x.shape(), x.device())?.to_dtype(x.dtype())?
        };
        (x * mask)? * scale
    }
}

/// `(x · mask) · scale` on the CPU as one op, rounded as candle's two (`x * mask`, then the
/// affine map `v · scale + 0`), with the gradient `(g · scale + 0) · mask` in one pass. The
/// composed ops allocate a converted mask, and their backward pass also computes a gradient for
/// the mask and accumulates each gradient into a fresh zero tensor: on GATv2 that was three
/// dropouts' worth of passes over `[N, 64]` and `[E, 8]` tensors per step.
struct MaskScale {
    /// 1 (kept) or 0 per element.
    keep: Arc<Vec<u8>>,
    scale: f64,
}

fn mask_scale<T: candle_core::WithDType>(x: &[T], keep: &[u8], scale: f64) -> Vec<T> {
    let (s, zero) = (T::from_f64(scale), T::from_f64(0.0));
    let mut out = vec![zero; x.len()];
    out.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(
            x.par_chunks(ELEMENTS_PER_TASK)
                .zip(keep.par_chunks(ELEMENTS_PER_TASK)),
        )
        .for_each(|(o, (x, k))| {
            for ((o, &x), &k) in o.iter_mut().zip(x).zip(k) {
                *o = x * T::from_f64(f64::from(k)) * s + zero;
            }
        });
    out
}

/// `(g · scale + 0) · mask`: candle's affine backward, then its product's.
fn mask_scale_grad<T: candle_core::WithDType>(g: &[T], keep: &[u8], scale: f64) -> Vec<T> {
    let (s, zero) = (T::from_f64(scale), T::from_f64(0.0));
    let mut out = vec![zero; g.len()];
    out.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(
            g.par_chunks(ELEMENTS_PER_TASK)
                .zip(keep.par_chunks(ELEMENTS_PER_TASK)),
        )
        .for_each(|(o, (g, k))| {
            for ((o, &g), &k) in o.iter_mut().zip(g).zip(k) {
                *o = (g * s + zero) * T::from_f64(f64::from(k));
            }
        });
    out
}

impl CustomOp1 for MaskScale {
    fn name(&self) -> &'static str {
        "dropout"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = match s {
            CpuStorage::F32(_) => CpuStorage::F32(mask_scale(
                host_slice::<f32>(s, l, "dropout")?,
                &self.keep,
                self.scale,
            )),
            CpuStorage::F64(_) => CpuStorage::F64(mask_scale(
                host_slice::<f64>(s, l, "dropout")?,
                &self.keep,
                self.scale,
            )),
            other => candle_core::bail!("dropout: f32 or f64 expected, got {:?}", other.dtype()),
        };
        Ok((out, l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let grad = grad.contiguous()?;
        let g = match grad.dtype() {
            DType::F32 => Tensor::from_vec(
                with_host::<f32, _>(&grad, "dropout", |g| {
                    Ok(mask_scale_grad(g, &self.keep, self.scale))
                })?,
                x.shape(),
                x.device(),
            )?,
            DType::F64 => Tensor::from_vec(
                with_host::<f64, _>(&grad, "dropout", |g| {
                    Ok(mask_scale_grad(g, &self.keep, self.scale))
                })?,
                x.shape(),
                x.device(),
            )?,
            other => candle_core::bail!("dropout: f32 or f64 expected, got {other:?}"),
        };
        Ok(Some(g))
    }
}

/// Single blocks of a [`ChaCha8Rng`]'s stream, computed directly (ChaCha with 8 rounds, a
/// 64-bit block counter in words 12 and 13, the stream number in 14 and 15, as `rand_chacha`
/// lays it out): block `b` holds the generator's words `16·b .. 16·b + 16`.
struct ChaCha8Blocks {
    input: [u32; 16],
}

impl ChaCha8Blocks {
    fn of(rng: &ChaCha8Rng) -> Self {
        let mut input = [0u32; 16];
        input[..4].copy_from_slice(&[0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574]);
        for (w, b) in input[4..12].iter_mut().zip(rng.get_seed().chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        let stream = rng.get_stream();
        input[14] = stream as u32;
        input[15] = (stream >> 32) as u32;
        Self { input }
    }

    fn block(&self, b: u64) -> [u32; 16] {
        let mut input = self.input;
        input[12] = b as u32;
        input[13] = (b >> 32) as u32;
        let mut x = input;
        fn quarter(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
            x[a] = x[a].wrapping_add(x[b]);
            x[d] = (x[d] ^ x[a]).rotate_left(16);
            x[c] = x[c].wrapping_add(x[d]);
            x[b] = (x[b] ^ x[c]).rotate_left(12);
            x[a] = x[a].wrapping_add(x[b]);
            x[d] = (x[d] ^ x[a]).rotate_left(8);
            x[c] = x[c].wrapping_add(x[d]);
            x[b] = (x[b] ^ x[c]).rotate_left(7);
        }
        for _ in 0..4 {
            quarter(&mut x, 0, 4, 8, 12);
            quarter(&mut x, 1, 5, 9, 13);
            quarter(&mut x, 2, 6, 10, 14);
            quarter(&mut x, 3, 7, 11, 15);
            quarter(&mut x, 0, 5, 10, 15);
            quarter(&mut x, 1, 6, 11, 12);
            quarter(&mut x, 2, 7, 8, 13);
            quarter(&mut x, 3, 4, 9, 14);
        }
        for (o, i) in x.iter_mut().zip(input) {
            *o = o.wrapping_add(i);
        }
        x
    }
}

#[cfg(test)]
mod mask_tests {
    use super::*;
    use rand::RngCore;

    /// The bulk, parallel mask equals drawing `random::<f64>() >= p` one element at a time,
    /// and leaves the generator where the one-by-one draws would.
    #[test]
    fn bulk_mask_equals_one_draw_per_element() {
        for (n, p) in [(0, 0.5), (7, 0.5), (70_000, 0.6), ((1 << 16) * 2 + 3, 0.1)] {
            let mut fast = Dropout::new(11, &Device::Cpu);
            let mut slow = ChaCha8Rng::seed_from_u64(11);
            // start mid-block, as after an earlier mask of odd length
            let _ = fast.host_mask(3, 0.5);
            for _ in 0..3 {
                let _ = slow.random::<f64>();
            }
            let got = fast.host_mask(n, p);
            let want: Vec<u8> = (0..n)
                .map(|_| u8::from(slow.random::<f64>() >= p))
                .collect();
            assert_eq!(got, want, "n = {n}, p = {p}");
            assert_eq!(fast.rng.random::<u64>(), slow.random::<u64>());
        }
    }

    /// Blocks computed directly are the generator's words, for other seeds and streams too,
    /// across the 32-bit boundary of the block counter.
    #[test]
    fn single_blocks_equal_the_generators_stream() {
        for (seed, stream) in [(3u64, 0u64), (11, 0), (0xdead_beef, 7), (1, u64::MAX)] {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(stream);
            let blocks = ChaCha8Blocks::of(&rng);
            for b in [
                0u64,
                1,
                2,
                5,
                63,
                1000,
                (1 << 32) - 1,
                1 << 32,
                u64::MAX / 16,
            ] {
                let mut want = [0u32; 16];
                rng.set_word_pos(u128::from(b) * 16);
                for w in &mut want {
                    *w = rng.next_u32();
                }
                assert_eq!(
                    blocks.block(b),
                    want,
                    "seed {seed}, stream {stream}, block {b}"
                );
            }
        }
    }

    /// The one-op dropout equals candle's `(x * mask) * scale`, values and gradient.
    #[test]
    fn fused_dropout_equals_the_composed_ops() {
        use candle_core::Var;
        let vals: Vec<f32> = (0..5000).map(|i| ((i as f32) * 0.71).sin() * 3.0).collect();
        let x = Var::from_vec(vals.clone(), (50, 100), &Device::Cpu).unwrap();
        let w = Tensor::from_vec(
            (0..vals.len())
                .map(|i| (i % 5) as f32 - 2.5)
                .collect::<Vec<_>>(),
            (50, 100),
            &Device::Cpu,
        )
        .unwrap();
        let p = 0.6;
        let fused = Dropout::new(3, &Device::Cpu)
            .apply(x.as_tensor(), p)
            .unwrap();
        let keep = Dropout::new(3, &Device::Cpu).host_mask(vals.len(), p);
        let keep: Vec<f32> = keep.into_iter().map(f32::from).collect();
        let mask = Tensor::from_vec(keep, (50, 100), &Device::Cpu).unwrap();
        let composed = ((x.as_tensor() * mask).unwrap() * (1.0 / (1.0 - p))).unwrap();
        let grad = |y: &Tensor| {
            let g = (y * &w).unwrap().sum_all().unwrap().backward().unwrap();
            g.get(x.as_tensor())
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        let v = |y: &Tensor| y.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(v(&fused), v(&composed));
        assert_eq!(grad(&fused), grad(&composed));
    }
}
