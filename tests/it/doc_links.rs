//! Docs and doc comments refer only to files inside the repository.
//!
//! Scanned: every Markdown file of the repository (README.md, CHANGELOG.md, docs/, the crates'
//! READMEs) except the upstream copies under `docs/a2a/` and `docs/a2a-tck/` (their README.md files
//! are ours and are scanned), and
//! the doc comments (`//!`, `///`) of every `.rs` file but the code generated from a vendored file
//! (`GENERATED_FILES`). Checked:
//!
//! * relative Markdown links (`[text](target)`, `[label]: target`): the target, resolved against
//!   the file's directory, is a file or directory inside the repository;
//! * path references in code spans (a span that looks like a path: it has a `/` and names a
//!   top-level entry of the repository, starts with `..`, or ends in a source-file extension): the
//!   path exists relative to the file's directory, the repository root or a crate's root or `src/`,
//!   and never leaves the repository;
//! * absolute filesystem paths (home directories, the build machine's work tree, `file:` URLs) are
//!   refused everywhere, code blocks included;
//! * links to other sites (outside code) are refused unless the host is the loopback or listed in
//!   `ALLOWED_URLS`: a document the code follows is vendored under `docs/`, not linked.
//!
//! Generated or ignored directories (those `.gitignore` names with a leading `/`) never count as
//! part of the repository.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Upstream copies kept verbatim; their own links point into their upstream project. Files under
/// these directories are not scanned, except their README.md (ours).
const VENDORED_DIRS: &[&str] = &["docs/a2a", "docs/a2a-tck"];

/// Code generated from a vendored file, whose doc comments are the upstream file's own (the gRPC
/// messages carry `a2a.proto`'s comments, links included): not scanned, like the vendored copies.
const GENERATED_FILES: &[&str] = &["radkit-runtime/src/model/grpc/lf.a2a.v1.rs"];

/// Crate roots whose root and `src/` a path reference may be relative to.
const CRATES: &[&str] = &[".", "radkit-runtime", "radkit-macros"];

/// Links to other sites that are allowed: general references and the provenance of vendored
/// files. Never add a document the code follows: vendor it under `docs/` instead.
const ALLOWED_URLS: &[&str] = &[
    "https://keepachangelog.com/",
    "https://semver.org/",
    "https://github.com/a2aproject/A2A",
];

/// Prefixes of absolute paths that only exist on somebody's machine.
const ABSOLUTE_PREFIXES: &[&str] = &[
    "/work/", "/home/", "/root/", "/Users/", "/mnt/", "/tmp/", "file://", "~/",
];

/// Extensions that make a code span with a `/` a path reference.
const PATH_EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "json", "proto", "py", "sh", "sql", "yml", "yaml", "stderr", "lock",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Markdown,
    RustDoc,
}

struct Repo {
    root: PathBuf,
    /// Directories that are not part of the repository (from `.gitignore`, plus `.git`).
    ignored: BTreeSet<String>,
    /// Names of the repository's top-level entries (minus the ignored ones).
    top_level: BTreeSet<String>,
}

#[derive(Default)]
struct Report {
    problems: Vec<String>,
    /// Every reference checked (and found good or bad), as `file:line: reference`.
    checked: Vec<String>,
    markdown_links: usize,
    path_refs: usize,
}

