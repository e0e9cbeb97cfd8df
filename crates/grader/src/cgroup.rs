//! A control group per sandbox: the limits a judge needs per student (IOI's `isolate` keeps one
//! per box) that `setrlimit` cannot give, because rlimits are per process or per user while a
//! student's run is many processes. Each box gets `pids.max` (a fork bomb stops at its own
//! count, not at the machine's), a memory limit with swap off (which also counts the box's
//! private `/tmp`: tmpfs pages are charged to the group that writes them), and an equal CPU
//! weight (64 spinning threads get one box's share, not the machine). When the run ends every
//! process still in the group is killed.
//!
//! cgroup v2 is used where its controllers are available (most machines; for a non-root teacher,
//! a delegated subtree, e.g. under `systemd-run --user --scope -p Delegate=yes`); else the v1
//! hierarchies (`memory`, `pids`, `cpu`) of a hybrid machine; else none, and the grader says so
//! ([`Cgroups::None`]).
//!
//! ```
//! let found = grader::cgroup::Cgroups::detect();
//! // Whatever this machine has, it can say what.
//! assert!(!found.describe().is_empty());
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The control groups this grader can create boxes in.
#[derive(Clone, Debug)]
pub enum Cgroups {
    /// A cgroup v2 folder of ours whose children get `memory`, `pids` and `cpu`.
    V2(PathBuf),
    /// cgroup v1 folders of ours, one per hierarchy.
    V1 {
        /// In the `memory` hierarchy.
        memory: PathBuf,
        /// In the `pids` hierarchy.
        pids: PathBuf,
        /// In the `cpu` hierarchy, when there is one we may write.
        cpu: Option<PathBuf>,
    },
    /// None usable, and why.
    None(String),
}

/// A limit a run was stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitHit {
    /// The box's memory (bytes), with its `/tmp`.
    Memory(u64),
    /// The box's processes and threads.
    Processes(u64),
}

impl LimitHit {
    /// What a report says.
    pub fn describe(self) -> String {
        match self {
            LimitHit::Memory(bytes) => format!(
                "used more than {} of memory (the sandbox's limit, its /tmp included) and was killed",
                human_bytes(bytes)
            ),
            LimitHit::Processes(n) => format!(
                "tried to run more than {n} processes and threads at once (the sandbox's limit)"
            ),
        }
    }
}

/// `2 GiB`, `512 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if bytes >= GIB && bytes.is_multiple_of(GIB) {
        format!("{} GiB", bytes / GIB)
    } else {
        format!("{} MiB", bytes / MIB)
    }
}

/// One box's groups, removed (with whatever still runs in them) when dropped.
#[derive(Debug)]
pub struct BoxGroup {
    v2: bool,
    dirs: Vec<PathBuf>,
    memory: u64,
    processes: u64,
}

