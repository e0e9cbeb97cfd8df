//! Interprets a pickled SciPy CSR matrix (`scipy.sparse.csr.csr_matrix`) as a validated [`Csr`].
//!
//! SciPy pickles a CSR matrix as `csr_matrix.__new__(csr_matrix)` (`NEWOBJ` with no arguments)
//! followed by `BUILD` with the instance dictionary:
//! `{'_shape': (rows, cols), 'indptr': ndarray, 'indices': ndarray, 'data': ndarray,
//! 'format': 'csr', 'maxprint': 50, ...}`. [`Csr::from_pickle`] reads that dictionary (other keys
//! are ignored), decodes the three arrays with [`crate::numpy`] and checks that they form a valid
//! CSR matrix: `indptr` has `rows + 1` entries starting at 0 and never decreasing, its last entry
//! equals the lengths of `indices` and `data`, and every column index is below `cols`.
//!
//! ```
//! use planetoid::scipy_sparse::Csr;
//! // [[0, 2, 0],
//! //  [1, 0, 3]]
//! let m = Csr::new(2, 3, vec![0, 1, 3], vec![1, 0, 2], vec![2.0, 1.0, 3.0]).unwrap();
//! assert_eq!(m.nnz(), 3);
//! assert_eq!(m.to_dense_f32().unwrap(), vec![0.0, 2.0, 0.0, 1.0, 0.0, 3.0]);
//! // Column 3 is out of range for a 3-column matrix:
//! assert!(Csr::new(2, 3, vec![0, 1, 3], vec![1, 0, 3], vec![2.0, 1.0, 3.0]).is_err());
//! ```

use crate::error::DecodeError;
use crate::numpy::{ArrayData, DTypeKind, NdArray};
use crate::pickle::{Pickle, Value};

/// The class names SciPy has pickled CSR matrices under (old and new module layouts).
pub const CSR_GLOBALS: [(&str, &str); 4] = [
    ("scipy.sparse.csr", "csr_matrix"),
    ("scipy.sparse._csr", "csr_matrix"),
    ("scipy.sparse._csr", "csr_array"),
    ("scipy.sparse", "csr_matrix"),
];

/// Most elements [`Csr::to_dense_f32`] will allocate (256 Mi `f32`, i.e. 1 GiB).
pub const MAX_DENSE_ELEMENTS: usize = 1 << 28;

/// A validated compressed-sparse-row matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr {
    rows: usize,
    cols: usize,
    indptr: Vec<usize>,
    indices: Vec<usize>,
    data: Vec<f64>,
}

/// Whether `v` is a call of one of the [`CSR_GLOBALS`].
pub fn is_csr(p: &Pickle, v: Value) -> bool {
    p.call_global(v).is_some_and(|g| CSR_GLOBALS.contains(&g))
}

fn expected(p: &Pickle, what: &str, v: Value) -> DecodeError {
    DecodeError::Expected {
        expected: what.to_string(),
        found: p.describe(v),
    }
}

fn index_array(p: &Pickle, state: Value, key: &str) -> Result<Vec<usize>, DecodeError> {
    let v = p
        .dict_get(state, key.as_bytes())
        .ok_or_else(|| DecodeError::Invalid(format!("the CSR matrix has no '{key}' entry")))?;
    let a = NdArray::from_pickle(p, v)?;
    if a.shape.len() != 1 || !matches!(a.dtype.kind, DTypeKind::Int | DTypeKind::UInt) {
        return Err(DecodeError::Invalid(format!(
            "the CSR '{key}' must be a 1-D integer array, found shape {:?} dtype {}",
            a.shape, a.dtype
        )));
    }
    let ArrayData::Int(vals) = a.data else {
        unreachable!("integer dtypes decode to ArrayData::Int")
    };
    vals.into_iter()
        .map(|i| {
            usize::try_from(i).map_err(|_| {
                DecodeError::Invalid(format!("the CSR '{key}' holds negative value {i}"))
            })
        })
        .collect()
}

