//! Live pages: the browser opens its page's own URL as an event stream
//! (`Accept: text/event-stream`), and the server pushes the page's main
//! region, re-rendered, whenever the store changes what it shows.
//!
//! One hub per namespace does the work, however many tabs are open: it
//! follows the namespace's engine's event subscription (the one `WatchEvents` uses,
//! gapless, gaps read from the store's history) and the engine's hints of
//! 1.x event appends, marks the open views that a change makes stale
//! ([`View::affected_by`]), and renders each stale view once per round,
//! for every tab that shows it. Rounds are at most [`MIN_ROUND_INTERVAL`]
//! apart and start [`COALESCE`] after the first change, so that a burst is
//! one render and a change reaches an open page well within half a
//! second. The hub runs only while live pages are open: an idle console
//! costs the store nothing.
//!
//! Each stream keeps only the latest render of its view (a `watch`) and
//! hands the connection one frame at a time, the frame's bytes shared by
//! every stream of the view; a browser that reads nothing for
//! `stream_timeout` is dropped, as slow subscribers are. Streams end when
//! the server starts shutting down, so the drain never waits for them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use parking_lot::Mutex;
use std::future::Future as _;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot, watch};
use tokio::time::Instant;

use super::layout::error_panel;
use super::view::{View, ViewKey};
use crate::context::{ConsoleConfig, Sources};
use lightning_store_core::events::Event;
use lightning_store_core::subscription::SubscriptionError;

/// How long after the first change of a quiet spell a round starts, so
/// that the changes of one burst are rendered together.
const COALESCE: Duration = Duration::from_millis(50);

/// The shortest time between two rounds' starts: a view is rendered at
/// most this often, whatever the store's write rate.
const MIN_ROUND_INTERVAL: Duration = Duration::from_millis(250);

/// How often the hub checks whether any live page is still open.
const IDLE_CHECK: Duration = Duration::from_secs(5);

/// How often an idle stream sends a comment, so that proxies keep it and a
/// browser that went away is noticed.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// How long a browser waits before reconnecting a stream that ended.
const RECONNECT: &str = "retry: 2000\n\n";

/// How long the hub waits before following the events again after its
/// subscription failed.
const RESUBSCRIBE: Duration = Duration::from_secs(1);

/// A render of a view, as an event-stream frame.
#[derive(Debug)]
pub struct Update {
    /// The position in the event history the render reflects (at least).
    pub seq: u64,
    html: String,
    frame: Bytes,
}

impl Update {
    fn new(seq: u64, html: String) -> Self {
        let mut frame = format!("id: {seq}\nevent: update\n");
        for line in html.replace("\r\n", "\n").replace('\r', "\n").split('\n') {
            frame.push_str("data: ");
            frame.push_str(line);
            frame.push('\n');
        }
        frame.push('\n');
        Self {
            seq,
            html,
            frame: Bytes::from(frame),
        }
    }
}

/// A view with open live pages.
struct LiveView {
    latest: watch::Sender<Option<Arc<Update>>>,
    /// Stale: rendered at the next round.
    dirty: AtomicBool,
    /// The last render showed a waiting rollout.
    waiting: AtomicBool,
    /// The oldest position a page of the view was rendered at without a
    /// later update: a hub that starts past it renders the view at once.
    seen: AtomicU64,
}

#[derive(Default)]
struct HubState {
    views: HashMap<ViewKey, Arc<LiveView>>,
    running: bool,
    /// The sequence number of the last event the running hub saw.
    position: u64,
}

/// The live pages of one namespace.
pub struct Hub {
    sources: Arc<Sources>,
    state: Mutex<HubState>,
    /// Wakes the hub: a view that needs a render was registered.
    kick: Notify,
    /// One place per open stream, shared by every namespace's hub.
    places: Arc<Semaphore>,
}

