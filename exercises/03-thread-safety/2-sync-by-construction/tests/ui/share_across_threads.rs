//! Graded by `shares_one_layer_across_threads`: compiles *your* `src/sync_by_construction.rs`
//! in a crate that forbids `unsafe`, then shares one `CachedGatV2` between 4 threads that answer
//! 100 requests on 5 different graphs, and checks every answer against the sequential one and
//! the layer's counts.

#![forbid(unsafe_code)]

#[allow(dead_code)]
mod under_test {
    include!(env!("EXERCISE_SRC"));
}

use std::sync::Arc;
use under_test::CachedGatV2;
use workbook::threads::serving::Request;
use workbook::{datasets, Activation, EdgeIndex, GatV2Config, GatV2Output, Graph, Layer};
use workbook::{LayerConfig, Model, ModelConfig, Placement, Result};

const THREADS: usize = 4;
const PER_THREAD: usize = 25;
const GRAPHS: usize = 5;

fn shareable<T: Send + Sync>() {}

/// Karate without every fifth edge, starting at edge `k`: a different graph for each `k`.
fn thinned(karate: &Graph, k: usize) -> Result<Request> {
    let ei = karate.edge_index();
    let keep = |i: &usize| i % GRAPHS != k;
    let pick = |ids: &[u32]| -> Vec<i64> {
        (0..ids.len())
            .filter(keep)
            .map(|i| i64::from(ids[i]))
            .collect()
    };
    let (src, dst) = (pick(ei.sources_host()), pick(ei.targets_host()));
    Ok(Request {
        name: format!("karate without edge group {k}"),
        x: karate.x().clone(),
        edge_index: EdgeIndex::new(&src, &dst, karate.num_nodes(), karate.placement())?,
        nodes: None,
    })
}

fn bits(t: &workbook::candle_core::Tensor) -> Result<(Vec<usize>, Vec<u32>)> {
    let values = t.flatten_all()?.to_vec1::<f32>()?;
    Ok((
        t.dims().to_vec(),
        values.iter().map(|v| v.to_bits()).collect(),
    ))
}

fn same(a: &GatV2Output, b: &GatV2Output) -> Result<bool> {
    Ok(bits(&a.out)? == bits(&b.out)?
        && a.attention.edge_index.sources_host() == b.attention.edge_index.sources_host()
        && a.attention.edge_index.targets_host() == b.attention.edge_index.targets_host()
        && bits(&a.attention.weights)? == bits(&b.attention.weights)?)
}

fn main() -> Result<()> {
    shareable::<CachedGatV2>();
    let karate = datasets::karate(Placement::cpu())?;
    let config = ModelConfig {
        layers: vec![LayerConfig::GatV2(GatV2Config::new(34, 8).heads(2))],
        activation: Activation::None,
        dropout: 0.0,
        prefixed: false,
    };
    let (model, _vars) = Model::init(config, 0, Placement::cpu())?;
    let Layer::GatV2(conv) = &model.layers()[0] else {
        unreachable!("the config has one GATv2 layer")
    };
    let requests: Arc<Vec<Request>> = Arc::new(
        (0..GRAPHS)
            .map(|k| thinned(&karate, k))
            .collect::<Result<_>>()?,
    );
    let expected = requests
        .iter()
        .map(|r| conv.forward(&r.x, &r.edge_index))
        .collect::<Result<Vec<_>>>()?;

    let layer = Arc::new(CachedGatV2::new(conv.clone()));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (layer, requests) = (Arc::clone(&layer), Arc::clone(&requests));
            std::thread::spawn(move || -> Result<Vec<(usize, GatV2Output)>> {
                (0..PER_THREAD)
                    .map(|i| {
                        let k = (t + i) % GRAPHS;
                        Ok((k, layer.answer(&requests[k])?))
                    })
                    .collect()
            })
        })
        .collect();
    for thread in threads {
        for (k, got) in thread.join().expect("a serving thread panicked")? {
            assert!(
                same(&got, &expected[k])?,
                "the answer to '{}' differs from the sequential answer",
                requests[k].name
            );
        }
    }
    assert_eq!(
        layer.served(),
        THREADS * PER_THREAD,
        "served() must count every request, from every thread"
    );
    assert_eq!(
        layer.cached(),
        GRAPHS,
        "cached() must count the distinct requests (names) answered"
    );
    Ok(())
}
