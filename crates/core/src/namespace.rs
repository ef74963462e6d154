//! Namespaces: each holds one training's whole world (its rollouts,
//! attempts, spans, resources, workers, sessions, events and the 1.x
//! records), and nothing of one is seen from another. This module holds
//! the rule of their names ([`NamespaceName`]) and what the catalogue
//! records of each ([`Namespace`], [`NamespaceSettings`]); the catalogue
//! itself is a port of the storage ([`crate::storage::Catalogue`]).

use std::fmt;
use std::ops::Deref;

use crate::error::{StoreError, StoreResult, echo};
use crate::model::{Counts, Timestamp};
use crate::retention::RetentionPolicy;

/// The namespace of everything that names none: today's data, after an
/// upgrade, and every call of a client that knows nothing of namespaces.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Longest namespace name, in bytes (a DNS label's).
pub const MAX_NAMESPACE_LEN: usize = 63;

/// A namespace's name: a DNS label (1 to 63 lowercase ASCII letters,
/// digits and hyphens, beginning and ending with a letter or a digit), so
/// that it fits in a URL path, a metric label, a file name and a
/// PostgreSQL schema name as it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamespaceName(String);

impl NamespaceName {
    /// Returns `name` when it follows the rule, else an invalid-argument
    /// error that quotes it.
    pub fn parse(name: impl Into<String>) -> StoreResult<Self> {
        let name = name.into();
        let refuse = |why: &str| {
            Err(StoreError::invalid(format!(
                "namespace name {:?} {why}: a namespace name is 1 to {MAX_NAMESPACE_LEN} \
                 lowercase letters, digits and hyphens, beginning and ending with a letter \
                 or a digit",
                echo(&name)
            )))
        };
        if name.is_empty() {
            return refuse("is empty");
        }
        if name.len() > MAX_NAMESPACE_LEN {
            return refuse("is too long");
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return refuse("holds a character outside the rule");
        }
        if name.starts_with('-') || name.ends_with('-') {
            return refuse("begins or ends with a hyphen");
        }
        Ok(Self(name))
    }

    /// The default namespace ([`DEFAULT_NAMESPACE`]).
    pub fn default_namespace() -> Self {
        Self(DEFAULT_NAMESPACE.to_owned())
    }

    /// Returns whether this is the default namespace.
    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_NAMESPACE
    }

    /// Returns the name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for NamespaceName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NamespaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The limits of one namespace, so that one training can neither starve
/// nor fill a deployment. `None`: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quotas {
    /// Rollouts waiting in the queue.
    pub max_queued_rollouts: Option<u64>,
    /// Spans stored.
    pub max_spans: Option<u64>,
    /// Bytes of spans stored (as [`crate::retention::span_size`] counts them).
    pub max_span_bytes: Option<u64>,
}

/// What one write adds to what its namespace holds, as its quotas count
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Rollouts it puts in the queue.
    pub queued_rollouts: u64,
    /// Spans it stores.
    pub spans: u64,
    /// Bytes of those spans (as [`crate::retention::span_size`] counts them).
    pub span_bytes: u64,
}

impl Quotas {
    /// Returns whether a write adding `usage` must read the namespace's
    /// counts to be checked: a quota limits what it adds.
    pub fn limits(&self, usage: Usage) -> bool {
        (usage.queued_rollouts > 0 && self.max_queued_rollouts.is_some())
            || (usage.spans > 0 && (self.max_spans.is_some() || self.max_span_bytes.is_some()))
    }

    /// Refuses (RESOURCE_EXHAUSTED, naming the quota) a write adding
    /// `usage` to a namespace holding `counts` when it would take the
    /// namespace over a quota. A write that adds nothing a quota counts
    /// always passes, so a namespace over its quota (lowered, or exceeded
    /// by calls checked at once) can still be drained.
    pub fn check(&self, counts: &Counts, usage: Usage) -> StoreResult<()> {
        let checks = [
            (
                "max_queued_rollouts",
                "queued rollouts",
                self.max_queued_rollouts,
                counts.queued,
                usage.queued_rollouts,
            ),
            (
                "max_spans",
                "spans",
                self.max_spans,
                counts.spans,
                usage.spans,
            ),
            (
                "max_span_bytes",
                "bytes of spans",
                self.max_span_bytes,
                counts.span_bytes,
                usage.span_bytes,
            ),
        ];
        for (quota, what, max, held, adding) in checks {
            if let Some(max) = max
                && adding > 0
                && held.saturating_add(adding) > max
            {
                return Err(StoreError::QuotaExceeded(format!(
                    "the namespace's quota {quota} is {max} {what}: it holds {held} and this                      call adds {adding}"
                )));
            }
        }
        Ok(())
    }
}

