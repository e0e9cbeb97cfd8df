//! Reading PyTorch checkpoints (`torch.save` files, `.pt` / `.pth`) without Python and without
//! running anything in them.
//!
//! A `torch.save(model.state_dict(), "model.pt")` file is a zip (PyTorch ≥ 1.6) or, in the
//! legacy format, several pickles and raw bytes one after the other. The pickle names each
//! tensor's storage by a persistent id, `('storage', torch.FloatStorage, '0', 'cuda:0', 6)`,
//! which records **the device it was saved from**: that is why `torch.load` of a file saved on a
//! GPU fails on a machine without one until `map_location` is given. This reader does the same
//! ([`MapLocation`]): a storage saved on `cuda:N` goes to `cuda:N` if this machine has it, and
//! otherwise the load fails with PyTorch's message and the fix, unless a map location names
//! where it should go instead (a device for everything, or `cuda:0=cpu` style pairs).
//!
//! The pickle is evaluated by the project's one pickle reader ([`planetoid::pickle`]), which
//! imports and calls nothing. Before any of it is interpreted, every global the pickle names
//! must be one a state_dict uses (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`,
//! `torch._utils._rebuild_parameter`, the `torch.*Storage` types): a file that names anything
//! else, such as the whole pickled module `torch.save(model)` writes (`__main__.GCN`, PyG's
//! classes), is refused ([`WorkbookError::PickledCode`]), as PyTorch ≥ 2.6 refuses it with
//! `weights_only=True`. The file is read within the loading cap ([`crate::input_file`]); every
//! storage reference, offset, size and stride is checked against the bytes the file holds, so
//! a crafted file cannot make the reader read past a storage or allocate more than the file
//! could describe.
//!
//! Why not candle's `pickle` module, which also reads PyTorch files: it reads the zip format
//! only, keeps no storage location, and does not read the Python 2 pickles of the Planetoid
//! files; one reader for both keeps one set of limits and one refusal of code.
//!
//! ```
//! use workbook::torch_file::{MapLocation, TorchFile};
//! use workbook::Placement;
//! let dir = env!("CARGO_MANIFEST_DIR");
//! let path = format!("{dir}/tests/fixtures/pyg/pt/cora_gcn_state_dict_cuda0.pt");
//! let file = TorchFile::read(path.as_ref()).unwrap();
//! assert_eq!(file.locations(), ["cuda:0"]);
//! assert_eq!(file.tensors[1].name, "conv1.lin.weight");
//! assert_eq!(file.tensors[1].shape, [16, 1433]);
//! if !cfg!(feature = "cuda") {
//!     // As torch.load without map_location on a machine without a GPU:
//!     let err = file.to_tensors(&MapLocation::AsSaved).unwrap_err().to_string();
//!     assert!(err.contains("saved on cuda:0") && err.contains("--map-location cpu"), "{err}");
//! }
//! let tensors = file.to_tensors(&MapLocation::To(Placement::cpu())).unwrap();
//! assert_eq!(tensors["conv1.bias"].dims(), [16]);
//! ```

use crate::device::DeviceSpec;
use crate::error::{Result, WorkbookError};
use crate::input_file::{self, Cap};
use crate::placement::Placement;
use candle_core::{DType, Device, Tensor};
use planetoid::pickle::{Limits, Object, Pickle, Value};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

/// The globals a `state_dict` pickle may name; anything else is code, refused.
const ALLOWED_GLOBALS: &[(&str, &str)] = &[
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"),
];

/// The first pickle of a legacy file: `pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2)`.
const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";

/// Which `torch.save` format a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorchFormat {
    /// A zip archive (`archive/data.pkl` and `archive/data/<key>`), PyTorch ≥ 1.6's default.
    Zip,
    /// Pickles and raw storages one after the other (`_use_new_zipfile_serialization=False`).
    Legacy,
}

impl fmt::Display for TorchFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TorchFormat::Zip => "zip (PyTorch >= 1.6)",
            TorchFormat::Legacy => "legacy (before PyTorch 1.6)",
        })
    }
}

