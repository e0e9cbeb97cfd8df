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
        .env_remove("WORKBOOK_KEEP_BUFFERS")
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

/// Each line of `stdout` parsed as JSON (the bench output).
fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
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

/// GraphSAGE through the CLI: trains on karate, saves a checkpoint (PyG names), and
/// `predict` reloads it on the simulated device.
#[test]
fn train_model_sage_trains_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("sage.safetensors");
    let stdout = ok(&workbook(
        &[
            "train",
            "--model",
            "sage",
            "--dataset",
            "karate",
            "--epochs",
            "100",
            "--save",
            weights.to_str().unwrap(),
        ],
        dir.path(),
    ));
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["model"], "sage");
    assert!(line["train_accuracy"].as_f64().unwrap() >= 0.75, "{line}");
    let saved = workbook::tensor_file::read(&weights, &workbook::candle_core::Device::Cpu).unwrap();
    for name in [
        "conv1.lin_l.weight",
        "conv1.lin_l.bias",
        "conv1.lin_r.weight",
        "conv2.lin_r.weight",
    ] {
        assert!(
            saved.tensors.contains_key(name),
            "{name} missing from the checkpoint"
        );
    }
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
fn predict_reads_in_channels_minus_one_and_takes_the_width_from_the_weights() {
    // GCNConv(-1, 16), GCNConv(-1, 7), as PyG's lazy model; PyG's trained weights give the
    // widths (as its load_state_dict does) and the output is PyG's.
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
    let config = dir.path().join("lazy.json");
    std::fs::write(
        &config,
        r#"{"layers": [{"layer": "GCNConv", "in_channels": -1, "out_channels": 16},
                       {"layer": "GCNConv", "in_channels": -1, "out_channels": 7}]}"#,
    )
    .unwrap();
    let weights = fixture("cora_gcn_trained");
    let out = dir.path().join("out.safetensors");
    let predict = |config: &std::path::Path| {
        workbook(
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
        )
    };
    ok(&predict(&config));
    let ours = tensor_file::read(&out, &Device::Cpu).unwrap();
    let reference = tensor_file::read(&weights, &Device::Cpu).unwrap();
    let diff = max_diff(&ours.tensors["out"], &reference.tensors["expected.logits"]);
    assert!(diff < 1e-5, "{diff}");

    std::fs::write(
        &config,
        r#"{"layer": "GCNConv", "in_channels": -3, "out_channels": 16}"#,
    )
    .unwrap();
    let err = failure(&predict(&config));
    assert!(
        err.contains("GCNConv: in_channels must be a width of at least 1, or -1 (PyG's lazy width: found by the first forward pass), not -3"),
        "{err}"
    );
}

