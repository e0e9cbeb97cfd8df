// A brand cannot be forged: a `Dev` is made only by `with_placement` and its siblings, so a
// function cannot hand out one `Dev<'static>` for two devices.
use workbook::branded::Dev;
use workbook::Placement;

fn forge(at: Placement) -> Dev<'static> {
    Dev::new(at)
}

fn main() {
    let _ = (forge(Placement::sim(1)), forge(Placement::sim(2)));
}
