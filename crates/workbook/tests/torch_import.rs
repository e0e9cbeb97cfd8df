//! PyTorch `.pt` checkpoints (issue 37): PyG's own `torch.save` files of the trained Cora
//! models (tests/fixtures/pyg/pt, copied from ../shared/fixtures/pyg/pt) read as PyTorch reads
//! them, reproduce PyG's logits, and fail where PyTorch fails, with the fix; crafted files are
//! refused without a panic and without running anything.

use crate::common;

use common::{fixtures_dir, max_abs_diff};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use workbook::checkpoint::load_pt;
use workbook::torch_file::{MapLocation, TorchFile, TorchFormat};
use workbook::{datasets, ModelConfig, Placement, WorkbookError};

fn pt(name: &str) -> PathBuf {
    fixtures_dir().join("pt").join(name)
}

fn expected_logits(model: &str) -> workbook::candle_core::Tensor {
    let file = workbook::tensor_file::read(
        &fixtures_dir().join(format!("cora_{model}_trained.safetensors")),
        &workbook::candle_core::Device::Cpu,
    )
    .unwrap();
    file.tensors["expected.logits"].clone()
}

#[test]
fn every_pt_fixture_reproduces_pyg_logits_within_1e_5() {
    let cora = datasets::load("cora", None, Placement::cpu()).unwrap();
    for (file, model, format, saved_on) in [
        ("cora_gcn_state_dict.pt", "gcn", TorchFormat::Zip, "cpu"),
        (
            "cora_gcn_state_dict_cuda0.pt",
            "gcn",
            TorchFormat::Zip,
            "cuda:0",
        ),
        ("cora_gcn_dataparallel.pt", "gcn", TorchFormat::Zip, "cpu"),
        (
            "cora_gcn_state_dict_legacy.pt",
            "gcn",
            TorchFormat::Legacy,
            "cpu",
        ),
        (
            "cora_gatv2_state_dict_cuda0.pt",
            "gatv2",
            TorchFormat::Zip,
            "cuda:0",
        ),
    ] {
        let import = load_pt(&pt(file), &MapLocation::To(Placement::cpu()), None)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(import.format, format, "{file}");
        assert_eq!(import.saved_on, [saved_on], "{file}");
        assert!(import.inferred);
        let preset = match model {
            "gcn" => ModelConfig::gcn(1433, 16, 7),
            _ => ModelConfig::gatv2(1433, 8, 8, 7),
        };
        // The inferred model is PyG's example model, down to the activation.
        assert_eq!(import.model.config(), &preset, "{file}");
        let out = import.model.forward_graph(&cora).unwrap();
        let diff = max_abs_diff(&out.logits, &expected_logits(model));
        assert!(diff <= 1e-5, "{file}: logits differ from PyG's by {diff}");
    }
}

#[test]
fn a_file_saved_on_a_gpu_needs_a_map_location_as_in_pytorch() {
    let path = pt("cora_gcn_state_dict_cuda0.pt");
    if cfg!(feature = "cuda") && Placement::cuda(0).is_ok() {
        println!("SKIPPED the refusal: this machine has cuda:0, so PyTorch would load it too");
    } else {
        let err = load_pt(&path, &MapLocation::AsSaved, None).unwrap_err();
        assert!(matches!(err, WorkbookError::SavedOnMissingDevice { .. }));
        let text = err.to_string();
        for part in [
            "cora_gcn_state_dict_cuda0.pt: tensor 'conv1.bias' was saved on cuda:0",
            "torch.save records the device of every tensor",
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False",
            "--map-location cpu",
            "--map-location cuda:0=cpu",
            "sim:N",
        ] {
            assert!(text.contains(part), "missing {part:?} in: {text}");
        }
    }
    // A map location of either form loads it, wherever it says.
    let to_sim = load_pt(&path, &MapLocation::To(Placement::sim(1)), None).unwrap();
    assert_eq!(to_sim.model.placement().to_string(), "sim:1");
    let pairs = MapLocation::parse(&["cuda:0=sim:2".into()]).unwrap();
    assert_eq!(
        load_pt(&path, &pairs, None)
            .unwrap()
            .model
            .placement()
            .to_string(),
        "sim:2"
    );
    // A mapping that does not name the saved device leaves it where it was saved.
    if !cfg!(feature = "cuda") {
        let other = MapLocation::parse(&["cuda:1=cpu".into()]).unwrap();
        let err = load_pt(&path, &other, None).unwrap_err().to_string();
        assert!(err.contains("was saved on cuda:0"), "{err}");
    }
    // A CPU file needs nothing.
    let cpu = load_pt(&pt("cora_gcn_state_dict.pt"), &MapLocation::AsSaved, None).unwrap();
    assert_eq!(cpu.model.placement().to_string(), "cpu");
}

