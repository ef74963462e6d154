//! `lightning-store bench`: every scenario for a tiny bounded count against
//! a real server, checking the reported counts and that nothing failed.
//! Speed is shown by the benchmark's printed figures, never asserted here.

use crate::common;

use clap::Parser;
use common::TestServer;
use lightning_store::cli::bench::{self, Report};
use lightning_store::cli::{Cli, Command};
use lightning_store::core::agl1::gateway::GatewaySettings;
use lightning_store::gateway::GatewayConfig;
use lightning_store::server::ServerConfig;
use serde_json::{Value, json};

/// Runs `bench <args>` against `server` through the library and returns its report.
async fn bench(server: &TestServer, args: &[&str]) -> Report {
    let mut argv = vec!["lightning-store", "bench", "--server", &server.url];
    argv.extend_from_slice(args);
    // A generous duration: the count always ends these runs.
    argv.extend_from_slice(&["--duration-secs", "60"]);
    let Command::Bench(args) = Cli::try_parse_from(&argv).expect("valid arguments").command else {
        panic!("not the bench command");
    };
    bench::execute(args).await.expect("the benchmark runs")
}

/// Asserts that every row of `report` completed `ops` operations carrying
/// `items` items, without an error.
fn assert_rows(report: &Report, rows: usize, ops: u64, items: u64) {
    assert_eq!(report.rows.len(), rows, "{report:#?}");
    for row in &report.rows {
        assert_eq!(row.errors, 0, "{}: {:?}", row.name, row.first_error);
        assert_eq!(row.ops, ops, "{}", row.name);
        assert_eq!(row.items, items, "{}", row.name);
        assert_eq!(row.latency.samples > 0, ops > 0, "{}", row.name);
        for call in &row.calls {
            assert_eq!(call.errors, 0, "{} {}", row.name, call.name);
        }
    }
}

#[tokio::test]
async fn lifecycle_one_rollout_per_call() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(&server, &["lifecycle", "-c", "1,3", "--count", "7"]).await;
    assert_rows(&report, 2, 7, 70);
    let calls: Vec<(&str, u64)> = report.rows[1]
        .calls
        .iter()
        .map(|c| (c.name, c.calls))
        .collect();
    assert_eq!(
        calls,
        [
            ("EnqueueRollout", 7),
            ("DequeueRollout", 7),
            ("AddSpans", 7),
            ("UpdateAttempt", 7)
        ]
    );
    server.stop().await;
}

#[tokio::test]
async fn lifecycle_over_worker_sessions() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(
        &server,
        &[
            "lifecycle",
            "--mode",
            "session",
            "-c",
            "1,3",
            "--count",
            "9",
        ],
    )
    .await;
    assert_rows(&report, 2, 9, 90);
    assert_eq!(report.rows[0].name, "lifecycle session");
    let calls: Vec<(&str, u64)> = report.rows[1]
        .calls
        .iter()
        .map(|c| (c.name, c.calls))
        .collect();
    assert_eq!(
        calls,
        [("EnqueueRollout", 9), ("AddSpans", 9), ("UpdateAttempt", 9)]
    );
    server.stop().await;
}

#[tokio::test]
async fn lifecycle_with_batches_counts_lifecycles() {
    let server = TestServer::start(common::Backend::Memory).await;
    // 2 clients, batches of 4: the last batch is partial (3 of 4).
    let report = bench(
        &server,
        &[
            "lifecycle",
            "-c",
            "2",
            "--batch",
            "4",
            "--count",
            "11",
            "--spans-per-rollout",
            "2",
        ],
    )
    .await;
    assert_rows(&report, 1, 11, 22);
    // Each batch completes with one UpdateAttempts: 4 + 4 + 3.
    let calls: Vec<(&str, u64)> = report.rows[0]
        .calls
        .iter()
        .map(|c| (c.name, c.calls))
        .collect();
    assert_eq!(
        calls,
        [
            ("EnqueueRollouts", 3),
            ("DequeueRollouts", 3),
            ("AddSpans", 3),
            ("UpdateAttempts", 3)
        ]
    );
    server.stop().await;
}

