//! A minimal, safe evaluator for Python pickles (protocols 0–2 plus a few later opcodes).
//!
//! Python's `pickle.load` imports modules and calls arbitrary functions named in the file, so
//! loading an untrusted pickle can run any code. This evaluator never imports or calls
//! anything: it replays the opcodes on a stack machine and builds a plain data graph instead.
//!
//! - `GLOBAL` / `STACK_GLOBAL` produce [`Object::Global`] (just the module and name),
//! - `REDUCE` / `NEWOBJ` produce [`Object::Call`] holding the callable and its arguments,
//! - `BUILD` stores its state in that call (`Call::state`), `APPEND(S)`/`SETITEM(S)` on a call
//!   record the items (this is how a `collections.defaultdict` is filled),
//! - `PERSID` / `BINPERSID` produce [`Object::PersistentId`]: the id a pickler's
//!   `persistent_id` wrote, for the caller to resolve. PyTorch's `torch.save` writes every tensor
//!   storage this way (`('storage', torch.FloatStorage, '0', 'cuda:0', 6)`): the bytes live
//!   outside the pickle, and the id says where and on which device they were saved.
//!
//! Interpreting such calls — for example as a numpy array — is left to [`crate::numpy`],
//! [`crate::scipy_sparse`] and [`crate::graph_dict`], which accept only the few globals they know
//! (and to the `workbook` crate's PyTorch checkpoint reader, `workbook::torch_file`, which does
//! the same for `torch.save` files). This is the project's one pickle reader.
//!
//! Objects live in an arena ([`Pickle::object`]) and values refer to them by [`ObjId`], so an
//! object stored in the memo and later mutated (a list filled by `APPENDS` after `BINPUT`, a
//! dtype completed by `BUILD` after being memoised) is seen mutated everywhere, as in Python.
//!
//! Python 2 `str` values (`SHORT_BINSTRING`, `BINSTRING`) are kept as raw bytes
//! ([`Object::Bytes`]); PyTorch Geometric reads them with `encoding='latin1'`, i.e. byte for byte.
//!
//! Every opcode the original Planetoid files and PyTorch's `torch.save` use is supported, plus
//! close relatives (the text forms of ints/floats/memo, the protocol 3–4
//! bytes/unicode/memo/frame opcodes). Anything else (`INST`, `OBJ`, extension registry, sets,
//! out-of-band buffers, …) is rejected with an error naming the opcode and its offset. Sizes are
//! bounded by [`Limits`]. [`Pickle::parse_prefix`] reads one pickle from the front of a longer
//! input (PyTorch's legacy format is several pickles and raw bytes, one after the other).
//!
//! ```
//! use planetoid::pickle::{Object, Pickle, Value};
//! // pickle.dumps([1, 2], protocol=2)
//! let p = Pickle::parse(b"\x80\x02]q\x00(K\x01K\x02e.").unwrap();
//! assert_eq!(p.as_list(p.root()).unwrap(), &[Value::Int(1), Value::Int(2)]);
//!
//! // Python 2's pickle.dumps(('ab', None, True), 2): a Python 2 str stays raw bytes.
//! let p = Pickle::parse(b"\x80\x02U\x02abN\x88\x87q\x00.").unwrap();
//! let items = p.as_tuple(p.root()).unwrap();
//! assert_eq!(p.as_bytes(items[0]), Some(&b"ab"[..]));
//! assert_eq!(&items[1..], &[Value::None, Value::Bool(true)]);
//!
//! // A GLOBAL is only recorded, never imported: `os.system('echo hi')` is inert data here.
//! let p = Pickle::parse(b"\x80\x02cos\nsystem\nU\x07echo hi\x85R.").unwrap();
//! let call = p.as_call(p.root()).unwrap();
//! assert_eq!(p.as_global(call.callable), Some(("os", "system")));
//! assert!(matches!(p.object_of(call.args), Some(Object::Tuple(_))));
//!
//! // A persistent id is recorded for the caller, never looked up: (protocol 2) BINPERSID
//! let p = Pickle::parse(b"\x80\x02X\x01\x00\x00\x000\x85Q.").unwrap();
//! let Some(Object::PersistentId(id)) = p.object_of(p.root()) else { panic!() };
//! assert_eq!(p.as_tuple(*id).map(|t| t.len()), Some(1));
//! ```

use std::collections::HashMap;

use crate::error::PickleError;

/// Safety limits of the evaluator. The defaults are far above what the Planetoid files need
/// (Cora's largest file is 257 KiB with ~2,700 memo entries) and keep memory use bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted input, in bytes (default 256 MiB).
    pub max_input_bytes: usize,
    /// Most memo entries (default 4 Mi). Indices may be sparse; only entries count.
    pub max_memo_entries: usize,
    /// Most values on the stack at once (default 1 Mi).
    pub max_stack_len: usize,
    /// Most MARKs open at once (default 1,024).
    pub max_marks: usize,
    /// Deepest nesting of containers, measured when a container is built or filled
    /// (default 256).
    pub max_depth: usize,
    /// Most items in one container (default 16 Mi).
    pub max_container_len: usize,
    /// Most objects (strings, containers, globals, calls) in one pickle (default 4 Mi).
    pub max_objects: usize,
    /// Most items in all containers together (default 32 Mi).
    pub max_total_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_input_bytes: 256 << 20,
            max_memo_entries: 4 << 20,
            max_stack_len: 1 << 20,
            max_marks: 1024,
            max_depth: 256,
            max_container_len: 16 << 20,
            max_objects: 4 << 20,
            max_total_items: 32 << 20,
        }
    }
}

/// Index of an object in a [`Pickle`]'s arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjId(usize);

impl ObjId {
    /// The position in the arena.
    pub fn index(self) -> usize {
        self.0
    }
}

/// A value: an immutable scalar, or a reference to an object in the arena.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// Python `None`.
    None,
    /// Python `bool`.
    Bool(bool),
    /// Python `int` (or Python 2 `long`) that fits in 64 bits; larger ones are rejected.
    Int(i64),
    /// Python `float`.
    Float(f64),
    /// Any other object.
    Ref(ObjId),
}

/// How a [`Call`] was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `REDUCE`: `callable(*args)`.
    Reduce,
    /// `NEWOBJ`: `cls.__new__(cls, *args)`.
    NewObj,
}

