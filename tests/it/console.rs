//! The web console at `/console`: sign-in and what each principal sees, the CSRF defence of every
//! change, the list's filters and pages, the embedded files, and in a real headless Chromium
//! (ChromeDriver, fantoccini): the list following a new task live, a task page following its task to
//! completion, an answer and an approval given from the page, and a principal kept from another's
//! task. The browser tests save screenshots of the main pages under `target/console-screenshots/`.

use std::sync::Arc;

use radkit::engine::Engine;
use radkit::flow::{ApprovalRequest, EffectPolicy};
use radkit::prelude::*;
use radkit::store::SqliteStore;
use radkit::tools::FnTool;
use serde_json::{json, Value};

use crate::support::agent::{client, start, tokens, Agent};
use crate::support::browser::Browser;
use crate::support::common::{rpc, user};

/// Asks a name and greets it, with an artifact.
#[derive(Default)]
struct Ask;

#[flow_skill(
    id = "ask",
    name = "Ask",
    description = "Asks for a name.",
    register = false
)]
impl Ask {
    #[step(start)]
    async fn start(&self, _ctx: &StepCtx, _msg: Content) -> StepResult {
        await_input!(slot = "name", message = "What is your name?")
    }

    #[step(resume_from = "start")]
    async fn named(&self, ctx: &StepCtx, name: Content) -> StepResult {
        let greeting = format!("Hello, {}!", name.joined_texts());
        ctx.complete(
            greeting.clone(),
            vec![Artifact::from_text("greeting.txt", greeting)],
        )
    }
}

/// Asks a human to approve a refund, then does it or fails.
#[derive(Default)]
struct Gate;

#[flow_skill(
    id = "gate",
    name = "Gate",
    description = "Refunds with approval.",
    register = false
)]
impl Gate {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, _msg: Content) -> StepResult {
        let request = ApprovalRequest::new(
            "refund_card",
            json!({ "customer": "ada", "cents": 12500 }),
            "refunds over 100 need a human",
        );
        let approval = ctx.approve("refund", request).await?;
        match approval.approved() {
            true => ctx.complete("refunded", vec![]),
            false => ctx.fail("the approver rejected it"),
        }
    }
}

/// Works until the test releases its tool.
#[derive(Default)]
struct Slow;

#[flow_skill(
    id = "slow",
    name = "Slow",
    description = "Waits for a release.",
    register = false
)]
impl Slow {
    #[step(start)]
    async fn start(&self, ctx: &StepCtx, _msg: Content) -> StepResult {
        let word: String = ctx.tool("release").call(json!({})).await?;
        ctx.complete(format!("released: {word}"), vec![])
    }
}

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
const ROOT: &str = "root-token";

/// An agent serving the three skills on SQLite, with tokens for alice, bob and root (an admin of the
/// console) when `auth`; and the semaphore that releases `slow`.
async fn agent(dir: &std::path::Path, auth: bool) -> (Agent, Arc<tokio::sync::Semaphore>) {
    let store = SqliteStore::open_default(dir.join("console.db")).expect("the store");
    agent_on(Engine::builder(store), auth).await
}

/// [`agent`] on the store `builder` has.
async fn agent_on(
    builder: radkit::engine::EngineBuilder,
    auth: bool,
) -> (Agent, Arc<tokio::sync::Semaphore>) {
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let gate = release.clone();
    let tool = FnTool::new(EffectPolicy::Idempotent, move |_, _| {
        let gate = gate.clone();
        async move {
            gate.acquire().await.expect("the release").forget();
            Ok(json!("go"))
        }
    });
    let builder = builder
        .without_registered_skills()
        .skill(Ask)
        .skill(Gate)
        .skill(Slow)
        .default_skill("ask")
        .effects(radkit::effects::Effects::new().tool("release", tool));
    let agent = start(builder, |mut config| {
        if auth {
            config.tokens = tokens(&[(ALICE, "alice"), (BOB, "bob"), (ROOT, "root")]);
            config.console_admins = vec!["root".to_owned()];
        }
        config
    })
    .await;
    (agent, release)
}

/// Start a task of `skill` as `token`'s principal (not waiting); its id.
async fn create(agent: &Agent, token: Option<&str>, skill: &str) -> String {
    let mut message = user("start");
    message["metadata"] = json!({ "skillId": skill });
    let answer = rpc(
        &client(),
        &agent.url,
        token,
        "message/send",
        json!({ "message": message, "configuration": { "blocking": false } }),
    )
    .await;
    answer["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {answer}"))
        .to_owned()
}

