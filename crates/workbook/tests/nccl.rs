//! The NCCL process group (`parallel::NcclGroup`) on real GPUs: all-reduce and broadcast of
//! `cuda:N` tensors where they live, the host buffers, the checks that run before NCCL (two ranks
//! on one GPU, lengths that differ) and the time limit.
//!
//! Built only with the `nccl` feature (without it the tests are listed as ignored, with the
//! command). The binary links libcuda and libnccl, so it starts only where they are (a GPU
//! machine; `scripts/gpu/nccl_world1.sh` runs it there from a build made elsewhere). With the
//! libraries but without enough GPUs each test prints `SKIPPED: no CUDA device (...)` or how
//! many it needs, and returns, unless `WORKBOOK_REQUIRE_GPU=N` says this machine has at least N
//! GPUs: then a test that needs at most N fails instead of skipping.
//!
//! - `world_of_this_process`: world size 1, or under `mpirun -n N` (built with `--features
//!   nccl,mpi`) every rank on `cuda:{rank}`:
//!   `mpirun -n 2 <binary> world_of_this_process --test-threads=1`.
//! - `two_ranks_on_one_gpu_are_refused_on_both`: one GPU is enough.
//! - `two_gpus_*`: two ranks as threads of this process on `cuda:0` and `cuda:1`. No machine with
//!   two GPUs has been available to this project: these have not run yet.

#[test]
#[cfg_attr(
    not(feature = "nccl"),
    ignore = "needs NCCL and a GPU: cargo test -p workbook --features nccl --test it nccl::"
)]
fn world_of_this_process_reduces_and_broadcasts_cuda_tensors() {
    #[cfg(feature = "nccl")]
    on_gpus::world_of_this_process();
}

#[test]
#[cfg_attr(
    not(feature = "nccl"),
    ignore = "needs NCCL and a GPU: cargo test -p workbook --features nccl --test it nccl::"
)]
fn two_ranks_on_one_gpu_are_refused_on_both() {
    #[cfg(feature = "nccl")]
    on_gpus::two_ranks_on_one_gpu();
}

#[test]
#[cfg_attr(
    not(feature = "nccl"),
    ignore = "needs NCCL and two GPUs: cargo test -p workbook --features nccl --test it nccl::"
)]
fn two_gpus_reduce_and_broadcast_across_ranks() {
    #[cfg(feature = "nccl")]
    on_gpus::two_gpus_reduce_and_broadcast();
}

#[test]
#[cfg_attr(
    not(feature = "nccl"),
    ignore = "needs NCCL and two GPUs: cargo test -p workbook --features nccl --test it nccl::"
)]
fn two_gpus_refuse_mismatches_and_end_a_missing_rank_in_the_time_limit() {
    #[cfg(feature = "nccl")]
    on_gpus::two_gpus_mismatches_and_timeout();
}

#[cfg(feature = "nccl")]
mod on_gpus {
    use std::sync::Arc;
    use std::time::Duration;
    use workbook::candle_core::cuda_backend::cudarc::driver::CudaContext;
    use workbook::candle_core::{DType, Device, DeviceLocation, Tensor};
    use workbook::parallel::{NcclGroup, ProcessGroup, ThreadGroup, World};
    use workbook::placement::Placement;

    const LIMIT: Duration = Duration::from_secs(60);

    /// How many GPUs this machine has, or `None` after saying why the test is skipped: fewer
    /// than `need`. With `WORKBOOK_REQUIRE_GPU=N` and `need <= N`, too few is a failure.
    fn gpus(test: &str, need: usize) -> Option<usize> {
        let required = match std::env::var("WORKBOOK_REQUIRE_GPU") {
            Err(_) => 0,
            Ok(v) => v.parse::<usize>().unwrap_or_else(|_| {
                panic!("WORKBOOK_REQUIRE_GPU={v:?}: give the number of GPUs this machine must have, e.g. 1")
            }),
        };
        let count = match CudaContext::device_count() {
            Ok(n) => n.max(0) as usize,
            Err(e) => {
                assert!(
                    required == 0,
                    "{test}: WORKBOOK_REQUIRE_GPU={required}, but no CUDA device ({e:?})"
                );
                println!("SKIPPED: no CUDA device ({test}: {e:?})");
                return None;
            }
        };
        if count >= need {
            return Some(count);
        }
        assert!(
            required < need,
            "{test}: needs {need} GPUs and WORKBOOK_REQUIRE_GPU={required}, but this machine has {count}"
        );
        if count == 0 {
            println!("SKIPPED: no CUDA device ({test}: the driver reports 0)");
        } else {
            println!(
                "SKIPPED: {test} needs {need} CUDA devices, this machine has {count} (no CUDA device for rank {count})"
            );
        }
        None
    }