impl Hub {
    /// Returns the hub of the namespace `sources` reads from, whose
    /// streams take their places from the server's `places`.
    pub fn new(sources: Arc<Sources>, places: Arc<Semaphore>) -> Arc<Self> {
        Arc::new(Self {
            sources,
            state: Mutex::new(HubState::default()),
            kick: Notify::new(),
            places,
        })
    }

    /// Registers a live page of `key` rendered at position `after`: returns
    /// the receiver of its updates, the first one at once when a newer
    /// render exists or the hub knows of newer events.
    fn watch(self: &Arc<Self>, key: ViewKey, after: u64) -> watch::Receiver<Option<Arc<Update>>> {
        let mut state = self.state.lock();
        let view = state
            .views
            .entry(key)
            .or_insert_with(|| {
                Arc::new(LiveView {
                    latest: watch::Sender::new(None),
                    dirty: AtomicBool::new(false),
                    waiting: AtomicBool::new(false),
                    seen: AtomicU64::new(u64::MAX),
                })
            })
            .clone();
        let mut receiver = view.latest.subscribe();
        let newer = view
            .latest
            .borrow()
            .as_ref()
            .is_some_and(|update| update.seq > after);
        if newer {
            receiver.mark_changed();
        } else {
            view.seen.fetch_min(after, Ordering::Relaxed);
            if state.running && state.position > after {
                view.dirty.store(true, Ordering::Relaxed);
                self.kick.notify_one();
            }
        }
        if !state.running {
            state.running = true;
            tokio::spawn(self.clone().run());
        }
        receiver
    }