/// A browser-like client of the console: its session cookie (when signed in) on every request, no
/// redirect followed.
#[derive(Clone)]
struct Session {
    http: reqwest::Client,
    cookie: Option<String>,
}

impl Session {
    fn get(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.with_cookie(self.http.get(url))
    }

    /// The body of a `GET` of `url`, whatever its status.
    async fn text(&self, url: impl reqwest::IntoUrl) -> String {
        self.get(url).send().await.unwrap().text().await.unwrap()
    }

    fn post(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.with_cookie(self.http.post(url))
    }

    fn with_cookie(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.cookie {
            Some(cookie) => request.header("cookie", cookie),
            None => request,
        }
    }
}

/// A session, signed in as `token`'s principal when given.
async fn session(agent: &Agent, token: Option<&str>) -> Session {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(crate::support::agent::PATIENCE)
        .build()
        .expect("a client");
    let mut cookie = None;
    if let Some(token) = token {
        let answer = http
            .post(format!("{}/console/login", agent.url))
            .form(&[("token", token)])
            .send()
            .await
            .expect("sign in");
        assert_eq!(answer.status(), 303, "signed in and sent to the list");
        let set = answer.headers()["set-cookie"].to_str().unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        cookie = Some(set.split(';').next().unwrap().to_owned());
    }
    Session { http, cookie }
}

/// The CSRF token of a console page.
async fn csrf(http: &Session, agent: &Agent) -> String {
    let page = http.text(format!("{}/console", agent.url)).await;
    let needle = "name=\"radkit-csrf\" content=\"";
    let at = page.find(needle).expect("the token") + needle.len();
    page[at..page[at..].find('"').unwrap() + at].to_owned()
}

/// The task's state once it is `state` (as `token`'s principal), failing after the patience.
async fn wait_state(agent: &Agent, task: &str, token: Option<&str>, state: &str) -> String {
    let deadline = tokio::time::Instant::now() + crate::support::agent::PATIENCE;
    loop {
        let answer = rpc(
            &client(),
            &agent.url,
            token,
            "tasks/get",
            json!({ "id": task }),
        )
        .await;
        let now = answer["result"]["status"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        if now == state {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task} is {now}, not {state}: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[test(multi_thread)]
async fn the_console_asks_for_a_token_and_shows_a_principal_only_its_own_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, _) = agent(dir.path(), true).await;
    let alices = create(&agent, Some(ALICE), "ask").await;
    let bobs = create(&agent, Some(BOB), "ask").await;

    let anonymous = session(&agent, None).await;
    let answer = anonymous
        .get(format!("{}/console", agent.url))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303);
    assert_eq!(answer.headers()["location"], "/console/login");
    let answer = anonymous
        .get(format!("{}/console/tasks/{alices}/fragment", agent.url))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401, "no session, no task");
    let wrong = anonymous
        .post(format!("{}/console/login", agent.url))
        .form(&[("token", "guess")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong.headers().get("set-cookie").is_none(),
        "no session for a wrong token"
    );

    let alice = session(&agent, Some(ALICE)).await;
    let list = alice.text(format!("{}/console", agent.url)).await;
    assert!(list.contains(&alices), "alice sees her task");
    assert!(!list.contains(&bobs), "alice does not see bob's task");
    let page = alice
        .get(format!("{}/console/tasks/{bobs}", agent.url))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404, "bob's task is not found for alice");
    let journal = alice
        .get(format!("{}/console/tasks/{bobs}/journal.json", agent.url))
        .send()
        .await
        .unwrap();
    assert_eq!(journal.status(), 404);
    // Asking for bob's tasks by principal changes nothing for alice.
    let list = alice
        .text(format!("{}/console?principal=bob", agent.url))
        .await;
    assert!(!list.contains(&bobs));

    let root = session(&agent, Some(ROOT)).await;
    let list = root.text(format!("{}/console", agent.url)).await;
    assert!(
        list.contains(&alices) && list.contains(&bobs),
        "an admin sees every task"
    );
    let list = root
        .text(format!("{}/console?principal=bob", agent.url))
        .await;
    assert!(
        list.contains(&bobs) && !list.contains(&alices),
        "and filters by principal"
    );
}

