//! The authorization table, written once for gRPC and HTTP: each gRPC
//! method and each HTTP route maps to the one [`Permission`] it needs, and
//! each [`Role`] is a set of permissions. Health checks and reflection (the
//! public contract) need none.

use std::fmt;
use std::str::FromStr;

use http::Method;

/// What a call does, as far as access is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    /// Queries, gets, waits and watches: reads spans, resources, rollouts.
    Read,
    /// Creates, updates (cancels) and deletes rollouts.
    Rollouts,
    /// Adds and updates resources and 1.x models: what training uses.
    Resources,
    /// Pauses and resumes agent-lightning 1.x's LLM gateway.
    Gateway,
    /// A runner's work: dequeue, worker sessions, attempts, spans, worker
    /// heartbeats, 1.x events and gateway calls.
    Work,
    /// OTLP trace export.
    Ingest,
}

impl Permission {
    const ALL: [Permission; 6] = [
        Permission::Read,
        Permission::Rollouts,
        Permission::Resources,
        Permission::Gateway,
        Permission::Work,
        Permission::Ingest,
    ];

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A named set of permissions a token carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Admin,
    /// The training algorithm: enqueues, cancels, publishes resources,
    /// pauses the gateway, reads and watches.
    Algorithm,
    /// A runner: takes and runs work, records spans, reads what it needs.
    Runner,
    /// An OTLP exporter: trace export only.
    Ingest,
    /// Dashboards and analysis: queries and watches only.
    Read,
}

impl Role {
    fn permissions(self) -> &'static [Permission] {
        use Permission as P;
        match self {
            Role::Admin => &Permission::ALL,
            Role::Algorithm => &[P::Read, P::Rollouts, P::Resources, P::Gateway],
            Role::Runner => &[P::Read, P::Work, P::Ingest],
            Role::Ingest => &[P::Ingest],
            Role::Read => &[P::Read],
        }
    }

    /// The roles' names, as written in the tokens file.
    pub const NAMES: [&'static str; 5] = ["admin", "algorithm", "runner", "ingest", "read"];
}

impl FromStr for Role {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Ok(match name {
            "admin" => Role::Admin,
            "algorithm" => Role::Algorithm,
            "runner" => Role::Runner,
            "ingest" => Role::Ingest,
            "read" => Role::Read,
            _ => {
                return Err(format!(
                    "unknown role {name:?} (one of {})",
                    Role::NAMES.join(", ")
                ));
            }
        })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let index = *self as usize;
        f.write_str(Role::NAMES[index])
    }
}

/// The union of some roles' permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Permissions(u8);

impl Permissions {
    /// Returns the permissions of `roles` together.
    pub fn of(roles: &[Role]) -> Self {
        Self(
            roles
                .iter()
                .flat_map(|role| role.permissions())
                .fold(0, |bits, permission| bits | permission.bit()),
        )
    }

    /// Returns whether `permission` is among them.
    pub fn allow(self, permission: Permission) -> bool {
        self.0 & permission.bit() != 0
    }
}

/// What a request needs: nothing, or one permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Open to anyone: health checks, reflection.
    Nothing,
    /// Needs a token that grants this permission.
    Permission(Permission),
}

const STORE_SERVICE: &str = "/lightningstore.v1.LightningStoreService/";

/// Returns what the gRPC call to `path` (`/package.Service/Method`) needs;
/// `None` for an unknown method (answered UNIMPLEMENTED by the router,
/// after authentication).
pub fn grpc_need(path: &str) -> Option<Need> {
    use Permission as P;
    if path.starts_with("/grpc.health.v1.Health/")
        || path.starts_with("/grpc.reflection.v1.ServerReflection/")
        || path.starts_with("/grpc.reflection.v1alpha.ServerReflection/")
    {
        return Some(Need::Nothing);
    }
    if path == "/opentelemetry.proto.collector.trace.v1.TraceService/Export" {
        return Some(Need::Permission(P::Ingest));
    }
    let method = path.strip_prefix(STORE_SERVICE)?;
    let permission = match method {
        "GetCapabilities"
        | "GetStatistics"
        | "GetRolloutActivity"
        | "GetQueuePosition"
        | "ListRecentFailures"
        | "QueryRollouts"
        | "GetRollout"
        | "QueryAttempts"
        | "GetLatestAttempt"
        | "WaitForRollouts"
        | "WatchRolloutCompletions"
        | "WatchEvents"
        | "QuerySpans"
        | "GetResources"
        | "GetLatestResources"
        | "QueryResources"
        | "QueryWorkers"
        | "GetWorker" => P::Read,
        "StartRollout" | "EnqueueRollout" | "EnqueueRollouts" | "UpdateRollout" => P::Rollouts,
        "AddResources" | "UpdateResources" => P::Resources,
        "DequeueRollout"
        | "DequeueRollouts"
        | "StartAttempt"
        | "AddSpan"
        | "AddSpans"
        | "GetNextSpanSequenceId"
        | "GetSpanSequenceIds"
        | "UpdateAttempt"
        | "UpdateAttempts"
        | "WorkerSession"
        | "UpdateWorker" => P::Work,
        _ => return None,
    };
    Some(Need::Permission(permission))
}

