//! The HTTP side of the benchmark: one HTTP/1.1 keep-alive connection per
//! client task (as `wrk -c N` keeps N connections), and an
//! OpenAI-compatible model server that answers at once, for the gateway
//! scenario.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::error::{BenchError, BenchResult};
use super::limits::CALL_TIMEOUT;

/// One keep-alive HTTP/1.1 connection to a server.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    authority: String,
    key: Option<String>,
}

/// A whole answer.
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl Connection {
    /// Connects to the server at `url` (`http://host:port`), sending `key`
    /// as a bearer token when given.
    pub async fn open(url: &str, key: Option<&str>) -> BenchResult<Self> {
        let authority = url
            .strip_prefix("http://")
            .ok_or_else(|| BenchError::new(format!("expected an http:// url, got {url}")))?
            .trim_end_matches('/')
            .to_owned();
        let stream = tokio::net::TcpStream::connect(&authority)
            .await
            .map_err(|e| BenchError::new(format!("cannot connect to {authority}: {e}")))?;
        stream
            .set_nodelay(true)
            .map_err(|e| BenchError::new(format!("cannot set TCP_NODELAY: {e}")))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| BenchError::new(format!("cannot talk HTTP to {authority}: {e}")))?;
        tokio::spawn(connection);
        Ok(Self {
            sender,
            authority,
            key: key.map(str::to_owned),
        })
    }

    /// Sends a request (a JSON body when given) and reads the whole answer.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<Answer, String> {
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, &self.authority);
        if let Some(key) = &self.key {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {key}"));
        }
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| e.to_string())?;
        let call = async {
            self.sender.ready().await.map_err(|e| e.to_string())?;
            let response = self
                .sender
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| format!("no answer within {CALL_TIMEOUT:?}"))?
    }

    /// Sends a request that must answer `expected`; returns the body.
    pub async fn expect(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Bytes>,
        expected: u16,
    ) -> BenchResult<Bytes> {
        let answer = self
            .send(method, path, body)
            .await
            .map_err(|e| BenchError::new(format!("{method} {path}: {e}")))?;
        if answer.status != expected {
            return Err(BenchError::new(format!(
                "{method} {path}: {} {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )));
        }
        Ok(answer.body)
    }
}

/// Returns whether `GET /healthz` at `url` answers 200.
pub async fn healthy(url: &str) -> bool {
    let probe = async {
        let mut connection = Connection::open(url, None).await.ok()?;
        connection.send("GET", "/healthz", None).await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), probe).await,
        Ok(Some(Answer { status: 200, .. }))
    )
}

/// An OpenAI-compatible model server on loopback that answers every
/// completion with the same body after a fixed time (a model's compute
/// time); stops when dropped.
pub struct ModelServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl ModelServer {
    /// Starts the server; its answers carry `prompt_tokens` prompt and
    /// `response_tokens` response token ids and come after `latency`.
    pub async fn start(
        prompt_tokens: usize,
        response_tokens: usize,
        latency: Duration,
    ) -> BenchResult<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| BenchError::new(format!("cannot start the model server: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| BenchError::new(format!("cannot start the model server: {e}")))?;
        let answer = Bytes::from(
            serde_json::json!({
                "id": "bench",
                "object": "chat.completion",
                "prompt_token_ids": (0..prompt_tokens).collect::<Vec<_>>(),
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                    "token_ids": (0..response_tokens).collect::<Vec<_>>(),
                }],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": response_tokens},
            })
            .to_string(),
        );
        let app = axum::Router::new().fallback(move || {
            let answer = answer.clone();
            async move {
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                ([(http::header::CONTENT_TYPE, "application/json")], answer)
            }
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = serve.await {
                tracing::warn!(%error, "bench model server failed");
            }
        });
        Ok(Self {
            addr,
            stop: Some(stop),
        })
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
