//! The skills the `radkit` binary serves: the research loop in its three forms (the
//! `research_loop` example's own files, compiled here too), a streaming report, a ticker for
//! clusters and benchmarks, and a conformance skill for protocol test suites. `research_loop_v2` and
//! `ticker` are registered with `#[flow_skill]`; [`engine`] adds the rest, the scripted models and
//! the `tick` tool.

pub mod conformance;
#[path = "../../examples/research_loop/macro_form.rs"]
pub mod macro_form;
#[path = "../../examples/research_loop/reducer_form.rs"]
pub mod reducer_form;
pub mod report;
#[path = "../../examples/research_loop/shared.rs"]
pub mod shared;
#[path = "../../examples/research_loop/table_form.rs"]
pub mod table_form;
pub mod ticker;

use radkit::engine::EngineBuilder;

/// The demo configuration: the research forms, the report, the conformance skill, the scripted models
/// and the `tick` tool; a message that names no skill runs `research_loop_v2` (`radkit serve
/// --default-skill <id>` chooses another). `max_steps` is set here, from the ticker's
/// limit, so the largest count the ticker accepts always fits.
pub fn engine(builder: EngineBuilder) -> EngineBuilder {
    shared::research_forms(builder)
        .skill(report::skill())
        .skill(conformance::Conformance)
        .map_effects(ticker::with_tick_tool)
        .max_steps(ticker::MAX_TICKS + 1)
}
