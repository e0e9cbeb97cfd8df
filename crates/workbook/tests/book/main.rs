//! The book's listings (chapters 1 to 6 and the capstone), compiled and run by `cargo test`.
//!
//! `book/src/*.md` includes the code between `ANCHOR` markers, and the text these tests print
//! into `book/src/generated/` (error messages, tables, ledgers). A test fails when a generated
//! file is stale; refresh them all with
//!
//! ```sh
//! WORKBOOK_BLESS=1 cargo test -p workbook --test book
//! ```

mod pages;

use std::path::PathBuf;
use workbook::ledger::Ledger;
use workbook::ops::aggregate::aggregate_sum;
use workbook::ops::raw_index;
use workbook::sim_device::SimErrors;
use workbook::train::{TrainConfig, Trainer};
use workbook::{
    checkpoint, datasets, device, inspect, GcnConfig, Graph, GraphPart,
    LayerConfig, Model, ModelConfig, Placement, UncheckedGraph,
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
fn ch01_two_tensors_two_devices() {
    use workbook::placed_tensor::PlacedTensor;
    // ANCHOR: ch01_warmup
    let cpu = Placement::cpu();
    let gpu = Placement::sim(1); // the accelerator (cuda:0 on a GPU machine)
    let a = PlacedTensor::new("a", &[1.0, 2.0], &cpu).unwrap();
    let b = PlacedTensor::new("b", &[10.0, 20.0], &gpu).unwrap();
    let err = a.add(&b).unwrap_err(); // two devices: an error
    println!("{err}");
    let b = b.to_device(&cpu).unwrap(); // PyTorch: b = b.to(a.device)
    let sum = a.add(&b).unwrap(); // one device: it works
    println!("a + b = {:?}", sum.to_vec().unwrap());
    // ANCHOR_END: ch01_warmup
    assert_eq!(sum.to_vec().unwrap(), vec![11.0, 22.0]);
    let mut text = String::new();
    say(&mut text, &err);
    say(&mut text, format!("a + b = {:?}", sum.to_vec().unwrap()));
    generated("ch01_warmup.txt", &text);
}

#[test]
fn ch01_the_classic_mismatch() {
    // ANCHOR: ch01_mismatch
    let gpu = Placement::sim(1); // the accelerator (cuda:0 on a GPU machine)
    let config = ModelConfig::gcn(34, 16, 4);
    let (model, _vars) = Model::init(config, 0, &gpu).unwrap();
    // loaded on the cpu, never moved:
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let err = model.forward_graph(&graph).unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch01_mismatch
    let mut text = format!("{err}\n");
    let host_graph = graph.clone();
    // ANCHOR: ch01_fix
    let (model_at, graph_at) = (model.placement(), graph.placement());
    println!("model on {model_at}, graph on {graph_at}");
    // Move the graph to wherever the model is (PyG: data = data.to(device)):
    let graph = graph.to_device(model.placement()).unwrap();
    let out = model.forward_graph(&graph).unwrap();
    println!("now the graph is on {}", graph.placement());
    // ANCHOR_END: ch01_fix
    assert_eq!(out.logits.dims(), &[34, 4]);
    let mut where_ = format!(
        "model on {}, graph on {}\n",
        model.placement(),
        host_graph.placement()
    );
    where_.push_str(&format!("now the graph is on {}\n", graph.placement()));
    generated("ch01_placement.txt", &where_);

    let graph = host_graph;
    // ANCHOR: ch01_partial
    // PyG: x = data.x.to(device); model(x, data.edge_index)
    let only_x = graph.move_part(GraphPart::X, &gpu).unwrap();
    let err = model.forward_graph(&only_x).unwrap_err();
    println!("{err}");
    // The features and the edges moved, the labels (y) left on the cpu;
    // the trainer checks them before the loss:
    let no_labels = only_x.move_part(GraphPart::EdgeIndex, &gpu).unwrap();
    let on_gpu = graph.to_device(&gpu).unwrap();
    let recipe = TrainConfig::gcn();
    let config = ModelConfig::gcn(34, 16, 4);
    let mut trainer = Trainer::new(config, &on_gpu, &recipe).unwrap();
    let labels_err = trainer.epoch(&no_labels).unwrap_err();
    println!("{labels_err}");
    // ANCHOR_END: ch01_partial
    text.push_str(&format!("{err}\n"));
    text.push_str(&format!("{labels_err}\n"));
    generated("ch01_mismatch.txt", &text);
}

#[test]
fn ch01_read_back_once() {
    // ANCHOR: ch01_read_back
    let ledger = Ledger::new(); // records every copy made through `gpu`
    let gpu = Placement::sim(1).with_ledger(&ledger);
    let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &gpu).unwrap();
    let graph = datasets::karate(&gpu).unwrap();
    ledger.clear(); // forget the loading copies
    let logits = model.forward_graph(&graph).unwrap().logits;
    // The predicted classes, back on the host in one copy that the ledger
    // records (PyTorch: out.argmax(1).cpu().tolist()):
    let classes = logits.argmax(1).unwrap();
    let pred: Vec<u32> = gpu.fetch_vec1(&classes, "predictions").unwrap();
    println!("predictions: {:?}", &pred[..10]);
    print!("{}", ledger.table());
    // ANCHOR_END: ch01_read_back
    let mut text = String::new();
    say(&mut text, format!("predictions: {:?}", &pred[..10]));
    text.push_str(&ledger.table());
    generated("ch01_read_back.txt", &text);
}

#[test]
fn ch01_one_source_of_truth() {
    // ANCHOR: ch01_policy
    // --device on the command line, else WORKBOOK_DEVICE,
    // else auto (CUDA if present, else cpu)
    let explicit: Option<device::DeviceSpec> = Some("sim:1".parse().unwrap());
    let chosen = device::choose(explicit).unwrap();
    println!("device: {} ({})", chosen.name, chosen.reason);
    let graph = datasets::karate(&chosen.placement).unwrap();
    // A spelling the policy does not know:
    let err = "gpu0".parse::<device::DeviceSpec>().unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch01_policy
    assert_eq!(graph.placement().to_string(), "sim:1");
    let mut text = format!("device: {} ({})\n", chosen.name, chosen.reason);
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

// ANCHOR: ch01_sum_neighbours
/// A sum over in-neighbours, written as PyG's MessagePassing does it,
/// on the raw tensors.
fn sum_neighbours(data: &UncheckedGraph) -> workbook::Result<Tensor> {
    let (x, edge_index, at) = (data.x(), data.edge_index(), data.placement());
    // x_j = x.index_select(0, edge_index[0])
    let x_j =
        raw_index::gather_rows(x, &edge_index.get(0)?, at, "x[edge_index[0]]")?;
    // scatter(x_j, edge_index[1], dim=0, dim_size=num_nodes, reduce="sum")
    let n = x.dim(0)?;
    raw_index::scatter_add_rows(
        &x_j,
        &edge_index.get(1)?,
        n,
        at,
        "sum at edge_index[1]",
    )
}
// ANCHOR_END: ch01_sum_neighbours

#[test]
fn ch01_asynchronous_errors() {
    // ANCHOR: ch01_async
    // WORKBOOK_SIM_ASYNC=1 does this to every sim:N of a program:
    let gpu = Placement::sim_with(1, SimErrors::Asynchronous);
    let x = [[1f32, 0.], [0., 1.], [1., 1.], [2., 0.]];
    // four nodes in a ring, ids read from a file that counts from 1:
    let edge_index = [[1i64, 2, 3, 4], [2, 3, 4, 1]];
    let x = Tensor::new(&x, &Device::Cpu).unwrap();
    let edge_index = Tensor::new(&edge_index, &Device::Cpu).unwrap();
    // PyG: data = Data(x=x, edge_index=edge_index).to(device)
    let data = UncheckedGraph::new("ring", x, edge_index);
    let on_gpu = data.to_device(&gpu).unwrap();
    let h = sum_neighbours(&on_gpu).unwrap(); // the faulting kernel: no error
    let loss = h.relu().unwrap().sum_all().unwrap();
    // PyTorch: loss.item()
    let err = gpu.fetch_scalar::<f32>(&loss, "loss").unwrap_err();
    println!("{err}");
    // and every later operation on the device:
    let again = on_gpu.to_device(Placement::cpu()).unwrap_err();
    println!("{again}");
    // ANCHOR_END: ch01_async
    let mut text = String::new();
    say(&mut text, &err);
    say(&mut text, &again);
    generated("ch01_async.txt", &text);

    // ANCHOR: ch01_blocking
    // WORKBOOK_LAUNCH_BLOCKING=1 does this to every sim:N of a program:
    let gpu = Placement::sim_with(1, SimErrors::Blocking);
    let on_gpu = data.to_device(&gpu).unwrap();
    let err = sum_neighbours(&on_gpu).unwrap_err(); // fails here
    println!("{err}");
    // ANCHOR_END: ch01_blocking
    generated("ch01_blocking.txt", &format!("{err}\n"));

    let ledger = Ledger::new();
    let gpu = Placement::sim_with(1, SimErrors::Asynchronous).with_ledger(&ledger);
    // ANCHOR: ch01_validate
    // PyG: data.validate(raise_on_error=True), before any kernel
    let err = Graph::validate(&data).unwrap_err();
    println!("{err}");
    // The fix: ids counted from 0. Validation returns a checked Graph, and
    // only that graph goes on: moved, then summed by the workbook's own
    // kernel, which takes a checked edge index and nothing else.
    let edge_index = (data.edge_index() - 1.0).unwrap();
    let fixed = UncheckedGraph::new("ring", data.x().clone(), edge_index);
    let graph = Graph::validate(&fixed).unwrap().to_device(&gpu).unwrap();
    let h = aggregate_sum(graph.x(), graph.edge_index(), None).unwrap();
    let h: Vec<f32> = gpu.fetch_vec1(&h.flatten_all().unwrap(), "h").unwrap();
    println!(
        "{} nodes, {} edges on {}; h = {h:?}",
        graph.num_nodes(),
        graph.num_edges(),
        graph.placement()
    );
    // ANCHOR_END: ch01_validate
    let mut text = String::new();
    say(&mut text, &err);
    say(
        &mut text,
        format!(
            "{} nodes, {} edges on {}; h = {h:?}",
            graph.num_nodes(),
            graph.num_edges(),
            graph.placement()
        ),
    );
    generated("ch01_validate.txt", &text);
    // PyG's own words, as book/python/ch01_async.py printed them, are what the error quotes.
    let pyg = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../book/src/generated/python/ch01_async.validate.txt"),
    )
    .unwrap();
    let quoted = pyg.lines().nth(1).unwrap();
    assert!(err.to_string().contains(quoted), "{quoted}");
    let fixed_pyg = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../book/src/generated/python/ch01_async.fixed.txt"),
    )
    .unwrap();
    assert!(fixed_pyg.contains("[[2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]"));
    assert_eq!(h, vec![2., 0., 1., 0., 0., 1., 1., 1.]);
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
fn ch01_refused_by_the_compiler() {
    use workbook::branded::{train, with_placement};
    let graph = datasets::karate(Placement::cpu()).unwrap();
    // ANCHOR: ch01_branded
    let ledger = Ledger::new();
    let gpu = lesson_device().with_ledger(&ledger); // sim:1 here, cuda:0 on a GPU
    let loss = with_placement(gpu, |gpu| -> workbook::Result<f32> {
        let model = gpu.init(ModelConfig::gcn(34, 16, 4), 0)?; // On<'gpu, Model>
        let graph = gpu.put(&graph)?; // a recorded move: On<'gpu, Graph>
        let mut opt = train::adam(&model, 0.01)?; // its state where the model is
        let mut dropout = gpu.dropout(0);
        let loss = train::step(&model, &mut opt, &graph, &mut dropout)?;
        train::scalar(&loss) // read back to the host: an f32, no brand
    })
    .unwrap();
    println!("loss after one step: {loss:.4}");
    print!("{}", ledger.table());
    // ANCHOR_END: ch01_branded
    assert!(loss.is_finite());
    generated(
        "ch01_branded.txt",
        &format!("loss after one step: {loss:.4}\n{}", ledger.table()),
    );
}