#[tokio::test]
async fn ingest_through_add_spans_and_otlp() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(
        &server,
        &[
            "ingest",
            "-c",
            "2",
            "--count",
            "5",
            "--batch",
            "8",
            "--attempts",
            "3",
        ],
    )
    .await;
    assert_rows(&report, 2, 5, 40);
    assert_eq!(report.rows[0].name, "ingest AddSpans");
    assert_eq!(report.rows[1].name, "ingest OTLP Export");
    // The server was not started by the benchmark: no memory figures.
    assert!(report.rows.iter().all(|row| row.memory.is_none()));
    server.stop().await;
}

#[tokio::test]
async fn dispatch_pairs_every_enqueue_with_a_claim() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(
        &server,
        &["dispatch", "-c", "3", "--count", "12", "--rate", "500"],
    )
    .await;
    assert_rows(&report, 1, 12, 0);
    server.stop().await;
}

#[tokio::test]
async fn dispatch_through_worker_sessions() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(
        &server,
        &[
            "dispatch", "--mode", "session", "-c", "3", "--count", "12", "--rate", "500",
        ],
    )
    .await;
    assert_rows(&report, 1, 12, 0);
    server.stop().await;
}

#[tokio::test]
async fn fanout_delivers_every_round_to_every_subscriber() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(
        &server,
        &["fanout", "-c", "5", "--count", "3", "--settle-ms", "50"],
    )
    .await;
    assert_rows(&report, 1, 15, 0);
    server.stop().await;
}

#[tokio::test]
async fn query_returns_every_span() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(
        &server,
        &["query", "-c", "2", "--count", "4", "--spans", "300"],
    )
    .await;
    assert_rows(&report, 1, 4, 1200);
    server.stop().await;
}

#[tokio::test]
async fn read_model_fills_the_store_and_times_every_read() {
    let server = TestServer::start(common::Backend::Sqlite).await;
    let args = [
        "read-model",
        "--rollouts",
        "300",
        "--spans",
        "3000",
        "--span-bytes",
        "256",
        "--calls",
        "3",
        "--page-size",
        "20",
        "--versions",
        "5",
    ];
    let report = bench(&server, &args).await;
    assert_eq!(report.settings["rollouts"], 300);
    assert_eq!(report.settings["spans"], 3000);
    assert_eq!(report.rows.len(), 23, "{report:#?}");
    for row in &report.rows {
        assert_eq!(
            (row.ops, row.errors),
            (3, 0),
            "{}: {:?}",
            row.name,
            row.first_error
        );
        assert_eq!(row.calls[0].calls, 3, "{}: round trips", row.name);
    }
    let items = |name: &str| {
        let row = report.rows.iter().find(|r| r.name == name).unwrap();
        row.items / row.ops
    };
    // Full pages where the store holds enough matches; the aggregates answer.
    assert_eq!(items("first page"), 20);
    assert_eq!(items("deep page"), 20);
    assert_eq!(items("GetRolloutActivity"), 60);
    assert_eq!(
        items("GetQueuePosition (last)"),
        1,
        "the last queued rollout is queued"
    );
    assert_eq!(items("ListRecentFailures 10"), 10);
    // Every one of the 5 versions has ended rollouts, each mode a summary.
    assert!(items("GetTrainingSummary") >= 5, "{report:#?}");
    // The rollouts ended within minutes: a period per minute and mode.
    assert!(items("GetRewardTimeline") >= 2, "{report:#?}");
    // The first and last versions share tasks, rewarded under both.
    assert!(items("CompareVersions first, last") > 0, "{report:#?}");
    assert_eq!(items("sort reward desc"), 20);
    server.stop().await;
}

#[tokio::test]
async fn noop_health_checks() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(&server, &["noop", "-c", "1,4", "--count", "25"]).await;
    assert_rows(&report, 2, 25, 0);
    server.stop().await;
}

#[tokio::test]
async fn the_binary_prints_a_table() {
    let server = TestServer::start(common::Backend::Memory).await;
    let output = run_binary(&[
        "bench",
        "--server",
        &server.url,
        "noop",
        "-c",
        "2",
        "--count",
        "10",
    ])
    .await;
    let header = output.lines().next().unwrap();
    for column in [
        "SCENARIO",
        "CLIENTS",
        "OPS",
        "THROUGHPUT",
        "P99 MS",
        "ERRORS",
    ] {
        assert!(header.contains(column), "{output}");
    }
    assert!(output.contains("noop health check"), "{output}");
    server.stop().await;
}

