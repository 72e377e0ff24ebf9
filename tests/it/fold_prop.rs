//! Property, for the two authoring forms that run steps with effects inside them — a `#[flow_skill]`
//! and a step table — (the explicit reducer has its own in `radkit-runtime/tests/it/engine_replay_prop.rs`):
//! after every append the run's live state equals the fold of the journal as a restart reads it
//! (`EngineBuilder::check_fold`), and a crash at any boundary the run crosses, recovered by a fresh
//! engine (from the last checkpoint), ends in the same state with the same text as a run without a
//! crash.
//!
//! The same skills, run on the task machine without I/O (`radkit::machine`), crashed at any output
//! it gives its host (the machine dropped, the task resumed from what was persisted), end in the
//! same state with the same text as on the engine, and without a crash journal exactly what the
//! engine journals.
//!
//! `RADKIT_PROPTEST_CASES` sets the number of cases (default 64 per form).

use radkit::engine::{Caller, Request};
use radkit::model::TaskId;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use proptest::prelude::*;
use proptest::sample::Index;
use radkit::effects::Effects;
use radkit::engine::Fault;
use radkit::engine::{Engine, EngineBuilder};
use radkit::flow::step_table::{self, Step, StepInput, StepTable};
use radkit::flow::{erase, EffectPolicy, ErasedSkill, SkillInfo, StepCtx, StepError, StepResult};
use radkit::journal::Entry;
use radkit::model::{Content, Message, TaskState};
use radkit::store::MemoryStore;
use radkit::tools::FnTool;
use radkit::{await_input, flow_skill, goto};

/// Adds what the ops say: `add n` doubles `n` with a tool, `hop n` loops `n` visits (a tool call
/// each), `fan n` doubles `n` and `0..n` in one parallel batch (`join!` of a call and a `ctx.all`),
/// `ask` asks inside a step and adds the reply's length, `done` completes with the total.
#[derive(Default)]
struct Tally;

#[flow_skill(id = "tally", name = "Tally", register = false)]
impl Tally {
    #[step(start)]
    async fn take(&self, msg: Content) -> StepResult {
        goto!("op", (0i64, msg.joined_texts()))
    }

    #[step]
    async fn op(&self, ctx: &StepCtx, payload: (i64, String)) -> StepResult {
        let (total, text) = payload;
        match parse(&text) {
            Op::Add(n) => {
                let doubled: i64 = ctx.tool("double").call(n).await?;
                goto!("wait", total + doubled)
            }
            Op::Hop(n) => goto!("hop", (total, n)),
            Op::Fan(n) => goto!("wait", total + fan(ctx, n).await?),
            Op::Ask => {
                let reply = ctx.ask("extra", "how much?").await?;
                goto!("wait", total + reply.joined_texts().len() as i64)
            }
            Op::Done => ctx.complete(format!("total {total}"), vec![]),
            Op::Noise => goto!("wait", total),
        }
    }

    #[step]
    async fn hop(&self, ctx: &StepCtx, payload: (i64, i64)) -> StepResult {
        let (total, left) = payload;
        if left <= 0 {
            return goto!("wait", total);
        }
        let doubled: i64 = ctx.tool("double").call(1).await?;
        goto!("hop", (total + doubled, left - 1))
    }

    #[step]
    async fn wait(&self, total: i64) -> StepResult {
        await_input!(slot = "next", message = "next?", carry = total)
    }

    #[step(resume_from = "wait")]
    async fn next(&self, total: i64, msg: Content) -> StepResult {
        goto!("op", (total, msg.joined_texts()))
    }
}

/// `n` and `0..n` doubled in one batch, summed: the ids are `n`'s call, then `0..n` in order.
async fn fan(ctx: &StepCtx, n: i64) -> Result<i64, StepError> {
    let (first, rest) = radkit::join!(
        ctx.tool("double").call::<_, i64>(n),
        ctx.all((0..n).map(|i| ctx.tool("double").call::<_, i64>(i))),
    );
    rest.into_iter().try_fold(first?, |sum, x| Ok(sum + x?))
}

enum Op {
    Add(i64),
    Hop(i64),
    Fan(i64),
    Ask,
    Done,
    Noise,
}

fn parse(text: &str) -> Op {
    let mut words = text.split_whitespace();
    let op = words.next().unwrap_or("");
    let n = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    match op {
        "add" => Op::Add(n),
        "hop" => Op::Hop(n),
        "fan" => Op::Fan(n),
        "ask" => Op::Ask,
        "done" => Op::Done,
        _ => Op::Noise,
    }
}

/// The same skill as a step table.
struct TallyTable;

