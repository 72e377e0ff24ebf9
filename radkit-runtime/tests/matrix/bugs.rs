//! Engine bugs the matrix ran into that are not crash cells: each is a test stating the documented
//! behaviour, which fails today. They run only with `RADKIT_MATRIX_KNOWN_BUGS=1`, like the table's
//! rows marked `.bug(..)`.

use std::time::Duration;

use radkit_runtime::effects::Effects;
use radkit_runtime::flow::EffectPolicy;
use radkit_runtime::model::TaskState;
use radkit_runtime::Engine;

use super::probe::{Probe, EFFECT};
use super::skills::skill;
use super::stores::Site;
use super::{Backend, Form, Point};
use crate::common::user;

/// What goes wrong in [`cancel_right_after_the_task_settled`].
pub const CANCEL_RIGHT_AFTER_SETTLING: &str = "a cancel that arrives while the task's driver is still \
    giving its lease back is lost: `Engine::cancel` marks the finished run, skips the idle path because \
    the run is still registered, and waits for a terminal entry nobody writes";

/// `Engine::cancel` right after `wait_settled` said the task waits for input: the task is canceled
/// and its compensation runs. On Postgres the driver releases its lease after the task settled (a
/// round trip), which opens the window (about half the tries fall into it); memory and SQLite have
/// the same window, only narrower.
pub async fn cancel_right_after_the_task_settled() {
    let site = Site::new(Backend::Postgres).await;
    let probe = Probe::new(Point::AwaitingInput);
    let builder = Engine::builder_arc(site.open().await)
        .without_registered_skills()
        .erased_skill(skill(Form::Ctx, &probe))
        .effects(Effects::new().tool(EFFECT, probe.tool(EffectPolicy::Compensate)));
    let engine = site
        .leases(builder, false)
        .start()
        .await
        .expect("start the engine");
    // A race: each try opens the window once; five make a miss unlikely while the bug exists.
    for attempt in 1..=5 {
        let task_id = engine.send(None, None, user("order 7")).await.unwrap();
        let waiting =
            tokio::time::timeout(Duration::from_secs(20), engine.wait_settled(None, &task_id))
                .await
                .expect("the task settles")
                .expect("wait_settled");
        assert_eq!(waiting.status.state, TaskState::InputRequired);
        let hung = format!("try {attempt}: Engine::cancel did not return within 5 s");
        let canceled = tokio::time::timeout(Duration::from_secs(5), engine.cancel(None, &task_id))
            .await
            .unwrap_or_else(|_| panic!("{hung}: {CANCEL_RIGHT_AFTER_SETTLING}"))
            .expect("cancel");
        assert_eq!(canceled.status.state, TaskState::Canceled);
        assert_eq!(
            probe.undos(),
            attempt,
            "each task's effect is compensated once"
        );
    }
    engine.shutdown().await;
    site.close().await;
}
