//! The runtime's top-level modules form layers: no module may reach, directly or through others, a
//! module that reaches back to it. This test reads the crate's source, collects every dependency of
//! one top-level module on another (`use crate::x`, `crate::x::..` and `radkit_runtime::x::..` paths,
//! and `super::` paths that climb out of the module), and fails naming each cycle and the files that
//! make its edges. Comments, doc comments and string literals are skipped: only code counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `(from, to)` -> the files that make that edge.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

#[test]
fn top_level_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = module_edges(&src);
    let cycles = cycles(&edges);
    if cycles.is_empty() {
        return;
    }
    let mut report = String::from("top-level modules of radkit-runtime import each other in a cycle; a lower module must not import a higher one (move the shared item down, or pass it in):\n");
    for cycle in &cycles {
        report.push_str(&format!("  cycle: {}\n", cycle.join(" -> ")));
        for pair in cycle.windows(2) {
            let files = &edges[&(pair[0].clone(), pair[1].clone())];
            report.push_str(&format!(
                "    {} -> {} in {}\n",
                pair[0],
                pair[1],
                files.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    panic!("{report}");
}

/// Inside `server/` the bindings stand on one operation layer and nothing stands on a binding: its
/// files (and `grpc/`) form no cycle either (`mod.rs`, which wires the routes, is not a layer).
#[test]
fn server_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = submodule_edges(&src, "server");
    assert!(
        edges.contains_key(&("rest".to_owned(), "ops".to_owned())),
        "the scanner sees no rest -> ops edge; edges: {:?}",
        edges.keys().collect::<Vec<_>>()
    );
    let cycles = cycles(&edges);
    let mut report = String::new();
    for cycle in &cycles {
        report.push_str(&format!("  cycle: {}\n", cycle.join(" -> ")));
        for pair in cycle.windows(2) {
            let files = &edges[&(pair[0].clone(), pair[1].clone())];
            report.push_str(&format!(
                "    {} -> {} in {}\n",
                pair[0],
                pair[1],
                files.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    assert!(
        cycles.is_empty(),
        "modules of server/ import each other in a cycle:\n{report}"
    );
}

/// Every dependency of one direct submodule of `parent` (a top-level module) on another: `super::x`
/// from a file of `parent`, and `crate::parent::x`.
fn submodule_edges(src: &Path, parent: &str) -> Edges {
    let mut files = Vec::new();
    collect(&src.join(parent), &mut files);
    let subs: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(src, f).get(1).cloned())
        .collect();
    let mut edges = Edges::new();
    for file in &files {
        let path = module_path(src, file);
        let Some(from) = path.get(1) else {
            continue; // `parent/mod.rs` wires its submodules together; it is not a layer
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        let shown = file.strip_prefix(src).unwrap_or(file).display().to_string();
        for to in scoped_edges(&path, &text, &[parent.to_owned()], &subs) {
            if &to != from {
                edges
                    .entry((from.clone(), to))
                    .or_default()
                    .insert(shown.clone());
            }
        }
    }
    edges
}

/// The scanner must see the edges everyone knows of, or a silent parser bug would pass the test above.
#[test]
fn the_scanner_sees_known_edges() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = module_edges(&src);
    for (from, to) in [
        ("engine", "store"),
        ("engine", "journal"),
        ("server", "engine"),
        ("store", "journal"),
        ("flow", "model"),
    ] {
        assert!(
            edges.contains_key(&(from.to_owned(), to.to_owned())),
            "no edge {from} -> {to} found; edges: {:?}",
            edges.keys().collect::<Vec<_>>()
        );
    }
}

/// The A2A client stands on the model alone (and `telemetry`, which reaches nothing, for the trace
/// context of its requests): the engine will call other agents through it, so it must never reach
/// the engine, the server or the store (a cycle, or a client that needs a server).
#[test]
fn the_client_depends_on_the_model_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = module_edges(&src);
    let reached: Vec<(&String, &BTreeSet<String>)> = edges
        .iter()
        .filter(|((from, to), _)| from == "client" && to != "model" && to != "telemetry")
        .map(|((_, to), files)| (to, files))
        .collect();
    assert!(
        reached.is_empty(),
        "`client` may use `model` (and `telemetry`) only; it reaches {reached:?}"
    );
    assert!(
        edges.contains_key(&("client".to_owned(), "model".to_owned())),
        "the scanner sees no client -> model edge"
    );
}

/// Telemetry is a leaf every layer may report to (the engine's counters, the trace context of the
/// client's and the models' requests): it names no other module of the crate, so reporting to it
/// can never close a cycle. What it shows is handed to it as labels and numbers.
#[test]
fn telemetry_reaches_no_other_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = module_edges(&src);
    assert!(
        edges.contains_key(&("engine".to_owned(), "telemetry".to_owned())),
        "the scanner sees no engine -> telemetry edge"
    );
    let reached: Vec<(&String, &BTreeSet<String>)> = edges
        .iter()
        .filter(|((from, _), _)| from == "telemetry")
        .map(|((_, to), files)| (to, files))
        .collect();
    assert!(reached.is_empty(), "`telemetry` reaches {reached:?}");
}

/// The task machine is sans-IO: the machine, the rules it applies and what they stand on (the fold,
/// the command rules, replay) name no runtime and no clock, so a host without tokio (a serverless
/// function's own loop, a Restate handler) runs it and its tests need none. The run state's buffer
/// lives beside the engine's `TaskRun` in `run.rs`, which is the engine's: it is not scanned, and
/// the state reads a clock only where no host passed time in (`RunState::now`).
#[test]
fn the_machine_and_the_rules_it_applies_name_no_runtime() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let mut files = Vec::new();
    collect(&src.join("machine"), &mut files);
    for name in ["fold.rs", "command.rs", "replay.rs"] {
        files.push(src.join(name));
    }
    assert!(files.len() >= 7, "{files:?}");
    let mut offenders = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a source file");
        let tokens = tokens(&text);
        for banned in ["tokio", "Instant", "SystemTime", "thread"] {
            if tokens.iter().any(|t| t == banned) {
                offenders.push(format!("{} names `{banned}`", file.display()));
            }
        }
        // `now_ms` is the name every rule gives the time passed in; called, it is the clock.
        if tokens.windows(2).any(|w| w[0] == "now_ms" && w[1] == "(") {
            offenders.push(format!("{} reads the clock (`now_ms()`)", file.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "the machine must stay without I/O, runtime or clock:\n  {}",
        offenders.join("\n  ")
    );
}

/// The long-running engine is one host of the task machine, not a second copy of its loop: the
/// queue, a visit's result, transition commands, a cancel, compensations and the end are the
/// machine's (`TaskMachine::turn`), and a call's lookup, hooks, gate, issue, resume and a race's
/// record are its invoker's. The engine's driver and its side of a visit's calls name none of
/// those rules: they only perform what the machine asks.
#[test]
fn the_engine_drives_the_machine_and_applies_none_of_its_run_rules_itself() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let loop_rules = [
        "next_work",
        "begin_visit",
        "after_visit",
        "execute",
        "deliver",
        "end",
        "stuck",
        "compensations_owed",
        "begin_cancel_visit",
        "end_cancel_visit",
        "find",
        "resume",
        "gate",
        "refuse",
        "record_race",
        "recorded",
        "issue",
    ];
    let mut offenders = Vec::new();
    for name in ["driver.rs", "invoke.rs"] {
        let text = std::fs::read_to_string(src.join(name)).expect("read a source file");
        let tokens = tokens(&text);
        for (i, w) in tokens.windows(3).enumerate() {
            if !((w[0] == "rules" || w[0] == "command") && w[1] == "::") {
                continue;
            }
            // `rules::find(..)`, or `rules::{self, find}` imported by name.
            let mut named = vec![w[2].as_str()];
            if w[2] == "{" {
                named = tokens[i + 3..]
                    .iter()
                    .take_while(|t| *t != "}")
                    .map(String::as_str)
                    .collect();
            }
            for rule in named.into_iter().filter(|n| loop_rules.contains(n)) {
                offenders.push(format!("{name} applies `{}::{rule}`", w[0]));
            }
        }
        assert!(
            tokens.iter().any(|t| t == "TaskMachine" || t == "CallHost"),
            "{name} no longer names the machine it hosts: is this test still reading the engine?"
        );
    }
    assert!(
        offenders.is_empty(),
        "the engine must leave the run's rules to the machine it drives:\n  {}",
        offenders.join("\n  ")
    );
}

/// The engine, `flow`, the journal and the stores hold radkit's own task model; the A2A wire versions
/// (`model::v0_3`, `model::v1`) are the servers' and the client's. One engine file renders: push
/// delivery, which writes the bodies it posts to webhooks.
#[test]
fn only_the_bindings_name_the_wire_versions() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    let posts_wire_bodies = ["engine/push/deliver.rs"];
    let mut offenders = Vec::new();
    let mut scanned = 0;
    for file in &files {
        let shown = file
            .strip_prefix(&src)
            .unwrap_or(file)
            .display()
            .to_string();
        let layer = module_path(&src, file).first().cloned().unwrap_or_default();
        if !["engine", "flow", "journal", "store"].contains(&layer.as_str())
            || posts_wire_bodies.contains(&shown.as_str())
        {
            continue;
        }
        scanned += 1;
        let text = std::fs::read_to_string(file).expect("read a source file");
        if let Some(name) = tokens(&text).iter().find(|t| *t == "v0_3" || *t == "v1") {
            offenders.push(format!("{shown} names `{name}`"));
        }
    }
    assert!(
        scanned > 40,
        "only {scanned} files of the engine's layers scanned"
    );
    assert!(
        offenders.is_empty(),
        "the engine's layers must use radkit's model, not a wire version:\n  {}",
        offenders.join("\n  ")
    );
    let deliver = std::fs::read_to_string(src.join(posts_wire_bodies[0])).expect("push delivery");
    assert!(
        tokens(&deliver).iter().any(|t| t == "v1"),
        "the scanner does not see push delivery's own use of `v1`"
    );
}

#[test]
fn the_scanner_reads_groups_super_and_skips_comments() {
    let tops: BTreeSet<String> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let text = r##"
        //! uses crate::f in a doc comment, which does not count
        use crate::{b::X, c};
        /* crate::f */ const S: &str = "crate::f"; const R: &str = r#"crate::f"#;
        fn g<'x>(c: char) -> bool { c == '"' && crate::d::ok() }
        mod inner { use super::super::e::Y; use super::Z; }
        macro_rules! m { () => { $crate::f::Q } }
        pub(super) fn h() {}
    "##;
    let found = file_edges(&["a".to_owned(), "sub".to_owned()], text, &tops);
    let expected: BTreeSet<String> = ["b", "c", "d"].iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(found, expected);
    let found = file_edges(
        &["a".to_owned()],
        "mod t { use super::super::e::Y; }",
        &tops,
    );
    assert_eq!(found, BTreeSet::from(["e".to_owned()]));
    // Inside a scope: `crate::server::x` and `super::x` name submodules, other paths do not.
    let subs: BTreeSet<String> = ["ops", "open", "rest"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let found = scoped_edges(
        &["server".to_owned(), "rest".to_owned()],
        "use crate::server::ops; use super::{open, errors}; use crate::engine::rest;",
        &["server".to_owned()],
        &subs,
    );
    assert_eq!(found, BTreeSet::from(["ops".to_owned(), "open".to_owned()]));
}

/// Every dependency of one top-level module on another.
fn module_edges(src: &Path) -> Edges {
    let mut files = Vec::new();
    collect(src, &mut files);
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(src, f).first().cloned())
        .collect();
    let mut edges = Edges::new();
    for file in &files {
        let path = module_path(src, file);
        if path.is_empty() {
            continue; // the crate root re-exports everything; it is not a layer
        }
        let text = std::fs::read_to_string(file).expect("read a source file");
        let shown = file.strip_prefix(src).unwrap_or(file).display().to_string();
        for to in file_edges(&path, &text, &tops) {
            if to != path[0] {
                edges
                    .entry((path[0].clone(), to))
                    .or_default()
                    .insert(shown.clone());
            }
        }
    }
    edges
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read the source directory")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `engine/driver.rs` -> `[engine, driver]`, `store/mod.rs` -> `[store]`, `lib.rs` -> `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// The top-level modules (of `tops`) that a file at module path `path` names.
fn file_edges(path: &[String], text: &str, tops: &BTreeSet<String>) -> BTreeSet<String> {
    scoped_edges(path, text, &[], tops)
}

/// The modules directly inside module `scope` (of `names`; the crate's top level when `scope` is
/// empty) that a file at module path `path` names: `crate::<scope>::x` paths (or
/// `radkit_runtime::..`), and `super::` paths that climb to `scope`.
fn scoped_edges(
    path: &[String],
    text: &str,
    scope: &[String],
    names: &BTreeSet<String>,
) -> BTreeSet<String> {
    let tokens = tokens(text);
    let mut found = BTreeSet::new();
    // Inline `mod x { .. }` blocks: (name, brace depth inside the block).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                inline.push((tokens[i + 1].clone(), depth + 1));
            }
            "crate" | "radkit_runtime"
                if (i == 0 || tokens[i - 1] != "$" && tokens[i - 1] != "::")
                    && tokens.get(i + 1).is_some_and(|t| t == "::") =>
            {
                // `crate::` then the scope's segments, each followed by `::`.
                let mut at = i + 2;
                let in_scope = scope.iter().all(|segment| {
                    let here = tokens.get(at) == Some(segment)
                        && tokens.get(at + 1).is_some_and(|t| t == "::");
                    at += 2;
                    here
                });
                if in_scope {
                    heads(&tokens, at, &mut |name| {
                        if names.contains(name) {
                            found.insert(name.to_owned());
                        }
                    });
                }
            }
            "super" if i == 0 || tokens[i - 1] != "::" => {
                let mut here: Vec<String> = path
                    .iter()
                    .cloned()
                    .chain(inline.iter().map(|(name, _)| name.clone()))
                    .collect();
                let mut j = i;
                while tokens.get(j).is_some_and(|t| t == "super")
                    && tokens.get(j + 1).is_some_and(|t| t == "::")
                {
                    here.pop();
                    j += 2;
                }
                if here == scope {
                    heads(&tokens, j, &mut |name| {
                        if names.contains(name) {
                            found.insert(name.to_owned());
                        }
                    });
                }
                // `pub(super)` names no path: step over it.
                i = j.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The first segment of the path at `tokens[at..]`, or of each path in a `{ .. }` group there.
fn heads(tokens: &[String], at: usize, f: &mut dyn FnMut(&str)) {
    match tokens.get(at).map(String::as_str) {
        Some("{") => {
            let mut depth = 0usize;
            let mut start = true;
            for t in &tokens[at..] {
                match t.as_str() {
                    "{" => {
                        depth += 1;
                        start = depth == 1;
                    }
                    "}" => {
                        depth -= 1;
                        if depth == 0 {
                            return;
                        }
                    }
                    "," if depth == 1 => start = true,
                    name if start => {
                        f(name);
                        start = false;
                    }
                    _ => {}
                }
            }
        }
        Some(name) => f(name),
        None => {}
    }
}

/// Identifiers and punctuation of `text`, without comments, strings and char literals.
fn tokens(text: &str) -> Vec<String> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut nest = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    nest += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (ch == 'r' || ch == 'b')
            && (i == 0 || !is_ident(c[i - 1]))
            && raw_string_start(&c, i).is_some()
        {
            let (hashes, body) = raw_string_start(&c, i).unwrap_or((0, i));
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            i = body;
            while i < c.len() && c[i..].iter().take(close.len()).ne(close.iter()) {
                i += 1;
            }
            i += close.len();
        } else if ch == '\'' {
            // A char literal ('x', '\n', '"'), else a lifetime or label.
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if is_ident(ch) {
            let start = i;
            while i < c.len() && is_ident(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else if ch.is_whitespace() {
            i += 1;
        } else {
            out.push(ch.to_string());
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// For `r"`, `r#"`, `br##"`: the number of `#` and where the body starts.
fn raw_string_start(c: &[char], at: usize) -> Option<(usize, usize)> {
    let mut i = at;
    if c.get(i) == Some(&'b') {
        i += 1;
    }
    if c.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let mut hashes = 0;
    while c.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    (c.get(i) == Some(&'"')).then_some((hashes, i + 1))
}

/// Every elementary cycle found by a depth-first search from each module, each reported once (as
/// its rotation starting at its smallest module), closed (`[a, b, a]`).
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from.as_str()).or_default().push(to.as_str());
    }
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for &start in next.keys() {
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        let mut on_path: Vec<&str> = vec![start];
        while let Some((node, idx)) = stack.pop() {
            let outs = next.get(node).map(Vec::as_slice).unwrap_or(&[]);
            if idx >= outs.len() {
                on_path.pop();
                continue;
            }
            stack.push((node, idx + 1));
            let to = outs[idx];
            if to == start {
                let mut cycle: Vec<String> = on_path.iter().map(|s| (*s).to_owned()).collect();
                // Only the rotation that starts at its smallest module, so each cycle shows once.
                if cycle.iter().min() == cycle.first() {
                    cycle.push(start.to_owned());
                    found.insert(cycle);
                }
            } else if !on_path.contains(&to) && to > start {
                on_path.push(to);
                stack.push((to, 0));
            }
        }
    }
    found.into_iter().collect()
}
