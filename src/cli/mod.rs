//! One module per subcommand.

pub mod bench;
pub mod graph;
pub mod serve;
pub mod tasks;
