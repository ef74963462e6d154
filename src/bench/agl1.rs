//! `bench agl1`: agent-lightning 1.x's server API over HTTP, against this
//! server or agentlightning's own (`python -m agentlightning.server
//! host=127.0.0.1 port={port} key= default_proxy.model_name=M`), so that
//! both are measured by the same client in the same run:
//! * `events`: agents posting `model_request` events (2,000 prompt and
//!   2,000 response token ids by default, ~17 KB), one rollout per client;
//! * `get`: the trainer's poll, `GET /api/rollouts/{id}` over 64 rollouts;
//! * `gateway`: chat completions through the gateway against a model
//!   server that answers after a fixed time (20 ms by default) with 200
//!   prompt and 50 response token ids by default, and the
//!   same calls made directly to that model server: the difference is what
//!   the gateway adds.

use std::time::Instant;

use bytes::Bytes;
use serde_json::json;

use super::driver::{Measured, TaskContext, run_tasks};
use super::http::{Connection, ModelServer};
use super::report::{Latency, Report, Row, RowSpec};
use super::stats::Recorder;
use super::target::Target;
use super::{BenchResult, LoadArgs};

/// Operations per run when `--count` is not given: bounded, so that an
/// in-memory server does not hold more than ~0.4 GB of events.
const DEFAULT_COUNT: u64 = 25_000;

/// Rollouts the `get` scenario reads.
const GET_ROLLOUTS: usize = 64;

/// Arguments of `bench agl1`.
#[derive(Debug, Clone, clap::Args)]
pub struct Agl1Args {
    /// What to measure.
    #[command(subcommand)]
    workload: Workload,
}

/// The 1.x workloads.
#[derive(Debug, Clone, clap::Subcommand)]
enum Workload {
    /// POST /api/rollouts/{id}/attempt/0/events with a model_request event.
    Events {
        #[command(flatten)]
        load: LoadArgs,
        #[command(flatten)]
        server: ServerArgs,
        /// Prompt token ids in each event (and as many response token ids).
        #[arg(long, default_value_t = 2000)]
        tokens: usize,
    },
    /// GET /api/rollouts/{id}.
    Get {
        #[command(flatten)]
        load: LoadArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Chat completions through the gateway, and directly to its model server.
    Gateway {
        #[command(flatten)]
        load: LoadArgs,
        #[command(flatten)]
        server: ServerArgs,
        /// The model the server's gateway is configured with
        /// (`serve --gateway-model`, upstream's `default_proxy.model_name`).
        #[arg(long, default_value = "bench-model")]
        model: String,
        /// Milliseconds the model server takes per answer (0: at once,
        /// which measures how many calls the gateway passes, not what it
        /// adds to one).
        #[arg(long, default_value_t = 20.0)]
        model_latency_ms: f64,
        /// Prompt token ids in each answer of the model server.
        #[arg(long, default_value_t = 200)]
        prompt_tokens: usize,
        /// Response token ids in each answer of the model server.
        #[arg(long, default_value_t = 50)]
        response_tokens: usize,
    },
}

/// How to reach the 1.x API.
#[derive(Debug, Clone, clap::Args)]
struct ServerArgs {
    /// The server's API key, when it checks one.
    #[arg(long)]
    key: Option<String>,
}

/// Runs the chosen workload once per concurrency level (default 16 clients).
pub async fn run(target: &mut Target, args: Agl1Args, progress: bool) -> BenchResult<Report> {
    match args.workload {
        Workload::Events {
            load,
            server,
            tokens,
        } => events(target, &load, &server, tokens, progress).await,
        Workload::Get { load, server } => get(target, &load, &server, progress).await,
        Workload::Gateway {
            load,
            server,
            model,
            model_latency_ms,
            prompt_tokens,
            response_tokens,
        } => {
            let latency = std::time::Duration::try_from_secs_f64(model_latency_ms / 1e3)
                .map_err(|_| super::BenchError::new("--model-latency-ms must be >= 0"))?;
            let answer = AnswerShape {
                latency,
                prompt_tokens,
                response_tokens,
            };
            gateway(target, &load, &server, &model, answer, progress).await
        }
    }
}

/// Creates rollouts with fresh ids and returns the ids.
async fn create_rollouts(
    target: &Target,
    key: Option<&str>,
    count: usize,
) -> BenchResult<Vec<String>> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let ids: Vec<String> = (0..count).map(|i| format!("bench-{run}-{i}")).collect();
    let body: Vec<_> = ids
        .iter()
        .map(|id| json!({"rollout_id": id, "input": {"data_id": id}}))
        .collect();
    let mut connection = Connection::open(target.url(), key).await?;
    connection
        .expect(
            "POST",
            "/api/rollouts",
            Some(Bytes::from(json!(body).to_string())),
            201,
        )
        .await?;
    Ok(ids)
}

