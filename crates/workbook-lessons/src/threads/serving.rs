//! Concurrent inference: N threads share one model through `Arc` and answer requests, with
//! exactly the answers one thread would give.
//!
//! This works because a [`Model`] is immutable once built and every forward pass takes `&self`:
//! the layers keep nothing between calls (GATv2 returns its attention), so there is nothing for
//! two threads to fight over. `Model: Send + Sync` (checked at compile time in
//! [`crate::threads::send_sync`]) lets the compiler confirm the sharing is memory-safe; the
//! absence of state is what makes it *correct*, and [`check`] measures that: it compares every
//! concurrent answer with the sequential one, bit for bit.
//!
//! A [`Request`] is a graph (features and edges) and optionally the nodes whose predictions are
//! wanted; [`mixed_requests`] builds a realistic mix from one dataset (whole graph, node subsets,
//! and variants with some edges removed, i.e. different graphs).
//!
//! ```
//! use std::sync::Arc;
//! use workbook_lessons::threads::serving;
//! use workbook::{datasets, Model, ModelConfig};
//! let dev = workbook::candle_core::Device::Cpu;
//! let graph = datasets::karate(&dev).unwrap();
//! let config = ModelConfig::gatv2(graph.num_features(), 8, 2, graph.num_classes());
//! let (model, _vars) = Model::init(config, 0, &dev).unwrap();
//! let requests = serving::mixed_requests(&graph, 40, 0).unwrap();
//! let run = serving::check(Arc::new(model), requests.into(), 4).unwrap();
//! assert_eq!((run.requests, run.mismatches), (40, 0));
//! ```

use candle_core::Tensor;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use workbook::edge_index::EdgeIndex;
use workbook::error::{Result, WorkbookError};
use workbook::graph::Graph;
use workbook::layers::Attention;
use workbook::model::Model;

/// One inference request: a graph, and the nodes whose predictions are wanted.
#[derive(Clone, Debug)]
pub struct Request {
    /// A label for reports (`karate`, `karate (80% of edges)`, `karate: 5 nodes`).
    pub name: String,
    /// Node features `[N, F]`.
    pub x: Tensor,
    pub edge_index: EdgeIndex,
    /// Nodes to answer for, in this order; `None` means every node.
    pub nodes: Option<Vec<u32>>,
}

impl Request {
    /// All nodes of `graph`.
    pub fn whole(graph: &Graph) -> Self {
        Self {
            name: graph.name.clone(),
            x: graph.x().clone(),
            edge_index: graph.edge_index().clone(),
            nodes: None,
        }
    }

    /// The given nodes of `graph` (the forward pass still sees the whole graph).
    pub fn for_nodes(graph: &Graph, nodes: Vec<u32>) -> Self {
        Self {
            name: format!("{}: {} node(s)", graph.name, nodes.len()),
            nodes: Some(nodes),
            ..Self::whole(graph)
        }
    }
}

/// The answer to a [`Request`].
#[derive(Clone, Debug)]
pub struct Response {
    /// `[nodes, classes]`, rows in the order of [`Request::nodes`] (all nodes if `None`).
    pub logits: Tensor,
    /// Each GATv2 layer's attention *for this request's graph*, with the layer name.
    pub attention: Vec<(String, Attention)>,
}

impl Response {
    /// Whether both answers are bit-for-bit identical: logits, attention edges and weights.
    pub fn same_as(&self, other: &Response) -> Result<bool> {
        if !same_tensor(&self.logits, &other.logits)?
            || self.attention.len() != other.attention.len()
        {
            return Ok(false);
        }
        for ((name_a, a), (name_b, b)) in self.attention.iter().zip(&other.attention) {
            if name_a != name_b || !same_attention(a, b)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Whether two tensors have the same shape and bit-identical `f32` values.
pub(crate) fn same_tensor(a: &Tensor, b: &Tensor) -> Result<bool> {
    if a.dims() != b.dims() {
        return Ok(false);
    }
    let a = a.flatten_all()?.to_vec1::<f32>()?;
    let b = b.flatten_all()?.to_vec1::<f32>()?;
    Ok(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()))
}

/// Whether two attentions cover the same edges with bit-identical weights.
pub(crate) fn same_attention(a: &Attention, b: &Attention) -> Result<bool> {
    Ok(a.edge_index.num_nodes() == b.edge_index.num_nodes()
        && a.edge_index.sources_host() == b.edge_index.sources_host()
        && a.edge_index.targets_host() == b.edge_index.targets_host()
        && same_tensor(&a.weights, &b.weights)?)
}

/// Answers one request (evaluation mode).
pub fn answer(model: &Model, request: &Request) -> Result<Response> {
    let out = model.forward(&request.x, &request.edge_index, None)?;
    let logits = match &request.nodes {
        None => out.logits,
        Some(nodes) => {
            let n = request.edge_index.num_nodes();
            if let Some(bad) = nodes.iter().find(|&&i| i as usize >= n) {
                return Err(WorkbookError::InvalidGraph(format!(
                    "request '{}' asks for node {bad}, but its graph has {n} nodes (ids 0..{n})",
                    request.name
                )));
            }
            let ids = Tensor::from_slice(nodes, nodes.len(), out.logits.device())?;
            out.logits.index_select(&ids, 0)?
        }
    };
    Ok(Response {
        logits,
        attention: out.attention,
    })
}

/// Answers every request on the calling thread, in order: the reference.
pub fn serve_sequential(model: &Model, requests: &[Request]) -> Result<Vec<Response>> {
    requests.iter().map(|r| answer(model, r)).collect()
}

/// Answers `requests` with `threads` threads sharing `model`, and returns the responses in
/// request order. Thread `t` answers requests `t`, `t + threads`, `t + 2·threads`, ... (so with
/// 8 threads and 8000 requests, each thread answers exactly 1000).
pub fn serve(model: Arc<Model>, requests: Arc<[Request]>, threads: usize) -> Result<Vec<Response>> {
    workbook::limits::check_threads("serving threads", threads)?;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            // Each thread owns a handle to the one model: a pointer copy, not a model copy.
            let model = Arc::clone(&model);
            let requests = Arc::clone(&requests);
            std::thread::Builder::new()
                .name(format!("serve-{t}"))
                .spawn(move || -> Result<Vec<(usize, Response)>> {
                    (t..requests.len())
                        .step_by(threads)
                        .map(|i| Ok((i, answer(&model, &requests[i])?)))
                        .collect()
                })
                .map_err(|e| WorkbookError::Thread(format!("cannot start thread serve-{t}: {e}")))
        })
        .collect::<Result<_>>()?;
    let mut slots: Vec<Option<Response>> = vec![None; requests.len()];
    for (t, handle) in handles.into_iter().enumerate() {
        let answered = handle
            .join()
            .map_err(|_| WorkbookError::Thread(format!("serving thread serve-{t} panicked")))??;
        for (i, response) in answered {
            slots[i] = Some(response);
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.ok_or_else(|| WorkbookError::Thread(format!("request {i} was not answered")))
        })
        .collect()
}

