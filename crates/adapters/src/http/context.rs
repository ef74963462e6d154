//! What every HTTP handler of the port shares: the engine, the limits and the gateway.

use super::error::HttpError;
use crate::gateway::Gateway;
use crate::metrics::Metrics;
use crate::otlp::TraceIngest;
use lightning_store_core::engine::Engine;
use lightning_store_core::model::Json;
use std::sync::Arc;

/// What every HTTP handler shares.
#[derive(Clone)]
pub struct HttpContext {
    /// The engine the gRPC adapter uses too.
    pub engine: Arc<Engine>,
    /// The OTLP trace receiver shared with OTLP/gRPC.
    pub trace_ingest: TraceIngest,
    /// Largest accepted request body in bytes (after decompression too);
    /// larger ones get a 413.
    pub max_body_bytes: usize,
    /// agent-lightning 1.x's LLM gateway.
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
