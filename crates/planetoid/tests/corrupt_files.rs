//! Corrupt, truncated and hostile files must give a clear error, never a panic, and never run
//! anything.

mod common;

use std::path::Path;

use planetoid::graph_dict::AdjacencyDict;
use planetoid::numpy::NdArray;
use planetoid::pickle::Pickle;
use planetoid::scipy_sparse::Csr;
use planetoid::{
    assemble, load, DecodeError, PickleError, PlanetoidError, PlanetoidFiles, PlanetoidName,
    FILE_PARTS,
};

/// Copies the real Cora files into a fresh temporary directory.
fn cora_copy(src: &Path) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for part in FILE_PARTS {
        let f = PlanetoidName::Cora.file_name(part);
        std::fs::copy(src.join(&f), tmp.path().join(&f)).unwrap();
    }
    tmp
}

/// Decodes one matrix/graph file with the public parts of the crate; must not panic.
fn decode(part: &str, bytes: &[u8]) -> Result<(), String> {
    let p = Pickle::parse(bytes).map_err(|e| e.to_string())?;
    let r = match part {
        "graph" => AdjacencyDict::from_pickle(&p, p.root()).map(drop),
        "x" | "tx" | "allx" => Csr::from_pickle(&p, p.root()).map(drop),
        _ => NdArray::from_pickle(&p, p.root()).map(drop),
    };
    r.map_err(|e| e.to_string())
}

#[test]
fn every_prefix_of_a_real_file_is_truncated() {
    let Some(dir) = common::data_dir_or_skip("every_prefix_of_a_real_file_is_truncated") else {
        return;
    };
    let y = std::fs::read(dir.join("ind.cora.y")).unwrap();
    assert!(decode("y", &y).is_ok());
    for n in 0..y.len() {
        match Pickle::parse(&y[..n]) {
            Err(PickleError::Truncated { len, .. }) => assert_eq!(len, n),
            other => panic!("prefix {n}: {other:?}"),
        }
    }
    // The graph file is larger: every 37th prefix plus the last 200.
    let g = std::fs::read(dir.join("ind.cora.graph")).unwrap();
    let prefixes = (0..g.len()).step_by(37).chain(g.len() - 200..g.len());
    for n in prefixes {
        assert!(
            matches!(Pickle::parse(&g[..n]), Err(PickleError::Truncated { .. })),
            "graph prefix {n}"
        );
    }
}

#[test]
fn truncated_file_on_disk_names_the_file() {
    let Some(dir) = common::data_dir_or_skip("truncated_file_on_disk_names_the_file") else {
        return;
    };
    let tmp = cora_copy(&dir);
    let path = tmp.path().join("ind.cora.graph");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = load(tmp.path(), PlanetoidName::Cora).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("ind.cora.graph: truncated pickle (no STOP opcode"),
        "{msg}"
    );
    assert!(msg.contains("delete it and download again"), "{msg}");
}

#[test]
fn mutated_bytes_never_panic() {
    let Some(dir) = common::data_dir_or_skip("mutated_bytes_never_panic") else {
        return;
    };
    // A deterministic xorshift generator; each case changes 1-3 bytes of a real file.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut errors = 0;
    let mut total = 0;
    for part in ["y", "ty", "x", "graph"] {
        let orig = std::fs::read(dir.join(PlanetoidName::Cora.file_name(part))).unwrap();
        // Mutations in the opcode-dense head (first 1 KiB) are the interesting ones.
        let head = orig.len().min(1024);
        for _ in 0..1500 {
            let mut b = orig.clone();
            for _ in 0..(1 + next() % 3) {
                let i = (next() as usize) % head;
                b[i] = next() as u8;
            }
            total += 1;
            if decode(part, &b).is_err() {
                errors += 1;
            }
        }
    }
    eprintln!("{errors} of {total} mutated files were rejected (the rest only changed data)");
    assert!(errors > 0);
}

#[test]
fn unknown_opcode_is_reported_with_offset() {
    let Some(dir) = common::data_dir_or_skip("unknown_opcode_is_reported_with_offset") else {
        return;
    };
    let tmp = cora_copy(&dir);
    let path = tmp.path().join("ind.cora.ty");
    let mut b = std::fs::read(&path).unwrap();
    // offset 57 holds BININT1 (K) in every ndarray pickle of these files (see pickletools.dis)
    assert_eq!(b[57], b'K');
    b[57] = 0xfe;
    std::fs::write(&path, &b).unwrap();
    match load(tmp.path(), PlanetoidName::Cora).unwrap_err() {
        PlanetoidError::Pickle {
            file,
            source: PickleError::UnknownOpcode { opcode, offset },
        } => {
            assert_eq!((file.as_str(), opcode, offset), ("ind.cora.ty", 0xfe, 57));
        }
        other => panic!("{other}"),
    }
}

