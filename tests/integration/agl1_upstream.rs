//! agent-lightning 1.0.2 itself against the real binary: its controller
//! (local mode) runs agent subprocesses that call the gateway (a fake
//! model server on loopback) and post rewards, while its trainer code
//! enqueues rollouts with its own ids, waits, reads raw and triplet events
//! and deletes them; the same run survives a SIGKILL of the server; and
//! the API answers request for request as agentlightning's own server
//! does; two trainings on one server, each selecting its namespace by the
//! URL alone (`agl_server.url=http://store:8080/ns/run-a`), stay apart. The
//! Python environment comes from `tools/pyenv.sh agl1`.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::ServerProcess;
use common::http::{HttpClient, Version};
use common::model_server::{ModelServer, token_ids};
use serde_json::{Value, json};

const KEY: &str = "upstream-test-key";
const MODEL: &str = "test-model";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python of the `agl1` environment, created once per checkout.
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let output = Command::new(repo().join("tools/pyenv.sh"))
                .arg("agl1")
                .stderr(Stdio::inherit())
                .output()
                .expect("tools/pyenv.sh runs");
            assert!(output.status.success(), "tools/pyenv.sh agl1 failed");
            let env = String::from_utf8(output.stdout).unwrap();
            PathBuf::from(env.trim()).join("bin/python")
        })
        .clone()
}

/// A free loopback address (bound, then released for a child to bind).
fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A child process with its output in a log file (shown when the test
/// fails); killed when dropped, so that a failing test leaves nothing
/// running.
struct Child {
    name: &'static str,
    child: tokio::process::Child,
    log: PathBuf,
}

impl Child {
    fn spawn(name: &'static str, mut command: tokio::process::Command, dir: &Path) -> Self {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = command
            .current_dir(dir)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        Self { name, child, log }
    }

    /// Waits for the process to exit, at most `limit`.
    async fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!(
                "{} did not finish within {limit:?}:\n{}",
                self.name,
                self.log()
            ),
        }
    }

    /// Stops the process as an operator would: SIGTERM, then SIGKILL if
    /// it is still there after 15 s.
    async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: signals our own child, which has not been reaped.
            unsafe { libc::kill(libc::pid_t::try_from(pid).unwrap(), libc::SIGTERM) };
            if tokio::time::timeout(Duration::from_secs(15), self.child.wait())
                .await
                .is_err()
            {
                let _ = self.child.kill().await;
            }
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {} log ---\n{}", self.name, self.log());
        }
    }
}

fn python_command() -> tokio::process::Command {
    let mut command = tokio::process::Command::new(python());
    command.env("PYTHONPATH", repo().join("tests/agl1_python"));
    command
}

/// Starts agentlightning's controller in local mode against `url`.
fn controller(url: &str, dir: &Path) -> Child {
    let mut command = python_command();
    command.args([
        "-m",
        "agentlightning.controller",
        "runner_type=local",
        &format!("agl_server.url={url}"),
        &format!("agl_server.key={KEY}"),
        "local_runner.poll_interval=0.2",
        "local_runner.maximum_size=4",
        "hydra.output_subdir=null",
        &format!("hydra.run.dir={}", dir.display()),
    ]);
    Child::spawn("controller", command, dir)
}

/// Runs the trainer script to its end and returns its summary.
async fn trainer(
    url: String,
    model: SocketAddr,
    mode: &'static str,
    samples: usize,
    n: usize,
    dir: PathBuf,
) -> Vec<Value> {
    let mut command = python_command();
    command
        .arg(repo().join("tests/agl1_python/trainer.py"))
        .args([
            "--url", &url, "--key", KEY, "--model", MODEL, "--mode", mode,
        ])
        .args(["--model-server", &model.to_string()])
        .args(["--samples", &samples.to_string(), "--n", &n.to_string()]);
    let mut child = Child::spawn("trainer", command, &dir);
    let status = child.wait(Duration::from_secs(240)).await;
    let log = child.log();
    assert!(status.success(), "the trainer failed:\n{log}");
    let last = log
        .lines()
        .rev()
        .find(|l| l.starts_with('['))
        .expect("a summary line");
    serde_json::from_str(last).unwrap()
}

