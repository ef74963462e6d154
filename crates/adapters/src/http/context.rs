//! What every HTTP handler of the port shares: the router's state
//! ([`HttpState`]: the namespaces, the limits, the metrics) and, for each
//! request, the services of the namespace it names ([`HttpContext`]).

use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::HttpError;
use crate::gateway::Gateway;
use crate::metrics::Metrics;
use crate::namespaces::Namespaces;
use crate::otlp::TraceIngest;
use lightning_store_core::engine::Engine;
use lightning_store_core::model::Json;
use std::sync::Arc;

/// The state of the HTTP router.
#[derive(Clone)]
pub struct HttpState {
    /// The namespaces served.
    pub namespaces: Arc<Namespaces>,
    /// Largest accepted request body in bytes (after decompression too);
    /// larger ones get a 413.
    pub max_body_bytes: usize,
    /// The server's metrics.
    pub metrics: Metrics,
}

/// What a handler works with: the services of the namespace its request
/// names (an extractor: an unknown namespace is answered 404 before the
/// handler runs).
#[derive(Clone)]
pub struct HttpContext {
    /// The namespace's engine, the one the gRPC adapter uses too.
    pub engine: Arc<Engine>,
    /// The namespace's OTLP trace receiver, shared with OTLP/gRPC.
    pub trace_ingest: TraceIngest,
    /// Largest accepted request body in bytes (after decompression too);
    /// larger ones get a 413.
    pub max_body_bytes: usize,
    /// The namespace's agent-lightning 1.x LLM gateway.
    pub gateway: Arc<Gateway>,
    /// The server's metrics.
    pub metrics: Metrics,
}

impl HttpContext {
    /// Refuses a batch `value` (when it is a list) over the batch limit
    /// before any of its items is read; a value that is not a list is the
    /// validator's to refuse.
    pub fn check_batch(&self, field: &str, value: Option<&Json>) -> Result<(), HttpError> {
        if let Some(Json::Array(items)) = value {
            self.engine.limits().batch(field, items)?;
        }
        Ok(())
    }

    /// Refuses an id list `value` (when it is a list) over the id-list limit
    /// before any of its ids is read, as [`HttpContext::check_batch`] does
    /// for batches.
    pub fn check_ids(&self, field: &str, value: Option<&Json>) -> Result<(), HttpError> {
        if let Some(Json::Array(ids)) = value {
            self.engine.limits().ids(field, ids)?;
        }
        Ok(())
    }
}

impl FromRequestParts<HttpState> for HttpContext {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, HttpError> {
        let services = state.namespaces.for_call(&parts.extensions).await?;
        Ok(Self {
            engine: services.engine.clone(),
            trace_ingest: services.trace_ingest.clone(),
            max_body_bytes: state.max_body_bytes,
            gateway: services.gateway.clone(),
            metrics: state.metrics.clone(),
        })
    }
}
