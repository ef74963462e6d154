//! Observes every call on the port, gRPC or HTTP: a tower layer gives the
//! call a request id (the client's `x-request-id`, or a new one, echoed in
//! the response headers), runs it inside a `grpc` or `http` tracing span
//! carrying that id, and when the call ends (a gRPC status is sent, an HTTP
//! response starts, or the client goes away) writes one log line and
//! records it in [`Metrics`]. HTTP requests are labelled by the route
//! template their adapter reports ([`MatchedRoute`]), gRPC calls by their
//! method when the server serves it ([`KnownMethods`]), never by raw paths.
//! A call dropped before it ends (the client went away) is finished as
//! `CANCELLED`, so in-flight gauges return to zero.
//!
//! Every response also carries the server's time on the call in a W3C
//! `Server-Timing` header (`app;dur=` milliseconds, from the request's
//! arrival here until its response starts: for a unary gRPC call, until the
//! handler answered), so that a client tells the server's time from the
//! network's (`lightning-store bench read-model` reports it).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use prost::Message as _;
use tracing::Instrument;

use crate::api::status::blame_undecodable_in_headers;
use crate::metrics::{HttpLabels, MethodLabels, MethodMetrics, Metrics};
use crate::namespace_layer::NamedNamespace;
use crate::transport::is_grpc;
use lightning_store_proto::code_name;

/// The request and response header carrying the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The response header carrying the server's time on the call.
pub const SERVER_TIMING_HEADER: &str = "server-timing";

/// Longest client-supplied request id that is kept.
const MAX_REQUEST_ID_LEN: usize = 128;

/// Route label of an HTTP request that matched no route.
const UNMATCHED_ROUTE: &str = "unmatched";

/// Service and method label of a gRPC call to a method the server does not serve.
const UNKNOWN_METHOD: &str = "unknown";

/// The gRPC methods the server serves, as `package.Service/Method`: calls to
/// any other path share the label `unknown`, so clients cannot grow the
/// label set.
#[derive(Debug, Clone, Default)]
pub struct KnownMethods(Arc<HashSet<String>>);

impl KnownMethods {
    /// Returns the methods of `services` (fully qualified names) declared in
    /// the encoded descriptor sets (those compiled into the binary; one that
    /// does not decode declares nothing).
    pub fn from_descriptor_sets(sets: &[&[u8]], services: &[&str]) -> Self {
        let mut known = HashSet::new();
        for set in sets {
            let Ok(set) = prost_types::FileDescriptorSet::decode(*set) else {
                continue;
            };
            for file in &set.file {
                for service in &file.service {
                    let name = format!("{}.{}", file.package(), service.name());
                    if services.contains(&name.as_str()) {
                        for method in &service.method {
                            known.insert(format!("{name}/{}", method.name()));
                        }
                    }
                }
            }
        }
        Self(Arc::new(known))
    }

    /// Returns the path of every known method (`/package.Service/Method`).
    pub fn paths(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|name| format!("/{name}"))
    }

    /// Returns the call metrics of each known method by path
    /// (`/package.Service/Method`), and those of every other path.
    fn metrics(&self, metrics: &Metrics) -> MethodTable {
        let by_path = self
            .0
            .iter()
            .map(|name| {
                let (service, method) = name.split_once('/').unwrap_or((name, ""));
                let labels = MethodLabels {
                    service: service.to_owned(),
                    method: method.to_owned(),
                };
                (format!("/{name}"), Arc::new(metrics.method(labels)))
            })
            .collect();
        let unknown = MethodLabels {
            service: UNKNOWN_METHOD.to_owned(),
            method: UNKNOWN_METHOD.to_owned(),
        };
        MethodTable {
            by_path: Arc::new(by_path),
            unknown: Arc::new(metrics.method(unknown)),
        }
    }
}

/// The call metrics of the served methods, looked up by request path.
#[derive(Debug, Clone)]
struct MethodTable {
    by_path: Arc<HashMap<String, Arc<MethodMetrics>>>,
    unknown: Arc<MethodMetrics>,
}

impl MethodTable {
    /// Returns the metrics of a call to `path`: those of its method when
    /// the server serves it, else the shared `unknown` ones.
    fn get(&self, path: &str) -> &Arc<MethodMetrics> {
        self.by_path.get(path).unwrap_or(&self.unknown)
    }
}

/// The route template an HTTP request matched (e.g.
/// `/v1/agl/rollouts/{rollout_id}`), put in the response's extensions by the
/// HTTP router so that calls are labelled without raw paths.
#[derive(Debug, Clone)]
pub struct MatchedRoute(pub axum::extract::MatchedPath);

/// A tower layer that observes every call (see the module docs).
#[derive(Debug, Clone)]
pub struct CallLayer {
    metrics: Metrics,
    methods: MethodTable,
}

impl CallLayer {
    /// Creates the layer, recording into `metrics` the calls to `methods`
    /// by name and any other call as `unknown`.
    pub fn new(metrics: Metrics, methods: &KnownMethods) -> Self {
        let methods = methods.metrics(&metrics);
        Self { metrics, methods }
    }
}

