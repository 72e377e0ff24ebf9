//! The README is followed as a newcomer would: its `main.rs` is `examples/hello.rs`, the excerpts of
//! the README and of the pages of `docs/` are lines of compiled files, and its hello session —
//! `serve`, the two `curl` calls, `tasks show` with a prefix, `graph` — runs as printed against the
//! built example.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The pages that may hold excerpts: the README and the Markdown files of `docs/` (not those of its
/// subdirectories, the vendored specifications), repository-relative.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "md"))
        .map(|path| path.strip_prefix(root()).unwrap().to_owned())
        .collect();
    pages.sort();
    pages.insert(0, PathBuf::from("README.md"));
    pages
}

/// The fenced blocks of `text`: (the line before the fence, the info string, the body).
fn blocks(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    let mut previous = String::new();
    while let Some(line) = lines.next() {
        if let Some(info) = line.strip_prefix("```") {
            if info.is_empty() {
                // A closing fence we did not open: not expected in a well-formed file.
                previous = line.to_owned();
                continue;
            }
            let mut body = String::new();
            for inner in lines.by_ref() {
                if inner == "```" {
                    break;
                }
                body.push_str(inner);
                body.push('\n');
            }
            out.push((previous.clone(), info.to_owned(), body));
        }
        previous = line.to_owned();
    }
    out
}

#[test]
fn the_readme_main_rs_is_the_hello_example() {
    let blocks = blocks(&readme());
    let (_, _, main_rs) = blocks
        .iter()
        .find(|(before, info, _)| before.starts_with("`src/main.rs`") && info.starts_with("rust"))
        .expect("a rust block after `src/main.rs`");
    let example = std::fs::read_to_string(root().join("examples/hello.rs")).unwrap();
    assert_eq!(
        main_rs, &example,
        "README's src/main.rs and examples/hello.rs differ"
    );
    let (_, _, toml) = blocks
        .iter()
        .find(|(before, info, _)| before.starts_with("`Cargo.toml`") && info == "toml")
        .expect("a toml block after `Cargo.toml`");
    assert!(toml.contains("radkit = { path = \"../radkit\" }"), "{toml}");
}

#[test]
fn readme_excerpts_are_lines_of_their_compiled_files_in_order() {
    let mut checked = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).unwrap();
        let page = page.display();
        for (before, info, body) in blocks(&text) {
            let Some(file) = before
                .strip_prefix("<!-- excerpt: ")
                .and_then(|rest| rest.strip_suffix(" -->"))
            else {
                assert_ne!(
                    info, "rust,ignore",
                    "{page}: a rust,ignore block that is not a checked excerpt:\n{body}"
                );
                continue;
            };
            let source = std::fs::read_to_string(root().join(file)).unwrap();
            let mut source_lines = source.lines().map(str::trim);
            for line in body.lines().map(str::trim) {
                if line.is_empty() || line == "// …" {
                    continue;
                }
                assert!(
                    source_lines.any(|s| s == line),
                    "{page}: excerpt line `{line}` is not in {file} (in this order)"
                );
            }
            checked.push(format!("{page}: {file}"));
        }
    }
    // The research loop's macro form, the approval gate and the delegate's coordinator, at least.
    assert!(
        checked.len() >= 3,
        "expected the excerpts of the README and docs/, found {checked:?}"
    );
}

/// The program the session runs: `RADKIT_README_EXE` (what `.ci/run` builds from the README's
/// `Cargo.toml` and `main.rs` in a fresh crate), else the built `hello` example (`cargo test` builds
/// every example before running tests).
fn hello_exe() -> PathBuf {
    if let Some(exe) = std::env::var_os("RADKIT_README_EXE") {
        return PathBuf::from(exe);
    }
    let deps = std::env::current_exe().unwrap();
    let debug = deps.parent().and_then(Path::parent).unwrap();
    let exe = debug.join("examples").join("hello");
    let built = std::fs::metadata(&exe).and_then(|m| m.modified()).ok();
    let newest_source = ["examples/hello.rs", "src/cli", "radkit-runtime/src/store"]
        .iter()
        .flat_map(|p| walk(&root().join(p)))
        .filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .max();
    assert!(
        built.is_some() && built >= newest_source,
        "{} is missing or older than its sources: build it with `cargo build --example hello` \
         (`cargo test --workspace` does)",
        exe.display()
    );
    exe
}

