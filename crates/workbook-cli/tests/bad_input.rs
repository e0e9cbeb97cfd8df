//! Issue 34: the CLI loses nothing and never aborts, on any file or size a user passes. One test
//! per case the issue lists; each performs the attack or the mistake, asserts the error text,
//! and that every file that existed before is byte-identical afterwards (nothing added either,
//! where nothing may be written).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use workbook::candle_core::{DType, Device, Tensor};
use workbook::{checkpoint, datasets, tensor_file, Graph, Model, ModelConfig};

/// Runs the binary in `cwd` (through `sh` with `umask` when given) with a deadline; returns
/// (exit code, stdout, stderr). A run past the deadline is killed and fails the test.
fn run_with(args: &[&str], cwd: &Path, umask: Option<&str>) -> (Option<i32>, String, String) {
    let bin = env!("CARGO_BIN_EXE_workbook");
    let mut cmd = match umask {
        Some(mask) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("umask {mask} && exec \"$0\" \"$@\""))
                .arg(bin)
                .args(args);
            c
        }
        None => {
            let mut c = Command::new(bin);
            c.args(args);
            c
        }
    };
    let mut child = cmd
        .current_dir(cwd)
        .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
        .env("WORKBOOK_DEVICE", "cpu")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`workbook {}` still ran after 120 s", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code(),
        reader.join().unwrap(),
        err_reader.join().unwrap(),
    )
}

fn run(args: &[&str], cwd: &Path) -> (Option<i32>, String, String) {
    run_with(args, cwd, None)
}

/// Every regular file under `dir` (symbolic links as `-> target`, folders by their files),
/// with its bytes: what must not change.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                files.insert(path, format!("-> {}", target.display()).into_bytes());
            } else if meta.is_dir() {
                files.insert(path.clone(), b"<dir>".to_vec());
                stack.push(path);
            } else if meta.is_file() && meta.len() > 1 << 28 {
                // the sparse terabyte of the size test: its length and modification time
                let stamp = format!("{} bytes, modified {:?}", meta.len(), meta.modified().ok());
                files.insert(path, stamp.into_bytes());
            } else if meta.is_file() {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            } else {
                files.insert(path, b"<special>".to_vec());
            }
        }
    }
    files
}

/// Runs `args` in `dir`, which must fail cleanly (exit 1 or 2, no panic, no abort) with every
/// one of `needles` in its message and leave every file under `dir` as it was.
fn refused_in(dir: &Path, args: &[&str], needles: &[&str]) -> String {
    let before = snapshot(dir);
    let (code, _, err) = run(args, dir);
    let cmd = format!("workbook {}", args.join(" "));
    assert!(
        matches!(code, Some(1) | Some(2)),
        "`{cmd}` should fail with exit code 1 or 2 (got {code:?}; None is a signal, an abort):\n{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("memory allocation"),
        "`{cmd}`: a panic or an abort instead of an error:\n{err}"
    );
    for n in needles {
        assert!(
            err.contains(n),
            "`{cmd}`: the error should say '{n}':\n{err}"
        );
    }
    let after = snapshot(dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "`{cmd}` added or removed files"
    );
    for (path, bytes) in &before {
        assert!(after[path] == *bytes, "`{cmd}` changed {}", path.display());
    }
    err
}