/// Returns what the HTTP request `method route` needs, `route` being the
/// matched route template; `None` for a route not in the table (a route
/// added without an entry here is refused to everyone but admins).
pub fn http_need(method: &Method, route: &str) -> Option<Need> {
    use Permission as P;
    let read = Some(Need::Permission(P::Read));
    let need = |permission| Some(Need::Permission(permission));
    if route == crate::http::agl1::HEALTH_ROUTE || route == "/v1/agl/health" {
        return Some(Need::Nothing);
    }
    if route.starts_with("/v1/") && !route.starts_with("/v1/agl/") {
        // OTLP/HTTP: /v1/traces and the signals answered 501.
        return need(P::Ingest);
    }
    if let Some(path) = route.strip_prefix("/v1/agl") {
        let searches = matches!(
            path,
            "/rollouts/search"
                | "/rollouts/{rollout_id}/attempts/search"
                | "/spans/search"
                | "/workers/search"
                | "/waits/rollouts"
        );
        if *method == Method::GET || searches {
            return read;
        }
        return match path {
            "/queues/rollouts/enqueue" | "/rollouts" | "/rollouts/{rollout_id}" => {
                need(P::Rollouts)
            }
            "/resources" | "/resources/latest" | "/resources/{resources_id}" => need(P::Resources),
            "/queues/rollouts/dequeue"
            | "/rollouts/{rollout_id}/attempts"
            | "/rollouts/{rollout_id}/attempts/latest"
            | "/rollouts/{rollout_id}/attempts/{attempt_id}"
            | "/spans"
            | "/spans/next"
            | "/workers/{worker_id}" => need(P::Work),
            _ => None,
        };
    }
    if route.starts_with("/proxy/rollout/") {
        return need(P::Work);
    }
    match (method.as_str(), route) {
        ("GET", _) => read,
        ("POST", "/proxy/pause" | "/proxy/resume") => need(P::Gateway),
        ("POST" | "PATCH" | "DELETE", "/api/rollouts" | "/api/rollouts/{rollout_id}") => {
            need(P::Rollouts)
        }
        ("POST" | "DELETE", "/api/models") => need(P::Resources),
        ("POST", "/api/rollouts/{rollout_id}/attempt/{attempt_id}/events") => need(P::Work),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_sets_of_permissions() {
        let runner = Permissions::of(&[Role::Runner]);
        assert!(runner.allow(Permission::Work) && runner.allow(Permission::Ingest));
        assert!(!runner.allow(Permission::Resources) && !runner.allow(Permission::Rollouts));
        let admin = Permissions::of(&[Role::Admin]);
        assert!(Permission::ALL.iter().all(|p| admin.allow(*p)));
        let both = Permissions::of(&[Role::Ingest, Role::Read]);
        assert!(both.allow(Permission::Ingest) && both.allow(Permission::Read));
        assert!(!both.allow(Permission::Work));
        assert!(!Permissions::default().allow(Permission::Read));
        for name in Role::NAMES {
            assert_eq!(name.parse::<Role>().unwrap().to_string(), name);
        }
        assert!("root".parse::<Role>().is_err());
    }

    #[test]
    fn every_store_method_has_an_entry() {
        let descriptor = include_str!("../../proto/lightningstore/v1/store.proto");
        let methods: Vec<&str> = descriptor
            .lines()
            .filter_map(|line| line.trim().strip_prefix("rpc "))
            .map(|rest| rest.split('(').next().unwrap().trim())
            .collect();
        assert!(methods.len() > 25, "{methods:?}");
        for method in methods {
            assert!(
                grpc_need(&format!("{STORE_SERVICE}{method}")).is_some(),
                "{method} has no entry in the authorization table"
            );
        }
        assert_eq!(grpc_need(&format!("{STORE_SERVICE}Nope")), None);
    }
}
