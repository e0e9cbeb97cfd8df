//! The layer trait: a layer declares its named parameters, named buffers and placement, and
//! everything else is generic: moving ([`Module::to_device`]), dtype conversion
//! ([`Module::to_dtype`]), the placement check before forward ([`Module::check_forward`]),
//! `inspect` tables, checkpoints, the optimiser's variables and export.
//!
//! It is PyTorch's `nn.Module` bookkeeping (`named_parameters`, `named_buffers`,
//! `register_buffer`) in the spirit of candle-nn's `Module`. Write a layer as a struct, derive
//! [`Module`](derive@crate::Module) (which visits every field, so no tensor can be left out of
//! `to_device`: fields that are not tensors opt out with `#[module(skip)]`), and implement
//! [`GraphLayer`](crate::layers::GraphLayer) for its forward pass.
//!
//! ```
//! use workbook::candle_core::{DType, Tensor};
//! use workbook::module::Module;
//! use workbook::Placement;
//!
//! #[derive(Clone, Debug, workbook::Module)]
//! struct Scale {
//!     weight: Tensor,                   // a parameter, named "weight"
//!     #[module(buffer)]
//!     class_weight: Tensor,             // a buffer: moved and checked, not trained
//!     #[module(placement)]
//!     at: Placement,
//!     #[module(skip)]
//!     width: usize,                     // not a tensor: opted out explicitly
//! }
//!
//! let cpu = Placement::cpu();
//! let s = Scale {
//!     weight: Tensor::ones(3, DType::F32, cpu.device()).unwrap(),
//!     class_weight: Tensor::ones(2, DType::F32, cpu.device()).unwrap(),
//!     at: cpu,
//!     width: 3,
//! };
//! let on_sim = s.to_device(&Placement::sim(1)).unwrap();
//! assert_eq!(on_sim.placement().to_string(), "sim:1");
//! let names: Vec<_> = on_sim.tensor_placements().into_iter().map(|(n, _, at)| format!("{n}@{at}")).collect();
//! assert_eq!(names, ["weight@sim:1", "class_weight@sim:1"]);
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::placement::{check_all, inherit, Placed, Placement, Role};
use candle_core::{DType, Tensor};

/// What a named tensor is to its layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Trained by the optimiser, saved in checkpoints, exported.
    Parameter,
    /// Moved and checked with the layer but not trained (PyTorch's `register_buffer`; GCN's
    /// cached normalisation).
    Buffer,
}

impl Kind {
    /// `parameter` or `buffer`, as in the `inspect` tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Parameter => "parameter",
            Kind::Buffer => "buffer",
        }
    }
}

/// One tensor a module owns.
#[derive(Clone, Debug)]
pub struct Named<'a> {
    /// PyG's name without the model's prefix (`lin.weight`).
    pub name: String,
    pub kind: Kind,
    pub tensor: &'a Tensor,
    /// Where it lives, when that is not the module's placement (a buffer that remembers its
    /// own, like GCN's cached edges); `None` means the module's placement.
    pub placement: Option<&'a Placement>,
}

/// A transformation of every tensor of a module (a move, a dtype conversion), applied by
/// [`Module::map_tensors`].
pub trait TensorMap {
    /// The placement of the result.
    fn target(&self) -> &Placement;
    /// The new value of one tensor. `from` is its own placement when it differs from the
    /// module's (see [`Named::placement`]).
    fn tensor(
        &mut self,
        name: &str,
        kind: Kind,
        t: &Tensor,
        from: Option<&Placement>,
    ) -> Result<Tensor>;
    /// The new value of a buffered edge index; `None` drops the buffer (it is rebuilt on the
    /// next forward pass).
    fn edge_index(&mut self, name: &str, e: &EdgeIndex) -> Result<Option<EdgeIndex>>;
}

