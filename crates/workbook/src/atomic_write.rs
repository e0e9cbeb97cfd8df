//! Writing files so that a crash or an error never leaves half a file behind.
//!
//! The bytes go to a temporary file in the destination's folder, which is flushed and then
//! renamed over the destination: readers see the old file or the new one, never a mix.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("out.json");
//! workbook::atomic_write::write(&path, b"{}").unwrap();
//! assert_eq!(std::fs::read(&path).unwrap(), b"{}");
//! ```

use crate::error::{Result, WorkbookError};
use std::io::Write;
use std::path::Path;

/// Atomically replaces `path` with `bytes`, creating parent folders as needed.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| WorkbookError::io(dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| WorkbookError::io(dir, e))?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| WorkbookError::io(path, e))?;
    tmp.persist(path)
        .map_err(|e| WorkbookError::io(path, e.error))?;
    Ok(())
}
