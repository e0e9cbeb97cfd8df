//! Graded tests for exercise 01-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed (each mismatch's
//! culprit, kind, devices and message), and a teacher's grader compares that with the reference
//! solution's. The run's challenge picks the simulated devices' numbers and which tensors are
//! left elsewhere, so the answers cannot be written down in advance.

use super::device_check::{check_same_device, pre_forward_check, Kind, Mismatch, Named};
use scenario::{Scenario, Shown};
use workbook::candle_core::{DType, Tensor};
use workbook::device::accelerator_or_sim;
use workbook::parallel::model_parallel::ModelParallel;
use workbook::{datasets, GcnConfig, GraphPart, LayerConfig, Model, ModelConfig, Placement};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// Another device, never the accelerator: `sim:8` to `sim:15`.
fn elsewhere(s: &Scenario) -> Placement {
    Placement::sim(s.pick("other device", 8..16))
}

/// A seeded coin.
fn coin(s: &Scenario, label: &str) -> bool {
    s.seed(label) & 1 == 1
}

fn gcn_on(at: &Placement) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), 0, at)
        .expect("building the GCN")
        .0
}

/// The GCN with `cached=True` in both layers (PyG: `GCNConv(..., cached=True)`).
fn cached_gcn_on(at: &Placement) -> Model {
    let conv = |i, o| {
        let mut c = GcnConfig::new(i, o);
        c.cached = true;
        LayerConfig::Gcn(c)
    };
    let config = ModelConfig {
        layers: vec![conv(34, 16), conv(16, 4)],
        ..ModelConfig::gcn(34, 16, 4)
    };
    Model::init(config, 0, at)
        .expect("building the cached GCN")
        .0
}

/// The full message the library would write for this mismatch.
fn message(expected_what: &str, expected: &str, kind: Kind, culprit: &str, found: &str) -> String {
    format!(
        "Expected all tensors to be on the same device: {expected_what} are on {expected} but {} '{culprit}' is on {found}. {}",
        kind.noun(),
        kind.fix()
    )
}

/// A mismatch as observed: culprit, kind, expected device, found device, message.
type Seen = (String, String, String, String, String);

/// A check's answer, as observed: the mismatch's fields and message, or that it passed.
fn seen(got: &Result<(), Mismatch>) -> Shown<Option<Seen>> {
    Shown(got.as_ref().err().map(|m| {
        (
            m.culprit.clone(),
            format!("{:?}", m.kind),
            m.expected.clone(),
            m.found.clone(),
            m.to_string(),
        )
    }))
}

/// Checks that `got` names `culprit` (of `kind`), expected on `expected` and found on `found`,
/// with the library's message.
fn assert_names(
    got: Result<(), Mismatch>,
    situation: &str,
    (expected_what, expected): (&str, &Placement),
    (culprit, kind): (&str, Kind),
    found: &Placement,
) {
    let err = match got {
        Ok(()) => panic!("the check passed, but {situation}"),
        Err(m) => m,
    };
    let msg = err.to_string();
    assert!(
        err.culprit == culprit && err.kind == kind,
        "{situation}: the first tensor elsewhere, in the order checked, is the {} '{culprit}'; the mismatch named the {} '{}' ({msg})",
        kind.noun(),
        err.kind.noun(),
        err.culprit
    );
    assert_eq!(
        (err.expected.as_str(), err.found.as_str()),
        (expected.to_string().as_str(), found.to_string().as_str()),
        "{situation}: the mismatch should say '{culprit}' was expected on {expected} and found on {found}"
    );
    let want = message(
        expected_what,
        &expected.to_string(),
        kind,
        culprit,
        &found.to_string(),
    );
    assert_eq!(
        msg, want,
        "{situation}: the message should name the culprit, both devices and the fix, on one line, in the library's words"
    );
}

