//! `workbook train --devices ...` and `workbook bench --devices ...`: data parallelism from the
//! command line, its JSON line, its equivalence with one device, and its errors.

use std::path::Path;
use std::process::{Command, Output};
use workbook::placement::Placement;
use workbook::tensor_file;

fn workbook(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(args)
        .current_dir(cwd)
        .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
        .env("WORKBOOK_DEVICE", "cpu")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the binary runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "command failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn failure(out: &Output) -> String {
    assert!(!out.status.success(), "command should have failed");
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert!(
        !err.contains("panicked"),
        "a panic instead of an error:\n{err}"
    );
    err
}

fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// `train` on Cora with `placement` (e.g. `["--devices", "sim:1,sim:2"]`) and `extra` options.
fn train(placement: &[&str], extra: &[&str], dir: &Path) -> serde_json::Value {
    let mut args = vec!["train", "--model", "gcn", "--dataset", "cora"];
    args.extend_from_slice(placement);
    args.extend_from_slice(extra);
    json_lines(&ok(&workbook(&args, dir))).remove(0)
}

/// Bytes of the GCN's parameters on Cora: 1433x16 + 16 + 16x7 + 7 floats.
const GCN_CORA_PARAM_BYTES: f64 = ((1433 * 16 + 16 + 16 * 7 + 7) * 4) as f64;

#[test]
fn train_with_two_devices_reports_devices_sync_and_the_bytes_of_each_step() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("dp.safetensors");
    let out = workbook(
        &[
            "train",
            "--model",
            "gcn",
            "--dataset",
            "cora",
            "--devices",
            "sim:1,sim:2",
            "--batch-size",
            "64",
            "--epochs",
            "2",
            "--ledger",
            "--save",
            ckpt.to_str().unwrap(),
        ],
        dir.path(),
    );
    let line = json_lines(&ok(&out)).remove(0);
    assert_eq!(
        line["devices"],
        serde_json::json!(["sim:1", "sim:2"]),
        "{line}"
    );
    assert_eq!(line["replicas_in_sync"], true, "{line}");
    assert!(line["loss"].as_f64().unwrap().is_finite(), "{line}");
    assert!(line["test_accuracy"].as_f64().unwrap() > 0.0, "{line}");
    assert_eq!(line["batch_size_per_device"], 32, "{line}");
    // Cora has 140 training nodes: batches of 32, 32, 32, 32, 12, two per step: 3 steps, the
    // last with one replica.
    assert_eq!(line["batches_per_epoch"], 5, "{line}");
    assert_eq!(line["steps_per_epoch"], 3, "{line}");
    // Every step broadcasts every parameter to sim:2; the reduce copies sim:2's gradients in
    // the two steps where sim:2 had a batch.
    assert_eq!(
        line["broadcast_bytes_per_step"].as_f64().unwrap(),
        GCN_CORA_PARAM_BYTES,
        "{line}"
    );
    let reduce = line["reduce_bytes_per_step"].as_f64().unwrap();
    assert!(
        (reduce - GCN_CORA_PARAM_BYTES * 2.0 / 3.0).abs() < 1e-6,
        "{line}"
    );
    assert!(
        line["batch_bytes_per_step"].as_f64().unwrap() > 0.0,
        "{line}"
    );
    let phases: Vec<&str> = line["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert!(
        phases.contains(&"replicate to sim:2") && phases.contains(&"epoch *"),
        "{line}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for want in [
        "device: sim:1 (sim:1 listed in --devices",
        "device: sim:2 (sim:2 listed in --devices",
        "epoch 1/2: loss",
        "epoch 2/2: loss",
        "replicas in sync",
        "transfer ledger (sim:1,sim:2):",
        "reduce grad[conv1.lin.weight]",
        "saved the unwrapped model",
    ] {
        assert!(stderr.contains(want), "no '{want}' in:\n{stderr}");
    }
    // The checkpoint is the unwrapped model: PyG names (no `module.` prefix), loadable on one
    // device.
    let file = tensor_file::read(&ckpt, &workbook::candle_core::Device::Cpu).unwrap();
    assert!(
        file.tensors.contains_key("conv1.lin.weight"),
        "{:?}",
        file.tensors.keys()
    );
    assert!(!file.tensors.keys().any(|k| k.starts_with("module.")));
    let model = workbook::checkpoint::load(&ckpt, Placement::cpu()).unwrap();
    assert_eq!(model.placement().to_string(), "cpu");
}