/// How many responses differ (bit for bit) from the reference; a length difference counts as
/// that many mismatches.
pub fn count_mismatches(got: &[Response], reference: &[Response]) -> Result<usize> {
    let mut mismatches = got.len().abs_diff(reference.len());
    for (a, b) in got.iter().zip(reference) {
        if !a.same_as(b)? {
            mismatches += 1;
        }
    }
    Ok(mismatches)
}

/// One concurrent run compared with the sequential reference.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServingRun {
    pub threads: usize,
    pub requests: usize,
    /// Wall time of the concurrent run.
    pub seconds: f64,
    pub requests_per_second: f64,
    /// Responses that differ from the sequential ones (must be 0).
    pub mismatches: usize,
}

/// Serves `requests` with `threads` threads and compares every answer with the sequential one.
pub fn check(model: Arc<Model>, requests: Arc<[Request]>, threads: usize) -> Result<ServingRun> {
    let reference = serve_sequential(&model, &requests)?;
    Ok(sweep_against(model, requests, &[threads], &reference)?.remove(0))
}

/// Serves `requests` once per entry of `thread_counts` (e.g. `[1, 2, 4, 8]`), timing each run
/// and comparing it with one sequential reference: throughput versus thread count.
pub fn sweep(
    model: Arc<Model>,
    requests: Arc<[Request]>,
    thread_counts: &[usize],
) -> Result<Vec<ServingRun>> {
    // every count is checked before the (possibly long) sequential reference runs
    for &t in thread_counts {
        workbook::limits::check_threads("serving threads", t)?;
    }
    let reference = serve_sequential(&model, &requests)?;
    sweep_against(model, requests, thread_counts, &reference)
}

fn sweep_against(
    model: Arc<Model>,
    requests: Arc<[Request]>,
    thread_counts: &[usize],
    reference: &[Response],
) -> Result<Vec<ServingRun>> {
    thread_counts
        .iter()
        .map(|&threads| {
            let start = Instant::now();
            let got = serve(Arc::clone(&model), Arc::clone(&requests), threads)?;
            let seconds = start.elapsed().as_secs_f64();
            Ok(ServingRun {
                threads,
                requests: requests.len(),
                seconds,
                requests_per_second: requests.len() as f64 / seconds.max(1e-9),
                mismatches: count_mismatches(&got, reference)?,
            })
        })
        .collect()
}

/// `count` seeded requests on `graph` and on variants of it: requests cycle through the whole
/// graph and copies keeping 90%, 80% and 70% of its edges (different graphs, so different
/// attention), and every other request asks for a random subset of 1 to 16 nodes.
pub fn mixed_requests(graph: &Graph, count: usize, seed: u64) -> Result<Vec<Request>> {
    workbook::limits::check_count("requests", count, 1)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut graphs = vec![Request::whole(graph)];
    for keep in [90, 80, 70] {
        graphs.push(with_edges_kept(graph, keep, &mut rng)?);
    }
    let n = graph.num_nodes();
    let all: Vec<u32> = (0..n as u32).collect();
    Ok((0..count)
        .map(|i| {
            let base = &graphs[i % graphs.len()];
            if i % 2 == 0 || n == 0 {
                return base.clone();
            }
            let k = rng.random_range(1..=n.min(16));
            let nodes: Vec<u32> = all.choose_multiple(&mut rng, k).copied().collect();
            Request {
                name: format!("{}: {} node(s)", base.name, nodes.len()),
                nodes: Some(nodes),
                ..base.clone()
            }
        })
        .collect())
}

/// `graph` with a seeded `keep_percent`% of its edges.
fn with_edges_kept(graph: &Graph, keep_percent: u32, rng: &mut ChaCha8Rng) -> Result<Request> {
    let ei = graph.edge_index();
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for (&s, &d) in ei.sources_host().iter().zip(ei.targets_host()) {
        if rng.random_range(0..100) < keep_percent {
            src.push(i64::from(s));
            dst.push(i64::from(d));
        }
    }
    Ok(Request {
        name: format!("{} ({keep_percent}% of edges)", graph.name),
        x: graph.x().clone(),
        edge_index: EdgeIndex::new(&src, &dst, ei.num_nodes(), ei.placement())?,
        nodes: None,
    })
}
