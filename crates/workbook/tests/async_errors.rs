//! Asynchronous device errors on simulated devices (issue 37, point 3): an out-of-range id in a
//! raw `edge_index`, met by the gather and scatter of a reader's own layer
//! (`ops::raw_index`), reported as the CPU does (at once), as CUDA does (at a later operation
//! that may not be the cause, then sticky), or as `CUDA_LAUNCH_BLOCKING=1` does (at the
//! faulting operation, with its name and the index); and `Graph::validate`, which catches the
//! id before any kernel. Every error's text is asserted. PyG's own behaviour for the same graph
//! is printed by `book/python/ch01_async.py` (book/src/generated/python/ch01_async*.txt).
//!
//! Each test makes its own device with `Placement::sim_with`, so no test depends on another's
//! faults or on the environment; the environment switches are tested in child processes.

use workbook::candle_core::{DType, Device, Tensor};
use workbook::ops::raw_index::{gather_rows, scatter_add_rows};
use workbook::sim_device::SimErrors;
use workbook::{
    datasets, EdgeIndex, Graph, Model, ModelConfig, Placement, UncheckedGraph, WorkbookError,
};

/// A reader's own sum aggregation, written as PyG's `MessagePassing` does it:
/// `x_j = x.index_select(0, edge_index[0])`, then a sum of the messages at `edge_index[1]`.
fn sum_neighbours(data: &UncheckedGraph) -> workbook::Result<Tensor> {
    let (x, ei, at) = (data.x(), data.edge_index(), data.placement());
    let x_j = gather_rows(x, &ei.get(0)?, at, "x[edge_index[0]]")?;
    scatter_add_rows(&x_j, &ei.get(1)?, x.dim(0)?, at, "sum at edge_index[1]")
}

/// Four nodes in a ring, with the ids of a file that counts from 1: (1,2), (2,3), (3,4), (4,1).
/// Node 4 does not exist: the source row has it at position 3, the target row at position 2.
fn one_based_ring() -> UncheckedGraph {
    let x = Tensor::new(&[[1f32, 0.], [0., 1.], [1., 1.], [2., 0.]], &Device::Cpu).unwrap();
    let ei = Tensor::new(&[[1i64, 2, 3, 4], [2, 3, 4, 1]], &Device::Cpu).unwrap();
    UncheckedGraph::new("ring", x, ei)
}

/// The same ring with ids counted from 0.
fn ring() -> UncheckedGraph {
    let data = one_based_ring();
    let ei = (data.edge_index() - 1.0).unwrap();
    UncheckedGraph::new("ring", data.x().clone(), ei)
}

fn rows(t: &Tensor) -> Vec<Vec<f32>> {
    t.to_vec2::<f32>().unwrap()
}

