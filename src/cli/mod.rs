//! The command line: `serve` runs the server and `token` makes access
//! tokens; the other subcommands, a client for looking inside (and driving) a
//! running store and the benchmark, come from `lightning-store-cli`.

pub mod serve;
#[cfg(test)]
mod tests;
mod token;

use clap::{Parser, Subcommand};

pub use self::serve::ServeArgs;
use crate::server;
pub use lightning_store_cli::{bench, client, connection};

/// lightning-store: the LightningStore of agent-lightning as a gRPC service.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level subcommands.
// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the gRPC server.
    Serve(Box<ServeArgs>),
    /// Drives a server with a load scenario and reports throughput and latency.
    Bench(bench::BenchArgs),
    /// Makes access tokens and their lines for the tokens file.
    #[command(subcommand)]
    Token(token::TokenCommand),
    #[command(flatten)]
    Client(client::ClientCommand),
}

/// Returns the process exit code for a command that failed with `error`:
/// `64 + code` for a failed call, 78 when the server cannot be reached, 2 for
/// a bad `--server`, 1 otherwise.
pub fn exit_code(error: &(dyn std::error::Error + 'static)) -> u8 {
    error.downcast_ref::<client::ClientError>().map_or(
        lightning_store_cli::exit::FAILURE_EXIT,
        client::ClientError::exit_code,
    )
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<(), server::ServeError> {
    match cli.command {
        Command::Serve(args) => serve::serve(*args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Token(command) => token::run(command),
        Command::Client(command) => client::run(command).await.map_err(Into::into),
    }
}