impl<S> tower::Layer<S> for CallLayer {
    type Service = CallService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallService {
            inner,
            metrics: self.metrics.clone(),
            methods: self.methods.clone(),
        }
    }
}

/// The future of an observed call.
pub type CallFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<http::Response<ObservedBody<B>>, E>> + Send>>;

/// The service of [`CallLayer`].
#[derive(Debug, Clone)]
pub struct CallService<S> {
    inner: S,
    metrics: Metrics,
    methods: MethodTable,
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for CallService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<ObservedBody<ResBody>>;
    type Error = S::Error;
    type Future = CallFuture<ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let request_id = request_id(request.headers());
        if !is_grpc(request.headers()) {
            return self.call_http(request, request_id);
        }
        let method = self.methods.get(request.uri().path()).clone();
        let labels = method.labels();
        let span = tracing::info_span!(
            "grpc",
            request_id = %request_id,
            method = %format_args!("{}/{}", labels.service, labels.method),
            namespace = tracing::field::Empty,
        );
        record_namespace(&span, request.extensions());
        let call = Call {
            method,
            started: Instant::now(),
            span: span.clone(),
            finished: false,
        };
        call.method.call_started();
        let future = self.inner.call(request).instrument(span);
        Box::pin(async move {
            let mut response = future.await?;
            let headers = response.headers_mut();
            headers.insert(SERVER_TIMING_HEADER, server_timing(call.started));
            if let Ok(value) = request_id_value(&request_id) {
                headers.insert(REQUEST_ID_HEADER, value);
            }
            // A status in the headers is a trailers-only response: the call
            // ends here. Otherwise it ends with the body's trailers.
            let call = match blame_undecodable_in_headers(response.headers_mut()) {
                Some(status) => {
                    call.finish(&status);
                    None
                }
                None => Some(call),
            };
            Ok(response.map(|inner| ObservedBody { inner, call }))
        })
    }
}

/// Records in a call's log the namespace it names, when it names one
/// that follows the rule (a call that names none is in `default`).
fn record_namespace(span: &tracing::Span, extensions: &http::Extensions) {
    if let Some(NamedNamespace(Ok(name))) = extensions.get::<NamedNamespace>() {
        span.record("namespace", name.as_str());
    }
}

impl<S> CallService<S> {
    /// Observes a plain HTTP request: finished when its response starts.
    fn call_http<ReqBody, ResBody>(
        &mut self,
        request: http::Request<ReqBody>,
        request_id: String,
    ) -> CallFuture<ResBody, S::Error>
    where
        S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
        S::Future: Send + 'static,
    {
        let span = tracing::info_span!(
            "http",
            request_id = %request_id,
            method = %request.method(),
            path = %request.uri().path(),
            namespace = tracing::field::Empty,
        );
        record_namespace(&span, request.extensions());
        let method = method_label(request.method());
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let future = self.inner.call(request).instrument(span.clone());
        Box::pin(async move {
            let mut response = future.await?;
            let headers = response.headers_mut();
            headers.insert(SERVER_TIMING_HEADER, server_timing(started));
            if let Ok(value) = request_id_value(&request_id) {
                headers.insert(REQUEST_ID_HEADER, value);
            }
            let route = response
                .extensions()
                .get::<MatchedRoute>()
                .map_or(UNMATCHED_ROUTE, |route| route.0.as_str());
            let labels = HttpLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status: response.status().as_u16().to_string(),
            };
            let elapsed = started.elapsed();
            metrics.http_request_finished(&labels, elapsed);
            let _entered = span.enter();
            let status = response.status().as_u16();
            let duration_ms = elapsed.as_secs_f64() * 1e3;
            match status {
                500.. => tracing::warn!(status, route, duration_ms, "request failed"),
                400..500 => tracing::info!(status, route, duration_ms, "request refused"),
                _ => tracing::debug!(status, route, duration_ms, "request finished"),
            }
            drop(_entered);
            Ok(response.map(|inner| ObservedBody { inner, call: None }))
        })
    }
}

/// Returns an HTTP method's metric label; methods outside the standard set
/// share one label, so clients cannot grow the label set.
fn method_label(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::PATCH => "PATCH",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Returns the client's request id when it is safe to log, else a new one.
/// Safe ids are 1 to [`MAX_REQUEST_ID_LEN`] bytes of letters, digits and
/// `-_.:/+=@`: the text log format writes the id unquoted, so a space, a
/// quote or a control character could forge fields or lines.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(REQUEST_ID_HEADER)
        .map(HeaderValue::as_bytes)
        .filter(|id| {
            !id.is_empty()
                && id.len() <= MAX_REQUEST_ID_LEN
                && id
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b"-_.:/+=@".contains(&b))
        })
        .map_or_else(
            new_request_id,
            // Only ASCII passed the filter.
            |id| String::from_utf8_lossy(id).into_owned(),
        )
}

