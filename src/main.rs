//! The `radkit` command: the CLI of [`radkit::cli`] over the demo skills (`src/demo`).

mod demo;

/// jemalloc (the `jemalloc` feature), counting each thread's allocations for `radkit bench machine`
/// (one thread-local increment each).
#[global_allocator]
static ALLOCATOR: radkit::cli::CountingAllocator = radkit::cli::CountingAllocator;

fn main() -> std::process::ExitCode {
    radkit::cli::App::new()
        .name("radkit research agent")
        .description("Drafts, critiques and revises research notes, asking a human when the critic is unsure (scripted models); also a streaming report and a ticker.")
        .engine(demo::engine)
        .main()
}
