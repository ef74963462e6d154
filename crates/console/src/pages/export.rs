//! The export of the Rollouts page's selection (`GET /console/export`,
//! with the page's filters and `layout=rollouts`, `triplets` or
//! `messages`): the ended rollouts the filters select, as JSON Lines in a
//! download, streamed as the engine pages through them
//! ([`lightning_store_core::export`]), one record per line, as
//! `lightning-store export` writes them.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, Uri, header};
use tokio::sync::mpsc;

use super::layout::failed;
use super::rollouts::RolloutsQuery;
use super::state::NamespaceConsole;
use super::viewer::Viewer;
use crate::rendered::PageError;
use crate::url::{query_get, query_pairs};
use lightning_store_adapters::export::record_lines;
use lightning_store_core::export::Layout;

/// Chunks of the body written ahead of a reader that is slower than the
/// store: the export reads the store no further until it takes them.
const CHUNKS_AHEAD: usize = 4;

/// A chunk of the body is sent once it holds about this many bytes.
const CHUNK_BYTES: usize = 256 * 1024;

/// Answers the export as a JSON Lines download.
pub async fn export(console: NamespaceConsole, viewer: Viewer, uri: Uri) -> Response {
    let text = uri.query().unwrap_or("");
    let query = match RolloutsQuery::parse(text) {
        Ok(query) => query,
        Err(message) => return failed(&PageError::Invalid(message), &viewer),
    };
    let pairs = query_pairs(text);
    let name = query_get(&pairs, "layout").unwrap_or("rollouts");
    let Some(layout) = Layout::parse(name) else {
        let message = format!("layout: unknown export layout {name:?}");
        return failed(&PageError::Invalid(message), &viewer);
    };
    let mut export = match console.sources.engine.export(query.filter(), None).await {
        Ok(export) => export,
        Err(error) => return failed(&PageError::from(error), &viewer),
    };
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHUNKS_AHEAD);
    tokio::spawn(async move {
        let mut chunk = Vec::with_capacity(CHUNK_BYTES);
        loop {
            let lines = match export.next().await {
                Ok(Some(record)) => record_lines(layout, &record),
                Ok(None) => break,
                Err(error) => Err(error),
            };
            match lines {
                Ok(lines) => {
                    for line in lines {
                        chunk.extend_from_slice(line.as_bytes());
                        chunk.push(b'\n');
                    }
                }
                Err(error) => {
                    // The body ends in error: the client sees a cut download.
                    tracing::warn!(%error, "export download failed");
                    let _ = sender.send(Err(std::io::Error::other(error))).await;
                    return;
                }
            }
            if chunk.len() >= CHUNK_BYTES {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_BYTES));
                // The client went away: stop reading the store.
                if sender.send(Ok(Bytes::from(full))).await.is_err() {
                    return;
                }
            }
        }
        if !chunk.is_empty() {
            let _ = sender.send(Ok(Bytes::from(chunk))).await;
        }
    });
    let body = Body::from_stream(tokio_stream_of(receiver));
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    let disposition = match layout {
        Layout::Rollouts => "attachment; filename=\"rollouts.jsonl\"",
        Layout::Triplets => "attachment; filename=\"triplets.jsonl\"",
        Layout::Messages => "attachment; filename=\"messages.jsonl\"",
    };
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(disposition),
    );
    response
}

/// The receiver as a stream of the body's chunks.
fn tokio_stream_of(
    mut receiver: mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}
