//! `bench namespaces`: whether one training's flood holds up another's
//! calls. Namespace B (`--measured-namespace`) runs unary lifecycles (the
//! `lifecycle` scenario's load) alone, then while namespace A
//! (`--flooded-namespace`) is flooded at full speed by `--flood-clients`
//! clients of the same lifecycles; the phases alternate for `--rounds`
//! rounds, the order swapped every round so that neither kind always runs
//! first on a warmer store. B's latencies of each kind are merged and
//! compared (p50 and p99 ratios; the goal is B's p99 with the flood within
//! 2x of B's alone). The namespaces are created when missing, and those
//! created are deleted at the end (unless `--keep-namespaces`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::args::{LoadArgs, SpanArgs};
use super::driver::{Budget, Measured};
use super::error::{BenchError, BenchResult};
use super::lifecycle::{UnaryLoad, unary_load, unary_load_within};
use super::limits::Limits;
use super::payload::StoreSpan;
use super::report::{Report, Row, RowSpec};
use super::target::{StoreClient, Target};
use lightning_store_proto as pb;

/// B's lifecycles per phase when `--count` is not given (the duration
/// usually ends a phase first).
const DEFAULT_COUNT: u64 = 10_000_000;

/// The goal: B's p99 with the flood at most this many times B's alone.
const GOAL_P99_RATIO: f64 = 2.0;

/// Arguments of `bench namespaces`.
#[derive(Debug, Clone, clap::Args)]
pub struct NamespacesArgs {
    /// `-c`: the clients of namespace B (default 1); `--duration-secs`
    /// and `--count`: the bounds of each phase (B's lifecycles).
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    spans: SpanArgs,
    /// Clients flooding namespace A, each as fast as the server answers.
    #[arg(long, default_value_t = 4)]
    flood_clients: usize,
    /// Rounds of a phase alone and a phase with the flood.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Spans added per rollout (in one AddSpans call), in both namespaces.
    #[arg(long, default_value_t = 10)]
    spans_per_rollout: usize,
    /// The namespace flooded (A).
    #[arg(long, default_value = "bench-flooded")]
    flooded_namespace: String,
    /// The namespace measured (B).
    #[arg(long, default_value = "bench-measured")]
    measured_namespace: String,
    /// Keeps the namespaces the benchmark created (default: deleted at the end).
    #[arg(long)]
    keep_namespaces: bool,
}

/// Runs the scenario once per concurrency level of B's clients.
pub async fn run(target: &mut Target, args: NamespacesArgs, progress: bool) -> BenchResult<Report> {
    if args.rounds == 0 || args.flood_clients == 0 {
        return Err(BenchError::new(
            "--rounds and --flood-clients must be at least 1",
        ));
    }
    if args.flooded_namespace == args.measured_namespace {
        return Err(BenchError::new(
            "--flooded-namespace and --measured-namespace must differ",
        ));
    }
    let levels = args.load.levels(&[1])?;
    let limits = args.load.limits(DEFAULT_COUNT)?;
    let span = StoreSpan::new(args.spans.span_bytes);
    let mut report = Report::new(
        "namespaces",
        json!({
            "flooded_namespace": args.flooded_namespace,
            "measured_namespace": args.measured_namespace,
            "flood_clients": args.flood_clients,
            "rounds": args.rounds,
            "spans_per_rollout": args.spans_per_rollout,
            "span_bytes": span.encoded_len(),
            "duration_secs": limits.duration.as_secs_f64(),
            "count": limits.count,
        }),
    );
    let mut admin = target.pool(1).await?.store(0);
    let mut created = Vec::new();
    for name in [&args.flooded_namespace, &args.measured_namespace] {
        if create(&mut admin, name).await? {
            created.push(name.clone());
        }
    }
    let result = measure(target, &args, &levels, limits, &span, progress, &mut report).await;
    if !args.keep_namespaces {
        for name in created {
            admin
                .delete_namespace(pb::DeleteNamespaceRequest { name: name.clone() })
                .await
                .map_err(|status| {
                    BenchError::new(format!("cannot delete namespace {name:?}: {status}"))
                })?;
        }
    }
    result.map(|()| report)
}