static STEPS: &[Step<TallyTable>] = &[
    Step::new("take", table_take)
        .start()
        .takes_user_message()
        .goes_to(&["op"]),
    Step::new("op", table_op).goes_to(&["wait", "hop"]),
    Step::new("hop", table_hop).goes_to(&["hop", "wait"]),
    Step::new("wait", table_wait),
    Step::new("next", table_next)
        .resume_from("wait")
        .goes_to(&["op"]),
];

fn table_take<'a>(
    _: &'a TallyTable,
    _: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { step_table::goto("op", (0i64, input.message().joined_texts())) })
}

fn table_op<'a>(
    _: &'a TallyTable,
    ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (total, text): (i64, String) = input.payload()?;
        match parse(&text) {
            Op::Add(n) => {
                let doubled: i64 = ctx.tool("double").call(n).await?;
                step_table::goto("wait", total + doubled)
            }
            Op::Hop(n) => step_table::goto("hop", (total, n)),
            Op::Fan(n) => step_table::goto("wait", total + fan(ctx, n).await?),
            Op::Ask => {
                let reply = ctx.ask("extra", "how much?").await?;
                step_table::goto("wait", total + reply.joined_texts().len() as i64)
            }
            Op::Done => ctx.complete(format!("total {total}"), vec![]),
            Op::Noise => step_table::goto("wait", total),
        }
    })
}

fn table_hop<'a>(
    _: &'a TallyTable,
    ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let (total, left): (i64, i64) = input.payload()?;
        if left <= 0 {
            return step_table::goto("wait", total);
        }
        let doubled: i64 = ctx.tool("double").call(1).await?;
        step_table::goto("hop", (total + doubled, left - 1))
    })
}

fn table_wait<'a>(
    _: &'a TallyTable,
    _: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let total: i64 = input.payload()?;
        step_table::await_input("next", "next?", total)
    })
}

fn table_next<'a>(
    _: &'a TallyTable,
    _: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let total: i64 = input.payload()?;
        step_table::goto("op", (total, input.message().joined_texts()))
    })
}

#[derive(Clone, Copy, Debug)]
enum Form {
    Macro,
    Table,
}

fn skill(form: Form) -> Arc<dyn ErasedSkill> {
    match form {
        Form::Macro => erase(Tally),
        Form::Table => erase(
            StepTable::new(SkillInfo::new("tally", "Tally"), TallyTable, STEPS)
                .expect("a valid step table"),
        ),
    }
}

/// The `double` tool, idempotent.
fn effects() -> Effects {
    let double = FnTool::new(EffectPolicy::Idempotent, |args, _| async move {
        Ok(serde_json::json!(args.as_i64().unwrap_or(0) * 2))
    });
    Effects::new().tool("double", double)
}

fn builder(store: &MemoryStore, form: Form, every: u64) -> EngineBuilder {
    Engine::builder(store.clone())
        .without_registered_skills()
        .erased_skill(skill(form))
        .effects(effects())
        .checkpoint_every(every)
        .check_fold(true)
}

/// What a run ended with.
#[derive(Debug)]
struct Outcome {
    state: TaskState,
    text: String,
    /// Fault-hook calls of the first engine (all of them when it did not crash).
    boundaries: usize,
    crashed: bool,
    divergences: Vec<String>,
    /// The journal's entry kinds (with each command's target).
    shape: Vec<String>,
}

