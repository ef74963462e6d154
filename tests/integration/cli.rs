//! The client subcommands of the `lightning-store` binary against a real server.

use crate::common;

use std::process::Output;

use common::TestServer;
use serde_json::Value;

/// Runs the binary with `args` against `server` and returns its output.
async fn cli(server: &TestServer, args: &[&str]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"));
    command
        .args(args)
        .args(["--server", &server.url])
        .env_remove("LIGHTNING_STORE_SERVER");
    tokio::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .unwrap()
}

/// Runs the binary, asserts success and returns its stdout.
async fn ok(server: &TestServer, args: &[&str]) -> String {
    let output = cli(server, args).await;
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs the binary with `--json`, asserts success and parses its stdout.
async fn ok_json(server: &TestServer, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let stdout = ok(server, &args).await;
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?} printed {stdout:?}: {e}"))
}

#[tokio::test]
async fn drives_a_rollout_from_enqueue_to_completion() {
    let server = TestServer::start(common::Backend::Memory).await;

    let enqueued = ok_json(
        &server,
        &[
            "enqueue",
            "--input",
            r#"{"question": "2+2"}"#,
            "--mode",
            "train",
            "--max-attempts",
            "2",
            "--retry-on",
            "failed,timeout",
        ],
    )
    .await;
    let rollout_id = enqueued["rollout_id"].as_str().unwrap().to_owned();
    assert_eq!(enqueued["status"], "queuing");
    assert_eq!(enqueued["input"]["question"], "2+2");
    assert_eq!(enqueued["mode"], "train");
    assert_eq!(enqueued["config"]["max_attempts"], 2);
    assert_eq!(
        enqueued["config"]["retry_condition"],
        serde_json::json!(["failed", "timeout"])
    );
    assert!(enqueued["start_time"].as_f64().unwrap() > 0.0);
    assert!(enqueued["end_time"].is_null());
    assert!(enqueued.get("attempt").is_none());

    let table = ok(&server, &["rollouts"]).await;
    let row = table
        .lines()
        .find(|line| line.contains(&rollout_id))
        .unwrap_or_else(|| panic!("no row for {rollout_id} in {table:?}"));
    assert!(row.contains("queuing"), "{row:?}");
    assert!(row.contains("train"), "{row:?}");

    let claimed = ok_json(&server, &["dequeue", "--worker-id", "worker-1"]).await;
    assert_eq!(claimed["rollout_id"], rollout_id.as_str());
    assert_eq!(claimed["status"], "preparing");
    assert_eq!(claimed["attempt"]["worker_id"], "worker-1");
    assert_eq!(claimed["attempt"]["sequence_id"], 1);
    let attempt_id = claimed["attempt"]["attempt_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let span = ok_json(
        &server,
        &[
            "add-span",
            &rollout_id,
            &attempt_id,
            "--name",
            "agent.step",
            "--attr",
            "reward=1.5",
            "--attr",
            "turns=3",
            "--attr",
            "done=true",
            "--attr",
            "label=hello",
        ],
    )
    .await;
    assert_eq!(span["sequence_id"], 1);
    assert_eq!(span["name"], "agent.step");
    assert_eq!(span["attempt_id"], attempt_id.as_str());
    assert_eq!(span["trace_id"].as_str().unwrap().len(), 32);
    assert_eq!(span["span_id"].as_str().unwrap().len(), 16);
    assert_eq!(
        span["attributes"],
        serde_json::json!({"reward": 1.5, "turns": 3, "done": true, "label": "hello"})
    );

    let completed = ok_json(&server, &["complete", &rollout_id]).await;
    assert_eq!(completed["attempt_id"], attempt_id.as_str());
    assert_eq!(completed["status"], "succeeded");
    assert!(completed["end_time"].as_f64().is_some());

    let rollout = ok_json(&server, &["rollout", &rollout_id]).await;
    assert_eq!(rollout["status"], "succeeded");
    assert!(rollout["end_time"].as_f64().is_some());
    assert_eq!(rollout["attempt"]["status"], "succeeded");
    let attempts = rollout["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["attempt_id"], attempt_id.as_str());

    let text = ok(&server, &["rollout", &rollout_id]).await;
    assert!(text.contains("succeeded"), "{text}");
    assert!(text.contains(&attempt_id), "{text}");

    let spans = ok_json(&server, &["spans", &rollout_id]).await;
    assert_eq!(spans["total"], 1);
    let items = spans["spans"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["name"], "agent.step");
    assert_eq!(items[0]["sequence_id"], 1);
    assert_eq!(items[0]["status"]["status_code"], "UNSET");

    let table = ok(&server, &["spans", &rollout_id, "--attempt", "latest"]).await;
    assert!(table.contains("agent.step"), "{table}");
    assert!(table.contains(span["span_id"].as_str().unwrap()), "{table}");
    let filtered = ok_json(&server, &["spans", &rollout_id, "--name-contains", "nope"]).await;
    assert_eq!(filtered["total"], 0);

    let workers = ok_json(&server, &["workers"]).await;
    assert_eq!(workers["total"], 1);
    assert_eq!(workers["workers"][0]["worker_id"], "worker-1");
    assert_eq!(workers["workers"][0]["status"], "idle");
    let worker = ok_json(&server, &["workers", "worker-1"]).await;
    assert_eq!(worker["status"], "idle");
    assert!(worker["current_rollout_id"].is_null());

    let stats = ok_json(&server, &["stats"]).await;
    assert_eq!(stats["total_rollouts"], 1);
    assert_eq!(stats["total_attempts"], 1);
    assert_eq!(stats["total_spans"], 1);
    assert_eq!(stats["total_workers"], 1);
    assert_eq!(stats["queued_rollouts"], 0);
    assert_eq!(stats["rollouts_by_status"]["succeeded"], 1);
    assert_eq!(stats["attempts_by_status"]["succeeded"], 1);
    assert_eq!(stats["rollouts_by_status"]["queuing"], 0);
    assert!(stats["oldest_queued_time"].is_null());
}

#[tokio::test]
async fn lists_filter_and_paginate_rollouts() {
    let server = TestServer::start(common::Backend::Memory).await;
    for input in ["1", "2", "3"] {
        ok(&server, &["enqueue", "--input", input]).await;
    }
    ok(&server, &["dequeue"]).await;

    let queued = ok_json(&server, &["rollouts", "--status", "queuing"]).await;
    assert_eq!(queued["total"], 2);
    let page = ok_json(&server, &["rollouts", "--limit", "1", "--offset", "1"]).await;
    assert_eq!(page["total"], 3);
    assert_eq!(page["limit"], 1);
    assert_eq!(page["offset"], 1);
    assert_eq!(page["rollouts"].as_array().unwrap().len(), 1);
    assert_eq!(page["rollouts"][0]["input"], 2);

    let table = ok(&server, &["rollouts", "--limit", "1"]).await;
    assert!(table.contains("showing 1-1 of 3 rollouts"), "{table}");
}

#[tokio::test]
async fn dequeue_from_an_empty_queue_prints_null() {
    let server = TestServer::start(common::Backend::Memory).await;
    let claimed = ok_json(&server, &["dequeue", "--worker-id", "worker-1"]).await;
    assert!(claimed.is_null(), "{claimed}");
    let text = ok(&server, &["dequeue"]).await;
    assert!(text.contains("queue is empty"), "{text}");
}

#[tokio::test]
async fn unknown_rollout_fails_with_not_found() {
    let server = TestServer::start(common::Backend::Memory).await;
    let output = cli(&server, &["rollout", "ro-000000000000"]).await;
    // 64 + NOT_FOUND (5), as grpcurl exits.
    assert_eq!(output.status.code(), Some(69));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: NOT_FOUND: "), "{stderr}");
    assert!(stderr.contains("not found"), "{stderr}");
}

#[test]
fn unreachable_server_is_named_in_the_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let url = format!("http://{address}");
    drop(listener);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"))
        .args(["stats", "--server", &address])
        .output()
        .unwrap();
    // 64 + UNAVAILABLE (14).
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot connect to {url}")),
        "{stderr}"
    );
}

