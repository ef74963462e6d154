//! Calls to the model servers: one pooled HTTP client, upstream's retry
//! policy (408, 409, 429, 5xx, timeouts and transport errors; jittered,
//! capped exponential backoff), and the answer read as upstream reads it
//! (a JSON body when the content type says so, `{}` otherwise) and kept as
//! compact JSON text.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::error::GatewayError;
use crate::metrics::Metrics;
use crate::pyjson::is_canonical;
use lightning_store_core::agl1::gateway::{RetryPolicy, is_retryable_status};
use lightning_store_core::model::Json;

/// The pooled client of the model servers (HTTP/1.1, keep-alive).
pub type UpstreamClient = Client<HttpConnector, Full<Bytes>>;

/// Returns a client that keeps idle connections for reuse.
pub fn client() -> UpstreamClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector)
}

/// A model server's answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// The JSON body as compact text (see [`is_canonical`]), `{}` when the
    /// content type is not JSON. Not yet known to be an object when it
    /// came compact.
    pub body: Bytes,
    /// Whether `body` is also what the agent is answered, numbers written
    /// as Python writes them (else the reply is written again).
    pub body_as_python: bool,
    /// Calls made before this answer.
    pub retries: u32,
    /// From the first call to this answer, retries included.
    pub latency: Duration,
}

/// How one call ended.
enum Outcome {
    Answered(u16, Option<String>, Bytes),
    TimedOut,
    Failed(String),
}

/// How long to wait for a model server and how to retry it.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Per call, answer body included (upstream: 300 s).
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Largest answer body read.
    pub max_body_bytes: usize,
}

/// POSTs `body` to `url`, retrying as upstream does; a timeout after the
/// last call is a 504, anything else unanswered a 502. Dropping the
/// future cancels the call in progress.
pub async fn post(
    client: &UpstreamClient,
    url: &str,
    body: Bytes,
    limits: Limits,
    metrics: &Metrics,
) -> Result<Answer, GatewayError> {
    let uri: http::Uri = url.parse().map_err(|error| {
        tracing::warn!(url, %error, "model server endpoint is not a URL");
        failed()
    })?;
    if uri.scheme_str() != Some("http") {
        tracing::warn!(
            url,
            "model server endpoint is not plain http, which the gateway speaks"
        );
        return Err(failed());
    }
    let started = Instant::now();
    let last = limits.retry.max_attempts.saturating_sub(1);
    for attempt in 0..=last {
        let call = Instant::now();
        let outcome = call_once(client, &uri, body.clone(), limits).await;
        let elapsed = call.elapsed();
        let retry_reason = match outcome {
            Outcome::Answered(status, content_type, bytes) => {
                metrics
                    .agl1()
                    .upstream_call(upstream_result(status), elapsed);
                if !is_retryable_status(status) || attempt == last {
                    let (body, body_as_python) = answer_body(content_type.as_deref(), bytes)?;
                    return Ok(Answer {
                        status,
                        body,
                        body_as_python,
                        retries: attempt,
                        latency: started.elapsed(),
                    });
                }
                "status"
            }
            Outcome::TimedOut => {
                metrics.agl1().upstream_call("timeout", elapsed);
                if attempt == last {
                    return Err(GatewayError::new(
                        StatusCode::GATEWAY_TIMEOUT,
                        "Upstream model server timed out".to_owned(),
                    ));
                }
                "timeout"
            }
            Outcome::Failed(error) => {
                metrics.agl1().upstream_call("transport", elapsed);
                if attempt == last {
                    tracing::warn!(url, error, "model server request failed");
                    return Err(failed());
                }
                "transport"
            }
        };
        let delay = limits.retry.delay(attempt, 0.75 + fastrand::f64() * 0.5);
        metrics.agl1().upstream_retry(retry_reason);
        tracing::warn!(
            url,
            attempt = attempt + 1,
            max_attempts = limits.retry.max_attempts,
            delay_seconds = delay.as_secs_f64(),
            reason = retry_reason,
            "retrying upstream request"
        );
        tokio::time::sleep(delay).await;
    }
    Err(failed())
}