/// Send every op (answering each question or `await_input!`), then `done` (twice); crash at the `crash`-th
/// fault-hook call if any, recovering with a fresh engine.
async fn run(form: Form, ops: &[String], crash: Option<usize>, every: u64) -> Outcome {
    let store = MemoryStore::new();
    let calls = Arc::new(Mutex::new(0usize));
    let hook = {
        let calls = calls.clone();
        move |_: &Fault| {
            let mut n = calls.lock().unwrap();
            *n += 1;
            crash == Some(*n - 1)
        }
    };
    let mut engine = builder(&store, form, every)
        .fault_hook(hook)
        .build()
        .unwrap();
    let mut divergences = Vec::new();
    let mut crashed = false;
    // Twice: a last `ask` takes the first `done` as its reply.
    let all: Vec<String> = ops
        .iter()
        .cloned()
        .chain(["done".to_owned(), "done".to_owned()])
        .collect();
    let mut task_id: Option<TaskId> = None;
    let mut i = 0;
    let task = loop {
        if engine.is_halted() {
            crashed = true;
            divergences.extend(engine.fold_divergences());
            engine = builder(&store, form, every).start().await.unwrap();
        }
        let Some(id) = task_id.clone() else {
            match engine
                .send(Request::operator(Message::user_text(&all[0])))
                .await
            {
                Ok(id) => {
                    task_id = Some(id);
                    i = 1;
                }
                Err(_) if engine.is_halted() => {}
                Err(e) => panic!("send failed: {e}"),
            }
            continue;
        };
        let task = tokio::select! {
            task = engine.wait_settled(&Caller::Operator, &id) => task.unwrap(),
            () = halted(&engine) => continue,
        };
        if engine.is_halted() {
            continue;
        }
        if task.status.state != TaskState::InputRequired || i >= all.len() {
            break task;
        }
        // After a crash the journal tells how many ops were delivered.
        let delivered = engine
            .journal(&Caller::Operator, &id)
            .await
            .unwrap()
            .iter()
            .filter(|r| matches!(r.entry, Entry::MessageReceived { .. }))
            .count();
        if delivered > i {
            i = delivered;
            continue;
        }
        let mut reply = Message::user_text(&all[i]);
        reply.task_id = Some(id.to_string());
        match engine.send(Request::operator(reply)).await {
            Ok(_) => i += 1,
            Err(_) if engine.is_halted() => {}
            Err(e) => panic!("reply failed: {e}"),
        }
    };
    divergences.extend(engine.fold_divergences());
    let journal = task_id
        .as_ref()
        .map(|id| futures::executor::block_on(engine.journal(&Caller::Operator, id)));
    let shape = match journal {
        Some(Ok(journal)) => shape(&journal),
        _ => Vec::new(),
    };
    engine.shutdown().await;
    let text = task
        .status
        .message
        .map(|m| Content::from(m).joined_texts())
        .unwrap_or_default();
    let boundaries = *calls.lock().unwrap();
    Outcome {
        state: task.status.state,
        text,
        boundaries,
        crashed,
        divergences,
        shape,
    }
}

/// Each entry's kind, a command with its target: what a run journaled, without ids or times.
pub(crate) fn shape(journal: &[radkit::journal::JournalRecord]) -> Vec<String> {
    journal
        .iter()
        .map(|r| match &r.entry {
            Entry::CommandIssued { cmd, .. } => format!("command {}", cmd.kind.fingerprint()),
            other => other.kind_name().to_owned(),
        })
        .collect()
}

/// What the `double` tool returns, answered by the machine's host.
fn double(args: &serde_json::Value) -> serde_json::Value {
    serde_json::json!(args.as_i64().unwrap_or(0) * 2)
}

/// [`run`] on the task machine: every output it gives is a point where its host may die; at the
/// `crash`-th the machine is dropped with what it buffered and the task resumed from the journal.
fn run_machine(form: Form, ops: &[String], crash: Option<usize>, every: u64) -> Outcome {
    use radkit::machine::{MachineConfig, MachineSkill, NewTask, Output, TaskMachine};
    let config = MachineConfig {
        checkpoint_every: every,
        ..MachineConfig::default()
    };
    // The tool's declared policy (idempotent) is the machine's to apply; it never calls the tool.
    let skill = MachineSkill::with(skill(form), effects(), config);
    let all: Vec<String> = ops
        .iter()
        .cloned()
        .chain(["done".to_owned(), "done".to_owned()])
        .collect();
    let mut journal: Vec<radkit::journal::JournalRecord> = Vec::new();
    let mut outputs = 0usize;
    let mut crashed = false;
    let mut now = 1_000_000;
    let new = |now| {
        skill
            .start(NewTask::new("t", Message::user_text(&all[0])), now)
            .unwrap()
    };
    let mut m: TaskMachine = new(now);
    loop {
        now += 1;
        let out = m.poll(now);
        outputs += 1;
        if crash == Some(outputs - 1) {
            crashed = true;
            m = if journal.is_empty() {
                new(now)
            } else {
                skill.resume("t", &journal, now).unwrap()
            };
            continue;
        }
        match out {
            Output::Hook(call) => panic!("a machine without hooks called them: {call:?}"),
            Output::Persist(append) => {
                for (seq, entry) in (append.first_seq..).zip(append.entries.iter()) {
                    journal.push(radkit::journal::JournalRecord {
                        seq,
                        at_ms: append.at_ms,
                        entry: entry.clone(),
                    });
                }
            }
            Output::Perform(effects) => {
                for effect in effects {
                    let value = match &effect.cmd.kind {
                        radkit::flow::CmdKind::Tool { args, .. } => double(args),
                        other => panic!("the tally asked for {}", other.fingerprint()),
                    };
                    let performed = radkit::effects::Performed { value, usage: None };
                    m.complete(&effect.id, Ok(performed), now).unwrap();
                }
            }
            Output::Awaiting => panic!("every effect was answered"),
            Output::Waiting { input: true, .. } => {
                let delivered = journal
                    .iter()
                    .filter(|r| matches!(r.entry, Entry::MessageReceived { .. }))
                    .count();
                if delivered >= all.len() {
                    break;
                }
                m.reply(Message::user_text(&all[delivered])).unwrap();
            }
            Output::Waiting { .. } => panic!("the tally sets no timer"),
            Output::Ended(_) => break,
        }
    }
    let (state, text) = match journal.last().map(|r| &r.entry) {
        Some(Entry::Terminal { state, message }) => (
            *state,
            message
                .clone()
                .map(|m| Content::from(m).joined_texts())
                .unwrap_or_default(),
        ),
        _ => (TaskState::InputRequired, String::new()),
    };
    Outcome {
        state,
        text,
        boundaries: outputs,
        crashed,
        divergences: Vec::new(),
        shape: shape(&journal),
    }
}

