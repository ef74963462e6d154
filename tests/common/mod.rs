//! Shared test harness: a real server on an ephemeral loopback port, and
//! what some tests need beyond the Rust toolchain ([`Tool`]: they are
//! skipped, with one line saying what to install, where it is missing).

#![allow(dead_code)]

pub mod browser;
pub mod http;
pub mod model_server;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::clock::{Clock, ManualClock, SystemClock};
use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::core::limits::RequestLimits;
use lightning_store::core::namespace::{NamespaceName, NamespaceSettings};
use lightning_store::core::retention::RetentionPolicy;
use lightning_store::core::storage::{Catalogue, Store};
use lightning_store::proto::attribute_value::Value as AttributeKind;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, ServedCatalogue, ServerConfig};
use lightning_store::store::postgres::PostgresOptions;
use lightning_store::store::sqlite::SqliteOptions;
use lightning_store::store::{self, StoreConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// What some tests need beyond the Rust toolchain. Without it they are
/// skipped, each with one line per test process that names what to
/// install; with `LIGHTNING_STORE_TESTS_NO_SKIP=1` (CI) they fail instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// PostgreSQL's server binaries (`initdb`, `pg_ctl`): the PostgreSQL
    /// backend's tests start a throwaway cluster with them.
    Postgres,
    /// `python3` with `venv` (and network to PyPI): the agent-lightning
    /// tests run in the environments `tools/pyenv.sh` creates.
    Python,
    /// Prometheus' `promtool`, which `tools/promtool.sh` fetches with
    /// Debian's `apt-get download` and `dpkg-deb`.
    Promtool,
    /// `curl` and `jq`, which the runnable blocks of the documentation use.
    CurlAndJq,
    /// Chromium and its `chromedriver`: the console's browser tests drive
    /// a real browser over WebDriver ([`browser`]).
    Browser,
}

impl Tool {
    const ALL: [Tool; 5] = [
        Tool::Postgres,
        Tool::Python,
        Tool::Promtool,
        Tool::CurlAndJq,
        Tool::Browser,
    ];

