//! The server's logs: one JSON object per line when asked for JSON, one
//! line per finished call carrying the call's request id, and colours only
//! on a terminal.

use crate::common;

use common::ServerProcess;
use lightning_store::proto as pb;
use serde_json::Value;

#[tokio::test]
async fn json_logs_carry_request_ids_one_line_per_call() {
    let server = ServerProcess::start(&[
        "--store",
        "memory",
        "--log",
        "info,lightning_store=debug",
        "--create-namespaces",
    ]);
    let mut client = server.client().await;
    let mut request = tonic::Request::new(pb::GetRolloutRequest {
        rollout_id: "ro-missing".to_owned(),
    });
    request
        .metadata_mut()
        .insert("x-request-id", "log-test-1".parse().unwrap());
    let error = client.get_rollout(request).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound);
    let mut request = tonic::Request::new(pb::EnqueueRolloutRequest::default());
    request
        .metadata_mut()
        .insert("x-request-id", "log-test-2".parse().unwrap());
    let response = client.enqueue_rollout(request).await.unwrap();
    // The server's time on the call, in milliseconds.
    let timing = response.metadata().get("server-timing").unwrap();
    let millis: f64 = timing.to_str().unwrap()["app;dur=".len()..]
        .parse()
        .unwrap();
    assert!((0.0..10_000.0).contains(&millis), "{timing:?}");

    // A call in a namespace logs its name.
    let mut request = tonic::Request::new(pb::GetRolloutRequest {
        rollout_id: "ro-missing".to_owned(),
    });
    let metadata = request.metadata_mut();
    metadata.insert("x-request-id", "log-test-3".parse().unwrap());
    metadata.insert("lightning-store-namespace", "run-a".parse().unwrap());
    client.get_rollout(request).await.unwrap_err();

    drop(client);
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit {status:?}\n{log}");
    let records: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let calls_of = |request_id: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["span"]["request_id"] == request_id)
            .filter(|r| {
                r["fields"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("call ")
            })
            .collect()
    };

    let failed = calls_of("log-test-1");
    assert_eq!(failed.len(), 1, "{log}");
    assert_eq!(failed[0]["level"], "INFO");
    assert_eq!(failed[0]["fields"]["message"], "call failed");
    assert_eq!(failed[0]["fields"]["code"], "NOT_FOUND");
    assert_eq!(failed[0]["fields"]["error"], "Rollout ro-missing not found");
    assert_eq!(
        failed[0]["span"]["method"],
        "lightningstore.v1.LightningStoreService/GetRollout"
    );
    assert!(failed[0]["fields"]["duration_ms"].as_f64().unwrap() >= 0.0);

    assert!(failed[0]["span"].get("namespace").is_none(), "{log}");
    let in_namespace = calls_of("log-test-3");
    assert_eq!(in_namespace.len(), 1, "{log}");
    assert_eq!(in_namespace[0]["span"]["namespace"], "run-a", "{log}");

    let finished = calls_of("log-test-2");
    assert_eq!(finished.len(), 1, "{log}");
    assert_eq!(finished[0]["level"], "DEBUG");
    assert_eq!(finished[0]["fields"]["code"], "OK");
    assert!(log.contains("shutting down"), "{log}");
    assert!(!log.contains("drain deadline passed"), "{log}");
}

/// A request id that could forge log fields or lines
/// (spaces, quotes, `=`, bytes outside ASCII) is replaced by a generated
/// id before anything logs or echoes it; a plain one is kept.
#[tokio::test]
async fn unsafe_request_ids_are_replaced_in_text_logs() {
    let server = ServerProcess::start_with_env(
        &[
            "--store",
            "memory",
            "--log-format",
            "text",
            "--log",
            "info,lightning_store=debug",
        ],
        &[("NO_COLOR", "1")],
    );
    let mut client = server.client().await;
    let mut echoed = Vec::new();
    for sent in [
        "forged code=OK error=\"none\"",
        "tab\tseparated",
        "quote\"d",
        "kept-id_1.2:3",
    ] {
        let mut request = tonic::Request::new(pb::GetRolloutRequest {
            rollout_id: "ro-missing".to_owned(),
        });
        request
            .metadata_mut()
            .insert("x-request-id", sent.parse().unwrap());
        let status = client.get_rollout(request).await.unwrap_err();
        let id = status
            .metadata()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap();
        echoed.push((sent, id.to_owned()));
    }
    let http = common::http::HttpClient::new(server.addr, common::http::Version::Http1);
    let latin = http
        .request(
            "GET",
            "/v1/agl/health",
            &[("x-request-id", "caf\u{e9}")],
            "",
        )
        .await;
    drop(client);
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit {status:?}\n{log}");

    for (sent, id) in &echoed[..3] {
        assert_eq!(id.len(), 32, "{sent:?} was echoed as {id:?}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id:?}");
        assert!(log.contains(&format!("request_id={id}")), "{log}");
    }
    assert_eq!(echoed[3].1, "kept-id_1.2:3");
    assert!(log.contains("request_id=kept-id_1.2:3"), "{log}");
    assert_eq!(latin.headers["x-request-id"].len(), 32);
    for forged in ["forged", "tab", "quote", "caf"] {
        assert!(!log.contains(forged), "{forged} reached the log:\n{log}");
    }
}

