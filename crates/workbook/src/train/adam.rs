//! Adam exactly as `torch.optim.Adam`, with L2 weight decay per parameter.
//!
//! candle-nn ships AdamW, whose *decoupled* decay differs from the *coupled* L2 decay
//! (`grad += wd * param`) that PyG's GCN and GAT examples use through `torch.optim.Adam`. This
//! small optimiser reproduces torch's update, so our accuracies are comparable with PyG's, and it
//! lets the GCN recipe decay only the first layer as Kipf & Welling did.
//!
//! ```
//! use workbook::candle_core::{Device, Var, Tensor};
//! use workbook::train::Adam;
//! let w = Var::new(&[1.0f32, -2.0], &Device::Cpu).unwrap();
//! let mut opt = Adam::new(vec![("w".into(), w.clone(), 0.0)], 0.1).unwrap();
//! let loss = w.as_tensor().sqr().unwrap().sum_all().unwrap();
//! opt.backward_step(&loss).unwrap();
//! // the first step moves every coordinate by lr against the gradient's sign
//! let v = w.as_tensor().to_vec1::<f32>().unwrap();
//! assert!((v[0] - 0.9).abs() < 1e-6 && (v[1] + 1.9).abs() < 1e-6);
//! ```

use candle_core::{Tensor, Var};

struct Slot {
    name: String,
    var: Var,
    weight_decay: f64,
    m: Tensor,
    v: Tensor,
}

/// `torch.optim.Adam(betas=(0.9, 0.999), eps=1e-8)` with a weight decay per parameter.
pub struct Adam {
    slots: Vec<Slot>,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    step: u64,
}

impl Adam {
    /// An optimiser over `(name, variable, weight_decay)` triples.
    pub fn new(params: Vec<(String, Var, f64)>, lr: f64) -> candle_core::Result<Self> {
        let slots = params
            .into_iter()
            .map(|(name, var, weight_decay)| {
                Ok(Slot {
                    m: var.as_tensor().zeros_like()?,
                    v: var.as_tensor().zeros_like()?,
                    name,
                    var,
                    weight_decay,
                })
            })
            .collect::<candle_core::Result<_>>()?;
        Ok(Self {
            slots,
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            step: 0,
        })
    }

    /// Number of steps taken.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The optimiser's state tensors (`exp_avg`, `exp_avg_sq`) by parameter name.
    pub fn state(&self) -> impl Iterator<Item = (&str, &Tensor, &Tensor)> {
        self.slots.iter().map(|s| (s.name.as_str(), &s.m, &s.v))
    }

    /// Back-propagates `loss` and updates every parameter.
    pub fn backward_step(&mut self, loss: &Tensor) -> candle_core::Result<()> {
        let grads = loss.backward()?;
        self.step += 1;
        let t = self.step as i32;
        let bias1 = 1.0 - self.beta1.powi(t);
        let bias2 = 1.0 - self.beta2.powi(t);
        for slot in &mut self.slots {
            let Some(grad) = grads.get(slot.var.as_tensor()) else {
                continue;
            };
            let theta = slot.var.as_tensor();
            let grad = if slot.weight_decay != 0.0 {
                (grad + (theta * slot.weight_decay)?)?
            } else {
                grad.clone()
            };
            slot.m = ((&slot.m * self.beta1)? + (&grad * (1.0 - self.beta1))?)?;
            slot.v = ((&slot.v * self.beta2)? + (grad.sqr()? * (1.0 - self.beta2))?)?;
            let denom = ((&slot.v.sqrt()? / bias2.sqrt())? + self.eps)?;
            let update = ((&slot.m / &denom)? * (self.lr / bias1))?;
            slot.var.set(&(theta - update)?)?;
        }
        Ok(())
    }
}
