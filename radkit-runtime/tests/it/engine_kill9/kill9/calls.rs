//! The calls file: every raw call of a tool function, appended as `<process> <function> <key>` by
//! the child and by the parent, so a test counts calls across the kill.

use std::io::Write as _;
use std::path::Path;

use radkit_runtime::flow::{EffectError, InvocationId};

use super::Process;

/// Append `<process> <function> <key>` to the calls file (one write; the child dies only later).
pub fn record(
    dir: &Path,
    process: Process,
    function: &str,
    key: &InvocationId,
) -> Result<(), EffectError> {
    let line = format!("{} {function} {key}\n", process.name());
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("calls.txt"))
        .and_then(|mut file| file.write_all(line.as_bytes()))
        .map_err(|e| EffectError::permanent(format!("cannot record the call of {function}: {e}")))
}

/// The calls file: `(process, function, key)` per raw call, in order.
pub fn calls(dir: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(dir.join("calls.txt"))
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, ' ').map(str::to_owned);
            let mut next = || {
                parts
                    .next()
                    .unwrap_or_else(|| panic!("a malformed call line: {line:?}"))
            };
            (next(), next(), next())
        })
        .collect()
}

pub fn processes_and_functions(calls: &[(String, String, String)]) -> Vec<String> {
    calls
        .iter()
        .map(|(process, function, _)| format!("{process} {function}"))
        .collect()
}
