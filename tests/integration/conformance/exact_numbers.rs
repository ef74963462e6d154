//! Exact numbers: the `*_json` fields keep their numbers exactly as the
//! client wrote them (integers past 2^53 and past 64 bits, the 64-bit
//! extremes, decimals longer than a double holds, exponents beyond its
//! range), through gRPC and agent-lightning 0.x's HTTP API, and across a
//! restart of a durable backend.

use std::path::PathBuf;

use lightning_store::proto as pb;
use pb::worker_session_request::Message as ToServer;
use serde_json::json;

use super::BACKEND;
use super::TestServer;
use crate::common::http::{HttpClient, Version};
use crate::common::{Backend, TestOptions, postgres_database};
use crate::conformance::support::*;

/// Numbers no double holds, as a client writes them.
const NUMBERS: &str = r#"{"n": 12345678901234567890123, "m": 9007199254740993, "u": 18446744073709551615, "i": -9223372036854775808, "d": 0.1000000000000000055511151231257827, "e": 1e400, "x": -2.50E-7}"#;
/// [`NUMBERS`] as the store writes it back: without the spaces, every
/// number's digits as given, exponents as `e` and their sign.
const EXACT: &str = r#"{"n":12345678901234567890123,"m":9007199254740993,"u":18446744073709551615,"i":-9223372036854775808,"d":0.1000000000000000055511151231257827,"e":1e+400,"x":-2.50e-7}"#;