const ASYNC_REPORT: &str = "device-side assert triggered on sim:1, reported by fetch_scalar of 'loss' (PyTorch: .item()). A kernel launched earlier on sim:1 failed; on an asynchronous device (CUDA, or sim:N with WORKBOOK_SIM_ASYNC=1) a kernel's error is reported by some later operation that waits for the device, so this operation may not be the cause. For debugging, rerun with WORKBOOK_LAUNCH_BLOCKING=1 (PyTorch: CUDA_LAUNCH_BLOCKING=1), which reports the error at the operation that caused it, or check the graph before any kernel runs with Graph::validate(&data). sim:1 is now unusable: every later operation on it fails, as every CUDA call does after a device-side assert, until placement.reset_device() (on CUDA: restart the process)";
const STICKY: &str = "sim:1 is unusable: a device-side assert was reported there earlier (by synchronize), and every later operation on the device fails (fetch_vec1 of 'h' (PyTorch: .tolist()) here), as every CUDA call does after one. Find the cause with WORKBOOK_LAUNCH_BLOCKING=1 or Graph::validate(&data), then call placement.reset_device() or use a fresh device (Placement::sim_with); on CUDA, restart the process";
const BLOCKING_GATHER: &str = "device-side assert triggered in gather_rows 'x[edge_index[0]]' on sim:1: index 4 at position 3 is out of range for 4 rows (valid: 0..4; out-of-range indices: 1 of 4); reported by the operation that caused it (WORKBOOK_LAUNCH_BLOCKING=1). If the index is a row of an edge_index, check the graph before any kernel runs with Graph::validate(&data) (PyG: data.validate()). sim:1 is now unusable: every later operation on it fails, as every CUDA call does after a device-side assert, until placement.reset_device() (on CUDA: restart the process)";
const BLOCKING_SCATTER: &str = "device-side assert triggered in scatter_add_rows 'sum at edge_index[1]' on sim:1: index 3 at position 2 is out of range for 3 rows (valid: 0..3; out-of-range indices: 1 of 3); reported by the operation that caused it (WORKBOOK_LAUNCH_BLOCKING=1). If the index is a row of an edge_index, check the graph before any kernel runs with Graph::validate(&data) (PyG: data.validate()). sim:1 is now unusable: every later operation on it fails, as every CUDA call does after a device-side assert, until placement.reset_device() (on CUDA: restart the process)";
const CPU_GATHER: &str = "index out of range in gather_rows 'x[edge_index[0]]' on cpu: index 4 at position 3 is out of range for 4 rows (valid: 0..4; out-of-range indices: 1 of 4). (PyTorch on the CPU: \"IndexError: index out of range in self\".) If the index is a row of an edge_index, an id is not a node of the graph: check the graph before any kernel runs with Graph::validate(&data) (PyG: data.validate())";
const SIM_SYNC_GATHER: &str = "index out of range in gather_rows 'x[edge_index[0]]' on sim:1: index 4 at position 3 is out of range for 4 rows (valid: 0..4; out-of-range indices: 1 of 4). (PyTorch on the CPU: \"IndexError: index out of range in self\".) If the index is a row of an edge_index, an id is not a node of the graph: check the graph before any kernel runs with Graph::validate(&data) (PyG: data.validate())";
const VALIDATE: &str = "edge_index[1][2] = 4 is not a node id: the graph has 4 nodes, so ids must be in 0..4 (edges with an id outside it: 2 of 4; this is the first). Graph::validate caught it before any kernel ran; PyG's data.validate() says \"ValueError: 'edge_index' contains larger indices than the number of nodes (4) in 'Data' (found 4)\". Usual causes: ids counted from 1 (subtract 1), or a subgraph's edges kept with the whole graph's ids (relabel them; PyG: subgraph(subset, edge_index, relabel_nodes=True))";
const VALIDATE_SHAPE: &str = "invalid graph: edge_index must have shape [2, num_edges] (row 0 = sources, row 1 = targets), got [1, 3]; if you have [num_edges, 2], transpose it (PyG's data.validate() says \"ValueError: 'edge_index' needs to be of shape [2, num_edges] in 'Data' (found torch.Size([1, 3]))\")";
const VALIDATE_NEGATIVE: &str = "edge_index[0][1] = -1 is not a node id: the graph has 3 nodes, so ids must be in 0..3 (edges with an id outside it: 1 of 2; this is the first). Graph::validate caught it before any kernel ran; PyG's data.validate() says \"ValueError: 'edge_index' contains negative indices in 'Data' (found -1)\". Usual causes: ids counted from 1 (subtract 1), or a subgraph's edges kept with the whole graph's ids (relabel them; PyG: subgraph(subset, edge_index, relabel_nodes=True))";

#[test]
fn async_mode_reports_at_a_later_operation_that_may_not_be_the_cause() {
    let gpu = Placement::sim_with(1, SimErrors::Asynchronous);
    let data = one_based_ring().to_device(&gpu).unwrap();
    // The faulting kernels return a result, as a GPU launch does: no error here.
    let h = sum_neighbours(&data).unwrap();
    let total = h.relu().unwrap().sum_all().unwrap();
    // The next operation that waits for the device reports it, naming itself.
    let err = gpu.fetch_scalar::<f32>(&total, "loss").unwrap_err();
    assert!(matches!(
        err,
        WorkbookError::DeviceAssert { cause: None, .. }
    ));
    assert_eq!(err.to_string(), ASYNC_REPORT);
    // Only the blocking switch names the real operation.
    for cause in ["gather_rows", "edge_index[0]", "index 4", "position 3"] {
        assert!(!err.to_string().contains(cause), "{cause} in {err}");
    }
}

#[test]
fn async_kernels_return_a_result_anyway_with_the_bad_rows_zeroed() {
    let gpu = Placement::sim_with(1, SimErrors::Asynchronous);
    let data = one_based_ring().to_device(&gpu).unwrap();
    let x_j = gather_rows(data.x(), &data.edge_index().get(0).unwrap(), &gpu, "x_j").unwrap();
    // ids 1, 2, 3 read rows 1, 2, 3; id 4 reads nothing (its threads faulted).
    assert_eq!(
        rows(&x_j),
        vec![vec![0., 1.], vec![1., 1.], vec![2., 0.], vec![0., 0.]]
    );
    gpu.reset_device();
}