#[tokio::test]
async fn lists_and_shows_resources() {
    let server = TestServer::start(common::Backend::Memory).await;
    let none = ok_json(&server, &["resources", "--latest"]).await;
    assert!(none.is_null(), "{none}");

    let added = server
        .client()
        .await
        .add_resources(lightning_store::proto::AddResourcesRequest {
            resources_json: r#"{"main_llm": {"resource_type": "llm", "model": "m"}}"#.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();

    let list = ok_json(&server, &["resources"]).await;
    assert_eq!(list["total"], 1);
    assert_eq!(
        list["resources"][0]["resources_id"],
        added.resources_id.as_str()
    );
    assert_eq!(list["resources"][0]["resources"]["main_llm"]["model"], "m");
    let latest = ok_json(&server, &["resources", "--latest"]).await;
    assert_eq!(latest["resources_id"], added.resources_id.as_str());
    assert_eq!(latest["version"], 1);
    let table = ok(&server, &["resources"]).await;
    assert!(table.contains(&added.resources_id), "{table}");
    assert!(table.contains("main_llm"), "{table}");
    let shown = ok(&server, &["resources", &added.resources_id]).await;
    assert!(shown.contains(r#""model": "m""#), "{shown}");
}

#[tokio::test]
async fn the_server_is_host_port_or_an_http_url_and_a_bad_one_is_a_usage_error() {
    let server = TestServer::start(common::Backend::Memory).await;
    let address = server.url.strip_prefix("http://").unwrap().to_owned();
    for form in [address.clone(), format!("http://{address}")] {
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"))
                .args(["stats", "--json", "--server", &form])
                .env_remove("LIGHTNING_STORE_SERVER")
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(stats["rollouts_by_status"].is_object(), "{stats}");
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"))
        .args(["stats", "--server", "ftp://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("expected host:port"), "{stderr}");
}

#[tokio::test]
async fn start_runs_a_rollout_beside_the_queue_without_claiming_queued_work() {
    let server = TestServer::start(common::Backend::Memory).await;
    let queued = ok_json(&server, &["enqueue", "--input", "{}"]).await;

    let started = ok_json(
        &server,
        &[
            "start",
            "--input",
            r#"{"probe": 1}"#,
            "--worker-id",
            "helm-test",
        ],
    )
    .await;
    let rollout_id = started["rollout_id"].as_str().unwrap().to_owned();
    assert_ne!(rollout_id, queued["rollout_id"].as_str().unwrap());
    assert_eq!(started["attempt"]["worker_id"], "helm-test");
    ok(
        &server,
        &["add-span", &rollout_id, "latest", "--name", "probe"],
    )
    .await;
    ok(&server, &["complete", &rollout_id]).await;
    let done = ok_json(&server, &["rollout", &rollout_id]).await;
    assert_eq!(done["status"], "succeeded");

    let still_queued = ok_json(
        &server,
        &["rollout", queued["rollout_id"].as_str().unwrap()],
    )
    .await;
    assert_eq!(still_queued["status"], "queuing");
}

#[tokio::test]
async fn a_reader_that_stops_early_ends_the_command_quietly() {
    let server = TestServer::start(common::Backend::Memory).await;
    ok(&server, &["enqueue", "--input", "{}"]).await;
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"))
            .args(["rollouts", "--server", &url])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the command prints (as `| head -0`).
        drop(child.stdout.take());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

/// `serve`'s durations: the new names take units, the old `*_SECS` / `*_MS`
/// variables still work in their old unit, and bad values stop the server
/// at start-up with a usage error naming the option.
#[tokio::test]
async fn serve_reads_durations_under_new_and_old_names() {
    for (env, longest_wait) in [
        (("LIGHTNING_STORE_LONGEST_WAIT", "90s"), 90),
        (("LIGHTNING_STORE_LONGEST_WAIT_SECS", "120"), 120),
    ] {
        let server = common::ServerProcess::start_with_env(&["--store", "memory"], &[env]);
        let capabilities = server
            .client()
            .await
            .get_capabilities(lightning_store::proto::GetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner();
        let reported = capabilities.limits.unwrap().longest_wait.unwrap();
        assert_eq!(reported.seconds, longest_wait, "{env:?}");
        server.kill();
    }

    for (args, env, says) in [
        (&["--drain-timeout", "10"][..], None, "no unit"),
        (
            &[],
            Some(("LIGHTNING_STORE_IDLE_TIMEOUT_SECS", "0")),
            "--idle-timeout-secs",
        ),
        (
            &["--drain-timeout", "1s"],
            Some(("LIGHTNING_STORE_DRAIN_TIMEOUT_SECS", "2")),
            "cannot be used with",
        ),
    ] {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"));
        command
            .args(["serve", "--store", "memory", "--listen", "127.0.0.1:0"])
            .args(args);
        if let Some((name, value)) = env {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?} {env:?}: {stderr}");
    }
}

#[tokio::test]
async fn complete_with_several_rollouts_is_one_batch_all_or_none() {
    let server = TestServer::start(common::Backend::Memory).await;
    let mut rollout_ids = Vec::new();
    for _ in 0..2 {
        ok(&server, &["enqueue", "--input", "{}"]).await;
        let claimed = ok_json(&server, &["dequeue"]).await;
        rollout_ids.push(claimed["rollout_id"].as_str().unwrap().to_owned());
    }
    let refused = cli(
        &server,
        &[
            "complete",
            &rollout_ids[0],
            "ro-000000000000",
            "--status",
            "failed",
        ],
    )
    .await;
    assert_eq!(refused.status.code(), Some(69));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.starts_with("error: NOT_FOUND: updates[1]: Rollout ro-000000000000 not found"),
        "{stderr}"
    );
    let first = ok_json(&server, &["rollout", &rollout_ids[0]]).await;
    assert_eq!(first["status"], "preparing", "nothing was applied");

    let ids: Vec<&str> = rollout_ids.iter().map(String::as_str).collect();
    let completed = ok_json(&server, &[&["complete"], &ids[..]].concat()).await;
    let statuses: Vec<(&str, &str)> = completed
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["rollout_id"].as_str().unwrap(),
                a["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(statuses, [(ids[0], "succeeded"), (ids[1], "succeeded")]);
    let with_attempt = cli(
        &server,
        &[&["complete"], &ids[..], &["--attempt-id", "at-1"]].concat(),
    )
    .await;
    assert_eq!(with_attempt.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&with_attempt.stderr);
    assert!(
        stderr.contains("--attempt-id names one attempt"),
        "{stderr}"
    );
}

#[tokio::test]
async fn training_prints_reward_by_version_and_mode() {
    let server = TestServer::start(common::Backend::Memory).await;
    assert_eq!(
        ok(&server, &["training"]).await,
        "no rollouts ended as succeeded or failed\n"
    );
    // Three rollouts without a resources version, from a shell: two in
    // val (rewards 0.5 and 1), one in train that fails with reward 0.
    for (mode, reward, status) in [
        ("val", "0.5", "succeeded"),
        ("val", "1", "succeeded"),
        ("train", "0", "failed"),
    ] {
        let calls_the_model = reward == "1";
        let enqueued = ok_json(&server, &["enqueue", "--input", "{}", "--mode", mode]).await;
        let rollout_id = enqueued["rollout_id"].as_str().unwrap().to_owned();
        ok(&server, &["dequeue"]).await;
        let reward = format!("agentlightning.reward.0.value={reward}");
        ok(
            &server,
            &[
                "add-span",
                &rollout_id,
                "latest",
                "--name",
                "reward",
                "--attr",
                &reward,
            ],
        )
        .await;
        if calls_the_model {
            // One model call whose tracer reported 12 prompt and 5
            // response tokens.
            ok(
                &server,
                &[
                    "add-span",
                    &rollout_id,
                    "latest",
                    "--name",
                    "openai.chat.completion",
                    "--attr",
                    "gen_ai.usage.prompt_tokens=12",
                    "--attr",
                    "gen_ai.usage.completion_tokens=5",
                ],
            )
            .await;
        }
        ok(&server, &["complete", &rollout_id, "--status", status]).await;
    }
    let table = ok(&server, &["training"]).await;
    let mut lines: Vec<Vec<&str>> = table
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    // The durations, then the tokens' means (the val row's one call), then
    // the model calls' latency: the times are real, each a median and a
    // 90th percentile, in order.
    let seconds = |shown: &str| match shown.strip_suffix("ms") {
        Some(millis) => millis.parse::<f64>().unwrap() / 1000.0,
        None => shown.strip_suffix('s').unwrap().parse::<f64>().unwrap(),
    };
    let ordered = |cell: &str| {
        let (p50, p90) = cell.split_once('/').expect(cell);
        assert!(seconds(p50) <= seconds(p90), "{table}");
    };
    let named = lines[0].len() - 7;
    let headers: Vec<&str> = lines[0].drain(named..).collect();
    assert_eq!(
        headers,
        [
            "DURATION", "P50/P90", "MEAN", "TOKENS", "IN/OUT", "CALL", "P50/P90"
        ],
        "{table}"
    );
    for line in &mut lines[1..] {
        let at = line.len() - 3;
        let [duration, tokens, latency]: [&str; 3] =
            line.drain(at..).collect::<Vec<_>>().try_into().unwrap();
        ordered(duration);
        let val = line[3] == "val";
        assert_eq!(tokens, if val { "12/5" } else { "-" }, "{table}");
        match val {
            true => ordered(latency),
            false => assert_eq!(latency, "-", "{table}"),
        }
    }
    assert_eq!(
        lines,
        [
            vec![
                "VERSION",
                "RESOURCES",
                "MODEL",
                "MODE",
                "ROLLOUTS",
                "SUCCESS",
                "REWARDED",
                "MEAN",
                "P10",
                "P50",
                "P90",
                "ROWS",
                "NO",
                "ROWS",
                "WHY",
                "NONE"
            ],
            vec![
                "-", "-", "-", "train", "1", "0.0%", "1", "0.0000", "0.0000", "0.0000", "0.0000",
                "0", "0", "-"
            ],
            vec![
                "-", "-", "-", "val", "2", "100.0%", "2", "0.7500", "0.5000", "0.5000", "1.0000",
                "0", "0", "-"
            ],
        ],
        "{table}"
    );
    let mut val = ok_json(&server, &["training", "--mode", "val"]).await;
    let durations = val[0]
        .as_object_mut()
        .unwrap()
        .remove("duration_seconds")
        .unwrap();
    assert_eq!(durations["count"], 2, "{durations}");
    let mean = durations["mean"].as_f64().unwrap();
    assert!(mean > 0.0 && durations["p10"].as_f64() <= durations["p90"].as_f64());
    let fields = val[0].as_object_mut().unwrap();
    let latency = fields.remove("model_call_latency_seconds").unwrap();
    assert_eq!(latency["count"], 1, "{latency}");
    let tokens = [
        fields.remove("prompt_tokens"),
        fields.remove("response_tokens"),
    ];
    assert_eq!(
        tokens.map(|d| (
            d.as_ref().unwrap()["count"].clone(),
            d.unwrap()["mean"].clone()
        )),
        [(1.into(), 12.0.into()), (1.into(), 5.0.into())]
    );
    assert_eq!(
        val,
        serde_json::json!([{
            "version": null, "resources_id": "", "model_version": null, "mode": "val", "rollouts": 2, "succeeded": 2,
            "rewarded": 2, "reward_mean": 0.75, "reward_p10": 0.5, "reward_p50": 0.5,
            "reward_p90": 1.0, "training_rows": 0, "rollouts_without_rows": 0,
            "without_rows_by_reason": {},
        }])
    );
    // A bounded range leaves out rollouts of no version.
    assert_eq!(
        ok_json(&server, &["training", "--from-version", "1"]).await,
        serde_json::json!([])
    );
    let refused = cli(
        &server,
        &["training", "--from-version", "3", "--to-version", "2"],
    )
    .await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("version_from (3) is after version_to (2)"),
        "{stderr}"
    );
    // Over time, by the hour: the val rollouts in one row, whichever
    // minutes they ended in.
    let hourly = ok_json(
        &server,
        &[
            "training",
            "--over-time",
            "--resolution",
            "hour",
            "--mode",
            "val",
        ],
    )
    .await;
    let rows = hourly.as_array().expect("a list");
    assert_eq!(rows.len(), 1, "{hourly}");
    assert_eq!(rows[0]["resolution"], "hour");
    assert_eq!(rows[0]["rollouts"], 2);
    assert_eq!(rows[0]["reward_mean"], 0.75);
    let start = rows[0]["start"].as_str().unwrap();
    assert!(start.ends_with(":00:00Z"), "{start}");
    let table = ok(&server, &["training", "--over-time"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[..3], ["MINUTE", "MODE", "ROLLOUTS"], "{table}");
    let counted: i64 = table
        .lines()
        .skip(1)
        .map(|line| {
            line.split_whitespace()
                .nth(2)
                .unwrap()
                .parse::<i64>()
                .unwrap()
        })
        .sum();
    assert_eq!(counted, 3, "{table}");
    let refused = cli(&server, &["training", "--resolution", "hour"]).await;
    assert!(!refused.status.success(), "--resolution needs --over-time");
}
