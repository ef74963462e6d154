// Shared by the agl1 suite and the replicas test: each uses part of it.
#![allow(dead_code)]

//! Helpers of the agent-lightning 1.x suite: a server with the key and
//! the gateway configured, and a client of its HTTP API.

use std::time::Duration;

use bytes::Bytes;
use lightning_store::core::agl1::gateway::{GatewaySettings, RetryPolicy};
use lightning_store::gateway::GatewayConfig;
use lightning_store::server::ServerConfig;
use serde_json::{Value, json};

use crate::common::http::{HttpClient, HttpResponse, Version};
use crate::common::{Backend, TestOptions, TestServer};

/// The API key of the suite's servers.
pub const KEY: &str = "test-key";

/// The model the suite's gateways serve.
pub const MODEL: &str = "test-model";

/// Gateway settings for tests: quick timeouts and retries.
pub fn gateway_config() -> GatewayConfig {
    GatewayConfig {
        settings: Some(GatewaySettings::for_model(MODEL)),
        upstream_timeout: Duration::from_millis(300),
        retry: RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(5),
            cap: Duration::from_millis(20),
        },
        heartbeat: Duration::from_millis(100),
        stale_after: Duration::from_secs(2),
    }
}

/// Starts a server on `backend` with the key and the gateway configured.
pub async fn start(backend: Backend) -> TestServer {
    start_with(backend, |_| {}).await
}

/// Starts a server after `adjust` changed its settings.
pub async fn start_with(backend: Backend, adjust: impl FnOnce(&mut TestOptions)) -> TestServer {
    let mut options = TestOptions {
        config: ServerConfig {
            tokens: lightning_store::auth::Tokens::load(None, Some(KEY)).unwrap(),
            gateway: gateway_config(),
            ..ServerConfig::default()
        },
        ..TestOptions::default()
    };
    adjust(&mut options);
    TestServer::start_opts(backend, options).await
}

/// A client of the 1.x API that sends the key.
#[derive(Clone)]
pub struct Api {
    pub http: HttpClient,
}

impl Api {
    /// Returns a client of `server`.
    pub fn new(server: &TestServer) -> Self {
        Self {
            http: HttpClient::new(server.addr, Version::Http1),
        }
    }

    /// Sends a request with the key and optional extra headers.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> HttpResponse {
        let auth = format!("Bearer {KEY}");
        let mut all = vec![("authorization", auth.as_str())];
        all.extend_from_slice(headers);
        self.http.request(method, path, &all, body).await
    }

    /// Sends a JSON body.
    pub async fn json(&self, method: &str, path: &str, body: &Value) -> HttpResponse {
        self.send(
            method,
            path,
            &[("content-type", "application/json")],
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    pub async fn get(&self, path: &str) -> HttpResponse {
        self.send("GET", path, &[], Bytes::new()).await
    }

    /// Creates rollouts and returns their bodies.
    pub async fn create(&self, items: Value) -> Vec<Value> {
        let response = self.json("POST", "/api/rollouts", &items).await;
        assert_eq!(response.status, 201, "{}", response.text());
        response.json().as_array().unwrap().clone()
    }

    /// Creates one rollout with `id` and `input`.
    pub async fn create_one(&self, id: &str, input: Value) -> Value {
        self.create(json!([{"rollout_id": id, "input": input}]))
            .await
            .remove(0)
    }

    /// PATCHes a rollout's status; returns the response.
    pub async fn patch(&self, id: &str, status: Value) -> HttpResponse {
        self.json(
            "PATCH",
            &format!("/api/rollouts/{id}"),
            &json!({"status": status}),
        )
        .await
    }

    /// Moves a rollout to `state` (must succeed); returns the rollout.
    pub async fn set_state(&self, id: &str, state: &str) -> Value {
        let response = self.patch(id, json!({"state": state})).await;
        assert_eq!(response.status, 200, "{}", response.text());
        response.json()
    }

    /// Posts an event; returns the response.
    pub async fn post_event(
        &self,
        id: &str,
        attempt: &str,
        event_type: &str,
        data: Value,
    ) -> HttpResponse {
        self.json(
            "POST",
            &format!("/api/rollouts/{id}/attempt/{attempt}/events"),
            &json!({"event_type": event_type, "data": data}),
        )
        .await
    }

    /// Records an event of attempt "0", which must be accepted.
    pub async fn record(&self, id: &str, event_type: &str, data: Value) {
        let posted = self.post_event(id, "0", event_type, data).await;
        assert_eq!(posted.status, 200, "{}", posted.text());
    }

    /// Reads a rollout's events with a query string.
    pub async fn events(&self, id: &str, query: &str) -> Vec<Value> {
        let response = self.get(&format!("/api/rollouts/{id}/events{query}")).await;
        assert_eq!(response.status, 200, "{}", response.text());
        response.json().as_array().unwrap().clone()
    }

    /// Reads a rollout (`{"rollout", "attempts"}`).
    pub async fn rollout(&self, id: &str) -> Value {
        let response = self.get(&format!("/api/rollouts/{id}")).await;
        assert_eq!(response.status, 200, "{}", response.text());
        response.json()
    }

    /// Registers model servers.
    pub async fn register(&self, endpoints: &[String]) {
        let models: Vec<Value> = endpoints
            .iter()
            .map(|e| json!({"model": MODEL, "endpoint": e}))
            .collect();
        let response = self.json("POST", "/api/models", &json!(models)).await;
        assert_eq!(response.status, 201, "{}", response.text());
    }

    /// Calls the gateway's chat completions for (rollout, attempt, mode).
    pub async fn chat(&self, id: &str, mode: &str, body: &Value) -> HttpResponse {
        self.json(
            "POST",
            &format!("/proxy/rollout/{id}/attempt/0/mode/{mode}/openai/v1/chat/completions"),
            body,
        )
        .await
    }
}

/// A chat request whose last message is `content`.
pub fn chat_body(content: &str) -> Value {
    json!({"model": "whatever", "messages": [{"role": "user", "content": content}], "temperature": 0.2})
}

/// Returns `detail` of an error body.
pub fn detail(response: &HttpResponse) -> Value {
    response.json()["detail"].clone()
}

/// A gRPC store client that sends the key.
pub type Grpc = lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient<
    tonic::service::interceptor::InterceptedService<
        tonic::transport::Channel,
        fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status>,
    >,
>;

fn add_key(mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    let value = format!("Bearer {KEY}")
        .parse()
        .expect("a valid header value");
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

/// The ids of the rollouts whose first model call `version` served, in
/// order.
pub async fn rollouts_of_model_version(grpc: &mut Grpc, version: i64) -> Vec<String> {
    let request = lightning_store::proto::QueryRolloutsRequest {
        model_version: Some(version),
        ..Default::default()
    };
    listed_ids(grpc, request).await
}

/// The ids of the rollouts `request` lists, in order.
pub async fn listed_ids(
    grpc: &mut Grpc,
    request: lightning_store::proto::QueryRolloutsRequest,
) -> Vec<String> {
    let listed = grpc.query_rollouts(request).await.unwrap().into_inner();
    let mut ids: Vec<String> = listed.rollouts.into_iter().map(|r| r.rollout_id).collect();
    ids.sort();
    ids
}

/// Returns a gRPC client of `server` that sends the key.
pub async fn grpc(server: &TestServer) -> Grpc {
    let interceptor: fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> = add_key;
    lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient::with_interceptor(
        server.channel().await,
        interceptor,
    )
}
