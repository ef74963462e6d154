//! `bench console`: what open console pages cost the store, and how soon a
//! change reaches them.
//!
//! Phases of unary lifecycles (the `lifecycle` scenario's load) alternate
//! without and with `--pages` live pages open (event streams read as a
//! browser reads them, spread over the Overview, the Rollouts page, a
//! filtered Rollouts page, the Workers and the Models pages), the order
//! swapped every round so that neither kind always runs first on a warmer
//! store; the lifecycles' latencies of each kind are merged and compared
//! (p50 and p99 ratios). Meanwhile a probe page follows one rollout: each
//! probe changes it through gRPC (UpdateRollout of its metadata) and times
//! the update's arrival on the page; probes also run with no load and no
//! other page (a quiet spell before each). The server's resident memory is read when
//! the benchmark started the server, before and with the pages open on a
//! store that does not grow meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::args::SpanArgs;
use super::driver::Measured;
use super::error::{BenchError, BenchResult};
use super::lifecycle::unary_load;
use super::limits::Limits;
use super::payload::StoreSpan;
use super::report::{Report, Row, RowSpec};
use super::stats::{Counters, Recorder};
use super::target::{StoreClient, Target, start_rollout};
use lightning_store_proto as pb;

/// The pages the live pages are spread over, in turn.
const PAGES: [&str; 5] = [
    "/",
    "/console/rollouts",
    "/console/rollouts?status=running&status=preparing",
    "/console/workers",
    "/console/models",
];

/// The longest wait for a probe's update.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The quiet before each probe with no load: longer than the hub's rounds
/// are apart, so that each probe times a change that wakes a quiet hub.
const IDLE_GAP: Duration = Duration::from_millis(400);

/// Changes made while the pages are open for the memory measurement.
const MEMORY_CHANGES: usize = 20;

/// Arguments of `bench console`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConsoleArgs {
    /// Live pages (browser tabs) open during the phases with pages.
    #[arg(long, default_value_t = 100)]
    pages: usize,
    /// Rounds, each one phase without and one with pages.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds of each phase.
    #[arg(long, default_value_t = 5.0)]
    phase_secs: f64,
    /// Concurrent lifecycle clients.
    #[arg(long, short = 'c', default_value_t = 16)]
    concurrency: usize,
    /// Probes (changes timed to an open page) with no load.
    #[arg(long, default_value_t = 40)]
    probes: usize,
    #[command(flatten)]
    spans: SpanArgs,
}

/// What the live pages received.
#[derive(Default)]
struct Received {
    updates: AtomicU64,
    bytes: AtomicU64,
}