#[test(multi_thread)]
async fn a_change_without_the_csrf_token_or_from_another_origin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, _) = agent(dir.path(), true).await;
    let task = create(&agent, Some(ALICE), "ask").await;
    let alice = session(&agent, Some(ALICE)).await;
    let token = csrf(&alice, &agent).await;
    let url = format!("{}/console/tasks/{task}/answer", agent.url);
    let body = json!({ "text": "Ada" });

    let refused = alice.post(&url).json(&body).send().await.unwrap();
    assert_eq!(refused.status(), 403, "no CSRF token");
    let refused = alice
        .post(&url)
        .header("x-radkit-csrf", "forged")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403, "a wrong CSRF token");
    let refused = alice
        .post(&url)
        .header("x-radkit-csrf", &token)
        .header("origin", "http://evil.example")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403, "another origin");
    let bob = session(&agent, Some(BOB)).await;
    let bobs_token = csrf(&bob, &agent).await;
    let refused = bob
        .post(&url)
        .header("x-radkit-csrf", &bobs_token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404, "bob cannot answer alice's task");
    let refused = alice
        .post(&url)
        .header("x-radkit-csrf", &token)
        .header("content-type", "application/json")
        .body("{\"text\": [[[[")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400, "malformed JSON is a clear error");
    let state = wait_state(&agent, &task, Some(ALICE), "input-required").await;
    assert_eq!(state, "input-required", "nothing refused reached the task");

    let answered = alice
        .post(&url)
        .header("x-radkit-csrf", &token)
        .header("origin", &agent.url)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200, "{}", answered.text().await.unwrap());
    let state = wait_state(&agent, &task, Some(ALICE), "completed").await;
    assert_eq!(state, "completed");
    let cancel = alice
        .post(format!("{}/console/tasks/{task}/cancel", agent.url))
        .header("x-radkit-csrf", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 409, "an ended task cannot be canceled");
}

#[test(multi_thread)]
async fn the_list_filters_by_state_skill_and_id_prefix_counts_states_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, _) = agent(dir.path(), false).await;
    let mut asks = Vec::new();
    for _ in 0..55 {
        asks.push(create(&agent, None, "ask").await);
    }
    let gate = create(&agent, None, "gate").await;
    for task in asks.iter().chain([&gate]) {
        wait_state(&agent, task, None, "input-required").await;
    }
    let http = session(&agent, None).await;
    let get = |query: String| {
        let http = http.clone();
        let url = format!("{}/console{query}", agent.url);
        async move {
            let answer = http.get(url).send().await.unwrap();
            (answer.status().as_u16(), answer.text().await.unwrap())
        }
    };
    let (status, first) = get(String::new()).await;
    assert_eq!(status, 200);
    assert!(first.contains("data-testid=\"matching\">56<"), "the total");
    assert!(
        first.contains("data-count=\"input-required\">56<"),
        "the count per state"
    );
    assert_eq!(first.matches("data-task=").count(), 50, "a page of 50");
    let next = first
        .split("rel=\"next\" href=\"")
        .nth(1)
        .expect("a next page");
    let next = next[..next.find('"').unwrap()].replace("&amp;", "&");
    let (_, second) = get(next.trim_start_matches("/console").to_owned()).await;
    assert_eq!(
        second.matches("data-task=").count(),
        6,
        "the rest on the second page"
    );
    let (_, gates) = get("?skill=gate".to_owned()).await;
    assert!(gates.contains(&gate) && gates.contains("data-testid=\"matching\">1<"));
    let (_, prefixed) = get(format!("?q={}", &asks[3][..8])).await;
    assert!(prefixed.contains(&asks[3]));
    let (_, completed) = get("?state=completed".to_owned()).await;
    assert!(completed.contains("data-testid=\"matching\">0<"));
    for bad in ["?state=sleeping", "?since=yesterday", "?after=%25%25"] {
        let (status, page) = get(bad.to_owned()).await;
        assert_eq!(status, 400, "{bad}");
        assert!(
            page.contains("role=\"alert\""),
            "{bad}: the page says what is wrong"
        );
    }
}

