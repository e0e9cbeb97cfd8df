//! The names the rest of the crate speaks in: where a tensor lives ([`PlacementId`]) and what it
//! is to its owner ([`Role`]).
//!
//! They sit at the bottom of the stack, below [`crate::error`], so that an error can carry them
//! as values (a device mismatch says *which* placement and *what kind* of tensor, not two
//! strings) and format them when it is displayed. [`crate::placement`] re-exports both.
//!
//! ```
//! use workbook::placement::{PlacementId, Role};
//! assert_eq!(PlacementId::Sim(2).to_string(), "sim:2");
//! assert_eq!(Role::Buffer.noun(), "cached buffer");
//! assert!(Role::Input.fix().contains("graph.to_device"));
//! ```

use std::fmt;

/// The identity of a placement, without the device handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlacementId {
    Cpu,
    Cuda(usize),
    Metal(usize),
    /// A simulated device: host memory, checked as a separate device.
    Sim(usize),
}

impl fmt::Display for PlacementId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
            Self::Metal(n) => write!(f, "metal:{n}"),
            Self::Sim(n) => write!(f, "sim:{n}"),
        }
    }
}

/// What kind of tensor a placement check is about; decides the wording and the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A model parameter (`conv1.lin.weight`).
    Parameter,
    /// A graph input (`x`, `edge_index`, `edge_weight`, `y`, `train_mask`).
    Input,
    /// A cached buffer (GCN's cached normalisation).
    Buffer,
    /// Optimiser state (`exp_avg[conv1.lin.weight]`).
    OptimizerState,
    /// A tensor a layer's forward pass made (its output, an intermediate).
    Intermediate,
    /// A part of a mini-batch (`batch.x`, `batch.y`, `batch.n_id`).
    BatchPart,
    /// A parameter or buffer of one data-parallel replica, which must be on that replica's
    /// device (PyTorch's `DataParallel` replica reading a weight from `cuda:0`).
    ReplicaTensor,
    /// Labels (or any target) a loss compares with outputs gathered to one device.
    Label,
    /// A gradient handed to an optimiser step.
    Gradient,
    /// The second operand of an operation on two tensors.
    Operand,
    /// A tensor made on a device written in the code ([`crate::fixed_device`]).
    FixedDevice,
}

impl Role {
    /// How a message names a tensor of this role: `input 'x'`, `cached buffer '...'`.
    pub fn noun(self) -> &'static str {
        match self {
            Role::Parameter => "parameter",
            Role::Input => "input",
            Role::Buffer => "cached buffer",
            Role::OptimizerState => "optimizer state",
            Role::Intermediate => "intermediate tensor",
            Role::BatchPart => "batch part",
            Role::ReplicaTensor => "replica tensor",
            Role::Label => "labels",
            Role::Gradient => "gradient",
            Role::Operand => "operand",
            Role::FixedDevice => "tensor made with",
        }
    }

    /// The usual fix for a tensor of this role on the wrong device, in one line.
    pub fn fix(self) -> &'static str {
        match self {
            Role::Parameter => "Move the whole model with model.to_device(&device)",
            Role::Input => "Move the graph with graph.to_device(&device)",
            Role::Buffer => "Move the model with model.to_device(&device), which moves its cached buffers too, or call model.clear_cache()",
            Role::OptimizerState => "Move the optimizer with the model: adam.to_model(&model)",
            Role::Intermediate => "Inside forward, create tensors where the input lives (Tensor::zeros(n, dtype, x.device()), x.zeros_like(), at.zeros(..) for the layer's placement), never on a fixed device",
            Role::BatchPart => "Move the whole batch, every step: batch = batch.to_device(&device)? (moving batch.x alone leaves the labels and ids behind)",
            Role::ReplicaTensor => "Every replica needs its own copy of every parameter and buffer on its own device: replicate with DataParallel::new(&model, &devices, ..) (replica k = model.to_device(&devices[k])), never by cloning the first replica",
            Role::Label => "Outputs are gathered to one device (the first, unless you chose another): move the labels there (output_device.move_tensor(&y, &labels_device, \"y\")), or gather to the labels' device",
            Role::Gradient => "Reduce the gradients onto the device of the parameters the optimiser updates before stepping",
            Role::Operand => "Move one operand to the other's device first",
            Role::FixedDevice => "Create tensors where the input lives: x.zeros_like(), Tensor::zeros(shape, x.dtype(), x.device()), or from the layer's own placement; never on a device written in the code",
        }
    }
}
