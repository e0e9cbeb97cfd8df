//! `workbook bench --roofline` (memory bandwidth and the aggregation kernels' share of it) and
//! `--figure-pyg` (PyG's runs drawn into the scaling figure).

use std::path::Path;
use std::process::{Command, Output};

fn workbook(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(args)
        .current_dir(cwd)
        .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
        .env("WORKBOOK_DEVICE", "cpu")
        .output()
        .expect("the binary runs")
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "command failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn roofline_reports_bandwidth_and_each_kernels_fraction_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--roofline",
        "csbm:3000",
        "--epochs",
        "1",
        "--threads",
        "1",
    ];
    let stdout = stdout_of(&workbook(&args, dir.path()));
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = lines
        .iter()
        .map(|l| l["roofline"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "bandwidth",
            "csr_spmm",
            "gat_scores",
            "csr_softmax",
            "csr_spmm"
        ]
    );
    assert_eq!(lines[0]["threads"], 1);
    assert!(lines[0]["copy_gb_s"].as_f64().unwrap() > 0.0);
    assert!(lines[0]["triad_gb_s"].as_f64().unwrap() > 0.0);
    let edges = lines[1]["edges"].as_u64().unwrap();
    assert_eq!(lines[1]["nodes"], 3000);
    assert!(edges > 3000, "self-loops included: {edges}");
    for l in &lines[1..] {
        let fraction = l["fraction"].as_f64().unwrap();
        assert!(fraction > 0.0 && fraction.is_finite(), "{l}");
        // what a gather of whole cache lines moves is at least the minimum
        assert!(l["bytes_gather"].as_u64() >= l["bytes_min"].as_u64(), "{l}");
        // the minimum is at least the edge weights or scores, 4 bytes per edge and head
        assert!(l["bytes_min"].as_u64().unwrap() >= 4 * edges * l["heads"].as_u64().unwrap());
    }
    // GCN's aggregation (1 × 16) moves less than GATv2's (8 × 8)
    assert!(lines[1]["bytes_min"].as_u64() < lines[4]["bytes_min"].as_u64());
}

#[test]
fn the_scaling_figure_draws_pygs_runs_beside_ours() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("pyg.jsonl");
    std::fs::write(
        &raw,
        concat!(
            r#"{"impl": "workbook", "model": "gcn", "nodes": 100, "edges": 900, "epoch_ms": 1.0}"#,
            "\n",
            r#"{"impl": "pyg", "model": "gcn", "device": "cpu", "nodes": 100, "edges": 900, "epoch_ms": 2.0, "peak_mem_mb": 5.0}"#,
            "\n",
            r#"{"impl": "pyg", "model": "gcn", "device": "cpu", "nodes": 300, "edges": 2900, "epoch_ms": 4.0, "peak_mem_mb": 6.0}"#,
            "\n"
        ),
    )
    .unwrap();
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
        "--figure-pyg",
        raw.to_str().unwrap(),
    ];
    stdout_of(&workbook(&args, dir.path()));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("gcn (PyG, cpu)"), "{text}");
    assert!(text.contains("gcn (workbook, cpu)"), "{text}");

    // a file without PyG runs is an error that says so
    std::fs::write(&raw, "{\"impl\": \"workbook\"}\n").unwrap();
    let out = workbook(&args, dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no PyG runs"), "{err}");

    // PyG's mini-batch lines (compute on replayed batches) are not full-batch points
    std::fs::write(
        &raw,
        r#"{"impl": "pyg", "bench": "minibatch", "model": "gcn", "device": "cpu", "nodes": 100, "edges": 900, "epoch_ms": 2.0}"#,
    )
    .unwrap();
    let out = workbook(&args, dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no PyG runs"),
        "{err}"
    );
}
