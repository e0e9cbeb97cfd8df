//! The fused message-passing kernels against the candle-composed operations they replace:
//! values and gradients, on random graphs with isolated nodes, duplicate edges and self-loops,
//! in f32 and f64, and independent of the number of threads, of the gather's schedule and of
//! huge-page advice.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use workbook::candle_core::{DType, Device, Tensor, Var, D};
use workbook::ops::huge_pages::{advise_huge_pages, tensor_huge_page_bytes};
use workbook::ops::{
    csr_softmax, csr_spmm, csr_spmm_scheduled, gat_scores, segment_softmax, Csr, GatherSchedule,
};

struct Case {
    n: usize,
    src: Vec<u32>,
    dst: Vec<u32>,
}

/// `n` nodes of which the last few have no edges at all, `e` random edges, plus a duplicate of
/// the first edge and two self-loops.
fn random_graph(seed: u64, n: usize, e: usize) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let live = n - 3; // nodes n-3.. stay isolated
    let mut src: Vec<u32> = (0..e).map(|_| rng.random_range(0..live) as u32).collect();
    let mut dst: Vec<u32> = (0..e).map(|_| rng.random_range(0..live) as u32).collect();
    src.extend([src[0], 1, 2]);
    dst.extend([dst[0], 1, 2]);
    Case { n, src, dst }
}

fn ids(v: &[u32]) -> Tensor {
    Tensor::new(v, &Device::Cpu).unwrap()
}

fn randn(shape: &[usize], dtype: DType, seed: u64) -> Var {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.5..1.5)).collect();
    let t = Tensor::from_vec(v, shape, &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    Var::from_tensor(&t).unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.dims(), b.dims());
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap()
}

