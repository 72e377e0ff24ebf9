//! `radkit tasks`.

/// Arguments of `radkit tasks`.
#[derive(clap::Args)]
pub struct Args {}

/// Run `radkit tasks`.
pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`radkit tasks` is not built yet")
}
