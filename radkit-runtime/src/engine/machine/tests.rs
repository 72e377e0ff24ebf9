//! The machine driven directly, with no runtime: these tests poll it on the test thread, answer its
//! effects themselves and keep its journal in a `Vec`. A "crash" drops the machine and resumes the
//! task from what was persisted.

use futures::future::BoxFuture;
use std::collections::HashMap;

use super::*;
use crate::flow::step_table::{goto, Step, StepInput, StepTable};
use crate::flow::{CmdKind, EffectPolicy, SkillInfo, StepResult};
use crate::model::Content;
use crate::tools::FnTool;

/// What a host keeps: the journal it persisted, and how often each effect was performed.
#[derive(Default)]
struct Host {
    journal: Vec<JournalRecord>,
    performed: HashMap<String, u32>,
    /// Outcomes to give instead of the default (keyed by the effect's command target).
    failures: HashMap<String, Vec<EffectError>>,
}

const T0: i64 = 1_000_000;

impl Host {
    fn persist(&mut self, append: Append) {
        let last = self.journal.last().map_or(0, |r| r.seq);
        assert_eq!(append.first_seq, last + 1, "appends are gapless");
        for (seq, entry) in (append.first_seq..).zip(append.entries.iter()) {
            self.journal.push(JournalRecord {
                seq,
                at_ms: append.at_ms,
                entry: entry.clone(),
            });
        }
    }

    /// The default outcome of an effect: a model says what it was asked, a tool echoes its args.
    fn answer(&mut self, effect: &Effect) -> Result<Performed, EffectError> {
        *self.performed.entry(effect.id.to_string()).or_default() += 1;
        let target = effect.cmd.kind.fingerprint();
        if let Some(e) = self.failures.get_mut(&target).and_then(Vec::pop) {
            return Err(e);
        }
        let value = match &effect.cmd.kind {
            CmdKind::Llm { input, .. } => serde_json::json!(format!("answer to {input}")),
            CmdKind::Tool { args, .. } => args.clone(),
            _ => serde_json::Value::Null,
        };
        Ok(Performed { value, usage: None })
    }

    /// Poll until the machine asks for effects; persist on the way. `None` when it rests or ends.
    fn until_effects(&mut self, m: &mut TaskMachine, now: i64) -> Result<Vec<Effect>, Output> {
        loop {
            match m.poll(now) {
                Output::Persist(a) => self.persist(*a),
                Output::Perform(effects) => return Ok(effects),
                other => return Err(other),
            }
        }
    }

    /// Run the machine until it rests or ends, performing every effect at once.
    fn run(&mut self, m: &mut TaskMachine, now: i64) -> Output {
        loop {
            match self.until_effects(m, now) {
                Ok(effects) => {
                    for e in effects {
                        let outcome = self.answer(&e);
                        m.complete(&e.id, outcome, now).unwrap();
                    }
                }
                Err(Output::Awaiting) => panic!("every effect was completed"),
                Err(out) => return out,
            }
        }
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.journal.iter().map(|r| r.entry.kind_name()).collect()
    }

    fn resume(&self, skill: &MachineSkill, now: i64) -> TaskMachine {
        skill.resume("t1", &self.journal, now).unwrap()
    }
}

/// Plan with a model, then fan out to three tools in one batch, then sleep, then ask, then end.
struct Flow;

fn plan<'a>(_: &'a Flow, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let plan: String = ctx.llm("planner").run(input.message()).await?;
        goto("fanout", plan)
    })
}

fn fanout<'a>(_: &'a Flow, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let plan: String = input.payload()?;
        let found: Vec<String> = ctx
            .try_all(["a", "b", "c"].map(|t| ctx.tool(t).call(serde_json::json!(t))))
            .await?;
        goto("rest", format!("{plan}: {}", found.join(",")))
    })
}

fn rest<'a>(_: &'a Flow, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let summary: String = input.payload()?;
        ctx.sleep(std::time::Duration::from_secs(60)).await?;
        let note: Content = ctx.ask("note", "Anything to add?").await?;
        ctx.complete(format!("{summary} + {}", note.joined_texts()), vec![])
    })
}