fn ok_in(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(args, dir);
    assert_eq!(
        code,
        Some(0),
        "`workbook {}` failed:\n{err}",
        args.join(" ")
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A GCN for karate (34 features, 4 classes): its config file and a checkpoint of it.
fn karate_model(dir: &Path, seed: u64) -> (PathBuf, PathBuf) {
    karate_model_of(dir, seed, 8)
}

fn karate_model_of(dir: &Path, seed: u64, hidden: usize) -> (PathBuf, PathBuf) {
    let config = ModelConfig::gcn(34, hidden, 4);
    let json = dir.join(format!("gcn{seed}.json"));
    std::fs::write(&json, serde_json::to_string(&config).unwrap()).unwrap();
    let (model, _) = Model::init(config, seed, &Device::Cpu).unwrap();
    let weights = dir.join(format!("gcn{seed}.safetensors"));
    checkpoint::save(&model, &weights).unwrap();
    (json, weights)
}

fn karate_graph(dir: &Path) -> PathBuf {
    let path = dir.join("karate.safetensors");
    datasets::karate(&Device::Cpu).unwrap().save(&path).unwrap();
    path
}

/// A copy of the Planetoid Cora files shipped with the library.
fn cora_dir(into: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workbook/data/planetoid");
    std::fs::create_dir_all(into).unwrap();
    for part in ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"] {
        let name = format!("ind.cora.{part}");
        std::fs::copy(src.join(&name), into.join(&name)).unwrap();
    }
    into.to_path_buf()
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Case 1: `predict` with one layer 16777216 wide on a 100 000-node graph aborted with
/// `memory allocation of 6710886400000 bytes failed`. Now every command estimates first (one
/// estimator, `workbook::limits`), names the number, the estimate and the limit, and
/// `--max-memory` moves the limit.
#[test]
fn a_size_that_cannot_fit_is_refused_by_the_one_estimate_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // the issue's model, with real weights ([16777216, 1]: 64 MiB)
    let wide = d.join("wide.json");
    std::fs::write(
        &wide,
        r#"{"layer":"GCNConv","in_channels":1,"out_channels":16777216,"bias":false}"#,
    )
    .unwrap();
    let weights = d.join("wide.safetensors");
    let w = Tensor::zeros((16_777_216, 1), DType::F32, &Device::Cpu).unwrap();
    tensor_file::write(&weights, &[("lin.weight".into(), w)], None).unwrap();
    // the issue's graph: 100 000 nodes, one feature
    let n = 100_000usize;
    let graph = d.join("big.safetensors");
    let x = Tensor::ones((n, 1), DType::F32, &Device::Cpu).unwrap();
    let pairs: Vec<i64> = (0..10).chain(1..11).collect();
    let ei = Tensor::from_vec(pairs, (2, 10), &Device::Cpu).unwrap();
    tensor_file::write(&graph, &[("x".into(), x), ("edge_index".into(), ei)], None).unwrap();
    let out = d.join("out.safetensors");
    std::fs::write(&out, b"an earlier prediction").unwrap();

    let predict = [
        "predict",
        "--config",
        s(&wide),
        "--weights",
        s(&weights),
        "--graph",
        s(&graph),
        "--out",
        s(&out),
    ];
    let err = refused_in(
        d,
        &predict,
        &[
            "(100000 nodes, 10 edges)",
            "heads × out_channels 1 × 16777216",
            "needs about 24.4 TB of memory, more than the limit of",
            "available (MemAvailable in /proc/meminfo)",
            "--max-memory",
        ],
    );
    assert!(err.contains(s(&graph)), "{err}");
    // a limit set lower is the limit named
    let mut low = predict.to_vec();
    low.extend(["--max-memory", "1G"]);
    refused_in(
        d,
        &low,
        &["more than the limit of 1.0 GB (set with --max-memory)"],
    );

    // export: the pre-flight pass on its 10-node ring needs 2.5 GB at this width
    refused_in(
        d,
        &[
            "export",
            "--model",
            s(&wide),
            "--weights",
            s(&weights),
            "--format",
            "onnx",
            "--out",
            "wide.onnx",
            "--max-memory",
            "1G",
        ],
        &[
            "the pre-flight forward pass on a 10-node ring (10 nodes, 10 edges)",
            "1 × 16777216",
            "limit of 1.0 GB",
        ],
    );
    // serving keeps every answer twice: a million requests on Cora is terabytes
    refused_in(
        d,
        &["serve-demo", "--dataset", "cora", "--requests", "1000000"],
        &[
            "1000000 requests with up to 8 threads on Cora (2708 nodes, 10556 edges)",
            "needs about",
        ],
    );
    // every neighbour of every hop: the batch is the whole graph, bounded by it
    refused_in(
        d,
        &[
            "train",
            "--model",
            "gatv2",
            "--dataset",
            "cora",
            "--batch-size",
            "140",
            "--num-neighbors=-1,-1",
            "--max-memory",
            "64M",
        ],
        &[
            "batches of 140 seeds with num_neighbors [-1, -1]",
            "limit of 64.0 MB",
        ],
    );
    // loading a checkpoint: the file's size against the cap the limit gives
    let (_, ck) = karate_model(d, 0);
    refused_in(
        d,
        &["inspect", "--checkpoint", s(&ck), "--max-memory", "1K"],
        &[
            s(&ck),
            "more than the cap of 341 bytes",
            "memory limit is 1.0 KB (set with --max-memory)",
        ],
    );
    // and a limit raised lets through what a lower one refuses (512 hidden channels: the
    // files are read within 300K, the forward pass needs more)
    let g = karate_graph(d);
    let (config, ck) = karate_model_of(d, 1, 512);
    let small = [
        "predict",
        "--config",
        s(&config),
        "--weights",
        s(&ck),
        "--graph",
        s(&g),
        "--out",
        "karate_out.safetensors",
    ];
    let mut tight = small.to_vec();
    tight.extend(["--max-memory", "300K"]);
    refused_in(
        d,
        &tight,
        &[
            "predict on",
            "(34 nodes, 156 edges) with layer 1 (GCNConv: in_channels 34, heads × out_channels 1 × 512)",
            "limit of 300.0 KB",
        ],
    );
    let mut raised = small.to_vec();
    raised.extend(["--max-memory", "64G"]);
    ok_in(d, &raised);
    assert!(d.join("karate_out.safetensors").is_file());
}

/// Case 2: `export --format safetensors` replaced `model.safetensors`, then failed to replace
/// `model.json`: a pair that did not belong together, and the old model gone. Now a set of
/// files is written whole or not at all; the test makes the second rename fail (the target
/// is a non-empty folder) and checks the old pair; a report (three files) likewise.
#[test]
fn a_set_of_files_is_replaced_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, ck0) = karate_model(d, 0);
    let (_, ck1) = karate_model(d, 1);
    let export = |ck: &Path| {
        vec![
            "export".to_string(),
            "--weights".into(),
            s(ck).into(),
            "--format".into(),
            "safetensors".into(),
            "--out".into(),
            "model.safetensors".into(),
        ]
    };
    let args0 = export(&ck0);
    let args0: Vec<&str> = args0.iter().map(String::as_str).collect();
    ok_in(d, &args0);
    let old = std::fs::read(d.join("model.safetensors")).unwrap();
    // model.json becomes a folder with a file in it: its rename must fail
    std::fs::remove_file(d.join("model.json")).unwrap();
    std::fs::create_dir(d.join("model.json")).unwrap();
    std::fs::write(d.join("model.json/notes.txt"), b"mine").unwrap();
    let args1 = export(&ck1);
    let args1: Vec<&str> = args1.iter().map(String::as_str).collect();
    refused_in(
        d,
        &args1,
        &[
            "model.json: cannot be replaced (it is a directory",
            "nothing was changed: ",
            "model.safetensors restored",
        ],
    );
    assert_eq!(std::fs::read(d.join("model.safetensors")).unwrap(), old);
    // once the way is clear, both files are the new model's
    std::fs::remove_dir_all(d.join("model.json")).unwrap();
    ok_in(d, &args1);
    assert_ne!(std::fs::read(d.join("model.safetensors")).unwrap(), old);
    let back = checkpoint::load(&d.join("model.safetensors"), &Device::Cpu).unwrap();
    let json: ModelConfig =
        serde_json::from_slice(&std::fs::read(d.join("model.json")).unwrap()).unwrap();
    assert_eq!(back.config(), &json);

    // the default command's report: three files, one unit
    let report = d.join("report");
    ok_in(d, &["demo", "--epochs", "2", "--report-dir", s(&report)]);
    std::fs::remove_file(report.join("report.md")).unwrap();
    std::fs::create_dir(report.join("report.md")).unwrap();
    std::fs::write(report.join("report.md/keep"), b"x").unwrap();
    refused_in(
        d,
        &["demo", "--epochs", "3", "--report-dir", s(&report)],
        &[
            "report.md: cannot be replaced (it is a directory",
            "training_curves.svg restored",
            "report.json restored",
        ],
    );
}