/// Set to `none`, the grader uses no control group.
pub const NO_CGROUPS_ENV: &str = "WORKBOOK_CGROUPS";

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Cgroups {
    /// What this machine offers.
    pub fn detect() -> Self {
        // To see what a machine without control groups gets (tests, or a teacher comparing).
        if std::env::var_os(NO_CGROUPS_ENV).is_some_and(|v| v == "none") {
            return Cgroups::None(format!("{NO_CGROUPS_ENV}=none"));
        }
        let mine = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut why = Vec::new();
        match v2(&mine, &mounts) {
            Ok(dir) => return Cgroups::V2(dir),
            Err(e) => why.push(format!("cgroup v2: {e}")),
        }
        match v1(&mine, &mounts) {
            Ok(found) => return found,
            Err(e) => why.push(format!("cgroup v1: {e}")),
        }
        Cgroups::None(why.join("; "))
    }

    /// Whether boxes get groups.
    pub fn available(&self) -> bool {
        !matches!(self, Cgroups::None(_))
    }

    /// One line for the start of a run and for every report.
    pub fn describe(&self) -> String {
        match self {
            Cgroups::V2(_) => "a cgroup (v2) per sandbox: memory, processes and CPU share per student".into(),
            Cgroups::V1 { .. } => "a cgroup (v1) per sandbox: memory, processes and CPU share per student".into(),
            Cgroups::None(why) => format!(
                "NO CGROUPS ({why}): memory and processes are limited per process only (address space, and a process count per sandbox user when run as root), so one student's run can still crowd out a classmate's"
            ),
        }
    }

    /// A fresh group for one box, `memory` bytes (swap off) and `processes` tasks at most.
    pub fn create(&self, memory: u64, processes: u64) -> std::io::Result<Option<BoxGroup>> {
        let name = format!(
            "box-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut group = BoxGroup {
            v2: matches!(self, Cgroups::V2(_)),
            dirs: Vec::new(),
            memory,
            processes,
        };
        match self {
            Cgroups::None(_) => return Ok(None),
            Cgroups::V2(parent) => {
                let dir = parent.join(&name);
                std::fs::create_dir(&dir)?;
                group.dirs.push(dir.clone());
                set(&dir, "memory.max", memory)?;
                // Not every kernel has swap accounting; with no swap there is nothing to turn off.
                let _ = set(&dir, "memory.swap.max", 0);
                set(&dir, "pids.max", processes)?;
                let _ = set(&dir, "cpu.weight", 100);
            }
            Cgroups::V1 {
                memory: m,
                pids,
                cpu,
            } => {
                let dir = m.join(&name);
                std::fs::create_dir(&dir)?;
                group.dirs.push(dir.clone());
                set(&dir, "memory.limit_in_bytes", memory)?;
                // memory+swap at the same value: no swap (where swap is accounted at all).
                let _ = set(&dir, "memory.memsw.limit_in_bytes", memory);
                let _ = set(&dir, "memory.swappiness", 0);
                let dir = pids.join(&name);
                std::fs::create_dir(&dir)?;
                group.dirs.push(dir.clone());
                set(&dir, "pids.max", processes)?;
                if let Some(cpu) = cpu {
                    let dir = cpu.join(&name);
                    if std::fs::create_dir(&dir).is_ok() {
                        group.dirs.push(dir.clone());
                        let _ = set(&dir, "cpu.shares", 1024);
                    }
                }
            }
        }
        Ok(Some(group))
    }
}

fn set(dir: &Path, file: &str, value: u64) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(file))?
        .write_all(value.to_string().as_bytes())
}

/// The mount point of the hierarchy whose super options or type match, from mountinfo.
fn mount_point(mounts: &str, v2: bool, controller: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let point = left.split(' ').nth(4)?;
        let mut right = right.split(' ');
        let fstype = right.next()?;
        let options = right.nth(1).unwrap_or_default();
        let fits = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && options.split(',').any(|o| o == controller)
        };
        fits.then(|| PathBuf::from(point))
    })
}

/// This process's path in the hierarchy named `key` (`""` for v2) of /proc/self/cgroup.
fn own_path(mine: &str, key: &str) -> Option<String> {
    mine.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
        let fits = if key.is_empty() {
            names.is_empty()
        } else {
            names.split(',').any(|n| n == key)
        };
        fits.then(|| path.trim_start_matches('/').to_string())
    })
}

fn v2(mine: &str, mounts: &str) -> Result<PathBuf, String> {
    let point = mount_point(mounts, true, "").ok_or("not mounted")?;
    let own = own_path(mine, "").ok_or("this process is in none")?;
    let here = point.join(&own);
    let controllers = std::fs::read_to_string(here.join("cgroup.controllers"))
        .map_err(|e| format!("{}: {e}", here.display()))?;
    for needed in ["memory", "pids"] {
        if !controllers.split_whitespace().any(|c| c == needed) {
            return Err(format!(
                "the {needed} controller is not available in {} (controllers: {:?})",
                here.display(),
                controllers.trim()
            ));
        }
    }
    // v2 lets only a group without processes hand controllers to its children: the grader moves
    // itself into a leaf of its own, and the boxes go beside it.
    let leaf = here.join(format!("grader-{}", std::process::id()));
    let boxes = here.join(format!("boxes-{}", std::process::id()));
    let prepare = || -> std::io::Result<()> {
        std::fs::create_dir_all(&leaf)?;
        std::fs::create_dir_all(&boxes)?;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(leaf.join("cgroup.procs"))?
            .write_all(std::process::id().to_string().as_bytes());
        for dir in [&here, &boxes] {
            let mut control = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.subtree_control"))?;
            control.write_all(b"+memory +pids")?;
            let _ = control.write_all(b"+cpu");
        }
        Ok(())
    };
    prepare().map_err(|e| {
        format!(
            "cannot create groups under {} ({e}); delegate one to the grader (systemd-run --user --scope -p Delegate=yes cargo grade ...)",
            here.display()
        )
    })?;
    Ok(boxes)
}

