//! Gather and scatter over a raw index tensor, trusting it as PyG's message passing does.
//!
//! PyG's `MessagePassing` gathers each edge's source features with `x.index_select(0,
//! edge_index[0])` and sums the messages into their targets with a scatter over
//! `edge_index[1]`. Nothing checks the ids before these kernels: on the CPU an id that is not a
//! node fails there (*"IndexError: index out of range in self"*); on a GPU it trips a
//! device-side assert that surfaces later, somewhere else (see [`crate::sim_device`]). The
//! layers of this crate never meet that, because an [`EdgeIndex`](crate::EdgeIndex) is checked
//! when it is built. These two ops are for code that holds a raw `[2, E]` tensor, as a reader's
//! own layer does, and they fail as PyTorch's do on the same device:
//!
//! - `cpu`: at once, [`WorkbookError::IndexOutOfRange`];
//! - `sim:N`: as the device's [`SimErrors`](crate::sim_device::SimErrors) mode says: at once
//!   (the default), or recorded and reported at the next synchronising operation (the
//!   asynchronous mode: the op returns a result anyway, zero rows where the index was bad, as
//!   the GPU threads that did not fault write theirs), or at once in CUDA's words (blocking);
//! - `cuda:N`: candle's own kernels, whose `assert` (id below the row count) is a real
//!   device-side assert. Those asserts miss a negative `i64` id, and candle reads `u32::MAX` as
//!   "no row" (zeros): the index is first widened to `i64` with every negative id replaced by
//!   the row count, on the device and without waiting for it, so that each bad id trips the
//!   assert.
//!
//! The check reads the index on the host, which a simulated device's memory is; it is part of
//! these two ops only, and the layers' kernels do not pay for it.
//!
//! ```
//! use workbook::ops::raw_index::{gather_rows, scatter_add_rows};
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::Placement;
//! let cpu = Placement::cpu();
//! let x = Tensor::new(&[[1f32], [2.], [3.]], &Device::Cpu).unwrap();
//! let src = Tensor::new(&[0u32, 2], &Device::Cpu).unwrap();
//! let dst = Tensor::new(&[1u32, 1], &Device::Cpu).unwrap();
//! let msgs = gather_rows(&x, &src, &cpu, "x[src]").unwrap();                // x_j
//! let out = scatter_add_rows(&msgs, &dst, 3, &cpu, "sum into dst").unwrap(); // sum at targets
//! assert_eq!(out.to_vec2::<f32>().unwrap(), vec![vec![0.], vec![4.], vec![0.]]);
//! let bad = Tensor::new(&[0u32, 3], &Device::Cpu).unwrap(); // node 3 does not exist
//! let err = gather_rows(&x, &bad, &cpu, "x[src]").unwrap_err().to_string();
//! assert!(err.starts_with("index out of range in gather_rows 'x[src]' on cpu: index 3 at position 1"));
//! ```

use crate::error::{KernelFault, Result, WorkbookError};
use crate::placement::Placement;
use candle_core::{DType, Tensor};

/// `x[index]` along the first dimension (PyTorch: `x.index_select(0, index)`), with `index` a
/// 1-D `u32` or `i64` tensor that nothing has checked. `what` names the computation in errors
/// (`x[edge_index[0]]`).
pub fn gather_rows(x: &Tensor, index: &Tensor, at: &Placement, what: &str) -> Result<Tensor> {
    let rows = x.dim(0)?;
    match check("gather_rows", what, index, rows, at)? {
        Checked::Trusted => Ok(x.index_select(index, 0)?),
        Checked::Device(index) => Ok(x.index_select(&index, 0)?),
        Checked::Faulted { safe, keep } => {
            let gathered = x.index_select(&safe, 0)?;
            Ok(gathered.broadcast_mul(&row_mask(&keep, gathered.rank(), x.dtype())?)?)
        }
    }
}

/// Sums the rows of `src` (`[E, ...]`) into `num_rows` rows at `index` (`[E]`, `u32` or
/// `i64`, unchecked): PyG's `scatter(src, index, dim=0, dim_size=num_rows, reduce="sum")`,
/// PyTorch's `zeros.index_add_(0, index, src)`.
pub fn scatter_add_rows(
    src: &Tensor,
    index: &Tensor,
    num_rows: usize,
    at: &Placement,
    what: &str,
) -> Result<Tensor> {
    let mut shape = src.dims().to_vec();
    if shape.is_empty() || index.dims() != [shape[0]] {
        return Err(WorkbookError::InvalidConfig(format!(
            "scatter_add_rows '{what}': the index must have one entry per row of src, but src has shape {shape:?} and the index {:?}",
            index.dims()
        )));
    }
    shape[0] = num_rows;
    let out = Tensor::zeros(shape, src.dtype(), src.device())?;
    match check("scatter_add_rows", what, index, num_rows, at)? {
        Checked::Trusted => Ok(out.index_add(index, src, 0)?),
        Checked::Device(index) => Ok(out.index_add(&index, src, 0)?),
        Checked::Faulted { safe, keep } => {
            let kept = src.broadcast_mul(&row_mask(&keep, src.rank(), src.dtype())?)?;
            Ok(out.index_add(&safe, &kept, 0)?)
        }
    }
}