#[test]
fn import_reads_a_pt_file_as_torch_load_does_and_predict_reproduces_pyg() {
    let dir = tempfile::tempdir().unwrap();
    let pt = repo().join("crates/workbook/tests/fixtures/pyg/pt");
    let cuda0 = pt.join("cora_gcn_state_dict_cuda0.pt");
    let import = |extra: &[&str]| {
        let mut args = vec!["import", cuda0.to_str().unwrap()];
        args.extend_from_slice(extra);
        workbook(&args, dir.path())
    };
    if !cfg!(feature = "cuda") {
        let err = failure(&import(&[]));
        assert!(
            err.contains("tensor 'conv1.bias' was saved on cuda:0")
                && err.contains("Attempting to deserialize object on a CUDA device")
                && err.contains("--map-location cpu"),
            "{err}"
        );
        assert!(!dir
            .path()
            .join("cora_gcn_state_dict_cuda0.safetensors")
            .exists());
    }
    let stdout = ok(&import(&["--map-location", "cpu"]));
    for part in [
        "torch.save zip (PyTorch >= 1.6) format, 4 tensors saved on cuda:0",
        "loaded onto cpu (--map-location cpu)",
        "conv1: GCNConv 1433 -> 16",
        "conv2: GCNConv 16 -> 7",
        "model inferred from the names and shapes",
        "wrote cora_gcn_state_dict_cuda0.safetensors (PyG-named tensors) and cora_gcn_state_dict_cuda0.json (config)",
    ] {
        assert!(stdout.contains(part), "missing {part:?} in:\n{stdout}");
    }
    // The written pair runs in predict and gives PyG's logits.
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
    let out = dir.path().join("out.safetensors");
    ok(&workbook(
        &[
            "predict",
            "--config",
            "cora_gcn_state_dict_cuda0.json",
            "--weights",
            "cora_gcn_state_dict_cuda0.safetensors",
            "--graph",
            graph.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        dir.path(),
    ));
    let ours = tensor_file::read(&out, &Device::Cpu).unwrap();
    let reference = tensor_file::read(&fixture("cora_gcn_trained"), &Device::Cpu).unwrap();
    let diff = max_diff(&ours.tensors["out"], &reference.tensors["expected.logits"]);
    assert!(diff <= 1e-5, "{diff}");

    // The legacy format and a DataParallel file, onto a simulated device.
    let stdout = ok(&workbook(
        &[
            "import",
            pt.join("cora_gcn_dataparallel.pt").to_str().unwrap(),
            "--map-location",
            "sim:1",
            "--out",
            "dp.safetensors",
        ],
        dir.path(),
    ));
    assert!(
        stdout.contains("loaded onto sim:1") && stdout.contains("every key starts with 'module.'"),
        "{stdout}"
    );
    ok(&workbook(
        &[
            "import",
            pt.join("cora_gcn_state_dict_legacy.pt").to_str().unwrap(),
            "--out",
            "legacy.safetensors",
        ],
        dir.path(),
    ));
    // Refusals: a pickled module, a bad map location, an output onto the input.
    let err = failure(&workbook(
        &[
            "import",
            pt.join("cora_gcn_whole_module.pt").to_str().unwrap(),
        ],
        dir.path(),
    ));
    assert!(
        err.contains("refused: the file names the Python global"),
        "{err}"
    );
    let err = failure(&import(&["--map-location", "gpu"]));
    assert!(err.contains("unknown device 'gpu'"), "{err}");
    let copy = dir.path().join("copy.pt");
    std::fs::copy(&cuda0, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let err = failure(&workbook(
        &[
            "import",
            "copy.pt",
            "--map-location",
            "cpu",
            "--out",
            "copy.pt",
        ],
        dir.path(),
    ));
    assert!(err.contains("--out"), "{err}");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        before,
        "the input is untouched"
    );
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
        err.contains("use karate, cora, citeseer, csbm:<nodes> or knn:<nodes>"),
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

#[test]
fn train_on_a_simulated_device_prints_the_ledger_and_saves_a_portable_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("gcn.safetensors");
    let out = workbook(
        &[
            "--device",
            "sim:1",
            "train",
            "--model",
            "gcn",
            "--epochs",
            "3",
            "--ledger",
            "--save",
            ckpt.to_str().unwrap(),
        ],
        dir.path(),
    );
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("device: sim:1 (sim:1 asked for explicitly (--device)"),
        "{stderr}"
    );
    assert!(stderr.contains("transfer ledger (sim:1):"), "{stderr}");
    assert!(stderr.contains("karate.x"), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("metrics (loss, 3 accuracies)") && l.contains("sim:1 -> cpu")),
        "{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["device"], "sim:1");
    let phases: Vec<&str> = summary["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["load", "init", "epoch 1", "epoch 2", "epoch 3", "save"]
    );
    // Written from sim:1, loaded on the cpu (map_location) by `inspect`.
    let shown = ok(&workbook(
        &[
            "--device",
            "cpu",
            "inspect",
            "--checkpoint",
            ckpt.to_str().unwrap(),
        ],
        dir.path(),
    ));
    assert!(
        shown.contains("conv1.lin.weight") && shown.contains("cpu"),
        "{shown}"
    );
    assert!(shown.contains("[16, 34]"), "{shown}");
}

