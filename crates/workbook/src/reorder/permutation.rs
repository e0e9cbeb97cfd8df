//! A node permutation and its inverse, and the maps between a graph's old and new node ids.
//!
//! A reordered graph numbers its nodes anew: new node `i` is old node `old_of_new[i]`, and old
//! node `j` is new node `new_of_old[j]`. Everything indexed by node (features, labels, the
//! split, a model's outputs, a mini-batch's `n_id`) maps between the two orders with this type,
//! exactly: a permutation moves rows, it computes nothing. DGL keeps the same map as
//! `g.ndata[dgl.NID]` (its `old_of_new`) after `dgl.reorder_graph`.
//!
//! ```
//! use workbook::reorder::Permutation;
//! use workbook::candle_core::{Device, Tensor};
//! let p = Permutation::from_old_of_new(vec![2, 0, 1]).unwrap(); // new 0 is old 2, ...
//! assert_eq!(p.new_of_old(), &[1, 2, 0]);
//! assert_eq!(p.to_old_ids(&[0, 1]).unwrap(), vec![2, 0]); // e.g. a batch's n_id
//! let rows = Tensor::new(&[[10f32], [20.], [30.]], &Device::Cpu).unwrap(); // old order
//! let new = p.to_new_rows(&rows).unwrap();
//! assert_eq!(new.to_vec2::<f32>().unwrap(), [[30.], [10.], [20.]]);
//! let back = p.to_old_rows(&new).unwrap(); // e.g. predictions, back in the old order
//! assert_eq!(back.to_vec2::<f32>().unwrap(), rows.to_vec2::<f32>().unwrap());
//! assert!(Permutation::from_old_of_new(vec![0, 0, 1]).is_err()); // node 0 twice
//! ```

use crate::error::{PermutationError, Result};
use crate::graph::Split;
use candle_core::{DType, Tensor};

/// A bijection of `0..n` kept both ways, so either direction is one lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation {
    new_of_old: Vec<u32>,
    old_of_new: Vec<u32>,
}

/// `inverse[perm[i]] = i`, or the first reason `perm` is not a permutation of `0..len`.
fn invert(perm: &[u32]) -> Result<Vec<u32>, PermutationError> {
    let len = perm.len();
    if len > u32::MAX as usize {
        return Err(PermutationError::WrongLength {
            what: "a node table with 32-bit ids".into(),
            expected: u32::MAX as usize,
            found: len,
        });
    }
    const UNSET: u32 = u32::MAX;
    let mut inverse = vec![UNSET; len];
    for (position, &id) in perm.iter().enumerate() {
        let slot = inverse
            .get_mut(id as usize)
            .ok_or(PermutationError::OutOfRange {
                position,
                id: u64::from(id),
                len,
            })?;
        if *slot != UNSET {
            return Err(PermutationError::Repeated {
                id,
                first: *slot as usize,
                second: position,
                len,
            });
        }
        *slot = position as u32;
    }
    Ok(inverse)
}

impl Permutation {
    /// The order that changes nothing.
    pub fn identity(n: usize) -> Self {
        let ids: Vec<u32> = (0..n as u32).collect();
        Self {
            new_of_old: ids.clone(),
            old_of_new: ids,
        }
    }

    /// From `new_of_old[old] = new`; an error if it is not a permutation of `0..len`.
    pub fn from_new_of_old(new_of_old: Vec<u32>) -> Result<Self> {
        let old_of_new = invert(&new_of_old)?;
        Ok(Self {
            new_of_old,
            old_of_new,
        })
    }

    /// From `old_of_new[new] = old` (an order: the old ids listed in their new places, what an
    /// ordering algorithm produces and DGL's `nodes_perm` takes); an error if it is not a
    /// permutation of `0..len`.
    pub fn from_old_of_new(old_of_new: Vec<u32>) -> Result<Self> {
        let new_of_old = invert(&old_of_new)?;
        Ok(Self {
            new_of_old,
            old_of_new,
        })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.new_of_old.len()
    }

    /// A permutation of no nodes.
    pub fn is_empty(&self) -> bool {
        self.new_of_old.is_empty()
    }

    /// `new_of_old[old]` is the new id of old node `old`.
    pub fn new_of_old(&self) -> &[u32] {
        &self.new_of_old
    }

    /// `old_of_new[new]` is the old id of new node `new`.
    pub fn old_of_new(&self) -> &[u32] {
        &self.old_of_new
    }

    /// The other direction: maps new ids to old ones.
    pub fn inverse(&self) -> Self {
        Self {
            new_of_old: self.old_of_new.clone(),
            old_of_new: self.new_of_old.clone(),
        }
    }