/// What the bound check found.
enum Checked {
    /// Every id in range: use the index as it is.
    Trusted,
    /// A device whose kernels check (CUDA): use this index, in which every bad id trips them.
    Device(Tensor),
    /// Some ids out of range on an asynchronous simulated device, which goes on: `safe` has
    /// them replaced by 0, `keep` is 1 for the ids that were in range and 0 for the others.
    Faulted { safe: Tensor, keep: Tensor },
}

/// The kernel's bound check: every id of `index` in `0..bound`, or the fault, reported as the
/// placement's device does.
fn check(op: &str, what: &str, index: &Tensor, bound: usize, at: &Placement) -> Result<Checked> {
    if let Some(d) = at.sim_device() {
        d.launch(|| format!("{op} '{what}'"))?;
    }
    if index.rank() != 1 || !matches!(index.dtype(), DType::U32 | DType::I64) {
        return Err(WorkbookError::InvalidConfig(format!(
            "{op} '{what}': the index must be a 1-D tensor of u32 or i64, got {:?} {:?}",
            index.dtype(),
            index.dims()
        )));
    }
    if !at.device().is_cpu() {
        return Ok(Checked::Device(tripping_negatives(index, bound)?));
    }
    let ids = index.to_dtype(DType::I64)?.to_vec1::<i64>()?;
    let out_of_range = |id: i64| id < 0 || id as u64 >= bound as u64;
    let Some(position) = ids.iter().position(|&id| out_of_range(id)) else {
        return Ok(Checked::Trusted);
    };
    let fault = KernelFault {
        op: op.to_string(),
        what: what.to_string(),
        device: at.id(),
        position,
        index: ids[position],
        bound,
        count: ids.iter().filter(|&&id| out_of_range(id)).count(),
        len: ids.len(),
    };
    match at.sim_device() {
        Some(d) => d.kernel_fault(fault)?,
        None => return Err(WorkbookError::IndexOutOfRange(Box::new(fault))),
    }
    let (safe, keep): (Vec<u32>, Vec<u8>) = ids
        .iter()
        .map(|&id| {
            if out_of_range(id) {
                (0, 0)
            } else {
                (id as u32, 1)
            }
        })
        .unzip();
    let n = ids.len();
    Ok(Checked::Faulted {
        safe: Tensor::from_vec(safe, n, index.device())?,
        keep: Tensor::from_vec(keep, n, index.device())?,
    })
}

/// `index` as `i64` with every negative id replaced by `bound`, computed on the index's device
/// without reading it back: candle's CUDA kernels `assert(id < rows)` on the id as it is, so a
/// negative `i64` would pass and read before the data, and a `u32::MAX` would be taken for
/// "no row"; widened, both are `>= bound` and trip the assert.
fn tripping_negatives(index: &Tensor, bound: usize) -> Result<Tensor> {
    let wide = index.to_dtype(DType::I64)?;
    let bound = Tensor::full(bound as i64, wide.dims(), wide.device())?;
    Ok(wide.lt(0i64)?.where_cond(&bound, &wide)?)
}

/// `keep` (`[E]`) shaped `[E, 1, ...]` to multiply rows of rank `rank`, in `dtype`.
fn row_mask(keep: &Tensor, rank: usize, dtype: DType) -> Result<Tensor> {
    let mut shape = vec![1; rank.max(1)];
    shape[0] = keep.dim(0)?;
    Ok(keep.to_dtype(dtype)?.reshape(shape)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn every_bad_id_trips_the_device_assert() {
        // What the CUDA path hands candle's kernels, computed here on the CPU with the same ops.
        let neg = Tensor::new(&[0i64, -1, 2, -7], &Device::Cpu).unwrap();
        let got = tripping_negatives(&neg, 3)
            .unwrap()
            .to_vec1::<i64>()
            .unwrap();
        assert_eq!(got, vec![0, 3, 2, 3]);
        let max = Tensor::new(&[1u32, u32::MAX], &Device::Cpu).unwrap();
        let got = tripping_negatives(&max, 3)
            .unwrap()
            .to_vec1::<i64>()
            .unwrap();
        assert_eq!(got, vec![1, u32::MAX as i64]);
    }
}
