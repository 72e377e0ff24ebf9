//! A `#[flow_skill]` driven without the engine: a tiny `Invoker` answers model calls from a script and
//! `FlowSkill::on_event` runs in a loop. It pins what the macro generates: default seeding of the
//! start step, `goto!` into typed states, `await_input!` parking in the resume step's state with the
//! carry, the reply routed to the resume step, the state's JSON form, and the step graph.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use radkit::flow::{
    erase, CmdKind, Event, FlowSkill, Invoker, Next, SkillInfo, StepCtx, StepError, StepResult,
    Transition,
};
use radkit::model::{Artifact, Content, Message};
use radkit::{await_input, flow_skill, goto};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cycle {
    draft: String,
    note: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Critique {
    verdict: String,
    note: String,
}

#[derive(Default)]
struct ResearchLoop;

/// Drafts, critiques and revises a note.
#[flow_skill(
    id = "research_loop_test",
    name = "Research Loop (test)",
    register = false
)]
impl ResearchLoop {
    #[step(start)]
    async fn research(&self, ctx: &StepCtx, msg: Content, history: Vec<Cycle>) -> StepResult {
        let draft: String = ctx.llm("research").run(msg).await?;
        goto!("critique", (draft, history))
    }

    #[step]
    async fn critique(&self, ctx: &StepCtx, payload: (String, Vec<Cycle>)) -> StepResult {
        let (draft, mut history) = payload;
        let critique: Critique = ctx.llm("critic").run(&draft).await?;
        match critique.verdict.as_str() {
            "approve" => ctx.complete(
                "Approved by critic.",
                vec![Artifact::from_text("final.txt", &draft)],
            ),
            "revise" => {
                history.push(Cycle {
                    draft: draft.clone(),
                    note: critique.note,
                });
                goto!("research", (Content::from_text(&draft), history))
            }
            _ => await_input!(
                slot = "human_note",
                message = "Critic needs human input.",
                carry = (draft, history)
            ),
        }
    }

    #[step(resume_from = "critique")]
    async fn human_input(&self, payload: (String, Vec<Cycle>), msg: Content) -> StepResult {
        let (draft, mut history) = payload;
        history.push(Cycle {
            draft: draft.clone(),
            note: msg.joined_texts(),
        });
        goto!("research", (Content::from_text(&draft), history))
    }
}

