//! TLS at the listener, so that every protocol on the port (gRPC, OTLP,
//! HTTP/1.1 and HTTP/2 routes) gets it: certificate and key from PEM files,
//! optionally a client CA that every client must present a certificate
//! from (mTLS), ALPN `h2` and `http/1.1`. [`TlsAcceptor::reload`] re-reads
//! the files and swaps the configuration when they changed: connections
//! accepted afterwards use the new certificate, open ones keep theirs.
//! Handshakes run beside the accept loop, bounded by a deadline, so a slow
//! or silent client holds nothing but its own connection.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

use lightning_store_adapters::metrics::Metrics;
use lightning_store_adapters::transport::{
    Connection, ConnectionInfo, RefusalHandshake, RefusalStream,
};

/// How long a client may take to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections whose handshake is done but that the server has not taken yet.
const ACCEPTED_BACKLOG: usize = 128;

/// The PEM files of the server's TLS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates that client certificates must chain to; `None`
    /// asks no client certificate.
    pub client_ca: Option<PathBuf>,
}

/// The server's TLS configuration, reloadable. Clones share it.
#[derive(Debug, Clone)]
pub struct TlsAcceptor {
    files: TlsFiles,
    state: Arc<RwLock<Loaded>>,
}

#[derive(Debug)]
struct Loaded {
    /// The files' bytes the configuration was built from.
    source: Vec<Vec<u8>>,
    config: Arc<rustls::ServerConfig>,
}

impl TlsAcceptor {
    /// Reads the files and builds the configuration.
    pub fn load(files: TlsFiles) -> Result<Self, String> {
        let source = read_all(&files)?;
        let config = Arc::new(build(&files, &source)?);
        Ok(Self {
            files,
            state: Arc::new(RwLock::new(Loaded { source, config })),
        })
    }

    /// Re-reads the files; swaps the configuration when they changed.
    /// Returns whether it did; on error the configuration in use stays.
    pub fn reload(&self) -> Result<bool, String> {
        let source = read_all(&self.files)?;
        if self.state.read().source == source {
            return Ok(false);
        }
        // A certificate written before its key fails here and succeeds at
        // the next poll, once both are in place; a bad file is reported
        // once, not at every poll, until it changes.
        let built = build(&self.files, &source);
        let mut state = self.state.write();
        state.source = source;
        state.config = Arc::new(built?);
        Ok(true)
    }

    /// Returns the handshake the transport runs before it refuses a
    /// connection over its limit, so that a TLS client reads the refusal
    /// (with this configuration as it is when the connection arrives).
    pub fn refusal_handshake(&self) -> RefusalHandshake {
        let tls = self.clone();
        Arc::new(move |stream: TcpStream| {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
            Box::pin(async move {
                let stream = acceptor.accept(stream).await.ok()?;
                Some(Box::new(stream) as Box<dyn RefusalStream>)
            })
        })
    }

    /// Returns whether clients must present a certificate.
    pub fn mutual(&self) -> bool {
        self.files.client_ca.is_some()
    }

    fn config(&self) -> Arc<rustls::ServerConfig> {
        self.state.read().config.clone()
    }
}

fn read_all(files: &TlsFiles) -> Result<Vec<Vec<u8>>, String> {
    [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|path| std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display())))
    .collect()
}

/// Builds the rustls configuration from the files' bytes (cert, key, CA).
fn build(files: &TlsFiles, source: &[Vec<u8>]) -> Result<rustls::ServerConfig, String> {
    let certs = CertificateDer::pem_slice_iter(&source[0])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", files.cert.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(&source[1])
        .map_err(|e| format!("{}: {e}", files.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match (&files.client_ca, source.get(2)) {
        (Some(path), Some(pem)) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{} and {}: {e}", files.cert.display(), files.key.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A connection on the port: plain TCP, or TLS over it.
#[derive(Debug)]
pub enum Conn {
    /// Without TLS.
    Plain(Connection),
    /// After a TLS handshake.
    Tls(Box<tokio_rustls::server::TlsStream<Connection>>),
}

/// Returns `connections` (the transport's: within the connection limit,
/// `TCP_NODELAY` set) as they are without `tls`, or as TLS connections whose
/// handshake with `tls` succeeded (failed ones are counted in `metrics` and
/// dropped; handshakes run beside the accept loop). Dropping the stream
/// closes the listener.
pub fn incoming(
    connections: impl Stream<Item = io::Result<Connection>> + Send + 'static,
    tls: Option<TlsAcceptor>,
    metrics: Metrics,
) -> BoxStream<'static, io::Result<Conn>> {
    let Some(tls) = tls else {
        return connections
            .map(|connection| connection.map(Conn::Plain))
            .boxed();
    };
    let (accepted, handshaken) = tokio::sync::mpsc::channel(ACCEPTED_BACKLOG);
    tokio::spawn(async move {
        let mut connections = std::pin::pin!(connections);
        loop {
            let connection = tokio::select! {
                next = connections.next() => match next {
                    Some(Ok(connection)) => connection,
                    Some(Err(error)) => {
                        // The server logs and skips accept errors.
                        if accepted.send(Err(error)).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    None => return,
                },
                () = accepted.closed() => return,
            };
            let peer = connection.connect_info().peer;
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
            let accepted = accepted.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(connection)).await {
                    Ok(Ok(stream)) => {
                        let _ = accepted.send(Ok(Conn::Tls(Box::new(stream)))).await;
                    }
                    Ok(Err(error)) => {
                        metrics.tls_handshake_failed();
                        tracing::debug!(%error, %peer, "tls handshake failed");
                    }
                    Err(_) => {
                        metrics.tls_handshake_failed();
                        tracing::debug!(%peer, "tls handshake timed out");
                    }
                }
            });
        }
    });
    ReceiverStream::new(handshaken).boxed()
}

impl Connected for Conn {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        match self {
            Conn::Plain(stream) => stream.connect_info(),
            Conn::Tls(stream) => stream.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Conn::Tls(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Conn::Tls(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Conn::Tls(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(stream) => stream.is_write_vectored(),
            Conn::Tls(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Conn::Tls(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Conn::Tls(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}
