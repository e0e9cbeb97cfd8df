//! The first layer's `X · Wᵀ` over sparse node features, and input dropout that keeps them sparse.
//!
//! Planetoid features are bags of words: on Cora 1.3% of the `2708 × 1433` entries are non-zero.
//! A dense product multiplies every zero (`N · F · O` multiply-adds per linear map, and as many
//! again for its gradient `Gᵀ · X`); GATv2's first layer has two such maps, so on one core they
//! were most of its training step. Here `X` is kept as a row-compressed list of its non-zeros
//! ([`SparseFeatures`]), built once per feature tensor, and the product and its gradient only
//! visit those: `out[i, :] = Σ_k x[i, k] · Wᵀ[k, :]` over the non-zero `k` of row `i`, and
//! `∂Wᵀ[k, :] = Σ_i x[i, k] · G[i, :]` over the non-zero rows of column `k` (a column-compressed
//! copy of the same entries). Both run in parallel (rows, columns) with a fixed summation order,
//! so results do not depend on the number of threads; they equal the dense product to float
//! tolerance (the dense `gemm` adds in a different order).
//!
//! Which tensors are sparse is remembered by tensor id (ids are never reused, so a stale entry
//! can only miss): the first call on a feature tensor counts its zeros once; tensors that carry a
//! gradient tape, are small, are not f32 on the CPU, or are more than [`MAX_DENSITY`] non-zero
//! take the dense product ([`super::product::product`]).
//!
//! Input dropout ([`dropout`]) draws the same mask as [`Dropout::apply`] — element `k` of the
//! tensor keeps the `k`-th draw of the generator's stream, and the stream advances past all
//! `N · F` elements — but draws only the words at non-zero positions (ChaCha can seek), since a
//! dropped zero is still zero. The dropped features are registered as sparse directly.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::sparse_features::linear;
//! let dev = Device::Cpu;
//! // 2 nodes × 128 features, one non-zero each: sparse enough for the sparse product
//! let mut v = vec![0f32; 256];
//! v[3] = 2.0;
//! v[128 + 5] = -1.0;
//! let x = Tensor::from_vec(v, (2, 128), &dev).unwrap();
//! let w = Tensor::ones((4, 128), workbook::candle_core::DType::F32, &dev).unwrap();
//! let out = linear(&x, &w).unwrap(); // x · wᵀ
//! assert_eq!(out.to_vec2::<f32>().unwrap(), vec![vec![2f32; 4], vec![-1f32; 4]]);
//! assert!(workbook::ops::sparse_features::SparseFeatures::of(&x).is_some());
//! ```

use super::dropout::Dropout;
use super::kernel_support::{host_slice, MIN_ROWS_PER_TASK};
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Storage, Tensor};
use rayon::prelude::*;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Feature tensors with more than this fraction of non-zeros use the dense product.
pub const MAX_DENSITY: f64 = 0.1;

/// Feature tensors narrower than this use the dense product (too little to gain).
pub const MIN_FEATURES: usize = 64;

/// Where the non-zeros of an `[N, F]` matrix are, by row and by column.
#[derive(Debug)]
struct Pattern {
    n: usize,
    f: usize,
    /// `[N + 1]`: row `i`'s entries are `ptr[i]..ptr[i + 1]`.
    ptr: Vec<usize>,
    /// Column of each entry (row-major order).
    col: Vec<u32>,
    /// `[F + 1]`: column `k`'s entries are `cptr[k]..cptr[k + 1]` of `crow` / `cpos`.
    cptr: Vec<usize>,
    /// Row of each entry, grouped by column, rows ascending.
    crow: Vec<u32>,
    /// Position in the row-major order of each column-grouped entry.
    cpos: Vec<u32>,
}

/// An `[N, F]` f32 matrix as its non-zero entries (row- and column-compressed).
#[derive(Clone, Debug)]
pub struct SparseFeatures {
    pattern: Arc<Pattern>,
    /// Value of each entry, row-major order.
    val: Arc<Vec<f32>>,
}

impl SparseFeatures {
    /// `x` as sparse features, when the sparse path applies to it (see the module docs). The
    /// answer is remembered for `x` (and its clones), so only the first call scans it.
    pub fn of(x: &Tensor) -> Option<Self> {
        if !eligible(x) {
            return None;
        }
        if let Some(known) = cache_get(x) {
            return known;
        }
        let found = Self::scan(x);
        cache_put(x, found.clone());
        found
    }