#[test]
fn a_reported_fault_is_sticky_until_the_device_is_reset() {
    let gpu = Placement::sim_with(1, SimErrors::Asynchronous);
    let data = one_based_ring().to_device(&gpu).unwrap();
    let h = sum_neighbours(&data).unwrap();
    gpu.synchronize().unwrap_err(); // the report
                                    // Every later operation on the device fails: a read back, a copy, a kernel, a model.
    let err = gpu
        .fetch_vec1::<f32>(&h.flatten_all().unwrap(), "h")
        .unwrap_err();
    assert!(matches!(err, WorkbookError::DeviceFailed { .. }));
    assert_eq!(err.to_string(), STICKY);
    let copy = data.to_device(Placement::cpu()).unwrap_err().to_string();
    assert!(
        copy.contains("(the copy of 'ring.x' from sim:1 to cpu here)"),
        "{copy}"
    );
    let kernel = gather_rows(data.x(), &data.edge_index().get(1).unwrap(), &gpu, "x[dst]");
    let kernel = kernel.unwrap_err().to_string();
    assert!(kernel.contains("(gather_rows 'x[dst]' here)"), "{kernel}");
    let (model, _) = Model::init(ModelConfig::gcn(2, 4, 2), 0, Placement::cpu()).unwrap();
    let model = model.to_device(&gpu).unwrap_err().to_string();
    assert!(model.contains("from cpu to sim:1 here)"), "{model}");
    let graph = Graph::validate(&ring())
        .unwrap()
        .to_device(&gpu)
        .unwrap_err();
    assert!(matches!(graph, WorkbookError::DeviceFailed { .. }));
    // A model and a graph made on the device (no copy) fail at the forward pass's checks.
    let (model, _) = Model::init(ModelConfig::gcn(2, 4, 2), 0, &gpu).unwrap();
    let edges = EdgeIndex::new(&[0, 1], &[1, 2], 3, &gpu).unwrap();
    let x = Tensor::zeros((3, 2), DType::F32, gpu.device()).unwrap();
    let graph = Graph::new("on the device", x, edges).unwrap();
    let forward = model.forward_graph(&graph).unwrap_err().to_string();
    assert!(forward.contains("(the device check of "), "{forward}");

    // A fresh device has its own state; a reset makes this one usable again.
    let fresh = Placement::sim_with(1, SimErrors::Asynchronous);
    assert!(ring().to_device(&fresh).is_ok());
    gpu.reset_device();
    let data = ring().to_device(&gpu).unwrap();
    let h = sum_neighbours(&data).unwrap();
    assert_eq!(
        gpu.fetch_vec1::<f32>(&h.flatten_all().unwrap(), "h")
            .unwrap()
            .len(),
        8
    );
}

#[test]
fn blocking_mode_names_the_faulting_operation_and_the_index() {
    let gpu = Placement::sim_with(1, SimErrors::Blocking);
    let data = one_based_ring().to_device(&gpu).unwrap();
    let err = sum_neighbours(&data).unwrap_err();
    assert!(matches!(
        err,
        WorkbookError::DeviceAssert { cause: Some(_), .. }
    ));
    assert_eq!(err.to_string(), BLOCKING_GATHER);
    // The device is unusable afterwards, as with CUDA_LAUNCH_BLOCKING=1.
    let err = gpu.synchronize().unwrap_err().to_string();
    assert!(err.starts_with("sim:1 is unusable: a device-side assert was reported there earlier (by gather_rows 'x[edge_index[0]]')"), "{err}");

    // A bad id in the target row only: the scatter is named.
    let gpu = Placement::sim_with(1, SimErrors::Blocking);
    let x = Tensor::new(&[[1f32], [2.], [3.]], &Device::Cpu).unwrap();
    let ei = Tensor::new(&[[0u32, 1, 2], [1, 2, 3]], &Device::Cpu).unwrap();
    let data = UncheckedGraph::new("path", x, ei).to_device(&gpu).unwrap();
    assert_eq!(
        sum_neighbours(&data).unwrap_err().to_string(),
        BLOCKING_SCATTER
    );
}