async fn halted(engine: &Engine) {
    while !engine.is_halted() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn op() -> impl Strategy<Value = String> {
    prop_oneof![
        (-20i64..20).prop_map(|n| format!("add {n}")),
        (0i64..6).prop_map(|n| format!("hop {n}")),
        (0i64..6).prop_map(|n| format!("fan {n}")),
        Just("ask".to_owned()),
        Just("noise".to_owned()),
    ]
}

fn property(form: Form, ops: &[String], pick: Index, every: u64) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let reference = rt.block_on(run(form, ops, None, 0));
    prop_assert!(
        reference.divergences.is_empty(),
        "{:?}",
        reference.divergences
    );
    prop_assert_eq!(reference.state, TaskState::Completed, "{}", reference.text);
    let at = pick.index(reference.boundaries.max(1));
    let crashed = rt.block_on(run(form, ops, Some(at), every));
    prop_assert!(
        crashed.divergences.is_empty(),
        "live state differs from the journal's fold: {:?}",
        crashed.divergences
    );
    prop_assert!(
        crashed.crashed || reference.boundaries == 0,
        "no crash at call {} of {}: the run crossed {} boundaries and ended {:?} ({}); journal {:?}",
        at,
        reference.boundaries,
        crashed.boundaries,
        crashed.state,
        crashed.text,
        crashed.shape
    );
    prop_assert_eq!(
        (crashed.state, &crashed.text),
        (reference.state, &reference.text),
        "crash at call {} of {}; journal {:?}",
        at,
        reference.boundaries,
        crashed.shape
    );
    Ok(())
}

fn machine_property(
    form: Form,
    ops: &[String],
    pick: Index,
    every: u64,
) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = rt.block_on(run(form, ops, None, every));
    let machine = run_machine(form, ops, None, every);
    prop_assert_eq!(
        &machine.shape,
        &engine.shape,
        "the machine journals what the engine journals"
    );
    prop_assert_eq!((machine.state, &machine.text), (engine.state, &engine.text));
    let at = pick.index(machine.boundaries.max(1));
    let crashed = run_machine(form, ops, Some(at), every);
    prop_assert!(crashed.crashed, "no crash at output {at}");
    prop_assert_eq!(
        (crashed.state, &crashed.text),
        (engine.state, &engine.text),
        "machine crashed at output {} of {}",
        at,
        machine.boundaries
    );
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = std::env::var("RADKIT_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_macro_skill_crashed_anywhere_folds_and_ends_like_no_crash(
        ops in proptest::collection::vec(op(), 0..6),
        pick in any::<Index>(),
        every in 1u64..4,
    ) {
        property(Form::Macro, &ops, pick, every)?;
    }

    #[test]
    fn a_macro_skill_on_the_machine_journals_like_the_engine_and_ends_alike_crashed_anywhere(
        ops in proptest::collection::vec(op(), 0..6),
        pick in any::<Index>(),
        every in 1u64..4,
    ) {
        machine_property(Form::Macro, &ops, pick, every)?;
    }

    #[test]
    fn a_step_table_skill_on_the_machine_journals_like_the_engine_and_ends_alike_crashed_anywhere(
        ops in proptest::collection::vec(op(), 0..6),
        pick in any::<Index>(),
        every in 1u64..4,
    ) {
        machine_property(Form::Table, &ops, pick, every)?;
    }

    #[test]
    fn a_step_table_skill_crashed_anywhere_folds_and_ends_like_no_crash(
        ops in proptest::collection::vec(op(), 0..6),
        pick in any::<Index>(),
        every in 1u64..4,
    ) {
        property(Form::Table, &ops, pick, every)?;
    }
}
