//! The conformance skill (`conformance`): a fixed, predictable agent for protocol test suites.
//! `radkit serve --default-skill conformance` makes it the skill of every message that names none.
//!
//! **Text contract** (any message id that is not one of the TCK prefixes below):
//!
//! * a new task whose text starts with `ask` goes to `input-required`, asking a question in its status
//!   message; the reply completes the task with an artifact `answer.txt` holding the reply's text;
//! * any other text: a `working` status update, then one artifact `echo.txt` in two chunks (`Echo: `,
//!   then the text, sent with `append` and `lastChunk`), then `completed`. A durable 0.3 s timer
//!   ([`PAUSE`]) sits between the chunks, so the task runs at least that long and a restart during it
//!   loses nothing.
//!
//! **TCK contract.** The A2A TCK (`a2aproject/a2a-tck`, branch `1.0-dev`) tells the agent under test
//! what to do through the message's `messageId`: the scenarios in `docs/a2a-tck/core_operations.feature`
//! and `docs/a2a-tck/streaming.feature`, plus `test-resubscribe-message-id` from
//! `docs/a2a-tck/SUT_REQUIREMENTS.md` (vendored copies). The TCK appends a session suffix
//! (`tck-complete-task-1a2b3c4d`), so ids are matched by prefix, and these are checked before the
//! text contract, on the first message and on a reply alike (the TCK's multi-turn tests answer an
//! `input-required` task with `tck-input-required` again, then with `tck-complete-task`):
//!
//! | `messageId` prefix | The TCK asks for | Here |
//! |---|---|---|
//! | `tck-complete-task` | complete with the message "Hello from TCK" | as asked |
//! | `tck-artifact-text` | complete, with an artifact of text "Generated text content" | as asked |
//! | `tck-artifact-file` | complete, with a file artifact `output.txt`, `text/plain` | as asked (bytes `tck`) |
//! | `tck-artifact-file-url` | complete, with a file artifact by URL `https://example.com/output.txt` | as asked |
//! | `tck-artifact-data` | complete, with a data artifact `{"key": "value", "count": 42}` | as asked |
//! | `tck-message-response` | answer with a Message instead of a Task | as asked: the task completes with "Direct message response" and the send answers with that message (`FlowSkill::answers_with_message`) |
//! | `tck-input-required` | set the task to `input-required` | as asked |
//! | `tck-reject-task` | reject with the error "rejected" | the task ends `rejected`, reason "rejected" |
//! | `tck-stream-001` | working, artifact "Stream hello from TCK", completed | as asked |
//! | `tck-stream-002` | completed | as asked (after the engine's `working`; the scenario file asks for a status update, though its title, CORE-STREAM-002, says "message-only stream") |
//! | `tck-stream-003` | working, artifact "Stream task lifecycle", completed | as asked |
//! | `tck-stream-ordering-001` | working, artifact "Ordered output", completed | as asked |
//! | `tck-stream-artifact-text` | working, artifact "Streamed text content", completed | as asked |
//! | `tck-stream-artifact-file` | working, file artifact `output.txt`, `text/plain`, completed | as asked |
//! | `tck-stream-artifact-chunked` | working, chunk "chunk-1 " (append), final chunk "chunk-2" (append, last), completed | as asked |
//! | `test-resubscribe-message-id` | working, stay running 2 x `TCK_STREAMING_TIMEOUT` (default 2 s), completed | as asked, with a durable timer |
//!
//! The scenarios' `working` update is the one the engine streams when a task starts to run (a skill's
//! progress would be a second one). The scenarios say "a message" or "a streaming message"; like the
//! TCK's reference agents, this skill does the same whichever method carried it. Other `tck-…` ids
//! (the TCK uses many for tests of the protocol layer, such as `tck-send-003` or `tck-dm-test-001`)
//! follow the text contract, which is the TCK's "all other patterns: normal task processing".
//!
//! Not honoured to the letter, and why:
//!
//! * `tck-reject-task` is honoured in substance only: the TCK's reference agents raise an error from
//!   their executor; a radkit skill cannot make the request itself fail, so the task ends in the
//!   `rejected` state with the reason "rejected" as its status message.
//!
//! Written as an explicit reducer ([`FlowSkill`]) rather than with `#[flow_skill]`: everything here is
//! decided by the message's `messageId`, and the macros' steps receive the user message as
//! `Content` (its parts only), while a reducer receives the whole `Message`. The effects are still the
//! journaled `StepCtx` calls every skill uses (progress, artifacts, a durable timer), so the skill is
//! as durable as the others.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use radkit::flow::{Cmd, CmdKind, Event, FlowSkill, SkillInfo, StepCtx, StepError, StepInfo};
use radkit::flow::{StepResult, Transition};
use radkit::model::{Artifact, File, Message, Part};

/// How long the text contract's task waits between its two chunks (a durable timer).
pub const PAUSE: Duration = Duration::from_millis(300);

