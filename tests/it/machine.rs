//! The task machine without I/O runs the skills the engine runs, in all three forms (`#[flow_skill]`,
//! the step table, the reducer), and journals what the engine journals for the same inputs: the two
//! apply one set of rules. The machine here is hosted by the test thread alone (no runtime): it is
//! polled, its effects are performed with `futures::executor::block_on`, its appends kept in a
//! `Vec`.

use std::sync::Arc;

use radkit::engine::{Caller, Engine, Request};
use radkit::flow::ErasedSkill;
use radkit::journal::{Entry, JournalRecord};
use radkit::machine::{MachineConfig, MachineSkill, NewTask, Output, TaskMachine};
use radkit::model::{Message, TaskState};
use radkit::store::{Append, MemoryStore};

#[allow(dead_code)] // each test uses part of the demo
use crate::support::demo;

const T0: i64 = 1_700_000_000_000;

fn keep(journal: &mut Vec<JournalRecord>, append: Append) {
    assert_eq!(append.first_seq, journal.len() as u64 + 1);
    for (seq, entry) in (append.first_seq..).zip(append.entries.iter()) {
        journal.push(JournalRecord {
            seq,
            at_ms: append.at_ms,
            entry: entry.clone(),
        });
    }
}

/// Run `m` until it rests or ends, performing its effects with the demo's scripted models.
fn run(m: &mut TaskMachine, journal: &mut Vec<JournalRecord>, now: i64) -> Output {
    let effects = demo::shared::scripted_effects();
    loop {
        match m.poll(now) {
            Output::Persist(append) => keep(journal, *append),
            Output::Perform(asked) => {
                for effect in asked {
                    let outcome = futures::executor::block_on(effect.run(&effects));
                    m.complete(&effect.id, outcome, now).unwrap();
                }
            }
            Output::Awaiting => panic!("every effect was completed"),
            rest => return rest,
        }
    }
}

/// The research loop on the machine: start, rest at the critic's question, resume (a new
/// "process"), reply, end. Returns the journal.
fn on_the_machine(skill: Arc<dyn ErasedSkill>) -> Vec<JournalRecord> {
    let skill = MachineSkill::with(
        skill,
        demo::shared::scripted_effects(),
        MachineConfig::default(),
    );
    let mut journal = Vec::new();
    let mut m = skill
        .start(
            NewTask::new("t1", Message::user_text("Durable execution for agents")),
            T0,
        )
        .unwrap();
    let out = run(&mut m, &mut journal, T0);
    assert!(
        matches!(
            out,
            Output::Waiting {
                input: true,
                wake_at_ms: None
            }
        ),
        "{out:?}"
    );
    drop(m);
    // The reply arrives in another invocation: the task is resumed from its journal.
    let mut m = skill.resume("t1", &journal, T0 + 1_000).unwrap();
    assert_eq!(m.status(), TaskState::InputRequired);
    m.reply(Message::user_text("Make it friendlier.")).unwrap();
    let out = run(&mut m, &mut journal, T0 + 1_000);
    assert!(
        matches!(out, Output::Ended(TaskState::Completed)),
        "{out:?}"
    );
    journal
}

/// The same on the long-running engine.
async fn on_the_engine(skill: Arc<dyn ErasedSkill>) -> Vec<JournalRecord> {
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
    engine.wait_settled(&Caller::Operator, &id).await.unwrap();
    let mut reply = Message::user_text("Make it friendlier.");
    reply.task_id = Some(id.to_string());
    engine.send(Request::operator(reply)).await.unwrap();
    let task = engine.wait_settled(&Caller::Operator, &id).await.unwrap();
    assert_eq!(task.status.state, TaskState::Completed);
    engine.journal(&Caller::Operator, &id).await.unwrap()
}

