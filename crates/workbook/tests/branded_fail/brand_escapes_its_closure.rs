// A branded value cannot leave its closure: outside, no brand says where it is.
use workbook::branded::with_placement;
use workbook::{datasets, Placement};

fn main() -> workbook::Result<()> {
    let graph = with_placement(Placement::sim(1), |gpu| {
        gpu.put(&datasets::karate(&Placement::cpu()).unwrap())
    })?;
    println!("{:?}", graph.placement());
    Ok(())
}