#[test]
fn one_listed_device_is_the_mini_batch_run_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--batch-size", "32", "--epochs", "3", "--eval", "full"];
    let dp = train(&["--devices", "sim:1"], &extra, dir.path());
    let one = train(&["--device", "sim:1"], &extra, dir.path());
    for key in ["loss", "train_accuracy", "val_accuracy", "test_accuracy"] {
        assert_eq!(dp[key], one[key], "{key}: {dp} vs {one}");
    }
    assert_eq!(dp["replicas_in_sync"], true);
    assert_eq!(dp["reduce_bytes_per_step"].as_f64(), Some(0.0), "{dp}");
    // The same batches moved: the training phases' bytes are the same.
    let epoch_bytes = |v: &serde_json::Value| {
        v["ledger"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phase"] == "epoch *")
            .unwrap()["bytes"]
            .as_f64()
            .unwrap()
    };
    let steps = dp["steps_per_epoch"].as_f64().unwrap() * 3.0;
    assert_eq!(dp["steps_per_epoch"], one["batches_per_epoch"]);
    assert!(
        (dp["batch_bytes_per_step"].as_f64().unwrap() * steps - epoch_bytes(&one)).abs() < 1e-3,
        "{dp} vs {one}"
    );
}

#[test]
fn two_simulated_devices_reach_one_devices_accuracy_on_cora() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--batch-size", "128", "--epochs", "60", "--eval", "full"];
    let one = train(&["--device", "sim:1"], &extra, dir.path());
    let two = train(&["--devices", "sim:1,sim:2"], &extra, dir.path());
    assert_eq!(two["replicas_in_sync"], true);
    let (a, b) = (
        one["test_accuracy"].as_f64().unwrap(),
        two["test_accuracy"].as_f64().unwrap(),
    );
    assert!(
        a > 0.7 && b > 0.7 && (a - b).abs() < 0.03,
        "one device {a}, two devices {b}"
    );
}

#[test]
fn bad_device_lists_and_batch_sizes_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let err = |args: &[&str]| {
        let mut all = vec!["train", "--model", "gcn", "--epochs", "1"];
        all.extend_from_slice(args);
        failure(&workbook(&all, dir.path()))
    };
    let e = err(&["--devices", "sim:1,auto", "--batch-size", "4"]);
    assert!(
        e.contains("`auto` picks one device") && e.contains("sim:1,sim:2"),
        "{e}"
    );
    let e = err(&["--devices", "sim:1,sim:2,sim:1", "--batch-size", "4"]);
    assert!(e.contains("sim:1 is listed twice (entries 1 and 3)"), "{e}");
    let e = err(&["--devices", "sim:1,gpu1", "--batch-size", "4"]);
    assert!(
        e.contains("unknown device 'gpu1'") && e.contains("sim:N"),
        "{e}"
    );
    let e = err(&["--devices", "sim:1,,sim:2", "--batch-size", "4"]);
    assert!(e.contains("entry 2") && e.contains("is empty"), "{e}");
    let e = err(&["--devices", "sim:1,sim:2"]);
    assert!(
        e.contains("--devices needs --batch-size")
            && e.contains("splits each step's mini-batches over the devices"),
        "{e}"
    );
    let e = err(&["--devices", "sim:1,sim:2", "--batch-size", "3"]);
    assert!(
        e.contains("batch size 3 does not split evenly over 2 device(s)") && e.contains("e.g. 2"),
        "{e}"
    );
    let e = err(&[
        "--devices",
        "sim:1,sim:2",
        "--device",
        "sim:3",
        "--batch-size",
        "4",
    ]);
    assert!(e.contains("cannot be used with"), "{e}");
    if !cfg!(feature = "cuda") {
        let e = err(&["--devices", "sim:1,cuda:1", "--batch-size", "4"]);
        assert!(
            e.contains("cuda:1 was listed in --devices but this build has no CUDA support")
                && e.contains("sim:1"),
            "{e}"
        );
    }
    // WORKBOOK_DEVICE is not consulted when --devices names the devices.
    let out = Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(["train", "--model", "gcn", "--epochs", "1"])
        .args(["--devices", "sim:1", "--batch-size", "2"])
        .env("WORKBOOK_DEVICE", "gpu0")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        json_lines(&ok(&out))[0]["devices"],
        serde_json::json!(["sim:1"])
    );
    let e = failure(&workbook(
        &["bench", "--model", "gcn", "--devices", "sim:1,sim:2"],
        dir.path(),
    ));
    assert!(e.contains("--devices needs --batch-size"), "{e}");
}