#[test]
fn device_errors_list_the_valid_forms() {
    let dir = tempfile::tempdir().unwrap();
    let err = failure(&workbook(
        &["--device", "gpu0", "train", "--model", "gcn"],
        dir.path(),
    ));
    assert!(err.contains("sim:N") && err.contains("cuda:N"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(["inspect", "--dataset", "karate"])
        .env("WORKBOOK_DEVICE", "sim:7")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let shown = ok(&out);
    assert!(
        shown.contains("edge_index") && shown.contains("sim:7"),
        "{shown}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("from WORKBOOK_DEVICE=sim:7"), "{stderr}");
}

#[test]
fn serve_demo_shows_the_race_serves_without_mismatches_and_never_mixes_steps() {
    let dir = tempfile::tempdir().unwrap();
    let text = ok(&workbook(
        &[
            "serve-demo",
            "--threads",
            "1,3",
            "--requests",
            "60",
            "--steps",
            "5",
        ],
        dir.path(),
    ));
    // The race, both symptoms: with the anti-pattern thread A got B's attention and B's
    // assertion failed; with GatV2Conv every thread got its own.
    assert!(
        text.contains(
            "thread A asked for 'karate' and got the attention of 'karate (80% of edges)'"
        ) && text.contains("WRONG, silently: another thread's attention"),
        "{text}"
    );
    assert!(
        text.contains("thread B asked for 'karate (80% of edges)' and got no attention: FAILED: assert alpha is not None"),
        "{text}"
    );
    assert!(
        text.contains("the anti-pattern handed a thread another thread's attention and failed another thread's assertion; the stateless layer gave every thread its own, in both orders"),
        "{text}"
    );
    // One table row per thread count, all equal to the sequential answers.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() == 6 && w[1] == "60")
        .collect();
    assert_eq!(
        rows.iter().map(|w| w[0]).collect::<Vec<_>>(),
        ["1", "3"],
        "{text}"
    );
    assert!(rows.iter().all(|w| w[5] == "0"), "{text}");
    // Training while serving: the live Vars mix steps, snapshots never do.
    assert!(text.contains("logits match no step"), "{text}");
    assert!(
        text.contains("snapshot server, mid-step: every parameter from step 0"),
        "{text}"
    );
    assert!(text.contains("0 mixed, 0 inconsistent"), "{text}");

    let json = ok(&workbook(
        &[
            "serve-demo",
            "--threads",
            "2",
            "--requests",
            "20",
            "--steps",
            "3",
            "--json",
        ],
        dir.path(),
    ));
    let summary: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let race = &summary["race_demo"]["a_reads_first"];
    assert_eq!(race["schedule"], "AReadsFirst");
    assert_eq!(race["stateful"]["outcomes"][0]["asked_for"], "karate");
    assert_eq!(
        race["stateful"]["outcomes"][0]["got"],
        "karate (80% of edges)"
    );
    assert!(race["stateful"]["outcomes"][1]["error"]
        .as_str()
        .is_some_and(|e| e.contains("alpha is not None")));
    assert!(race["stateless"]["outcomes"][1]["error"].is_null());
    assert_eq!(summary["serving"][0]["threads"], 2);
    assert_eq!(summary["serving"][0]["mismatches"], 0);
    assert_eq!(summary["serve_while_training"]["mixed_reads"], 0);
    assert_eq!(summary["torn_read_demo"]["snapshot"]["tag"]["steps"][0], 0);

    let err = failure(&workbook(&["serve-demo", "--threads", "0"], dir.path()));
    assert!(err.contains("at least 1"), "{err}");
}

#[test]
fn export_runs_the_preflight_then_writes_onnx_and_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let config = repo().join("configs/pyg/cora_gatv2.json");
    let weights = fixture("cora_gatv2_trained");
    let onnx_out = dir.path().join("gatv2.onnx");
    let stdout = ok(&workbook(
        &[
            "export",
            "--model",
            config.to_str().unwrap(),
            "--weights",
            weights.to_str().unwrap(),
            "--format",
            "onnx",
            "--data",
            "cora",
            "--attention",
            "--out",
            onnx_out.to_str().unwrap(),
        ],
        dir.path(),
    ));
    for needle in [
        "pre-flight (example graph 'Cora')",
        "ok  devices: 12 parameter(s) and 0 buffer(s) all on cpu",
        "ok  dtype: every parameter is float32",
        "ok  mode: eval",
        "ok  forward pass: logits [2708, 7]",
        "ONNX opset 18",
        "outputs logits, attention_edge_index, attention_conv1, attention_conv2",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    let proto = workbook::export::onnx::read(&onnx_out).unwrap();
    assert_eq!(proto.graph.unwrap().input[1].name, "edge_index");

    // safetensors: PyG names and a config beside them, loadable as a checkpoint
    let st_out = dir.path().join("gatv2.safetensors");
    let stdout = ok(&workbook(
        &[
            "export",
            "--model",
            config.to_str().unwrap(),
            "--weights",
            weights.to_str().unwrap(),
            "--format",
            "safetensors",
            "--out",
            st_out.to_str().unwrap(),
        ],
        dir.path(),
    ));
    assert!(
        stdout.contains("pre-flight (example graph 'ring10')"),
        "{stdout}"
    );
    assert!(dir.path().join("gatv2.json").is_file());
    let file = tensor_file::read(&st_out, &Device::Cpu).unwrap();
    assert!(file.tensors.contains_key("conv1.lin_l.weight"));
    assert!(!file.tensors.contains_key("expected.logits"));
    // the checkpoint carries its config, so --model is optional on re-export
    let again = dir.path().join("again.onnx");
    ok(&workbook(
        &[
            "export",
            "--weights",
            st_out.to_str().unwrap(),
            "--format",
            "onnx",
            "--out",
            again.to_str().unwrap(),
        ],
        dir.path(),
    ));

    // a pre-flight failure names the problem and writes nothing
    let bad = dir.path().join("bad.onnx");
    let err = failure(&workbook(
        &[
            "export",
            "--model",
            config.to_str().unwrap(),
            "--weights",
            weights.to_str().unwrap(),
            "--format",
            "onnx",
            "--data",
            "karate",
            "--out",
            bad.to_str().unwrap(),
        ],
        dir.path(),
    ));
    assert!(
        err.contains("34 features per node but the model takes in_channels = 1433"),
        "{err}"
    );
    assert!(!bad.exists());
}

#[test]
fn bench_says_how_many_freed_buffers_it_may_keep() {
    let dir = tempfile::tempdir().unwrap();
    let bench = |keep: &str| {
        Command::new(env!("CARGO_BIN_EXE_workbook"))
            .args([
                "bench",
                "--model",
                "gcn",
                "--dataset",
                "karate",
                "--epochs",
                "1",
            ])
            .current_dir(dir.path())
            .env("WORKBOOK_DEVICE", "cpu")
            .env("WORKBOOK_KEEP_BUFFERS", keep)
            .output()
            .expect("the binary runs")
    };
    let out = bench("64M");
    assert_eq!(json_lines(&ok(&out))[0]["keep_buffers_mb"], 64);
    // a value that is not a size: said, and nothing kept
    let out = bench("lots");
    assert_eq!(json_lines(&ok(&out))[0]["keep_buffers_mb"], 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("WORKBOOK_KEEP_BUFFERS") && err.contains("6G"),
        "{err}"
    );
}

#[test]
fn bench_prints_one_json_line_per_model_with_the_promised_keys() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--model",
        "gcn,gatv2",
        "--dataset",
        "csbm:200",
        "--epochs",
        "2",
        "--warmup",
        "1",
        "--threads",
        "1",
    ];
    let stdout = ok(&workbook(&args, dir.path()));
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 2, "{stdout}");
    for (line, model) in lines.iter().zip(["gcn", "gatv2"]) {
        for key in [
            "model",
            "dataset",
            "device",
            "threads",
            "nodes",
            "edges",
            "forward_ms",
            "epoch_ms",
            "peak_rss_mb",
            "peak_mem_mb",
        ] {
            assert!(line.get(key).is_some(), "missing {key} in {line}");
        }
        assert_eq!(line["model"], model);
        assert_eq!(line["device"], "cpu");
        assert_eq!(line["threads"], 1);
        assert_eq!(line["nodes"], 200);
        assert!(line["epoch_ms"].as_f64().unwrap() > 0.0);
        assert_eq!(line["keep_buffers_mb"], 0, "nothing kept unless asked");
    }

    // a sweep draws the scaling figure
    let svg = dir.path().join("scaling.svg");
    let args = [
        "bench",
        "--model",
        "gcn",
        "--sweep",
        "100,300",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--figure",
        svg.to_str().unwrap(),
    ];
    assert_eq!(ok(&workbook(&args, dir.path())).lines().count(), 2);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

    // bad input: clear errors
    let err = failure(&workbook(
        &["bench", "--model", "gcn", "--epochs", "0"],
        dir.path(),
    ));
    assert!(err.contains("--epochs"), "{err}");
    let err = failure(&workbook(
        &["bench", "--model", "gcn", "--figure", "x.svg"],
        dir.path(),
    ));
    assert!(err.contains("--sweep"), "{err}");
}

