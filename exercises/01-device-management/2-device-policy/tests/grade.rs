//! Graded tests for exercise 01-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The run's challenge picks the device
//! numbers, the number of GPUs of the machines the policy is asked about, and how the spellings
//! are capitalised, so the answers cannot be written down in advance. Each test records its
//! answers as one value, the fixed questions' answers (`cpu` parses as `Cpu`) with the drawn
//! ones', so that no record is a value the judge could be handed in advance.

use super::device_policy::{choose, decide, Decision, DeviceSpec, Machine, DEVICE_ENV};
use scenario::{Scenario, Shown};
use workbook::device::accelerator;
use workbook::{datasets, Placement};

/// A machine with `gpus` usable CUDA GPUs and `WORKBOOK_DEVICE` set to `env` (or unset).
fn machine(env: Option<&str>, gpus: usize) -> Machine {
    Machine {
        device_env: env.map(str::to_string),
        cuda_devices: gpus,
    }
}

/// `spelling` with its letters' case drawn from the challenge (`SiM:3`, `cUDA`): spellings are
/// accepted in any case.
fn any_case(s: &Scenario, spelling: &str) -> String {
    let bits = s.seed(&format!("case of {spelling}"));
    spelling
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if bits >> (i % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
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

/// Where a decision must say it came from.
#[derive(Clone, Copy, Debug)]
enum Source<'a> {
    /// `--device`.
    Explicit,
    /// `WORKBOOK_DEVICE=<value>`.
    Env(&'a str),
    /// `WORKBOOK_DEVICE is not set` (unset, empty or blank).
    Unset,
}

impl Source<'_> {
    /// Whether `reason` names this source (the variable's value as given, or trimmed).
    fn named_in(self, reason: &str) -> bool {
        match self {
            Source::Explicit => reason.contains("--device"),
            Source::Env(v) => {
                reason.contains(&format!("{DEVICE_ENV}={v}"))
                    || reason.contains(&format!("{DEVICE_ENV}={}", v.trim()))
            }
            Source::Unset => reason.contains(&format!("{DEVICE_ENV} is not set")),
        }
    }

    fn spelled(self) -> String {
        match self {
            Source::Explicit => "--device".into(),
            Source::Env(v) => format!("{DEVICE_ENV}={}", v.trim()),
            Source::Unset => format!("{DEVICE_ENV} is not set"),
        }
    }
}

/// One question to the policy: `--device`, `WORKBOOK_DEVICE`, and what it must choose, from
/// where, and whether by `auto`.
struct Case<'a> {
    explicit: Option<&'a str>,
    env: Option<&'a str>,
    want: DeviceSpec,
    source: Source<'a>,
    auto: bool,
}

/// What the policy decided for `c` on a machine with `gpus` GPUs, as observed: the device,
/// whether the reason names its source, and for `auto` whether it says so and what it found.
fn seen(c: &Case, decided: &Result<Decision, String>) -> Shown<String> {
    Shown(match decided {
        Ok(d) => {
            let reason = d.reason.to_lowercase();
            format!(
                "{:?}, source named: {}, auto said: {}",
                d.device,
                c.source.named_in(&d.reason),
                c.auto && reason.contains("auto") && reason.contains("gpu")
            )
        }
        Err(_) => "an error".to_string(),
    })
}

/// Checks the policy's decision for `c` on a machine with `gpus` GPUs.
fn check(c: &Case, gpus: usize, decided: Result<Decision, String>) {
    let m = machine(c.env, gpus);
    let d = decided.unwrap_or_else(|e| {
        panic!(
            "decide({:?}, {m:?}) failed, but it should choose {}: {e}",
            c.explicit, c.want
        )
    });
    let what = match (c.explicit, c.env) {
        (Some(x), Some(e)) => format!("--device '{x}' with WORKBOOK_DEVICE='{e}'"),
        (Some(x), None) => format!("--device '{x}' with WORKBOOK_DEVICE unset"),
        (None, Some(e)) => format!("no --device, WORKBOOK_DEVICE='{e}'"),
        (None, None) => "no --device, WORKBOOK_DEVICE unset".to_string(),
    };
    assert_eq!(
        d.device, c.want,
        "{what}, on a machine with {gpus} GPU(s), should choose {}, not {} ({}): the policy is --device, else WORKBOOK_DEVICE (blank counts as unset), else auto",
        c.want, d.device, d.reason
    );
    assert!(
        c.source.named_in(&d.reason),
        "{what}: the reason should say the choice came from {}, got: {}",
        c.source.spelled(),
        d.reason
    );
    if c.auto {
        let reason = d.reason.to_lowercase();
        assert!(
            reason.contains("auto") && reason.contains("gpu"),
            "{what}: auto chose, so the reason should say 'auto' and whether a GPU was found, got: {}",
            d.reason
        );
    }
}