    /// Follows the store's events while live pages are open.
    async fn run(self: Arc<Self>) {
        let engine = self.sources.engine.clone();
        let mut closing = engine.closing();
        let mut appended = engine.events().subscribe_appended();
        let mut idle = tokio::time::interval(IDLE_CHECK);
        idle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_round: Option<Instant> = None;
        let mut last_round: Option<Instant> = None;
        'subscribe: loop {
            let mut subscription = match engine.subscribe(None).await {
                Ok(subscription) => subscription,
                Err(SubscriptionError::Closing) => break,
                Err(error) => {
                    tracing::warn!(%error, "console: cannot follow the store's events");
                    tokio::select! {
                        () = tokio::time::sleep(RESUBSCRIBE) => {}
                        _ = closing.changed() => {}
                    }
                    if *closing.borrow() {
                        break;
                    }
                    if self.stop_if_idle() {
                        return;
                    }
                    continue;
                }
            };
            if self.start_at(subscription.last_seq()) {
                schedule(&mut next_round, last_round);
            }
            loop {
                let round = async {
                    match next_round {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let render = tokio::select! {
                    next = subscription.next() => match next {
                        Ok(event) => self.note(&event),
                        Err(SubscriptionError::Closing) => break 'subscribe,
                        Err(error) => {
                            tracing::warn!(%error, "console: live updates lost their place in the store's events");
                            continue 'subscribe;
                        }
                    },
                    hint = appended.recv() => match hint {
                        Ok(rollout_id) => self.mark(|view| view.affected_by_append(&rollout_id)),
                        Err(RecvError::Lagged(_)) => self.mark(|_| true),
                        Err(RecvError::Closed) => false,
                    },
                    () = self.kick.notified() => true,
                    () = round => {
                        next_round = None;
                        last_round = Some(Instant::now());
                        self.render_round().await;
                        false
                    }
                    _ = idle.tick() => {
                        if self.stop_if_idle() {
                            return;
                        }
                        false
                    }
                    changed = closing.changed() => {
                        if changed.is_err() || *closing.borrow() {
                            break 'subscribe;
                        }
                        false
                    }
                };
                if render {
                    schedule(&mut next_round, last_round);
                }
            }
        }
        self.state.lock().running = false;
    }

    /// Notes where the hub starts following: views whose pages were
    /// rendered before are stale. Returns whether any is.
    fn start_at(&self, position: u64) -> bool {
        let mut state = self.state.lock();
        state.position = position;
        let mut stale = false;
        for view in state.views.values() {
            if view.seen.load(Ordering::Relaxed) < position {
                view.dirty.store(true, Ordering::Relaxed);
                stale = true;
            }
        }
        stale
    }

    /// Notes an event: marks the views it makes stale; returns whether any.
    fn note(&self, event: &Event) -> bool {
        let mut state = self.state.lock();
        state.position = state.position.max(event.seq);
        let mut stale = false;
        for (key, view) in &state.views {
            if !view.dirty.load(Ordering::Relaxed)
                && key
                    .view
                    .affected_by(&event.change, view.waiting.load(Ordering::Relaxed))
            {
                view.dirty.store(true, Ordering::Relaxed);
                stale = true;
            }
        }
        stale
    }

    /// Marks the views `stale` picks; returns whether it picked any.
    fn mark(&self, stale: impl Fn(&View) -> bool) -> bool {
        let state = self.state.lock();
        let mut any = false;
        for (key, view) in &state.views {
            if stale(&key.view) {
                view.dirty.store(true, Ordering::Relaxed);
                any = true;
            }
        }
        any
    }

    /// Renders every stale view that has open pages, once, and pushes the
    /// render to them when it changed.
    async fn render_round(&self) {
        let (position, stale) = {
            let mut state = self.state.lock();
            state
                .views
                .retain(|_, view| view.latest.receiver_count() > 0);
            let stale: Vec<(ViewKey, Arc<LiveView>)> = state
                .views
                .iter()
                .filter(|(_, view)| view.dirty.swap(false, Ordering::Relaxed))
                .map(|(key, view)| (key.clone(), view.clone()))
                .collect();
            (state.position, stale)
        };
        for (key, view) in stale {
            let html = match key.view.render(&self.sources, key.actions).await {
                Ok(rendered) => {
                    view.waiting.store(rendered.waiting, Ordering::Relaxed);
                    rendered.html
                }
                Err(error) => error_panel(&error, &self.sources.links),
            };
            view.seen.store(position, Ordering::Relaxed);
            let unchanged = view
                .latest
                .borrow()
                .as_ref()
                .is_some_and(|update| update.html == html);
            if !unchanged {
                view.latest
                    .send_replace(Some(Arc::new(Update::new(position, html))));
            }
        }
    }

    /// Forgets the views no page shows; stops the hub when none is left.
    fn stop_if_idle(&self) -> bool {
        let mut state = self.state.lock();
        state
            .views
            .retain(|_, view| view.latest.receiver_count() > 0);
        if state.views.is_empty() {
            state.running = false;
            return true;
        }
        false
    }
}

/// Sets the next round: [`COALESCE`] from now, and not sooner than
/// [`MIN_ROUND_INTERVAL`] after the last one (a round already set stays).
fn schedule(next_round: &mut Option<Instant>, last_round: Option<Instant>) {
    if next_round.is_some() {
        return;
    }
    let soon = Instant::now() + COALESCE;
    let allowed = last_round.map_or(soon, |last| last + MIN_ROUND_INTERVAL);
    *next_round = Some(soon.max(allowed));
}

/// Returns whether a request asks for the page's event stream.
pub fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"))
}

/// Returns the position the browser's page reflects: its last event's id
/// (`Last-Event-ID`, on a reconnection), or the page's own (`live_after`).
pub fn position(headers: &HeaderMap, uri: &Uri) -> u64 {
    let last_event = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok());
    last_event
        .or_else(|| {
            form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
                .find(|(name, _)| name == "live_after")
                .and_then(|(_, value)| value.parse().ok())
        })
        .unwrap_or(0)
}