/// Opens a page's event stream; returns a receiver of each update's
/// arrival time, and counts what arrives in `received`.
async fn open_page(
    authority: &str,
    path: &str,
    authorization: Option<&http::HeaderValue>,
    received: Arc<Received>,
    tasks: &mut JoinSet<()>,
) -> BenchResult<mpsc::UnboundedReceiver<Instant>> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| BenchError::new(format!("cannot connect to {authority}: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| BenchError::new(format!("cannot talk HTTP to {authority}: {e}")))?;
    tasks.spawn(async move {
        let _ = connection.await;
    });
    let mut request = http::Request::builder()
        .uri(path)
        .header(http::header::HOST, authority)
        .header(http::header::ACCEPT, "text/event-stream");
    if let Some(value) = authorization {
        request = request.header(http::header::AUTHORIZATION, value.clone());
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| BenchError::new(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| BenchError::new(format!("GET {path}: {e}")))?;
    if response.status() != http::StatusCode::OK {
        return Err(BenchError::new(format!(
            "GET {path} as an event stream: {} (is the console on? --console true)",
            response.status()
        )));
    }
    let (arrivals, updates) = mpsc::unbounded_channel();
    let mut body = response.into_body();
    tasks.spawn(async move {
        // The server sends each update as one chunk that starts with its
        // `id:` line (and keep-alives as comments), so a data frame that
        // starts so is an update; nothing else needs to be read.
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            received
                .bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            if data.starts_with(b"id: ") {
                received.updates.fetch_add(1, Ordering::Relaxed);
                let _ = arrivals.send(Instant::now());
            }
        }
    });
    Ok(updates)
}

/// A page that follows one rollout and times how soon a change reaches it.
struct Probe {
    client: StoreClient,
    rollout_id: String,
    updates: mpsc::UnboundedReceiver<Instant>,
    changes: u64,
}

impl Probe {
    async fn open(
        target: &Target,
        client: StoreClient,
        tasks: &mut JoinSet<()>,
    ) -> BenchResult<Self> {
        let mut client = client;
        let (rollout_id, _) = start_rollout(&mut client, "bench-console-probe").await?;
        let authorization = target.authorization()?;
        let mut updates = open_page(
            authority(target)?,
            &format!("/console/rollouts/{rollout_id}"),
            authorization.as_ref(),
            Arc::default(),
            tasks,
        )
        .await?;
        // The page's first render arrives at once (the page asked for
        // everything after position 0).
        tokio::time::timeout(PROBE_TIMEOUT, updates.recv())
            .await
            .map_err(|_| BenchError::new("the probe page got no first render"))?;
        Ok(Self {
            client,
            rollout_id,
            updates,
            changes: 0,
        })
    }

    /// Changes the rollout and waits for the page's update; records the
    /// time from the call to the update.
    async fn probe(&mut self, recorder: &mut Recorder) {
        while self.updates.try_recv().is_ok() {}
        self.changes += 1;
        let started = Instant::now();
        let update = self.client.update_rollout(pb::UpdateRolloutRequest {
            rollout_id: self.rollout_id.clone(),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["metadata_json".to_owned()],
            }),
            metadata_json: json!({ "probe": self.changes }).to_string(),
            ..Default::default()
        });
        if let Err(status) = update.await {
            recorder.failure(super::stats::status_text(&status));
            return;
        }
        match tokio::time::timeout(PROBE_TIMEOUT, self.updates.recv()).await {
            Ok(Some(arrived)) => recorder.success(arrived.duration_since(started), 1, 0),
            Ok(None) => recorder.failure("the probe page's stream ended".to_owned()),
            Err(_) => recorder.failure(format!("no update within {PROBE_TIMEOUT:?}")),
        }
    }
}

fn authority(target: &Target) -> BenchResult<&str> {
    target
        .url()
        .strip_prefix("http://")
        .ok_or_else(|| BenchError::new("bench console speaks plain HTTP (no TLS)"))
}

