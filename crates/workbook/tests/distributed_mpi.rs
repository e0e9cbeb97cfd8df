//! Distributed training over MPI processes (feature `mpi`): each test starts
//! `mpirun -n N <this test binary> --ignored --exact rank_main` with a scenario in the
//! environment; `rank_main` is each rank's program. One thread per rank.
//!
//! Without the feature this file is empty; without `mpirun` on PATH each test says it skipped,
//! unless `WORKBOOK_REQUIRE_MPI=1` (set by `.ci/run`), which makes that a failure.
#![cfg(feature = "mpi")]

mod common {
    pub mod ddp_replay;
}
use common::ddp_replay::{
    config, data_parallel_on_the_ranks_batches, graph, max_difference, mb, params, Params,
};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workbook::parallel::{DistributedDataParallel, DistributedTrainer, MpiGroup, World};
use workbook::placement::Placement;
use workbook::train::TrainConfig;
use workbook::{loader, Model};

const EPOCHS: usize = 2;

/// Each rank's program, run by `mpirun` (ignored in a normal test run).
#[test]
#[ignore = "the program of each rank under mpirun, started by the tests below"]
fn rank_main() {
    let scenario = std::env::var("WORKBOOK_MPI_SCENARIO").expect("started by a test below");
    let out = std::path::PathBuf::from(std::env::var("WORKBOOK_MPI_OUT").unwrap());
    let group = Arc::new(MpiGroup::init().unwrap());
    let timeout = Duration::from_millis(
        std::env::var("WORKBOOK_MPI_TIMEOUT_MS").map_or(60_000, |v| v.parse().unwrap()),
    );
    let world = Arc::new(World::new(group.clone()).with_timeout(timeout));
    let rank = world.rank();
    let result = run_scenario(&scenario, world, &out);
    match result {
        Ok(()) => {}
        Err(e) => {
            std::fs::write(out.join(format!("rank{rank}.err")), e.to_string()).unwrap();
            // A failed rank ends the job: the others would wait in their next collective.
            std::thread::sleep(Duration::from_millis(300));
            group.abort(3);
        }
    }
}