/// What a journal says, without the ids and times a run chooses: each entry's kind, and for
/// commands and receipts what was called and what it returned.
fn shape(journal: &[JournalRecord], task_id: &str) -> Vec<String> {
    journal
        .iter()
        .map(|r| match &r.entry {
            Entry::CommandIssued { id, cmd, .. } => format!(
                "command_issued {} {}",
                id.as_str().replacen(task_id, "T", 1),
                cmd.kind.fingerprint()
            ),
            Entry::ReceiptRecorded { receipt } => format!(
                "receipt_recorded {} {:?}",
                receipt.id.as_str().replacen(task_id, "T", 1),
                receipt.outcome
            ),
            Entry::Activated { visit, step, .. } => format!("activated {visit} {step}"),
            Entry::StatusChanged { state } | Entry::Terminal { state, .. } => {
                format!("{} {}", r.entry.kind_name(), state.as_str())
            }
            other => other.kind_name().to_owned(),
        })
        .collect()
}

fn forms() -> [Arc<dyn ErasedSkill>; 3] {
    [
        radkit::flow::erase(demo::macro_form::ResearchLoop),
        radkit::flow::erase(demo::table_form::skill()),
        radkit::flow::erase(demo::reducer_form::ResearchReducer),
    ]
}

#[test]
async fn every_form_journals_on_the_machine_what_it_journals_on_the_engine() {
    for form in forms() {
        let skill_id = form.info().id.clone();
        let machine = on_the_machine(form.clone());
        let engine = on_the_engine(form).await;
        let engine_task = engine
            .iter()
            .find_map(|r| match &r.entry {
                Entry::MessageReceived { message } => message.task_id.clone(),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            shape(&machine, "t1"),
            shape(&engine, &engine_task),
            "{skill_id}: the machine and the engine journal the same run"
        );
        let models = machine
            .iter()
            .filter(|r| matches!(&r.entry, Entry::ReceiptRecorded { .. }))
            .count();
        assert!(models >= 6, "{skill_id}: {models} receipts");
    }
}

#[test]
fn a_macro_step_is_polled_by_the_machine_and_each_ctx_call_becomes_an_effect() {
    let skill = MachineSkill::with(
        radkit::flow::erase(demo::macro_form::ResearchLoop),
        demo::shared::scripted_effects(),
        MachineConfig::default(),
    );
    let mut m = skill
        .start(NewTask::new("t1", Message::user_text("topic")), T0)
        .unwrap();
    let mut journal = Vec::new();
    let asked = loop {
        match m.poll(T0) {
            Output::Persist(a) => keep(&mut journal, *a),
            Output::Perform(asked) => break asked,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0].id.as_str(),
        "t1:1:0",
        "the first call of the first visit"
    );
    assert_eq!(asked[0].cmd.kind.fingerprint(), "llm `research`");
    assert!(
        journal
            .iter()
            .any(|r| matches!(&r.entry, Entry::CommandIssued { id, .. } if *id == asked[0].id)),
        "journaled before it is asked"
    );
    assert!(matches!(m.poll(T0), Output::Awaiting));
}

/// Books a hotel and a flight (each undone by its compensation), then pays: a refused payment
/// fails the task, and the bookings are undone newest first.
#[derive(Default)]
struct Trip;

#[radkit::flow_skill(id = "trip", name = "Trip", register = false)]
impl Trip {
    #[radkit::step(start)]
    async fn book(
        &self,
        ctx: &radkit::flow::StepCtx,
        msg: radkit::model::Content,
    ) -> radkit::flow::StepResult {
        let _: serde_json::Value = ctx.tool("book_hotel").call("Lisbon").await?;
        let _: serde_json::Value = ctx.tool("book_flight").call("LIS").await?;
        if msg.joined_texts() == "wait" {
            return radkit::await_input!(slot = "go", message = "Pay now?");
        }
        let _: serde_json::Value = ctx.tool("pay").call(420).await?;
        ctx.complete("booked", vec![])
    }

    #[radkit::step(resume_from = "book")]
    async fn paid(
        &self,
        ctx: &radkit::flow::StepCtx,
        _: radkit::model::Content,
    ) -> radkit::flow::StepResult {
        ctx.complete("booked", vec![])
    }
}

/// The trip's tools; every booking and undo is logged in order.
fn trip_effects(log: Arc<std::sync::Mutex<Vec<String>>>) -> radkit::effects::Effects {
    use radkit::flow::{EffectError, EffectPolicy};
    use radkit::tools::FnTool;
    let booking = |name: &'static str| {
        let (did, undid) = (log.clone(), log.clone());
        FnTool::new(EffectPolicy::Compensate, move |args, _| {
            did.lock().unwrap().push(format!("{name} {args}"));
            async move { Ok(args) }
        })
        .compensate_with(move |args, _, _| {
            undid.lock().unwrap().push(format!("undo {name} {args}"));
            async move { Ok(serde_json::Value::Null) }
        })
    };
    radkit::effects::Effects::new()
        .tool("book_hotel", booking("hotel"))
        .tool("book_flight", booking("flight"))
        .tool(
            "pay",
            FnTool::new(EffectPolicy::AtMostOnce, |_, _| async move {
                Err::<serde_json::Value, _>(EffectError::permanent("card declined"))
            }),
        )
}

