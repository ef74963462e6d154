//! agent-lightning 1.x's LLM gateway: agents call an OpenAI-compatible
//! base URL per (rollout, attempt, mode); the gateway picks the rollout's
//! model server ([`lightning_store_core::agl1::gateway`]), rewrites the request
//! ([`lightning_store_core::agl1::model_call`]), forwards it ([`upstream`]) and
//! records a `model_request` event for every answer before replying. The
//! bodies stay JSON text throughout: forwarded, recorded and returned
//! without their token-id arrays ever being built as values.
//!
//! # Pause and drain, across servers
//! The pause lives in the store. Each server keeps a view of it, refreshed
//! on every `GatewayChanged` change event (its own commits and, through
//! the follower, other servers') and every heartbeat, and reports its
//! presence through the store: its calls in flight and the pause
//! generation its view has reached ([`lightning_store_core::agl1::Replica`]).
//! A call counts itself in flight *before* it looks at the pause, under
//! one lock, so once a server's view is paused no new call starts there
//! and every call that did start is counted. A pause (or resume) returns
//! once every live server reports the new generation (bounded by the time
//! after which a silent server is presumed gone), so that afterwards every
//! server refuses new calls and `inflight` sums the calls still running
//! on all of them. A server reports when its count leaves or reaches zero
//! and when its view changes (coalesced over [`REPORT_DELAY`]), and every
//! heartbeat: what a drain waits for is never later than that.
//!
//! # What a call reads
//! Which rollouts exist and which servers serve the model are remembered
//! between calls ([`cache`]) and forgotten on the change events that alter
//! them (`RolloutDeleted`, `ModelsChanged`), so that a call costs the
//! store one durable append: its event.

mod cache;
pub mod error;
pub mod rates;
pub mod upstream;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::sync::Notify;
use tokio::sync::broadcast::error::RecvError;

pub use self::error::GatewayError;
use crate::metrics::Metrics;
use crate::pyjson::is_canonical;
use lightning_store_core::agl1::events::MODEL_REQUEST;
use lightning_store_core::agl1::gateway::{
    GatewayMode, GatewaySettings, RetryPolicy, select_server,
};
use lightning_store_core::agl1::model_call::{
    BodyError, PreparedRequest, UpstreamAnswer, model_request_data, prepare_request, read_answer,
};
use lightning_store_core::agl1::{self, ModelServer, NewAgl1Event, Pause, Replica};
use lightning_store_core::engine::Engine;
use lightning_store_core::error::StoreResult;
use lightning_store_core::events::Change;
use lightning_store_core::ids::{AttemptId, RolloutId};
use lightning_store_core::model::{Json, Timestamp};
use lightning_store_core::training::usage::ModelCall;

/// How long a presence report waits for more changes to report at once.
pub const REPORT_DELAY: Duration = Duration::from_millis(50);

/// Settings of the gateway.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// How requests are rewritten; `None` leaves the gateway unconfigured
    /// (proxy calls answer 503, pause and drain still work).
    pub settings: Option<GatewaySettings>,
    /// Longest wait for one model server call (upstream: 300 s).
    pub upstream_timeout: Duration,
    pub retry: RetryPolicy,
    /// How often each server reports its presence and re-reads the pause.
    pub heartbeat: Duration,
    /// A server silent this long is presumed gone.
    pub stale_after: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            settings: None,
            upstream_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            heartbeat: Duration::from_secs(1),
            stale_after: Duration::from_secs(5),
        }
    }
}

/// A proxied call, as the HTTP route received it.
#[derive(Debug)]
pub struct ProxyCall {
    pub rollout_id: RolloutId,
    pub attempt_id: AttemptId,
    pub mode: GatewayMode,
    /// `chat/completions` or `completions`.
    pub upstream_path: String,
    pub body: Bytes,
}

/// How a proxied call was answered.
#[derive(Debug)]
pub enum ProxyAnswer {
    /// The model server's status and JSON body (routing tensor removed),
    /// as the agent is answered.
    Upstream { status: u16, body: Bytes },
    /// The gateway is paused: retry later.
    Paused {
        retry_after_seconds: i64,
        reason: Option<String>,
    },
}

/// The gateway's pause with the calls in flight on every live server.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayState {
    pub pause: Pause,
    pub inflight: i64,
}

/// This server's view: the pause it applies and its calls in flight.
#[derive(Debug, Default)]
struct Local {
    pause: Pause,
    inflight: i64,
}

