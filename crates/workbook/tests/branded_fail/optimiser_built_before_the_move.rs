// Chapter 2: the optimiser was built on the CPU model; the model then moved. PyTorch runs on
// with the state on the wrong device (or, with a copy, trains nothing).
use workbook::branded::{train, with_placements};
use workbook::{datasets, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let graph = datasets::karate(&Placement::cpu())?;
    with_placements(Placement::cpu(), Placement::sim(1), |cpu, gpu| {
        let model = cpu.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let mut opt = train::adam(&model, 0.01)?;
        let model = model.to(&gpu)?;
        let graph = gpu.put(&graph)?;
        let mut dropout = gpu.dropout(0);
        let loss = train::step(&model, &mut opt, &graph, &mut dropout)?;
        println!("{}", train::scalar(&loss)?);
        Ok(())
    })
}
