// Chapter 1's classic: the model moved to the device, the graph never moved.
use workbook::branded::{train, with_placement};
use workbook::{datasets, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let graph = datasets::karate(&Placement::cpu())?;
    with_placement(Placement::sim(1), |gpu| {
        let model = gpu.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let logits = train::forward(&model, &graph)?;
        println!("{:?}", logits.placement());
        Ok(())
    })
}
