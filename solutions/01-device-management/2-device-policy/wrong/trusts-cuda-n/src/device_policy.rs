//! One device policy, the single source of truth for where a program runs.
//!
//! Scripts that mix `"cuda"` literals, `torch.device("cuda:0")` and `.cuda()` calls end up with
//! tensors on different devices. A program should choose its device once, from one policy, say
//! what it chose and why, and pass the result everywhere. The policy, in order:
//!
//! 1. an explicit choice (the command line's `--device`);
//! 2. else the environment variable `WORKBOOK_DEVICE` (an empty or blank value counts as unset);
//! 3. else `auto`: the first CUDA GPU when one is usable, else the CPU.
//!
//! The policy reads the machine through a [`Machine`] value instead of the real environment, so
//! the tests can try every case without a GPU and without changing the process's environment.

use std::fmt;
use std::str::FromStr;
use workbook::{Placement, Result, WorkbookError};

/// The environment variable read when no device is given explicitly.
pub const DEVICE_ENV: &str = "WORKBOOK_DEVICE";

/// A device as the user spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// CUDA GPU 0 when one is usable, else the CPU.
    Auto,
    Cpu,
    /// `cuda` (GPU 0) or `cuda:N`.
    Cuda(usize),
    /// `sim:N`, a simulated device: host memory, a device of its own for every check.
    Sim(usize),
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
            Self::Sim(n) => write!(f, "sim:{n}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = WorkbookError;

    /// Accepts `auto`, `cpu`, `cuda` (GPU 0), `cuda:N` and `sim:N`, in any case and with
    /// surrounding spaces. Any other spelling is a [`WorkbookError::InvalidConfig`] whose message
    /// quotes it and lists the accepted forms, e.g. *unknown device 'gpu0': use auto, cpu, cuda,
    /// cuda:N (e.g. cuda:0) or sim:N (a simulated device, e.g. sim:1)*.
    fn from_str(s: &str) -> Result<Self> {
        let spelling = s.trim().to_ascii_lowercase();
        let numbered = |prefix: &str| -> Option<usize> {
            let n = spelling.strip_prefix(prefix)?;
            // `usize::from_str` takes a leading '+'; a device number is digits only.
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            n.parse().ok()
        };
        match spelling.as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            _ => numbered("cuda:")
                .map(Self::Cuda)
                .or_else(|| numbered("sim:").map(Self::Sim))
                .ok_or_else(|| {
                    WorkbookError::InvalidConfig(format!(
                        "unknown device '{s}': use auto, cpu, cuda, cuda:N (e.g. cuda:0) or sim:N (a simulated device, e.g. sim:1)"
                    ))
                }),
        }
    }
}

/// What the policy reads from the machine: injected, so that tests need neither a GPU nor
/// changes to the process's environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    /// The value of `WORKBOOK_DEVICE`, `None` when it is not set.
    pub device_env: Option<String>,
    /// How many CUDA GPUs are usable (always 0 in a build without the `cuda` feature).
    pub cuda_devices: usize,
}

impl Machine {
    /// This process's environment and GPUs.
    pub fn current() -> Self {
        Self {
            device_env: std::env::var(DEVICE_ENV).ok(),
            cuda_devices: (0..16).take_while(|&n| Placement::cuda(n).is_ok()).count(),
        }
    }
}

/// The policy's answer: a concrete device (never [`DeviceSpec::Auto`]) and why it was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub device: DeviceSpec,
    /// One line for the log, e.g. `sim:1 asked for with --device: ...` or
    /// `cpu, by auto (WORKBOOK_DEVICE is not set): no CUDA GPU is usable`.
    pub reason: String,
}

impl Decision {
    /// Opens the chosen device.
    pub fn placement(&self) -> Result<Placement> {
        match self.device {
            DeviceSpec::Cpu => Ok(Placement::cpu()),
            DeviceSpec::Sim(n) => Ok(Placement::sim(n)),
            DeviceSpec::Cuda(n) => Placement::cuda(n),
            DeviceSpec::Auto => Err(WorkbookError::InvalidConfig(
                "a decision names a concrete device, not auto".into(),
            )),
        }
    }
}

/// The policy: `explicit` (the `--device` argument), else `machine.device_env` unless it is
/// empty or blank, else `auto`; `auto`, wherever it came from, is CUDA GPU 0 when
/// `machine.cuda_devices > 0` and the CPU otherwise.
///
/// The reason says where the choice came from: `--device` for an explicit choice,
/// `WORKBOOK_DEVICE=<value>` for the environment, `WORKBOOK_DEVICE is not set` otherwise; and
/// for `auto`, what it found (`a CUDA GPU is present`, or `no CUDA GPU is usable`).
///
/// Errors (each naming where the bad value came from): a spelling that does not parse, and
/// `cuda:N` when GPU `N` is not usable (suggesting `cpu`, or `sim:N` to practise without a GPU).
pub fn decide(explicit: Option<&str>, machine: &Machine) -> Result<Decision> {
    let from_env = machine
        .device_env
        .as_deref()
        .filter(|v| !v.trim().is_empty());
    let (spec, source) = match (explicit, from_env) {
        (Some(s), _) => (parse(s, "--device")?, "asked for with --device".to_string()),
        (None, Some(v)) => (
            parse(v, &format!("{DEVICE_ENV}={v}"))?,
            format!("from {DEVICE_ENV}={v}"),
        ),
        (None, None) => (DeviceSpec::Auto, format!("{DEVICE_ENV} is not set")),
    };
    let decision = |device: DeviceSpec, reason: String| Ok(Decision { device, reason });
    match spec {
        DeviceSpec::Auto if machine.cuda_devices > 0 => decision(
            DeviceSpec::Cuda(0),
            format!("cuda:0, by auto ({source}): a CUDA GPU is present"),
        ),
        DeviceSpec::Auto => decision(
            DeviceSpec::Cpu,
            format!("cpu, by auto ({source}): no CUDA GPU is usable"),
        ),
        DeviceSpec::Cuda(n) if machine.cuda_devices == 0 && n > 0 => {
            Err(WorkbookError::InvalidConfig(format!(
                "cuda:{n} ({source}) is not usable: this machine has {} usable CUDA GPU(s); use cpu, or sim:{n} to practise device placement without a GPU",
                machine.cuda_devices
            )))
        }
        DeviceSpec::Sim(n) => decision(
            spec,
            format!("sim:{n} {source}: a simulated device (host memory, checked as a device of its own)"),
        ),
        DeviceSpec::Cpu | DeviceSpec::Cuda(_) => decision(spec, format!("{spec} {source}")),
    }
}

/// Parses `spelling`, saying in the error where it came from.
fn parse(spelling: &str, source: &str) -> Result<DeviceSpec> {
    spelling.parse().map_err(|e: WorkbookError| match e {
        WorkbookError::InvalidConfig(m) => WorkbookError::InvalidConfig(format!("{source}: {m}")),
        other => other,
    })
}

/// The policy on this machine: the chosen placement, and the reason to print with it.
pub fn choose(explicit: Option<&str>) -> Result<(Placement, String)> {
    let decision = decide(explicit, &Machine::current())?;
    Ok((decision.placement()?, decision.reason))
}