#[test]
fn wrong_shape_is_a_length_error() {
    let Some(dir) = common::data_dir_or_skip("wrong_shape_is_a_length_error") else {
        return;
    };
    let mut files = PlanetoidFiles::read_dir(&dir, PlanetoidName::Cora).unwrap();
    // ind.cora.y: offset 70 is `K 140`, the number of rows (see pickletools.dis)
    assert_eq!(&files.y[70..72], &[b'K', 140]);
    files.y[71] = 141;
    match assemble(PlanetoidName::Cora, &files).unwrap_err() {
        PlanetoidError::Decode {
            file,
            source: DecodeError::DataLength {
                expected, found, ..
            },
        } => {
            assert_eq!(file, "ind.cora.y");
            assert_eq!((expected, found), (141 * 7 * 4, 140 * 7 * 4));
        }
        other => panic!("{other}"),
    }
}

#[test]
fn missing_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    match load(tmp.path(), PlanetoidName::CiteSeer).unwrap_err() {
        PlanetoidError::MissingFile { file, dir } => {
            assert_eq!(file, "ind.citeseer.x");
            assert_eq!(dir, tmp.path());
        }
        other => panic!("{other}"),
    }
    let Some(src) = common::data_dir_or_skip("missing_file_is_named (real files part)") else {
        return;
    };
    let tmp = cora_copy(&src);
    std::fs::remove_file(tmp.path().join("ind.cora.test.index")).unwrap();
    let err = load(tmp.path(), PlanetoidName::Cora).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("ind.cora.test.index is missing from "),
        "{msg}"
    );
    assert!(msg.contains("kimiyoung/planetoid"), "{msg}");
}

#[test]
fn oversized_file_is_refused_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    for part in FILE_PARTS {
        std::fs::write(tmp.path().join(PlanetoidName::Cora.file_name(part)), b"").unwrap();
    }
    // a sparse file just over the limit: refused from its metadata, nothing is read
    let f = std::fs::File::create(tmp.path().join("ind.cora.tx")).unwrap();
    f.set_len(planetoid::MAX_FILE_BYTES + 1).unwrap();
    match PlanetoidFiles::read_dir(tmp.path(), PlanetoidName::Cora).unwrap_err() {
        PlanetoidError::FileTooLarge { size, .. } => {
            assert_eq!(size, planetoid::MAX_FILE_BYTES + 1)
        }
        other => panic!("{other}"),
    }
}

#[test]
fn hostile_global_is_never_executed() {
    let marker = std::env::temp_dir().join(format!("planetoid-pwned-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    // pickle.dumps of an object whose __reduce__ returns (os.system, ('touch <marker>',)),
    // protocol 2, as an attacker would write it
    let cmd = format!("touch {}", marker.display());
    let mut b = b"\x80\x02cos\nsystem\nq\x00".to_vec();
    b.push(b'U');
    b.push(cmd.len() as u8);
    b.extend_from_slice(cmd.as_bytes());
    b.extend_from_slice(b"q\x01\x85q\x02Rq\x03.");

    // The evaluator accepts it as inert data ...
    let p = Pickle::parse(&b).unwrap();
    assert_eq!(p.call_global(p.root()), Some(("os", "system")));
    // ... and every interpreter refuses it, naming the global.
    for part in ["x", "y", "graph"] {
        let err = decode(part, &b).unwrap_err();
        assert!(err.contains("os.system"), "{part}: {err}");
    }
    let files = PlanetoidFiles {
        x: b.clone(),
        ..PlanetoidFiles::default()
    };
    let err = assemble(PlanetoidName::Cora, &files).unwrap_err();
    assert!(matches!(
        err,
        PlanetoidError::Decode {
            source: DecodeError::UnexpectedGlobal { .. },
            ..
        }
    ));
    assert!(
        err.to_string().contains("nothing was imported or run"),
        "{err}"
    );
    assert!(!marker.exists(), "the command must never run");
}

#[test]
fn unsupported_opcodes_are_rejected() {
    // INST (protocol 0 class instantiation) with os.system
    let err = Pickle::parse(b"(S'ls'\nios\nsystem\n.").unwrap_err();
    assert!(matches!(
        err,
        PickleError::UnsupportedOpcode {
            name: "STRING",
            offset: 1,
            ..
        }
    ));
    let err = Pickle::parse(b"\x80\x02(ios\nsystem\n.").unwrap_err();
    assert!(err.to_string().contains("INST"), "{err}");
    assert!(err.to_string().contains("offset 3"), "{err}");
}
