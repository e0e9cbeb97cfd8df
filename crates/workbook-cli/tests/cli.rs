//! End-to-end tests of the `workbook` binary: the commands a user types, their outputs and their
//! errors on bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use workbook::candle_core::{DType, Device, Tensor};
use workbook::tensor_file;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    repo()
        .join("crates/workbook/tests/fixtures/pyg")
        .join(format!("{name}.safetensors"))
}

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

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar()
        .unwrap()
}

#[test]
fn default_command_trains_both_models_and_writes_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = workbook(&["demo", "--epochs", "30"], dir.path());
    let stdout = ok(&out);
    assert!(
        stdout.contains("gcn:") && stdout.contains("gatv2:"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("device: cpu (cpu from WORKBOOK_DEVICE=cpu)"),
        "{stderr}"
    );
    let report = dir.path().join("workbook-report");
    assert!(std::fs::read_to_string(report.join("training_curves.svg"))
        .unwrap()
        .contains("<svg"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 2);
    assert!(std::fs::read_to_string(report.join("report.md"))
        .unwrap()
        .contains("| gatv2 |"));
}

#[test]
fn train_prints_one_json_line_with_the_promised_fields() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = ok(&workbook(
        &[
            "train",
            "--model",
            "gcn",
            "--dataset",
            "karate",
            "--epochs",
            "50",
        ],
        dir.path(),
    ));
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    for key in [
        "model",
        "dataset",
        "device",
        "epochs",
        "train_accuracy",
        "val_accuracy",
        "test_accuracy",
        "epoch_ms",
    ] {
        assert!(line.get(key).is_some(), "missing {key} in {line}");
    }
    assert_eq!(line["device"], "cpu");
    assert_eq!(line["train_accuracy"], 1.0);
}

#[test]
fn predict_reproduces_the_trained_pyg_models_on_cora() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("cora.safetensors");
    ok(&workbook(
        &[
            "data",
            "--dataset",
            "cora",
            "--out",
            graph.to_str().unwrap(),
        ],
        dir.path(),
    ));
    for model in ["gcn", "gatv2"] {
        let out = dir.path().join(format!("{model}.out.safetensors"));
        let config = repo().join(format!("configs/pyg/cora_{model}.json"));
        let weights = fixture(&format!("cora_{model}_trained"));
        let run = workbook(
            &[
                "predict",
                "--config",
                config.to_str().unwrap(),
                "--weights",
                weights.to_str().unwrap(),
                "--graph",
                graph.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            dir.path(),
        );
        ok(&run);
        assert!(
            String::from_utf8_lossy(&run.stderr).contains("expected.logits"),
            "unused tensors are reported"
        );
        let ours = tensor_file::read(&out, &Device::Cpu).unwrap();
        let reference = tensor_file::read(&weights, &Device::Cpu).unwrap();
        let diff = max_diff(&ours.tensors["out"], &reference.tensors["expected.logits"]);
        assert!(diff < 1e-5, "{model}: {diff}");
        assert_eq!(ours.tensors.contains_key("alpha"), model == "gatv2");
        if model == "gatv2" {
            assert_eq!(ours.tensors["alpha_edge_index"].dims(), &[2, 10556 + 2708]);
            assert!(ours.tensors.contains_key("conv1.alpha"));
        }
    }
}

#[test]
fn predict_runs_a_single_pyg_layer_with_edge_weights() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture("gcn_random_weighted_improved");
    let config = dir.path().join("layer.json");
    std::fs::write(
        &config,
        r#"{"layer": "GCNConv", "in_channels": 12, "out_channels": 8, "improved": true}"#,
    )
    .unwrap();
    let out = dir.path().join("out.safetensors");
    ok(&workbook(
        &[
            "predict",
            "--config",
            config.to_str().unwrap(),
            "--weights",
            fx.to_str().unwrap(),
            "--weights-prefix",
            "params.",
            "--graph",
            fx.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        dir.path(),
    ));
    let ours = tensor_file::read(&out, &Device::Cpu).unwrap();
    let reference = tensor_file::read(&fx, &Device::Cpu).unwrap();
    assert!(max_diff(&ours.tensors["out"], &reference.tensors["expected.out"]) < 1e-5);
}