    /// Returns whether the tool is on this machine.
    fn found(self) -> bool {
        match self {
            Tool::Postgres => postgres_bin().is_some(),
            Tool::Python => {
                let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
                std::process::Command::new(python)
                    .args(["-c", "import ensurepip, venv"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success())
            }
            Tool::Promtool => {
                let fetched = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("target/tools/prometheus/usr/bin/promtool")
                    .exists();
                fetched || (on_path("apt-get") && on_path("dpkg-deb"))
            }
            Tool::CurlAndJq => on_path("curl") && on_path("jq"),
            Tool::Browser => browser::programs().is_some(),
        }
    }

    /// The tests that need the tool, and what is missing.
    fn missing(self) -> (&'static str, &'static str) {
        match self {
            Tool::Postgres => (
                "the PostgreSQL tests",
                "no initdb found (install Debian's `postgresql` package, or name its bin \
                 directory in LIGHTNING_STORE_PG_BIN)",
            ),
            Tool::Python => (
                "the agent-lightning tests",
                "no python3 with venv (install Debian's `python3-venv` package; the tests also \
                 need network to PyPI)",
            ),
            Tool::Promtool => (
                "promtool's check of the metrics",
                "no apt-get and dpkg-deb to fetch Prometheus' promtool (Debian's `prometheus` \
                 package)",
            ),
            Tool::CurlAndJq => (
                "the documentation's blocks that call curl or jq",
                "no curl or jq (install Debian's `curl` and `jq` packages)",
            ),
            Tool::Browser => (
                "the console's browser tests",
                "no chromium and chromedriver on PATH (install Debian's `chromium` and \
                 `chromium-driver` packages)",
            ),
        }
    }
}

/// Returns whether the tests that need `tool` can run here; when they
/// cannot, prints the tool's skip line once per test process (past the
/// test harness' capture, so that it shows), or fails under
/// `LIGHTNING_STORE_TESTS_NO_SKIP=1`.
pub fn available(tool: Tool) -> bool {
    use std::io::Write as _;
    static FOUND: std::sync::OnceLock<[bool; 5]> = std::sync::OnceLock::new();
    static REPORTED: [std::sync::Once; 5] = [const { std::sync::Once::new() }; 5];
    let index = Tool::ALL.iter().position(|t| *t == tool).unwrap();
    if FOUND.get_or_init(|| Tool::ALL.map(Tool::found))[index] {
        return true;
    }
    let (tests, missing) = tool.missing();
    assert!(
        std::env::var_os("LIGHTNING_STORE_TESTS_NO_SKIP").is_none_or(|v| v != "1"),
        "{tests} may not be skipped (LIGHTNING_STORE_TESTS_NO_SKIP=1): {missing}"
    );
    REPORTED[index].call_once(|| {
        let _ = writeln!(std::io::stderr(), "skipping {tests}: {missing}");
    });
    false
}

/// Returns from the test (which then passes, skipped) when what `backend`
/// needs is not on this machine: `skip_without!(BACKEND)` as the first
/// line of a test of a suite compiled once per backend, or
/// `skip_without!(Tool::Python)`.
macro_rules! skip_without {
    ($needs:expr) => {
        if !$crate::common::Needs::available($needs) {
            return;
        }
    };
}

/// What a test can be skipped without: a backend or a tool.
pub trait Needs {
    /// Returns whether it is here (see [`available`]).
    fn available(self) -> bool;
}

impl Needs for Tool {
    fn available(self) -> bool {
        available(self)
    }
}

impl Needs for Backend {
    fn available(self) -> bool {
        self != Backend::Postgres || available(Tool::Postgres)
    }
}

/// Returns the backends among `backends` whose tests can run here.
pub fn available_backends(backends: &[Backend]) -> Vec<Backend> {
    backends.iter().copied().filter(|b| b.available()).collect()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Returns the Python of the environment `name` of `tools/pyenv.sh`
/// (`agl0`, `agl1`), which creates it on first use (tests that call it
/// open with `skip_without!(Tool::Python)`).
pub fn pyenv_python(name: &str) -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let output = std::process::Command::new(repo.join("tools/pyenv.sh"))
        .arg(name)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("tools/pyenv.sh runs");
    assert!(output.status.success(), "tools/pyenv.sh {name} failed");
    let env = String::from_utf8(output.stdout).expect("a path");
    PathBuf::from(env.trim()).join("bin/python")
}

/// Returns the directory of PostgreSQL's server binaries:
/// `LIGHTNING_STORE_PG_BIN` when set (a directory without `initdb` hides
/// them), else the directory of an `initdb` on `PATH`, else Debian's
/// `/usr/lib/postgresql/<version>/bin`.
pub fn postgres_bin() -> Option<PathBuf> {
    let has_initdb = |dir: &std::path::Path| dir.join("initdb").is_file();
    if let Some(dir) = std::env::var_os("LIGHTNING_STORE_PG_BIN") {
        let dir = PathBuf::from(dir);
        return has_initdb(&dir).then_some(dir);
    }
    if let Some(path) = std::env::var_os("PATH")
        && let Some(dir) = std::env::split_paths(&path).find(|dir| has_initdb(dir))
    {
        return Some(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| has_initdb(bin))
        .collect();
    versions.sort();
    versions.pop()
}

/// The storage backends the conformance suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Sqlite,
    /// A fresh database in this process's throwaway cluster ([`postgres_database`]).
    Postgres,
}

impl Backend {
    /// Returns the name the backend reports in statistics.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// Opens the store, with the temporary directory of a fresh database.
    pub async fn open(self, options: &TestOptions) -> (Arc<dyn Store>, Option<tempfile::TempDir>) {
        let (config, dir) = self.config(options).await;
        (store::open(&config).await.unwrap(), dir)
    }

    /// Opens the backend's catalogue of namespaces for `options`
    /// ([`Backend::config`]).
    pub async fn open_catalogue(
        self,
        options: &TestOptions,
    ) -> (Arc<dyn Catalogue>, Option<tempfile::TempDir>) {
        let (config, dir) = self.config(options).await;
        (store::open_catalogue(&config).await.unwrap(), dir)
    }

