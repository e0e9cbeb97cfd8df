//! No size or count a user can type aborts or hangs the program: every numeric argument of every
//! command, given as zero, negative, huge or overflowing, ends in a clear error (exit code 1 or
//! 2, no panic, no abort) within seconds. One test per class of input.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary with a deadline; returns (exit code, stderr). A run past the deadline is
/// killed and fails the test: that is the "hangs" this file guards against.
fn run(args: &[&str], cwd: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(args)
        .current_dir(cwd)
        .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
        .env("WORKBOOK_DEVICE", "cpu")
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`workbook {}` still ran after 60 s", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), err)
}

/// The command must fail cleanly, and its message must contain every one of `needles`.
fn refused(args: &[&str], needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = run(args, dir.path());
    let cmd = format!("workbook {}", args.join(" "));
    assert!(
        matches!(code, Some(1) | Some(2)),
        "`{cmd}` should fail with exit code 1 or 2 (got {code:?}: a signal such as an abort is None):\n{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("memory allocation"),
        "`{cmd}`: a panic or an abort instead of an error:\n{err}"
    );
    for n in needles {
        assert!(
            err.contains(n),
            "`{cmd}`: the error should mention '{n}':\n{err}"
        );
    }
}

#[test]
fn zero_counts_are_refused() {
    refused(&["train", "--model", "gcn", "--epochs", "0"], &["--epochs"]);
    refused(&["demo", "--epochs", "0"], &["--epochs"]);
    refused(&["figures", "--epochs", "0", "--out", "f"], &["--epochs"]);
    refused(
        &["figures", "--requests", "0", "--out", "f"],
        &["--requests"],
    );
    refused(&["bench", "--model", "gcn", "--epochs", "0"], &["--epochs"]);
    refused(&["bench", "--model", "gcn", "--threads", "0"], &["threads"]);
    refused(
        &["bench", "--model", "gcn", "--serving-threads", "0"],
        &["--serving-threads"],
    );
    refused(
        &[
            "bench",
            "--model",
            "gcn",
            "--serving-threads",
            "1",
            "--serving-requests",
            "0",
        ],
        &["--serving-requests"],
    );
    refused(&["serve-demo", "--threads", "0"], &["--threads"]);
    refused(&["serve-demo", "--steps", "0"], &["--steps"]);
    refused(&["serve-demo", "--requests", "0"], &["--requests"]);
    for cmd in [
        &["train", "--model", "gcn", "--dataset", "csbm:0"][..],
        &["data", "--dataset", "csbm:0", "--out", "g.safetensors"],
        &["bench", "--model", "gcn", "--sweep", "0"],
        &["inspect", "--dataset", "csbm:1"],
    ] {
        refused(cmd, &["csbm needs at least 2 classes"]);
    }
}

#[test]
fn negative_numbers_are_refused() {
    // clap parses unsigned arguments: a negative one is a usage error (exit 2). Written
    // `--epochs=-1` the error names the argument; written `--epochs -1` clap reads `-1` as an
    // unknown flag and names that.
    for (flag, cmd) in [
        ("--epochs", &["train", "--model", "gcn"][..]),
        ("--seed", &["train", "--model", "gcn"]),
        ("--epochs", &["demo"]),
        ("--warmup", &["bench", "--model", "gcn"]),
        ("--threads", &["bench", "--model", "gcn"]),
        ("--sweep", &["bench", "--model", "gcn"]),
        ("--serving-requests", &["bench", "--model", "gcn"]),
        ("--threads", &["serve-demo"]),
        ("--steps", &["serve-demo"]),
        ("--requests", &["serve-demo"]),
        ("--epochs", &["figures"]),
        ("--requests", &["figures"]),
    ] {
        let mut args = cmd.to_vec();
        let eq = format!("{flag}=-1");
        args.push(&eq);
        refused(&args, &[flag, "-1"]);
        let mut args = cmd.to_vec();
        args.extend([flag, "-1"]);
        refused(&args, &["-1"]);
    }
    refused(&["serve-demo", "--threads=2,-1"], &["--threads"]);
    refused(
        &["bench", "--model", "gcn", "--sweep=1000,-5"],
        &["--sweep"],
    );
    refused(
        &["data", "--dataset", "csbm:-5", "--out", "g.safetensors"],
        &["must be a node count"],
    );
}