static FLOW: &[Step<Flow>] = &[
    Step::new("plan", plan)
        .start()
        .takes_user_message()
        .goes_to(&["fanout"]),
    Step::new("fanout", fanout).goes_to(&["rest"]),
    Step::new("rest", rest),
];

fn flow_skill(effects: Effects) -> MachineSkill {
    let table = StepTable::new(SkillInfo::new("flow", "Flow"), Flow, FLOW).unwrap();
    MachineSkill::with(crate::flow::erase(table), effects, MachineConfig::default())
}

/// Tools `a`, `b` and `c`, declared idempotent (a tool's default is at most once).
fn idempotent_tools() -> Effects {
    ["a", "b", "c"]
        .into_iter()
        .fold(Effects::new(), |effects, name| {
            effects.tool(
                name,
                FnTool::new(EffectPolicy::Idempotent, |args, _| async move { Ok(args) }),
            )
        })
}

fn start(skill: &MachineSkill) -> TaskMachine {
    skill
        .start(NewTask::new("t1", Message::user_text("go")), T0)
        .unwrap()
}

fn llm_id() -> InvocationId {
    InvocationId::derive("t1", 1, 0)
}

#[test]
fn a_task_runs_to_its_end_through_effects_a_timer_and_a_reply() {
    let skill = flow_skill(Effects::new());
    let mut host = Host::default();
    let mut m = start(&skill);
    let out = host.run(&mut m, T0);
    let Output::Waiting {
        input: false,
        wake_at_ms: Some(at),
    } = out
    else {
        panic!("the sleep: {out:?}");
    };
    assert_eq!(at, T0 + 60_000);
    // The timer fires: the host resumes the task then (as a scheduled trigger would).
    let mut m = host.resume(&skill, at);
    let out = host.run(&mut m, at);
    assert!(
        matches!(out, Output::Waiting { input: true, .. }),
        "{out:?}"
    );
    assert_eq!(m.status(), TaskState::InputRequired);
    m.reply(Message::user_text("thanks")).unwrap();
    let out = host.run(&mut m, at + 1);
    assert!(
        matches!(out, Output::Ended(TaskState::Completed)),
        "{out:?}"
    );
    assert_eq!(host.performed.len(), 4, "one model call and three tools");
    assert!(host.performed.values().all(|&n| n == 1));
    assert_eq!(host.kinds().first(), Some(&"task_created"));
    assert_eq!(host.kinds().last(), Some(&"terminal"));
    assert_eq!(
        m.reply(Message::user_text("again")),
        Err(MachineError::Finished(TaskState::Completed))
    );
}

#[test]
fn the_first_append_creates_the_tasks_row() {
    let skill = flow_skill(Effects::new());
    let mut m = start(&skill);
    let Output::Persist(first) = m.poll(T0) else {
        panic!("a new task persists first");
    };
    let row = first.create.expect("the row");
    assert_eq!((row.id.as_str(), row.skill_id.as_str()), ("t1", "flow"));
    assert_eq!(first.first_seq, 1);
    assert_eq!(first.at_ms, T0, "the time passed in, not a clock");
    let Output::Perform(effects) = m.poll(T0) else {
        panic!("then the model call");
    };
    assert_eq!(effects.len(), 1);
    assert_eq!(effects[0].id, llm_id());
    assert_eq!(effects[0].attempt, 1);
}

#[test]
fn a_crash_before_a_model_completion_reissues_the_same_call_with_the_same_id() {
    let skill = flow_skill(Effects::new());
    let mut host = Host::default();
    let mut m = start(&skill);
    let asked = host.until_effects(&mut m, T0).unwrap();
    assert_eq!(asked[0].id, llm_id());
    drop(m); // the process dies with the model call in flight
    assert!(
        host.kinds().contains(&"command_issued"),
        "the command is durable before it is asked"
    );
    let mut m = host.resume(&skill, T0 + 5);
    let again = host.until_effects(&mut m, T0 + 5).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, llm_id(), "the same logical call, the same id");
    assert_eq!(again[0].cmd, asked[0].cmd);
    assert_eq!(
        host.journal
            .iter()
            .filter(|r| matches!(&r.entry, Entry::CommandIssued { id, .. } if *id == llm_id()))
            .count(),
        1,
        "journaled once"
    );
}

