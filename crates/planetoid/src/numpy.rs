//! Interprets a pickled numpy `ndarray` (as found in [`crate::pickle`]'s output) as a typed array.
//!
//! numpy pickles an array as
//!
//! ```text
//! _reconstruct(ndarray, (0,), b'b')            # REDUCE with numpy.core.multiarray._reconstruct
//!   BUILD (1, shape, dtype, is_fortran, rawdata)
//! dtype = dtype('i4', False, True)             # REDUCE with numpy.dtype
//!   BUILD (3, '<', None, None, None, -1, -1, 0)
//! ```
//!
//! [`NdArray::from_pickle`] checks exactly this structure (only the globals
//! `numpy.core.multiarray._reconstruct`, `numpy._core.multiarray._reconstruct`, `numpy.ndarray`
//! and `numpy.dtype` are accepted), the byte order, and that the raw data holds
//! `product(shape) * itemsize` bytes; it returns the values in C (row-major) order, integers and
//! booleans as `i64`, floats as `f64`.
//!
//! ```
//! use planetoid::numpy::{ArrayData, NdArray};
//! use planetoid::pickle::Pickle;
//!
//! // np.array([[1, 2], [3, 4]], dtype='<i4') pickled with protocol 2, written out by hand.
//! let mut b = Vec::new();
//! b.extend_from_slice(b"\x80\x02cnumpy.core.multiarray\n_reconstruct\nq\x01cnumpy\nndarray\n");
//! b.extend_from_slice(b"q\x02K\x00\x85U\x01b\x87Rq\x03(K\x01K\x02K\x02\x86cnumpy\ndtype\n");
//! b.extend_from_slice(b"q\x04U\x02i4K\x00K\x01\x87Rq\x05(K\x03U\x01<NNNJ\xff\xff\xff\xff");
//! b.extend_from_slice(b"J\xff\xff\xff\xffK\x00tb\x89U\x10");
//! for v in [1i32, 2, 3, 4] {
//!     b.extend_from_slice(&v.to_le_bytes());
//! }
//! b.extend_from_slice(b"tb.");
//!
//! let p = Pickle::parse(&b).unwrap();
//! let a = NdArray::from_pickle(&p, p.root()).unwrap();
//! assert_eq!(a.shape, vec![2, 2]);
//! assert_eq!(a.dtype.to_string(), "<i4");
//! assert_eq!(a.data, ArrayData::Int(vec![1, 2, 3, 4]));
//! ```

use std::fmt;

use crate::error::DecodeError;
use crate::pickle::{Pickle, Value};

/// The `_reconstruct` functions numpy pickles name (numpy 1.x and 2.x).
pub const RECONSTRUCT_GLOBALS: [(&str, &str); 2] = [
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
];

/// Most dimensions accepted (numpy's own limit is 64).
pub const MAX_NDIM: usize = 32;

/// The kind of a numpy dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DTypeKind {
    /// `b1`.
    Bool,
    /// `i1`, `i2`, `i4`, `i8`.
    Int,
    /// `u1`, `u2`, `u4`, `u8`.
    UInt,
    /// `f4`, `f8`.
    Float,
}

/// A supported numpy dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DType {
    /// Bool, signed, unsigned or float.
    pub kind: DTypeKind,
    /// Bytes per item.
    pub itemsize: usize,
    /// Byte order of the data (irrelevant, and `true`, for 1-byte types).
    pub little_endian: bool,
}