/// Returns the `Server-Timing` value of a call that arrived at `started`,
/// marked sensitive as a request id is (it differs on every response).
fn server_timing(started: Instant) -> HeaderValue {
    let millis = started.elapsed().as_secs_f64() * 1e3;
    let mut value = HeaderValue::from_str(&format!("app;dur={millis:.3}")).expect("ASCII digits");
    value.set_sensitive(true);
    value
}

/// Returns the response header of a request id, marked sensitive: HTTP/2
/// then sends it as a literal never indexed. Every id is new, so indexing
/// it would only push the headers every response repeats (content type,
/// status) out of the connection's HPACK table, to be sent again in full.
fn request_id_value(request_id: &str) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let mut value = HeaderValue::from_str(request_id)?;
    value.set_sensitive(true);
    Ok(value)
}

/// Returns a new request id: a random UUID's 32 hex digits (drawn from a
/// thread-local generator seeded once, uuid's `fast-rng`: no `getrandom`
/// system call per call).
fn new_request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A call in progress, finished exactly once: by its status, or as
/// `CANCELLED` when it is dropped first (the client went away before the
/// response started, or before its trailers).
#[derive(Debug)]
struct Call {
    method: Arc<MethodMetrics>,
    started: Instant,
    span: tracing::Span,
    finished: bool,
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.finished {
            self.record(&tonic::Status::cancelled("the client went away"));
        }
    }
}

impl Call {
    /// Finishes the call with `status`.
    fn finish(mut self, status: &tonic::Status) {
        self.record(status);
        self.finished = true;
    }

    /// Logs the call's one line and records it in the metrics.
    fn record(&self, status: &tonic::Status) {
        let elapsed = self.started.elapsed();
        self.method.call_finished(status.code(), elapsed);
        let _entered = self.span.enter();
        let code = code_name(status.code());
        let duration_ms = elapsed.as_secs_f64() * 1e3;
        let error = status.message();
        match status.code() {
            tonic::Code::Ok => tracing::debug!(code, duration_ms, "call finished"),
            tonic::Code::Internal | tonic::Code::Unknown | tonic::Code::DataLoss => {
                tracing::warn!(code, duration_ms, error, "call failed")
            }
            _ => tracing::info!(code, duration_ms, error, "call failed"),
        }
    }
}

pin_project! {
    /// A response body that finishes its [`Call`] when the trailers pass
    /// through or, if they never do, when the body is dropped (the client
    /// cancelled or went away: the call's own drop finishes it).
    pub struct ObservedBody<B> {
        #[pin]
        inner: B,
        call: Option<Call>,
    }
}

impl<B> Body for ObservedBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        let _entered = this.call.as_ref().map(|call| call.span.enter());
        let mut frame = this.inner.poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &mut frame
            && let Some(trailers) = frame.trailers_mut()
        {
            drop(_entered);
            let status = blame_undecodable_in_headers(trailers)
                .unwrap_or_else(|| tonic::Status::unknown("trailers without grpc-status"));
            if let Some(call) = this.call.take() {
                call.finish(&status);
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_usable_client_request_ids_only() {
        let mut headers = HeaderMap::new();
        headers.insert(REQUEST_ID_HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(request_id(&headers), "abc-123");
        headers.insert(
            REQUEST_ID_HEADER,
            HeaderValue::from_str(&"x".repeat(MAX_REQUEST_ID_LEN + 1)).unwrap(),
        );
        let generated = request_id(&headers);
        assert_eq!(generated.len(), 32);
        for unsafe_id in ["a b", "a\tb", "a\"b", "a,b"] {
            headers.insert(REQUEST_ID_HEADER, HeaderValue::from_str(unsafe_id).unwrap());
            assert_eq!(request_id(&headers).len(), 32, "{unsafe_id:?}");
        }
        headers.insert(
            REQUEST_ID_HEADER,
            HeaderValue::from_bytes(b"caf\xe9").unwrap(),
        );
        assert_eq!(request_id(&headers).len(), 32);
        assert_ne!(generated, request_id(&HeaderMap::new()));
    }

    #[test]
    fn unusual_http_methods_share_one_label() {
        assert_eq!(method_label(&http::Method::POST), "POST");
        assert_eq!(
            method_label(&http::Method::from_bytes(b"BREW").unwrap()),
            "other"
        );
    }

    #[test]
    fn labels_served_methods_by_name_and_anything_else_as_unknown() {
        let store = "lightningstore.v1.LightningStoreService";
        let methods = KnownMethods::from_descriptor_sets(
            &[lightning_store_proto::FILE_DESCRIPTOR_SET],
            &[store],
        );
        let methods = methods.metrics(&Metrics::new());
        let labels = methods.get(&format!("/{store}/EnqueueRollout")).labels();
        assert_eq!(labels.service, store);
        assert_eq!(labels.method, "EnqueueRollout");
        for path in [
            "/",
            "",
            &format!("/{store}/NoSuchMethod"),
            "/x.Y/EnqueueRollout",
        ] {
            let labels = methods.get(path).labels();
            assert_eq!(
                (labels.service.as_str(), labels.method.as_str()),
                ("unknown", "unknown")
            );
        }
    }
}
