//! Parameter initialisation as PyG does it (Glorot-uniform weights, uniform biases, zeros), from
//! a seeded host RNG so that runs are reproducible on every device (candle cannot seed its CPU
//! RNG). What a [`LayerSpec::init_parameters`](super::LayerSpec::init_parameters) draws with,
//! the built-in layers' and yours.
//!
//! ```
//! use workbook::candle_core::Device;
//! use workbook::layers::init::{glorot, uniform};
//! use workbook::rand::SeedableRng;
//! use workbook::rand_chacha::ChaCha8Rng;
//! let mut rng = ChaCha8Rng::seed_from_u64(0);
//! let w = glorot(&[4, 34], &mut rng, &Device::Cpu).unwrap();
//! let bound = (6.0f32 / 38.0).sqrt();
//! assert!(w.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap() <= bound);
//! let b = uniform(&[4], 0.5, &mut rng, &Device::Cpu).unwrap();
//! assert_eq!(b.dims(), &[4]);
//! ```

use candle_core::{Device, Tensor};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Glorot/Xavier uniform with PyG's fan: the last two dimensions of the shape.
pub fn glorot(
    shape: &[usize],
    rng: &mut ChaCha8Rng,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let n = shape.len();
    let fan = shape[n.saturating_sub(2)..].iter().sum::<usize>().max(1);
    let bound = (6.0 / fan as f64).sqrt();
    uniform(shape, bound, rng, device)
}

/// Uniform in `[-bound, bound]` (PyTorch's `Linear` draws weights and biases with
/// `bound = 1/√in_features`).
pub fn uniform(
    shape: &[usize],
    bound: f64,
    rng: &mut ChaCha8Rng,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let bound = bound as f32;
    let len: usize = shape.iter().product();
    let data: Vec<f32> = (0..len).map(|_| rng.random_range(-bound..=bound)).collect();
    Tensor::from_vec(data, shape, device)
}
