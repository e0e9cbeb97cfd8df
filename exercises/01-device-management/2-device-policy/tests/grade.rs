//! Graded tests for exercise 01-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::device_policy::{choose, decide, Decision, DeviceSpec, Machine};
use workbook::device::accelerator;
use workbook::{datasets, Placement};

/// A machine with `gpus` usable CUDA GPUs and `WORKBOOK_DEVICE` set to `env` (or unset).
fn machine(env: Option<&str>, gpus: usize) -> Machine {
    Machine {
        device_env: env.map(str::to_string),
        cuda_devices: gpus,
    }
}

/// `decide`, which must succeed here.
fn decided(explicit: Option<&str>, m: &Machine) -> Decision {
    decide(explicit, m).unwrap_or_else(|e| {
        panic!("decide({explicit:?}, {m:?}) failed, but it should choose a device: {e}")
    })
}

/// `decide`'s error message, which must be an error here.
fn refused(explicit: Option<&str>, m: &Machine) -> String {
    match decide(explicit, m) {
        Ok(d) => panic!(
            "decide({explicit:?}, {m:?}) chose {} ({}), but it should be an error",
            d.device, d.reason
        ),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parses_every_accepted_spelling() {
    for (spelling, want) in [
        ("auto", DeviceSpec::Auto),
        ("cpu", DeviceSpec::Cpu),
        ("cuda", DeviceSpec::Cuda(0)),
        ("cuda:0", DeviceSpec::Cuda(0)),
        ("cuda:3", DeviceSpec::Cuda(3)),
        ("sim:1", DeviceSpec::Sim(1)),
        ("sim:12", DeviceSpec::Sim(12)),
        ("CPU", DeviceSpec::Cpu),
        (" Sim:2 ", DeviceSpec::Sim(2)),
    ] {
        let got = spelling.parse::<DeviceSpec>().unwrap_or_else(|e| {
            panic!("'{spelling}' should parse as {want:?}, but parsing failed: {e}")
        });
        assert_eq!(got, want, "'{spelling}' should parse as {want:?}");
    }
}

#[test]
fn rejects_other_spellings_and_lists_the_accepted_ones() {
    for spelling in [
        "gpu0", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "sim", "sim:one", "sim:+2", "cpu1",
        "",
    ] {
        match spelling.parse::<DeviceSpec>() {
            Ok(spec) => panic!("'{spelling}' is not a device spelling, but it parsed as {spec:?}"),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&format!("'{spelling}'")),
                    "the error for '{spelling}' should quote it ('{spelling}'), got: {msg}"
                );
                for form in ["auto", "cpu", "cuda", "cuda:N", "sim:N"] {
                    assert!(
                        msg.contains(form),
                        "the error for '{spelling}' should list the accepted spelling {form}, got: {msg}"
                    );
                }
            }
        }
    }
}

#[test]
fn an_explicit_choice_wins() {
    let cases = [
        // (--device, WORKBOOK_DEVICE, GPUs, expected device)
        ("sim:1", Some("cpu"), 1, DeviceSpec::Sim(1)),
        ("cpu", Some("sim:2"), 1, DeviceSpec::Cpu),
        ("cuda:1", None, 2, DeviceSpec::Cuda(1)),
        ("sim:3", Some("gpu0"), 0, DeviceSpec::Sim(3)), // a bad variable is not even read
        ("auto", Some("sim:2"), 0, DeviceSpec::Cpu),    // --device auto beats the variable
        ("auto", Some("cpu"), 1, DeviceSpec::Cuda(0)),
    ];
    for (explicit, env, gpus, want) in cases {
        let m = machine(env, gpus);
        let d = decided(Some(explicit), &m);
        assert_eq!(
            d.device, want,
            "--device {explicit} with {m:?} should choose {want}, not {} ({})",
            d.device, d.reason
        );
        assert!(
            d.reason.contains("--device"),
            "the reason for --device {explicit} should say it came from --device, got: {}",
            d.reason
        );
    }
}

