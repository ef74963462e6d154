//! Exports (`ExportRollouts`, `lightning-store export`, the console's
//! download) against a real server: the records read back as stored, each
//! ended rollout once and whole while rollouts keep finishing, a stopped
//! export resumed equals an uninterrupted one, hostile strings and a large
//! span survive, who may export, namespaces; on every backend.

use std::collections::HashSet;
use std::time::SystemTime;

use pb::attribute_value::Value as AttributeKind;
use serde_json::Value;
use tokio_stream::StreamExt as _;

use crate::common::http::{HttpClient, Version};
use crate::common::{Backend, Client, TestServer};
use lightning_store::proto as pb;

/// Text no layer may bend: quotes, a backslash, newlines, a NUL, emoji.
const HOSTILE: &str = "say \"hi\"\\ then\nnew line\r\n\u{0}nul \u{1F600}\u{2028}end";

fn text(key: &str, value: &str) -> pb::KeyValue {
    pb::KeyValue {
        key: key.to_owned(),
        value: Some(pb::AttributeValue {
            value: Some(AttributeKind::StringValue(value.to_owned())),
        }),
    }
}

fn number(key: &str, value: f64) -> pb::KeyValue {
    pb::KeyValue {
        key: key.to_owned(),
        value: Some(pb::AttributeValue {
            value: Some(AttributeKind::DoubleValue(value)),
        }),
    }
}

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

/// Starts a rollout with `input`, adds `spans` to its attempt, and ends
/// the attempt with `status`; returns the rollout id.
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
    for (i, attributes) in spans.into_iter().enumerate() {
        client
            .add_span(pb::AddSpanRequest {
                span: Some(span(
                    &rollout.rollout_id,
                    &attempt_id,
                    &format!("s{i}"),
                    attributes,
                )),
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

macro_rules! on_every_backend {
    ($($test:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                for backend in available_backends(&[Backend::Memory, Backend::Sqlite, Backend::Postgres]) {
                    super::$test(backend).await;
                }
            }
        )*
    };
}

mod each_backend {
    use crate::common::{Backend, available_backends};

    on_every_backend!(
        records_read_back_as_stored,
        a_stopped_export_resumed_equals_an_uninterrupted_one,
        an_export_while_rollouts_finish_holds_each_once_and_whole,
        an_export_sees_only_its_namespace,
    );
}

/// Filters narrow the selection; statuses outside the terminal ones select
/// nothing; layouts not written yet answer UNIMPLEMENTED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_narrow_and_unwritten_layouts_are_unimplemented() {
    let server = TestServer::start(Backend::Memory).await;
    let mut client = server.client().await;
    let good = rewarded(&mut client, "1", 1.0).await;
    finished(&mut client, "2", Vec::new(), pb::AttemptStatus::Failed).await;
    let only = |statuses: &[pb::RolloutStatus]| pb::ExportRolloutsRequest {
        status_in: statuses.iter().map(|&s| s as i32).collect(),
        ..Default::default()
    };
    let succeeded = export_with(&mut client, only(&[pb::RolloutStatus::Succeeded]), None).await;
    assert_eq!(succeeded.ids(), [good]);
    let running = export_with(&mut client, only(&[pb::RolloutStatus::Running]), None).await;
    assert_eq!((running.total, running.records.len()), (0, 0));
    for layout in [pb::ExportLayout::Triplets, pb::ExportLayout::Messages] {
        let refused = client
            .export_rollouts(pb::ExportRolloutsRequest {
                layout: layout as i32,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unimplemented, "{layout:?}");
        assert!(
            refused.message().contains("not implemented yet"),
            "{refused:?}"
        );
    }
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

    let download = http
        .get("/console/export?status=succeeded&layout=rollouts")
        .await;
    assert_eq!(download.status, 200, "{}", download.text());
    assert_eq!(
        download.headers["content-disposition"],
        "attachment; filename=\"rollouts.jsonl\""
    );
    let text = download.text();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
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
    let unwritten = http.get("/console/export?layout=triplets").await;
    assert_eq!(unwritten.status, 501);
    server.stop().await;
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
    let stdout = cli(&server, &["export"]).await;
    assert!(
        stdout.status.success(),
        "{}",
        String::from_utf8_lossy(&stdout.stderr)
    );
    let printed: Vec<Value> = String::from_utf8(stdout.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(printed.len(), 120);
    assert_eq!(
        without_cursor(&printed),
        without_cursor(&export(&mut client).await.json())
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.jsonl");
    let path = file.to_str().unwrap();
    let written = cli(&server, &["export", "--output", path]).await;
    assert!(written.status.success());
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
    let resumed = cli(&server, &["export", "--output", path, "--resume"]).await;
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(stderr.contains("exported: 70/70 rollouts"), "{stderr}");
    assert!(
        std::fs::read(&file).unwrap() == whole,
        "the resumed file is the uninterrupted one"
    );

    let gz = dir.path().join("run.jsonl.gz");
    let gz_path = gz.to_str().unwrap();
    let zipped = cli(
        &server,
        &["export", "--output", gz_path, "--format", "jsonl.gz"],
    )
    .await;
    assert!(zipped.status.success());
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