/// What a namespace is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NamespaceSettings {
    /// Its limits.
    pub quotas: Quotas,
    /// Which spans of its finished rollouts are deleted (`None`: the
    /// server's policy).
    pub retention: Option<RetentionPolicy>,
}

/// A namespace as the catalogue records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// The backend's number for it, never reused: the data of a deleted
    /// namespace is never taken for that of a new one of the same name.
    /// The default namespace's is 0.
    pub id: i64,
    /// Its name.
    pub name: NamespaceName,
    /// When it was created (the default namespace: when the catalogue was).
    pub created: Timestamp,
    /// Its quotas and retention.
    pub settings: NamespaceSettings,
}

impl Namespace {
    /// Returns the error of a call that names a namespace the catalogue
    /// does not hold: never created, or deleted.
    pub fn not_found(name: &str) -> StoreError {
        StoreError::NotFound(format!("namespace {:?} not found", echo(name)))
    }

    /// Returns the error of creating a namespace that exists.
    pub fn already_exists(name: &str) -> StoreError {
        StoreError::AlreadyExists(format!("namespace {:?} already exists", echo(name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding(queued: u64, spans: u64, span_bytes: u64) -> Counts {
        Counts {
            queued,
            spans,
            span_bytes,
            ..Counts::default()
        }
    }

    #[test]
    fn a_write_within_its_quotas_passes_and_one_beyond_names_the_quota() {
        let quotas = Quotas {
            max_queued_rollouts: Some(10),
            max_spans: Some(100),
            max_span_bytes: Some(1_000),
        };
        let enqueue = |n| Usage {
            queued_rollouts: n,
            ..Usage::default()
        };
        assert!(quotas.check(&holding(8, 0, 0), enqueue(2)).is_ok());
        let refused = quotas.check(&holding(8, 0, 0), enqueue(3)).unwrap_err();
        assert!(
            matches!(&refused, StoreError::QuotaExceeded(m)
                if m.contains("max_queued_rollouts") && m.contains("10") && m.contains("holds 8") && m.contains("adds 3")),
            "{refused:?}"
        );
        let spans = |n, bytes| Usage {
            spans: n,
            span_bytes: bytes,
            ..Usage::default()
        };
        assert!(quotas.check(&holding(0, 99, 500), spans(1, 500)).is_ok());
        assert!(matches!(
            quotas.check(&holding(0, 99, 500), spans(2, 10)),
            Err(StoreError::QuotaExceeded(m)) if m.contains("max_spans")
        ));
        assert!(matches!(
            quotas.check(&holding(0, 10, 900), spans(1, 101)),
            Err(StoreError::QuotaExceeded(m)) if m.contains("max_span_bytes")
        ));
    }

    #[test]
    fn a_namespace_over_its_quota_still_takes_writes_that_add_nothing_counted() {
        let quotas = Quotas {
            max_queued_rollouts: Some(1),
            max_spans: Some(1),
            max_span_bytes: None,
        };
        // Over every quota (lowered since, or passed by calls checked at once).
        let over = holding(5, 5, 5);
        assert!(quotas.check(&over, Usage::default()).is_ok());
        assert!(!quotas.limits(Usage::default()));
        // No quota on bytes: spans' bytes are not what refuses them.
        let bytes_only = Quotas {
            max_span_bytes: None,
            max_spans: None,
            ..quotas
        };
        let spans = Usage {
            spans: 3,
            span_bytes: u64::MAX,
            ..Usage::default()
        };
        assert!(!bytes_only.limits(spans));
        assert!(bytes_only.check(&over, spans).is_ok());
        assert!(Quotas::default().check(&over, spans).is_ok());
    }
}
