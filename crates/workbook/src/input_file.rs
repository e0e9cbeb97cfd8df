//! Reading a file a user named, with least privilege: regular files only, and never more than
//! a cap.
//!
//! A path given where a file is expected may name anything: `/dev/zero` or `/dev/urandom`
//! (endless: read until memory runs out), a FIFO (blocks until someone writes), a directory, or
//! a regular file of any size. So before a byte is read the path must be a regular file no
//! larger than the cap, and the read itself stops one byte past the cap (a file that grows
//! meanwhile is refused, not followed). Every error names the file; a size error names its size
//! and the cap.
//!
//! Caps: a model config is at most [`MAX_CONFIG_BYTES`]; a tensor file (weights, graph,
//! checkpoint) at most the memory limit divided by [`LOAD_FACTOR`],
//! since loading one takes about that many times its size ([`Cap::loading`]; the CLI's
//! `--max-memory` raises it).
//!
//! ```
//! use workbook::input_file::{read, Cap};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("c.json");
//! std::fs::write(&path, b"{}").unwrap();
//! assert_eq!(read(&path, &Cap::config()).unwrap(), b"{}");
//! std::fs::write(&path, vec![b' '; 2 << 20]).unwrap();
//! let err = read(&path, &Cap::config()).unwrap_err().to_string();
//! assert!(err.contains("is 2.0 MB") && err.contains("cap of 1.0 MB"), "{err}");
//! assert!(read(dir.path(), &Cap::config()).unwrap_err().to_string().contains("is a directory"));
//! ```

use crate::error::{Result, WorkbookError};
use crate::limits::{format_bytes, memory_limit, LOAD_FACTOR};
use std::fs::Metadata;
use std::io::Read;
use std::path::Path;

/// The most a model config (JSON) may weigh: a config is a few hundred bytes, so a megabyte is
/// already a thousand-layer model.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// How large a file may be, and why (for the message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cap {
    pub bytes: u64,
    /// What the file is and why it is limited so: `a model config (configs are a few hundred
    /// bytes)`.
    pub why: String,
}

impl Cap {
    /// A model config: [`MAX_CONFIG_BYTES`].
    pub fn config() -> Self {
        Self {
            bytes: MAX_CONFIG_BYTES,
            why: "a model config (a config is a few hundred bytes)".into(),
        }
    }

    /// A file to be loaded whole (weights, graph, checkpoint): the memory limit divided by
    /// [`LOAD_FACTOR`], the memory loading takes for each byte of the file.
    pub fn loading() -> Self {
        let limit = memory_limit();
        Self {
            bytes: limit.bytes / LOAD_FACTOR,
            why: format!(
                "a file loaded whole: loading takes about {LOAD_FACTOR} times its size in memory, and the memory limit is {} ({}); raise it with --max-memory",
                format_bytes(limit.bytes),
                limit.source
            ),
        }
    }
}

/// What kind of thing `meta` describes, for a message (`a directory`, `a FIFO (named pipe)`).
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device (like /dev/zero, endless)";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Checks that `path` is a regular file (following symbolic links) and returns its metadata;
/// anything else is an error that says what it is.
pub fn check_regular(path: &Path) -> Result<Metadata> {
    let meta = std::fs::metadata(path).map_err(|e| WorkbookError::io(path, e))?;
    if !meta.is_file() {
        return Err(WorkbookError::file(
            path,
            format!(
                "is {}, not a regular file; give the path of a file",
                kind_of(&meta)
            ),
        ));
    }
    Ok(meta)
}

fn too_large(path: &Path, size: &str, cap: &Cap) -> WorkbookError {
    WorkbookError::file(
        path,
        format!(
            "is {size}, more than the cap of {} for {}",
            format_bytes(cap.bytes),
            cap.why
        ),
    )
}

/// Reads `path` whole if it is a regular file of at most `cap.bytes`.
pub fn read(path: &Path, cap: &Cap) -> Result<Vec<u8>> {
    // Checked on the path first: opening a FIFO would block until a writer comes.
    let meta = check_regular(path)?;
    if meta.len() > cap.bytes {
        return Err(too_large(path, &format_bytes(meta.len()), cap));
    }
    let file = std::fs::File::open(path).map_err(|e| WorkbookError::io(path, e))?;
    // The open file, again: the path may have been replaced since.
    let meta = file.metadata().map_err(|e| WorkbookError::io(path, e))?;
    if !meta.is_file() {
        return Err(WorkbookError::file(
            path,
            format!(
                "is {}, not a regular file; give the path of a file",
                kind_of(&meta)
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(cap.bytes) as usize);
    file.take(cap.bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| WorkbookError::io(path, e))?;
    if bytes.len() as u64 > cap.bytes {
        return Err(too_large(path, "growing while read, past its cap", cap));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, cap: &Cap) -> Result<String> {
    String::from_utf8(read(path, cap)?)
        .map_err(|e| WorkbookError::file(path, format!("is not UTF-8 text ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn endless_and_blocking_files_are_refused_unread() {
        let err = read(Path::new("/dev/zero"), &Cap::loading())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("character device"),
            "{err}"
        );
        // A FIFO nobody writes to: opening it would block for ever.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if matches!(made, Ok(s) if s.success()) {
            let err = read(&fifo, &Cap::config()).unwrap_err().to_string();
            assert!(err.contains("FIFO"), "{err}");
        }
    }

    #[test]
    fn the_cap_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let cap = Cap {
            bytes: 10,
            why: "a test".into(),
        };
        std::fs::write(&path, [1u8; 10]).unwrap();
        assert_eq!(read(&path, &cap).unwrap().len(), 10);
        std::fs::write(&path, [1u8; 11]).unwrap();
        let err = read(&path, &cap).unwrap_err().to_string();
        assert!(
            err.contains("is 11 bytes, more than the cap of 10 bytes for a test"),
            "{err}"
        );
        let missing = read(&dir.path().join("nope"), &cap)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("nope"), "{missing}");
    }
}
