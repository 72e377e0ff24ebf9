// Rule: goto! only works inside a step.
use radkit::goto;

fn helper() -> u32 {
    goto!("somewhere", 1)
}

fn main() {
    let _ = helper();
}
