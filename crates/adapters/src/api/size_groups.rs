//! The two message size groups of the store service, decided by method in
//! one table: a payload call (writes that carry inputs, spans, resources,
//! the worker session stream) may send up to `--max-message-bytes`; every
//! other call is a control call (reads, queries, waits, dequeues,
//! heartbeats, subscriptions), held to `--max-control-message-bytes`.
//! [`BySizeGroup`] routes each call to one of two instances of the service
//! that differ only in their decode limit, so tonic refuses an oversized
//! request (after decompression, unknown fields included) before any
//! handler runs, and a new method is a control call until listed here.

use std::convert::Infallible;
use std::task::{Context, Poll};

use http::HeaderValue;
use tonic::server::NamedService;
use tower::ServiceExt as _;
use tower::util::Oneshot;

/// The store methods whose requests carry payloads.
pub const PAYLOAD_METHODS: [&str; 11] = [
    "WorkerSession",
    "StartRollout",
    "EnqueueRollout",
    "EnqueueRollouts",
    "AddSpan",
    "AddSpans",
    "UpdateRollout",
    "UpdateAttempt",
    "UpdateAttempts",
    "AddResources",
    "UpdateResources",
];

/// Returns true when the call to `path` (`/package.Service/Method`) carries payloads.
pub fn is_payload_call(path: &str) -> bool {
    path.rsplit_once('/')
        .is_some_and(|(_, method)| PAYLOAD_METHODS.contains(&method))
}

/// Routes the calls of one gRPC service to `control` or `payload` by
/// [`is_payload_call`]; both must be the same service (tonic's generated
/// servers are always ready and cheap to clone).
#[derive(Debug, Clone)]
pub struct BySizeGroup<S> {
    control: S,
    payload: S,
    /// The control limit, named in the refusal of a control call over it.
    control_limit: usize,
}

impl<S> BySizeGroup<S> {
    /// Routes between `control` (decoding at most `control_limit` bytes per
    /// message) and `payload`.
    pub fn new(control: S, payload: S, control_limit: usize) -> Self {
        Self {
            control,
            payload,
            control_limit,
        }
    }
}

impl<S: NamedService> NamedService for BySizeGroup<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, R> tower::Service<http::Request<B>> for BySizeGroup<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>, Error = Infallible> + Clone,
{
    type Response = http::Response<R>;
    type Error = Infallible;
    type Future = futures::future::MapOk<
        Oneshot<S, http::Request<B>>,
        Box<dyn FnOnce(http::Response<R>) -> http::Response<R> + Send>,
    >;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        use futures::TryFutureExt as _;
        if is_payload_call(request.uri().path()) {
            self.payload
                .clone()
                .oneshot(request)
                .map_ok(Box::new(|r| r))
        } else {
            let limit = self.control_limit;
            self.control
                .clone()
                .oneshot(request)
                .map_ok(Box::new(move |response| {
                    name_control_limit(response, limit)
                }))
        }
    }
}

/// Rewrites tonic's refusal of an oversized control request
/// (`OUT_OF_RANGE`, "decoded message length too large") as
/// `RESOURCE_EXHAUSTED` naming the control limit.
fn name_control_limit<R>(mut response: http::Response<R>, limit: usize) -> http::Response<R> {
    let headers = response.headers_mut();
    let oversized = headers.get("grpc-status").is_some_and(|code| code == "11")
        && headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| m.contains("length%20too%20large") || m.contains("length too large"));
    if oversized {
        let message =
            format!("the request is more than the control message limit of {limit} bytes")
                .replace(' ', "%20");
        headers.insert("grpc-status", HeaderValue::from_static("8"));
        if let Ok(value) = HeaderValue::from_str(&message) {
            headers.insert("grpc-message", value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightning_store_proto::FILE_DESCRIPTOR_SET;

    /// Every payload method exists (a renamed one would silently become a
    /// control call), and the rest are control calls.
    #[test]
    fn the_table_names_methods_of_the_store_service() {
        use prost::Message as _;
        let set = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
        let methods: Vec<String> = set
            .file
            .iter()
            .flat_map(|file| &file.service)
            .filter(|service| service.name() == "LightningStoreService")
            .flat_map(|service| &service.method)
            .map(|method| method.name().to_owned())
            .collect();
        for payload in PAYLOAD_METHODS {
            assert!(
                methods.iter().any(|m| m == payload),
                "{payload} is not a method"
            );
        }
        let control = methods
            .iter()
            .filter(|m| !PAYLOAD_METHODS.contains(&m.as_str()));
        assert_eq!(control.count(), methods.len() - PAYLOAD_METHODS.len());
        assert!(is_payload_call(
            "/lightningstore.v1.LightningStoreService/AddSpans"
        ));
        assert!(!is_payload_call(
            "/lightningstore.v1.LightningStoreService/QueryRollouts"
        ));
        assert!(!is_payload_call(
            "/lightningstore.v1.LightningStoreService/NewMethod"
        ));
    }
}
