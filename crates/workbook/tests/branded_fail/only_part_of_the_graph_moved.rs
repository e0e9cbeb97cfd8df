// Chapter 1: only the features moved (PyG: data.x = data.x.to(device)); the rest is on the CPU.
use workbook::branded::{train, with_placement, Cpu};
use workbook::{datasets, GraphPart, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let graph = Cpu::new(datasets::karate(&Placement::cpu())?)?;
    with_placement(Placement::sim(1), |gpu| {
        let model = gpu.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let partly = graph.move_part(GraphPart::X, gpu.placement())?;
        let logits = train::forward(&model, &partly)?;
        println!("{:?}", logits.placement());
        Ok(())
    })
}
