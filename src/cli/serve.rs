//! `radkit serve`.

/// Arguments of `radkit serve`.
#[derive(clap::Args)]
pub struct Args {}

/// Run `radkit serve`.
pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`radkit serve` is not built yet")
}
