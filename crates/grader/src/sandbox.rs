//! Running untrusted code: a student's compiler run or graded test, confined by
//! [bubblewrap](https://github.com/containers/bubblewrap) (`bwrap`, the sandbox Flatpak uses).
//!
//! Each run gets fresh namespaces (user, PID, network, IPC, UTS, cgroup: no network, no other
//! process to see or signal), no capabilities, a file system made only of what the stage
//! mounts (read-only unless said otherwise) on a read-only root and `/dev`, a private
//! size-limited `/tmp` and a 64 MiB `/dev/shm`, and an environment of exactly the variables the
//! stage passes; bubblewrap itself starts from an empty environment, so no process of the
//! sandbox can read a variable of the teacher's through `/proc`. As root, each sandbox runs as
//! a user of its own (never 0, never the teacher's), so `RLIMIT_NPROC` counts its processes
//! only; where control groups can be had ([`crate::cgroup`]), each sandbox gets one, which caps
//! its memory (its `/tmp` included, no swap), its processes and its CPU share, and names the
//! limit a run was killed at. Resource limits (`setrlimit`, inherited by
//! everything the program starts) cap address space, file size, open files and processes. The
//! wall-clock limit kills the whole PID namespace (bubblewrap's init dies with its parent, and
//! the kernel kills every process of a namespace whose init is gone), so nothing the program
//! started, detached or not, outlives the run, and no pipe stays open. Output is read up to a cap
//! per stream, the rest counted and dropped.
//!
//! [`Confinement::Unconfined`] runs the same way without namespaces (a student's own
//! `cargo grade`, or `--unsafe-no-sandbox`): limits, caps and the time limit still apply (to a
//! process group), but the program sees the whole machine.
//!
//! ```
//! use grader::sandbox::{Confinement, Jail, Limits};
//! let jail = Jail::new(Limits::for_tests(std::time::Duration::from_secs(5)));
//! let done = Confinement::Unconfined
//!     .run(&jail, std::path::Path::new("/bin/echo"), &["hello".to_string()])
//!     .unwrap();
//! assert_eq!(done.stdout.text(), "hello\n");
//! ```

use crate::cgroup::{BoxGroup, Cgroups, LimitHit};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// The file descriptor on which a confined program finds the judge's log pipe (the scenario
/// protocol's constant: no path to it is passed in the environment).
pub const LOG_FD: i32 = scenario::LOG_FD;
/// bubblewrap's program, unless `WORKBOOK_BWRAP` names another (tests use it to simulate a
/// machine without bubblewrap).
pub const BWRAP_ENV: &str = "WORKBOOK_BWRAP";

/// Why a sandbox could not be used or a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// bubblewrap is not installed or cannot create namespaces here.
    #[error("no sandbox: {0}. Class grading runs every student's code in a bubblewrap sandbox; install it (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install bubblewrap`) and make sure unprivileged user namespaces are allowed (`sysctl kernel.unprivileged_userns_clone=1` on older Debian kernels). Only if every student is trusted: --unsafe-no-sandbox")]
    Unavailable(String),
    /// The program could not be started at all.
    #[error("could not start {program}: {source}")]
    Spawn {
        /// What was started.
        program: String,
        /// Why not.
        source: std::io::Error,
    },
}

/// How untrusted code is run.
#[derive(Clone, Debug)]
pub enum Confinement {
    /// In a bubblewrap sandbox (`bwrap` at this path).
    Bubblewrap(PathBuf),
    /// As a plain process group with limits (trusted code, or `--unsafe-no-sandbox`).
    Unconfined,
}

