//! Wake-ups ([`Leases::wakeups`]): statements that leave work to claim (a task created or answered
//! without a lease, a runnable task's lease given back, a cancel asked) `NOTIFY` [`CHANNEL`] with
//! their schema's name, which Postgres delivers when they commit (once per transaction however many
//! rows); one connection per store `LISTEN`s there and counts what it hears for its schema. Claimers
//! wait on the count between polls, so a worker can poll rarely and still claim new work at once.
//!
//! The listening connection is opened by the first claimer that asks, on its runtime, and opened again
//! (after a pause that grows to [`MAX_PAUSE`]) whenever it breaks; each time it starts listening the
//! count moves, since news sent while nobody listened is lost. It ends when the store is dropped.

use std::sync::Weak;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio_postgres::AsyncMessage;

use super::*;

/// The channel. Notifications are per database, not per schema: the payload names the schema, and
/// a listener counts only its own.
const CHANNEL: &str = "radkit_work";

/// The SQL expression that notifies listeners of this session's schema.
pub(super) const NOTIFY: &str = "pg_notify('radkit_work', COALESCE(current_schema(), ''))";

/// The longest pause between two attempts to open the listening connection.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How often the listening loop looks whether its store is still there.
const STORE_CHECK: Duration = Duration::from_secs(1);

/// A store's listener: the count, and whether its connection was started.
pub(super) struct Listener {
    config: Config,
    url: String,
    count: watch::Sender<u64>,
    started: std::sync::atomic::AtomicBool,
}

impl Listener {
    pub(super) fn new(config: Config, url: String) -> Self {
        Listener {
            config,
            url,
            count: watch::Sender::new(0),
            started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A receiver of the count; the first call on a tokio runtime starts listening there (called
    /// outside one, the receiver hears nothing until a call on one starts it).
    pub(super) fn subscribe(self: &Arc<Self>) -> watch::Receiver<u64> {
        let receiver = self.count.subscribe();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            if !self.started.swap(true, std::sync::atomic::Ordering::SeqCst) {
                runtime.spawn(listen(Arc::downgrade(self)));
            }
        }
        receiver
    }

    fn bump(&self) {
        self.count.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Listen until the store is gone, reconnecting after each break.
async fn listen(listener: Weak<Listener>) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(strong) = listener.upgrade() else {
            return;
        };
        let (config, url) = (strong.config.clone(), strong.url.clone());
        drop(strong);
        match listen_once(&listener, config).await {
            Ok(Gone::Store) => return,
            Ok(Gone::Connection) => {
                tracing::warn!(
                    "postgres listening connection ended; reopening it (claims poll meanwhile)"
                );
                pause = Duration::from_millis(100);
            }
            Err(e) => {
                tracing::warn!(error = %describe(&e), url = %redact(&url), "postgres listening connection failed; retrying (claims poll meanwhile)");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// Why [`listen_once`] returned.
enum Gone {
    Store,
    Connection,
}

/// One connection's life: listen, count what it hears for its schema, until it or the store ends.
async fn listen_once(
    listener: &Weak<Listener>,
    mut config: Config,
) -> Result<Gone, tokio_postgres::Error> {
    if config.get_application_name().is_none() {
        config.application_name("radkit listener");
    }
    let (client, mut connection) = config.connect(NoTls).await?;
    let (heard, mut hear) = mpsc::unbounded_channel();
    // The connection's driver: answers go to `client`, notifications here.
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if heard.send(n.payload().to_owned()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "postgres listening connection broke");
                    return;
                }
            }
        }
    });
    let schema: Option<String> = client
        .query_one("SELECT current_schema()", &[])
        .await?
        .try_get(0)?;
    let schema = schema.unwrap_or_default();
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    // What was sent before LISTEN took effect is lost: whoever waits looks now.
    match listener.upgrade() {
        Some(l) => l.bump(),
        None => return Ok(Gone::Store),
    }
    let gone = loop {
        tokio::select! {
            payload = hear.recv() => match payload {
                Some(payload) if payload == schema => match listener.upgrade() {
                    Some(l) => l.bump(),
                    None => break Gone::Store,
                },
                Some(_) => {}
                None => break Gone::Connection,
            },
            () = tokio::time::sleep(STORE_CHECK) => {
                if listener.strong_count() == 0 {
                    break Gone::Store;
                }
            }
        }
    };
    drop(client);
    driver.abort();
    Ok(gone)
}