#[test]
fn ch01_a_brand_checked_at_run_time() {
    use workbook::branded::{branded, with_placement};
    // ANCHOR: ch01_branded_fallback
    // A plain value, from outside any brand (a file, a thread, a list of devices):
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let answer =
        with_placement(lesson_device(), |gpu| -> workbook::Result<String> {
            if let Err(err) = branded(&gpu, graph.clone()) {
                println!("{err}"); // checked at run time: not on sim:1
            }
            let graph = gpu.put(&graph)?; // moved, so branded
            Ok(format!(
                "{} nodes on {}",
                graph.num_nodes(),
                graph.placement()
            ))
        })
        .unwrap();
    println!("{answer}");
    // ANCHOR_END: ch01_branded_fallback
    let err = with_placement(lesson_device(), |gpu| {
        branded(&gpu, graph.clone()).map(|_| ()).unwrap_err()
    });
    generated("ch01_branded_fallback.txt", &format!("{err}\n{answer}\n"));
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
    // What PyTorch's module.to does to PyG's GCNConv: _cached_edge_index is
    // a plain attribute, not a registered buffer, so it stays behind.
    let stale = model.parameters_to_device(&gpu).unwrap();
    let err = stale.forward_graph(&graph).unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch02_params_only
    // ANCHOR: ch02_to_device
    let moved = model.to_device(&gpu).unwrap(); // a copy: parameters and buffers
    moved.forward_graph(&graph).unwrap();
    print!("{}", inspect::model_table(&moved));
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
        Trainer::new(ModelConfig::gcn(34, 16, 4), &graph, &TrainConfig::gcn())
            .unwrap();
    trainer.epoch(&graph).unwrap();
    let on_gpu = graph.to_device(&gpu).unwrap();
    // ANCHOR: ch02_optimizer_left_behind
    let moved = trainer.model().to_device(&gpu).unwrap();
    let mut wrong =
        Trainer::from_model(trainer.model().clone(), &TrainConfig::gcn()).unwrap();
    // parameters moved, Adam's state did not
    wrong.rebind_model_only(moved).unwrap();
    let err = wrong.epoch(&on_gpu).unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch02_optimizer_left_behind
    // ANCHOR: ch02_trainer_to_device
    // model, cached buffers and optimiser state together
    trainer.to_device(&gpu).unwrap();
    trainer.epoch(&on_gpu).unwrap();
    // ANCHOR_END: ch02_trainer_to_device
    generated("ch02_optimizer.txt", &format!("{err}\n"));
}

#[test]
fn ch02_lazy_layers() {
    use workbook::train::Adam;
    let mut text = String::new();
    // ANCHOR: ch02_lazy
    let ledger = Ledger::new();
    let gpu = lesson_device().with_ledger(&ledger);
    // GCNConv(in_channels=-1, out_channels=16), GCNConv(-1, 4)
    let config = ModelConfig::new(vec![
        LayerConfig::lazy(|i| GcnConfig::new(i, 16)),
        LayerConfig::lazy(|i| GcnConfig::new(i, 4)),
    ]);
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let mut model = model.to_device(&gpu).unwrap(); // no weight yet: nothing copied
    let before = inspect::model_table(&model);
    println!("before the first forward pass:\n{}", before.trim_end());
    let err = Adam::for_model(&model, 0.01, |_| 0.0).err().unwrap();
    println!("{err}");
    let graph = datasets::karate(&gpu).unwrap();
    ledger.set_phase("first forward");
    model.materialize(&graph).unwrap(); // the first forward pass: &mut self
    let after = inspect::model_table(&model);
    println!("after it:\n{}", after.trim_end());
    println!("the ledger of the first forward pass:");
    for t in ledger.in_phase("first forward") {
        if t.what.contains("first forward pass") {
            println!("{} -> {}  {:>5} B  {}", t.from, t.to, t.bytes, t.what);
        }
    }
    let layer = serde_json::to_string(&model.config().layers[0]).unwrap();
    println!("saved config: {layer}");
    // sees all 4 parameters:
    let opt = Adam::for_model(&model, 0.01, |_| 0.0).unwrap();
    // ANCHOR_END: ch02_lazy
    assert_eq!(opt.state().count(), 4);
    say(&mut text, "before the first forward pass:");
    say(&mut text, before.trim_end());
    say(&mut text, &err);
    say(&mut text, "after it:");
    say(&mut text, after.trim_end());
    say(&mut text, "the ledger of the first forward pass:");
    let born: Vec<_> = ledger
        .in_phase("first forward")
        .into_iter()
        .filter(|t| t.what.contains("first forward pass"))
        .map(|t| format!("{} -> {}  {:>5} B  {}", t.from, t.to, t.bytes, t.what))
        .collect();
    say(&mut text, born.join("\n"));
    say(
        &mut text,
        format!(
            "saved config: {}",
            serde_json::to_string(&model.config().layers[0]).unwrap()
        ),
    );
    generated("ch02_lazy.txt", &text);
}

/// Trains `epochs` epochs of GCN on karate, moving the graph once or every epoch.
fn run(every_epoch: bool, epochs: usize) -> Ledger {
    // ANCHOR: ch02_ledger
    let how = if every_epoch {
        "move every epoch"
    } else {
        "move once"
    };
    println!("{how}:");
    let ledger = Ledger::new();
    let gpu = lesson_device().with_ledger(&ledger);
    ledger.set_phase("load");
    let host_graph = datasets::karate(Placement::cpu()).unwrap();
    let mut graph = host_graph.to_device(&gpu).unwrap(); // once, before training
    let mut trainer =
        Trainer::new(ModelConfig::gcn(34, 16, 4), &graph, &TrainConfig::gcn())
            .unwrap();
    for epoch in 1..=epochs {
        ledger.set_phase(format!("epoch {epoch}"));
        if every_epoch {
            // the mistake: inside the loop
            graph = host_graph.to_device(&gpu).unwrap();
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
    let count = |l: &Ledger, what: &str| {
        l.transfers().iter().filter(|t| t.what == what).count()
    };
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
fn ch02_metrics_on_the_device() {
    use workbook::candle_core::{DType, Tensor, D};
    let ledger = Ledger::new();
    let gpu = lesson_device().with_ledger(&ledger);
    let graph = datasets::karate(&gpu).unwrap();
    let (model, _vars) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &gpu).unwrap();
    let (y, split) = (graph.y().unwrap(), graph.split().unwrap());
    let logits = model.forward_graph(&graph).unwrap().logits;
    ledger.clear();
    ledger.set_phase("on the host");
    // ANCHOR: ch02_metrics_host
    // PyTorch: pred = out.argmax(1).cpu()
    //          (pred[test_mask] == data.y[test_mask].cpu()).sum()
    let predicted = logits.argmax(D::Minus1).unwrap();
    let predicted = gpu.fetch_vec1::<u32>(&predicted, "predictions").unwrap();
    let labels = gpu.fetch_vec1::<u32>(y, "y").unwrap();
    let test = gpu.fetch_vec1::<u32>(&split.test, "test ids").unwrap();
    let correct = test
        .iter()
        .filter(|&&i| predicted[i as usize] == labels[i as usize])
        .count();
    // ANCHOR_END: ch02_metrics_host
    ledger.set_phase("on the device");
    // ANCHOR: ch02_metrics_device
    let predicted = logits.argmax(D::Minus1).unwrap(); // stays on the device
    let correct_in = |ids: &Tensor| -> Tensor {
        let hits = predicted.index_select(ids, 0).unwrap();
        let hits = hits.eq(&y.index_select(ids, 0).unwrap()).unwrap();
        hits.to_dtype(DType::F32)
            .unwrap()
            .sum_all()
            .unwrap()
            .reshape(1)
            .unwrap()
    };
    // every number the host needs, in one tensor: one small read-back
    let numbers =
        Tensor::cat(&[correct_in(&split.train), correct_in(&split.test)], 0)
            .unwrap();
    let numbers = gpu
        .fetch_vec1::<f32>(&numbers, "correct (train, test)")
        .unwrap();
    // both phases: on the host, on the device
    print!("{}", ledger.table());
    // ANCHOR_END: ch02_metrics_device
    assert_eq!(numbers[1] as usize, correct);
    generated("ch02_metrics.txt", &ledger.table());
}

#[test]
fn ch02_portable_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    let gpu = lesson_device();
    let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &gpu).unwrap();
    // ANCHOR: ch02_checkpoint
    checkpoint::save(&model, &path).unwrap(); // from any device; atomic
                                              // map_location="cpu"
    let on_cpu = checkpoint::load(&path, Placement::cpu()).unwrap();
    assert_eq!(on_cpu.placement().to_string(), "cpu");
    // The same file into a config 32 wide: every problem listed at once
    // (the output shows the file's temporary path as gcn.safetensors).
    let wide = ModelConfig::gcn(34, 32, 4);
    let err = checkpoint::load_with_config(&path, wide, Placement::cpu());
    println!("{}", err.unwrap_err());
    // ANCHOR_END: ch02_checkpoint
    let wrong = checkpoint::load_with_config(
        &path,
        ModelConfig::gcn(34, 32, 4),
        Placement::cpu(),
    )
    .unwrap_err()
    .to_string()
    .replace(&path.display().to_string(), "gcn.safetensors");
    generated("ch02_checkpoint.txt", &format!("{wrong}\n"));
}

