//! agent-lightning 1.x's model servers: those registered for the gateway,
//! with the calls this server made to each lately; the gateway's pause and
//! the servers that run it.

use askama::Template;

use super::super::Sources;
use super::super::format::{self, ShownTime};
use super::super::rendered::render_error;
use super::super::rendered::{PageError, Rendered};
use super::session::Actions;
use lightning_store_adapters::gateway::rates::{self, ModelRate};

/// The gateway's state as the Overview and the Models page show it.
pub struct GatewayBox {
    pub paused: bool,
    pub reason: Option<String>,
    pub retry_after: i64,
    /// Calls in flight on every server that runs the gateway.
    pub inflight: i64,
    /// The model this server's gateway calls.
    pub model: Option<String>,
    pub rates: Vec<RateRow>,
    /// The window of the rates, in words.
    pub window: String,
    /// The viewer may pause and resume it.
    pub can_act: bool,
}

/// One model server's calls from this server.
pub struct RateRow {
    pub model: String,
    pub endpoint: String,
    pub per_minute: String,
    pub latency: String,
    pub errors: u64,
}

impl RateRow {
    fn of(rate: &ModelRate) -> Self {
        Self {
            model: rate.model.clone(),
            endpoint: rate.endpoint.clone(),
            per_minute: format!("{:.1}", rate.per_minute),
            latency: format::duration(rate.mean_latency),
            errors: rate.errors,
        }
    }
}

impl GatewayBox {
    /// Reads the gateway's state for a viewer who may do `actions`.
    pub async fn read(sources: &Sources, actions: Actions) -> Result<Self, PageError> {
        let state = sources.gateway.state().await?;
        Ok(Self {
            paused: state.pause.paused,
            reason: state.pause.reason.clone(),
            retry_after: state.pause.retry_after_seconds,
            inflight: state.inflight,
            model: sources.gateway.model().map(str::to_owned),
            rates: sources
                .gateway
                .call_rates()
                .iter()
                .map(RateRow::of)
                .collect(),
            window: format::duration(rates::WINDOW),
            can_act: actions.gateway,
        })
    }
}

struct ServerRow {
    model: String,
    endpoint: String,
    version: i64,
    per_minute: String,
    latency: String,
    errors: u64,
}

struct ReplicaRow {
    server_id: String,
    inflight: i64,
    generation_seen: i64,
    heartbeat: ShownTime,
}

#[derive(Template)]
#[template(path = "models.html")]
struct ModelsPage {
    gateway: GatewayBox,
    servers: Vec<ServerRow>,
    replicas: Vec<ReplicaRow>,
    generation: i64,
}

/// Renders the Models page.
pub async fn render(sources: &Sources, actions: Actions) -> Result<Rendered, PageError> {
    let engine = &sources.engine;
    let registered = engine.all_models().await?;
    let pause = engine.gateway_pause().await?;
    let replicas = engine
        .gateway_replicas()
        .await?
        .into_iter()
        .map(|replica| ReplicaRow {
            server_id: replica.server_id,
            inflight: replica.inflight,
            generation_seen: replica.generation_seen,
            heartbeat: format::time(replica.heartbeat),
        })
        .collect();
    let gateway = GatewayBox::read(sources, actions).await?;
    let servers = registered
        .into_iter()
        .map(|server| {
            let rate = gateway
                .rates
                .iter()
                .find(|r| r.model == server.model && r.endpoint == server.endpoint);
            ServerRow {
                per_minute: rate.map_or_else(|| "0".to_owned(), |r| r.per_minute.clone()),
                latency: rate.map_or_else(String::new, |r| r.latency.clone()),
                errors: rate.map_or(0, |r| r.errors),
                model: server.model,
                endpoint: server.endpoint,
                version: server.version,
            }
        })
        .collect();
    let page = ModelsPage {
        gateway,
        servers,
        replicas,
        generation: pause.generation,
    };
    Ok(Rendered {
        title: "Models".to_owned(),
        html: page.render().map_err(render_error)?,
        ..Rendered::default()
    })
}