#[test]
fn bench_reports_serving_throughput_per_thread_count_on_a_simulated_device() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--device",
        "sim:1",
        "bench",
        "--model",
        "gatv2",
        "--dataset",
        "karate",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--serving-threads",
        "1,3",
        "--serving-requests",
        "30",
    ];
    let stdout = ok(&workbook(&args, dir.path()));
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 3, "{stdout}");
    assert_eq!(lines[0]["device"], "sim:1");
    for (line, threads) in lines[1..].iter().zip([1, 3]) {
        assert_eq!(line["bench"], "serving");
        assert_eq!(line["serving_threads"], threads);
        assert_eq!(line["requests"], 30);
        assert_eq!(line["mismatches"], 0);
        assert!(line["requests_per_second"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn figures_draws_the_books_measured_figures() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("figs");
    let args = [
        "figures",
        "--out",
        out.to_str().unwrap(),
        "--epochs",
        "2",
        "--requests",
        "8",
    ];
    ok(&workbook(&args, dir.path()));
    for name in [
        "cora_training_curves.svg",
        "ledger_bytes.svg",
        "serving_throughput.svg",
        "karate_gatv2.svg",
        "prefetch_timeline.svg",
    ] {
        let svg = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{name}");
    }
    let ledger = std::fs::read_to_string(out.join("ledger_bytes.svg")).unwrap();
    assert!(ledger.contains("graph moved every epoch"), "{ledger}");
    // The prefetch timeline comes with the caption the book includes, with this run's numbers.
    let caption = std::fs::read_to_string(out.join("prefetch_timeline.md")).unwrap();
    assert!(
        caption.contains("the timed epoch with the median time") && caption.contains(" MB in "),
        "{caption}"
    );
}

#[test]
fn figures_draws_the_per_rank_figure_from_recorded_runs_and_names_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("figs");
    let runs = dir.path().join("runs.jsonl");
    let run = |n: usize, ms: &str| {
        format!(
            r#"{{"model":"gcn","dataset":"csbm:20000","batch_size_per_rank":4,"num_neighbors":[10,10],"world_size":{n},"steps_per_epoch":{},"rank_epoch_ms":[{ms}]}}"#,
            25 / n
        )
    };
    std::fs::write(
        &runs,
        format!(
            "# machine, command, date\n{}\n{}\n",
            run(2, "10.0,38.0"),
            run(1, "18.0")
        ),
    )
    .unwrap();
    let args = |runs: &Path| {
        vec![
            "figures".to_string(),
            "--only".into(),
            "ranks".into(),
            "--out".into(),
            out.to_str().unwrap().into(),
            "--rank-runs".into(),
            runs.to_str().unwrap().into(),
        ]
    };
    fn refs(a: &[String]) -> Vec<&str> {
        a.iter().map(String::as_str).collect()
    }
    ok(&workbook(&refs(&args(&runs)), dir.path()));
    let svg = std::fs::read_to_string(out.join("rank_times.svg")).unwrap();
    assert!(
        svg.contains("rank 1") && svg.contains("csbm:20000"),
        "{svg}"
    );
    // A run whose times do not match its ranks, and a line that is not a run, are named.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, format!("{}\n", run(2, "10.0"))).unwrap();
    let err = failure(&workbook(&refs(&args(&bad)), dir.path()));
    assert!(
        err.contains("one finite, non-negative time per rank"),
        "{err}"
    );
    std::fs::write(&bad, "{\"world_size\": 2}\n").unwrap();
    let err = failure(&workbook(&refs(&args(&bad)), dir.path()));
    assert!(
        err.contains("bad.jsonl:1") && err.contains("rank_epoch_ms"),
        "{err}"
    );
    // Asked for by name without recorded runs where the book keeps them: an error, not a skip.
    let err = failure(&workbook(
        &["figures", "--only", "ranks", "--out", out.to_str().unwrap()],
        dir.path(),
    ));
    assert!(err.contains("--rank-runs"), "{err}");
}

#[test]
fn train_by_mini_batches_reports_batches_and_per_phase_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let out = workbook(
        &[
            "train",
            "--model",
            "gcn",
            "--dataset",
            "karate",
            "--epochs",
            "2",
            "--batch-size",
            "2",
            "--num-neighbors",
            "5,-1",
            "--prefetch",
            "--device",
            "sim:1",
        ],
        dir.path(),
    );
    let line = json_lines(&ok(&out)).remove(0);
    assert_eq!(line["batches_per_epoch"], 2, "{line}"); // karate: 4 training nodes
    assert_eq!(line["num_neighbors"], serde_json::json!([5, -1]), "{line}");
    let phases: Vec<&str> = line["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert!(
        phases.contains(&"init") && phases.contains(&"epoch *"),
        "{line}"
    );
    assert!(line["bytes_per_step"].as_f64().unwrap() > 0.0, "{line}");
    // One count per layer, or a named error.
    let out = workbook(
        &[
            "train",
            "--model",
            "gcn",
            "--epochs",
            "1",
            "--batch-size",
            "2",
            "--num-neighbors",
            "5",
        ],
        dir.path(),
    );
    let err = failure(&out);
    assert!(
        err.contains("num_neighbors has 1 hop(s) but the model has 2"),
        "{err}"
    );
    // --num-neighbors without --batch-size is refused by the parser.
    let out = workbook(
        &["train", "--model", "gcn", "--num-neighbors", "5,5"],
        dir.path(),
    );
    assert!(failure(&out).contains("--batch-size"));
}

