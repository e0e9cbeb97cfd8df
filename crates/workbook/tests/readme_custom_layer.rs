//! The custom layer of `docs/library.md` ("Your own layer"), compiled and run. That page shows
//! the code between the ANCHOR markers verbatim; `readme_shows_this_listing` fails when the two
//! drift apart.

// ANCHOR: custom_layer
use workbook::candle_core::{DType, Tensor};
use workbook::candle_nn::{Linear, Module as _};
use workbook::layers::{GraphLayer, LayerInput, LayerOutput};
use workbook::{train::Dropout, Module, Placement, Result};

/// PyG's `GINConv(Linear(in, out), train_eps=True)`: `lin((1 + eps) · x_i + Σ_j x_j)`.
#[derive(Clone, Debug, Module)]
struct GinConv {
    lin: Linear, // parameters "lin.weight", "lin.bias"
    eps: Tensor, // parameter "eps"
    #[module(placement)]
    at: Placement,
}

impl GraphLayer for GinConv {
    fn layer_type(&self) -> &'static str {
        "GINConv"
    }

    fn forward_layer(
        &self,
        input: &LayerInput<'_>,
        _: Option<&mut Dropout>,
    ) -> Result<LayerOutput> {
        let (x, edges) = (input.x, input.edge_index);
        let messages = x.index_select(edges.sources(), 0)?;
        // Intermediates are made where x lives (x.zeros_like()), never on a fixed device.
        let sum = x.zeros_like()?.index_add(edges.targets(), &messages, 0)?;
        let h = (x.broadcast_mul(&(&self.eps + 1.0)?)? + sum)?;
        Ok(LayerOutput::new(self.lin.forward(&h)?))
    }
}
// ANCHOR_END: custom_layer

#[test]
fn the_custom_layer_moves_checks_and_runs() -> Result<()> {
    // ANCHOR: custom_layer_use
    let cpu = Placement::cpu();
    let dev = cpu.device();
    let gin = GinConv {
        lin: Linear::new(Tensor::ones((4, 34), DType::F32, dev)?, None),
        eps: Tensor::zeros(1, DType::F32, dev)?,
        at: cpu.clone(),
    };
    let sim = Placement::sim(1);
    let graph = workbook::datasets::karate(&sim)?;
    let input = LayerInput {
        x: graph.x(),
        edge_index: graph.edge_index(),
        edge_weight: None,
    };
    let err = gin.apply(&input, None).unwrap_err(); // still on the cpu: named, not a crash
    assert!(err
        .to_string()
        .contains("GINConv parameters are on cpu but input 'edge_index' is on sim:1"));
    let gin = gin.to_device(&sim)?; // every field the derive visited
    assert_eq!(gin.apply(&input, None)?.out.dims(), &[34, 4]);
    let names: Vec<_> = gin.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["lin.weight", "eps"]);
    // ANCHOR_END: custom_layer_use
    Ok(())
}

/// The page's block is this file's anchored code, verbatim.
#[test]
fn readme_shows_this_listing() {
    let here = include_str!("readme_custom_layer.rs");
    let readme = include_str!("../../../docs/library.md");
    for anchor in ["custom_layer", "custom_layer_use"] {
        let start = format!("// ANCHOR: {anchor}\n");
        let end = format!("// ANCHOR_END: {anchor}\n");
        let a = here.find(&start).unwrap() + start.len();
        let b = here[a..].find(&end).unwrap() + a;
        let listing: String = here[a..b]
            .lines()
            .map(|l| match anchor {
                "custom_layer_use" => l.strip_prefix("    ").unwrap_or(l),
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            readme.contains(&listing),
            "docs/library.md must show tests/readme_custom_layer.rs's `{anchor}` listing verbatim:\n{listing}"
        );
    }
}
