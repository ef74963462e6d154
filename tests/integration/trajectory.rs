//! The `triplets` layout against agent-lightning's own code: the same
//! events (1.x) or spans (0.x) go through the core's
//! `lightning_store::core::trajectory` and through upstream's functions in
//! its Python environment, and the training rows must be the same, row for
//! row. 1.x: the server's triplet view (`agentlightning.server.routes.events`)
//! read by the trainer's `_build_completed_rollout`
//! (`tests/agl1_python/triplets.py`); 0.x: `TracerTraceToTriplet` with its
//! default settings (`tests/agl0_python/triplets.py`). Hostile strings and
//! missing fields are in the cases; data on which upstream itself raises is
//! left to the unit tests.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use lightning_store::core::agl1::Agl1Event;
use lightning_store::core::model::{
    AttributeValue, Json, KeyValue, Rollout, RolloutStatus, Span, SpanKind, SpanStatus, Timestamp,
};
use lightning_store::core::trajectory::{self, SkipReason, Trace, TripletRecord};
use serde_json::json;

use crate::common;

/// Runs `script` in the Python environment `env` with `input` on stdin and
/// returns its JSON output.
fn run_python(env: &str, script: &str, input: &Json) -> Json {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(common::pyenv_python(env))
        .arg(repo.join(script))
        // agent-lightning 0.x imports LiteLLM, which would fetch its price list.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    let stdin = child.stdin.take().expect("piped");
    let text = input.to_string();
    // Written on a thread: the script may answer before it has read all.
    let writer = std::thread::spawn(move || {
        let mut stdin = stdin;
        stdin.write_all(text.as_bytes()).expect("python reads");
    });
    let output = child.wait_with_output().expect("python runs");
    writer.join().expect("written");
    assert!(
        output.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the script writes JSON")
}

fn rollout(id: &str, status: RolloutStatus) -> Rollout {
    Rollout {
        rollout_id: id.into(),
        input: json!({}),
        start_time: Timestamp(0),
        end_time: None,
        mode: None,
        resources_id: Some("rs-7".into()),
        status,
        config: Default::default(),
        metadata: json!({}),
    }
}

/// One 1.x rollout's events as the store keeps them.
struct Case {
    name: &'static str,
    status: RolloutStatus,
    events: Vec<(&'static str, Json)>,
}

/// A chat call through the gateway: prompt and response token ids, and
/// the recorded log-probabilities' entries.
fn chat(prompt: Json, response: Json, log_probs: Json) -> (&'static str, Json) {
    (
        "model_request",
        json!({
            "model": "policy", "model_version": 3,
            "request": {"messages": [{"role": "user", "content": "2+2?"}]},
            "response": {"prompt_token_ids": prompt, "choices": [{
                "message": {"role": "assistant", "content": "4"},
                "token_ids": response, "logprobs": {"content": log_probs}}]},
            "server": {"model": "policy", "endpoint": "http://m/v1", "version": 3},
            "http_status": 200, "status": "ok", "routed_experts": null,
        }),
    )
}

fn reward(value: Json) -> (&'static str, Json) {
    (
        "reward",
        json!({"value": value, "source": "judge", "reason": "<b>ok</b>"}),
    )
}

fn cases() -> Vec<Case> {
    let lp = |values: &[f64]| {
        Json::from(
            values
                .iter()
                .map(|v| json!({"logprob": v}))
                .collect::<Vec<_>>(),
        )
    };
    let mut routed = chat(json!([1, 2, 3]), json!([4, 5]), lp(&[-0.1, -0.2]));
    routed.1["routed_experts"] = json!([[[1, 2]], [[3, 4]]]);
    let mut images = chat(json!([1, 2, 3, 4, 5, 6]), json!([7]), lp(&[-1.5]));
    images.1["request"]["messages"] = json!([
        {"role": "system", "content": "Ünïcødé \u{0000} <script>alert(1)</script> 🚀"},
        {"role": "user", "content": [{"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "user", "content": "[{\"type\": \"image_url\", \"image_url\": {\"url\": \"https://x/y.png?a=1&b=\\\"\"}}]"},
    ]);
    let mut failed = chat(json!([9]), json!([10]), lp(&[-1.0]));
    failed.1["http_status"] = json!(502);
    failed.1["status"] = json!("error");
    failed.1["response"]["error"] = json!({"message": "upstream \"down\"", "code": 502});
    let mut error_status = chat(json!([11]), json!([12]), lp(&[-1.0]));
    error_status.1["status"] = json!("error");
    let mut text_status = chat(json!([13]), json!([14]), lp(&[-1.0]));
    text_status.1["http_status"] = json!("500");
    let mut no_ids = chat(json!([15]), json!([]), lp(&[]));
    no_ids.1["response"]["choices"][0]
        .as_object_mut()
        .unwrap()
        .remove("token_ids");
    let completion = (
        "model_request",
        json!({"request": {"prompt": "Q:"}, "response": {"choices": [{"text": "A",
            "prompt_token_ids": [20, 21], "token_ids": [22, 23],
            "logprobs": {"token_logprobs": ["-0.5", 0, true]}}]},
            "server": {"model": "ƒ/模型", "version": "v1"}, "http_status": 200}),
    );
    let unusable_log_probs = (
        "model_request",
        json!({"response": {"prompt_token_ids": [30], "choices": [{"token_ids": [31],
            "logprobs": {"token_logprobs": [null]}}]}, "server": {}}),
    );
    let nan_log_probs = (
        "model_request",
        json!({"response": {"prompt_token_ids": [32], "choices": [{"token_ids": [33],
            "logprobs": {"content": [{"logprob": "nan"}]}}]}}),
    );
    let legacy = (
        "model_request",
        json!({"response": [{"prompt_token_ids": [40, 41]}, {"choices": [{"token_ids": [42]}]},
            {"choices": []}, {"choices": [{"token_ids": [43, 44]}]}], "server": {"model": "old"}}),
    );
    let float_ids = chat(json!([50.0, 51]), json!([52]), lp(&[-1.0]));
    let huge_ids = chat(json!([60]), json!([9223372036854775808u64]), lp(&[-1.0]));
    vec![
        Case {
            name: "a chat with a repeated prompt, routing, images and failures",
            status: RolloutStatus::Succeeded,
            events: vec![
                chat(json!([1, 2, 3]), json!([4]), lp(&[-0.3])),
                routed,
                ("custom", json!({"note": "ignored"})),
                images,
                failed,
                error_status,
                text_status,
                no_ids,
                reward(json!(0.25)),
                reward(json!(1)),
            ],
        },
        Case {
            name: "completions, legacy chunks and log-probabilities upstream cannot use",
            status: RolloutStatus::Succeeded,
            events: vec![
                completion,
                unusable_log_probs,
                nan_log_probs,
                legacy,
                reward(json!(-2.5)),
            ],
        },
        Case {
            name: "token ids that are not integers",
            status: RolloutStatus::Succeeded,
            events: vec![
                float_ids,
                huge_ids,
                chat(json!([70]), json!([71]), lp(&[-1.0])),
            ],
        },
        Case {
            name: "a reward that is not a number",
            status: RolloutStatus::Succeeded,
            events: vec![
                chat(json!([1]), json!([2]), lp(&[-1.0])),
                reward(json!("1.0")),
            ],
        },
        Case {
            name: "a failed rollout without calls",
            status: RolloutStatus::Failed,
            events: vec![reward(json!(0.0))],
        },
        Case {
            name: "no events",
            status: RolloutStatus::Succeeded,
            events: vec![],
        },
    ]
}

fn events_of(id: &str, case: &Case) -> Vec<Agl1Event> {
    case.events
        .iter()
        .enumerate()
        .map(|(index, (event_type, data))| Agl1Event {
            event_type: (*event_type).into(),
            rollout_id: id.into(),
            attempt_id: "0".into(),
            timestamp: Timestamp(1_700_000_000_000_000_000 + index as i64),
            data: data.to_string(),
        })
        .collect()
}

/// Whether upstream's row has token ids the core refuses (not integers).
fn malformed(triplet: &Json) -> bool {
    [
        &triplet["prompt"]["token_ids"],
        &triplet["response"]["token_ids"],
    ]
    .iter()
    .any(|ids| {
        ids.as_array()
            .is_none_or(|ids| ids.iter().any(|id| id.as_i64().is_none()))
    })
}

#[test]
fn agl1_rows_are_what_agent_lightnings_trainer_builds() {
    skip_without!(common::Tool::Python);
    let cases = cases();
    let mut input = Vec::new();
    let mut ours = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let id = format!("rollout-{index}");
        let events = events_of(&id, case);
        let records = trajectory::triplets(
            &rollout(&id, case.status),
            None,
            Trace::Events {
                events: &events,
                error_message: Some("agent crashed"),
            },
        )
        .unwrap();
        input.push(json!({
            "rollout_id": id,
            "state": if case.status == RolloutStatus::Failed { "failed" } else { "succeeded" },
            "events": events.iter().map(|event| json!({
                "event_type": event.event_type, "rollout_id": event.rollout_id,
                "attempt_id": event.attempt_id, "timestamp": event.timestamp.as_secs_f64(),
                "data": serde_json::from_str::<Json>(&event.data).unwrap(),
            })).collect::<Vec<_>>(),
        }));
        ours.push((id, records));
    }
    let upstream = run_python("agl1", "tests/agl1_python/triplets.py", &Json::Array(input));
    let upstream = upstream.as_array().expect("a list");
    assert_eq!(upstream.len(), cases.len());
    let mut compared = 0;
    for ((case, (id, records)), theirs) in cases.iter().zip(&ours).zip(upstream) {
        let name = case.name;
        let rows: Vec<_> = records
            .iter()
            .filter_map(|record| match record {
                TripletRecord::Row(row) => Some(row),
                _ => None,
            })
            .collect();
        let triplets = theirs["triplets"].as_array().unwrap();
        let refused = triplets.iter().filter(|t| malformed(t)).count();
        let skipped_malformed = records
            .iter()
            .filter(|r| matches!(r, TripletRecord::SkippedCall(c) if c.reason == SkipReason::MalformedTokenIds))
            .count();
        assert_eq!(
            refused, skipped_malformed,
            "{name}: rows refused as malformed"
        );
        let triplets: Vec<&Json> = triplets.iter().filter(|t| !malformed(t)).collect();
        assert_eq!(
            rows.len(),
            triplets.len(),
            "{name}: rows\n{records:#?}\n{theirs:#}"
        );
        for (row, triplet) in rows.iter().zip(&triplets) {
            let at = format!("{name}: row {}", row.row_index);
            assert_eq!(
                json!(row.prompt_token_ids),
                triplet["prompt"]["token_ids"],
                "{at}"
            );
            assert_eq!(
                json!(row.response_token_ids),
                triplet["response"]["token_ids"],
                "{at}"
            );
            assert_eq!(
                json!(row.response_log_probs),
                triplet["response"]["log_probs"],
                "{at}"
            );
            assert_eq!(
                row.routed_experts.clone().unwrap_or(Json::Null),
                triplet["response"]["routed_experts"],
                "{at}"
            );
            // The last row carries the reward, unless upstream's went to a
            // row the core refuses.
            if refused == 0 {
                assert_eq!(json!(row.reward), triplet["reward"], "{at}");
            }
            assert_eq!(json!(row.image_urls), triplet["image_urls"], "{at}");
            let server = &triplet["metadata"]["server"];
            assert_eq!(row.model.as_deref(), server["model"].as_str(), "{at}");
            assert_eq!(row.model_version, server["version"].as_i64(), "{at}");
            assert_eq!(&row.origin.rollout_id, id, "{at}");
            assert_eq!(row.origin.attempt_id.as_deref(), Some("0"), "{at}");
            assert_eq!(row.origin.resources_id.as_deref(), Some("rs-7"), "{at}");
            compared += 1;
        }
        if rows.is_empty() {
            assert!(
                matches!(records.last(), Some(TripletRecord::NoRows(_))),
                "{name}: a rollout without rows says so"
            );
        }
    }
    assert_eq!(compared, 9, "the rows the cases give");
}

/// A 0.x span as the adapter's script reads it: times in seconds, flat
/// attributes.
fn span(id: &str, parent: Option<&str>, name: &str, times: (i64, i64), attributes: Json) -> Json {
    json!({"span_id": id, "parent_id": parent, "name": name,
           "start_time": times.0, "end_time": times.1, "attributes": attributes})
}

/// An attribute value of JSON (a list of integers, a string, ...).
fn attribute(value: &Json) -> AttributeValue {
    match value {
        Json::String(text) => AttributeValue::String(text.clone()),
        Json::Bool(flag) => AttributeValue::Bool(*flag),
        Json::Number(number) => match number.as_i64() {
            Some(int) => AttributeValue::Int(int),
            None => AttributeValue::Double(number.as_f64().unwrap()),
        },
        Json::Array(items) => AttributeValue::Array(items.iter().map(attribute).collect()),
        other => panic!("not an attribute: {other}"),
    }
}

/// The core's span of a script's span.
fn core_span(index: usize, span: &Json) -> Span {
    let seconds = |key: &str| Timestamp(span[key].as_i64().unwrap() * 1_000_000_000);
    Span {
        rollout_id: "r".into(),
        attempt_id: "a".into(),
        sequence_id: index as i64,
        trace_id: "t".into(),
        span_id: span["span_id"].as_str().unwrap().into(),
        parent_id: span["parent_id"].as_str().map(str::to_owned),
        name: span["name"].as_str().unwrap().into(),
        status: SpanStatus::default(),
        attributes: span["attributes"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(key, value)| KeyValue {
                key: key.clone(),
                value: attribute(value),
            })
            .collect(),
        events: Vec::new(),
        links: Vec::new(),
        start_time: Some(seconds("start_time")),
        end_time: Some(seconds("end_time")),
        context: None,
        parent: None,
        resource: None,
        kind: SpanKind::Internal,
        scope: None,
        extra: Default::default(),
    }
}

/// An LLM call span with token ids, messages and log-probabilities.
fn llm(id: &str, parent: Option<&str>, times: (i64, i64), response_id: &str, ids: Json) -> Json {
    span(
        id,
        parent,
        "openai.chat.completion",
        times,
        json!({
            "gen_ai.response.id": response_id,
            "gen_ai.response.model": "qwen",
            "prompt_token_ids": ids[0], "response_token_ids": ids[1],
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "[{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:x\"}}]",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Ünïcødé \u{0000} <b>",
            "logprobs.content": "[{\"token\": \"a\", \"logprob\": -0.5}]",
        }),
    )
}

fn emit_reward(id: &str, parent: Option<&str>, start: i64, value: f64) -> Json {
    span(
        id,
        parent,
        "agentlightning.annotation",
        (start, start + 1),
        json!({"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value}),
    )
}

fn agl0_cases() -> Vec<(&'static str, Vec<Json>)> {
    let ids = |prompt: &[i64], response: &[i64]| json!([prompt, response]);
    vec![
        (
            "an agent's calls, a duplicate, a nested call, a judge and rewards",
            vec![
                span(
                    "root",
                    None,
                    "agent run",
                    (0, 100),
                    json!({"agent.name": "solver"}),
                ),
                llm("c1", Some("root"), (10, 20), "resp-1", ids(&[1, 2], &[3])),
                llm(
                    "c1-again",
                    Some("root"),
                    (11, 19),
                    "resp-1",
                    ids(&[1, 2], &[3]),
                ),
                span(
                    "inner",
                    Some("c1"),
                    "openai.chat.completion.raw",
                    (12, 13),
                    json!({}),
                ),
                emit_reward("r1", Some("root"), 25, 0.5),
                llm("judge", Some("r1"), (25, 26), "resp-j", ids(&[9], &[9])),
                llm("c2", Some("root"), (30, 40), "resp-2", ids(&[4, 5], &[6])),
                emit_reward("r2", Some("root"), 35, 7.0),
                llm("c3", Some("root"), (50, 60), "resp-3", ids(&[], &[7])),
                span(
                    "r3",
                    Some("root"),
                    "task",
                    (70, 71),
                    json!({"agentops.task.output": "{\"type\": \"reward\", \"value\": 1.5}"}),
                ),
            ],
        ),
        (
            "calls floating at the top, agents of other frameworks, a lost parent",
            vec![
                span(
                    "a",
                    None,
                    "crew",
                    (0, 100),
                    json!({"agentops.span.kind": "agent", "operation.name": "writer"}),
                ),
                span(
                    "b",
                    Some("a"),
                    "graph",
                    (5, 50),
                    json!({"langchain.chain.type": "planner"}),
                ),
                llm("f1", None, (10, 20), "f-1", ids(&[1], &[2])),
                llm("f2", None, (60, 70), "f-2", json!([[3], ["x"]])),
                llm("o1", Some("lost"), (80, 90), "o-1", ids(&[5], &[6])),
                span(
                    "x",
                    Some("a"),
                    "executor",
                    (91, 99),
                    json!({"executor.id": "exec"}),
                ),
                emit_reward("rr", Some("a"), 95, -1.0),
            ],
        ),
        (
            "a 0.3 reward operation hides the calls below it",
            vec![
                span("root", None, "session", (0, 10), json!({})),
                span(
                    "op",
                    Some("root"),
                    "agentlightning.operation",
                    (1, 5),
                    json!({"agentlightning.operation.name": "agentlightning.reward"}),
                ),
                llm("hidden", Some("op"), (2, 3), "h", ids(&[1], &[2])),
                llm("seen", Some("root"), (6, 7), "s", ids(&[3], &[4])),
            ],
        ),
    ]
}

#[test]
fn agl0_rows_are_what_agent_lightnings_triplet_adapter_makes() {
    skip_without!(common::Tool::Python);
    let cases = agl0_cases();
    let input = Json::Array(
        cases
            .iter()
            .map(|(_, spans)| Json::from(spans.clone()))
            .collect(),
    );
    let upstream = run_python("agl0", "tests/agl0_python/triplets.py", &input);
    let upstream = upstream.as_array().expect("a list");
    let mut compared = 0;
    for ((name, spans), theirs) in cases.iter().zip(upstream) {
        let spans: Vec<Span> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| core_span(i, s))
            .collect();
        let records = trajectory::triplets(
            &rollout("r", RolloutStatus::Succeeded),
            None,
            Trace::Spans(&spans),
        )
        .unwrap();
        let calls: Vec<&TripletRecord> = records
            .iter()
            .filter(|record| !matches!(record, TripletRecord::NoRows(_)))
            .collect();
        let theirs = theirs.as_array().unwrap();
        assert_eq!(
            calls.len(),
            theirs.len(),
            "{name}: calls\n{records:#?}\n{theirs:#?}"
        );
        for (index, (record, triplet)) in calls.iter().zip(theirs).enumerate() {
            let at = format!("{name}: call {index}");
            match record {
                TripletRecord::Row(row) => {
                    assert_eq!(
                        json!(row.prompt_token_ids),
                        triplet["prompt"]["token_ids"],
                        "{at}"
                    );
                    assert_eq!(
                        json!(row.response_token_ids),
                        triplet["response"]["token_ids"],
                        "{at}"
                    );
                    assert_eq!(json!(row.reward), triplet["reward"], "{at}");
                    let metadata = &triplet["metadata"];
                    assert_eq!(json!(row.response_id), metadata["response_id"], "{at}");
                    assert_eq!(json!(row.agent_name), metadata["agent_name"], "{at}");
                    let urls = row.image_urls.clone().unwrap_or_default();
                    assert_eq!(json!(urls), triplet["prompt"]["image_urls"], "{at}");
                    let log_probs: Option<Vec<f64>> =
                        triplet["response"]["logprobs"].as_array().map(|entries| {
                            entries
                                .iter()
                                .map(|e| e["logprob"].as_f64().unwrap())
                                .collect()
                        });
                    assert_eq!(row.response_log_probs, log_probs, "{at}");
                    assert_eq!(row.origin.attempt_id.as_deref(), Some("a"), "{at}");
                    compared += 1;
                }
                TripletRecord::SkippedCall(call) => {
                    assert_eq!(call.reason, SkipReason::NoTokenIds, "{at}");
                    let empty = |ids: &Json| ids.as_array().is_none_or(Vec::is_empty);
                    assert!(
                        empty(&triplet["prompt"]["token_ids"])
                            || empty(&triplet["response"]["token_ids"]),
                        "{at}: upstream's triplet has no token ids"
                    );
                    assert_eq!(json!(call.reward), triplet["reward"], "{at}");
                }
                TripletRecord::NoRows(_) => unreachable!("filtered out"),
            }
        }
    }
    assert_eq!(compared, 5, "the rows the cases give");
}