#[test]
fn parses_every_accepted_spelling() {
    let s = scenario::start();
    let (a, b) = (s.pick("cuda number", 1..16), s.pick("sim number", 1..64));
    let spellings = [
        ("auto".to_string(), DeviceSpec::Auto),
        ("cpu".to_string(), DeviceSpec::Cpu),
        ("cuda".to_string(), DeviceSpec::Cuda(0)),
        ("cuda:0".to_string(), DeviceSpec::Cuda(0)),
        (format!("cuda:{a}"), DeviceSpec::Cuda(a)),
        (format!("sim:{b}"), DeviceSpec::Sim(b)),
        (any_case(&s, "auto"), DeviceSpec::Auto),
        (any_case(&s, "cpu"), DeviceSpec::Cpu),
        (
            format!(" {} ", any_case(&s, &format!("sim:{b}"))),
            DeviceSpec::Sim(b),
        ),
        (
            format!("\t{}", any_case(&s, &format!("cuda:{a}"))),
            DeviceSpec::Cuda(a),
        ),
    ];
    let parsed: Vec<_> = spellings
        .iter()
        .map(|(spelling, _)| spelling.parse::<DeviceSpec>())
        .collect();
    s.observe(
        "each spelling, in order, parses as",
        &parsed
            .iter()
            .map(|got| Shown(got.as_ref().map_err(|_| "an error")))
            .collect::<Vec<_>>(),
    );
    for ((spelling, want), got) in spellings.into_iter().zip(parsed) {
        let got = got.unwrap_or_else(|e| {
            panic!("'{spelling}' should parse as {want:?} (any case, surrounding spaces ignored), but parsing failed: {e}")
        });
        assert_eq!(got, want, "'{spelling}' should parse as {want:?}");
    }
}

