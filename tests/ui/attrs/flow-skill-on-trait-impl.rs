// Rule: #[flow_skill] goes on an inherent impl block.
use radkit::flow_skill;

trait Steps {}

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl Steps for S {}

fn main() {}
