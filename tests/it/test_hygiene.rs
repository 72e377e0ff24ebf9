//! A full skill compiles under `#![deny(warnings)]` with names that shadow the prelude, `core` and
//! the crates the expansion uses in scope: the expansions use absolute paths only.
#![deny(warnings)]
#![allow(dead_code)]

struct Result;
struct Ok;
struct Some;
struct Err;
struct None;
struct Option;
struct Box;
struct Send;
struct Sync;
struct Default;
struct Arc;
mod core {}
mod inventory {}
mod serde_json {}
mod async_trait {}

use radkit::flow::{StepCtx, StepResult};
use radkit::model::{Artifact, Content};
use radkit::{await_input, flow_skill, goto};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Note {
    text: String,
}

/// The name the state enum of `Hygienic` would take: a payload of this type must still mean this
/// struct inside the expansion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HygienicState(u8);

#[derive(Default)]
pub struct Hygienic;

/// A skill that uses every macro feature.
#[flow_skill(id = "hygienic", name = "Hygienic", tags = ["t"], examples = ["e"], input_modes = ["text/plain"], output_modes = ["text/plain"])]
impl Hygienic {
    #[step(start)]
    async fn start(
        &self,
        ctx: &StepCtx,
        msg: Content,
        notes: Vec<Note>,
        _state: HygienicState,
    ) -> StepResult {
        ctx.progress("thinking").await?;
        goto!("review", (msg.joined_texts(), notes))
    }

    #[step]
    async fn review(&self, ctx: &StepCtx, payload: (String, Vec<Note>)) -> StepResult {
        let (text, notes) = payload;
        if notes.len() > 1 {
            return ctx.complete(text.clone(), vec![Artifact::from_text("out.txt", text)]);
        }
        await_input!(
            slot = "note",
            message = "Add a note?",
            carry = (text, notes)
        )
    }

    #[step(resume_from = "review")]
    async fn noted(&self, payload: (String, Vec<Note>), reply: Content) -> StepResult {
        let (text, mut notes) = payload;
        notes.push(Note {
            text: reply.joined_texts(),
        });
        goto!("review", (text, notes))
    }
}

#[test]
fn hygienic_skill_is_registered_with_its_metadata() {
    let skills = radkit::registry::build_all().unwrap();
    let info = skills
        .iter()
        .find(|s| s.info().id == "hygienic")
        .unwrap()
        .info()
        .clone();
    assert_eq!(info.name, "Hygienic");
    assert_eq!(info.description, "A skill that uses every macro feature.");
    assert_eq!(info.tags, vec!["t"]);
    assert_eq!(info.input_modes, vec!["text/plain"]);
    assert_eq!(info.steps.len(), 3);
}
