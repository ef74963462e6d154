//! `bench export`: how fast a whole store comes out through `lightning-store
//! export`, and what it costs the server's and the client's memory. Seeds
//! the store through the batch RPCs with `--rollouts` ended rollouts
//! (100,000 by default), each with `--spans-per-rollout` spans of an
//! agent-lightning 0.x agent (10: a root span, LLM calls with token ids, a
//! reward), then, for each layout and each format of the `export` command
//! (its value enums, so a format added there is measured here too), runs
//! the real command as a subprocess writing a file in a temporary
//! directory; the client's peak memory (its `VmHWM`) and the server's
//! resident memory are sampled while the export runs.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::ValueEnum as _;
use serde_json::json;

use super::args::SpanArgs;
use super::error::{BenchError, BenchResult};
use super::payload::TrainingSpans;
use super::report::{ExportRun, Report};
use super::seed;
use super::target::{Pool, Target};
use crate::client::{ExportFormat, ExportLayoutArg};
use lightning_store_formats::Format;
use lightning_store_proto as pb;

/// Rollouts whose spans go in one AddSpans call.
const SPAN_BATCH_ROLLOUTS: usize = 100;
/// One rollout in this many fails.
const FAIL_EVERY: usize = 10;
/// The worker that claims the seeded rollouts.
const WORKER: &str = "bench-export-worker";
/// How often the server's memory is sampled during an export.
const RSS_EVERY: Duration = Duration::from_millis(100);
/// What the export command's last line on standard error starts with.
const EXPORTED: &str = "exported: ";
/// The goals of issue #47 for the whole store on SQLite.
const GOAL_SECS: f64 = 60.0;
const GOAL_RSS_BYTES: u64 = 100_000_000;

/// Arguments of `bench export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportBenchArgs {
    /// Rollouts to seed, every one ended (one in ten failed).
    #[arg(long, default_value_t = 100_000)]
    rollouts: usize,
    /// Spans per rollout: the agent's root span, LLM calls, a reward span
    /// (at least 3).
    #[arg(long, default_value_t = 10)]
    spans_per_rollout: usize,
    #[command(flatten)]
    span: SpanArgs,
    /// Exports a store seeded by an earlier run (`--server` naming a
    /// durable one) instead of seeding it.
    #[arg(long)]
    no_seed: bool,
    /// The `lightning-store` binary that runs each export (default: this
    /// one).
    #[arg(long, value_name = "PATH")]
    client_exe: Option<PathBuf>,
    /// Stops an export after this many seconds (it is then reported as
    /// failed).
    #[arg(long, default_value_t = 600.0)]
    timeout_secs: f64,
}

