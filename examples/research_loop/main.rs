//! The seed's research loop (draft -> critique -> approve / revise / ask a human) in radkit's three
//! authoring forms, served over A2A with the scripted models:
//!
//! ```sh
//! cargo run --example research_loop -- serve
//! ```
//!
//! * `research_loop_v2` — the macro form (`macro_form.rs`), registered by `#[flow_skill]`; the
//!   default for a message that names no skill,
//! * `research_table` — the same flow as a step table of plain functions (`table_form.rs`),
//! * `research_reducer` — and as an explicit reducer (`reducer_form.rs`).
//!
//! Pick one with message metadata `{"skillId": "research_table"}`. `--llm openai` answers the
//! `research` and `critic` models with an OpenAI-compatible endpoint instead.

mod macro_form;
mod reducer_form;
mod shared;
mod table_form;

use std::process::ExitCode;

fn main() -> ExitCode {
    radkit::cli::App::new()
        .name("research agent")
        .description("Drafts, critiques and revises research notes, asking a human when the critic is unsure.")
        .engine(shared::research_forms)
        .main()
}