/// Creates the namespace `name`; returns whether it was created (false: it
/// existed).
async fn create(admin: &mut StoreClient, name: &str) -> BenchResult<bool> {
    let request = pb::CreateNamespaceRequest {
        name: name.to_owned(),
        ..Default::default()
    };
    match admin.create_namespace(request).await {
        Ok(_) => Ok(true),
        Err(status) if status.code() == tonic::Code::AlreadyExists => Ok(false),
        Err(status) => Err(BenchError::new(format!(
            "cannot create namespace {name:?} (an admin token's call): {status}"
        ))),
    }
}

/// Runs the rounds of every level and adds their rows and ratios to `report`.
async fn measure(
    target: &Target,
    args: &NamespacesArgs,
    levels: &[usize],
    limits: Limits,
    span: &StoreSpan,
    progress: bool,
    report: &mut Report,
) -> BenchResult<()> {
    let flood_pool = target
        .pool_in(args.flood_clients, &args.flooded_namespace)
        .await?;
    for &clients in levels {
        let pool = target.pool_in(clients, &args.measured_namespace).await?;
        let mut alone: Option<Measured> = None;
        let mut flooded: Option<Measured> = None;
        let mut flood: Option<Measured> = None;
        for round in 0..args.rounds {
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for with_flood in order {
                let label = format!(
                    "round {} of {}, B c={clients}{}",
                    round + 1,
                    args.rounds,
                    if with_flood { ", A flooded" } else { ", alone" }
                );
                let measured = unary_load(
                    &pool,
                    clients,
                    limits,
                    span,
                    args.spans_per_rollout,
                    &label,
                    progress,
                );
                if !with_flood {
                    append(&mut alone, measured.await?);
                    continue;
                }
                // The flood lasts as long as B's phase: its budget, a
                // little longer, is spent when B's phase ends.
                let flood_limits = Limits {
                    count: u64::MAX,
                    duration: limits.duration + Duration::from_secs(1),
                };
                let budget = Arc::new(Budget::new(flood_limits));
                let flooding = unary_load_within(
                    &flood_pool,
                    UnaryLoad {
                        clients: args.flood_clients,
                        limits: flood_limits,
                        span,
                        spans_per_rollout: args.spans_per_rollout,
                    },
                    budget.clone(),
                    "flood",
                    false,
                );
                let measured = async {
                    let measured = measured.await;
                    budget.exhaust();
                    measured
                };
                let (measured, flooding) = tokio::join!(measured, flooding);
                append(&mut flooded, measured?);
                append(&mut flood, flooding?);
            }
        }
        let (alone, flooded, flood) = (
            alone.expect("a phase ran"),
            flooded.expect("a phase ran"),
            flood.expect("a phase ran"),
        );
        let lifecycle = |name: String, clients: usize| RowSpec {
            name,
            clients,
            op_unit: "lifecycles",
            item_unit: Some("spans"),
            latency_of: "one lifecycle (4 calls in sequence)",
        };
        let alone_row = Row::new(
            lifecycle(format!("{} alone", args.measured_namespace), clients),
            &alone,
        );
        let flooded_row = Row::new(
            lifecycle(
                format!(
                    "{}, {} flooded",
                    args.measured_namespace, args.flooded_namespace
                ),
                clients,
            ),
            &flooded,
        );
        let flood_row = Row::new(
            lifecycle(
                format!("{} flood", args.flooded_namespace),
                args.flood_clients,
            ),
            &flood,
        );
        let ratio = |with: f64, without: f64| with / without.max(f64::MIN_POSITIVE);
        let p99 = ratio(flooded_row.latency.p99_ms, alone_row.latency.p99_ms);
        report.notes.push(format!(
            "c={clients}: {} with {} flooded / alone: p50 x{:.2}, p99 x{p99:.2}, throughput x{:.2} \
             (goal: p99 within x{GOAL_P99_RATIO:.0}: {})",
            args.measured_namespace,
            args.flooded_namespace,
            ratio(flooded_row.latency.p50_ms, alone_row.latency.p50_ms),
            ratio(flooded_row.ops_per_sec, alone_row.ops_per_sec),
            if p99 <= GOAL_P99_RATIO {
                "met"
            } else {
                "not met"
            },
        ));
        report.rows.extend([alone_row, flooded_row, flood_row]);
    }
    Ok(())
}

/// Adds a later phase's records to those of the earlier phases of its kind.
fn append(merged: &mut Option<Measured>, measured: Measured) {
    match merged {
        Some(merged) => merged.append(&measured),
        None => *merged = Some(measured),
    }
}
