//! OTLP trace ingest, written once for both receivers: OTLP/gRPC
//! (`TraceService/Export`, [`crate::api::otlp`]) and OTLP/HTTP
//! (`POST /v1/traces`, [`crate::http::otlp`]). An export is converted
//! ([`spans`]) and stored in one store transaction; spans that cannot be
//! stored are reported through `partial_success`, never by failing the
//! export. At most a configured number of exports run at once; beyond that
//! exporters are told to retry later.

pub mod json;
pub mod spans;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tokio::sync::{Semaphore, SemaphorePermit};

use lightning_store_core::engine::Engine;
use lightning_store_core::error::StoreResult;

/// How long an exporter is asked to back off when the receiver is saturated.
pub const RETRY_DELAY: Duration = Duration::from_millis(250);

/// At most this many distinct rejection reasons are named in a partial success.
const MAX_REASONS: usize = 3;

/// The trace receiver shared by the OTLP/gRPC and OTLP/HTTP adapters.
#[derive(Clone)]
pub struct TraceIngest {
    engine: Arc<Engine>,
    in_flight: Arc<Semaphore>,
}

/// An admitted export: holds its place among the exports in flight.
pub struct Admitted<'a> {
    ingest: &'a TraceIngest,
    _permit: SemaphorePermit<'a>,
}

impl TraceIngest {
    /// Returns a receiver that processes at most `max_in_flight` exports at once.
    pub fn new(engine: Arc<Engine>, max_in_flight: usize) -> Self {
        Self {
            engine,
            in_flight: Arc::new(Semaphore::new(max_in_flight)),
        }
    }

    /// Admits one export, or returns `None` when `max_in_flight` are already
    /// running: the exporter should retry after [`RETRY_DELAY`].
    pub fn try_admit(&self) -> Option<Admitted<'_>> {
        let permit = self.in_flight.try_acquire().ok()?;
        Some(Admitted {
            ingest: self,
            _permit: permit,
        })
    }
}

impl Admitted<'_> {
    /// Stores every storable span of the export in one store transaction and
    /// reports the others in `partial_success`.
    pub async fn export(
        self,
        request: ExportTraceServiceRequest,
    ) -> StoreResult<ExportTraceServiceResponse> {
        let (spans, mut reasons) = spans::spans_from_request(request);
        let mut rejected = reasons.len();
        if !spans.is_empty() {
            let added = self.ingest.engine.ingest_spans(spans).await?;
            rejected += added.rejected.len();
            reasons.extend(added.rejected.into_iter().map(|e| e.to_string()));
        }
        let partial_success = (rejected > 0).then(|| {
            let mut distinct: Vec<String> = Vec::new();
            for reason in reasons {
                if distinct.len() < MAX_REASONS && !distinct.contains(&reason) {
                    distinct.push(reason);
                }
            }
            tracing::warn!(rejected, reasons = ?distinct, "otlp spans rejected");
            ExportTracePartialSuccess {
                rejected_spans: rejected as i64,
                error_message: format!("{rejected} spans rejected: {}", distinct.join("; ")),
            }
        });
        Ok(ExportTraceServiceResponse { partial_success })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightning_store_backends::memory::MemoryStore;
    use lightning_store_core::engine::EngineConfig;

    #[tokio::test]
    async fn a_saturated_receiver_admits_no_more_exports() {
        let engine = Arc::new(Engine::new(
            Arc::new(MemoryStore::new()),
            EngineConfig::default(),
        ));
        let ingest = TraceIngest::new(engine, 1);
        let held = ingest.try_admit().expect("one export is admitted");
        assert!(ingest.try_admit().is_none());
        drop(held);
        let response = ingest
            .try_admit()
            .expect("admitted again")
            .export(ExportTraceServiceRequest::default())
            .await
            .unwrap();
        assert_eq!(response.partial_success, None);
    }
}
