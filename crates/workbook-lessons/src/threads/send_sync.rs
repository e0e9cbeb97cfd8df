//! Compile-time proof that every model type can be shared across threads.
//!
//! `Send`: a value can move to another thread. `Sync`: `&T` can be used from several threads at
//! once (so `Arc<T>` can be shared). The compiler derives both from a type's fields, so one
//! `RefCell` or `Rc` deep inside a layer would silently make the whole model unshareable. The
//! constant below asks the compiler to prove `Send + Sync` for every public model, layer, graph
//! and serving type; if a change breaks that, **the library stops compiling**, with an error
//! naming the field — not a user's server months later.
//!
//! Note what this does *not* prove: [`StatefulGatV2`] is `Send + Sync` too (its state sits in a
//! `Mutex`) and is still logically racy ([`crate::threads::race_demo`]). The compiler rules out
//! data races; the absence of shared mutable state rules out the logic races.
//!
//! ```
//! fn assert_send_sync<T: Send + Sync>() {}
//! assert_send_sync::<workbook::Model>();
//! assert_send_sync::<std::sync::Arc<workbook::GatV2Conv>>();
//! assert!(workbook_lessons::threads::send_sync::CHECKED.contains(&"Model"));
//! ```

use super::serving::{Request, Response, ServingRun};
use super::snapshot::{Snapshot, SnapshotServer, StepHistory};
use super::stateful_gatv2::StatefulGatV2;
use workbook::edge_index::EdgeIndex;
use workbook::graph::Graph;
use workbook::layers::{Attention, GatV2Config, GatV2Conv, GatV2Output, GcnConfig, GcnConv};
use workbook::model::{Layer, LayerConfig, Model, ModelConfig, ModelOutput};

use candle_core::{Device, Tensor, Var};

/// Emits a constant that compiles only if every listed type is `Send + Sync`, and [`CHECKED`].
macro_rules! assert_all_send_sync {
    ($($ty:ident),* $(,)?) => {
        const _: fn() = || {
            fn assert_send_sync<T: Send + Sync>() {}
            $(assert_send_sync::<$ty>();)*
        };

        /// The names of the types proven `Send + Sync` at compile time.
        pub const CHECKED: &[&str] = &[$(stringify!($ty)),*];
    };
}

assert_all_send_sync!(
    // models and layers
    Model,
    Layer,
    GatV2Conv,
    GcnConv,
    ModelConfig,
    LayerConfig,
    GatV2Config,
    GcnConfig,
    // what forward passes return
    ModelOutput,
    GatV2Output,
    Attention,
    // inputs
    Graph,
    EdgeIndex,
    // serving
    Request,
    Response,
    ServingRun,
    Snapshot,
    SnapshotServer,
    StepHistory,
    // the anti-pattern is Sync as well: the compiler cannot see logic races
    StatefulGatV2,
    // candle's own types, which ours are built from
    Tensor,
    Var,
    Device,
);
