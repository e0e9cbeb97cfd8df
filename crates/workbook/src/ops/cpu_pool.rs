//! The CPU thread pool: how many threads the kernels and candle use, and running a training
//! step on one of them.
//!
//! The kernels and candle's matrix products run their parallel loops on rayon's global pool.
//! A loop started from a thread outside the pool hands its work to the pool and sleeps until a
//! worker has done it: a wake-up and a sleep per loop, dozens of loops per training step. Started
//! from a worker, the same loop runs on that worker at once (and with more threads, the others
//! steal parts of it). [`on_cpu_pool`] runs a step on a worker, so only the step itself is handed
//! over; a GATv2 step on a `csbm:100000` batch took 10-25% less time so (one and two threads,
//! `perf` showed the sleeps and wake-ups). Values do not change: every loop splits its work the
//! same way wherever it starts.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::on_cpu_pool;
//! let x = Tensor::new(&[1f32, 2., 3.], &Device::Cpu).unwrap();
//! let y = on_cpu_pool(x.device(), || (&x * 2.0)?.sum_all()).unwrap();
//! assert_eq!(y.to_scalar::<f32>().unwrap(), 12.0);
//! ```

use candle_core::Device;

/// Uses `threads` CPU threads for the kernels (rayon's global pool) and for candle's own CPU ops
/// (which read `RAYON_NUM_THREADS` / `CANDLE_NUM_THREADS` when their pools start). Call it before
/// any tensor work: pools that already started keep their size, and this then reports an error.
pub fn set_cpu_threads(threads: usize) -> crate::Result<()> {
    crate::limits::check_threads("threads", threads)?;
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());
    // candle's element-wise ops run on its own pool, whose workers spin 25,000 rounds after
    // each op before they sleep; the kernels run on rayon's. With as many threads as cores,
    // that spinning takes a core from the kernels' threads (a fifth of all CPU time in a
    // two-thread GATv2 mini-batch step, `perf`). A short spin still covers back-to-back ops.
    // A value the user set stays.
    if std::env::var_os("CANDLE_BARRIER_POOL_SPIN_LIMIT").is_none() {
        std::env::set_var("CANDLE_BARRIER_POOL_SPIN_LIMIT", "1000");
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
    if built.is_err() && rayon::current_num_threads() != threads {
        return Err(crate::WorkbookError::InvalidConfig(format!(
            "the CPU thread pool already runs {} threads; set the thread count before any tensor work",
            rayon::current_num_threads()
        )));
    }
    Ok(())
}

/// Threads the CPU kernels run on.
pub fn cpu_threads() -> usize {
    rayon::current_num_threads()
}

/// Runs `f` on a thread of the CPU pool when `device` is the CPU (see the module docs), and on
/// this thread otherwise (a GPU step only queues work, and its context belongs to this thread).
/// `f` must not wait for other work that needs the pool (a channel fed by a thread that runs
/// parallel loops): with one thread, the pool's only worker would be the one waiting.
pub fn on_cpu_pool<R: Send>(device: &Device, f: impl FnOnce() -> R + Send) -> R {
    if !device.is_cpu() || rayon::current_thread_index().is_some() {
        return f();
    }
    rayon::scope(|_| f())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_step_runs_on_a_pool_worker_and_nested_calls_stay_there() {
        assert!(
            rayon::current_thread_index().is_none(),
            "tests start off the pool"
        );
        let (outer, inner) = on_cpu_pool(&Device::Cpu, || {
            let outer = rayon::current_thread_index();
            let inner = on_cpu_pool(&Device::Cpu, rayon::current_thread_index);
            (outer, inner)
        });
        assert!(outer.is_some(), "the step ran off the pool");
        assert_eq!(inner, outer, "a nested call moved to another thread");
    }
}