#[test]
fn the_cpu_and_the_default_sim_mode_report_at_once_and_go_on() {
    let data = one_based_ring();
    let err = sum_neighbours(&data).unwrap_err();
    assert!(matches!(err, WorkbookError::IndexOutOfRange(_)));
    assert_eq!(err.to_string(), CPU_GATHER);

    let gpu = Placement::sim_with(1, SimErrors::Synchronous);
    let on_gpu = data.to_device(&gpu).unwrap();
    assert_eq!(
        sum_neighbours(&on_gpu).unwrap_err().to_string(),
        SIM_SYNC_GATHER
    );
    // Not sticky: the device goes on, as PyTorch's CPU does after an IndexError.
    let x_sum: f32 = gpu
        .fetch_scalar(&on_gpu.x().sum_all().unwrap(), "x.sum()")
        .unwrap();
    assert_eq!(x_sum, 6.0);
}

#[test]
fn validate_catches_the_id_before_any_kernel() {
    let gpu = Placement::sim_with(1, SimErrors::Asynchronous);
    let data = one_based_ring().to_device(&gpu).unwrap();
    let err = Graph::validate(&data).unwrap_err();
    assert!(matches!(
        err,
        WorkbookError::NodeIdOutOfRange {
            row: 1,
            edge: 2,
            id: 4,
            num_nodes: 4,
            count: 2,
            ..
        }
    ));
    assert_eq!(err.to_string(), VALIDATE);
    // No kernel ran, so the device has nothing to report.
    gpu.synchronize().unwrap();

    let x = Tensor::zeros((3, 1), DType::F32, &Device::Cpu).unwrap();
    let ei = Tensor::new(&[[0i64, -1], [1, 2]], &Device::Cpu).unwrap();
    let err = Graph::validate(&UncheckedGraph::new("negative", x.clone(), ei)).unwrap_err();
    assert_eq!(err.to_string(), VALIDATE_NEGATIVE);

    let ei = Tensor::new(&[[0i64, 1, 2]], &Device::Cpu).unwrap();
    let err = Graph::validate(&UncheckedGraph::new("flat", x, ei)).unwrap_err();
    assert_eq!(err.to_string(), VALIDATE_SHAPE);

    // What each error quotes is what PyG printed for the same graphs (book/python/ch01_async.py).
    let pyg = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../book/src/generated/python/ch01_async.validate.txt"),
    )
    .unwrap();
    let pyg: Vec<&str> = pyg.lines().skip(1).collect();
    for (ours, theirs) in [VALIDATE, VALIDATE_NEGATIVE, VALIDATE_SHAPE]
        .iter()
        .zip(&pyg)
    {
        assert!(
            ours.contains(&format!("\"{theirs}\"")),
            "{theirs} not quoted in {ours}"
        );
    }
    assert_eq!(pyg.len(), 3);
}

#[test]
fn a_valid_graph_is_unaffected() {
    let cpu_out = sum_neighbours(&ring()).unwrap();
    assert_eq!(
        rows(&cpu_out),
        vec![vec![2., 0.], vec![1., 0.], vec![0., 1.], vec![1., 1.]]
    );
    for mode in [
        SimErrors::Synchronous,
        SimErrors::Asynchronous,
        SimErrors::Blocking,
    ] {
        let gpu = Placement::sim_with(1, mode);
        let data = ring().to_device(&gpu).unwrap();
        let out = sum_neighbours(&data).unwrap();
        let back = gpu
            .fetch_vec1::<f32>(&out.flatten_all().unwrap(), "out")
            .unwrap();
        assert_eq!(back, vec![2., 0., 1., 0., 0., 1., 1., 1.], "{mode:?}");
        // validate turns it into a Graph every layer takes, on the same device
        let graph = Graph::validate(&data).unwrap();
        assert_eq!(graph.placement().sim_errors(), Some(mode));
        let (model, _) = Model::init(ModelConfig::gcn(2, 4, 2), 0, &gpu).unwrap();
        let logits = model.forward_graph(&graph).unwrap().logits;
        let _: Vec<u32> = gpu.fetch_vec1(&logits.argmax(1).unwrap(), "pred").unwrap();
    }
    // and a whole dataset through the checked path, in the asynchronous mode
    let gpu = Placement::sim_with(1, SimErrors::Asynchronous);
    let graph = datasets::karate(&gpu).unwrap();
    let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &gpu).unwrap();
    let logits = model.forward_graph(&graph).unwrap().logits;
    let _: f32 = gpu.fetch_scalar(&logits.sum_all().unwrap(), "sum").unwrap();
}