/// Resource limits of one run.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock time; the whole sandbox is killed after it.
    pub wall: Duration,
    /// Address space of each process (`RLIMIT_AS`), bytes.
    pub address_space: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`), bytes.
    pub file_size: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes and threads the run may have at once: its cgroup's `pids.max`, and its own
    /// user's `RLIMIT_NPROC` when the grader runs as root (else `RLIMIT_NPROC` counts every
    /// process of the teacher's, and this many are allowed on top of those).
    pub processes: u64,
    /// Bytes kept of stdout, of stderr and of the judge's log (the rest is counted, dropped).
    pub output: usize,
    /// Size of the private `/tmp`, bytes.
    pub tmp_size: u64,
    /// Memory of the whole sandbox, its `/tmp` included (its cgroup's `memory.max`, swap off),
    /// bytes.
    pub memory: u64,
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Limits {
    /// A graded test's limits with the given wall time.
    pub fn for_tests(wall: Duration) -> Self {
        Self {
            wall,
            address_space: 16 * GIB,
            file_size: 256 * MIB,
            open_files: 1024,
            processes: 512,
            output: MIB as usize,
            tmp_size: 512 * MIB,
            memory: 2 * GIB,
        }
    }

    /// A compiler run's limits.
    pub fn for_builds(wall: Duration) -> Self {
        Self {
            wall,
            address_space: 16 * GIB,
            file_size: 2 * GIB,
            open_files: 4096,
            processes: 512,
            output: 4 * MIB as usize,
            tmp_size: 2 * GIB,
            memory: 4 * GIB,
        }
    }
}

/// A host path made visible inside the sandbox.
#[derive(Clone, Debug)]
pub struct Mount {
    /// On the host.
    pub host: PathBuf,
    /// Inside the sandbox.
    pub inside: PathBuf,
    /// Writable (else read-only).
    pub writable: bool,
}

/// What a run may see and use.
#[derive(Clone, Debug)]
pub struct Jail {
    /// Mounted in order (a later mount over an earlier one's path hides it).
    pub mounts: Vec<Mount>,
    /// The program's whole environment.
    pub env: Vec<(String, String)>,
    /// Working directory, inside.
    pub cwd: PathBuf,
    /// Resource limits.
    pub limits: Limits,
    /// Device files passed through (a GPU's, when grading with `--features cuda`).
    pub devices: Vec<PathBuf>,
}

impl Jail {
    /// A jail with the system's programs and libraries (read-only), nothing else mounted, a
    /// minimal environment, `/tmp` as working directory.
    pub fn new(limits: Limits) -> Self {
        Self {
            mounts: Vec::new(),
            env: vec![
                ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
                ("HOME".into(), "/tmp".into()),
                ("TMPDIR".into(), "/tmp".into()),
                ("LANG".into(), "C.UTF-8".into()),
                // glibc's per-thread arenas reserve 64 MiB of address space each; two are plenty
                // and keep RLIMIT_AS meaningful on machines with many cores.
                ("MALLOC_ARENA_MAX".into(), "2".into()),
            ],
            cwd: PathBuf::from("/tmp"),
            limits,
            devices: Vec::new(),
        }
    }

    /// Mounts `host` at `inside`, read-only.
    pub fn ro(&mut self, host: impl Into<PathBuf>, inside: impl Into<PathBuf>) -> &mut Self {
        self.mounts.push(Mount {
            host: host.into(),
            inside: inside.into(),
            writable: false,
        });
        self
    }

    /// Mounts `host` at `inside`, writable.
    pub fn rw(&mut self, host: impl Into<PathBuf>, inside: impl Into<PathBuf>) -> &mut Self {
        self.mounts.push(Mount {
            host: host.into(),
            inside: inside.into(),
            writable: true,
        });
        self
    }

    /// Sets (or replaces) an environment variable.
    pub fn env(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.into()));
        self
    }

    /// Where `host` appears inside the sandbox under `confinement`: through the last mount that
    /// contains it (unconfined: the host path itself).
    pub fn inside(&self, confinement: &Confinement, host: &Path) -> PathBuf {
        if matches!(confinement, Confinement::Unconfined) {
            return host.to_path_buf();
        }
        self.mounts
            .iter()
            .rev()
            .find_map(|m| {
                host.strip_prefix(&m.host)
                    .ok()
                    .map(|rest| join_rel(&m.inside, rest))
            })
            .unwrap_or_else(|| host.to_path_buf())
    }
}

fn join_rel(base: &Path, rest: &Path) -> PathBuf {
    if rest.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rest)
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The program exited with this status.
    Exited(i32),
    /// The program was killed by this signal (an abort, a crash, a memory limit).
    Signalled(i32),
    /// It ran past the wall-clock limit; everything it started was killed.
    TimedOut,
}

/// One stream's captured bytes.
#[derive(Clone, Debug, Default)]
pub struct Captured {
    /// The first [`Limits::output`] bytes.
    pub bytes: Vec<u8>,
    /// How many more were written and dropped.
    pub dropped: u64,
}

impl Captured {
    /// The kept bytes as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct Finished {
    /// How it ended.
    pub ended: Ended,
    /// Its standard output.
    pub stdout: Captured,
    /// Its standard error.
    pub stderr: Captured,
    /// What it wrote to the judge's log ([`LOG_FD`]).
    pub log: Captured,
    /// Wall time.
    pub wall: Duration,
}

/// After a run, how long its pipes may take to close before the grader stops reading them.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

impl Confinement {
    /// bubblewrap, when it is installed and can build a sandbox here (checked with a trial run).
    pub fn bubblewrap() -> Result<Self, SandboxError> {
        let program = std::env::var_os(BWRAP_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("bwrap"));
        let confinement = Confinement::Bubblewrap(program.clone());
        let mut jail = Jail::new(Limits::for_tests(Duration::from_secs(30)));
        jail.cwd = PathBuf::from("/");
        let trial = confinement.run(&jail, Path::new("/bin/true"), &[]);
        match trial {
            Ok(done) if done.ended == Ended::Exited(0) => Ok(confinement),
            Ok(done) => Err(SandboxError::Unavailable(format!(
                "`{}` could not build a sandbox: {}",
                program.display(),
                crate::escape::text(done.stderr.text().trim(), 300)
            ))),
            Err(SandboxError::Spawn { source, .. }) => Err(SandboxError::Unavailable(format!(
                "`{}` cannot be run ({source})",
                program.display()
            ))),
            Err(e) => Err(e),
        }
    }

    /// Whether this runs in a sandbox.
    pub fn is_sandboxed(&self) -> bool {
        matches!(self, Confinement::Bubblewrap(_))
    }

    /// Runs `program` (a path inside the jail) with `args` under `jail`, waits at most the wall
    /// limit, and returns what happened. Errs only when it cannot start.
    pub fn run(
        &self,
        jail: &Jail,
        program: &Path,
        args: &[String],
    ) -> Result<Finished, SandboxError> {
        self.run_with_notice(jail, program, args, None)
    }

    /// [`Confinement::run`], calling `notice.1` once if the program still runs after `notice.0`
    /// (to say a slow test is not a hang).
    pub fn run_with_notice(
        &self,
        jail: &Jail,
        program: &Path,
        args: &[String],
        notice: Option<(Duration, &dyn Fn())>,
    ) -> Result<Finished, SandboxError> {
        Ok(self.run_limited(jail, program, args, notice)?.0)
    }

    /// [`Confinement::run_with_notice`], with the sandbox's limit the run ran into (its control
    /// group's counters), if any.
    pub fn run_limited(
        &self,
        jail: &Jail,
        program: &Path,
        args: &[String],
        notice: Option<(Duration, &dyn Fn())>,
    ) -> Result<(Finished, Option<LimitHit>), SandboxError> {
        // A sandbox's own user (as root) and control group, released when the run is over.
        let boxed = match self {
            Confinement::Bubblewrap(_) => Some(SandboxBox::new(jail)?),
            Confinement::Unconfined => None,
        };
        let mut cmd = match self {
            Confinement::Bubblewrap(bwrap) => {
                let mut cmd = Command::new(bwrap);
                // bubblewrap itself starts from an empty environment: its own memory (readable
                // through /proc by the sandbox's processes, which share its user) holds nothing
                // of the teacher's, and the program gets exactly the jail's variables.
                cmd.env_clear()
                    .args(bwrap_args(jail))
                    .arg("--")
                    .arg(program)
                    .args(args);
                cmd
            }
            Confinement::Unconfined => {
                let mut cmd = Command::new(program);
                cmd.args(args).current_dir(&jail.cwd).env_clear();
                cmd.envs(jail.env.iter().map(|(k, v)| (k, v)));
                cmd
            }
        };
        let (log_reader, log_writer) = std::io::pipe().map_err(|source| SandboxError::Spawn {
            program: program.display().to_string(),
            source,
        })?;
        #[cfg(unix)]
        if let Some(uid) = boxed.as_ref().and_then(|b| b.uid) {
            // The program reopens its end of the log pipe by path (/proc/self/fd/3), which the
            // kernel allows its owner only: the box's user.
            std::os::unix::fs::fchown(&log_writer, Some(uid), Some(BOX_GID)).map_err(|source| {
                SandboxError::Spawn {
                    program: program.display().to_string(),
                    source,
                }
            })?;
        }
        let new_group = matches!(self, Confinement::Unconfined);
        confine(
            &mut cmd,
            &jail.limits,
            &log_writer,
            new_group,
            boxed.as_ref(),
        );
        let started = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| SandboxError::Spawn {
                program: match self {
                    Confinement::Bubblewrap(b) => b.display().to_string(),
                    Confinement::Unconfined => program.display().to_string(),
                },
                source,
            })?;
        drop(log_writer);
        let cap = jail.limits.output;
        let (tx, rx) = mpsc::channel();
        for (which, pipe) in [
            (
                0,
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
            (
                1,
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
            (2, Some(Box::new(log_reader) as Box<dyn Read + Send>)),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let captured = pipe.map(|p| capture(p, cap)).unwrap_or_default();
                let _ = tx.send((which, captured));
            });
        }
        drop(tx);
        let pid = child.id() as i32;
        let wall = jail.limits.wall;
        let waited = match notice.filter(|(after, _)| *after < wall) {
            Some((after, say)) => match child.wait_timeout(after) {
                Ok(None) => {
                    say();
                    child.wait_timeout(wall - after)
                }
                done => done,
            },
            None => child.wait_timeout(wall),
        };
        let ended = match waited {
            // bubblewrap exits with 128 + the signal that killed the program (as a shell does).
            Ok(Some(status)) => match (exit_of(status), self) {
                (Ended::Exited(code @ 129..=192), Confinement::Bubblewrap(_)) => {
                    Ended::Signalled(code - 128)
                }
                (ended, _) => ended,
            },
            Ok(None) | Err(_) => {
                kill(pid, new_group);
                let _ = child.wait();
                Ended::TimedOut
            }
        };
        if new_group {
            // Whatever the program left running in its group goes too.
            kill(pid, true);
        }
        let wall = started.elapsed();
        let limit = boxed.as_ref().and_then(|b| {
            b.group.as_ref().and_then(|g| {
                g.kill_all();
                g.hit()
            })
        });
        drop(boxed);
        let mut streams: [Captured; 3] = Default::default();
        let deadline = Instant::now() + DRAIN_GRACE;
        for _ in 0..3 {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((which, captured)) => streams[which] = captured,
                // A pipe still held open (only possible unconfined, by a process that left the
                // group): stop reading it rather than hang.
                Err(_) => break,
            }
        }
        let [stdout, stderr, log] = streams;
        Ok((
            Finished {
                ended,
                stdout,
                stderr,
                log,
                wall,
            },
            limit,
        ))
    }
}

/// Sets the limits, hands the log pipe over as [`LOG_FD`], (unconfined) starts a new process
/// group and (in a box) joins the box's control groups and becomes the box's user, in the child
/// between fork and exec.
#[cfg(unix)]
fn confine(
    cmd: &mut Command,
    limits: &Limits,
    log: &std::io::PipeWriter,
    new_group: bool,
    boxed: Option<&SandboxBox>,
) {
    use std::os::unix::process::CommandExt;
    let limits = rlimits(limits, boxed.and_then(|b| b.uid).is_some());
    let log_fd = std::os::fd::AsRawFd::as_raw_fd(log);
    let procs: Vec<i32> = boxed
        .map(|b| {
            b.procs
                .iter()
                .map(std::os::fd::AsRawFd::as_raw_fd)
                .collect()
        })
        .unwrap_or_default();
    let uid = boxed.and_then(|b| b.uid);
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (write, setrlimit, dup2, fcntl, setsid, setgroups, setgid,
    // setuid) on plain integers and buffers made before the fork; it allocates nothing and takes
    // no lock.
    unsafe {
        cmd.pre_exec(move || {
            // Into the box's control groups first, while still allowed to (`0` is this process).
            for &fd in &procs {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
            }
            for &(resource, value) in &limits {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource as _, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if log_fd == LOG_FD {
                // Already in place, but marked close-on-exec like every pipe std makes.
                let flags = libc::fcntl(LOG_FD, libc::F_GETFD);
                libc::fcntl(LOG_FD, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            } else if libc::dup2(log_fd, LOG_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if new_group && libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(uid) = uid {
                // Last: the box's own unprivileged user, no supplementary group, for good.
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(BOX_GID) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Elsewhere a student's own run has no limits but the time limit, and no log.
#[cfg(not(unix))]
fn confine(_: &mut Command, _: &Limits, _: &std::io::PipeWriter, _: bool, _: Option<&SandboxBox>) {}

/// The group every box's user is in: the judge's folders are readable by it (and by root),
/// by no other user of the machine.
pub const BOX_GID: u32 = 0x5742_0000;
/// Box users are `BOX_UID_BASE + n`: far above any real account (`useradd` stops at 60000, and
/// systemd's dynamic and container ranges below 2^31 are not reached by these).
const BOX_UID_BASE: u32 = 0x5742_0000;
/// Boxes of one grader at once (at most `--jobs` run at a time, plus the handout's).
const BOX_USERS: u32 = 256;

/// The users in use by this grader's running boxes.
static BOX_USERS_BUSY: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Whether this grader runs as root (and so gives each sandbox its own user).
pub fn as_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and has no side effects.
    unsafe { libc::geteuid() == 0 }
}

/// The control groups this machine gives the sandboxes (detected once).
pub fn cgroups() -> &'static Cgroups {
    static FOUND: std::sync::OnceLock<Cgroups> = std::sync::OnceLock::new();
    FOUND.get_or_init(Cgroups::detect)
}

/// One sandbox's identity: its own user (as root: a fresh one among
/// [`BOX_USERS`], so `RLIMIT_NPROC` counts this box's processes only, and no process of the
/// box can signal or trace another's), its control group, released on drop.
struct SandboxBox {
    uid: Option<u32>,
    group: Option<BoxGroup>,
    procs: Vec<std::fs::File>,
}

impl SandboxBox {
    fn new(jail: &Jail) -> Result<Self, SandboxError> {
        let unavailable = |what: &str, e: std::io::Error| {
            SandboxError::Unavailable(format!("cannot set up a sandbox's {what}: {e}"))
        };
        let uid = if as_root() {
            let mut busy = BOX_USERS_BUSY.lock().unwrap_or_else(|p| p.into_inner());
            // Distinct graders on one machine take distinct ranges.
            let base = BOX_UID_BASE + (std::process::id() % 1024) * BOX_USERS;
            let free = (0..BOX_USERS)
                .map(|n| base + n)
                .find(|u| !busy.contains(u))
                .ok_or_else(|| {
                    SandboxError::Unavailable("more sandboxes at once than box users".into())
                })?;
            busy.push(free);
            Some(free)
        } else {
            None
        };
        let mut boxed = SandboxBox {
            uid,
            group: None,
            procs: Vec::new(),
        };
        if let Some(uid) = uid {
            // What the box writes: its own, from the start.
            for m in jail.mounts.iter().filter(|m| m.writable) {
                chown_tree(&m.host, uid).map_err(|e| unavailable("output folder", e))?;
            }
        }
        let group = cgroups()
            .create(jail.limits.memory, jail.limits.processes)
            .map_err(|e| unavailable("control group", e))?;
        if let Some(group) = group {
            boxed.procs = group.procs().map_err(|e| unavailable("control group", e))?;
            boxed.group = Some(group);
        }
        Ok(boxed)
    }
}

impl Drop for SandboxBox {
    fn drop(&mut self) {
        // The group first (its drop kills what is left), then the user is free again.
        self.group = None;
        if let Some(uid) = self.uid {
            let mut busy = BOX_USERS_BUSY.lock().unwrap_or_else(|p| p.into_inner());
            busy.retain(|u| *u != uid);
        }
    }
}

/// `path` and everything under it owned by `uid` (group [`BOX_GID`]).
fn chown_tree(path: &Path, uid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(BOX_GID))?;
    if std::fs::symlink_metadata(path)?.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid)?;
        }
    }
    Ok(())
}

/// Makes a folder of the judge's (holding what sandboxes read) readable by the box users'
/// group, as root; otherwise (one user, who runs the sandboxes too) readable by this user only.
pub fn judge_folder_permissions(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if as_root() {
        std::os::unix::fs::chown(dir, Some(0), Some(BOX_GID))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
    } else {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
}

#[cfg(unix)]
fn kill(pid: i32, group: bool) {
    // SAFETY: kill(2) with a pid we spawned (or its process group) and a constant signal.
    unsafe {
        libc::kill(if group { -pid } else { pid }, libc::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill(_: i32, _: bool) {}

fn exit_of(status: std::process::ExitStatus) -> Ended {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    match (status.code(), signal) {
        (Some(code), _) => Ended::Exited(code),
        (None, Some(signal)) => Ended::Signalled(signal),
        (None, None) => Ended::Signalled(0),
    }
}

/// Reads `pipe` to its end, keeping the first `cap` bytes.
fn capture(mut pipe: impl Read, cap: usize) -> Captured {
    let mut captured = Captured::default();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let keep = n.min(cap.saturating_sub(captured.bytes.len()));
                captured.bytes.extend_from_slice(&buf[..keep]);
                captured.dropped += (n - keep) as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    captured
}

/// The resource limits, as (resource, value) pairs for `setrlimit`. `own_user`: the run has a
/// user of its own, whose process count starts at 0.
#[cfg(unix)]
fn rlimits(limits: &Limits, own_user: bool) -> [(i32, libc::rlim_t); 5] {
    [
        (libc::RLIMIT_AS as i32, limits.address_space),
        (libc::RLIMIT_FSIZE as i32, limits.file_size),
        (libc::RLIMIT_NOFILE as i32, limits.open_files),
        (libc::RLIMIT_CORE as i32, 0),
        (
            libc::RLIMIT_NPROC as i32,
            if own_user {
                // With a control group its pids.max is the limit (reached first, so that the
                // report can name it); the user's count only backs it up.
                limits.processes + if cgroups().available() { 64 } else { 0 }
            } else {
                users_tasks().saturating_add(limits.processes)
            },
        ),
    ]
}

/// Processes and threads of this user now (`RLIMIT_NPROC` counts them all), from `/proc`.
#[cfg(unix)]
fn users_tasks() -> u64 {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid(2) cannot fail and has no side effects.
    let uid = unsafe { libc::getuid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 8192;
    };
    let mut tasks = 0u64;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if entry.metadata().is_ok_and(|m| m.uid() == uid) {
            tasks += std::fs::read_dir(entry.path().join("task"))
                .map(|t| t.count() as u64)
                .unwrap_or(1);
        }
    }
    tasks
}

/// NVIDIA's device files (`/dev/nvidia0`, `/dev/nvidiactl`, `/dev/nvidia-uvm`, ...), for a run
/// that grades on the GPU.
pub fn gpu_devices() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/dev") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("nvidia"))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The system paths every sandbox sees, read-only: programs, libraries, the dynamic loader's
/// configuration and the C compiler's alternatives (the linker), nothing of anyone's home.
const SYSTEM: [&str; 10] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
];

fn bwrap_args(jail: &Jail) -> Vec<String> {
    let mut a: Vec<String> = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--hostname",
        "judge",
        "--clearenv",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for path in SYSTEM {
        let p = Path::new(path);
        match std::fs::read_link(p) {
            // merged /usr: /bin -> usr/bin
            Ok(target) => a.extend([
                "--symlink".into(),
                target.display().to_string(),
                path.into(),
            ]),
            Err(_) if p.exists() => a.extend(["--ro-bind".into(), path.into(), path.into()]),
            Err(_) => {}
        }
    }
    a.extend(["--proc", "/proc", "--dev", "/dev"].map(String::from));
    a.extend([
        "--size".into(),
        jail.limits.tmp_size.to_string(),
        "--tmpfs".into(),
        "/tmp".into(),
    ]);
    for m in &jail.mounts {
        a.push(if m.writable { "--bind" } else { "--ro-bind" }.into());
        a.push(m.host.display().to_string());
        a.push(m.inside.display().to_string());
    }
    for device in &jail.devices {
        let d = device.display().to_string();
        a.extend(["--dev-bind-try".into(), d.clone(), d]);
    }
    // A small shared-memory folder (POSIX shared memory, Python's multiprocessing), then the
    // root and /dev read-only: what the program may write is its /tmp and /dev/shm, both
    // memory charged to its control group, and the writable mounts the stage made.
    a.extend([
        "--size".into(),
        SHM_SIZE.to_string(),
        "--tmpfs".into(),
        "/dev/shm".into(),
        "--remount-ro".into(),
        "/dev".into(),
        "--remount-ro".into(),
        "/".into(),
    ]);
    for (k, v) in &jail.env {
        a.extend(["--setenv".into(), k.clone(), v.clone()]);
    }
    a.extend(["--chdir".into(), jail.cwd.display().to_string()]);
    a
}

/// Size of a sandbox's `/dev/shm`, bytes.
pub const SHM_SIZE: u64 = 64 * MIB;