#[test]
fn names_an_input_culprit() {
    let s = scenario::start();
    let (home, away) = (accelerator(&s), elsewhere(&s));
    let cpu = Placement::cpu();
    // one input elsewhere (on the cpu or another device), everything else in place
    let (culprit, found) = if coin(&s, "culprit") {
        ("edge_index", &cpu)
    } else {
        ("x", &away)
    };
    let mut tensors = vec![
        Named::new("conv1.lin.weight", Kind::Parameter, &home),
        Named::new("conv1.bias", Kind::Parameter, &home),
        Named::new("x", Kind::Input, &home),
        Named::new("edge_index", Kind::Input, &home),
    ];
    for t in &mut tensors {
        if t.name == culprit {
            t.placement = found;
        }
    }
    let got = check_same_device("model parameters", &home, &tensors);
    // and nothing to name: Ok
    let fine: Vec<Named> = tensors
        .iter()
        .map(|t| Named::new(t.name.clone(), t.kind, &home))
        .collect();
    let in_place = check_same_device("model parameters", &home, &fine);
    // One record: the passing check is the same under every challenge, the culprit is not.
    s.observe(
        "one input elsewhere, then everything in place",
        &(seen(&got), seen(&in_place)),
    );
    assert_names(
        got,
        &format!("'{culprit}' is on {found} and everything else on {home}"),
        ("model parameters", &home),
        (culprit, Kind::Input),
        found,
    );
    if let Err(m) = in_place {
        panic!(
            "every tensor is on {home}, yet check_same_device named '{}': {m}",
            m.culprit
        );
    }
}

#[test]
fn names_the_first_culprit_a_parameter() {
    let s = scenario::start();
    let (home, away) = (accelerator(&s), elsewhere(&s));
    let cpu = Placement::cpu();
    // several tensors elsewhere, in an order the challenge picks: the first one is the culprit
    let mut tensors = vec![
        Named::new("conv1.lin.weight", Kind::Parameter, &home),
        Named::new("conv1.bias", Kind::Parameter, &home),
        Named::new("conv2.lin.weight", Kind::Parameter, &away),
        Named::new("conv2.bias", Kind::Parameter, &cpu),
        Named::new("x", Kind::Input, &cpu),
        Named::new("conv1._cached_edge_index", Kind::Buffer, &away),
    ];
    let rotate = s.pick("first stray", 2..6);
    tensors[2..].rotate_left(rotate - 2);
    let first = &tensors[2];
    let (culprit, kind, found) = (first.name.clone(), first.kind, first.placement.clone());
    let what = format!("{home}'s layer");
    let got = check_same_device(&what, &home, &tensors);
    s.observe("several tensors elsewhere", &seen(&got));
    let order: Vec<String> = tensors
        .iter()
        .map(|t| format!("{} ({})", t.name, t.placement))
        .collect();
    assert_names(
        got,
        &format!(
            "{} of the tensors, in this order, are not on {home}: {}",
            tensors.len() - 2,
            order.join(", ")
        ),
        (&what, &home),
        (&culprit, kind),
        &found,
    );
}

/// A graph's parts in the order `pre_forward_check` checks them.
const PARTS: [GraphPart; 4] = [
    GraphPart::X,
    GraphPart::EdgeIndex,
    GraphPart::EdgeWeight,
    GraphPart::Labels,
];