/// The gateway of one server.
pub struct Gateway {
    engine: Arc<Engine>,
    config: GatewayConfig,
    client: upstream::UpstreamClient,
    /// This server's id in the presence table.
    server_id: String,
    local: parking_lot::Mutex<Local>,
    /// Wakes the presence reporter: the view changed, or the in-flight
    /// count left or reached zero.
    changed: Notify,
    /// What the last calls read from the store.
    cache: cache::RouteCache,
    /// This server's calls per model server, for the console.
    rates: rates::CallRates,
    metrics: Metrics,
    max_body_bytes: usize,
}

/// Counts a call in flight until dropped (also when the call is cancelled).
struct InFlight<'a>(&'a Gateway);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut local = self.0.local.lock();
        local.inflight -= 1;
        let drained = local.inflight == 0;
        drop(local);
        self.0.metrics.agl1().gateway_in_flight(-1);
        if drained {
            self.0.changed.notify_one();
        }
    }
}

impl Gateway {
    /// Returns the gateway of a server over `engine`.
    pub fn new(
        engine: Arc<Engine>,
        config: GatewayConfig,
        metrics: Metrics,
        max_body_bytes: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            engine,
            config,
            client: upstream::client(),
            server_id: uuid::Uuid::new_v4().simple().to_string(),
            local: parking_lot::Mutex::new(Local::default()),
            changed: Notify::new(),
            cache: cache::RouteCache::default(),
            rates: rates::CallRates::default(),
            metrics,
            max_body_bytes,
        })
    }

    /// Reads the pause from the store, so that a restarted server honours
    /// it before serving its first call.
    pub async fn load(&self) -> StoreResult<()> {
        let pause = self.engine.gateway_pause().await?;
        self.apply(pause);
        Ok(())
    }

    /// Keeps the view of the pause current and reports this server's
    /// presence until the engine closes, then withdraws it.
    pub async fn run(self: Arc<Self>) {
        let mut closing = self.engine.closing();
        let closed = async move {
            let _ = closing.wait_for(|closed| *closed).await;
        };
        tokio::pin!(closed);
        let mut events = self.engine.events().subscribe();
        let mut heartbeat = tokio::time::interval(self.config.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let reload = tokio::select! {
                () = &mut closed => break,
                _ = heartbeat.tick() => true,
                event = events.recv() => match event {
                    Ok(event) => match &event.change {
                        Change::GatewayChanged { .. } => true,
                        Change::ModelsChanged => {
                            self.cache.forget_models();
                            continue;
                        }
                        Change::RolloutDeleted { rollout_id } => {
                            self.cache.forget_rollout(rollout_id);
                            continue;
                        }
                        _ => continue,
                    },
                    Err(RecvError::Lagged(_)) => {
                        self.cache.forget_all();
                        true
                    }
                    Err(RecvError::Closed) => break,
                },
                () = self.changed.notified() => {
                    // Coalesce a burst of changes into one report.
                    tokio::time::sleep(REPORT_DELAY).await;
                    false
                }
            };
            if reload && let Err(error) = self.load().await {
                tracing::warn!(%error, "gateway: cannot read the pause");
            }
            if let Err(error) = self.report().await {
                tracing::warn!(%error, "gateway: cannot report presence");
            }
        }
        if let Err(error) = self.engine.remove_replica(&self.server_id).await {
            tracing::debug!(%error, "gateway: cannot withdraw presence");
        }
    }

    /// Writes this server's presence, dropping servers silent too long.
    async fn report(&self) -> StoreResult<()> {
        let (inflight, generation_seen) = {
            let local = self.local.lock();
            (local.inflight, local.pause.generation)
        };
        let now = self.engine.now();
        let replica = Replica {
            server_id: self.server_id.clone(),
            inflight,
            generation_seen,
            heartbeat: now,
        };
        let stale_before = Timestamp(now.0 - self.config.stale_after.as_nanos() as i64);
        self.engine.report_replica(&replica, stale_before).await
    }

    /// Applies a pause read from the store unless the view is newer.
    fn apply(&self, pause: Pause) {
        let mut local = self.local.lock();
        if pause.generation >= local.pause.generation && pause != local.pause {
            self.metrics.agl1().gateway_paused(pause.paused);
            local.pause = pause;
            drop(local);
            self.changed.notify_one();
        }
    }

    /// Counts a call in flight unless the gateway is paused (then returns
    /// the pause), under one lock with the view.
    fn enter(&self) -> Result<InFlight<'_>, Pause> {
        let mut local = self.local.lock();
        if local.pause.paused {
            return Err(local.pause.clone());
        }
        local.inflight += 1;
        let first = local.inflight == 1;
        drop(local);
        self.metrics.agl1().gateway_in_flight(1);
        if first {
            self.changed.notify_one();
        }
        Ok(InFlight(self))
    }

    /// Returns the model every call goes to, when the gateway is configured.
    pub fn model(&self) -> Option<&str> {
        self.config.settings.as_ref().map(|s| s.model.as_str())
    }

    /// Returns this server's calls per model server over the last minutes.
    pub fn call_rates(&self) -> Vec<rates::ModelRate> {
        self.rates.rates()
    }

    /// Tells the gateway that this server changed the model servers, so
    /// that its next call reads them again (other servers learn it from
    /// the change event).
    pub fn models_changed(&self) {
        self.cache.forget_models();
    }

    /// Tells the gateway that this server deleted a rollout.
    pub fn rollout_deleted(&self, rollout_id: &str) {
        self.cache.forget_rollout(rollout_id);
    }

    /// Returns whether a 1.x rollout exists, from the cache when it can.
    async fn rollout_exists(&self, rollout_id: &str) -> StoreResult<bool> {
        if self.cache.knows(rollout_id) {
            return Ok(true);
        }
        let generation = self.cache.generation();
        let exists = self.engine.agl1_rollout_exists(rollout_id).await?;
        if exists {
            self.cache.remember_rollout(generation, rollout_id);
        }
        Ok(exists)
    }

    /// Returns the servers of `model`, from the cache when it can.
    async fn servers(&self, model: &str) -> StoreResult<Arc<Vec<ModelServer>>> {
        if let Some(servers) = self.cache.models(model) {
            return Ok(servers);
        }
        let generation = self.cache.generation();
        let servers = Arc::new(self.engine.models(model).await?);
        self.cache
            .remember_models(generation, model, servers.clone());
        Ok(servers)
    }

    /// Pauses the gateway (`Some`: retry delay and reason) or resumes it on
    /// every server, and returns the state once every live server applies it.
    pub async fn set_pause(
        &self,
        pause: Option<(i64, Option<String>)>,
    ) -> StoreResult<GatewayState> {
        let pause = self.engine.set_gateway_pause(pause).await?;
        let generation = pause.generation;
        self.apply(pause);
        self.report().await?;
        let deadline =
            tokio::time::Instant::now() + self.config.stale_after + self.config.heartbeat;
        loop {
            let now = self.engine.now();
            let lagging: Vec<String> = self
                .others(now)
                .await?
                .into_iter()
                .filter(|r| r.generation_seen < generation)
                .map(|r| r.server_id)
                .collect();
            if lagging.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    ?lagging,
                    generation,
                    "gateway: servers did not apply the pause in time"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.state().await
    }

    /// Returns the pause this server applies and the calls in flight on
    /// every live server.
    pub async fn state(&self) -> StoreResult<GatewayState> {
        let others: i64 = self
            .others(self.engine.now())
            .await?
            .iter()
            .map(|r| r.inflight)
            .sum();
        let local = self.local.lock();
        Ok(GatewayState {
            pause: local.pause.clone(),
            inflight: local.inflight + others,
        })
    }

    /// Returns the presence of the other live servers.
    async fn others(&self, now: Timestamp) -> StoreResult<Vec<Replica>> {
        let stale_before = Timestamp(now.0 - self.config.stale_after.as_nanos() as i64);
        Ok(self
            .engine
            .gateway_replicas()
            .await?
            .into_iter()
            .filter(|r| r.server_id != self.server_id && r.heartbeat >= stale_before)
            .collect())
    }

    /// Answers a proxied call as upstream does: 404 for an unknown rollout,
    /// 503 without settings or servers, 400 for a body that is not a JSON
    /// object, 429 while paused, 400 for `stream`, then the model server's
    /// answer, recorded as a `model_request` event before the reply.
    pub async fn proxy(&self, call: ProxyCall) -> Result<ProxyAnswer, GatewayError> {
        if !self.rollout_exists(&call.rollout_id).await? {
            return Err(GatewayError::new(
                StatusCode::NOT_FOUND,
                agl1::not_found(&call.rollout_id),
            ));
        }
        let settings = self.config.settings.as_ref().ok_or_else(|| {
            GatewayError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Proxy not configured".to_owned(),
            )
        })?;
        let request = prepared_request(settings, &call.body, call.mode)?;
        let model = settings.model.as_str();
        let servers = self.servers(model).await?;
        let server = select_server(&servers, &call.rollout_id).ok_or_else(|| {
            GatewayError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("No servers available for model '{model}'"),
            )
        })?;
        let _in_flight = match self.enter() {
            Ok(guard) => guard,
            Err(pause) => {
                return Ok(ProxyAnswer::Paused {
                    retry_after_seconds: pause.retry_after_seconds,
                    reason: pause.reason,
                });
            }
        };
        if request.stream {
            return Err(GatewayError::bad_request(
                "Streaming responses are not supported",
            ));
        }
        let url = format!(
            "{}/{}",
            server.endpoint.trim_end_matches('/'),
            call.upstream_path
        );
        let payload = Bytes::from(request.body);
        let limits = upstream::Limits {
            timeout: self.config.upstream_timeout,
            retry: self.config.retry,
            max_body_bytes: self.max_body_bytes,
        };
        let answer =
            upstream::post(&self.client, &url, payload.clone(), limits, &self.metrics).await?;
        self.rates.record(
            &server.model,
            &server.endpoint,
            answer.latency,
            answer.status >= 400,
        );
        let read = read_answer(&answer.body).map_err(|_| upstream::invalid_answer(&answer.body))?;
        let latency_ms = answer.latency.as_secs_f64() * 1e3;
        let data = model_request_data(
            server,
            UpstreamAnswer {
                request: &payload,
                answer: &read,
                http_status: answer.status,
                latency_ms,
                retry_count: answer.retries,
            },
        );
        let usage = read
            .usage
            .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok());
        let used = ModelCall::of_model_request(Some(latency_ms), usage.as_ref());
        let event = NewAgl1Event {
            event_type: MODEL_REQUEST.to_owned(),
            data,
            has_routed_experts: read.routed_experts.is_some(),
            model_version: Some(server.version),
            call: Some(used),
            idempotency: None,
        };
        let body = reply_body(&answer, read.response);
        // Once the model answered, the event is recorded even if the agent
        // goes away meanwhile: the append is queued for a task of its own
        // when first polled (see `Engine::append_agl1_event`).
        self.engine
            .append_agl1_event(&call.rollout_id, &call.attempt_id, event)
            .await?;
        Ok(ProxyAnswer::Upstream {
            status: answer.status,
            body,
        })
    }
}