/// Seeds the store (unless told not to), then runs every export.
pub async fn run(
    target: &mut Target,
    args: ExportBenchArgs,
    show_progress: bool,
) -> BenchResult<Report> {
    if args.spans_per_rollout < 3 {
        return Err(BenchError::new("--spans-per-rollout must be at least 3"));
    }
    let timeout = Duration::try_from_secs_f64(args.timeout_secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| BenchError::new("--timeout-secs must be a number > 0"))?;
    let exe = match &args.client_exe {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .map_err(|e| BenchError::new(format!("cannot find this binary: {e}")))?,
    };
    let pool = target.pool(seed::SPAN_CALLS_IN_FLIGHT).await?;
    let seed_secs = if args.no_seed {
        None
    } else {
        let started = Instant::now();
        seed(&pool, &args, show_progress).await?;
        Some(started.elapsed().as_secs_f64())
    };
    let statistics = pool
        .store(0)
        .get_statistics(pb::GetStatisticsRequest {})
        .await?
        .into_inner();
    let mut report = Report::new(
        "export",
        json!({
            "rollouts": statistics.total_rollouts,
            "spans": statistics.total_spans,
            "spans_per_rollout": args.spans_per_rollout,
            "span_bytes": args.span.span_bytes,
            "seed_secs": seed_secs,
        }),
    );
    if let Some(secs) = seed_secs {
        report.notes.push(format!(
            "seeded {} rollouts, {} spans in {secs:.1}s",
            statistics.total_rollouts, statistics.total_spans
        ));
    }
    let dir = std::env::temp_dir().join(format!(
        "lightning-store-bench-export-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::new(format!("cannot create {}: {e}", dir.display())))?;
    let mut runs = Ok(());
    for layout in ExportLayoutArg::value_variants() {
        for format in ExportFormat::value_variants() {
            let names = (value_name(layout), value_name(format));
            phase(show_progress, &format!("export {} {}", names.0, names.1));
            match export_once(target, &exe, names, &dir, timeout).await {
                Ok(run) => report.exports.push(run),
                Err(error) => runs = Err(error),
            }
            if runs.is_err() {
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    runs?;
    report.notes.extend(goals(&report.exports));
    Ok(report)
}

/// Says on standard error what the benchmark is doing, when it is shown.
fn phase(show: bool, what: &str) {
    if show {
        eprintln!("{what}");
    }
}

/// Returns the name a value of the command line goes by.
fn value_name(value: &impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// Says how each export stands against the goals (the whole store in
/// under a minute, the server's memory growing by under 100 MB).
fn goals(runs: &[ExportRun]) -> Vec<String> {
    runs.iter()
        .filter(|run| run.error.is_none())
        .map(|run| {
            let growth = run
                .server_rss_growth_bytes()
                .map_or("unknown".to_owned(), |g| {
                    format!("{:.1} MB", g as f64 / 1e6)
                });
            let met = run.elapsed_secs < GOAL_SECS
                && run
                    .server_rss_growth_bytes()
                    .is_some_and(|g| g < GOAL_RSS_BYTES);
            format!(
                "{} {}: {:.1}s (goal < {GOAL_SECS:.0}s), server RSS growth {growth} \
                 (goal < {} MB): {}",
                run.layout,
                run.format,
                run.elapsed_secs,
                GOAL_RSS_BYTES / 1_000_000,
                if met { "met" } else { "missed" }
            )
        })
        .collect()
}

/// Runs one export as a subprocess and measures it.
async fn export_once(
    target: &Target,
    exe: &Path,
    (layout, format): (String, String),
    dir: &Path,
    timeout: Duration,
) -> BenchResult<ExportRun> {
    let output = dir.join(format!("{layout}.{format}"));
    let log = dir.join(format!("{layout}.{format}.log"));
    let log_file = File::create(&log)
        .map_err(|e| BenchError::new(format!("cannot create {}: {e}", log.display())))?;
    let mut args: Vec<OsString> = vec!["export".into()];
    args.extend(target.client_args());
    args.extend(
        [
            "--layout",
            &layout,
            "--format",
            &format,
            "--output",
            &output.to_string_lossy(),
        ]
        .map(OsString::from),
    );
    let before = target.rss_bytes();
    let started = Instant::now();
    let child = Command::new(exe)
        .args(&args)
        .env_remove("LIGHTNING_STORE_SERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .map_err(|e| BenchError::new(format!("cannot run {}: {e}", exe.display())))?;
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| BenchError::new("the export's process id is out of range"))?;
    // The child is reaped here (its status read by pid), not by `Child`.
    let mut exited = tokio::task::spawn_blocking(move || wait_for(pid));
    let mut peak = before;
    let mut client_peak = None;
    let mut ticker = tokio::time::interval(RSS_EVERY);
    let mut killed = false;
    let status = loop {
        tokio::select! {
            result = &mut exited => {
                break result
                    .map_err(|e| BenchError::new(format!("the export's waiter failed: {e}")))?
                    .map_err(|e| BenchError::new(format!("cannot wait for the export: {e}")))?;
            }
            _ = ticker.tick() => {
                peak = peak.max(target.rss_bytes());
                client_peak = client_peak.max(peak_rss(pid));
                if !killed && started.elapsed() > timeout {
                    // SAFETY: `pid` is the child's, not yet reaped (the
                    // waiter reaps it), so it names no other process.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    killed = true;
                }
            }
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    drop(child);
    let after = target.rss_bytes();
    let peak = peak.max(after);
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    let error = if killed {
        Some(format!("stopped after {}s", timeout.as_secs_f64()))
    } else if !exited_cleanly(status) {
        Some(format!(
            "the export failed ({}): {}",
            describe(status),
            stderr.lines().last().unwrap_or_default()
        ))
    } else {
        None
    };
    let rollouts = stderr
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(EXPORTED))
        .and_then(|rest| rest.split('/').next())
        .and_then(|count| count.parse::<u64>().ok());
    let bytes = std::fs::metadata(&output).map_or(0, |m| m.len());
    let records = Format::parse(&format).and_then(|f| f.count_records(&output).ok());
    // The file is measured; it is not kept (a whole store's export is large).
    let _ = std::fs::remove_file(&output);
    Ok(ExportRun {
        layout,
        format,
        rollouts,
        records,
        bytes,
        elapsed_secs: elapsed,
        rollouts_per_sec: rollouts.map(|n| n as f64 / elapsed),
        mb_per_sec: bytes as f64 / 1e6 / elapsed,
        server_rss_before_bytes: before,
        server_rss_peak_bytes: peak,
        server_rss_after_bytes: after,
        client_peak_rss_bytes: client_peak,
        error,
    })
}

/// Returns the peak resident memory (`VmHWM`) of the running process
/// `pid` in bytes. Not `ru_maxrss` at its exit: Linux carries the spawning
/// process's peak over into its child's across the `exec`, so a child
/// smaller than the benchmark would report the benchmark's.
fn peak_rss(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Waits for the child `pid` to exit and reaps it; returns its wait status.
fn wait_for(pid: libc::pid_t) -> std::io::Result<libc::c_int> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a live local of the right type.
        let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
        if reaped == pid {
            return Ok(status);
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

fn exited_cleanly(status: libc::c_int) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

fn describe(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else {
        format!("signal {}", libc::WTERMSIG(status))
    }
}

/// Seeds the store: rollouts enqueued and claimed in batches, their spans
/// (a few AddSpans calls in flight), then their attempts completed, one in
/// ten failed.
async fn seed(pool: &Pool, args: &ExportBenchArgs, show_progress: bool) -> BenchResult<()> {
    let mut client = pool.store(0);
    phase(show_progress, "seeding: enqueuing");
    seed::enqueue(&mut client, args.rollouts, |i| pb::RolloutSpec {
        input_json: json!({ "task": i, "question": format!("what is {i} + {i}?") }).to_string(),
        mode: pb::RolloutMode::Train as i32,
        ..Default::default()
    })
    .await?;
    phase(show_progress, "seeding: claiming");
    let claimed = seed::claim(&mut client, args.rollouts, |_| WORKER.to_owned()).await?;
    phase(show_progress, "seeding: spans");
    let spans = TrainingSpans::new(args.span.span_bytes);
    seed::add_spans(pool, &claimed, SPAN_BATCH_ROLLOUTS, |_, c, ids| {
        spans.spans(&c.rollout_id, &c.attempt_id, args.spans_per_rollout, ids)
    })
    .await?;
    phase(show_progress, "seeding: completing");
    seed::complete(&mut client, &claimed, |i| {
        Some(seed::failing_one_in(FAIL_EVERY, i))
    })
    .await
}
