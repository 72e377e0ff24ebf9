//! How much a task may do without asking: the [`PermissionMode`] a task carries and a tool declares
//! as its minimum. It is part of the contract between skills, tools and the journal (a task's mode is
//! journaled when it is created), so it lives here, below the engine that enforces it; this module
//! only defines the scale and never decides anything itself.

use serde::{Deserialize, Serialize};

/// How much a task may do without asking, from least to most.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Read-only: only tools that declare `Plan` run; others are refused.
    Plan,
    /// Ask before any tool that needs more than `Default` (edits, destructive tools).
    #[default]
    Default,
    /// Edits run; ask before destructive tools.
    AcceptEdits,
    /// Everything runs without asking.
    Bypass,
}

impl PermissionMode {
    /// Parse `plan`, `default`, `acceptEdits` (or `accept-edits`), `bypass` (or `bypassPermissions`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "plan" => Some(PermissionMode::Plan),
            "default" => Some(PermissionMode::Default),
            "acceptEdits" | "accept-edits" | "accept_edits" => Some(PermissionMode::AcceptEdits),
            "bypass" | "bypassPermissions" => Some(PermissionMode::Bypass),
            _ => None,
        }
    }
}
