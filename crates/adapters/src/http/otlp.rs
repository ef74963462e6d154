//! OTLP/HTTP: `POST /v1/traces` per the OTLP specification, over the same
//! receiver as OTLP/gRPC ([`crate::otlp::TraceIngest`]). Bodies are binary
//! protobuf (`application/x-protobuf`, what agent-lightning's tracer sends)
//! or OTLP/JSON (`application/json`), optionally gzipped; the answer uses the
//! request's encoding (gzipped when the client accepts it) and carries
//! `partial_success` for spans that could not be stored. Errors carry a
//! `google.rpc.Status`: 400 for a malformed payload, 413 beyond the size
//! limit (also after decompression), 415 for another content type, 503
//! with `Retry-After` while the receiver is saturated or the store is
//! unavailable. `/v1/metrics`, `/v1/logs` and `/v1/development/profiles`
//! answer 501, as upstream's server does.

use std::io::Read as _;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message as _;

use super::context::HttpContext;
use super::extract::read_body;
use super::routes::Routes;
use crate::auth::policy::Permission;
use crate::otlp::RETRY_DELAY;
use lightning_store_core::error::{StoreError, echo};

/// Returns the OTLP/HTTP routes: trace export, and the other signals
/// answered 501.
pub fn routes() -> Routes {
    let ingest = Permission::Ingest;
    Routes::new()
        .post("/v1/traces", ingest, export_traces)
        .post("/v1/metrics", ingest, not_implemented)
        .post("/v1/logs", ingest, not_implemented)
        .post("/v1/development/profiles", ingest, not_implemented)
}

async fn not_implemented() -> StatusCode {
    StatusCode::NOT_IMPLEMENTED
}

/// The two encodings of OTLP/HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

/// An OTLP/HTTP answer: a message in the request's encoding, gzipped when
/// the client accepts gzip.
struct OtlpResponse {
    status: StatusCode,
    encoding: Encoding,
    gzip: bool,
    body: Vec<u8>,
    retry_after: bool,
}

impl OtlpResponse {
    /// Returns an error answer carrying a `google.rpc.Status` with `message`.
    fn error(status: StatusCode, encoding: Encoding, gzip: bool, message: String) -> Self {
        let code = match status {
            StatusCode::BAD_REQUEST | StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                tonic::Code::InvalidArgument
            }
            StatusCode::PAYLOAD_TOO_LARGE => tonic::Code::ResourceExhausted,
            StatusCode::SERVICE_UNAVAILABLE => tonic::Code::Unavailable,
            _ => tonic::Code::Internal,
        };
        let body = match encoding {
            Encoding::Protobuf => tonic_types::Status {
                code: code as i32,
                message,
                details: Vec::new(),
            }
            .encode_to_vec(),
            Encoding::Json => {
                serde_json::to_vec(&serde_json::json!({"code": code as i32, "message": message}))
                    .expect("a status serialises")
            }
        };
        Self {
            status,
            encoding,
            gzip,
            body,
            retry_after: status == StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for OtlpResponse {
    fn into_response(self) -> Response {
        let body = if self.gzip {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut encoder, &self.body)
                .and_then(|()| encoder.finish())
                .unwrap_or(self.body)
        } else {
            self.body
        };
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.encoding.content_type()),
        );
        if self.gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        if self.retry_after {
            let seconds = RETRY_DELAY.as_secs().max(1);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// Returns true when `Accept-Encoding` lists gzip.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    header_text(headers, header::ACCEPT_ENCODING)
        .split(',')
        .filter_map(|token| token.split(';').next())
        .any(|token| token.trim().eq_ignore_ascii_case("gzip"))
}

/// Decompresses a gzipped body, refusing more than `limit` bytes of output.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, (StatusCode, String)> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("invalid gzip body: {e}")))?;
    if out.len() > limit {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("decompressed body is larger than {limit} bytes"),
        ));
    }
    Ok(out)
}

fn decode(encoding: Encoding, body: &[u8]) -> Result<ExportTraceServiceRequest, String> {
    match encoding {
        Encoding::Protobuf => ExportTraceServiceRequest::decode(body)
            .map_err(|e| format!("Unable to parse OTLP traces payload: {e}")),
        Encoding::Json if body.is_empty() => Ok(ExportTraceServiceRequest::default()),
        Encoding::Json => crate::otlp::json::decode_export(body)
            .map_err(|e| format!("Unable to parse OTLP traces payload: {e}")),
    }
}

