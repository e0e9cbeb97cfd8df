//! A branded training step against the unbranded one, in the same run (issue 45: brands cost
//! nothing at run time).
//!
//! ```sh
//! cargo bench -p workbook --bench branded -- [DATASET] [DEVICE] [ROUNDS] [STEPS]
//! cargo bench -p workbook --bench branded -- cora cpu 5 20
//! ```
//!
//! One step is what `workbook bench` calls `epoch_ms`: forward with dropout, cross-entropy on the
//! training nodes, backward, one Adam step. The two sides share a graph and start from the same
//! seed; each round times `STEPS` steps of one side then of the other, alternating which goes
//! first, after two untimed steps each. Printed: each side's median ms per step over all rounds,
//! and the ratio branded / unbranded. Karate, Cora and `csbm:N` are embedded or generated, so no
//! file is needed. `harness = false`: a plain `main`, no benchmark framework.

use std::time::Instant;
use workbook::branded::{train, with_placement};
use workbook::candle_nn::loss::cross_entropy;
use workbook::train::{Adam, Dropout};
use workbook::{datasets, device, Graph, Model, ModelConfig, Placement};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// `steps` unbranded steps; the ms of each.
fn unbranded(graph: &Graph, at: &Placement, steps: usize) -> workbook::Result<Vec<f64>> {
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let (model, _) = Model::init(config, 0, at)?;
    let mut opt = Adam::for_model(&model, 0.01, |_| 0.0)?;
    let mut dropout = Dropout::new(0, at.device());
    let (y, ids) = (
        graph.y().expect("labels"),
        &graph.split().expect("split").train,
    );
    let mut times = Vec::new();
    for k in 0..steps + 2 {
        let start = Instant::now();
        let out = model.forward_t(
            graph.x(),
            graph.edge_index(),
            graph.edge_weight(),
            Some(&mut dropout),
        )?;
        let loss = cross_entropy(&out.logits.index_select(ids, 0)?, &y.index_select(ids, 0)?)?;
        opt.backward_step(&loss)?;
        at.device().synchronize()?;
        if k >= 2 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(times)
}

/// `steps` branded steps (`branded::train::step`); the ms of each.
fn branded(graph: &Graph, at: &Placement, steps: usize) -> workbook::Result<Vec<f64>> {
    with_placement(at.clone(), |dev| {
        let graph = dev.put(graph)?;
        let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
        let model = dev.init(config, 0)?;
        let mut opt = train::adam(&model, 0.01)?;
        let mut dropout = dev.dropout(0);
        let mut times = Vec::new();
        for k in 0..steps + 2 {
            let start = Instant::now();
            train::step(&model, &mut opt, &graph, &mut dropout)?;
            dev.placement().device().synchronize()?;
            if k >= 2 {
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        Ok(times)
    })
}

fn main() -> workbook::Result<()> {
    // `cargo bench` passes `--bench`; the rest are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let dataset = args.first().map_or("cora", String::as_str);
    let spelled = args.get(1).map_or("cpu", String::as_str);
    let rounds: usize = args.get(2).map_or(Ok(5), |s| s.parse()).unwrap_or(5);
    let steps: usize = args.get(3).map_or(Ok(20), |s| s.parse()).unwrap_or(20);
    let at = device::choose(Some(spelled.parse()?))?.placement;
    let graph = datasets::load(dataset, None, &at)?;
    let (mut plain, mut brand) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            plain.extend(unbranded(&graph, &at, steps)?);
            brand.extend(branded(&graph, &at, steps)?);
        } else {
            brand.extend(branded(&graph, &at, steps)?);
            plain.extend(unbranded(&graph, &at, steps)?);
        }
    }
    let (p, b) = (median(plain), median(brand));
    println!(
        "{{\"dataset\":\"{dataset}\",\"device\":\"{at}\",\"rounds\":{rounds},\"steps\":{steps},\"unbranded_ms\":{p:.3},\"branded_ms\":{b:.3},\"ratio\":{:.3}}}",
        b / p
    );
    Ok(())
}
