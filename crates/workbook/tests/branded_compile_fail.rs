//! Branded placements ([`workbook::branded`]): what the compiler refuses, what it accepts and
//! runs, and the runtime-checked fallback where a brand cannot go.
//!
//! Each case in `tests/branded_fail/` is a classic device mistake of chapters 1, 2 and 6 written
//! with brands; it must fail to compile with the message checked in beside it (`.stderr`), which
//! the book shows (chapter 1, "Refused by the compiler"). The cases run in `tests/compile_fail.rs`
//! (one trybuild project for the crate); regenerate after a toolchain change with
//! `TRYBUILD=overwrite cargo test -p workbook --test compile_fail`, then read the diff. This file,
//! a module of `tests/it.rs`, runs the right programs and the fallbacks.
//!
//! The right programs run on `sim:1` and `sim:2`, and on `cuda:0` in a `cuda` build with a GPU
//! (skipped, saying so, elsewhere).

use workbook::branded::{branded, train, with_placement, with_placements, Cpu, On};
use workbook::ledger::Ledger;
use workbook::placed_tensor::PlacedTensor;
use workbook::{datasets, Graph, Model, ModelConfig, Placement, WorkbookError};

fn karate() -> Graph {
    datasets::karate(Placement::cpu()).unwrap()
}

/// The right program of chapter 1 and 2: model, graph, labels and optimiser on one device,
/// five steps; the loss falls and every upload is in the ledger.
fn train_on(at: Placement) -> workbook::Result<(Vec<f32>, Ledger)> {
    let ledger = Ledger::new();
    let graph = karate();
    let losses = with_placement(at.with_ledger(&ledger), |dev| -> workbook::Result<_> {
        let graph = dev.put(&graph)?;
        let model = dev.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let mut opt = train::adam(&model, 0.01)?;
        let mut dropout = dev.dropout(0);
        (0..5)
            .map(|_| train::scalar(&train::step(&model, &mut opt, &graph, &mut dropout)?))
            .collect::<workbook::Result<Vec<f32>>>()
    })?;
    Ok((losses, ledger))
}

#[test]
fn the_right_program_trains_on_sim_1_and_sim_2_and_records_its_moves() {
    for at in [Placement::sim(1), Placement::sim(2)] {
        let name = at.to_string();
        let (losses, ledger) = train_on(at).unwrap();
        assert!(losses.iter().all(|l| l.is_finite()), "{name}: {losses:?}");
        assert!(
            losses[4] < losses[0],
            "{name}: the loss did not fall: {losses:?}"
        );
        let moved: Vec<String> = ledger.transfers().iter().map(|t| t.what.clone()).collect();
        assert!(
            moved.iter().any(|w| w.contains("karate.x")),
            "{name}: the graph's move is not in the ledger: {moved:?}"
        );
    }
}

#[test]
fn the_right_program_trains_on_cuda_0_when_there_is_one() {
    match Placement::cuda(0) {
        Ok(gpu) => {
            let (losses, _) = train_on(gpu).unwrap();
            assert!(losses[4] < losses[0], "cuda:0: {losses:?}");
        }
        Err(why) => eprintln!("skipped: {why}"),
    }
}

#[test]
fn a_branded_step_is_the_unbranded_step_bit_for_bit() {
    let (branded, _) = train_on(Placement::sim(1)).unwrap();
    let sim = Placement::sim(1);
    let graph = karate().to_device(&sim).unwrap();
    let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &sim).unwrap();
    let mut opt = workbook::train::Adam::for_model(&model, 0.01, |_| 0.0).unwrap();
    let mut dropout = workbook::train::Dropout::new(0, sim.device());
    let (y, ids) = (graph.y().unwrap(), &graph.split().unwrap().train);
    let plain: Vec<f32> = (0..5)
        .map(|_| {
            let out = model
                .forward_t(graph.x(), graph.edge_index(), None, Some(&mut dropout))
                .unwrap();
            let loss = workbook::candle_nn::loss::cross_entropy(
                &out.logits.index_select(ids, 0).unwrap(),
                &y.index_select(ids, 0).unwrap(),
            )
            .unwrap();
            opt.backward_step(&loss).unwrap();
            loss.to_scalar::<f32>().unwrap()
        })
        .collect();
    assert_eq!(branded, plain);
}

#[test]
fn the_fixes_of_the_refused_programs_compile_and_run_on_two_devices() {
    let graph = karate();
    with_placements(
        Placement::sim(1),
        Placement::sim(2),
        |d0, d1| -> workbook::Result<()> {
            // model_and_graph_on_two_devices: move the graph to the model
            let model = d0.init(ModelConfig::gcn(34, 16, 4), 0)?;
            let g1 = d1.put(&graph)?;
            let logits = train::forward(&model, &g1.to(&d0)?)?;
            assert_eq!(logits.placement(), &Placement::sim(1));
            // labels_left_on_the_host: move the labels
            let host = Cpu::put(&PlacedTensor::new(
                "y",
                &[0.0, 1.0, 2.0, 3.0],
                &Placement::cpu(),
            )?)?;
            let y = host.to(&d0)?;
            assert_eq!(y.placement(), &Placement::sim(1));
            // optimiser_built_before_the_move: the optimiser follows the model
            let opt = train::adam(&model, 0.01)?;
            let moved = model.to(&d1)?;
            let mut opt = opt.follow(&moved)?;
            assert_eq!(opt.state_placement(), &Placement::sim(2));
            let mut dropout = d1.dropout(0);
            let loss = train::step(&moved, &mut opt, &g1, &mut dropout)?;
            assert!(train::scalar(&loss)?.is_finite());
            // outputs_gathered_without_moving: move one output, then gather
            let out0 = train::forward(&model, &d0.put(&graph)?)?;
            let out1 = train::forward(&moved, &g1)?;
            let all = train::gather(&[&out0, &out1.to(&d0)?])?;
            assert_eq!(all.tensor().dims(), &[68, 4]);
            assert_eq!(all.placement(), &Placement::sim(1));
            Ok(())
        },
    )
    .unwrap();
}