#[test]
fn after_a_model_completion_persisted_a_crash_does_not_call_the_model_again() {
    let skill = flow_skill(Effects::new());
    let mut host = Host::default();
    let mut m = start(&skill);
    let asked = host.until_effects(&mut m, T0).unwrap();
    let outcome = host.answer(&asked[0]);
    m.complete(&asked[0].id, outcome, T0).unwrap();
    // The receipt is persisted (a host persists what is buffered whenever it likes: here right
    // away), then the process dies before the visit's transition or the next effects are.
    host.persist(m.persist(T0).expect("the receipt is buffered"));
    drop(m);
    let mut m = host.resume(&skill, T0 + 5);
    let next = host.until_effects(&mut m, T0 + 5).unwrap();
    assert!(
        next.iter().all(|e| e.id != llm_id()),
        "the model is not asked again: {next:?}"
    );
    assert_eq!(next.len(), 3, "the fan-out's tools");
    assert_eq!(host.performed[&llm_id().to_string()], 1);
}

#[test]
fn a_half_finished_parallel_batch_reissues_only_what_has_no_receipt() {
    let skill = flow_skill(idempotent_tools());
    let mut host = Host::default();
    let mut m = start(&skill);
    let plan = host.until_effects(&mut m, T0).unwrap();
    let outcome = host.answer(&plan[0]);
    m.complete(&plan[0].id, outcome, T0).unwrap();
    let batch = host.until_effects(&mut m, T0).unwrap();
    assert_eq!(batch.len(), 3, "the three tools are asked together");
    let ids: Vec<_> = batch.iter().map(|e| e.id.clone()).collect();
    // Two of the three return (out of order) and are persisted; the process dies with the first
    // one in flight (performed, its outcome lost).
    let _lost = host.answer(&batch[0]);
    for e in [&batch[2], &batch[1]] {
        let outcome = host.answer(e);
        m.complete(&e.id, outcome, T0).unwrap();
    }
    let out = m.poll(T0);
    assert!(matches!(out, Output::Awaiting), "{out:?}");
    host.persist(m.persist(T0).unwrap());
    drop(m);
    let mut m = host.resume(&skill, T0 + 5);
    let again = host.until_effects(&mut m, T0 + 5).unwrap();
    assert_eq!(
        again.iter().map(|e| &e.id).collect::<Vec<_>>(),
        vec![&ids[0]],
        "only the call without a receipt"
    );
    let outcome = host.answer(&again[0]);
    m.complete(&again[0].id, outcome, T0 + 5).unwrap();
    let out = host.run(&mut m, T0 + 5);
    assert!(matches!(out, Output::Waiting { .. }), "{out:?}");
    for id in &ids {
        assert_eq!(
            host.performed[&id.to_string()],
            1 + u32::from(*id == ids[0])
        );
    }
}

#[test]
fn a_transient_failure_is_retried_with_its_backoff_and_the_same_id() {
    let skill = flow_skill(Effects::new());
    let mut host = Host::default();
    host.failures.insert(
        "llm `planner`".into(),
        vec![EffectError::transient("overloaded").retry_after(std::time::Duration::from_secs(7))],
    );
    let mut m = start(&skill);
    let first = host.until_effects(&mut m, T0).unwrap();
    let outcome = host.answer(&first[0]);
    assert!(outcome.is_err());
    m.complete(&first[0].id, outcome, T0).unwrap();
    let retry = host.until_effects(&mut m, T0).unwrap();
    assert_eq!(retry[0].id, llm_id());
    assert_eq!(retry[0].attempt, 2);
    assert_eq!(
        retry[0].not_before_ms,
        Some(T0 + 7_000),
        "the service's Retry-After is longer than the backoff"
    );
    assert!(host.kinds().contains(&"attempt_failed"));
}

