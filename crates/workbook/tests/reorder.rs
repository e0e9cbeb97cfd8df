//! Node orders (`workbook::reorder`): the permutation maps everything back exactly, a model
//! predicts the same on the reordered graph, reverse Cuthill-McKee and Rabbit order recover the
//! locality a random numbering hides, bad permutations are typed errors; and the k-nearest-
//! neighbour generator (`datasets::knn`) behind the benchmark's local graph.

use crate::common::max_abs_diff;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::datasets::{self, csbm, knn, CsbmConfig, KnnConfig};
use workbook::error::PermutationError;
use workbook::loader::{LoaderConfig, NeighborLoader};
use workbook::reorder::{edge_locality, permute_graph, reorder_graph, Order, Permutation};
use workbook::{Graph, Model, ModelConfig, WorkbookError};

fn cora() -> Graph {
    let empty = tempfile::tempdir().unwrap();
    datasets::load_planetoid("cora", Some(empty.path()), &Device::Cpu)
        .unwrap()
        .0
}

fn small_csbm() -> Graph {
    csbm(&CsbmConfig::new(3_000), &Device::Cpu).unwrap()
}

/// Every node part of `graph`, mapped back through `perm` from `reordered`, is the original's.
fn assert_maps_back(graph: &Graph, reordered: &Graph, perm: &Permutation) {
    let n = graph.num_nodes();
    assert_eq!(perm.len(), n);
    // The permutation and its inverse compose to the identity, both ways round.
    assert_eq!(
        perm.then(&perm.inverse()).unwrap(),
        Permutation::identity(n)
    );
    assert_eq!(perm.inverse().then(perm).unwrap(), Permutation::identity(n));
    for old in [0, n as u32 / 2, n as u32 - 1] {
        assert_eq!(perm.old_id(perm.new_id(old).unwrap()).unwrap(), old);
    }
    let ids: Vec<u32> = (0..n as u32).collect();
    assert_eq!(
        perm.to_old_ids(&perm.to_new_ids(&ids).unwrap()).unwrap(),
        ids
    );
    // Not the identity: the test would pass vacuously otherwise.
    assert_ne!(perm.new_of_old(), &ids[..], "{}", graph.name);

    let x_back = perm.to_old_rows(reordered.x()).unwrap();
    assert_eq!(max_abs_diff(&x_back, graph.x()), 0.0);
    let y_back = perm
        .to_old_rows(reordered.y().unwrap())
        .unwrap()
        .to_vec1::<u32>()
        .unwrap();
    assert_eq!(y_back, graph.y().unwrap().to_vec1::<u32>().unwrap());
    let split_back = perm.to_old_split(reordered.split().unwrap()).unwrap();
    let original = graph.split().unwrap();
    for (a, b) in [
        (&split_back.train, &original.train),
        (&split_back.val, &original.val),
        (&split_back.test, &original.test),
    ] {
        let mut b = b.to_vec1::<u32>().unwrap();
        b.sort_unstable();
        assert_eq!(a.to_vec1::<u32>().unwrap(), b);
    }
    // The same edges, renamed.
    let edges = |g: &Graph, map: Option<&[u32]>| {
        let ei = g.edge_index();
        let name = |v: u32| map.map_or(v, |m| m[v as usize]);
        let mut e: Vec<(u32, u32)> = ei
            .sources_host()
            .iter()
            .zip(ei.targets_host())
            .map(|(&s, &t)| (name(s), name(t)))
            .collect();
        e.sort_unstable();
        e
    };
    assert_eq!(
        edges(reordered, Some(perm.old_of_new())),
        edges(graph, None)
    );
}

#[test]
fn the_permutation_and_its_inverse_map_everything_back_on_csbm_and_cora() {
    for graph in [small_csbm(), cora()] {
        for order in Order::ALL {
            let (reordered, perm) = reorder_graph(&graph, order).unwrap();
            assert_eq!(reordered.num_edges(), graph.num_edges());
            assert_eq!(reordered.num_classes(), graph.num_classes());
            assert_maps_back(&graph, &reordered, &perm);
        }
    }
}

#[test]
fn edge_weights_follow_their_edges() {
    let graph = small_csbm();
    let e = graph.num_edges();
    // A weight that names its edge: 1000 * source + target, in the old ids.
    let ei = graph.edge_index();
    let w: Vec<f32> = ei
        .sources_host()
        .iter()
        .zip(ei.targets_host())
        .map(|(&s, &t)| (s * 1000 + t) as f32)
        .collect();
    let graph = graph
        .with_edge_weight(Tensor::from_vec(w, e, &Device::Cpu).unwrap())
        .unwrap();
    let (reordered, perm) = reorder_graph(&graph, Order::Rabbit).unwrap();
    let rei = reordered.edge_index();
    let w = reordered.edge_weight().unwrap().to_vec1::<f32>().unwrap();
    for (k, (&s, &t)) in rei
        .sources_host()
        .iter()
        .zip(rei.targets_host())
        .enumerate()
    {
        let (s, t) = (perm.old_of_new()[s as usize], perm.old_of_new()[t as usize]);
        assert_eq!(w[k], (s * 1000 + t) as f32, "edge {k}");
    }
}

