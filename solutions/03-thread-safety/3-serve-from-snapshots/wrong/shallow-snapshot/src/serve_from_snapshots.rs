//! Training while serving. candle's optimisers update each parameter in place (`Var::set`), one
//! after another; a reader that runs a forward pass on the live model while a step is half-way
//! through sees some layers after the step and the others before it: a model that never
//! existed. Everything involved is `Send + Sync`, so no compiler objects.
//!
//! The fix: readers never touch the optimiser's `Var`s. After each step the trainer publishes
//! an immutable [`Snapshot`] (a deep copy of the parameters, tagged with its step) through one
//! atomic pointer swap ([`SnapshotServer`]), and every request is served from one snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use workbook::candle_core::{Tensor, Var};
use workbook::candle_nn;
use workbook::{
    EdgeIndex, Graph, Model, ModelConfig, ModelOutput, Placement, Result, WorkbookError,
};
use std::sync::{PoisonError, RwLock};
use workbook_lessons::threads::snapshot::{model_vars, set_in_place};

/// What one request is answered from: a model, and the optimiser step it says it is.
#[derive(Clone, Debug)]
pub struct Served {
    /// The optimiser step the parameters claim to come from (0: the initial values).
    pub step: u64,
    /// The model to run for the whole request.
    pub model: Model,
}

/// A model that one thread trains while any number of threads serve requests from it.
#[derive(Debug)]
pub struct TrainAndServe {
    /// The optimiser's model: its parameters are `Var`s written in place by every step.
    live: Model,
    /// `live`'s `Var`s, in `Model::named_parameters` order.
    vars: Vec<(String, Var)>,
    /// Steps finished so far.
    steps: AtomicU64,
    /// What readers are served from: the last finished step, published after the step (but a
    /// clone of a Model shares its Vars' storage: it is no snapshot).
    published: RwLock<Served>,
}

impl TrainAndServe {
    /// A freshly initialised model (seeded) on `at`, at step 0.
    pub fn new(config: ModelConfig, seed: u64, at: impl Into<Placement>) -> Result<Self> {
        let (live, varmap) = Model::init(config, seed, at)?;
        let vars = model_vars(&live, &varmap)?;
        let published = RwLock::new(Served {
            step: 0,
            model: live.clone(),
        });
        Ok(Self {
            live,
            vars,
            steps: AtomicU64::new(0),
            published,
        })
    }

    /// The model the optimiser updates. For training only: never serve from it.
    pub fn live(&self) -> &Model {
        &self.live
    }

    /// Steps finished so far.
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Acquire)
    }

    /// One gradient-descent step, `θ ← θ − lr·∇θ` of the cross-entropy on `graph`'s training
    /// nodes, written into the live `Var`s in place, one parameter after another, as every
    /// candle optimiser does; `after_each(k, name)` runs after parameter `k` is written (the
    /// tests pause the step there). Returns the number of the step just finished. One trainer
    /// at a time.
    pub fn train_step(
        &self,
        graph: &Graph,
        lr: f64,
        after_each: impl FnMut(usize, &str) -> Result<()>,
    ) -> Result<u64> {
        let grads = training_loss(&self.live, graph)?.backward()?;
        let new_values = self
            .vars
            .iter()
            .map(|(_, var)| {
                let theta = var.as_tensor();
                Ok(match grads.get(theta) {
                    Some(g) => (theta - (g * lr)?)?.detach(),
                    None => theta.copy()?.detach(),
                })
            })
            .collect::<Result<Vec<Tensor>>>()?;
        set_in_place(&self.vars, &new_values, after_each)?;
        let step = self.steps.fetch_add(1, Ordering::AcqRel) + 1;
        // Only now, with every parameter written, do readers get the new step: one atomic swap.
        // Requests already running keep the snapshot they hold.
        *self.published.write().unwrap_or_else(PoisonError::into_inner) = Served {
            step,
            model: self.live.clone(),
        };
        Ok(step)
    }

    /// What a request is answered from. Call it once per request and use the result for the
    /// whole request.
    pub fn read(&self) -> Served {
        self.published
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Answers one request on (`x`, `edge_index`): the step it was served from, and the output.
    pub fn answer(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<(u64, ModelOutput)> {
        let served = self.read();
        let out = served.model.forward(x, edge_index, None)?;
        Ok((served.step, out))
    }
}

/// Cross-entropy on the training nodes (evaluation-mode forward pass: no dropout).
fn training_loss(model: &Model, graph: &Graph) -> Result<Tensor> {
    let (Some(y), Some(split)) = (graph.y(), graph.split()) else {
        return Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no labels or split; training needs y and a train mask",
            graph.name
        )));
    };
    let logits = model.forward_graph(graph)?.logits;
    Ok(candle_nn::loss::cross_entropy(
        &logits.index_select(&split.train, 0)?,
        &y.index_select(&split.train, 0)?,
    )?)
}