#[test]
fn ch02_pytorch_checkpoints() {
    use workbook::torch_file::MapLocation;
    let pt =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pyg/pt");
    let path = pt.join("cora_gcn_state_dict_cuda0.pt");
    let short = |e: workbook::WorkbookError| {
        e.to_string().replace(&pt.display().to_string(), "pt")
    };
    // ANCHOR: ch02_pt
    // torch.load(path): each tensor to the device it was saved on
    let refused = checkpoint::load_pt(&path, &MapLocation::AsSaved, None);
    // map_location="cpu" (or "sim:1", or {"cuda:0": "cpu"})
    let to = MapLocation::To(Placement::cpu());
    let import = checkpoint::load_pt(&path, &to, None).unwrap(); // config inferred
    assert_eq!(import.model.config(), &ModelConfig::gcn(1433, 16, 7));
    // (the output shortens the fixtures' folder to pt)
    if let Err(e) = &refused {
        println!("{e}\n"); // without that GPU
    }
    for note in &import.notes {
        println!("note: {note}");
    }
    // a DataParallel state_dict, then a pickled module
    let dp = pt.join("cora_gcn_dataparallel.pt");
    let dp_notes = checkpoint::load_pt(&dp, &to, None).unwrap().notes;
    println!("\ncora_gcn_dataparallel.pt: {}", dp_notes[0]);
    let whole = pt.join("cora_gcn_whole_module.pt");
    println!("\n{}", checkpoint::load_pt(&whole, &to, None).unwrap_err());
    // ANCHOR_END: ch02_pt
    let mut text = String::new();
    // With a GPU (the cuda feature) the file loads as saved, as in PyTorch; the book's text is
    // generated on a machine without one.
    if let Err(e) = refused {
        text.push_str(&format!("{}\n\n", short(e)));
    }
    for note in &import.notes {
        text.push_str(&format!("note: {note}\n"));
    }
    let wrapped =
        checkpoint::load_pt(&pt.join("cora_gcn_dataparallel.pt"), &to, None)
            .unwrap();
    text.push_str(&format!(
        "\ncora_gcn_dataparallel.pt: {}\n",
        wrapped.notes[0]
    ));
    let whole =
        checkpoint::load_pt(&pt.join("cora_gcn_whole_module.pt"), &to, None)
            .unwrap_err();
    text.push_str(&format!("\n{}\n", short(whole)));
    if !cfg!(feature = "cuda") {
        generated("ch02_pt.txt", &text);
    }
}

