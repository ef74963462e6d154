//! Where the conformance suite's store lives: the default namespace, as the
//! common harness opens it, or a namespace of its own that the suite
//! creates and opens through the backend's catalogue, so that every test
//! also proves a namespace's store is a complete store. Each copy of the
//! suite names its place ([`Placement`]) and gets its server type
//! ([`Server`]) and store ([`open_store`]) from here.

use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::clock::ManualClock;
use lightning_store::core::limits::RequestLimits;
use lightning_store::core::storage::{Catalogue, Store};
use lightning_store::server::ServerConfig;

use crate::common::{Backend, TestOptions, TestServer, open_in};

/// The namespace the namespaced copies of the suite run in.
pub const CONFORMANCE_NAMESPACE: &str = "conformance";

/// Where one copy of the suite keeps its store.
pub trait Placement {
    /// `None`: the default namespace; else the namespace created (once per
    /// database) and opened through the catalogue.
    const NAMESPACE: Option<&'static str>;
}

/// Opens a fresh store of `backend` in `P`'s place, with what must
/// outlive it (the temporary directory and the catalogue).
pub async fn open_store<P: Placement>(
    backend: Backend,
    options: &TestOptions,
) -> (
    Arc<dyn Store>,
    Option<tempfile::TempDir>,
    Arc<dyn Catalogue>,
) {
    let (catalogue, dir) = backend.open_catalogue(options).await;
    (open_in(&catalogue, P::NAMESPACE).await, dir, catalogue)
}

/// The common harness's server, whose calls that name no namespace reach
/// the store of `P`'s place (it dereferences to the [`TestServer`]).
pub struct Server<P: Placement> {
    server: TestServer,
    _place: PhantomData<P>,
}

impl<P: Placement> Deref for Server<P> {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        &self.server
    }
}

impl<P: Placement> Server<P> {
    /// Starts a server with default settings.
    pub async fn start(backend: Backend) -> Self {
        Self::start_opts(backend, TestOptions::default()).await
    }

    /// Starts a server with the given server settings.
    pub async fn start_with(backend: Backend, config: ServerConfig) -> Self {
        Self::start_opts(backend, TestOptions::with_config(config)).await
    }

    /// Starts a server with default settings within `limits`.
    pub async fn start_with_limits(backend: Backend, limits: RequestLimits) -> Self {
        Self::start_opts(backend, TestOptions::with_limits(limits)).await
    }

    /// Starts a server on a manual clock, returned with it.
    pub async fn start_on_manual_clock(
        backend: Backend,
        watchdog_interval: Duration,
    ) -> (Self, Arc<ManualClock>) {
        let (options, clock) = TestOptions::on_manual_clock(watchdog_interval);
        (Self::start_opts(backend, options).await, clock)
    }

    /// Starts a server with every setting given, in `P`'s place.
    pub async fn start_opts(backend: Backend, options: TestOptions) -> Self {
        let options = TestOptions {
            serve_namespace: P::NAMESPACE,
            ..options
        };
        Self {
            server: TestServer::start_opts(backend, options).await,
            _place: PhantomData,
        }
    }

    /// Shuts the server down and waits for it to exit.
    pub async fn stop(self) {
        self.server.stop().await
    }
}
