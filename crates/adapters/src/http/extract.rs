//! The HTTP toolkit both agent-lightning lines read requests with: bodies
//! read within the configured limit (413 beyond) and parsed as FastAPI
//! parses them, query strings kept as their ordered pairs, and the
//! `Idempotency-Key` header. Each is an axum extractor, so a handler names
//! what it reads and the toolkit reads it one way for every route.

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use bytes::Bytes;
use http::HeaderMap;
use http::request::Parts;

use super::context::HttpState;
use super::error::HttpError;
use super::validate::{Invalid, Issue, Loc, Object, Validator};
use lightning_store_core::access::Caller;
use lightning_store_core::model::Json;

/// A request's JSON body as FastAPI reads it before validating it: a body
/// without a JSON content type is text, broken JSON is a 422
/// `json_invalid` at the failing position, an empty body is `None`.
#[derive(Debug)]
pub struct JsonBody(pub Option<Json>);

impl JsonBody {
    /// Returns the body that must be present: pydantic's `missing` otherwise.
    pub fn required(self) -> Result<Json, Invalid> {
        self.0
            .ok_or_else(|| Invalid::one("missing", Loc::body(), "Field required", &Json::Null))
    }

    /// Returns the body that must be a JSON object (a query model's source).
    pub fn object(self) -> Result<Object, Invalid> {
        match self.required()? {
            Json::Object(object) => Ok(object),
            other => {
                let mut v = Validator::new();
                v.model(&Loc::body(), &other);
                Err(v.into_error())
            }
        }
    }
}

impl FromRequest<HttpState> for JsonBody {
    type Rejection = HttpError;

    async fn from_request(request: Request, context: &HttpState) -> Result<Self, HttpError> {
        let (parts, body) = request.into_parts();
        let bytes = read_body(body, context.max_body_bytes).await?;
        Ok(Self(json_body(&parts.headers, &bytes)?))
    }
}

/// A request's body as bytes, read within the configured limit.
#[derive(Debug)]
pub struct RawBody(pub Bytes);

impl FromRequest<HttpState> for RawBody {
    type Rejection = HttpError;

    async fn from_request(request: Request, context: &HttpState) -> Result<Self, HttpError> {
        let body = request.into_body();
        Ok(Self(read_body(body, context.max_body_bytes).await?))
    }
}

/// A query string's parameters in order, repeated names kept.
#[derive(Debug, Clone, Default)]
pub struct QueryParams(pub Vec<(String, String)>);

impl QueryParams {
    /// Parses a query string.
    pub fn parse(query: Option<&str>) -> Self {
        Self(
            form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// Returns the last value of `name`, as FastAPI reads a scalar.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Returns every value of `name`, in order (a list parameter).
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Returns the parameters as a JSON object of their last values (what
    /// a report quotes as the request's input).
    pub fn to_object(&self) -> Json {
        Json::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), Json::String(v.clone())))
                .collect(),
        )
    }

    /// Reads the scalar `name` with `read` (pydantic's lax rules on its
    /// text); `default` when absent.
    pub fn read<T>(
        &self,
        v: &mut Validator,
        name: &str,
        default: T,
        read: impl FnOnce(&mut Validator, &Loc, &Json) -> Option<T>,
    ) -> Option<T> {
        match self.value(name) {
            Some(text) => read(v, &Loc::query(name), &Json::String(text.to_owned())),
            None => Some(default),
        }
    }

    /// Reads an integer parameter; `default` when absent.
    pub fn int(&self, v: &mut Validator, name: &str, default: i64) -> Option<i64> {
        self.read(v, name, default, |v, loc, value| v.int(loc, value))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::parse(parts.uri.query()))
    }
}

/// The caller a request acts for, as the access layer decided it
/// ([`crate::auth`]); anyone when the port has no tokens. (An extractor of
/// this crate around the core's [`Caller`].)
#[derive(Debug)]
pub struct RequestCaller(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for RequestCaller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts
                .extensions
                .get::<Caller>()
                .cloned()
                .unwrap_or_default(),
        ))
    }
}

/// The request header that names a request for safe retries: an event
/// POST of the 1.x API, an enqueue of the 0.x API.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The request's `Idempotency-Key`, if it has one (400 unless it is
/// visible ASCII).
#[derive(Debug)]
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, HttpError> {
        let key = parts
            .headers
            .get(IDEMPOTENCY_KEY)
            .map(|value| {
                value
                    .to_str()
                    .map(str::to_owned)
                    .map_err(|_| HttpError::bad_request("Idempotency-Key must be visible ASCII"))
            })
            .transpose()?;
        Ok(Self(key))
    }
}

