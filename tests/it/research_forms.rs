//! The seed's research loop, written as an explicit reducer, as a step table and
//! with `#[flow_skill]`, produces the same effect journal for the same scripted model and takes
//! the task working -> input-required -> (reply) -> completed.

use radkit::engine::Engine;
use radkit::engine::{Caller, Request};
use radkit::flow::{CmdKind, ErasedSkill};
use radkit::journal::{Entry, JournalRecord};
use radkit::model::{Message, TaskState};
use radkit::store::MemoryStore;
use std::sync::Arc;

#[allow(dead_code)] // each test uses part of the demo
use crate::support::demo;

/// What a run did to the world: every model call with its input and answer, in order.
fn effect_trace(journal: &[JournalRecord]) -> Vec<(String, serde_json::Value, serde_json::Value)> {
    let mut issued = std::collections::HashMap::new();
    let mut trace = Vec::new();
    for r in journal {
        match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => {
                issued.insert(id.clone(), cmd.clone());
            }
            Entry::ReceiptRecorded { receipt } => {
                let cmd = &issued[&receipt.id];
                let input = match &cmd.kind {
                    CmdKind::Llm { input, schema, .. } => {
                        serde_json::json!({ "input": input, "schema": schema })
                    }
                    CmdKind::Tool { args, .. } => args.clone(),
                    _ => continue,
                };
                trace.push((
                    cmd.kind.fingerprint(),
                    input,
                    receipt.outcome.clone().unwrap_or_default(),
                ));
            }
            _ => {}
        }
    }
    trace
}

fn states(journal: &[JournalRecord]) -> Vec<TaskState> {
    let mut out: Vec<TaskState> = Vec::new();
    for r in journal {
        let s = match &r.entry {
            Entry::StatusChanged { state } | Entry::Terminal { state, .. } => *state,
            _ => continue,
        };
        if out.last() != Some(&s) {
            out.push(s);
        }
    }
    out
}

async fn run_form(
    skill: Arc<dyn ErasedSkill>,
) -> (
    Vec<(String, serde_json::Value, serde_json::Value)>,
    Vec<TaskState>,
    Vec<(Option<String>, String)>,
) {
    let engine = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .erased_skill(skill)
        .effects(demo::shared::scripted_effects())
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::operator(Message::user_text(
            "Durable execution for agents",
        )))
        .await
        .unwrap();
    let task = engine.wait_settled(&Caller::Operator, &id).await.unwrap();
    assert_eq!(
        task.status.state,
        TaskState::InputRequired,
        "{:?}",
        task.status
    );
    assert_eq!(
        task.status.message.as_ref().unwrap().joined_texts(),
        "Critic needs human input."
    );
    let mut reply = Message::user_text("Make it friendlier.");
    reply.task_id = Some(id.to_string());
    engine.send(Request::operator(reply)).await.unwrap();
    let task = engine.wait_settled(&Caller::Operator, &id).await.unwrap();
    assert_eq!(task.status.state, TaskState::Completed, "{:?}", task.status);
    assert_eq!(
        task.status.message.as_ref().unwrap().joined_texts(),
        "Approved by critic."
    );
    let artifacts = task
        .artifacts
        .iter()
        .map(|a| {
            (
                a.name.clone(),
                a.parts[0].as_text().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    (effect_trace(&journal), states(&journal), artifacts)
}

#[test]
async fn macro_reducer_and_step_table_forms_produce_the_same_effect_journal() {
    let reducer = run_form(radkit::flow::erase(demo::reducer_form::ResearchReducer)).await;
    let table = run_form(radkit::flow::erase(demo::table_form::skill())).await;
    let macros = run_form(radkit::flow::erase(demo::macro_form::ResearchLoop)).await;
    assert_eq!(
        reducer.1,
        vec![
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::Working,
            TaskState::Completed
        ]
    );
    assert_eq!(
        reducer.0.len(),
        6,
        "research, critic (revise), research, critic (ask), research, critic (approve)"
    );
    assert_eq!(reducer, table);
    assert_eq!(reducer, macros);
}

#[test]
async fn the_final_note_uses_the_humans_reply() {
    for form in [
        radkit::flow::erase(demo::reducer_form::ResearchReducer),
        radkit::flow::erase(demo::table_form::skill()),
        radkit::flow::erase(demo::macro_form::ResearchLoop),
    ] {
        let id = form.info().id.clone();
        let (_, _, artifacts) = run_form(form).await;
        let [(Some(name), text)] = artifacts.as_slice() else {
            panic!("{id}: one named artifact expected, got {artifacts:?}");
        };
        assert_eq!(name, "final.txt", "{id}");
        assert_eq!(
            text,
            "Draft on: Durable execution for agents\nRevised: Add sources.\nRevised: Make it friendlier.",
            "{id}: the critic's note and the human's reply are both applied"
        );
    }
}
