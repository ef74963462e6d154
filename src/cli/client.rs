//! Client subcommands (placeholder until the client lands).

use crate::server::ServeError;

/// Client subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Prints store statistics.
    Stats,
}

/// Runs a client subcommand.
pub async fn run(_command: ClientCommand) -> Result<(), ServeError> {
    Ok(())
}