/// A field that holds tensors: what `#[derive(Module)]` calls for every field that is not
/// `#[module(skip)]` or `#[module(placement)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` holds no tensors the Module derive knows",
    note = "mark the field #[module(skip)] if it is not a tensor (a config, a flag), or implement workbook::module::Tensors for it"
)]
pub trait Tensors: Sized {
    /// Calls `f` on every tensor, named `name` (or `name.part`).
    fn visit<'a>(&'a self, name: &str, kind: Kind, f: &mut dyn FnMut(Named<'a>));
    /// The same field with every tensor replaced by `m`'s result.
    fn map(&self, name: &str, kind: Kind, m: &mut dyn TensorMap) -> Result<Self>;
}

impl Tensors for Tensor {
    fn visit<'a>(&'a self, name: &str, kind: Kind, f: &mut dyn FnMut(Named<'a>)) {
        f(Named {
            name: name.to_string(),
            kind,
            tensor: self,
            placement: None,
        })
    }
    fn map(&self, name: &str, kind: Kind, m: &mut dyn TensorMap) -> Result<Self> {
        m.tensor(name, kind, self, None)
    }
}

impl<T: Tensors> Tensors for Option<T> {
    fn visit<'a>(&'a self, name: &str, kind: Kind, f: &mut dyn FnMut(Named<'a>)) {
        if let Some(t) = self {
            t.visit(name, kind, f)
        }
    }
    fn map(&self, name: &str, kind: Kind, m: &mut dyn TensorMap) -> Result<Self> {
        self.as_ref().map(|t| t.map(name, kind, m)).transpose()
    }
}

impl<T: Tensors> Tensors for Vec<T> {
    /// Elements are named `name.0`, `name.1`, ... (PyTorch's `ModuleList` naming).
    fn visit<'a>(&'a self, name: &str, kind: Kind, f: &mut dyn FnMut(Named<'a>)) {
        for (i, t) in self.iter().enumerate() {
            t.visit(&format!("{name}.{i}"), kind, f)
        }
    }
    fn map(&self, name: &str, kind: Kind, m: &mut dyn TensorMap) -> Result<Self> {
        self.iter()
            .enumerate()
            .map(|(i, t)| t.map(&format!("{name}.{i}"), kind, m))
            .collect()
    }
}

/// candle-nn's `Linear`: `name.weight` `[out, in]` and `name.bias`, PyTorch's names.
impl Tensors for candle_nn::Linear {
    fn visit<'a>(&'a self, name: &str, kind: Kind, f: &mut dyn FnMut(Named<'a>)) {
        self.weight().visit(&format!("{name}.weight"), kind, f);
        if let Some(b) = self.bias() {
            b.visit(&format!("{name}.bias"), kind, f);
        }
    }
    fn map(&self, name: &str, kind: Kind, m: &mut dyn TensorMap) -> Result<Self> {
        let weight = self.weight().map(&format!("{name}.weight"), kind, m)?;
        let bias = self
            .bias()
            .map(|b| b.map(&format!("{name}.bias"), kind, m))
            .transpose()?;
        Ok(candle_nn::Linear::new(weight, bias))
    }
}

/// The bookkeeping half of a layer: its named tensors and its placement. Derive it with
/// `#[derive(workbook::Module)]`; everything else here is generic.
pub trait Module {
    /// Calls `f` on every parameter and buffer, in declaration order (PyG's `state_dict` order).
    fn visit_tensors<'a>(&'a self, f: &mut dyn FnMut(Named<'a>));

    /// A copy with every tensor replaced by `m`'s result and the placement set to `m.target()`.
    fn map_tensors(&self, m: &mut dyn TensorMap) -> Result<Self>
    where
        Self: Sized;

    /// Where the parameters live.
    fn placement(&self) -> &Placement;

    /// Every parameter with its name (PyTorch's `named_parameters`).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.named(Kind::Parameter)
    }

    /// Every buffer with its name (PyTorch's `named_buffers`).
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.named(Kind::Buffer)
    }