/// The environment's switches, read once per process, set the mode of every
/// `Placement::sim(n)`: checked in child processes (this test binary, run again on one test),
/// so that no test here changes the environment of the others.
#[test]
fn the_environment_switches_every_sim_device_of_a_process() {
    let cases: [(&[(&str, &str)], &str); 5] = [
        (&[], "Synchronous"),
        (&[("WORKBOOK_SIM_ASYNC", "1")], "Asynchronous"),
        (
            &[
                ("WORKBOOK_SIM_ASYNC", "1"),
                ("WORKBOOK_LAUNCH_BLOCKING", "1"),
            ],
            "Blocking",
        ),
        (&[("WORKBOOK_LAUNCH_BLOCKING", "1")], "Blocking"),
        (&[("WORKBOOK_SIM_ASYNC", "maybe")], "Invalid"),
    ];
    for (vars, expect) in cases {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args(["--exact", "child_process", "--ignored", "--test-threads=1"])
            .env_remove("WORKBOOK_SIM_ASYNC")
            .env_remove("WORKBOOK_LAUNCH_BLOCKING")
            .env("WORKBOOK_TEST_EXPECT", expect);
        for (k, v) in vars {
            child.env(k, v);
        }
        let out = child.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{expect}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
#[ignore = "run by the_environment_switches_every_sim_device_of_a_process, in a child process"]
fn child_process() {
    use workbook::device::{open, DeviceSpec};
    let Ok(expect) = std::env::var("WORKBOOK_TEST_EXPECT") else {
        return;
    };
    let gpu = Placement::sim(2);
    let data = one_based_ring().to_device(&gpu).unwrap();
    let reason = |spec| open(spec, "asked for").map(|c| c.reason);
    match expect.as_str() {
        "Synchronous" => {
            assert_eq!(gpu.sim_errors(), Some(SimErrors::Synchronous));
            let err = sum_neighbours(&data).unwrap_err();
            assert!(matches!(err, WorkbookError::IndexOutOfRange(_)), "{err}");
            assert_eq!(
                reason(DeviceSpec::Sim(2)).unwrap(),
                "sim:2 asked for: a simulated device (host memory, checked as a device of its own)"
            );
        }
        "Asynchronous" => {
            assert_eq!(gpu.sim_errors(), Some(SimErrors::Asynchronous));
            let h = sum_neighbours(&data).unwrap();
            // Another handle on sim:2 is the same device: it reports the fault.
            let err = Placement::sim(2).fetch_vec1::<f32>(&h.flatten_all().unwrap(), "h");
            assert!(matches!(
                err,
                Err(WorkbookError::DeviceAssert { cause: None, .. })
            ));
            assert_eq!(
                reason(DeviceSpec::Sim(2)).unwrap(),
                "sim:2 asked for: a simulated device (host memory, checked as a device of its own); kernel errors reported asynchronously, as on CUDA (WORKBOOK_SIM_ASYNC=1)"
            );
        }
        "Blocking" => {
            assert_eq!(gpu.sim_errors(), Some(SimErrors::Blocking));
            let err = sum_neighbours(&data).unwrap_err();
            assert!(matches!(
                err,
                WorkbookError::DeviceAssert { cause: Some(_), .. }
            ));
            assert_eq!(
                reason(DeviceSpec::Sim(2)).unwrap(),
                "sim:2 asked for: a simulated device (host memory, checked as a device of its own); kernel errors reported by the faulting operation (WORKBOOK_LAUNCH_BLOCKING=1)"
            );
        }
        "Invalid" => {
            // The library goes on synchronously; the device policy says what is wrong.
            assert_eq!(gpu.sim_errors(), Some(SimErrors::Synchronous));
            assert_eq!(
                reason(DeviceSpec::Sim(2)).unwrap_err().to_string(),
                "invalid configuration: WORKBOOK_SIM_ASYNC=maybe is not a switch: set it to 1 to turn it on, or 0 (or leave it unset) to turn it off"
            );
        }
        other => panic!("unknown expectation {other}"),
    }
    // The CPU stays synchronous whatever the environment says, as PyTorch's does.
    let err = sum_neighbours(&one_based_ring()).unwrap_err();
    assert!(matches!(err, WorkbookError::IndexOutOfRange(_)), "{err}");
}