/// One tensor of a checkpoint, on the host, with the device it was saved from.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedTensor {
    /// Its key in the state_dict, e.g. `conv1.lin.weight`.
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// The location `torch.save` recorded for its storage: `cpu`, `cuda:0`, ...
    pub location: String,
    /// The elements in row-major order, little-endian.
    bytes: Vec<u8>,
}

/// Where a checkpoint's tensors go: PyTorch's `map_location`.
#[derive(Clone, Debug, Default)]
pub enum MapLocation {
    /// Where each was saved (PyTorch's default): fails for a device this machine lacks.
    #[default]
    AsSaved,
    /// Everything to one placement (`map_location="cpu"`).
    To(Placement),
    /// Saved location to placement (`map_location={"cuda:0": "cpu"}`); a location not listed
    /// stays where it was saved.
    Map(Vec<(String, Placement)>),
}

impl MapLocation {
    /// Reads the command line's `--map-location` values: one device (`cpu`, `cuda:1`, `sim:1`)
    /// for everything, or `SAVED=DEVICE` pairs (`cuda:0=cpu`, `cuda:1=sim:1`). Opens each
    /// device named, so a missing GPU is reported here, with the flag.
    ///
    /// ```
    /// use workbook::torch_file::MapLocation;
    /// assert!(matches!(MapLocation::parse(&[]).unwrap(), MapLocation::AsSaved));
    /// assert!(matches!(MapLocation::parse(&["cpu".into()]).unwrap(), MapLocation::To(_)));
    /// let map = MapLocation::parse(&["cuda:0=sim:1".into(), "cuda:1=cpu".into()]).unwrap();
    /// assert!(matches!(map, MapLocation::Map(pairs) if pairs.len() == 2));
    /// let err = MapLocation::parse(&["cpu".into(), "cuda:0=cpu".into()]).unwrap_err().to_string();
    /// assert!(err.contains("either one device"), "{err}");
    /// ```
    pub fn parse(values: &[String]) -> Result<MapLocation> {
        let open = |spelling: &str| -> Result<Placement> {
            match DeviceSpec::from_str(spelling)? {
                DeviceSpec::Auto => Err(WorkbookError::InvalidConfig(
                    "--map-location auto: name the device (cpu, cuda:N or sim:N); a map location says exactly where the tensors go".into(),
                )),
                spec => Ok(crate::device::open(spec, "given to --map-location")?.placement),
            }
        };
        let pairs = values.iter().filter(|v| v.contains('=')).count();
        match (values.len(), pairs) {
            (0, _) => Ok(MapLocation::AsSaved),
            (1, 0) => Ok(MapLocation::To(open(&values[0])?)),
            (n, p) if p == n => values
                .iter()
                .map(|v| {
                    let (from, to) = v.split_once('=').expect("counted above");
                    let from = saved_location(from.trim()).ok_or_else(|| {
                        WorkbookError::InvalidConfig(format!(
                            "--map-location {v}: '{from}' is not a location torch.save writes (cpu, cuda or cuda:N)"
                        ))
                    })?;
                    Ok((from, open(to)?))
                })
                .collect::<Result<Vec<_>>>()
                .map(MapLocation::Map),
            _ => Err(WorkbookError::InvalidConfig(format!(
                "--map-location {}: give either one device for every tensor (--map-location cpu) or SAVED=DEVICE pairs (--map-location cuda:0=cpu --map-location cuda:1=sim:1), not both",
                values.join(" ")
            ))),
        }
    }

    /// Where tensors saved at `location` go, or `None` to keep the saved location.
    fn target(&self, location: &str) -> Option<&Placement> {
        match self {
            MapLocation::AsSaved => None,
            MapLocation::To(p) => Some(p),
            MapLocation::Map(pairs) => pairs.iter().find(|(l, _)| l == location).map(|(_, p)| p),
        }
    }
}

/// A saved location as `torch.save` writes it, normalised (`cuda` is `cuda:0`).
fn saved_location(s: &str) -> Option<String> {
    match s {
        "cpu" => Some("cpu".into()),
        "cuda" => Some("cuda:0".into()),
        _ => s
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
            .map(|n| format!("cuda:{n}")),
    }
}