#[test]
fn ch03_the_race_reproduced() {
    use std::sync::Arc;
    use workbook_lessons::threads::{race_demo, serving};
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let (model, _) =
        Model::init(ModelConfig::gatv2(34, 8, 8, 4), 0, Placement::cpu()).unwrap();
    let workbook::Layer::GatV2(conv) = &model.layers()[0] else {
        unreachable!("gatv2 config")
    };
    // ANCHOR: ch03_race
    let requests = serving::mixed_requests(&graph, 3, 0).unwrap();
    // both orders
    let demo = race_demo::run(conv, &requests[0], &requests[2]).unwrap();
    // PyG < 2.5: A got B's attention
    assert!(demo.a_reads_first.stateful.wrong_attention());
    // and B's assert failed
    assert!(demo.a_reads_first.stateful.assertion_failed());
    assert!(demo.b_reads_first.stateful.assertion_failed()); // here A's did
    assert!(demo.stateless_always_correct()); // ours: each thread got its own
    println!("{demo}");
    // ANCHOR_END: ch03_race
    // ANCHOR: ch03_serve
    let model = Arc::new(model); // shared, read-only: Model is Send + Sync
    let many: Arc<[serving::Request]> =
        serving::mixed_requests(&graph, 200, 1).unwrap().into();
    let run = serving::check(model.clone(), many, 4).unwrap();
    // bit-identical to answering one by one
    assert_eq!(run.mismatches, 0);
    // ANCHOR_END: ch03_serve
    generated("ch03_race.txt", &format!("{demo}"));
    // ANCHOR: ch03_torn
    let torn = workbook_lessons::threads::snapshot::torn_read_demo(
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
    // an inference copy in half precision
    let half = model.to_dtype(DType::F16).unwrap();
    // the dummy input, on the cpu
    let example = preflight::Example::from_graph(&graph);
    let err = preflight::Preflight::new(&half)
        .training(true) // model.eval() forgotten
        .check(&example)
        .unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch04_preflight_fails
    let mut text = format!("{err}\n\n");
    // ANCHOR: ch04_export
    // the example must be where the model is
    let graph = graph.to_device(&gpu).unwrap();
    let report =
        preflight::check(&model, &preflight::Example::from_graph(&graph)).unwrap();
    for line in &report.checks {
        println!("ok: {line}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gatv2.onnx");
    // atomic: the file is whole or absent
    onnx::write(&model, &path, &onnx::OnnxOptions::default()).unwrap();
    // ANCHOR_END: ch04_export
    for line in &report.checks {
        text.push_str(&format!("ok: {line}\n"));
    }
    generated("ch04_preflight.txt", &text);
}

/// Describes one ONNX input or output: `x: float32 [num_nodes, 1433]`.
fn onnx_value(v: &workbook::export::onnx_proto::ValueInfoProto) -> String {
    use workbook::export::onnx_proto::DimensionValue;
    let tensor = v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
    let elem = match tensor.map(|t| t.elem_type) {
        Some(1) => "float32",
        Some(7) => "int64",
        _ => "other",
    };
    let dims: Vec<String> = tensor
        .and_then(|t| t.shape.as_ref())
        .map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(DimensionValue::DimValue(n)) => n.to_string(),
                    Some(DimensionValue::DimParam(p)) => p.clone(),
                    None => "?".into(),
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{}: {elem} [{}]", v.name, dims.join(", "))
}

/// Prints `line` and appends it to `text` (for a generated output).
fn say(text: &mut String, line: impl std::fmt::Display) {
    println!("{line}");
    text.push_str(&format!("{line}\n"));
}

#[test]
fn ch05_mini_batches() {
    use workbook::loader::{BatchPart, InputNodes, LoaderConfig, NeighborLoader};
    use workbook::train::minibatch::{MiniBatchConfig, MiniBatchTrainer};
    let mut text = String::new();

    // ANCHOR: ch05_loader
    // stays on the host
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let config = LoaderConfig {
        input_nodes: InputNodes::Train, // PyG: input_nodes=data.train_mask
        shuffle: true,
        ..LoaderConfig::new(&[10, 10], 64) // num_neighbors=[10, 10], batch_size=64
    };
    let loader = NeighborLoader::new(&graph, config).unwrap();
    let batch = loader.batches(1).next().unwrap().unwrap(); // epoch 1, first batch
    let n_id = batch.n_id_host();
    // ANCHOR_END: ch05_loader
    // ANCHOR: ch05_loader_print
    say(&mut text, format!("batches per epoch: {}", loader.len()));
    say(
        &mut text,
        format!(
            "batch_size {}, nodes {} (per hop {:?}), edges {} (per hop {:?})",
            batch.batch_size(),
            batch.num_nodes(),
            batch.num_sampled_nodes(),
            batch.num_edges(),
            batch.num_sampled_edges()
        ),
    );
    say(
        &mut text,
        format!("first seeds (global ids): {:?}", &n_id[..5]),
    );
    say(
        &mut text,
        format!(
            "x {:?} of the graph's {:?}; bytes to move: {}",
            batch.x().dims(),
            graph.x().dims(),
            batch.bytes()
        ),
    );
    // ANCHOR_END: ch05_loader_print
    generated("ch05_loader.txt", &text);

    // ANCHOR: ch05_loop
    let ledger = Ledger::new();
    let device = Placement::sim(1).with_ledger(&ledger);
    let model = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let settings = MiniBatchConfig::new(&[10, 10], 64);
    // The model moves once (phase "init")...
    let mut trainer = MiniBatchTrainer::new(
        model,
        &graph,
        &TrainConfig::gcn(),
        settings,
        &device,
    )
    .unwrap();
    let loader = trainer.loader().clone();
    ledger.set_phase("epoch 1");
    for batch in loader.batches(1) {
        // ...the data every step
        let batch = batch.unwrap().to_device(&device).unwrap();
        trainer.step(&batch).unwrap();
    }
    // the output below
    print!("{}", ledger.table());
    // ANCHOR_END: ch05_loop
    generated("ch05_ledger.txt", &ledger.table());

    let mut text = String::new();
    // ANCHOR: ch05_mistakes
    // 1. The graph moved to the device before the loader (this loader samples
    //    and gathers on the host).
    let on_device = graph.to_device(&device).unwrap();
    let err = NeighborLoader::new(&on_device, LoaderConfig::new(&[10, 10], 64))
        .unwrap_err();
    say(&mut text, err);
    // ANCHOR_END: ch05_mistakes
    // ANCHOR: ch05_mistakes_part
    // 2. The features and edges moved by hand, the labels left behind.
    let batch = loader.batch(1, 0).unwrap();
    let half = batch
        .move_part(BatchPart::X, &device)
        .and_then(|b| b.move_part(BatchPart::EdgeIndex, &device))
        .unwrap();
    let left_behind = trainer.step(&half).unwrap_err();
    say(&mut text, left_behind);
    // ANCHOR_END: ch05_mistakes_part
    generated("ch05_mistakes.txt", &text);

    // The same epoch's batches again, with the third mistake.
    ledger.clear();
    // ANCHOR: ch05_whole_graph
    ledger.set_phase("epoch 1");
    for batch in loader.batches(1) {
        // The mistake: the whole graph, every step (PyG: data = data.to(device)
        // inside the loop). No error: the step uses only the batch.
        let _graph = graph.to_device(&device).unwrap();
        let batch = batch.unwrap().to_device(&device).unwrap();
        trainer.step(&batch).unwrap();
    }
    print!("{}", ledger.table());
    // ANCHOR_END: ch05_whole_graph
    let whole = ledger.table();
    assert!(whole.contains("Cora.x"), "{whole}");
    generated("ch05_whole_graph.txt", &whole);

    // ANCHOR: ch05_cached_refused
    // PyG's GCNConv(cached=True) on mini-batches: refused up front.
    let mut cached =
        ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    for layer in &mut cached.layers {
        if let LayerConfig::Gcn(c) = layer {
            c.cached = true;
        }
    }
    let settings = MiniBatchConfig::new(&[10, 10], 64);
    let recipe = TrainConfig::gcn();
    let err = MiniBatchTrainer::new(cached, &graph, &recipe, settings, &device)
        .err()
        .expect("a cached GCN is refused for mini-batches");
    println!("{err}");
    // ANCHOR_END: ch05_cached_refused
    generated("ch05_cached.txt", &format!("{err}\n"));
}

/// Bytes per kind of phase (`init`, training epochs, evaluation), in MB.
fn phase_megabytes(ledger: &Ledger) -> String {
    let mut groups: Vec<(String, usize, u64)> = Vec::new();
    for t in ledger.totals() {
        let group = match t.phase.split_once(' ') {
            Some(("epoch", _)) => "training steps (epoch *)".to_string(),
            Some(("eval", n)) if n.parse::<u32>().is_ok() => {
                "evaluation (eval *)".to_string()
            }
            _ => t.phase.clone(),
        };
        match groups.iter_mut().find(|g| g.0 == group) {
            Some(g) => {
                g.1 += t.transfers;
                g.2 += t.bytes;
            }
            None => groups.push((group, t.transfers, t.bytes)),
        }
    }
    groups
        .iter()
        .map(|(g, n, b)| {
            format!("  {g:<26} {n:>5} transfers {:>8.1} MB\n", *b as f64 / 1e6)
        })
        .collect()
}

#[test]
fn ch05_evaluation_moves_data_too() {
    use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchTrainer};
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let three_epochs = |settings: MiniBatchConfig| {
        let ledger = Ledger::new();
        let device = Placement::sim(1).with_ledger(&ledger);
        let config =
            ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
        let recipe = TrainConfig::gcn();
        let mut t =
            MiniBatchTrainer::new(config, &graph, &recipe, settings, &device)
                .unwrap();
        for _ in 0..3 {
            t.epoch().unwrap();
        }
        phase_megabytes(&ledger)
    };
    // The default: every neighbour (-1 per hop) of 1024 seeds at a time.
    let default = MiniBatchConfig::new(&[10, 10], 128);
    assert!(matches!(default.eval, Eval::Batches { .. }));
    let by_batches = three_epochs(default);
    // ANCHOR: ch05_eval
    let settings = MiniBatchConfig {
        eval: Eval::FullGraph, // CLI: --eval full
        ..MiniBatchConfig::new(&[10, 10], 128)
    };
    // ANCHOR_END: ch05_eval
    // ANCHOR: ch05_eval_print
    let full = three_epochs(settings);
    let text = format!(
        "3 epochs, --eval batches (the default):\n{by_batches}\
         3 epochs, --eval full:\n{full}"
    );
    print!("{text}");
    // ANCHOR_END: ch05_eval_print
    generated("ch05_eval.txt", &text);
}

#[test]
fn ch05_node_order() {
    use workbook::reorder::{edge_locality, reorder_graph, Order};
    let mut text = String::new();
    // ANCHOR: ch05_node_order
    // 20,000 points, each joined to its 10 nearest neighbours; ids shuffled
    let graph = datasets::load("knn:20000", None, Placement::cpu()).unwrap();
    let (ordered, perm) =
        reorder_graph(&graph, Order::ReverseCuthillMcKee).unwrap();
    for (name, g) in [("shuffled ids", &graph), ("after RCM", &ordered)] {
        let gaps = edge_locality(g.edge_index());
        say(
            &mut text,
            format!(
                "{name:>12}: mean |source - target| {:>7.1}, largest {:>5}",
                gaps.mean_gap, gaps.max_gap
            ),
        );
    }
    let old = 0;
    say(
        &mut text,
        format!("old node {old} is new node {}", perm.new_of_old()[old]),
    );
    // ANCHOR_END: ch05_node_order
    generated("ch05_node_order.txt", &text);
    let before = edge_locality(graph.edge_index()).mean_gap;
    let after = edge_locality(ordered.edge_index()).mean_gap;
    assert!(after * 20.0 < before, "{before} -> {after}");

    let mut text = String::new();
    // ANCHOR: ch05_node_order_same
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let plain = model.forward_graph(&graph).unwrap().logits;
    let renumbered = model.forward_graph(&ordered).unwrap().logits;
    let back = perm.to_old_rows(&renumbered).unwrap(); // row i: old node i
    let largest = |t: Tensor| t.abs().unwrap().max_all().unwrap();
    let diff = largest((&back - &plain).unwrap())
        .to_scalar::<f32>()
        .unwrap();
    let unmapped = largest((&renumbered - &plain).unwrap())
        .to_scalar::<f32>()
        .unwrap();
    say(
        &mut text,
        format!("mapped back:     largest difference {diff:.1e}"),
    );
    say(
        &mut text,
        format!("not mapped back: largest difference {unmapped:.2}"),
    );
    // ANCHOR_END: ch05_node_order_same
    generated("ch05_node_order_same.txt", &text);
    assert!(diff < 1e-5, "{diff}");
    assert!(unmapped > 0.1, "{unmapped}");
}

/// Two batches of `seeds` training seeds each from Cora, epoch `epoch` (chapter 6).
fn ch06_two_batches(
    graph: &workbook::Graph,
    seeds: usize,
    epoch: u64,
    first: usize,
) -> Vec<workbook::loader::Batch> {
    use workbook::loader::{InputNodes, LoaderConfig, NeighborLoader};
    let loader = NeighborLoader::new(
        graph,
        LoaderConfig {
            input_nodes: InputNodes::Train,
            shuffle: true,
            ..LoaderConfig::new(&[10, 10], seeds)
        },
    )
    .unwrap();
    (first..first + 2)
        .map(|b| loader.batch(epoch, b).unwrap())
        .collect()
}

#[test]
fn ch06_data_parallel_step() {
    use workbook::parallel::DataParallel;
    let mut text = String::new();
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let batches = ch06_two_batches(&graph, 32, 1, 0);

    // ANCHOR: ch06_step
    let ledger = Ledger::new();
    let devices = [
        Placement::sim(1).with_ledger(&ledger), // PyTorch: device_ids=[0, 1]
        Placement::sim(2).with_ledger(&ledger),
    ];
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    // Once: a replica per device, every parameter copied
    // (phase "replicate to sim:N").
    let mut dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    // Every step: batch k to device k, a forward and backward pass per
    // replica, the gradients reduced onto sim:1, one Adam step there, the new
    // parameters broadcast to sim:2.
    ledger.set_phase("step 1");
    let on_devices = dp.scatter(&batches).unwrap(); // two batches of 32 seeds
    let step = dp.step(&on_devices).unwrap();
    let loss = step.loss().unwrap();
    ledger.set_phase("sync check");
    // every replica bit for bit equal to the first
    let sync = dp.check_in_sync().unwrap();
    // ANCHOR_END: ch06_step
    // ANCHOR: ch06_step_print
    say(&mut text, ledger.table().trim_end());
    let kind = |prefix: &str| -> u64 {
        ledger
            .in_phase("step 1")
            .iter()
            .filter(|t| t.what.starts_with(prefix))
            .map(|t| t.bytes)
            .sum()
    };
    let params: u64 = dp
        .module()
        .named_parameters()
        .iter()
        .map(|(_, t)| workbook::placement::bytes_of(t))
        .sum();
    let parts = kind("batch.") + kind("edge_index (");
    say(
        &mut text,
        format!(
            "step 1 by kind: batch parts {parts} B, reduce {} B, \
             broadcast {} B (parameters: {params} B)",
            kind("reduce "),
            kind("broadcast ")
        ),
    );
    say(
        &mut text,
        format!("loss {loss:.4}; replicas in sync: {}", sync.in_sync),
    );
    // ANCHOR_END: ch06_step_print
    assert!(sync.in_sync);
    assert_eq!(kind("reduce "), params);
    assert_eq!(kind("broadcast "), params);
    generated("ch06_step.txt", &text);
}

#[test]
fn ch06_one_device_or_two() {
    use workbook::parallel::DataParallel;
    let mut text = String::new();
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let mut config =
        ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    config.dropout = 0.0; // the same computation on both sides
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let devices = [Placement::sim(1), Placement::sim(2)];
    let mut dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    let one = model.to_device(Placement::sim(1)).unwrap();
    let mut opt = TrainConfig::gcn().optimizer(&one).unwrap();
    // ANCHOR: ch06_one_device_header
    say(
        &mut text,
        "step  two devices (sim:1,sim:2)  one device (sim:1)  difference",
    );
    // ANCHOR_END: ch06_one_device_header
    for s in 0..4 {
        let batches = ch06_two_batches(&graph, 32, 1, (2 * s) % 4);
        // ANCHOR: ch06_one_device
        // Two devices: replica k takes batch k, its loss scaled by its share
        // of the seeds.
        let two = dp
            .step(&dp.scatter(&batches).unwrap())
            .unwrap()
            .loss()
            .unwrap();
        // One device, the same two batches: the mean loss over all their seeds.
        let mut sum: Option<workbook::candle_core::Tensor> = None;
        let mut seeds = 0;
        for b in &batches {
            let b = b.to_device(Placement::sim(1)).unwrap();
            let out = one.forward(b.x(), b.edge_index(), b.edge_weight()).unwrap();
            let (bs, y) = (b.batch_size(), b.y().unwrap());
            let ce = workbook::candle_nn::loss::cross_entropy(
                &out.logits.narrow(0, 0, bs).unwrap(),
                &y.narrow(0, 0, bs).unwrap(),
            )
            .unwrap();
            let part = (ce * bs as f64).unwrap(); // the sum over this batch's seeds
            sum = Some(match sum {
                None => part,
                Some(s) => (s + part).unwrap(),
            });
            seeds += bs;
        }
        let mean = (sum.unwrap() / seeds as f64).unwrap();
        let single = mean.to_scalar::<f32>().unwrap();
        opt.backward_step(&mean).unwrap();
        // ANCHOR_END: ch06_one_device
        // ANCHOR: ch06_one_device_row
        say(
            &mut text,
            format!(
                "{:>4}  {two:>23.6}  {single:>18.6}  {:>10.1e}",
                s + 1,
                (two - single).abs()
            ),
        );
        // ANCHOR_END: ch06_one_device_row
        assert!((two - single).abs() < 1e-5);
    }
    // ANCHOR: ch06_one_device_after
    let reference: std::collections::HashMap<_, _> =
        one.named_parameters().into_iter().collect();
    let largest = dp
        .module()
        .named_parameters()
        .iter()
        .map(|(name, t)| {
            let d = (t - &reference[name]).unwrap().abs().unwrap();
            d.flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        })
        .fold(0f32, f32::max);
    say(
        &mut text,
        format!("after 4 steps the parameters differ by at most {largest:.1e}"),
    );
    // ANCHOR_END: ch06_one_device_after
    assert!(largest < 1e-4);
    generated("ch06_one_device.txt", &text);
}

#[test]
fn ch06_the_failures() {
    use workbook::parallel::DataParallel;
    let mut text = String::new();
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let batches = ch06_two_batches(&graph, 32, 1, 0);
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let devices = [Placement::sim(1), Placement::sim(2)];
    let recipe = TrainConfig::gcn();

    // ANCHOR: ch06_replica
    // PyTorch: a replica on cuda:1 still reading a weight from cuda:0.
    let (model, _) = Model::init(config.clone(), 0, &devices[0]).unwrap();
    // the second replica never moved
    let replicas = vec![model.clone(), model.clone()];
    let err = DataParallel::from_replicas(replicas, &devices, &recipe)
        .err()
        .unwrap();
    // The fix: a copy per device (DataParallel::new does exactly this).
    let replicas = vec![model.clone(), model.to_device(&devices[1]).unwrap()];
    let dp = DataParallel::from_replicas(replicas, &devices, &recipe).unwrap();
    say(&mut text, format!("1. {err}"));
    // ANCHOR_END: ch06_replica

    // ANCHOR: ch06_gather
    let on_devices = dp.scatter(&batches).unwrap();
    // output_device = sim:1
    let out = dp.forward_gather(&on_devices, &devices[0]).unwrap();
    let y: Vec<u32> = batches.iter().flat_map(seed_labels).collect();
    let y_on_sim2 =
        workbook::candle_core::Tensor::new(y.as_slice(), devices[1].device())
            .unwrap();
    let err = out.cross_entropy(&y_on_sim2, &devices[1]).err().unwrap();
    // The fix: the labels where the outputs were gathered.
    let y = devices[0]
        .move_tensor(&y_on_sim2, &devices[1], "y")
        .unwrap();
    let loss = out.cross_entropy(&y, &devices[0]).unwrap();
    say(&mut text, format!("2. {err}"));
    // ANCHOR_END: ch06_gather
    assert!(loss.to_scalar::<f32>().unwrap().is_finite());

    // ANCHOR: ch06_optimizer
    // An optimiser built (or restored) on sim:2, then pointed at the first
    // replica, on sim:1.
    let on_sim2 = model.to_device(&devices[1]).unwrap();
    let restored = recipe.optimizer(&on_sim2).unwrap();
    let stale = restored.rebind(dp.module()).unwrap(); // state stays on sim:2
    let dp = match dp.with_optimizer(stale) {
        Ok(_) => unreachable!("the stale state is refused"),
        Err(err) => {
            say(&mut text, format!("3. {err}"));
            let (model, _) =
                Model::init(config.clone(), 0, Placement::cpu()).unwrap();
            DataParallel::new(&model, &devices, &recipe).unwrap()
        }
    };
    // The fix: move the state with the parameters it updates.
    let moved = restored.to_model(dp.module()).unwrap();
    let mut dp = dp.with_optimizer(moved).unwrap();
    // ANCHOR_END: ch06_optimizer

    // ANCHOR: ch06_batch
    // Both batches sent to the first device: replica 1 (sim:2) gets a
    // batch on sim:1.
    let both_first: Vec<_> = batches
        .iter()
        .map(|b| b.to_device(&devices[0]).unwrap())
        .collect();
    let err = dp.step(&both_first).err().unwrap();
    // The fix: scatter, batch k to device k.
    dp.step(&dp.scatter(&batches).unwrap()).unwrap();
    say(&mut text, format!("4. {err}"));
    // ANCHOR_END: ch06_batch

    // ANCHOR: ch06_unwrap
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cora_gcn.safetensors");
    // checkpoint::save(&dp, &path) does not compile: DataParallel is not a Model.
    let model = dp.into_module(); // PyTorch: model = dp.module
    checkpoint::save(&model, &path).unwrap();
    let back = checkpoint::load(&path, Placement::cpu()).unwrap();
    say(
        &mut text,
        format!(
            "5. saved the unwrapped model ({} parameters), loaded back on {}",
            back.named_parameters().len(),
            back.placement()
        ),
    );
    // ANCHOR_END: ch06_unwrap
    generated("ch06_failures.txt", &text);
}

#[test]
fn ch06_module_prefix() {
    use workbook::tensor_file;
    let mut text = String::new();
    let dir = tempfile::tempdir().unwrap();
    let config = ModelConfig::gcn(1433, 16, 7);
    let (model, _) = Model::init(config.clone(), 0, Placement::cpu()).unwrap();
    // What PyTorch's torch.save(dp.state_dict(), path) writes: every name prefixed `module.`.
    let prefixed: Vec<_> = model
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (format!("module.{n}"), t))
        .collect();
    let path = dir.path().join("dp.safetensors");
    tensor_file::write(&path, &prefixed, None).unwrap();
    // ANCHOR: ch06_module_prefix
    let err =
        checkpoint::load_with_config(&path, config.clone(), Placement::sim(1))
            .unwrap_err();
    // The fix when the file cannot be saved again from dp.module: strip
    // the prefix on load.
    let model = checkpoint::load_stripping_prefix(
        &path,
        config,
        Placement::sim(1),
        "module.",
    )
    .unwrap();
    // The temporary folder changes every run: show the file name only.
    let folder = format!("{}{}", dir.path().display(), std::path::MAIN_SEPARATOR);
    say(&mut text, err.to_string().replace(&folder, ""));
    say(
        &mut text,
        format!(
            "loaded with the prefix stripped: {} parameters on {}",
            model.named_parameters().len(),
            model.placement()
        ),
    );
    // ANCHOR_END: ch06_module_prefix
    generated("ch06_module_prefix.txt", &text);
}

