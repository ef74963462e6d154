//! Namespaces: each holds one training's whole world (its rollouts,
//! attempts, spans, resources, workers, sessions, events and the 1.x
//! records), and nothing of one is seen from another. This module holds
//! the rule of their names ([`NamespaceName`]) and what the catalogue
//! records of each ([`Namespace`], [`NamespaceSettings`]); the catalogue
//! itself is a port of the storage ([`crate::storage::Catalogue`]).

use std::fmt;
use std::ops::Deref;

use crate::error::{StoreError, StoreResult, echo};
use crate::model::Timestamp;
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
