//! The coordinator: sends the user's question to the `optimist` and `pessimist` agents at once,
//! asks the user to choose when they disagree, and completes with both answers (and the choice) as
//! an artifact. Each call is one journaled command: after a crash the coordinator resumes the
//! remote tasks it started, never starts them twice, and waits for them with no step in memory.

use radkit::flow::AgentError;
use radkit::flow::{AgentReply, StepCtx, StepError, StepResult};
use radkit::model::{Artifact, Content, Message, Part};
use radkit::{await_input, flow_skill, goto};
use serde::{Deserialize, Serialize};

/// The agents the coordinator calls: the names declared with `--agent NAME=URL`, which are also
/// the skills it asks for there.
pub const SPECIALISTS: [&str; 2] = ["optimist", "pessimist"];

/// One specialist's answer, as the coordinator keeps it (journaled in its state).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Opinion {
    /// The agent's name.
    pub specialist: String,
    /// `yes` or `no`; `None` when it gave no verdict (it failed, or asked a question back).
    pub verdict: Option<String>,
    /// What it said.
    pub text: String,
    /// Its task on the specialist's own server (`tasks/get` it there).
    pub task_id: Option<String>,
}

impl Opinion {
    fn of(specialist: &str, reply: &AgentReply) -> Self {
        let verdict = reply
            .artifacts
            .iter()
            .flat_map(|a| &a.parts)
            .find_map(|part| match part {
                Part::Data { data, .. } => data.get("verdict")?.as_str().map(str::to_owned),
                _ => None,
            })
            .filter(|_| !reply.needs_input());
        Opinion {
            specialist: specialist.to_owned(),
            verdict,
            text: reply.text(),
            task_id: reply.task_id.clone(),
        }
    }

    /// `optimist: yes: ...`, with the remote task's id when `with_task`.
    fn line(&self, with_task: bool) -> String {
        let task = match (&self.task_id, with_task) {
            (Some(t), true) => format!(" (task {t})"),
            _ => String::new(),
        };
        match &self.verdict {
            Some(_) => format!("{}{task}: {}", self.specialist, self.text),
            None => format!("{}{task} gave no verdict: {}", self.specialist, self.text),
        }
    }
}

/// The question and both answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Opinions {
    /// The user's question.
    pub question: String,
    /// The optimist's answer.
    pub optimist: Opinion,
    /// The pessimist's answer.
    pub pessimist: Opinion,
}

impl Opinions {
    fn agreed(&self) -> Option<&str> {
        match (&self.optimist.verdict, &self.pessimist.verdict) {
            (Some(a), Some(b)) if a == b => Some(a),
            _ => None,
        }
    }

    fn get(&self, specialist: &str) -> Option<&Opinion> {
        [&self.optimist, &self.pessimist]
            .into_iter()
            .find(|o| o.specialist == specialist)
    }
}

/// Ask `specialist` the question: its opinion, or the error that stops the step. A specialist that
/// failed, refused or was canceled is an opinion without a verdict (the user hears about it); the
/// call waiting for the specialist (`StepError::Suspended`), an undeclared or unreachable agent,
/// stop the step (`?`).
async fn consult(ctx: &StepCtx, specialist: &str, question: &str) -> Result<Opinion, StepError> {
    let mut message = Message::user_text(question);
    // The specialists share one server; the message names the skill it is for.
    let mut metadata = serde_json::Map::new();
    metadata.insert("skillId".into(), specialist.into());
    message.metadata = Some(metadata);
    match ctx.agent(specialist).send(message).await {
        Ok(reply) => Ok(Opinion::of(specialist, &reply)),
        Err(
            AgentError::Failed { reply, .. }
            | AgentError::Rejected { reply, .. }
            | AgentError::Canceled { reply, .. },
        ) => Ok(Opinion {
            verdict: None,
            ..Opinion::of(specialist, &reply)
        }),
        Err(other) => Err(other.into()),
    }
}

/// Asks two specialists at once, and you when they disagree.
#[derive(Debug, Default)]
pub struct Coordinator;

/// Asks the optimist and the pessimist the same question in parallel; when they disagree, asks you
/// whom to follow; completes with both answers and the decision.
#[flow_skill(
    id = "coordinator",
    name = "Coordinator",
    tags = ["delegation"],
    examples = ["Should we ship on Friday?", "Should we ship the tested release?"]
)]
impl Coordinator {
    /// Both calls start at once (`futures::join!`); each is journaled with the remote task's id as
    /// soon as the specialist answers. While either works, the task waits as a row (no step in
    /// memory) and this step runs again when one finishes: the finished call returns its journaled
    /// reply, the other resumes its remote task by id.
    #[step(start)]
    async fn ask(&self, ctx: &StepCtx, question: Content) -> StepResult {
        let question = question.joined_texts();
        ctx.progress("Asking the optimist and the pessimist…")
            .await?;
        let (optimist, pessimist) = futures::join!(
            consult(ctx, SPECIALISTS[0], &question),
            consult(ctx, SPECIALISTS[1], &question),
        );
        let opinions = Opinions {
            question,
            optimist: optimist?,
            pessimist: pessimist?,
        };
        if opinions.agreed().is_some() {
            return goto!("conclude", (opinions, None));
        }
        let prompt = format!(
            "The specialists disagree on “{}”.\n{}\n{}\nWhom do you follow? Answer `optimist` or `pessimist` (anything else is taken as your own decision).",
            opinions.question,
            opinions.optimist.line(false),
            opinions.pessimist.line(false)
        );
        await_input!(slot = "choice", message = prompt, carry = opinions)
    }

    /// Your answer to the disagreement.
    #[step(resume_from = "ask")]
    async fn choose(&self, opinions: Opinions, answer: Content) -> StepResult {
        goto!("conclude", (opinions, Some(answer.joined_texts())))
    }

    /// Both answers and the decision, as the task's artifact `decision.md`.
    #[step]
    async fn conclude(&self, ctx: &StepCtx, payload: (Opinions, Option<String>)) -> StepResult {
        let (opinions, choice) = payload;
        let decision = match (&choice, opinions.agreed()) {
            (None, Some(verdict)) => format!("{verdict} — both specialists agree"),
            (None, None) => "none — the specialists disagree and nobody chose".to_owned(),
            (Some(choice), _) => {
                let choice = choice.trim();
                match opinions
                    .get(&choice.to_lowercase())
                    .and_then(|o| o.verdict.as_deref())
                {
                    Some(verdict) => {
                        format!("{verdict} — you follow the {}", choice.to_lowercase())
                    }
                    None => format!("yours — “{choice}”"),
                }
            }
        };
        let report = format!(
            "# {}\n\n- {}\n- {}\n\nDecision: {decision}\n",
            opinions.question,
            opinions.optimist.line(true),
            opinions.pessimist.line(true)
        );
        ctx.complete(
            format!("Decision: {decision}."),
            vec![Artifact::from_text("decision.md", report)],
        )
    }
}
