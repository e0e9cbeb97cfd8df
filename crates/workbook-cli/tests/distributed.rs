//! `workbook train --distributed`: one process per device under mpirun (feature `mpi`), and
//! the errors of a distributed start (no MPI in the build, no launcher, ranks that disagree).

use std::path::Path;
use std::process::{Command, Output};

fn workbook(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workbook"))
        .args(args)
        .current_dir(cwd)
        .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the binary runs")
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

const TRAIN: &[&str] = &[
    "train",
    "--model",
    "gcn",
    "--epochs",
    "2",
    "--batch-size",
    "2",
    "--distributed",
];

#[test]
fn distributed_with_a_device_is_refused_with_the_option_that_chooses_each_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--device", "cpu"];
    args.extend_from_slice(TRAIN);
    let err = failure(&workbook(&args, dir.path()));
    assert!(err.contains("--rank-device"), "{err}");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn without_the_mpi_feature_distributed_says_how_to_build_and_start_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = failure(&workbook(TRAIN, dir.path()));
    assert!(
        err.contains("built without MPI") && err.contains("--features mpi"),
        "{err}"
    );
    assert!(err.contains("mpirun -n 2"), "{err}");
}

#[cfg(feature = "mpi")]
mod with_mpi {
    use super::*;

    fn mpirun(args: &[&str], cwd: &Path) -> Option<Output> {
        if Command::new("mpirun").arg("--version").output().is_err() {
            assert!(
                std::env::var_os("WORKBOOK_REQUIRE_MPI").is_none(),
                "WORKBOOK_REQUIRE_MPI is set but mpirun is not on PATH"
            );
            eprintln!("SKIPPED: mpirun not found (Debian: apt-get install openmpi-bin)");
            return None;
        }
        Some(
            Command::new("mpirun")
                .arg("--oversubscribe")
                .args(args)
                .current_dir(cwd)
                .env("WORKBOOK_DATA_DIR", cwd.join("no-data"))
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("RAYON_NUM_THREADS", "1")
                .env_remove("RUST_BACKTRACE")
                .output()
                .unwrap(),
        )
    }

    #[test]
    fn two_ranks_print_once_save_once_and_the_checkpoint_loads_in_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let bin = env!("CARGO_BIN_EXE_workbook");
        let mut args = vec!["-n", "2", bin];
        args.extend_from_slice(TRAIN);
        args.extend_from_slice(&["--save", "ddp.safetensors"]);
        let Some(out) = mpirun(&args, dir.path()) else {
            return;
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('{')).collect();
        assert_eq!(lines.len(), 1, "only rank 0 reports:\n{stdout}");
        let j: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(j["world_size"], 2);
        assert_eq!(j["backend"], "mpi");
        assert_eq!(j["rank_devices"], serde_json::json!(["sim:1", "sim:2"]));
        assert_eq!(j["ranks_in_sync"], true);
        assert_eq!(j["rank_epoch_ms"].as_array().unwrap().len(), 2);
        // the world is printed once, by rank 0
        assert_eq!(stderr.matches("rank 1: sim:2").count(), 1, "{stderr}");
        assert_eq!(stderr.matches("saved the model").count(), 1, "{stderr}");
        let m = workbook::checkpoint::load(
            &dir.path().join("ddp.safetensors"),
            workbook::placement::Placement::cpu(),
        )
        .unwrap();
        assert!(m
            .vars()
            .unwrap()
            .iter()
            .all(|(n, _)| !n.starts_with("module.")));
    }

    #[test]
    fn started_without_a_launcher_it_says_how_to_start_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = failure(&workbook(TRAIN, dir.path()));
        assert!(
            err.contains("started alone") && err.contains("mpirun -n 2"),
            "{err}"
        );
    }

    #[test]
    fn ranks_started_with_different_arguments_stop_before_training() {
        let dir = tempfile::tempdir().unwrap();
        let bin = env!("CARGO_BIN_EXE_workbook");
        let mut args = vec!["-n", "1", bin];
        args.extend_from_slice(TRAIN);
        args.extend_from_slice(&[":", "-n", "1", bin]);
        args.extend_from_slice(TRAIN);
        args.extend_from_slice(&["--seed", "1"]);
        let Some(out) = mpirun(&args, dir.path()) else {
            return;
        };
        let err = failure(&out);
        assert!(
            err.contains("the ranks disagree on the command line"),
            "{err}"
        );
        assert!(
            err.contains("--seed 1"),
            "the rank's own command line is shown: {err}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains('{'),
            "no report from a run that did not happen"
        );
    }
}