#[test]
fn huge_sizes_are_refused_with_the_memory_estimate() {
    // 10^12 nodes: tens of terabytes, more than any machine has
    for cmd in [
        &["train", "--model", "gcn", "--dataset", "csbm:1000000000000"][..],
        &["bench", "--model", "gcn", "--dataset", "csbm:1000000000000"],
        &[
            "data",
            "--dataset",
            "csbm:1000000000000",
            "--out",
            "g.safetensors",
        ],
        &["serve-demo", "--dataset", "csbm:1000000000000"],
    ] {
        refused(cmd, &["csbm:1000000000000", "needs about", "available"]);
    }
    refused(
        &[
            "data",
            "--dataset",
            "csbm:4000000000",
            "--out",
            "g.safetensors",
        ],
        &["needs about", "available"],
    );
    // 4·10^8 nodes (about 260 GB): refused wherever less is available, which the test reads
    let need = workbook::limits::csbm_bytes(400_000_000, 32, 10.0);
    match workbook::limits::available_memory() {
        Some(avail) if avail < need => refused(
            &["train", "--model", "gcn", "--dataset", "csbm:400000000"],
            &["needs about", "available (MemAvailable"],
        ),
        other => eprintln!("csbm:400000000 not tried: {other:?} bytes available"),
    }
}

#[test]
fn huge_counts_and_thread_numbers_are_refused() {
    refused(
        &[
            "bench",
            "--model",
            "gcn",
            "--dataset",
            "karate",
            "--threads",
            "100000",
        ],
        &["at most"],
    );
    refused(&["serve-demo", "--threads", "1,100000"], &["at most"]);
    refused(
        &["bench", "--model", "gcn", "--serving-threads", "100000"],
        &["at most"],
    );
    let big = "1000000000000";
    refused(&["train", "--model", "gcn", "--epochs", big], &["--epochs"]);
    refused(&["demo", "--epochs", big], &["--epochs"]);
    refused(&["figures", "--epochs", big, "--out", "f"], &["--epochs"]);
    refused(&["bench", "--model", "gcn", "--epochs", big], &["--epochs"]);
    refused(&["bench", "--model", "gcn", "--warmup", big], &["--warmup"]);
    refused(
        &[
            "bench",
            "--model",
            "gcn",
            "--serving-threads",
            "1",
            "--serving-requests",
            big,
        ],
        &["--serving-requests"],
    );
    refused(&["serve-demo", "--steps", big], &["--steps"]);
    refused(&["serve-demo", "--requests", big], &["--requests"]);
    refused(
        &["bench", "--model", "gcn", "--sweep", "5000000000"],
        &["--sweep"],
    );

    // a layer width nobody can allocate, and one whose products overflow
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workbook/tests/fixtures/pyg/gcn_karate.safetensors");
    for (name, json) in [
        (
            "wide.json",
            r#"{"layer": "GCNConv", "in_channels": 34, "out_channels": 1000000000000}"#,
        ),
        (
            "overflow.json",
            r#"{"layer": "GATv2Conv", "in_channels": 34, "out_channels": 9223372036854775807, "heads": 4}"#,
        ),
    ] {
        std::fs::write(d.join(name), json).unwrap();
        let cfg = d.join(name);
        for cmd in [
            vec!["predict", "--config", cfg.to_str().unwrap(), "--graph"],
            vec![
                "export",
                "--format",
                "onnx",
                "--model",
                cfg.to_str().unwrap(),
                "--out",
                "m.onnx",
                "--weights",
            ],
        ] {
            let mut args = cmd.clone();
            args.push(fx.to_str().unwrap());
            if args[0] == "predict" {
                args.extend(["--weights", fx.to_str().unwrap(), "--out", "o.safetensors"]);
            }
            refused(&args, &["widths are limited"]);
        }
    }
}

#[test]
fn overflowing_numbers_are_refused() {
    let past_u64 = "18446744073709551616"; // u64::MAX + 1
    refused(
        &["train", "--model", "gcn", "--epochs", past_u64],
        &["--epochs"],
    );
    refused(
        &["train", "--model", "gcn", "--seed", past_u64],
        &["--seed"],
    );
    refused(
        &["bench", "--model", "gcn", "--threads", past_u64],
        &["--threads"],
    );
    refused(&["serve-demo", "--requests", past_u64], &["--requests"]);
    refused(
        &[
            "data",
            "--dataset",
            &format!("csbm:{past_u64}"),
            "--out",
            "g.safetensors",
        ],
        &["must be a node count"],
    );
    // the largest value that parses: warm-up plus repeats would overflow
    let max = u64::MAX.to_string();
    refused(
        &["bench", "--model", "gcn", "--warmup", &max, "--epochs", "1"],
        &["--warmup"],
    );
    refused(
        &["train", "--model", "gcn", "--epochs", &max],
        &["--epochs"],
    );
    refused(&["serve-demo", "--threads", &max], &["--threads"]);
    refused(
        &[
            "data",
            "--dataset",
            &format!("csbm:{max}"),
            "--out",
            "g.safetensors",
        ],
        &["needs about", "available"],
    );
}
