//! The Python interpreter some graded tests run (04-3 checks its ONNX file with onnxruntime),
//! made visible inside the sandbox: `WORKBOOK_PYTHON` names it, as in a student's own run; a
//! virtual environment is mounted read-only with the installation it was made from, at the same
//! paths, so that the interpreter finds its packages.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::create_dir_all(dir.path().join("venv/bin")).unwrap();
//! std::fs::write(dir.path().join("venv/pyvenv.cfg"), "home = /opt/py/bin\n").unwrap();
//! let python = grader::python::Python::at(&dir.path().join("venv/bin/python"));
//! assert!(python.mounts.contains(&dir.path().join("venv")));
//! assert!(python.mounts.contains(&std::path::PathBuf::from("/opt/py")));
//! ```

use std::path::{Path, PathBuf};

/// The variable naming the interpreter.
pub const PYTHON_ENV: &str = "WORKBOOK_PYTHON";

/// An interpreter and what must be mounted for it.
#[derive(Clone, Debug)]
pub struct Python {
    /// The interpreter, as tests are told (`WORKBOOK_PYTHON`).
    pub executable: PathBuf,
    /// Folders to mount read-only at their own paths.
    pub mounts: Vec<PathBuf>,
}

impl Python {
    /// `WORKBOOK_PYTHON` of the grader's environment (relative to `root` when relative), if set.
    pub fn from_env(root: &Path) -> Option<Self> {
        let chosen = PathBuf::from(std::env::var_os(PYTHON_ENV)?);
        let path = if chosen.is_relative() && chosen.components().count() > 1 {
            std::env::current_dir()
                .ok()
                .map(|d| d.join(&chosen))
                .filter(|p| p.exists())
                .unwrap_or_else(|| root.join(&chosen))
        } else {
            chosen
        };
        Some(Self::at(&path))
    }

    /// The interpreter at `path`: its virtual environment (a `pyvenv.cfg` beside its `bin/`)
    /// and that environment's base installation, or the folder above its `bin/`.
    pub fn at(path: &Path) -> Self {
        let mut mounts = Vec::new();
        let prefix = path.parent().and_then(Path::parent).map(Path::to_path_buf);
        if let Some(prefix) = prefix.filter(|p| p != Path::new("/") && p != Path::new("/usr")) {
            if let Ok(cfg) = std::fs::read_to_string(prefix.join("pyvenv.cfg")) {
                let home = cfg.lines().find_map(|l| {
                    let (k, v) = l.split_once('=')?;
                    (k.trim() == "home").then(|| PathBuf::from(v.trim()))
                });
                if let Some(base) = home.as_deref().and_then(Path::parent) {
                    if base != Path::new("/usr") && base != Path::new("/") {
                        mounts.push(base.to_path_buf());
                    }
                }
            }
            mounts.push(prefix);
        }
        // The interpreter may be a link into yet another installation.
        if let Ok(real) = std::fs::canonicalize(path) {
            if let Some(base) = real.parent().and_then(Path::parent) {
                if !mounts.iter().any(|m| base.starts_with(m))
                    && !base.starts_with("/usr")
                    && base != Path::new("/")
                {
                    mounts.push(base.to_path_buf());
                }
            }
        }
        Self {
            executable: path.to_path_buf(),
            mounts,
        }
    }

    /// The first folder on the way to the interpreter or one of its mounts that users other
    /// than its owner cannot enter (no `x` for others, as `/root` is): as root, each sandbox
    /// runs as a user of its own, which could not reach the interpreter there.
    pub fn closed_to_others(&self) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let mut paths = self.mounts.clone();
        paths.push(self.executable.clone());
        if let Ok(real) = std::fs::canonicalize(&self.executable) {
            paths.push(real);
        }
        for path in paths {
            for dir in path
                .ancestors()
                .skip(1)
                .chain(std::iter::once(path.as_path()))
            {
                let Ok(meta) = std::fs::metadata(dir) else {
                    continue;
                };
                if meta.is_dir() && meta.permissions().mode() & 0o001 == 0 {
                    return Some(dir.to_path_buf());
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_interpreter_in_a_closed_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("home/venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("python"), "").unwrap();
        let home = dir.path().join("home");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
        let python = Python::at(&bin.join("python"));
        assert_eq!(python.closed_to_others(), None);
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(python.closed_to_others(), Some(home.clone()));
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
