// Chapter 2: `to` returns a copy (PyTorch's tensor.to does too); the copy is dropped and the
// model stays where it was.
use workbook::branded::{train, with_placements};
use workbook::{datasets, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let graph = datasets::karate(&Placement::cpu())?;
    with_placements(Placement::cpu(), Placement::sim(1), |cpu, gpu| {
        let model = cpu.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let _ = model.to(&gpu)?;
        let graph = gpu.put(&graph)?;
        let logits = train::forward(&model, &graph)?;
        println!("{:?}", logits.placement());
        Ok(())
    })
}
