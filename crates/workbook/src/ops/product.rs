//! `x · Wᵀ` as one op whose backward pass computes `∂x` only when `x` needs it.
//!
//! candle's `matmul` backward always forms both products, `∂x = G · W` and `∂W = Gᵀ · x`. For
//! a layer's input features, which need no gradient, `∂x` is a product as large as the forward
//! one, and candle then adds it into a zero tensor of the same size. GCN's first layer
//! (`x · Wᵀ`, its bias after the aggregation) paid for both on every step: in a profile of GCN
//! on `knn:300000` (32 features) candle's `matmul` backward was 23% of the backward pass, the
//! `∂W` it needs included. Here the forward pass is the same `matmul`
//! call, so the same bits, and the backward pass forms each product only when its argument
//! needs it, as [`super::linear::linear`] does with a bias. Other devices and dtypes use
//! candle's `matmul`.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor, Var};
//! use workbook::ops::product::product;
//! let dev = Device::Cpu;
//! let x = Tensor::new(&[[1f32, 2.], [3., 4.]], &dev).unwrap(); // features: no gradient
//! let w = Var::new(&[[1f32, 0.], [1., 1.]], &dev).unwrap(); // [out 2, in 2]
//! let y = product(&x, w.as_tensor()).unwrap();
//! assert_eq!(y.to_vec2::<f32>().unwrap(), [[1., 3.], [3., 7.]]);
//! let g = y.sum_all().unwrap().backward().unwrap();
//! assert!(g.get(&x).is_none()); // candle's matmul would have formed ∂x
//! assert_eq!(g.get(w.as_tensor()).unwrap().to_vec2::<f32>().unwrap(), [[4., 6.], [4., 6.]]);
//! ```

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Shape, Tensor};

/// `x · weightᵀ` for dense `x` `[N, F]` and `weight` `[O, F]`: `x.matmul(&weight.t())`, the
/// same call, with `∂x` only when `x` needs it (see the module docs). Other devices and
/// dtypes use candle's `matmul`.
pub fn product(x: &Tensor, weight: &Tensor) -> candle_core::Result<Tensor> {
    let fused = on_cpu(x)
        && x.rank() == 2
        && weight.rank() == 2
        && weight.dtype() == x.dtype()
        && weight.device().is_cpu()
        && x.dim(1)? == weight.dim(1)?;
    if !fused {
        return x.matmul(&weight.t()?);
    }
    x.contiguous()?.apply_op2(&weight.contiguous()?, Product)
}

/// Whether the fused CPU ops of this module and [`super::linear`] take `t`.
pub(super) fn on_cpu(t: &Tensor) -> bool {
    t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64)
}

/// `∂x = G · W` and `∂W = (xᵀ · G)ᵀ`, the products candle's `matmul` backward forms (for the
/// call `x.matmul(&weight.t())`), each only when its argument needs it; `grad` contiguous.
pub(super) fn product_grads(
    x: &Tensor,
    weight: &Tensor,
    grad: &Tensor,
) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
    // Detached: they read tensors of the forward graph, and a parameter's gradient that kept
    // that graph alive would keep every step's graph alive through the optimiser's state.
    let (x_c, w_c) = (x.detach(), weight.detach());
    let dx = if x.track_op() {
        Some(grad.matmul(&w_c)?)
    } else {
        None
    };
    let dw = if weight.track_op() {
        Some(x_c.t()?.matmul(grad)?.t()?)
    } else {
        None
    };
    Ok((dx, dw))
}

/// `x · weightᵀ` on host storage, `x` `[N, F]` and `weight` `[O, F]`: the call
/// `x.matmul(&weight.t())` makes, so the same product bit for bit (also [`super::linear`]'s).
pub(super) fn times_transposed(
    x: &CpuStorage,
    lx: &Layout,
    weight: &CpuStorage,
    lw: &Layout,
) -> candle_core::Result<(CpuStorage, Shape)> {
    let (n, f) = lx.shape().dims2()?;
    let (o, _) = lw.shape().dims2()?;
    let y = x.matmul(weight, (1, n, o, f), lx, &lw.transpose(0, 1)?)?;
    Ok((y, Shape::from((n, o))))
}

/// The op of [`product`]: arguments `x`, `weight`.
struct Product;

impl CustomOp2 for Product {
    fn name(&self) -> &'static str {
        "product"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        times_transposed(s1, l1, s2, l2)
    }

    fn bwd(
        &self,
        x: &Tensor,
        weight: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        product_grads(x, weight, &grad.contiguous()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// `product` equals `matmul` with the transposed weight, gradients included; for an input
    /// that needs no gradient (features) it computes none, where candle's `matmul` computes one.
    #[test]
    fn product_equals_matmul_and_skips_the_unneeded_gradient() {
        let dev = Device::Cpu;
        let x = Var::new(
            &[[0.3f32, -1.2, 2.5], [0.7, 0.1, -0.4], [1.9, -2.2, 0.05]],
            &dev,
        )
        .unwrap();
        let w = Var::new(&[[0.11f32, -0.7, 1.3], [2.1, 0.9, -0.35]], &dev).unwrap();
        let run = |fused: bool, x: &Tensor| {
            let y = if fused {
                product(x, w.as_tensor()).unwrap()
            } else {
                x.matmul(&w.t().unwrap()).unwrap()
            };
            let loss = (y.sqr().unwrap() * 0.5).unwrap().sum_all().unwrap();
            let g = loss.backward().unwrap();
            let v = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            (v(&y), g.get(x).map(v), v(g.get(w.as_tensor()).unwrap()))
        };
        assert_eq!(run(true, x.as_tensor()), run(false, x.as_tensor()));
        let features = x.as_tensor().detach();
        let (ours, candles) = (run(true, &features), run(false, &features));
        assert_eq!((&ours.0, &ours.2), (&candles.0, &candles.2));
        assert!(candles.1.is_some(), "candle's matmul forms ∂x for features");
        assert!(ours.1.is_none(), "product does not");
    }
}
