// Chapter 6: data parallelism by hand, and replica 0 is given replica 1's batch.
use workbook::branded::{train, with_placements};
use workbook::{datasets, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let graph = datasets::karate(&Placement::cpu())?;
    with_placements(Placement::sim(1), Placement::sim(2), |d0, d1| {
        let replica0 = d0.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let replica1 = replica0.to(&d1)?;
        let batch0 = d0.put(&graph)?;
        let batch1 = d1.put(&graph)?;
        let out0 = train::forward(&replica0, &batch1)?;
        let out1 = train::forward(&replica1, &batch0)?;
        println!("{:?} {:?}", out0.placement(), out1.placement());
        Ok(())
    })
}