#[test]
fn checks_the_model_and_the_graph_before_the_forward_pass() {
    let s = scenario::start();
    let (gpu, away) = (accelerator(&s), elsewhere(&s));
    let cpu = Placement::cpu();
    let host = datasets::karate(&cpu).unwrap();
    let weights = Tensor::ones(host.num_edges(), DType::F32, cpu.device()).unwrap();
    let weighted = host.clone().with_edge_weight(weights).unwrap();
    let model = gcn_on(&gpu);

    // 1. A graph left on the cpu: the first part checked is 'x'.
    let got = pre_forward_check(&model, &host);
    s.observe("the graph on the cpu", &seen(&got));
    assert_names(
        got,
        &format!("the model is on {gpu} and the graph on cpu"),
        ("model parameters", &gpu),
        ("x", Kind::Input),
        &cpu,
    );

    // 2. Some parts of the graph left behind (a challenge-picked set, at least one): the first
    // in the graph's order is named.
    let on_gpu = weighted.to_device(&gpu).unwrap();
    let mut stray: Vec<GraphPart> = PARTS
        .into_iter()
        .chain([GraphPart::Masks])
        .filter(|p| coin(&s, &format!("{} left behind", p.name())))
        .collect();
    if stray.is_empty() {
        stray.push(GraphPart::Masks);
    }
    let mut partial = on_gpu.clone();
    for (k, part) in stray.iter().enumerate() {
        let to = if k % 2 == 0 { &cpu } else { &away };
        partial = partial.move_part(*part, to).unwrap();
    }
    let names: Vec<&str> = stray.iter().map(|p| p.name()).collect();
    let got = pre_forward_check(&model, &partial);
    s.observe("parts of the graph left behind", &seen(&got));
    assert_names(
        got,
        &format!(
            "the graph's {} were left elsewhere and the model is on {gpu} (parts are checked in the graph's order: x, edge_index, edge_weight, y, masks)",
            names.join(", ")
        ),
        ("model parameters", &gpu),
        (stray[0].name(), Kind::Input),
        &cpu,
    );

    // 3. A stale cached buffer: PyTorch's module.to moves the parameters and leaves PyG's
    // _cached_edge_index behind. With a graph part also left behind, the graph comes first.
    let cached = cached_gcn_on(&cpu);
    cached.forward_graph(&host).unwrap(); // fills the cache on the cpu
    let stale = cached.parameters_to_device(&gpu).unwrap();
    let graph = host.to_device(&gpu).unwrap();
    let got = pre_forward_check(&stale, &graph);
    s.observe("a stale cached buffer", &seen(&got));
    assert_names(
        got,
        &format!("conv1._cached_edge_index is still on the cpu (check the model's buffer_placements), the rest on {gpu}"),
        ("model parameters", &gpu),
        ("conv1._cached_edge_index", Kind::Buffer),
        &cpu,
    );
    let late_labels = graph.move_part(GraphPart::Labels, &away).unwrap();
    let got = pre_forward_check(&stale, &late_labels);
    s.observe("a stale cached buffer and labels elsewhere", &seen(&got));
    assert_names(
        got,
        &format!("the labels are on {away} and conv1._cached_edge_index on cpu (the graph is checked before the buffers)"),
        ("model parameters", &gpu),
        ("y", Kind::Input),
        &away,
    );

    // 4. A layer elsewhere: the model split over two devices, checked as one.
    let split = ModelParallel::new(&model, &[gpu.clone(), away.clone()]).unwrap();
    let got = pre_forward_check(split.model(), &graph);
    s.observe("the second layer elsewhere", &seen(&got));
    assert_names(
        got,
        &format!(
            "conv2 is on {away} and conv1 and the graph on {gpu} (parameters are checked first)"
        ),
        ("model parameters", &gpu),
        ("conv2.lin.weight", Kind::Parameter),
        &away,
    );
}

#[test]
fn passes_when_everything_is_on_one_device() {
    let s = scenario::start();
    let cpu = Placement::cpu();
    for (at, label) in [
        (cpu.clone(), "the cpu"),
        (accelerator(&s), "the accelerator"),
    ] {
        let graph = datasets::karate(&at).unwrap();
        let model = cached_gcn_on(&at);
        model.forward_graph(&graph).unwrap(); // fills the cache where the model is
        assert_eq!(
            model.buffer_placements().len(),
            2,
            "the cached GCN should have its two buffers"
        );
        let got = pre_forward_check(&model, &graph);
        // ...and a check that always passes is no check: one part of the graph, which the
        // challenge picks, elsewhere.
        let away = if at == cpu {
            elsewhere(&s)
        } else {
            cpu.clone()
        };
        let part = [GraphPart::X, GraphPart::EdgeIndex, GraphPart::Labels]
            [s.pick(&format!("the part elsewhere, on {label}"), 0..3)];
        let partial = graph.move_part(part, &away).unwrap();
        let stray = pre_forward_check(&model, &partial);
        // One record: the passing check is the same under every challenge; the stray part and
        // where it is are not.
        let named = |got: &Result<(), Mismatch>| {
            got.as_ref()
                .err()
                .map(|m| (m.culprit.clone(), m.found.clone()))
        };
        s.observe(
            format!("everything on {label}, then one part elsewhere: the culprit and where it is"),
            &(Shown(named(&got)), Shown(named(&stray))),
        );
        if let Err(e) = got {
            panic!("everything is on {at}, yet pre_forward_check failed: {e}");
        }
        match stray {
            Ok(()) => panic!(
                "pre_forward_check passed with '{}' on {away} and everything else on {at}",
                part.name()
            ),
            Err(m) => assert!(
                m.culprit == part.name() && m.found == away.to_string(),
                "with '{}' on {away} and everything else on {at}, the mismatch should name '{}' found on {away}, not '{}' found on {} ({m})",
                part.name(),
                part.name(),
                m.culprit,
                m.found
            ),
        }
    }
}
