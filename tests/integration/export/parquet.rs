//! Exports as Apache Parquet (`--format parquet`, the console's
//! `format=parquet`): every layout's file holds what its JSON Lines export
//! holds, read back with the `parquet` crate field by field and with the
//! readers people open it with (pyarrow, pandas, polars, DuckDB, Hugging
//! Face `datasets`, tests/data_python/read_export.py).

use serde_json::{Map, Value};

use super::{
    HOSTILE, chatted, cli, cli_ok, console_export, finished, json_lines, rewarded, without_cursor,
};
use crate::common::http::{HttpClient, Version};
use crate::common::{Backend, TestServer, pyenv_python, text};
use lightning_store::formats::{Kind, Schema, layouts};
use lightning_store::proto as pb;
use parquet::file::reader::{FileReader, SerializedFileReader};

/// Reads a Parquet file's rows as JSON, in the shape of the layout's JSON
/// records: `JSON` columns parsed, a struct's `extra` merged back into it,
/// nulls left out.
fn parquet_records(file: &[u8], schema: &Schema) -> Vec<Value> {
    let reader = SerializedFileReader::new(bytes::Bytes::copy_from_slice(file)).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            let row = row.unwrap().to_json_value();
            let kind = Kind::Struct(schema.fields.clone());
            reshape(row, &kind)
        })
        .collect()
}

/// Returns a value read from Parquet as the JSON record held it.
fn reshape(value: Value, kind: &Kind) -> Value {
    match (value, kind) {
        (Value::String(text), Kind::Json | Kind::Extra) => {
            without_nulls(serde_json::from_str(&text).expect("a JSON column holds JSON"))
        }
        (Value::Array(items), Kind::List(item)) => {
            Value::Array(items.into_iter().map(|v| reshape(v, item)).collect())
        }
        (Value::Object(mut object), Kind::Struct(fields)) => {
            let mut shaped = Map::new();
            for field in fields {
                let Some(value) = object.remove(field.name).filter(|v| !v.is_null()) else {
                    continue;
                };
                match reshape(value, &field.kind) {
                    Value::Object(extra) if field.kind == Kind::Extra => shaped.extend(extra),
                    value => {
                        shaped.insert(field.name.to_owned(), value);
                    }
                }
            }
            Value::Object(shaped)
        }
        (value, _) => value,
    }
}

/// Returns `value` without the object fields that are `null`, at every
/// depth (a Parquet file reads a missing field as null).
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        value => value,
    }
}

/// The JSON Lines records without their nulls (a Parquet row leaves them out).
fn json_records(file: &[u8]) -> Vec<Value> {
    json_lines(file).into_iter().map(without_nulls).collect()
}

/// The list column each layout's readers are compared on.
fn nested_column(layout: &str) -> &'static str {
    match layout {
        "rollouts" => "spans",
        "triplets" => "prompt_token_ids",
        _ => "messages",
    }
}

/// What tests/data_python/read_export.py prints for each reader, from the
/// JSON Lines records.
fn reader_summary(records: &[Value], nested: &str) -> Value {
    serde_json::json!({
        "rows": records.len(),
        "rollout_id": records.iter().map(|r| r["rollout_id"].clone()).collect::<Vec<_>>(),
        "reward": records.iter().map(|r| r["reward"].as_f64()).collect::<Vec<_>>(),
        "nested": records
            .iter()
            .map(|r| r[nested].as_array().map(Vec::len))
            .collect::<Vec<_>>(),
    })
}

/// A store holding a 1.x rollout through the gateway (its events, its
/// training rows), 0.x rollouts with rewards, model calls with token ids,
/// hostile strings and a 2 MiB attribute, and a failed one.
async fn varied_store(backend: Backend) -> (TestServer, crate::common::model_server::ModelServer) {
    use crate::agl1::support::{self, Api, chat_body};
    use crate::common::model_server::ModelServer;

    // Open, without the 1.x key, for the 0.x client and the command line.
    let server = support::start_with(backend, |options| {
        options.config.tokens = lightning_store::server::ServerConfig::default().tokens;
    })
    .await;
    let api = Api::new(&server);
    let model = ModelServer::start().await;
    api.register(&[model.endpoint()]).await;
    api.create_one("g1", serde_json::json!({"q": HOSTILE}))
        .await;
    let answer = api.chat("g1", "train", &chat_body("hello")).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let reward = api
        .post_event("g1", "0", "reward", serde_json::json!({"value": 0.75}))
        .await;
    assert!(reward.status < 300, "{}", reward.text());
    api.set_state("g1", "running").await;
    api.set_state("g1", "succeeded").await;

    let mut client = server.client().await;
    for i in 0..3 {
        rewarded(
            &mut client,
            &format!("{{\"i\": {i}, \"n\": [1, 2.5]}}"),
            0.25,
        )
        .await;
    }
    chatted(&mut client, "a").await;
    let big = "x".repeat(2 * 1024 * 1024);
    let hostile = serde_json::to_string(&serde_json::json!({"q": HOSTILE})).unwrap();
    finished(
        &mut client,
        &hostile,
        vec![vec![text("note", HOSTILE)], vec![text("payload", &big)]],
        pb::AttemptStatus::Failed,
    )
    .await;
    (server, model)
}

