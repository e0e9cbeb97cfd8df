//! Parameter initialisation as PyG does it (Glorot-uniform weights, zero biases), from a seeded
//! host RNG so that runs are reproducible on every device (candle cannot seed its CPU RNG).

use candle_core::{Device, Tensor};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Glorot/Xavier uniform with PyG's fan: the last two dimensions of the shape.
pub(crate) fn glorot(
    shape: &[usize],
    rng: &mut ChaCha8Rng,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let n = shape.len();
    let fan = shape[n.saturating_sub(2)..].iter().sum::<usize>().max(1);
    let bound = (6.0 / fan as f64).sqrt() as f32;
    let len: usize = shape.iter().product();
    let data: Vec<f32> = (0..len).map(|_| rng.random_range(-bound..=bound)).collect();
    Tensor::from_vec(data, shape, device)
}
