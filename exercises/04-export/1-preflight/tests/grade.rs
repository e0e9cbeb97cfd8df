//! Graded tests for exercise 04-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! accelerator (`cuda:0`, or a simulated `sim:2` to `sim:7`), which parameter of the model holds
//! a NaN or an infinity, which layers keep a stale cache, the dropout and the example's wrong
//! sizes, so the problems to find cannot be written down in advance. What is compared is the
//! problems' checks and tensors, and which of the expected names and numbers their text
//! mentions, never their wording.

use super::preflight::{
    check_devices, check_dtypes, check_example, check_mode, check_outputs, preflight, Check, Mode,
    Problem,
};
use scenario::Scenario;
use std::collections::{BTreeSet, HashMap};
use workbook::candle_core::{DType, Device, Tensor};
use workbook::device::accelerator_or_sim;
use workbook::export::preflight::Example;
use workbook::{datasets, GcnConfig, Graph, LayerConfig, Model, ModelConfig, Placement};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

fn karate(at: &Placement) -> Graph {
    datasets::karate(at).expect("loading the karate club")
}

fn gcn(at: &Placement, seed: u64) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), seed, at)
        .expect("building the GCN")
        .0
}

/// A GCN of 2 to 5 layers of 4 to 63 hidden channels, or a GATv2, for the karate club, as the
/// challenge picks (their parameters differ). Returns it and a name for it.
fn some_model(s: &Scenario, at: &Placement) -> (Model, String) {
    let hidden = s.pick("hidden channels", 4..64);
    let (config, name) = if s.pick("model kind", 0..3) == 0 {
        (
            ModelConfig::gatv2(34, hidden, 2, 4),
            format!("a GATv2 of 2 x {hidden} hidden channels"),
        )
    } else {
        let layers = s.pick("layers", 2..6);
        let mut config = ModelConfig::gcn(34, hidden, 4);
        for _ in 2..layers {
            config
                .layers
                .insert(1, LayerConfig::Gcn(GcnConfig::new(hidden, hidden)));
        }
        (
            config,
            format!("a {layers}-layer GCN of {hidden} hidden channels"),
        )
    };
    let model = Model::init(config, s.seed("model"), at)
        .expect("building the model")
        .0;
    (model, name)
}

/// The problems as one line each, for assertion messages.
fn listed(problems: &[Problem]) -> String {
    if problems.is_empty() {
        return "no problems".into();
    }
    problems
        .iter()
        .map(|p| format!("[{:?}] {p}", p.check))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The numbers written in `text` (runs of digits), so that `34` is not found inside `134`.
fn numbers_in(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_ascii_digit() && c != '.')
        .map(|w| w.trim_matches('.').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// What the judge compares of a problem: its check, the tensor it names, and which of `words`
/// (names, calls, numbers) its problem or fix mentions.
fn summary(p: &Problem, words: &[String]) -> (String, String, Vec<String>) {
    let text = format!("{} {}", p.problem, p.fix);
    let numbers = numbers_in(&text);
    let mentioned = words
        .iter()
        .filter(|w| {
            if w.chars().all(|c| c.is_ascii_digit() || c == '.') {
                numbers.contains(w.as_str())
            } else {
                text.contains(w.as_str())
            }
        })
        .cloned()
        .collect();
    (format!("{:?}", p.check), p.tensor.clone(), mentioned)
}

/// Every problem's summary, sorted (two correct solutions may list them in another order).
fn summaries(problems: &[Problem], words: &[String]) -> Vec<(String, String, Vec<String>)> {
    let mut all: Vec<_> = problems.iter().map(|p| summary(p, words)).collect();
    all.sort();
    all
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| w.to_string()).collect()
}

fn about<'a>(problems: &'a [Problem], tensor: &str) -> Vec<&'a Problem> {
    problems.iter().filter(|p| p.tensor == tensor).collect()
}