#[test]
fn an_at_most_once_call_cut_off_by_a_crash_fails_the_task_as_unknown() {
    let effects = Effects::new().tool(
        "a",
        FnTool::new(EffectPolicy::AtMostOnce, |args, _| async move { Ok(args) }),
    );
    let skill = flow_skill(effects);
    let mut host = Host::default();
    let mut m = start(&skill);
    let plan = host.until_effects(&mut m, T0).unwrap();
    let outcome = host.answer(&plan[0]);
    m.complete(&plan[0].id, outcome, T0).unwrap();
    let batch = host.until_effects(&mut m, T0).unwrap();
    let a = batch
        .iter()
        .find(|e| e.cmd.kind.fingerprint() == "tool `a`")
        .unwrap();
    assert_eq!(a.cmd.policy, EffectPolicy::AtMostOnce, "the tool's policy");
    drop(m);
    let mut m = host.resume(&skill, T0 + 5);
    let out = host.run(&mut m, T0 + 5);
    assert!(matches!(out, Output::Ended(TaskState::Failed)), "{out:?}");
    let Some(Entry::Terminal {
        message: Some(message),
        ..
    }) = host.journal.last().map(|r| &r.entry)
    else {
        panic!("a terminal entry");
    };
    assert!(
        message.joined_texts().contains("outcome"),
        "{}",
        message.joined_texts()
    );
    assert!(
        !host.performed.contains_key(&a.id.to_string()),
        "never performed"
    );
}

#[test]
fn an_at_most_once_receipt_is_persisted_before_anything_else() {
    let effects = Effects::new().tool(
        "a",
        FnTool::new(EffectPolicy::AtMostOnce, |args, _| async move { Ok(args) }),
    );
    let skill = flow_skill(effects);
    let mut host = Host::default();
    let mut m = start(&skill);
    let plan = host.until_effects(&mut m, T0).unwrap();
    let outcome = host.answer(&plan[0]);
    m.complete(&plan[0].id, outcome, T0).unwrap();
    let batch = host.until_effects(&mut m, T0).unwrap();
    let a = batch
        .iter()
        .find(|e| e.cmd.policy == EffectPolicy::AtMostOnce)
        .unwrap()
        .clone();
    let outcome = host.answer(&a);
    m.complete(&a.id, outcome, T0).unwrap();
    let Output::Persist(append) = m.poll(T0) else {
        panic!("the receipt goes out first");
    };
    assert!(append
        .entries
        .iter()
        .any(|e| matches!(e, Entry::ReceiptRecorded { receipt } if receipt.id == a.id)));
}

#[test]
fn a_cancel_tells_the_step_and_ends_the_task_canceled() {
    let skill = flow_skill(Effects::new());
    let mut host = Host::default();
    let mut m = start(&skill);
    let out = host.run(&mut m, T0);
    assert!(matches!(out, Output::Waiting { .. }));
    assert!(m.cancel(T0 + 1));
    let out = host.run(&mut m, T0 + 1);
    assert!(matches!(out, Output::Ended(TaskState::Canceled)), "{out:?}");
    assert!(host.kinds().contains(&"cancel_requested"));
    assert!(!m.cancel(T0 + 2), "an ended task is not canceled again");
}

#[test]
fn an_outcome_for_an_effect_never_asked_is_refused() {
    let skill = flow_skill(Effects::new());
    let mut m = start(&skill);
    let id = InvocationId::derive("t1", 9, 9);
    assert_eq!(
        m.complete(
            &id,
            Ok(Performed {
                value: serde_json::Value::Null,
                usage: None
            }),
            T0
        ),
        Err(MachineError::UnknownEffect(id))
    );
}