/// Answers model calls from a script and records every command it was asked to run.
#[derive(Default)]
struct Script {
    answers: Mutex<VecDeque<(&'static str, serde_json::Value)>>,
    calls: Mutex<Vec<(String, serde_json::Value)>>,
}

impl Script {
    fn new(answers: Vec<(&'static str, serde_json::Value)>) -> Arc<Self> {
        Arc::new(Script {
            answers: Mutex::new(answers.into()),
            calls: Mutex::default(),
        })
    }

    fn calls(&self) -> Vec<(String, serde_json::Value)> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Invoker for Script {
    async fn invoke(
        &self,
        _position: u32,
        cmd: radkit::flow::Cmd,
    ) -> Result<serde_json::Value, StepError> {
        let CmdKind::Llm { model, input, .. } = cmd.kind else {
            return Err(StepError::msg("only model calls are scripted"));
        };
        self.calls.lock().unwrap().push((model.clone(), input));
        let (expected, answer) = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .expect("script ran out");
        assert_eq!(
            model, expected,
            "the script expected a call to `{expected}`"
        );
        Ok(answer)
    }
}

type State = <ResearchLoop as FlowSkill>::State;

/// Deliver `event`, then follow `goto!`s (`Event::Enter`) until the skill waits or finishes. Returns
/// the steps that ran, the last transition, and the state the task is in.
async fn drive(
    skill: &ResearchLoop,
    script: &Arc<Script>,
    mut state: State,
    mut event: Event,
) -> (Vec<String>, Transition<State>, Option<State>) {
    let mut ran = Vec::new();
    loop {
        let name = skill.step_name(&state);
        let ctx = StepCtx::new(
            "task-1".into(),
            "ctx-1".into(),
            name.clone(),
            script.clone(),
        );
        let transition = skill.on_event(state, event, &ctx).await.unwrap();
        if !matches!(transition.next, Next::Ignore) {
            ran.push(name);
        }
        match transition.next {
            Next::Goto(next) => {
                state = next;
                event = Event::Enter;
            }
            Next::AwaitInput { ref state, .. } => {
                let parked = Some(roundtrip(state));
                return (ran, transition, parked);
            }
            _ => return (ran, transition, None),
        }
    }
}

/// Through JSON and back, as the engine persists it.
fn roundtrip(state: &State) -> State {
    serde_json::from_value(serde_json::to_value(state).unwrap()).unwrap()
}

fn critic(verdict: &str) -> serde_json::Value {
    serde_json::json!({ "verdict": verdict, "note": format!("{verdict} note") })
}

fn user(text: &str) -> Event {
    Event::UserMessage {
        message: Message::user_text(text),
    }
}

#[test]
async fn first_message_seeds_the_start_step_with_the_message_and_defaults() {
    let skill = ResearchLoop;
    let script = Script::new(vec![
        ("research", "draft 1".into()),
        ("critic", critic("approve")),
    ]);
    let (ran, done, _) = drive(&skill, &script, skill.initial_state(), user("Topic")).await;
    assert_eq!(ran, ["research", "critique"]);
    // The `Content` parameter got the message; `history` got `Vec::default()` (seen by the critic
    // path completing on the first cycle without earlier notes).
    let calls = script.calls();
    assert_eq!(calls[0].0, "research");
    assert_eq!(
        calls[0].1,
        serde_json::to_value(Content::from_text("Topic")).unwrap()
    );
    assert_eq!(calls[1], ("critic".to_owned(), "draft 1".into()));
    let Next::Complete { message } = &done.next else {
        panic!("expected completion, got {:?}", done.next)
    };
    assert_eq!(
        message.as_ref().unwrap().joined_texts(),
        "Approved by critic."
    );
    assert_eq!(done.artifacts[0].name.as_deref(), Some("final.txt"));
}

#[test]
async fn await_input_parks_in_the_resume_step_and_the_reply_runs_it_with_the_carry() {
    let skill = ResearchLoop;
    let script = Script::new(vec![
        ("research", "draft 1".into()),
        ("critic", critic("ask_human")),
        ("research", "draft 2".into()),
        ("critic", critic("revise")),
        ("research", "draft 3".into()),
        ("critic", critic("approve")),
    ]);
    let (ran, waiting, parked) = drive(&skill, &script, skill.initial_state(), user("Topic")).await;
    assert_eq!(ran, ["research", "critique"]);
    let Next::AwaitInput { slot, message, .. } = &waiting.next else {
        panic!("expected await_input, got {:?}", waiting.next)
    };
    assert_eq!(slot, "human_note");
    assert_eq!(message.joined_texts(), "Critic needs human input.");
    let parked = parked.unwrap();
    assert_eq!(skill.step_name(&parked), "human_input");
    assert_eq!(
        serde_json::to_value(&parked).unwrap(),
        serde_json::json!({ "human_input": ["draft 1", []] })
    );

    // Anything but a user message leaves the waiting task alone.
    let ctx = StepCtx::new(
        "task-1".into(),
        "ctx-1".into(),
        "human_input".into(),
        script.clone(),
    );
    let ignored = skill
        .on_event(roundtrip(&parked), Event::Enter, &ctx)
        .await
        .unwrap();
    assert!(matches!(ignored.next, Next::Ignore));

    let (ran, done, _) = drive(&skill, &script, parked, user("Cite sources.")).await;
    assert_eq!(
        ran,
        [
            "human_input",
            "research",
            "critique",
            "research",
            "critique"
        ]
    );
    assert!(matches!(done.next, Next::Complete { .. }));
    // The reply became a cycle of the history the carry brought along.
    let revised = &script.calls()[2];
    assert_eq!(revised.0, "research");
    assert_eq!(
        revised.1,
        serde_json::to_value(Content::from_text("draft 1")).unwrap()
    );
}

#[test]
async fn events_that_do_not_concern_a_state_are_ignored() {
    let skill = ResearchLoop;
    let script = Script::new(vec![]);
    let ctx = StepCtx::new(
        "task-1".into(),
        "ctx-1".into(),
        "research".into(),
        script.clone(),
    );
    let critique: State =
        serde_json::from_value(serde_json::json!({ "critique": ["d", []] })).unwrap();
    for (state, event) in [
        (skill.initial_state(), Event::Enter),
        (skill.initial_state(), Event::Cancel),
        (roundtrip(&critique), user("not now")),
    ] {
        let t = skill.on_event(state, event, &ctx).await.unwrap();
        assert!(matches!(t.next, Next::Ignore), "{:?}", t.next);
    }
    assert!(script.calls().is_empty());
}

#[test]
fn state_json_names_the_step_and_holds_its_payload() {
    let skill = ResearchLoop;
    let start = serde_json::to_value(skill.initial_state()).unwrap();
    assert_eq!(start, serde_json::json!({ "__start": null }));
    let research: State = serde_json::from_value(serde_json::json!({
        "research": [[{ "kind": "text", "text": "again" }], [{ "draft": "d", "note": "n" }]]
    }))
    .unwrap();
    assert_eq!(skill.step_name(&research), "research");
    assert_eq!(skill.step_name(&skill.initial_state()), "research");
}

#[test]
async fn a_persisted_state_that_does_not_decode_is_an_error_naming_the_skill() {
    let erased = erase(ResearchLoop);
    let script = Script::new(vec![]);
    let ctx = StepCtx::new("task-1".into(), "ctx-1".into(), "x".into(), script);
    for (state, needle) in [
        (
            serde_json::json!({ "nowhere": null }),
            "unknown variant `nowhere`",
        ),
        (
            serde_json::json!({ "critique": ["only one"] }),
            "payload of step `critique`",
        ),
    ] {
        let err = erased
            .activate(state, Event::Enter, &ctx)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("research_loop_test") && text.contains(needle),
            "{text}"
        );
    }
}

/// name, start, resume_from, gotos, payload
type GraphRow<'a> = (&'a str, bool, Option<&'a str>, Vec<&'a str>, &'a str);

#[test]
fn info_describes_the_step_graph_and_its_version() {
    let info = ResearchLoop.info();
    assert_eq!(info.id, "research_loop_test");
    assert_eq!(info.description, "Drafts, critiques and revises a note.");
    let graph: Vec<GraphRow> = info
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.start,
                s.resume_from.as_deref(),
                s.gotos.iter().map(String::as_str).collect(),
                s.payload.as_str(),
            )
        })
        .collect();
    assert_eq!(
        graph,
        [
            (
                "research",
                true,
                None,
                vec!["critique"],
                "(Content,Vec<Cycle>)"
            ),
            (
                "critique",
                false,
                None,
                vec!["research"],
                "(String,Vec<Cycle>)"
            ),
            (
                "human_input",
                false,
                Some("critique"),
                vec!["research"],
                "(String,Vec<Cycle>)"
            ),
        ]
    );
    assert_eq!(info.version, SkillInfo::graph_version(&info.steps));
    let erased = erase(ResearchLoop);
    assert_eq!(erased.info(), &info);
}