/// Case 3: `predict --graph X --out X` overwrote its own input, and so did other pairs. Now an
/// output that is the same file as an input, through any path, link or hard link, is refused
/// before anything is written.
#[test]
fn an_output_that_is_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (config, ck) = karate_model(d, 0);
    let graph = karate_graph(d);
    let predict = |out: &Path| {
        [
            "predict".to_string(),
            "--config".into(),
            s(&config).into(),
            "--weights".into(),
            s(&ck).into(),
            "--graph".into(),
            s(&graph).into(),
            "--out".into(),
            s(out).into(),
        ]
    };
    let args = predict(&graph);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused_in(
        d,
        &args,
        &[
            "is the same file as the input --graph",
            "give --out another path",
        ],
    );
    // the same file under another name: ./x, a symbolic link, a hard link
    let dotted = d.join(".").join("karate.safetensors");
    let args = predict(&dotted);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused_in(d, &args, &["the same file as the input --graph"]);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&ck, d.join("link-to-weights")).unwrap();
        let args = predict(&d.join("link-to-weights"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_in(d, &args, &["the same file as the input --weights"]);
        std::fs::hard_link(&config, d.join("hard-config")).unwrap();
        let args = predict(&d.join("hard-config"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_in(d, &args, &["the same file as the input --config"]);
    }
    // export: the weights themselves, or the config that would be written beside --out
    refused_in(
        d,
        &[
            "export",
            "--weights",
            s(&ck),
            "--format",
            "safetensors",
            "--out",
            s(&ck),
        ],
        &["the same file as the input --weights"],
    );
    refused_in(
        d,
        &[
            "export",
            "--model",
            s(&config),
            "--weights",
            s(&ck),
            "--format",
            "safetensors",
            "--out",
            s(&d.join("gcn0.weights")),
        ],
        &["gcn0.json", "is the same file as the input --model"],
    );
    // the dataset's own files
    let cora = cora_dir(&d.join("cora"));
    let x = cora.join("ind.cora.x");
    refused_in(
        d,
        &[
            "data",
            "--dataset",
            "cora",
            "--data-dir",
            s(&cora),
            "--out",
            s(&x),
        ],
        &["the same file as the input --data-dir"],
    );
    refused_in(
        d,
        &[
            "train",
            "--model",
            "gcn",
            "--dataset",
            "cora",
            "--data-dir",
            s(&cora),
            "--save",
            s(&cora.join("ind.cora.graph")),
        ],
        &["--save", "the same file as the input --data-dir"],
    );
    // bench: the figure over the PyG runs it reads
    let runs = d.join("runs.jsonl");
    std::fs::write(&runs, b"{\"impl\": \"pyg\"}\n").unwrap();
    refused_in(
        d,
        &[
            "bench",
            "--model",
            "gcn",
            "--sweep",
            "100",
            "--figure",
            s(&runs),
            "--figure-pyg",
            s(&runs),
        ],
        &["the same file as the input --figure-pyg"],
    );
}

/// A copy of `ck` with NaN and +inf in two of its parameters.
fn poisoned(ck: &Path, to: &Path) {
    let file = tensor_file::read(ck, &Device::Cpu).unwrap();
    let mut tensors: Vec<(String, Tensor)> = file.tensors.into_iter().collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, t) in tensors.iter_mut() {
        let poison = match name.as_str() {
            "conv1.lin.weight" => f32::NAN,
            "conv2.bias" => f32::INFINITY,
            _ => continue,
        };
        let mut v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        v[0] = poison;
        *t = Tensor::from_vec(v, t.dims(), &Device::Cpu).unwrap();
    }
    tensor_file::write(to, &tensors, Some(file.metadata)).unwrap();
}

/// Case 4: NaN or infinite weights gave all-NaN predictions, exit 0, no word. Now a model or a
/// graph holding them is refused with the tensors and counts (unless `--allow-non-finite`),
/// and a training run stops at the first epoch whose loss is not finite, with the cause.
#[test]
fn non_finite_weights_features_and_losses_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (config, ck) = karate_model(d, 0);
    let graph = karate_graph(d);
    let bad = d.join("nan.safetensors");
    poisoned(&ck, &bad);
    let predict = |weights: &Path, graph: &Path| {
        [
            "predict".to_string(),
            "--config".into(),
            s(&config).into(),
            "--weights".into(),
            s(weights).into(),
            "--graph".into(),
            s(graph).into(),
            "--out".into(),
            "out.safetensors".into(),
        ]
    };
    let args = predict(&bad, &graph);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let err = refused_in(
        d,
        &args,
        &[
            "2 tensor(s) hold NaN or infinite values: conv1.lin.weight (1 of 272 values), conv2.bias (1 of 4 values)",
            "--allow-non-finite",
        ],
    );
    assert!(err.contains(s(&bad)), "{err}");
    for cmd in [
        vec!["inspect", "--checkpoint", s(&bad)],
        vec![
            "export",
            "--weights",
            s(&bad),
            "--format",
            "onnx",
            "--out",
            "m.onnx",
        ],
    ] {
        refused_in(d, &cmd, &["conv1.lin.weight (1 of 272 values)"]);
    }
    // when asked for, it runs (and the predictions are NaN, as asked)
    let mut allowed = args.clone();
    allowed.push("--allow-non-finite");
    let (code, _, err) = run(&allowed, d);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: ") && err.contains("NaN or infinite values let in by --allow-non-finite: conv1.lin.weight (1 of 272 values)"),
        "{err}"
    );
    let out = tensor_file::read(&d.join("out.safetensors"), &Device::Cpu).unwrap();
    assert!(workbook::non_finite::count(&out.tensors["out"]).unwrap() > 0);

    // a graph with an infinite feature
    let mut g = tensor_file::read(&graph, &Device::Cpu).unwrap();
    let x = &g.tensors["x"];
    let mut v = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    v[5] = f32::NEG_INFINITY;
    let x = Tensor::from_vec(v, x.dims(), &Device::Cpu).unwrap();
    g.tensors.insert("x".into(), x);
    let inf_graph = d.join("inf.safetensors");
    let tensors: Vec<(String, Tensor)> = g.tensors.into_iter().collect();
    tensor_file::write(&inf_graph, &tensors, None).unwrap();
    let args = predict(&ck, &inf_graph);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused_in(
        d,
        &args,
        &["1 tensor(s) hold NaN or infinite values: x (1 of 1156 values)"],
    );

    // Cora with one NaN feature (the first value of ind.cora.allx: node 0, a training node)
    let cora = cora_dir(&d.join("cora"));
    let allx = cora.join("ind.cora.allx");
    let mut bytes = std::fs::read(&allx).unwrap();
    let one = 1f32.to_le_bytes();
    let at = bytes
        .windows(4)
        .position(|w| w == one)
        .expect("Cora's features are ones and zeros");
    bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&allx, bytes).unwrap();
    // GATv2: its ELU and softmax carry NaN to the loss (GCN's ReLU turns NaN into 0, and
    // its loss stays finite while its first layer's weights become NaN)
    let train = [
        "train",
        "--model",
        "gatv2",
        "--dataset",
        "cora",
        "--data-dir",
        s(&cora),
        "--epochs",
        "5",
        "--save",
        "trained.safetensors",
    ];
    refused_in(
        d,
        &train,
        &[
            "ind.cora.x, .tx and .allx in",
            "x (node features) (",
            "--allow-non-finite",
        ],
    );
    let mut let_in = train.to_vec();
    let_in.push("--allow-non-finite");
    refused_in(
        d,
        &let_in,
        &[
            "training stopped at epoch 1: the loss is NaN",
            "likely cause: the node features (x) hold",
        ],
    );
}

