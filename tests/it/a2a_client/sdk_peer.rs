//! The official Python SDK's servers as the client's peers (`tests/python/sdk_server.py` for 1.x,
//! `sdk_server_0_3.py` for 0.3): starting one on a free port, and what the client must be able to do
//! with either.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use radkit::client::{A2aClient, ClientAuth};
use radkit::model::TaskState;

use super::{
    artifact_texts, drain, events_of, last_state, message, streamed_texts, task_of, until, within,
    Pick,
};

/// The official Python SDK 1.x's server, killed when dropped.
pub struct SdkServer {
    child: Child,
    /// Its base URL.
    pub url: String,
    /// Its stderr, shown when it stops early.
    log: tempfile::NamedTempFile,
}

impl Drop for SdkServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `script` (in `tests/python/`) under `python`, once it serves its card.
pub async fn start(python: String, script: &str) -> SdkServer {
    start_with(python, script, &[]).await
}

/// [`start`] with `args` after the port.
pub async fn start_with(python: String, script: &str, args: &[&str]) -> SdkServer {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let path = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = Command::new(python)
        .arg(&path)
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("start tests/python/{script}: {e}"));
    let mut server = SdkServer {
        child,
        url: format!("http://127.0.0.1:{port}"),
        log,
    };
    within("the Python SDK server to serve its card", async {
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(server.log.path()).unwrap_or_default();
                panic!(
                    "tests/python/{script} exited ({status}) before serving its card; it needs \
                     a2a-sdk[http-server] and uvicorn (`bash .ci/run` installs them):\n{log}"
                );
            }
            match A2aClient::connect(&server.url, ClientAuth::None).await {
                Ok(_) => return,
                Err(e) if e.is_transient() => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => panic!("the Python SDK server's card: {e}"),
            }
        }
    })
    .await;
    server
}

/// What both SDK peers must do for the client: a non-blocking send followed to its completion, the
/// input-required round trip, cancel (twice), a streamed send, a subscription, an unknown task.
pub async fn drive(client: &A2aClient, pick: Pick) {
    // A non-blocking send of a task that runs about a second, followed with get.
    let sent = task_of(client.send(message("slow work", None), true).await.unwrap());
    assert!(!sent.status.state.is_terminal(), "{pick:?}: {sent:?}");
    let done = until(client, &sent.id, TaskState::Completed).await;
    assert_eq!(artifact_texts(&done), ["Echo: slow work"], "{pick:?}");
    // The input-required round trip.
    let asked = task_of(client.send(message("ask me", None), false).await.unwrap());
    assert_eq!(asked.status.state, TaskState::InputRequired, "{pick:?}");
    let answered = task_of(
        client
            .send(message("forty-two", Some(&asked.id)), true)
            .await
            .unwrap(),
    );
    assert_eq!(answered.id, asked.id);
    let done = until(client, &asked.id, TaskState::Completed).await;
    assert!(
        artifact_texts(&done).contains(&"forty-two".to_owned()),
        "{pick:?}: {done:?}"
    );
    // Cancel a waiting task, then once more.
    let waiting = task_of(
        client
            .send(message("ask again", None), false)
            .await
            .unwrap(),
    );
    let canceled = client.cancel(&waiting.id).await.unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled, "{pick:?}");
    let again = client.cancel(&waiting.id).await.unwrap_err();
    assert!(again.is_not_cancelable(), "{pick:?}: {again}");
    // Streams, and a task the peer does not have.
    let events = events_of(drain(client.send_streaming(message("hello", None))).await);
    assert_eq!(last_state(&events), Some(TaskState::Completed), "{pick:?}");
    assert_eq!(streamed_texts(&events), ["Echo: hello"], "{pick:?}");
    let slow = task_of(client.send(message("slow", None), true).await.unwrap());
    let events = events_of(drain(client.subscribe(&slow.id)).await);
    assert_eq!(last_state(&events), Some(TaskState::Completed), "{pick:?}");
    let e = client.get("no-such-task").await.unwrap_err();
    assert!(e.is_task_not_found(), "{pick:?}: {e}");
}
