//! The research loop as an explicit reducer: the whole state enum in view, every effect a `Cmd`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use radkit::flow::{Cmd, CmdKind, Event, FlowSkill, SkillInfo, StepCtx, StepError, Transition};
use radkit::model::{Artifact, Content};

use super::shared::{critic_input, revision_prompt, Critique, Cycle, Verdict};

/// The research loop, reducer form.
#[derive(Debug, Default, Clone, Copy)]
pub struct ResearchReducer;

/// Its states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum State {
    /// Waiting for the first message.
    Start,
    /// The research model is drafting.
    Researching {
        /// Earlier cycles.
        history: Vec<Cycle>,
    },
    /// The critic is reading `draft`.
    Critiquing {
        /// The draft.
        draft: String,
        /// Earlier cycles.
        history: Vec<Cycle>,
    },
    /// A human is asked about `draft`.
    AwaitingHuman {
        /// The draft.
        draft: String,
        /// Earlier cycles.
        history: Vec<Cycle>,
    },
}

fn research(input: serde_json::Value) -> Cmd {
    Cmd::llm("research", input)
}

fn critic(draft: &str, cycles: usize) -> Cmd {
    let schema = serde_json::to_value(schemars::schema_for!(Critique)).ok();
    Cmd::new(CmdKind::Llm {
        model: "critic".into(),
        input: critic_input(draft, cycles),
        schema,
        tools: Vec::new(),
        turns: Vec::new(),
        stream: None,
    })
}

fn revise(draft: String, note: String, mut history: Vec<Cycle>) -> Transition<State> {
    let cycle = Cycle { draft, note };
    let prompt =
        serde_json::to_value(Content::from_text(revision_prompt(&cycle))).unwrap_or_default();
    history.push(cycle);
    Transition::to(State::Researching { history }).cmd(research(prompt))
}

#[async_trait]
impl FlowSkill for ResearchReducer {
    type State = State;

    fn info(&self) -> SkillInfo {
        SkillInfo::new("research_reducer", "Research Loop (reducer)")
            .description("Drafts, critiques and revises a research note; asks a human when the critic is unsure.")
            .tags(["research", "writing"])
            .examples(["Write a note on durable execution"])
            .version("1")
    }

    fn initial_state(&self) -> State {
        State::Start
    }

    fn step_name(&self, state: &State) -> String {
        match state {
            State::Start => "start",
            State::Researching { .. } => "research",
            State::Critiquing { .. } => "critique",
            State::AwaitingHuman { .. } => "human_input",
        }
        .to_owned()
    }

    async fn on_event(
        &self,
        state: State,
        event: Event,
        _ctx: &StepCtx,
    ) -> Result<Transition<State>, StepError> {
        Ok(match (state, event) {
            (State::Start, Event::UserMessage { message }) => {
                let input = serde_json::to_value(Content::from(message))?;
                Transition::to(State::Researching {
                    history: Vec::new(),
                })
                .cmd(research(input))
            }
            (
                _,
                Event::CommandResult {
                    outcome: Err(error),
                    ..
                },
            ) => Transition::fail(format!("model call failed: {error}")),
            (
                State::Researching { history },
                Event::CommandResult {
                    outcome: Ok(value), ..
                },
            ) => {
                let draft: String = serde_json::from_value(value)?;
                let cmd = critic(&draft, history.len());
                Transition::to(State::Critiquing { draft, history }).cmd(cmd)
            }
            (
                State::Critiquing { draft, history },
                Event::CommandResult {
                    outcome: Ok(value), ..
                },
            ) => {
                let critique: Critique = serde_json::from_value(value)?;
                match critique.verdict {
                    Verdict::Approve => Transition::complete("Approved by critic.")
                        .artifact(Artifact::from_text("final.txt", draft)),
                    Verdict::Revise => revise(draft, critique.note, history),
                    Verdict::AskHuman => Transition::await_input(
                        State::AwaitingHuman { draft, history },
                        "human_note",
                        "Critic needs human input.",
                    ),
                }
            }
            (State::AwaitingHuman { draft, history }, Event::UserMessage { message }) => {
                revise(draft, Content::from(message).joined_texts(), history)
            }
            _ => Transition::ignore(),
        })
    }
}
