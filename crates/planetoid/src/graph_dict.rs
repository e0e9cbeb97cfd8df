//! Interprets the `ind.<name>.graph` pickle: a `collections.defaultdict(list)` mapping each node
//! id to the list of its neighbours' ids.
//!
//! Python 2 pickled it as `defaultdict(list)` (`REDUCE` of the globals `collections.defaultdict`
//! and `__builtin__.list`) followed by `SETITEMS` batches of `node: [neighbours]`. A plain `dict`
//! is accepted too. Keys must be ints and values lists (or tuples) of ints; a key set twice keeps
//! its first position and its last value, as a Python dict does.
//!
//! ```
//! use planetoid::graph_dict::AdjacencyDict;
//! use planetoid::pickle::Pickle;
//!
//! // pickle.dumps({0: [1, 2], 1: [0]}, protocol=2)
//! let p = Pickle::parse(b"\x80\x02}q\x00(K\x00]q\x01(K\x01K\x02eK\x01]q\x02K\x00au.").unwrap();
//! let g = AdjacencyDict::from_pickle(&p, p.root()).unwrap();
//! assert_eq!(g.entries(), &[(0, vec![1, 2]), (1, vec![0])]);
//! assert_eq!(g.edges(), (vec![0, 0, 1], vec![1, 2, 0]));
//! ```

use std::collections::HashMap;

use crate::error::DecodeError;
use crate::pickle::{Object, Pickle, Value};

/// Node id → neighbour ids, in the dictionary's order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AdjacencyDict {
    entries: Vec<(i64, Vec<i64>)>,
}

fn expected(p: &Pickle, what: &str, v: Value) -> DecodeError {
    DecodeError::Expected {
        expected: what.to_string(),
        found: p.describe(v),
    }
}

impl AdjacencyDict {
    /// Builds the dictionary from `(node, neighbours)` pairs (later duplicates replace earlier
    /// values but keep the earlier position).
    pub fn from_entries(entries: impl IntoIterator<Item = (i64, Vec<i64>)>) -> AdjacencyDict {
        let mut out: Vec<(i64, Vec<i64>)> = Vec::new();
        let mut pos: HashMap<i64, usize> = HashMap::new();
        for (k, v) in entries {
            match pos.get(&k) {
                Some(&i) => out[i].1 = v,
                None => {
                    pos.insert(k, out.len());
                    out.push((k, v));
                }
            }
        }
        AdjacencyDict { entries: out }
    }

    /// Interprets `v` as the pickled graph dictionary; see the module documentation.
    pub fn from_pickle(p: &Pickle, v: Value) -> Result<AdjacencyDict, DecodeError> {
        const WHAT: &str = "a collections.defaultdict(list) of node ids";
        let items = match p.object_of(v) {
            Some(Object::Dict(items)) => items,
            Some(Object::Call(call)) => {
                match p.as_global(call.callable) {
                    Some(("collections", "defaultdict")) => {}
                    Some((m, n)) => {
                        return Err(DecodeError::UnexpectedGlobal {
                            module: m.into(),
                            name: n.into(),
                            expected: WHAT.into(),
                        })
                    }
                    None => return Err(expected(p, WHAT, v)),
                }
                let args = p
                    .as_tuple(call.args)
                    .ok_or_else(|| expected(p, "the defaultdict arguments", call.args))?;
                match args {
                    [] => {}
                    [Value::None] => {}
                    [f] => match p.as_global(*f) {
                        Some(("__builtin__" | "builtins", "list")) => {}
                        Some((m, n)) => {
                            return Err(DecodeError::UnexpectedGlobal {
                                module: m.into(),
                                name: n.into(),
                                expected: "the default factory list".into(),
                            })
                        }
                        None => return Err(expected(p, "the default factory list", *f)),
                    },
                    _ => return Err(expected(p, "defaultdict(list)", call.args)),
                }
                if call.state.is_some() || !call.list_items.is_empty() {
                    return Err(DecodeError::Invalid(
                        "the graph defaultdict has unexpected extra state".into(),
                    ));
                }
                &call.dict_items
            }
            _ => return Err(expected(p, WHAT, v)),
        };

        let mut entries = Vec::with_capacity(items.len());
        for &(k, vals) in items {
            let Value::Int(node) = k else {
                return Err(expected(p, "an int node id as graph key", k));
            };
            let list = match p.object_of(vals) {
                Some(Object::List(l) | Object::Tuple(l)) => l,
                _ => {
                    return Err(expected(
                        p,
                        &format!("a list of neighbour ids for node {node}"),
                        vals,
                    ))
                }
            };
            let mut nbrs = Vec::with_capacity(list.len());
            for &n in list {
                let Value::Int(n) = n else {
                    return Err(expected(
                        p,
                        &format!("an int neighbour id of node {node}"),
                        n,
                    ));
                };
                nbrs.push(n);
            }
            entries.push((node, nbrs));
        }
        Ok(AdjacencyDict::from_entries(entries))
    }

    /// The `(node, neighbours)` pairs in dictionary order.
    pub fn entries(&self) -> &[(i64, Vec<i64>)] {
        &self.entries
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total number of neighbour entries (directed edges before cleaning).
    pub fn num_raw_edges(&self) -> usize {
        self.entries.iter().map(|(_, v)| v.len()).sum()
    }

    /// `(rows, cols)` as PyTorch Geometric's `edge_index_from_dict` builds them before removing
    /// self-loops and duplicates: for each key in order, one edge `key → neighbour` per entry.
    pub fn edges(&self) -> (Vec<i64>, Vec<i64>) {
        let n = self.num_raw_edges();
        let mut rows = Vec::with_capacity(n);
        let mut cols = Vec::with_capacity(n);
        for (k, vs) in &self.entries {
            rows.extend(std::iter::repeat_n(*k, vs.len()));
            cols.extend_from_slice(vs);
        }
        (rows, cols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pickles::graph_pickle;

    fn read(b: &[u8]) -> Result<AdjacencyDict, DecodeError> {
        let p = Pickle::parse(b).expect("test pickle parses");
        AdjacencyDict::from_pickle(&p, p.root())
    }

    #[test]
    fn defaultdict() {
        let g = read(&graph_pickle(&[
            (2, vec![0, 1]),
            (0, vec![]),
            (1, vec![2, 70000]),
        ]))
        .unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(g.num_raw_edges(), 4);
        assert_eq!(g.edges(), (vec![2, 2, 1, 1], vec![0, 1, 2, 70000]));
    }

    #[test]
    fn duplicate_keys_last_value_first_position() {
        let g = read(&graph_pickle(&[
            (5, vec![1]),
            (6, vec![2]),
            (5, vec![3, 4]),
        ]))
        .unwrap();
        assert_eq!(g.entries(), &[(5, vec![3, 4]), (6, vec![2])]);
    }

    #[test]
    fn wrong_content() {
        // defaultdict(os.system)
        let b = b"\x80\x02ccollections\ndefaultdict\ncos\nsystem\n\x85R.";
        let err = read(b).unwrap_err();
        assert!(err.to_string().contains("os.system"), "{err}");
        // a string key
        let b = b"\x80\x02}(U\x01a]u.";
        assert!(matches!(read(b), Err(DecodeError::Expected { .. })));
        // a float neighbour
        let b = b"\x80\x02}(K\x00]G\x3f\xf0\x00\x00\x00\x00\x00\x00au.";
        assert!(matches!(read(b), Err(DecodeError::Expected { .. })));
        // not a dict at all
        assert!(matches!(
            read(b"\x80\x02]."),
            Err(DecodeError::Expected { .. })
        ));
    }
}