#[test]
fn bench_reports_time_and_bytes_per_step_for_each_device_count() {
    let dir = tempfile::tempdir().unwrap();
    let out = workbook(
        &[
            "bench",
            "--model",
            "gcn",
            "--dataset",
            "cora",
            "--devices",
            "sim:1,sim:2,sim:3",
            "--batch-size",
            "64",
            "--epochs",
            "2",
            "--warmup",
            "0",
        ],
        dir.path(),
    );
    let lines = json_lines(&ok(&out));
    assert_eq!(lines.len(), 3, "one line per device count: {lines:?}");
    for (k, l) in lines.iter().enumerate() {
        let k = k + 1;
        assert_eq!(l["bench"], "data_parallel", "{l}");
        assert_eq!(l["device_count"], k, "{l}");
        assert_eq!(l["devices"].as_array().unwrap().len(), k, "{l}");
        assert_eq!(l["simulated"], true, "{l}");
        assert_eq!(l["replicas_in_sync"], true, "{l}");
        assert!(l["step_ms"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["batch_bytes_per_step"].as_f64().unwrap() > 0.0, "{l}");
        // Every step broadcasts every parameter to each device after the first.
        assert_eq!(
            l["broadcast_bytes_per_step"].as_f64().unwrap(),
            GCN_CORA_PARAM_BYTES * (k - 1) as f64,
            "{l}"
        );
    }
    assert_eq!(lines[0]["reduce_bytes_per_step"].as_f64(), Some(0.0));
    assert!(lines[1]["reduce_bytes_per_step"].as_f64().unwrap() > 0.0);
    // 64 seeds do not split over 3 devices: that count uses 63, and says so.
    assert_eq!(lines[2]["batch_size"], 63, "{}", lines[2]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a speed-up"), "{stderr}");
    assert!(stderr.contains("so this count uses 63"), "{stderr}");
    assert!(
        stderr.contains("step ms") && stderr.contains("sim:1,sim:2,sim:3"),
        "{stderr}"
    );
}

/// Two real GPUs: `--devices cuda:0,cuda:1` trains with replicas kept identical. Runs only in a
/// `cuda` build on a machine with two GPUs; otherwise prints what it skipped and why.
#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs two GPUs: cargo test -p workbook-cli --features cuda"
)]
fn two_gpus_train_data_parallel_with_replicas_in_sync() {
    let test = "two_gpus_train_data_parallel_with_replicas_in_sync";
    if !cfg!(feature = "cuda") {
        eprintln!("SKIPPED {test}: built without the `cuda` feature (cargo test -p workbook-cli --features cuda)");
        return;
    }
    for n in [0, 1] {
        if let Err(e) =
            workbook::device::open(workbook::device::DeviceSpec::Cuda(n), "needed by this test")
        {
            eprintln!("SKIPPED {test}: it needs two GPUs ({e})");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--batch-size", "128", "--epochs", "30", "--eval", "full"];
    let two = train(&["--devices", "cuda:0,cuda:1"], &extra, dir.path());
    assert_eq!(
        two["devices"],
        serde_json::json!(["cuda:0", "cuda:1"]),
        "{two}"
    );
    assert_eq!(two["replicas_in_sync"], true, "{two}");
    assert!(
        two["reduce_bytes_per_step"].as_f64().unwrap() > 0.0,
        "{two}"
    );
    let one = train(&["--device", "cuda:0"], &extra, dir.path());
    let (a, b) = (
        one["test_accuracy"].as_f64().unwrap(),
        two["test_accuracy"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 0.05, "one GPU {a}, two GPUs {b}");
    println!("two GPUs: test accuracy {b} (one GPU {a}), replicas in sync");
}