/// Run the trip on the machine until it rests or ends (a cancel after `wait`).
fn trip_on_the_machine(text: &str, cancel: bool) -> (Vec<JournalRecord>, Vec<String>) {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let effects = trip_effects(log.clone());
    let skill = MachineSkill::with(
        radkit::flow::erase(Trip),
        effects.clone(),
        MachineConfig::default(),
    );
    let mut m = skill
        .start(NewTask::new("t1", Message::user_text(text)), T0)
        .unwrap();
    let mut journal = Vec::new();
    let mut canceled = false;
    loop {
        match m.poll(T0) {
            Output::Persist(a) => keep(&mut journal, *a),
            Output::Perform(asked) => {
                for effect in asked {
                    let outcome = futures::executor::block_on(effect.run(&effects));
                    m.complete(&effect.id, outcome, T0).unwrap();
                }
            }
            Output::Waiting { input: true, .. } if cancel && !canceled => {
                canceled = m.cancel(T0);
                assert!(canceled);
            }
            Output::Ended(_) => break,
            other => panic!("{other:?}"),
        }
    }
    let log = log.lock().unwrap().clone();
    (journal, log)
}

async fn trip_on_the_engine(text: &str, cancel: bool) -> (Vec<JournalRecord>, Vec<String>) {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let engine = Engine::builder(MemoryStore::new())
        .without_registered_skills()
        .skill(Trip)
        .effects(trip_effects(log.clone()))
        .start()
        .await
        .unwrap();
    let id = engine
        .send(Request::operator(Message::user_text(text)))
        .await
        .unwrap();
    engine.wait_settled(&Caller::Operator, &id).await.unwrap();
    if cancel {
        engine.cancel(&Caller::Operator, &id).await.unwrap();
    }
    let journal = engine.journal(&Caller::Operator, &id).await.unwrap();
    let log = log.lock().unwrap().clone();
    (journal, log)
}

#[test]
async fn compensations_run_newest_first_on_the_machine_as_on_the_engine_after_a_failure_or_a_cancel(
) {
    for (text, cancel, state) in [
        ("go", false, TaskState::Failed),
        ("wait", true, TaskState::Canceled),
    ] {
        let (machine, machine_log) = trip_on_the_machine(text, cancel);
        let (engine, engine_log) = trip_on_the_engine(text, cancel).await;
        let task = engine
            .iter()
            .find_map(|r| match &r.entry {
                Entry::MessageReceived { message } => message.task_id.clone(),
                _ => None,
            })
            .unwrap();
        assert_eq!(shape(&machine, "t1"), shape(&engine, &task), "{text}");
        assert_eq!(machine_log, engine_log, "{text}");
        assert_eq!(
            machine_log[2..],
            [
                "undo flight \"LIS\"".to_owned(),
                "undo hotel \"Lisbon\"".to_owned()
            ],
            "{text}: newest first"
        );
        assert!(
            matches!(machine.last().map(|r| &r.entry), Some(Entry::Terminal { state: s, .. }) if *s == state),
            "{text}"
        );
    }
}
