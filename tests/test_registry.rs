//! The registry: every `#[flow_skill]` is collected, sorted by id, turned into an agent card and a
//! Mermaid graph; its version follows the step graph; an engine serves the registered skills by
//! default.

use radkit::flow::{StepCtx, StepResult};
use radkit::model::Content;
use radkit::server::ServerConfig;
use radkit::{await_input, flow_skill, goto};

#[derive(Default)]
struct Zeta;

/// Second skill.
#[flow_skill(id = "zeta", name = "Zeta", tags = ["z"], examples = ["zz"])]
impl Zeta {
    #[step(start)]
    async fn only(&self, ctx: &StepCtx, msg: Content) -> StepResult {
        ctx.complete(msg.joined_texts(), vec![])
    }
}

/// Not registered: served only when added.
#[derive(Default)]
struct Hidden;

#[flow_skill(id = "hidden", name = "Hidden", register = false)]
impl Hidden {
    #[step(start)]
    async fn only(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("hidden", vec![])
    }
}

/// Registered under an id that is taken, for the duplicate test.
#[derive(Default)]
struct AlphaAgain;

#[flow_skill(id = "alpha", name = "Alpha again", register = false)]
impl AlphaAgain {
    #[step(start)]
    async fn only(&self, ctx: &StepCtx, _: Content) -> StepResult {
        ctx.complete("again", vec![])
    }
}

#[derive(Default)]
struct Alpha;

/// First skill.
#[flow_skill(id = "alpha", name = "Alpha", description = "Explicit description.")]
impl Alpha {
    #[step(start)]
    async fn ask(&self, msg: Content) -> StepResult {
        await_input!(slot = "more", message = "More?", carry = msg.joined_texts())
    }

    #[step(resume_from = "ask")]
    async fn again(&self, text: String, reply: Content) -> StepResult {
        goto!("finish", format!("{text} {}", reply.joined_texts()))
    }

    #[step]
    async fn finish(&self, ctx: &StepCtx, text: String) -> StepResult {
        ctx.complete(text, vec![])
    }
}

#[test]
fn skills_are_collected_and_sorted_by_id() {
    let ids: Vec<&str> = radkit::registry::skills().iter().map(|r| r.id).collect();
    assert_eq!(ids, vec!["alpha", "zeta"]);
}

#[test]
fn agent_card_lists_every_registered_skill() {
    let card = radkit::registry::agent_card(&ServerConfig::new("http://127.0.0.1:9/")).unwrap();
    let json = radkit::model::served_json(&card);
    assert_eq!(json["protocolVersion"], "0.3.0");
    assert_eq!(json["url"], "http://127.0.0.1:9/");
    assert_eq!(json["skills"][0]["id"], "alpha");
    assert_eq!(json["skills"][0]["description"], "Explicit description.");
    assert_eq!(json["skills"][1]["id"], "zeta");
    assert_eq!(json["skills"][1]["description"], "Second skill.");
    assert_eq!(json["skills"][1]["tags"], serde_json::json!(["z"]));
    assert_eq!(json["skills"][1]["examples"], serde_json::json!(["zz"]));
}

#[test]
fn mermaid_graph_shows_gotos_and_resumes() {
    let skills = radkit::registry::build_all().unwrap();
    let alpha = skills.iter().find(|s| s.info().id == "alpha").unwrap();
    let graph = radkit::registry::mermaid(alpha.info());
    assert!(graph.starts_with("flowchart TD"), "{graph}");
    assert!(graph.contains("__start --> ask"));
    assert!(graph.contains("again -->|goto| finish"));
    assert!(graph.contains("ask -.->|await_input / reply| again"));
}

#[test]
fn version_is_derived_from_the_step_graph() {
    let skills = radkit::registry::build_all().unwrap();
    let alpha = skills
        .iter()
        .find(|s| s.info().id == "alpha")
        .unwrap()
        .info()
        .clone();
    assert_eq!(
        alpha.version,
        radkit::flow::SkillInfo::graph_version(&alpha.steps)
    );
    let mut changed = alpha.steps.clone();
    changed[2].payload = "u64".into();
    assert_ne!(
        alpha.version,
        radkit::flow::SkillInfo::graph_version(&changed)
    );
}

fn served(
    builder: radkit::engine::EngineBuilder,
) -> Result<Vec<String>, radkit::engine::EngineError> {
    builder
        .build()
        .map(|engine| engine.skills().into_iter().map(|s| s.id).collect())
}

fn builder() -> radkit::engine::EngineBuilder {
    radkit::engine::Engine::builder(radkit::store::MemoryStore::new())
}

#[test]
fn an_engine_serves_the_registered_skills_by_default() {
    assert_eq!(served(builder()).unwrap(), vec!["alpha", "zeta"]);
}

#[test]
fn skills_added_to_the_builder_are_served_after_the_registered_ones() {
    assert_eq!(
        served(builder().skill(Hidden)).unwrap(),
        vec!["alpha", "zeta", "hidden"]
    );
}

#[test]
fn only_skills_serves_a_chosen_subset() {
    assert_eq!(
        served(builder().skill(Hidden).only_skills(["hidden", "zeta"])).unwrap(),
        vec!["zeta", "hidden"]
    );
    let err = served(builder().only_skills(["alpha", "nope"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "only_skills names `nope`, which is not available; available skills are alpha, zeta"
    );
}

#[test]
fn without_registered_skills_serves_only_the_added_ones() {
    assert_eq!(
        served(builder().without_registered_skills().skill(Hidden)).unwrap(),
        vec!["hidden"]
    );
    let err = served(builder().without_registered_skills()).unwrap_err();
    assert!(err.to_string().starts_with("no skill to serve"), "{err}");
}

#[test]
fn an_added_skill_with_a_registered_id_is_a_clear_error() {
    let err = served(builder().skill(AlphaAgain)).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, radkit::engine::EngineError::DuplicateSkill(_)),
        "{text}"
    );
    assert!(
        text.starts_with("skill id `alpha` is served twice: registered by #[flow_skill] at ")
            && text.contains("test_registry.rs:")
            && text.contains("and added with EngineBuilder::skill"),
        "{text}"
    );
    // Leaving the registered one out resolves it.
    assert_eq!(
        served(builder().without_registered_skills().skill(AlphaAgain)).unwrap(),
        vec!["alpha"]
    );
}

/// A step-table skill whose id comes from code, not from a `#[flow_skill]` literal.
struct Napper;

fn nap<'a>(
    _: &'a Napper,
    ctx: &'a StepCtx,
    _: radkit::flow::step_table::StepInput,
) -> futures::future::BoxFuture<'a, radkit::flow::StepResult> {
    Box::pin(async move { ctx.complete("slept", vec![]) })
}

static NAP: &[radkit::flow::step_table::Step<Napper>] =
    &[radkit::flow::step_table::Step::new("nap", nap)
        .start()
        .takes_user_message()];

#[test]
fn an_id_that_is_empty_or_has_whitespace_fails_the_engine_naming_the_skill() {
    for (id, problem) in [("my greeter", "contains whitespace"), ("", "is empty")] {
        let info = radkit::flow::SkillInfo::new(id, "My Greeter");
        let table = radkit::flow::step_table::StepTable::new(info, Napper, NAP).unwrap();
        let err = served(builder().without_registered_skills().skill(table)).unwrap_err();
        assert!(
            matches!(err, radkit::engine::EngineError::InvalidSkillId(_)),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!("skill `My Greeter` (added with EngineBuilder::skill) has the id `{id}`, which {problem}; give it an id without whitespace, such as `my_greeter`")
        );
    }
}