impl DType {
    /// Parses a type code such as `f8` or `<i4` (the order prefix is ignored here; the byte order
    /// is given by `endian`, one of `<`, `>`, `|` as in numpy's pickled dtype state).
    pub fn new(code: &str, endian: &str) -> Result<DType, DecodeError> {
        let unsupported = || DecodeError::UnsupportedDtype(format!("'{code}' (order '{endian}')"));
        let bare = code.trim_start_matches(['<', '>', '|', '=']);
        let (kind, itemsize) = match bare {
            "b1" => (DTypeKind::Bool, 1),
            "i1" => (DTypeKind::Int, 1),
            "i2" => (DTypeKind::Int, 2),
            "i4" => (DTypeKind::Int, 4),
            "i8" => (DTypeKind::Int, 8),
            "u1" => (DTypeKind::UInt, 1),
            "u2" => (DTypeKind::UInt, 2),
            "u4" => (DTypeKind::UInt, 4),
            "u8" => (DTypeKind::UInt, 8),
            "f4" => (DTypeKind::Float, 4),
            "f8" => (DTypeKind::Float, 8),
            _ => return Err(unsupported()),
        };
        let little_endian = match (endian, itemsize) {
            ("<", _) | ("|", 1) => true,
            (">", _) => itemsize == 1,
            _ => return Err(unsupported()),
        };
        Ok(DType {
            kind,
            itemsize,
            little_endian,
        })
    }
}

impl fmt::Display for DType {
    /// numpy's `dtype.str`, e.g. `<f4`, `|b1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order = if self.itemsize == 1 {
            '|'
        } else if self.little_endian {
            '<'
        } else {
            '>'
        };
        let kind = match self.kind {
            DTypeKind::Bool => 'b',
            DTypeKind::Int => 'i',
            DTypeKind::UInt => 'u',
            DTypeKind::Float => 'f',
        };
        write!(f, "{order}{kind}{}", self.itemsize)
    }
}

/// The values of an array in C order.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayData {
    /// Bool (0/1), signed and unsigned integer dtypes.
    Int(Vec<i64>),
    /// Float dtypes.
    Float(Vec<f64>),
}

/// A numpy array read from a pickle.
#[derive(Debug, Clone, PartialEq)]
pub struct NdArray {
    /// The shape; `product(shape)` is the number of values.
    pub shape: Vec<usize>,
    /// The dtype the array had in the pickle.
    pub dtype: DType,
    /// The values, in C (row-major) order even if the pickle was Fortran-ordered.
    pub data: ArrayData,
}

fn expected(p: &Pickle, what: &str, v: Value) -> DecodeError {
    DecodeError::Expected {
        expected: what.to_string(),
        found: p.describe(v),
    }
}

/// The `(module, name)` of `v`'s callable if `v` is a call of a global.
fn callee<'p>(p: &'p Pickle, v: Value, what: &str) -> Result<(&'p str, &'p str), DecodeError> {
    p.call_global(v).ok_or_else(|| expected(p, what, v))
}

fn unexpected_global(module: &str, name: &str, what: &str) -> DecodeError {
    DecodeError::UnexpectedGlobal {
        module: module.to_string(),
        name: name.to_string(),
        expected: what.to_string(),
    }
}

fn ascii<'p>(p: &'p Pickle, v: Value, what: &str) -> Result<&'p str, DecodeError> {
    p.as_string_bytes(v)
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or_else(|| expected(p, what, v))
}

/// Whether `v` is a call of numpy's `_reconstruct` (i.e. looks like a pickled array).
pub fn is_ndarray(p: &Pickle, v: Value) -> bool {
    p.call_global(v)
        .is_some_and(|g| RECONSTRUCT_GLOBALS.contains(&g))
}

/// Reads a pickled `numpy.dtype` (the call and its BUILD state).
pub fn dtype_from_pickle(p: &Pickle, v: Value) -> Result<DType, DecodeError> {
    const WHAT: &str = "a numpy dtype";
    let (module, name) = callee(p, v, WHAT)?;
    if !matches!(
        (module, name),
        ("numpy", "dtype")
            | ("numpy.core.multiarray", "dtype")
            | ("numpy._core.multiarray", "dtype")
    ) {
        return Err(unexpected_global(module, name, WHAT));
    }
    let call = p.as_call(v).expect("callee() checked it is a call");
    let args = p
        .as_tuple(call.args)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| expected(p, "the dtype arguments (code, align, copy)", call.args))?;
    let code = ascii(p, args[0], "a dtype code such as 'f4'")?;
    let state_v = call
        .state
        .ok_or_else(|| expected(p, "a dtype with BUILD state (version, byteorder, ...)", v))?;
    let state = p
        .as_tuple(state_v)
        .filter(|s| s.len() >= 8 && s.len() <= 9)
        .ok_or_else(|| expected(p, "the dtype state tuple of 8 or 9 items", state_v))?;
    match p.as_int(state[0]) {
        Some(3 | 4) => {}
        _ => return Err(expected(p, "dtype state version 3 or 4", state[0])),
    }
    let endian = ascii(p, state[1], "the dtype byte order '<', '>' or '|'")?;
    // subarray, names and fields must be None: structured dtypes are not supported.
    for (i, what) in [(2, "subarray"), (3, "field names"), (4, "fields")] {
        if state[i] != Value::None {
            return Err(DecodeError::UnsupportedDtype(format!(
                "'{code}' with {what} (structured dtypes are not supported)"
            )));
        }
    }
    DType::new(code, endian)
}