/// Runs the scenario.
pub async fn run(target: &mut Target, args: ConsoleArgs, progress: bool) -> BenchResult<Report> {
    if args.rounds == 0 || args.pages == 0 {
        return Err(BenchError::new("--rounds and --pages must be at least 1"));
    }
    let phase = Duration::try_from_secs_f64(args.phase_secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| BenchError::new("--phase-secs must be a number > 0"))?;
    let limits = Limits {
        count: u64::MAX,
        duration: phase,
    };
    let span = StoreSpan::new(args.spans.span_bytes);
    let pool = target.pool(args.concurrency + 1).await?;
    let mut report = Report::new(
        "console",
        json!({
            "pages": args.pages,
            "rounds": args.rounds,
            "phase_secs": args.phase_secs,
            "concurrency": args.concurrency,
            "span_bytes": span.encoded_len(),
            "page_mix": PAGES,
        }),
    );
    let authorization = target.authorization()?;
    let mut tasks = JoinSet::new();

    // Probes with no load and no other page.
    let mut probe = Probe::open(target, pool.store(args.concurrency), &mut tasks).await?;
    let mut idle = Recorder::new(Arc::new(Counters::default()));
    let started = Instant::now();
    for _ in 0..args.probes {
        tokio::time::sleep(IDLE_GAP).await;
        probe.probe(&mut idle).await;
    }
    let idle = Measured {
        recorder: idle,
        elapsed: started.elapsed(),
    };

    // The server's memory with the pages open and updated, on a store that
    // does not grow meanwhile (only the probe's rollout changes).
    let memory = match target.rss_bytes() {
        Some(before) => {
            let counted = Arc::new(Received::default());
            let mut page_tasks = JoinSet::new();
            for index in 0..args.pages {
                open_page(
                    authority(target)?,
                    PAGES[index % PAGES.len()],
                    authorization.as_ref(),
                    counted.clone(),
                    &mut page_tasks,
                )
                .await?;
            }
            let mut discard = Recorder::new(Arc::new(Counters::default()));
            for _ in 0..MEMORY_CHANGES {
                probe.probe(&mut discard).await;
            }
            let open = target.rss_bytes().unwrap_or(before);
            page_tasks.shutdown().await;
            Some((before, open, counted.updates.load(Ordering::Relaxed)))
        }
        None => None,
    };

    let mut without: Option<Measured> = None;
    let mut with: Option<Measured> = None;
    let mut loaded = Recorder::new(Arc::new(Counters::default()));
    let received = Arc::new(Received::default());
    let mut page_seconds = 0.0;
    for round in 0..args.rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for pages in order {
            let label = format!(
                "round {} of {}, {} pages",
                round + 1,
                args.rounds,
                if pages { args.pages } else { 0 }
            );
            let mut page_tasks = JoinSet::new();
            if pages {
                for index in 0..args.pages {
                    open_page(
                        authority(target)?,
                        PAGES[index % PAGES.len()],
                        authorization.as_ref(),
                        received.clone(),
                        &mut page_tasks,
                    )
                    .await?;
                }
            }
            let opened = Instant::now();
            let load = unary_load(&pool, args.concurrency, limits, &span, 10, &label, progress);
            // Probes run beside the load, on the pages' phases only.
            let probing = async {
                if !pages {
                    return;
                }
                let deadline = opened + phase;
                while Instant::now() + Duration::from_millis(500) < deadline {
                    probe.probe(&mut loaded).await;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            };
            let (measured, ()) = tokio::join!(load, probing);
            let measured = measured?;
            if pages {
                page_seconds += opened.elapsed().as_secs_f64() * args.pages as f64;
            }
            page_tasks.shutdown().await;
            let merged = if pages { &mut with } else { &mut without };
            match merged {
                Some(merged) => merged.append(&measured),
                None => *merged = Some(measured),
            }
        }
    }
    tasks.shutdown().await;
    let (without, with) = (without.expect("a phase ran"), with.expect("a phase ran"));
    let lifecycle = |name: String| RowSpec {
        name,
        clients: args.concurrency,
        op_unit: "lifecycles",
        item_unit: Some("spans"),
        latency_of: "one lifecycle (4 calls in sequence)",
    };
    let without_row = Row::new(lifecycle("lifecycle, no live page".to_owned()), &without);
    let with_row = Row::new(
        lifecycle(format!("lifecycle, {} live pages", args.pages)),
        &with,
    );
    let probe_row = |name: String, measured: &Measured| {
        Row::new(
            RowSpec {
                name,
                clients: 1,
                op_unit: "changes",
                item_unit: None,
                latency_of: "a change (UpdateRollout) until the open page received its update",
            },
            measured,
        )
    };
    let loaded = Measured {
        recorder: loaded,
        elapsed: with.elapsed,
    };
    report.notes.push(format!(
        "with {} live pages / without: p50 x{:.2}, p99 x{:.2}, throughput x{:.2}",
        args.pages,
        with_row.latency.p50_ms / without_row.latency.p50_ms.max(f64::MIN_POSITIVE),
        with_row.latency.p99_ms / without_row.latency.p99_ms.max(f64::MIN_POSITIVE),
        with_row.ops_per_sec / without_row.ops_per_sec.max(f64::MIN_POSITIVE),
    ));
    let updates = received.updates.load(Ordering::Relaxed);
    let bytes = received.bytes.load(Ordering::Relaxed);
    report.notes.push(format!(
        "the live pages received {updates} updates ({:.1} MiB): {:.2} updates per page per second",
        bytes as f64 / 1048576.0,
        updates as f64 / page_seconds.max(f64::MIN_POSITIVE),
    ));
    if let Some((before, open, updates)) = memory {
        report.notes.push(format!(
            "server RSS: {:.1} MiB before, {:.1} MiB with {} pages open after {updates} updates \
             ({:+.1} KiB per page)",
            before as f64 / 1048576.0,
            open as f64 / 1048576.0,
            args.pages,
            (open as f64 - before as f64) / 1024.0 / args.pages as f64,
        ));
    }
    report.rows.push(without_row);
    report.rows.push(with_row);
    report
        .rows
        .push(probe_row("change to an open page, idle".to_owned(), &idle));
    report.rows.push(probe_row(
        format!(
            "change to an open page, under load with {} pages",
            args.pages
        ),
        &loaded,
    ));
    Ok(report)
}
