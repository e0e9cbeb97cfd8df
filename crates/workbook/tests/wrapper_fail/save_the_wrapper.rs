// PyTorch: torch.save(dp.state_dict(), path) saves the wrapper, every name
// prefixed `module.`. Here the wrapper is not a Model, so saving it does not
// compile: unwrap first.
use workbook::parallel::DataParallel;
use workbook::train::TrainConfig;
use workbook::{checkpoint, Model, ModelConfig, Placement};

fn main() {
    let config = ModelConfig::gcn(4, 8, 2);
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let devices = [Placement::sim(1), Placement::sim(2)];
    let dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    checkpoint::save(&dp, "model.safetensors".as_ref()).unwrap();
}