#[test]
fn bad_inputs_give_clear_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    std::fs::write(
        d.join("layer.json"),
        r#"{"layer": "GCNConv", "in_channels": 12, "out_channels": 8}"#,
    )
    .unwrap();
    let fx = fixture("gcn_random_weighted_improved");
    let bytes = std::fs::read(&fx).unwrap();
    std::fs::write(d.join("truncated.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    let predict = |config: &str, weights: &str, graph: &str, prefix: &str| {
        workbook(
            &[
                "predict",
                "--config",
                config,
                "--weights",
                weights,
                "--graph",
                graph,
                "--out",
                &p("o.safetensors"),
                "--weights-prefix",
                prefix,
            ],
            d,
        )
    };
    let fxs = fx.to_str().unwrap();

    let err = failure(&predict(
        &p("layer.json"),
        &p("truncated.safetensors"),
        fxs,
        "params.",
    ));
    assert!(err.contains("not a valid safetensors file"), "{err}");

    let err = failure(&predict(&p("layer.json"), fxs, fxs, "wrong."));
    assert!(
        err.contains("missing 'lin.weight'") && err.contains("missing 'bias'"),
        "{err}"
    );

    std::fs::write(
        d.join("wide.json"),
        r#"{"layer": "GCNConv", "in_channels": 13, "out_channels": 8}"#,
    )
    .unwrap();
    let err = failure(&predict(&p("wide.json"), fxs, fxs, "params."));
    assert!(
        err.contains("'lin.weight' has shape [8, 12] but the config needs [8, 13]"),
        "{err}"
    );

    std::fs::write(
        d.join("typo.json"),
        r#"{"layer": "GCNConv", "in_channels": 12, "out_channel": 8}"#,
    )
    .unwrap();
    let err = failure(&predict(&p("typo.json"), fxs, fxs, "params."));
    assert!(err.contains("out_channel"), "{err}");

    // A graph whose edge_index names node 99 of 3.
    let cpu = Device::Cpu;
    let x = Tensor::zeros((3, 12), DType::F32, &cpu).unwrap();
    let ei = Tensor::new(&[[0i64, 1], [99, 2]], &cpu).unwrap();
    tensor_file::write(
        &d.join("bad_graph.safetensors"),
        &[("x".into(), x.clone()), ("edge_index".into(), ei)],
        None,
    )
    .unwrap();
    let err = failure(&predict(
        &p("layer.json"),
        fxs,
        &p("bad_graph.safetensors"),
        "params.",
    ));
    assert!(
        err.contains("edge_index[1][0] = 99 is not a node id"),
        "{err}"
    );

    let ei = Tensor::new(&[[0i64, 1, 2]], &cpu).unwrap();
    tensor_file::write(
        &d.join("flat.safetensors"),
        &[("x".into(), x), ("edge_index".into(), ei)],
        None,
    )
    .unwrap();
    let err = failure(&predict(
        &p("layer.json"),
        fxs,
        &p("flat.safetensors"),
        "params.",
    ));
    assert!(err.contains("[2, num_edges]"), "{err}");

    let err = failure(&workbook(
        &["--device", "gpu", "train", "--model", "gcn"],
        d,
    ));
    assert!(err.contains("cuda:N"), "{err}");

    let err = failure(&workbook(
        &["train", "--model", "gcn", "--dataset", "mnist"],
        d,
    ));
    assert!(
        err.contains("use karate, cora, citeseer or csbm:<nodes>"),
        "{err}"
    );

    assert!(
        !d.join("o.safetensors").exists(),
        "no output file after failures"
    );
}

#[test]
fn data_writes_a_graph_file_pyg_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.safetensors");
    ok(&workbook(
        &[
            "data",
            "--dataset",
            "csbm:2000",
            "--out",
            out.to_str().unwrap(),
        ],
        dir.path(),
    ));
    let file = tensor_file::read(&out, &Device::Cpu).unwrap();
    assert_eq!(file.tensors["x"].dims(), &[2000, 32]);
    assert_eq!(file.tensors["edge_index"].dtype(), DType::I64);
    assert_eq!(file.tensors["train_mask"].dims(), &[2000]);
}
