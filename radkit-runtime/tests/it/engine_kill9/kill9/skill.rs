//! The skill every case runs (`prepare`, then `effect`, then what the case says) and its tools over
//! the case's directory: each raw call is appended to the calls file, and in the child the function
//! at the kill point writes the marker and hangs. Owns nothing of the process handling.

use std::path::Path;

use futures::future::BoxFuture;
use radkit_runtime::effects::Effects;
use radkit_runtime::engine::{Engine, EngineBuilder};
use radkit_runtime::flow::step_table::{await_input, Step, StepInput, StepTable};
use radkit_runtime::flow::{EffectPolicy, SkillInfo, StepCtx, StepResult};
use radkit_runtime::store::{Durability, SqliteStore};
use radkit_runtime::tools::FnTool;

use super::calls::record;
use super::{Case, Kill, Process, Then, DONE, EFFECT, PREPARE, UNDO};

pub struct Order {
    then: Then,
}

static STEPS: &[Step<Order>] = &[
    Step::new("order", order).start().takes_user_message(),
    Step::new("confirmed", confirmed).resume_from("order"),
];

fn order<'a>(skill: &'a Order, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move {
        let args = serde_json::json!({ "order": 7 });
        let _: serde_json::Value = ctx.tool(PREPARE).call(&args).await?;
        let _: serde_json::Value = ctx.tool(EFFECT).call(&args).await?;
        match skill.then {
            Then::Complete => ctx.complete(DONE, vec![]),
            Then::Ask => {
                ctx.ask("confirm", "Confirm the order?").await?;
                ctx.complete(DONE, vec![])
            }
            Then::AwaitInput => await_input("confirm", "Confirm the order?", ()),
        }
    })
}

fn confirmed<'a>(_: &'a Order, ctx: &'a StepCtx, _: StepInput) -> BoxFuture<'a, StepResult> {
    Box::pin(async move { ctx.complete(DONE, vec![]) })
}

/// In the child at its kill point: say so with the marker file (naming the function), then never
/// return. Written beside and renamed into place, so the parent never reads it half written.
pub async fn hang(dir: &Path, function: &str) {
    let written = std::fs::write(dir.join("marker.tmp"), function)
        .and_then(|()| std::fs::rename(dir.join("marker.tmp"), dir.join("marker")));
    if let Err(e) = written {
        eprintln!("cannot write the marker: {e}");
    }
    std::future::pending::<()>().await;
}

pub fn effects(case: &Case, dir: &Path, process: Process) -> Effects {
    let in_child = |kill| process == Process::Child && case.kill == kill;
    let (hang_in_effect, hang_in_undo) = (
        in_child(Kill::DuringEffect),
        in_child(Kill::DuringCompensation),
    );
    let (d1, d2, d3) = (dir.to_owned(), dir.to_owned(), dir.to_owned());
    // Every policy gets the compensation; the engine runs it only for `Compensate`.
    let effect = FnTool::new(case.policy, move |_args, key| {
        let dir = d1.clone();
        async move {
            record(&dir, process, EFFECT, &key)?;
            if hang_in_effect {
                hang(&dir, EFFECT).await;
            }
            Ok(serde_json::json!({ "placed": key.as_str() }))
        }
    })
    .compensate_with(move |_args, _output, key| {
        let dir = d2.clone();
        async move {
            record(&dir, process, UNDO, &key)?;
            if hang_in_undo {
                hang(&dir, UNDO).await;
            }
            Ok(serde_json::Value::Null)
        }
    });
    let prepare = FnTool::new(EffectPolicy::AtLeastOnce, move |_args, key| {
        let dir = d3.clone();
        async move {
            record(&dir, process, PREPARE, &key)?;
            Ok(serde_json::json!("prepared"))
        }
    });
    Effects::new().tool(EFFECT, effect).tool(PREPARE, prepare)
}

pub fn open_store(dir: &Path) -> SqliteStore {
    SqliteStore::open(dir.join("radkit.sqlite"), Durability::Full).expect("open the SQLite file")
}

pub fn engine(case: &Case, dir: &Path, process: Process, store: SqliteStore) -> EngineBuilder {
    let skill = StepTable::new(
        SkillInfo::new("order", "Order"),
        Order { then: case.then },
        STEPS,
    )
    .expect("a valid step table");
    Engine::builder(store)
        .without_registered_skills()
        .skill(skill)
        .effects(effects(case, dir, process))
}