/// A PyTorch checkpoint's tensors, read but not yet placed.
#[derive(Clone, Debug)]
pub struct TorchFile {
    /// The file, for messages.
    pub origin: String,
    pub format: TorchFormat,
    /// In the order of the state_dict.
    pub tensors: Vec<SavedTensor>,
    /// What the reader decided on the way (a nested state_dict taken from a checkpoint dict).
    pub notes: Vec<String>,
}

impl TorchFile {
    /// Reads a `.pt`/`.pth` file: a regular file within the loading cap.
    pub fn read(path: &Path) -> Result<TorchFile> {
        let bytes = input_file::read(path, &Cap::loading())?;
        Self::from_bytes(&bytes, &path.display().to_string())
    }

    /// Reads a checkpoint held in memory; `origin` names it in messages.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> Result<TorchFile> {
        let bad = |why: String| WorkbookError::file(origin, why);
        let (format, pickle, storages) = if bytes.starts_with(b"PK\x03\x04") {
            let (pickle, storages) = read_zip(bytes).map_err(bad)?;
            (TorchFormat::Zip, pickle, storages)
        } else if bytes.starts_with(LEGACY_MAGIC) {
            let (pickle, storages) = read_legacy(bytes).map_err(bad)?;
            (TorchFormat::Legacy, pickle, storages)
        } else {
            return Err(bad(
                "is not a torch.save file: it is neither a zip archive (PyTorch >= 1.6) nor the legacy format (it should start with PyTorch's magic number). A safetensors file loads with checkpoint::load or --model".into(),
            ));
        };
        refuse_code(&pickle, origin)?;
        let mut notes = Vec::new();
        let dict = state_dict_of(&pickle, &mut notes).map_err(bad)?;
        let mut tensors = Vec::with_capacity(dict.len());
        for (key, value) in dict {
            let name = pickle
                .as_str(key)
                .ok_or_else(|| {
                    bad(format!(
                        "a state_dict key is a {}, not a str",
                        pickle.describe(key)
                    ))
                })?
                .to_string();
            let tensor = rebuild(&pickle, value, &storages, &name, format)
                .map_err(|why| bad(format!("tensor '{name}': {why}")))?;
            tensors.push(tensor);
        }
        Ok(TorchFile {
            origin: origin.to_string(),
            format,
            tensors,
            notes,
        })
    }

    /// The distinct saved locations, sorted (`["cpu"]`, `["cuda:0"]`).
    pub fn locations(&self) -> Vec<&str> {
        let set: BTreeSet<&str> = self.tensors.iter().map(|t| t.location.as_str()).collect();
        set.into_iter().collect()
    }

    /// The tensors placed as `map` says (PyTorch's `torch.load(path, map_location=...)`).
    /// A tensor saved on a device this machine lacks, and not mapped elsewhere, fails the
    /// whole load with [`WorkbookError::SavedOnMissingDevice`], as PyTorch does.
    pub fn to_tensors(&self, map: &MapLocation) -> Result<HashMap<String, Tensor>> {
        let placements = self.placements(map)?;
        let mut out = HashMap::with_capacity(self.tensors.len());
        for (t, placement) in self.tensors.iter().zip(placements) {
            let host = t.to_host()?;
            out.insert(
                t.name.clone(),
                placement.move_tensor(&host, &Placement::cpu(), &t.name)?,
            );
        }
        Ok(out)
    }

    /// The tensors on the host, not yet placed.
    pub fn host_tensors(&self) -> Result<HashMap<String, Tensor>> {
        self.tensors
            .iter()
            .map(|t| Ok((t.name.clone(), t.to_host()?)))
            .collect()
    }

    /// The one placement `map` sends every tensor to: a model lives on one device, so tensors
    /// mapped to several are an error that says how to map them to one.
    pub fn placement(&self, map: &MapLocation) -> Result<Placement> {
        let placements = self.placements(map)?;
        // Each device once, however the file interleaves them.
        let names: Vec<String> = placements
            .iter()
            .map(|p| p.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        match placements.into_iter().next() {
            None => Ok(map.target("cpu").cloned().unwrap_or_else(Placement::cpu)),
            Some(first) if names.len() == 1 => Ok(first),
            Some(_) => Err(WorkbookError::InvalidConfig(format!(
                "{}: its tensors would go to {} (where they were saved, or as mapped); a model lives on one device: map them all to one, e.g. --map-location cpu",
                self.origin,
                names.join(" and ")
            ))),
        }
    }

    /// Where each tensor goes, in order.
    fn placements(&self, map: &MapLocation) -> Result<Vec<Placement>> {
        let mut opened: HashMap<String, Placement> = HashMap::new();
        let mut out = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            let placement = match map.target(&t.location) {
                Some(p) => p.clone(),
                None => match opened.get(&t.location) {
                    Some(p) => p.clone(),
                    None => {
                        let p = open_saved(&t.location).map_err(|reason| {
                            WorkbookError::SavedOnMissingDevice {
                                origin: self.origin.clone(),
                                tensor: t.name.clone(),
                                location: t.location.clone(),
                                reason,
                            }
                        })?;
                        opened.insert(t.location.clone(), p.clone());
                        p
                    }
                },
            };
            out.push(placement);
        }
        Ok(out)
    }
}