    /// Returns the backend's configuration for `options`, with the
    /// temporary directory of a fresh SQLite database.
    pub async fn config(self, options: &TestOptions) -> (StoreConfig, Option<tempfile::TempDir>) {
        match self {
            Backend::Memory => (
                StoreConfig::Memory {
                    event_retention: options.event_retention,
                },
                None,
            ),
            Backend::Sqlite => {
                let (dir, path) = match &options.database {
                    Some(path) => (None, path.clone()),
                    None => {
                        let dir = tempfile::tempdir().unwrap();
                        let path = dir.path().join("store.db");
                        (Some(dir), path)
                    }
                };
                let options = SqliteOptions {
                    event_retention: options.event_retention,
                };
                (StoreConfig::Sqlite { path, options }, dir)
            }
            Backend::Postgres => {
                let url = match &options.postgres_url {
                    Some(url) => url.clone(),
                    None => postgres_database().await,
                };
                let options = PostgresOptions {
                    event_retention: options.event_retention,
                    ..PostgresOptions::default()
                };
                (StoreConfig::Postgres { url, options }, None)
            }
        }
    }
}

/// A store client on a plain channel, as [`TestServer::client`] returns.
pub type Client = LightningStoreServiceClient<Channel>;

/// Enqueues a rollout and returns it.
pub async fn enqueue_spec(
    client: &mut Client,
    spec: lightning_store::proto::RolloutSpec,
) -> lightning_store::proto::Rollout {
    client
        .enqueue_rollout(lightning_store::proto::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(spec),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
}

/// Publishes a resources version of `resources` (JSON text); returns its id.
pub async fn add_resources(client: &mut Client, resources: &str) -> String {
    client
        .add_resources(lightning_store::proto::AddResourcesRequest {
            resources_json: resources.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap()
        .resources_id
}

/// Enqueues a rollout whose input is the JSON text `input` and returns it.
pub async fn enqueue(client: &mut Client, input: &str) -> lightning_store::proto::Rollout {
    enqueue_spec(
        client,
        lightning_store::proto::RolloutSpec {
            input_json: input.to_owned(),
            ..Default::default()
        },
    )
    .await
}

/// Settings of a test server.
pub struct TestOptions {
    pub config: ServerConfig,
    /// How often the watchdog timer ticks (a long interval leaves only the
    /// on-demand scan before reads).
    pub watchdog_interval: Duration,
    /// How many events the store retains for resuming subscribers.
    pub event_retention: usize,
    /// The SQLite file of [`Backend::Sqlite`] (default: a fresh file in a
    /// temporary directory that lives as long as the server).
    pub database: Option<PathBuf>,
    /// The PostgreSQL database of [`Backend::Postgres`] (default: a fresh
    /// database in this process's cluster); servers given the same URL
    /// share it.
    pub postgres_url: Option<String>,
    /// Which spans of finished rollouts the engine deletes.
    pub span_retention: RetentionPolicy,
    /// How often the span retention runs.
    pub retention_interval: Duration,
    /// What one request may ask (ids per list, items per batch, message sizes).
    pub limits: RequestLimits,
    /// How long a client's request id is remembered.
    pub request_id_ttl: Duration,
    /// Where the engine reads the present (the wall clock by default).
    pub clock: Arc<dyn Clock>,
    /// The namespace whose store the server's calls that name none reach
    /// (created through the catalogue on first use), instead of `default`:
    /// the conformance suite's namespaced copies run in one.
    pub serve_namespace: Option<&'static str>,
}

impl Default for TestOptions {
    fn default() -> Self {
        Self {
            config: ServerConfig::default(),
            watchdog_interval: Duration::from_millis(20),
            event_retention: 100_000,
            database: None,
            postgres_url: None,
            span_retention: RetentionPolicy::default(),
            retention_interval: Duration::from_secs(10),
            limits: RequestLimits::default(),
            request_id_ttl: EngineConfig::default().request_id_ttl,
            clock: Arc::new(SystemClock),
            serve_namespace: None,
        }
    }
}

impl TestOptions {
    /// The defaults with the given server settings.
    pub fn with_config(config: ServerConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The defaults within `limits`.
    pub fn with_limits(limits: RequestLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// The defaults on a manual clock, returned with them: time passes for
    /// the store's rules only when the test advances the clock. The watchdog
    /// timer ticks every `watchdog_interval` (a long interval leaves only
    /// the on-demand scan before reads).
    pub fn on_manual_clock(watchdog_interval: Duration) -> (Self, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::at_system_time());
        let options = Self {
            watchdog_interval,
            clock: clock.clone(),
            ..Self::default()
        };
        (options, clock)
    }
}

/// Opens the store of `namespace` in `catalogue` (`None`: `default`).
pub async fn open_in(catalogue: &Arc<dyn Catalogue>, namespace: Option<&str>) -> Arc<dyn Store> {
    match namespace {
        None => {
            let default = catalogue.default_namespace().await.unwrap();
            catalogue.open(&default).await.unwrap()
        }
        Some(namespace) => namespace_store(catalogue, namespace).await,
    }
}

/// The store of `namespace` in `catalogue`: created on its first use (a
/// test that restarts on the same database finds it there, and of servers
/// starting together on one database, one creates it and the others find
/// it).
async fn namespace_store(catalogue: &Arc<dyn Catalogue>, namespace: &str) -> Arc<dyn Store> {
    let name = NamespaceName::parse(namespace).unwrap();
    let record = match catalogue.find(&name).await.unwrap() {
        Some(record) => record,
        None => match catalogue
            .create(&name, NamespaceSettings::default(), SystemClock.now())
            .await
        {
            Ok(record) => record,
            // Another server created it meanwhile.
            Err(error) => catalogue
                .find(&name)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("cannot create namespace {namespace}: {error}")),
        },
    };
    assert!(!record.name.is_default());
    catalogue.open(&record).await.unwrap()
}

/// Returns a string attribute of a span.
pub fn text(key: &str, value: &str) -> lightning_store::proto::KeyValue {
    attribute(key, AttributeKind::StringValue(value.to_owned()))
}

/// Returns a number attribute of a span.
pub fn number(key: &str, value: f64) -> lightning_store::proto::KeyValue {
    attribute(key, AttributeKind::DoubleValue(value))
}

/// Returns an integer attribute of a span.
pub fn integer(key: &str, value: i64) -> lightning_store::proto::KeyValue {
    attribute(key, AttributeKind::IntValue(value))
}

fn attribute(key: &str, value: AttributeKind) -> lightning_store::proto::KeyValue {
    lightning_store::proto::KeyValue {
        key: key.to_owned(),
        value: Some(lightning_store::proto::AttributeValue { value: Some(value) }),
    }
}

/// Runs each named test, `async fn name(backend: Backend)` of the module
/// around the macro's, on every backend this machine has.
macro_rules! on_every_backend {
    ($($test:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                use $crate::common::{Backend, available_backends};
                for backend in available_backends(&[Backend::Memory, Backend::Sqlite, Backend::Postgres]) {
                    super::$test(backend).await;
                }
            }
        )*
    };
}

/// An interceptor that adds the namespace metadata to every call.
pub type NameNamespace =
    Box<dyn FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Send>;

/// A store client whose every call names a namespace.
pub type NamespacedClient = LightningStoreServiceClient<InterceptedService<Channel, NameNamespace>>;

/// A running server; dropping it without [`TestServer::stop`] aborts it.
pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub url: String,
    pub engine: Arc<Engine>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), server::ServeError>>>,
    /// Keeps a fresh SQLite database alive while the server runs.
    _database: Option<tempfile::TempDir>,
}

impl TestServer {
    /// Starts a server with default settings.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, ServerConfig::default()).await
    }