    /// The tensors of one kind.
    fn named(&self, kind: Kind) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit_tensors(&mut |n| {
            if n.kind == kind {
                out.push((n.name, n.tensor.clone()))
            }
        });
        out
    }

    /// Every tensor's name, kind and placement. A tensor whose candle device is not the
    /// placement's (a parameter made with `Device::Cpu` in a layer on `cuda:0`) shows its own.
    fn tensor_placements(&self) -> Vec<(String, Kind, Placement)> {
        let home = self.placement().clone();
        let mut out = Vec::new();
        self.visit_tensors(&mut |n| {
            let at = n
                .placement
                .cloned()
                .unwrap_or_else(|| inherit(n.tensor, &home));
            out.push((n.name, n.kind, at))
        });
        out
    }

    /// The pre-flight check: every parameter and buffer on [`Module::placement`], and the
    /// inputs with them. The error names the first tensor that is elsewhere, its device, the
    /// expected one, and the fix; `what` names the module (`"GCNConv parameters"`).
    fn check_forward(
        &self,
        what: &str,
        x: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
    ) -> Result<()> {
        let at = self.placement();
        let tensors = self.tensor_placements();
        let x_at = inherit(x, at);
        let w_at = edge_weight.map(|w| inherit(w, at));
        let mut items: Vec<Placed> = tensors
            .iter()
            .filter(|(_, k, _)| *k == Kind::Parameter)
            .map(|(n, _, p)| Placed::new(n.clone(), Role::Parameter, p))
            .collect();
        items.push(Placed::new("x", Role::Input, &x_at));
        items.push(Placed::new(
            "edge_index",
            Role::Input,
            edge_index.placement(),
        ));
        if let Some(w_at) = &w_at {
            items.push(Placed::new("edge_weight", Role::Input, w_at));
        }
        items.extend(
            tensors
                .iter()
                .filter(|(_, k, _)| *k == Kind::Buffer)
                .map(|(n, _, p)| Placed::new(n.clone(), Role::Buffer, p)),
        );
        check_all(what, at, &items)
    }

    /// A copy on `to`: every parameter (as a fresh trainable variable) and every buffer. Like
    /// `tensor.to` in PyTorch, this returns a copy; `module.to` mutates instead.
    fn to_device(&self, to: impl Into<Placement>) -> Result<Self>
    where
        Self: Sized,
    {
        self.moved(&to.into(), "", true)
    }

    /// The move behind [`Module::to_device`]; ledger entries are named `{prefix}{name}`.
    /// `buffers = false` leaves buffers where they were (what PyTorch's `module.to` does to a
    /// tensor kept in a plain attribute).
    fn moved(&self, to: &Placement, prefix: &str, buffers: bool) -> Result<Self>
    where
        Self: Sized,
    {
        let mut mover = Mover {
            from: self.placement().clone(),
            to: self.placement().destination(to),
            prefix: prefix.to_string(),
            buffers,
        };
        self.map_tensors(&mut mover)
    }

    /// A copy whose parameters are `dtype` (PyTorch's `module.half()` / `.float()`), as plain
    /// (not trainable) tensors; buffers that cache derived values are dropped and rebuilt.
    fn to_dtype(&self, dtype: DType) -> Result<Self>
    where
        Self: Sized,
    {
        if !dtype.is_float() {
            return Err(WorkbookError::InvalidConfig(format!(
                "model parameters must be floating point; {dtype:?} is not (use F32, F16 or BF16)"
            )));
        }
        self.map_tensors(&mut Caster {
            to: self.placement().clone(),
            dtype,
        })
    }

    /// The `inspect` rows of this module's tensors, names prefixed with `prefix`; a tensor whose
    /// device is not the module's shows its own.
    fn inspect_rows(&self, prefix: &str) -> Vec<Row> {
        let home = self.placement().clone();
        let mut rows = Vec::new();
        self.visit_tensors(&mut |n| {
            let at = n
                .placement
                .cloned()
                .unwrap_or_else(|| inherit(n.tensor, &home));
            rows.push(Row {
                name: format!("{prefix}{}", n.name),
                kind: n.kind.as_str(),
                device: at.to_string(),
                dtype: format!("{:?}", n.tensor.dtype()).to_lowercase(),
                shape: n.tensor.dims().to_vec(),
            })
        });
        rows
    }
}

/// One tensor in an `inspect` table ([`crate::inspect::table`]): a parameter or buffer of a
/// module, an optimiser's state, a graph's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    /// `parameter`, `buffer`, `optimizer state` or `input`.
    pub kind: &'static str,
    pub device: String,
    pub dtype: String,
    pub shape: Vec<usize>,
}

/// Moves parameters (as fresh trainable variables) and buffers, recording each in the ledger.
pub(crate) struct Mover {
    from: Placement,
    to: Placement,
    prefix: String,
    buffers: bool,
}

impl Mover {
    /// Moves tensors living on `from` (unless they say otherwise) to `to`, naming ledger entries
    /// `{prefix}{name}`; `buffers = false` leaves buffers where they are.
    pub(crate) fn new(from: &Placement, to: &Placement, prefix: &str, buffers: bool) -> Self {
        Self {
            from: from.clone(),
            to: to.clone(),
            prefix: prefix.to_string(),
            buffers,
        }
    }
}

impl TensorMap for Mover {
    fn target(&self) -> &Placement {
        &self.to
    }
    fn tensor(
        &mut self,
        name: &str,
        kind: Kind,
        t: &Tensor,
        from: Option<&Placement>,
    ) -> Result<Tensor> {
        let what = format!("{}{name}", self.prefix);
        match kind {
            Kind::Parameter => Ok(self
                .to
                .move_parameter(t, from.unwrap_or(&self.from), &what)?
                .as_tensor()
                .clone()),
            Kind::Buffer if self.buffers => {
                self.to.move_tensor(t, from.unwrap_or(&self.from), &what)
            }
            Kind::Buffer => Ok(t.clone()),
        }
    }
    fn edge_index(&mut self, name: &str, e: &EdgeIndex) -> Result<Option<EdgeIndex>> {
        Ok(Some(if self.buffers {
            e.to_device_named(&self.to, &format!("{}{name}", self.prefix))?
        } else {
            e.clone()
        }))
    }
}

/// Converts parameters to a dtype; drops edge buffers.
pub(crate) struct Caster {
    to: Placement,
    dtype: DType,
}

impl Caster {
    pub(crate) fn new(to: &Placement, dtype: DType) -> Self {
        Self {
            to: to.clone(),
            dtype,
        }
    }
}

