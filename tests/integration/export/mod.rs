//! Exports (`ExportRollouts`, `lightning-store export`, the console's
//! download) against a real server: the records read back as stored, each
//! ended rollout once and whole while rollouts keep finishing, a stopped
//! export resumed equals an uninterrupted one, hostile strings and a large
//! span survive, who may export, namespaces; on every backend. The
//! Parquet format: [`parquet`].

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use pb::attribute_value::Value as AttributeKind;
use serde_json::Value;
use tokio_stream::StreamExt as _;

use crate::common::http::{HttpClient, HttpResponse, Version};
use crate::common::{Backend, Client, TestServer, number, text};
use lightning_store::proto as pb;

mod parquet;

/// Text no layer may bend: quotes, a backslash, newlines, a NUL, emoji.
const HOSTILE: &str = "say \"hi\"\\ then\nnew line\r\n\u{0}nul \u{1F600}\u{2028}end";

fn span(
    rollout_id: &str,
    attempt_id: &str,
    span_id: &str,
    attributes: Vec<pb::KeyValue>,
) -> pb::Span {
    let now = SystemTime::now();
    pb::Span {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".to_owned(),
        span_id: span_id.to_owned(),
        name: "agent.step".to_owned(),
        start_time: Some(now.into()),
        end_time: Some(now.into()),
        attributes,
        ..Default::default()
    }
}

/// Starts a rollout with `input`, adds spans with `spans`' attributes to
/// its attempt, and ends the attempt with `status`; returns the rollout id.
async fn finished<C>(
    client: &mut pb::lightning_store_service_client::LightningStoreServiceClient<C>,
    input: &str,
    spans: Vec<Vec<pb::KeyValue>>,
    status: pb::AttemptStatus,
) -> String
where
    C: tonic::client::GrpcService<tonic::body::Body>,
    C::Error: Into<tonic::codegen::StdError>,
    C::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <C::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let spans = spans
        .into_iter()
        .enumerate()
        .map(|(i, attributes)| span("", "", &format!("s{i}"), attributes))
        .collect();
    finished_with(client, input, spans, status).await
}

/// Starts a rollout with `input`, adds `spans` (their rollout and attempt
/// ids set) to its attempt, and ends the attempt with `status`; returns
/// the rollout id.
async fn finished_with<C>(
    client: &mut pb::lightning_store_service_client::LightningStoreServiceClient<C>,
    input: &str,
    spans: Vec<pb::Span>,
    status: pb::AttemptStatus,
) -> String
where
    C: tonic::client::GrpcService<tonic::body::Body>,
    C::Error: Into<tonic::codegen::StdError>,
    C::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <C::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let rollout = client
        .start_rollout(pb::StartRolloutRequest {
            rollout: Some(pb::RolloutSpec {
                input_json: input.to_owned(),
                ..Default::default()
            }),
            worker_id: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    let attempt_id = rollout.attempt.as_ref().unwrap().attempt_id.clone();
    for span in spans {
        client
            .add_span(pb::AddSpanRequest {
                span: Some(pb::Span {
                    rollout_id: rollout.rollout_id.clone(),
                    attempt_id: attempt_id.clone(),
                    ..span
                }),
                owner_epoch: None,
            })
            .await
            .unwrap();
    }
    client
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: rollout.rollout_id.clone(),
            attempt_id: attempt_id.clone(),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["status".to_owned()],
            }),
            status: status as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    rollout.rollout_id
}

/// A rollout that ended with one span carrying `reward`.
async fn rewarded(client: &mut Client, input: &str, reward: f64) -> String {
    finished(
        client,
        input,
        vec![vec![
            text("agentlightning.reward.0.name", "primary"),
            number("agentlightning.reward.0.value", reward),
        ]],
        pb::AttemptStatus::Succeeded,
    )
    .await
}

fn ints(key: &str, values: &[i64]) -> pb::KeyValue {
    let values = values
        .iter()
        .map(|&v| pb::AttributeValue {
            value: Some(AttributeKind::IntValue(v)),
        })
        .collect();
    pb::KeyValue {
        key: key.to_owned(),
        value: Some(pb::AttributeValue {
            value: Some(AttributeKind::ArrayValue(pb::ArrayValue { values })),
        }),
    }
}

/// A span named `name` under `parent`, from `times.0` to `times.1`
/// seconds into the run (its rollout and attempt set by `finished_with`).
fn timed(
    span_id: &str,
    parent: Option<&str>,
    name: &str,
    times: (u64, u64),
    attributes: Vec<pb::KeyValue>,
) -> pb::Span {
    let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s);
    pb::Span {
        span_id: span_id.to_owned(),
        parent_id: parent.map(str::to_owned),
        name: name.to_owned(),
        start_time: Some(at(times.0).into()),
        end_time: Some(at(times.1).into()),
        ..span("", "", span_id, attributes)
    }
}