/// Rewrites a request body for the model server; a body that is not
/// compact JSON is parsed and written compact first (rare: most clients
/// write compact JSON), so that the rewrite passes its members on as text.
fn prepared_request(
    settings: &GatewaySettings,
    body: &Bytes,
    mode: GatewayMode,
) -> Result<PreparedRequest, GatewayError> {
    let compact = match is_canonical(body, false) {
        true => Cow::Borrowed(&body[..]),
        false => match serde_json::from_slice::<Json>(body) {
            Ok(value @ Json::Object(_)) => {
                Cow::Owned(serde_json::to_vec(&value).expect("JSON serialises"))
            }
            Ok(_) => return Err(not_an_object()),
            Err(_) => return Err(invalid_json()),
        },
    };
    prepare_request(settings, &compact, mode).map_err(|error| match error {
        BodyError::NotJson => invalid_json(),
        BodyError::NotAnObject => not_an_object(),
    })
}

fn invalid_json() -> GatewayError {
    GatewayError::bad_request("Invalid JSON in request body")
}

fn not_an_object() -> GatewayError {
    GatewayError::bad_request("Request body must be a JSON object")
}

/// Returns the agent's reply: the answer's text (routing tensors taken
/// out), written again only when its numbers are not written as Python
/// writes them.
fn reply_body(answer: &upstream::Answer, response: Cow<'_, [u8]>) -> Bytes {
    match (answer.body_as_python, response) {
        (true, Cow::Borrowed(_)) => answer.body.clone(),
        (true, Cow::Owned(text)) => Bytes::from(text),
        (false, response) => {
            let value: Json = serde_json::from_slice(&response).expect("read as JSON");
            Bytes::from(crate::pyjson::to_vec(&value).expect("JSON serialises"))
        }
    }
}
