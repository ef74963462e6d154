//! `bench noop`: grpc.health.v1 Health/Check, the cheapest call the server
//! answers: the transport's ceiling on this machine, against which the
//! other scenarios can be read.

use std::time::Instant;

use crate::connection::AuthChannel;
use serde_json::json;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use super::args::LoadArgs;
use super::driver::{TaskContext, run_tasks};
use super::error::BenchResult;
use super::report::{Report, Row, RowSpec};
use super::stats::{Recorder, status_text};
use super::target::Target;

/// Calls per run when `--count` is not given.
const DEFAULT_COUNT: u64 = 100_000_000;

/// Arguments of `bench noop`.
#[derive(Debug, Clone, clap::Args)]
pub struct NoopArgs {
    #[command(flatten)]
    load: LoadArgs,
}

/// Runs the scenario once per concurrency level (default 1, 16 and 64 clients).
pub async fn run(target: &mut Target, args: NoopArgs, progress: bool) -> BenchResult<Report> {
    let levels = args.load.levels(&[1, 16, 64])?;
    let limits = args.load.limits(DEFAULT_COUNT)?;
    let mut report = Report::new(
        "noop",
        json!({
            "duration_secs": limits.duration.as_secs_f64(),
            "count": limits.count,
        }),
    );
    for clients in levels {
        let pool = target.pool(clients).await?;
        let label = format!("noop c={clients}");
        let measured = run_tasks(&label, clients, limits, progress, |ctx| {
            let client = pool.health(ctx.index);
            check_task(ctx, client)
        })
        .await?;
        report.rows.push(Row::new(
            RowSpec {
                name: "noop health check".to_owned(),
                clients,
                op_unit: "calls",
                item_unit: None,
                latency_of: "one Health/Check call",
            },
            &measured,
        ));
    }
    Ok(report)
}

async fn check_task(ctx: TaskContext, mut client: HealthClient<AuthChannel>) -> Recorder {
    let TaskContext {
        budget,
        mut recorder,
        ..
    } = ctx;
    while budget.take(1) == 1 {
        let start = Instant::now();
        match client
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
        {
            Ok(_) => recorder.success(start.elapsed(), 1, 0),
            Err(status) => recorder.failure(status_text(&status)),
        }
    }
    recorder
}
