//! The command-line output the book shows (chapter 5), written by running the command.
//!
//! `book/src/generated/ch05_cli.txt` holds the parts of
//! `workbook --device sim:1 train --model gcn --dataset cora --batch-size 128 --num-neighbors
//! 10,10 --epochs 3 --ledger` that do not depend on timing: the transfer ledger (stderr) and the
//! JSON line's byte counts. The test fails when the file is stale; refresh it with
//!
//! ```sh
//! WORKBOOK_BLESS=1 cargo test -p workbook-cli --test it book_cli::
//! ```

use std::path::PathBuf;
use std::process::Command;

/// The ledger's header, the model's rows, the first epoch's training steps and the first
/// evaluation's first batch, then the last line (the totals): the rows after that repeat the
/// same pattern for every epoch.
fn excerpt(ledger: &str) -> String {
    let lines: Vec<&str> = ledger.lines().collect();
    let mut out = vec!["(stderr, an excerpt)".to_string()];
    let (mut seen_eval, mut eval_rows, mut cut) = (false, 0, false);
    for line in &lines[..lines.len() - 1] {
        let is_eval = line.starts_with("eval 1 ");
        if line.starts_with("eval ") && !is_eval || (seen_eval && line.starts_with("epoch")) {
            cut = true;
            break;
        }
        if is_eval {
            seen_eval = true;
            eval_rows += 1;
            if eval_rows > 7 {
                continue;
            }
        }
        out.push(line.to_string());
    }
    let eval_metrics = lines
        .iter()
        .find(|l| l.starts_with("eval 1") && l.contains("metrics"));
    out.push("...      (the other evaluation batches of eval 1)".into());
    if let Some(m) = eval_metrics {
        out.push(m.to_string());
    }
    if cut {
        out.push("...      (epochs 2 and 3, and their evaluations, the same way)".into());
    }
    out.push(lines[lines.len() - 1].to_string());
    out.join("\n") + "\n"
}

#[test]
fn ch05_the_mini_batch_command_and_its_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--device",
        "sim:1",
        "train",
        "--model",
        "gcn",
        "--dataset",
        "cora",
        "--batch-size",
        "128",
        "--num-neighbors",
        "10,10",
        "--epochs",
        "3",
        "--ledger",
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(args)
        .current_dir(dir.path())
        .env("WORKBOOK_DATA_DIR", dir.path().join("no-data"))
        .env_remove("WORKBOOK_DEVICE")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "workbook failed:\n{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");

    // stderr: progress, then "transfer ledger (sim:1):" and the table.
    let ledger = stderr
        .split_once("transfer ledger")
        .map(|(_, t)| format!("transfer ledger{t}"))
        .expect("--ledger prints the transfer ledger on stderr");
    let mut text = format!("$ cargo run --release -- {}\n", args.join(" "));
    text.push_str(&excerpt(&ledger));
    text.push_str("(stdout, the JSON line's byte counts; timings and accuracies left out)\n");
    for key in ["device", "batches_per_epoch", "bytes_per_step", "eval"] {
        text.push_str(&format!("\"{key}\": {}\n", json[key]));
    }
    text.push_str(&format!("\"ledger\": {}\n", json["ledger"]));

    // What the chapter says about it.
    assert_eq!(json["device"], "sim:1");
    let phases: Vec<&str> = json["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    for phase in ["init", "epoch *", "eval *"] {
        assert!(phases.contains(&phase), "phase {phase} in {phases:?}");
    }
    let bytes = |phase: &str| {
        json["ledger"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phase"] == phase)
            .and_then(|p| p["bytes"].as_u64())
            .unwrap()
    };
    assert!(
        bytes("eval *") > bytes("epoch *"),
        "chapter 5 says evaluation by batches moves more than training: {text}"
    );

    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../book/src/generated/ch05_cli.txt");
    if std::env::var_os("WORKBOOK_BLESS").is_some() {
        workbook::atomic_write::write(&path, text.as_bytes()).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        on_disk,
        text,
        "{} is stale: refresh with WORKBOOK_BLESS=1 cargo test -p workbook-cli --test it book_cli::",
        path.display()
    );
}