/// A call that Python would have made (never made here), with what was later done to its result.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The callable (usually a [`Value::Ref`] to an [`Object::Global`]).
    pub callable: Value,
    /// The argument tuple (a [`Value::Ref`] to an [`Object::Tuple`]).
    pub args: Value,
    /// `REDUCE` or `NEWOBJ`.
    pub kind: CallKind,
    /// The state given by `BUILD` (`__setstate__`), if any.
    pub state: Option<Value>,
    /// Items added by `APPEND`/`APPENDS` on the result.
    pub list_items: Vec<Value>,
    /// Items added by `SETITEM`/`SETITEMS` on the result, in order, duplicates kept.
    pub dict_items: Vec<(Value, Value)>,
}

/// An object in the arena.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    /// Python 2 `str` / Python 3 `bytes`: raw bytes.
    Bytes(Vec<u8>),
    /// Python `unicode` / Python 3 `str`.
    Str(String),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A list.
    List(Vec<Value>),
    /// A dict: items in the order they were set, duplicate keys kept (consumers apply Python's
    /// "last value wins" rule; only they know how to compare keys).
    Dict(Vec<(Value, Value)>),
    /// A reference to a module attribute, e.g. `numpy.dtype`. Never imported.
    Global {
        /// The module, e.g. `numpy.core.multiarray`.
        module: String,
        /// The attribute, e.g. `_reconstruct`.
        name: String,
    },
    /// The result of a `REDUCE`/`NEWOBJ`, never actually called.
    Call(Call),
    /// `PERSID`/`BINPERSID`: an object the pickler stored outside the pickle, named by this id
    /// (a string for `PERSID`, any value for `BINPERSID`). Never resolved here.
    PersistentId(Value),
}

/// The result of evaluating a pickle: an arena of objects and the root value.
#[derive(Debug, Clone, PartialEq)]
pub struct Pickle {
    objects: Vec<Object>,
    root: Value,
}

impl Pickle {
    /// Evaluates `data` with the default [`Limits`].
    pub fn parse(data: &[u8]) -> Result<Pickle, PickleError> {
        Pickle::parse_with_limits(data, &Limits::default())
    }

    /// Evaluates `data` with the given limits.
    pub fn parse_with_limits(data: &[u8], limits: &Limits) -> Result<Pickle, PickleError> {
        if data.len() > limits.max_input_bytes {
            return Err(PickleError::TooLarge {
                size: data.len(),
                limit: limits.max_input_bytes,
            });
        }
        Machine::new(data, limits).run().map(|(pickle, _)| pickle)
    }

    /// Evaluates the pickle at the front of `data` and returns it with the number of bytes it
    /// took (up to and including its `STOP`); what follows is left to the caller. With
    /// [`Pickle::parse_with_limits`], bytes after `STOP` are an error.
    ///
    /// ```
    /// use planetoid::pickle::{Limits, Pickle, Value};
    /// let (p, used) = Pickle::parse_prefix(b"K\x07.raw bytes", &Limits::default()).unwrap();
    /// assert_eq!((p.root(), used), (Value::Int(7), 3));
    /// ```
    pub fn parse_prefix(data: &[u8], limits: &Limits) -> Result<(Pickle, usize), PickleError> {
        if data.len() > limits.max_input_bytes {
            return Err(PickleError::TooLarge {
                size: data.len(),
                limit: limits.max_input_bytes,
            });
        }
        let mut machine = Machine::new(data, limits);
        machine.trailing_allowed = true;
        machine.run()
    }

    /// The value the pickle evaluates to.
    pub fn root(&self) -> Value {
        self.root
    }

    /// Every object in the arena, in creation order (to check, say, every global a pickle
    /// names before interpreting any of it).
    pub fn objects(&self) -> &[Object] {
        &self.objects
    }

    /// Number of objects in the arena.
    pub fn num_objects(&self) -> usize {
        self.objects.len()
    }

    /// The object with this id. Ids come from this pickle's values, so this cannot fail for
    /// them; an id from another pickle may panic or return an unrelated object.
    pub fn object(&self, id: ObjId) -> &Object {
        &self.objects[id.0]
    }

    /// The object a value refers to, or `None` for scalars (and foreign ids).
    pub fn object_of(&self, v: Value) -> Option<&Object> {
        match v {
            Value::Ref(id) => self.objects.get(id.0),
            _ => None,
        }
    }

    /// The integer in `v` (bools count as 0/1, as in Python).
    pub fn as_int(&self, v: Value) -> Option<i64> {
        match v {
            Value::Int(i) => Some(i),
            Value::Bool(b) => Some(i64::from(b)),
            _ => None,
        }
    }

