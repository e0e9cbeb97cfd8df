//! Planetoid Cora and CiteSeer: read from the original files, downloaded and cached on demand.
//!
//! The `ind.<name>.*` files are the ones PyG's `Planetoid` downloads; the [`planetoid`] crate
//! parses them safely (no pickle code is ever run) and assembles the graph as PyG does, with
//! PyG's public split and `NormalizeFeatures`.
//!
//! Where the files come from, in order:
//! 1. the data folder: `--data-dir`, else `WORKBOOK_DATA_DIR`, else `~/.cache/gnn-workbook/planetoid`;
//! 2. Cora only: the copy embedded in this crate (570 KB), so Cora works offline;
//! 3. a download from the Planetoid repository (`WORKBOOK_PLANETOID_URL` overrides the base URL),
//!    written atomically into the data folder for next time. Downloading needs the crate's
//!    `download` feature (off by default, so the core has no HTTP client; the CLI turns it on);
//!    without it the error names the files and the folder to copy them into.
//!
//! ```
//! use workbook::datasets::{load_planetoid, PlanetoidSource};
//! let dir = tempfile::tempdir().unwrap(); // empty: Cora comes from the embedded copy
//! let (cora, source) = load_planetoid("cora", Some(dir.path()), &workbook::candle_core::Device::Cpu).unwrap();
//! assert_eq!((cora.num_nodes(), cora.num_edges(), cora.num_classes()), (2708, 10556, 7));
//! assert_eq!(source, PlanetoidSource::Embedded);
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::{Graph, Split};
use crate::placement::Placement;
use candle_core::{Device, Tensor};
use planetoid::{PlanetoidFiles, PlanetoidName, FILE_PARTS};
use std::path::{Path, PathBuf};

/// The base URL PyG downloads Planetoid from.
pub const DEFAULT_URL: &str = "https://github.com/kimiyoung/planetoid/raw/master/data";
/// Overrides [`DEFAULT_URL`] (a mirror, or a local server in tests).
pub const URL_ENV: &str = "WORKBOOK_PLANETOID_URL";
/// Overrides the default data folder.
pub const DATA_DIR_ENV: &str = "WORKBOOK_DATA_DIR";

/// Where a loaded dataset came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanetoidSource {
    Folder(PathBuf),
    Embedded,
    Downloaded(PathBuf),
}

macro_rules! embedded_cora {
    ($($part:literal),*) => {
        [$(($part, include_bytes!(concat!("../../data/planetoid/ind.cora.", $part)) as &[u8])),*]
    };
}

const CORA: [(&str, &[u8]); 8] =
    embedded_cora!("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index");

/// The default data folder: `WORKBOOK_DATA_DIR`, else `$XDG_CACHE_HOME/gnn-workbook/planetoid`,
/// else `~/.cache/gnn-workbook/planetoid`, else `./data/planetoid`.
pub fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(DATA_DIR_ENV) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    match cache {
        Some(c) => c.join("gnn-workbook").join("planetoid"),
        None => PathBuf::from("data").join("planetoid"),
    }
}

/// Loads `cora` or `citeseer` onto `device` and says where the files came from. Downloads use
/// `WORKBOOK_PLANETOID_URL`, else [`DEFAULT_URL`].
pub fn load_planetoid(
    name: &str,
    data_dir: Option<&Path>,
    device: impl Into<Placement>,
) -> Result<(Graph, PlanetoidSource)> {
    let base = std::env::var(URL_ENV).unwrap_or_else(|_| DEFAULT_URL.to_string());
    load_planetoid_from(name, data_dir, device, &base)
}

/// [`load_planetoid`] with an explicit download base URL.
pub fn load_planetoid_from(
    name: &str,
    data_dir: Option<&Path>,
    device: impl Into<Placement>,
    base_url: &str,
) -> Result<(Graph, PlanetoidSource)> {
    let name: PlanetoidName = name.parse()?;
    let dir = data_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(default_data_dir);
    let have_all = FILE_PARTS
        .iter()
        .all(|p| dir.join(name.file_name(p)).is_file());
    let (files, source) = if have_all {
        (
            PlanetoidFiles::read_dir(&dir, name)?,
            PlanetoidSource::Folder(dir),
        )
    } else if name == PlanetoidName::Cora {
        let mut files = PlanetoidFiles::default();
        for (part, bytes) in CORA {
            *files.part_mut(part).expect("CORA lists the eight parts") = bytes.to_vec();
        }
        (files, PlanetoidSource::Embedded)
    } else {
        download(name, &dir, base_url)?;
        (
            PlanetoidFiles::read_dir(&dir, name)?,
            PlanetoidSource::Downloaded(dir),
        )
    };
    let data = planetoid::assemble(name, &files)?;
    let origin = match &source {
        PlanetoidSource::Embedded => format!("the embedded {}", name.prefix()),
        PlanetoidSource::Folder(d) | PlanetoidSource::Downloaded(d) => {
            format!("ind.{}.x, .tx and .allx in {}", name.prefix(), d.display())
        }
    };
    Ok((to_graph(data, device, &origin)?, source))
}