impl SavedTensor {
    /// The tensor in host memory.
    pub fn to_host(&self) -> Result<Tensor> {
        Ok(Tensor::from_raw_buffer(
            &self.bytes,
            self.dtype,
            &self.shape,
            &Device::Cpu,
        )?)
    }
}

/// Opens the device a storage was saved on, or says why this machine cannot.
fn open_saved(location: &str) -> std::result::Result<Placement, String> {
    match saved_location(location) {
        Some(l) if l == "cpu" => Ok(Placement::cpu()),
        Some(l) => {
            let n: usize = l["cuda:".len()..].parse().expect("normalised above");
            crate::placement::open_cuda(n).map(|d| Placement::of(&d))
        }
        None => Err(format!(
            "'{location}' is not a device this library runs on (cpu, cuda:N)"
        )),
    }
}

/// `archive/data.pkl` and the storages `archive/data/<key>` of a zip checkpoint.
fn read_zip(bytes: &[u8]) -> std::result::Result<(Pickle, Storages), String> {
    // PyTorch writes archives that start at byte 0; the crate's detection of prepended bytes
    // misreads some of them (seen: the DataParallel fixture), so the offset is given.
    let config = zip::read::Config {
        archive_offset: zip::read::ArchiveOffset::Known(0),
    };
    let mut zip = zip::ZipArchive::with_config(config, std::io::Cursor::new(bytes))
        .map_err(|e| format!("is a zip archive that cannot be read: {e}"))?;
    let names: Vec<String> = zip
        .file_names()
        .map(|n| n.map(|n| n.into_owned()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("is a zip archive whose entry names cannot be read: {e}"))?;
    let pkl: Vec<&String> = names.iter().filter(|n| n.ends_with("/data.pkl")).collect();
    let [pkl] = pkl.as_slice() else {
        return Err(format!(
            "is a zip archive but not a torch.save file: it should hold exactly one '<name>/data.pkl', and holds {}",
            pkl.len()
        ));
    };
    let root = pkl.trim_end_matches("data.pkl").to_string();
    let mut read = |name: &str| -> std::result::Result<Vec<u8>, String> {
        let mut entry = zip
            .by_name(name)
            .map_err(|e| format!("its entry '{name}' cannot be read: {e}"))?;
        // PyTorch stores entries uncompressed; a declared size beyond the file is a lie.
        if entry.size() > bytes.len() as u64 {
            return Err(format!(
                "its entry '{name}' claims {} bytes, more than the whole file",
                entry.size()
            ));
        }
        let mut out = Vec::with_capacity(entry.size() as usize);
        entry
            .by_ref()
            .take(bytes.len() as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("its entry '{name}' cannot be read: {e} (PyTorch writes entries uncompressed; was the file re-zipped?)"))?;
        Ok(out)
    };
    if names.iter().any(|n| *n == format!("{root}byteorder")) {
        let order = read(&format!("{root}byteorder"))?;
        if order != b"little" {
            return Err(format!(
                "was saved on a big-endian machine (byteorder '{}'); load and re-save it with PyTorch on a little-endian one",
                String::from_utf8_lossy(&order)
            ));
        }
    }
    let pickle = Pickle::parse(&read(pkl)?).map_err(|e| format!("its data.pkl: {e}"))?;
    let mut storages = Storages::default();
    for key in storage_keys(&pickle)? {
        let data = read(&format!("{root}data/{key}"))?;
        storages.0.insert(key, data);
    }
    Ok((pickle, storages))
}

/// The pickles and raw storages of a legacy checkpoint: magic number, protocol version,
/// system info, the state_dict, the storage keys, then each storage as an 8-byte element count
/// and its bytes, in the order of the keys.
fn read_legacy(bytes: &[u8]) -> std::result::Result<(Pickle, Storages), String> {
    let limits = Limits::default();
    let mut at = LEGACY_MAGIC.len();
    let mut next = |what: &str| -> std::result::Result<Pickle, String> {
        let (p, used) = Pickle::parse_prefix(&bytes[at..], &limits)
            .map_err(|e| format!("its {what} (legacy format, at byte {at}): {e}"))?;
        at += used;
        Ok(p)
    };
    let protocol = next("protocol version")?;
    if protocol.as_int(protocol.root()) != Some(1001) {
        return Err(
            "is a legacy torch.save file of an unknown protocol version (1001 expected)".into(),
        );
    }
    let info = next("system info")?;
    if info
        .dict_get(info.root(), b"little_endian")
        .and_then(|v| info.as_bool(v))
        == Some(false)
    {
        return Err("was saved on a big-endian machine; load and re-save it with PyTorch on a little-endian one".into());
    }
    let pickle = next("state_dict pickle")?;
    let keys = next("list of storage keys")?;
    let keys: Vec<String> = keys
        .as_list(keys.root())
        .ok_or("its list of storage keys is not a list")?
        .iter()
        .map(|&k| {
            keys.as_str(k)
                .map(str::to_string)
                .ok_or("a storage key is not a str")
        })
        .collect::<std::result::Result<_, _>>()?;
    let sizes = storage_element_sizes(&pickle)?;
    let mut storages = Storages::default();
    for key in keys {
        let elem = *sizes
            .get(&key)
            .ok_or_else(|| format!("storage '{key}' is listed but no tensor uses it"))?;
        let count = bytes
            .get(at..at + 8)
            .ok_or_else(|| format!("is truncated: storage '{key}' is missing"))?;
        let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
        at += 8;
        let len = count
            .checked_mul(elem as u64)
            .filter(|&n| n <= (bytes.len() - at) as u64)
            .ok_or_else(|| {
                format!(
                    "is truncated: storage '{key}' says {count} elements, more than the file holds"
                )
            })? as usize;
        storages.0.insert(key, bytes[at..at + len].to_vec());
        at += len;
    }
    if at != bytes.len() {
        return Err(format!(
            "has {} bytes after its last storage (a truncated or altered file?)",
            bytes.len() - at
        ));
    }
    Ok((pickle, storages))
}

/// Storage bytes by key.
#[derive(Default)]
struct Storages(HashMap<String, Vec<u8>>);

/// A storage reference: `('storage', torch.FloatStorage, key, location, numel[, view])`.
struct StorageRef {
    dtype: DType,
    key: String,
    location: String,
}

fn storage_ref(p: &Pickle, v: Value) -> std::result::Result<StorageRef, String> {
    let Some(Object::PersistentId(id)) = p.object_of(v) else {
        return Err(format!(
            "its storage is a {}, not a storage reference",
            p.describe(v)
        ));
    };
    parse_storage_id(p, *id)
}

/// A persistent id as `torch.save` writes it for a storage.
fn parse_storage_id(p: &Pickle, id: Value) -> std::result::Result<StorageRef, String> {
    let t = p
        .as_tuple(id)
        .filter(|t| t.len() >= 5 && p.as_str(t[0]) == Some("storage"))
        .ok_or("its storage reference is not ('storage', type, key, location, size)")?;
    let (module, class) = p
        .as_global(t[1])
        .ok_or("its storage type is not a class name")?;
    let dtype = storage_dtype(module, class)?;
    let key = p
        .as_str(t[2])
        .ok_or("its storage key is not a str")?
        .to_string();
    let location = p
        .as_str(t[3])
        .ok_or("its storage location is not a str")?
        .to_string();
    Ok(StorageRef {
        dtype,
        key,
        location,
    })
}

fn storage_dtype(module: &str, class: &str) -> std::result::Result<DType, String> {
    let dtype = match (module, class) {
        ("torch", "FloatStorage") => DType::F32,
        ("torch", "DoubleStorage") => DType::F64,
        ("torch", "HalfStorage") => DType::F16,
        ("torch", "BFloat16Storage") => DType::BF16,
        ("torch", "LongStorage") => DType::I64,
        ("torch", "IntStorage") => DType::I32,
        ("torch", "ShortStorage") => DType::I16,
        ("torch", "ByteStorage") | ("torch", "BoolStorage") => DType::U8,
        _ => {
            return Err(format!(
                "its storage type {module}.{class} is not one this reader knows (float32/64, float16, bfloat16, int64/32/16, uint8, bool)"
            ))
        }
    };
    Ok(dtype)
}

/// Every storage key a pickle refers to.
fn storage_keys(p: &Pickle) -> std::result::Result<BTreeSet<String>, String> {
    Ok(storage_element_sizes(p)?.into_keys().collect())
}

/// Every storage key a pickle refers to, with the size of one element.
fn storage_element_sizes(p: &Pickle) -> std::result::Result<HashMap<String, usize>, String> {
    let mut sizes = HashMap::new();
    for obj in p.objects() {
        if let Object::PersistentId(id) = obj {
            let storage = parse_storage_id(p, *id)?;
            sizes.insert(storage.key, storage.dtype.size_in_bytes());
        }
    }
    Ok(sizes)
}

/// Refuses a pickle that names any global a state_dict does not use.
fn refuse_code(p: &Pickle, origin: &str) -> Result<()> {
    let mut foreign: Vec<String> = Vec::new();
    for obj in p.objects() {
        if let Object::Global { module, name } = obj {
            let allowed = ALLOWED_GLOBALS.contains(&(module.as_str(), name.as_str()))
                || storage_dtype(module, name).is_ok();
            let full = format!("{module}.{name}");
            if !allowed && !foreign.contains(&full) {
                foreign.push(full);
            }
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    Err(WorkbookError::PickledCode {
        origin: origin.to_string(),
        first: foreign[0].clone(),
        count: foreign.len(),
    })
}

/// The `(key, value)` items of the state_dict: the root, or a state_dict nested in a training
/// checkpoint dict (`{"model_state_dict": ..., "optimizer_state_dict": ..., "epoch": 5}`).
fn state_dict_of(
    p: &Pickle,
    notes: &mut Vec<String>,
) -> std::result::Result<Vec<(Value, Value)>, String> {
    let root = dict_items(p, p.root()).ok_or_else(|| {
        format!(
            "holds a {}, not a state_dict (a dict of tensors); save model.state_dict()",
            p.describe(p.root())
        )
    })?;
    if root.iter().all(|&(_, v)| is_tensor(p, v)) {
        return Ok(root);
    }
    for key in ["state_dict", "model_state_dict", "model"] {
        if let Some(&(_, v)) = root.iter().find(|&&(k, _)| p.as_str(k) == Some(key)) {
            if let Some(inner) =
                dict_items(p, v).filter(|d| d.iter().all(|&(_, v)| is_tensor(p, v)))
            {
                notes.push(format!(
                    "the file is a training checkpoint (a dict of {} entries); its '{key}' entry is the model's state_dict, the rest is ignored",
                    root.len()
                ));
                return Ok(inner);
            }
        }
    }
    let keys: Vec<String> = root
        .iter()
        .take(8)
        .map(|&(k, _)| {
            p.as_str(k)
                .map_or_else(|| p.describe(k), |s| format!("'{s}'"))
        })
        .collect();
    Err(format!(
        "holds a dict whose values are not all tensors (keys {}), and none of its 'state_dict', 'model_state_dict' or 'model' entries is a state_dict; save model.state_dict() on its own",
        keys.join(", ")
    ))
}

/// The items of a dict or of an `OrderedDict()` filled by `SETITEMS`, in order.
fn dict_items(p: &Pickle, v: Value) -> Option<Vec<(Value, Value)>> {
    if let Some(d) = p.as_dict(v) {
        return Some(d.to_vec());
    }
    let call = p.as_call(v)?;
    (p.as_global(call.callable) == Some(("collections", "OrderedDict")))
        .then(|| call.dict_items.clone())
}

fn is_tensor(p: &Pickle, v: Value) -> bool {
    matches!(
        p.call_global(v),
        Some(("torch._utils", "_rebuild_tensor_v2")) | Some(("torch._utils", "_rebuild_parameter"))
    )
}

/// A tensor from `_rebuild_tensor_v2(storage, offset, size, stride, ...)` (or a
/// `_rebuild_parameter` around one), its elements copied out of the storage in row-major order.
fn rebuild(
    p: &Pickle,
    v: Value,
    storages: &Storages,
    name: &str,
    format: TorchFormat,
) -> std::result::Result<SavedTensor, String> {
    let call = p
        .as_call(v)
        .ok_or_else(|| format!("is a {}, not a tensor", p.describe(v)))?;
    let args = p
        .as_tuple(call.args)
        .ok_or("its arguments are not a tuple")?;
    match p.as_global(call.callable) {
        Some(("torch._utils", "_rebuild_parameter")) => {
            let inner = *args.first().ok_or("a parameter without its data")?;
            return rebuild(p, inner, storages, name, format);
        }
        Some(("torch._utils", "_rebuild_tensor_v2")) => {}
        _ => return Err(format!("is a {}, not a tensor", p.describe(v))),
    }
    if args.len() < 4 {
        return Err("_rebuild_tensor_v2 takes (storage, offset, size, stride, ...)".into());
    }
    let storage = storage_ref(p, args[0])?;
    let offset = non_negative(p.as_int(args[1]), "storage offset")?;
    let ints = |v: Value, what: &str| -> std::result::Result<Vec<usize>, String> {
        p.as_tuple(v)
            .ok_or_else(|| format!("its {what} is not a tuple"))?
            .iter()
            .map(|&x| non_negative(p.as_int(x), what))
            .collect()
    };
    let shape = ints(args[2], "size")?;
    let stride = ints(args[3], "stride")?;
    if shape.len() != stride.len() {
        return Err(format!(
            "its size {shape:?} and stride {stride:?} have different lengths"
        ));
    }
    let data = storages.0.get(&storage.key).ok_or_else(|| {
        format!(
            "its storage '{}' is not in the file ({})",
            storage.key,
            match format {
                TorchFormat::Zip => "no data/ entry of that name",
                TorchFormat::Legacy => "not among the saved storages",
            }
        )
    })?;
    let elem = storage.dtype.size_in_bytes();
    let stored = data.len() / elem;
    // A state_dict's tensors own their storage, so none is larger than it: this bounds what a
    // crafted size with zero strides could make the reader allocate.
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= stored)
        .ok_or_else(|| {
            format!("its size {shape:?} is larger than its storage ({stored} elements)")
        })?;
    let mut bytes = Vec::with_capacity(numel * elem);
    if numel > 0 {
        // The last element read must lie inside the storage.
        let last = shape.iter().zip(&stride).try_fold(offset, |a, (&d, &s)| {
            (d - 1).checked_mul(s).and_then(|x| a.checked_add(x))
        });
        if last.is_none_or(|l| l >= stored) {
            return Err(format!(
                "its offset {offset}, size {shape:?} and stride {stride:?} reach past its storage of {stored} elements"
            ));
        }
        let mut index = vec![0usize; shape.len()];
        for _ in 0..numel {
            let at = offset + index.iter().zip(&stride).map(|(i, s)| i * s).sum::<usize>();
            bytes.extend_from_slice(&data[at * elem..(at + 1) * elem]);
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
    Ok(SavedTensor {
        name: name.to_string(),
        dtype: storage.dtype,
        shape,
        location: storage.location,
        bytes,
    })
}

fn non_negative(v: Option<i64>, what: &str) -> std::result::Result<usize, String> {
    v.and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| format!("its {what} is not a non-negative integer"))
}
