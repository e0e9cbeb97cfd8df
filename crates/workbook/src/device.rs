//! Choosing the device: an explicit choice, else `WORKBOOK_DEVICE`, else the best available.
//!
//! Every command reports the device it chose *and why*, so a run on the CPU is never mistaken
//! for a GPU run. Spellings: `auto`, `cpu`, `cuda`, `cuda:N`.
//!
//! ```
//! use workbook::device::{choose, DeviceSpec};
//! let spec: DeviceSpec = "cpu".parse().unwrap();
//! let chosen = choose(Some(spec)).unwrap();
//! assert!(chosen.device.is_cpu());
//! assert!(chosen.reason.contains("asked for"));
//! assert!("gpu0".parse::<DeviceSpec>().unwrap_err().to_string().contains("cuda:N"));
//! ```

use crate::error::{Result, WorkbookError};
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
}

impl FromStr for DeviceSpec {
    type Err = WorkbookError;
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            _ => t
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| {
                    WorkbookError::InvalidConfig(format!(
                        "unknown device '{s}': use auto, cpu, cuda or cuda:N (e.g. cuda:0)"
                    ))
                }),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// A device and the reason it was chosen.
#[derive(Clone, Debug)]
pub struct Chosen {
    pub device: Device,
    /// `cpu`, `cuda:0`, ...
    pub name: String,
    pub reason: String,
}

/// Picks the device: `explicit`, else `WORKBOOK_DEVICE`, else `auto`.
pub fn choose(explicit: Option<DeviceSpec>) -> Result<Chosen> {
    let (spec, source) = match explicit {
        Some(s) => (s, "asked for on the command line".to_string()),
        None => match std::env::var(DEVICE_ENV) {
            Ok(v) if !v.trim().is_empty() => (v.parse()?, format!("from {DEVICE_ENV}={v}")),
            _ => (
                DeviceSpec::Auto,
                format!("{DEVICE_ENV} is not set, so auto"),
            ),
        },
    };
    match spec {
        DeviceSpec::Cpu => Ok(cpu(format!("cpu {source}"))),
        DeviceSpec::Cuda(n) => {
            let device = cuda(n).map_err(|why| {
                WorkbookError::InvalidConfig(format!("cuda:{n} was {source} but {why}"))
            })?;
            Ok(Chosen {
                device,
                name: format!("cuda:{n}"),
                reason: format!("cuda:{n} {source}"),
            })
        }
        DeviceSpec::Auto => match cuda(0) {
            Ok(device) => Ok(Chosen {
                device,
                name: "cuda:0".into(),
                reason: format!("{source}: a CUDA GPU is present"),
            }),
            Err(why) => Ok(cpu(format!("{source}: CPU because {why}"))),
        },
    }
}

fn cpu(reason: String) -> Chosen {
    Chosen {
        device: Device::Cpu,
        name: "cpu".into(),
        reason,
    }
}

/// Opens CUDA device `n`, or says why not. `Device::cuda_if_available` is not used: in a `cuda`
/// build it does not fall back when no GPU is present.
fn cuda(n: usize) -> std::result::Result<Device, String> {
    if !candle_core::utils::cuda_is_available() {
        return Err("this build has no CUDA support (build with --features cuda)".into());
    }
    Device::new_cuda(n).map_err(|e| format!("no usable CUDA device {n} ({e})"))
}

/// The short name of a device: `cpu`, `cuda:0`, ...
pub fn name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}