impl NdArray {
    /// Interprets `v` as a pickled numpy array; see the module documentation.
    pub fn from_pickle(p: &Pickle, v: Value) -> Result<NdArray, DecodeError> {
        const WHAT: &str = "a numpy array (a call of numpy.core.multiarray._reconstruct)";
        let (module, name) = callee(p, v, WHAT)?;
        if !RECONSTRUCT_GLOBALS.contains(&(module, name)) {
            return Err(unexpected_global(module, name, WHAT));
        }
        let call = p.as_call(v).expect("callee() checked it is a call");
        let args = p
            .as_tuple(call.args)
            .filter(|a| a.len() == 3)
            .ok_or_else(|| {
                expected(
                    p,
                    "the _reconstruct arguments (ndarray, (0,), 'b')",
                    call.args,
                )
            })?;
        match p.as_global(args[0]) {
            Some(("numpy", "ndarray")) => {}
            Some((m, n)) => return Err(unexpected_global(m, n, "the class numpy.ndarray")),
            None => return Err(expected(p, "the class numpy.ndarray", args[0])),
        }

        let state_v = call
            .state
            .ok_or_else(|| expected(p, "an array with BUILD state", v))?;
        let state = p
            .as_tuple(state_v)
            .ok_or_else(|| expected(p, "the array state tuple", state_v))?;
        let state = match state.len() {
            5 => {
                if p.as_int(state[0]) != Some(1) {
                    return Err(expected(p, "array state version 1", state[0]));
                }
                &state[1..]
            }
            4 => state,
            _ => {
                return Err(expected(
                    p,
                    "the array state tuple (version, shape, dtype, is_fortran, data)",
                    state_v,
                ))
            }
        };

        let shape_v = p
            .as_tuple(state[0])
            .ok_or_else(|| expected(p, "the array shape tuple", state[0]))?;
        if shape_v.len() > MAX_NDIM {
            return Err(DecodeError::Invalid(format!(
                "numpy array with {} dimensions (at most {MAX_NDIM} are supported)",
                shape_v.len()
            )));
        }
        let mut shape = Vec::with_capacity(shape_v.len());
        for &d in shape_v {
            let d = p
                .as_int(d)
                .and_then(|d| usize::try_from(d).ok())
                .ok_or_else(|| expected(p, "a non-negative array dimension", d))?;
            shape.push(d);
        }
        let dtype = dtype_from_pickle(p, state[1])?;
        let fortran = p
            .as_bool(state[2])
            .ok_or_else(|| expected(p, "the is_fortran flag", state[2]))?;
        let raw = p.as_bytes(state[3]).ok_or_else(|| {
            expected(
                p,
                "the array's raw data as bytes (object arrays are not supported)",
                state[3],
            )
        })?;

        let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let bytes = count.and_then(|c| c.checked_mul(dtype.itemsize));
        let (Some(count), Some(bytes)) = (count, bytes) else {
            return Err(DecodeError::Invalid(format!(
                "numpy array shape {shape:?} is too large"
            )));
        };
        if bytes != raw.len() {
            return Err(DecodeError::DataLength {
                shape,
                dtype: dtype.to_string(),
                expected: bytes,
                found: raw.len(),
            });
        }

        let mut data = decode(raw, dtype)?;
        if fortran && shape.len() > 1 && count > 0 {
            data = match data {
                ArrayData::Int(v) => ArrayData::Int(fortran_to_c(&v, &shape)),
                ArrayData::Float(v) => ArrayData::Float(fortran_to_c(&v, &shape)),
            };
        }
        Ok(NdArray { shape, dtype, data })
    }