/// Text logs are coloured on a terminal only: a pipe (a file, a log
/// collector) gets plain lines, and `NO_COLOR` turns colours off on a
/// terminal too.
#[test]
fn text_logs_are_coloured_only_on_a_terminal() {
    let piped = text_log_until_serving(Stderr::Pipe, None);
    assert!(
        !piped.contains('\x1b'),
        "escape codes in a pipe:\n{piped:?}"
    );

    let terminal = text_log_until_serving(Stderr::Terminal, None);
    assert!(
        terminal.contains("\x1b["),
        "no colours on a terminal:\n{terminal:?}"
    );

    let no_color = text_log_until_serving(Stderr::Terminal, Some("1"));
    assert!(
        !no_color.contains('\x1b'),
        "escape codes despite NO_COLOR:\n{no_color:?}"
    );
}

/// Where a text-logging server's stderr goes in [`text_log_until_serving`].
enum Stderr {
    /// A pipe, as when logs are redirected to a file or a collector.
    Pipe,
    /// The terminal side of a new pseudo-terminal.
    Terminal,
}

/// Starts `serve` logging text to `stderr`, with `NO_COLOR` set to
/// `no_color` (unset when `None`), reads its log up to the line saying it
/// serves, kills it, and returns what it read.
fn text_log_until_serving(stderr: Stderr, no_color: Option<&str>) -> String {
    use std::io::Read as _;
    use std::process::{Command, Stdio};

    let mut command = Command::new(env!("CARGO_BIN_EXE_lightning-store"));
    command
        .args(["serve", "--store", "memory", "--listen", "127.0.0.1:0"])
        .args(["--log-format", "text", "--log", "info"])
        .env_remove("NO_COLOR")
        .env_remove("LIGHTNING_STORE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(value) = no_color {
        command.env("NO_COLOR", value);
    }
    let (mut child, mut reader): (std::process::Child, Box<dyn std::io::Read + Send>) = match stderr
    {
        Stderr::Pipe => {
            command.stderr(Stdio::piped());
            let mut child = command.spawn().expect("the binary starts");
            let pipe = child.stderr.take().unwrap();
            (child, Box::new(pipe))
        }
        Stderr::Terminal => {
            let (controller, terminal) = pseudo_terminal();
            command.stderr(Stdio::from(terminal));
            (
                command.spawn().expect("the binary starts"),
                Box::new(controller),
            )
        }
    };
    // The command holds this process's copy of the terminal side: without
    // it, the reader sees the end once the server has exited.
    drop(command);
    let (lines, received) = std::sync::mpsc::channel();
    let reading = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        // A pseudo-terminal answers EIO once its last writer is gone.
        while let Ok(read @ 1..) = reader.read(&mut buffer) {
            if lines.send(buffer[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !log
        .split_once("serving gRPC and HTTP")
        .is_some_and(|(_, rest)| rest.contains('\n'))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match received.recv_timeout(left) {
            Ok(bytes) => log.push_str(&String::from_utf8_lossy(&bytes)),
            Err(_) => {
                let _ = child.kill();
                panic!("the server did not say it serves:\n{log:?}");
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    reading.join().unwrap();
    log
}

/// Opens a new pseudo-terminal: its controlling side (read what the
/// programs write) and its terminal side (given to a program as stderr).
fn pseudo_terminal() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd as _;

    // SAFETY: posix_openpt returns a new descriptor this function owns
    // (checked); grantpt, unlockpt and ptsname_r only act on it, and
    // ptsname_r writes at most the buffer's length, NUL included.
    unsafe {
        let controller = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            controller >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let controller = std::fs::File::from_raw_fd(controller);
        let fd = std::os::fd::AsRawFd::as_raw_fd(&controller);
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
        let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap();
        let terminal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        (controller, terminal)
    }
}