/// Answers a page's event stream: its updates until the browser leaves,
/// reads nothing for too long, or the server shuts down.
pub fn stream(hub: &Arc<Hub>, config: &ConsoleConfig, key: ViewKey, after: u64) -> Response {
    let Ok(place) = hub.places.clone().try_acquire_owned() else {
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            "the server holds its limit of live pages; retry later",
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    };
    let mut updates = hub.watch(key, after);
    let mut closing = hub.sources.engine.closing();
    let timeout = config.stream_timeout;
    let metrics = config.metrics.clone();
    let (sender, frames) = mpsc::channel::<Bytes>(1);
    let (abort, aborted) = oneshot::channel();
    metrics.console_live_pages(1);
    tokio::spawn(async move {
        let _open = OpenPage {
            _place: place,
            metrics: metrics.clone(),
        };
        if !deliver(&sender, Bytes::from_static(RECONNECT.as_bytes()), timeout).await {
            return;
        }
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        keepalive.tick().await;
        loop {
            let frame = tokio::select! {
                changed = updates.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let update = updates.borrow_and_update().clone();
                    match update {
                        Some(update) => update.frame.clone(),
                        None => continue,
                    }
                }
                _ = keepalive.tick() => Bytes::from_static(b": keep-alive\n\n"),
                () = sender.closed() => return,
                _ = closing.wait_for(|closed| *closed) => return,
            };
            if !deliver(&sender, frame, timeout).await {
                if !sender.is_closed() {
                    tracing::info!(?timeout, "console: cut off a live page that read nothing");
                    metrics.console_live_page_dropped();
                    let _ = abort.send(());
                }
                return;
            }
        }
    });
    let body = Body::from_stream(LiveBody {
        frames,
        aborted: Some(aborted),
    });
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

/// Holds a live page's place and count while its stream runs.
struct OpenPage {
    _place: tokio::sync::OwnedSemaphorePermit,
    metrics: lightning_store_adapters::metrics::Metrics,
}

impl Drop for OpenPage {
    fn drop(&mut self) {
        self.metrics.console_live_pages(-1);
    }
}

/// A live page's response body: its frames, or an error that makes the
/// server close the connection at once when the page is cut off (so that
/// nothing stays buffered for a browser that reads nothing).
struct LiveBody {
    frames: mpsc::Receiver<Bytes>,
    /// `None` once it resolved.
    aborted: Option<oneshot::Receiver<()>>,
}

impl futures::Stream for LiveBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        if let Some(aborted) = &mut self.aborted
            && let Poll::Ready(outcome) = std::pin::Pin::new(aborted).poll(cx)
        {
            self.aborted = None;
            // A closed abort channel without a message is a normal end.
            if outcome.is_ok() {
                return Poll::Ready(Some(Err(std::io::Error::other(
                    "the browser read nothing: cut off",
                ))));
            }
        }
        self.frames.poll_recv(cx).map(|frame| frame.map(Ok))
    }
}

/// Hands a frame to the connection; false when the browser left or took
/// nothing for `timeout`.
async fn deliver(sender: &mpsc::Sender<Bytes>, frame: Bytes, timeout: Duration) -> bool {
    matches!(
        tokio::time::timeout(timeout, sender.send(frame)).await,
        Ok(Ok(()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_every_line_as_data() {
        let update = Update::new(7, "<p>a\r\nb</p>\n<p>c</p>".to_owned());
        assert_eq!(
            std::str::from_utf8(&update.frame).unwrap(),
            "id: 7\nevent: update\ndata: <p>a\ndata: b</p>\ndata: <p>c</p>\n\n"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_coalesce_and_keep_their_distance() {
        let mut next = None;
        schedule(&mut next, None);
        let first = next.unwrap();
        assert_eq!(first - Instant::now(), COALESCE);
        schedule(&mut next, None);
        assert_eq!(next, Some(first), "a round already set stays");
        let mut next = None;
        schedule(&mut next, Some(Instant::now()));
        assert_eq!(next.unwrap() - Instant::now(), MIN_ROUND_INTERVAL);
    }
}
