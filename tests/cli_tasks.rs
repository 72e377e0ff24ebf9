//! `radkit tasks list|show` read a SQLite file and print tasks and a journal timeline.

use std::process::Command;

use radkit::model::Message;
use radkit::store::{Durability, SqliteStore};

#[tokio::test]
async fn tasks_list_and_show_print_the_journal_as_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let store = SqliteStore::open(dir.path().join("radkit.sqlite"), Durability::Full).unwrap();
        let engine = radkit::demo::engine_builder(store).start().await.unwrap();
        let id = engine
            .send(None, None, Message::user_text("Durable agents"))
            .await
            .unwrap();
        engine.wait_settled(None, &id).await.unwrap();
        id
    };
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_radkit"))
            .arg("tasks")
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let list = run(&["list"]);
    assert!(
        list.contains(&id) && list.contains("research_loop_v2") && list.contains("input-required"),
        "{list}"
    );
    let show = run(&["show", &id]);
    assert!(
        show.contains("step `research` (visit 1) on user_message"),
        "{show}"
    );
    assert!(show.contains("issue llm `critic` [AtLeastOnce]"), "{show}");
    assert!(
        show.contains("awaiting `human_note`: \"Critic needs human input.\""),
        "{show}"
    );
    let missing = Command::new(env!("CARGO_BIN_EXE_radkit"))
        .args(["tasks", "--data-dir"])
        .arg(dir.path())
        .args(["show", "nope"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).starts_with("error: no task nope"));
}
