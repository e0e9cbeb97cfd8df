//! Graded tests for exercise 02-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed (the copies in
//! the transfer ledger, the device a checkpoint says it came from, where the loaded model is,
//! its parameters and logits), and a teacher's grader compares that with the reference
//! solution's. The run's challenge picks the training seed and the simulated devices' numbers,
//! and which tensors a broken checkpoint lacks.

use super::portable_checkpoint::{load, save, save_with, Loaded, CONFIG_KEY, SAVED_FROM_KEY};
use scenario::{Json, Scenario};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use workbook::candle_core::{Device, Tensor};
use workbook::device::accelerator_or_sim;
use workbook::ledger::{Ledger, Transfer};
use workbook::train::{train, TrainConfig};
use workbook::{checkpoint, datasets, tensor_file, Model, ModelConfig, Placement};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// Another simulated device, never the accelerator: `sim:8` to `sim:15`.
fn elsewhere(s: &Scenario) -> Placement {
    Placement::sim(s.pick("other device", 8..16))
}

/// A GCN trained on karate on `at`, with a seed and a number of epochs the challenge picks.
fn trained_on(s: &Scenario, at: &Placement) -> Model {
    let graph = datasets::karate(at).unwrap();
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let recipe = TrainConfig {
        epochs: s.pick("epochs", 5..20),
        seed: s.seed("training"),
        ..TrainConfig::gcn()
    };
    train(config, &graph, &recipe, |_| {}).unwrap().model
}

