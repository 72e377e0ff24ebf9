//! Agents that call agents, durably: a `coordinator` sends your question to two specialist agents
//! at once — an `optimist` that answers at once and a `pessimist` that thinks it over for a few
//! seconds — asks you to choose when they disagree, and completes with both answers. Two
//! processes, each on its own SQLite file; one binary serves either role:
//!
//! ```sh
//! cargo run --example delegate -- specialists --port 9101
//! cargo run --example delegate -- coordinator --port 9100 \
//!     --agent optimist=http://127.0.0.1:9101 --agent pessimist=http://127.0.0.1:9101
//! ```
//!
//! `delegate <role> [command] [options]` is the `radkit` command line over that role's skills:
//! the command defaults to `serve`, `--port N` stands for `--addr 127.0.0.1:N`, and `serve` and
//! `tasks` use `data/<role>/` unless `--data-dir` or `--store` says otherwise (`delegate
//! coordinator tasks show <id>` prints a coordinator task's journal, `delegate coordinator graph
//! coordinator` draws its steps). `specialists` also takes `--think <seconds>`: how long the
//! pessimist thinks (default 5).
//!
//! Kill the coordinator (`kill -9`) while the pessimist thinks and start it again: it resumes both
//! remote tasks by the ids it journaled, creates no second one, and completes. Kill the specialists
//! instead and restart them: the coordinator, still running, gets its answer. `docs/agent-calls.md`,
//! "The delegate example", walks through it.

#[path = "delegate/coordinator.rs"]
pub(crate) mod coordinator;
#[path = "delegate/specialists.rs"]
pub(crate) mod specialists;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use radkit::cli::App;

/// How long the pessimist thinks unless `--think` says otherwise.
const THINK: Duration = Duration::from_secs(5);

const USAGE: &str = "usage: delegate <coordinator|specialists> [serve|tasks|graph|worker] [--port N] [--think SECONDS] [options of the radkit command]";

fn main() -> ExitCode {
    run(std::env::args_os().collect())
}

/// Run `delegate <role> ...` (the first argument is the program's name).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let mut args: Vec<String> = match args.into_iter().map(OsString::into_string).collect() {
        Ok(args) => args,
        Err(bad) => {
            eprintln!("error: the argument {bad:?} is not UTF-8\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let program = if args.is_empty() {
        "delegate".to_owned()
    } else {
        args.remove(0)
    };
    let role = if args.is_empty() {
        String::new()
    } else {
        args.remove(0)
    };
    let think = match take_value(&mut args, "--think") {
        None => THINK,
        Some(secs) if role == "specialists" => match secs.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
            _ => {
                eprintln!("error: --think takes seconds, like `--think 5`; not `{secs}`");
                return ExitCode::from(2);
            }
        },
        Some(_) => {
            eprintln!("error: --think is the pessimist's; give it to `specialists`");
            return ExitCode::from(2);
        }
    };
    let app = match role.as_str() {
        "coordinator" => App::new()
            .name("coordinator")
            .description("Asks an optimist and a pessimist at once; when they disagree, asks you.")
            .engine(|builder| builder.only_skills(["coordinator"])),
        "specialists" => App::new()
            .name("specialists")
            .description("An optimist that answers at once and a pessimist that thinks it over.")
            .engine(move |builder| {
                builder
                    .without_registered_skills()
                    .skill(specialists::Optimist)
                    .skill(specialists::Pessimist { think })
            }),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        "" => {
            eprintln!("error: which role? coordinator or specialists\n{USAGE}");
            return ExitCode::from(2);
        }
        other => {
            eprintln!("error: unknown role `{other}`\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.first().is_none_or(|a| a.starts_with('-')) {
        args.insert(0, "serve".to_owned());
    }
    if let Some(port) = take_value(&mut args, "--port") {
        args.extend(["--addr".to_owned(), format!("127.0.0.1:{port}")]);
    }
    let own_store = args
        .iter()
        .any(|a| a.starts_with("--data-dir") || a.starts_with("--store"));
    if matches!(args[0].as_str(), "serve" | "tasks") && !own_store {
        args.extend(["--data-dir".to_owned(), format!("data/{role}")]);
    }
    args.insert(0, program);
    app.main_from(args)
}

/// Remove `--name value` (or `--name=value`) from `args` and return the value.
fn take_value(args: &mut Vec<String>, name: &str) -> Option<String> {
    let at = args
        .iter()
        .position(|a| a == name || a.starts_with(&format!("{name}=")))?;
    let arg = args.remove(at);
    match arg.split_once('=') {
        Some((_, value)) => Some(value.to_owned()),
        None if at < args.len() => Some(args.remove(at)),
        None => Some(String::new()),
    }
}