/// An LLM call of agent-lightning 0.x: token ids (none when `prompt` is
/// empty), the chat's `messages` (role, content) and the answer.
fn llm_call(
    span_id: &str,
    times: (u64, u64),
    ids: (&[i64], &[i64]),
    messages: &[(&str, &str)],
    answer: &str,
) -> pb::Span {
    let mut attributes = vec![
        text("gen_ai.response.id", &format!("resp-{span_id}")),
        text("gen_ai.response.model", "qwen"),
        text("gen_ai.completion.0.role", "assistant"),
        text("gen_ai.completion.0.content", answer),
    ];
    if !ids.0.is_empty() {
        attributes.push(ints("prompt_token_ids", ids.0));
        attributes.push(ints("response_token_ids", ids.1));
    }
    for (i, (role, content)) in messages.iter().enumerate() {
        attributes.push(text(&format!("gen_ai.prompt.{i}.role"), role));
        attributes.push(text(&format!("gen_ai.prompt.{i}.content"), content));
    }
    timed(
        span_id,
        Some("root"),
        "openai.chat.completion",
        times,
        attributes,
    )
}

/// A reward of 0.x emitted at `at` seconds.
fn reward_span(span_id: &str, at: u64, value: f64) -> pb::Span {
    timed(
        span_id,
        Some("root"),
        "agentlightning.annotation",
        (at, at + 1),
        vec![
            text("agentlightning.reward.0.name", "primary"),
            number("agentlightning.reward.0.value", value),
        ],
    )
}

/// A 0.x rollout of an agent that chats twice with token ids (a reward
/// after each), then once more without them, each call continuing the
/// conversation; `tag` marks its texts.
async fn chatted(client: &mut Client, tag: &str) -> String {
    let question = format!("{tag}: {HOSTILE}");
    let spans = vec![
        timed(
            "root",
            None,
            "agent run",
            (0, 100),
            vec![text("agent.name", "solver")],
        ),
        llm_call(
            "c1",
            (10, 20),
            (&[1, 2], &[3]),
            &[("user", &question)],
            "one",
        ),
        reward_span("r1", 25, 0.5),
        llm_call(
            "c2",
            (30, 40),
            (&[1, 2, 3, 4], &[5, 6]),
            &[("user", &question), ("assistant", "one"), ("user", "more")],
            "two\nlines",
        ),
        reward_span("r2", 45, 1.0),
        llm_call(
            "c3",
            (50, 60),
            (&[], &[]),
            &[
                ("user", &question),
                ("assistant", "one"),
                ("user", "more"),
                ("assistant", "two\nlines"),
                ("user", "last"),
            ],
            "three",
        ),
    ];
    finished_with(
        client,
        &format!("{{\"tag\": \"{tag}\"}}"),
        spans,
        pb::AttemptStatus::Succeeded,
    )
    .await
}

/// What the core's trajectory functions make of a stored rollout: its
/// `triplets` records and its conversation, as JSON.
async fn trajectory_of(server: &TestServer, rollout_id: &str) -> (Vec<Value>, Option<Value>) {
    use lightning_store::core::ids::RolloutId;
    use lightning_store::core::model::Span;
    use lightning_store::core::trajectory::{self, Trace};

    let id = RolloutId::parse("rollout_id", rollout_id.to_owned()).unwrap();
    let download = server.engine.rollout_download(&id).await.unwrap();
    let attempt = download.view.attempt.as_ref();
    let spans: Vec<Span> = download
        .spans
        .iter()
        .filter(|span| Some(&span.attempt_id) == attempt.map(|a| &a.attempt_id))
        .map(|span| Span::clone(span))
        .collect();
    let rollout = &download.view.rollout;
    let triplets = trajectory::triplets(rollout, attempt, Trace::Spans(&spans)).unwrap();
    let conversation = trajectory::conversation(rollout, attempt, Trace::Spans(&spans)).unwrap();
    (
        triplets
            .iter()
            .map(|record| serde_json::to_value(record).unwrap())
            .collect(),
        conversation.map(|c| serde_json::to_value(c).unwrap()),
    )
}

/// Checks that only each rollout's last record carries a cursor (in the
/// JSON and beside it), the cursor after that rollout.
fn only_last_records_carry_cursors(exported: &Exported) {
    let json = exported.json();
    for (i, (record, line)) in exported.records.iter().zip(&json).enumerate() {
        let last = json
            .get(i + 1)
            .is_none_or(|next| next["rollout_id"] != line["rollout_id"]);
        if last {
            assert_eq!(line["cursor"], record.cursor.as_str(), "{line}");
            let id = line["rollout_id"].as_str().unwrap();
            assert!(record.cursor.ends_with(&format!(".{id}")), "{line}");
        } else {
            assert_eq!(line["cursor"], Value::Null, "{line}");
            assert_eq!(record.cursor, "", "{line}");
        }
    }
}