#[test]
fn ch06_model_parallel() {
    use workbook::parallel::model_parallel::ModelParallel;
    let mut text = String::new();
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    // ANCHOR: ch06_model_parallel
    let ledger = Ledger::new();
    let stages = [
        Placement::sim(1).with_ledger(&ledger), // conv1
        Placement::sim(2).with_ledger(&ledger), // conv2
    ];
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    ledger.set_phase("split");
    // each layer to its device
    let mp = ModelParallel::new(&model, &stages).unwrap();
    // x to sim:1, edges to both, labels to sim:2
    let placed = mp.place_graph(&graph).unwrap();
    let recipe = TrainConfig::gcn();
    // one Adam per stage, state with it
    let mut optimizers = mp.optimizers(&recipe).unwrap();
    let mut dropout = recipe.dropout(stages[0].device());
    ledger.set_phase("step 1");
    let loss = mp
        .train_step(&placed, &mut optimizers, &mut dropout)
        .unwrap();
    say(&mut text, ledger.table().trim_end());
    say(&mut text, format!("loss {loss:.4}"));
    // ANCHOR_END: ch06_model_parallel
    // ANCHOR: ch06_model_parallel_export
    // The split model as it is: its own forward pass meets conv2 on sim:2.
    let on_sim1 = graph.to_device(&stages[0]).unwrap();
    let err = mp.model().forward_graph(&on_sim1).unwrap_err();
    // Gathered on one device, it is an ordinary model again (for export or
    // serving on one device).
    let whole = mp.into_model(Placement::cpu()).unwrap();
    say(&mut text, err);
    say(
        &mut text,
        format!(
            "gathered on {}: split = {}",
            whole.placement(),
            whole.is_split()
        ),
    );
    // ANCHOR_END: ch06_model_parallel_export
    generated("ch06_model_parallel.txt", &text);
}

/// The seeds' labels of `batch`, on the host.
fn seed_labels(batch: &workbook::loader::Batch) -> Vec<u32> {
    batch
        .y()
        .unwrap()
        .narrow(0, 0, batch.batch_size())
        .unwrap()
        .to_vec1::<u32>()
        .unwrap()
}

#[test]
fn ch06_sync_check() {
    use workbook::parallel::DataParallel;
    let mut text = String::new();
    let (model, _) =
        Model::init(ModelConfig::gcn(1433, 16, 7), 0, Placement::cpu()).unwrap();
    let devices = [Placement::sim(1), Placement::sim(2)];
    // ANCHOR: ch06_sync
    let dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    say(&mut text, format!("{:?}", dp.check_in_sync().unwrap()));
    // A replica that drifted: one weight of the copy on sim:2 nudged by 1e-3.
    let (_, w) = dp.replicas()[1].vars().unwrap().remove(0);
    w.set(&(w.as_tensor() + 1e-3).unwrap()).unwrap();
    let report = dp.check_in_sync().unwrap();
    say(&mut text, format!("{report:?}"));
    // ANCHOR_END: ch06_sync
    assert!(!report.in_sync);
    generated("ch06_sync.txt", &text);
}

