//! The console's URLs: its prefix, its links to rollouts, and the
//! encoding and decoding of path segments and query strings.

/// The prefix of every console path but the Overview's (`/`). It clashes
/// with no API: agent-lightning 0.x's is `/v1/agl`, 1.x's `/api` and
/// `/proxy`, OTLP's `/v1/traces`.
pub const PREFIX: &str = "/console";

/// Returns the console's link to a rollout.
pub fn rollout_url(rollout_id: &str) -> String {
    format!("/console/rollouts/{}", path_segment(rollout_id))
}

/// Percent-encodes an id for a path segment (ids may hold any printable
/// character, `/` and `?` included).
pub fn path_segment(id: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// Returns a query string's value for a URL (`&` and the like encoded).
pub fn query_value(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Returns a query string's pairs in order.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

/// Returns the last value of a query parameter, blank values as none.
pub fn query_get<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(key, value)| key == name && !value.trim().is_empty())
        .map(|(_, value)| value.trim())
}
