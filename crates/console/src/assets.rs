//! The console's own script, style sheet and icon, compiled into the binary
//! (`include_str!`): nothing is read from disk or fetched from elsewhere.
//! Pages link them with a digest of their content in the query, so that a
//! browser may keep them for good and still gets a new one with a new
//! binary.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: [Asset; 3] = [
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/console.css"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/console.js"),
    },
    Asset {
        name: "icon.svg",
        content_type: "image/svg+xml",
        body: include_str!("assets/icon.svg"),
    },
];

/// Returns the path of an asset with the digest of its content
/// (`/console/assets/console.css?v=1a2b3c4d`).
pub fn url(name: &str) -> String {
    static DIGESTS: OnceLock<Vec<String>> = OnceLock::new();
    let digests = DIGESTS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|asset| hex::encode(&Sha256::digest(asset.body.as_bytes())[..4]))
            .collect()
    });
    let index = ASSETS
        .iter()
        .position(|asset| asset.name == name)
        .expect("a known asset");
    format!("{}/assets/{name}?v={}", crate::url::PREFIX, digests[index])
}

/// Serves an embedded asset, to be kept by caches (its URL changes with it).
pub async fn serve(Path(name): Path<String>) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
        ],
        asset.body,
    )
        .into_response()
}