#[test]
fn ch06_train_on_two_devices() {
    use workbook::parallel::{train_data_parallel, DataParallelEpoch};
    use workbook::train::minibatch::{Eval, MiniBatchConfig};
    let mut text = String::new();
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    // ANCHOR: ch06_train
    let ledger = Ledger::new();
    let devices = [
        Placement::sim(1).with_ledger(&ledger),
        Placement::sim(2).with_ledger(&ledger),
    ];
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let recipe = TrainConfig {
        epochs: 30,
        ..TrainConfig::gcn()
    };
    let settings = MiniBatchConfig {
        eval: Eval::FullGraph,
        // the global batch: 64 seeds per device
        ..MiniBatchConfig::new(&[10, 10], 128)
    };
    let mut every_10th = Vec::new();
    let on_epoch = |e: &DataParallelEpoch| {
        if e.stats.epoch.is_multiple_of(10) {
            let (s, sync) = (&e.stats, e.replicas_in_sync);
            every_10th.push(format!(
                "epoch {}: {} steps, {} batches, loss {:.4}, \
                 test accuracy {:.3}, replicas in sync: {sync}",
                s.epoch, e.steps, e.batches, s.loss, s.test_accuracy
            ));
        }
    };
    let trainer =
        train_data_parallel(config, &graph, &recipe, settings, &devices, on_epoch)
            .unwrap();
    // unwrapped: save, export or serve this
    let model = trainer.into_module();
    // ANCHOR_END: ch06_train
    // ANCHOR: ch06_train_print
    for line in &every_10th {
        say(&mut text, line);
    }
    for t in ledger.totals().iter().filter(|t| {
        t.phase.starts_with("replicate")
            || t.phase == "init"
            || t.phase == "epoch 30"
            || t.phase == "sync 30"
            || t.phase == "eval 30"
    }) {
        say(
            &mut text,
            format!(
                "{:<20} {:>3} transfer(s) {:>10} bytes",
                t.phase, t.transfers, t.bytes
            ),
        );
    }
    // ANCHOR_END: ch06_train_print
    let _ = model;
    generated("ch06_train_ledger.txt", &text);
}

/// The largest difference between two models' parameters, by name.
fn ch06_largest_difference(a: &Model, b: &Model) -> f32 {
    let theirs: std::collections::HashMap<_, _> =
        b.named_parameters().into_iter().collect();
    a.named_parameters()
        .iter()
        .map(|(name, t)| {
            (t - &theirs[name])
                .unwrap()
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        })
        .fold(0f32, f32::max)
}

#[test]
fn ch06_ddp_is_data_parallel_one_process_per_device() {
    use std::sync::Arc;
    use workbook::loader::{InputNodes, LoaderConfig, NeighborLoader};
    use workbook::parallel::{
        DataParallel, DistributedDataParallel, ThreadGroup, World,
    };
    let mut text = String::new();
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let loader = NeighborLoader::new(
        &graph,
        LoaderConfig {
            input_nodes: InputNodes::Train,
            shuffle: true,
            ..LoaderConfig::new(&[10, 10], 32)
        },
    )
    .unwrap();
    // An uneven step: a full batch of 32 seeds and the epoch's last, of 12.
    let batches = [loader.batch(1, 0).unwrap(), loader.batch(1, 4).unwrap()];
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let recipe = TrainConfig::gcn();
    // ANCHOR: ch06_ddp_vs_dp
    // DataParallel: one process, a replica per device, batch k on replica k.
    let devices = [Placement::sim(1), Placement::sim(2)];
    let mut dp = DataParallel::new(&model, &devices, &recipe).unwrap();
    dp.step(&dp.scatter(&batches).unwrap()).unwrap();
    // DDP: one process per device (threads here, mpirun for real), each
    // with its own replica, optimiser and batch.
    let ranks = ThreadGroup::run(2, |group| {
        let world = Arc::new(World::new(Arc::new(group)));
        // PyTorch: cuda:{rank}
        let at = Placement::sim(world.rank() + 1);
        // rank 0's parameters broadcast to every rank
        let mut ddp =
            DistributedDataParallel::new(&model, world.clone(), &at, &recipe)?;
        let batch = batches[world.rank()].to_device(&at)?;
        // backward, one all-reduce of every gradient, one Adam step per rank
        let step = ddp.step(Some(&batch))?;
        Ok((step, ddp.into_module()))
    });
    // ANCHOR_END: ch06_ddp_vs_dp
    // ANCHOR: ch06_ddp_vs_dp_print
    let ranks: Vec<_> = ranks.into_iter().map(Result::unwrap).collect();
    for (r, (step, _)) in ranks.iter().enumerate() {
        say(
            &mut text,
            format!(
                "rank {r}: {} of the step's {} seeds, mean loss over all {:.6}",
                step.local_seeds, step.seeds, step.loss
            ),
        );
    }
    let (m0, m1) = (&ranks[0].1, &ranks[1].1);
    let bitwise = m0.named_parameters().iter().zip(m1.named_parameters()).all(
        |((_, a), (_, b))| {
            a.flatten_all().unwrap().to_vec1::<f32>().unwrap()
                == b.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        },
    );
    say(
        &mut text,
        format!("rank 0 and rank 1 equal bit for bit: {bitwise}"),
    );
    let largest = ch06_largest_difference(m0, dp.module());
    say(
        &mut text,
        format!("largest difference from DataParallel's step: {largest:.1e}"),
    );
    // ANCHOR_END: ch06_ddp_vs_dp_print
    assert!(bitwise);
    assert!(largest <= 1e-5);
    assert_eq!(ranks[1].0.local_seeds, 12);
    generated("ch06_ddp_vs_dp.txt", &text);
}

#[test]
fn ch06_ddp_training() {
    use std::sync::Arc;
    use workbook::parallel::{DistributedTrainer, ThreadGroup, World};
    use workbook::train::minibatch::{Eval, MiniBatchConfig};
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cora_gcn.safetensors");
    // ANCHOR: ch06_ddp_train
    let recipe = TrainConfig {
        epochs: 10,
        ..TrainConfig::gcn()
    };
    let per_rank = MiniBatchConfig {
        eval: Eval::FullGraph,
        // per rank and step (PyTorch: each process's DataLoader(batch_size=64))
        ..MiniBatchConfig::new(&[10, 10], 64)
    };
    let ranks = ThreadGroup::run(2, |group| {
        let world = Arc::new(World::new(Arc::new(group)));
        let at = Placement::sim(world.rank() + 1);
        let mut t = DistributedTrainer::new(
            config.clone(),
            &graph,
            &recipe,
            per_rank.clone(),
            world.clone(),
            &at,
        )?;
        let mut report = Vec::new();
        for _ in 0..recipe.epochs {
            // this epoch's shard (set_epoch), the steps, the sync check
            let e = t.epoch()?;
            report.push(format!(
                "rank {} epoch {:>2}: {} seeds in {} steps, loss {:.4}, in sync {}",
                world.rank(),
                e.epoch,
                e.seeds,
                e.steps,
                e.loss,
                e.in_sync
            ));
            if let Some(s) = &e.stats {
                // only rank 0 evaluates and reports
                report.push(format!("  test accuracy {:.3}", s.test_accuracy));
            }
        }
        if world.is_main() {
            // only rank 0 writes, the model and not the wrapper
            checkpoint::save(t.ddp().module(), &path)?;
        }
        Ok(report)
    });
    // ANCHOR_END: ch06_ddp_train
    // ANCHOR: ch06_ddp_train_print
    let mut text = String::new();
    let ranks: Vec<Vec<String>> = ranks.into_iter().map(Result::unwrap).collect();
    for epoch in [0, 1, 9] {
        for lines in &ranks {
            let first = lines
                .iter()
                .filter(|l| l.starts_with("rank"))
                .nth(epoch)
                .unwrap();
            say(&mut text, first);
            let at = lines.iter().position(|l| l == first).unwrap();
            if let Some(next) = lines.get(at + 1).filter(|l| l.starts_with("  ")) {
                say(&mut text, next);
            }
        }
    }
    let back = checkpoint::load(&path, Placement::cpu()).unwrap();
    let names: Vec<String> = back
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(names.iter().all(|n| !n.starts_with("module.")));
    say(
        &mut text,
        format!(
            "rank 0's checkpoint, loaded in one process: {} parameters ({}, ...)",
            names.len(),
            names[0]
        ),
    );
    // ANCHOR_END: ch06_ddp_train_print
    generated("ch06_ddp_train.txt", &text);
}

