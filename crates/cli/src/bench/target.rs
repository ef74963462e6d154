//! The server under test: a running one named by URL, or one started from
//! `--server-cmd` and stopped with SIGTERM at the end. Also the gRPC
//! channels the client tasks share and the server's memory use.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::args::TargetArgs;
use super::error::{BenchError, BenchResult};
use super::limits::CALL_TIMEOUT;
use super::wire::LeanClient;
use crate::connection::{AuthChannel, CallMetadata, ConnectArgs, error_chain};
use lightning_store_proto::lightning_store_service_client::LightningStoreServiceClient;

/// How long connecting one channel may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a started server may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Store client used by the scenarios.
pub type StoreClient = LightningStoreServiceClient<AuthChannel>;

/// The server under test.
pub struct Target {
    url: String,
    connect: ConnectArgs,
    bearer: CallMetadata,
    tasks_per_channel: usize,
    spawned: Option<Spawned>,
    probe: Probe,
}

/// How the benchmark tells that the server under test is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// grpc.health.v1 reports SERVING.
    Grpc,
    /// `GET /healthz` answers 200 (agent-lightning 1.x's servers, ours and
    /// agentlightning's own).
    Http,
}

/// A server process started by the benchmark.
struct Spawned {
    child: Child,
    command: String,
    log: PathBuf,
}