/// Case 5: a `--data-dir` that is a file, empty or incomplete fell back to the embedded Cora.
/// Now a folder given must hold the dataset; the error names what is missing.
#[test]
fn an_unusable_data_dir_is_an_error_naming_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("a-file");
    std::fs::write(&file, b"not a folder").unwrap();
    let empty = d.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let partial = cora_dir(&d.join("partial"));
    std::fs::remove_file(partial.join("ind.cora.graph")).unwrap();
    let missing = d.join("missing");
    for (data_dir, needles) in [
        (
            &file,
            vec!["a-file: is not a folder", "--data-dir takes the folder"],
        ),
        (
            &empty,
            vec![
                "lacks 8 of the 8 files of cora: ind.cora.x, ind.cora.tx",
                "leave out --data-dir to use the embedded copy of Cora",
            ],
        ),
        (
            &partial,
            vec!["lacks 1 of the 8 files of cora: ind.cora.graph."],
        ),
        (&missing, vec!["missing: cannot be used as the data folder"]),
    ] {
        let mut needles = needles.clone();
        needles.push("--data-dir cannot be used");
        for cmd in [
            vec![
                "train",
                "--model",
                "gcn",
                "--dataset",
                "cora",
                "--epochs",
                "1",
            ],
            vec!["data", "--dataset", "cora", "--out", "g.safetensors"],
            vec!["inspect", "--dataset", "cora"],
            vec!["serve-demo", "--dataset", "cora"],
        ] {
            let mut args = cmd.clone();
            args.extend(["--data-dir", s(data_dir)]);
            refused_in(d, &args, &needles);
        }
    }
    // complete, it is used; not given, the embedded copy is
    let full = cora_dir(&d.join("full"));
    let out = ok_in(d, &["inspect", "--dataset", "cora", "--data-dir", s(&full)]);
    assert!(out.contains("graph Cora on cpu"), "{out}");
    ok_in(d, &["inspect", "--dataset", "cora"]);
}

