//! Two skills with one id are an error naming both declarations.

use radkit::flow::{StepCtx, StepResult};
use radkit::flow_skill;

#[derive(Default)]
struct One;

#[flow_skill(id = "same", name = "One")]
impl One {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        ctx.complete("one", vec![])
    }
}

#[derive(Default)]
struct Two;

#[flow_skill(id = "same", name = "Two")]
impl Two {
    #[step(start)]
    async fn a(&self, ctx: &StepCtx, _: radkit::model::Content) -> StepResult {
        ctx.complete("two", vec![])
    }
}

#[test]
fn duplicate_ids_are_reported_with_both_locations() {
    let err = match radkit::registry::build_all() {
        Err(e) => e,
        Ok(_) => panic!("two skills share an id"),
    };
    assert_eq!(err.id, "same");
    let text = err.to_string();
    assert!(
        text.contains("test_registry_duplicates.rs:9")
            && text.contains("test_registry_duplicates.rs:20"),
        "{text}"
    );
}

#[test]
fn an_engine_refuses_to_serve_two_skills_with_one_id() {
    let err = match radkit::engine::Engine::builder(radkit::store::MemoryStore::new()).build() {
        Err(e) => e,
        Ok(_) => panic!("two skills share an id"),
    };
    let text = err.to_string();
    assert!(
        text.contains("test_registry_duplicates.rs:9")
            && text.contains("test_registry_duplicates.rs:20"),
        "{text}"
    );
}
