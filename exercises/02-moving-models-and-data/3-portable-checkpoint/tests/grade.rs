//! Graded tests for exercise 02-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::portable_checkpoint::{load, save, save_with, CONFIG_KEY, SAVED_FROM_KEY};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use workbook::candle_core::{Device, Tensor};
use workbook::device::accelerator;
use workbook::ledger::Ledger;
use workbook::train::{train, TrainConfig};
use workbook::{checkpoint, datasets, tensor_file, Model, ModelConfig, Placement};

/// A GCN trained for 20 epochs on karate, on `at`.
fn trained_on(at: &Placement) -> Model {
    let graph = datasets::karate(at).unwrap();
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let recipe = TrainConfig {
        epochs: 20,
        ..TrainConfig::gcn()
    };
    train(config, &graph, &recipe, |_| {}).unwrap().model
}

fn fresh(seed: u64) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), seed, Placement::cpu())
        .unwrap()
        .0
}

/// A tensor's shape and exact `f32` values (as bits).
type Bits = (Vec<usize>, Vec<u32>);

/// Shape and exact `f32` bits, read on the host.
fn bits(t: &Tensor) -> Bits {
    let values = t
        .to_device(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    (
        t.dims().to_vec(),
        values.iter().map(|v| v.to_bits()).collect(),
    )
}

fn parameters(model: &Model) -> Vec<(String, Bits)> {
    let mut all: Vec<_> = model
        .named_parameters()
        .into_iter()
        .map(|(name, t)| (name, bits(&t)))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// The model's logits on karate, computed on `at`.
fn logits_on(model: &Model, at: &Placement) -> Bits {
    let graph = datasets::karate(at).unwrap();
    bits(&model.forward_graph(&graph).unwrap().logits)
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn check_placed(model: &Model, at: &Placement) {
    assert_eq!(
        model.placement(),
        at,
        "the loaded model must be on the device asked for"
    );
    for (name, placement) in model.parameter_placements() {
        assert_eq!(
            placement, at,
            "'{name}' was loaded onto {placement}, not {at}"
        );
    }
}

#[test]
fn round_trip_from_the_accelerator_to_the_cpu() {
    let ledger = Ledger::new();
    let gpu = accelerator().placement.with_ledger(&ledger);
    let model = trained_on(&gpu);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    ledger.clear();
    save(&model, &path).unwrap_or_else(|e| panic!("saving from {gpu} failed: {e}"));
    for (name, _) in model.named_parameters() {
        assert!(
            ledger
                .transfers()
                .iter()
                .any(|t| t.what.contains(&name) && t.to == "cpu"),
            "saving from {gpu} must copy '{name}' to the host explicitly (Placement::cpu().move_tensor), so the ledger shows it:\n{}",
            ledger.table()
        );
    }
    let loaded = load(&path, &Placement::cpu())
        .unwrap_or_else(|e| panic!("loading a checkpoint saved from {gpu} onto cpu failed: {e}"));
    assert_eq!(
        loaded.saved_from,
        gpu.to_string(),
        "the checkpoint should record the device it was saved from ('{SAVED_FROM_KEY}')"
    );
    check_placed(&loaded.model, &Placement::cpu());
    assert!(
        parameters(&loaded.model) == parameters(&model),
        "the loaded parameters differ from the saved ones"
    );
    let cpu = Placement::cpu();
    assert!(
        logits_on(&loaded.model, &cpu) == logits_on(&model.to_device(&cpu).unwrap(), &cpu),
        "the loaded model's logits differ from the trained model's"
    );
    // PyG names and the config in the metadata: the library's own loader reads the file too.
    let by_library = checkpoint::load(&path, Placement::cpu()).unwrap_or_else(|e| {
        panic!("workbook::checkpoint::load cannot read the file (PyG names, config under '{CONFIG_KEY}'): {e}")
    });
    assert!(
        parameters(&by_library) == parameters(&model),
        "workbook::checkpoint::load reads different parameters from the file"
    );
}

#[test]
fn round_trip_from_the_cpu_to_the_accelerator() {
    let cpu = Placement::cpu();
    let model = trained_on(&cpu);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    save(&model, &path).unwrap_or_else(|e| panic!("saving from cpu failed: {e}"));
    let ledger = Ledger::new();
    let gpu = accelerator().placement.with_ledger(&ledger);
    let loaded = load(&path, &gpu)
        .unwrap_or_else(|e| panic!("loading a checkpoint saved on cpu onto {gpu} failed: {e}"));
    // The file is read on the host; each tensor then crosses to map_location once, explicitly
    // (map_location.move_tensor), so that the ledger shows every copy.
    for (name, _) in model.named_parameters() {
        let copies = ledger
            .transfers()
            .iter()
            .filter(|t| t.what.contains(&name) && t.from == "cpu" && t.to == gpu.to_string())
            .count();
        assert_eq!(
            copies,
            1,
            "loading onto {gpu} must copy '{name}' from the host to {gpu} once, explicitly (map_location.move_tensor), so the ledger shows it; it shows {copies} such copies:\n{}",
            ledger.table()
        );
    }
    assert_eq!(
        loaded.saved_from, "cpu",
        "the checkpoint should record the device it was saved from ('{SAVED_FROM_KEY}')"
    );
    check_placed(&loaded.model, &gpu);
    assert!(
        parameters(&loaded.model) == parameters(&model),
        "the loaded parameters differ from the saved ones"
    );
    assert!(
        logits_on(&loaded.model, &gpu) == logits_on(&model.to_device(&gpu).unwrap(), &gpu),
        "on {gpu}, the loaded model's logits differ from the trained model's"
    );
}

#[test]
fn a_failed_save_keeps_the_previous_checkpoint() {
    let (first, second) = (fresh(0), fresh(1));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    save(&first, &path).unwrap_or_else(|e| panic!("saving failed: {e}"));
    let before = std::fs::read(&path).unwrap();

    // The disk fills up half-way through the next save.
    let mut folder_while_writing = Vec::new();
    let result = save_with(&second, &path, |file, bytes| {
        folder_while_writing = files_in(dir.path());
        file.write_all(&bytes[..bytes.len() / 2])?;
        Err(std::io::Error::other(
            "no space left on device (simulated by the test)",
        ))
    });
    assert!(
        result.is_err(),
        "save_with must report the failed write as an error (and write through `write`)"
    );
    assert!(
        std::fs::read(&path).ok().as_ref() == Some(&before),
        "the failed save destroyed the previous checkpoint: write a temporary file in the same folder and rename it over the checkpoint only once it is complete"
    );
    assert_eq!(
        folder_while_writing.len(),
        2,
        "while writing, the folder should hold the old checkpoint and the temporary file beside it; it held {folder_while_writing:?}"
    );
    assert_eq!(
        files_in(dir.path()),
        ["gcn.safetensors"],
        "the failed save left files behind: remove the temporary file (a NamedTempFile does it when dropped)"
    );

    save(&second, &path).unwrap_or_else(|e| panic!("saving over a checkpoint failed: {e}"));
    assert_eq!(
        files_in(dir.path()),
        ["gcn.safetensors"],
        "a successful save should leave exactly the checkpoint in the folder"
    );
    let replaced = checkpoint::load(&path, Placement::cpu()).unwrap();
    assert!(
        parameters(&replaced) == parameters(&second),
        "after a successful save, the file should hold the new model"
    );
}

#[test]
fn a_broken_checkpoint_names_what_is_wrong() {
    let model = fresh(0);
    let gpu = accelerator().placement;
    let dir = tempfile::tempdir().unwrap();
    let metadata = HashMap::from([
        (
            CONFIG_KEY.to_string(),
            serde_json::to_string(model.config()).unwrap(),
        ),
        (SAVED_FROM_KEY.to_string(), "cpu".to_string()),
    ]);
    let all = model.named_parameters();

    let no_biases = dir.path().join("no_biases.safetensors");
    let weights_only: Vec<(String, Tensor)> = all
        .iter()
        .filter(|(name, _)| !name.ends_with("bias"))
        .cloned()
        .collect();
    tensor_file::write(&no_biases, &weights_only, Some(metadata.clone())).unwrap();
    let err = match load(&no_biases, &gpu) {
        Ok(_) => panic!("loading a checkpoint without conv1.bias and conv2.bias must fail"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("conv1.bias") && err.contains("conv2.bias"),
        "the error must name every missing tensor (conv1.bias and conv2.bias); got: {err}"
    );
    assert!(
        err.contains(&no_biases.display().to_string()),
        "the error must name the file ({}); got: {err}",
        no_biases.display()
    );

    let truncated = dir.path().join("truncated.safetensors");
    tensor_file::write(&truncated, &all, Some(metadata)).unwrap();
    let bytes = std::fs::read(&truncated).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err = match load(&truncated, &gpu) {
        Ok(_) => panic!("loading half a checkpoint must fail"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(&truncated.display().to_string()),
        "the error for a truncated file must name it ({}); got: {err}",
        truncated.display()
    );

    let no_config = dir.path().join("no_config.safetensors");
    tensor_file::write(&no_config, &all, None).unwrap();
    let err = match load(&no_config, &gpu) {
        Ok(_) => panic!("loading a file without a config in its metadata must fail"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(CONFIG_KEY) && err.contains(&no_config.display().to_string()),
        "the error for a file without a config must name the file and the missing '{CONFIG_KEY}'; got: {err}"
    );
}
