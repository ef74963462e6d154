//! A fake OpenAI-compatible model server on loopback for the gateway
//! tests: deterministic token ids derived from the prompt, log-probs,
//! and failure modes chosen by the last message's content:
//! * `hang`: never answers (until the call is dropped);
//! * `garbage`: a JSON content type with a body that is not JSON;
//! * `flaky`: 503 for the first two calls of that prompt, then an answer;
//! * `teapot`: a 418 answer with an error body (not retried);
//! * `html`: a 200 with an HTML body.
//!
//! It records every request body it got, counts calls started and calls
//! dropped before they answered (the gateway cancelled them), and can
//! gate its answers (`hold`) until released.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

/// What the fake server saw.
#[derive(Default)]
pub struct Seen {
    /// Request bodies, in arrival order.
    pub requests: parking_lot::Mutex<Vec<Value>>,
    /// Calls per prompt text (for `flaky`).
    calls: parking_lot::Mutex<HashMap<String, usize>>,
    pub started: AtomicUsize,
    /// Calls dropped before they answered.
    pub cancelled: AtomicUsize,
    /// Wakes whoever waits for calls to start or be cancelled.
    pub changed: Notify,
    /// While true, answers wait for `release`.
    held: parking_lot::Mutex<bool>,
    release: Notify,
}

impl Seen {
    /// Waits until `counter` reaches `n`.
    pub async fn wait_until(&self, counter: &AtomicUsize, n: usize) {
        loop {
            let notified = self.changed.notified();
            if counter.load(Ordering::SeqCst) >= n {
                return;
            }
            notified.await;
        }
    }

    /// Makes answers wait until [`Seen::release`].
    pub fn hold(&self) {
        *self.held.lock() = true;
    }

    /// Lets held answers (and later ones) go.
    pub fn release(&self) {
        *self.held.lock() = false;
        self.release.notify_waiters();
    }
}

/// A running fake model server.
pub struct ModelServer {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    stop: Option<oneshot::Sender<()>>,
}

impl ModelServer {
    /// Starts the server on a free loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let app = Router::new()
            .route("/v1/{*path}", post(answer))
            .with_state(seen.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            seen,
            stop: Some(stop),
        }
    }

    /// The OpenAI base URL to register as a model endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Returns the token ids of a text: one per byte.
pub fn token_ids(text: &str) -> Vec<i64> {
    text.bytes().map(i64::from).collect()
}

/// The prompt of a request (the chat messages' contents, concatenated,
/// so that a conversation's next prompt extends the previous prompt and
/// reply) and its last message.
fn prompt_of(body: &Value) -> (String, String) {
    match body.get("messages").and_then(Value::as_array) {
        Some(messages) => {
            let contents: Vec<&str> = messages
                .iter()
                .filter_map(|m| m.get("content").and_then(Value::as_str))
                .collect();
            let last = contents.last().copied().unwrap_or_default().to_owned();
            (contents.concat(), last)
        }
        None => {
            let prompt = body
                .get("prompt")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (prompt.to_owned(), prompt.to_owned())
        }
    }
}

/// Counts a call as cancelled when dropped before it answered.
struct Call(Arc<Seen>, bool);

impl Drop for Call {
    fn drop(&mut self) {
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
            self.0.changed.notify_waiters();
        }
    }
}

async fn answer(State(seen): State<Arc<Seen>>, Path(path): Path<String>, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    seen.requests.lock().push(body.clone());
    seen.started.fetch_add(1, Ordering::SeqCst);
    seen.changed.notify_waiters();
    let mut call = Call(seen.clone(), false);
    loop {
        let released = seen.release.notified();
        if !*seen.held.lock() {
            break;
        }
        released.await;
    }
    let (prompt, last) = prompt_of(&body);
    let response = match last.as_str() {
        "hang" => std::future::pending::<Response>().await,
        "garbage" => ([("content-type", "application/json")], "{not json").into_response(),
        "teapot" => (
            http::StatusCode::IM_A_TEAPOT,
            [("content-type", "application/json")],
            json!({"error": {"message": "short and stout"}}).to_string(),
        )
            .into_response(),
        "html" => ([("content-type", "text/html")], "<html></html>").into_response(),
        "flaky"
            if {
                let mut calls = seen.calls.lock();
                let count = calls.entry(prompt.clone()).or_default();
                *count += 1;
                *count <= 2
            } =>
        {
            (http::StatusCode::SERVICE_UNAVAILABLE, "busy").into_response()
        }
        _ => (
            [("content-type", "application/json")],
            completion(&path, &body, &prompt).to_string(),
        )
            .into_response(),
    };
    call.1 = true;
    response
}

/// An answer in the shape vLLM gives with `return_token_ids`.
fn completion(path: &str, body: &Value, prompt: &str) -> Value {
    let prompt_ids = token_ids(prompt);
    let reply = format!("re:{}", prompt.len());
    let reply_ids = token_ids(&reply);
    let log_probs: Vec<Value> = reply_ids
        .iter()
        .map(|_| json!({"logprob": -0.25}))
        .collect();
    let mut choice = if path == "chat/completions" {
        json!({
            "index": 0,
            "message": {"role": "assistant", "content": reply},
            "finish_reason": "stop",
            "token_ids": reply_ids,
            "logprobs": {"content": log_probs},
        })
    } else {
        json!({
            "index": 0,
            "text": reply,
            "finish_reason": "stop",
            "prompt_token_ids": prompt_ids,
            "token_ids": reply_ids,
            "logprobs": {"token_logprobs": reply_ids.iter().map(|_| -0.25).collect::<Vec<_>>()},
        })
    };
    if body.get("return_routed_experts") == Some(&Value::Bool(true)) {
        choice["routed_experts"] = json!([[prompt.len() as i64, 1], [2, 3]]);
    }
    let mut answer = json!({
        "id": "cmpl-1",
        "object": if path == "chat/completions" { "chat.completion" } else { "text_completion" },
        "model": body.get("model").cloned().unwrap_or(Value::Null),
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_ids.len(), "completion_tokens": reply_ids.len(),
                  "total_tokens": prompt_ids.len() + reply_ids.len()},
    });
    if path == "chat/completions" {
        answer["prompt_token_ids"] = json!(prompt_ids);
    }
    answer
}