#[test(multi_thread, needs = Postgres)]
async fn on_postgres_the_timeline_shows_each_lease_with_its_owner_and_token() {
    let (_, url) = radkit::store::PostgresStore::create_schema(
        &crate::support::services::postgres_url(),
        "radkit_console",
    )
    .await
    .expect("a test schema");
    let store = radkit::store::PostgresStore::connect(&url)
        .await
        .expect("the store");
    let (agent, _) = agent_on(Engine::builder(store).worker_id("console-worker"), false).await;
    let task = create(&agent, None, "ask").await;
    wait_state(&agent, &task, None, "input-required").await;
    let http = session(&agent, None).await;
    // The run gives its lease back once the question is committed, a moment after the task reads
    // input-required: read the page until the release is on it (bounded).
    let released = "lease given back by <code>console-worker</code>";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let page = loop {
        let page = http
            .text(format!("{}/console/tasks/{task}", agent.url))
            .await;
        if page.contains(released) || std::time::Instant::now() > deadline {
            break page;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let timeline = &page[page.find("id=\"timeline\"").expect("the timeline")..];
    // The engine created the task leased, ran it until it asked, and gave the lease back.
    let taken = timeline
        .find("lease taken by <code class=\"owner\">console-worker</code> · fencing token <code>1</code>")
        .unwrap_or_else(|| panic!("the creation lease in {timeline}"));
    let asked = timeline
        .find("data-kind=\"awaiting_input\"")
        .unwrap_or_else(|| panic!("the question in {timeline}"));
    let given = timeline
        .find("lease given back by <code>console-worker</code> · fencing token <code>1</code>")
        .unwrap_or_else(|| panic!("the release in {timeline}"));
    // Entries and lease changes of the same millisecond may come in either order: the release
    // may share the question's.
    assert!(taken < asked && taken < given, "in time order: {timeline}");
    assert!(
        page.contains("data-testid=\"lease\""),
        "the current holder in the header"
    );
}

#[test(multi_thread)]
async fn the_console_files_are_embedded_and_mermaid_is_served_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, _) = agent(dir.path(), false).await;
    let http = session(&agent, None).await;
    let skills = http
        .get(format!("{}/console/skills", agent.url))
        .send()
        .await
        .unwrap();
    let policy = skills.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"),
        "{policy}"
    );
    assert_eq!(skills.headers()["x-frame-options"], "DENY");
    let skills = skills.text().await.unwrap();
    assert!(
        skills.contains("flowchart TD"),
        "each skill's graph as Mermaid text"
    );
    let mermaid = skills
        .split("data-mermaid=\"")
        .nth(1)
        .expect("the graph script's URL");
    let mermaid = mermaid[..mermaid.find('"').unwrap()].replace("&amp;", "&");
    // reqwest here decompresses nothing: the body is the embedded gzip.
    let raw = http
        .get(format!("{}{mermaid}", agent.url))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.headers()["content-encoding"], "gzip");
    assert!(raw.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("immutable"));
    let refused = http
        .get(format!("{}{mermaid}", agent.url))
        .header("accept-encoding", "identity")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 406);
    let missing = http
        .get(format!("{}/console/assets/..%2fCargo.toml", agent.url))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[test(multi_thread, needs = Browser)]
async fn a_browser_follows_a_new_task_in_the_list_and_its_page_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, release) = agent(dir.path(), false).await;
    // Tasks in other states beside it, for the list's screenshot.
    for skill in ["ask", "ask", "gate"] {
        let task = create(&agent, None, skill).await;
        wait_state(&agent, &task, None, "input-required").await;
    }
    let browser = Browser::start().await;
    browser.open(&format!("{}/console", agent.url)).await;
    browser.text_of("table.tasks").await;
    // Whether or not the page's stream is open yet: the list also reads the store every few seconds.
    let task = create(&agent, None, "slow").await;
    let row = format!("#task-{task}");
    browser
        .until(
            "the new task's row, without a reload",
            &format!(
                "return document.querySelector({})?.querySelector('[data-state]')?.dataset.state;",
                json!(row)
            ),
        )
        .await;
    browser
        .until(
            "the counts to follow",
            "return document.querySelector('[data-testid=matching]')?.textContent === '4';",
        )
        .await;
    browser.screenshot("tasks").await;
    browser
        .open(&format!("{}/console/tasks/{task}", agent.url))
        .await;
    let state = browser.text_of("h1 [data-state]").await;
    assert_eq!(state, "working");
    release.add_permits(1);
    browser
        .until(
            "the task page to show it completed, without a reload",
            "return document.querySelector('h1 [data-state]')?.dataset.state === 'completed';",
        )
        .await;
    let timeline = browser.text_of("#timeline").await;
    assert!(timeline.contains("tool release"), "{timeline}");
    assert!(timeline.contains("receipt of"), "{timeline}");
    browser
        .until(
            "the list to show the task completed",
            &format!(
                "return (async () => (await (await fetch('/console?state=completed')).text()).includes({}))();",
                json!(task)
            ),
        )
        .await;
    browser
        .run("document.getElementById('journal').scrollIntoView();")
        .await;
    browser.screenshot("task").await;
    browser.open(&format!("{}/console/skills", agent.url)).await;
    let drawn = browser
        .until(
            "the step graphs drawn by Mermaid",
            "return document.body.dataset.graphs;",
        )
        .await;
    assert_eq!(
        drawn, "drawn",
        "under the console's content security policy"
    );
    let graphs = browser
        .until(
            "an SVG per skill",
            "return document.querySelectorAll('pre.mermaid svg').length;",
        )
        .await;
    assert_eq!(graphs, 3, "one graph per skill");
    browser.screenshot("skills").await;
}

