//! `bench agl1`: agent-lightning 1.x's server API over HTTP, against this
//! server or agentlightning's own (`python -m agentlightning.server
//! host=127.0.0.1 port={port} key= default_proxy.model_name=M`), so that
//! both are measured by the same client in the same run:
//! * `events`: agents posting `model_request` events (2,000 prompt and
//!   2,000 response token ids by default, ~17 KB), one rollout per client;
//! * `get`: the trainer's poll, `GET /api/rollouts/{id}` over 64 rollouts;
//! * `lifecycle`: a rollout from creation to its end as an agent, the
//!   controller and the trainer drive it (create, `running`,
//!   `model_request` events, a reward, `succeeded`, then the trainer's two
//!   reads of its events, raw and as triplets), one after another per
//!   client;
//! * `gateway`: chat completions through the gateway against a model
//!   server that answers after a fixed time (20 ms by default) with 200
//!   prompt and 50 response token ids by default, and the
//!   same calls made directly to that model server: the difference is what
//!   the gateway adds. The two sides take turns in slices of ~0.5 s
//!   (`--slices`: direct, gateway, direct, ..., all clients on one side at
//!   a time, over the same keep-alive connections throughout), each side's
//!   slices merged into one row, so that a load drifting on the machine
//!   during the run weighs on both sides rather than on the difference.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use serde_json::json;

use super::args::LoadArgs;
use super::driver::{Measured, TaskContext, run_tasks};
use super::error::BenchResult;
use super::http::{Connection, ModelServer};
use super::report::{Report, Row, RowSpec};
use super::stats::Recorder;
use super::target::Target;

/// Operations per run when `--count` is not given: bounded, so that an
/// in-memory server does not hold more than ~0.4 GB of events.
const DEFAULT_COUNT: u64 = 25_000;

/// Lifecycles per run when `--count` is not given: bounded, so that an
/// in-memory server does not hold more than ~0.4 GB of events.
const DEFAULT_LIFECYCLES: u64 = 5_000;

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
        #[command(flatten)]
        event: EventArgs,
    },
    /// A rollout's whole life: POST /api/rollouts, PATCH to running,
    /// --calls model_request events, a reward event, PATCH to succeeded,
    /// and the trainer's reads of its events (`agl_rollout_manager`'s
    /// `_fetch_rollout_events`: raw without routing tensors, then as
    /// triplets).
    Lifecycle {
        #[command(flatten)]
        load: LoadArgs,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        event: EventArgs,
        /// model_request events per rollout.
        #[arg(long, default_value_t = 4)]
        calls: u32,
        /// Leaves out the trainer's reads: the lifecycle ends with the PATCH.
        #[arg(long)]
        no_trainer_reads: bool,
    },
    /// GET /api/rollouts/{id}.
    Get {
        #[command(flatten)]
        load: LoadArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Chat completions directly to a model server and through the gateway,
    /// the two sides taking turns in slices; the report's `overhead_c*`
    /// settings are what the gateway adds at p50 and p99.
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
        /// Slices each side is cut into: the direct calls and the calls
        /// through the gateway take turns, one slice at a time (direct,
        /// gateway, direct, ...), every slice with all -c clients on one
        /// side, and each side's slices make its one row, so that a load
        /// changing on the machine weighs on both sides alike. Default: one
        /// slice per ~0.5 s of --duration-secs; 1 measures the model server
        /// for the whole duration, then the gateway.
        #[arg(long)]
        slices: Option<u32>,
    },
}