#[tokio::test]
async fn the_binary_starts_and_stops_its_own_server_and_reports_memory() {
    let server_cmd = format!(
        "{} serve --store memory --listen {{addr}}",
        env!("CARGO_BIN_EXE_lightning-store")
    );
    let output = run_binary(&[
        "bench",
        "--json",
        "--server-cmd",
        &server_cmd,
        "ingest",
        "--protocol",
        "otlp",
        "-c",
        "1",
        "--count",
        "3",
        "--batch",
        "10",
    ])
    .await;
    let report: Value = serde_json::from_str(&output).unwrap();
    let row = &report["rows"][0];
    assert_eq!(row["ops"], 3, "{report:#}");
    assert_eq!(row["items"], 30);
    assert_eq!(row["errors"], 0);
    assert_eq!(row["memory"]["spans_stored"], 30, "{report:#}");
    assert!(
        report["server"]
            .as_str()
            .unwrap()
            .contains("serve --store memory")
    );
}

/// Runs the binary, asserts success and returns its stdout.
async fn run_binary(args: &[&str]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"));
    command.args(args).env_remove("LIGHTNING_STORE_SERVER");
    let output = tokio::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn bulk_enqueues_one_batch_while_probes_run() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(&server, &["bulk", "-c", "2", "--rollouts", "500"]).await;
    assert_eq!(report.rows.len(), 2, "{report:#?}");
    let (batch, probes) = (&report.rows[0], &report.rows[1]);
    assert_eq!(
        (batch.ops, batch.items, batch.errors),
        (1, 500, 0),
        "{batch:?}"
    );
    assert_eq!(probes.errors, 0, "{:?}", probes.first_error);
    // Each probe is one enqueue and one dequeue.
    for call in &probes.calls {
        assert_eq!(call.calls, probes.ops, "{}", call.name);
    }
    server.stop().await;
}

#[tokio::test]
async fn agl1_gateway_alternates_slices_and_merges_them_per_side() {
    let server = TestServer::start_with(
        common::Backend::Memory,
        ServerConfig {
            gateway: GatewayConfig {
                settings: Some(GatewaySettings::for_model("bench-model")),
                ..GatewayConfig::default()
            },
            ..ServerConfig::default()
        },
    )
    .await;
    // 14 calls per side in 3 slices: 5, 5 and 4, each slice ended by its count.
    let report = bench(
        &server,
        &[
            "agl1",
            "gateway",
            "-c",
            "2",
            "--count",
            "14",
            "--slices",
            "3",
            "--model-latency-ms",
            "1",
        ],
    )
    .await;
    assert_rows(&report, 2, 14, 0);
    assert_eq!(report.rows[0].name, "model server, direct");
    assert_eq!(report.rows[1].name, "through the gateway");
    // Every slice's calls are in its side's histogram.
    assert!(report.rows.iter().all(|row| row.latency.samples == 14));
    assert_eq!(report.settings["slices"], 3, "{report:#?}");
    for setting in ["overhead_c2_p50_ms", "overhead_c2_p99_ms"] {
        assert!(report.settings[setting].is_f64(), "{setting}: {report:#?}");
    }
    server.stop().await;
}

#[tokio::test]
async fn agl1_lifecycle_runs_each_rollout_to_its_end_and_the_trainers_reads() {
    let server = TestServer::start(common::Backend::Memory).await;
    let report = bench(
        &server,
        &[
            "agl1",
            "lifecycle",
            "-c",
            "2",
            "--count",
            "6",
            "--tokens",
            "10",
            "--calls",
            "2",
        ],
    )
    .await;
    assert_rows(&report, 1, 6, 0);
    assert_eq!(report.settings["trainer_reads"], true, "{report:#?}");
    // Every rollout ended, rewarded, judged: its two calls repeat one prompt,
    // which the trainer keeps once.
    let summary = server
        .client()
        .await
        .get_training_summary(lightning_store::proto::GetTrainingSummaryRequest::default())
        .await
        .unwrap()
        .into_inner();
    let versions: Vec<_> = summary
        .versions
        .iter()
        .map(|v| (v.model_version, v.rollouts, v.rewarded, v.training_rows))
        .collect();
    assert_eq!(versions, [(Some(0), 6, 6, 6)]);
    server.stop().await;
}