#[test]
fn a_journal_of_another_skill_is_refused() {
    let skill = flow_skill(Effects::new());
    let mut host = Host::default();
    let mut m = start(&skill);
    host.run(&mut m, T0);
    let other = MachineSkill::new(crate::flow::erase(
        StepTable::new(SkillInfo::new("other", "Other"), Flow, FLOW).unwrap(),
    ));
    assert!(matches!(
        other.resume("t1", &host.journal, T0),
        Err(MachineError::VersionMismatch { .. })
    ));
}

/// A step that awaits what no ctx call is, and one that panics.
struct Misuse;

fn stalls<'a>(_: &'a Misuse, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        futures::future::pending::<()>().await;
        unreachable!()
    })
}

fn panics<'a>(_: &'a Misuse, _: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { panic!("secret in the payload") })
}

static STALLS: &[Step<Misuse>] = &[Step::new("stalls", stalls).start().takes_user_message()];
static PANICS: &[Step<Misuse>] = &[Step::new("panics", panics).start().takes_user_message()];

fn ends_with(steps: &'static [Step<Misuse>]) -> (TaskState, String) {
    let table = StepTable::new(SkillInfo::new("misuse", "Misuse"), Misuse, steps).unwrap();
    let skill = MachineSkill::new(crate::flow::erase(table));
    let mut host = Host::default();
    let mut m = start(&skill);
    let out = host.run(&mut m, T0);
    let Output::Ended(state) = out else {
        panic!("{out:?}");
    };
    let Some(Entry::Terminal {
        message: Some(message),
        ..
    }) = host.journal.last().map(|r| &r.entry)
    else {
        panic!("a terminal entry");
    };
    (state, message.joined_texts())
}

#[test]
fn a_step_that_awaits_something_else_than_a_ctx_call_fails_its_task_saying_so() {
    let (state, text) = ends_with(STALLS);
    assert_eq!(state, TaskState::Failed);
    assert!(text.contains("not a ctx call"), "{text}");
}

#[test]
fn a_step_that_panics_fails_its_task_without_quoting_the_panic() {
    let (state, text) = ends_with(PANICS);
    assert_eq!(state, TaskState::Failed);
    assert!(
        text.contains("panicked") && !text.contains("secret"),
        "{text}"
    );
}

#[test]
fn a_journal_that_cannot_be_replayed_is_refused_with_a_reason() {
    let skill = flow_skill(Effects::new());
    assert!(matches!(
        skill.resume("t1", &[], T0),
        Err(MachineError::Journal(_))
    ));
    let mut host = Host::default();
    let mut m = start(&skill);
    host.run(&mut m, T0);
    // The first entry (`task_created`) lost: nothing says what the task is.
    let headless: Vec<JournalRecord> = host.journal[1..].to_vec();
    assert!(matches!(
        skill.resume("t1", &headless, T0),
        Err(MachineError::Journal(_))
    ));
}

#[test]
fn an_effect_answered_twice_is_refused_the_second_time() {
    let skill = flow_skill(Effects::new());
    let mut host = Host::default();
    let mut m = start(&skill);
    let asked = host.until_effects(&mut m, T0).unwrap();
    let outcome = host.answer(&asked[0]);
    m.complete(&asked[0].id, outcome.clone(), T0).unwrap();
    assert_eq!(
        m.complete(&asked[0].id, outcome, T0),
        Err(MachineError::UnknownEffect(asked[0].id.clone()))
    );
}

/// Asks the agent `peer` and completes with its answer.
struct Asks;

fn asks<'a>(_: &'a Asks, ctx: &'a StepCtx, input: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let reply = ctx
            .agent("peer")
            .send(input.message().joined_texts())
            .await?;
        ctx.complete(format!("peer said {}", reply.text()), vec![])
    })
}

static ASKS: &[Step<Asks>] = &[Step::new("asks", asks).start().takes_user_message()];

