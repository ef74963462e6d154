//! Client subcommands: look inside a running store (readable tables by
//! default, agent-lightning's JSON shapes with `--json`) and drive it from a
//! shell (enqueue, start, dequeue, add a span, complete an attempt).

//!
//! The commands depend on the generated client ([`lightning_store_proto`]) and the
//! shared client module ([`crate::connection`]), never on the server's internals
//! (a test in `src/client.rs` keeps it so): `args` parses the command line, `inspect`
//! and `drive` hold the commands that read and that write, `namespaces`
//! manages namespaces, `export` takes a run's data out, `json` renders
//! agent-lightning's JSON shapes and `text` the tables.

use std::time::Duration;

use crate::connection::error_chain;
use lightning_store_proto::lightning_store_service_client::LightningStoreServiceClient;

/// Writes a line to stdout like `println!`, returning the write error (a
/// reader that stopped early, as `| head` or `| grep -q` do, ends the command
/// quietly instead of panicking: see [`run`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
            .map_err($crate::client::ClientError::Output)?
    }};
}

/// How long connecting to the server may take before the command gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

mod args;
mod drive;
pub mod error;
mod export;
mod inspect;
mod json;
mod namespaces;
mod session;
mod text;
mod training;

pub use self::error::{ClientError, ClientResult};
use self::session::Session;
pub use args::{
    AddSpanArgs, AttemptsArgs, CompleteArgs, DequeueArgs, EnqueueArgs, ExportArgs, ExportFormat,
    ExportLayoutArg, NamespaceCreateArgs, NamespaceDeleteArgs, PageArgs, ResourcesArgs,
    RolloutArgs, RolloutsArgs, SpansArgs, StartArgs, TrainingArgs, WorkersArgs,
};

/// Client subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Lists rollouts, each with its latest attempt.
    Rollouts(WithOptions<RolloutsArgs>),
    /// Shows one rollout with all its attempts.
    Rollout(WithOptions<RolloutArgs>),
    /// Lists the attempts of a rollout.
    Attempts(WithOptions<AttemptsArgs>),
    /// Lists the spans of a rollout.
    Spans(WithOptions<SpansArgs>),
    /// Lists resources snapshots, or shows one.
    Resources(WithOptions<ResourcesArgs>),
    /// Lists workers, or shows one.
    Workers(WithOptions<WorkersArgs>),
    /// Shows store statistics.
    Stats(ClientOptions),
    /// Shows reward by policy version: for each resources version (or
    /// agent-lightning 1.x model version) and mode, the rollouts that ended
    /// as succeeded or failed, the success rate, the reward's mean and
    /// percentiles, how long the rollouts took, their tokens and their
    /// model calls' latency.
    Training(WithOptions<TrainingArgs>),
    /// Enqueues a rollout and prints it.
    Enqueue(WithOptions<EnqueueArgs>),
    /// Creates a rollout with its first attempt already started, bypassing
    /// the queue (no queued rollout is claimed), and prints it.
    Start(WithOptions<StartArgs>),
    /// Claims the rollout at the head of the queue and prints it with its new attempt.
    Dequeue(WithOptions<DequeueArgs>),
    /// Adds a span to an attempt and prints it with its sequence id.
    AddSpan(WithOptions<AddSpanArgs>),
    /// Marks an attempt succeeded or failed and prints it.
    Complete(WithOptions<CompleteArgs>),
    /// Writes the rollouts that had ended when it starts, each one whole,
    /// as JSON Lines (see docs/export.md); `--resume` continues an
    /// interrupted export.
    Export(WithOptions<ExportArgs>),
    /// Creates, lists and deletes namespaces (an admin token's calls).
    #[command(subcommand)]
    Namespaces(NamespacesCommand),
}

/// The `namespaces` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum NamespacesCommand {
    /// Creates an empty namespace.
    Create(WithOptions<NamespaceCreateArgs>),
    /// Lists the namespaces with their counts and the bytes they take.
    List(ClientOptions),
    /// Deletes a namespace and every record in it (in the background; its
    /// name answers NOT_FOUND at once).
    Delete(WithOptions<NamespaceDeleteArgs>),
}

/// Options shared by every client subcommand.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Client options")]
pub struct ClientOptions {
    /// The lightning-store server: `host:port` or an `http://` URL.
    #[arg(long, env = "LIGHTNING_STORE_SERVER", default_value = "127.0.0.1:4747")]
    pub server: String,
    /// TLS and token.
    #[command(flatten)]
    pub connect: crate::connection::ConnectArgs,
    /// Prints JSON in agent-lightning's shapes instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The arguments of one client subcommand plus the shared options.
#[derive(Debug, clap::Args)]
pub struct WithOptions<A: clap::Args> {
    /// The subcommand's own arguments.
    #[command(flatten)]
    pub args: A,
    /// The shared client options.
    #[command(flatten)]
    pub options: ClientOptions,
}

impl ClientOptions {
    /// Returns a session connected to the server named by `--server`.
    async fn connect(&self) -> ClientResult<Session> {
        let url = crate::connection::server_url(&self.server).map_err(ClientError::Address)?;
        let endpoint = self.connect.endpoint(&url).map_err(ClientError::Address)?;
        let bearer = self.connect.call_metadata().map_err(ClientError::Address)?;
        let channel = endpoint
            .connect_timeout(CONNECT_TIMEOUT)
            .connect()
            .await
            .map_err(|e| ClientError::Connect {
                url,
                reason: error_chain(&e),
            })?;
        Ok(Session {
            client: LightningStoreServiceClient::with_interceptor(channel, bearer)
                .max_decoding_message_size(usize::MAX),
            json: self.json,
        })
    }
}

/// Runs a client subcommand.
pub async fn run(command: ClientCommand) -> Result<(), ClientError> {
    match dispatch(command).await {
        // The reader of our output went away (`| head`): nothing to report.
        Err(ClientError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => result,
    }
}

async fn dispatch(command: ClientCommand) -> ClientResult {
    use ClientCommand as C;
    match command {
        C::Rollouts(c) => inspect::rollouts(c.options.connect().await?, c.args).await,
        C::Rollout(c) => inspect::rollout(c.options.connect().await?, c.args).await,
        C::Attempts(c) => inspect::attempts(c.options.connect().await?, c.args).await,
        C::Spans(c) => inspect::spans(c.options.connect().await?, c.args).await,
        C::Resources(c) => inspect::resources(c.options.connect().await?, c.args).await,
        C::Workers(c) => inspect::workers(c.options.connect().await?, c.args).await,
        C::Stats(options) => inspect::stats(options.connect().await?).await,
        C::Training(c) => training::training(c.options.connect().await?, c.args).await,
        C::Enqueue(c) => drive::enqueue(c.options.connect().await?, c.args).await,
        C::Start(c) => drive::start(c.options.connect().await?, c.args).await,
        C::Dequeue(c) => drive::dequeue(c.options.connect().await?, c.args).await,
        C::AddSpan(c) => drive::add_span(c.options.connect().await?, c.args).await,
        C::Complete(c) => drive::complete(c.options.connect().await?, c.args).await,
        C::Export(c) => export::export(c.options.connect().await?, c.args).await,
        C::Namespaces(NamespacesCommand::Create(c)) => {
            namespaces::create(c.options.connect().await?, c.args).await
        }
        C::Namespaces(NamespacesCommand::List(options)) => {
            namespaces::list(options.connect().await?).await
        }
        C::Namespaces(NamespacesCommand::Delete(c)) => {
            namespaces::delete(c.options.connect().await?, c.args).await
        }
    }
}