/// GCN and GATv2 with the same weights predict the same on the reordered graph, once mapped
/// back (up to summation order).
#[test]
fn predictions_on_the_reordered_graph_map_back_to_the_unpermuted_run() {
    let graph = cora();
    let (f, c) = (graph.num_features(), graph.num_classes());
    for config in [ModelConfig::gcn(f, 16, c), ModelConfig::gatv2(f, 8, 8, c)] {
        let (model, _) = Model::init(config, 7, workbook::Placement::cpu()).unwrap();
        let before = model.forward_graph(&graph).unwrap().logits;
        for order in Order::ALL {
            let (reordered, perm) = reorder_graph(&graph, order).unwrap();
            let after = model.forward_graph(&reordered).unwrap().logits;
            let back = perm.to_old_rows(&after).unwrap();
            let diff = max_abs_diff(&back, &before);
            assert!(diff <= 1e-6, "{order}: {diff}");
            // Without mapping back the rows are another node's: the check is not vacuous.
            assert!(max_abs_diff(&after, &before) > 1e-2, "{order}");
        }
    }
}

/// A GCN with edge weights: the weights have to travel with their edges for this to hold.
#[test]
fn weighted_gcn_predictions_map_back() {
    let graph = small_csbm();
    let e = graph.num_edges();
    let w: Vec<f32> = (0..e).map(|k| 0.5 + (k % 7) as f32 / 7.0).collect();
    let graph = graph
        .with_edge_weight(Tensor::from_vec(w, e, &Device::Cpu).unwrap())
        .unwrap();
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let (model, _) = Model::init(config, 3, workbook::Placement::cpu()).unwrap();
    let before = model.forward_graph(&graph).unwrap().logits;
    let (reordered, perm) = reorder_graph(&graph, Order::ReverseCuthillMcKee).unwrap();
    let after = model.forward_graph(&reordered).unwrap().logits;
    assert!(max_abs_diff(&perm.to_old_rows(&after).unwrap(), &before) <= 1e-6);
}

#[test]
fn a_batchs_n_id_maps_back_to_the_original_nodes() {
    let graph = small_csbm();
    let (reordered, perm) = reorder_graph(&graph, Order::Rabbit).unwrap();
    let loader = NeighborLoader::new(&reordered, LoaderConfig::new(&[5, 5], 64)).unwrap();
    let batch = loader.batches(0).next().unwrap().unwrap();
    let old = perm.to_old_id_tensor(batch.n_id()).unwrap();
    let old_host = perm.to_old_ids(batch.n_id_host()).unwrap();
    assert_eq!(old.to_vec1::<u32>().unwrap(), old_host);
    // The batch's feature rows are the original graph's rows of those nodes.
    let index = Tensor::new(old_host.as_slice(), &Device::Cpu).unwrap();
    let expected = graph.x().index_select(&index, 0).unwrap();
    assert_eq!(max_abs_diff(batch.x(), &expected), 0.0);
}

/// The mean `|i - j|` over edges, divided by the node count.
fn relative_gap(g: &Graph) -> f64 {
    edge_locality(g.edge_index()).mean_gap / g.num_nodes() as f64
}

#[test]
fn rcm_and_rabbit_recover_the_locality_a_shuffle_hides() {
    let graph = knn(&KnnConfig::new(20_000), &Device::Cpu).unwrap();
    let shuffled = edge_locality(graph.edge_index());
    let (rcm, _) = reorder_graph(&graph, Order::ReverseCuthillMcKee).unwrap();
    let (rabbit, _) = reorder_graph(&graph, Order::Rabbit).unwrap();
    let (rcm, rabbit) = (
        edge_locality(rcm.edge_index()),
        edge_locality(rabbit.edge_index()),
    );
    // A band of about two BFS levels (~ sqrt(n) wide) against a third of the graph.
    assert!(
        rcm.mean_gap * 20.0 < shuffled.mean_gap,
        "rcm: mean gap {} vs {} shuffled",
        rcm.mean_gap,
        shuffled.mean_gap
    );
    assert!(
        rcm.max_gap * 10 < shuffled.max_gap,
        "rcm: bandwidth {} vs {} shuffled",
        rcm.max_gap,
        shuffled.max_gap
    );
    // Rabbit order keeps communities together rather than a band: most edges stay short.
    assert!(
        rabbit.mean_gap * 5.0 < shuffled.mean_gap,
        "rabbit: mean gap {} vs {} shuffled",
        rabbit.mean_gap,
        shuffled.mean_gap
    );
}