/// `--devices sim:1,sim:2,sim:3`: a list of any length has no fixed number of brands. The
/// fallback: one brand at a time, values crossing as plain values, checked when they come in.
#[test]
fn a_device_list_chosen_at_run_time_falls_back_to_runtime_checks() {
    let spec = "sim:1,sim:2,sim:3";
    let devices: Vec<Placement> = spec
        .split(',')
        .map(|s| Placement::sim(s.trim_start_matches("sim:").parse().unwrap()))
        .collect();
    let graph = karate();
    let home = Placement::sim(1);
    let mut outputs: Vec<PlacedTensor> = Vec::new();
    for at in &devices {
        let out = with_placement(at.clone(), |dev| -> workbook::Result<_> {
            let model = dev.init(ModelConfig::gcn(34, 16, 4), 0)?;
            let out = train::forward(&model, &dev.put(&graph)?)?;
            Ok(out.into_inner())
        })
        .unwrap();
        outputs.push(out);
    }
    // Gathering on sim:1: each output comes back under sim:1's brand, checked at run time.
    let err = with_placement(home.clone(), |dev| -> workbook::Result<()> {
        let parts = outputs
            .iter()
            .map(|o| branded(&dev, o.clone()))
            .collect::<workbook::Result<Vec<On<PlacedTensor>>>>()?;
        train::gather(&parts.iter().collect::<Vec<_>>())?;
        Ok(())
    })
    .unwrap_err();
    let WorkbookError::DeviceMismatch(m) = &err else {
        panic!("not a named mismatch: {err}")
    };
    assert_eq!(m.expected.to_string(), "sim:1");
    assert_eq!(m.found.to_string(), "sim:2");
    assert!(err.to_string().contains("dev.put(&value)"), "{err}");
    // The fix: move each there (a recorded copy) instead of branding it where it is not.
    let rows = with_placement(home, |dev| -> workbook::Result<Vec<usize>> {
        let parts = outputs
            .iter()
            .map(|o| dev.put(o))
            .collect::<workbook::Result<Vec<_>>>()?;
        Ok(train::gather(&parts.iter().collect::<Vec<_>>())?
            .tensor()
            .dims()
            .to_vec())
    })
    .unwrap();
    assert_eq!(rows, vec![34 * devices.len(), 4]);
}

/// A spawned thread outlives any closure, so a branded value cannot go there: it goes plain and
/// is branded again, checked, by the thread's own `with_placement`.
#[test]
fn values_crossing_a_thread_are_branded_again_on_arrival() {
    let graph = with_placement(Placement::sim(2), |dev| {
        dev.put(&karate()).map(On::into_inner)
    })
    .unwrap();
    let worker = std::thread::spawn(move || {
        let on_sim2 = with_placement(Placement::sim(2), |dev| {
            branded(&dev, graph.clone()).map(|g| g.num_nodes())
        });
        let on_sim1 = with_placement(Placement::sim(1), |dev| {
            branded(&dev, graph).map(|g| g.num_nodes())
        });
        (on_sim2, on_sim1)
    });
    let (right, wrong) = worker.join().unwrap();
    assert_eq!(right.unwrap(), 34);
    let err = wrong.unwrap_err().to_string();
    assert!(err.contains("is on sim:2"), "{err}");
}

/// A checkpoint stores values, not brands: saved from one brand, loaded, branded again.
#[test]
fn a_checkpoint_round_trip_is_branded_again_after_loading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let config = ModelConfig::gcn(34, 16, 4);
    with_placement(Placement::sim(1), |dev| -> workbook::Result<()> {
        let model = dev.init(config.clone(), 0)?;
        workbook::checkpoint::save(model.get(), &path)?;
        let loaded = workbook::checkpoint::load(&path, dev.placement())?;
        let loaded = branded(&dev, loaded)?;
        let logits = train::forward(&loaded, &dev.put(&karate())?)?;
        assert_eq!(logits.placement(), &Placement::sim(1));
        // Loaded onto the host instead, it is refused under sim:1's brand, by name.
        let on_cpu = workbook::checkpoint::load(&path, Placement::cpu())?;
        let err = branded(&dev, on_cpu).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("is on cpu"), "{err}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_brand_costs_no_memory() {
    assert_eq!(
        std::mem::size_of::<On<'static, Model>>(),
        std::mem::size_of::<Model>()
    );
    assert_eq!(
        std::mem::size_of::<On<'static, PlacedTensor>>(),
        std::mem::size_of::<PlacedTensor>()
    );
}
