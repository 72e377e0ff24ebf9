//! `radkit pass`: one invocation of the serverless host ([`crate::serverless::Passes`]): one event,
//! one pass over the task, in a process that lives for that pass alone. What a function platform
//! does per trigger (an HTTP request, a queue message, a schedule), on the command line: a test
//! runs a task by invoking it once per event, killing some invocations at random points.
//! Prints one JSON line per pass: the task, how the pass left it, the appends and effects it made.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::Caller;
use crate::model::Message;
use crate::serverless::{Event, Passed, Passes, Rest};
use crate::store::Store;

/// Arguments of `radkit pass`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    event: EventArg,
    /// Directory of the SQLite file (`radkit.sqlite`), as for `radkit serve`.
    #[arg(long, global = true, default_value = "data", env = "RADKIT_DATA_DIR")]
    data_dir: PathBuf,
    /// Store URL (`sqlite://<path>` or `postgres://…`), as for `radkit serve`.
    #[arg(long, global = true, env = "RADKIT_STORE")]
    store: Option<String>,
    /// The invocation's time: no effect starts after it, and what is left stays in the journal.
    #[arg(long, global = true, default_value_t = 30_000)]
    budget_ms: u64,
}

#[derive(clap::Subcommand)]
enum EventArg {
    /// A user's message: starts a task, or (with `--task`) answers the task waiting for input.
    Message {
        /// The message's text.
        #[arg(long)]
        text: String,
        /// The task it answers.
        #[arg(long)]
        task: Option<String>,
        /// Its `messageId` (the same id sent again finds the task it started).
        #[arg(long)]
        message_id: Option<String>,
        /// The skill a new task runs.
        #[arg(long)]
        skill: Option<String>,
    },
    /// Run what a task has to do now (a due timer, work an earlier pass left).
    Wake {
        /// The task.
        #[arg(long)]
        task: String,
    },
    /// Cancel a task.
    Cancel {
        /// The task.
        #[arg(long)]
        task: String,
    },
    /// Run every task with work now (a scheduled trigger's pass): due timers, runnable tasks.
    Sweep {
        /// Passes at most.
        #[arg(long, default_value_t = 64)]
        limit: usize,
    },
}

fn line(passed: &Passed) -> serde_json::Value {
    let mut line = serde_json::json!({
        "task_id": passed.task_id,
        "appends": passed.appends,
        "effects": passed.effects,
    });
    let rest = match &passed.rest {
        Rest::Ended(state) => serde_json::json!({"rest": "ended", "state": state.as_str()}),
        Rest::Waiting { input, wake_at_ms } => {
            serde_json::json!({"rest": "waiting", "input": input, "wake_at_ms": wake_at_ms})
        }
        Rest::Unfinished => serde_json::json!({"rest": "unfinished"}),
        Rest::Busy => serde_json::json!({"rest": "busy"}),
    };
    if let (Some(obj), serde_json::Value::Object(more)) = (line.as_object_mut(), rest) {
        obj.extend(more);
    }
    line
}

/// Run `pass`.
pub async fn run(app: &super::App, args: Args) -> anyhow::Result<()> {
    let store: Arc<dyn Store> = match args.store.as_deref() {
        #[cfg(feature = "postgres")]
        Some(url) if super::is_postgres(url) => {
            Arc::new(crate::store::PostgresStore::connect(url).await?)
        }
        other => Arc::new(super::serve::open_sqlite(other, &args.data_dir, "full")?),
    };
    let passes = Passes::from_builder(app.builder(store))?;
    let deadline = Instant::now() + Duration::from_millis(args.budget_ms);
    let passed = match args.event {
        EventArg::Sweep { limit } => passes.sweep(deadline, limit).await?,
        EventArg::Message {
            text,
            task,
            message_id,
            skill,
        } => {
            let mut message = Message::user_text(text);
            message.task_id = task;
            if let Some(id) = message_id {
                message.message_id = id;
            }
            let event = Event::Message {
                caller: Caller::Operator,
                message,
                skill,
                mode: None,
            };
            vec![passes.run(event, deadline).await?]
        }
        EventArg::Wake { task } => vec![passes.run(Event::Wake { task_id: task }, deadline).await?],
        EventArg::Cancel { task } => {
            let event = Event::Cancel {
                caller: Caller::Operator,
                task_id: task,
            };
            vec![passes.run(event, deadline).await?]
        }
    };
    for passed in &passed {
        println!("{}", line(passed));
    }
    Ok(())
}