#[test]
fn a_sweep_with_mini_batches_draws_their_time_and_memory_beside_full_batch() {
    let dir = tempfile::tempdir().unwrap();
    let figure = dir.path().join("scaling.svg");
    let out = workbook(
        &[
            "bench",
            "--model",
            "gcn",
            "--sweep",
            "300,600",
            "--epochs",
            "1",
            "--warmup",
            "0",
            "--batch-size",
            "16",
            "--device",
            "sim:1",
            "--figure",
            figure.to_str().unwrap(),
        ],
        dir.path(),
    );
    let lines = json_lines(&ok(&out));
    let mini: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["bench"] == "minibatch").collect();
    assert_eq!(
        mini.len(),
        2,
        "one mini-batch line per graph size: {lines:?}"
    );
    for l in &mini {
        assert!(l["epoch_ms"].as_f64().unwrap() > 0.0, "{l}");
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(l["memory_added_mb"].as_f64().is_some(), "{l}");
        }
    }
    let svg = std::fs::read_to_string(&figure).unwrap();
    assert!(svg.contains("gcn mini-batch 16 (workbook, sim:1)"), "{svg}");
    assert!(svg.contains("gcn (workbook, sim:1)"), "{svg}");
}

#[test]
fn bench_redraws_the_scaling_figure_from_earlier_runs_without_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("sweep.jsonl");
    let pyg = dir.path().join("pyg.jsonl");
    std::fs::write(
        &runs,
        concat!(
            r#"{"impl":"workbook","model":"gcn","device":"cpu","nodes":1000,"edges":9814,"epoch_ms":1.2,"peak_mem_mb":4.3}"#,
            "\n",
            r#"{"impl":"workbook","bench":"minibatch","batch_size":128,"model":"gcn","device":"cpu","nodes":1000,"edges":9814,"epoch_ms":1.4,"memory_added_mb":0.0}"#,
            "\n",
            r#"{"impl":"workbook","model":"gcn","device":"cpu","nodes":10000,"edges":99814,"epoch_ms":17.3,"peak_mem_mb":14.5}"#,
            "\n",
        ),
    )
    .unwrap();
    std::fs::write(
        &pyg,
        r#"{"impl":"pyg","model":"gcn","device":"cpu","nodes":1000,"edges":9814,"epoch_ms":3.0,"peak_mem_mb":19}"#,
    )
    .unwrap();
    let svg = dir.path().join("scaling.svg");
    let args = [
        "bench",
        "--figure",
        svg.to_str().unwrap(),
        "--figure-runs",
        runs.to_str().unwrap(),
        "--figure-pyg",
        pyg.to_str().unwrap(),
    ];
    ok(&workbook(&args, dir.path()));
    let text = std::fs::read_to_string(&svg).unwrap();
    for label in [
        "gcn (workbook, cpu)",
        "gcn mini-batch 128 (workbook, cpu)",
        "gcn (PyG, cpu)",
        "10k",
    ] {
        assert!(text.contains(label), "{label} missing from the figure");
    }
    // A file without workbook runs is an error that says so, not an empty figure.
    let err = failure(&workbook(
        &[
            "bench",
            "--figure",
            svg.to_str().unwrap(),
            "--figure-runs",
            pyg.to_str().unwrap(),
        ],
        dir.path(),
    ));
    assert!(err.contains("no workbook runs"), "{err}");
    // Measuring and redrawing at once makes no sense.
    let err = failure(&workbook(
        &[
            "bench",
            "--sweep",
            "1000",
            "--figure",
            svg.to_str().unwrap(),
            "--figure-runs",
            runs.to_str().unwrap(),
        ],
        dir.path(),
    ));
    assert!(err.contains("--figure-runs"), "{err}");
}