    /// Number of values (`product(shape)`).
    pub fn len(&self) -> usize {
        match &self.data {
            ArrayData::Int(v) => v.len(),
            ArrayData::Float(v) => v.len(),
        }
    }

    /// Whether the array has no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values converted to `f32`, as `torch.from_numpy(a).to(torch.float)` does.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match &self.data {
            ArrayData::Int(v) => v.iter().map(|&x| x as f32).collect(),
            ArrayData::Float(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// `(rows, cols)` of a 2-D array, or an error naming `what`.
    pub fn shape_2d(&self) -> Result<(usize, usize), DecodeError> {
        match self.shape[..] {
            [r, c] => Ok((r, c)),
            _ => Err(DecodeError::Invalid(format!(
                "expected a 2-D array but found shape {:?}",
                self.shape
            ))),
        }
    }
}

fn decode(raw: &[u8], dtype: DType) -> Result<ArrayData, DecodeError> {
    let n = dtype.itemsize;
    let le = dtype.little_endian;
    let word = |c: &[u8]| -> [u8; 8] {
        // Widen an item to 8 little-endian bytes (sign extension is done by the caller).
        let mut a = [0u8; 8];
        if le {
            a[..n].copy_from_slice(c);
        } else {
            for (i, b) in c.iter().rev().enumerate() {
                a[i] = *b;
            }
        }
        a
    };
    Ok(match dtype.kind {
        DTypeKind::Bool => ArrayData::Int(raw.iter().map(|&b| i64::from(b != 0)).collect()),
        DTypeKind::Int => ArrayData::Int(
            raw.chunks_exact(n)
                .map(|c| {
                    let shift = 64 - 8 * n as u32;
                    (i64::from_le_bytes(word(c)) << shift) >> shift
                })
                .collect(),
        ),
        DTypeKind::UInt => {
            let mut out = Vec::with_capacity(raw.len() / n);
            for c in raw.chunks_exact(n) {
                let u = u64::from_le_bytes(word(c));
                let i = i64::try_from(u).map_err(|_| {
                    DecodeError::Invalid(format!("uint64 value {u} does not fit in int64"))
                })?;
                out.push(i);
            }
            ArrayData::Int(out)
        }
        DTypeKind::Float if n == 4 => ArrayData::Float(
            raw.chunks_exact(4)
                .map(|c| {
                    let w = word(c);
                    f64::from(f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                })
                .collect(),
        ),
        DTypeKind::Float => ArrayData::Float(
            raw.chunks_exact(8)
                .map(|c| f64::from_le_bytes(word(c)))
                .collect(),
        ),
    })
}

/// Reorders Fortran-ordered (column-major) values into C order.
fn fortran_to_c<T: Copy>(v: &[T], shape: &[usize]) -> Vec<T> {
    // Fortran strides: the first index varies fastest.
    let mut strides = vec![1usize; shape.len()];
    for i in 1..shape.len() {
        strides[i] = strides[i - 1] * shape[i - 1];
    }
    let mut idx = vec![0usize; shape.len()];
    let mut out = Vec::with_capacity(v.len());
    for _ in 0..v.len() {
        let off: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.push(v[off]);
        // Advance the C-order odometer: the last index varies fastest.
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pickles::{ndarray_pickle, Array};

    fn read(b: &[u8]) -> Result<NdArray, DecodeError> {
        let p = Pickle::parse(b).expect("test pickle parses");
        NdArray::from_pickle(&p, p.root())
    }

    #[test]
    fn dtypes() {
        let cases: Vec<(Array, ArrayData)> = vec![
            (
                Array::new(
                    "f8",
                    "<",
                    &[3],
                    [1.5f64, -2.0, 0.25]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                ),
                ArrayData::Float(vec![1.5, -2.0, 0.25]),
            ),
            (
                Array::new(
                    "f4",
                    ">",
                    &[2],
                    [1.5f32, -2.0]
                        .iter()
                        .flat_map(|v| v.to_be_bytes())
                        .collect(),
                ),
                ArrayData::Float(vec![1.5, -2.0]),
            ),
            (
                Array::new(
                    "i8",
                    "<",
                    &[2],
                    [-5i64, 1 << 40]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                ),
                ArrayData::Int(vec![-5, 1 << 40]),
            ),
            (
                Array::new(
                    "i2",
                    ">",
                    &[2],
                    [-5i16, 300].iter().flat_map(|v| v.to_be_bytes()).collect(),
                ),
                ArrayData::Int(vec![-5, 300]),
            ),
            (
                Array::new("u2", "<", &[1], 65535u16.to_le_bytes().to_vec()),
                ArrayData::Int(vec![65535]),
            ),
            (
                Array::new("b1", "|", &[3], vec![1, 0, 1]),
                ArrayData::Int(vec![1, 0, 1]),
            ),
            (
                Array::new("i4", "<", &[0, 3], vec![]),
                ArrayData::Int(vec![]),
            ),
        ];
        for (arr, want) in cases {
            let a = read(&ndarray_pickle(&arr)).unwrap();
            assert_eq!(a.data, want, "{}", arr.code);
            assert_eq!(a.shape, arr.shape);
        }
    }

    #[test]
    fn fortran_order_is_converted() {
        // [[1, 2, 3], [4, 5, 6]] stored column-major: 1 4 2 5 3 6
        let mut arr = Array::new(
            "i4",
            "<",
            &[2, 3],
            [1i32, 4, 2, 5, 3, 6]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        arr.fortran = true;
        let a = read(&ndarray_pickle(&arr)).unwrap();
        assert_eq!(a.data, ArrayData::Int(vec![1, 2, 3, 4, 5, 6]));
        assert_eq!(a.shape_2d().unwrap(), (2, 3));
    }

    #[test]
    fn wrong_byte_length() {
        let arr = Array::new("f4", "<", &[2, 2], vec![0; 12]);
        let err = read(&ndarray_pickle(&arr)).unwrap_err();
        assert_eq!(
            err,
            DecodeError::DataLength {
                shape: vec![2, 2],
                dtype: "<f4".into(),
                expected: 16,
                found: 12
            }
        );
        assert!(err.to_string().contains("needs 16 bytes"));
    }

    #[test]
    fn unsupported_dtypes_and_orders() {
        for (code, order) in [
            ("f2", "<"),
            ("c16", "<"),
            ("O", "|"),
            ("f4", "="),
            ("f4", "|"),
        ] {
            let arr = Array::new(code, order, &[0], vec![]);
            let err = read(&ndarray_pickle(&arr)).unwrap_err();
            assert!(
                matches!(err, DecodeError::UnsupportedDtype(_)),
                "{code}{order}: {err}"
            );
        }
    }

    #[test]
    fn not_an_array() {
        let p = Pickle::parse(b"\x80\x02cos\nsystem\nU\x02hi\x85R.").unwrap();
        let err = NdArray::from_pickle(&p, p.root()).unwrap_err();
        assert!(matches!(err, DecodeError::UnexpectedGlobal { ref module, .. } if module == "os"));
        assert!(err.to_string().contains("os.system"));
        let p = Pickle::parse(b"\x80\x02]q\x00.").unwrap();
        let err = NdArray::from_pickle(&p, p.root()).unwrap_err();
        assert!(matches!(err, DecodeError::Expected { .. }));
    }

    #[test]
    fn uint64_overflow() {
        let arr = Array::new("u8", "<", &[1], u64::MAX.to_le_bytes().to_vec());
        assert!(matches!(
            read(&ndarray_pickle(&arr)),
            Err(DecodeError::Invalid(_))
        ));
    }
}