    /// Number of non-zero entries.
    pub fn nnz(&self) -> usize {
        self.val.len()
    }

    /// Builds the pattern, or `None` when `x` is too dense.
    fn scan(x: &Tensor) -> Option<Self> {
        let (n, f) = x.dims2().ok()?;
        let (storage, layout) = x.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            return None;
        };
        let v: &[f32] = host_slice(cpu, layout, "sparse_features").ok()?;
        let limit = ((n * f) as f64 * MAX_DENSITY) as usize;
        let nnz = v.par_iter().filter(|&&a| a != 0.0).count();
        if nnz > limit || nnz >= u32::MAX as usize {
            return None;
        }
        let mut ptr = Vec::with_capacity(n + 1);
        let mut col = Vec::with_capacity(nnz);
        let mut val = Vec::with_capacity(nnz);
        ptr.push(0);
        for row in v.chunks(f) {
            for (k, &a) in row.iter().enumerate() {
                if a != 0.0 {
                    col.push(k as u32);
                    val.push(a);
                }
            }
            ptr.push(col.len());
        }
        Some(Self {
            pattern: Arc::new(Pattern::new(n, f, ptr, col)),
            val: Arc::new(val),
        })
    }

    /// The dense `[N, F]` tensor.
    fn to_dense(&self, device: &candle_core::Device) -> candle_core::Result<Tensor> {
        let p = &self.pattern;
        let mut out = vec![0f32; p.n * p.f];
        out.par_chunks_mut(p.f.max(1))
            .with_min_len(MIN_ROWS_PER_TASK)
            .enumerate()
            .for_each(|(i, row)| {
                for k in p.ptr[i]..p.ptr[i + 1] {
                    row[p.col[k] as usize] = self.val[k];
                }
            });
        Tensor::from_vec(out, (p.n, p.f), device)
    }
}

impl Pattern {
    fn new(n: usize, f: usize, ptr: Vec<usize>, col: Vec<u32>) -> Self {
        // Counting sort by column; rows stay ascending within a column.
        let mut cptr = vec![0usize; f + 1];
        for &k in &col {
            cptr[k as usize + 1] += 1;
        }
        for k in 0..f {
            cptr[k + 1] += cptr[k];
        }
        let mut next = cptr[..f].to_vec();
        let mut crow = vec![0u32; col.len()];
        let mut cpos = vec![0u32; col.len()];
        for i in 0..n {
            for e in ptr[i]..ptr[i + 1] {
                let slot = &mut next[col[e] as usize];
                crow[*slot] = i as u32;
                cpos[*slot] = e as u32;
                *slot += 1;
            }
        }
        Self {
            n,
            f,
            ptr,
            col,
            cptr,
            crow,
            cpos,
        }
    }
}

/// Whether `x` could take the sparse path at all (cheap checks, no scan).
fn eligible(x: &Tensor) -> bool {
    x.device().is_cpu()
        && x.dtype() == DType::F32
        && !x.track_op()
        && x.rank() == 2
        && x.dim(1).is_ok_and(|f| f >= MIN_FEATURES)
        && x.is_contiguous()
}

/// Recent answers of [`SparseFeatures::of`], by tensor id. A few entries suffice: the graph's
/// features, and the dropped copy of each training step.
type Cache = VecDeque<(candle_core::TensorId, Option<SparseFeatures>)>;
static CACHE: Mutex<Cache> = Mutex::new(VecDeque::new());
const CACHE_ENTRIES: usize = 8;

fn cache_get(x: &Tensor) -> Option<Option<SparseFeatures>> {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    // Most recently used last, so the graph's features outlive the per-step dropped copies.
    let k = cache.iter().position(|(id, _)| *id == x.id())?;
    let hit = cache.remove(k)?;
    let answer = hit.1.clone();
    cache.push_back(hit);
    Some(answer)
}

fn cache_put(x: &Tensor, s: Option<SparseFeatures>) {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= CACHE_ENTRIES {
        cache.pop_front();
    }
    cache.push_back((x.id(), s));
}

