//! `lightning-store bench`: a load generator that drives a running server
//! over gRPC (or one it starts itself) and reports throughput and latency.
//!
//! Every scenario is bounded by an operation count and a duration, whichever
//! ends first; every call carries a deadline. Latencies are measured on the
//! client with a monotonic clock and kept in HDR histograms.
//!
//! Layout: [`args`] is the command line, [`limits`] a run's bounds, [`error`]
//! its failures; [`target`] reaches the server under test, [`driver`] runs the
//! client tasks, [`stats`] records latencies, [`progress`] draws the live
//! line, [`report`] prints the results, [`payload`] builds spans, [`wire`]
//! keeps the client's own encoding cost low, [`http`] speaks HTTP for the
//! agent-lightning 1.x scenarios ([`agl1`]), and each scenario has its own file
//! ([`namespaces`]: one namespace's lifecycles while another is flooded;
//! [`export`]: a whole store's export, run as the `export` command).

mod agl1;
pub mod args;
mod bulk;
mod console;
mod dispatch;
mod driver;
pub mod error;
mod export;
mod fanout;
mod http;
mod ingest;
mod lifecycle;
pub mod limits;
mod namespaces;
mod noop;
mod otlp_http;
mod payload;
mod progress;
mod query;
mod read_model;
pub mod report;
mod seed;
mod session;
mod stats;
mod target;
mod wire;

use std::io::Write as _;

pub use self::args::{LoadArgs, SpanArgs, TargetArgs};
pub use self::error::{BenchError, BenchResult};
pub use self::limits::Limits;
pub use self::report::Report;

/// Arguments of `bench`: where the server is, how to print, and the scenario.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The scenario to run.
    #[command(subcommand)]
    pub scenario: Scenario,
    /// Where the server under test is.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Prints the results as JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The benchmark scenarios.
#[derive(Debug, clap::Subcommand)]
pub enum Scenario {
    /// Full rollout lifecycles: EnqueueRollout, DequeueRollout, AddSpans
    /// (10 spans in one call), UpdateAttempt(succeeded); with --batch N the
    /// batch RPCs, UpdateAttempts included.
    Lifecycle(lifecycle::LifecycleArgs),
    /// Span ingest through AddSpans, OTLP/gRPC TraceService/Export and
    /// OTLP/HTTP `POST /v1/traces`, N spans per request, into running attempts.
    Ingest(ingest::IngestArgs),
    /// Enqueue-to-claim latency for idle workers parked in a waiting
    /// DequeueRollout or holding a worker session.
    Dispatch(dispatch::DispatchArgs),
    /// Completion delivery latency to subscribers parked in WaitForRollouts.
    Fanout(fanout::FanoutArgs),
    /// QuerySpans of one rollout holding many spans.
    Query(query::QueryArgs),
    /// The console's reads on a large store: fills it (100,000 rollouts,
    /// 1,000,000 spans by default), then times each query of the Rollouts
    /// page and each aggregate read, as the server's time per call.
    ReadModel(read_model::ReadModelArgs),
    /// grpc.health.v1 Health/Check: the transport's ceiling.
    Noop(noop::NoopArgs),
    /// One large EnqueueRollouts while other clients enqueue and dequeue:
    /// the batch's duration and the others' latency meanwhile.
    Bulk(bulk::BulkArgs),
    /// What open console pages cost the store's calls (lifecycles without
    /// and with live pages, alternated) and how soon a change reaches an
    /// open page.
    Console(console::ConsoleArgs),
    /// A whole store's export: seeds it (100,000 ended rollouts, 1,000,000
    /// spans by default), then runs `lightning-store export` as a
    /// subprocess for each layout and format: rollouts/s, MB/s, the
    /// server's memory growth and the client's peak memory.
    Export(export::ExportBenchArgs),
    /// Namespace B's lifecycles alone, then while namespace A is flooded
    /// by several clients (phases alternated): B's latency ratio. Creates
    /// the namespaces (an admin token's calls) and deletes them at the end.
    Namespaces(namespaces::NamespacesArgs),
    /// agent-lightning 1.x's server API over HTTP (this server or
    /// agentlightning's own): event POSTs, rollout GETs, the gateway.
    Agl1(agl1::Agl1Args),
}

/// Runs a scenario and returns its report; the server started with
/// `--server-cmd`, if any, is stopped whatever the outcome.
pub async fn execute(args: BenchArgs) -> BenchResult<Report> {
    let show_progress = progress::enabled();
    let probe = match args.scenario {
        Scenario::Agl1(_) => target::Probe::Http,
        _ => target::Probe::Grpc,
    };
    let mut target = target::Target::open(&args.target, probe).await?;
    let result = run_scenario(&mut target, args.scenario, show_progress).await;
    let stopped = target.stop().await;
    let mut report = result?;
    stopped?;
    report.server = target.description();
    Ok(report)
}

/// Runs `bench` and prints its report (a table, or JSON with `--json`).
pub async fn run(args: BenchArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let json = args.json;
    let report = execute(args).await?;
    let text = if json {
        report.to_json()
    } else {
        report.to_table()
    };
    match writeln!(std::io::stdout().lock(), "{text}") {
        // A reader that stopped early (`| head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write the report: {e}").into())
        }
        _ => Ok(()),
    }
}

async fn run_scenario(
    target: &mut target::Target,
    scenario: Scenario,
    progress: bool,
) -> BenchResult<Report> {
    match scenario {
        Scenario::Lifecycle(args) => lifecycle::run(target, args, progress).await,
        Scenario::Ingest(args) => ingest::run(target, args, progress).await,
        Scenario::Dispatch(args) => dispatch::run(target, args, progress).await,
        Scenario::Fanout(args) => fanout::run(target, args, progress).await,
        Scenario::Query(args) => query::run(target, args, progress).await,
        Scenario::ReadModel(args) => read_model::run(target, args, progress).await,
        Scenario::Noop(args) => noop::run(target, args, progress).await,
        Scenario::Bulk(args) => bulk::run(target, args, progress).await,
        Scenario::Agl1(args) => agl1::run(target, args, progress).await,
        Scenario::Console(args) => console::run(target, args, progress).await,
        Scenario::Namespaces(args) => namespaces::run(target, args, progress).await,
        Scenario::Export(args) => export::run(target, args, progress).await,
    }
}
