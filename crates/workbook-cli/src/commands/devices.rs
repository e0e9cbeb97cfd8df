//! `--devices sim:1,sim:2` (or `cuda:0,cuda:1`): the device list of data-parallel `train` and
//! `bench`, one replica per device.
//!
//! Each entry is spelled as for `--device` (`cpu`, `cuda:N`, `sim:N`), except `auto`, which picks
//! one device where a list needs every device named. A device listed twice would hold two
//! replicas in the same memory, so it is refused; a CUDA device that cannot be opened is named
//! with the reason, as `--device` does.

use anyhow::Result;
use workbook::device::{self, DeviceSpec};
use workbook::ledger::Ledger;
use workbook::placement::Placement;

/// The most devices a list may name: every device holds a whole replica, so a typo such as a
/// list generated with a million entries would exhaust memory instead of failing clearly.
pub const MAX_DEVICES: usize = 1024;

/// The parsed `--devices` list, in order (the first holds the optimiser).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceList(pub Vec<DeviceSpec>);

/// clap's value parser for `--devices`: the whole comma-separated list, checked.
pub fn parse(s: &str) -> Result<DeviceList, String> {
    let count = s.split(',').count();
    if count > MAX_DEVICES {
        return Err(format!(
            "{count} devices listed: at most {MAX_DEVICES} (each holds a whole replica of the model)"
        ));
    }
    let mut specs: Vec<DeviceSpec> = Vec::new();
    for (i, item) in s.split(',').map(str::trim).enumerate() {
        if item.is_empty() {
            return Err(format!(
                "entry {} of '{s}' is empty: list devices separated by commas, e.g. sim:1,sim:2",
                i + 1
            ));
        }
        let spec: DeviceSpec = item.parse().map_err(|_| {
            format!(
                "unknown device '{item}': list cpu, cuda:N (e.g. cuda:0) or sim:N (a simulated device, e.g. sim:1), separated by commas"
            )
        })?;
        if spec == DeviceSpec::Auto {
            return Err(
                "`auto` picks one device, but data parallelism needs every device named: list them, e.g. cuda:0,cuda:1 or sim:1,sim:2"
                    .into(),
            );
        }
        if let Some(j) = specs.iter().position(|d| *d == spec) {
            return Err(format!(
                "{spec} is listed twice (entries {} and {}): each device holds one replica, so give each device once",
                j + 1,
                i + 1
            ));
        }
        specs.push(spec);
    }
    Ok(DeviceList(specs))
}

impl DeviceList {
    /// The devices' names as given (`sim:1`, `cuda:0`, ...).
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }

    /// Opens every device, each with `ledger` attached (one ledger for all, so every copy
    /// between them is in one place), and reports the choice on stderr.
    pub fn open(&self, ledger: &Ledger) -> Result<Vec<Placement>> {
        let mut out = Vec::with_capacity(self.0.len());
        for &spec in &self.0 {
            let chosen = device::open(spec, "listed in --devices")?;
            eprintln!("device: {} ({})", chosen.name, chosen.reason);
            out.push(chosen.placement.with_ledger(ledger));
        }
        Ok(out)
    }

    /// The first `n` devices.
    pub fn prefix(&self, n: usize) -> DeviceList {
        DeviceList(self.0[..n].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse("sim:1, sim:2,cpu").unwrap().names(),
            ["sim:1", "sim:2", "cpu"]
        );
        assert!(parse("sim:1,auto")
            .unwrap_err()
            .contains("`auto` picks one device"));
        let twice = parse("cuda:0,sim:1,cuda").unwrap_err();
        assert!(
            twice.contains("cuda:0 is listed twice (entries 1 and 3)"),
            "{twice}"
        );
        assert!(parse("sim:1,,sim:2").unwrap_err().contains("entry 2"));
        assert!(parse("gpu1").unwrap_err().contains("unknown device 'gpu1'"));
        let many: Vec<String> = (0..=MAX_DEVICES).map(|i| format!("sim:{i}")).collect();
        assert!(parse(&many.join(",")).unwrap_err().contains("at most 1024"));
    }
}