fn walk(path: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(path) {
        Ok(entries) => entries.flatten().flat_map(|e| walk(&e.path())).collect(),
        Err(_) => vec![path.to_owned()],
    }
}

/// Run a `sh` line from the README in `dir`; its stdout.
fn sh(dir: &Path, line: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`{line}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_readme_hello_session_runs_as_printed() {
    let readme = readme();
    let session = blocks(&readme)
        .into_iter()
        .map(|(_, _, body)| body)
        .find(|body| body.contains("cargo run -- serve") && body.contains("Hello, Ada!"))
        .expect("the hello session block");
    let commands: Vec<&str> = session
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split("   #").next().unwrap_or(l).trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert!(commands.len() >= 5, "{commands:?}");
    let dir = tempfile::tempdir().unwrap();
    let exe = hello_exe();
    let as_program = |line: &str| -> Vec<String> {
        let args = line
            .strip_prefix("cargo run -- ")
            .unwrap_or_else(|| panic!("not a `cargo run --` line: {line}"));
        args.split_whitespace().map(str::to_owned).collect()
    };

    // 1. `cargo run -- serve …`, on a free port instead of 8080.
    let mut serve = as_program(commands[0]);
    assert_eq!(serve[0], "serve");
    serve.extend(["--addr".to_owned(), "127.0.0.1:0".to_owned()]);
    let mut child = Command::new(&exe)
        .args(&serve)
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let _server = crate::support::common::Killed(child);
    assert!(banner.contains("serving hello on http://"), "{banner}");
    let addr = banner
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap()
        .to_owned();
    let port = addr.rsplit(':').next().unwrap();

    // 2. The first curl: the task asks for a name.
    let curl = |line: &str, task: &str| {
        let line = line
            .replace("localhost:8080", &format!("localhost:{port}"))
            .replace("<task id>", task);
        let reply: serde_json::Value = serde_json::from_str(&sh(dir.path(), &line)).unwrap();
        reply
    };
    assert!(commands[1].starts_with("curl "), "{}", commands[1]);
    let asked = curl(commands[1], "");
    assert_eq!(
        asked["result"]["status"]["state"], "input-required",
        "{asked}"
    );
    assert!(asked.to_string().contains("What is your name?"), "{asked}");
    let task = asked["result"]["id"].as_str().unwrap().to_owned();

    // 3. The second curl answers it.
    assert!(commands[2].starts_with("curl "), "{}", commands[2]);
    let greeted = curl(commands[2], &task);
    assert_eq!(
        greeted["result"]["status"]["state"], "completed",
        "{greeted}"
    );
    assert!(greeted.to_string().contains("Hello, Ada!"), "{greeted}");

    // 4. `tasks show <prefix>` and 5. `graph hello`.
    let run = |line: &str| {
        let args = as_program(&line.replace("<task id prefix>", &task[..8]));
        let out = Command::new(&exe)
            .args(&args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = run(commands[3]);
    assert!(
        shown.starts_with(&format!("task {task} — skill `hello`")),
        "{shown}"
    );
    assert!(shown.contains("awaiting `name`"), "{shown}");
    assert!(shown.contains("completed: Hello, Ada!"), "{shown}");
    let graph = run(commands[4]);
    assert!(graph.starts_with("flowchart TD"), "{graph}");
    assert!(
        graph.contains("ask -.->|await_input / reply| greet"),
        "{graph}"
    );
}
