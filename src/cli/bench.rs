//! `radkit bench`.

/// Arguments of `radkit bench`.
#[derive(clap::Args)]
pub struct Args {}

/// Run `radkit bench`.
pub async fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`radkit bench` is not built yet")
}