    /// `self` then `next` (a graph reordered twice): old ids of the first order to new ids of
    /// the second.
    pub fn then(&self, next: &Permutation) -> Result<Self> {
        self.check_len("the next permutation", next.len())?;
        let new_of_old = self
            .new_of_old
            .iter()
            .map(|&mid| next.new_of_old[mid as usize])
            .collect();
        Permutation::from_new_of_old(new_of_old)
    }

    /// The new id of old node `old`.
    pub fn new_id(&self, old: u32) -> Result<u32> {
        self.lookup(&self.new_of_old, old)
    }

    /// The old id of new node `new`.
    pub fn old_id(&self, new: u32) -> Result<u32> {
        self.lookup(&self.old_of_new, new)
    }

    /// Old ids mapped to new ones (e.g. seed nodes chosen in the original numbering).
    pub fn to_new_ids(&self, old: &[u32]) -> Result<Vec<u32>> {
        old.iter()
            .map(|&i| self.lookup(&self.new_of_old, i))
            .collect()
    }

    /// New ids mapped back to old ones: a mini-batch's `n_id` on the reordered graph names
    /// nodes of the original graph once mapped with this.
    pub fn to_old_ids(&self, new: &[u32]) -> Result<Vec<u32>> {
        new.iter()
            .map(|&i| self.lookup(&self.old_of_new, i))
            .collect()
    }

    /// A `u32` tensor of new ids (a batch's `n_id`) mapped to old ids, on its device.
    pub fn to_old_id_tensor(&self, new: &Tensor) -> Result<Tensor> {
        let ids = new.to_dtype(DType::U32)?.to_vec1::<u32>()?;
        let old = self.to_old_ids(&ids)?;
        Ok(Tensor::from_vec(old, ids.len(), new.device())?)
    }

    /// Rows in the old node order (`[N, ...]`: features, labels, a model's outputs) put in
    /// the new order: new row `i` is old row `old_of_new[i]`.
    pub fn to_new_rows(&self, rows: &Tensor) -> Result<Tensor> {
        self.gather_rows(rows, &self.old_of_new)
    }

    /// Rows in the new order (predictions on the reordered graph) put back in the old order:
    /// old row `j` is new row `new_of_old[j]`.
    pub fn to_old_rows(&self, rows: &Tensor) -> Result<Tensor> {
        self.gather_rows(rows, &self.new_of_old)
    }

    /// A split of old ids as one of new ids. Each set is sorted, as a mask in the new order
    /// reads (DGL permutes masks as node data): the sets hold the same nodes.
    pub fn to_new_split(&self, split: &Split) -> Result<Split> {
        self.map_split(split, &self.new_of_old)
    }

    /// A split of new ids as one of old ids, each set sorted.
    pub fn to_old_split(&self, split: &Split) -> Result<Split> {
        self.map_split(split, &self.old_of_new)
    }

    fn map_split(&self, split: &Split, map: &[u32]) -> Result<Split> {
        let set = |ids: &Tensor| -> Result<Tensor> {
            let mut out = ids
                .to_vec1::<u32>()?
                .into_iter()
                .map(|i| self.lookup(map, i))
                .collect::<Result<Vec<u32>>>()?;
            out.sort_unstable();
            let n = out.len();
            Ok(Tensor::from_vec(out, n, ids.device())?)
        };
        Ok(Split {
            train: set(&split.train)?,
            val: set(&split.val)?,
            test: set(&split.test)?,
        })
    }

    fn lookup(&self, map: &[u32], id: u32) -> Result<u32> {
        Ok(*map.get(id as usize).ok_or(PermutationError::NoSuchNode {
            id: u64::from(id),
            len: self.len(),
        })?)
    }

    fn check_len(&self, what: &str, found: usize) -> Result<()> {
        if found != self.len() {
            return Err(PermutationError::WrongLength {
                what: what.into(),
                expected: self.len(),
                found,
            }
            .into());
        }
        Ok(())
    }

    fn gather_rows(&self, rows: &Tensor, index: &[u32]) -> Result<Tensor> {
        let found = rows.dims().first().copied().unwrap_or(0);
        if rows.rank() == 0 {
            return Err(PermutationError::WrongLength {
                what: "a scalar tensor (no rows)".into(),
                expected: self.len(),
                found: 0,
            }
            .into());
        }
        self.check_len("the tensor's rows", found)?;
        let index = Tensor::from_slice(index, index.len(), rows.device())?;
        Ok(rows.index_select(&index, 0)?)
    }
}