/// Case 6: `/dev/zero` (or any endless or huge file) as `--config`, `--weights` or `--graph`
/// was read until memory ran out. Now only regular files are read, within a cap checked
/// before reading.
#[test]
fn endless_blocking_and_huge_input_files_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (config, ck) = karate_model(d, 0);
    let graph = karate_graph(d);
    let predict = |c: &Path, w: &Path, g: &Path| {
        [
            "predict".to_string(),
            "--config".into(),
            s(c).into(),
            "--weights".into(),
            s(w).into(),
            "--graph".into(),
            s(g).into(),
            "--out".into(),
            "out.safetensors".into(),
        ]
    };
    let zero = Path::new("/dev/zero");
    let mut cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            predict(zero, &ck, &graph).to_vec(),
            vec!["/dev/zero: is a character device".into()],
        ),
        (
            predict(&config, zero, &graph).to_vec(),
            vec!["/dev/zero: is a character device".into()],
        ),
        (
            predict(&config, &ck, zero).to_vec(),
            vec!["/dev/zero: is a character device".into()],
        ),
        (
            predict(&config, d, &graph).to_vec(),
            vec![format!("{}: is a directory, not a regular file", s(d))],
        ),
    ];
    // a FIFO nobody writes to: opened, it would block for ever
    let fifo = d.join("pipe");
    if Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        cases.push((
            predict(&config, &ck, &fifo).to_vec(),
            vec![format!("{}: is a FIFO (named pipe)", s(&fifo))],
        ));
    }
    // huge regular files (sparse: no disk used): a 2 MiB config, a 1 TiB graph
    let big_config = d.join("big.json");
    std::fs::File::create(&big_config)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    cases.push((
        predict(&big_config, &ck, &graph).to_vec(),
        vec!["big.json: is 2.0 MB, more than the cap of 1.0 MB for a model config".into()],
    ));
    let huge = d.join("huge.safetensors");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    cases.push((
        predict(&config, &ck, &huge).to_vec(),
        vec![
            "huge.safetensors: is 1.0 TB, more than the cap of".into(),
            "loading takes about 3 times its size in memory".into(),
        ],
    ));
    cases.push((
        vec!["inspect".into(), "--checkpoint".into(), "/dev/zero".into()],
        vec!["/dev/zero: is a character device".into()],
    ));
    for (args, needles) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        refused_in(d, &args, &needles);
    }
}