/// The `model_request` events a workload posts.
#[derive(Debug, Clone, clap::Args)]
struct EventArgs {
    /// Prompt token ids in each event (and as many response token ids).
    #[arg(long, default_value_t = 2000)]
    tokens: usize,
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
            event: EventArgs { tokens },
        } => events(target, &load, &server, tokens, progress).await,
        Workload::Lifecycle {
            load,
            server,
            event: EventArgs { tokens },
            calls,
            no_trainer_reads,
        } => {
            let shape = LifecycleShape {
                tokens,
                calls,
                trainer_reads: !no_trainer_reads,
            };
            lifecycle(target, &load, &server, shape, progress).await
        }
        Workload::Get { load, server } => get(target, &load, &server, progress).await,
        Workload::Gateway {
            load,
            server,
            model,
            model_latency_ms,
            prompt_tokens,
            response_tokens,
            slices,
        } => {
            let latency = std::time::Duration::try_from_secs_f64(model_latency_ms / 1e3)
                .map_err(|_| super::error::BenchError::new("--model-latency-ms must be >= 0"))?;
            let answer = AnswerShape {
                latency,
                prompt_tokens,
                response_tokens,
            };
            let settings = GatewaySettings {
                model,
                answer,
                slices,
            };
            gateway(target, &load, &server, settings, progress).await
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

/// Keep-alive connections to one server, one per client task: a run hands
/// one to each of its tasks and takes it back when the task ends, so that
/// several runs (the gateway's slices) can use the same connections.
#[derive(Clone)]
struct Connections(Arc<Mutex<Vec<Connection>>>);

impl Connections {
    /// Opens `count` connections to the server at `url`.
    async fn open(url: &str, key: Option<&str>, count: usize) -> BenchResult<Self> {
        let mut connections = Vec::with_capacity(count);
        for _ in 0..count {
            connections.push(Connection::open(url, key).await?);
        }
        Ok(Self(Arc::new(Mutex::new(connections))))
    }

    fn len(&self) -> usize {
        self.0.lock().expect("not poisoned").len()
    }

    fn take(&self) -> Connection {
        self.0
            .lock()
            .expect("not poisoned")
            .pop()
            .expect("one connection per task")
    }

    fn give_back(&self, connection: Connection) {
        self.0.lock().expect("not poisoned").push(connection);
    }
}

/// One closed-loop HTTP run: on which connections (one client task each),
/// within which bounds.
struct HttpLoad {
    label: String,
    connections: Connections,
    limits: super::limits::Limits,
    progress: bool,
}

impl HttpLoad {
    /// Runs tasks that each send `request(task, n)` and expect 200, each
    /// success carrying `items` items.
    async fn run(
        &self,
        request: impl Fn(usize, u64) -> (String, Option<Bytes>) + Send + Sync + Clone + 'static,
        items: u64,
    ) -> BenchResult<Measured> {
        run_tasks(
            &self.label,
            self.connections.len(),
            self.limits,
            self.progress,
            |ctx| http_task(ctx, self.connections.clone(), request.clone(), items),
        )
        .await
    }
}

async fn http_task(
    ctx: TaskContext,
    connections: Connections,
    request: impl Fn(usize, u64) -> (String, Option<Bytes>),
    items: u64,
) -> Recorder {
    let TaskContext {
        index,
        budget,
        mut recorder,
    } = ctx;
    let mut connection = connections.take();
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
    connections.give_back(connection);
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
            connections: Connections::open(target.url(), key, clients).await?,
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

/// What each rollout of the `lifecycle` workload records.
#[derive(Debug, Clone, Copy)]
struct LifecycleShape {
    tokens: usize,
    calls: u32,
    trainer_reads: bool,
}

async fn lifecycle(
    target: &mut Target,
    load: &LoadArgs,
    server: &ServerArgs,
    shape: LifecycleShape,
    progress: bool,
) -> BenchResult<Report> {
    let levels = load.levels(&[16])?;
    let limits = load.limits(DEFAULT_LIFECYCLES)?;
    let event = model_request_event(shape.tokens);
    let mut report = Report::new(
        "agl1 lifecycle",
        json!({"event_bytes": event.len(), "tokens": shape.tokens, "calls": shape.calls,
               "trainer_reads": shape.trainer_reads,
               "duration_secs": limits.duration.as_secs_f64(), "count": limits.count}),
    );
    let key = server.key.as_deref();
    let run = uuid::Uuid::new_v4().simple().to_string();
    for clients in levels {
        let label = format!("agl1 lifecycle c={clients}");
        let connections = Connections::open(target.url(), key, clients).await?;
        let run = format!("{run}-c{clients}");
        let event = event.clone();
        let measured = run_tasks(&label, clients, limits, progress, |ctx| {
            let (connection, prefix) = (connections.take(), format!("{run}-{}", ctx.index));
            lifecycle_task(ctx, connection, prefix, event.clone(), shape)
        })
        .await?;
        report.rows.push(Row::new(
            RowSpec {
                name: "1.x rollout lifecycles".to_owned(),
                clients,
                op_unit: "lifecycles",
                item_unit: None,
                latency_of: "one rollout from creation to its end",
            },
            &measured,
        ));
    }
    Ok(report)
}

/// One client of the `lifecycle` workload: rollouts `{prefix}-{n}`, one
/// after another, each an op.
async fn lifecycle_task(
    ctx: TaskContext,
    mut connection: Connection,
    prefix: String,
    event: Bytes,
    shape: LifecycleShape,
) -> Recorder {
    let TaskContext {
        budget,
        mut recorder,
        ..
    } = ctx;
    let state = |state: &str| Some(Bytes::from(json!({"status": {"state": state}}).to_string()));
    let reward = Bytes::from(json!({"event_type": "reward", "data": {"value": 1.0}}).to_string());
    let mut n = 0;
    while budget.take(1) == 1 {
        let id = format!("{prefix}-{n}");
        n += 1;
        let rollout = format!("/api/rollouts/{id}");
        let events = format!("{rollout}/attempt/0/events");
        let created = json!([{"rollout_id": id, "input": {}}]).to_string();
        let mut steps = vec![
            ("POST", "/api/rollouts", Some(Bytes::from(created)), 201),
            ("PATCH", rollout.as_str(), state("running"), 200),
        ];
        steps.extend((0..shape.calls).map(|_| ("POST", events.as_str(), Some(event.clone()), 200)));
        steps.push(("POST", events.as_str(), Some(reward.clone()), 200));
        steps.push(("PATCH", rollout.as_str(), state("succeeded"), 200));
        let (raw, triplets) = (
            format!("{rollout}/events?include_routed_experts=false"),
            format!("{rollout}/events?format=triplet"),
        );
        if shape.trainer_reads {
            steps.push(("GET", raw.as_str(), None, 200));
            steps.push(("GET", triplets.as_str(), None, 200));
        }
        let start = Instant::now();
        let mut failed = None;
        for (method, path, body, expected) in steps {
            match connection.send(method, path, body).await {
                Ok(answer) if answer.status == expected => {}
                Ok(answer) => {
                    failed = Some(format!("{method} {path}: {}", answer.status));
                    break;
                }
                Err(error) => {
                    failed = Some(format!("{method} {path}: {error}"));
                    break;
                }
            }
        }
        match failed {
            None => recorder.success(start.elapsed(), 1, 0),
            Some(error) => recorder.failure(error),
        }
    }
    recorder
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
            connections: Connections::open(target.url(), key, clients).await?,
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
    settings: GatewaySettings,
    progress: bool,
) -> BenchResult<Report> {
    let GatewaySettings {
        model,
        answer,
        slices,
    } = settings;
    let latency = answer.latency;
    let levels = load.levels(&[16])?;
    let limits = load.limits(200_000)?;
    let slices = slice_count(slices, limits.duration)?;
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
               "duration_secs": limits.duration.as_secs_f64(), "slices": slices}),
    );
    let model_url = format!("http://{}", model_server.addr);
    for clients in levels {
        let ids = create_rollouts(target, key, clients).await?;
        let direct = Phase {
            label: format!("direct c={clients}"),
            connections: Connections::open(&model_url, None, clients).await?,
            paths: Arc::new(vec!["/v1/chat/completions".to_owned(); clients]),
            measured: None,
        };
        let through = Phase {
            label: format!("gateway c={clients}"),
            connections: Connections::open(target.url(), key, clients).await?,
            paths: Arc::new(
                ids.iter()
                    .map(|id| {
                        format!(
                            "/proxy/rollout/{id}/attempt/0/mode/train/openai/v1/chat/completions"
                        )
                    })
                    .collect(),
            ),
            measured: None,
        };
        let mut phases = [direct, through];
        for slice in 0..slices {
            for phase in &mut phases {
                phase
                    .run_slice(&chat, slice_limits(limits, slices, slice), slices, progress)
                    .await?;
            }
        }
        let [direct, through] = phases;
        let row = |name: &str, latency_of, phase: Phase| {
            let measured = phase.measured.expect("at least one slice");
            let spec = RowSpec {
                name: name.to_owned(),
                clients,
                op_unit: "calls",
                item_unit: None,
                latency_of,
            };
            Row::new(spec, &measured)
        };
        let direct = row("model server, direct", "one chat completion", direct);
        let through = row(
            "through the gateway",
            "one chat completion (event recorded)",
            through,
        );
        report.settings.insert(
            format!("overhead_c{clients}_p50_ms"),
            json!(through.latency.p50_ms - direct.latency.p50_ms),
        );
        report.settings.insert(
            format!("overhead_c{clients}_p99_ms"),
            json!(through.latency.p99_ms - direct.latency.p99_ms),
        );
        report.rows.extend([direct, through]);
    }
    Ok(report)
}

