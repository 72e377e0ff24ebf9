//! A real browser for the console's tests: Debian's headless Chromium driven through its WebDriver
//! server, ChromeDriver, with fantoccini. Each [`Browser`] starts its own ChromeDriver on a free
//! loopback port and a browser with a fresh profile; both end when it is dropped. Every wait is
//! bounded ([`PATIENCE`]) and polls what the page shows, never a moment.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};

use super::agent::PATIENCE;
use super::services;

/// A headless Chromium session and the ChromeDriver that runs it.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The driver and the browsers it started are one process group: none outlives the test.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Browser {
    /// A new browser (a window of 1280×900), its driver started and answering.
    pub async fn start() -> Browser {
        let port = free_port();
        let mut driver = Command::new(services::chromedriver())
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().expect("a browser profile");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": services::chromium(),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    if let Ok(Some(status)) = driver.try_wait() {
                        panic!("chromedriver exited with {status} before a session started: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no browser session within {PATIENCE:?}: {e}"),
            }
        };
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Open `url` and wait until the page has loaded.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.expect("open the page");
    }

    /// What `script` (a function body that `return`s) gives, once it is not null, false or empty;
    /// the test fails with `what` after [`PATIENCE`].
    pub async fn until(&self, what: &str, script: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut last;
        loop {
            match self.client.execute(script, vec![]).await {
                Ok(value)
                    if !value.is_null()
                        && value != Value::Bool(false)
                        && value != Value::String(String::new()) =>
                {
                    return value;
                }
                Ok(value) => last = value,
                Err(e) => last = Value::String(format!("script error: {e}")),
            }
            if tokio::time::Instant::now() >= deadline {
                let url = self.client.current_url().await.map(|u| u.to_string());
                panic!("waited {PATIENCE:?} for {what} on {url:?}; the script last gave {last}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The text of the first element `selector` matches, once there is one.
    pub async fn text_of(&self, selector: &str) -> String {
        let script = format!(
            "return document.querySelector({})?.textContent ?? null;",
            json!(selector)
        );
        self.until(&format!("an element `{selector}`"), &script)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Run `script` for its effect (clicks, typing), failing the test if it throws.
    pub async fn run(&self, script: &str) {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("the script failed: {e}\n{script}"));
    }

    /// Save a screenshot of the page as `target/console-screenshots/<name>.png`; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots");
        std::fs::create_dir_all(&dir).expect("the screenshot directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write the screenshot");
        path
    }
}