#[test]
fn map_location_spellings_are_checked() {
    for (values, part) in [
        (vec!["gpu"], "unknown device 'gpu'"),
        (vec!["auto"], "name the device"),
        (vec!["cpu", "cuda:0=cpu"], "either one device"),
        (
            vec!["tpu:0=cpu"],
            "'tpu:0' is not a location torch.save writes",
        ),
    ] {
        let values: Vec<String> = values.into_iter().map(String::from).collect();
        let err = MapLocation::parse(&values).unwrap_err().to_string();
        assert!(err.contains(part), "{values:?}: {err}");
    }
}

#[test]
fn a_dataparallel_file_is_named_and_its_prefix_removed() {
    let file = TorchFile::read(&pt("cora_gcn_dataparallel.pt")).unwrap();
    assert!(file.tensors.iter().all(|t| t.name.starts_with("module.")));
    let import = load_pt(&pt("cora_gcn_dataparallel.pt"), &MapLocation::AsSaved, None).unwrap();
    assert_eq!(
        import.notes[0],
        "every key starts with 'module.': the state_dict of a model wrapped in torch.nn.DataParallel (or DistributedDataParallel), saved without unwrapping it (in PyTorch, save model.module.state_dict()); the prefix was removed"
    );
    assert!(import
        .model
        .named_parameters()
        .iter()
        .all(|(n, _)| !n.starts_with("module.")));
}

#[test]
fn a_whole_pickled_module_is_refused_and_nothing_runs() {
    let err = load_pt(&pt("cora_gcn_whole_module.pt"), &MapLocation::AsSaved, None).unwrap_err();
    assert!(matches!(err, WorkbookError::PickledCode { .. }), "{err}");
    let text = err.to_string();
    for part in [
        "cora_gcn_whole_module.pt: refused: the file names the Python global",
        "not a state_dict but a pickled Python object (torch.save(model) writes one)",
        "this reader never does",
        "Weights only load failed",
        "torch.save(model.state_dict(), 'model.pt')",
    ] {
        assert!(text.contains(part), "missing {part:?} in: {text}");
    }
}

#[test]
fn a_config_given_wins_and_is_checked_against_the_file() {
    let path = pt("cora_gcn_state_dict.pt");
    let lazy = ModelConfig::from_json(
        r#"{"layers": [{"layer": "GCNConv", "in_channels": -1, "out_channels": 16},
                       {"layer": "GCNConv", "in_channels": -1, "out_channels": 7}]}"#,
    )
    .unwrap();
    let import = load_pt(&path, &MapLocation::AsSaved, Some(lazy)).unwrap();
    assert!(!import.inferred);
    assert_eq!(import.model.config().layers[0].in_channels(), 1433);
    let wrong = ModelConfig::gcn(1433, 32, 7);
    let err = load_pt(&path, &MapLocation::AsSaved, Some(wrong))
        .unwrap_err()
        .to_string();
    assert!(err.contains("conv1.lin.weight"), "{err}");
}

