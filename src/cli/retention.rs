//! `--retain-journals` and `--retain-tasks`, shared by `radkit serve`, `radkit worker`, `radkit
//! lambda sweep` and `radkit tasks prune`: how long finished tasks are kept (`engine::Retention`).

use std::time::Duration;

use crate::engine::{EngineBuilder, Retention};

/// How long finished tasks are kept. Both count from when a task finished; by default, forever.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RetentionArgs {
    /// How long a finished task keeps its whole journal (e.g. `1h`, `7d`); then only its first
    /// and last appends are kept, beside its view (status, history, artifacts), which `tasks/get`
    /// and the console go on showing.
    #[arg(long, env = "RADKIT_RETAIN_JOURNALS", value_name = "DURATION", value_parser = duration)]
    pub retain_journals: Option<Duration>,
    /// How long a finished task is kept at all (e.g. `30d`); then it is deleted and `tasks/get`
    /// answers that it does not exist.
    #[arg(long, env = "RADKIT_RETAIN_TASKS", value_name = "DURATION", value_parser = duration)]
    pub retain_tasks: Option<Duration>,
}

/// A duration as `humantime` reads it: `90s`, `15min`, `12h`, `7d`, `1h 30m`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration like `90s`, `12h` or `7d`: {e}"))
}

impl RetentionArgs {
    /// The retention these arguments ask for.
    pub fn retention(&self) -> Retention {
        Retention {
            journal: self.retain_journals,
            task: self.retain_tasks,
        }
    }

    /// Apply to an engine builder.
    pub fn apply(&self, builder: EngineBuilder) -> EngineBuilder {
        builder.retention(self.retention())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_period_reads_as_a_human_writes_it_and_anything_else_is_a_clear_error() {
        assert_eq!(duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        let e = duration("soon").unwrap_err();
        assert!(e.contains("`soon` is not a duration like"), "{e}");
        assert!(duration("7").is_err(), "a number without a unit is refused");
    }
}
