//! Transport limits ([`TransportLimits`]), and the connection-level ones of
//! the one listener: how many connections are served at once, how long a connection with no call in flight stays open,
//! and accept errors (file descriptors exhausted) backed off instead of
//! retried in a busy loop. Streams per connection are HTTP/2's
//! `SETTINGS_MAX_CONCURRENT_STREAMS`, set where the server is built.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;
use tonic_types::{ErrorDetails, StatusExt as _};

/// Limits on the connections and streams the server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportLimits {
    /// Connections served at once; more are closed as soon as they are
    /// accepted (the client sees UNAVAILABLE and may retry).
    pub max_connections: usize,
    /// How long a connection with no call in flight stays open.
    pub idle_timeout: Duration,
    /// Concurrent HTTP/2 streams (calls) per connection; clients queue
    /// further calls until one ends.
    pub max_concurrent_streams: u32,
    /// Event subscriptions (`WatchEvents`, `WatchRolloutCompletions`) open
    /// at once; more are RESOURCE_EXHAUSTED with RetryInfo.
    pub max_subscribers: usize,
    /// Bytes of events queued for one `WatchEvents` subscriber that has not
    /// read them yet (encoded, plus each one's place in the queue).
    pub subscriber_buffer_bytes: usize,
}

impl Default for TransportLimits {
    /// Defaults that fit the Helm chart's 2 GiB pod: every subscriber
    /// stalled at once is about 640 MiB (measured:
    /// docs/performance.md#a-stalled-subscribers-queue).
    fn default() -> Self {
        Self {
            max_connections: 4096,
            idle_timeout: Duration::from_secs(300),
            max_concurrent_streams: 1024,
            max_subscribers: 4096,
            subscriber_buffer_bytes: 128 * 1024,
        }
    }
}

/// The first and the longest pause after an accept error.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(5), Duration::from_secs(1));

/// A stream a refused connection's answer can be written on.
pub trait RefusalStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> RefusalStream for T {}

/// Opens the stream a refused connection is answered on when the port does
/// not speak plain TCP (a TLS client could not read a plaintext refusal):
/// the handshake over the socket, or `None` when it fails.
pub type RefusalHandshake = Arc<
    dyn Fn(TcpStream) -> futures::future::BoxFuture<'static, Option<Box<dyn RefusalStream>>>
        + Send
        + Sync,
>;

/// Accepts connections from `listener` within `limits`: over the connection
/// limit a connection's calls are answered UNAVAILABLE with a retry delay
/// (after `handshake`, when given, so that a TLS client reads it);
/// an accept error other than a
/// connection aborted by its client (file descriptors or memory exhausted)
/// pauses accepting, 5 ms doubling up to 1 s, where retrying at once would
/// spin a core until a descriptor frees.
pub fn incoming(
    listener: TcpListener,
    limits: TransportLimits,
    handshake: Option<RefusalHandshake>,
) -> impl Stream<Item = io::Result<Connection>> {
    let state = Acceptor {
        listener,
        handshake,
        permits: Arc::new(Semaphore::new(limits.max_connections)),
        refusals: Arc::new(Semaphore::new(REFUSALS)),
        idle_timeout: limits.idle_timeout,
        backoff: None,
        full: false,
    };
    futures::stream::unfold(state, |mut acceptor| async move {
        let connection = acceptor.accept().await;
        Some((Ok(connection), acceptor))
    })
}

struct Acceptor {
    listener: TcpListener,
    /// How a refused connection's answer is opened (TLS), if not plain.
    handshake: Option<RefusalHandshake>,
    permits: Arc<Semaphore>,
    /// Places for connections over the limit being answered.
    refusals: Arc<Semaphore>,
    idle_timeout: Duration,
    /// The pause after the last accept error, while errors continue.
    backoff: Option<Duration>,
    /// The last connection was refused for the limit (logged once per spell).
    full: bool,
}

impl Acceptor {
    async fn accept(&mut self) -> Connection {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    let delay = self
                        .backoff
                        .map_or(ACCEPT_BACKOFF.0, |delay| (delay * 2).min(ACCEPT_BACKOFF.1));
                    self.backoff = Some(delay);
                    tracing::warn!(%error, ?delay, "cannot accept connections, pausing");
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            self.backoff = None;
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                if !self.full {
                    tracing::warn!(%peer, "connection limit reached, refusing new connections");
                }
                self.full = true;
                self.refuse(stream);
                continue;
            };
            self.full = false;
            // Small gRPC frames must not wait for Nagle's algorithm and
            // delayed ACKs (40 ms per round trip otherwise).
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%error, %peer, "cannot set TCP_NODELAY, closing the connection");
                continue;
            }
            return Connection {
                stream,
                info: ConnectionInfo {
                    peer,
                    activity: Arc::new(Activity::new()),
                },
                idle_timeout: self.idle_timeout,
                idle: Box::pin(tokio::time::sleep(self.idle_timeout)),
                _permit: permit,
            };
        }
    }
}