    /// Starts a server with the given server settings.
    pub async fn start_with(backend: Backend, config: ServerConfig) -> Self {
        Self::start_opts(backend, TestOptions::with_config(config)).await
    }

    /// Starts a server with default settings within `limits`.
    pub async fn start_with_limits(backend: Backend, limits: RequestLimits) -> Self {
        Self::start_opts(backend, TestOptions::with_limits(limits)).await
    }

    /// Starts a server whose watchdog timer ticks every `interval` (a long
    /// interval leaves only the on-demand scan before reads).
    pub async fn start_with_watchdog(backend: Backend, interval: Duration) -> Self {
        Self::start_opts(
            backend,
            TestOptions {
                watchdog_interval: interval,
                ..TestOptions::default()
            },
        )
        .await
    }

    /// Starts a server on a manual clock, returned with it (see
    /// [`TestOptions::on_manual_clock`]).
    pub async fn start_on_manual_clock(
        backend: Backend,
        watchdog_interval: Duration,
    ) -> (Self, Arc<ManualClock>) {
        let (options, clock) = TestOptions::on_manual_clock(watchdog_interval);
        (Self::start_opts(backend, options).await, clock)
    }

    /// Starts a server with every setting given.
    pub async fn start_opts(backend: Backend, options: TestOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (catalogue, database) = backend.open_catalogue(&options).await;
        let store = open_in(&catalogue, options.serve_namespace).await;
        let engine = Arc::new(Engine::new(
            store,
            EngineConfig {
                watchdog_interval: options.watchdog_interval,
                span_retention: options.span_retention,
                retention_interval: options.retention_interval,
                limits: options.limits,
                request_id_ttl: options.request_id_ttl,
                clock: options.clock,
                ..EngineConfig::default()
            },
        ));
        let (stop, stopped) = oneshot::channel();
        let config = ServerConfig {
            catalogue: Some(ServedCatalogue(catalogue)),
            ..options.config
        };
        let task = tokio::spawn(server::serve(listener, engine.clone(), config, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            url: format!("http://{addr}"),
            engine,
            stop: Some(stop),
            task: Some(task),
            _database: database,
        }
    }

    /// Returns a connected channel.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    /// Returns a connected store client.
    pub async fn client(&self) -> LightningStoreServiceClient<Channel> {
        LightningStoreServiceClient::new(self.channel().await).max_decoding_message_size(usize::MAX)
    }

    /// Returns a store client whose every call names `namespace` (the
    /// `lightning-store-namespace` metadata).
    pub async fn client_in(&self, namespace: &str) -> NamespacedClient {
        let value: tonic::metadata::MetadataValue<_> = namespace.parse().unwrap();
        let name: NameNamespace = Box::new(move |mut request: tonic::Request<()>| {
            request
                .metadata_mut()
                .insert("lightning-store-namespace", value.clone());
            Ok(request)
        });
        LightningStoreServiceClient::with_interceptor(self.channel().await, name)
            .max_decoding_message_size(usize::MAX)
    }

    /// Creates the namespace `name` (with the admin `token` on a server
    /// that checks tokens), and fails the test if the store refuses.
    pub async fn create_namespace(&self, name: &str, token: Option<&str>) {
        let mut request = tonic::Request::new(lightning_store::proto::CreateNamespaceRequest {
            name: name.to_owned(),
            ..Default::default()
        });
        if let Some(token) = token {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        self.client().await.create_namespace(request).await.unwrap();
    }

    /// Shuts the server down and waits for it to exit.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The real binary running `serve` in a child process (JSON logs, a free
/// loopback port, in-memory unless the arguments say otherwise), with its
/// log collected.
pub struct ServerProcess {
    child: std::process::Child,
    pub addr: std::net::SocketAddr,
    /// Every line the server logged so far.
    pub log: Arc<std::sync::Mutex<String>>,
    log_reader: Option<std::thread::JoinHandle<()>>,
}

impl ServerProcess {
    /// Starts `serve` with `args` added, returning once it logged the
    /// address it serves on.
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// Starts `serve` with `args` added (a free loopback port unless they
    /// name `--listen`) and `env` set, returning once it logged the
    /// address it serves on.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn(args, env, None)
    }

    /// Starts `serve` with `args` added and at most `open_files` file
    /// descriptors (`RLIMIT_NOFILE`).
    pub fn start_with_fd_limit(args: &[&str], open_files: u64) -> Self {
        Self::spawn(args, &[], Some(open_files))
    }

    fn spawn(args: &[&str], env: &[(&str, &str)], open_files: Option<u64>) -> Self {
        use std::io::BufRead as _;
        use std::os::unix::process::CommandExt as _;
        use std::process::{Command, Stdio};

        let mut command = Command::new(env!("CARGO_BIN_EXE_lightning-store"));
        if let Some(open_files) = open_files {
            let limit = libc::rlimit {
                rlim_cur: open_files,
                rlim_max: open_files,
            };
            // SAFETY: setrlimit is async-signal-safe; the closure allocates nothing.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        command.arg("serve");
        if !args.contains(&"--log-format") {
            command.args(["--log-format", "json"]);
        }
        if !args.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = command
            .args(args)
            .envs(env.iter().copied())
            .env_remove("LIGHTNING_STORE_BACKEND")
            .env_remove("LIGHTNING_STORE_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(std::sync::Mutex::new(String::new()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        let log_reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Ok(record) = serde_json::from_str::<serde_json::Value>(&line)
                    && record["fields"]["message"] == "serving gRPC and HTTP"
                    && let Some(addr) = record["fields"]["local_addr"].as_str()
                {
                    let _ = addr_tx.send(addr.parse::<std::net::SocketAddr>().unwrap());
                }
                // The same line in the text format (without colours).
                if line.contains("serving gRPC and HTTP")
                    && let Some((_, rest)) = line.split_once("local_addr=")
                    && let Some(addr) = rest.split_whitespace().next()
                    && let Ok(addr) = addr.parse::<std::net::SocketAddr>()
                {
                    let _ = addr_tx.send(addr);
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the server did not start: {}", log.lock().unwrap()));
        Self {
            child,
            addr,
            log,
            log_reader: Some(log_reader),
        }
    }

    /// Returns a connected store client.
    pub async fn client(&self) -> LightningStoreServiceClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        LightningStoreServiceClient::new(channel)
    }

    /// Returns the CPU time (user + system) the process used so far.
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The fields after the command name, which is in parentheses.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf only reads a system setting.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        Duration::from_millis(ticks * 1000 / per_second)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Stops the process with SIGTERM and returns its exit status and its
    /// whole log.
    pub fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: signals our own child, which has not been reaped yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.log_reader.take() {
            reader.join().unwrap();
        }
        let log = self.log.lock().unwrap().clone();
        (status, log)
    }
}

/// A test that fails leaves no server behind.
impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A throwaway PostgreSQL cluster on a free loopback port, created with the
/// server binaries of the machine (initdb and pg_ctl, run as the `postgres`
/// user when the tests run as root) and removed when dropped. The cluster
/// that [`postgres_database`] uses is shared by the whole test process and
/// removed when the process exits.
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Extra server settings (`-c name=value ...`).
    settings: String,
}

static CLUSTER: std::sync::OnceLock<Cluster> = std::sync::OnceLock::new();

impl Cluster {
    /// Creates and starts a cluster.
    pub fn start() -> Self {
        Self::start_with(|_| String::new())
    }

    /// Creates a cluster, lets `prepare` write files into its directory
    /// (owned by the cluster's user afterwards) and return extra server
    /// settings (`-c name=value ...`), and starts it.
    pub fn start_with(prepare: impl FnOnce(&std::path::Path) -> String) -> Self {
        let bin = postgres_bin().expect("PostgreSQL's server binaries (see `Tool::Postgres`)");
        let dir = tempfile::Builder::new()
            .prefix("lightning-store-pg-")
            .tempdir()
            .unwrap()
            .keep();
        if unsafe { libc::geteuid() } == 0 {
            let uid = command_output("id", &["-u", "postgres"]).parse().unwrap();
            let gid = command_output("id", &["-g", "postgres"]).parse().unwrap();
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
        // A free port: bound, then released for the server.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cluster = Self {
            dir,
            bin,
            port,
            settings: String::new(),
        };
        cluster.pg(&format!(
            "{}/initdb -D {}/data -A trust -U postgres --no-sync",
            cluster.bin.display(),
            cluster.dir.display()
        ));
        cluster.settings = prepare(&cluster.dir);
        if unsafe { libc::geteuid() } == 0 {
            let status = std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&cluster.dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
        cluster.start_server();
        cluster
    }

    /// Starts the server of a stopped cluster, on the same port.
    pub fn start_server(&self) {
        self.pg(&format!(
            "{}/pg_ctl -D {}/data -l {}/log -w -o '-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400 {}' start",
            self.bin.display(),
            self.dir.display(),
            self.dir.display(),
            self.port,
            self.dir.display(),
            self.settings
        ));
    }

    /// Stops the server at once (its clients lose their connections).
    pub fn stop_server(&self) {
        self.pg(&format!(
            "{}/pg_ctl -D {}/data -m immediate -w stop",
            self.bin.display(),
            self.dir.display()
        ));
    }

    /// Runs a shell command line as the cluster's owner.
    fn pg(&self, command: &str) {
        let status = if unsafe { libc::geteuid() } == 0 {
            std::process::Command::new("su")
                .args(["postgres", "-c", command])
                .stdout(std::process::Stdio::null())
                .status()
        } else {
            std::process::Command::new("sh")
                .args(["-c", command])
                .stdout(std::process::Stdio::null())
                .status()
        }
        .unwrap();
        assert!(status.success(), "{command} failed: {status}");
    }

    /// Stops the server, if it runs, and deletes the cluster's files.
    fn remove(&self) {
        let _ = std::panic::catch_unwind(|| self.stop_server());
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Creates an empty database and returns its URL. Its collation is
    /// ICU's `en-US` (where PostgreSQL is built with ICU), the linguistic
    /// order of users' databases (`en_US.UTF-8`), in which text sorts
    /// otherwise than by bytes ("a" < "B"): the machine has no such system
    /// locale, and the cluster's own (C.UTF-8) sorts by code point, which
    /// would hide a query that sorts ids by the database's collation.
    pub async fn create_database(&self) -> String {
        use sqlx::Connection as _;
        let name = format!("test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .unwrap();
        let linguistic = format!(
            "CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
        );
        if sqlx::query(sqlx::AssertSqlSafe(linguistic))
            .execute(&mut admin)
            .await
            .is_err()
        {
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await
                .unwrap();
        }
        admin.close().await.unwrap();
        self.url(&name)
    }

    /// Returns the URL of a database of the cluster.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

fn command_output(program: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Returns once `waiters` connections to `admin`'s database wait for a
/// lock, or once `answered()` (a call answered without waiting, which the
/// caller's assertions then refuse); fails after 20 s. PostgreSQL has no
/// event for "blocked on a lock", so this polls `pg_locks`.
pub async fn until_lock_waiters(
    admin: &mut sqlx::PgConnection,
    waiters: i64,
    answered: impl Fn() -> bool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(DISTINCT l.pid) FROM pg_locks l \
             JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE NOT l.granted AND a.datname = current_database()",
        )
        .fetch_one(&mut *admin)
        .await
        .unwrap();
        if waiting >= waiters || answered() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the calls neither wait for the lock nor answer"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Creates an empty database in this process's shared PostgreSQL cluster
/// (started on first use) and returns its URL.
pub async fn postgres_database() -> String {
    let cluster = match CLUSTER.get() {
        Some(cluster) => cluster,
        None => {
            let started = tokio::task::spawn_blocking(|| {
                CLUSTER.get_or_init(|| {
                    extern "C" fn remove_at_exit() {
                        if let Some(cluster) = CLUSTER.get() {
                            cluster.remove();
                        }
                    }
                    // SAFETY: registers a plain function without arguments.
                    unsafe { libc::atexit(remove_at_exit) };
                    Cluster::start()
                });
            });
            started.await.unwrap();
            CLUSTER.get().unwrap()
        }
    };
    cluster.create_database().await
}