    fn gpu_of(t: &Tensor) -> Option<usize> {
        match t.device().location() {
            DeviceLocation::Cuda { gpu_id } => Some(gpu_id),
            _ => None,
        }
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all()
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec1()
            .unwrap()
    }

    /// The same checks on every rank of `world`, whose tensors live on `gpu`.
    fn check_collectives(world: &World, gpu: &Device) {
        let (r, n) = (world.rank(), world.world_size());
        let at = Placement::of(gpu);
        let s = (n * (n + 1) / 2) as f32; // the sum of (rank + 1) over the ranks
        assert_eq!(world.backend(), "nccl");

        // A contiguous tensor, a narrowed one (its data starts at an offset) and a transposed
        // one (not contiguous): each rank's is (rank + 1) times the same numbers.
        let cpu = Tensor::arange(0f32, 24.0, &Device::Cpu)
            .unwrap()
            .reshape((4, 6))
            .unwrap();
        let mine = (cpu.clone() * (r + 1) as f64)
            .unwrap()
            .to_device(gpu)
            .unwrap();
        let cases = [
            ("whole", mine.clone(), cpu.clone()),
            (
                "narrowed",
                mine.narrow(0, 1, 2).unwrap(),
                cpu.narrow(0, 1, 2).unwrap(),
            ),
            ("transposed", mine.t().unwrap(), cpu.t().unwrap()),
        ];
        for (name, t, base) in cases {
            let sum = world.all_reduce_tensor(&t, &at, name).unwrap();
            assert_eq!(gpu_of(&sum), gpu_of(&t), "{name}: the sum left the GPU");
            assert_eq!(sum.dims(), t.dims(), "{name}");
            let want: Vec<f32> = values(&base).iter().map(|v| v * s).collect();
            assert_eq!(values(&sum), want, "{name}: rank {r} of {n}");
        }

        // float64 is reduced on the device too.
        let t64 = Tensor::new(&[0.25f64 * (r + 1) as f64, -1.0], gpu).unwrap();
        let sum64 = world.all_reduce_tensor(&t64, &at, "float64").unwrap();
        assert_eq!(sum64.dtype(), DType::F64);
        assert_eq!(
            sum64.to_vec1::<f64>().unwrap(),
            vec![0.25 * s as f64, -(n as f64)]
        );

        // Broadcast from the last rank: every rank ends with its tensor.
        let root = n - 1;
        let t = Tensor::full(r as f32 + 0.5, (2, 3), gpu).unwrap();
        let got = world.broadcast_tensor(&t, &at, root, "parameters").unwrap();
        assert_eq!(gpu_of(&got), Some(gpu_of(&t).unwrap()));
        assert_eq!(got.dims(), &[2, 3]);
        assert_eq!(values(&got), vec![root as f32 + 0.5; 6]);
        assert_eq!(
            values(&t),
            vec![r as f32 + 0.5; 6],
            "the input is left as it was"
        );

        // A CPU tensor takes the host path (Ok(None) from the group), through NCCL all the same.
        let host = Tensor::new(&[(r + 1) as f32, 1.0], &Device::Cpu).unwrap();
        let sum = world
            .all_reduce_tensor(&host, &Placement::cpu(), "a cpu tensor")
            .unwrap();
        assert!(sum.device().is_cpu());
        assert_eq!(values(&sum), vec![s, n as f32]);

        // Host buffers: sum, broadcast, the World's call check (max over u64), agree, barrier.
        let mut v = vec![(r + 1) as f32; 5];
        world.all_reduce_sum(&mut v, "host sum").unwrap();
        assert_eq!(v, vec![s; 5]);
        let mut b = vec![r as f32, 7.0];
        world.broadcast(&mut b, root, "host broadcast").unwrap();
        assert_eq!(b, vec![root as f32, 7.0]);
        world.agree("the config", 0x5eed).unwrap();
        assert!(world.any(r == root, "someone").unwrap());
        assert!(!world.any(false, "nobody").unwrap());
        world.barrier("the end").unwrap();
        // An empty buffer is still a call every rank makes.
        world.all_reduce_sum(&mut [], "nothing").unwrap();
    }