impl Acceptor {
    /// Answers the calls of a connection over the limit with UNAVAILABLE and
    /// a retry delay (HTTP 503 with `Retry-After`) for a moment (the TLS
    /// handshake included), then closes it; a bare close would reach gRPC
    /// clients as CANCELLED. Beyond
    /// [`REFUSALS`] such connections at once, they are closed unanswered.
    fn refuse(&self, stream: TcpStream) {
        let Ok(refusal) = self.refusals.clone().try_acquire_owned() else {
            return;
        };
        let handshake = self.handshake.clone();
        tokio::spawn(async move {
            let answer = async move {
                let stream: Box<dyn RefusalStream> = match handshake {
                    None => Box::new(stream),
                    Some(handshake) => match handshake(stream).await {
                        Some(stream) => stream,
                        None => return,
                    },
                };
                let service = hyper::service::service_fn(|request: http::Request<_>| async move {
                    Ok::<_, std::convert::Infallible>(refusal_response(request.headers()))
                });
                let builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                let _ = builder
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            };
            let _ = tokio::time::timeout(REFUSAL_GRACE, answer).await;
            drop(refusal);
        });
    }
}

/// Connections over the limit answered at once (each for [`REFUSAL_GRACE`]).
const REFUSALS: usize = 64;

/// How long a connection over the limit is answered before it is closed.
const REFUSAL_GRACE: Duration = Duration::from_secs(1);

/// The retry delay given to a connection over the limit.
const REFUSAL_RETRY: Duration = Duration::from_secs(1);

/// Returns true for a gRPC request (content type `application/grpc...`).
pub fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// The answer to every call on a connection over the limit.
fn refusal_response(headers: &http::HeaderMap) -> http::Response<axum::body::Body> {
    const MESSAGE: &str = "the server has too many connections; retry later";
    if is_grpc(headers) {
        let details = ErrorDetails::with_retry_info(Some(REFUSAL_RETRY));
        return tonic::Status::with_error_details(tonic::Code::Unavailable, MESSAGE, details)
            .into_http();
    }
    let mut response = http::Response::new(axum::body::Body::from(MESSAGE));
    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from(REFUSAL_RETRY.as_secs()),
    );
    response
}

/// Returns true for an accept error that concerns one connection only.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// An accepted connection: holds its place under the connection limit until
/// dropped, and reads as closed once no call was in flight for the idle
/// timeout (hyper then closes it).
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    info: ConnectionInfo,
    idle_timeout: Duration,
    idle: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

/// What the server knows of a connection, in every request's extensions.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// The client's address.
    pub peer: SocketAddr,
    activity: Arc<Activity>,
}

/// The calls in flight on a connection and when the last one started or ended.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    last: parking_lot::Mutex<Instant>,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            last: parking_lot::Mutex::new(Instant::now()),
        }
    }

    /// When the connection becomes idle if nothing happens meanwhile.
    fn idle_at(&self, timeout: Duration) -> Instant {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            Instant::now() + timeout
        } else {
            *self.last.lock() + timeout
        }
    }
}

impl Connected for Connection {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if read.is_ready() {
            return read;
        }
        // Nothing to read: a good moment to check for idleness. The server
        // always has a read pending, so the timer's wake-up lands here. The
        // moment a connection becomes idle only moves later, so the timer
        // is re-armed when it fires, not at every read (a reset per read
        // was a timer-wheel update per call).
        while this.idle.as_mut().poll(cx).is_ready() {
            let idle_at = this.info.activity.idle_at(this.idle_timeout);
            if idle_at <= Instant::now() {
                tracing::debug!(peer = %this.info.peer, "closing an idle connection");
                // End of stream: hyper closes the connection.
                return Poll::Ready(Ok(()));
            }
            this.idle.as_mut().reset(idle_at);
        }
        Poll::Pending
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A tower layer that counts each call as in flight on its connection from
/// its request until its response body ends, so that a connection is only
/// idle with no call open (a quiet subscription is not idle).
#[derive(Debug, Clone, Copy, Default)]
pub struct ActivityLayer;

impl<S> tower::Layer<S> for ActivityLayer {
    type Service = ActivityService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ActivityService { inner }
    }
}

/// The service of [`ActivityLayer`].
#[derive(Debug, Clone)]
pub struct ActivityService<S> {
    inner: S,
}

/// The future of a call counted by [`ActivityLayer`].
pub type ActivityFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<http::Response<ActiveBody<B>>, E>> + Send>>;

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for ActivityService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<ActiveBody<ResBody>>;
    type Error = S::Error;
    type Future = ActivityFuture<ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let guard = request
            .extensions()
            .get::<ConnectionInfo>()
            .map(|info| InFlight::new(info.activity.clone()));
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            Ok(response.map(|inner| ActiveBody {
                inner,
                _in_flight: guard,
            }))
        })
    }
}

/// Counts one call in flight while it lives.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl InFlight {
    fn new(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        *activity.last.lock() = Instant::now();
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.last.lock() = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project! {
    /// A response body that keeps its call counted in flight until dropped.
    pub struct ActiveBody<B> {
        #[pin]
        inner: B,
        _in_flight: Option<InFlight>,
    }
}

impl<B: Body> Body for ActiveBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