/// The karate GCN (seeded by the challenge) on the cpu with some values of one parameter made
/// NaN or infinite, which and how many picked by the challenge (a diverged run). Returns it,
/// that parameter and how many of its values are non-finite.
fn gcn_with_non_finite(s: &Scenario) -> (Model, String, usize) {
    let clean = gcn(&Placement::cpu(), s.seed("poisoned model"));
    let mut tensors: HashMap<String, Tensor> = clean.named_parameters().into_iter().collect();
    let mut names: Vec<String> = tensors.keys().cloned().collect();
    names.sort();
    let name = names[s.pick("poisoned parameter", 0..names.len())].clone();
    let w = &tensors[&name];
    let mut values = w.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let how_many = 1 + s.pick("poisoned values", 0..values.len().min(60));
    let first = s.pick("first poisoned value", 0..values.len());
    let poison = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][s.pick("poison", 0..3)];
    for k in 0..how_many {
        let at = (first + k * 7) % values.len();
        values[at] = poison;
    }
    let bad = values.iter().filter(|v| !v.is_finite()).count();
    let poisoned = Tensor::from_vec(values, w.dims(), &Device::Cpu).unwrap();
    tensors.insert(name.clone(), poisoned);
    let model = Model::from_tensors(clean.config().clone(), &tensors, Placement::cpu()).unwrap();
    (model, name, bad)
}

/// How many of the model's logits on the example are NaN or infinite, counted here with the
/// library (x in the model's dtype), independently of the student's checks.
fn non_finite_logits(model: &Model, graph: &Graph) -> usize {
    let x = graph.x().to_dtype(model.dtype()).unwrap();
    let logits = model.forward(&x, graph.edge_index(), None).unwrap().logits;
    logits
        .to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
        .iter()
        .filter(|v| !v.is_finite())
        .count()
}

#[test]
fn a_clean_model_passes() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let graph = karate(&gpu);
    let example = Example::from_graph(&graph);
    let (model, name) = some_model(&s, &gpu);
    let problems = preflight(&model, Mode::Eval, &example);
    let config = ModelConfig::gatv2(34, 8, 2, 4);
    let gat = Model::init(config, s.seed("gatv2"), &gpu).unwrap().0;
    let gat_problems = preflight(&gat, Mode::Eval, &example);
    // The same model in half precision is not clean: what the checks find there (one problem
    // per parameter of the challenge's model) is what makes this record the challenge's, and a
    // pre-flight that finds nothing anywhere does not pass.
    let half = model.to_dtype(DType::F16).unwrap();
    let half_problems = check_dtypes(&half);
    s.observe(
        format!("problems of {name} on {gpu}, of a clean GATv2, and of the first in F16"),
        &(
            summaries(&problems, &[]),
            summaries(&gat_problems, &[]),
            summaries(&half_problems, &[]),
        ),
    );
    assert!(
        problems.is_empty(),
        "{name}, float32, in eval mode on {gpu}, with the example on {gpu}, must pass; got {}",
        listed(&problems)
    );
    assert!(
        gat_problems.is_empty(),
        "a clean GATv2 on {gpu} must pass; got {}",
        listed(&gat_problems)
    );
    assert_eq!(
        half_problems.len(),
        half.named_parameters().len(),
        "the same {name} in F16 is not clean: one Dtype problem per parameter; got {}",
        listed(&half_problems)
    );
}

