//! Segment max: the largest value of each group of rows, as a candle custom op.
//!
//! GATv2 normalises attention scores per destination node with a softmax. To keep `exp` from
//! overflowing, PyG subtracts each destination's *own* maximum score (`scatter(..., reduce='max')`),
//! not one global constant: a global shift would underflow every node whose scores sit far below
//! the global maximum, giving 0/0. candle 0.11 has `index_add` (a segment sum) but no segment max,
//! so this module adds one: a CPU implementation and a CUDA kernel (`kernels/segment_max.cu`,
//! compiled at run time with NVRTC, behind the `cuda` feature).
//!
//! The op has no gradient: callers pass a detached tensor. The softmax is invariant to the shift,
//! so treating the maximum as a constant leaves its gradient exact (PyG detaches it too).
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::segment_max;
//! let scores = Tensor::new(&[[1f32], [5.], [-2.], [-3.]], &Device::Cpu).unwrap();
//! let target = Tensor::new(&[0u32, 0, 2, 2], &Device::Cpu).unwrap();
//! let max = segment_max(&scores, &target, 3).unwrap();
//! // node 1 receives no edge: 0, as in PyG
//! assert_eq!(max.to_vec2::<f32>().unwrap(), vec![vec![5.], vec![0.], vec![-2.]]);
//! ```

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Shape, Tensor, WithDType};

/// The CUDA source of the kernels, for NVRTC and for CI's compile check.
pub const CUDA_SOURCE: &str = include_str!("../../kernels/segment_max.cu");

/// `out[n, h] = max { src[e, h] : index[e] == n }`, or 0 where no `e` has `index[e] == n`.
///
/// `src` is `[E, H]` (or `[E]`) floating point, `index` is `[E]` `u32` or `i64` with values in
/// `0..num_segments` (an [`crate::EdgeIndex`] guarantees that). The result is detached: no
/// gradient flows through it.
pub fn segment_max(
    src: &Tensor,
    index: &Tensor,
    num_segments: usize,
) -> candle_core::Result<Tensor> {
    let (e, flat) = match src.dims() {
        [e] => (*e, src.reshape((*e, 1))?),
        [e, _] => (*e, src.clone()),
        dims => candle_core::bail!("segment_max: src must be [E] or [E, H], got {dims:?}"),
    };
    if index.dims() != [e] {
        candle_core::bail!(
            "segment_max: index must be [{e}] (one segment id per row of src), got {:?}",
            index.dims()
        );
    }
    // The CPU kernel checks every id as it goes; the CUDA kernel writes `out[index[e]]` without
    // a check (see its SAFETY comment), so ids are checked here first: one reduction and a
    // 4-byte copy, instead of an out-of-bounds write on the device.
    if !index.device().is_cpu() && e > 0 {
        let max = index
            .to_dtype(candle_core::DType::I64)?
            .max(0)?
            .to_scalar::<i64>()?;
        if max < 0 || max as usize >= num_segments {
            candle_core::bail!("segment_max: index holds {max}, not in 0..{num_segments}");
        }
    }
    let out = flat
        .detach()
        .contiguous()?
        .apply_op2_no_bwd(&index.contiguous()?, &SegmentMax { num_segments })?;
    if src.rank() == 1 {
        out.squeeze(1)
    } else {
        Ok(out)
    }
}

struct SegmentMax {
    num_segments: usize,
}

fn scatter_max<T: WithDType + PartialOrd, I: Copy + Into<u64>>(
    src: &[T],
    index: &[I],
    width: usize,
    num_segments: usize,
) -> candle_core::Result<Vec<T>> {
    let mut out: Vec<Option<T>> = vec![None; num_segments * width];
    for (e, &seg) in index.iter().enumerate() {
        let seg = seg.into() as usize;
        if seg >= num_segments {
            candle_core::bail!("segment_max: index[{e}] = {seg} is not below {num_segments}");
        }
        let row = &src[e * width..(e + 1) * width];
        let slot = &mut out[seg * width..(seg + 1) * width];
        for (o, &v) in slot.iter_mut().zip(row) {
            // NaN propagates, as torch's max does: a NaN score must not silently vanish.
            *o = match *o {
                Some(cur) if !(v > cur || v.is_nan_like()) => Some(cur),
                _ => Some(v),
            };
        }
    }
    Ok(out.into_iter().map(|v| v.unwrap_or_else(T::zero)).collect())
}

trait NanLike {
    fn is_nan_like(&self) -> bool;
}
impl<T: PartialEq> NanLike for T {
    #[allow(clippy::eq_op)]
    fn is_nan_like(&self) -> bool {
        self != self
    }
}

impl CustomOp2 for SegmentMax {
    fn name(&self) -> &'static str {
        "segment-max"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (rows, width) = l1.shape().dims2()?;
        let (Some((a, b)), Some((c, d))) = (l1.contiguous_offsets(), l2.contiguous_offsets())
        else {
            candle_core::bail!("segment_max: inputs must be contiguous");
        };
        let n = self.num_segments;
        macro_rules! run {
            ($src:expr, $ctor:ident) => {{
                let src = &$src[a..b];
                let out = match s2 {
                    CpuStorage::U32(ix) => scatter_max(src, &ix[c..d], width, n)?,
                    CpuStorage::I64(ix) => {
                        let ix: Vec<u64> = ix[c..d]
                            .iter()
                            .map(|&v| u64::try_from(v).unwrap_or(u64::MAX))
                            .collect();
                        scatter_max(src, &ix, width, n)?
                    }
                    other => candle_core::bail!(
                        "segment_max: index must be u32 or i64, got {:?}",
                        other.dtype()
                    ),
                };
                debug_assert_eq!(src.len(), rows * width);
                CpuStorage::$ctor(out)
            }};
        }
        let out = match s1 {
            CpuStorage::F32(v) => run!(v, F32),
            CpuStorage::F64(v) => run!(v, F64),
            CpuStorage::F16(v) => run!(v, F16),
            CpuStorage::BF16(v) => run!(v, BF16),
            other => candle_core::bail!(
                "segment_max: src must be a float tensor, got {:?}",
                other.dtype()
            ),
        };
        Ok((out, Shape::from((n, width))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::forward(self.num_segments, s1, l1, s2, l2)
    }
}

/// Float types the CUDA kernel handles; others are converted by the caller.
pub const CUDA_DTYPES: &[DType] = &[DType::F32];

#[cfg(feature = "cuda")]
mod cuda {
    use super::super::kernel_support::cuda::{zeros, Launch};
    use super::CUDA_SOURCE;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::cuda_backend::cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
    use candle_core::{CudaStorage, Layout, Shape};
    use std::sync::OnceLock;