/// Case 7: a `--out` that was a symbolic link was replaced by a regular file, and outputs were
/// created 0600 whatever the umask (and a replaced file's 0644 became 0600). Now new files get
/// the umask's mode, replaced ones keep theirs, and a link is written through only with
/// `--follow-symlinks`.
#[cfg(unix)]
#[test]
fn outputs_keep_modes_follow_the_umask_and_links_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // new files: 0o666 less the umask, as `cp` or `torch.save` make them
    for (mask, expected) in [("022", 0o644), ("027", 0o640), ("077", 0o600)] {
        let out = d.join(format!("g{mask}.safetensors"));
        let (code, _, err) = run_with(
            &["data", "--dataset", "karate", "--out", s(&out)],
            d,
            Some(mask),
        );
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(mode(&out), expected, "umask {mask}");
    }
    // a file replaced keeps its bits, whatever the umask
    use std::os::unix::fs::PermissionsExt;
    let kept = d.join("g022.safetensors");
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o604)).unwrap();
    let (code, _, err) = run_with(
        &["data", "--dataset", "karate", "--out", s(&kept)],
        d,
        Some("077"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(mode(&kept), 0o604);

    // a symbolic link as --out: refused, link and target untouched
    let target = d.join("target.safetensors");
    std::fs::write(&target, b"the file the link points to").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = d.join("link.safetensors");
    std::os::unix::fs::symlink("target.safetensors", &link).unwrap();
    let args = ["data", "--dataset", "karate", "--out", s(&link)];
    refused_in(
        d,
        &args,
        &[
            "link.safetensors: is a symbolic link (to",
            "Pass --follow-symlinks to write to",
        ],
    );
    // asked for: the target is written, the link stays a link, the target keeps its mode
    let mut follow = args.to_vec();
    follow.push("--follow-symlinks");
    ok_in(d, &follow);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let g = Graph::load(&target, &Device::Cpu).unwrap();
    assert_eq!(g.num_nodes(), 34);
    assert_eq!(mode(&target), 0o640);
}
