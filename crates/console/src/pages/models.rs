//! agent-lightning 1.x's model servers: those registered for the gateway,
//! with the calls this server made to each lately; the gateway's pause and
//! the servers that run it.

use askama::Template;

use super::viewer::Actions;
use crate::context::Sources;
use crate::format::{self, ShownTime};
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
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
    /// What precedes the namespace's console paths.
    pub base: String,
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
            base: sources.links.base().to_owned(),
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
    /// Says which lists are cut at [`MAX_LISTED`].
    notes: Vec<String>,
}

/// Model servers and gateway servers the page lists at most.
pub const MAX_LISTED: usize = 1_000;

/// Renders the Models page from one engine read (the gateway's own
/// state is this server's).
pub async fn render(sources: &Sources, actions: Actions) -> Result<Rendered, PageError> {
    let read = sources.engine.models_page(MAX_LISTED).await?;
    let pause = read.pause;
    let notes: Vec<String> = [
        (read.servers.len(), read.servers_total, "model servers"),
        (read.replicas.len(), read.replicas_total, "gateway servers"),
    ]
    .into_iter()
    .filter(|(shown, total, _)| shown < total)
    .map(|(shown, total, what)| format!("The first {shown} of {total} {what} are shown."))
    .collect();
    let registered = read.servers;
    let replicas = read
        .replicas
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
        notes,
    };
    Ok(Rendered {
        title: "Models".to_owned(),
        html: page.render().map_err(render_error)?,
        ..Rendered::default()
    })
}
