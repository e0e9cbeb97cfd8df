//! `workbook bench --roofline` (memory bandwidth, the random-gather limit, and the aggregation
//! kernels' share of each) and `--figure-pyg` (PyG's runs drawn into the scaling figure).

use std::path::Path;
use std::process::{Command, Output};

fn workbook(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(args)
        .current_dir(cwd)
        .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
        .env("WORKBOOK_DEVICE", "cpu")
        .env_remove("WORKBOOK_KEEP_BUFFERS")
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

/// One `--roofline` run (STREAM and two 512 MiB gather tables), shared by the tests below.
fn roofline_lines() -> &'static [serde_json::Value] {
    static LINES: std::sync::OnceLock<Vec<serde_json::Value>> = std::sync::OnceLock::new();
    LINES.get_or_init(run_roofline)
}

fn run_roofline() -> Vec<serde_json::Value> {
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
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn roofline_reports_bandwidth_and_each_kernels_fraction_of_it() {
    let all = roofline_lines();
    // the gather's lines and the schedules' have their own test
    let lines: Vec<&serde_json::Value> = all
        .iter()
        .filter(|l| l["roofline"] != "gather" && l["roofline"] != "spmm_schedule")
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
            "gcn_spmm",
            "gat_scores",
            "csr_softmax",
            "csr_spmm"
        ]
    );
    assert_eq!(lines[0]["threads"], 1);
    assert!(lines[0]["copy_gb_s"].as_f64().unwrap() > 0.0);
    assert!(lines[0]["triad_gb_s"].as_f64().unwrap() > 0.0);
    // WORKBOOK_KEEP_BUFFERS unset: freed buffers kept while measuring, so that the kernels
    // write their outputs into pages already faulted in, as STREAM does
    assert_eq!(lines[0]["keep_buffers_mb"], 1024);
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
    // GCN's aggregation (1 × 16) moves less than GATv2's (8 × 8), and less again without
    // reading edge weights and ids
    assert!(lines[1]["bytes_min"].as_u64() < lines[5]["bytes_min"].as_u64());
    assert_eq!(lines[2]["heads"], 1);
    assert_eq!(lines[2]["channels"], 16);
    assert!(lines[2]["bytes_min"].as_u64() < lines[1]["bytes_min"].as_u64());
}