/// The question a message starting with `ask` gets.
pub const QUESTION: &str = "What should the answer say?";

/// The conformance skill.
#[derive(Debug, Default, Clone, Copy)]
pub struct Conformance;

/// Where a task is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum State {
    /// Waiting for the first message.
    Start,
    /// Waiting for the reply to a question (`input-required`).
    Reply,
}

/// A scenario of the TCK, chosen by the prefix of the message's `messageId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Complete with the message "Hello from TCK".
    CompleteTask,
    /// Complete with a text artifact.
    ArtifactText,
    /// Complete with an inline file artifact.
    ArtifactFile,
    /// Complete with a file artifact by URL.
    ArtifactFileUrl,
    /// Complete with a data artifact.
    ArtifactData,
    /// Answer with a Message (completes the task with that text instead; see the module docs).
    MessageResponse,
    /// Go to `input-required`.
    InputRequired,
    /// Reject the task.
    RejectTask,
    /// Working, one text artifact, completed.
    Streamed(&'static str),
    /// Completed, nothing else.
    Stream002,
    /// Working, an inline file artifact, completed.
    StreamArtifactFile,
    /// Working, one artifact in two appended chunks, completed.
    StreamArtifactChunked,
    /// Working, stay running 2 x `TCK_STREAMING_TIMEOUT`, completed.
    Resubscribe,
}

/// The TCK's prefixes. Where one prefix begins another (`tck-artifact-file` and
/// `tck-artifact-file-url`), the longer comes first, as in the TCK's generated agents.
pub const PREFIXES: &[(&str, Scenario)] = &[
    ("tck-complete-task", Scenario::CompleteTask),
    ("tck-artifact-text", Scenario::ArtifactText),
    ("tck-artifact-file-url", Scenario::ArtifactFileUrl),
    ("tck-artifact-file", Scenario::ArtifactFile),
    ("tck-artifact-data", Scenario::ArtifactData),
    ("tck-message-response", Scenario::MessageResponse),
    ("tck-input-required", Scenario::InputRequired),
    ("tck-reject-task", Scenario::RejectTask),
    (
        "tck-stream-001",
        Scenario::Streamed("Stream hello from TCK"),
    ),
    ("tck-stream-002", Scenario::Stream002),
    (
        "tck-stream-003",
        Scenario::Streamed("Stream task lifecycle"),
    ),
    (
        "tck-stream-ordering-001",
        Scenario::Streamed("Ordered output"),
    ),
    (
        "tck-stream-artifact-text",
        Scenario::Streamed("Streamed text content"),
    ),
    ("tck-stream-artifact-file", Scenario::StreamArtifactFile),
    (
        "tck-stream-artifact-chunked",
        Scenario::StreamArtifactChunked,
    ),
    ("test-resubscribe-message-id", Scenario::Resubscribe),
];

impl Scenario {
    /// The scenario a message id asks for, if any.
    pub fn of(message_id: &str) -> Option<Scenario> {
        PREFIXES
            .iter()
            .find(|(prefix, _)| message_id.starts_with(prefix))
            .map(|(_, scenario)| *scenario)
    }

    /// Play the scenario.
    async fn run(self, ctx: &StepCtx) -> StepResult<State> {
        Ok(match self {
            Scenario::CompleteTask => Transition::complete("Hello from TCK"),
            Scenario::ArtifactText => Transition::done().artifact(artifact(
                ctx,
                "text",
                Part::text("Generated text content"),
            )),
            Scenario::ArtifactFile => Transition::done().artifact(artifact(ctx, "file", file())),
            Scenario::ArtifactFileUrl => {
                let url = File::uri("https://example.com/output.txt", Some("text/plain".into()))
                    .named("output.txt");
                Transition::done().artifact(artifact(ctx, "file-url", Part::file(url)))
            }
            Scenario::ArtifactData => {
                let mut data = serde_json::Map::new();
                data.insert("key".to_owned(), "value".into());
                data.insert("count".to_owned(), 42.into());
                Transition::done().artifact(artifact(ctx, "data", Part::data(data)))
            }
            Scenario::MessageResponse => Transition::complete("Direct message response"),
            Scenario::InputRequired => {
                Transition::await_input(State::Reply, "tck", "Input required by the TCK scenario.")
            }
            Scenario::RejectTask => Transition::reject("rejected"),
            Scenario::Streamed(text) => {
                ctx.emit_artifact(artifact(ctx, "text", Part::text(text)))
                    .await?;
                Transition::done()
            }
            Scenario::Stream002 => Transition::done(),
            Scenario::StreamArtifactFile => {
                ctx.emit_artifact(artifact(ctx, "file", file())).await?;
                Transition::done()
            }
            Scenario::StreamArtifactChunked => {
                // Both chunks say `append`, as the scenario's steps and the TCK's agents do.
                for (text, last_chunk) in [("chunk-1 ", false), ("chunk-2", true)] {
                    let chunk = artifact(ctx, "chunked", Part::text(text));
                    ctx.run(Cmd::new(CmdKind::EmitArtifact {
                        artifact: chunk,
                        append: true,
                        last_chunk,
                    }))
                    .await?;
                }
                Transition::done()
            }
            Scenario::Resubscribe => {
                ctx.sleep(resubscribe_wait()).await?;
                Transition::done()
            }
        })
    }
}