impl Repo {
    fn open(root: &Path) -> Repo {
        let mut ignored: BTreeSet<String> = [".git".to_string()].into_iter().collect();
        let gitignore = fs::read_to_string(root.join(".gitignore")).expect("read .gitignore");
        for line in gitignore.lines() {
            let line = line.trim().trim_end_matches('/');
            if let Some(name) = line.strip_prefix('/') {
                // A nested path (`/.ci/restate`) is skipped where it is, like a top-level name.
                if !name.is_empty() && !name.contains(['*', '?', '[']) {
                    ignored.insert(name.to_string());
                }
            }
        }
        let top_level = fs::read_dir(root)
            .expect("read the repository root")
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| !ignored.contains(name))
            .collect();
        Repo {
            root: root.to_path_buf(),
            ignored,
            top_level,
        }
    }

    /// Lexically normalizes `base/rel`; `None` if it climbs above the repository root.
    fn inside(&self, base: &Path, rel: &str) -> Option<PathBuf> {
        let mut out: Vec<String> = Vec::new();
        let joined = base.join(rel);
        for component in joined.components() {
            match component {
                Component::Normal(c) => out.push(c.to_string_lossy().into_owned()),
                Component::ParentDir => {
                    out.pop()?;
                }
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        if out
            .first()
            .is_some_and(|first| self.ignored.contains(first))
        {
            return None;
        }
        Some(out.iter().collect())
    }

    /// True if `rel` (repository-relative) is an ignored nested path (`.gitignore`'s `/.ci/restate`)
    /// or lies under one.
    fn is_ignored(&self, rel: &str) -> bool {
        let rel = rel.trim_end_matches('/');
        self.ignored.iter().any(|ignored| {
            ignored.contains('/')
                && (rel == ignored
                    || rel
                        .strip_prefix(ignored.as_str())
                        .is_some_and(|rest| rest.starts_with('/')))
        })
    }

    /// True if `rel` (relative to the repository-relative directory `base`) names an existing
    /// file or directory inside the repository.
    fn resolves(&self, base: &Path, rel: &str) -> bool {
        match self.inside(base, rel) {
            Some(p) => self.root.join(p).exists(),
            None => false,
        }
    }

    /// Every file under the repository with extension `ext`, repository-relative, sorted.
    fn files(&self, ext: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(self.root.join(&dir)).expect("read dir") {
                let entry = entry.expect("dir entry");
                let name = entry.file_name().to_string_lossy().into_owned();
                let rel = dir.join(&name);
                let file_type = entry.file_type().expect("file type");
                if file_type.is_dir() {
                    if self.ignored.contains(&*rel.to_string_lossy()) {
                        continue;
                    }
                    if name == "target" || name == ".git" {
                        continue;
                    }
                    stack.push(rel);
                } else if rel.extension().is_some_and(|e| e == ext) {
                    out.push(rel);
                }
            }
        }
        out.sort();
        out
    }
}

fn is_vendored(file: &Path) -> bool {
    (VENDORED_DIRS.iter().any(|dir| file.starts_with(dir))
        && file.file_name().is_none_or(|name| name != "README.md"))
        || GENERATED_FILES
            .iter()
            .any(|generated| file == Path::new(generated))
}

