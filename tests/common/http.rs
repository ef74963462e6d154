//! A plain HTTP client for the tests: HTTP/1.1 or h2c (prior knowledge) to
//! the server's one port, whole responses.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Which HTTP version a [`HttpClient`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http1,
    /// HTTP/2 over cleartext, with prior knowledge.
    H2c,
}

/// A whole HTTP response.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// The trailers (gRPC's status of a streamed response), if any.
    pub trailers: Option<http::HeaderMap>,
}

impl HttpResponse {
    /// Parses the body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Returns the gRPC status, from the headers of a trailers-only
    /// response or else from the trailers.
    pub fn grpc_status(&self) -> tonic::Status {
        tonic::Status::from_header_map(&self.headers)
            .or_else(|| {
                self.trailers
                    .as_ref()
                    .and_then(tonic::Status::from_header_map)
            })
            .unwrap_or_else(|| panic!("no grpc-status in {self:?}"))
    }

    /// Returns the body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// An HTTP client bound to one server.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

impl HttpClient {
    /// Returns a client of the server at `addr`.
    pub fn new(addr: SocketAddr, version: Version) -> Self {
        let mut builder = Client::builder(TokioExecutor::new());
        if version == Version::H2c {
            builder.http2_only(true);
        }
        Self {
            client: builder.build(HttpConnector::new()),
            base: format!("http://{addr}"),
        }
    }

    /// Sends a request with optional headers and body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> HttpResponse {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self
            .client
            .request(request.body(Full::new(body.into())).unwrap())
            .await
            .unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let collected = response.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned();
        HttpResponse {
            status,
            headers,
            body: collected.to_bytes(),
            trailers,
        }
    }

    /// Sends a GET; `None` when the server cannot be reached.
    pub async fn try_get(&self, path: &str) -> Option<HttpResponse> {
        let request = http::Request::get(format!("{}{path}", self.base))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = self.client.request(request).await.ok()?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let collected = response.into_body().collect().await.ok()?;
        let trailers = collected.trailers().cloned();
        Some(HttpResponse {
            status,
            headers,
            body: collected.to_bytes(),
            trailers,
        })
    }

    /// Sends a GET.
    pub async fn get(&self, path: &str) -> HttpResponse {
        self.request("GET", path, &[], Bytes::new()).await
    }

    /// Sends a POST with a JSON body.
    pub async fn post_json(&self, path: &str, body: &serde_json::Value) -> HttpResponse {
        self.request(
            "POST",
            path,
            &[("content-type", "application/json")],
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }
}
