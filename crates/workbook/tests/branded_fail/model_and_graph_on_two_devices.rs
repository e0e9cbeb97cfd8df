// Chapter 1: the model on one device, the graph on another (PyTorch: "Expected
// all tensors to be on the same device, but found ... cuda:0 and cuda:1!").
use workbook::branded::{train, with_placements};
use workbook::{datasets, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let graph = datasets::karate(&Placement::cpu())?;
    with_placements(Placement::sim(1), Placement::sim(2), |gpu0, gpu1| {
        let model = gpu0.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let graph = gpu1.put(&graph)?;
        let logits = train::forward(&model, &graph)?;
        println!("{:?}", logits.placement());
        Ok(())
    })
}
