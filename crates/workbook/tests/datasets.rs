//! Datasets: the embedded karate graph equals PyG's, Cora loads offline, CiteSeer is downloaded
//! (from a local server here) and cached, and synthetic graphs scale.

use crate::common;

use common::fixtures_dir;
use std::path::PathBuf;
use workbook::candle_core::Device;
use workbook::datasets::{self, load_planetoid, load_planetoid_from, PlanetoidSource};
use workbook::{tensor_file, WorkbookError};

#[test]
fn karate_edges_are_pygs() {
    let g = datasets::karate(&Device::Cpu).unwrap();
    let fx =
        tensor_file::read(&fixtures_dir().join("gcn_karate.safetensors"), &Device::Cpu).unwrap();
    let pairs = |ei: Vec<Vec<i64>>| {
        let mut p: Vec<(i64, i64)> = ei[0].iter().copied().zip(ei[1].iter().copied()).collect();
        p.sort_unstable();
        p
    };
    // The fixture lists the same 156 edges in another order; ours is PyG KarateClub's (sorted).
    let pyg = pairs(fx.tensors["edge_index"].to_vec2::<i64>().unwrap());
    let ours_raw = g
        .edge_index()
        .to_tensor(&Device::Cpu)
        .unwrap()
        .to_vec2::<i64>()
        .unwrap();
    let ours = pairs(ours_raw.clone());
    assert_eq!(ours, pyg);
    assert_eq!(
        ours_raw[0]
            .iter()
            .copied()
            .zip(ours_raw[1].iter().copied())
            .collect::<Vec<_>>(),
        ours
    );
    let split = g.split().unwrap();
    assert_eq!(split.train.to_vec1::<u32>().unwrap(), vec![0, 4, 8, 24]);
}

#[test]
fn cora_is_embedded_and_matches_pyg_counts() {
    let empty = tempfile::tempdir().unwrap();
    let (g, source) = load_planetoid("cora", Some(empty.path()), &Device::Cpu).unwrap();
    assert_eq!(source, PlanetoidSource::Embedded);
    assert_eq!(
        (
            g.num_nodes(),
            g.num_edges(),
            g.num_features(),
            g.num_classes()
        ),
        (2708, 10556, 1433, 7)
    );
    let s = g.split().unwrap();
    assert_eq!(
        (
            s.train.dim(0).unwrap(),
            s.val.dim(0).unwrap(),
            s.test.dim(0).unwrap()
        ),
        (140, 500, 1000)
    );
}

/// Serves files from `dir` over HTTP on 127.0.0.1 for `requests` requests, then stops.
#[cfg(feature = "download")]
fn serve(dir: PathBuf, requests: usize) -> String {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            let path = line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .trim_start_matches('/')
                .to_string();
            match std::fs::read(dir.join(&path)) {
                Ok(body) => {
                    write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .unwrap();
                    stream.write_all(&body).unwrap();
                }
                Err(_) => {
                    write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    .unwrap();
                }
            }
        }
    });
    format!("http://{addr}")
}

#[cfg(feature = "download")]
#[test]
fn citeseer_downloads_once_then_loads_from_the_cache() {
    let Some(shared) =
        common::shared_planetoid_dir("citeseer_downloads_once_then_loads_from_the_cache")
    else {
        return;
    };
    let url = serve(shared, 8);
    let cache = tempfile::tempdir().unwrap();
    let (g, source) =
        load_planetoid_from("citeseer", Some(cache.path()), &Device::Cpu, &url).unwrap();
    assert_eq!(
        source,
        PlanetoidSource::Downloaded(cache.path().to_path_buf())
    );
    assert_eq!(
        (
            g.num_nodes(),
            g.num_edges(),
            g.num_features(),
            g.num_classes()
        ),
        (3327, 9104, 3703, 6)
    );
    // The server has stopped after 8 requests: a second load must come from the cache.
    let (_, source) =
        load_planetoid_from("citeseer", Some(cache.path()), &Device::Cpu, &url).unwrap();
    assert_eq!(source, PlanetoidSource::Folder(cache.path().to_path_buf()));
}

#[cfg(feature = "download")]
#[test]
fn failed_download_says_how_to_work_offline() {
    let empty = tempfile::tempdir().unwrap();
    let url = serve(empty.path().to_path_buf(), 1); // answers 404
    let cache = tempfile::tempdir().unwrap();
    let err = load_planetoid_from("citeseer", Some(cache.path()), &Device::Cpu, &url).unwrap_err();
    assert!(matches!(err, WorkbookError::Download { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("ind.citeseer.x") && msg.contains("--data-dir"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_dir(cache.path()).unwrap().count(),
        0,
        "nothing half-written"
    );
}

/// The core library's default build has no HTTP client (`cargo test -p workbook` builds it so;
/// the workspace's `cargo test` turns `download` on through the CLI, and runs the two tests above).
#[cfg(not(feature = "download"))]
#[test]
fn without_the_download_feature_the_error_says_where_to_put_the_files() {
    let cache = tempfile::tempdir().unwrap();
    let err = load_planetoid_from(
        "citeseer",
        Some(cache.path()),
        &Device::Cpu,
        "http://127.0.0.1:9",
    )
    .unwrap_err();
    assert!(matches!(err, WorkbookError::Download { .. }), "{err}");
    let msg = err.to_string();
    for needle in [
        "ind.citeseer.x",
        "`download` feature",
        "--data-dir",
        &cache.path().display().to_string(),
    ] {
        assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
    }
    assert_eq!(
        std::fs::read_dir(cache.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn corrupt_planetoid_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/planetoid");
    for part in planetoid::FILE_PARTS {
        let name = format!("ind.cora.{part}");
        std::fs::copy(src.join(&name), dir.path().join(&name)).unwrap();
    }
    let graph = dir.path().join("ind.cora.graph");
    let bytes = std::fs::read(&graph).unwrap();
    std::fs::write(&graph, &bytes[..bytes.len() - 100]).unwrap();
    let err = load_planetoid("cora", Some(dir.path()), &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(err.contains("ind.cora.graph"), "{err}");
}

#[test]
fn csbm_scales_to_a_hundred_thousand_nodes() {
    let g = datasets::load("csbm:100000", None, &Device::Cpu).unwrap();
    assert_eq!(g.num_nodes(), 100_000);
    let e = g.num_edges() as f64 / 100_000.0;
    assert!((9.0..10.5).contains(&e), "mean degree {e}");
}

/// `Split`'s fields are public, so `to_masks` cannot assume its ids fit: an id past the end is a
/// named error, not an index panic.
#[test]
fn a_split_naming_a_missing_node_is_an_error_not_a_panic() {
    let split = workbook::Split::from_masks(
        &[true, false, false, false, true],
        &[false, true, false, false, false],
        &[false, false, true, false, false],
        &Device::Cpu,
    )
    .unwrap();
    assert_eq!(
        split.to_masks(5).unwrap()[0],
        [true, false, false, false, true]
    );
    let err = split.to_masks(3).unwrap_err().to_string();
    assert!(
        err.contains("train split names node 4 but the graph has 3 nodes"),
        "{err}"
    );
}