#[test]
fn names_that_are_not_pyg_layers_ask_for_the_config() {
    let shapes = vec![("encoder.weight".to_string(), vec![4, 3])];
    let err = workbook::model::infer::infer_config(&shapes)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot tell the model from the state_dict's names: 'encoder.weight' is not a PyG layer parameter named conv<k>.<name>")
            && err.contains("--config"),
        "{err}"
    );
    let shapes = vec![
        ("conv1.lin.weight".to_string(), vec![4, 3]),
        ("conv3.lin.weight".to_string(), vec![2, 4]),
    ];
    let err = workbook::model::infer::infer_config(&shapes)
        .unwrap_err()
        .to_string();
    assert!(err.contains("numbered [1, 3]"), "{err}");
    let shapes = vec![
        ("conv1.lin.weight".to_string(), vec![4, 3]),
        ("conv1.lin_edge.weight".to_string(), vec![4, 2]),
    ];
    let err = workbook::model::infer::infer_config(&shapes)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("conv1.lin_edge.weight is not a parameter"),
        "{err}"
    );
    // SAGE, without a root weight
    let shapes = vec![
        ("conv1.lin_l.bias".to_string(), vec![4]),
        ("conv1.lin_l.weight".to_string(), vec![4, 3]),
    ];
    let (config, _) = workbook::model::infer::infer_config(&shapes).unwrap();
    let mut inferred = config.parameter_shapes();
    inferred.sort();
    assert_eq!(inferred, shapes);
}

// ----- crafted files: each an attack or a corruption, each refused with a clear error ---------

/// The CPU fixture re-zipped with its `data.pkl` changed by `patch`.
fn patched(patch: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let bytes = std::fs::read(pt("cora_gcn_state_dict.pt")).unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().unwrap().into_owned();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        if name.ends_with("/data.pkl") {
            patch(&mut data);
        }
        out.start_file(name, options).unwrap();
        out.write_all(&data).unwrap();
    }
    out.finish().unwrap().into_inner()
}

fn replace(data: &mut Vec<u8>, from: &[u8], to: &[u8]) {
    let at = data
        .windows(from.len())
        .position(|w| w == from)
        .expect("pattern in the fixture");
    data.splice(at..at + from.len(), to.iter().copied());
}