/// The eight files of `name` (`cora`, `citeseer`) in `dir`.
pub fn data_files(name: &str, dir: &Path) -> Result<Vec<PathBuf>> {
    let name: PlanetoidName = name.parse()?;
    Ok(FILE_PARTS
        .iter()
        .map(|part| dir.join(name.file_name(part)))
        .collect())
}

/// Checks a data folder the user named (the CLI's `--data-dir`) before anything falls back to
/// the embedded copy or a download: it must be a folder and hold every `ind.<name>.*` file of
/// `name` as a regular file. The error names the folder and every file missing, and the fixes.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let err = workbook::datasets::planetoid::check_folder("cora", dir.path()).unwrap_err().to_string();
/// assert!(err.contains("ind.cora.x") && err.contains("ind.cora.test.index"), "{err}");
/// ```
pub fn check_folder(name: &str, dir: &Path) -> Result<()> {
    let name: PlanetoidName = name.parse()?;
    let meta = std::fs::metadata(dir).map_err(|e| {
        WorkbookError::file(
            dir,
            format!("cannot be used as the data folder ({e}); give a folder that holds the ind.{}.* files, or leave out --data-dir to use the default ({})", name.prefix(), default_data_dir().display()),
        )
    })?;
    if !meta.is_dir() {
        return Err(WorkbookError::file(
            dir,
            format!("is not a folder; --data-dir takes the folder that holds the ind.{}.* files (leave it out to use the default, {})", name.prefix(), default_data_dir().display()),
        ));
    }
    let mut missing = Vec::new();
    for part in FILE_PARTS {
        let file = name.file_name(part);
        let path = dir.join(&file);
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => missing.push(format!("{file} (not a regular file)")),
            Err(_) => missing.push(file),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let fallback = if name == PlanetoidName::Cora {
        "the embedded copy of Cora"
    } else {
        "a download into the default folder"
    };
    Err(WorkbookError::file(
        dir,
        format!(
            "the data folder lacks {} of the {} files of {}: {}. Copy all of them there (PyG's Planetoid raw files), or leave out --data-dir to use {fallback}",
            missing.len(),
            FILE_PARTS.len(),
            name.prefix(),
            missing.join(", ")
        ),
    ))
}

/// Downloads the eight files of `name` from `base` into `dir` (each written atomically).
///
/// Needs the crate's `download` feature (the `workbook` CLI has it on). Without it this returns
/// [`WorkbookError::Download`] naming the first missing file, the folder to copy the files into
/// and the feature to turn on; nothing is written.
pub fn download(name: PlanetoidName, dir: &Path, base: &str) -> Result<()> {
    for part in FILE_PARTS {
        let file = name.file_name(part);
        let target = dir.join(&file);
        if target.is_file() {
            continue;
        }
        let url = format!("{}/{file}", base.trim_end_matches('/'));
        let fail = |message: String| WorkbookError::Download {
            url: url.clone(),
            message: format!(
                "{message}. Without internet, copy the ind.{}.* files into {} (or pass --data-dir)",
                name.prefix(),
                dir.display()
            ),
        };
        let bytes = fetch(&url).map_err(fail)?;
        crate::atomic_write::write(&target, &bytes)?;
    }
    Ok(())
}

/// One file over HTTP(S), at most 64 MiB.
#[cfg(feature = "download")]
fn fetch(url: &str) -> std::result::Result<Vec<u8>, String> {
    let mut response = ureq::get(url).call().map_err(|e| e.to_string())?;
    response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_vec()
        .map_err(|e| e.to_string())
}

/// Built without an HTTP client: say so, and how to get one.
#[cfg(not(feature = "download"))]
fn fetch(_url: &str) -> std::result::Result<Vec<u8>, String> {
    Err(
        "this build of the workbook library cannot download: its `download` feature is off \
         (depend on `workbook` with `features = [\"download\"]`, or use the `workbook` CLI, \
         which has it on)"
            .to_string(),
    )
}

fn to_graph(
    data: planetoid::Planetoid,
    device: impl Into<Placement>,
    origin: &str,
) -> Result<Graph> {
    let cpu = Device::Cpu;
    let n = data.num_nodes;
    let x = Tensor::from_vec(data.x, (n, data.num_features), &cpu)?;
    crate::non_finite::check(origin, [("x (node features)", &x)])?;
    let edge_index = EdgeIndex::new(&data.edge_src, &data.edge_dst, n, &cpu)?;
    let split = Split::from_masks(&data.train_mask, &data.val_mask, &data.test_mask, &cpu)?;
    let mut g = Graph::new(data.name.to_string(), x, edge_index)?.with_labels(&data.y, split)?;
    if g.num_classes() != data.num_classes {
        return Err(WorkbookError::InvalidGraph(format!(
            "{}: labels span {} classes but the files declare {}",
            data.name,
            g.num_classes(),
            data.num_classes
        )));
    }
    g = g.to_device(device)?;
    Ok(g)
}