#[test]
fn roofline_measures_the_gather_limit_and_each_kernels_fraction_of_it() {
    let all = roofline_lines();
    let names: Vec<&str> = all
        .iter()
        .map(|l| l["roofline"].as_str().unwrap())
        .collect();
    // the gather comes right after the bandwidth, once per page size
    assert_eq!(names[..3], ["bandwidth", "gather", "gather"]);
    let gathers = &all[1..3];
    assert_eq!(gathers[0]["pages"], "4KiB");
    assert_eq!(gathers[1]["pages"], "2MiB");
    let (mut best, mut best_wide) = (0f64, 0f64);
    for g in gathers {
        assert_eq!(g["table_mib"], 512, "{g}");
        let latency = g["latency_ns"].as_f64().unwrap();
        assert!(latency > 0.0 && latency.is_finite(), "{g}");
        let by = g["lines_per_s_by_streams"].as_object().unwrap();
        let mut streams: Vec<u64> = by.keys().map(|k| k.parse().unwrap()).collect();
        streams.sort_unstable();
        assert_eq!(streams, [1, 2, 4, 8, 16, 32, 64], "{g}");
        let ahead = g["lines_per_s_by_prefetch_ahead"].as_object().unwrap();
        let mut distances: Vec<u64> = ahead.keys().map(|k| k.parse().unwrap()).collect();
        distances.sort_unstable();
        assert_eq!(distances, [32, 64, 128, 256], "{g}");
        let top = |rates: &serde_json::Map<String, serde_json::Value>| {
            rates
                .values()
                .map(|v| v.as_f64().unwrap())
                .fold(0f64, f64::max)
        };
        let rate = g["best_lines_per_s"].as_f64().unwrap();
        assert!(
            close(rate, top(by).max(top(ahead))),
            "the best rate is the largest measured, chained or requested ahead: {g}"
        );
        // the chain count named is the chains' best
        assert_eq!(
            by[&g["best_streams"].to_string()].as_f64(),
            Some(top(by)),
            "{g}"
        );
        assert!(
            close(g["best_gb_s"].as_f64().unwrap(), rate * 64.0 / 1e9),
            "{g}"
        );
        // one chain's rate is one line per latency
        assert!(close(by["1"].as_f64().unwrap(), 1e9 / latency), "{g}");
        if let Some(share) = g["huge_share"].as_f64() {
            assert!((0.0..=1.0).contains(&share), "{g}");
            if g["pages"] == "4KiB" && g["note"].is_null() {
                assert_eq!(share, 0.0, "4 KiB pages were asked for: {g}");
            }
        }
        best = best.max(rate);
        // random rows of 256 bytes (GATv2's 8 × 8), requested ahead at the same distances
        assert_eq!(g["wide_row_bytes"], 256, "{g}");
        let wide = g["wide_rows_per_s_by_prefetch_ahead"].as_object().unwrap();
        let mut distances: Vec<u64> = wide.keys().map(|k| k.parse().unwrap()).collect();
        distances.sort_unstable();
        assert_eq!(distances, [32, 64, 128, 256], "{g}");
        let wide_rate = g["best_wide_rows_per_s"].as_f64().unwrap();
        assert!(wide_rate > 0.0 && close(wide_rate, top(wide)), "{g}");
        best_wide = best_wide.max(wide_rate);
    }
    // each kernel's latency bound: the rows it reads at random at the best rate of rows of its
    // width, and the lines of edge weights it reads at random at the best line rate
    for l in all.iter().filter(|l| {
        ["csr_spmm", "gcn_spmm", "gat_scores", "csr_softmax"]
            .contains(&l["roofline"].as_str().unwrap())
    }) {
        let edges = l["edges"].as_f64().unwrap();
        let rows = l["random_rows"].as_f64().unwrap();
        let weight_lines = l["random_weight_lines"].as_f64().unwrap();
        // csbm's edges join random nodes and are stored by source: the aggregations, visiting
        // them by destination, read nearly every neighbour's row and (csr_spmm) weight at random;
        // gat_scores reads both ends in edge order, the source's mostly in order
        match l["roofline"].as_str().unwrap() {
            "csr_spmm" => assert!(rows > 0.9 * edges && weight_lines > 0.9 * edges, "{l}"),
            "gcn_spmm" => assert!(rows > 0.9 * edges && weight_lines == 0.0, "{l}"),
            "gat_scores" => {
                assert!(rows > 0.9 * edges && rows < 1.5 * edges, "{l}");
                assert_eq!(weight_lines, 0.0, "{l}");
            }
            _ => assert_eq!(rows + weight_lines, 0.0, "{l}"),
        }
        if rows == 0.0 {
            assert!(l["latency_bound_ms"].is_null(), "no gather, no bound: {l}");
            assert!(l["fraction_latency"].is_null(), "{l}");
            continue;
        }
        let bound = l["latency_bound_ms"].as_f64().unwrap();
        let row_seconds = match l["row_bytes"].as_u64().unwrap() {
            64 => rows / best,
            256 => rows / best_wide,
            other => panic!("rows of {other} bytes: {l}"),
        };
        assert!(
            close(bound, (row_seconds + weight_lines / best) * 1e3),
            "{l}"
        );
        let ms = l["ms"].as_f64().unwrap();
        let cpu = l["cpu_ms"].as_f64().unwrap();
        assert!(ms > 0.0 && cpu > 0.0, "{l}");
        assert!(
            close(l["fraction_latency"].as_f64().unwrap(), bound / ms),
            "{l}"
        );
        assert!(
            close(l["fraction_latency_cpu"].as_f64().unwrap(), bound / cpu),
            "{l}"
        );
    }
    // csr_spmm's schedules at both widths: the default on 4 KiB pages, and on 2 MiB pages
    let schedules: Vec<&serde_json::Value> = all
        .iter()
        .filter(|l| l["roofline"] == "spmm_schedule")
        .collect();
    for heads in [1, 8] {
        let at: Vec<_> = schedules.iter().filter(|l| l["heads"] == heads).collect();
        assert!(
            at.iter()
                .any(|l| l["default"] == true && l["huge_pages"].is_null()),
            "{at:?}"
        );
        let huge = at
            .iter()
            .find(|l| l["huge_pages"].is_object())
            .expect("a run on advised buffers");
        let advice = &huge["huge_pages"];
        assert!(advice["advise_ms"].as_f64().unwrap() >= 0.0, "{advice}");
        assert!(advice["collapsed"].is_boolean(), "{advice}");
        for l in &at {
            assert!(l["ms"].as_f64().unwrap() > 0.0, "{l}");
            let f = l["fraction_latency"].as_f64().unwrap();
            assert!(f > 0.0 && f.is_finite(), "{l}");
        }
    }
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
