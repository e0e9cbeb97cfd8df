// Chapter 1: the logits on the device, the labels still on the host
// (PyTorch: F.cross_entropy(out, y) with y never moved).
use workbook::branded::{train, with_placement, Cpu};
use workbook::{datasets, placed_tensor::PlacedTensor, ModelConfig, Placement};

fn main() -> workbook::Result<()> {
    let labels = Cpu::new(PlacedTensor::new("y", &[0.0, 1.0], &Placement::cpu())?)?;
    with_placement(Placement::sim(1), |gpu| {
        let graph = gpu.put(&datasets::karate(&Placement::cpu())?)?;
        let model = gpu.init(ModelConfig::gcn(34, 16, 4), 0)?;
        let logits = train::forward(&model, &graph)?;
        let loss = train::cross_entropy(&logits, &labels)?;
        println!("{}", train::scalar(&loss)?);
        Ok(())
    })
}
