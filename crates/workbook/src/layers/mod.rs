//! Graph convolution layers with PyTorch Geometric's semantics, parameter names and options,
//! all behind one trait: [`GraphLayer`] (the forward pass) on top of
//! [`Module`](crate::Module) (named parameters, buffers, placement), each built from its
//! config's [`LayerSpec`].
//!
//! One layer a file, each owning its config, initialisation, forward pass and ONNX lowering:
//! [`gcn_conv`], [`gatv2_conv`], [`sage_conv`]. A model ([`crate::Model`]) and every generic
//! tool (moving, dtype conversion, the placement checks, `inspect`, checkpoints, the optimiser,
//! ONNX export, data parallelism) see layers only through these traits, so a layer of your own
//! crate, registered in a [`LayerRegistry`], is as first-class as these; [`sage_conv`] is
//! written exactly as a reader would, with nothing but the public API.
//!
//! ```
//! use workbook::{GraphLayer, Model, ModelConfig, Module, Placement};
//! let (model, _) = Model::init(ModelConfig::sage(34, 8, 4), 0, Placement::cpu()).unwrap();
//! let first = model.layers()[0].as_graph_layer();
//! assert_eq!(first.layer_type(), "SAGEConv");
//! let names: Vec<_> = first.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["lin_l.weight", "lin_l.bias", "lin_r.weight"]);
//! ```

pub mod config;
pub mod gatv2_conv;
pub mod gcn_conv;
pub mod graph_layer;
pub mod init;
pub mod layer;
pub mod lazy;
pub mod sage_conv;
pub mod spec;

pub use config::{LayerConfig, LayerRegistry};
pub use gatv2_conv::{Attention, GatV2Config, GatV2Conv, GatV2Output};
pub use gcn_conv::{GcnConfig, GcnConv};
pub use graph_layer::{check_features, DynLayer, GraphLayer, LayerInput, LayerOutput};
pub use layer::Layer;
pub use lazy::{LazyConfig, LazyLayer};
pub use sage_conv::{SageConfig, SageConv};
pub use spec::{LayerSpec, SpecObject};