fn v1(mine: &str, mounts: &str) -> Result<Cgroups, String> {
    let writable = |controller: &str| -> Result<PathBuf, String> {
        let point = mount_point(mounts, false, controller)
            .ok_or_else(|| format!("no {controller} hierarchy"))?;
        let own = own_path(mine, controller).unwrap_or_default();
        let dir = point.join(own);
        let probe = dir.join(format!("workbook-probe-{}", std::process::id()));
        std::fs::create_dir(&probe).map_err(|e| format!("{}: {e}", dir.display()))?;
        let _ = std::fs::remove_dir(&probe);
        Ok(dir)
    };
    Ok(Cgroups::V1 {
        memory: writable("memory")?,
        pids: writable("pids")?,
        cpu: writable("cpu").ok(),
    })
}

impl BoxGroup {
    /// The `cgroup.procs` files a process joins the box through (opened by the parent, written
    /// `0` by the child before it drops its privileges).
    pub fn procs(&self) -> std::io::Result<Vec<std::fs::File>> {
        self.dirs
            .iter()
            .map(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("cgroup.procs"))
            })
            .collect()
    }

    /// The limit the run hit, if any (the kernel's own counters).
    pub fn hit(&self) -> Option<LimitHit> {
        let counter = |file: &Path, key: &str| -> u64 {
            std::fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().parse().ok()).flatten()
                })
                .unwrap_or(0)
        };
        let memory = &self.dirs[0];
        // Killed by the group's out-of-memory killer (reaching the limit and reclaiming the page
        // cache, which an honest run may do, is not a kill).
        let oom = if self.v2 {
            counter(&memory.join("memory.events"), "oom_kill")
        } else {
            counter(&memory.join("memory.oom_control"), "oom_kill")
        };
        if oom > 0 {
            return Some(LimitHit::Memory(self.memory));
        }
        let pids = if self.v2 { memory } else { &self.dirs[1] };
        if counter(&pids.join("pids.events"), "max") > 0 {
            return Some(LimitHit::Processes(self.processes));
        }
        None
    }

    /// Kills every process in the box (there should be none: the PID namespace went with
    /// bubblewrap).
    pub fn kill_all(&self) {
        if self.v2 && std::fs::write(self.dirs[0].join("cgroup.kill"), "1").is_ok() {
            return;
        }
        for _ in 0..100 {
            let mut any = false;
            for dir in &self.dirs {
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                    any = true;
                    // SAFETY: kill(2) of a process in the box's own group, a constant signal.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
            if !any {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Processes still in the box.
    pub fn left(&self) -> usize {
        self.dirs
            .iter()
            .map(|d| {
                std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

impl Drop for BoxGroup {
    fn drop(&mut self) {
        self.kill_all();
        for dir in &self.dirs {
            // A group empties a moment after its last process is reaped.
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory\n36 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    const MINE: &str = "4:memory:/process_api/abc\n0::/\n";

    #[test]
    fn hierarchies_and_own_paths_are_found() {
        assert_eq!(
            mount_point(MOUNTS, false, "memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(mount_point(MOUNTS, false, "pids"), None);
        assert_eq!(
            mount_point(MOUNTS, true, ""),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(own_path(MINE, "memory").as_deref(), Some("process_api/abc"));
        assert_eq!(own_path(MINE, "").as_deref(), Some(""));
        assert_eq!(own_path(MINE, "pids"), None);
    }

    #[test]
    fn limits_are_named_for_people() {
        assert!(LimitHit::Memory(2 << 30)
            .describe()
            .contains("more than 2 GiB"));
        assert!(LimitHit::Processes(256)
            .describe()
            .contains("more than 256"));
        assert_eq!(human_bytes(512 << 20), "512 MiB");
    }
}