#[test]
fn buffers_left_on_another_device_are_named() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    // GCN with `cached=True` in the layers the challenge picks: the first forward pass stores
    // their `_cached_edge_index` on the cpu; moving only the parameters leaves them there
    // (PyTorch's `module.to` does the same to PyG).
    let cached_layers: Vec<usize> = match s.pick("cached layers", 0..3) {
        0 => vec![0],
        1 => vec![1],
        _ => vec![0, 1],
    };
    let hidden = s.pick("hidden channels", 4..64);
    let mut config = ModelConfig::gcn(34, hidden, 4);
    for (k, layer) in config.layers.iter_mut().enumerate() {
        if let LayerConfig::Gcn(c) = layer {
            c.cached = cached_layers.contains(&k);
        }
    }
    let cached = Model::init(config, s.seed("model"), Placement::cpu())
        .unwrap()
        .0;
    cached.forward_graph(&karate(&Placement::cpu())).unwrap();
    let stale = cached.parameters_to_device(&gpu).unwrap();
    let problems = check_devices(&stale);
    let moved = cached.to_device(&gpu).unwrap();
    let after = check_devices(&moved);
    let expected_words = words(&["to_device", &gpu.to_string(), "cpu"]);
    // one record: the problems after model.to_device (none) beside the stale ones, which depend
    // on the challenge (a value that is always the same could be written in advance)
    s.observe(
        format!(
            "problems with stale buffers, {hidden} hidden channels, then after model.to_device"
        ),
        &(
            summaries(&problems, &expected_words),
            summaries(&after, &[]),
        ),
    );
    let buffers: Vec<String> = cached_layers
        .iter()
        .map(|k| format!("conv{}._cached_edge_index", k + 1))
        .collect();
    for buffer in &buffers {
        let found = about(&problems, buffer);
        assert!(
            found.len() == 1 && found[0].check == Check::Devices,
            "the buffer '{buffer}' is on cpu while the parameters are on {gpu}: expected one Devices problem naming it; got {}",
            listed(&problems)
        );
        assert!(
            found[0].fix.contains("to_device"),
            "the fix for '{buffer}' should say model.to_device(...); got '{}'",
            found[0].fix
        );
    }
    assert_eq!(
        problems.len(),
        buffers.len(),
        "only the stale buffers ({}) are elsewhere (every parameter is on {gpu}); got {}",
        buffers.join(", "),
        listed(&problems)
    );
    assert!(
        after.is_empty(),
        "model.to_device moves parameters and buffers together, so nothing is elsewhere; got {}",
        listed(&after)
    );
}

#[test]
fn half_precision_parameters_are_named() {
    let s = scenario::start();
    let (model, name) = some_model(&s, &Placement::cpu());
    let problems = check_dtypes(&model);
    // The float32 model's problems (none) are observed in one record with the half-precision
    // ones, which depend on the drawn model: alone, "none" could be written in advance.
    let mut observed = vec![summaries(&problems, &[])];
    assert!(
        problems.is_empty(),
        "a float32 model has no dtype problem; got {}",
        listed(&problems)
    );
    for dtype in [DType::F16, DType::BF16] {
        let half = model.to_dtype(dtype).unwrap();
        let problems = check_dtypes(&half);
        let expected_words = words(&[&format!("{dtype:?}"), "to_dtype(DType::F32)"]);
        observed.push(summaries(&problems, &expected_words));
        for (name, _) in half.named_parameters() {
            let found = about(&problems, &name);
            assert!(
                found.len() == 1 && found[0].check == Check::Dtype,
                "parameter '{name}' is {dtype:?}: expected one Dtype problem naming it; got {}",
                listed(&problems)
            );
            assert!(
                found[0].problem.contains(&format!("{dtype:?}")),
                "the problem for '{name}' should say it is {dtype:?}; got '{}'",
                found[0].problem
            );
            assert!(
                found[0].fix.contains("to_dtype(DType::F32)"),
                "the fix for '{name}' should say model.to_dtype(DType::F32); got '{}'",
                found[0].fix
            );
        }
        assert_eq!(
            problems.len(),
            half.named_parameters().len(),
            "one problem per parameter; got {}",
            listed(&problems)
        );
    }
    s.observe(
        format!("problems of {name} in float32, F16 and BF16"),
        &observed,
    );
}

