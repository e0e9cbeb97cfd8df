//! Seeded dropout that gives the same masks on every CPU-backed device.
//!
//! candle cannot seed its CPU random generator, so `candle_nn::ops::dropout` differs from run to
//! run. Here masks for host-memory tensors come from a seeded ChaCha generator, so a training run
//! is reproducible bit for bit; on CUDA they come from the device's generator, seeded once.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::train::Dropout;
//! let x = Tensor::ones((2, 4), workbook::candle_core::DType::F32, &Device::Cpu).unwrap();
//! let a = Dropout::new(7, &Device::Cpu).apply(&x, 0.5).unwrap();
//! let b = Dropout::new(7, &Device::Cpu).apply(&x, 0.5).unwrap();
//! assert_eq!(a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap()); // same seed, same mask
//! ```

use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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
            let keep: Vec<f32> = (0..x.elem_count())
                .map(|_| {
                    if self.rng.random::<f64>() >= p {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            Tensor::from_vec(keep, x.shape(), x.device())?.to_dtype(x.dtype())?
        };
        (x * mask)? * scale
    }
}
