//! Which namespace a call names, in each API's own way: HTTP paths under
//! the prefix `/ns/{namespace}/` (agent-lightning's clients then select one
//! by their base URL alone), gRPC calls by the metadata key
//! [`NAMESPACE_METADATA`]. The layer runs before routing: it strips the
//! prefix, so that every route serves every namespace, and records the
//! name ([`NamedNamespace`]) for the adapters to resolve
//! ([`crate::namespaces::Namespaces::resolve`]). A call that names none is
//! in the default namespace.

use http::Request;
use http::uri::{PathAndQuery, Uri};

use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::namespace::NamespaceName;

/// The gRPC metadata key (and HTTP header) that names a call's namespace.
pub const NAMESPACE_METADATA: &str = "lightning-store-namespace";

/// The path prefix of HTTP calls to a namespace: `/ns/{namespace}/...`.
pub const NAMESPACE_PREFIX: &str = "/ns/";

/// The namespace a call named: its name, or why it names none that can
/// exist. Absent: the default namespace.
#[derive(Debug, Clone)]
pub struct NamedNamespace(pub StoreResult<NamespaceName>);

impl NamedNamespace {
    /// Returns the namespace a call with `extensions` named.
    pub fn of(extensions: &http::Extensions) -> StoreResult<NamespaceName> {
        match extensions.get::<Self>() {
            Some(Self(named)) => named.clone(),
            None => Ok(NamespaceName::default_namespace()),
        }
    }
}

/// Records the namespace `request` names and strips the path prefix that
/// named it (see the module docs). Naming two different namespaces (the
/// path and the header) is refused.
pub fn name_namespace<B>(mut request: Request<B>) -> Request<B> {
    let by_path = strip_prefix(request.uri_mut());
    let by_header = request
        .headers()
        .get(NAMESPACE_METADATA)
        .map(|value| match value.to_str() {
            Ok(text) => NamespaceName::parse(text),
            Err(_) => Err(StoreError::invalid(format!(
                "{NAMESPACE_METADATA} is not text"
            ))),
        });
    let named = match (by_path, by_header) {
        (None, None) => return request,
        (Some(named), None) | (None, Some(named)) => named,
        (Some(Ok(path)), Some(Ok(header))) if path != header => Err(StoreError::invalid(format!(
            "the path names namespace {path:?} and {NAMESPACE_METADATA} names {header:?}"
        ))),
        (Some(path), Some(_)) => path,
    };
    request.extensions_mut().insert(NamedNamespace(named));
    request
}

/// Strips `/ns/{namespace}` from `uri`'s path and returns the name it
/// held; `None` when the path has no such prefix.
fn strip_prefix(uri: &mut Uri) -> Option<StoreResult<NamespaceName>> {
    let path = uri.path();
    let rest = path.strip_prefix(NAMESPACE_PREFIX)?;
    let (name, remainder) = match rest.find('/') {
        Some(end) => (&rest[..end], &rest[end..]),
        None => (rest, "/"),
    };
    let named = NamespaceName::parse(name);
    let stripped = match uri.query() {
        Some(query) => format!("{remainder}?{query}"),
        None => remainder.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(PathAndQuery::try_from(stripped).ok()?);
    *uri = Uri::from_parts(parts).ok()?;
    Some(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(uri: &str, header: Option<&str>) -> (String, Option<StoreResult<String>>) {
        let mut builder = Request::builder().uri(uri);
        if let Some(header) = header {
            builder = builder.header(NAMESPACE_METADATA, header);
        }
        let request = name_namespace(builder.body(()).unwrap());
        let named = request
            .extensions()
            .get::<NamedNamespace>()
            .map(|n| n.0.clone().map(|name| name.to_string()));
        (request.uri().to_string(), named)
    }

    #[test]
    fn the_path_prefix_names_the_namespace_and_is_stripped() {
        assert_eq!(
            named("http://h/ns/run-a/v1/agl/rollouts?x=1", None),
            (
                "http://h/v1/agl/rollouts?x=1".to_owned(),
                Some(Ok("run-a".to_owned()))
            )
        );
        assert_eq!(
            named("/ns/run-a", None),
            ("/".to_owned(), Some(Ok("run-a".to_owned())))
        );
        assert_eq!(
            named("/v1/agl/rollouts", None),
            ("/v1/agl/rollouts".to_owned(), None)
        );
        // Only a whole first segment is the prefix.
        assert_eq!(named("/nsx/run-a/v1", None).1, None);
    }

    #[test]
    fn the_metadata_names_the_namespace_and_must_agree_with_the_path() {
        assert_eq!(
            named(
                "/lightning_store.v1.LightningStoreService/GetStatistics",
                Some("run-b")
            )
            .1,
            Some(Ok("run-b".to_owned()))
        );
        assert_eq!(
            named("/ns/run-b/v1/traces", Some("run-b")).1,
            Some(Ok("run-b".to_owned()))
        );
        assert!(matches!(
            named("/ns/run-a/v1/traces", Some("run-b")).1,
            Some(Err(StoreError::InvalidArgument(m))) if m.contains("run-a") && m.contains("run-b")
        ));
    }

    #[test]
    fn names_outside_the_rule_are_recorded_as_refusals() {
        let (uri, named) = named("/ns/Run_A/v1/agl/rollouts", None);
        assert_eq!(uri, "/v1/agl/rollouts");
        assert!(matches!(named, Some(Err(StoreError::InvalidArgument(m))) if m.contains("Run_A")));
        assert!(matches!(
            self::named("/x", Some("")).1,
            Some(Err(StoreError::InvalidArgument(_)))
        ));
    }
}
