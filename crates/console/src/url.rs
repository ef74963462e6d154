//! The console's URLs: its prefix, the links of one namespace's console
//! ([`Links`]), and the encoding and decoding of path segments and query
//! strings.

use lightning_store_adapters::namespace_layer::NAMESPACE_PREFIX;
use lightning_store_core::namespace::NamespaceName;

/// The prefix of every console path but the Overview's (`/`). It clashes
/// with no API: agent-lightning 0.x's is `/v1/agl`, 1.x's `/api` and
/// `/proxy`, OTLP's `/v1/traces`.
pub const PREFIX: &str = "/console";

/// Where one namespace's console lives: the default namespace's at `/`
/// and under [`PREFIX`], another's under `/ns/{name}` (the path prefix
/// that names a namespace on every HTTP route). Every link, form and live
/// stream a page renders is made here, so that it stays in the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Links {
    /// What precedes every console path: empty for the default namespace.
    base: String,
}

impl Links {
    /// Returns the links of `namespace`'s console.
    pub fn of(namespace: &NamespaceName) -> Self {
        let base = if namespace.is_default() {
            String::new()
        } else {
            format!("{NAMESPACE_PREFIX}{namespace}")
        };
        Self { base }
    }

    /// Returns the link to the console's `path` (`/` or under [`PREFIX`]).
    pub fn to(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What precedes every console path (for templates).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Returns the link to a rollout.
    pub fn rollout(&self, rollout_id: &str) -> String {
        self.to(&format!("{PREFIX}/rollouts/{}", path_segment(rollout_id)))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_stay_in_their_namespace() {
        let default = Links::of(&NamespaceName::default_namespace());
        assert_eq!(default.to("/"), "/");
        assert_eq!(default.rollout("r/1"), "/console/rollouts/r%2F1");
        let run_a = Links::of(&NamespaceName::parse("run-a").unwrap());
        assert_eq!(run_a.to("/"), "/ns/run-a/");
        assert_eq!(run_a.rollout("r1"), "/ns/run-a/console/rollouts/r1");
        assert_eq!(run_a.base(), "/ns/run-a");
    }
}
