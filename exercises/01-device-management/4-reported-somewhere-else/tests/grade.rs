//! Graded tests for exercise 01-4 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed (each check's
//! answer, what `neighbour_sums` returned, whether the device is still usable, the sums), and a
//! teacher's grader compares that with the reference solution's. The run's challenge picks the
//! graphs (their sizes, their ids, the features) and where the bad ids are planted, in which
//! row, and of which kind (negative, exactly `num_nodes`, larger), so the answers cannot be
//! written down in advance. Every device is a fresh `sim:N` in the asynchronous mode, made in
//! code (`Placement::sim_with`), as CUDA reports a kernel's fault: later, somewhere else.

use super::edge_check::{check_edges, neighbour_sums, BadEdge, EdgeError};
use scenario::{Scenario, Shown};
use workbook::candle_core::{DType, Device, Tensor};
use workbook::ledger::Ledger;
use workbook::sim_device::SimErrors;
use workbook::{Placement, UncheckedGraph};

/// A fresh asynchronous accelerator, `sim:1` to `sim:7` as the run's challenge picks: a kernel
/// that meets a bad id records the fault, and the next operation that waits for the device
/// reports it; the device then stays failed.
fn accelerator(s: &Scenario) -> Placement {
    Placement::sim_with(s.pick("accelerator", 1..8), SimErrors::Asynchronous)
}

/// SplitMix64 over a seed the challenge gives: the graphs' ids, the planted ids, the features.
/// Hand-written (six lines), as the scenario crate's own mixer is.
struct Rng(u64);