fn read_err(bytes: &[u8]) -> String {
    match TorchFile::from_bytes(bytes, "crafted.pt") {
        Ok(f) => f
            .to_tensors(&MapLocation::To(Placement::cpu()))
            .map(|_| String::from("loaded"))
            .unwrap_or_else(|e| e.to_string()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_state_dict_that_names_os_system_is_refused_and_runs_nothing() {
    let marker = tempfile::tempdir().unwrap().path().join("ran");
    let command = format!("touch {}", marker.display());
    let bytes = patched(|d| {
        // The OrderedDict becomes os.system(command): Python's pickle would run it.
        let call = [
            b"cos\nsystem\nq\x00X".as_slice(),
            &(command.len() as u32).to_le_bytes(),
            command.as_bytes(),
            b"\x85R",
        ]
        .concat();
        replace(d, b"ccollections\nOrderedDict\nq\x00)R", &call);
    });
    let err = read_err(&bytes);
    assert!(
        err.contains("refused: the file names the Python global 'os.system'"),
        "{err}"
    );
    assert!(!marker.exists());
}

#[test]
fn offsets_sizes_and_strides_never_reach_past_a_storage() {
    // conv1.bias is (storage '0' of 16 floats, offset 0, size (16,), stride (1,)).
    let original: &[u8] = b"QK\x00K\x10\x85q\tK\x01\x85";
    for (to, part) in [
        (
            &b"QK\x05K\x10\x85q\tK\x01\x85"[..],
            "reach past its storage of 16 elements",
        ),
        (
            &b"QK\x00K\x10\x85q\tK\x02\x85"[..],
            "reach past its storage",
        ),
        // A million elements from one storage of 16, by a zero stride: not allocated.
        (
            &b"QK\x00J\x40\x42\x0f\x00\x85q\tK\x00\x85"[..],
            "is larger than its storage (16 elements)",
        ),
        (
            &b"QK\x00K\x10\x85q\tK\x01K\x01\x86"[..],
            "have different lengths",
        ),
        (
            &b"QJ\xff\xff\xff\xffK\x10\x85q\tK\x01\x85"[..],
            "storage offset is not a non-negative integer",
        ),
    ] {
        let err = read_err(&patched(|d| replace(d, original, to)));
        assert!(
            err.contains("tensor 'conv1.bias'") && err.contains(part),
            "{part}: {err}"
        );
    }
    // A storage that is not in the archive.
    let err = read_err(&patched(|d| {
        replace(d, b"X\x01\x00\x00\x000", b"X\x01\x00\x00\x009")
    }));
    assert!(
        err.contains("entry 'cora_gcn_state_dict/data/9' cannot be read"),
        "{err}"
    );
    // An unknown storage type.
    let err = read_err(&patched(|d| replace(d, b"FloatStorage", b"ComplexStorage")));
    assert!(err.contains("torch.ComplexStorage"), "{err}");
}

#[test]
fn truncated_and_foreign_files_are_errors_not_panics() {
    for name in ["cora_gcn_state_dict.pt", "cora_gcn_state_dict_legacy.pt"] {
        let bytes = std::fs::read(pt(name)).unwrap();
        // Every cut of the first kilobyte (the pickles), then every 997th byte.
        let cuts = (0..bytes.len().min(1024)).chain((1024..bytes.len()).step_by(997));
        for n in cuts {
            assert_ne!(read_err(&bytes[..n]), "loaded", "{name} cut at {n} loaded");
        }
    }
    let err = read_err(b"");
    assert!(err.contains("is not a torch.save file"), "{err}");
    let safetensors = std::fs::read(fixtures_dir().join("gcn_karate.safetensors")).unwrap();
    let err = read_err(&safetensors);
    assert!(
        err.contains("A safetensors file loads with checkpoint::load"),
        "{err}"
    );
    // A zip that is not a checkpoint.
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    out.start_file("notes.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    out.write_all(b"hello").unwrap();
    let err = read_err(&out.finish().unwrap().into_inner());
    assert!(err.contains("exactly one '<name>/data.pkl'"), "{err}");
    // A legacy file with bytes after its last storage.
    let mut legacy = std::fs::read(pt("cora_gcn_state_dict_legacy.pt")).unwrap();
    legacy.extend_from_slice(b"extra");
    let err = read_err(&legacy);
    assert!(err.contains("5 bytes after its last storage"), "{err}");
}

#[test]
fn the_reader_agrees_with_the_safetensors_fixture_tensor_by_tensor() {
    // Independent of any model: every tensor of every GCN file equals PyG's safetensors copy.
    let reference = workbook::tensor_file::read(
        &fixtures_dir().join("cora_gcn_trained.safetensors"),
        &workbook::candle_core::Device::Cpu,
    )
    .unwrap();
    for name in [
        "cora_gcn_state_dict.pt",
        "cora_gcn_state_dict_legacy.pt",
        "cora_gcn_state_dict_cuda0.pt",
    ] {
        let file = TorchFile::read(&pt(name)).unwrap();
        let tensors: HashMap<String, _> = file.host_tensors().unwrap();
        assert_eq!(tensors.len(), 4, "{name}");
        for (k, t) in &tensors {
            assert_eq!(max_abs_diff(t, &reference.tensors[k]), 0.0, "{name} {k}");
        }
    }
}

/// The CPU fixture as a training checkpoint, `{"epoch": 5, key: model.state_dict()}`: the
/// state_dict's pickle wrapped in a dict (PROTO 2, EMPTY_DICT, MARK, two pairs, SETITEMS, STOP).
fn in_a_checkpoint_dict(key: &str) -> Vec<u8> {
    patched(|d| {
        let mut wrapped = b"\x80\x02}q\xff(X\x05\x00\x00\x00epochK\x05X".to_vec();
        wrapped.extend_from_slice(&(key.len() as u32).to_le_bytes());
        wrapped.extend_from_slice(key.as_bytes());
        wrapped.extend_from_slice(&d[2..d.len() - 1]);
        wrapped.extend_from_slice(b"u.");
        *d = wrapped;
    })
}

#[test]
fn a_training_checkpoint_dict_gives_its_model_state_dict_with_a_note() {
    let file = TorchFile::from_bytes(&in_a_checkpoint_dict("model_state_dict"), "ckpt.pt").unwrap();
    assert_eq!(file.tensors.len(), 4);
    assert_eq!(
        file.notes,
        ["the file is a training checkpoint (a dict of 2 entries); its 'model_state_dict' entry is the model's state_dict, the rest is ignored"]
    );
    // A dict without a state_dict entry is refused with its keys.
    let err = read_err(&in_a_checkpoint_dict("weights"));
    assert!(
        err.contains("keys 'epoch', 'weights'")
            && err.contains("save model.state_dict() on its own"),
        "{err}"
    );
}