    pub fn world_of_this_process() {
        let test = "world_of_this_process";
        let Some(count) = gpus(test, 1) else { return };
        #[cfg(feature = "mpi")]
        let mpi = workbook::parallel::mpi_group::launched()
            .then(|| workbook::parallel::MpiGroup::init().expect("MPI starts under mpirun"));
        #[cfg(not(feature = "mpi"))]
        let mpi: Option<ThreadGroup> = None;
        let one;
        let bootstrap: &dyn ProcessGroup = match &mpi {
            Some(m) => m,
            None => {
                one = ThreadGroup::new(1).unwrap().pop().unwrap();
                &one
            }
        };
        let (r, n) = (bootstrap.rank(), bootstrap.world_size());
        if n > count {
            // Every rank sees the same count, so every rank skips (or fails) alike.
            let _ = gpus(test, n);
            return;
        }
        let gpu = Device::new_cuda(r).unwrap();
        let group = NcclGroup::new(bootstrap, &gpu, LIMIT).unwrap();
        assert_eq!(
            (group.rank(), group.world_size(), group.ordinal()),
            (r, n, r)
        );
        let world = World::new(Arc::new(group)).with_timeout(LIMIT);
        check_collectives(&world, &gpu);
        println!("nccl: rank {r} of {n} on cuda:{r}: all-reduce and broadcast checked");
        if n == 1 {
            // NcclGroup::single is the same world of one without a bootstrap.
            let world = World::new(Arc::new(NcclGroup::single(&gpu).unwrap()));
            check_collectives(&world, &gpu);
        }
    }

    pub fn two_ranks_on_one_gpu() {
        let test = "two_ranks_on_one_gpu_are_refused_on_both";
        if gpus(test, 1).is_none() {
            return;
        }
        let out = ThreadGroup::run(2, |g| {
            let gpu = Device::new_cuda(0).unwrap();
            NcclGroup::new(&g, &gpu, LIMIT).map(|_| ())
        });
        for (rank, o) in out.into_iter().enumerate() {
            let e = o
                .expect_err("two ranks on cuda:0 must be refused")
                .to_string();
            assert!(
                e.contains(&format!("rank {rank} of 2"))
                    && e.contains("ranks 0 and 1 are on the same GPU (cuda:0 and cuda:0")
                    && e.contains("cuda:{local rank}"),
                "rank {rank}: {e}"
            );
        }
        // A CPU device is refused too, on the rank that has it and on the other.
        let out = ThreadGroup::run(2, |g| {
            let device = if g.rank() == 0 {
                Device::new_cuda(0).unwrap()
            } else {
                Device::Cpu
            };
            NcclGroup::new(&g, &device, LIMIT).map(|_| ())
        });
        let e0 = out[0].as_ref().unwrap_err().to_string();
        let e1 = out[1].as_ref().unwrap_err().to_string();
        assert!(e0.contains("rank 1 was not given a CUDA device"), "{e0}");
        assert!(
            e1.contains("NCCL works on CUDA devices") && e1.contains("Cpu"),
            "{e1}"
        );
    }

    pub fn two_gpus_reduce_and_broadcast() {
        if gpus("two_gpus_reduce_and_broadcast_across_ranks", 2).is_none() {
            return;
        }
        let out = ThreadGroup::run(2, |g| {
            let gpu = Device::new_cuda(g.rank()).unwrap();
            let group = NcclGroup::new(&g, &gpu, LIMIT)?;
            let world = World::new(Arc::new(group)).with_timeout(LIMIT);
            check_collectives(&world, &gpu);
            Ok(())
        });
        for (rank, o) in out.into_iter().enumerate() {
            o.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        }
    }