#[test]
fn the_knn_generator_is_seeded_exact_in_size_and_hides_its_locality() {
    let n = 10_000;
    let a = knn(&KnnConfig::new(n), &Device::Cpu).unwrap();
    let b = knn(&KnnConfig::new(n), &Device::Cpu).unwrap();
    let other = knn(
        &KnnConfig {
            seed: 1,
            ..KnnConfig::new(n)
        },
        &Device::Cpu,
    )
    .unwrap();
    assert_eq!(a.edge_index().sources_host(), b.edge_index().sources_host());
    assert_eq!(a.edge_index().targets_host(), b.edge_index().targets_host());
    assert_eq!(max_abs_diff(a.x(), b.x()), 0.0);
    assert_ne!(
        a.edge_index().sources_host(),
        other.edge_index().sources_host()
    );
    // Exactly k edges into every node, none a self-loop, no duplicates.
    let ei = a.edge_index();
    assert_eq!(a.num_edges(), n * 10);
    let mut indegree = vec![0; n];
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for (&s, &t) in ei.sources_host().iter().zip(ei.targets_host()) {
        assert_ne!(s, t);
        indegree[t as usize] += 1;
        pairs.push((s, t));
    }
    assert!(indegree.iter().all(|&d| d == 10));
    pairs.sort_unstable();
    pairs.dedup();
    assert_eq!(pairs.len(), n * 10);
    // The numbering hides the locality: a random graph's mean gap is n / 3.
    let gap = relative_gap(&a);
    assert!((0.30..0.37).contains(&gap), "shuffled mean gap {gap} n");
    // Numbered cell by cell, the same kind of graph is local; RCM gets there from the shuffle.
    let ordered = knn(
        &KnnConfig {
            shuffle: false,
            ..KnnConfig::new(n)
        },
        &Device::Cpu,
    )
    .unwrap();
    assert!(relative_gap(&ordered) < 0.02, "{}", relative_gap(&ordered));
    let (rcm, _) = reorder_graph(&a, Order::ReverseCuthillMcKee).unwrap();
    assert!(relative_gap(&rcm) < 0.02, "{}", relative_gap(&rcm));
    // Labels are regions: a node's neighbours mostly share its class, so GNNs have signal.
    let y = a.labels_host().unwrap().unwrap();
    let same = ei
        .sources_host()
        .iter()
        .zip(ei.targets_host())
        .filter(|(&s, &t)| y[s as usize] == y[t as usize])
        .count();
    assert!(same as f64 > 0.9 * a.num_edges() as f64);
    assert_eq!(a.num_classes(), 5);
    assert_eq!(a.split().unwrap().train.dims(), &[100]);
}

#[test]
fn dataset_names_take_an_order() {
    let g = datasets::load("knn:500@rcm", None, &Device::Cpu).unwrap();
    assert_eq!(g.name, "knn:500@rcm");
    let plain = datasets::load("knn:500", None, &Device::Cpu).unwrap();
    assert!(relative_gap(&g) < relative_gap(&plain) / 3.0);
    let err = datasets::load("knn:500@metis", None, &Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("rcm"), "{err}");
    assert!(datasets::load("knn:ten", None, &Device::Cpu).is_err());
}

#[test]
fn bad_permutations_are_typed_errors() {
    let repeated = Permutation::from_old_of_new(vec![0, 2, 2]).unwrap_err();
    assert!(matches!(
        repeated,
        WorkbookError::Permutation(PermutationError::Repeated {
            id: 2,
            first: 1,
            second: 2,
            len: 3
        })
    ));
    let out = Permutation::from_new_of_old(vec![0, 3, 1]).unwrap_err();
    assert!(matches!(
        out,
        WorkbookError::Permutation(PermutationError::OutOfRange {
            position: 1,
            id: 3,
            len: 3
        })
    ));
    assert!(out.to_string().contains("0..3"), "{out}");

    let graph = small_csbm();
    let short = Permutation::identity(graph.num_nodes() - 1);
    let err = permute_graph(&graph, &short).unwrap_err();
    assert!(
        matches!(
            &err,
            WorkbookError::Permutation(PermutationError::WrongLength { expected, found, .. })
                if *expected == 2_999 && *found == 3_000
        ),
        "{err}"
    );
    let rows = Tensor::zeros((4, 2), DType::F32, &Device::Cpu).unwrap();
    assert!(matches!(
        Permutation::identity(3).to_old_rows(&rows).unwrap_err(),
        WorkbookError::Permutation(PermutationError::WrongLength { found: 4, .. })
    ));
    let scalar = Tensor::new(1f32, &Device::Cpu).unwrap();
    assert!(Permutation::identity(3).to_new_rows(&scalar).is_err());
    assert!(matches!(
        Permutation::identity(3).to_old_ids(&[1, 5]).unwrap_err(),
        WorkbookError::Permutation(PermutationError::NoSuchNode { id: 5, len: 3 })
    ));
    assert!(Permutation::identity(3)
        .then(&Permutation::identity(4))
        .is_err());
    assert!(Order::parse("metis").is_err());
    assert_eq!(Order::parse(" RCM ").unwrap(), Order::ReverseCuthillMcKee);
}