#[test]
fn ch06_ddp_failures() {
    use std::sync::Arc;
    use std::time::Duration;
    use workbook::loader::{InputNodes, LoaderConfig, NeighborLoader};
    use workbook::parallel::{
        DistributedDataParallel, DistributedSampler, ThreadGroup, World,
    };
    let mut text = String::new();
    let graph = datasets::load("cora", None, Placement::cpu()).unwrap();
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let loader = NeighborLoader::new(
        &graph,
        LoaderConfig {
            input_nodes: InputNodes::Train,
            ..LoaderConfig::new(&[10, 10], 16)
        },
    )
    .unwrap();

    // ANCHOR: ch06_ddp_sampler
    // Cora's 140 training nodes
    let seeds = loader.seeds();
    // The mistake: no sampler, every rank iterates every seed.
    let whole: Vec<Vec<u32>> = (0..2).map(|_| seeds.to_vec()).collect();
    // The fix: a DistributedSampler per rank, the same seed on every rank.
    let shard = |rank, epoch| {
        let sampler = DistributedSampler::new(2, rank, 0).unwrap();
        sampler.shard(seeds, epoch) // PyTorch: set_epoch(epoch), then iterate
    };
    let sharded: Vec<Vec<u32>> = (0..2).map(|r| shard(r, 1)).collect();
    // The mistake: the epoch never passed (set_epoch forgotten).
    let (first, again) = (shard(0, 0), shard(0, 0));
    // The mistake: each rank seeds its sampler with its rank.
    let own_seed: Vec<Vec<u32>> = (0..2)
        .map(|r| DistributedSampler::new(2, r, r as u64).unwrap())
        .map(|sampler| sampler.shard(seeds, 1))
        .collect();
    let coverage = |shards: &[Vec<u32>]| {
        let all: Vec<u32> = shards.concat();
        let mut distinct = all.clone();
        distinct.sort_unstable();
        distinct.dedup();
        format!(
            "{} seeds per epoch, {} distinct of {}",
            all.len(),
            distinct.len(),
            seeds.len()
        )
    };
    say(
        &mut text,
        format!("no sampler:         {}", coverage(&whole)),
    );
    say(
        &mut text,
        format!("DistributedSampler: {}", coverage(&sharded)),
    );
    say(
        &mut text,
        format!("rank-seeded:        {}", coverage(&own_seed)),
    );
    let next = shard(0, 2);
    say(
        &mut text,
        format!(
            "rank 0's shard, epoch 0 twice: the same order {}; \
             epochs 1 and 2: the same order {}",
            first == again,
            sharded[0] == next
        ),
    );
    // ANCHOR_END: ch06_ddp_sampler

    type Body<'a> = &'a (dyn Fn(&mut DistributedDataParallel) -> workbook::Result<String>
             + Sync);
    let ranks = |timeout: Duration, body: Body| {
        ThreadGroup::run(2, |group| {
            let world = World::new(Arc::new(group)).with_timeout(timeout);
            let at = Placement::sim(world.rank() + 1);
            let (model, _) = Model::init(config.clone(), 0, Placement::cpu())?;
            let recipe = TrainConfig::gcn();
            let mut ddp = DistributedDataParallel::new(
                &model,
                Arc::new(world),
                &at,
                &recipe,
            )?;
            body(&mut ddp)
        })
    };
    let batch = |ddp: &DistributedDataParallel, b: usize| {
        loader
            .batch(0, 2 * b + ddp.world().rank())?
            .to_device(ddp.placement())
    };
    // ANCHOR: ch06_ddp_drift
    let out = ranks(Duration::from_secs(60), &|ddp| {
        if ddp.world().rank() == 1 {
            // an update on one rank only: a weight nudged by 1e-3
            let (_, w) = ddp.module().vars()?.remove(0);
            w.set(&(w.as_tensor() + 1e-3)?)?;
        }
        // every rank against rank 0, the same verdict on every rank
        let report = ddp.check_in_sync()?;
        Ok(format!("{report:?}"))
    });
    say(
        &mut text,
        format!("drift, rank 0: {}", out[0].as_ref().unwrap()),
    );
    say(
        &mut text,
        format!("drift, rank 1: {}", out[1].as_ref().unwrap()),
    );
    // ANCHOR_END: ch06_ddp_drift

    // ANCHOR: ch06_ddp_skip
    // Rank 1 has nothing to do in step 2 and skips it.
    let out = ranks(Duration::from_secs(60), &|ddp| {
        for b in 0..3 {
            if ddp.world().rank() == 1 && b == 1 {
                continue; // the fix: ddp.step(None) joins with zeros
            }
            let batch = batch(ddp, b)?;
            ddp.step(Some(&batch))?;
        }
        ddp.world().barrier("end of epoch")?;
        Ok(String::new())
    });
    let skip = out[0].as_ref().unwrap_err().to_string();
    say(&mut text, format!("skip: {skip}"));
    // ANCHOR_END: ch06_ddp_skip
    assert!(skip.contains("different collective calls"), "{skip}");

    // ANCHOR: ch06_ddp_stop
    // Rank 1 stops after one step (its shard ran out, it crashed, ...).
    let out = ranks(Duration::from_millis(500), &|ddp| {
        let steps = if ddp.world().rank() == 1 { 1 } else { 3 };
        for b in 0..steps {
            let batch = batch(ddp, b)?;
            ddp.step(Some(&batch))?;
        }
        Ok(String::new())
    });
    let stop = out[0].as_ref().unwrap_err().to_string();
    say(&mut text, format!("stop: {stop}"));
    // ANCHOR_END: ch06_ddp_stop
    assert!(stop.contains("timed out") && out[1].is_ok(), "{stop}");

    // ANCHOR: ch06_ddp_arguments
    // Rank 1 started with --hidden 32, rank 0 with the default 16.
    let out = ThreadGroup::run(2, |group| {
        let world = Arc::new(World::new(Arc::new(group)));
        let hidden = if world.rank() == 0 { 16 } else { 32 };
        let theirs = ModelConfig::gcn(1433, hidden, 7);
        let (model, _) = Model::init(theirs, 0, Placement::cpu())?;
        let at = Placement::sim(world.rank() + 1);
        DistributedDataParallel::new(&model, world, &at, &TrainConfig::gcn())
            .map(|_| ())
    });
    say(
        &mut text,
        format!("arguments: {}", out[1].as_ref().unwrap_err()),
    );
    // ANCHOR_END: ch06_ddp_arguments
    generated("ch06_ddp_failures.txt", &text);
}

#[test]
fn ch07_capstone_cora_end_to_end() {
    use std::sync::Arc;
    use workbook::export::{onnx, preflight};
    use workbook::train::train;
    use workbook_lessons::threads::serving;
    let dir = tempfile::tempdir().unwrap();
    let checkpoint_path = dir.path().join("cora_gatv2.safetensors");
    let onnx_path = dir.path().join("cora_gatv2.onnx");
    let mut text = String::new();

    // ANCHOR: ch07_train
    let ledger = Ledger::new();
    // chapter 1: one policy
    let chosen = device::choose(Some("sim:1".parse().unwrap())).unwrap();
    let gpu = chosen.placement.with_ledger(&ledger);
    ledger.set_phase("load");
    let cora = datasets::load("cora", None, &gpu).unwrap(); // chapter 2: moved once
    let config = ModelConfig::gatv2(cora.num_features(), 8, 8, cora.num_classes());
    let recipe = TrainConfig {
        // the book's short run; the full recipe is TrainConfig::gatv2():
        epochs: 20,
        lr: 0.02, // 200 epochs at lr 0.005
        ..TrainConfig::gatv2()
    };
    let report = train(config, &cora, &recipe, |s| {
        if s.epoch % 10 == 0 {
            println!(
                "epoch {:>3}: loss {:.2}, val {:.1}%",
                s.epoch,
                s.loss,
                100.0 * s.val_accuracy
            );
        }
    })
    .unwrap();
    print!("{}", ledger.table()); // chapter 2: what crossed the bus, and when
    let model = report.model;
    // ANCHOR_END: ch07_train
    // ANCHOR: ch07_train_print
    for s in report.history.iter().filter(|s| s.epoch % 10 == 0) {
        say(
            &mut text,
            format!(
                "epoch {:>3}: loss {:.2}, val {:.1}%",
                s.epoch,
                s.loss,
                100.0 * s.val_accuracy
            ),
        );
    }
    let last = &report.history[report.history.len() - 1];
    say(
        &mut text,
        format!(
            "after {} epochs on {}: test accuracy {:.1}%",
            last.epoch,
            model.placement(),
            100.0 * last.test_accuracy
        ),
    );
    say(&mut text, String::new());
    say(&mut text, ledger.table().trim_end().to_string());
    // ANCHOR_END: ch07_train_print
    assert!(
        last.test_accuracy > 0.6,
        "GATv2 should learn Cora in {} epochs",
        recipe.epochs
    );
    // The graph crossed once, before training; after the first epoch (which builds the
    // self-looped and CSR edge indices on the device), only the metrics come back.
    let transfers = ledger.transfers();
    assert_eq!(transfers.iter().filter(|t| t.what == "Cora.x").count(), 1);
    for t in transfers
        .iter()
        .filter(|t| t.phase.starts_with("epoch ") && t.phase != "epoch 1")
    {
        assert!(t.what.starts_with("metrics"), "unexpected transfer {t:?}");
    }
    generated("ch07_train.txt", &text);
    text.clear();

    // ANCHOR: ch07_export
    // chapter 4: pre-flight first, then write; the example graph is on the
    // model's device
    let checks =
        preflight::check(&model, &preflight::Example::from_graph(&cora)).unwrap();
    // chapter 2: portable, from any device
    checkpoint::save(&model, &checkpoint_path).unwrap();
    onnx::write(&model, &onnx_path, &onnx::OnnxOptions::default()).unwrap();
    // ANCHOR_END: ch07_export
    // ANCHOR: ch07_export_print
    for line in &checks.checks {
        say(&mut text, format!("pre-flight ok: {line}"));
    }
    let onnx_file = onnx::read(&onnx_path).unwrap();
    let graph = onnx_file.graph.as_ref().unwrap();
    let inputs: Vec<String> = graph.input.iter().map(onnx_value).collect();
    let outputs: Vec<String> = graph.output.iter().map(onnx_value).collect();
    say(
        &mut text,
        format!(
            "cora_gatv2.onnx: opset {}, inputs {}; output {}",
            onnx_file.opset_import[0].version,
            inputs.join(", "),
            outputs.join(", ")
        ),
    );
    say(
        &mut text,
        format!(
            "cora_gatv2.safetensors: {} tensors under PyG names ({})",
            model.named_parameters().len(),
            model
                .named_parameters()
                .iter()
                .map(|(n, _)| n.as_str())
                .take(3)
                .collect::<Vec<_>>()
                .join(", ")
                + ", ..."
        ),
    );
    // ANCHOR_END: ch07_export_print
    generated("ch07_export.txt", &text);

    // The failure: serving the model where it was trained, with requests built on the host.
    let host_cora = datasets::load("cora", None, Placement::cpu()).unwrap();
    let request = serving::Request::whole(&host_cora);
    // ANCHOR: ch07_mismatch
    // the trained model is on sim:1, the request was built on the cpu
    let err = serving::answer(&model, &request).unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch07_mismatch
    generated("ch07_mismatch.txt", &format!("{err}\n"));
    let mut text = String::new();

    // ANCHOR: ch07_serve
    // the serving machine: reload onto its device (map_location), share through Arc
    let served =
        Arc::new(checkpoint::load(&checkpoint_path, Placement::cpu()).unwrap());
    let requests: Arc<[serving::Request]> =
        serving::mixed_requests(&host_cora, 24, 0).unwrap().into();
    let run = serving::check(served.clone(), requests.clone(), 4).unwrap();
    // every concurrent answer equals the sequential one
    assert_eq!(run.mismatches, 0);

    // the reloaded model answers exactly as the trained one did: logits
    // and attention
    let on_gpu = serving::answer(&model, &serving::Request::whole(&cora)).unwrap();
    let on_cpu = serving::answer(&served, &request).unwrap();
    let same = on_cpu.same_as(&on_gpu).unwrap();
    assert!(same);
    // ANCHOR_END: ch07_serve
    // ANCHOR: ch07_serve_print
    text.push_str(&format!(
        "reloaded onto {}: logits and attention equal the trained model's \
         on {}: {same}\n",
        served.placement(),
        model.placement()
    ));
    text.push_str(&format!(
        "served {} requests ({}) with {} threads sharing one Arc<Model>: \
         {} mismatch(es) against sequential answers\n",
        run.requests,
        requests
            .iter()
            .take(2)
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join("; ")
            + "; ...",
        run.threads,
        run.mismatches
    ));
    print!("{text}");
    // ANCHOR_END: ch07_serve_print
    generated("ch07_serve.txt", &text);
}

