// Chapter 6: the replicas' outputs gathered on device 0 without moving device 1's
// (PyTorch: torch.cat([out0, out1]) with out1 on cuda:1).
use workbook::branded::{train, with_placements};
use workbook::{datasets, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let graph = datasets::karate(&Placement::cpu())?;
    with_placements(Placement::sim(1), Placement::sim(2), |d0, d1| {
        let replica0 = d0.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let replica1 = replica0.to(&d1)?;
        let out0 = train::forward(&replica0, &d0.put(&graph)?)?;
        let out1 = train::forward(&replica1, &d1.put(&graph)?)?;
        let all = train::gather(&[&out0, &out1])?;
        println!("{:?}", all.placement());
        Ok(())
    })
}