#[test]
fn training_mode_is_refused() {
    let s = scenario::start();
    let mut config = ModelConfig::gatv2(34, 8, 2, 4);
    // a dropout the challenge picks, 0.01 to 0.99
    config.dropout = s.pick("dropout hundredths", 1..100) as f64 / 100.0;
    let dropout = config.dropout;
    let model = Model::init(config, s.seed("model"), Placement::cpu())
        .unwrap()
        .0;
    let in_eval = check_mode(&model, Mode::Eval);
    let problems = check_mode(&model, Mode::Train);
    let expected_words = words(&[&dropout.to_string(), "eval", "Eval"]);
    // one record: evaluation mode's (no problem) beside training mode's, which names the
    // challenge's dropout
    s.observe(
        "problems in evaluation mode, then in training mode",
        &(
            summaries(&in_eval, &[]),
            summaries(&problems, &expected_words),
        ),
    );
    assert!(
        in_eval.is_empty(),
        "evaluation mode is what is exported: no problem; got {}",
        listed(&in_eval)
    );
    assert!(
        problems.len() == 1 && problems[0].check == Check::Mode && problems[0].tensor == "model",
        "training mode must give one Mode problem about 'model'; got {}",
        listed(&problems)
    );
    assert!(
        numbers_in(&problems[0].problem).contains(&dropout.to_string()),
        "the problem should name the dropout that would be exported ({dropout}); got '{}'",
        problems[0].problem
    );
    assert!(
        problems[0].fix.contains("eval") || problems[0].fix.contains("Eval"),
        "the fix should say to export in evaluation mode (model.eval()); got '{}'",
        problems[0].fix
    );
}

#[test]
fn a_bad_example_is_named() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let model = gcn(&gpu, s.seed("model"));
    let on_cpu = karate(&Placement::cpu());
    // the dummy input on the cpu, the model on the accelerator
    let problems = check_example(&model, &Example::from_graph(&on_cpu));
    let device_words = words(&["to_device", &gpu.to_string()]);
    let on_cpu_summaries = summaries(&problems, &device_words);
    for input in ["x", "edge_index"] {
        let found = about(&problems, input);
        assert!(
            found.len() == 1 && found[0].check == Check::Example,
            "example input '{input}' is on cpu but the model on {gpu}: expected one Example problem naming it; got {}",
            listed(&problems)
        );
        assert!(
            found[0].fix.contains("to_device"),
            "the fix for '{input}' should say to_device; got '{}'",
            found[0].fix
        );
    }
    assert_eq!(
        problems.len(),
        2,
        "only the devices are wrong; got {}",
        listed(&problems)
    );
    let good = check_example(&model, &Example::from_graph(&karate(&gpu)));
    let good_summaries = summaries(&good, &[]);
    assert!(
        good.is_empty(),
        "the karate graph on {gpu} is a good example for this model; got {}",
        listed(&good)
    );

    // the wrong feature width, then the wrong dtype, then too few rows, on the cpu: the sizes
    // are the challenge's
    let model = gcn(&Placement::cpu(), s.seed("model"));
    let width = s.pick("example width", 35..64);
    let x_wide = Tensor::zeros((34, width), DType::F32, &Device::Cpu).unwrap();
    let problems = check_example(&model, &Example::new(&x_wide, on_cpu.edge_index()));
    let size_words = words(&[&width.to_string(), "34"]);
    // one record with the example on the cpu and on the model's device, whose problems alone
    // would be the same under many challenges: the width is the challenge's
    s.observe(
        "problems of an example on the cpu, on the model's device, and too wide",
        &(
            on_cpu_summaries,
            good_summaries,
            summaries(&problems, &size_words),
        ),
    );
    assert!(
        problems.len() == 1
            && problems[0].tensor == "x"
            && numbers_in(&problems[0].problem).contains(&width.to_string())
            && numbers_in(&problems[0].problem).contains("34"),
        "x has {width} features but the model takes in_channels = 34: expected one problem about 'x' naming both numbers; got {}",
        listed(&problems)
    );
    let half = [DType::F16, DType::BF16][s.pick("example dtype", 0..2)];
    let x16 = on_cpu.x().to_dtype(half).unwrap();
    let problems = check_example(&model, &Example::new(&x16, on_cpu.edge_index()));
    let dtype_words = words(&["to_dtype(DType::F32)", &format!("{half:?}")]);
    s.observe(
        format!("problems of an example in {half:?}"),
        &summaries(&problems, &dtype_words),
    );
    assert!(
        problems.len() == 1
            && problems[0].tensor == "x"
            && problems[0].fix.contains("to_dtype(DType::F32)"),
        "x is {half:?}: expected one problem about 'x' whose fix says to_dtype(DType::F32); got {}",
        listed(&problems)
    );
    let rows = s.pick("example rows", 10..34);
    let x_short = Tensor::zeros((rows, 34), DType::F32, &Device::Cpu).unwrap();
    let problems = check_example(&model, &Example::new(&x_short, on_cpu.edge_index()));
    let row_words = words(&[&rows.to_string(), "34"]);
    s.observe(
        "problems of an example too short",
        &summaries(&problems, &row_words),
    );
    assert!(
        problems.len() == 1
            && problems[0].tensor == "x"
            && numbers_in(&problems[0].problem).contains(&rows.to_string())
            && numbers_in(&problems[0].problem).contains("34"),
        "x has {rows} rows but edge_index is for 34 nodes: expected one problem about 'x' naming both numbers; got {}",
        listed(&problems)
    );
}

