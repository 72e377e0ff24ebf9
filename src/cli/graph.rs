//! `radkit graph`.

/// Arguments of `radkit graph`.
#[derive(clap::Args)]
pub struct Args {}

/// Run `radkit graph`.
pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`radkit graph` is not built yet")
}