#[test]
fn a_call_whose_callee_works_waits_for_its_recheck_and_is_asked_again_by_id_after_a_resume() {
    let table = StepTable::new(SkillInfo::new("asks", "Asks"), Asks, ASKS).unwrap();
    let skill = MachineSkill::with(
        crate::flow::erase(table),
        Effects::new(),
        MachineConfig::default(),
    );
    let mut host = Host::default();
    let mut m = start(&skill);
    let asked = host.until_effects(&mut m, T0).unwrap();
    assert_eq!(asked.len(), 1);
    let call = &asked[0];
    assert!(
        call.cmd.kind.is_call() && call.call.is_none(),
        "a call not started yet"
    );
    // The host started it; the callee works.
    m.call_started(&call.id, "callee-1", Some("ctx-1".into()))
        .unwrap();
    m.call_waiting(&call.id, T0 + 5_000).unwrap();
    let out = host.run(&mut m, T0);
    assert!(
        matches!(out, Output::Waiting { input: false, wake_at_ms: Some(at) } if at == T0 + 5_000),
        "{out:?}"
    );
    assert!(
        host.kinds().ends_with(&["call_started", "timer_set"]),
        "{:?}",
        host.kinds()
    );
    // The same machine never asks again: the next pass does, by the journaled callee.
    assert!(matches!(m.poll(T0 + 1), Output::Waiting { .. }));
    let mut m = host.resume(&skill, T0 + 5_000);
    let again = host.until_effects(&mut m, T0 + 5_000).unwrap();
    assert_eq!(again[0].id, call.id, "the same call");
    assert_eq!(
        again[0].call,
        Some(CallProgress {
            callee_task: "callee-1".into(),
            rechecks: 1
        })
    );
    let reply = serde_json::to_value(crate::flow::AgentReply::from_message(Message::agent_text(
        "hi",
    )))
    .unwrap();
    m.complete(
        &call.id,
        Ok(Performed {
            value: reply,
            usage: None,
        }),
        T0 + 5_000,
    )
    .unwrap();
    assert!(matches!(
        host.run(&mut m, T0 + 5_000),
        Output::Ended(TaskState::Completed)
    ));
    assert_eq!(
        host.journal
            .iter()
            .filter(|r| matches!(r.entry, Entry::CallStarted { .. }))
            .count(),
        1,
        "started once"
    );
    assert_eq!(
        m.call_waiting(&call.id, T0),
        Err(MachineError::UnknownEffect(call.id.clone())),
        "a settled call does not wait"
    );
}

/// A reply the engine takes into a live run while its driver settles queues the re-run of the
/// visit that asked, and makes the task `working` with nothing outstanding: the host must go on
/// with that queue, not find the task stuck (a race the fold proptest hit under load).
#[test]
fn a_task_with_work_queued_is_not_stuck() {
    let mut st = RunState::new(serde_json::Value::Null);
    st.set_status(TaskState::Working);
    assert!(rules::stuck(&st), "nothing outstanding, nothing queued");
    st.queue.push_back(Work::Activate {
        event: crate::flow::Event::UserMessage {
            message: Message::user_text("the reply"),
        },
        rerun: Some(2),
    });
    assert!(!rules::stuck(&st), "the queued re-run goes on");
}

/// Calls tool `a`, then completes; its interrupt step completes with the message it got.
struct Interruptible;

fn work<'a>(_: &'a Interruptible, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let _: serde_json::Value = ctx.tool("a").call(serde_json::json!("a")).await?;
        ctx.complete("worked", vec![])
    })
}

fn redirect<'a>(
    _: &'a Interruptible,
    ctx: &'a StepCtx,
    input: StepInput,
) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        ctx.complete(
            format!("redirected: {}", input.message().joined_texts()),
            vec![],
        )
    })
}

static INTERRUPTIBLE: &[Step<Interruptible>] = &[
    Step::new("work", work).start().takes_user_message(),
    Step::new("redirect", redirect).interrupt(),
];

fn interruptible() -> MachineSkill {
    let table =
        StepTable::new(SkillInfo::new("flow", "Flow"), Interruptible, INTERRUPTIBLE).unwrap();
    MachineSkill::with(
        crate::flow::erase(table),
        idempotent_tools(),
        MachineConfig::default(),
    )
}

