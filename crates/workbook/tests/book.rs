//! The book's listings (chapters 1 and 2), compiled and run by `cargo test`.
//!
//! `book/src/*.md` includes the code between `ANCHOR` markers, and the text these tests print
//! into `book/src/generated/` (error messages, tables, ledgers). A test fails when a generated
//! file is stale; refresh them all with
//!
//! ```sh
//! WORKBOOK_BLESS=1 cargo test -p workbook --test book
//! ```

use std::path::PathBuf;
use workbook::ledger::Ledger;
use workbook::train::{TrainConfig, Trainer};
use workbook::{
    checkpoint, datasets, device, inspect, GcnConfig, GraphPart, LayerConfig, Model, ModelConfig,
    Placement,
};

/// Compares `text` with `book/src/generated/{name}`, or rewrites it under `WORKBOOK_BLESS=1`.
fn generated(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../book/src/generated")
        .join(name);
    if std::env::var_os("WORKBOOK_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        workbook::atomic_write::write(&path, text.as_bytes()).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        on_disk,
        text,
        "{} is stale: refresh with WORKBOOK_BLESS=1 cargo test -p workbook --test book",
        path.display()
    );
}

/// The book shows `sim:1`, whatever machine refreshes it.
fn lesson_device() -> Placement {
    Placement::sim(1)
}

#[test]
fn ch01_the_classic_mismatch() {
    let gpu = lesson_device();
    // ANCHOR: ch01_mismatch
    let (model, _vars) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &gpu).unwrap();
    let graph = datasets::karate(Placement::cpu()).unwrap(); // loaded, never moved
    let err = model.forward_graph(&graph).unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch01_mismatch
    let mut text = format!("{err}\n");
    // ANCHOR: ch01_fix
    let graph = graph.to_device(&gpu).unwrap(); // PyG: data = data.to(device)
    let out = model.forward_graph(&graph).unwrap();
    assert_eq!(out.logits.dims(), &[34, 4]);
    // ANCHOR_END: ch01_fix

    // ANCHOR: ch01_partial
    // PyG: x = data.x.to(device); model(x, data.edge_index)
    let partial = graph
        .move_part(GraphPart::EdgeIndex, &Placement::cpu())
        .unwrap();
    let err = model.forward_graph(&partial).unwrap_err();
    // ANCHOR_END: ch01_partial
    text.push_str(&format!("{err}\n"));
    let partial = graph
        .move_part(GraphPart::Labels, &Placement::cpu())
        .unwrap();
    let mut t = Trainer::new(ModelConfig::gcn(34, 16, 4), &graph, &TrainConfig::gcn()).unwrap();
    text.push_str(&format!("{}\n", t.epoch(&partial).unwrap_err()));
    generated("ch01_mismatch.txt", &text);
}

#[test]
fn ch01_one_source_of_truth() {
    // ANCHOR: ch01_policy
    // --device on the command line, else WORKBOOK_DEVICE, else auto (CUDA if present, else cpu)
    let explicit: Option<device::DeviceSpec> = Some("sim:1".parse().unwrap());
    let chosen = device::choose(explicit).unwrap();
    eprintln!("device: {} ({})", chosen.name, chosen.reason);
    let graph = datasets::karate(&chosen.placement).unwrap();
    // ANCHOR_END: ch01_policy
    assert_eq!(graph.placement().to_string(), "sim:1");
    let mut text = format!("device: {} ({})\n", chosen.name, chosen.reason);
    let err = "gpu0".parse::<device::DeviceSpec>().unwrap_err();
    text.push_str(&format!("{err}\n"));
    generated("ch01_policy.txt", &text);
}

#[test]
fn ch01_inspect_every_tensor() {
    let gpu = lesson_device();
    let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &gpu).unwrap();
    let graph = datasets::karate(Placement::cpu()).unwrap();
    // ANCHOR: ch01_inspect
    print!("{}", inspect::model_table(&model));
    print!("{}", inspect::graph_table(&graph));
    // ANCHOR_END: ch01_inspect
    let text = format!(
        "{}\n{}",
        inspect::model_table(&model),
        inspect::graph_table(&graph)
    );
    generated("ch01_inspect.txt", &text);
}