/// One closed-loop HTTP run: where, with how many clients, within which bounds.
struct HttpLoad<'a> {
    label: String,
    url: &'a str,
    key: Option<&'a str>,
    clients: usize,
    limits: super::Limits,
    progress: bool,
}

impl HttpLoad<'_> {
    /// Runs tasks that each send `request(task, n)` and expect 200, each
    /// success carrying `items` items.
    async fn run(
        self,
        request: impl Fn(usize, u64) -> (String, Option<Bytes>) + Send + Sync + Clone + 'static,
        items: u64,
    ) -> BenchResult<Measured> {
        let mut connections = Vec::with_capacity(self.clients);
        for _ in 0..self.clients {
            connections.push(Connection::open(self.url, self.key).await?);
        }
        let connections = std::sync::Mutex::new(connections);
        run_tasks(
            &self.label,
            self.clients,
            self.limits,
            self.progress,
            |ctx| {
                let connection = connections
                    .lock()
                    .expect("not poisoned")
                    .pop()
                    .expect("one per task");
                http_task(ctx, connection, request.clone(), items)
            },
        )
        .await
    }
}

async fn http_task(
    ctx: TaskContext,
    mut connection: Connection,
    request: impl Fn(usize, u64) -> (String, Option<Bytes>),
    items: u64,
) -> Recorder {
    let TaskContext {
        index,
        budget,
        mut recorder,
    } = ctx;
    let mut n = 0;
    while budget.take(1) == 1 {
        let (path, body) = request(index, n);
        n += 1;
        let method = if body.is_some() { "POST" } else { "GET" };
        let start = Instant::now();
        match connection.send(method, &path, body).await {
            Ok(answer) if answer.status == 200 => recorder.success(start.elapsed(), 1, items),
            Ok(answer) => recorder.failure(format!(
                "{method} {path}: {} {}",
                answer.status,
                String::from_utf8_lossy(&answer.body[..answer.body.len().min(200)])
            )),
            Err(error) => recorder.failure(format!("{method} {path}: {error}")),
        }
    }
    recorder
}

/// A `model_request` event as the gateway records it, with `tokens` prompt
/// and as many response token ids.
fn model_request_event(tokens: usize) -> Bytes {
    // Ids below 1,500 make the event ~17 KB, as the issue measured upstream with.
    let ids: Vec<usize> = (0..tokens).map(|i| (i * 7919) % 1500).collect();
    Bytes::from(
        json!({
            "event_type": "model_request",
            "data": {
                "model": "bench-model",
                "model_version": 0,
                "request": {"model": "bench-model", "messages": [{"role": "user", "content": "Solve it."}],
                            "temperature": 1.0, "return_token_ids": true, "logprobs": true},
                "response": {
                    "id": "bench", "object": "chat.completion", "prompt_token_ids": ids,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."},
                                 "finish_reason": "stop", "token_ids": ids}],
                },
                "server": {"model": "bench-model", "endpoint": "http://127.0.0.1:1/v1", "version": 0},
                "latency_ms": 12.5, "http_status": 200, "status": "ok", "retry_count": 0,
                "routed_experts": null, "usage": null, "finish_reason": "stop",
            },
        })
        .to_string(),
    )
}

async fn events(
    target: &mut Target,
    load: &LoadArgs,
    server: &ServerArgs,
    tokens: usize,
    progress: bool,
) -> BenchResult<Report> {
    let levels = load.levels(&[16])?;
    let limits = load.limits(DEFAULT_COUNT)?;
    let body = model_request_event(tokens);
    let mut report = Report::new(
        "agl1 events",
        json!({"event_bytes": body.len(), "tokens": tokens, "duration_secs": limits.duration.as_secs_f64(), "count": limits.count}),
    );
    let key = server.key.as_deref();
    for clients in levels {
        let ids = create_rollouts(target, key, clients).await?;
        let label = format!("agl1 events c={clients}");
        let items = body.len() as u64;
        let event = body.clone();
        let request = move |task: usize, _| {
            let path = format!("/api/rollouts/{}/attempt/0/events", ids[task]);
            (path, Some(event.clone()))
        };
        let load = HttpLoad {
            label,
            url: target.url(),
            key,
            clients,
            limits,
            progress,
        };
        let measured = load.run(request, items).await?;
        report.rows.push(Row::new(
            RowSpec {
                name: "model_request events".to_owned(),
                clients,
                op_unit: "events",
                item_unit: Some("bytes"),
                latency_of: "one event POST",
            },
            &measured,
        ));
    }
    Ok(report)
}

