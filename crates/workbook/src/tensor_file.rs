//! Reading and writing safetensors files with errors a user can act on.
//!
//! Weights, graphs and predictions all travel as safetensors (the format PyTorch users get from
//! `safetensors.torch.save_file`). Reads take regular files no larger than the loading cap
//! ([`crate::input_file`]) and check the header before trusting it; writes are atomic
//! ([`crate::atomic_write`]).
//!
//! ```
//! use workbook::tensor_file;
//! use workbook::candle_core::{Device, Tensor};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("t.safetensors");
//! let t = Tensor::new(&[1f32, 2.], &Device::Cpu).unwrap();
//! tensor_file::write(&path, &[("w".into(), t)], None).unwrap();
//! let back = tensor_file::read(&path, &Device::Cpu).unwrap();
//! assert_eq!(back.tensors["w"].to_vec1::<f32>().unwrap(), vec![1., 2.]);
//! std::fs::write(&path, b"\x10\0\0\0\0\0\0\0{").unwrap();
//! assert!(tensor_file::read(&path, &Device::Cpu).unwrap_err().to_string().contains("not a valid safetensors file"));
//! ```

use crate::error::{Result, WorkbookError};
use candle_core::safetensors::Load;
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// The tensors of a file, by name, and the file's string metadata.
#[derive(Debug)]
pub struct TensorFile {
    pub tensors: HashMap<String, Tensor>,
    pub metadata: HashMap<String, String>,
}

/// Parses safetensors bytes (`origin` names the source in errors), placing tensors on `device`.
pub fn parse(bytes: &[u8], origin: &Path, device: &Device) -> Result<TensorFile> {
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| {
        WorkbookError::file(
            origin,
            format!("not a valid safetensors file ({e}); is it truncated, or saved with torch.save instead of safetensors.torch.save_file?"),
        )
    })?;
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| WorkbookError::file(origin, format!("unreadable header: {e}")))?;
    let mut tensors = HashMap::new();
    for (name, view) in st.tensors() {
        let t = view.load(device).map_err(|e| {
            WorkbookError::file(origin, format!("tensor '{name}' cannot be loaded: {e}"))
        })?;
        tensors.insert(name, t);
    }
    Ok(TensorFile {
        tensors,
        metadata: meta.metadata().clone().unwrap_or_default(),
    })
}

/// Reads a safetensors file onto `device`: a regular file within
/// [`Cap::loading`](crate::input_file::Cap::loading).
pub fn read(path: &Path, device: &Device) -> Result<TensorFile> {
    let bytes = crate::input_file::read(path, &crate::input_file::Cap::loading())?;
    parse(&bytes, path, device)
}

/// The safetensors bytes of `tensors` (any device; they are copied to the host); `path` names
/// the destination in errors.
pub fn serialize(
    path: &Path,
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>> {
    let host: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(n, t)| Ok((n.clone(), t.to_device(&Device::Cpu)?.contiguous()?)))
        .collect::<Result<_>>()?;
    safetensors::serialize(host.iter().map(|(n, t)| (n.as_str(), t)), metadata)
        .map_err(|e| WorkbookError::file(path, format!("cannot serialise: {e}")))
}

/// Writes tensors (any device; they are copied to the host) atomically.
pub fn write(
    path: &Path,
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<()> {
    crate::atomic_write::write(path, &serialize(path, tensors, metadata)?)
}