/// Reads a whole request body, refusing one over `limit` bytes with a 413.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, HttpError> {
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let too_large = std::error::Error::source(&error)
            .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if too_large {
            HttpError::too_large(limit)
        } else {
            HttpError::bad_request(format!("cannot read the request body: {error}"))
        }
    })
}

/// Returns whether the request says its body is JSON (`application/json`
/// or a `+json` type), as FastAPI decides whether to parse it.
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| v == "application/json" || v.ends_with("+json"))
}

/// Parses a JSON request body as FastAPI does before validating it (see
/// [`JsonBody`]).
pub fn json_body(headers: &HeaderMap, body: &[u8]) -> Result<Option<Json>, Invalid> {
    if body.is_empty() {
        return Ok(None);
    }
    if !is_json(headers) {
        return Ok(Some(Json::String(
            String::from_utf8_lossy(body).into_owned(),
        )));
    }
    serde_json::from_slice(body).map(Some).map_err(|error| {
        let position = char_offset(body, error.line(), error.column());
        Invalid(vec![Issue {
            kind: "json_invalid",
            loc: Loc::body().index(position),
            msg: "JSON decode error".to_owned(),
            input: Json::Object(Default::default()),
            ctx: Some(serde_json::json!({ "error": python_json_error(&error) })),
        }])
    })
}

/// Names a JSON syntax error as Python's `json` module does, the reason
/// FastAPI reports.
fn python_json_error(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let reason = [
        (
            "key must be a string",
            "Expecting property name enclosed in double quotes",
        ),
        ("expected `:`", "Expecting ':' delimiter"),
        ("expected `,` or `}`", "Expecting ',' delimiter"),
        ("expected `,` or `]`", "Expecting ',' delimiter"),
        ("trailing characters", "Extra data"),
        (
            "trailing comma",
            "Illegal trailing comma before end of object",
        ),
        ("control character", "Invalid control character at"),
        ("invalid escape", "Invalid \\escape"),
        (
            "EOF while parsing a string",
            "Unterminated string starting at",
        ),
    ]
    .iter()
    .find(|(serde, _)| message.starts_with(serde))
    .map_or("Expecting value", |(_, python)| python);
    reason.to_owned()
}

/// Converts serde_json's 1-based line and column into a character offset.
fn char_offset(body: &[u8], line: usize, column: usize) -> usize {
    let text = String::from_utf8_lossy(body);
    let before: usize = text
        .split('\n')
        .take(line.saturating_sub(1))
        .map(|l| l.chars().count() + 1)
        .sum();
    before + column.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[tokio::test]
    async fn bodies_over_the_limit_are_413() {
        let ok = read_body(Body::from(vec![0u8; 10]), 10).await.unwrap();
        assert_eq!(ok.len(), 10);
        let error = read_body(Body::from(vec![0u8; 11]), 10).await.unwrap_err();
        assert_eq!(error.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn broken_json_is_reported_at_its_position() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        let Invalid(issues) = json_body(&headers, b"{bad").unwrap_err();
        assert_eq!(issues[0].kind, "json_invalid");
        assert_eq!(
            issues[0].ctx,
            Some(serde_json::json!({"error": "Expecting property name enclosed in double quotes"}))
        );
        assert_eq!(
            serde_json::to_value(&issues[0].loc).unwrap(),
            serde_json::json!(["body", 1])
        );
        assert_eq!(json_body(&headers, b"").unwrap(), None);
        assert_eq!(
            json_body(&http::HeaderMap::new(), b"{}").unwrap(),
            Some(Json::String("{}".into()))
        );
    }

    #[test]
    fn query_scalars_are_the_last_value_and_lists_every_value() {
        let query = QueryParams::parse(Some("a=1&b=x&a=2&c=%20y"));
        assert_eq!(query.value("a"), Some("2"));
        assert_eq!(query.values("a").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(query.value("c"), Some(" y"));
        assert_eq!(query.value("d"), None);
        let mut v = Validator::new();
        assert_eq!(query.int(&mut v, "a", 0), Some(2));
        assert_eq!(query.int(&mut v, "d", 7), Some(7));
        assert_eq!(query.int(&mut v, "b", 0), None);
        assert!(v.failed());
    }
}