async fn get(
    target: &mut Target,
    load: &LoadArgs,
    server: &ServerArgs,
    progress: bool,
) -> BenchResult<Report> {
    let levels = load.levels(&[16])?;
    let limits = load.limits(10_000_000)?;
    let key = server.key.as_deref();
    let ids = create_rollouts(target, key, GET_ROLLOUTS).await?;
    let mut report = Report::new(
        "agl1 get",
        json!({"rollouts": GET_ROLLOUTS, "duration_secs": limits.duration.as_secs_f64()}),
    );
    for clients in levels {
        let label = format!("agl1 get c={clients}");
        let ids = ids.clone();
        let request = move |task: usize, n: u64| {
            let id = &ids[(task + n as usize) % ids.len()];
            (format!("/api/rollouts/{id}"), None)
        };
        let load = HttpLoad {
            label,
            url: target.url(),
            key,
            clients,
            limits,
            progress,
        };
        let measured = load.run(request, 0).await?;
        report.rows.push(Row::new(
            RowSpec {
                name: "rollout GET".to_owned(),
                clients,
                op_unit: "requests",
                item_unit: None,
                latency_of: "one GET /api/rollouts/{id}",
            },
            &measured,
        ));
    }
    Ok(report)
}

/// How the bench's model server answers.
#[derive(Debug, Clone, Copy)]
struct AnswerShape {
    latency: std::time::Duration,
    prompt_tokens: usize,
    response_tokens: usize,
}

async fn gateway(
    target: &mut Target,
    load: &LoadArgs,
    server: &ServerArgs,
    model: &str,
    answer: AnswerShape,
    progress: bool,
) -> BenchResult<Report> {
    let latency = answer.latency;
    let levels = load.levels(&[16])?;
    let limits = load.limits(200_000)?;
    let key = server.key.as_deref();
    let model_server =
        ModelServer::start(answer.prompt_tokens, answer.response_tokens, latency).await?;
    let endpoint = format!("http://{}/v1", model_server.addr);
    let mut connection = Connection::open(target.url(), key).await?;
    connection
        .expect("DELETE", "/api/models", None, 200)
        .await?;
    let models = json!([{"model": model, "endpoint": endpoint}]).to_string();
    connection
        .expect("POST", "/api/models", Some(Bytes::from(models)), 201)
        .await?;
    let chat = Bytes::from(
        json!({"model": "agent", "messages": [{"role": "user", "content": "What is 2 + 2?"}]})
            .to_string(),
    );
    let mut report = Report::new(
        "agl1 gateway",
        json!({"model_server": endpoint, "model_latency_ms": latency.as_secs_f64() * 1e3,
               "prompt_tokens": answer.prompt_tokens, "response_tokens": answer.response_tokens,
               "duration_secs": limits.duration.as_secs_f64()}),
    );
    let model_url = format!("http://{}", model_server.addr);
    for clients in levels {
        let ids = create_rollouts(target, key, clients).await?;
        let direct = HttpLoad {
            label: format!("direct c={clients}"),
            url: &model_url,
            key: None,
            clients,
            limits,
            progress,
        };
        let direct_latency = measure(
            &mut report,
            direct,
            &chat,
            |_| "/v1/chat/completions".to_owned(),
            ("model server, direct", "one chat completion"),
        )
        .await?;
        let gateway = HttpLoad {
            label: format!("gateway c={clients}"),
            url: target.url(),
            key,
            clients,
            limits,
            progress,
        };
        let gateway_latency = measure(
            &mut report,
            gateway,
            &chat,
            move |task| {
                format!(
                    "/proxy/rollout/{}/attempt/0/mode/train/openai/v1/chat/completions",
                    ids[task]
                )
            },
            (
                "through the gateway",
                "one chat completion (event recorded)",
            ),
        )
        .await?;
        report.settings.insert(
            format!("overhead_c{clients}_p50_ms"),
            json!(gateway_latency.p50_ms - direct_latency.p50_ms),
        );
        report.settings.insert(
            format!("overhead_c{clients}_p99_ms"),
            json!(gateway_latency.p99_ms - direct_latency.p99_ms),
        );
    }
    Ok(report)
}

/// Sends the chat completion `chat` from `load.clients` tasks, task `i` to
/// `path(i)`, adds the run to `report` as a row named `row.0` whose latency
/// is of `row.1`, and returns the run's latency.
async fn measure(
    report: &mut Report,
    load: HttpLoad<'_>,
    chat: &Bytes,
    path: impl Fn(usize) -> String + Send + Sync + Clone + 'static,
    row: (&str, &'static str),
) -> BenchResult<Latency> {
    let clients = load.clients;
    let chat = chat.clone();
    let measured = load
        .run(move |task, _| (path(task), Some(chat.clone())), 0)
        .await?;
    let (name, latency_of) = row;
    report.rows.push(Row::new(
        RowSpec {
            name: name.to_owned(),
            clients,
            op_unit: "calls",
            item_unit: None,
            latency_of,
        },
        &measured,
    ));
    Ok(Latency::of(&measured.recorder.total.latency))
}
