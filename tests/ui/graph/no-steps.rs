// Rule: a #[flow_skill] impl block has steps.
use radkit::flow_skill;

#[derive(Default)]
struct S;

#[flow_skill(id = "s", name = "S")]
impl S {
    fn helper(&self) -> usize {
        1
    }
}

fn main() {}