    const MODULE: &str = "workbook_segment_max";

    fn ptx() -> candle_core::Result<&'static str> {
        static PTX: OnceLock<Result<String, String>> = OnceLock::new();
        PTX.get_or_init(|| {
            compile_ptx_with_opts(CUDA_SOURCE, CompileOptions::default())
                .map(|p| p.to_src())
                .map_err(|e| format!("NVRTC could not compile kernels/segment_max.cu: {e}"))
        })
        .as_deref()
        .map_err(|e| candle_core::Error::Cuda(e.clone().into()))
    }

    pub(super) fn forward(
        n: usize,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (rows, width) = l1.shape().dims2()?;
        let dev = s1.device().clone();
        let src = s1.as_cuda_slice::<f32>().map_err(|_| {
            candle_core::Error::Msg(format!(
                "segment_max on CUDA supports f32 scores, got {:?}; convert with to_dtype(F32)",
                s1.dtype()
            ))
        })?;
        let index = s2.as_cuda_slice::<u32>().map_err(|_| {
            candle_core::Error::Msg(format!(
                "segment_max on CUDA takes u32 indices, got {:?}",
                s2.dtype()
            ))
        })?;
        let src = src.slice(l1.start_offset()..);
        let index = index.slice(l2.start_offset()..);
        let len = n * width;
        let out = zeros(&dev, len)?;
        let ptx = ptx()?;
        let (len32, rows32, width32) = (len as u32, rows as u32, width as u32);
        let launch = |name, threads| Launch::of(&dev, MODULE, ptx, name, threads);

        let fill = launch("segment_max_fill_f32", len)?;
        // SAFETY: `Launch::run`'s contract: `segment_max_fill_f32`'s parameters
        // (kernels/segment_max.cu); `out` holds the `len` elements of the `len` threads.
        unsafe {
            fill.run(|b| {
                b.arg(&out);
                b.arg(&len32);
            })
        }?;

        let scatter = launch("segment_max_scatter_f32", rows * width)?;
        // SAFETY: `Launch::run`'s contract: `segment_max_scatter_f32`'s parameters; `src` is
        // `[rows, width]` and `index` `[rows]` (checked by `segment_max`), every `index[e]` is
        // below `n` (checked by `segment_max` before the launch), so the rows·width threads
        // write `out[index[e]·width + h]` inside its `n·width` elements.
        unsafe {
            scatter.run(|b| {
                b.arg(&src);
                b.arg(&index);
                b.arg(&out);
                b.arg(&rows32);
                b.arg(&width32);
            })
        }?;

        let finish = launch("segment_max_finish_f32", len)?;
        // SAFETY: `Launch::run`'s contract: `segment_max_finish_f32`'s parameters; `out` holds
        // the `len` elements of the `len` threads.
        unsafe {
            finish.run(|b| {
                b.arg(&out);
                b.arg(&len32);
            })
        }?;

        Ok((
            CudaStorage::wrap_cuda_slice(out, dev),
            Shape::from((n, width)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn matches_a_naive_max_per_segment_and_head() {
        let cpu = Device::Cpu;
        let src = Tensor::new(&[[1f32, -4.], [3., -5.], [-1., -1.], [7., 2.]], &cpu).unwrap();
        let idx = Tensor::new(&[1i64, 1, 0, 1], &cpu).unwrap();
        let max = segment_max(&src, &idx, 3).unwrap();
        assert_eq!(
            max.to_vec2::<f32>().unwrap(),
            vec![vec![-1., -1.], vec![7., 2.], vec![0., 0.]]
        );
    }

    #[test]
    fn all_negative_segment_is_not_clamped_to_zero() {
        let cpu = Device::Cpu;
        let src = Tensor::new(&[-3f64, -2.5], &cpu).unwrap();
        let idx = Tensor::new(&[0u32, 0], &cpu).unwrap();
        assert_eq!(
            segment_max(&src, &idx, 1)
                .unwrap()
                .to_vec1::<f64>()
                .unwrap(),
            vec![-2.5]
        );
    }

    #[test]
    fn propagates_nan_and_rejects_bad_index() {
        let cpu = Device::Cpu;
        let src = Tensor::new(&[1f32, f32::NAN, 0.5], &cpu).unwrap();
        let idx = Tensor::new(&[0u32, 0, 0], &cpu).unwrap();
        assert!(segment_max(&src, &idx, 1)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()[0]
            .is_nan());
        let idx = Tensor::new(&[0u32, 5, 0], &cpu).unwrap();
        let err = segment_max(&src, &idx, 2).unwrap_err().to_string();
        assert!(err.contains("index[1] = 5"), "{err}");
        let idx = Tensor::new(&[0u32, 0], &cpu).unwrap();
        assert!(segment_max(&src, &idx, 1).is_err());
    }
}