/// Where the database lives, so that a second server opens the same one.
enum Database {
    Memory,
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Database {
    async fn new() -> Self {
        match BACKEND {
            Backend::Memory => Database::Memory,
            Backend::Sqlite => Database::Sqlite(tempfile::tempdir().unwrap()),
            Backend::Postgres => Database::Postgres(postgres_database().await),
        }
    }

    async fn server(&self) -> TestServer {
        let (database, postgres_url): (Option<PathBuf>, Option<String>) = match self {
            Database::Memory => (None, None),
            Database::Sqlite(dir) => (Some(dir.path().join("store.db")), None),
            Database::Postgres(url) => (None, Some(url.clone())),
        };
        let options = TestOptions {
            database,
            postgres_url,
            ..TestOptions::default()
        };
        TestServer::start_opts(BACKEND, options).await
    }
}

/// The ids of what [`write_everything`] wrote.
struct Written {
    rollout_id: String,
    updated_rollout_id: String,
    attempt_id: String,
    resources_id: String,
    updated_resources_id: String,
}

/// Writes [`NUMBERS`] into every `*_json` field a request carries, checking
/// the answers.
async fn write_everything(c: &mut Client) -> Written {
    let enqueued = enqueue_spec(
        c,
        pb::RolloutSpec {
            input_json: NUMBERS.into(),
            metadata_json: NUMBERS.into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(enqueued.input_json, EXACT);
    assert_eq!(enqueued.metadata_json, EXACT);

    let updated = enqueue(c, "null").await;
    let answer = c
        .update_rollout(pb::UpdateRolloutRequest {
            rollout_id: updated.rollout_id.clone(),
            update_mask: mask(&["input_json", "metadata_json"]),
            input_json: NUMBERS.into(),
            metadata_json: NUMBERS.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(answer.input_json, EXACT);
    assert_eq!(answer.metadata_json, EXACT);

    let attempt_id = start_attempt(c, &enqueued.rollout_id).await;
    let attempt = c
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: enqueued.rollout_id.clone(),
            attempt_id: attempt_id.clone(),
            update_mask: mask(&["metadata_json"]),
            metadata_json: NUMBERS.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .attempt
        .unwrap();
    assert_eq!(attempt.metadata_json, EXACT);

    let mut sent = span(&enqueued.rollout_id, &attempt_id, "exact", None);
    sent.extra_json = NUMBERS.into();
    sent.status = Some(pb::SpanStatus {
        extra_json: NUMBERS.into(),
        ..Default::default()
    });
    let mut context = sent.context.take().unwrap_or_default();
    context.extra_json = NUMBERS.into();
    sent.context = Some(context);
    sent.events = vec![pb::SpanEvent {
        name: "event".into(),
        extra_json: NUMBERS.into(),
        ..Default::default()
    }];
    sent.links = vec![pb::SpanLink {
        context: sent.context.clone(),
        extra_json: NUMBERS.into(),
        ..Default::default()
    }];
    assert_span_exact(&add_span(c, sent).await.expect("the span is stored"));

    let resources = c
        .add_resources(pb::AddResourcesRequest {
            resources_json: NUMBERS.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert_eq!(resources.resources_json, EXACT);
    let updated_resources = c
        .update_resources(pb::UpdateResourcesRequest {
            resources_id: "rs-exact".into(),
            resources_json: NUMBERS.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert_eq!(updated_resources.resources_json, EXACT);

    c.update_worker(pb::UpdateWorkerRequest {
        worker_id: "exact".into(),
        heartbeat_stats_json: Some(NUMBERS.into()),
    })
    .await
    .unwrap();
    // A session's heartbeat: recorded by the time a clean close ends the stream.
    let runner = Runner::open(c, "exact-session", 1).await;
    runner
        .to_server
        .send(pb::WorkerSessionRequest {
            message: Some(ToServer::Heartbeat(pb::SessionHeartbeat {
                heartbeat_stats_json: NUMBERS.into(),
            })),
        })
        .unwrap();
    runner.close().await;

    Written {
        rollout_id: enqueued.rollout_id,
        updated_rollout_id: updated.rollout_id,
        attempt_id,
        resources_id: resources.resources_id,
        updated_resources_id: updated_resources.resources_id,
    }
}

fn assert_span_exact(span: &pb::Span) {
    assert_eq!(span.extra_json, EXACT);
    assert_eq!(span.status.as_ref().unwrap().extra_json, EXACT);
    assert_eq!(span.context.as_ref().unwrap().extra_json, EXACT);
    assert_eq!(span.events[0].extra_json, EXACT);
    assert_eq!(span.links[0].extra_json, EXACT);
}

/// Reads every field [`write_everything`] wrote.
async fn assert_everything_exact(c: &mut Client, written: &Written) {
    let rollout = get(c, &written.rollout_id).await;
    assert_eq!(rollout.input_json, EXACT);
    assert_eq!(rollout.metadata_json, EXACT);
    let attempt = attempt_of(&rollout);
    assert_eq!(attempt.attempt_id, written.attempt_id);
    assert_eq!(attempt.metadata_json, EXACT);
    let updated = get(c, &written.updated_rollout_id).await;
    assert_eq!(updated.input_json, EXACT);
    assert_eq!(updated.metadata_json, EXACT);

    let spans = rollout_spans(c, written.rollout_id.clone()).await.spans;
    assert_eq!(spans.len(), 1);
    assert_span_exact(&spans[0]);

    for resources_id in [&written.resources_id, &written.updated_resources_id] {
        let resources = c
            .get_resources(pb::GetResourcesRequest {
                resources_id: resources_id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .resources
            .unwrap();
        assert_eq!(resources.resources_json, EXACT);
    }

    assert_eq!(worker(c, "exact").await.heartbeat_stats_json, EXACT);
    assert_eq!(worker(c, "exact-session").await.heartbeat_stats_json, EXACT);
}

#[tokio::test]
async fn json_fields_keep_every_number_exactly_over_grpc() {
    skip_without!(super::BACKEND);
    let database = Database::new().await;
    let server = database.server().await;
    let mut c = server.client().await;
    let written = write_everything(&mut c).await;
    assert_everything_exact(&mut c, &written).await;
    server.stop().await;

    if BACKEND != Backend::Memory {
        // Read back by a new server from what the database holds.
        let server = database.server().await;
        let mut c = server.client().await;
        assert_everything_exact(&mut c, &written).await;
        server.stop().await;
    }
}

/// The numbers a float holds (as its shortest digits) are written as
/// agent-lightning's server writes floats; the others keep their digits.
const HTTP_EXACT: &str = r#"{"n":12345678901234567890123,"m":9007199254740993,"u":18446744073709551615,"i":-9223372036854775808,"d":0.1000000000000000055511151231257827,"e":1e+400,"x":-2.5e-7}"#;

#[tokio::test]
async fn json_fields_keep_every_number_exactly_over_http() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let post = |path: String, body: String| {
        let http = http.clone();
        async move {
            let response = http
                .request("POST", &path, &[("content-type", "application/json")], body)
                .await;
            assert!(
                (200..300).contains(&response.status),
                "{path}: {}",
                response.text()
            );
            response.text()
        }
    };

    let enqueued = post(
        "/v1/agl/queues/rollouts/enqueue".into(),
        format!(r#"{{"rollouts": [{{"input": {NUMBERS}, "metadata": {NUMBERS}}}]}}"#),
    )
    .await;
    assert!(
        enqueued.contains(&format!(r#""input":{HTTP_EXACT}"#))
            && enqueued.contains(&format!(r#""metadata":{HTTP_EXACT}"#)),
        "{enqueued}"
    );
    let rollout_id = serde_json::from_str::<serde_json::Value>(&enqueued).unwrap()[0]["rollout_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let updated = post(
        format!("/v1/agl/rollouts/{rollout_id}"),
        format!(r#"{{"input": {NUMBERS}, "metadata": {NUMBERS}}}"#),
    )
    .await;
    assert!(
        updated.contains(&format!(r#""metadata":{HTTP_EXACT}"#)),
        "{updated}"
    );
    let read = http
        .get(&format!("/v1/agl/rollouts/{rollout_id}"))
        .await
        .text();
    assert!(
        read.contains(&format!(r#""input":{HTTP_EXACT}"#))
            && read.contains(&format!(r#""metadata":{HTTP_EXACT}"#)),
        "{read}"
    );
    // The same rollout over gRPC: the numbers as the client wrote them.
    let mut c = server.client().await;
    assert_eq!(get(&mut c, &rollout_id).await.metadata_json, EXACT);

    let llm = format!(
        r#"{{"main": {{"resource_type": "llm", "endpoint": "http://127.0.0.1:1", "model": "m", "sampling_parameters": {NUMBERS}}}}}"#
    );
    let resources = post("/v1/agl/resources".into(), llm).await;
    assert!(
        resources.contains(&format!(r#""sampling_parameters":{HTTP_EXACT}"#)),
        "{resources}"
    );
    let latest = http.get("/v1/agl/resources/latest").await.text();
    assert!(
        latest.contains(&format!(r#""sampling_parameters":{HTTP_EXACT}"#)),
        "{latest}"
    );

    post(
        "/v1/agl/workers/exact".into(),
        format!(r#"{{"heartbeat_stats": {NUMBERS}}}"#),
    )
    .await;
    let worker = http.get("/v1/agl/workers/exact").await.text();
    assert!(
        worker.contains(&format!(r#""heartbeat_stats":{HTTP_EXACT}"#)),
        "{worker}"
    );

    // A span's extra fields (agent-lightning's model keeps unknown keys).
    let started = post("/v1/agl/rollouts".into(), r#"{"input": null}"#.into()).await;
    let started: serde_json::Value = serde_json::from_str(&started).unwrap();
    let (span_rollout, span_attempt) = (
        started["rollout_id"].as_str().unwrap(),
        started["attempt"]["attempt_id"].as_str().unwrap(),
    );
    let added = post(
        "/v1/agl/spans".into(),
        format!(
            r#"{{"rollout_id": "{span_rollout}", "attempt_id": "{span_attempt}", "sequence_id": 1,
            "trace_id": "t", "span_id": "s", "parent_id": null, "name": "n",
            "status": {{"status_code": "OK", "numbers": {NUMBERS}}}, "attributes": {{}},
            "events": [], "links": [], "start_time": null, "end_time": null, "context": null,
            "parent": null, "resource": {{"attributes": {{}}, "schema_url": ""}},
            "numbers": {NUMBERS}}}"#
        ),
    )
    .await;
    assert!(
        added.contains(&format!(r#""numbers":{HTTP_EXACT}"#)),
        "{added}"
    );
    let searched = post(
        "/v1/agl/spans/search".into(),
        format!(r#"{{"rollout_id": "{span_rollout}"}}"#),
    )
    .await;
    assert_eq!(
        searched
            .matches(&format!(r#""numbers":{HTTP_EXACT}"#))
            .count(),
        2,
        "{searched}"
    );
    let spans = rollout_spans(&mut c, span_rollout).await.spans;
    let extra = format!(r#"{{"numbers":{EXACT}}}"#);
    assert_eq!(spans[0].extra_json, extra);
    assert_eq!(spans[0].status.as_ref().unwrap().extra_json, extra);

    // Floats keep agent-lightning's rendering.
    let floats = post(
        "/v1/agl/queues/rollouts/enqueue".into(),
        json!({"rollouts": [{"input": {"a": 1.0, "b": 1e16, "c": 0.1}}]}).to_string(),
    )
    .await;
    assert!(
        floats.contains(r#""input":{"a":1.0,"b":1e+16,"c":0.1}"#),
        "{floats}"
    );
    server.stop().await;
}

/// OTLP/JSON's doubles, which opentelemetry-proto reads only as floats,
/// still decode with exact numbers on: in any written form, nested too.
#[tokio::test]
async fn otlp_json_doubles_decode_in_any_written_form() {
    skip_without!(super::BACKEND);
    use pb::attribute_value::Value;

    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "{}").await;
    let claimed = dequeue(&mut c, None).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    let body = format!(
        r#"{{"resourceSpans": [{{"resource": {{"attributes": [
            {{"key": "agentlightning.rollout_id", "value": {{"stringValue": "{}"}}}},
            {{"key": "agentlightning.attempt_id", "value": {{"stringValue": "{attempt_id}"}}}}]}},
          "scopeSpans": [{{"spans": [{{"traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": "eee19b7ec3c1b174", "name": "doubles",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000001000000000,
            "attributes": [
              {{"key": "trailing", "value": {{"doubleValue": 2.50}}}},
              {{"key": "exponent", "value": {{"doubleValue": 1E16}}}},
              {{"key": "long", "value": {{"doubleValue": 0.1000000000000000055511151231257827}}}},
              {{"key": "int", "value": {{"intValue": "-9223372036854775808"}}}},
              {{"key": "nested", "value": {{"kvlistValue": {{"values": [
                {{"key": "x", "value": {{"arrayValue": {{"values": [{{"doubleValue": -1.5e-7}}]}}}}}}]}}}}}}
            ]}}]}}]}}]}}"#,
        rollout.rollout_id
    );
    let http = HttpClient::new(server.addr, Version::Http1);
    let answer = http
        .request(
            "POST",
            "/v1/traces",
            &[("content-type", "application/json")],
            body,
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.text(), "{}", "a full success");

    let spans = rollout_spans(&mut c, rollout.rollout_id.clone())
        .await
        .spans;
    assert_eq!(spans.len(), 1);
    let attribute = |key: &str| {
        spans[0]
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone())
            .and_then(|v| v.value)
    };
    assert_eq!(attribute("trailing"), Some(Value::DoubleValue(2.5)));
    assert_eq!(attribute("exponent"), Some(Value::DoubleValue(1e16)));
    assert_eq!(attribute("long"), Some(Value::DoubleValue(0.1)));
    assert_eq!(attribute("int"), Some(Value::IntValue(i64::MIN)));
    let Some(Value::KvlistValue(nested)) = attribute("nested") else {
        panic!("a map: {:?}", attribute("nested"));
    };
    let Some(Value::ArrayValue(array)) = nested.values[0].value.clone().and_then(|v| v.value)
    else {
        panic!("an array: {nested:?}");
    };
    assert_eq!(array.values[0].value, Some(Value::DoubleValue(-1.5e-7)));

    // Beyond a double's range: refused, nothing stored.
    let refused = http
        .request(
            "POST",
            "/v1/traces",
            &[("content-type", "application/json")],
            r#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": "k", "value": {"doubleValue": 1e400}}]}]}]}]}"#,
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    server.stop().await;
}