impl Rng {
    fn new(s: &Scenario, label: &str) -> Self {
        Rng(s.seed(label))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A graph's two rows of ids, every one a node of `num_nodes`; node 0 and node `num_nodes - 1`
/// both appear (the ids next to the bounds).
fn good_rows(rng: &mut Rng, num_nodes: usize, num_edges: usize) -> [Vec<i64>; 2] {
    let mut rows = [Vec::new(), Vec::new()];
    for row in rows.iter_mut() {
        *row = (0..num_edges)
            .map(|_| rng.below(num_nodes) as i64)
            .collect();
    }
    if num_edges >= 2 {
        rows[rng.below(2)][rng.below(num_edges)] = 0;
        rows[0][num_edges - 1] = num_nodes as i64 - 1;
    }
    rows
}

/// A bad id planted at `edge_index[row][edge]`.
type Plant = (usize, usize, i64);

/// The ids of kind `kind` that are not nodes of `num_nodes`: 0 exactly `num_nodes` (the first
/// id past the end), 1 larger, 2 `-1`, 3 another negative id.
fn bad_id(rng: &mut Rng, kind: usize, num_nodes: usize) -> i64 {
    let n = num_nodes as i64;
    match kind {
        0 => n,
        1 => n + 1 + rng.below(100) as i64,
        2 => -1,
        _ => -2 - rng.below(2 * num_nodes) as i64,
    }
}

/// `count` bad ids at distinct random places, in the rows `rows` allows, of the kinds `kinds`
/// allows (each picked at random).
fn plants(
    rng: &mut Rng,
    count: usize,
    num_nodes: usize,
    num_edges: usize,
    rows: &[usize],
    kinds: &[usize],
) -> Vec<Plant> {
    let mut out: Vec<Plant> = Vec::new();
    while out.len() < count {
        let (row, edge) = (rows[rng.below(rows.len())], rng.below(num_edges));
        if out.iter().any(|&(r, e, _)| (r, e) == (row, edge)) {
            continue;
        }
        let kind = kinds[rng.below(kinds.len())];
        out.push((row, edge, bad_id(rng, kind, num_nodes)));
    }
    out
}

/// What the check must answer for these plants: the first in edge order (the source before the
/// target within an edge) and the count in each row. Worked out from where the ids were put, not
/// by searching the index.
fn expected(plants: &[Plant], num_nodes: usize) -> BadEdge {
    let &(row, edge, id) = plants
        .iter()
        .min_by_key(|&&(row, edge, _)| (edge, row))
        .expect("at least one plant");
    let count = |r| plants.iter().filter(|p| p.0 == r).count();
    BadEdge {
        row,
        edge,
        id,
        num_nodes,
        bad_sources: count(0),
        bad_targets: count(1),
    }
}

fn i64_index(rows: &[Vec<i64>; 2]) -> Tensor {
    let num_edges = rows[0].len();
    Tensor::from_vec(rows.concat(), (2, num_edges), &Device::Cpu).unwrap()
}

fn u32_index(rows: &[Vec<i64>; 2]) -> Tensor {
    let num_edges = rows[0].len();
    let ids: Vec<u32> = rows.concat().into_iter().map(|id| id as u32).collect();
    Tensor::from_vec(ids, (2, num_edges), &Device::Cpu).unwrap()
}

/// A good graph's rows with `plants` put in.
fn planted(good: &[Vec<i64>; 2], plants: &[Plant]) -> [Vec<i64>; 2] {
    let mut rows = good.clone();
    for &(row, edge, id) in plants {
        rows[row][edge] = id;
    }
    rows
}

/// Small integer features, so that every sum is exact on any device.
fn features(rng: &mut Rng, num_nodes: usize, width: usize) -> Vec<Vec<f32>> {
    (0..num_nodes)
        .map(|_| (0..width).map(|_| rng.below(9) as f32 - 4.0).collect())
        .collect()
}

fn graph(x: &[Vec<f32>], index: Tensor) -> UncheckedGraph {
    let (rows, width) = (x.len(), x.first().map_or(0, Vec::len));
    let x = Tensor::from_vec(x.concat(), (rows, width), &Device::Cpu).unwrap();
    UncheckedGraph::new("g", x, index)
}

/// The sums worked out on the host with loops: row `t` is the sum of `x[s]` over the edges
/// `(s, t)`.
fn host_sums(x: &[Vec<f32>], rows: &[Vec<i64>; 2]) -> Vec<Vec<f32>> {
    let mut out = vec![vec![0f32; x[0].len()]; x.len()];
    for (&s, &t) in rows[0].iter().zip(&rows[1]) {
        for (o, v) in out[t as usize].iter_mut().zip(&x[s as usize]) {
            *o += v;
        }
    }
    out
}

/// A check's or a sum's answer, as observed: `ok`, or the error and its message.
fn answer<T>(got: &Result<T, EdgeError>) -> Shown<String> {
    Shown(match got {
        Ok(_) => "ok".into(),
        Err(e) => format!("{e:?}: {e}"),
    })
}

/// Asserts that `got` is the refusal `want`, in `situation`.
fn assert_refused<T>(got: &Result<T, EdgeError>, want: &BadEdge, situation: &str) {
    match got {
        Err(EdgeError::NotANode(bad)) => assert_eq!(
            bad, want,
            "{situation}: the refusal should name the first bad id (in edge order, the source before the target within an edge) and count the bad ids of each row"
        ),
        Ok(_) => panic!(
            "{situation}: accepted, but edge_index[{}][{}] = {} is not a node of {} (ids must be in 0..{}: not negative, and below the node count)",
            want.row, want.edge, want.id, want.num_nodes, want.num_nodes
        ),
        Err(e) => panic!("{situation}: should be refused with EdgeError::NotANode({want:?}), got {e:?}: {e}"),
    }
}

/// The bad graphs every check must refuse: one per mistake a check can make, then the run's own
/// mix of several bad ids of every kind in both rows. Each: a name, its rows, the node count,
/// the expected refusal.
fn bad_graphs(s: &Scenario, rng: &mut Rng) -> Vec<(String, [Vec<i64>; 2], usize, BadEdge)> {
    let mut out = Vec::new();
    let cases: [(&str, usize, &[usize], &[usize]); 5] = [
        (
            "one id exactly num_nodes (ids counted from 1?)",
            1,
            &[0, 1],
            &[0],
        ),
        ("one id exactly num_nodes, in the target row", 1, &[1], &[0]),
        ("a negative id", 1, &[0, 1], &[2, 3]),
        ("ids too large in the target row only", 3, &[1], &[0, 1]),
        (
            "several bad ids of every kind, in both rows",
            2 + s.pick("bad ids", 0..5),
            &[0, 1],
            &[0, 1, 2, 3],
        ),
    ];
    for (what, count, rows, kinds) in cases {
        let num_nodes = 2 + rng.below(40);
        let num_edges = 8 + rng.below(60);
        let good = good_rows(rng, num_nodes, num_edges);
        let plants = plants(rng, count, num_nodes, num_edges, rows, kinds);
        out.push((
            what.to_string(),
            planted(&good, &plants),
            num_nodes,
            expected(&plants, num_nodes),
        ));
    }
    out
}

#[test]
fn finds_the_first_bad_id() {
    let s = scenario::start();
    let mut rng = Rng::new(&s, "bad graphs");
    for (what, rows, num_nodes, want) in bad_graphs(&s, &mut rng) {
        let got = check_edges(&i64_index(&rows), num_nodes);
        s.observe(format!("check_edges: {what}"), &answer(&got));
        assert_refused(
            &got,
            &want,
            &format!("check_edges, {what}, {num_nodes} nodes"),
        );
    }
}

#[test]
fn passes_good_graphs_and_refuses_bad_layouts() {
    let s = scenario::start();
    let mut rng = Rng::new(&s, "good graphs");
    let num_nodes = 2 + s.pick("nodes", 0..60);
    // 3 or more, so that the transpose, [num_edges, 2], is never [2, 2]
    let num_edges = 3 + s.pick("edges", 0..120);
    let rows = good_rows(&mut rng, num_nodes, num_edges);
    let one_node = [vec![0i64; 3], vec![0i64; 3]];
    let no_edges = [Vec::new(), Vec::new()];
    let good: [(&str, Tensor, usize); 4] = [
        ("a good graph, i64 ids", i64_index(&rows), num_nodes),
        ("the same graph, u32 ids", u32_index(&rows), num_nodes),
        ("one node with self-loops", i64_index(&one_node), 1),
        ("no edges", i64_index(&no_edges), num_nodes),
    ];
    let flat = i64_index(&rows).flatten_all().unwrap();
    let transposed = i64_index(&rows).t().unwrap().contiguous().unwrap();
    let three_rows = Tensor::zeros((3, num_edges), DType::I64, &Device::Cpu).unwrap();
    let floats = i64_index(&rows).to_dtype(DType::F32).unwrap();
    let bad: [(&str, Tensor); 4] = [
        ("[num_edges, 2], the transpose", transposed),
        ("[3, num_edges]", three_rows),
        ("one row of ids", flat),
        ("float ids", floats),
    ];
    let good_answers: Vec<_> = good
        .iter()
        .map(|(_, index, n)| check_edges(index, *n))
        .collect();
    let bad_answers: Vec<_> = bad
        .iter()
        .map(|(_, index)| check_edges(index, num_nodes))
        .collect();
    // One record: a good graph's `ok` is the same under every challenge; the refusals of the bad
    // layouts name the drawn edge count.
    s.observe(
        "check_edges: each good graph, then each bad layout",
        &good_answers
            .iter()
            .map(answer)
            .chain(bad_answers.iter().map(answer))
            .collect::<Vec<_>>(),
    );
    for ((what, _, n), got) in good.into_iter().zip(good_answers) {
        if let Err(e) = got {
            panic!("check_edges, {what} ({n} nodes): every id is a node (0..{n}), yet it was refused: {e:?}: {e}");
        }
    }
    for ((what, index), got) in bad.into_iter().zip(bad_answers) {
        let (dims, dtype) = (index.dims().to_vec(), index.dtype());
        match got {
            Err(EdgeError::Layout { dims: d, dtype: t }) if d == dims && t == dtype => {}
            Ok(()) => panic!(
                "check_edges accepted {what} ({dtype:?} {dims:?}), a bad edge index: it should be refused with EdgeError::Layout {{ dims: {dims:?}, dtype: {dtype:?} }} (an edge index is [2, num_edges] of i64 or u32 ids)"
            ),
            Err(e) => panic!(
                "check_edges, {what} ({dtype:?} {dims:?}): should be refused with EdgeError::Layout {{ dims: {dims:?}, dtype: {dtype:?} }} (an edge index is [2, num_edges] of i64 or u32 ids), not with {e:?}: {e}"
            ),
        }
    }
}

#[test]
fn a_bad_graph_leaves_the_device_usable() {
    let s = scenario::start();
    let mut rng = Rng::new(&s, "bad graphs on the device");
    let cases = bad_graphs(&s, &mut rng);
    // One id exactly num_nodes in the target row; a negative id; the run's mix.
    for (what, rows, num_nodes, want) in [&cases[1], &cases[2], &cases[4]] {
        let ledger = Ledger::new();
        let gpu = accelerator(&s).with_ledger(&ledger);
        let x = features(&mut rng, *num_nodes, 3);
        let got = neighbour_sums(&graph(&x, i64_index(rows)), &gpu);
        // Refused on the host means before any of it is copied: a bad graph's copy is wasted
        // (a large graph's, seconds and memory), and on the device its ids are one kernel away.
        let device = gpu.to_string();
        let copied: Vec<String> = ledger
            .transfers()
            .into_iter()
            .filter(|t| t.to == device)
            .map(|t| t.what)
            .collect();
        let after = gpu.synchronize().map_err(|e| e.to_string());
        // Usable because no kernel met the bad id, not because the device was reset afterwards.
        let faults = gpu.sim_device().map_or(0, |d| d.faults_recorded());
        // One record per graph: the refusal (its drawn ids) with what must stay the same under
        // every challenge (no copy, a usable device, no fault).
        s.observe(
            format!("neighbour_sums: {what}: the answer, the copies to the device, the device after it, its kernel faults"),
            &(answer(&got), &copied, Shown(&after), faults),
        );
        assert_refused(
            &got,
            want,
            &format!("neighbour_sums on {gpu}, {what}, {num_nodes} nodes"),
        );
        if let Err(e) = after {
            panic!(
                "neighbour_sums on {gpu} refused {what} with the right error, but the device is no longer usable: a kernel met the bad id before the check ran, and synchronize() reports it ({e}). Check on the host, before the graph reaches the device and before any kernel"
            );
        }
        assert_eq!(
            faults, 0,
            "neighbour_sums on {gpu} refused {what}, but a kernel met the bad id first ({faults} fault(s) recorded; a reset hides the state, not the fault). Check on the host, before any kernel"
        );
        assert!(
            copied.is_empty(),
            "neighbour_sums on {gpu} refused {what}, but only after copying it to the device ({copied:?}): check the ids on the host, before any of the graph reaches the device"
        );
        // A later copy to the device works too.
        let good = [vec![0i64], vec![0i64]];
        let copy = graph(&x, i64_index(&good)).to_device(&gpu);
        assert!(
            copy.is_ok(),
            "after refusing {what}, a copy to {gpu} should still work: {:?}",
            copy.err()
        );
    }
}

#[test]
fn a_good_graph_gives_the_neighbour_sums() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let mut rng = Rng::new(&s, "the summed graph");
    let num_nodes = 2 + s.pick("summed nodes", 0..50);
    let num_edges = 2 + s.pick("summed edges", 0..150);
    let width = 1 + s.pick("width", 0..8);
    let rows = good_rows(&mut rng, num_nodes, num_edges);
    let x = features(&mut rng, num_nodes, width);
    let index = if s.seed("u32 ids") & 1 == 1 {
        u32_index(&rows)
    } else {
        i64_index(&rows)
    };
    let got = neighbour_sums(&graph(&x, index), &gpu);
    let sums = match got {
        Ok(t) => t,
        Err(e) => panic!("neighbour_sums on {gpu}, a good graph of {num_nodes} nodes: refused or failed: {e:?}: {e}"),
    };
    let after = gpu.synchronize().map_err(|e| e.to_string());
    // One record: the device's state is the same under every challenge, the sums are not.
    s.observe("the sums, and the device after it", &(&sums, Shown(&after)));
    assert!(
        after.is_ok(),
        "after neighbour_sums of a good graph, {gpu} should be usable: {after:?}"
    );
    assert_eq!(
        sums.dims(),
        [num_nodes, width],
        "the sums should be [num_nodes, features] = [{num_nodes}, {width}]"
    );
    let got = sums.to_vec2::<f32>().unwrap();
    assert_eq!(
        got,
        host_sums(&x, &rows),
        "row t of the sums should be the sum of x[s] over the edges (s, t): gather the sources (edge_index[0]), sum at the targets (edge_index[1])"
    );
}