/// The doc-comment blocks of a Rust file: runs of consecutive `//!` or `///` lines, with their
/// 1-based line numbers and the comment marker (and one space) removed.
fn doc_blocks(source: &str) -> Vec<Vec<(usize, String)>> {
    let mut blocks = Vec::new();
    let mut current: Vec<(usize, String)> = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        let doc = if trimmed.starts_with("////") {
            None
        } else {
            trimmed
                .strip_prefix("//!")
                .or_else(|| trimmed.strip_prefix("///"))
        };
        match doc {
            Some(text) => current.push((i + 1, text.strip_prefix(' ').unwrap_or(text).to_string())),
            None => {
                if !current.is_empty() {
                    blocks.push(std::mem::take(&mut current));
                }
            }
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks
}

/// Checks one block of Markdown (a whole `.md` file, or one doc-comment block).
fn scan_block(
    repo: &Repo,
    file: &Path,
    kind: Kind,
    lines: &[(usize, String)],
    report: &mut Report,
) {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let at = |line: usize| format!("{}:{line}", file.display());

    // Absolute paths: anywhere, code blocks included.
    for (line, text) in lines {
        for prefix in ABSOLUTE_PREFIXES {
            for (pos, _) in text.match_indices(prefix) {
                let before = text[..pos].chars().next_back();
                let starts_token =
                    before.is_none_or(|c| !(c.is_alphanumeric() || "./:-_".contains(c)));
                if starts_token {
                    let token: String = text[pos..]
                        .chars()
                        .take_while(|c| !c.is_whitespace() && !"`)\"'>]".contains(*c))
                        .collect();
                    report
                        .problems
                        .push(format!("{}: absolute path `{token}`", at(*line)));
                }
            }
        }
    }

    // Outside fenced code blocks: one string per run of prose lines, inline code blanked out of
    // `prose` (same byte offsets, newlines kept) and collected as spans.
    let mut runs: Vec<Vec<(usize, &str)>> = vec![Vec::new()];
    let mut fence: Option<&str> = None;
    for (line, text) in lines {
        let trimmed = text.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => {
                fence = Some(m);
                runs.push(Vec::new());
            }
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => runs.last_mut().expect("a run").push((*line, text.as_str())),
            _ => {}
        }
    }
    for run in runs.iter().filter(|r| !r.is_empty()) {
        let mut text = String::new();
        let mut starts = Vec::new();
        for (line, t) in run {
            starts.push((text.len(), *line));
            text.push_str(t);
            text.push('\n');
        }
        let line_of = |offset: usize| {
            starts
                .iter()
                .rev()
                .find(|(start, _)| *start <= offset)
                .map(|(_, l)| *l)
                .unwrap_or(0)
        };
        let bytes = text.as_bytes();
        let mut prose = bytes.to_vec();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'`' {
                i += 1;
                continue;
            }
            let n = bytes[i..].iter().take_while(|b| **b == b'`').count();
            let fence = "`".repeat(n);
            let mut j = i + n;
            let close = loop {
                match text[j..].find(&fence) {
                    None => break None,
                    Some(k) => {
                        let start = j + k;
                        let len = bytes[start..].iter().take_while(|b| **b == b'`').count();
                        if len == n {
                            break Some(start);
                        }
                        j = start + len;
                    }
                }
            };
            let Some(close) = close else {
                i += n;
                continue;
            };
            let span = text[i + n..close].replace('\n', " ");
            check_code_span(repo, &dir, span.trim(), &at(line_of(i)), report);
            for b in &mut prose[i..close + n] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
            i = close + n;
        }
        let prose = String::from_utf8(prose).expect("blanking keeps UTF-8 boundaries");
        check_prose(repo, &dir, kind, &prose, &line_of, &at, report);
    }
}

/// A code span that looks like a path must name something inside the repository.
fn check_code_span(repo: &Repo, dir: &Path, span: &str, at: &str, report: &mut Report) {
    let looks_like_path = !span.is_empty()
        && span.contains('/')
        && !span.contains("//")
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
    if !looks_like_path || span.starts_with('/') {
        return; // absolute paths are caught line by line; `/` alone is an HTTP path
    }
    let rel = span.strip_prefix("./").unwrap_or(span);
    if repo.is_ignored(rel) {
        // What the tooling makes in an ignored place (`.ci/restate`, installed by `.ci/run`) is
        // named on purpose and is not there on a fresh checkout.
        return;
    }
    let first = rel.split('/').next().unwrap_or("");
    let extension = rel
        .rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, e)| e);
    let is_path = rel.starts_with("..")
        || repo.top_level.contains(first)
        || extension.is_some_and(|e| PATH_EXTENSIONS.contains(&e));
    if !is_path {
        return;
    }
    report.path_refs += 1;
    report.checked.push(format!("{at}: `{span}`"));
    let found = if rel.starts_with("..") || rel.contains("/../") {
        repo.resolves(dir, rel)
    } else {
        let mut bases: Vec<PathBuf> = vec![dir.to_path_buf(), PathBuf::new()];
        for krate in CRATES {
            bases.push(PathBuf::from(krate));
            bases.push(Path::new(krate).join("src"));
        }
        bases.iter().any(|base| repo.resolves(base, rel))
    };
    if !found {
        report.problems.push(format!(
            "{at}: `{span}` names no file inside the repository"
        ));
    }
}