impl TensorMap for Caster {
    fn target(&self) -> &Placement {
        &self.to
    }
    fn tensor(&mut self, _: &str, _: Kind, t: &Tensor, _: Option<&Placement>) -> Result<Tensor> {
        Ok(t.to_dtype(self.dtype)?)
    }
    fn edge_index(&mut self, _: &str, _: &EdgeIndex) -> Result<Option<EdgeIndex>> {
        Ok(None)
    }
}

/// Runs `f(module, inputs)` — a forward pass that is not a graph layer's, such as a loss — with
/// the checks [`GraphLayer::apply`](crate::layers::GraphLayer::apply) makes: every parameter
/// and buffer of `module` and every input on the module's placement first, and on a simulated
/// device the float64 *shadow pass* that catches a tensor made inside `f` on a fixed device
/// (see `apply`). Integer inputs (labels) are passed as they are. `what` names the module in
/// errors.
///
/// ```
/// use workbook::candle_core::{DType, Tensor};
/// use workbook::{module, Module, Placement, Result};
///
/// #[derive(Clone, Debug, Module)]
/// struct Scaled {
///     #[module(buffer)]
///     scale: Tensor,
///     #[module(placement)]
///     at: Placement,
/// }
/// let sim = Placement::sim(1);
/// let s = Scaled { scale: Tensor::ones(3, DType::F32, sim.device()).unwrap(), at: sim.clone() };
/// let x = Tensor::ones(3, DType::F32, sim.device()).unwrap();
/// // made from the input: follows it
/// let ok = module::checked(&s, "Scaled", &[&x], |s, t| Ok((&t[0] * &s.scale)?.sum_all()?));
/// assert!(ok.is_ok());
/// // made on a fixed device with a fixed dtype: caught on sim:1 too
/// let bad = module::checked(&s, "Scaled", &[&x], |s, t| {
///     let fixed = Tensor::new(&[1f32, 2., 3.], &workbook::candle_core::Device::Cpu)?;
///     Ok((&t[0] * &s.scale)?.mul(&fixed)?.sum_all()?)
/// });
/// assert!(bad.unwrap_err().to_string().contains("Scaled made a tensor inside forward"));
/// ```
pub fn checked<M: Module + Sized>(
    module: &M,
    what: &str,
    inputs: &[&Tensor],
    f: impl Fn(&M, &[Tensor]) -> Result<Tensor>,
) -> Result<Tensor> {
    let at = module.placement();
    let input_at: Vec<(String, Placement)> = inputs
        .iter()
        .enumerate()
        .map(|(k, t)| (format!("input {k}"), inherit(t, at)))
        .collect();
    let tensors = module.tensor_placements();
    let mut items: Vec<Placed> = tensors
        .iter()
        .map(|(n, k, p)| {
            let role = match k {
                Kind::Parameter => Role::Parameter,
                Kind::Buffer => Role::Buffer,
            };
            Placed::new(n.clone(), role, p)
        })
        .collect();
    items.extend(
        input_at
            .iter()
            .map(|(n, p)| Placed::new(n.clone(), Role::Input, p)),
    );
    check_all(&format!("{what} tensors"), at, &items)?;
    let owned: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
    let out = f(module, &owned)?;
    let float_in = inputs
        .iter()
        .any(|t| t.dtype().is_float() && t.dtype() != DType::F64);
    if at.is_sim() && float_in {
        let shadow = module.map_tensors(&mut Caster::new(at, DType::F64))?;
        let converted = inputs
            .iter()
            .map(|t| {
                Ok(if t.dtype().is_float() {
                    t.to_dtype(DType::F64)?
                } else {
                    (*t).clone()
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let problem = match f(&shadow, &converted) {
            // candle appends a backtrace under RUST_BACKTRACE: keep the message
            Err(e) => Some(format!(
                "it stopped with: {}",
                e.to_string().lines().next().unwrap_or_default()
            )),
            Ok(o) if o.dtype() != DType::F64 => {
                Some(format!("its output came back {:?}", o.dtype()))
            }
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            return Err(intermediate_error(what, at, &problem));
        }
    }
    Ok(out)
}

/// The error of a shadow pass that failed: names the module, what happened and the fix.
pub(crate) fn intermediate_error(what: &str, at: &Placement, problem: &str) -> WorkbookError {
    WorkbookError::IntermediateTensor(format!(
        "{what} made a tensor inside forward that does not follow its input: on {at} it ran once more with everything in float64 and {problem}. A tensor made on a fixed device (Tensor::zeros(n, DType::F32, &Device::Cpu), PyTorch's torch.zeros(n)) fails the same way on a GPU. Create intermediates from the input: x.zeros_like(), Tensor::zeros(n, x.dtype(), x.device())"
    ))
}