/// `data --reorder` writes the renumbered graph, `bench --reorder` times it, and a node order
/// the library does not have is refused with the ones it has.
#[test]
fn data_and_bench_take_a_node_order() {
    use workbook::reorder::edge_locality;
    let dir = tempfile::tempdir().unwrap();
    let (plain, ordered) = (dir.path().join("a.st"), dir.path().join("b.st"));
    for (out, extra) in [(&plain, None), (&ordered, Some("rcm"))] {
        let mut args = vec![
            "data",
            "--dataset",
            "knn:3000",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra.iter().flat_map(|o| ["--reorder", *o]));
        ok(&workbook(&args, dir.path()));
    }
    let load = |p: &Path| workbook::Graph::load(p, &Device::Cpu).unwrap();
    let (a, b) = (load(&plain), load(&ordered));
    assert_eq!(
        (a.num_nodes(), a.num_edges()),
        (b.num_nodes(), b.num_edges())
    );
    let gap = |g: &workbook::Graph| edge_locality(g.edge_index()).mean_gap;
    assert!(gap(&b) * 10.0 < gap(&a), "{} vs {}", gap(&b), gap(&a));

    let run = ok(&workbook(
        &[
            "bench",
            "--model",
            "gcn",
            "--dataset",
            "knn:500",
            "--reorder",
            "rabbit",
            "--epochs",
            "1",
            "--warmup",
            "0",
        ],
        dir.path(),
    ));
    assert!(run.contains("\"dataset\":\"knn:500@rabbit\""), "{run}");
    let err = failure(&workbook(
        &[
            "data",
            "--dataset",
            "cora",
            "--reorder",
            "metis",
            "--out",
            "x.st",
        ],
        dir.path(),
    ));
    assert!(err.contains("rcm") && err.contains("rabbit"), "{err}");
}