impl Host {
    /// Journal a message that arrived while the task worked, as a host that accepted it would.
    fn keep(&mut self, text: &str) {
        let seq = self.journal.last().map_or(0, |r| r.seq) + 1;
        self.journal.push(JournalRecord {
            seq,
            at_ms: T0,
            entry: Entry::MessageQueued {
                message: Message::user_text(text),
                interrupt: true,
            },
        });
    }

    fn status_text(&self) -> String {
        self.journal
            .iter()
            .rev()
            .find_map(|r| match &r.entry {
                Entry::Terminal { message, .. } => message.as_ref().map(Message::joined_texts),
                _ => None,
            })
            .unwrap_or_default()
    }
}

#[test]
fn an_interrupting_message_journaled_while_an_effect_was_out_runs_the_interrupt_step_on_resume() {
    let skill = interruptible();
    let mut host = Host::default();
    let mut m = start(&skill);
    let asked = host.until_effects(&mut m, T0).unwrap();
    assert_eq!(asked.len(), 1);
    drop(m); // the process dies with tool `a` out; a message that interrupts is journaled
    host.keep("stop");
    let mut m = host.resume(&skill, T0 + 5);
    assert!(matches!(
        host.run(&mut m, T0 + 5),
        Output::Ended(TaskState::Completed)
    ));
    assert_eq!(host.status_text(), "redirected: stop");
    assert!(host.journal.iter().any(|r| matches!(
        &r.entry,
        Entry::ReceiptRecorded { receipt } if receipt.id == asked[0].id && receipt.outcome.is_err()
    )), "the cut-off call is abandoned");
    assert!(host.kinds().contains(&"queued_delivered"));
}

#[test]
fn a_step_that_decided_its_end_before_an_interrupting_message_ends_as_decided() {
    let skill = interruptible();
    let mut host = Host::default();
    let mut m = start(&skill);
    assert!(matches!(
        host.run(&mut m, T0),
        Output::Ended(TaskState::Completed)
    ));
    // A crash after the final transition, before the terminal entry; then a message arrives.
    let terminal = host
        .journal
        .iter()
        .position(|r| matches!(r.entry, Entry::Terminal { .. }))
        .unwrap();
    host.journal.truncate(terminal);
    host.keep("too late");
    let mut m = host.resume(&skill, T0 + 5);
    assert!(matches!(
        host.run(&mut m, T0 + 5),
        Output::Ended(TaskState::Completed)
    ));
    assert_eq!(host.status_text(), "worked");
}

/// `flow_skill` run with hooks.
fn hooked_flow_skill(effects: Effects) -> MachineSkill {
    let table = StepTable::new(SkillInfo::new("flow", "Flow"), Flow, FLOW).unwrap();
    let config = MachineConfig {
        hooks: true,
        ..MachineConfig::default()
    };
    MachineSkill::with(crate::flow::erase(table), effects, config)
}

impl Host {
    /// [`Host::run`], answering each hook call with `hooks` and noting it in `seen`.
    fn run_hooked(
        &mut self,
        m: &mut TaskMachine,
        now: i64,
        hooks: &mut dyn FnMut(&HookCall) -> HookAnswer,
        seen: &mut Vec<String>,
    ) -> Output {
        loop {
            match m.poll(now) {
                Output::Persist(a) => self.persist(*a),
                Output::Perform(effects) => {
                    for e in effects {
                        let outcome = self.answer(&e);
                        m.complete(&e.id, outcome, now).unwrap();
                    }
                }
                Output::Hook(call) => {
                    let step = &call.context.step;
                    seen.push(match &call.kind {
                        HookKind::BeforeStep => format!("before {step}"),
                        HookKind::AfterStep { outcome } => format!("after {step}: {outcome}"),
                        HookKind::BeforeCommand { cmd, .. } => {
                            format!("before {}", cmd.kind.fingerprint())
                        }
                        HookKind::AfterCommand { cmd, .. } => {
                            format!("after {}", cmd.kind.fingerprint())
                        }
                    });
                    let answer = hooks(&call);
                    m.hooked(answer).unwrap();
                }
                Output::Awaiting => panic!("every effect was completed"),
                out => return out,
            }
        }
    }
}

