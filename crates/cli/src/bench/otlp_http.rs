//! An OTLP/HTTP exporter for the benchmark: posts pre-encoded protobuf
//! Export requests to `/v1/traces` over one kept-alive HTTP/1.1 connection
//! per client task, as OpenTelemetry SDK exporters do.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message as _;

use super::limits::CALL_TIMEOUT;

/// One client task's OTLP/HTTP exporter.
pub struct OtlpHttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: http::Uri,
    authorization: Option<http::HeaderValue>,
}

impl OtlpHttpClient {
    /// Returns an exporter posting to `{base_url}/v1/traces` (plaintext
    /// only), with the `authorization` header when given.
    pub fn new(base_url: &str, authorization: Option<http::HeaderValue>) -> Result<Self, String> {
        if !base_url.starts_with("http://") {
            return Err(format!(
                "OTLP/HTTP scenarios need an http:// server, got {base_url}"
            ));
        }
        let uri = format!("{}/v1/traces", base_url.trim_end_matches('/'))
            .parse()
            .map_err(|e| format!("invalid server URL {base_url}: {e}"))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            uri,
            authorization,
        })
    }

    /// Posts one encoded Export request; an error names a failed call, a
    /// non-200 status or rejected spans.
    pub async fn export(&self, body: Bytes) -> Result<(), String> {
        let mut request = http::Request::post(self.uri.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf");
        if let Some(value) = &self.authorization {
            request = request.header(http::header::AUTHORIZATION, value.clone());
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let response = tokio::time::timeout(CALL_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| "timed out".to_owned())?
            .map_err(|e| format!("request failed: {e}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("cannot read the answer: {e}"))?
            .to_bytes();
        if status != http::StatusCode::OK {
            return Err(format!("HTTP {status}"));
        }
        let answer = ExportTraceServiceResponse::decode(body)
            .map_err(|e| format!("undecodable answer: {e}"))?;
        match answer.partial_success {
            Some(partial) if partial.rejected_spans > 0 => Err(format!(
                "{} spans rejected: {}",
                partial.rejected_spans, partial.error_message
            )),
            _ => Ok(()),
        }
    }
}