/// Links in prose (code removed): relative targets resolve, URLs are allowed ones.
fn check_prose(
    repo: &Repo,
    dir: &Path,
    kind: Kind,
    prose: &str,
    line_of: &dyn Fn(usize) -> usize,
    at: &dyn Fn(usize) -> String,
    report: &mut Report,
) {
    let mut targets: Vec<(usize, String)> = Vec::new();
    for (pos, _) in prose.match_indices("](") {
        let rest = &prose[pos + 2..];
        let end = rest.find([')', ' ', '\n']).unwrap_or(rest.len());
        let target = rest[..end].trim_start_matches('<').trim_end_matches('>');
        targets.push((pos, target.to_string()));
    }
    let mut offset = 0;
    for line in prose.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            if let Some(close) = trimmed.find("]:") {
                let target = trimmed[close + 2..].split_whitespace().next().unwrap_or("");
                targets.push((offset, target.to_string()));
            }
        }
        offset += line.len();
    }
    for (pos, target) in targets {
        let target = target.split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue; // anchors; URLs are checked below
        }
        if kind == Kind::RustDoc && (target.contains("::") || !target.contains(['/', '.'])) {
            continue; // an intra-doc link
        }
        report.markdown_links += 1;
        report
            .checked
            .push(format!("{}: ]({target})", at(line_of(pos))));
        let ok = if kind == Kind::Markdown {
            repo.resolves(dir, target)
        } else {
            repo.resolves(Path::new(""), target) || repo.resolves(dir, target)
        };
        if !ok {
            report.problems.push(format!(
                "{}: link `{target}` names no file inside the repository",
                at(line_of(pos))
            ));
        }
    }
    for scheme in ["http://", "https://"] {
        for (pos, _) in prose.match_indices(scheme) {
            let url: String = prose[pos..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !")>]\"'`".contains(*c))
                .collect();
            let url = url.trim_end_matches(['.', ',', ';', ':']);
            let host = url[scheme.len()..].split(['/', ':']).next().unwrap_or("");
            let local = ["127.0.0.1", "localhost", "0.0.0.0", "[", "<"]
                .iter()
                .any(|h| host.starts_with(h));
            if !local && !ALLOWED_URLS.iter().any(|allowed| url.starts_with(allowed)) {
                report.problems.push(format!(
                    "{}: link to another site `{url}` (vendor what the code follows under docs/, or allow \
                     the URL in ALLOWED_URLS if it is only a general reference)",
                    at(line_of(pos))
                ));
            }
        }
    }
}

fn scan_repository(repo: &Repo) -> (Report, Vec<PathBuf>) {
    let mut report = Report::default();
    let mut scanned = Vec::new();
    for file in repo.files("md") {
        if is_vendored(&file) {
            continue;
        }
        let text = fs::read_to_string(repo.root.join(&file)).expect("read markdown");
        let lines: Vec<(usize, String)> = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.to_string()))
            .collect();
        scan_block(repo, &file, Kind::Markdown, &lines, &mut report);
        scanned.push(file);
    }
    for file in repo.files("rs") {
        if is_vendored(&file) {
            continue;
        }
        let text = fs::read_to_string(repo.root.join(&file)).expect("read rust source");
        for block in doc_blocks(&text) {
            scan_block(repo, &file, Kind::RustDoc, &block, &mut report);
        }
        scanned.push(file);
    }
    (report, scanned)
}

#[test]
fn docs_and_doc_comments_refer_only_to_files_in_the_repository() {
    let repo = Repo::open(Path::new(ROOT));
    let (report, scanned) = scan_repository(&repo);

    // Not vacuous: the files that must be scanned were, and the references we know of were found.
    for must in [
        "README.md",
        "CHANGELOG.md",
        "docs/architecture.md",
        "docs/a2a/README.md",
    ] {
        assert!(
            scanned.iter().any(|f| f == Path::new(must)),
            "{must} was not scanned"
        );
    }
    assert!(
        !scanned
            .iter()
            .any(|f| f.starts_with("target") || f.starts_with(".venv")),
        "generated directories were scanned"
    );
    assert!(scanned.len() > 50, "only {} files scanned", scanned.len());
    for known in [
        "radkit-runtime/src/model/v0_3/mod.rs:4: `docs/a2a/a2a-v0.3.0.schema.json`",
        "docs/architecture.md:3: `docs/design.md`",
    ] {
        assert!(
            report.checked.iter().any(|c| c == known),
            "the reference {known} was not checked; checked:\n{}",
            report.checked.join("\n")
        );
    }
    assert!(
        report.path_refs >= 30,
        "only {} path references checked",
        report.path_refs
    );
    assert!(
        report.markdown_links >= 5,
        "only {} relative Markdown links checked",
        report.markdown_links
    );
    assert!(
        report
            .checked
            .iter()
            .any(|c| c == "docs/a2a/README.md:10: ](a2a-v0.3.0.schema.json)"),
        "the vendored schema's link was not checked; checked:\n{}",
        report.checked.join("\n")
    );
    eprintln!(
        "{} files, {} path references, {} relative links checked",
        scanned.len(),
        report.path_refs,
        report.markdown_links
    );

    assert!(
        report.problems.is_empty(),
        "{} reference(s) outside the repository or to nothing:\n{}",
        report.problems.len(),
        report.problems.join("\n")
    );
}

