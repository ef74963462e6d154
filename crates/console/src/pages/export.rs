//! The export of the Rollouts page's selection (`GET /console/export`,
//! with the page's filters, `layout=rollouts`, `triplets` or `messages`
//! and `format=jsonl`, `jsonl.gz` or `parquet`): the ended rollouts the
//! filters select, in a download streamed as the engine pages through
//! them ([`lightning_store_core::export`]), the file `lightning-store
//! export` writes.

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
use lightning_store_formats::{Format, RecordWriter};

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
    let name = query_get(&pairs, "format").unwrap_or("jsonl");
    let Some(format) = Format::parse(name) else {
        let message = format!("format: unknown export format {name:?}");
        return failed(&PageError::Invalid(message), &viewer);
    };
    let mut file = match RecordWriter::new(Vec::with_capacity(CHUNK_BYTES), format, layout.as_str())
    {
        Ok(file) => file,
        Err(error) => return failed(&PageError::Invalid(error.to_string()), &viewer),
    };
    let mut export = match console
        .sources
        .engine
        .export(query.filter(), layout, None)
        .await
    {
        Ok(export) => export,
        Err(error) => return failed(&PageError::from(error), &viewer),
    };
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHUNKS_AHEAD);
    tokio::spawn(async move {
        let outcome = async {
            while let Some(record) = export.next().await.map_err(std::io::Error::other)? {
                for line in record_lines(layout, &record).map_err(std::io::Error::other)? {
                    file.write(&line).map_err(std::io::Error::other)?;
                }
                if file.written() >= CHUNK_BYTES {
                    let chunk = file.take_written().map_err(std::io::Error::other)?;
                    // The client went away: stop reading the store.
                    if sender.send(Ok(Bytes::from(chunk))).await.is_err() {
                        return Ok(());
                    }
                }
            }
            let end = file.finish().map_err(std::io::Error::other)?;
            let _ = sender.send(Ok(Bytes::from(end))).await;
            Ok::<(), std::io::Error>(())
        };
        if let Err(error) = outcome.await {
            // The body ends in error: the client sees a cut download.
            tracing::warn!(%error, "export download failed");
            let _ = sender.send(Err(error)).await;
        }
    });
    let body = Body::from_stream(tokio_stream_of(receiver));
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    let disposition = format!(
        "attachment; filename=\"{}.{}\"",
        layout.as_str(),
        format.as_str()
    );
    if let Ok(disposition) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    response
}

/// The receiver as a stream of the body's chunks.
fn tokio_stream_of(
    mut receiver: mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}