fn run_scenario(scenario: &str, world: Arc<World>, out: &Path) -> workbook::Result<()> {
    let g = graph();
    let rank = world.rank();
    let at = Placement::sim(rank + 1);
    match scenario {
        "train" => {
            let mut t =
                DistributedTrainer::new(config(&g), &g, &TrainConfig::gcn(), mb(), world, &at)?;
            for _ in 0..EPOCHS {
                let e = t.epoch()?;
                assert!(e.in_sync);
            }
            let p = params(t.ddp().module());
            std::fs::write(
                out.join(format!("rank{rank}.json")),
                serde_json::to_string(&p).unwrap(),
            )
            .unwrap();
            Ok(())
        }
        "skip" | "stop" => {
            let l = loader::NeighborLoader::new(&g, loader::LoaderConfig::new(&[5, 5], 8))?;
            let (model, _) = Model::init(config(&g), 0, Placement::cpu())?;
            let mut ddp =
                DistributedDataParallel::new(&model, world.clone(), &at, &TrainConfig::gcn())?;
            for k in 0..3 {
                if rank == 1 && ((scenario == "skip" && k == 1) || (scenario == "stop" && k > 0)) {
                    continue;
                }
                let b = l.batch(0, k)?.to_device(&at)?;
                ddp.step(Some(&b))?;
            }
            if scenario == "skip" {
                world.barrier("end of epoch")?;
            } else if rank == 1 {
                // stopped early, and stays alive (as a rank stuck elsewhere would)
                std::thread::sleep(Duration::from_secs(20));
            }
            Ok(())
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// `mpirun -n ranks` of `rank_main` with `scenario`; `None` when mpirun is missing (and allowed
/// to be). Returns the exit status and the output folder.
fn mpirun(
    ranks: usize,
    scenario: &str,
    timeout_ms: u64,
) -> Option<(std::process::ExitStatus, tempfile::TempDir, Duration)> {
    if Command::new("mpirun").arg("--version").output().is_err() {
        let why = "mpirun not found: install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev)";
        if std::env::var_os("WORKBOOK_REQUIRE_MPI").is_some() {
            panic!("WORKBOOK_REQUIRE_MPI is set but {why}");
        }
        eprintln!("SKIPPED: {why}");
        return None;
    }
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut child = Command::new("mpirun")
        .args(["-n", &ranks.to_string(), "--oversubscribe"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "rank_main",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WORKBOOK_MPI_SCENARIO", scenario)
        .env("WORKBOOK_MPI_OUT", out.path())
        .env("WORKBOOK_MPI_TIMEOUT_MS", timeout_ms.to_string())
        // one thread per rank
        .env("RAYON_NUM_THREADS", "1")
        // Open MPI refuses to start as root without both (CI runs as root)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("RUST_BACKTRACE")
        .spawn()
        .unwrap();
    // A hang is the failure these tests exist to rule out: never wait for one.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("mpirun -n {ranks} ({scenario}) still running after 120 s: a hang");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Some((status, out, started.elapsed()))
}

fn read_err(out: &Path, rank: usize) -> Option<String> {
    std::fs::read_to_string(out.join(format!("rank{rank}.err"))).ok()
}

#[test]
fn two_processes_end_with_identical_parameters_equal_to_data_parallel() {
    let Some((status, out, _)) = mpirun(2, "train", 60_000) else {
        return;
    };
    assert!(
        status.success(),
        "mpirun failed: {status}; {:?} {:?}",
        read_err(out.path(), 0),
        read_err(out.path(), 1)
    );
    let read = |r: usize| -> Params {
        serde_json::from_str(
            &std::fs::read_to_string(out.path().join(format!("rank{r}.json"))).unwrap(),
        )
        .unwrap()
    };
    let (p0, p1) = (read(0), read(1));
    assert_eq!(p0, p1, "the two processes' parameters differ");
    let g = graph();
    // the ranks' loader, rebuilt here as DistributedTrainer builds it
    let l = workbook::parallel::ThreadGroup::run(1, |grp| {
        let w = Arc::new(World::new(Arc::new(grp)));
        Ok(DistributedTrainer::new(
            config(&g),
            &g,
            &TrainConfig::gcn(),
            mb(),
            w,
            &Placement::cpu(),
        )?
        .loader()
        .clone())
    })
    .pop()
    .unwrap()
    .unwrap();
    let (_, want) = data_parallel_on_the_ranks_batches(&g, &l, 2, EPOCHS as u64);
    let worst = max_difference(&p0, &want);
    assert!(
        worst <= 1e-5,
        "2 MPI processes and DataParallel over 2 replicas differ by {worst:e}"
    );
}

#[test]
fn a_process_that_skips_a_step_is_named_and_the_job_ends() {
    let Some((status, out, _)) = mpirun(2, "skip", 60_000) else {
        return;
    };
    assert!(!status.success());
    let errs: Vec<String> = (0..2).filter_map(|r| read_err(out.path(), r)).collect();
    assert!(!errs.is_empty(), "no rank reported an error");
    for e in &errs {
        assert!(
            e.contains("'all_reduce gradients'") && e.contains("'barrier end of epoch'"),
            "{e}"
        );
    }
}

#[test]
fn a_process_that_stops_early_ends_the_others_wait_at_the_time_limit() {
    let Some((status, out, took)) = mpirun(2, "stop", 2_000) else {
        return;
    };
    assert!(!status.success());
    let e = read_err(out.path(), 0).expect("rank 0 reports the time-out");
    assert!(
        e.contains("rank 0 of 2") && e.contains("timed out after 2s"),
        "{e}"
    );
    // rank 1 sleeps 20 s: the abort ended it, not its own exit
    assert!(took < Duration::from_secs(18), "took {took:?}");
}