/// What `bench agl1 gateway` was asked for beside the load.
struct GatewaySettings {
    model: String,
    answer: AnswerShape,
    slices: Option<u32>,
}

/// Roughly how long one slice of a phase lasts when `--slices` is not given.
const SLICE_SECS: f64 = 0.5;

/// Returns the slices each phase is cut into: `requested`, or one per
/// [`SLICE_SECS`] of `duration` (at least one).
fn slice_count(requested: Option<u32>, duration: std::time::Duration) -> BenchResult<u32> {
    match requested {
        Some(0) => Err(super::error::BenchError::new("--slices must be at least 1")),
        Some(slices) => Ok(slices),
        // Bounded by the cast: a duration of years gives u32::MAX slices.
        None => Ok(((duration.as_secs_f64() / SLICE_SECS).round() as u32).max(1)),
    }
}

/// Returns the bounds of slice `slice` of `slices`: an equal share of the
/// duration, and of the count (the remainder going to the first slices, so
/// that the shares add up to the count).
fn slice_limits(limits: super::limits::Limits, slices: u32, slice: u32) -> super::limits::Limits {
    let (share, remainder) = (
        limits.count / u64::from(slices),
        limits.count % u64::from(slices),
    );
    super::limits::Limits {
        count: share + u64::from(u64::from(slice) < remainder),
        duration: limits.duration / slices,
    }
}

/// One side of the gateway comparison: where its calls go, over which
/// connections (kept from slice to slice, as an agent's HTTP client keeps
/// them), and what its slices measured so far.
struct Phase {
    label: String,
    connections: Connections,
    /// Where each client task sends its calls, by task index.
    paths: Arc<Vec<String>>,
    measured: Option<Measured>,
}

impl Phase {
    /// Sends the chat completion `chat` from every connection's task, task
    /// `i` to `paths[i]`, within `limits`, and adds what it measured to the
    /// phase's.
    async fn run_slice(
        &mut self,
        chat: &Bytes,
        limits: super::limits::Limits,
        slices: u32,
        progress: bool,
    ) -> BenchResult<()> {
        let load = HttpLoad {
            label: format!("{} ({slices} slices)", self.label),
            connections: self.connections.clone(),
            limits,
            progress,
        };
        let paths = self.paths.clone();
        let chat = chat.clone();
        let measured = load
            .run(move |task, _| (paths[task].clone(), Some(chat.clone())), 0)
            .await?;
        match &mut self.measured {
            Some(total) => total.append(&measured),
            None => self.measured = Some(measured),
        }
        Ok(())
    }
}