/// What an export's stream carried.
struct Exported {
    total: u64,
    start: String,
    records: Vec<pb::ExportRecord>,
}

impl Exported {
    fn json(&self) -> Vec<Value> {
        self.records
            .iter()
            .map(|r| serde_json::from_str(&r.json).unwrap())
            .collect()
    }

    fn ids(&self) -> Vec<String> {
        self.json()
            .iter()
            .map(|r| r["rollout_id"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Reads an export's stream, stopping (dropping it) after `stop_after`
/// records when given.
async fn export_with(
    client: &mut Client,
    request: pb::ExportRolloutsRequest,
    stop_after: Option<usize>,
) -> Exported {
    let mut stream = client.export_rollouts(request).await.unwrap().into_inner();
    let mut exported = Exported {
        total: 0,
        start: String::new(),
        records: Vec::new(),
    };
    while let Some(message) = stream.next().await {
        match message.unwrap().message.unwrap() {
            pb::export_rollouts_response::Message::Start(start) => {
                exported.total = start.total;
                exported.start = start.cursor;
            }
            pb::export_rollouts_response::Message::Batch(batch) => {
                for record in batch.records {
                    exported.records.push(record);
                    if stop_after == Some(exported.records.len()) {
                        return exported;
                    }
                }
            }
        }
    }
    exported
}

async fn export(client: &mut Client) -> Exported {
    export_with(client, pb::ExportRolloutsRequest::default(), None).await
}

/// Every record's JSON, `cursor` aside (it carries the selection's instant).
fn without_cursor(records: &[Value]) -> Vec<Value> {
    records
        .iter()
        .map(|record| {
            let mut record = record.clone();
            record.as_object_mut().unwrap().remove("cursor");
            record
        })
        .collect()
}

async fn records_read_back_as_stored(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut client = server.client().await;
    let good = rewarded(&mut client, r#"{"task": "add", "n": [1, 2.5]}"#, 0.75).await;
    let big = "x".repeat(2 * 1024 * 1024);
    let hostile_input = serde_json::to_string(&serde_json::json!({"q": HOSTILE})).unwrap();
    let odd = finished(
        &mut client,
        &hostile_input,
        vec![vec![text("note", HOSTILE)], vec![text("payload", &big)]],
        pb::AttemptStatus::Failed,
    )
    .await;
    // Neither a running nor a queued rollout is exported.
    client
        .start_rollout(pb::StartRolloutRequest::default())
        .await
        .unwrap();
    crate::common::enqueue(&mut client, "{}").await;

    let exported = export(&mut client).await;
    assert_eq!(exported.total, 2, "{backend:?}");
    let mut expected = vec![good.clone(), odd.clone()];
    expected.sort();
    assert_eq!(
        exported.ids(),
        expected,
        "{backend:?}: ended ones, in id order"
    );
    for record in &exported.records {
        assert!(!record.json.contains('\n'), "one line per record");
        let json: Value = serde_json::from_str(&record.json).unwrap();
        assert_eq!(json["cursor"], record.cursor.as_str());
    }
    let by_id = |id: &str| {
        exported
            .json()
            .into_iter()
            .find(|r| r["rollout_id"] == id)
            .unwrap()
    };
    let good = by_id(&good);
    assert_eq!(
        good["input"],
        serde_json::json!({"task": "add", "n": [1, 2.5]})
    );
    assert_eq!(good["status"], "succeeded");
    assert_eq!(good["reward"], 0.75);
    assert_eq!(good["reward_dimensions"][0]["name"], "primary");
    assert_eq!(good["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(good["attempts"][0]["status"], "succeeded");
    assert_eq!(good["spans"].as_array().unwrap().len(), 1);
    assert_eq!(good["spans_evicted"], false);
    assert!(good["end_time"].as_f64().unwrap() >= good["start_time"].as_f64().unwrap());

    let odd = by_id(&odd);
    assert_eq!(odd["input"]["q"], HOSTILE, "{backend:?}");
    assert_eq!(odd["status"], "failed");
    assert_eq!(odd["reward"], Value::Null);
    let spans = odd["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0]["attributes"]["note"], HOSTILE, "{backend:?}");
    assert_eq!(
        spans[1]["attributes"]["payload"].as_str().unwrap().len(),
        big.len()
    );
    server.stop().await;
}

async fn a_stopped_export_resumed_equals_an_uninterrupted_one(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut client = server.client().await;
    // More than a page of the engine's keyset paging (100).
    let count = 230;
    for i in 0..count {
        rewarded(&mut client, &format!("{{\"i\": {i}}}"), f64::from(i)).await;
    }
    let whole = export(&mut client).await;
    assert_eq!(whole.records.len(), count as usize, "{backend:?}");
    assert_eq!(whole.total, count as u64);
    // Stop after 130 records (in the second page), then continue.
    let first = export_with(
        &mut client,
        pb::ExportRolloutsRequest {
            after: whole.start.clone(),
            ..Default::default()
        },
        Some(130),
    )
    .await;
    let rest = export_with(
        &mut client,
        pb::ExportRolloutsRequest {
            after: first.records.last().unwrap().cursor.clone(),
            ..Default::default()
        },
        None,
    )
    .await;
    assert_eq!(rest.total, count as u64 - 130, "{backend:?}");
    let joined: Vec<&str> = first
        .records
        .iter()
        .chain(&rest.records)
        .map(|r| r.json.as_str())
        .collect();
    let uninterrupted: Vec<&str> = whole.records.iter().map(|r| r.json.as_str()).collect();
    assert_eq!(
        joined, uninterrupted,
        "{backend:?}: byte for byte, cursors included"
    );
    // A cursor this server did not write is refused.
    let refused = client
        .export_rollouts(pb::ExportRolloutsRequest {
            after: "ro-123".to_owned(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    server.stop().await;
}

async fn an_export_while_rollouts_finish_holds_each_once_and_whole(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut client = server.client().await;
    let mut before = HashSet::new();
    for i in 0..150 {
        before.insert(rewarded(&mut client, &format!("{{\"i\": {i}}}"), 1.0).await);
    }
    // A bounded load that keeps finishing rollouts (three spans each)
    // while the export runs.
    let mut load_client = server.client().await;
    let load = tokio::spawn(async move {
        for i in 0..150 {
            finished(
                &mut load_client,
                &format!("{{\"late\": {i}}}"),
                vec![
                    vec![text("k", "a")],
                    vec![text("k", "b")],
                    vec![text("k", "c")],
                ],
                pb::AttemptStatus::Succeeded,
            )
            .await;
        }
    });
    let exported = export(&mut client).await;
    load.await.unwrap();
    let ids = exported.ids();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{backend:?}: no rollout twice");
    assert!(
        before.iter().all(|id| unique.contains(id)),
        "{backend:?}: every rollout ended before the export is in it"
    );
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "{backend:?}: in id order");
    for record in exported.json() {
        assert_eq!(record["status"], "succeeded", "{backend:?}");
        let spans = record["spans"].as_array().unwrap().len();
        let late = record["input"].get("late").is_some();
        assert_eq!(
            spans,
            if late { 3 } else { 1 },
            "{backend:?}: whole: {record}"
        );
    }
    server.stop().await;
}

async fn an_export_sees_only_its_namespace(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut client = server.client().await;
    client
        .create_namespace(pb::CreateNamespaceRequest {
            name: "run-a".to_owned(),
            ..Default::default()
        })
        .await
        .unwrap();
    let in_default = rewarded(&mut client, "1", 1.0).await;
    let channel = server.channel().await;
    let mut in_a =
        pb::lightning_store_service_client::LightningStoreServiceClient::with_interceptor(
            channel,
            |mut request: tonic::Request<()>| {
                request
                    .metadata_mut()
                    .insert("lightning-store-namespace", "run-a".parse().unwrap());
                Ok(request)
            },
        );
    let a = finished(&mut in_a, "2", Vec::new(), pb::AttemptStatus::Succeeded).await;
    let mut stream = in_a
        .export_rollouts(pb::ExportRolloutsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut ids = Vec::new();
    while let Some(message) = stream.next().await {
        if let Some(pb::export_rollouts_response::Message::Batch(batch)) = message.unwrap().message
        {
            for record in batch.records {
                let json: Value = serde_json::from_str(&record.json).unwrap();
                ids.push(json["rollout_id"].as_str().unwrap().to_owned());
            }
        }
    }
    assert_eq!(ids, [a], "{backend:?}");
    assert_eq!(export(&mut client).await.ids(), [in_default], "{backend:?}");
    server.stop().await;
}

/// The `triplets` and `messages` layouts of 0.x rollouts: what the core's
/// trajectory functions make of the stored rollout, one rollout's records
/// in a row, only its last with the cursor; a rollout without a model call
/// gives one `no_rows` record and no conversation.
async fn the_training_layouts_are_the_trajectory_functions(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut client = server.client().await;
    let mut ids = vec![
        chatted(&mut client, "a").await,
        rewarded(&mut client, "1", 0.25).await,
        chatted(&mut client, "b").await,
    ];
    ids.sort();
    let layout = |layout: pb::ExportLayout| pb::ExportRolloutsRequest {
        layout: layout as i32,
        ..Default::default()
    };

    let triplets = export_with(&mut client, layout(pb::ExportLayout::Triplets), None).await;
    assert_eq!(triplets.total, 3);
    only_last_records_carry_cursors(&triplets);
    let mut expected = Vec::new();
    for id in &ids {
        expected.extend(trajectory_of(&server, id).await.0);
    }
    assert_eq!(without_cursor(&triplets.json()), expected);
    let kinds: Vec<_> = triplets
        .json()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "row").count(),
        4,
        "two rows per chat: {kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "skipped_call").count(), 2);
    assert_eq!(kinds.iter().filter(|k| *k == "no_rows").count(), 1);
    let json = triplets.json();
    let row = json.iter().find(|r| r["kind"] == "row").unwrap();
    assert_eq!(row["prompt_token_ids"], serde_json::json!([1, 2]));
    assert_eq!(row["reward"], 0.5);

    let messages = export_with(&mut client, layout(pb::ExportLayout::Messages), None).await;
    assert_eq!(
        messages.records.len(),
        2,
        "none for the rollout without calls"
    );
    only_last_records_carry_cursors(&messages);
    let mut expected = Vec::new();
    for id in &ids {
        expected.extend(trajectory_of(&server, id).await.1);
    }
    assert_eq!(without_cursor(&messages.json()), expected);
    let conversation = &messages.json()[0];
    assert_eq!(conversation["reward"], 1.0);
    assert_eq!(conversation["calls_in_conversation"], 3);
    assert_eq!(conversation["messages"].as_array().unwrap().len(), 6);
    assert!(
        conversation["messages"][0]["content"]
            .as_str()
            .unwrap()
            .ends_with(HOSTILE),
        "{conversation}"
    );
    assert!(messages.records.iter().all(|r| !r.json.contains('\n')));
    server.stop().await;
}

/// A 1.x rollout's calls through the gateway: its `triplets` records are
/// the core's of its events, its reward in the `rollouts` layout the last
/// reward event's.
async fn a_gateway_rollouts_triplets(backend: Backend) {
    use crate::agl1::support::{self, Api, chat_body};
    use crate::common::model_server::{ModelServer, token_ids};
    use lightning_store::core::agl1::Agl1State;
    use lightning_store::core::ids::RolloutId;
    use lightning_store::core::trajectory::{self, Trace};

    let server = support::start(backend).await;
    let api = Api::new(&server);
    let model = ModelServer::start().await;
    api.register(&[model.endpoint()]).await;
    api.create_one("g1", serde_json::json!({"q": HOSTILE}))
        .await;
    for prompt in ["hello", "again"] {
        let answer = api.chat("g1", "train", &chat_body(prompt)).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let reward = api
        .post_event("g1", "0", "reward", serde_json::json!({"value": 0.75}))
        .await;
    assert!(reward.status < 300, "{}", reward.text());
    api.set_state("g1", "running").await;
    api.set_state("g1", "succeeded").await;

    let mut client = support::grpc(&server).await;
    let mut stream = client
        .export_rollouts(pb::ExportRolloutsRequest {
            layout: pb::ExportLayout::Triplets as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut exported = Exported {
        total: 0,
        start: String::new(),
        records: Vec::new(),
    };
    while let Some(message) = stream.next().await {
        if let pb::export_rollouts_response::Message::Batch(batch) =
            message.unwrap().message.unwrap()
        {
            exported.records.extend(batch.records);
        }
    }
    only_last_records_carry_cursors(&exported);
    let lines = exported.json();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[0]["prompt_token_ids"],
        serde_json::json!(token_ids("hello"))
    );
    assert_eq!(lines[1]["reward"], 0.75, "the last row has the reward");

    let id = RolloutId::parse("rollout_id", "g1".to_owned()).unwrap();
    let download = server.engine.rollout_download(&id).await.unwrap();
    let rollout = &download.view.rollout;
    assert_eq!(Agl1State::of(rollout.status), Agl1State::Succeeded);
    let events = download.agl1_events.as_deref().unwrap();
    let expected: Vec<Value> = trajectory::triplets(
        rollout,
        download.view.attempt.as_ref(),
        Trace::Events {
            events,
            error_message: download.agl1_error_message.as_deref(),
        },
    )
    .unwrap()
    .iter()
    .map(|record| serde_json::to_value(record).unwrap())
    .collect();
    assert_eq!(without_cursor(&lines), expected);

    let mut stream = client
        .export_rollouts(pb::ExportRolloutsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut rollouts = Vec::new();
    while let Some(message) = stream.next().await {
        if let pb::export_rollouts_response::Message::Batch(batch) =
            message.unwrap().message.unwrap()
        {
            rollouts.extend(batch.records);
        }
    }
    let record: Value = serde_json::from_str(&rollouts[0].json).unwrap();
    assert_eq!(record["reward"], 0.75, "from the reward event");
    assert_eq!(record["reward_dimensions"], serde_json::json!([]));
    server.stop().await;
}

/// One read of an export takes rollouts until their spans weigh its
/// budget: at least one, every one under a budget no read reaches, and
/// `None` for a rollout that is not stored.
async fn a_read_takes_rollouts_until_their_spans_weigh_its_budget(backend: Backend) {
    use lightning_store::core::ids::RolloutId;

    let server = TestServer::start(backend).await;
    let mut client = server.client().await;
    let id = |text: String| RolloutId::parse("rollout_id", text).unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(id(rewarded(&mut client, &i.to_string(), 0.5).await));
    }
    ids.insert(1, id("ro-000000000000".to_owned()));
    let read = |budget: usize| {
        let (engine, ids) = (&server.engine, &ids);
        async move { engine.rollout_downloads(ids, budget).await.unwrap() }
    };
    let all = read(usize::MAX).await;
    let stored: Vec<bool> = all.iter().map(Option::is_some).collect();
    assert_eq!(stored, [true, false, true, true]);
    for (download, id) in all.iter().flatten().zip([&ids[0], &ids[2], &ids[3]]) {
        assert_eq!(download.view.rollout.rollout_id, id.as_str());
        assert_eq!(download.spans.len(), 1);
    }
    assert_eq!(read(0).await.len(), 1, "at least one");
    let first: usize = all[0]
        .as_ref()
        .unwrap()
        .spans
        .iter()
        .map(|s| s.weight())
        .sum();
    assert_eq!(
        read(first).await.len(),
        1,
        "the first one weighs the budget"
    );
    assert_eq!(
        read(first + 1).await.len(),
        3,
        "the missing one weighs nothing; the third passes the budget"
    );
    server.stop().await;
}

mod each_backend {
    on_every_backend!(
        a_read_takes_rollouts_until_their_spans_weigh_its_budget,
        records_read_back_as_stored,
        a_stopped_export_resumed_equals_an_uninterrupted_one,
        an_export_while_rollouts_finish_holds_each_once_and_whole,
        an_export_sees_only_its_namespace,
        the_training_layouts_are_the_trajectory_functions,
        a_gateway_rollouts_triplets,
    );
}

/// Filters narrow the selection; statuses outside the terminal ones select
/// nothing; an unknown layout, or a cursor given with other filters or
/// another layout than its export's, is INVALID_ARGUMENT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_narrow_and_unknown_layouts_are_refused() {
    let server = TestServer::start(Backend::Memory).await;
    let mut client = server.client().await;
    let good = rewarded(&mut client, "1", 1.0).await;
    finished(&mut client, "2", Vec::new(), pb::AttemptStatus::Failed).await;
    let only = |statuses: &[pb::RolloutStatus]| pb::ExportRolloutsRequest {
        status_in: statuses.iter().map(|&s| s as i32).collect(),
        ..Default::default()
    };
    let succeeded = export_with(&mut client, only(&[pb::RolloutStatus::Succeeded]), None).await;
    assert_eq!(succeeded.ids(), std::slice::from_ref(&good));
    let running = export_with(&mut client, only(&[pb::RolloutStatus::Running]), None).await;
    assert_eq!((running.total, running.records.len()), (0, 0));
    let refused = client
        .export_rollouts(pb::ExportRolloutsRequest {
            layout: 99,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().contains("unknown export layout 99"),
        "{refused:?}"
    );
    // The end window: `from` inclusive, `until` exclusive.
    let good_end = client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: good.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .and_then(|r| r.end_time)
        .unwrap();
    let ended = |from: Option<prost_types::Timestamp>, until: Option<prost_types::Timestamp>| {
        pb::ExportRolloutsRequest {
            end_time_from: from,
            end_time_until: until,
            ..only(&[pb::RolloutStatus::Succeeded])
        }
    };
    let from_its_end = export_with(&mut client, ended(Some(good_end), None), None).await;
    assert_eq!(from_its_end.ids(), std::slice::from_ref(&good));
    let until_its_end = export_with(&mut client, ended(None, Some(good_end)), None).await;
    assert_eq!((until_its_end.total, until_its_end.records.len()), (0, 0));
    // A cursor resumes only the filters and layout it was written by.
    let cursor = succeeded.records[0].cursor.clone();
    for other in [
        pb::ExportRolloutsRequest {
            after: cursor.clone(),
            ..ended(Some(good_end), None)
        },
        pb::ExportRolloutsRequest {
            after: cursor.clone(),
            ..only(&[pb::RolloutStatus::Succeeded, pb::RolloutStatus::Failed])
        },
        pb::ExportRolloutsRequest {
            after: cursor.clone(),
            layout: pb::ExportLayout::Triplets as i32,
            ..only(&[pb::RolloutStatus::Succeeded])
        },
    ] {
        let refused = client.export_rollouts(other).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(
            refused
                .message()
                .contains("other filters or another layout"),
            "{refused:?}"
        );
    }
    let resumed = pb::ExportRolloutsRequest {
        after: cursor,
        ..only(&[pb::RolloutStatus::Succeeded])
    };
    assert!(
        export_with(&mut client, resumed, None)
            .await
            .records
            .is_empty()
    );
    server.stop().await;
}

/// A reader's token may export; a runner's, which reads what it runs, may not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_may_export_and_a_runner_may_not() {
    use lightning_store::auth::Tokens;
    use lightning_store::auth::policy::Role;
    use lightning_store::auth::tokens::{LineScope, file_line};
    use lightning_store::server::ServerConfig;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let lines = [
        file_line("reader", &[Role::Read], &LineScope::default()),
        file_line("runner", &[Role::Runner], &LineScope::default()),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tokens: Tokens::load(Some(&path), None).unwrap(),
            ..ServerConfig::default()
        },
    )
    .await;
    let channel = server.channel().await;
    let call = |token: &'static str| {
        let mut client =
            pb::lightning_store_service_client::LightningStoreServiceClient::new(channel.clone());
        async move {
            let mut request = tonic::Request::new(pb::ExportRolloutsRequest::default());
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
            match client.export_rollouts(request).await {
                Ok(response) => {
                    let mut stream = response.into_inner();
                    let first = stream.next().await.unwrap().unwrap();
                    Ok(first)
                }
                Err(status) => Err(status.code()),
            }
        }
    };
    let start = call("reader").await.unwrap();
    assert!(matches!(
        start.message,
        Some(pb::export_rollouts_response::Message::Start(
            pb::ExportStart { total: 0, .. }
        ))
    ));
    assert_eq!(
        call("runner").await.unwrap_err(),
        tonic::Code::PermissionDenied
    );
    // The console's download asks the same of a token.
    let http = HttpClient::new(server.addr, Version::Http1);
    for (token, status) in [("reader", 200), ("runner", 403)] {
        let bearer = format!("Bearer {token}");
        let download = http
            .request(
                "GET",
                "/console/export?layout=rollouts",
                &[("authorization", &bearer)],
                Vec::new(),
            )
            .await;
        assert_eq!(download.status, status, "{token}: {}", download.text());
    }
    server.stop().await;
}

/// The console's download: the Rollouts page links to it with its
/// filters, and it answers the same records as the RPC, as a JSON Lines
/// attachment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_downloads_the_rollouts_pages_selection() {
    let server = TestServer::start(Backend::Memory).await;
    let mut client = server.client().await;
    for i in 0..5 {
        rewarded(&mut client, &format!("{{\"i\": {i}}}"), 0.5).await;
    }
    finished(&mut client, "{}", Vec::new(), pb::AttemptStatus::Failed).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let page = http.get("/console/rollouts?status=succeeded").await;
    assert_eq!(page.status, 200);
    // The link carries the page's filters (its `&` escaped as HTML).
    let link = "href=\"/console/export?status=succeeded&#38;layout=rollouts\"";
    assert!(page.text().contains(link), "{}", page.text());

    let download =
        console_export(&http, "status=succeeded&layout=rollouts", "rollouts.jsonl").await;
    assert!(download.text().ends_with('\n'));
    let lines = json_lines(&download.body);
    let rpc = export_with(
        &mut client,
        pb::ExportRolloutsRequest {
            status_in: vec![pb::RolloutStatus::Succeeded as i32],
            ..Default::default()
        },
        None,
    )
    .await;
    assert_eq!(lines.len(), 5);
    assert_eq!(without_cursor(&lines), without_cursor(&rpc.json()));

    // The training layouts too, as the RPC writes them.
    chatted(&mut client, "c").await;
    let download =
        console_export(&http, "status=succeeded&layout=triplets", "triplets.jsonl").await;
    let lines = json_lines(&download.body);
    let rpc = export_with(
        &mut client,
        pb::ExportRolloutsRequest {
            status_in: vec![pb::RolloutStatus::Succeeded as i32],
            layout: pb::ExportLayout::Triplets as i32,
            ..Default::default()
        },
        None,
    )
    .await;
    assert_eq!(
        lines.len(),
        5 + 3,
        "five no-rows records, two rows, a skipped call"
    );
    assert_eq!(without_cursor(&lines), without_cursor(&rpc.json()));
    let cursors = lines
        .iter()
        .filter(|line| line["cursor"].is_string())
        .count();
    assert_eq!(cursors, 6, "one per rollout");
    server.stop().await;
}

/// Runs the binary with `args` against `server`, checks that it succeeded,
/// and returns its output.
async fn cli_ok(server: &TestServer, args: &[&str]) -> std::process::Output {
    let output = cli(server, args).await;
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Parses JSON Lines.
fn json_lines(file: &[u8]) -> Vec<Value> {
    std::str::from_utf8(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Downloads the console's export `query` and checks that it answers the
/// attachment `filename`.
async fn console_export(http: &HttpClient, query: &str, filename: &str) -> HttpResponse {
    let download = http.get(&format!("/console/export?{query}")).await;
    assert_eq!(download.status, 200, "{}", download.text());
    assert_eq!(
        download.headers["content-disposition"],
        format!("attachment; filename=\"{filename}\"")
    );
    download
}

/// Runs the binary with `args` against `server`.
async fn cli(server: &TestServer, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"));
    command
        .args(args)
        .args(["--server", &server.url])
        .env_remove("LIGHTNING_STORE_SERVER");
    tokio::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .unwrap()
}

/// `lightning-store export`: standard output, a file with its progress,
/// gzip, and `--resume` after a torn last line equals the uninterrupted
/// file byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_exports_and_resumes_after_a_torn_line() {
    let server = TestServer::start(Backend::Sqlite).await;
    let mut client = server.client().await;
    for i in 0..120 {
        rewarded(
            &mut client,
            &format!("{{\"i\": {i}, \"s\": \"{}\"}}", "é\\n"),
            0.25,
        )
        .await;
    }
    let printed = json_lines(&cli_ok(&server, &["export"]).await.stdout);
    assert_eq!(printed.len(), 120);
    assert_eq!(
        without_cursor(&printed),
        without_cursor(&export(&mut client).await.json())
    );
    // The end window's flags reach the server.
    for (window, lines) in [
        (["--ended-from", "2000-01-01T00:00:00Z"], 120),
        (["--ended-until", "2000-01-01T00:00:00Z"], 0),
    ] {
        let output = cli_ok(&server, &[&["export"], &window[..]].concat()).await;
        assert_eq!(json_lines(&output.stdout).len(), lines, "{window:?}");
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.jsonl");
    let path = file.to_str().unwrap();
    let written = cli_ok(&server, &["export", "--output", path]).await;
    let stderr = String::from_utf8_lossy(&written.stderr);
    assert!(stderr.contains("exported: 120/120 rollouts"), "{stderr}");
    let whole = std::fs::read(&file).unwrap();

    // An export killed in the middle of its 51st record.
    let cut = whole
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(49)
        .unwrap()
        .0
        + 40;
    std::fs::write(&file, &whole[..cut]).unwrap();
    // Rollouts finished since are not in the resumed selection.
    rewarded(&mut client, "\"later\"", 1.0).await;
    let resumed = cli_ok(&server, &["export", "--output", path, "--resume"]).await;
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(stderr.contains("exported: 70/70 rollouts"), "{stderr}");
    assert!(
        std::fs::read(&file).unwrap() == whole,
        "the resumed file is the uninterrupted one"
    );

    let gz = dir.path().join("run.jsonl.gz");
    let gz_path = gz.to_str().unwrap();
    cli_ok(
        &server,
        &["export", "--output", gz_path, "--format", "jsonl.gz"],
    )
    .await;
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()),
        &mut text,
    )
    .unwrap();
    assert_eq!(text.lines().count(), 121, "with the later one");
    let refused = cli(
        &server,
        &[
            "export", "--output", gz_path, "--format", "jsonl.gz", "--resume",
        ],
    )
    .await;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("--resume continues a --format jsonl file only")
    );
    server.stop().await;
}

/// `lightning-store export --layout triplets --resume` after an export cut
/// in the middle of a rollout's records (a complete record without a
/// cursor, then a torn one) writes that rollout again, whole: the file
/// equals the uninterrupted one byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_resumes_a_triplets_export_cut_mid_rollout() {
    let server = TestServer::start(Backend::Sqlite).await;
    let mut client = server.client().await;
    for i in 0..4 {
        chatted(&mut client, &format!("t{i}")).await;
        rewarded(&mut client, &i.to_string(), 0.5).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("triplets.jsonl");
    let path = file.to_str().unwrap();
    let args = ["export", "--layout", "triplets", "--output", path];
    let written = cli_ok(&server, &args).await;
    let stderr = String::from_utf8_lossy(&written.stderr);
    assert!(stderr.contains("exported: 8/8 rollouts"), "{stderr}");
    let whole = std::fs::read(&file).unwrap();
    let lines = json_lines(&whole);
    assert_eq!(lines.len(), 4 * 3 + 4);

    // The last record without a cursor that follows one with a cursor: the
    // cut keeps it whole and tears the next one.
    let mid = (1..lines.len())
        .rev()
        .find(|&i| lines[i]["cursor"].is_null() && lines[i - 1]["cursor"].is_string())
        .unwrap();
    let ends: Vec<usize> = whole
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(at, _)| at)
        .collect();
    let cut = ends[mid] + 1 + 20;
    assert!(cut < ends[mid + 1]);
    std::fs::write(&file, &whole[..cut]).unwrap();
    let resumed = cli_ok(&server, &[&args[..], &["--resume"]].concat()).await;
    let rollouts_done = lines[..mid]
        .iter()
        .filter(|l| l["cursor"].is_string())
        .count();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    let left = 8 - rollouts_done;
    assert!(
        stderr.contains(&format!("exported: {left}/{left} rollouts")),
        "{stderr}"
    );
    assert!(
        std::fs::read(&file).unwrap() == whole,
        "the resumed file is the uninterrupted one"
    );
    server.stop().await;
}