fn cached_gcn() -> ModelConfig {
    let conv = |i, o| {
        let mut c = GcnConfig::new(i, o);
        c.cached = true; // PyG: GCNConv(..., cached=True)
        LayerConfig::Gcn(c)
    };
    ModelConfig {
        layers: vec![conv(34, 16), conv(16, 4)],
        ..ModelConfig::gcn(34, 16, 4)
    }
}

#[test]
fn ch02_moving_a_model_moves_its_buffers() {
    let gpu = lesson_device();
    let cpu = Placement::cpu();
    let graph = datasets::karate(&cpu).unwrap();
    let (model, _) = Model::init(cached_gcn(), 0, &cpu).unwrap();
    model.forward_graph(&graph).unwrap(); // fills the cache on the cpu
    let graph = graph.to_device(&gpu).unwrap();
    // ANCHOR: ch02_params_only
    // What PyTorch's module.to does to PyG's GCNConv: _cached_edge_index is a plain attribute,
    // not a registered buffer, so it stays behind.
    let stale = model.parameters_to_device(&gpu).unwrap();
    let err = stale.forward_graph(&graph).unwrap_err();
    // ANCHOR_END: ch02_params_only
    // ANCHOR: ch02_to_device
    let moved = model.to_device(&gpu).unwrap(); // a copy: parameters and buffers
    moved.forward_graph(&graph).unwrap();
    // ANCHOR_END: ch02_to_device
    let text = format!("{err}\n\n{}", inspect::model_table(&moved));
    generated("ch02_buffers.txt", &text);
}

#[test]
fn ch02_optimizer_state_follows_the_model() {
    let gpu = lesson_device();
    let cpu = Placement::cpu();
    let graph = datasets::karate(&cpu).unwrap();
    let mut trainer =
        Trainer::new(ModelConfig::gcn(34, 16, 4), &graph, &TrainConfig::gcn()).unwrap();
    trainer.epoch(&graph).unwrap();
    let on_gpu = graph.to_device(&gpu).unwrap();
    // ANCHOR: ch02_optimizer_left_behind
    let moved = trainer.model().to_device(&gpu).unwrap();
    let mut wrong = Trainer::from_model(trainer.model().clone(), &TrainConfig::gcn()).unwrap();
    wrong.rebind_model_only(moved).unwrap(); // parameters moved, Adam's state did not
    let err = wrong.epoch(&on_gpu).unwrap_err();
    // ANCHOR_END: ch02_optimizer_left_behind
    // ANCHOR: ch02_trainer_to_device
    trainer.to_device(&gpu).unwrap(); // model, cached buffers and optimiser state together
    trainer.epoch(&on_gpu).unwrap();
    // ANCHOR_END: ch02_trainer_to_device
    generated("ch02_optimizer.txt", &format!("{err}\n"));
}

/// Trains `epochs` epochs of GCN on karate, moving the graph once or every epoch.
fn run(every_epoch: bool, epochs: usize) -> Ledger {
    // ANCHOR: ch02_ledger
    let ledger = Ledger::new();
    let gpu = lesson_device().with_ledger(&ledger);
    ledger.set_phase("load");
    let host_graph = datasets::karate(Placement::cpu()).unwrap();
    let mut graph = host_graph.to_device(&gpu).unwrap(); // once, before training
    let mut trainer =
        Trainer::new(ModelConfig::gcn(34, 16, 4), &graph, &TrainConfig::gcn()).unwrap();
    for epoch in 1..=epochs {
        ledger.set_phase(format!("epoch {epoch}"));
        if every_epoch {
            graph = host_graph.to_device(&gpu).unwrap(); // the mistake: inside the loop
        }
        trainer.epoch(&graph).unwrap();
    }
    print!("{}", ledger.table());
    // ANCHOR_END: ch02_ledger
    ledger
}

