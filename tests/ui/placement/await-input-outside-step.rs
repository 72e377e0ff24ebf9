// Rule: await_input! only works inside a step.
use radkit::await_input;
use radkit::flow::StepResult;

fn helper() -> StepResult {
    await_input!(slot = "x", message = "?", carry = 1)
}

fn main() {
    let _ = helper();
}
