//! Many devices: data parallelism (a replica per device, gradients reduced, parameters
//! broadcast), model parallelism in miniature (a layer per device), and the failures that come
//! with them, named on simulated devices `sim:1,sim:2` as on `cuda:0,cuda:1`.
//!
//! - [`collective`]: reduce and broadcast, declared once as a trait ([`Collective`]); the
//!   host implementation records every copy in the ledger. (Across processes, NCCL goes behind
//!   [`ProcessGroup`] instead.)
//! - [`data_parallel`]: [`DataParallel`], the replicas and one training step.
//! - [`trainer`]: [`DataParallelTrainer`], mini-batch epochs over the replicas.
//! - one process per device: [`process_group`] (the collectives ranks call together, PyTorch's
//!   `ProcessGroup`), over MPI (`mpi_group`, feature `mpi`), NCCL on `cuda:N`
//!   (`nccl_group`, feature `nccl`) or threads ([`thread_group`]);
//!   [`world`] (one rank's view: call checks and time limits); [`distributed_sampler`] (each
//!   rank's shard); [`ddp`] ([`DistributedDataParallel`]); [`distributed_trainer`] (epochs).
//! - [`model_parallel`]: [`ModelParallel`](model_parallel::ModelParallel), each layer on its
//!   own device, the activations moved explicitly between them, every move in the ledger.
//!
//! ```
//! use workbook::{placement::Placement, Model, ModelConfig};
//! use workbook::parallel::{model_parallel::ModelParallel, DataParallel};
//! use workbook::train::TrainConfig;
//! let (model, _) = Model::init(ModelConfig::gcn(4, 8, 2), 0, &Placement::cpu()).unwrap();
//! let dp = DataParallel::new(&model, &[Placement::sim(1), Placement::sim(2)], &TrainConfig::gcn()).unwrap();
//! assert_eq!(dp.replicas()[1].placement().to_string(), "sim:2");
//! let mp = ModelParallel::new(&model, &[Placement::sim(1), Placement::sim(2)]).unwrap();
//! assert_eq!(mp.placements().len(), 2);
//! let model = dp.into_module(); // unwrap before saving or exporting
//! assert_eq!(model.placement().to_string(), "sim:1");
//! ```

pub mod collective;
pub mod data_parallel;
pub mod ddp;
pub mod distributed_sampler;
pub mod distributed_trainer;
pub mod model_parallel;
#[cfg(feature = "mpi")]
pub mod mpi_group;
#[cfg(feature = "nccl")]
pub mod nccl_group;
pub mod process_group;
pub mod thread_group;
pub mod trainer;
pub mod world;

pub use collective::{Collective, HostCollective};
pub use data_parallel::{DataParallel, Gathered, Step, SyncReport, STEP_MARK};
pub use ddp::{DistributedDataParallel, DistributedStep};
pub use distributed_sampler::DistributedSampler;
pub use distributed_trainer::{DistributedEpoch, DistributedTrainer};
#[cfg(feature = "mpi")]
pub use mpi_group::MpiGroup;
#[cfg(feature = "nccl")]
pub use nccl_group::NcclGroup;
pub use process_group::ProcessGroup;
pub use thread_group::ThreadGroup;
pub use trainer::{train_data_parallel, DataParallelEpoch, DataParallelTrainer, StepBytes};
pub use world::World;