#[test]
fn ch02_the_transfer_ledger() {
    let once = run(false, 5);
    let every = run(true, 5);
    let count = |l: &Ledger, what: &str| l.transfers().iter().filter(|t| t.what == what).count();
    assert_eq!(count(&once, "karate.x"), 1);
    assert_eq!(count(&every, "karate.x"), 6);
    let text = format!(
        "move once:\n{}\nmove every epoch:\n{}",
        once.table(),
        every.table()
    );
    generated("ch02_ledger.txt", &text);
}

#[test]
fn ch02_portable_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    let gpu = lesson_device();
    let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &gpu).unwrap();
    // ANCHOR: ch02_checkpoint
    checkpoint::save(&model, &path).unwrap(); // from any device; atomic
    let on_cpu = checkpoint::load(&path, Placement::cpu()).unwrap(); // map_location="cpu"
    assert_eq!(on_cpu.placement().to_string(), "cpu");
    // ANCHOR_END: ch02_checkpoint
    let wrong = checkpoint::load_with_config(&path, ModelConfig::gcn(34, 32, 4), Placement::cpu())
        .unwrap_err()
        .to_string()
        .replace(&path.display().to_string(), "gcn.safetensors");
    generated("ch02_checkpoint.txt", &format!("{wrong}\n"));
}

#[test]
fn ch03_the_race_reproduced() {
    use std::sync::Arc;
    use workbook::threads::{race_demo, serving};
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let (model, _) = Model::init(ModelConfig::gatv2(34, 8, 8, 4), 0, Placement::cpu()).unwrap();
    let workbook::Layer::GatV2(conv) = &model.layers()[0] else {
        unreachable!("gatv2 config")
    };
    // ANCHOR: ch03_race
    let requests = serving::mixed_requests(&graph, 3, 0).unwrap();
    let demo = race_demo::run(conv, &requests[0], &requests[2]).unwrap();
    assert!(demo.stateful.race_detected()); // the PyG-style layer: A got B's attention
    assert!(!demo.stateless.race_detected()); // ours: each thread got its own
    println!("{demo}");
    // ANCHOR_END: ch03_race
    // ANCHOR: ch03_serve
    let model = Arc::new(model); // shared, read-only: Model is Send + Sync
    let many: Arc<[serving::Request]> = serving::mixed_requests(&graph, 200, 1).unwrap().into();
    let run = serving::check(model.clone(), many, 4).unwrap();
    assert_eq!(run.mismatches, 0); // bit-identical to answering one by one
                                   // ANCHOR_END: ch03_serve
    generated("ch03_race.txt", &format!("{demo}"));
    // ANCHOR: ch03_torn
    let torn = workbook::threads::snapshot::torn_read_demo(
        &graph,
        ModelConfig::gatv2(34, 8, 8, 4),
        0,
        0.05,
    )
    .unwrap();
    assert!(torn.hazard_shown() && torn.snapshots_consistent());
    println!("{torn}");
    // ANCHOR_END: ch03_torn
    generated("ch03_torn.txt", &format!("{torn}"));
}

#[test]
fn ch04_preflight_then_export() {
    use workbook::candle_core::DType;
    use workbook::export::{onnx, preflight};
    let gpu = lesson_device();
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let (model, _) = Model::init(ModelConfig::gatv2(34, 8, 8, 4), 0, &gpu).unwrap();
    // ANCHOR: ch04_preflight_fails
    let half = model.to_dtype(DType::F16).unwrap(); // an inference copy in half precision
    let example = preflight::Example::from_graph(&graph); // the dummy input, on the cpu
    let err = preflight::Preflight::new(&half)
        .training(true) // model.eval() forgotten
        .check(&example)
        .unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch04_preflight_fails
    let mut text = format!("{err}\n\n");
    // ANCHOR: ch04_export
    let graph = graph.to_device(&gpu).unwrap(); // the example must be where the model is
    let report = preflight::check(&model, &preflight::Example::from_graph(&graph)).unwrap();
    for line in &report.checks {
        println!("ok: {line}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gatv2.onnx");
    onnx::write(&model, &path, &onnx::OnnxOptions::default()).unwrap(); // atomic
                                                                        // ANCHOR_END: ch04_export
    for line in &report.checks {
        text.push_str(&format!("ok: {line}\n"));
    }
    generated("ch04_preflight.txt", &text);
}
