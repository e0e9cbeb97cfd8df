//! Many devices: one model over several placements.
//!
//! * [`model_parallel`] — model parallelism in miniature: each layer on its own device, the
//!   activations moved explicitly between them, every move in the [ledger](crate::ledger).
//!
//! ```
//! use workbook::parallel::model_parallel::ModelParallel;
//! use workbook::{Model, ModelConfig, Placement};
//! let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, Placement::cpu()).unwrap();
//! let mp = ModelParallel::new(&model, &[Placement::sim(1), Placement::sim(2)]).unwrap();
//! assert_eq!(mp.placements().len(), 2);
//! ```

pub mod model_parallel;