fn failed() -> GatewayError {
    GatewayError::new(
        StatusCode::BAD_GATEWAY,
        "Upstream model server request failed".to_owned(),
    )
}

fn upstream_result(status: u16) -> &'static str {
    if status < 400 { "ok" } else { "error" }
}

async fn call_once(
    client: &UpstreamClient,
    uri: &http::Uri,
    body: Bytes,
    limits: Limits,
) -> Outcome {
    let request = http::Request::post(uri.clone())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .expect("a POST with a parsed URI is a valid request");
    let call = async {
        let response = client
            .request(request)
            .await
            .map_err(|error| error.to_string())?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = Limited::new(response.into_body(), limits.max_body_bytes)
            .collect()
            .await
            .map_err(|error| error.to_string())?
            .to_bytes();
        Ok::<_, String>((status, content_type, bytes))
    };
    match tokio::time::timeout(limits.timeout, call).await {
        Ok(Ok((status, content_type, bytes))) => Outcome::Answered(status, content_type, bytes),
        Ok(Err(error)) => Outcome::Failed(error),
        Err(_) => Outcome::TimedOut,
    }
}

/// Reads an answer's body as upstream does: JSON when the content type
/// starts with `application/json`, else `{}`; returns it as compact JSON
/// text, and whether that is what the reply writes. An answer already
/// compact is kept as it is (a cheap scan); another is parsed and written
/// compact, and one that does not parse as an object is a 502 (upstream
/// fails with a 500).
fn answer_body(content_type: Option<&str>, bytes: Bytes) -> Result<(Bytes, bool), GatewayError> {
    if !content_type.is_some_and(|t| t.starts_with("application/json")) {
        return Ok((Bytes::from_static(b"{}"), true));
    }
    if is_canonical(&bytes, true) {
        return Ok((bytes, true));
    }
    match serde_json::from_slice::<Json>(&bytes) {
        Ok(body @ Json::Object(_)) => {
            let compact = serde_json::to_vec(&body).expect("JSON serialises");
            let as_python = is_canonical(&compact, true);
            Ok((Bytes::from(compact), as_python))
        }
        Ok(_) | Err(_) => Err(invalid_answer(&bytes)),
    }
}

/// The error of an answer that is not a JSON object.
pub fn invalid_answer(bytes: &[u8]) -> GatewayError {
    tracing::warn!(
        body = %String::from_utf8_lossy(&bytes[..bytes.len().min(200)]),
        "model server answered JSON that is not an object"
    );
    GatewayError::new(
        StatusCode::BAD_GATEWAY,
        "Upstream model server returned an invalid JSON body".to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(
        content_type: Option<&str>,
        body: &'static [u8],
    ) -> Result<(Bytes, bool), GatewayError> {
        answer_body(content_type, Bytes::from_static(body))
    }

    #[test]
    fn answers_are_read_as_upstream_reads_them() {
        let json = Some("application/json; charset=utf-8");
        assert_eq!(
            read(json, br#"{"a":1}"#).unwrap(),
            (Bytes::from_static(br#"{"a":1}"#), true)
        );
        assert_eq!(
            read(json, b"{ \"a\": 1.50 }").unwrap(),
            (Bytes::from_static(br#"{"a":1.50}"#), false),
            "made compact, numbers kept; the reply is written again"
        );
        assert_eq!(
            read(Some("text/html"), b"<html>").unwrap(),
            (Bytes::from_static(b"{}"), true)
        );
        assert_eq!(read(None, b"").unwrap().0, Bytes::from_static(b"{}"));
        let status = |error: GatewayError| match error {
            GatewayError::Refused { status, .. } => status,
            GatewayError::Store(error) => panic!("{error}"),
        };
        assert_eq!(status(read(json, b" [1]").unwrap_err()), 502);
        assert_eq!(status(read(json, b"{ oops").unwrap_err()), 502);
        // Compact text is passed on as it is: the proxy's read of it answers 502.
        assert_eq!(
            read(json, b"{oops").unwrap().0,
            Bytes::from_static(b"{oops")
        );
    }
}
