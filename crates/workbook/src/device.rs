//! The device policy, the one source of truth for where a program runs: an explicit choice,
//! else `WORKBOOK_DEVICE`, else `auto` (CUDA if compiled in and present, else the CPU).
//!
//! Every command reports the device it chose *and why*, so a run on the CPU is never mistaken
//! for a GPU run. Spellings: `auto`, `cpu`, `cuda`, `cuda:N`, and `sim:N` for a
//! [simulated device](crate::placement) that lets a machine without a GPU meet device mismatches.
//!
//! ```
//! use workbook::device::{choose, DeviceSpec};
//! let chosen = choose(Some("sim:1".parse().unwrap())).unwrap();
//! assert_eq!(chosen.name, "sim:1");
//! assert!(chosen.device().is_cpu()); // simulated: host memory
//! assert!(chosen.reason.contains("asked for"));
//! let err = "gpu0".parse::<DeviceSpec>().unwrap_err().to_string();
//! assert!(err.contains("cuda:N") && err.contains("sim:N"));
//! ```

use crate::error::{Result, WorkbookError};
use crate::placement::{open_cuda as cuda, Placement};
use crate::sim_device::SimErrors;
use candle_core::Device;
use std::fmt;
use std::str::FromStr;

/// The environment variable read when no device is given explicitly.
pub const DEVICE_ENV: &str = "WORKBOOK_DEVICE";

/// A device as the user spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// CUDA if compiled in and present, else the CPU.
    Auto,
    Cpu,
    Cuda(usize),
    /// A simulated device: host memory, a separate device for every placement check.
    Sim(usize),
}

impl FromStr for DeviceSpec {
    type Err = WorkbookError;
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            _ => {
                let numbered = |prefix: &str| t.strip_prefix(prefix).and_then(|n| n.parse().ok());
                numbered("cuda:")
                    .map(Self::Cuda)
                    .or_else(|| numbered("sim:").map(Self::Sim))
                    .ok_or_else(|| {
                        WorkbookError::InvalidConfig(format!(
                            "unknown device '{s}': use auto, cpu, cuda, cuda:N (e.g. cuda:0) or sim:N (a simulated device, e.g. sim:1)"
                        ))
                    })
            }
        }
    }
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

/// A placement and the reason it was chosen.
#[derive(Clone, Debug)]
pub struct Chosen {
    /// Where to run; pass `&chosen.placement` wherever a device is taken.
    pub placement: Placement,
    /// `cpu`, `cuda:0`, `sim:1`, ...
    pub name: String,
    pub reason: String,
}

impl Chosen {
    /// The candle device holding the data (the CPU for `sim:N`).
    pub fn device(&self) -> &Device {
        self.placement.device()
    }
}

/// Picks the device: `explicit`, else `WORKBOOK_DEVICE`, else `auto`.
pub fn choose(explicit: Option<DeviceSpec>) -> Result<Chosen> {
    let (spec, source) = match explicit {
        Some(s) => (s, "asked for explicitly (--device)".to_string()),
        None => match std::env::var(DEVICE_ENV) {
            Ok(v) if !v.trim().is_empty() => (v.parse()?, format!("from {DEVICE_ENV}={v}")),
            _ => (
                DeviceSpec::Auto,
                format!("{DEVICE_ENV} is not set, so auto"),
            ),
        },
    };
    open(spec, &source)
}

/// Opens `spec`, with `source` saying why it was asked for (`asked for explicitly (--device)`,
/// `listed in --devices`, ...); a CUDA device that cannot be opened is an error that says why
/// and what to use instead.
///
/// ```
/// use workbook::device::{open, DeviceSpec};
/// let chosen = open(DeviceSpec::Sim(2), "listed in --devices").unwrap();
/// assert_eq!(chosen.name, "sim:2");
/// if !cfg!(feature = "cuda") {
///     let err = open(DeviceSpec::Cuda(1), "listed in --devices").unwrap_err().to_string();
///     assert!(err.contains("cuda:1 was listed in --devices but"), "{err}");
/// }
/// ```
pub fn open(spec: DeviceSpec, source: &str) -> Result<Chosen> {
    let chosen = |placement: Placement, reason: String| Chosen {
        name: placement.to_string(),
        placement,
        reason,
    };
    match spec {
        DeviceSpec::Cpu => Ok(chosen(Placement::cpu(), format!("cpu {source}"))),
        DeviceSpec::Sim(n) => {
            // Read here too, so that a mistyped switch is an error rather than ignored.
            let errors = match SimErrors::from_env()? {
                SimErrors::Synchronous => "",
                SimErrors::Asynchronous => {
                    "; kernel errors reported asynchronously, as on CUDA (WORKBOOK_SIM_ASYNC=1)"
                }
                SimErrors::Blocking => {
                    "; kernel errors reported by the faulting operation (WORKBOOK_LAUNCH_BLOCKING=1)"
                }
            };
            Ok(chosen(
                Placement::sim(n),
                format!("sim:{n} {source}: a simulated device (host memory, checked as a device of its own){errors}"),
            ))
        }
        DeviceSpec::Cuda(n) => {
            let device = cuda(n).map_err(|why| {
                WorkbookError::InvalidConfig(format!(
                    "cuda:{n} was {source} but {why}; use cpu, or sim:{n} to practise device placement without a GPU"
                ))
            })?;
            Ok(chosen(Placement::of(&device), format!("cuda:{n} {source}")))
        }
        DeviceSpec::Auto => match cuda(0) {
            Ok(device) => Ok(chosen(
                Placement::of(&device),
                format!("{source}: a CUDA GPU is present"),
            )),
            Err(why) => Ok(chosen(
                Placement::cpu(),
                format!("{source}: CPU because {why}"),
            )),
        },
    }
}

/// The "accelerator" of a device lesson: `cuda:0` when a CUDA GPU is usable, else the simulated
/// `sim:1`. A lesson written against it fails and passes the same way on both, and uses the
/// real GPU whenever there is one.
pub fn accelerator() -> Chosen {
    match cuda(0) {
        Ok(device) => Chosen {
            name: "cuda:0".into(),
            placement: Placement::of(&device),
            reason: "a CUDA GPU is present".into(),
        },
        Err(why) => Chosen {
            name: "sim:1".into(),
            placement: Placement::sim(1),
            reason: format!("simulated, because {why}"),
        },
    }
}

/// [`accelerator`], except that without a GPU it is the simulated device `sim:n` rather than
/// `sim:1`. Graded tests let their challenge pick `n`, so that what they observe (ledger rows,
/// placements) cannot be written down in advance.
///
/// ```
/// let chosen = workbook::device::accelerator_or_sim(5);
/// assert!(chosen.name == "cuda:0" || chosen.name == "sim:5");
/// ```
pub fn accelerator_or_sim(n: usize) -> Chosen {
    let mut chosen = accelerator();
    if chosen.name.starts_with("sim:") {
        chosen.name = format!("sim:{n}");
        chosen.placement = Placement::sim(n);
    }
    chosen
}

/// The short name of a candle device: `cpu`, `cuda:0`, ...
pub fn name(device: &Device) -> String {
    Placement::of(device).to_string()
}