/// Checks every rollout of a run: all succeeded, with the agent's two
/// calls as triplets (prompt and response token ids from the model
/// server) and its reward.
fn verify(summary: &[Value], samples: usize, n: usize) {
    assert_eq!(summary.len(), samples * n, "{summary:#?}");
    let mut ids: Vec<&str> = summary
        .iter()
        .map(|r| r["rollout_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), samples * n, "distinct rollouts");
    for index in 0..samples {
        let question = format!("question {index}");
        let runs: Vec<&Value> = summary
            .iter()
            .filter(|r| r["question"] == question)
            .collect();
        assert_eq!(runs.len(), n, "{question}");
        let first_reply = format!("re:{}", question.len());
        let second_prompt = format!("{question}{first_reply}again");
        let second_reply = format!("re:{}", second_prompt.len());
        for run in runs {
            assert_eq!(run["state"], "succeeded", "{run}");
            assert_eq!(
                run["prompts"],
                json!([token_ids(&question), token_ids(&second_prompt)]),
                "{run}"
            );
            assert_eq!(
                run["responses"],
                json!([token_ids(&first_reply), token_ids(&second_reply)]),
                "{run}"
            );
            assert_eq!(run["reward"], json!(second_reply.len() as f64), "{run}");
            assert!(run["raw_events"].as_u64().unwrap() >= 3, "{run}");
        }
    }
}

/// Returns the number of 1.x rollouts still queuing or running.
async fn live(client: &HttpClient) -> usize {
    let auth = format!("Bearer {KEY}");
    let response = client
        .request(
            "GET",
            "/api/rollouts?state_in=queuing&state_in=running",
            &[("authorization", auth.as_str())],
            "",
        )
        .await;
    response.json().as_array().unwrap().len()
}

fn our_server(addr: SocketAddr, database: &Path) -> ServerProcess {
    let listen = addr.to_string();
    let database = database.display().to_string();
    ServerProcess::start_with_env(
        &[
            "--listen",
            &listen,
            "--database",
            &database,
            "--gateway-model",
            MODEL,
        ],
        &[("LIGHTNING_STORE_API_KEY", KEY)],
    )
}

#[tokio::test]
async fn agentlightnings_controller_and_trainer_complete_a_run() {
    skip_without!(crate::common::Tool::Python);
    let dir = tempfile::tempdir().unwrap();
    let model = ModelServer::start().await;
    let addr = free_addr();
    let server = our_server(addr, &dir.path().join("store.db"));
    let url = format!("http://{addr}");
    let mut controller = controller(&url, dir.path());
    let (samples, n) = (4, 2);
    let run = trainer(
        url,
        model.addr,
        "manager",
        samples,
        n,
        dir.path().to_owned(),
    )
    .await;
    verify(&run, samples, n);
    assert_eq!(
        model.seen.requests.lock().len(),
        2 * samples * n,
        "one call per turn"
    );
    assert_eq!(live(&HttpClient::new(addr, Version::Http1)).await, 0);
    controller.stop().await;
    let (status, _) = server.terminate();
    assert!(status.success());
}

#[tokio::test]
async fn a_run_survives_a_sigkill_of_the_server() {
    skip_without!(crate::common::Tool::Python);
    let dir = tempfile::tempdir().unwrap();
    let model = ModelServer::start().await;
    let addr = free_addr();
    let database = dir.path().join("store.db");
    let server = our_server(addr, &database);
    let url = format!("http://{addr}");
    let mut controller = controller(&url, dir.path());
    let (samples, n) = (6, 2);
    let run = tokio::spawn(trainer(
        url,
        model.addr,
        "loop",
        samples,
        n,
        dir.path().to_owned(),
    ));
    // Kill the server once a few rollouts finished while others run.
    let client = HttpClient::new(addr, Version::Http1);
    let auth = format!("Bearer {KEY}");
    let mut after = 0;
    let finished = loop {
        let page = client
            .request(
                "GET",
                &format!("/api/rollouts/terminal?after={after}&wait=60"),
                &[("authorization", auth.as_str())],
                "",
            )
            .await
            .json();
        after = page["next_after"].as_i64().unwrap();
        let total = page["total_terminal"].as_i64().unwrap();
        if total >= 3 {
            break total;
        }
    };
    assert!(finished < (samples * n) as i64, "killed in the middle");
    server.kill();
    let restarted = our_server(addr, &database);
    let summary = run.await.unwrap();
    verify(&summary, samples, n);
    assert_eq!(live(&client).await, 0);
    let page = client
        .request(
            "GET",
            "/api/rollouts/terminal",
            &[("authorization", auth.as_str())],
            "",
        )
        .await
        .json();
    assert_eq!(
        page["total_terminal"],
        (samples * n) as i64,
        "every completion logged once"
    );
    controller.stop().await;
    let (status, _) = restarted.terminate();
    assert!(status.success());
}

/// agentlightning 1.0.2's own server, on a free port.
async fn upstream_server(dir: &Path) -> (Child, SocketAddr) {
    let addr = free_addr();
    let mut command = python_command();
    command.args([
        "-m",
        "agentlightning.server",
        "host=127.0.0.1",
        &format!("port={}", addr.port()),
        &format!("key={KEY}"),
        &format!("default_proxy.model_name={MODEL}"),
        "hydra.output_subdir=null",
        &format!("hydra.run.dir={}", dir.display()),
    ]);
    let mut child = Child::spawn("upstream", command, dir);
    // Ready once its health check answers (uvicorn logs nothing we can await).
    let client = HttpClient::new(addr, Version::Http1);
    let ready = async {
        loop {
            if client.try_get("/healthz").await.is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .is_err()
    {
        child.stop().await;
        panic!("agentlightning's server did not start:\n{}", child.log());
    }
    (child, addr)
}

/// Makes two servers' answers comparable: times are zeroed, generated ids
/// numbered in order of appearance, and JSON parser messages dropped.
fn normalize(value: &mut Value, ids: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, item) in object.iter_mut() {
                match key.as_str() {
                    "created_at" | "updated_at" | "timestamp" | "latency_ms"
                        if item.is_number() =>
                    {
                        *item = json!(0)
                    }
                    _ => normalize(item, ids),
                }
            }
            if object.get("type") == Some(&json!("json_invalid")) {
                object.insert("ctx".into(), json!("parser message"));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| normalize(item, ids)),
        Value::String(text) if text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()) => {
            let index = ids.iter().position(|id| id == text).unwrap_or_else(|| {
                ids.push(text.clone());
                ids.len() - 1
            });
            *text = format!("generated-{index}");
        }
        _ => {}
    }
}

#[tokio::test]
async fn the_api_answers_as_agentlightnings_own_server() {
    skip_without!(crate::common::Tool::Python);
    let dir = tempfile::tempdir().unwrap();
    let model = ModelServer::start().await;
    let (mut upstream, upstream_addr) = upstream_server(dir.path()).await;
    let ours = ServerProcess::start_with_env(
        &["--store", "memory", "--gateway-model", MODEL],
        &[("LIGHTNING_STORE_API_KEY", KEY)],
    );
    let clients = [
        HttpClient::new(upstream_addr, Version::Http1),
        HttpClient::new(ours.addr, Version::Http1),
    ];
    let endpoint = model.endpoint();
    let proxy = |rollout: &str, attempt: &str, mode: &str, path: &str| {
        format!("/proxy/rollout/{rollout}/attempt/{attempt}/mode/{mode}/openai/v1/{path}")
    };
    let chat = |content: &str| {
        json!({"messages": [{"role": "user", "content": content}], "temperature": 0.1}).to_string()
    };
    let json_type = "application/json";
    // (method, path, content type, body); every request carries the key
    // unless its content type is "no-key".
    let cases: Vec<(&str, String, &str, String)> = vec![
        ("GET", "/healthz".into(), "", "".into()),
        ("GET", "/api/rollouts?state_in=queuing".into(), "no-key", "".into()),
        ("GET", "/api/rollouts".into(), "", "".into()),
        ("GET", "/api/rollouts?state_in=x&limit=a".into(), "", "".into()),
        ("POST", "/api/rollouts".into(), json_type, r#"{"a": 1}"#.into()),
        ("POST", "/api/rollouts".into(), json_type, r#"[{"input":1,"metadata":5,"is_train":"x","config":{"timeout_seconds":"z","local":{"env_map":{"a":1}}}},{}, 3]"#.into()),
        ("POST", "/api/rollouts".into(), json_type, r#"[{"input":{"data_id":5},"rollout_id":"r1","metadata":{"x":1,"batch_idx":"2"}},{"input":null},{"rollout_id":"r2","input":[1,2],"is_train":0,"config":{"timeout_seconds":"30","local":{"agent_class":"a.B","env_map":{"K":"input.0"}},"k8s":{"job_template":"t"},"other":1}}]"#.into()),
        ("POST", "/api/rollouts".into(), json_type, r#"[{"rollout_id":"r1","input":"other"},{"rollout_id":"r3","input":{"instance_id":[1,"a"]}}]"#.into()),
        ("POST", "/api/rollouts".into(), json_type, "{bad".into()),
        ("POST", "/api/rollouts".into(), "text/plain", r#"[{"input":1}]"#.into()),
        ("POST", "/api/rollouts".into(), json_type, "".into()),
        ("GET", "/api/rollouts/r1".into(), "", "".into()),
        ("GET", "/api/rollouts/nope".into(), "", "".into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"status":{"state":"succeeded"}}"#.into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"status":{"state":null}}"#.into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"status":{"foo":1,"state":"bogus","version":2}}"#.into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"status":{}}"#.into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"other":1}"#.into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"status":{"state":"running","last_attempt_id":"3"}}"#.into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"status":{"error_message":"e","k8s_job_name":"j"}}"#.into()),
        ("PATCH", "/api/rollouts/nope".into(), json_type, r#"{"status":{"state":"running"}}"#.into()),
        ("GET", "/api/rollouts?state_in=running&state_in=queuing&limit=10".into(), "", "".into()),
        ("GET", "/api/rollouts?state_in=queuing&limit=-1".into(), "", "".into()),
        ("POST", "/api/rollouts/r1/attempt/3/events".into(), json_type, r#"{"event_type":"reward","data":{"value":1.5,"source":"agent","reason":null,"message":"m"}}"#.into()),
        ("POST", "/api/rollouts/r1/attempt/0/events".into(), json_type, r#"{"event_type":"note"}"#.into()),
        ("POST", "/api/rollouts/r1/attempt/3/events".into(), json_type, r#"{"event_type":5,"data":[1]}"#.into()),
        ("POST", "/api/rollouts/r1/attempt/3/events".into(), json_type, "[]".into()),
        ("POST", "/api/rollouts/nope/attempt/3/events".into(), json_type, r#"{"event_type":"x"}"#.into()),
        ("POST", "/api/models".into(), json_type, json!([{"model": MODEL, "endpoint": endpoint}]).to_string()),
        ("POST", "/api/models".into(), json_type, r#"[{"model":1}]"#.into()),
        ("POST", proxy("r1", "3", "train", "chat/completions"), json_type, chat("hi")),
        ("POST", proxy("r1", "3", "val", "completions"), json_type, r#"{"prompt":"abc","model":"x"}"#.into()),
        ("POST", proxy("r1", "3", "train", "chat/completions"), json_type, chat("teapot")),
        ("POST", proxy("r1", "3", "train", "chat/completions"), json_type, chat("html")),
        ("POST", proxy("r1", "3", "test", "chat/completions"), json_type, "{}".into()),
        ("POST", proxy("r1", "3", "train", "embeddings"), json_type, "{}".into()),
        ("POST", proxy("nope", "3", "train", "chat/completions"), json_type, "{}".into()),
        ("POST", proxy("r1", "3", "train", "chat/completions"), json_type, "{oops".into()),
        ("POST", proxy("r1", "3", "train", "chat/completions"), json_type, "[1]".into()),
        ("POST", proxy("r1", "3", "train", "chat/completions"), json_type, r#"{"stream":1}"#.into()),
        ("GET", proxy("r1", "3", "train", "chat/completions"), "", "".into()),
        ("GET", "/api/rollouts/r1/events".into(), "", "".into()),
        ("GET", "/api/rollouts/r1/events?format=triplet".into(), "", "".into()),
        ("GET", "/api/rollouts/r1/events?event_type=reward&format=triplet".into(), "", "".into()),
        ("GET", "/api/rollouts/r1/events?include_routed_experts=false&format=raw".into(), "", "".into()),
        ("GET", "/api/rollouts/r1/events?include_routed_experts=maybe".into(), "", "".into()),
        ("GET", "/api/rollouts/nope/events".into(), "", "".into()),
        ("GET", "/api/rollouts/r1".into(), "", "".into()),
        ("PATCH", "/api/rollouts/r1".into(), json_type, r#"{"status":{"state":"succeeded"}}"#.into()),
        ("PATCH", "/api/rollouts/r2".into(), json_type, r#"{"status":{"state":"failed","error_message":"x"}}"#.into()),
        ("PATCH", "/api/rollouts/r3".into(), json_type, r#"{"status":{"state":"running"}}"#.into()),
        ("PATCH", "/api/rollouts/r3".into(), json_type, r#"{"status":{"state":"failed"}}"#.into()),
        ("GET", "/api/rollouts/terminal".into(), "", "".into()),
        ("GET", "/api/rollouts/terminal?after=1&limit=1".into(), "", "".into()),
        ("GET", "/api/rollouts/terminal?after=-2&limit=0".into(), "", "".into()),
        ("GET", "/api/rollouts/terminal?after=x".into(), "", "".into()),
        ("POST", "/proxy/pause".into(), "", "".into()),
        ("POST", "/proxy/pause".into(), json_type, r#"{"retry_after_seconds":"x","reason":3}"#.into()),
        ("POST", "/proxy/pause".into(), json_type, r#"{"retry_after_seconds":7,"reason":"r"}"#.into()),
        ("GET", "/proxy/state".into(), "", "".into()),
        ("POST", proxy("r1", "3", "train", "chat/completions"), json_type, chat("paused")),
        ("POST", "/proxy/resume".into(), json_type, r#"{"ignored":1}"#.into()),
        ("DELETE", "/api/rollouts/r1".into(), "", "".into()),
        ("DELETE", "/api/rollouts/r1".into(), "", "".into()),
        ("GET", "/api/rollouts/r1".into(), "", "".into()),
        ("GET", "/api/rollouts/terminal".into(), "", "".into()),
        ("DELETE", "/api/models".into(), "", "".into()),
        ("POST", proxy("r2", "0", "train", "chat/completions"), json_type, chat("x")),
        ("GET", "/api/nothing".into(), "", "".into()),
        ("PUT", "/api/rollouts".into(), "", "".into()),
    ];
    let auth = format!("Bearer {KEY}");
    let mut ids = [Vec::new(), Vec::new()];
    for (method, path, content_type, body) in cases {
        let mut answers = Vec::new();
        for (client, ids) in clients.iter().zip(ids.iter_mut()) {
            let mut headers = Vec::new();
            if content_type != "no-key" {
                headers.push(("authorization", auth.as_str()));
            }
            if !content_type.is_empty() && content_type != "no-key" {
                headers.push(("content-type", content_type));
            }
            let response = client.request(method, &path, &headers, body.clone()).await;
            let mut parsed = serde_json::from_slice::<Value>(&response.body).ok();
            if let Some(value) = &mut parsed {
                normalize(value, ids);
            }
            let header = |name: &str| {
                response
                    .headers
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_owned())
            };
            let compared_headers = ["content-type", "retry-after", "x-agl-paused"].map(header);
            answers.push((
                response.status,
                compared_headers,
                parsed.unwrap_or_else(|| json!(response.text())),
            ));
        }
        assert_eq!(
            answers[1], answers[0],
            "{method} {path} {body}: ours (left) vs agentlightning's (right)"
        );
    }
    upstream.stop().await;
    let (status, _) = ours.terminate();
    assert!(status.success());
}

/// agentlightning 1.0.2's own client (`AgentLightningSyncClient` with a
/// base URL, `RolloutCreate`, `Rollout`) creating a rollout at `argv[1]`
/// and reading it back there; prints what it read.
const CREATE_AND_READ: &str = r#"
import json
import sys

from agentlightning.client import AgentLightningSyncClient
from agentlightning.schemas import Rollout, RolloutCreate

url, key, rollout_id = sys.argv[1:4]
client = AgentLightningSyncClient(base_url=url, key=key, max_retries=0)
request = RolloutCreate(input={"question": "where am I"}, is_train=False, rollout_id=rollout_id)
created = client.post_with_retry("/api/rollouts", json=[request.model_dump(mode="json", exclude_none=True)])
assert [Rollout.model_validate(r).rollout_id for r in created.json()] == [rollout_id], created.text
read = client.get(f"/api/rollouts/{rollout_id}")
read.raise_for_status()
listed = client.get("/api/rollouts", params={"state_in": "queuing"})
listed.raise_for_status()
print(json.dumps({
    "read": Rollout.model_validate(read.json()["rollout"]).model_dump(mode="json"),
    "listed": [Rollout.model_validate(r).rollout_id for r in listed.json()],
    "request_url": str(read.request.url),
}))
"#;

/// How many rollouts finished in a namespace (`prefix` is `/ns/{name}`,
/// or empty for `default`): its terminal log counts the completions of
/// deleted rollouts too.
async fn terminal_total(client: &HttpClient, prefix: &str) -> i64 {
    let auth = format!("Bearer {KEY}");
    let page = client
        .request(
            "GET",
            &format!("{prefix}/api/rollouts/terminal"),
            &[("authorization", auth.as_str())],
            "",
        )
        .await;
    assert_eq!(page.status, 200, "{prefix}: {}", page.text());
    page.json()["total_terminal"].as_i64().unwrap()
}

#[tokio::test]
async fn two_trainings_select_their_namespace_by_the_url() {
    skip_without!(crate::common::Tool::Python);
    let dir = tempfile::tempdir().unwrap();
    let model = ModelServer::start().await;
    let server = ServerProcess::start_with_env(
        &["--store", "memory", "--gateway-model", MODEL],
        &[("LIGHTNING_STORE_API_KEY", KEY)],
    );
    // The operator creates the trainings' namespaces (the key is an admin token).
    let mut admin = server.client().await;
    for name in ["run-a", "run-b"] {
        let mut request = tonic::Request::new(lightning_store::proto::CreateNamespaceRequest {
            name: name.to_owned(),
            ..Default::default()
        });
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
        admin.create_namespace(request).await.unwrap();
    }
    let url = |name: &str| format!("http://{}/ns/{name}", server.addr);

    // Each training: agentlightning's controller and its trainer code
    // (AglRolloutManager), configured with its namespace's URL alone.
    let (samples, n) = (2, 1);
    let mut controllers = Vec::new();
    let mut trainers = Vec::new();
    for name in ["run-a", "run-b"] {
        let training = dir.path().join(name);
        std::fs::create_dir(&training).unwrap();
        controllers.push(controller(&url(name), &training));
        trainers.push(trainer(
            url(name),
            model.addr,
            "manager",
            samples,
            n,
            training,
        ));
    }
    let run_b = trainers.pop().unwrap();
    let run_a = trainers.pop().unwrap();
    let (run_a, run_b) = tokio::join!(run_a, run_b);
    verify(&run_a, samples, n);
    verify(&run_b, samples, n);
    for controller in &mut controllers {
        controller.stop().await;
    }

    // Each namespace logged its own training's completions alone.
    let client = HttpClient::new(server.addr, Version::Http1);
    let finished = (samples * n) as i64;
    assert_eq!(terminal_total(&client, "/ns/run-a").await, finished);
    assert_eq!(terminal_total(&client, "/ns/run-b").await, finished);
    assert_eq!(terminal_total(&client, "").await, 0, "nothing in default");
    let mut ids: Vec<&Value> = run_a
        .iter()
        .chain(&run_b)
        .map(|r| &r["rollout_id"])
        .collect();
    ids.sort_by_key(|id| id.to_string());
    ids.dedup();
    assert_eq!(
        ids.len(),
        2 * samples * n,
        "two trainings, distinct rollouts"
    );

    // agentlightning's client pointed at /ns/run-a creates and reads there.
    let mut command = python_command();
    command.args(["-c", CREATE_AND_READ, &url("run-a"), KEY, "made-in-run-a"]);
    let mut child = Child::spawn("create-and-read", command, dir.path());
    let status = child.wait(Duration::from_secs(120)).await;
    let log = child.log();
    assert!(status.success(), "agentlightning's client failed:\n{log}");
    let read: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(read["read"]["rollout_id"], "made-in-run-a", "{read}");
    assert_eq!(read["read"]["input"], json!({"question": "where am I"}));
    assert_eq!(read["listed"], json!(["made-in-run-a"]), "{read}");
    assert_eq!(
        read["request_url"],
        format!("{}/api/rollouts/made-in-run-a", url("run-a")),
        "the client kept the prefix"
    );
    let auth = format!("Bearer {KEY}");
    let get = |path: String| {
        let client = &client;
        let auth = auth.clone();
        async move {
            client
                .request("GET", &path, &[("authorization", auth.as_str())], "")
                .await
        }
    };
    let here = get("/ns/run-a/api/rollouts/made-in-run-a".into()).await;
    assert_eq!(here.status, 200, "{}", here.text());
    assert_eq!(here.json()["rollout"]["rollout_id"], "made-in-run-a");
    for elsewhere in ["/ns/run-b", ""] {
        let answer = get(format!("{elsewhere}/api/rollouts/made-in-run-a")).await;
        assert_eq!(answer.status, 404, "{elsewhere}: {}", answer.text());
        let listed = get(format!("{elsewhere}/api/rollouts?state_in=queuing")).await;
        assert_eq!(listed.status, 200, "{elsewhere}: {}", listed.text());
        assert_eq!(listed.json(), json!([]), "{elsewhere} lists nothing");
    }
    // A namespace nobody created is refused, not started.
    let typo = get("/ns/run-c/api/rollouts?state_in=queuing".into()).await;
    assert_eq!(typo.status, 404, "{}", typo.text());
    assert!(typo.text().contains("run-c"), "{}", typo.text());

    let (status, _) = server.terminate();
    assert!(status.success());
}