#[test]
fn non_finite_outputs_are_reported() {
    let s = scenario::start();
    let graph = karate(&Placement::cpu());
    let example = Example::from_graph(&graph);
    let clean = check_outputs(&gcn(&Placement::cpu(), s.seed("model")), &example)
        .unwrap_or_else(|e| panic!("check_outputs failed on a clean model: {e}"));
    assert!(
        clean.is_empty(),
        "a clean model gives finite logits; got {}",
        listed(&clean)
    );
    let (model, poisoned, bad) = gcn_with_non_finite(&s);
    let bad_logits = non_finite_logits(&model, &graph);
    let logits_bad = bad_logits > 0;
    let problems =
        check_outputs(&model, &example).unwrap_or_else(|e| panic!("check_outputs failed: {e}"));
    // the counts each problem names (how many values), among the two the test knows
    let counts = words(&[&bad.to_string(), &bad_logits.to_string()]);
    // one record with the clean model's (none), which alone could be written in advance
    s.observe(
        "problems of a clean model, then of one with a non-finite parameter, and the counts they name",
        &(summaries(&clean, &[]), summaries(&problems, &counts)),
    );
    assert!(
        about(&problems, &poisoned)
            .iter()
            .any(|p| p.check == Check::Outputs
                && !p.fix.is_empty()
                && numbers_in(&p.problem).contains(&bad.to_string())),
        "'{poisoned}' holds {bad} NaN or infinite value(s): expected an Outputs problem (with a fix) naming it and how many, even when the logits look fine; got {}",
        listed(&problems)
    );
    if logits_bad {
        assert!(
            about(&problems, "logits")
                .iter()
                .any(|p| numbers_in(&p.problem).contains(&bad_logits.to_string())),
            "{bad_logits} logits are NaN or infinite: the problem about 'logits' should say how many; got {}",
            listed(&problems)
        );
    }
    assert_eq!(
        about(&problems, "logits").len(),
        usize::from(logits_bad),
        "the logits {} NaN or infinity: expected {} Outputs problem about 'logits'; got {}",
        if logits_bad { "hold" } else { "hold no" },
        usize::from(logits_bad),
        listed(&problems)
    );
    assert_eq!(
        problems.len(),
        1 + usize::from(logits_bad),
        "only '{poisoned}'{} is non-finite; got {}",
        if logits_bad { " and the logits" } else { "" },
        listed(&problems)
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let half_dtype = [DType::F16, DType::BF16][s.pick("half dtype", 0..2)];
    // half precision, training mode, and the dummy input on the cpu: three kinds at once
    let (model, name) = some_model(&s, &gpu);
    let half = model.to_dtype(half_dtype).unwrap();
    let on_cpu = karate(&Placement::cpu());
    let problems = preflight(&half, Mode::Train, &Example::from_graph(&on_cpu));
    s.observe(
        format!("problems of {name} in {half_dtype:?}, in training mode, example on the cpu"),
        &summaries(&problems, &[]),
    );
    let mut expected: Vec<(Check, String)> = half
        .named_parameters()
        .into_iter()
        .map(|(n, _)| (Check::Dtype, n))
        .collect();
    expected.push((Check::Mode, "model".into()));
    expected.push((Check::Example, "x".into()));
    expected.push((Check::Example, "edge_index".into()));
    for (check, tensor) in &expected {
        assert!(
            problems
                .iter()
                .any(|p| p.check == *check && &p.tensor == tensor),
            "{name} in {half_dtype:?}, in training mode, with the example on cpu: expected a {check:?} problem about '{tensor}' among all the others; got {}",
            listed(&problems)
        );
    }
    assert!(
        problems.iter().all(|p| p.check != Check::Outputs),
        "with the example on another device the forward pass cannot run, so it must not be attempted; got {}",
        listed(&problems)
    );
    assert_eq!(
        problems.len(),
        expected.len(),
        "{} parameters in {half_dtype:?}, the mode, 2 example inputs; got {}",
        expected.len() - 3,
        listed(&problems)
    );
}

#[test]
fn the_forward_pass_runs_only_when_it_can() {
    let s = scenario::start();
    let on_cpu = karate(&Placement::cpu());
    // Dtype and mode problems do not stop the forward pass (x goes in the model's dtype): its
    // findings are added to theirs.
    let (poisoned_model, poisoned, bad) = gcn_with_non_finite(&s);
    let half_dtype = [DType::F16, DType::BF16][s.pick("half dtype", 0..2)];
    let nan_half = poisoned_model.to_dtype(half_dtype).unwrap();
    let bad_logits = non_finite_logits(&nan_half, &on_cpu);
    let logits_bad = bad_logits > 0;
    let problems = preflight(&nan_half, Mode::Train, &Example::from_graph(&on_cpu));
    s.observe(
        "problems of a half-precision model with a non-finite parameter, in training mode",
        &summaries(
            &problems,
            &words(&[&bad.to_string(), &bad_logits.to_string()]),
        ),
    );
    let mut expected = vec![
        (Check::Dtype, "conv1.lin.weight".to_string()),
        (Check::Mode, "model".to_string()),
        (Check::Outputs, poisoned.clone()),
    ];
    if logits_bad {
        expected.push((Check::Outputs, "logits".to_string()));
    }
    for (check, tensor) in &expected {
        assert!(
            problems
                .iter()
                .any(|p| p.check == *check && &p.tensor == tensor),
            "a {half_dtype:?} model with a non-finite '{poisoned}', in training mode: expected a {check:?} problem about '{tensor}' (the forward pass runs, with x in the model's dtype); got {}",
            listed(&problems)
        );
    }
    // An example of the wrong width cannot run: no forward pass, no Outputs problem.
    let gpu = accelerator(&s);
    let model = gcn(&gpu, s.seed("model"));
    let width = s.pick("example width", 35..64);
    let x = Tensor::zeros((34, width), DType::F32, gpu.device()).unwrap();
    let graph = karate(&gpu);
    let problems = preflight(&model, Mode::Eval, &Example::new(&x, graph.edge_index()));
    let wide = summaries(&problems, &words(&[&width.to_string(), "34"]));
    assert!(
        problems.len() == 1 && problems[0].check == Check::Example,
        "an example {width} features wide cannot run through a model taking 34: expected its one Example problem and no forward pass; got {}",
        listed(&problems)
    );
    // A stale cache on the cpu cannot run either: the Devices problem alone.
    let mut config = ModelConfig::gcn(34, 16, 4);
    if let LayerConfig::Gcn(c) = &mut config.layers[0] {
        c.cached = true;
    }
    let cached = Model::init(config, s.seed("model"), Placement::cpu())
        .unwrap()
        .0;
    cached.forward_graph(&on_cpu).unwrap();
    let stale = cached.parameters_to_device(&gpu).unwrap();
    let problems = preflight(&stale, Mode::Eval, &Example::from_graph(&graph));
    // one record: the stale cache's problem is the same under every challenge (for a device),
    // the example's width is the challenge's
    s.observe(
        format!("problems of an example {width} wide, then of a model on {gpu} with a stale cache"),
        &(wide, summaries(&problems, &[])),
    );
    assert!(
        problems.len() == 1
            && problems[0].check == Check::Devices
            && problems[0].tensor == "conv1._cached_edge_index",
        "conv1's cache is on cpu, the model on {gpu}: expected the one Devices problem and no forward pass; got {}",
        listed(&problems)
    );
}