#[tokio::test]
async fn namespaces_measures_one_namespace_alone_and_beside_a_flood() {
    let server = TestServer::start(common::Backend::Memory).await;
    // 2 rounds of 2 phases, each ended by its count of B's lifecycles; the
    // flood ends with each flooded phase.
    let output = run_binary(&[
        "bench",
        "--json",
        "--server",
        &server.url,
        "namespaces",
        "-c",
        "1",
        "--count",
        "6",
        "--duration-secs",
        "60",
        "--rounds",
        "2",
        "--flood-clients",
        "2",
        "--spans-per-rollout",
        "3",
    ])
    .await;
    let report: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(report["scenario"], "namespaces", "{report:#}");
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "bench-measured alone",
            "bench-measured, bench-flooded flooded",
            "bench-flooded flood"
        ],
        "{report:#}"
    );
    for row in &rows[..2] {
        assert_eq!((&row["ops"], &row["items"]), (&json!(12), &json!(36)));
        assert_eq!(row["latency"]["samples"], 12, "{report:#}");
        assert!(row["latency"]["p99_ms"].as_f64().unwrap() > 0.0);
    }
    for row in rows {
        assert_eq!(row["errors"], 0, "{report:#}");
    }
    let notes = report["notes"].as_array().unwrap();
    assert!(notes[0].as_str().unwrap().contains(" p99 x"), "{report:#}");
    // The namespaces it created are deleted.
    let listed = server
        .client()
        .await
        .list_namespaces(lightning_store::proto::ListNamespacesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.namespaces.len(), 1, "{listed:?}");
    server.stop().await;
}

/// `bench export` seeds a small store on SQLite, then runs the binary's
/// `export` as a subprocess for every layout and every format, and
/// reports what each wrote and the memory of both sides.
#[tokio::test]
async fn export_runs_the_export_command_for_every_layout_and_format() {
    use clap::ValueEnum as _;
    use lightning_store::cli::client::ExportFormat;

    let dir = tempfile::tempdir().unwrap();
    let server_cmd = format!(
        "{} serve --store sqlite --database {} --listen {{addr}} --log warn",
        env!("CARGO_BIN_EXE_lightning-store"),
        dir.path().join("export.db").display()
    );
    let output = run_binary(&[
        "bench",
        "--json",
        "--server-cmd",
        &server_cmd,
        "export",
        "--rollouts",
        "30",
        "--spans-per-rollout",
        "4",
        "--timeout-secs",
        "60",
    ])
    .await;
    let report: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(report["settings"]["rollouts"], 30, "{report:#}");
    assert_eq!(report["settings"]["spans"], 120, "{report:#}");
    let exports = report["exports"].as_array().unwrap();
    assert_eq!(exports.len(), 3 * ExportFormat::value_variants().len());
    for run in exports {
        assert_eq!(run["error"], Value::Null, "{run:#}");
        assert_eq!(run["rollouts"], 30, "{run:#}");
        assert!(run["bytes"].as_u64().unwrap() > 0, "{run:#}");
        assert!(
            run["client_peak_rss_bytes"].as_u64().unwrap() > 0,
            "{run:#}"
        );
        let before = run["server_rss_before_bytes"].as_u64().unwrap();
        assert!(run["server_rss_peak_bytes"].as_u64().unwrap() >= before);
    }
    let records = |layout: &str, format: &str| {
        exports
            .iter()
            .find(|run| run["layout"] == layout && run["format"] == format)
            .map(|run| run["records"].clone())
    };
    // A record per rollout; a training row per LLM call (two of the four
    // spans); a conversation per rollout.
    assert_eq!(records("rollouts", "jsonl"), Some(json!(30)));
    assert_eq!(records("rollouts", "jsonl.gz"), Some(json!(30)));
    assert_eq!(records("triplets", "jsonl"), Some(json!(60)));
    assert_eq!(records("triplets", "parquet"), Some(json!(60)));
    assert_eq!(records("messages", "jsonl"), Some(json!(30)));
    assert_eq!(records("messages", "parquet"), Some(json!(30)));
}
