//! agent-lightning 0.x against lightning-store, with its own code: runs the
//! Python tests in `tests/agl0/` (agent-lightning 0.3.0's
//! `LightningStoreClient`, runner loop and tracer, the OpenTelemetry SDK's
//! exporters, and a byte-for-byte differential against `agl store`) with
//! the `agl0` environment's pytest, against a server per backend started
//! here, and in a namespace (`/ns/run-a`, selected by the URL alone). The environment is created by `tools/pyenv.sh` once per checkout.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::http::{HttpClient, Version};
use common::{Backend, TestServer};

/// Longest the Python tests may run (agent-lightning's import alone takes
/// seconds on a loaded machine).
const PYTEST_DEADLINE: Duration = Duration::from_secs(600);
/// Longest `agl store` may take to answer its health route.
const AGL_STORE_STARTUP: Duration = Duration::from_secs(120);

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Returns the `agl0` Python environment, creating it on first use.
async fn agl0_environment() -> PathBuf {
    let output = tokio::process::Command::new(repository().join("tools/pyenv.sh"))
        .arg("agl0")
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("tools/pyenv.sh runs");
    assert!(output.status.success(), "tools/pyenv.sh agl0 failed");
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// agent-lightning's own store server, `agl store`, on a free loopback port.
struct AglStore {
    child: tokio::process::Child,
    url: String,
}

impl AglStore {
    async fn start(venv: &Path) -> Self {
        // A free port: bound, then released for the server.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = tokio::process::Command::new(venv.join("bin/agl"))
            .args(["store", "--host", "127.0.0.1", "--port", &port.to_string()])
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("agl store starts");
        let addr = format!("127.0.0.1:{port}").parse().unwrap();
        let http = HttpClient::new(addr, Version::Http1);
        // Its health route answers once uvicorn serves; until then the
        // connection is refused.
        tokio::time::timeout(AGL_STORE_STARTUP, async {
            loop {
                if http
                    .try_get("/v1/agl/health")
                    .await
                    .is_some_and(|r| r.status == 200)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await
        .expect("agl store answers its health route");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn stop(mut self) {
        self.child.kill().await.expect("agl store stops");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_lightning_0x_runs_unchanged_against_every_backend() {
    skip_without!(crate::common::Tool::Python);
    let venv = agl0_environment().await;
    let memory = TestServer::start(Backend::Memory).await;
    let sqlite = TestServer::start(Backend::Sqlite).await;
    // The same tests again in a namespace of the SQLite server, which
    // agent-lightning's client selects by its URL alone.
    sqlite
        .client()
        .await
        .create_namespace(lightning_store::proto::CreateNamespaceRequest {
            name: "run-a".into(),
            quotas: None,
            span_retention: None,
        })
        .await
        .unwrap();
    let upstream = AglStore::start(&venv).await;

    let run = tokio::process::Command::new(venv.join("bin/python"))
        .args(["-m", "pytest", "-q", "tests/agl0"])
        .current_dir(repository())
        .env(
            "LIGHTNING_STORE_URLS",
            format!(
                "memory={},sqlite={},sqlite-run-a={}/ns/run-a",
                memory.url, sqlite.url, sqlite.url
            ),
        )
        .env("AGL_STORE_URL", &upstream.url)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(PYTEST_DEADLINE, run)
        .await
        .expect("pytest finishes in time")
        .expect("pytest runs");

    upstream.stop().await;
    memory.stop().await;
    sqlite.stop().await;
    assert!(
        output.status.success(),
        "the agent-lightning tests failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