    /// The bool in `v`: `True`/`False`, or the ints 0/1.
    pub fn as_bool(&self, v: Value) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(b),
            Value::Int(0) => Some(false),
            Value::Int(1) => Some(true),
            _ => None,
        }
    }

    /// The raw bytes of a Python 2 `str` / Python 3 `bytes`.
    pub fn as_bytes(&self, v: Value) -> Option<&[u8]> {
        match self.object_of(v)? {
            Object::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The text of a Python 3 `str` (`unicode` in Python 2).
    pub fn as_str(&self, v: Value) -> Option<&str> {
        match self.object_of(v)? {
            Object::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes of any string: `Bytes` as they are, `Str` as UTF-8. Handy to compare with
    /// ASCII names such as `b"_shape"` whichever Python wrote the pickle.
    pub fn as_string_bytes(&self, v: Value) -> Option<&[u8]> {
        match self.object_of(v)? {
            Object::Bytes(b) => Some(b),
            Object::Str(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// The items of a tuple.
    pub fn as_tuple(&self, v: Value) -> Option<&[Value]> {
        match self.object_of(v)? {
            Object::Tuple(t) => Some(t),
            _ => None,
        }
    }

    /// The items of a list.
    pub fn as_list(&self, v: Value) -> Option<&[Value]> {
        match self.object_of(v)? {
            Object::List(l) => Some(l),
            _ => None,
        }
    }

    /// The items of a dict (in insertion order, duplicates kept).
    pub fn as_dict(&self, v: Value) -> Option<&[(Value, Value)]> {
        match self.object_of(v)? {
            Object::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// `(module, name)` of a global.
    pub fn as_global(&self, v: Value) -> Option<(&str, &str)> {
        match self.object_of(v)? {
            Object::Global { module, name } => Some((module, name)),
            _ => None,
        }
    }

    /// The call record of a `REDUCE`/`NEWOBJ` result.
    pub fn as_call(&self, v: Value) -> Option<&Call> {
        match self.object_of(v)? {
            Object::Call(c) => Some(c),
            _ => None,
        }
    }

    /// `(module, name)` of the callable of a call, if it is a global.
    pub fn call_global(&self, v: Value) -> Option<(&str, &str)> {
        self.as_global(self.as_call(v)?.callable)
    }

    /// In a dict (or dict-like call such as a `defaultdict`), the value of the *last* item whose
    /// key is a string equal to `key`.
    pub fn dict_get(&self, dict: Value, key: &[u8]) -> Option<Value> {
        let items = match self.object_of(dict)? {
            Object::Dict(d) => d.as_slice(),
            Object::Call(c) => c.dict_items.as_slice(),
            _ => return None,
        };
        items
            .iter()
            .rev()
            .find(|(k, _)| self.as_string_bytes(*k) == Some(key))
            .map(|(_, v)| *v)
    }

    /// A short, non-recursive description of a value for error messages, e.g. `int 5`,
    /// `bytes of length 12`, `tuple of 3 items`, `global os.system`, `call of numpy.dtype`.
    pub fn describe(&self, v: Value) -> String {
        describe_value(&self.objects, v)
    }
}

fn describe_value(objects: &[Object], v: Value) -> String {
    match v {
        Value::None => "None".into(),
        Value::Bool(b) => format!("bool {}", if b { "True" } else { "False" }),
        Value::Int(i) => format!("int {i}"),
        Value::Float(f) => format!("float {f}"),
        Value::Ref(id) => match objects.get(id.0) {
            None => "an invalid object reference".into(),
            Some(Object::Bytes(b)) => format!("bytes of length {}", b.len()),
            Some(Object::Str(s)) => format!("str of length {}", s.chars().count()),
            Some(Object::Tuple(t)) => format!("tuple of {} items", t.len()),
            Some(Object::List(l)) => format!("list of {} items", l.len()),
            Some(Object::Dict(d)) => format!("dict of {} items", d.len()),
            Some(Object::Global { module, name }) => format!("global {module}.{name}"),
            Some(Object::Call(c)) => match c.callable {
                Value::Ref(g) => match objects.get(g.0) {
                    Some(Object::Global { module, name }) => format!("call of {module}.{name}"),
                    _ => "call of a non-global callable".into(),
                },
                _ => "call of a non-global callable".into(),
            },
            Some(Object::PersistentId(_)) => "persistent id".into(),
        },
    }
}

/// The pickletools name of an opcode byte, or `None` if the byte is not an opcode.
pub fn opcode_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'(' => "MARK",
        b'.' => "STOP",
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'I' => "INT",
        b'J' => "BININT",
        b'K' => "BININT1",
        b'L' => "LONG",
        b'M' => "BININT2",
        b'N' => "NONE",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        b'R' => "REDUCE",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        b'X' => "BINUNICODE",
        b'a' => "APPEND",
        b'b' => "BUILD",
        b'c' => "GLOBAL",
        b'd' => "DICT",
        b'}' => "EMPTY_DICT",
        b'e' => "APPENDS",
        b'g' => "GET",
        b'h' => "BINGET",
        b'i' => "INST",
        b'j' => "LONG_BINGET",
        b'l' => "LIST",
        b']' => "EMPTY_LIST",
        b'o' => "OBJ",
        b'p' => "PUT",
        b'q' => "BINPUT",
        b'r' => "LONG_BINPUT",
        b's' => "SETITEM",
        b't' => "TUPLE",
        b')' => "EMPTY_TUPLE",
        b'u' => "SETITEMS",
        b'G' => "BINFLOAT",
        0x80 => "PROTO",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

/// Longest text line accepted by the text opcodes (GLOBAL, INT, FLOAT, PUT, …).
const MAX_LINE: usize = 4096;

struct Machine<'a> {
    data: &'a [u8],
    pos: usize,
    /// Offset and name of the opcode being executed, for errors.
    op_offset: usize,
    op_name: &'static str,
    limits: &'a Limits,
    objects: Vec<Object>,
    /// Nesting depth of each object (0 for leaves), measured when it is built or filled.
    depths: Vec<u32>,
    stack: Vec<Value>,
    /// Stack lengths at each open MARK.
    marks: Vec<usize>,
    memo: HashMap<u64, Value>,
    total_items: usize,
    /// Whether bytes may follow `STOP` ([`Pickle::parse_prefix`]).
    trailing_allowed: bool,
}

type R<T> = Result<T, PickleError>;

impl<'a> Machine<'a> {
    fn new(data: &'a [u8], limits: &'a Limits) -> Self {
        Machine {
            data,
            pos: 0,
            op_offset: 0,
            op_name: "",
            limits,
            objects: Vec::new(),
            depths: Vec::new(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            total_items: 0,
            trailing_allowed: false,
        }
    }

    // ----- errors -------------------------------------------------------------------------

    fn truncated(&self) -> PickleError {
        PickleError::Truncated {
            offset: self.op_offset,
            len: self.data.len(),
        }
    }

    fn bad_arg(&self, reason: impl Into<String>) -> PickleError {
        PickleError::BadArgument {
            name: self.op_name,
            offset: self.op_offset,
            reason: reason.into(),
        }
    }

    fn limit(&self, what: &'static str, limit: usize) -> PickleError {
        PickleError::LimitExceeded {
            what,
            limit,
            offset: self.op_offset,
        }
    }

    fn underflow(&self) -> PickleError {
        PickleError::StackUnderflow {
            name: self.op_name,
            offset: self.op_offset,
        }
    }

    fn wrong_type(&self, expected: &'static str, found: Value) -> PickleError {
        PickleError::WrongType {
            name: self.op_name,
            offset: self.op_offset,
            expected,
            found: describe_value(&self.objects, found),
        }
    }

    // ----- input ----------------------------------------------------------------------------

    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        if end > self.data.len() {
            return Err(self.truncated());
        }
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> R<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> R<i32> {
        let b = self.take(4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u32(&mut self) -> R<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> R<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A text line without its `\n`.
    fn line(&mut self) -> R<&'a str> {
        let rest = &self.data[self.pos..];
        let window = &rest[..rest.len().min(MAX_LINE + 1)];
        let Some(n) = window.iter().position(|&b| b == b'\n') else {
            if window.len() > MAX_LINE {
                return Err(self.bad_arg(format!("text line longer than {MAX_LINE} bytes")));
            }
            return Err(self.truncated());
        };
        let line = &rest[..n];
        self.pos += n + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        std::str::from_utf8(line).map_err(|_| self.bad_arg("text line is not valid UTF-8"))
    }

    fn length(&mut self, n: u64) -> R<usize> {
        // Checking against the remaining input first means a corrupt length can never make
        // us allocate more than the file holds.
        let remaining = (self.data.len() - self.pos) as u64;
        if n > remaining {
            return Err(self.truncated());
        }
        Ok(n as usize)
    }

    // ----- stack, objects, memo -------------------------------------------------------------

    fn fence(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn push(&mut self, v: Value) -> R<()> {
        if self.stack.len() >= self.limits.max_stack_len {
            return Err(self.limit("stack length", self.limits.max_stack_len));
        }
        self.stack.push(v);
        Ok(())
    }

    fn pop(&mut self) -> R<Value> {
        if self.stack.len() <= self.fence() {
            return Err(self.underflow());
        }
        Ok(self.stack.pop().expect("length checked above"))
    }

    fn top(&self) -> R<Value> {
        if self.stack.len() <= self.fence() {
            return Err(self.underflow());
        }
        Ok(self.stack[self.stack.len() - 1])
    }

    /// Pops everything above the last MARK, and the MARK.
    fn pop_mark(&mut self) -> R<Vec<Value>> {
        let Some(mark) = self.marks.pop() else {
            return Err(PickleError::MissingMark {
                name: self.op_name,
                offset: self.op_offset,
            });
        };
        Ok(self.stack.split_off(mark))
    }

    fn depth_of(&self, v: Value) -> u32 {
        match v {
            Value::Ref(id) => self.depths[id.0],
            _ => 0,
        }
    }

    fn check_depth(&self, d: u32) -> R<()> {
        if d as usize > self.limits.max_depth {
            return Err(self.limit("nesting depth", self.limits.max_depth));
        }
        Ok(())
    }

    fn count_items(&mut self, added: usize, new_len: usize) -> R<()> {
        if new_len > self.limits.max_container_len {
            return Err(self.limit("container length", self.limits.max_container_len));
        }
        self.total_items = self.total_items.saturating_add(added);
        if self.total_items > self.limits.max_total_items {
            return Err(self.limit("total container items", self.limits.max_total_items));
        }
        Ok(())
    }

    fn alloc(&mut self, obj: Object, depth: u32) -> R<Value> {
        if self.objects.len() >= self.limits.max_objects {
            return Err(self.limit("number of objects", self.limits.max_objects));
        }
        self.check_depth(depth)?;
        self.objects.push(obj);
        self.depths.push(depth);
        Ok(Value::Ref(ObjId(self.objects.len() - 1)))
    }

    fn push_new(&mut self, obj: Object, depth: u32) -> R<()> {
        let v = self.alloc(obj, depth)?;
        self.push(v)
    }

    fn push_tuple(&mut self, items: Vec<Value>) -> R<()> {
        self.count_items(items.len(), items.len())?;
        let depth = items
            .iter()
            .map(|&v| self.depth_of(v))
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        self.push_new(Object::Tuple(items), depth)
    }

    fn memo_put(&mut self, index: u64) -> R<()> {
        let v = self.top()?;
        if self.memo.len() >= self.limits.max_memo_entries && !self.memo.contains_key(&index) {
            return Err(self.limit("memo entries", self.limits.max_memo_entries));
        }
        self.memo.insert(index, v);
        Ok(())
    }

    fn memo_get(&mut self, index: u64) -> R<()> {
        let v = self
            .memo
            .get(&index)
            .copied()
            .ok_or(PickleError::BadMemoIndex {
                name: self.op_name,
                index,
                offset: self.op_offset,
            })?;
        self.push(v)
    }

    /// Adds `items` to the list (or call) `target`.
    fn extend_list(&mut self, target: Value, items: Vec<Value>) -> R<()> {
        let added = items.len();
        let item_depth = items.iter().map(|&v| self.depth_of(v)).max().unwrap_or(0);
        let Value::Ref(id) = target else {
            return Err(self.wrong_type("a list", target));
        };
        let new_len = match &self.objects[id.0] {
            Object::List(l) => l.len() + added,
            Object::Call(c) => c.list_items.len() + added,
            _ => return Err(self.wrong_type("a list", target)),
        };
        self.count_items(added, new_len)?;
        let depth = self.depths[id.0].max(item_depth.saturating_add(1));
        self.check_depth(depth)?;
        self.depths[id.0] = depth;
        match &mut self.objects[id.0] {
            Object::List(l) => l.extend(items),
            Object::Call(c) => c.list_items.extend(items),
            _ => unreachable!("checked above"),
        }
        Ok(())
    }

    /// Adds key/value pairs to the dict (or call) `target`.
    fn extend_dict(&mut self, target: Value, flat: Vec<Value>) -> R<()> {
        if flat.len() % 2 != 0 {
            return Err(self.bad_arg("odd number of items for key/value pairs"));
        }
        let added = flat.len() / 2;
        let item_depth = flat.iter().map(|&v| self.depth_of(v)).max().unwrap_or(0);
        let Value::Ref(id) = target else {
            return Err(self.wrong_type("a dict", target));
        };
        let new_len = match &self.objects[id.0] {
            Object::Dict(d) => d.len() + added,
            Object::Call(c) => c.dict_items.len() + added,
            _ => return Err(self.wrong_type("a dict", target)),
        };
        self.count_items(added, new_len)?;
        let depth = self.depths[id.0].max(item_depth.saturating_add(1));
        self.check_depth(depth)?;
        self.depths[id.0] = depth;
        let pairs = flat.chunks_exact(2).map(|kv| (kv[0], kv[1]));
        match &mut self.objects[id.0] {
            Object::Dict(d) => d.extend(pairs),
            Object::Call(c) => c.dict_items.extend(pairs),
            _ => unreachable!("checked above"),
        }
        Ok(())
    }

    fn int_from_le(&self, bytes: &[u8]) -> R<i64> {
        // Two's-complement little-endian (LONG1/LONG4); at most 8 bytes fit in i64.
        if bytes.is_empty() {
            return Ok(0);
        }
        if bytes.len() > 8 {
            // A longer encoding may still be a small number padded with sign bytes.
            let sign = if bytes[bytes.len() - 1] & 0x80 != 0 {
                0xff
            } else {
                0
            };
            if bytes[8..].iter().any(|&b| b != sign) || (bytes[7] & 0x80 != 0) != (sign == 0xff) {
                return Err(self.bad_arg("integer does not fit in 64 bits"));
            }
            return self.int_from_le(&bytes[..8]);
        }
        let sign = if bytes[bytes.len() - 1] & 0x80 != 0 {
            0xff
        } else {
            0
        };
        let mut a = [sign; 8];
        a[..bytes.len()].copy_from_slice(bytes);
        Ok(i64::from_le_bytes(a))
    }

    fn parse_text_int(&self, s: &str) -> R<Value> {
        let t = s.trim();
        match t {
            "00" if self.op_name == "INT" => return Ok(Value::Bool(false)),
            "01" if self.op_name == "INT" => return Ok(Value::Bool(true)),
            _ => {}
        }
        let t = t.strip_suffix('L').unwrap_or(t);
        t.parse::<i64>()
            .map(Value::Int)
            .map_err(|_| self.bad_arg(format!("{s:?} is not an integer that fits in 64 bits")))
    }

    fn new_string(&mut self, bytes: &[u8], unicode: bool) -> R<()> {
        let obj = if unicode {
            let s = std::str::from_utf8(bytes)
                .map_err(|_| self.bad_arg("string is not valid UTF-8"))?;
            Object::Str(s.to_owned())
        } else {
            Object::Bytes(bytes.to_vec())
        };
        self.push_new(obj, 0)
    }

    // ----- the loop ---------------------------------------------------------------------------

    fn run(mut self) -> R<(Pickle, usize)> {
        loop {
            self.op_offset = self.pos;
            self.op_name = "";
            let op = self.u8()?;
            let Some(name) = opcode_name(op) else {
                return Err(PickleError::UnknownOpcode {
                    opcode: op,
                    offset: self.op_offset,
                });
            };
            self.op_name = name;
            match op {
                0x80 => {
                    let proto = self.u8()?;
                    if proto > 5 {
                        return Err(self.bad_arg(format!("unsupported protocol {proto}")));
                    }
                }
                0x95 => {
                    // FRAME: only a read-ahead hint; the opcodes inside are read as usual.
                    self.u64()?;
                }
                b'.' => return self.stop(),

                // --- scalars
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'J' => {
                    let i = self.i32()?;
                    self.push(Value::Int(i64::from(i)))?
                }
                b'K' => {
                    let i = self.u8()?;
                    self.push(Value::Int(i64::from(i)))?
                }
                b'M' => {
                    let i = self.u16()?;
                    self.push(Value::Int(i64::from(i)))?
                }
                0x8a => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    let i = self.int_from_le(b)?;
                    self.push(Value::Int(i))?
                }
                0x8b => {
                    let n = self.i32()?;
                    if n < 0 {
                        return Err(self.bad_arg(format!("negative byte count {n}")));
                    }
                    let n = self.length(n as u64)?;
                    let b = self.take(n)?;
                    let i = self.int_from_le(b)?;
                    self.push(Value::Int(i))?
                }
                b'I' | b'L' => {
                    let line = self.line()?;
                    let v = self.parse_text_int(line)?;
                    self.push(v)?
                }
                b'G' => {
                    let b = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    self.push(Value::Float(f64::from_be_bytes(a)))?
                }
                b'F' => {
                    let line = self.line()?;
                    let f = line
                        .trim()
                        .parse::<f64>()
                        .map_err(|_| self.bad_arg(format!("{line:?} is not a float")))?;
                    self.push(Value::Float(f))?
                }

                // --- strings
                b'U' | b'C' | 0x8c => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    self.new_string(b, op == 0x8c)?
                }
                b'T' => {
                    let n = self.i32()?;
                    if n < 0 {
                        return Err(self.bad_arg(format!("negative string length {n}")));
                    }
                    let n = self.length(n as u64)?;
                    let b = self.take(n)?;
                    self.new_string(b, false)?
                }
                b'B' | b'X' => {
                    let n = self.u32()?;
                    let n = self.length(u64::from(n))?;
                    let b = self.take(n)?;
                    self.new_string(b, op == b'X')?
                }
                0x8e | 0x8d => {
                    let n = self.u64()?;
                    let n = self.length(n)?;
                    let b = self.take(n)?;
                    self.new_string(b, op == 0x8d)?
                }

                // --- tuples
                b')' => self.push_tuple(Vec::new())?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.push_tuple(items)?
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < self.fence() + n {
                        return Err(self.underflow());
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push_tuple(items)?
                }

                // --- lists
                b']' => self.push_new(Object::List(Vec::new()), 1)?,
                b'l' => {
                    let items = self.pop_mark()?;
                    self.count_items(items.len(), items.len())?;
                    let d = items
                        .iter()
                        .map(|&v| self.depth_of(v))
                        .max()
                        .unwrap_or(0)
                        .saturating_add(1);
                    self.push_new(Object::List(items), d)?
                }
                b'a' => {
                    let item = self.pop()?;
                    let list = self.top()?;
                    self.extend_list(list, vec![item])?
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    let list = self.top()?;
                    self.extend_list(list, items)?
                }

                // --- dicts
                b'}' => self.push_new(Object::Dict(Vec::new()), 1)?,
                b'd' => {
                    let flat = self.pop_mark()?;
                    let dict = self.alloc(Object::Dict(Vec::new()), 1)?;
                    self.extend_dict(dict, flat)?;
                    self.push(dict)?
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let dict = self.top()?;
                    self.extend_dict(dict, vec![k, v])?
                }
                b'u' => {
                    let flat = self.pop_mark()?;
                    let dict = self.top()?;
                    self.extend_dict(dict, flat)?
                }

                // --- stack manipulation
                b'(' => {
                    if self.marks.len() >= self.limits.max_marks {
                        return Err(self.limit("open MARKs", self.limits.max_marks));
                    }
                    self.marks.push(self.stack.len())
                }
                b'0' => {
                    // As CPython: pops a MARK if one sits on top of the stack, else a value.
                    if self.marks.last() == Some(&self.stack.len()) {
                        self.marks.pop();
                    } else {
                        self.pop()?;
                    }
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?;
                    self.push(v)?
                }

                // --- memo
                b'q' => {
                    let i = self.u8()?;
                    self.memo_put(u64::from(i))?
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(u64::from(i))?
                }
                b'p' => {
                    let line = self.line()?;
                    let i = line
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| self.bad_arg(format!("{line:?} is not a memo index")))?;
                    self.memo_put(i)?
                }
                0x94 => {
                    let i = self.memo.len() as u64;
                    self.memo_put(i)?
                }
                b'h' => {
                    let i = self.u8()?;
                    self.memo_get(u64::from(i))?
                }
                b'j' => {
                    let i = self.u32()?;
                    self.memo_get(u64::from(i))?
                }
                b'g' => {
                    let line = self.line()?;
                    let i = line
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| self.bad_arg(format!("{line:?} is not a memo index")))?;
                    self.memo_get(i)?
                }

                // --- globals and calls (recorded, never performed)
                b'c' => {
                    let module = self.line()?.to_owned();
                    let name = self.line()?.to_owned();
                    self.push_new(Object::Global { module, name }, 0)?
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let get = |m: &Self, v: Value| match v {
                        Value::Ref(id) => match &m.objects[id.0] {
                            Object::Str(s) => Some(s.clone()),
                            _ => None,
                        },
                        _ => None,
                    };
                    let (Some(module), Some(name)) = (get(&self, module), get(&self, name)) else {
                        return Err(self.wrong_type("two str values", module));
                    };
                    self.push_new(Object::Global { module, name }, 0)?
                }
                b'R' | 0x81 => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    if !matches!(self.objects_of(args), Some(Object::Tuple(_))) {
                        return Err(self.wrong_type("an argument tuple", args));
                    }
                    let depth = self
                        .depth_of(args)
                        .max(self.depth_of(callable))
                        .saturating_add(1);
                    let call = Call {
                        callable,
                        args,
                        kind: if op == b'R' {
                            CallKind::Reduce
                        } else {
                            CallKind::NewObj
                        },
                        state: None,
                        list_items: Vec::new(),
                        dict_items: Vec::new(),
                    };
                    self.push_new(Object::Call(call), depth)?
                }
                // --- persistent ids (recorded, never resolved)
                b'Q' => {
                    let id = self.pop()?;
                    let depth = self.depth_of(id).saturating_add(1);
                    self.push_new(Object::PersistentId(id), depth)?
                }
                b'P' => {
                    let line = self.line()?;
                    let id = self.alloc(Object::Str(line.to_owned()), 0)?;
                    self.push_new(Object::PersistentId(id), 1)?
                }
                b'b' => {
                    let state = self.pop()?;
                    let target = self.top()?;
                    let sd = self.depth_of(state);
                    let id = match target {
                        Value::Ref(id) if matches!(self.objects[id.0], Object::Call(_)) => id,
                        _ => return Err(self.wrong_type("an object made by REDUCE/NEWOBJ", target)),
                    };
                    let depth = self.depths[id.0].max(sd.saturating_add(1));
                    self.check_depth(depth)?;
                    self.depths[id.0] = depth;
                    let Object::Call(call) = &mut self.objects[id.0] else {
                        unreachable!("checked above")
                    };
                    if call.state.is_some() {
                        return Err(self.bad_arg("BUILD applied twice to the same object"));
                    }
                    call.state = Some(state);
                }

                _ => {
                    return Err(PickleError::UnsupportedOpcode {
                        name,
                        opcode: op,
                        offset: self.op_offset,
                    })
                }
            }
        }
    }

    fn objects_of(&self, v: Value) -> Option<&Object> {
        match v {
            Value::Ref(id) => self.objects.get(id.0),
            _ => None,
        }
    }

    fn stop(mut self) -> R<(Pickle, usize)> {
        let bad = |m: &Self, reason: String| PickleError::BadStop {
            offset: m.op_offset,
            reason,
        };
        if !self.marks.is_empty() {
            return Err(bad(
                &self,
                format!("{} MARK(s) left open", self.marks.len()),
            ));
        }
        let root = self.pop()?;
        if !self.stack.is_empty() {
            return Err(bad(
                &self,
                format!("{} value(s) left on the stack", self.stack.len()),
            ));
        }
        if self.pos != self.data.len() && !self.trailing_allowed {
            return Err(bad(
                &self,
                format!(
                    "{} unexpected byte(s) after STOP",
                    self.data.len() - self.pos
                ),
            ));
        }
        Ok((
            Pickle {
                objects: self.objects,
                root,
            },
            self.pos,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(b: &[u8]) -> Result<Pickle, PickleError> {
        Pickle::parse(b)
    }

    #[test]
    fn small_containers() {
        // {'a': (1, 2.5, None), 'b': [True, False, -3, 70000, 2**40]} written out by hand with
        // the opcodes Python 2's pickle uses at protocol 2 (SHORT_BINSTRING keys, BINFLOAT, …).
        let mut b =
            b"\x80\x02}q\x00(U\x01aq\x01K\x01G\x40\x04\x00\x00\x00\x00\x00\x00N\x87q\x02".to_vec();
        b.extend_from_slice(b"U\x01bq\x03]q\x04(\x88\x89J\xfd\xff\xff\xffJ\x70\x11\x01\x00");
        b.extend_from_slice(b"\x8a\x06\x00\x00\x00\x00\x00\x01eu.");
        let p = parse(&b).unwrap();
        let d = p.as_dict(p.root()).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(p.as_bytes(d[0].0), Some(&b"a"[..]));
        let t = p.as_tuple(d[0].1).unwrap();
        assert_eq!(t, &[Value::Int(1), Value::Float(2.5), Value::None]);
        let l = p.as_list(p.dict_get(p.root(), b"b").unwrap()).unwrap();
        assert_eq!(
            l,
            &[
                Value::Bool(true),
                Value::Bool(false),
                Value::Int(-3),
                Value::Int(70000),
                Value::Int(1 << 40)
            ]
        );
    }

    #[test]
    fn python_generated_protocol2() {
        // python3 -c "import pickle; print(pickle.dumps(
        //   {'k': [1, (2, 'x'), {'z': None}], 'u': u'\xe9', 'big': -2**63}, protocol=2))"
        let b = b"\x80\x02}q\x00(X\x01\x00\x00\x00kq\x01]q\x02(K\x01K\x02X\x01\x00\x00\x00xq\x03\x86q\x04}q\x05X\x01\x00\x00\x00zq\x06NseX\x01\x00\x00\x00uq\x07X\x02\x00\x00\x00\xc3\xa9q\x08X\x03\x00\x00\x00bigq\t\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80u.";
        let p = parse(b).unwrap();
        let k = p.as_list(p.dict_get(p.root(), b"k").unwrap()).unwrap();
        assert_eq!(k[0], Value::Int(1));
        let t = p.as_tuple(k[1]).unwrap();
        assert_eq!(p.as_string_bytes(t[1]), Some(&b"x"[..]));
        assert_eq!(p.dict_get(k[2], b"z"), Some(Value::None));
        let u = p.dict_get(p.root(), b"u").unwrap();
        assert_eq!(p.object_of(u), Some(&Object::Str("\u{e9}".into())));
        assert_eq!(p.dict_get(p.root(), b"big"), Some(Value::Int(i64::MIN)));
    }

    #[test]
    fn memo_shares_mutations() {
        // l = []; (l, l) with l filled after being memoised: EMPTY_LIST BINPUT 0 ... the second
        // element is a BINGET of the same list, so both must show the appended item.
        let b = b"\x80\x02]q\x00h\x00\x86q\x01.";
        let p = parse(b).unwrap();
        let t = p.as_tuple(p.root()).unwrap();
        assert_eq!(t[0], t[1]);
        // APPEND after the memo put is visible through the memo reference.
        let b = b"\x80\x02]q\x00K\x07a0h\x00\x85.";
        let p = parse(b).unwrap();
        let t = p.as_tuple(p.root()).unwrap();
        assert_eq!(p.as_list(t[0]).unwrap(), &[Value::Int(7)]);
    }

    #[test]
    fn calls_are_data() {
        let b = b"\x80\x02ccollections\ndefaultdict\nq\x01c__builtin__\nlist\nq\x02\x85Rq\x03(K\x00]q\x04K\x01aK\x01]q\x05K\x00au.";
        let p = parse(b).unwrap();
        assert_eq!(
            p.call_global(p.root()),
            Some(("collections", "defaultdict"))
        );
        let c = p.as_call(p.root()).unwrap();
        assert_eq!(c.kind, CallKind::Reduce);
        assert_eq!(c.dict_items.len(), 2);
        assert_eq!(p.describe(p.root()), "call of collections.defaultdict");

        // Python 3.11: pickle.dumps(A(), protocol=2) where A.__reduce__ returns
        // (os.system, ('echo hi',)) -- recorded as data, nothing runs.
        let b = b"\x80\x02cposix\nsystem\nq\x00X\x07\x00\x00\x00echo hiq\x01\x85q\x02Rq\x03.";
        let p = parse(b).unwrap();
        assert_eq!(p.call_global(p.root()), Some(("posix", "system")));
        let args = p.as_tuple(p.as_call(p.root()).unwrap().args).unwrap();
        assert_eq!(p.object_of(args[0]), Some(&Object::Str("echo hi".into())));
    }

    #[test]
    fn text_opcodes() {
        // protocol 0: (I1\nI01\nF1.5\nL5L\ntp0\ng0\n.
        let b = b"(I1\nI01\nF1.5\nL5L\ntp0\n0g0\n.";
        let p = parse(b).unwrap();
        let t = p.as_tuple(p.root()).unwrap();
        assert_eq!(
            t,
            &[
                Value::Int(1),
                Value::Bool(true),
                Value::Float(1.5),
                Value::Int(5)
            ]
        );
    }

    #[test]
    fn errors() {
        assert!(matches!(
            parse(b"\x80\x02K\x01"),
            Err(PickleError::Truncated { offset: 4, len: 4 })
        ));
        assert!(matches!(
            parse(b"\x80\x02J\x01\x00"),
            Err(PickleError::Truncated { offset: 2, len: 5 })
        ));
        assert!(matches!(
            parse(b"\x80\x02\xff."),
            Err(PickleError::UnknownOpcode {
                opcode: 0xff,
                offset: 2
            })
        ));
        assert!(matches!(
            parse(b"\x80\x02(i os\nsystem\n."),
            Err(PickleError::UnsupportedOpcode {
                name: "INST",
                offset: 3,
                ..
            })
        ));
        assert!(matches!(
            parse(b"\x80\x02R."),
            Err(PickleError::StackUnderflow {
                name: "REDUCE",
                offset: 2
            })
        ));
        // values below a MARK are not visible: ( then TUPLE1 underflows
        assert!(matches!(
            parse(b"\x80\x02K\x01(\x85."),
            Err(PickleError::StackUnderflow { name: "TUPLE1", .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02t."),
            Err(PickleError::MissingMark { name: "TUPLE", .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02h\x05."),
            Err(PickleError::BadMemoIndex { index: 5, .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02)K\x01a."),
            Err(PickleError::WrongType { name: "APPEND", .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02T\xff\xff\xff\xff."),
            Err(PickleError::BadArgument {
                name: "BINSTRING",
                ..
            })
        ));
        // a huge declared length is reported as truncation, never allocated
        assert!(matches!(
            parse(b"\x80\x02\x8e\xff\xff\xff\xff\xff\xff\xff\xff."),
            Err(PickleError::Truncated { .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02K\x01K\x02."),
            Err(PickleError::BadStop { .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02K\x01.junk"),
            Err(PickleError::BadStop { .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02(K\x01."),
            Err(PickleError::BadStop { .. })
        ));
        assert!(matches!(parse(b""), Err(PickleError::Truncated { .. })));
        assert!(matches!(
            parse(b"\x80\x09N."),
            Err(PickleError::BadArgument { name: "PROTO", .. })
        ));
        // LONG1 with 9 bytes that does not fit
        assert!(matches!(
            parse(b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."),
            Err(PickleError::BadArgument { name: "LONG1", .. })
        ));
        // ... but a 9-byte encoding of 2**63 - 1 padded with a sign byte fits
        let p = parse(b"\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\x00.").unwrap();
        assert_eq!(p.root(), Value::Int(i64::MAX));
        // BUILD on something that is not a call
        assert!(matches!(
            parse(b"\x80\x02]N b."),
            Err(PickleError::UnknownOpcode { opcode: b' ', .. })
        ));
        assert!(matches!(
            parse(b"\x80\x02]Nb."),
            Err(PickleError::WrongType { name: "BUILD", .. })
        ));
        // REDUCE whose arguments are not a tuple
        assert!(matches!(
            parse(b"\x80\x02cos\nsystem\nNR."),
            Err(PickleError::WrongType { name: "REDUCE", .. })
        ));
    }

    #[test]
    fn limits() {
        let small = Limits {
            max_input_bytes: 10,
            ..Limits::default()
        };
        assert!(matches!(
            Pickle::parse_with_limits(&[b'N'; 11], &small),
            Err(PickleError::TooLarge {
                size: 11,
                limit: 10
            })
        ));
        let depth = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        assert!(Pickle::parse_with_limits(b"N\x85\x85\x85.", &depth).is_ok());
        assert!(matches!(
            Pickle::parse_with_limits(b"N\x85\x85\x85\x85.", &depth),
            Err(PickleError::LimitExceeded {
                what: "nesting depth",
                ..
            })
        ));
        let memo = Limits {
            max_memo_entries: 2,
            ..Limits::default()
        };
        // sparse indices are fine (no allocation proportional to the index) ...
        assert!(Pickle::parse_with_limits(b"Nr\xff\xff\xff\xffq\x00q\x00.", &memo).is_ok());
        // ... but a third distinct entry is over the limit
        assert!(matches!(
            Pickle::parse_with_limits(b"Nq\x00q\x01q\x02.", &memo),
            Err(PickleError::LimitExceeded {
                what: "memo entries",
                ..
            })
        ));
        let marks = Limits {
            max_marks: 2,
            ..Limits::default()
        };
        assert!(matches!(
            Pickle::parse_with_limits(b"(((", &marks),
            Err(PickleError::LimitExceeded {
                what: "open MARKs",
                ..
            })
        ));
        let len = Limits {
            max_container_len: 2,
            ..Limits::default()
        };
        assert!(matches!(
            Pickle::parse_with_limits(b"](NNNe.", &len),
            Err(PickleError::LimitExceeded {
                what: "container length",
                ..
            })
        ));
        let stack = Limits {
            max_stack_len: 2,
            ..Limits::default()
        };
        assert!(matches!(
            Pickle::parse_with_limits(b"NNN", &stack),
            Err(PickleError::LimitExceeded {
                what: "stack length",
                ..
            })
        ));
    }

    #[test]
    fn every_prefix_of_a_small_pickle_is_an_error() {
        let b = b"\x80\x02ccollections\ndefaultdict\nq\x01c__builtin__\nlist\nq\x02\x85Rq\x03(K\x00]q\x04(M\x01\x02J\x01\x02\x03\x04eK\x01]q\x05K\x00au.";
        assert!(parse(b).is_ok());
        for n in 0..b.len() {
            assert!(parse(&b[..n]).is_err(), "prefix of length {n} parsed");
        }
    }

    #[test]
    fn persistent_ids_are_recorded_not_resolved() {
        // torch.save's id for a storage: ('storage', torch.FloatStorage, '0', 'cuda:0', 6)
        let b = b"\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x06\x00\x00\x00cuda:0K\x06tQ.";
        let p = parse(b).unwrap();
        let Some(Object::PersistentId(id)) = p.object_of(p.root()) else {
            panic!("{:?}", p.object_of(p.root()))
        };
        let t = p.as_tuple(*id).unwrap();
        assert_eq!(p.as_global(t[1]), Some(("torch", "FloatStorage")));
        assert_eq!(p.as_str(t[3]), Some("cuda:0"));
        assert_eq!(t[4], Value::Int(6));
        assert_eq!(p.describe(p.root()), "persistent id");
        // PERSID: the text form
        let p = parse(b"P7\n.").unwrap();
        let Some(Object::PersistentId(id)) = p.object_of(p.root()) else {
            panic!()
        };
        assert_eq!(p.as_str(*id), Some("7"));
        // BINPERSID with nothing to take
        assert!(matches!(
            parse(b"Q."),
            Err(PickleError::StackUnderflow {
                name: "BINPERSID",
                ..
            })
        ));
    }

    #[test]
    fn a_prefix_parse_says_where_the_pickle_ended() {
        let (p, used) = Pickle::parse_prefix(b"K\x01.K\x02.", &Limits::default()).unwrap();
        assert_eq!((p.root(), used), (Value::Int(1), 3));
        let (p, used) = Pickle::parse_prefix(&b"K\x01.K\x02."[3..], &Limits::default()).unwrap();
        assert_eq!((p.root(), used), (Value::Int(2), 3));
        // Still an error: no STOP, or more than the limit.
        assert!(Pickle::parse_prefix(b"K\x01", &Limits::default()).is_err());
        let small = Limits {
            max_input_bytes: 2,
            ..Limits::default()
        };
        assert!(matches!(
            Pickle::parse_prefix(b"K\x01.", &small),
            Err(PickleError::TooLarge { .. })
        ));
        // parse itself still refuses bytes after STOP
        assert!(parse(b"K\x01.K\x02.").is_err());
    }

    #[test]
    fn unsupported_opcodes_are_named() {
        for (op, name) in [
            (b'i', "INST"),
            (b'o', "OBJ"),
            (0x82, "EXT1"),
            (0x8f, "EMPTY_SET"),
            (0x92, "NEWOBJ_EX"),
            (0x97, "NEXT_BUFFER"),
            (b'S', "STRING"),
            (b'V', "UNICODE"),
        ] {
            let err = parse(&[0x80, 2, op, b'.']).unwrap_err();
            assert_eq!(
                err,
                PickleError::UnsupportedOpcode {
                    name,
                    opcode: op,
                    offset: 2
                }
            );
            assert!(err.to_string().contains(name));
        }
    }
}