impl Csr {
    /// Builds and validates a CSR matrix.
    pub fn new(
        rows: usize,
        cols: usize,
        indptr: Vec<usize>,
        indices: Vec<usize>,
        data: Vec<f64>,
    ) -> Result<Csr, DecodeError> {
        let invalid = |m: String| Err(DecodeError::Invalid(m));
        if Some(indptr.len()) != rows.checked_add(1) {
            return invalid(format!(
                "CSR indptr has {} entries but the matrix has {rows} rows (needs rows + 1)",
                indptr.len()
            ));
        }
        if indptr[0] != 0 {
            return invalid(format!("CSR indptr starts at {} instead of 0", indptr[0]));
        }
        if let Some(r) = indptr.windows(2).position(|w| w[1] < w[0]) {
            return invalid(format!(
                "CSR indptr decreases at row {r} ({} then {})",
                indptr[r],
                indptr[r + 1]
            ));
        }
        let nnz = indptr[rows];
        if indices.len() != nnz || data.len() != nnz {
            return invalid(format!(
                "CSR indptr ends at {nnz} but there are {} indices and {} values",
                indices.len(),
                data.len()
            ));
        }
        if let Some(k) = indices.iter().position(|&c| c >= cols) {
            return invalid(format!(
                "CSR column index {} (entry {k}) is out of range for {cols} columns",
                indices[k]
            ));
        }
        Ok(Csr {
            rows,
            cols,
            indptr,
            indices,
            data,
        })
    }

    /// Interprets `v` as a pickled SciPy CSR matrix; see the module documentation.
    pub fn from_pickle(p: &Pickle, v: Value) -> Result<Csr, DecodeError> {
        const WHAT: &str = "a SciPy CSR matrix (scipy.sparse.csr.csr_matrix)";
        let Some((module, name)) = p.call_global(v) else {
            return Err(expected(p, WHAT, v));
        };
        if !CSR_GLOBALS.contains(&(module, name)) {
            return Err(DecodeError::UnexpectedGlobal {
                module: module.into(),
                name: name.into(),
                expected: WHAT.into(),
            });
        }
        let call = p.as_call(v).expect("call_global() checked it is a call");
        let state = call
            .state
            .ok_or_else(|| expected(p, "a CSR matrix with BUILD state", v))?;
        if p.as_dict(state).is_none() {
            return Err(expected(p, "the CSR matrix state dict", state));
        }
        if let Some(f) = p.dict_get(state, b"format") {
            if p.as_string_bytes(f) != Some(b"csr") {
                return Err(expected(p, "format 'csr'", f));
            }
        }
        let shape_v = p
            .dict_get(state, b"_shape")
            .or_else(|| p.dict_get(state, b"shape"))
            .ok_or_else(|| DecodeError::Invalid("the CSR matrix has no '_shape' entry".into()))?;
        let dims: Option<Vec<usize>> = p.as_tuple(shape_v).map(|t| {
            t.iter()
                .filter_map(|&d| p.as_int(d).and_then(|d| usize::try_from(d).ok()))
                .collect()
        });
        let (rows, cols) = match dims.as_deref() {
            Some(&[r, c]) if p.as_tuple(shape_v).map(<[Value]>::len) == Some(2) => (r, c),
            _ => return Err(expected(p, "a CSR shape of two non-negative ints", shape_v)),
        };

        let indptr = index_array(p, state, "indptr")?;
        let indices = index_array(p, state, "indices")?;
        let data_v = p
            .dict_get(state, b"data")
            .ok_or_else(|| DecodeError::Invalid("the CSR matrix has no 'data' entry".into()))?;
        let data = NdArray::from_pickle(p, data_v)?;
        if data.shape.len() != 1 {
            return Err(DecodeError::Invalid(format!(
                "the CSR 'data' must be a 1-D array, found shape {:?}",
                data.shape
            )));
        }
        let data = match data.data {
            ArrayData::Float(v) => v,
            ArrayData::Int(v) => v.into_iter().map(|x| x as f64).collect(),
        };
        Csr::new(rows, cols, indptr, indices, data)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Row pointers (`rows + 1` entries).
    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }

    /// Column index of each stored entry.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// Value of each stored entry.
    pub fn data(&self) -> &[f64] {
        &self.data
    }

    /// Column indices and values of row `r`, or `None` if `r` is out of range.
    pub fn row(&self, r: usize) -> Option<(&[usize], &[f64])> {
        if r >= self.rows {
            return None;
        }
        let (a, b) = (self.indptr[r], self.indptr[r + 1]);
        Some((&self.indices[a..b], &self.data[a..b]))
    }