impl Target {
    /// Reaches the server named by `args`, starting it first with
    /// `--server-cmd` when given, and waits until it is ready as `probe` tells.
    pub async fn open(args: &TargetArgs, probe: Probe) -> BenchResult<Self> {
        if args.tasks_per_channel == 0 {
            return Err(BenchError::new("--tasks-per-channel must be at least 1"));
        }
        let startup = Duration::try_from_secs_f64(args.startup_timeout_secs)
            .map_err(|_| BenchError::new("--startup-timeout-secs must be a number >= 0"))?;
        let bearer = args.connect.call_metadata().map_err(BenchError::new)?;
        let Some(command) = &args.server_cmd else {
            let mut target = Self {
                url: crate::connection::server_url(&args.server).map_err(BenchError::new)?,
                connect: args.connect.clone(),
                bearer: bearer.clone(),
                tasks_per_channel: args.tasks_per_channel,
                spawned: None,
                probe,
            };
            if probe == Probe::Http {
                target.wait_until_serving(startup).await?;
                return Ok(target);
            }
            let endpoint = target.endpoint()?;
            endpoint.connect().await.map_err(|e| {
                BenchError::new(format!(
                    "cannot connect to {}: {} (is `lightning-store serve` running there? \
                     set --server or --server-cmd)",
                    target.url,
                    error_chain(&e)
                ))
            })?;
            return Ok(target);
        };
        if !command.contains("{addr}") && !command.contains("{port}") {
            return Err(BenchError::new(
                "--server-cmd must contain `{addr}` (or `{port}`), the address the server \
                 should listen on",
            ));
        }
        let addr = free_loopback_addr()?;
        let port = addr.rsplit(':').next().unwrap_or_default();
        let command = command.replace("{addr}", &addr).replace("{port}", port);
        let log = std::env::temp_dir().join(format!(
            "lightning-store-bench-{}-{}.log",
            std::process::id(),
            addr.replace([':', '.'], "_")
        ));
        let log_file = std::fs::File::create(&log)
            .map_err(|e| BenchError::new(format!("cannot create {}: {e}", log.display())))?;
        // `exec` makes the server the shell's own process, so its pid is
        // the one that gets SIGTERM and whose memory is read.
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .map_err(|e| BenchError::new(format!("cannot open {}: {e}", log.display())))?,
            )
            .stderr(log_file)
            .spawn()
            .map_err(|e| BenchError::new(format!("cannot run `{command}`: {e}")))?;
        // A started server speaks TLS when the client is given a CA for it.
        let scheme = if args.connect.ca_cert.is_some() || args.server.starts_with("https:") {
            "https"
        } else {
            "http"
        };
        let mut target = Self {
            url: format!("{scheme}://{addr}"),
            connect: args.connect.clone(),
            bearer: bearer.clone(),
            tasks_per_channel: args.tasks_per_channel,
            spawned: Some(Spawned {
                child,
                command,
                log,
            }),
            probe,
        };
        if let Err(error) = target.wait_until_serving(startup).await {
            let _ = target.stop().await;
            return Err(error);
        }
        Ok(target)
    }

    /// Returns the `authorization` header of the token, if any.
    pub fn authorization(&self) -> BenchResult<Option<http::HeaderValue>> {
        self.connect.authorization().map_err(BenchError::new)
    }

    /// Returns the server's base URL, e.g. `http://127.0.0.1:4747`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Returns the options that point a client command of this binary at
    /// the server: `--server` and the TLS, token file and namespace options
    /// given (a token from the environment is inherited).
    pub fn client_args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec!["--server".into(), self.url.clone().into()];
        let c = &self.connect;
        for (flag, path) in [
            ("--token-file", &c.token_file),
            ("--ca-cert", &c.ca_cert),
            ("--client-cert", &c.client_cert),
            ("--client-key", &c.client_key),
        ] {
            if let Some(path) = path {
                args.extend([flag.into(), path.clone().into_os_string()]);
            }
        }
        for (flag, text) in [
            ("--tls-server-name", &c.tls_server_name),
            ("--namespace", &c.namespace),
        ] {
            if let Some(text) = text {
                args.extend([flag.into(), text.clone().into()]);
            }
        }
        args
    }

    /// Describes the server for the report: its URL, and the command when
    /// the benchmark started it.
    pub fn description(&self) -> String {
        match &self.spawned {
            Some(spawned) => format!("{} (started: {})", self.url, spawned.command),
            None => self.url.clone(),
        }
    }

    /// Returns the resident memory of the started server in bytes; `None`
    /// when the server was not started by the benchmark or /proc is unreadable.
    pub fn rss_bytes(&self) -> Option<u64> {
        let pid = self.spawned.as_ref()?.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// Connects channels for `clients` client tasks, `--tasks-per-channel` to a channel.
    pub async fn pool(&self, clients: usize) -> BenchResult<Pool> {
        let count = clients.div_ceil(self.tasks_per_channel).max(1);
        let endpoint = self.endpoint()?;
        let mut channels = Vec::with_capacity(count);
        for _ in 0..count {
            let channel = endpoint.connect().await.map_err(|e| {
                BenchError::new(format!(
                    "cannot connect to {}: {}",
                    self.url,
                    error_chain(&e)
                ))
            })?;
            channels.push(channel);
        }
        Ok(Pool {
            channels,
            bearer: self.bearer.clone(),
            tasks_per_channel: self.tasks_per_channel,
        })
    }

    /// Connects channels for `clients` client tasks as [`Target::pool`]
    /// does, whose calls all name `namespace`.
    pub async fn pool_in(&self, clients: usize, namespace: &str) -> BenchResult<Pool> {
        let mut pool = self.pool(clients).await?;
        let mut connect = self.connect.clone();
        connect.namespace = Some(namespace.to_owned());
        pool.bearer = connect.call_metadata().map_err(BenchError::new)?;
        Ok(pool)
    }

    fn endpoint(&self) -> BenchResult<Endpoint> {
        let endpoint = self.connect.endpoint(&self.url).map_err(BenchError::new)?;
        Ok(endpoint
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .tcp_nodelay(true))
    }

    /// Polls grpc.health.v1 until the server reports SERVING, the process
    /// exits or `timeout` passes.
    async fn wait_until_serving(&mut self, timeout: Duration) -> BenchResult<()> {
        let deadline = Instant::now() + timeout;
        let endpoint = self.endpoint()?.timeout(Duration::from_secs(1));
        loop {
            if let Some(spawned) = &mut self.spawned
                && let Ok(Some(status)) = spawned.child.try_wait()
            {
                return Err(BenchError::new(format!(
                    "the server exited during startup ({status}); its output is in {}",
                    spawned.log.display()
                )));
            }
            let serving = match self.probe {
                Probe::Grpc => match endpoint.connect().await {
                    Ok(channel) => HealthClient::new(channel)
                        .check(HealthCheckRequest {
                            service: String::new(),
                        })
                        .await
                        .is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32),
                    Err(_) => false,
                },
                Probe::Http => super::http::healthy(&self.url).await,
            };
            if serving {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let log = self
                    .spawned
                    .as_ref()
                    .map(|s| format!("; its output is in {}", s.log.display()))
                    .unwrap_or_default();
                return Err(BenchError::new(format!(
                    "the server at {} did not report SERVING within {timeout:?}{log}",
                    self.url
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the started server, if any: SIGTERM, then SIGKILL when it has
    /// not exited within the stop timeout. Its log is removed after a clean exit.
    pub async fn stop(&mut self) -> BenchResult<()> {
        let Some(spawned) = &mut self.spawned else {
            return Ok(());
        };
        if spawned.child.try_wait().ok().flatten().is_none() {
            terminate(&mut spawned.child);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match spawned.child.try_wait() {
                // Some servers (uvicorn) re-raise the SIGTERM they handled.
                Ok(Some(status)) if status.success() || stopped_by_sigterm(status) => {
                    let _ = std::fs::remove_file(&spawned.log);
                    return Ok(());
                }
                Ok(Some(status)) => {
                    return Err(BenchError::new(format!(
                        "the server exited with {status}; its output is in {}",
                        spawned.log.display()
                    )));
                }
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(None) => {
                    let _ = spawned.child.kill();
                    let _ = spawned.child.wait();
                    return Err(BenchError::new(format!(
                        "the server did not exit within {STOP_TIMEOUT:?} of SIGTERM and was killed"
                    )));
                }
                Err(e) => return Err(BenchError::new(format!("cannot wait for the server: {e}"))),
            }
        }
    }
}

impl Drop for Spawned {
    /// Kills a server left running by an interrupted benchmark.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Returns whether a process ended from the SIGTERM it was sent.
#[cfg(unix)]
fn stopped_by_sigterm(status: std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt as _;
    status.signal() == Some(libc::SIGTERM)
}

/// Returns whether a process ended from the termination it was sent: never
/// distinguishable from a failure where there are no signals.
#[cfg(not(unix))]
fn stopped_by_sigterm(_status: std::process::ExitStatus) -> bool {
    false
}

/// Sends SIGTERM to a child process.
#[cfg(unix)]
fn terminate(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our
        // own child, not yet reaped, so it cannot name another process.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

/// Ends a child process where there is no SIGTERM (Windows): it is killed.
#[cfg(not(unix))]
fn terminate(child: &mut Child) {
    let _ = child.kill();
}

/// Returns a loopback address with a port that was free a moment ago.
fn free_loopback_addr() -> BenchResult<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| BenchError::new(format!("cannot find a free port: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| BenchError::new(format!("cannot find a free port: {e}")))?;
    Ok(addr.to_string())
}

/// Channels shared by the client tasks of one run.
pub struct Pool {
    channels: Vec<Channel>,
    bearer: CallMetadata,
    tasks_per_channel: usize,
}

impl Pool {
    /// Returns the channel of client task `task`.
    pub fn channel(&self, task: usize) -> AuthChannel {
        let channel = self.channels[(task / self.tasks_per_channel) % self.channels.len()].clone();
        InterceptedService::new(channel, self.bearer.clone())
    }

    /// Returns a store client for client task `task`.
    pub fn store(&self, task: usize) -> StoreClient {
        LightningStoreServiceClient::new(self.channel(task)).max_decoding_message_size(usize::MAX)
    }

    /// Returns a client for the large calls (pre-encoded requests, counted responses).
    pub fn lean(&self, task: usize) -> LeanClient {
        LeanClient::new(self.channel(task))
    }

    /// Returns a health client for client task `task`.
    pub fn health(&self, task: usize) -> HealthClient<AuthChannel> {
        HealthClient::new(self.channel(task))
    }
}

/// Creates a rollout with a running attempt (StartRollout) whose input
/// names `task`; returns its rollout and attempt ids.
pub async fn start_rollout(client: &mut StoreClient, task: &str) -> BenchResult<(String, String)> {
    let rollout = client
        .start_rollout(lightning_store_proto::StartRolloutRequest {
            rollout: Some(lightning_store_proto::RolloutSpec {
                input_json: serde_json::json!({ "task": task }).to_string(),
                ..Default::default()
            }),
            worker_id: None,
        })
        .await?
        .into_inner()
        .rollout
        .ok_or_else(|| BenchError::new("StartRollout returned no rollout"))?;
    let attempt_id = rollout
        .attempt
        .map(|a| a.attempt_id)
        .ok_or_else(|| BenchError::new("StartRollout returned no attempt"))?;
    Ok((rollout.rollout_id, attempt_id))
}