#[test]
fn the_checker_catches_what_it_should() {
    let repo = Repo::open(Path::new(ROOT));
    let sample = [
        "See `../shared/DESIGN.md` and `docs/design.md`, `docs/missing.md`, `engine/replay.rs`.",
        "Methods: `message/send`, `tasks/get`, `text/plain`, `/`. Run `./data/radkit.sqlite`.",
        "The [spec](../shared/a2a/spec.md), the [design](design.md), [here](#anchor),",
        "[gone](nowhere.md) and <https://a2a-protocol.org/v0.3.0/specification>.",
        "```sh",
        "curl http://example.com/not-a-link   # code: not a link",
        "cat /work/shared/a2a/a2a-v0.3.0.schema.json",
        "```",
        "Loopback http://127.0.0.1:8080/ is fine; so is [Keep a Changelog](https://keepachangelog.com/).",
        "[label]: ../outside.md",
    ];
    let lines: Vec<(usize, String)> = sample
        .iter()
        .enumerate()
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect();
    let mut report = Report::default();
    scan_block(
        &repo,
        Path::new("docs/sample.md"),
        Kind::Markdown,
        &lines,
        &mut report,
    );
    let expected = [
        "docs/sample.md:1: `../shared/DESIGN.md`",
        "docs/sample.md:1: `docs/missing.md`",
        "docs/sample.md:3: link `../shared/a2a/spec.md`",
        "docs/sample.md:4: link `nowhere.md`",
        "docs/sample.md:4: link to another site `https://a2a-protocol.org/v0.3.0/specification`",
        "docs/sample.md:7: absolute path `/work/shared/a2a/a2a-v0.3.0.schema.json`",
        "docs/sample.md:10: link `../outside.md`",
    ];
    for e in expected {
        assert!(
            report.problems.iter().any(|p| p.starts_with(e)),
            "missed {e}; reported:\n{}",
            report.problems.join("\n")
        );
    }
    assert_eq!(
        report.problems.len(),
        expected.len(),
        "reported:\n{}",
        report.problems.join("\n")
    );
    // `docs/design.md`, `engine/replay.rs` and `design.md` were checked and resolved.
    assert_eq!(
        report.path_refs,
        4,
        "checked:\n{}",
        report.checked.join("\n")
    );

    // Doc comments: intra-doc links are not file links; paths in code spans are.
    // (Built from pieces so that this file's own scan does not read them as doc comments.)
    let rust = [
        "//! See [`Engine`](crate::engine::Engine) and [`Self`].",
        "//! Schema: `../shared/a2a/a2a-v0.3.0.schema.json`.",
        "fn f() {}",
        "/// Fine: `docs/a2a/a2a-v0.3.0.schema.json`.",
    ]
    .join("\n");
    let mut report = Report::default();
    for block in doc_blocks(&rust) {
        scan_block(
            &repo,
            Path::new("radkit-runtime/src/model/mod.rs"),
            Kind::RustDoc,
            &block,
            &mut report,
        );
    }
    assert_eq!(
        report.problems.len(),
        1,
        "reported:\n{}",
        report.problems.join("\n")
    );
    assert!(report.problems[0].starts_with("radkit-runtime/src/model/mod.rs:2: `../shared/"));
    assert_eq!(report.path_refs, 2);
}