#[test]
fn the_environment_comes_before_auto() {
    for (env, gpus, want) in [
        ("sim:2", 1, DeviceSpec::Sim(2)),
        ("cpu", 1, DeviceSpec::Cpu),
        ("cuda", 1, DeviceSpec::Cuda(0)),
        ("auto", 0, DeviceSpec::Cpu),
    ] {
        let m = machine(Some(env), gpus);
        let d = decided(None, &m);
        assert_eq!(
            d.device, want,
            "WORKBOOK_DEVICE={env} (no --device) with {gpus} GPU(s) should choose {want}, not {} ({})",
            d.device, d.reason
        );
        assert!(
            d.reason.contains(&format!("WORKBOOK_DEVICE={env}")),
            "the reason should say it came from WORKBOOK_DEVICE={env}, got: {}",
            d.reason
        );
    }
    // An empty or blank variable counts as unset: auto.
    for blank in ["", "  "] {
        let d = decided(None, &machine(Some(blank), 0));
        assert_eq!(
            d.device,
            DeviceSpec::Cpu,
            "WORKBOOK_DEVICE='{blank}' counts as unset, so auto picks the cpu on a machine without a GPU; got {} ({})",
            d.device,
            d.reason
        );
    }
}

#[test]
fn auto_prefers_a_cuda_gpu_then_the_cpu() {
    for (gpus, want) in [(2, DeviceSpec::Cuda(0)), (0, DeviceSpec::Cpu)] {
        let d = decided(None, &machine(None, gpus));
        assert_eq!(
            d.device, want,
            "with no --device, no WORKBOOK_DEVICE and {gpus} GPU(s), auto should choose {want}, not {} ({})",
            d.device, d.reason
        );
        let reason = d.reason.to_lowercase();
        for part in ["workbook_device is not set", "auto", "gpu"] {
            assert!(
                reason.contains(part),
                "the reason for auto with {gpus} GPU(s) should mention '{part}' (what was read, and whether a GPU was found), got: {}",
                d.reason
            );
        }
    }
}

#[test]
fn mistakes_name_where_they_came_from() {
    let msg = refused(None, &machine(Some("gpu0"), 1));
    assert!(
        msg.contains("WORKBOOK_DEVICE") && msg.contains("'gpu0'") && msg.contains("sim:N"),
        "a bad WORKBOOK_DEVICE should be an error naming the variable, quoting 'gpu0' and listing the accepted spellings, got: {msg}"
    );
    let msg = refused(Some("gpu0"), &machine(Some("cpu"), 1));
    assert!(
        msg.contains("--device") && msg.contains("'gpu0'") && msg.contains("sim:N"),
        "a bad --device should be an error naming --device, quoting 'gpu0' and listing the accepted spellings, got: {msg}"
    );
    for (explicit, env, gpus, n) in [
        (Some("cuda:1"), None, 1, 1),
        (None, Some("cuda"), 0, 0),
        (Some("cuda"), Some("cpu"), 0, 0),
    ] {
        let msg = refused(explicit, &machine(env, gpus));
        assert!(
            msg.contains(&format!("cuda:{n}")) && msg.contains("cpu") && msg.contains(&format!("sim:{n}")),
            "asking for cuda:{n} on a machine with {gpus} GPU(s) should be an error naming cuda:{n} and suggesting cpu or sim:{n}, got: {msg}"
        );
    }
}

#[test]
fn chooses_a_usable_placement_on_this_machine() {
    for (explicit, want) in [("sim:3", Placement::sim(3)), ("cpu", Placement::cpu())] {
        let (placement, reason) = choose(Some(explicit))
            .unwrap_or_else(|e| panic!("choose(Some(\"{explicit}\")) failed: {e}"));
        assert_eq!(
            placement, want,
            "--device {explicit} should give the placement {want}"
        );
        assert!(
            reason.contains("--device"),
            "the reason should say --device, got: {reason}"
        );
        let graph = datasets::karate(&placement).unwrap();
        assert_eq!(graph.placement(), &want, "the graph should load on {want}");
    }
    // The real machine: whatever the process's environment says, the policy agrees with the
    // library's (without --device, with --device of the lesson's accelerator).
    let ours = choose(None).map(|(p, _)| p.to_string());
    let library = workbook::device::choose(None).map(|c| c.name);
    assert_eq!(
        ours.as_ref().ok(),
        library.as_ref().ok(),
        "without --device, choose should agree with workbook::device::choose (ours: {ours:?}, library: {library:?})"
    );
    let gpu = accelerator().name;
    let (placement, _) =
        choose(Some(&gpu)).unwrap_or_else(|e| panic!("choose(Some(\"{gpu}\")) failed: {e}"));
    assert_eq!(
        placement.to_string(),
        gpu,
        "--device {gpu} should give {gpu}"
    );
}