fn fresh(s: &Scenario, label: &str) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), s.seed(label), Placement::cpu())
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
fn logits_on(model: &Model, at: &Placement) -> Tensor {
    let graph = datasets::karate(at).unwrap();
    model.forward_graph(&graph).unwrap().logits
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The ledger's copies, sorted (two correct solutions may copy in another order).
fn copies(transfers: Vec<Transfer>) -> Vec<(String, String, String, u64)> {
    let mut rows: Vec<_> = transfers
        .into_iter()
        .map(|t| (t.what, t.from, t.to, t.bytes))
        .collect();
    rows.sort();
    rows
}

/// A copy the ledger recorded: what, from, to, bytes.
type Row = (String, String, String, u64);

/// Saves `model` to `path`, returning the copies the ledger recorded while saving.
fn save_copies(model: &Model, path: &Path, ledger: &Ledger) -> Vec<Row> {
    ledger.clear();
    save(model, path).unwrap_or_else(|e| panic!("saving from {} failed: {e}", model.placement()));
    copies(ledger.transfers())
}

/// Checks that saving `model` copied every parameter to the host once, explicitly (nothing to
/// copy from the host itself).
fn check_save_copies(model: &Model, copies: &[Row], ledger: &Ledger) {
    if model.placement().is_cpu() {
        return;
    }
    let from = model.placement().to_string();
    for (name, _) in model.named_parameters() {
        let n = copies
            .iter()
            .filter(|(what, f, to, _)| what.contains(&name) && *f == from && to == "cpu")
            .count();
        assert_eq!(
            n,
            1,
            "saving from {from} must copy '{name}' to the host once, explicitly (Placement::cpu().move_tensor), so the ledger shows it; it shows {n} such copies:\n{}",
            ledger.table()
        );
    }
}

/// Loads `path` onto `to`, returning the checkpoint and the copies the ledger recorded.
fn load_copies(path: &Path, to: &Placement, ledger: &Ledger, model: &Model) -> (Loaded, Vec<Row>) {
    ledger.clear();
    let loaded = load(path, to).unwrap_or_else(|e| {
        panic!(
            "loading a checkpoint saved from {} onto {to} failed: {e}",
            model.placement()
        )
    });
    (loaded, copies(ledger.transfers()))
}

/// Where each parameter of `model` is.
fn placements(model: &Model) -> Vec<(String, String)> {
    model
        .parameter_placements()
        .into_iter()
        .map(|(n, at)| (n, at.to_string()))
        .collect()
}

/// Checks the checkpoint loaded onto `to`: every parameter crossed from the host to `to` once,
/// explicitly; `saved_from` is `model`'s device; the model is on `to` with `model`'s parameters
/// and logits.
fn check_loaded(loaded: &Loaded, copies: &[Row], to: &Placement, ledger: &Ledger, model: &Model) {
    if !to.is_cpu() {
        // The file is read on the host; each tensor then crosses to map_location once,
        // explicitly (map_location.move_tensor), so that the ledger shows every copy.
        for (name, _) in model.named_parameters() {
            let n = copies
                .iter()
                .filter(|(what, f, t, _)| {
                    what.contains(&name) && f == "cpu" && *t == to.to_string()
                })
                .count();
            assert_eq!(
                n,
                1,
                "loading onto {to} must copy '{name}' from the host to {to} once, explicitly (map_location.move_tensor), so the ledger shows it; it shows {n} such copies:\n{}",
                ledger.table()
            );
        }
    }
    assert_eq!(
        loaded.saved_from,
        model.placement().to_string(),
        "the checkpoint should record the device it was saved from ('{SAVED_FROM_KEY}')"
    );
    assert_eq!(
        loaded.model.placement(),
        to,
        "the loaded model must be on the device asked for (map_location), whatever it was saved from"
    );
    for (name, placement) in placements(&loaded.model) {
        assert_eq!(
            placement,
            to.to_string(),
            "'{name}' was loaded onto {placement}, not {to}"
        );
    }
    assert!(
        parameters(&loaded.model) == parameters(model),
        "the loaded parameters differ from the saved ones"
    );
    assert!(
        bits(&logits_on(&loaded.model, to)) == bits(&logits_on(&model.to_device(to).unwrap(), to)),
        "on {to}, the loaded model's logits differ from the trained model's"
    );
}

/// Records a round trip. The copies, `saved_from` and the placements are the same for every
/// seed (one of them, at least, in each test), so they go in one record with the loaded model's
/// logits, which are not.
fn observe_round_trip(
    s: &Scenario,
    saved: &[Row],
    loading: &[Row],
    loaded: &Loaded,
    to: &Placement,
) {
    s.observe(
        "the loaded model's parameters",
        &loaded.model.named_parameters(),
    );
    s.observe(
        "copies while saving and loading, saved_from, the loaded model's placements, and its logits",
        &(
            (Json(saved), Json(loading)),
            &loaded.saved_from,
            placements(&loaded.model),
            logits_on(&loaded.model, to),
        ),
    );
}

#[test]
fn round_trip_from_the_accelerator_to_the_cpu() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let gpu = accelerator(&s).with_ledger(&ledger);
    let model = trained_on(&s, &gpu);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    let saved = save_copies(&model, &path, &ledger);
    check_save_copies(&model, &saved, &ledger);
    let to = Placement::cpu();
    let (loaded, loading) = load_copies(&path, &to, &ledger, &model);
    observe_round_trip(&s, &saved, &loading, &loaded, &to);
    check_loaded(&loaded, &loading, &to, &ledger, &model);
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
    let s = scenario::start();
    let cpu = Placement::cpu();
    let model = trained_on(&s, &cpu);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    let ledger = Ledger::new();
    let saved = save_copies(&model, &path, &ledger);
    check_save_copies(&model, &saved, &ledger);
    let to = accelerator(&s).with_ledger(&ledger);
    let (loaded, loading) = load_copies(&path, &to, &ledger, &model);
    observe_round_trip(&s, &saved, &loading, &loaded, &to);
    check_loaded(&loaded, &loading, &to, &ledger, &model);
}

#[test]
fn round_trip_between_two_devices() {
    // Saved on one device, loaded onto another: both copies through the host, each recorded,
    // and the device it came from is information, never the destination.
    let s = scenario::start();
    let ledger = Ledger::new();
    let (gpu, other) = (
        accelerator(&s).with_ledger(&ledger),
        elsewhere(&s).with_ledger(&ledger),
    );
    let model = trained_on(&s, &gpu);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    let saved = save_copies(&model, &path, &ledger);
    check_save_copies(&model, &saved, &ledger);
    let to = other.clone();
    let (loaded, loading) = load_copies(&path, &to, &ledger, &model);
    observe_round_trip(&s, &saved, &loading, &loaded, &to);
    check_loaded(&loaded, &loading, &to, &ledger, &model);
}

