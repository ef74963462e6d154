//! A response whose JSON body is already written.

use axum::response::{IntoResponse, Response};
use http::StatusCode;

/// Answers with JSON already written (the renderers of [`render`]).
pub(super) fn raw_answer(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