#[test]
fn hooks_see_each_visit_and_command_and_a_command_they_refuse_is_journaled_refused() {
    let skill = hooked_flow_skill(idempotent_tools());
    let mut host = Host::default();
    let mut m = start(&skill);
    let mut seen = Vec::new();
    let mut hooks = |call: &HookCall| match &call.kind {
        HookKind::BeforeCommand { cmd, .. } => match &cmd.kind {
            CmdKind::Tool { tool, .. } if tool == "b" => HookAnswer::Deny("no b today".into()),
            CmdKind::Tool { tool, args } if tool == "c" => {
                let mut changed = cmd.clone();
                changed.kind = CmdKind::Tool {
                    tool: tool.clone(),
                    args: serde_json::json!(format!("{}!", args.as_str().unwrap_or_default())),
                };
                HookAnswer::Command(Box::new(changed))
            }
            _ => HookAnswer::Continue,
        },
        _ => HookAnswer::Continue,
    };
    let out = host.run_hooked(&mut m, T0, &mut hooks, &mut seen);
    assert!(matches!(out, Output::Ended(TaskState::Failed)), "{out:?}");
    assert_eq!(
        seen,
        [
            "before plan",
            "before llm `planner`",
            "after llm `planner`",
            "after plan: goto",
            "before fanout",
            "before tool `a`",
            "before tool `b`",
            "before tool `c`",
            "after tool `a`",
            "after tool `c`",
            "after fanout: tool `b` failed: denied by a hook: no b today",
        ],
        "each visit and each new command, as the engine puts them to its hooks; a refused command is never performed"
    );
    // b was refused in the journal (its receipt the refusal), never asked of the host; c ran with
    // the arguments the hook gave it.
    let b = InvocationId::derive("t1", 2, 1);
    assert!(
        !host.performed.contains_key(b.as_str()),
        "{:?}",
        host.performed
    );
    let refusal = host.journal.iter().find_map(|r| match &r.entry {
        Entry::ReceiptRecorded { receipt } if receipt.id == b => Some(receipt.clone()),
        _ => None,
    });
    let refusal = refusal.expect("b's receipt").outcome.unwrap_err();
    assert!(
        refusal.to_string().contains("denied by a hook: no b today"),
        "{refusal}"
    );
    let c_args = host.journal.iter().find_map(|r| match &r.entry {
        Entry::CommandIssued { id, cmd, .. } if *id == InvocationId::derive("t1", 2, 2) => {
            Some(cmd.kind.clone())
        }
        _ => None,
    });
    assert!(
        matches!(c_args, Some(CmdKind::Tool { args, .. }) if args == serde_json::json!("c!")),
        "the changed command is the one journaled"
    );
}

#[test]
fn a_step_the_hooks_refuse_fails_its_task_before_it_runs() {
    let skill = hooked_flow_skill(Effects::new());
    let mut host = Host::default();
    let mut m = start(&skill);
    let mut seen = Vec::new();
    let mut hooks = |call: &HookCall| match call.kind {
        HookKind::BeforeStep => HookAnswer::Deny("closed".into()),
        _ => HookAnswer::Continue,
    };
    let out = host.run_hooked(&mut m, T0, &mut hooks, &mut seen);
    assert!(matches!(out, Output::Ended(TaskState::Failed)), "{out:?}");
    assert_eq!(seen, ["before plan"], "nothing of the step ran");
    assert!(host.performed.is_empty(), "{:?}", host.performed);
    let end = format!("{:?}", host.journal.last().map(|r| &r.entry));
    assert!(
        end.contains("step `plan` denied by a hook: closed"),
        "{end}"
    );
}

#[test]
fn a_hook_answer_without_a_hook_call_is_refused() {
    let skill = hooked_flow_skill(Effects::new());
    let mut m = start(&skill);
    assert_eq!(
        m.hooked(HookAnswer::Continue),
        Err(MachineError::NoHookCall)
    );
}