#[test(multi_thread, needs = Browser)]
async fn a_browser_answers_a_question_and_approves_a_gate_from_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, _) = agent(dir.path(), true).await;
    let asked = create(&agent, Some(ALICE), "ask").await;
    let gated = create(&agent, Some(ALICE), "gate").await;
    wait_state(&agent, &asked, Some(ALICE), "input-required").await;
    wait_state(&agent, &gated, Some(ALICE), "input-required").await;
    let browser = Browser::start().await;
    browser.open(&format!("{}/console", agent.url)).await;
    browser.text_of("form.login").await;
    browser
        .run(&format!(
            "document.querySelector('[data-testid=token]').value = {}; document.querySelector('form.login').submit();",
            json!(ALICE)
        ))
        .await;
    browser
        .until(
            "the list after signing in",
            "return document.querySelector('[data-testid=principal]')?.textContent === 'alice';",
        )
        .await;

    browser
        .open(&format!("{}/console/tasks/{asked}", agent.url))
        .await;
    assert_eq!(
        browser.text_of("[data-testid=question]").await,
        "What is your name?"
    );
    browser
        .run("document.querySelector('[data-testid=answer-text]').value = 'Ada'; document.querySelector('[data-testid=answer]').click();")
        .await;
    browser
        .until(
            "the answered task to complete on its page",
            "return document.querySelector('h1 [data-state]')?.dataset.state === 'completed';",
        )
        .await;
    let artifacts = browser.text_of("#artifacts").await;
    assert!(artifacts.contains("Hello, Ada!"), "{artifacts}");

    browser
        .open(&format!("{}/console/tasks/{gated}", agent.url))
        .await;
    assert_eq!(
        browser.text_of("[data-testid=approval-tool]").await,
        "refund_card"
    );
    let proposed = browser.text_of("[data-testid=approval] pre.json").await;
    let proposed: Value = serde_json::from_str(&proposed).expect("the arguments as JSON");
    assert_eq!(
        proposed,
        json!({ "customer": "ada", "cents": 12500 }),
        "the exact action"
    );
    browser.screenshot("approval").await;
    browser
        .run("document.querySelector('[data-testid=approve]').click();")
        .await;
    browser
        .until(
            "the approved task to complete",
            "return document.querySelector('h1 [data-state]')?.dataset.state === 'completed';",
        )
        .await;
    let task = rpc(
        &client(),
        &agent.url,
        Some(ALICE),
        "tasks/get",
        json!({ "id": gated }),
    )
    .await;
    assert_eq!(task["result"]["status"]["state"], "completed", "{task}");
}

#[test(multi_thread, needs = Browser)]
async fn a_principal_in_the_browser_cannot_see_another_principals_task() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, _) = agent(dir.path(), true).await;
    let alices = create(&agent, Some(ALICE), "ask").await;
    let bobs = create(&agent, Some(BOB), "ask").await;
    let browser = Browser::start().await;
    browser.open(&format!("{}/console/login", agent.url)).await;
    browser
        .run(&format!(
            "document.querySelector('[data-testid=token]').value = {}; document.querySelector('form.login').submit();",
            json!(BOB)
        ))
        .await;
    browser
        .until(
            "bob's list",
            &format!(
                "return document.querySelector({}) !== null;",
                json!(format!("#task-{bobs}"))
            ),
        )
        .await;
    let list = browser.text_of("table.tasks").await;
    assert!(!list.contains(&alices), "alice's task is not in bob's list");
    browser
        .open(&format!("{}/console/tasks/{alices}", agent.url))
        .await;
    let notice = browser.text_of("p.notice").await;
    assert!(notice.contains("No task"), "{notice}");
}
