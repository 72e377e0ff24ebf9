//! The registry: every `#[flow_skill]` is collected, sorted by id, turned into an agent card and a
//! Mermaid graph; its version follows the step graph.

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
    let json = serde_json::to_value(&card).unwrap();
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