/// Every `{{#include ...}}` in the book names a file that exists and, when it names an anchor or
/// lines, a non-empty anchor or lines the file has. (mdbook only logs a missing file, and
/// silently includes nothing for a missing anchor.)
#[test]
fn every_include_in_the_book_resolves() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../book/src");
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    let (mut problems, mut includes) = (Vec::new(), 0);
    for chapter in &chapters {
        let name = chapter.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(chapter).unwrap();
        for (line_no, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("{{#include ") {
                let after = &rest[at + "{{#include ".len()..];
                let Some(end) = after.find("}}") else {
                    problems.push(format!(
                        "{name}:{}: unclosed {{{{#include",
                        line_no + 1
                    ));
                    break;
                };
                let spec = after[..end].trim();
                rest = &after[end + 2..];
                includes += 1;
                let at = format!("{name}:{}: {{{{#include {spec}}}}}", line_no + 1);
                let (path, selector) = match spec.split_once(':') {
                    Some((p, s)) => (p, Some(s)),
                    None => (spec, None),
                };
                let Ok(body) = std::fs::read_to_string(src.join(path)) else {
                    problems.push(format!("{at}: no such file"));
                    continue;
                };
                let lines: Vec<&str> = body.lines().collect();
                match selector {
                    None if body.trim().is_empty() => {
                        problems.push(format!("{at}: empty file"))
                    }
                    // A whole source file shown as a listing (outputs wrap instead).
                    None if path.ends_with(".rs") || path.ends_with(".py") => {
                        too_wide(&at, &lines, &mut problems)
                    }
                    None => {}
                    Some(range)
                        if range
                            .chars()
                            .all(|c| c.is_ascii_digit() || c == ':') =>
                    {
                        for n in range.split(':').filter(|n| !n.is_empty()) {
                            let n: usize = n.parse().unwrap();
                            if n == 0 || n > lines.len() {
                                problems.push(format!(
                                    "{at}: line {n}, but the file has {} line(s)",
                                    lines.len()
                                ));
                            }
                        }
                    }
                    Some(anchor) => {
                        let begin = format!("ANCHOR: {anchor}");
                        let finish = format!("ANCHOR_END: {anchor}");
                        let start = lines
                            .iter()
                            .position(|l| l.trim_end().ends_with(&begin));
                        let stop = lines
                            .iter()
                            .position(|l| l.trim_end().ends_with(&finish));
                        match (start, stop) {
                            (Some(s), Some(e)) if e > s => {
                                if lines[s + 1..e]
                                    .iter()
                                    .all(|l| l.trim().is_empty())
                                {
                                    problems
                                        .push(format!("{at}: the anchor is empty"));
                                }
                                // mdbook drops the lines of other anchors' markers;
                                // book/dedent.py removes the common indentation.
                                let listing: Vec<&str> = lines[s + 1..e]
                                    .iter()
                                    .copied()
                                    .filter(|l| !l.contains("ANCHOR"))
                                    .collect();
                                too_wide(&at, &listing, &mut problems);
                            }
                            _ => problems.push(format!(
                                "{at}: no '{begin}' ... '{finish}' in {path}"
                            )),
                        }
                    }
                }
            }
        }
    }
    assert!(includes > 0, "no includes found in {}", src.display());
    assert!(
        problems.is_empty(),
        "{} broken include(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The widest a listing's line may be once dedented: the book's code column shows about 80
/// characters before it scrolls, and a comment that maps a line to PyTorch must not hide there.
const LISTING_WIDTH: usize = 80;

/// Adds a problem for every line of `listing` wider than [`LISTING_WIDTH`] once the listing's
/// common indentation is removed (as book/dedent.py does).
fn too_wide(at: &str, listing: &[&str], problems: &mut Vec<String>) {
    let indent = listing
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    for line in listing {
        let width = line.chars().count().saturating_sub(indent);
        if width > LISTING_WIDTH {
            problems.push(format!(
                "{at}: a line of {width} columns (at most {LISTING_WIDTH}; put a trailing \
                 comment on its own line): {}",
                line.trim()
            ));
        }
    }
}

// ANCHOR: ch02_own_layer
use workbook::candle_core::{DType, Device, Tensor};
use workbook::candle_nn::{Linear, Module as _};
use workbook::layers::{GraphLayer, LayerInput, LayerOutput};
use workbook::{module, train::Dropout, EdgeIndex, Module};

/// `Σ_j x_j` into every node, the PyTorch way a first draft is often
/// written: `torch.zeros(n, f)` makes the buffer on the default device,
/// whatever `x`'s is.
fn neighbour_sum_fixed_device(
    x: &Tensor,
    edges: &EdgeIndex,
) -> workbook::Result<Tensor> {
    let (n, f) = x.dims2()?;
    let out = Tensor::zeros((n, f), DType::F32, &Device::Cpu)?; // the bug
    let messages = x.index_select(edges.sources(), 0)?;
    Ok(out.index_add(edges.targets(), &messages, 0)?)
}

/// The fix: make the intermediate from the input, so it lives (and has the
/// dtype) where `x` does.
fn neighbour_sum(x: &Tensor, edges: &EdgeIndex) -> workbook::Result<Tensor> {
    // PyTorch: torch.zeros_like(x) or x.new_zeros(n, f)
    let out = x.zeros_like()?;
    let messages = x.index_select(edges.sources(), 0)?;
    Ok(out.index_add(edges.targets(), &messages, 0)?)
}

#[derive(Clone, Debug, Module)]
struct SumConv {
    lin: Linear,
    #[module(placement)]
    at: Placement,
    #[module(skip)]
    sum: fn(&Tensor, &EdgeIndex) -> workbook::Result<Tensor>,
}

impl GraphLayer for SumConv {
    fn layer_type(&self) -> &'static str {
        "SumConv"
    }
    fn forward_layer(
        &self,
        i: &LayerInput<'_>,
        _: Option<&mut Dropout>,
    ) -> workbook::Result<LayerOutput> {
        let h = ((self.sum)(i.x, i.edge_index)? + i.x)?;
        Ok(LayerOutput::new(self.lin.forward(&h)?))
    }
}
// ANCHOR_END: ch02_own_layer

// ANCHOR: ch02_own_loss
/// Class-weighted cross-entropy (PyTorch: `F.cross_entropy(logits, y,
/// weight=w)`), the class weights a buffer, so they move with `to_device`
/// and are checked before every call.
#[derive(Clone, Debug, Module)]
struct WeightedCrossEntropy {
    #[module(buffer)]
    class_weight: Tensor,
    #[module(placement)]
    at: Placement,
    #[module(skip)]
    fixed_device_weights: bool,
}

impl WeightedCrossEntropy {
    fn forward(&self, logits: &Tensor, y: &Tensor) -> workbook::Result<Tensor> {
        module::checked(self, "WeightedCrossEntropy", &[logits, y], |m, t| {
            m.loss(&t[0], &t[1])
        })
    }

    fn loss(&self, logits: &Tensor, y: &Tensor) -> workbook::Result<Tensor> {
        let weights = if self.fixed_device_weights {
            // the bug: `torch.tensor([1.0, 3.0, 1.0, 1.0])` made inside forward
            Tensor::new(&[1f32, 3., 1., 1.], &Device::Cpu)?
        } else {
            self.class_weight.clone() // the buffer, where the model is
        };
        let log_p = workbook::candle_nn::ops::log_softmax(logits, 1)?;
        let picked = log_p.gather(&y.unsqueeze(1)?, 1)?.squeeze(1)?;
        let w = weights.index_select(y, 0)?;
        Ok((picked * &w)?.sum_all()?.neg()?.div(&w.sum_all()?)?)
    }
}
// ANCHOR_END: ch02_own_loss

#[test]
fn ch02_intermediates_on_the_wrong_device() {
    let gpu = lesson_device();
    let cpu = Placement::cpu();
    let graph = datasets::karate(&gpu).unwrap();
    let weight = Tensor::ones((4, 34), DType::F32, cpu.device()).unwrap();
    let make = |sum| SumConv {
        lin: Linear::new(weight.clone(), None),
        at: cpu.clone(),
        sum,
    };
    // ANCHOR: ch02_intermediate_caught
    let input = LayerInput {
        x: graph.x(),
        edge_index: graph.edge_index(),
        edge_weight: None,
    };
    let draft = make(neighbour_sum_fixed_device).to_device(&gpu).unwrap();
    // on sim:1 too, not only on a GPU
    let err = draft.apply(&input, None).unwrap_err();
    println!("{err}");
    let fixed = make(neighbour_sum).to_device(&gpu).unwrap();
    let out = fixed.apply(&input, None).unwrap();
    // ANCHOR_END: ch02_intermediate_caught
    assert_eq!(out.out.dims(), &[34, 4]);
    let mut text = format!("{err}\n");

    let y = graph.y().unwrap();
    let class_weight = Tensor::new(&[1f32, 3., 1., 1.], cpu.device()).unwrap();
    // ANCHOR: ch02_loss_caught
    let loss = WeightedCrossEntropy {
        class_weight,
        at: cpu.clone(),
        fixed_device_weights: false,
    };
    let loss = loss.to_device(&gpu).unwrap(); // moves the buffer with it
    println!("{}", inspect::table(&loss.inspect_rows("")));
    let value = loss.forward(&out.out, y).unwrap();
    let draft = WeightedCrossEntropy {
        fixed_device_weights: true,
        ..loss.clone()
    };
    // weights made inside forward
    let err = draft.forward(&out.out, y).unwrap_err();
    println!("{err}");
    // ANCHOR_END: ch02_loss_caught
    assert!(value.to_scalar::<f32>().unwrap().is_finite());
    text += &format!("\n{}\n{err}\n", inspect::table(&loss.inspect_rows("")));
    generated("ch02_intermediates.txt", &text);
    assert!(text.contains("SumConv made a tensor inside forward"));
    assert!(text.contains("class_weight  buffer"));
    assert!(text.contains("WeightedCrossEntropy made a tensor inside forward"));
}