/// Every layout exported as Parquet by the command line holds, row for
/// row and field for field, what its JSON Lines export holds; pyarrow,
/// pandas, polars, DuckDB and `datasets` read the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_layout_reads_back_from_parquet_as_its_json_lines() {
    skip_without!(crate::common::Tool::Python);
    let (server, _model) = varied_store(Backend::Sqlite).await;
    let python = tokio::task::spawn_blocking(|| pyenv_python("data"))
        .await
        .unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data_python/read_export.py"
    );
    let dir = tempfile::tempdir().unwrap();
    // Six rollouts; the 1.x one gives a row, the chat two rows and a
    // skipped call, the others a no_rows record each; two conversations.
    for (layout, records) in [("rollouts", 6), ("triplets", 8), ("messages", 2)] {
        let mut files = Vec::new();
        for format in ["jsonl", "parquet"] {
            let path = dir.path().join(format!("{layout}.{format}"));
            let path = path.to_str().unwrap().to_owned();
            let args = [
                "export", "--layout", layout, "--format", format, "-o", &path,
            ];
            cli_ok(&server, &args).await;
            files.push(path);
        }
        let lines = json_records(&std::fs::read(&files[0]).unwrap());
        assert_eq!(lines.len(), records, "{layout}");
        let parquet = std::fs::read(&files[1]).unwrap();
        assert_eq!(&parquet[..4], b"PAR1");
        let schema = layouts::schema(layout).unwrap();
        let rows = parquet_records(&parquet, &schema);
        assert_eq!(rows.len(), lines.len(), "{layout}");
        // Each export's cursors carry its own selection's instant.
        let has_cursor = |records: &[Value]| -> Vec<bool> {
            records.iter().map(|r| r["cursor"].is_string()).collect()
        };
        assert_eq!(has_cursor(&rows), has_cursor(&lines), "{layout}");
        for (row, line) in without_cursor(&rows).iter().zip(without_cursor(&lines)) {
            assert_eq!(*row, line, "{layout}: the Parquet row is the JSON record");
        }

        let nested = nested_column(layout);
        let output = std::process::Command::new(&python)
            .args([script, &files[1], nested])
            .output()
            .expect("the readers run");
        assert!(
            output.status.success(),
            "{layout}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let read: Map<String, Value> = serde_json::from_slice(&output.stdout).unwrap();
        let expected = reader_summary(&lines, nested);
        assert_eq!(read.len(), 5, "{read:?}");
        for (reader, summary) in read {
            assert_eq!(summary, expected, "{layout}: {reader} reads the export");
        }
    }
    server.stop().await;
}

/// The console's Parquet download is the command line's file: the same
/// rows; an unknown format is refused with 400; `--resume` refuses a
/// Parquet file and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_downloads_parquet_and_resume_refuses_it() {
    let server = TestServer::start(Backend::Memory).await;
    let mut client = server.client().await;
    for i in 0..4 {
        rewarded(&mut client, &format!("{{\"i\": {i}}}"), 0.5).await;
    }
    chatted(&mut client, "c").await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let page = http.get("/console/rollouts").await;
    let link = "href=\"/console/export?layout=rollouts&amp;format=parquet\"";
    assert!(page.text().contains(link), "{}", page.text());

    for layout in ["rollouts", "triplets", "messages"] {
        let jsonl = console_export(
            &http,
            &format!("layout={layout}&format=jsonl"),
            &format!("{layout}.jsonl"),
        )
        .await;
        let download = console_export(
            &http,
            &format!("layout={layout}&format=parquet"),
            &format!("{layout}.parquet"),
        )
        .await;
        assert_eq!(
            download.headers["content-type"],
            "application/vnd.apache.parquet"
        );
        let schema = layouts::schema(layout).unwrap();
        let rows = parquet_records(&download.body, &schema);
        let lines = json_records(&jsonl.body);
        assert!(!lines.is_empty());
        assert_eq!(without_cursor(&rows), without_cursor(&lines), "{layout}");
    }
    let refused = http.get("/console/export?format=csv").await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(refused.text().contains("unknown export format"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.parquet");
    let path = path.to_str().unwrap();
    cli_ok(&server, &["export", "--format", "parquet", "-o", path]).await;
    let refused = cli(
        &server,
        &["export", "--format", "parquet", "-o", path, "--resume"],
    )
    .await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("its footer is written last"), "{stderr}");
    server.stop().await;
}
