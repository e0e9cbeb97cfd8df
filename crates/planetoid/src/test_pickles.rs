//! Test helper: writes small protocol-2 pickles with the same opcodes numpy, SciPy and Python 2
//! used for the Planetoid files, so unit tests can build arrays, CSR matrices and graph dicts of
//! any shape (including wrong ones).

/// Appends opcodes to a buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer {
            buf: b"\x80\x02".to_vec(),
        }
    }
    pub fn op(&mut self, op: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(op);
        self
    }
    pub fn global(&mut self, module: &str, name: &str) -> &mut Self {
        self.buf.push(b'c');
        self.buf.extend_from_slice(module.as_bytes());
        self.buf.push(b'\n');
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(b'\n');
        self
    }
    pub fn int(&mut self, i: i64) -> &mut Self {
        if (0..256).contains(&i) {
            self.buf.extend_from_slice(&[b'K', i as u8]);
        } else if (0..65536).contains(&i) {
            self.buf.push(b'M');
            self.buf.extend_from_slice(&(i as u16).to_le_bytes());
        } else if i32::try_from(i).is_ok() {
            self.buf.push(b'J');
            self.buf.extend_from_slice(&(i as i32).to_le_bytes());
        } else {
            self.buf.extend_from_slice(&[0x8a, 8]);
            self.buf.extend_from_slice(&i.to_le_bytes());
        }
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        if b.len() < 256 {
            self.buf.extend_from_slice(&[b'U', b.len() as u8]);
        } else {
            self.buf.push(b'T');
            self.buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(b);
        self
    }
    pub fn stop(&mut self) -> Vec<u8> {
        self.buf.push(b'.');
        std::mem::take(&mut self.buf)
    }

    /// Writes a numpy array the way numpy 1.x does under protocol 2.
    pub fn ndarray(&mut self, a: &Array) -> &mut Self {
        self.global("numpy.core.multiarray", "_reconstruct")
            .global("numpy", "ndarray")
            .int(0)
            .op(b"\x85")
            .bytes(b"b")
            .op(b"\x87R(")
            .int(1)
            .op(b"(");
        for &d in &a.shape {
            self.int(d as i64);
        }
        self.op(b"t")
            .global("numpy", "dtype")
            .bytes(a.code.as_bytes())
            .int(0)
            .int(1)
            .op(b"\x87R(")
            .int(3)
            .bytes(a.order.as_bytes())
            .op(b"NNN")
            .int(-1)
            .int(-1)
            .int(0)
            .op(b"tb")
            .op(if a.fortran { b"\x88" } else { b"\x89" })
            .bytes(&a.raw)
            .op(b"tb")
    }
}

/// An array to write.
pub(crate) struct Array {
    pub code: String,
    pub order: String,
    pub shape: Vec<usize>,
    pub raw: Vec<u8>,
    pub fortran: bool,
}

impl Array {
    pub fn new(code: &str, order: &str, shape: &[usize], raw: Vec<u8>) -> Self {
        Array {
            code: code.into(),
            order: order.into(),
            shape: shape.to_vec(),
            raw,
            fortran: false,
        }
    }
    pub fn i32(shape: &[usize], values: &[i32]) -> Self {
        Array::new(
            "i4",
            "<",
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }
    pub fn f32(shape: &[usize], values: &[f32]) -> Self {
        Array::new(
            "f4",
            "<",
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }
}

pub(crate) fn ndarray_pickle(a: &Array) -> Vec<u8> {
    Writer::new().ndarray(a).stop()
}

/// A one-hot label matrix as an `i4` array (like `ind.*.y`).
pub(crate) fn one_hot_pickle(labels: &[usize], classes: usize) -> Vec<u8> {
    let mut v = vec![0i32; labels.len() * classes];
    for (i, &l) in labels.iter().enumerate() {
        v[i * classes + l] = 1;
    }
    ndarray_pickle(&Array::i32(&[labels.len(), classes], &v))
}

/// The parts of a CSR matrix pickle.
pub(crate) struct CsrParts {
    pub shape: (i64, i64),
    pub indptr: Array,
    pub indices: Array,
    pub data: Array,
}

impl CsrParts {
    pub fn new(shape: (i64, i64), indptr: &[i32], indices: &[i32], data: &[f32]) -> Self {
        CsrParts {
            shape,
            indptr: Array::i32(&[indptr.len()], indptr),
            indices: Array::i32(&[indices.len()], indices),
            data: Array::f32(&[data.len()], data),
        }
    }

    /// From a dense row-major matrix.
    pub fn from_dense(rows: usize, cols: usize, dense: &[f32]) -> Self {
        let mut indptr = vec![0i32];
        let mut indices = Vec::new();
        let mut data = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                let v = dense[r * cols + c];
                if v != 0.0 {
                    indices.push(c as i32);
                    data.push(v);
                }
            }
            indptr.push(indices.len() as i32);
        }
        CsrParts::new((rows as i64, cols as i64), &indptr, &indices, &data)
    }
}

/// A `scipy.sparse.csr.csr_matrix` pickled as SciPy 0.x/1.x did under Python 2.
pub(crate) fn csr_pickle(c: &CsrParts) -> Vec<u8> {
    let mut w = Writer::new();
    w.global("scipy.sparse.csr", "csr_matrix")
        .op(b")\x81}(")
        .bytes(b"format")
        .bytes(b"csr")
        .bytes(b"_shape")
        .int(c.shape.0)
        .int(c.shape.1)
        .op(b"\x86")
        .bytes(b"indptr")
        .ndarray(&c.indptr)
        .bytes(b"_cs_matrix__has_sorted_indices")
        .op(b"\x88")
        .bytes(b"indices")
        .ndarray(&c.indices)
        .bytes(b"maxprint")
        .int(50)
        .bytes(b"data")
        .ndarray(&c.data)
        .op(b"ub");
    w.stop()
}

/// A `collections.defaultdict(list)` of node → neighbours, as in `ind.*.graph`.
pub(crate) fn graph_pickle(entries: &[(i64, Vec<i64>)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.global("collections", "defaultdict")
        .global("__builtin__", "list")
        .op(b"\x85R(");
    for (k, vs) in entries {
        w.int(*k).op(b"](");
        for &v in vs {
            w.int(v);
        }
        w.op(b"e");
    }
    w.op(b"u");
    w.stop()
}