    /// The dense row-major `rows * cols` matrix as `f32` (like `torch.from_numpy(m.todense())
    /// .to(torch.float)`); duplicate entries are summed, in `f32`, as SciPy does for `float32`
    /// data. Fails if the matrix has more than [`MAX_DENSE_ELEMENTS`] elements.
    pub fn to_dense_f32(&self) -> Result<Vec<f32>, DecodeError> {
        let n = self
            .rows
            .checked_mul(self.cols)
            .filter(|&n| n <= MAX_DENSE_ELEMENTS)
            .ok_or_else(|| {
                DecodeError::Invalid(format!(
                    "a {} x {} matrix is too large to make dense (limit {MAX_DENSE_ELEMENTS} \
                     elements)",
                    self.rows, self.cols
                ))
            })?;
        let mut out = vec![0f32; n];
        for r in 0..self.rows {
            let row = &mut out[r * self.cols..(r + 1) * self.cols];
            for k in self.indptr[r]..self.indptr[r + 1] {
                row[self.indices[k]] += self.data[k] as f32;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pickles::{csr_pickle, Array, CsrParts};

    fn read(parts: &CsrParts) -> Result<Csr, DecodeError> {
        let b = csr_pickle(parts);
        let p = Pickle::parse(&b).expect("test pickle parses");
        Csr::from_pickle(&p, p.root())
    }

    #[test]
    fn round_trip() {
        let dense = [0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0];
        let m = read(&CsrParts::from_dense(3, 4, &dense)).unwrap();
        assert_eq!((m.rows(), m.cols(), m.nnz()), (3, 4, 4));
        assert_eq!(m.to_dense_f32().unwrap(), dense.to_vec());
        assert_eq!(m.row(2).unwrap(), (&[0usize, 3][..], &[2.0, 3.0][..]));
        assert!(m.row(3).is_none());
    }

    #[test]
    fn duplicates_are_summed() {
        let m = read(&CsrParts::new(
            (1, 2),
            &[0, 3],
            &[1, 1, 0],
            &[1.0, 2.0, 4.0],
        ))
        .unwrap();
        assert_eq!(m.to_dense_f32().unwrap(), vec![4.0, 3.0]);
    }

    #[test]
    fn invalid_structures() {
        let cases = [
            CsrParts::new((2, 2), &[0, 1], &[0], &[1.0]), // indptr too short
            CsrParts::new((1, 2), &[1, 1], &[0], &[1.0]), // indptr does not start at 0
            CsrParts::new((2, 2), &[0, 2, 1], &[0, 1], &[1.0, 1.0]), // decreasing
            CsrParts::new((1, 2), &[0, 2], &[0], &[1.0]), // nnz mismatch
            CsrParts::new((1, 2), &[0, 1], &[2], &[1.0]), // column out of range
            CsrParts::new((1, 2), &[0, 1], &[-1], &[1.0]), // negative index
            CsrParts::new((-1, 2), &[0], &[], &[]),       // negative shape
        ];
        for (i, c) in cases.iter().enumerate() {
            let err = read(c).unwrap_err();
            assert!(
                matches!(err, DecodeError::Invalid(_) | DecodeError::Expected { .. }),
                "case {i}: {err:?}"
            );
        }
        // indices stored as floats
        let mut c = CsrParts::new((1, 2), &[0, 1], &[0], &[1.0]);
        c.indices = Array::f32(&[1], &[0.0]);
        assert!(matches!(read(&c), Err(DecodeError::Invalid(_))));
        // 2-D data
        let mut c = CsrParts::new((1, 2), &[0, 1], &[0], &[1.0]);
        c.data = Array::f32(&[1, 1], &[1.0]);
        assert!(matches!(read(&c), Err(DecodeError::Invalid(_))));
    }

    #[test]
    fn too_large_to_densify() {
        let m = Csr::new(1 << 20, 1 << 20, vec![0; (1 << 20) + 1], vec![], vec![]).unwrap();
        assert!(m.to_dense_f32().is_err());
        let m = Csr::new(usize::MAX - 1, 2, vec![0; 1], vec![], vec![]);
        assert!(m.is_err());
    }

    #[test]
    fn other_classes_are_rejected() {
        let p = Pickle::parse(b"\x80\x02cscipy.sparse.coo\ncoo_matrix\n)\x81}b.").unwrap();
        let err = Csr::from_pickle(&p, p.root()).unwrap_err();
        assert!(
            err.to_string().contains("scipy.sparse.coo.coo_matrix"),
            "{err}"
        );
    }
}