#[test]
fn rejects_other_spellings_and_lists_the_accepted_ones() {
    let s = scenario::start();
    let n = s.pick("a number", 1..100);
    let spellings = [
        format!("gpu{n}"),
        "gpu".to_string(),
        "cuda:".to_string(),
        "cuda:x".to_string(),
        format!("cuda:-{n}"),
        format!("cuda:+{n}"),
        format!("cuda:{n}.0"),
        "sim".to_string(),
        "sim:one".to_string(),
        format!("sim:+{n}"),
        format!("sim:{n} {n}"),
        format!("cpu{n}"),
        String::new(),
    ];
    // What each error quotes and lists, in order: the drawn spellings' errors must quote them.
    let mentions: Vec<Result<Vec<String>, String>> = spellings
        .iter()
        .map(|spelling| match spelling.parse::<DeviceSpec>() {
            Ok(spec) => Err(format!("{spec:?}")),
            Err(e) => {
                let msg = e.to_string();
                let quoted = format!("'{spelling}'");
                Ok([quoted.as_str(), "auto", "cpu", "cuda", "cuda:N", "sim:N"]
                    .into_iter()
                    .filter(|w| msg.contains(w))
                    .map(str::to_string)
                    .collect())
            }
        })
        .collect();
    s.observe(
        "what the error for each spelling, in order, mentions",
        &mentions.iter().map(Shown).collect::<Vec<_>>(),
    );
    for spelling in spellings {
        let quoted = format!("'{spelling}'");
        match spelling.parse::<DeviceSpec>() {
            Ok(spec) => panic!("'{spelling}' is not a device spelling, but it parsed as {spec:?}"),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&quoted),
                    "the error for '{spelling}' should quote it ({quoted}), got: {msg}"
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
fn follows_the_policy_on_a_machine_without_a_gpu() {
    let s = scenario::start();
    let (a, b) = (
        s.pick("sim number", 1..32),
        s.pick("another sim number", 32..64),
    );
    let (sim_a, sim_b) = (any_case(&s, &format!("sim:{a}")), format!("sim:{b}"));
    let spaced = format!(" {} ", any_case(&s, &sim_b));
    let auto = any_case(&s, "auto");
    let cases = [
        // --device wins over the variable, whatever the variable holds
        Case {
            explicit: Some(&sim_a),
            env: Some("cpu"),
            want: DeviceSpec::Sim(a),
            source: Source::Explicit,
            auto: false,
        },
        Case {
            explicit: Some("cpu"),
            env: Some(&sim_b),
            want: DeviceSpec::Cpu,
            source: Source::Explicit,
            auto: false,
        },
        Case {
            explicit: Some(&sim_a),
            env: Some("gpu0"), // a bad variable is not even read
            want: DeviceSpec::Sim(a),
            source: Source::Explicit,
            auto: false,
        },
        Case {
            explicit: Some(&auto), // --device auto beats the variable too
            env: Some(&sim_b),
            want: DeviceSpec::Cpu,
            source: Source::Explicit,
            auto: true,
        },
        // then the variable, before auto
        Case {
            explicit: None,
            env: Some(&sim_b),
            want: DeviceSpec::Sim(b),
            source: Source::Env(&sim_b),
            auto: false,
        },
        Case {
            explicit: None,
            env: Some(&spaced),
            want: DeviceSpec::Sim(b),
            source: Source::Env(&spaced),
            auto: false,
        },
        Case {
            explicit: None,
            env: Some(&auto),
            want: DeviceSpec::Cpu,
            source: Source::Env(&auto),
            auto: true,
        },
        // an empty or blank variable counts as unset: auto
        Case {
            explicit: None,
            env: Some(""),
            want: DeviceSpec::Cpu,
            source: Source::Unset,
            auto: true,
        },
        Case {
            explicit: None,
            env: Some("  "),
            want: DeviceSpec::Cpu,
            source: Source::Unset,
            auto: true,
        },
        Case {
            explicit: None,
            env: None,
            want: DeviceSpec::Cpu,
            source: Source::Unset,
            auto: true,
        },
    ];
    let decided: Vec<_> = cases
        .iter()
        .map(|c| decide(c.explicit, &machine(c.env, 0)).map_err(|e| e.to_string()))
        .collect();
    s.observe(
        "each case without a GPU, in order",
        &cases
            .iter()
            .zip(&decided)
            .map(|(c, d)| seen(c, d))
            .collect::<Vec<_>>(),
    );
    for (c, decided) in cases.iter().zip(decided) {
        check(c, 0, decided);
    }
}

#[test]
fn follows_the_policy_on_a_machine_with_gpus() {
    let s = scenario::start();
    let gpus = s.pick("GPUs", 1..5);
    let b = s.pick("sim number", 1..64);
    let last = any_case(&s, &format!("cuda:{}", gpus - 1));
    let sim_b = any_case(&s, &format!("sim:{b}"));
    let cuda = any_case(&s, "cuda");
    let cases = [
        Case {
            explicit: Some(&last),
            env: None,
            want: DeviceSpec::Cuda(gpus - 1),
            source: Source::Explicit,
            auto: false,
        },
        Case {
            explicit: Some("cpu"),
            env: Some(&cuda),
            want: DeviceSpec::Cpu,
            source: Source::Explicit,
            auto: false,
        },
        Case {
            explicit: Some("auto"),
            env: Some("cpu"),
            want: DeviceSpec::Cuda(0),
            source: Source::Explicit,
            auto: true,
        },
        Case {
            explicit: None,
            env: Some(&cuda),
            want: DeviceSpec::Cuda(0),
            source: Source::Env(&cuda),
            auto: false,
        },
        Case {
            explicit: None,
            env: Some(&sim_b),
            want: DeviceSpec::Sim(b),
            source: Source::Env(&sim_b),
            auto: false,
        },
        Case {
            explicit: None,
            env: Some("cpu"),
            want: DeviceSpec::Cpu,
            source: Source::Env("cpu"),
            auto: false,
        },
        Case {
            explicit: None,
            env: Some(" "),
            want: DeviceSpec::Cuda(0),
            source: Source::Unset,
            auto: true,
        },
        Case {
            explicit: None,
            env: None,
            want: DeviceSpec::Cuda(0),
            source: Source::Unset,
            auto: true,
        },
    ];
    let decided: Vec<_> = cases
        .iter()
        .map(|c| decide(c.explicit, &machine(c.env, gpus)).map_err(|e| e.to_string()))
        .collect();
    s.observe(
        format!("each case with {gpus} GPU(s), in order"),
        &cases
            .iter()
            .zip(&decided)
            .map(|(c, d)| seen(c, d))
            .collect::<Vec<_>>(),
    );
    for (c, decided) in cases.iter().zip(decided) {
        check(c, gpus, decided);
    }
}

/// A mistake to make: `--device`, `WORKBOOK_DEVICE`, GPUs, what the error must mention.
type Mistake<'a> = (Option<&'a str>, Option<&'a str>, usize, Vec<String>);

#[test]
fn mistakes_name_where_they_came_from() {
    let s = scenario::start();
    let gpus = s.pick("GPUs", 1..5);
    let bad = format!("gpu{}", s.pick("a number", 0..100));
    let quoted = format!("'{bad}'");
    // (--device, WORKBOOK_DEVICE, GPUs, what the error must mention)
    let cases: Vec<Mistake> = vec![
        (
            None,
            Some(&bad),
            gpus,
            vec![DEVICE_ENV.into(), quoted.clone(), "sim:N".into()],
        ),
        (
            Some(&bad),
            Some("cpu"),
            gpus,
            vec!["--device".into(), quoted.clone(), "sim:N".into()],
        ),
    ];
    let missing_gpu = format!("cuda:{gpus}");
    let cases = cases.into_iter().chain([
        (
            Some(missing_gpu.as_str()),
            None,
            gpus,
            vec![missing_gpu.clone(), "cpu".into(), format!("sim:{gpus}")],
        ),
        (
            None,
            Some("cuda"),
            0,
            vec!["cuda:0".into(), "cpu".into(), "sim:0".into()],
        ),
        (
            Some("cuda"),
            Some("cpu"),
            0,
            vec!["cuda:0".into(), "cpu".into(), "sim:0".into()],
        ),
    ]);
    let cases: Vec<Mistake> = cases.collect();
    // What each error mentions, in order: the drawn ones must quote the drawn spelling and
    // name the drawn GPU count.
    let mentions: Vec<Result<Vec<&String>, String>> = cases
        .iter()
        .map(
            |(explicit, env, gpus, wanted)| match decide(*explicit, &machine(*env, *gpus)) {
                Ok(d) => Err(format!("{}", d.device)),
                Err(e) => {
                    let msg = e.to_string();
                    Ok(wanted.iter().filter(|w| msg.contains(w.as_str())).collect())
                }
            },
        )
        .collect();
    s.observe(
        "what each mistake's error, in order, mentions",
        &mentions.iter().map(Shown).collect::<Vec<_>>(),
    );
    for (explicit, env, gpus, wanted) in cases {
        let m = machine(env, gpus);
        let msg = refused(explicit, &m);
        for w in &wanted {
            assert!(
                msg.contains(w.as_str()),
                "decide({explicit:?}, {m:?}) should be an error that mentions {}, got: {msg}",
                wanted
                    .iter()
                    .map(|w| format!("'{w}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
}

#[test]
fn chooses_a_usable_placement_on_this_machine() {
    let s = scenario::start();
    let n = s.pick("sim number", 1..64);
    let asked = [
        (format!("sim:{n}"), Placement::sim(n)),
        ("cpu".to_string(), Placement::cpu()),
    ];
    let chosen: Vec<_> = asked
        .iter()
        .map(|(explicit, _)| choose(Some(explicit)))
        .collect();
    // The real machine: whatever the process's environment says, the policy agrees with the
    // library's (without --device, with --device of the lesson's accelerator).
    let ours = choose(None).map(|(p, _)| p.to_string());
    // One record: --device sim:N, --device cpu, then no --device on this machine.
    let gave = |c: &Result<(Placement, String), _>| {
        Shown(
            c.as_ref()
                .map(|(p, _): &(Placement, String)| p.to_string())
                .map_err(|_| "an error"),
        )
    };
    s.observe(
        "--device sim:N, --device cpu, and no --device on this machine give",
        &(
            gave(&chosen[0]),
            gave(&chosen[1]),
            Shown(ours.as_ref().map_err(|_| "an error")),
        ),
    );
    for ((explicit, want), chosen) in asked.into_iter().zip(chosen) {
        let (placement, reason) =
            chosen.unwrap_or_else(|e| panic!("choose(Some(\"{explicit}\")) failed: {e}"));
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
