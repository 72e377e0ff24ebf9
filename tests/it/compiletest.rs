//! Compile-time errors of the macros, pinned to this compiler's output under `cargo test --workspace`
//! (`TRYBUILD=overwrite cargo test --test it -- compiletest::` to
//! regenerate after reviewing), and the forms that must compile.

#[rustversion::attr(
    not(stable(1.95)),
    ignore = "ui .stderr files are pinned to rustc 1.95"
)]
#[cfg_attr(miri, ignore)]
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/**/*.rs");
    t.pass("tests/pass/*.rs");
}

/// What a message names is the user's code and radkit's public API: no pinned message shows a name
/// the expansion made up (the hidden state enum, its variants, `__private`).
#[test]
fn ui_messages_show_no_generated_names() {
    fn stderr_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stderr_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "stderr") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    stderr_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui"),
        &mut files,
    );
    assert!(files.len() >= 60, "{} .stderr files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for generated in ["__Radkit", "__radkit", "__private", "tuple variant"] {
            assert!(
                !text.contains(generated),
                "{} shows `{generated}`:\n{text}",
                file.display()
            );
        }
    }
}
