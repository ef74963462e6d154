//! The OTLP/gRPC trace receiver
//! (`opentelemetry.proto.collector.trace.v1.TraceService`): a thin adapter
//! over the [`TraceIngest`](crate::otlp::TraceIngest) of the namespace the
//! call names, which maps and stores spans as agent-lightning does. A
//! saturated receiver answers UNAVAILABLE with a `RetryInfo` delay.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::{Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use std::sync::Arc;

use super::status::status_of;
use crate::namespaces::Namespaces;
use crate::otlp::RETRY_DELAY;

/// The OTLP/gRPC trace receiver.
#[derive(Clone)]
pub struct OtlpTraceService {
    namespaces: Arc<Namespaces>,
}

impl OtlpTraceService {
    /// Returns the receiver over the namespaces' ingests (shared with
    /// OTLP/HTTP).
    pub fn new(namespaces: Arc<Namespaces>) -> Self {
        Self { namespaces }
    }
}

#[tonic::async_trait]
impl TraceService for OtlpTraceService {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let namespace = self
            .namespaces
            .for_call(request.extensions())
            .await
            .map_err(status_of)?;
        let Some(admitted) = namespace.trace_ingest.try_admit() else {
            let details = ErrorDetails::with_retry_info(Some(RETRY_DELAY));
            return Err(Status::with_error_details(
                tonic::Code::Unavailable,
                "too many exports in flight, retry later",
                details,
            ));
        };
        let response = admitted
            .export(request.into_inner())
            .await
            .map_err(status_of)?;
        Ok(Response::new(response))
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::namespaces_tests::in_memory;

    #[tokio::test]
    async fn saturated_receiver_asks_exporters_to_retry_later() {
        let namespaces = in_memory(1).await;
        let service = OtlpTraceService::new(namespaces.clone());
        let held = namespaces
            .default_namespace()
            .trace_ingest
            .try_admit()
            .unwrap();
        let status = service
            .export(Request::new(ExportTraceServiceRequest::default()))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        let retry = status.get_details_retry_info().expect("RetryInfo detail");
        assert_eq!(retry.retry_delay, Some(RETRY_DELAY));

        drop(held);
        let response = service
            .export(Request::new(ExportTraceServiceRequest::default()))
            .await
            .unwrap();
        assert_eq!(response.into_inner().partial_success, None);
    }
}
