//! `workbook bench --batch-size N --save-batches FILE`: the batches PyG replays in
//! `scripts/pyg_bench.py --batches` are the trainer's, complete and consistent with the graph.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use workbook::candle_core::Device;
use workbook::tensor_file;

fn workbook(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(args)
        .current_dir(cwd)
        .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
        .env("WORKBOOK_DEVICE", "cpu")
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
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ids(t: &workbook::candle_core::Tensor) -> Vec<i64> {
    t.flatten_all().unwrap().to_vec1::<i64>().unwrap()
}

#[test]
fn saved_batches_are_every_batch_of_the_run_and_subgraphs_of_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("karate.safetensors");
    let batches = dir.path().join("out/batches.safetensors");
    ok(&workbook(
        &[
            "data",
            "--dataset",
            "karate",
            "--out",
            graph.to_str().unwrap(),
        ],
        dir.path(),
    ));
    let stdout = ok(&workbook(
        &[
            "bench",
            "--model",
            "gcn",
            "--graph",
            graph.to_str().unwrap(),
            "--epochs",
            "2",
            "--warmup",
            "1",
            "--batch-size",
            "3",
            "--num-neighbors",
            "5,5",
            "--save-batches",
            batches.to_str().unwrap(),
        ],
        dir.path(),
    ));
    let mini: serde_json::Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| l["bench"] == "minibatch")
        .expect("a mini-batch line");
    let (compute, epoch) = (
        mini["compute_ms"].as_f64().unwrap(),
        mini["epoch_ms"].as_f64().unwrap(),
    );
    assert!(compute > 0.0 && compute <= epoch, "{mini}");

    let g = tensor_file::read(&graph, &Device::Cpu).unwrap();
    let train: BTreeSet<i64> = g.tensors["train_mask"]
        .to_vec1::<u8>()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, &m)| m != 0)
        .map(|(i, _)| i as i64)
        .collect();
    let gei = ids(&g.tensors["edge_index"]);
    let e = gei.len() / 2;
    let edges: BTreeSet<(i64, i64)> = (0..e).map(|k| (gei[k], gei[e + k])).collect();

    let f = tensor_file::read(&batches, &Device::Cpu).unwrap();
    assert_eq!(f.metadata["format"], "workbook-batches/1");
    assert_eq!(f.metadata["epochs"], "3", "warm-up and timed epochs");
    assert_eq!(f.metadata["warmup"], "1");
    assert_eq!(f.metadata["num_nodes"], "34");
    assert_eq!(f.metadata["num_neighbors"], "[5,5]");
    let per_epoch = train.len().div_ceil(3);
    assert_eq!(f.tensors.len(), 3 * 3 * per_epoch, "3 tensors a batch");
    for epoch in 1..=3 {
        let mut seeds = BTreeSet::new();
        for b in 0..per_epoch {
            let t = |part: &str| &f.tensors[&format!("epoch{epoch}.batch{b}.{part}")];
            let n_id = ids(t("n_id"));
            let bs = ids(t("batch_size"))[0] as usize;
            assert!(bs <= 3 && bs <= n_id.len());
            seeds.extend(n_id[..bs].iter().copied());
            let ei = ids(t("edge_index"));
            let m = ei.len() / 2;
            assert!(m > 0, "epoch {epoch} batch {b} has no edges");
            for k in 0..m {
                let (s, d) = (ei[k] as usize, ei[m + k] as usize);
                assert!(s < n_id.len() && d < n_id.len());
                assert!(
                    edges.contains(&(n_id[s], n_id[d])),
                    "edge {s}->{d} of epoch {epoch} batch {b} is not in the graph"
                );
            }
        }
        assert_eq!(seeds, train, "epoch {epoch}: every training node once");
    }
}

#[test]
fn save_batches_needs_a_single_mini_batch_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = workbook(
        &["bench", "--model", "gcn", "--save-batches", "b.safetensors"],
        dir.path(),
    );
    assert!(failure(&out).contains("--batch-size"));
    let out = workbook(
        &[
            "bench",
            "--model",
            "gcn,gatv2",
            "--dataset",
            "karate",
            "--batch-size",
            "2",
            "--save-batches",
            "b.safetensors",
        ],
        dir.path(),
    );
    assert!(failure(&out).contains("give one --model and no --sweep"));
    assert!(!dir.path().join("b.safetensors").exists());
}