/// Every value's bits (as `f64`, exact for `f32` too): for the tests that ask for equality bit
/// for bit.
fn bits(t: &Tensor) -> Vec<u64> {
    t.flatten_all()
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn tol(dtype: DType) -> f64 {
    if dtype == DType::F64 {
        1e-12
    } else {
        1e-5
    }
}

/// `Σ out · r` for a fixed random `r`: its gradient is `r`, so every element is checked.
fn weighted_sum(out: &Tensor, seed: u64) -> Tensor {
    let r = randn(out.dims(), out.dtype(), seed);
    (out * r.as_tensor()).unwrap().sum_all().unwrap()
}

#[test]
fn spmm_matches_gather_scale_scatter_with_gradients() {
    for dtype in [DType::F32, DType::F64] {
        // (3, 4) and (1, 12) take the general loop, the others the widths compiled for their
        // size (one head of 1 to 8 channels, 16, 32, 64; GATv2's 8 heads of 8): each must give
        // the very sums of candle's index_add.
        let shapes = [
            (8, 1, 12),
            (9, 1, 1),
            (10, 1, 7),
            (1, 1, 5),
            (2, 3, 4),
            (3, 1, 16),
            (4, 8, 8),
            (5, 1, 8),
            (6, 1, 32),
            (7, 1, 64),
        ];
        for (seed, heads, channels) in shapes {
            let g = random_graph(seed, 40, 160);
            let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
            let e = g.src.len();
            let x = randn(&[g.n, heads, channels], dtype, seed + 10);
            let w = randn(&[e, heads], dtype, seed + 20);

            let fused = csr_spmm(x.as_tensor(), w.as_tensor(), &csr).unwrap();
            let messages = x
                .as_tensor()
                .index_select(&ids(&g.src), 0)
                .unwrap()
                .broadcast_mul(&w.as_tensor().unsqueeze(D::Minus1).unwrap())
                .unwrap();
            let composed = Tensor::zeros((g.n, heads, channels), dtype, &Device::Cpu)
                .unwrap()
                .index_add(&ids(&g.dst), &messages, 0)
                .unwrap();
            // Same terms, same order: not merely close, equal.
            assert_eq!(max_diff(&fused, &composed), 0.0, "{dtype:?} forward");
            let isolated = fused
                .get(g.n - 1)
                .unwrap()
                .abs()
                .unwrap()
                .sum_all()
                .unwrap();
            assert_eq!(
                isolated
                    .to_dtype(DType::F64)
                    .unwrap()
                    .to_scalar::<f64>()
                    .unwrap(),
                0.0
            );

            let gf = weighted_sum(&fused, 99).backward().unwrap();
            let gc = weighted_sum(&composed, 99).backward().unwrap();
            for (name, v) in [("x", &x), ("w", &w)] {
                let (a, b) = (gf.get(v).unwrap(), gc.get(v).unwrap());
                let d = max_diff(a, b);
                assert!(d <= tol(dtype), "{dtype:?} d{name}: {d}");
            }
            assert_eq!(
                max_diff(gf.get(&x).unwrap(), gc.get(&x).unwrap()),
                0.0,
                "{dtype:?} dx is the same sum in the same order"
            );
        }
    }
}

fn leaky_relu(x: &Tensor, slope: f64) -> Tensor {
    (x.relu().unwrap() - (x.neg().unwrap().relu().unwrap() * slope).unwrap()).unwrap()
}

#[test]
fn gat_scores_match_the_composed_leaky_relu_dot_with_gradients() {
    for dtype in [DType::F32, DType::F64] {
        // (4, 3) takes the general loop; (8, 8), GATv2's default, the one compiled for it
        for (h, c) in [(4, 3), (8, 8)] {
            let g = random_graph(3, 30, 120);
            let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
            let x_l = randn(&[g.n, h, c], dtype, 31);
            let x_r = randn(&[g.n, h, c], dtype, 32);
            let att = randn(&[1, h, c], dtype, 33);
            let fused =
                gat_scores(x_l.as_tensor(), x_r.as_tensor(), att.as_tensor(), &csr, 0.2).unwrap();
            let x_j = x_l.as_tensor().index_select(&ids(&g.src), 0).unwrap();
            let x_i = x_r.as_tensor().index_select(&ids(&g.dst), 0).unwrap();
            let composed = leaky_relu(&(x_i + x_j).unwrap(), 0.2)
                .broadcast_mul(att.as_tensor())
                .unwrap()
                .sum(D::Minus1)
                .unwrap();
            let d = max_diff(&fused, &composed);
            assert!(d <= tol(dtype), "{dtype:?} ({h}, {c}) scores: {d}");

            let gf = weighted_sum(&fused, 7).backward().unwrap();
            let gc = weighted_sum(&composed, 7).backward().unwrap();
            for (name, v) in [("x_l", &x_l), ("x_r", &x_r), ("att", &att)] {
                let d = max_diff(gf.get(v).unwrap(), gc.get(v).unwrap());
                assert!(d <= 10.0 * tol(dtype), "{dtype:?} ({h}, {c}) d{name}: {d}");
            }
        }
    }
}

/// The gradients compiled for GATv2's 8 heads of 8 equal the general loop's bit for bit: each
/// head of the 8-head op against that head alone (1 head of 8 channels takes the general loop),
/// given the same score gradient. A graph large enough that the `∂a` sum has several chunks.
#[test]
fn gat_scores_compiled_gradients_equal_the_general_loop_bit_for_bit() {
    let g = random_graph(12, 900, 5000);
    let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
    let e = csr.num_edges();
    for dtype in [DType::F32, DType::F64] {
        let x_l = randn(&[g.n, 8, 8], dtype, 41);
        let x_r = randn(&[g.n, 8, 8], dtype, 42);
        let att = randn(&[1, 8, 8], dtype, 43);
        let r = randn(&[e, 8], dtype, 44);
        let all = gat_scores(x_l.as_tensor(), x_r.as_tensor(), att.as_tensor(), &csr, 0.2).unwrap();
        let grads = (all * r.as_tensor())
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        for hh in 0..8 {
            let head =
                |v: &Var| Var::from_tensor(&v.as_tensor().narrow(1, hh, 1).unwrap()).unwrap();
            let (l1, r1, a1) = (head(&x_l), head(&x_r), head(&att));
            let one =
                gat_scores(l1.as_tensor(), r1.as_tensor(), a1.as_tensor(), &csr, 0.2).unwrap();
            let rh = r.as_tensor().narrow(1, hh, 1).unwrap();
            let g1 = (one * rh).unwrap().sum_all().unwrap().backward().unwrap();
            for (name, v8, v1) in [("x_l", &x_l, &l1), ("x_r", &x_r, &r1), ("att", &att, &a1)] {
                let of_head = grads.get(v8).unwrap().narrow(1, hh, 1).unwrap();
                assert_eq!(
                    bits(&of_head),
                    bits(g1.get(v1).unwrap()),
                    "{dtype:?} d{name}, head {hh}"
                );
            }
        }
    }
}

#[test]
fn csr_softmax_matches_segment_softmax_with_gradients() {
    for dtype in [DType::F32, DType::F64] {
        let g = random_graph(4, 25, 90);
        let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
        let scores = randn(&[g.src.len(), 3], dtype, 41);
        // far-apart scores: a global shift would underflow
        let scores_t = (scores.as_tensor() * 300.0).unwrap();
        let fused = csr_softmax(&scores_t, &csr).unwrap();
        let composed = segment_softmax(&scores_t, &ids(&g.dst), g.n).unwrap();
        assert_eq!(max_diff(&fused, &composed), 0.0, "{dtype:?} alpha");
        let gf = weighted_sum(&fused, 5).backward().unwrap();
        let gc = weighted_sum(&composed, 5).backward().unwrap();
        let d = max_diff(gf.get(&scores).unwrap(), gc.get(&scores).unwrap());
        assert!(d <= 300.0 * tol(dtype), "{dtype:?} dscores: {d}");
    }
}

#[test]
fn results_do_not_depend_on_the_number_of_threads() {
    let g = random_graph(5, 300, 3000);
    let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
    let (h, c) = (2, 8);
    let x_l = randn(&[g.n, h, c], DType::F32, 51);
    let x_r = randn(&[g.n, h, c], DType::F32, 52);
    let att = randn(&[1, h, c], DType::F32, 53);
    let run = || {
        let s = gat_scores(x_l.as_tensor(), x_r.as_tensor(), att.as_tensor(), &csr, 0.2).unwrap();
        let a = csr_softmax(&s, &csr).unwrap();
        let out = csr_spmm(x_l.as_tensor(), &a, &csr).unwrap();
        let grads = weighted_sum(&out, 3).backward().unwrap();
        [&x_l, &x_r, &att]
            .iter()
            .map(|v| {
                grads
                    .get(v)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap()
            })
            .chain([out.flatten_all().unwrap().to_vec1::<f32>().unwrap()])
            .collect::<Vec<_>>()
    };
    let many = run();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(run);
    assert_eq!(many, one);
}

#[test]
fn bad_shapes_are_errors_not_panics() {
    let csr = Arc::new(Csr::new(&[0, 1], &[1, 2], 3, &Device::Cpu).unwrap());
    let x = Tensor::zeros((3, 1, 2), DType::F32, &Device::Cpu).unwrap();
    let w = Tensor::zeros((5, 1), DType::F32, &Device::Cpu).unwrap();
    assert!(csr_spmm(&x, &w, &csr).is_err());
    let w64 = Tensor::zeros((2, 1), DType::F64, &Device::Cpu).unwrap();
    assert!(csr_spmm(&x, &w64, &csr).is_err());
    let att = Tensor::zeros((1, 1, 3), DType::F32, &Device::Cpu).unwrap();
    assert!(gat_scores(&x, &x, &att, &csr, 0.2).is_err());
    let s = Tensor::zeros((4, 1), DType::F32, &Device::Cpu).unwrap();
    assert!(csr_softmax(&s, &csr).is_err());
}

/// On the CPU the kernels also take node features as `[N, H·C]` (heads side by side, as a
/// linear map returns them): the same values and gradients as the `[N, H, C]` form, bit for bit.
#[test]
fn heads_side_by_side_equal_the_three_dimensional_form() {
    let g = random_graph(11, 40, 150);
    let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
    let (h, c) = (3, 4);
    let x_l = randn(&[g.n, h * c], DType::F32, 1);
    let x_r = randn(&[g.n, h * c], DType::F32, 2);
    let att = randn(&[1, h, c], DType::F32, 3);
    let run = |flat: bool| {
        let shape = |t: &Tensor| {
            if flat {
                t.clone()
            } else {
                t.reshape((g.n, h, c)).unwrap()
            }
        };
        let (l, r) = (shape(x_l.as_tensor()), shape(x_r.as_tensor()));
        let s = gat_scores(&l, &r, att.as_tensor(), &csr, 0.2).unwrap();
        let alpha = csr_softmax(&s, &csr).unwrap();
        let out = csr_spmm(&l, &alpha, &csr).unwrap();
        assert_eq!(out.dims(), l.dims());
        let out = out.reshape((g.n, h * c)).unwrap();
        let grads = weighted_sum(&out, 5).backward().unwrap();
        let v = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        (
            v(&out),
            v(grads.get(x_l.as_tensor()).unwrap()),
            v(grads.get(x_r.as_tensor()).unwrap()),
            v(grads.get(att.as_tensor()).unwrap()),
        )
    };
    assert_eq!(run(true), run(false));
}

/// The gather's schedule (prefetch distance, destination rows walked together) reorders memory
/// requests only: every schedule equals the composed ops bit for bit, forward and `∂x`, on rows
/// of unequal degree, isolated rows, and blocks that do not divide the node count. At any width,
/// and at GCN's 1 × 16 and GATv2's 8 × 8, which one row at a time gathers in compiled (on a CPU
/// with AVX, 256-bit) code.
#[test]
fn every_gather_schedule_gives_the_composed_sums_bit_for_bit() {
    let g = random_graph(21, 301, 2500);
    let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
    for (dtype, (h, c)) in [DType::F32, DType::F64]
        .into_iter()
        .flat_map(|d| [(2, 3), (1, 16), (8, 8)].map(|hc| (d, hc)))
    {
        let x = randn(&[g.n, h, c], dtype, 22);
        let w = randn(&[g.src.len(), h], dtype, 23);
        let messages = x
            .as_tensor()
            .index_select(&ids(&g.src), 0)
            .unwrap()
            .broadcast_mul(&w.as_tensor().unsqueeze(D::Minus1).unwrap())
            .unwrap();
        let composed = Tensor::zeros((g.n, h, c), dtype, &Device::Cpu)
            .unwrap()
            .index_add(&ids(&g.dst), &messages, 0)
            .unwrap();
        let dx_composed = weighted_sum(&composed, 7).backward().unwrap();
        let dx_composed = dx_composed.get(&x).unwrap();
        for ahead in [0, 1, 3, 8, 32, 100_000] {
            for block in [1, 2, 3, 7, 16] {
                let s = GatherSchedule::new(ahead, block).unwrap();
                let out = csr_spmm_scheduled(x.as_tensor(), w.as_tensor(), &csr, s).unwrap();
                assert_eq!(
                    max_diff(&out, &composed),
                    0.0,
                    "{dtype:?} {h}x{c} {s:?} forward"
                );
                let grads = weighted_sum(&out, 7).backward().unwrap();
                let dx = grads.get(&x).unwrap();
                assert_eq!(max_diff(dx, dx_composed), 0.0, "{dtype:?} {h}x{c} {s:?} dx");
            }
        }
    }
    // a hand-made schedule outside the cursors' range is an error, not a panic
    let g = random_graph(1, 10, 20);
    let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
    let x = Tensor::zeros((g.n, 1, 2), DType::F32, &Device::Cpu).unwrap();
    let w = Tensor::zeros((g.src.len(), 1), DType::F32, &Device::Cpu).unwrap();
    for block_rows in [0, workbook::ops::MAX_BLOCK_ROWS + 1] {
        let bad = GatherSchedule {
            prefetch_ahead: 8,
            block_rows,
        };
        assert!(csr_spmm_scheduled(&x, &w, &csr, bad).is_err(), "{bad:?}");
    }
}

/// Asking for 2 MiB pages under the node features (and rebuilding them so) changes no value:
/// the features read the same and the aggregation over them is bit-identical. Where the kernel
/// collapsed the range, `/proc/self/smaps` shows the advised bytes in huge pages.
#[test]
fn huge_page_advice_changes_no_value() {
    let g = random_graph(31, 120_000, 300_000);
    let csr = Arc::new(Csr::new(&g.src, &g.dst, g.n, &Device::Cpu).unwrap());
    let x = randn(&[g.n, 1, 16], DType::F32, 32); // 7.7 MB: at least two aligned 2 MiB pages
    let w = randn(&[g.src.len(), 1], DType::F32, 33);
    let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let x_before = values(x.as_tensor());
    let before = values(&csr_spmm(x.as_tensor(), w.as_tensor(), &csr).unwrap());

    let advice = advise_huge_pages(x.as_tensor(), true);
    if cfg!(target_os = "linux") {
        assert!(
            advice.advised_bytes >= 2 << 20 || advice.note.is_some(),
            "{advice:?}"
        );
    }
    if advice.collapsed {
        assert_eq!(
            tensor_huge_page_bytes(x.as_tensor()),
            Some(advice.advised_bytes),
            "MADV_COLLAPSE succeeded, so the whole advised range is in huge pages"
        );
    }
    assert_eq!(values(x.as_tensor()), x_before);
    let after = values(&csr_spmm(x.as_tensor(), w.as_tensor(), &csr).unwrap());
    assert_eq!(after, before);

    // not a CPU buffer of a handled type, or too small: a note, nothing done
    let small = Tensor::zeros(16, DType::F32, &Device::Cpu).unwrap();
    let none = advise_huge_pages(&small, true);
    assert_eq!(none.advised_bytes, 0);
    assert!(none.note.is_some() && !none.collapsed);
}

/// `g` as an edge index, and the same with GCN's remaining self-loops added.
fn plain_and_looped(g: &Case) -> (workbook::EdgeIndex, workbook::EdgeIndex) {
    let wide = |v: &[u32]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let plain = workbook::EdgeIndex::new(&wide(&g.src), &wide(&g.dst), g.n, &Device::Cpu).unwrap();
    let looped = plain
        .with_remaining_self_loops()
        .unwrap()
        .edge_index
        .clone();
    (plain, looped)
}

#[test]
fn unweighted_gcn_norm_equals_the_composed_normalisation() {
    use workbook::ops::aggregate_sum;
    use workbook::ops::gcn_norm::unweighted_gcn_norm;
    let mut g = random_graph(8, 50, 300);
    // and one edge out of a node nothing points to: without loops its dinv is 0
    g.src.push(g.n as u32 - 1);
    g.dst.push(0);
    // and a node of more in-edges than the table of small degrees holds
    for k in 0..1500 {
        g.src.push(k % 40);
        g.dst.push(5);
    }
    let (plain, looped) = plain_and_looped(&g);
    for dtype in [DType::F32, DType::F64] {
        // with loops, and without: then some nodes have no in-edges and their dinv is 0
        for edges in [&looped, &plain] {
            let fast = unweighted_gcn_norm(edges, dtype).unwrap();
            // PyG's gcn_norm as tensor ops, as layers::gcn_conv computes it with edge weights
            let ones = Tensor::ones(edges.num_edges(), dtype, &Device::Cpu).unwrap();
            let n_ones = Tensor::ones((g.n, 1), dtype, &Device::Cpu).unwrap();
            let deg = aggregate_sum(&n_ones, edges, Some(&ones))
                .unwrap()
                .squeeze(1)
                .unwrap();
            let positive = deg.gt(0.0).unwrap().to_dtype(dtype).unwrap();
            let dinv = (deg
                .maximum(f32::MIN_POSITIVE as f64)
                .unwrap()
                .powf(-0.5)
                .unwrap()
                * positive)
                .unwrap();
            let composed = (dinv.index_select(edges.sources(), 0).unwrap() * ones)
                .unwrap()
                .mul(&dinv.index_select(edges.targets(), 0).unwrap())
                .unwrap();
            assert_eq!(max_diff(&fast, &composed), 0.0, "{dtype:?}");
            let zeros = fast
                .to_dtype(DType::F64)
                .unwrap()
                .to_vec1::<f64>()
                .unwrap()
                .iter()
                .filter(|&&w| w == 0.0)
                .count();
            if std::ptr::eq(edges, &plain) {
                assert!(
                    zeros > 0,
                    "the edge out of a node without in-edges weighs 0"
                );
            }
        }
    }
}

#[test]
fn gcn_spmm_equals_csr_spmm_with_the_normalised_weights_forward_and_backward() {
    use workbook::ops::gcn_norm::unweighted_gcn_norm;
    use workbook::ops::{aggregate_sum, gcn_spmm};
    let mut g = random_graph(9, 70, 500);
    // an edge out of a node nothing points to: without loops its dinv is 0
    g.src.push(g.n as u32 - 1);
    g.dst.push(0);
    let (plain, looped) = plain_and_looped(&g);
    // every compiled width (1..8, 16, 32, 64) and the general loop (12, 40)
    for f in [1, 3, 8, 12, 16, 32, 40, 64] {
        for dtype in [DType::F32, DType::F64] {
            for edges in [&looped, &plain] {
                let x = randn(&[g.n, f], dtype, f as u64);
                let fused = gcn_spmm(x.as_tensor(), edges).unwrap();
                let w = unweighted_gcn_norm(edges, dtype).unwrap();
                let composed = aggregate_sum(x.as_tensor(), edges, Some(&w)).unwrap();
                assert_eq!(bits(&fused), bits(&composed), "forward, F = {f}, {dtype:?}");
                assert!(
                    bits(&fused).iter().any(|&b| b != 0),
                    "the sums are not all zero"
                );
                let gf = weighted_sum(&fused, 3).backward().unwrap();
                let gc = weighted_sum(&composed, 3).backward().unwrap();
                let (gf, gc) = (gf.get(&x).unwrap(), gc.get(&x).unwrap());
                assert_eq!(bits(gf), bits(gc), "gradient, F = {f}, {dtype:?}");
            }
        }
    }
    // bad input is an error that says what to pass
    let x = Tensor::zeros((g.n + 1, 4), DType::F32, &Device::Cpu).unwrap();
    let err = gcn_spmm(&x, &looped).unwrap_err().to_string();
    assert!(err.contains(&format!("[{}, F]", g.n)), "{err}");
    let x = Tensor::zeros((g.n, 4), DType::BF16, &Device::Cpu).unwrap();
    let err = gcn_spmm(&x, &looped).unwrap_err().to_string();
    assert!(err.contains("f32 or f64"), "{err}");
}