    pub fn two_gpus_mismatches_and_timeout() {
        if gpus("two_gpus_refuse_mismatches_and_end_a_missing_rank", 2).is_none() {
            return;
        }
        let short = Duration::from_secs(3);
        // Lengths that differ: both ranks fail, naming both lengths.
        let out = ThreadGroup::run(2, |g| {
            let gpu = Device::new_cuda(g.rank()).unwrap();
            let group = NcclGroup::new(&g, &gpu, LIMIT)?;
            let mut v = vec![1.0f32; 3 + g.rank()];
            let e = group.all_reduce_sum(&mut v, short).unwrap_err().to_string();
            assert!(
                e.contains("different lengths") && e.contains("the largest 4, the smallest 3"),
                "{e}"
            );
            // A tensor on the other rank's GPU: this rank says so, the other hears at once.
            let other = Device::new_cuda(1 - g.rank()).unwrap();
            let t = if g.rank() == 0 {
                Tensor::zeros(4, DType::F32, &other)?
            } else {
                Tensor::zeros(4, DType::F32, &gpu)?
            };
            let e = group
                .all_reduce_sum_on_device(&t, short)
                .unwrap_err()
                .to_string();
            if g.rank() == 0 {
                assert!(
                    e.contains(
                        "the tensor is on cuda:1, but this rank's communicator is on cuda:0"
                    ),
                    "{e}"
                );
            } else {
                assert!(e.contains("different lengths"), "{e}");
            }
            // The group still works after errors found before NCCL ran.
            let mut v = vec![1.0f32; 2];
            group.all_reduce_sum(&mut v, LIMIT)?;
            assert_eq!(v, vec![2.0, 2.0]);
            Ok(())
        });
        for (rank, o) in out.into_iter().enumerate() {
            o.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        }
        // Out of step (the World's check, over NCCL): both ranks fail and name both calls.
        let out = ThreadGroup::run(2, |g| {
            let gpu = Device::new_cuda(g.rank()).unwrap();
            let world = World::new(Arc::new(NcclGroup::new(&g, &gpu, LIMIT)?)).with_timeout(LIMIT);
            let mut grads = vec![1.0f32];
            if world.rank() == 1 {
                world.barrier("end of epoch")?;
            }
            world.all_reduce_sum(&mut grads, "gradients")
        });
        for o in &out {
            let e = o.as_ref().unwrap_err().to_string();
            assert!(
                e.contains("'all_reduce gradients'") && e.contains("'barrier end of epoch'"),
                "{e}"
            );
        }
        // A rank that never comes: the other ends in its time limit, its communicator aborted,
        // and every later call says so instead of waiting again.
        let out = ThreadGroup::run(2, |g| {
            let gpu = Device::new_cuda(g.rank()).unwrap();
            let group = NcclGroup::new(&g, &gpu, LIMIT)?;
            if g.rank() == 1 {
                return Ok(None); // rank 1 skips the all-reduce and drops its communicator
            }
            let t = Tensor::ones(1000, DType::F32, &gpu)?;
            let start = std::time::Instant::now();
            let e = group
                .all_reduce_sum_on_device(&t, short)
                .unwrap_err()
                .to_string();
            let waited = start.elapsed();
            let mut v = [1.0f32];
            let after = group.all_reduce_sum(&mut v, short).unwrap_err().to_string();
            // The GPU is usable again after the abort.
            let still = (t.clone() + 1.0)?.sum_all()?.to_scalar::<f32>()?;
            Ok(Some((e, waited, after, still)))
        });
        let (e, waited, after, still) = out[0].as_ref().unwrap().clone().unwrap();
        assert!(out[1].is_ok());
        assert!(
            e.contains("rank 0 of 2") && e.contains("timed out") && e.contains("ncclCommAbort"),
            "{e}"
        );
        assert!(waited >= short && waited < short * 3, "waited {waited:?}");
        assert!(
            after.contains("aborted after an earlier collective timed out"),
            "{after}"
        );
        assert_eq!(still, 2000.0);
    }
}