/// An artifact whose id is derived from the task and `what`, so a step re-run after a restart
/// names the same artifact.
fn artifact(ctx: &StepCtx, what: &str, part: Part) -> Artifact {
    Artifact {
        artifact_id: format!("{}-{what}", ctx.task_id()),
        name: None,
        description: None,
        parts: vec![part],
        metadata: None,
        extensions: Vec::new(),
    }
}

/// The TCK's file part: `output.txt`, `text/plain`, the bytes `tck`.
fn file() -> Part {
    Part::file(File::bytes(b"tck".to_vec(), Some("text/plain".into())).named("output.txt"))
}

/// Twice `TCK_STREAMING_TIMEOUT` (seconds; default 2, as in the TCK).
fn resubscribe_wait() -> Duration {
    let timeout = std::env::var("TCK_STREAMING_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 3600.0)
        .unwrap_or(2.0);
    Duration::from_secs_f64(2.0 * timeout)
}

/// The text contract's other path: a progress update (`working`, after the engine's own), `echo.txt`
/// in two chunks around a durable pause, done.
async fn echo(ctx: &StepCtx, text: String) -> StepResult<State> {
    ctx.progress("Echoing.").await?;
    let mut echo = ctx.partial_artifact("echo.txt");
    echo.send("Echo: ").await?;
    ctx.sleep(PAUSE).await?;
    echo.finish(text).await?;
    Ok(Transition::complete("Echoed."))
}

#[async_trait]
impl FlowSkill for Conformance {
    type State = State;

    fn info(&self) -> SkillInfo {
        let step = |name: &str, start: bool, resume_from: Option<&str>| StepInfo {
            name: name.to_owned(),
            start,
            resume_from: resume_from.map(str::to_owned),
            gotos: Vec::new(),
            payload: "()".to_owned(),
        };
        SkillInfo::new("conformance", "Conformance")
            .description(
                "A predictable agent for protocol test suites: `ask …` asks a question and answers \
                 with the reply; other text streams an echo in two chunks; the A2A TCK's `tck-*` \
                 message ids play their scenarios.",
            )
            .tags(["conformance", "tck", "demo"])
            .examples(["ask me anything", "hello"])
            .declared_steps(vec![
                step("start", true, None),
                step("reply", false, Some("start")),
            ])
    }

    fn initial_state(&self) -> State {
        State::Start
    }

    /// `tck-message-response` is answered with a message, not a task.
    fn answers_with_message(&self, first: &Message) -> bool {
        Scenario::of(&first.message_id) == Some(Scenario::MessageResponse)
    }

    fn step_name(&self, state: &State) -> String {
        match state {
            State::Start => "start",
            State::Reply => "reply",
        }
        .to_owned()
    }

    async fn on_event(
        &self,
        state: State,
        event: Event,
        ctx: &StepCtx,
    ) -> Result<Transition<State>, StepError> {
        let Event::UserMessage { message } = event else {
            return Ok(Transition::ignore());
        };
        if let Some(scenario) = Scenario::of(&message.message_id) {
            return scenario.run(ctx).await;
        }
        let text = message.joined_texts();
        match state {
            State::Start if text.starts_with("ask") => {
                Ok(Transition::await_input(State::Reply, "answer", QUESTION))
            }
            State::Start => echo(ctx, text).await,
            State::Reply => {
                Ok(Transition::complete("Answered.")
                    .artifact(Artifact::from_text("answer.txt", text)))
            }
        }
    }
}

// The tests name `super::` items in full: test targets that include the demo with `#[path]` and run
// without libtest's harness drop `#[test]` functions, and would warn of unused imports.
#[cfg(test)]
mod tests {
    #[test]
    fn no_prefix_is_shadowed_by_an_earlier_one() {
        let prefixes = super::PREFIXES;
        for (i, (later, _)) in prefixes.iter().enumerate() {
            for (earlier, _) in &prefixes[..i] {
                assert!(
                    !later.starts_with(earlier),
                    "`{earlier}` comes before `{later}` and would take its messages"
                );
            }
        }
    }

    #[test]
    fn ids_with_the_tcks_session_suffix_find_their_scenario() {
        for (prefix, scenario) in super::PREFIXES {
            let id = format!("{prefix}-1a2b3c4d");
            assert_eq!(super::Scenario::of(&id), Some(*scenario));
        }
        assert_eq!(super::Scenario::of("tck-send-003-1a2b3c4d"), None);
        assert_eq!(super::Scenario::of("m-42"), None);
    }
}