/// Renders a response in OTLP/JSON: fields at their defaults are left out
/// (a full success is `{}`) and 64-bit integers are strings.
fn json_response(response: &ExportTraceServiceResponse) -> Vec<u8> {
    let body = match &response.partial_success {
        None => serde_json::json!({}),
        Some(partial) => serde_json::json!({
            "partialSuccess": {
                "rejectedSpans": partial.rejected_spans.to_string(),
                "errorMessage": partial.error_message,
            }
        }),
    };
    serde_json::to_vec(&body).expect("a response serialises")
}

/// `POST /v1/traces`.
async fn export_traces(context: HttpContext, headers: HeaderMap, body: Body) -> OtlpResponse {
    let gzip = accepts_gzip(&headers);
    let media_type = header_text(&headers, header::CONTENT_TYPE)
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let encoding = match media_type.as_str() {
        "application/x-protobuf" => Encoding::Protobuf,
        "application/json" => Encoding::Json,
        other => {
            return OtlpResponse::error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Encoding::Protobuf,
                gzip,
                format!(
                    "Unsupported Content-Type '{other}', expected 'application/x-protobuf' or 'application/json'"
                ),
            );
        }
    };
    let fail = |status, message| OtlpResponse::error(status, encoding, gzip, message);
    // Admitted before the body is read: saturation costs no decoding.
    let Some(admitted) = context.trace_ingest.try_admit() else {
        return fail(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many exports in flight, retry later".to_owned(),
        );
    };
    let raw: Bytes = match read_body(body, context.max_body_bytes).await {
        Ok(raw) => raw,
        Err(error) => {
            return fail(
                error.status(),
                "request body too large or unreadable".to_owned(),
            );
        }
    };
    let content_encoding = header_text(&headers, header::CONTENT_ENCODING).trim();
    let payload = if content_encoding.eq_ignore_ascii_case("gzip") {
        match gunzip(&raw, context.max_body_bytes) {
            Ok(payload) => Bytes::from(payload),
            Err((status, message)) => return fail(status, message),
        }
    } else if content_encoding.is_empty() || content_encoding.eq_ignore_ascii_case("identity") {
        raw
    } else {
        return fail(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Unsupported Content-Encoding '{}'", echo(content_encoding)),
        );
    };
    let request = match decode(encoding, &payload) {
        Ok(request) => request,
        Err(message) => return fail(StatusCode::BAD_REQUEST, message),
    };
    match admitted.export(request).await {
        Ok(response) => {
            let body = match encoding {
                Encoding::Protobuf => response.encode_to_vec(),
                Encoding::Json => json_response(&response),
            };
            OtlpResponse {
                status: StatusCode::OK,
                encoding,
                gzip,
                body,
                retry_after: false,
            }
        }
        Err(StoreError::Unavailable(message)) => fail(StatusCode::SERVICE_UNAVAILABLE, message),
        Err(error) => {
            tracing::error!(%error, "otlp export failed");
            fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error".to_owned(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_bodies_are_limited_after_decompression() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut encoder, &vec![0u8; 10_000]).unwrap();
        let compressed = encoder.finish().unwrap();
        assert_eq!(gunzip(&compressed, 10_000).unwrap().len(), 10_000);
        assert_eq!(
            gunzip(&compressed, 9_999).unwrap_err().0,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(gunzip(b"nope", 10).unwrap_err().0, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn otlp_json_uses_hex_ids_and_string_integers() {
        let body = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"agentlightning.rollout_id","value":{"stringValue":"ro-1"}}]},
            "scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",
            "name":"n","kind":2,"startTimeUnixNano":"1544712660000000000","attributes":[{"key":"n","value":{"intValue":"42"}}]}]}]}]}"#;
        let request = decode(Encoding::Json, body).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.trace_id.len(), 16);
        assert_eq!(span.span_id[0], 0xee);
        assert_eq!(span.start_time_unix_nano, 1_544_712_660_000_000_000);
        assert!(decode(Encoding::Protobuf, b"\xff\xff").is_err());
    }

    #[test]
    fn gzip_is_accepted_when_listed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            "deflate, GZip;q=0.5".parse().unwrap(),
        );
        assert!(accepts_gzip(&headers));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