/// `x · weightᵀ` for `x` `[N, F]` and `weight` `[O, F]`: over the non-zeros of `x` when it is
/// sparse (see the module docs), a dense product otherwise ([`super::product::product`]).
pub fn linear(x: &Tensor, weight: &Tensor) -> candle_core::Result<Tensor> {
    let sparse = match SparseFeatures::of(x) {
        Some(s) if weight.dtype() == DType::F32 && weight.device().is_cpu() => s,
        _ => return super::product::product(x, weight),
    };
    let (_, f) = weight.dims2()?;
    if f != sparse.pattern.f {
        candle_core::bail!(
            "linear: x has {} features but the weight takes {f}",
            sparse.pattern.f
        );
    }
    weight.contiguous()?.apply_op1(SparseLinear { x: sparse })
}

/// Input dropout with `dropout`'s mask: sparse in, sparse out (see the module docs); any other
/// tensor goes through [`Dropout::apply`].
pub fn dropout(d: &mut Dropout, x: &Tensor, p: f64) -> candle_core::Result<Tensor> {
    let Some(s) = (p > 0.0 && p < 1.0)
        .then(|| SparseFeatures::of(x))
        .flatten()
    else {
        return d.apply(x, p);
    };
    let pat = &s.pattern;
    // The row-major position of each entry in the [N, F] tensor: its element number for
    // Dropout::apply.
    let positions: Vec<u64> = (0..pat.n)
        .flat_map(|i| {
            (pat.ptr[i]..pat.ptr[i + 1]).map(move |e| (i * pat.f + pat.col[e] as usize) as u64)
        })
        .collect();
    let keep = d.host_keep_at(pat.n * pat.f, p, &positions);
    // (x · mask) · scale, rounded as candle's `(x * mask) * scale` (an f32 affine map
    // `v · scale + 0`); a dropped entry is +0 there too.
    let scale = (1.0 / (1.0 - p)) as f32;
    let val: Vec<f32> = s
        .val
        .iter()
        .zip(&keep)
        .map(|(&v, &k)| if k { v * scale + 0.0 } else { 0.0 })
        .collect();
    let dropped = SparseFeatures {
        pattern: s.pattern.clone(),
        val: Arc::new(val),
    };
    let dense = dropped.to_dense(x.device())?;
    cache_put(&dense, Some(dropped));
    Ok(dense)
}

/// `x · weightᵀ` with `x` sparse; the op's argument is the weight `[O, F]`.
struct SparseLinear {
    x: SparseFeatures,
}

impl CustomOp1 for SparseLinear {
    fn name(&self) -> &'static str {
        "sparse-linear"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (o, f) = l.shape().dims2()?;
        let w: &[f32] = host_slice(s, l, "sparse_features::linear")?;
        let p = &self.x.pattern;
        // Wᵀ, so that each non-zero adds one contiguous row of O values.
        let mut wt = vec![0f32; f * o];
        for (r, row) in w.chunks(f.max(1)).enumerate() {
            for (k, &v) in row.iter().enumerate() {
                wt[k * o + r] = v;
            }
        }
        let mut out = vec![0f32; p.n * o];
        if o > 0 {
            let val = &self.x.val;
            out.par_chunks_mut(o)
                .with_min_len(MIN_ROWS_PER_TASK)
                .enumerate()
                .for_each(|(i, row)| {
                    for e in p.ptr[i]..p.ptr[i + 1] {
                        let v = val[e];
                        let wk = &wt[p.col[e] as usize * o..][..o];
                        for (a, &b) in row.iter_mut().zip(wk) {
                            *a += v * b;
                        }
                    }
                });
        }
        Ok((CpuStorage::F32(out), Shape::from((p.n, o))))
    }

    fn bwd(
        &self,
        _weight: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1_no_bwd(
            &SparseLinearGrad { x: self.x.clone() },
        )?))
    }
}

/// `∂weight = Gᵀ · x` `[O, F]` from the output gradient `G` `[N, O]`.
struct SparseLinearGrad {
    x: SparseFeatures,
}