#[test]
fn a_failed_save_keeps_the_previous_checkpoint() {
    let s = scenario::start();
    let (first, second) = (fresh(&s, "first model"), fresh(&s, "second model"));
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
    let kept = checkpoint::load(&path, Placement::cpu()).ok();
    // One record: whether it failed and the files are the same for every seed; the parameters
    // the file still holds (the first model's) are not.
    s.observe(
        "the failed save is an error; files while writing, and after the failure; the file's parameters after it",
        &(
            result.is_err(),
            (folder_while_writing.len(), files_in(dir.path()).len()),
            kept.iter()
                .flat_map(|m| m.named_parameters())
                .collect::<Vec<_>>(),
        ),
    );
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
    // One record: a fresh model's biases are zeros under every challenge, its weights are not.
    s.observe(
        "after the second save, the file's parameters",
        &replaced.named_parameters(),
    );
    assert!(
        parameters(&replaced) == parameters(&second),
        "after a successful save, the file should hold the new model"
    );
}

#[test]
fn a_broken_checkpoint_names_what_is_wrong() {
    let s = scenario::start();
    let model = fresh(&s, "model");
    let gpu = accelerator(&s);
    let dir = tempfile::tempdir().unwrap();
    let metadata = HashMap::from([
        (
            CONFIG_KEY.to_string(),
            serde_json::to_string(model.config()).unwrap(),
        ),
        (SAVED_FROM_KEY.to_string(), "cpu".to_string()),
    ]);
    let all = model.named_parameters();

    // Some tensors missing, which ones the challenge says (at least one): every one is named.
    let mut missing: Vec<String> = all
        .iter()
        .map(|(name, _)| name.clone())
        .filter(|name| s.seed(&format!("{name} is missing")) & 1 == 1)
        .collect();
    if missing.is_empty() {
        missing.push(all[all.len() - 1].0.clone());
    }
    let incomplete = dir.path().join("incomplete.safetensors");
    let kept: Vec<(String, Tensor)> = all
        .iter()
        .filter(|(name, _)| !missing.contains(name))
        .cloned()
        .collect();
    tensor_file::write(&incomplete, &kept, Some(metadata.clone())).unwrap();
    let err = match load(&incomplete, &gpu) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    };
    let named: Vec<(&String, bool)> = missing
        .iter()
        .map(|m| (m, err.contains(m.as_str())))
        .collect();

    let truncated = dir.path().join("truncated.safetensors");
    tensor_file::write(&truncated, &all, Some(metadata)).unwrap();
    let bytes = std::fs::read(&truncated).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let truncated_err = load(&truncated, &gpu)
        .map(|_| ())
        .map_err(|e| e.to_string());

    let no_config = dir.path().join("no_config.safetensors");
    tensor_file::write(&no_config, &all, None).unwrap();
    let no_config_err = load(&no_config, &gpu)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let names = |err: &Result<(), String>, what: &str| err.as_ref().err().map(|e| e.contains(what));

    // One record: what the errors name is the same for every challenge but for which tensors
    // are missing, which is not.
    s.observe(
        "missing tensors, and whether the error names each; whether the errors name the incomplete file, the truncated file, the config key and the file without a config",
        &(
            named.clone(),
            err.contains(&incomplete.display().to_string()),
            names(&truncated_err, &truncated.display().to_string()),
            (
                names(&no_config_err, CONFIG_KEY),
                names(&no_config_err, &no_config.display().to_string()),
            ),
        ),
    );
    assert!(
        !err.is_empty(),
        "loading a checkpoint without {missing:?} must fail"
    );
    assert!(
        named.iter().all(|(_, said)| *said),
        "the error must name every missing tensor ({missing:?}); got: {err}"
    );
    assert!(
        err.contains(&incomplete.display().to_string()),
        "the error must name the file ({}); got: {err}",
        incomplete.display()
    );

    let err = match truncated_err {
        Ok(()) => panic!("loading half a checkpoint must fail"),
        Err(e) => e,
    };
    assert!(
        err.contains(&truncated.display().to_string()),
        "the error for a truncated file must name it ({}); got: {err}",
        truncated.display()
    );

    let err = match no_config_err {
        Ok(()) => panic!("loading a file without a config in its metadata must fail"),
        Err(e) => e,
    };
    assert!(
        err.contains(CONFIG_KEY) && err.contains(&no_config.display().to_string()),
        "the error for a file without a config must name the file and the missing '{CONFIG_KEY}'; got: {err}"
    );
}
