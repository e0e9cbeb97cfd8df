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

use crate::error::{Result, WorkbookError};
use crate::model::Model;
use crate::placement::{check_all, Placed, Placement, Role};
use candle_core::backprop::GradStore;
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
    /// Where the parameters are, and where the state (`m`, `v`) is. They differ only after
    /// [`Adam::rebind`], which reproduces PyTorch's "optimizer state left behind".
    params_at: Placement,
    state_at: Placement,
}

impl Adam {
    /// An optimiser over `(name, variable, weight_decay)` triples, on the variables' device.
    pub fn new(params: Vec<(String, Var, f64)>, lr: f64) -> candle_core::Result<Self> {
        let at = params
            .first()
            .map_or_else(Placement::cpu, |(_, v, _)| Placement::of(v.device()));
        Self::new_on(params, lr, at)
    }

    /// An optimiser over every parameter of `model` (on the model's placement, `sim:N`
    /// included), with the weight decay `weight_decay(name)` for each.
    pub fn for_model(model: &Model, lr: f64, weight_decay: impl Fn(&str) -> f64) -> Result<Self> {
        // A lazy layer's variables do not exist yet, and an optimiser built now would never see
        // them (PyTorch materialises the same Parameter in place; a candle Var cannot be).
        model.check_materialized("the optimiser (Adam::for_model)")?;
        let params = model
            .vars()?
            .into_iter()
            .map(|(name, var)| {
                let wd = weight_decay(&name);
                (name, var, wd)
            })
            .collect();
        Ok(Self::new_on(params, lr, model.placement().clone())?)
    }

    /// An optimiser over `(name, variable, weight_decay)` triples that live on `at` (which a
    /// bare variable cannot say when `at` is a simulated device); its state is created there.
    /// One per stage of a model-parallel model keeps each stage's state with its parameters.
    pub fn with_placement(
        params: Vec<(String, Var, f64)>,
        lr: f64,
        at: impl Into<Placement>,
    ) -> Result<Self> {
        Ok(Self::new_on(params, lr, at.into())?)
    }