impl CustomOp1 for SparseLinearGrad {
    fn name(&self) -> &'static str {
        "sparse-linear-grad"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (n, o) = l.shape().dims2()?;
        let g: &[f32] = host_slice(s, l, "sparse_features::linear")?;
        let p = &self.x.pattern;
        if n != p.n {
            candle_core::bail!("sparse linear gradient: {n} rows, expected {}", p.n);
        }
        let val = &self.x.val;
        let mut dwt = vec![0f32; p.f * o];
        if o > 0 {
            dwt.par_chunks_mut(o)
                .with_min_len(MIN_ROWS_PER_TASK)
                .enumerate()
                .for_each(|(k, acc)| {
                    for c in p.cptr[k]..p.cptr[k + 1] {
                        let (i, v) = (p.crow[c] as usize, val[p.cpos[c] as usize]);
                        for (a, &b) in acc.iter_mut().zip(&g[i * o..][..o]) {
                            *a += v * b;
                        }
                    }
                });
        }
        let mut dw = vec![0f32; o * p.f];
        for (k, row) in dwt.chunks(o.max(1)).enumerate() {
            for (r, &v) in row.iter().enumerate() {
                dw[r * p.f + k] = v;
            }
        }
        Ok((CpuStorage::F32(dw), Shape::from((o, p.f))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn sparse_x(n: usize, f: usize, density: f64, seed: u64) -> Tensor {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let v: Vec<f32> = (0..n * f)
            .map(|_| {
                if rng.random::<f64>() < density {
                    rng.random_range(-2.0..2.0)
                } else {
                    0.0
                }
            })
            .collect();
        Tensor::from_vec(v, (n, f), &Device::Cpu).unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    #[test]
    fn product_and_gradient_match_the_dense_ones() {
        // rows without any non-zero included (density 2%, 70 features)
        let x = sparse_x(300, 70, 0.02, 1);
        assert!(SparseFeatures::of(&x).is_some());
        let w = Var::from_tensor(&sparse_x(9, 70, 1.0, 2)).unwrap();
        let g = sparse_x(300, 9, 1.0, 3);
        let sparse = linear(&x, w.as_tensor()).unwrap();
        let dense = x.matmul(&w.as_tensor().t().unwrap()).unwrap();
        assert!(max_diff(&sparse, &dense) < 1e-5);
        let ds = (sparse * &g)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let dd = (dense * &g).unwrap().sum_all().unwrap().backward().unwrap();
        assert!(max_diff(ds.get(&w).unwrap(), dd.get(&w).unwrap()) < 1e-4);
    }

    #[test]
    fn dense_or_small_or_taped_inputs_stay_dense() {
        assert!(SparseFeatures::of(&sparse_x(50, 70, 0.5, 4)).is_none());
        assert!(SparseFeatures::of(&sparse_x(50, 8, 0.01, 5)).is_none());
        let v = Var::from_tensor(&sparse_x(50, 70, 0.01, 6)).unwrap();
        assert!(SparseFeatures::of(v.as_tensor()).is_none());
        let x64 = sparse_x(50, 70, 0.01, 7).to_dtype(DType::F64).unwrap();
        assert!(SparseFeatures::of(&x64).is_none());
    }

    #[test]
    fn sparse_dropout_equals_dense_dropout_and_keeps_the_stream() {
        let x = sparse_x(200, 100, 0.03, 8);
        let mut a = Dropout::new(3, &Device::Cpu);
        let mut b = Dropout::new(3, &Device::Cpu);
        // an odd-length mask first, so the sparse one starts mid-block
        let small = Tensor::ones(7, DType::F32, &Device::Cpu).unwrap();
        a.apply(&small, 0.5).unwrap();
        b.apply(&small, 0.5).unwrap();
        let sparse = dropout(&mut a, &x, 0.6).unwrap();
        let dense = b.apply(&x, 0.6).unwrap();
        assert_eq!(
            sparse.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            dense.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
        assert!(SparseFeatures::of(&sparse).is_some());
        // the next masks agree too
        let na = a.apply(&small, 0.5).unwrap().to_vec1::<f32>().unwrap();
        let nb = b.apply(&small, 0.5).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(na, nb);
    }

    #[test]
    fn results_do_not_depend_on_the_number_of_threads() {
        let x = sparse_x(500, 80, 0.05, 9);
        let w = Var::from_tensor(&sparse_x(16, 80, 1.0, 10)).unwrap();
        let g = sparse_x(500, 16, 1.0, 11);
        let run = || {
            let out = linear(&x, w.as_tensor()).unwrap();
            let grads = (&out * &g).unwrap().sum_all().unwrap().backward().unwrap();
            (
                out.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                grads
                    .get(&w)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap(),
            )
        };
        let many = run();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(run);
        assert_eq!(many, one);
    }
}