    fn new_on(
        params: Vec<(String, Var, f64)>,
        lr: f64,
        at: Placement,
    ) -> candle_core::Result<Self> {
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
            params_at: at.clone(),
            state_at: at,
        })
    }

    /// The optimiser for `model`, a moved copy of the model this optimiser was built for: each
    /// slot is bound to the parameter of the same name and its state is copied to the model's
    /// placement, so training continues exactly where it stopped. PyTorch keeps optimiser state
    /// with the parameters it updates in place; here the model is a new value, so the optimiser
    /// follows it explicitly.
    pub fn to_model(&self, model: &Model) -> Result<Self> {
        self.bind(model, true)
    }

    /// Binds to `model`'s parameters but leaves the state where it was: the PyTorch pitfall of
    /// loading optimiser state on one device and the model on another. The next step names the
    /// stale state; kept for lessons and tests.
    pub fn rebind(&self, model: &Model) -> Result<Self> {
        self.bind(model, false)
    }

    fn bind(&self, model: &Model, move_state: bool) -> Result<Self> {
        let mut vars: std::collections::HashMap<String, Var> = model.vars()?.into_iter().collect();
        let to = self.state_at.destination(model.placement());
        let slots = self
            .slots
            .iter()
            .map(|s| {
                let var = vars.remove(&s.name).ok_or_else(|| {
                    WorkbookError::Mismatched(format!(
                        "the optimiser has state for '{}' but the model has no such parameter; build a new optimiser with Adam::for_model",
                        s.name
                    ))
                })?;
                let (m, v) = if move_state {
                    (
                        to.move_tensor(&s.m, &self.state_at, &format!("exp_avg[{}]", s.name))?,
                        to.move_tensor(&s.v, &self.state_at, &format!("exp_avg_sq[{}]", s.name))?,
                    )
                } else {
                    (s.m.clone(), s.v.clone())
                };
                Ok(Slot {
                    name: s.name.clone(),
                    var,
                    weight_decay: s.weight_decay,
                    m,
                    v,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            slots,
            lr: self.lr,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            step: self.step,
            params_at: to.clone(),
            state_at: if move_state {
                to
            } else {
                self.state_at.clone()
            },
        })
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Where the optimiser state (`m`, `v`) lives.
    pub fn state_placement(&self) -> &Placement {
        &self.state_at
    }

    /// Checks that the state is with the parameters, naming the first stale tensor.
    pub fn check_placement(&self) -> Result<()> {
        let names: Vec<String> = self
            .slots
            .iter()
            .flat_map(|s| {
                [
                    format!("exp_avg[{}]", s.name),
                    format!("exp_avg_sq[{}]", s.name),
                ]
            })
            .collect();
        let items: Vec<Placed> = names
            .iter()
            .map(|n| Placed::new(n.clone(), Role::OptimizerState, &self.state_at))
            .collect();
        check_all("model parameters", &self.params_at, &items)
    }

    /// Number of steps taken.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The optimiser's state tensors (`exp_avg`, `exp_avg_sq`) by parameter name.
    pub fn state(&self) -> impl Iterator<Item = (&str, &Tensor, &Tensor)> {
        self.slots.iter().map(|s| (s.name.as_str(), &s.m, &s.v))
    }

    /// Back-propagates `loss` and updates every parameter, after checking that the state is on
    /// the parameters' device.
    pub fn backward_step(&mut self, loss: &Tensor) -> Result<()> {
        self.check_placement()?;
        let grads = loss.backward()?;
        self.update(|slot| grads.get(slot.var.as_tensor()).cloned())
    }

    /// Updates every parameter with gradients computed elsewhere, by parameter name (data
    /// parallelism: the replicas' gradients reduced onto the parameters' device). A parameter
    /// without a gradient is left as it is, as in [`Adam::backward_step`]. A gradient on
    /// another candle device than its parameter is refused, naming it.
    pub fn step_with_gradients(&mut self, grads: &[(String, Tensor)]) -> Result<()> {
        self.check_placement()?;
        let by_name: std::collections::HashMap<&str, &Tensor> =
            grads.iter().map(|(n, g)| (n.as_str(), g)).collect();
        if let Some((name, _)) = grads
            .iter()
            .find(|(n, _)| !self.slots.iter().any(|s| &s.name == n))
        {
            return Err(WorkbookError::Mismatched(format!(
                "a gradient for '{name}' was given but the optimiser has no such parameter"
            )));
        }
        for slot in &self.slots {
            if let Some(g) = by_name.get(slot.name.as_str()) {
                if !g.device().same_device(slot.var.device()) {
                    return Err(WorkbookError::DeviceMismatch(Box::new(
                        crate::error::Mismatch::new(
                            "model parameters",
                            self.params_at.id(),
                            Role::Gradient,
                            format!("grad[{}]", slot.name),
                            Placement::of(g.device()).id(),
                        ),
                    )));
                }
            }
        }
        self.update(|slot| by_name.get(slot.name.as_str()).map(|&g| g.clone()))
    }

    /// Whether this optimiser updates exactly `model`'s parameters (the same variables, not
    /// copies of them).
    pub fn is_bound_to(&self, model: &Model) -> bool {
        let params = model.named_parameters();
        params.len() == self.slots.len()
            && self.slots.iter().all(|s| {
                params
                    .iter()
                    .any(|(n, t)| *n == s.name && t.id() == s.var.as_tensor().id())
            })
    }

    /// Updates every parameter from gradients already computed (`loss.backward()`), after
    /// checking that the state is on the parameters' device: PyTorch's `optimizer.step()`, for
    /// several optimisers that share one backward pass (one per stage of a model-parallel
    /// model). A parameter without a gradient is left as it is.
    pub fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.check_placement()?;
        self.update(|slot| grads.get(slot.var.as_tensor()).cloned())
    }

    fn update(&mut self, grad_of: impl Fn(&Slot) -> Option<Tensor>) -> Result<()> {
        self.step += 1;
        let t = self.step as i32;
        let bias1 = 1.0 - self.beta1.powi(t);
        let bias2 = 1.0 - self.beta2.powi(t);
        for slot in &mut self.slots {
            let Some(grad) = grad_of(slot) else {
                continue;
            };
            let theta = slot.var.as_tensor();
            let grad = if slot.weight_decay != 0.0 {
                (grad + (theta * slot.weight_decay)?)?
            } else {
                grad
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
