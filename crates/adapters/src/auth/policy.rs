//! What each call needs, written once for gRPC and HTTP: each gRPC method
//! in one table ([`RPCS`]), each HTTP route where it is registered
//! ([`RouteNeeds`], filled by [`crate::http::routes`]), and each [`Role`]
//! as a set of [`Permission`]s. Health checks and reflection (the public
//! contract) need none.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

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
    /// Creates, lists and deletes namespaces.
    Namespaces,
    /// Takes a run's data out in bulk (`ExportRollouts`, the console's
    /// export): the people and the algorithm that read a run, not its
    /// runners.
    Export,
}

impl Permission {
    const ALL: [Permission; 8] = [
        Permission::Read,
        Permission::Rollouts,
        Permission::Resources,
        Permission::Gateway,
        Permission::Work,
        Permission::Ingest,
        Permission::Namespaces,
        Permission::Export,
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
            Role::Algorithm => &[P::Read, P::Rollouts, P::Resources, P::Gateway, P::Export],
            Role::Runner => &[P::Read, P::Work, P::Ingest],
            Role::Ingest => &[P::Ingest],
            Role::Read => &[P::Read, P::Export],
        }
    }

    /// Returns the roles that grant `permission`, in [`Role::NAMES`] order.
    pub fn granting(permission: Permission) -> Vec<Role> {
        [
            Role::Admin,
            Role::Algorithm,
            Role::Runner,
            Role::Ingest,
            Role::Read,
        ]
        .into_iter()
        .filter(|role| role.permissions().contains(&permission))
        .collect()
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

impl From<Permission> for Need {
    fn from(permission: Permission) -> Self {
        Need::Permission(permission)
    }
}

const OPEN: Need = Need::Nothing;
const READ: Need = Need::Permission(Permission::Read);
const ROLLOUTS: Need = Need::Permission(Permission::Rollouts);
const RESOURCES: Need = Need::Permission(Permission::Resources);
const WORK: Need = Need::Permission(Permission::Work);
const INGEST: Need = Need::Permission(Permission::Ingest);
const NAMESPACES: Need = Need::Permission(Permission::Namespaces);
const EXPORT: Need = Need::Permission(Permission::Export);

/// Every RPC served on the port with what it needs: the one table of gRPC
/// access, checked against the descriptors of the services the server
/// serves (a test fails on a served method missing from it, and on an
/// entry that names no served method).
pub const RPCS: &[(&str, Need)] = &[
    ("/grpc.health.v1.Health/Check", OPEN),
    ("/grpc.health.v1.Health/Watch", OPEN),
    (
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        OPEN,
    ),
    (
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        OPEN,
    ),
    (
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        INGEST,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetCapabilities",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetStatistics",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/QueryRollouts",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetRolloutActivity",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetTrainingSummary",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetRewardTimeline",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/CompareVersions",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetQueuePosition",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/ListRecentFailures",
        READ,
    ),
    ("/lightningstore.v1.LightningStoreService/GetRollout", READ),
    (
        "/lightningstore.v1.LightningStoreService/QueryAttempts",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetLatestAttempt",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/WaitForRollouts",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/WatchRolloutCompletions",
        READ,
    ),
    ("/lightningstore.v1.LightningStoreService/WatchEvents", READ),
    ("/lightningstore.v1.LightningStoreService/QuerySpans", READ),
    (
        "/lightningstore.v1.LightningStoreService/ExportRollouts",
        EXPORT,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetResources",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetLatestResources",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/QueryResources",
        READ,
    ),
    (
        "/lightningstore.v1.LightningStoreService/QueryWorkers",
        READ,
    ),
    ("/lightningstore.v1.LightningStoreService/GetWorker", READ),
    (
        "/lightningstore.v1.LightningStoreService/StartRollout",
        ROLLOUTS,
    ),
    (
        "/lightningstore.v1.LightningStoreService/EnqueueRollout",
        ROLLOUTS,
    ),
    (
        "/lightningstore.v1.LightningStoreService/EnqueueRollouts",
        ROLLOUTS,
    ),
    (
        "/lightningstore.v1.LightningStoreService/UpdateRollout",
        ROLLOUTS,
    ),
    (
        "/lightningstore.v1.LightningStoreService/AddResources",
        RESOURCES,
    ),
    (
        "/lightningstore.v1.LightningStoreService/UpdateResources",
        RESOURCES,
    ),
    (
        "/lightningstore.v1.LightningStoreService/DequeueRollout",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/DequeueRollouts",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/StartAttempt",
        WORK,
    ),
    ("/lightningstore.v1.LightningStoreService/AddSpan", WORK),
    ("/lightningstore.v1.LightningStoreService/AddSpans", WORK),
    (
        "/lightningstore.v1.LightningStoreService/GetNextSpanSequenceId",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/GetSpanSequenceIds",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/UpdateAttempt",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/UpdateAttempts",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/WorkerSession",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/UpdateWorker",
        WORK,
    ),
    (
        "/lightningstore.v1.LightningStoreService/CreateNamespace",
        NAMESPACES,
    ),
    (
        "/lightningstore.v1.LightningStoreService/ListNamespaces",
        NAMESPACES,
    ),
    (
        "/lightningstore.v1.LightningStoreService/DeleteNamespace",
        NAMESPACES,
    ),
];

/// Returns what the gRPC call to `path` (`/package.Service/Method`) needs;
/// `None` for a method no service serves (answered UNIMPLEMENTED by the
/// router, after authentication).
pub fn grpc_need(path: &str) -> Option<Need> {
    static TABLE: LazyLock<HashMap<&str, Need>> = LazyLock::new(|| RPCS.iter().copied().collect());
    TABLE.get(path).copied()
}

/// What an HTTP request needs by the route it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteNeed {
    /// The route declared this need for the request's method.
    Declared(Need),
    /// The route serves other methods (the answer is a 405): a known
    /// token learns it.
    OtherMethod,
    /// No route declared this template: a route registered around the
    /// declarations, refused to everyone but admins.
    Undeclared,
}

/// What each HTTP route needs, as the routes declare it where they are
/// registered ([`crate::http::routes`]): by route template, then method.
#[derive(Debug, Clone, Default)]
pub struct RouteNeeds(HashMap<String, Vec<(Method, Need)>>);

impl RouteNeeds {
    /// Declares that `method route` needs `need`; a route declared twice
    /// for one method is a programming error.
    pub fn declare(&mut self, method: Method, route: &str, need: Need) {
        let methods = self.0.entry(route.to_owned()).or_default();
        assert!(
            methods.iter().all(|(declared, _)| *declared != method),
            "{method} {route} is declared twice"
        );
        methods.push((method, need));
    }

    /// Adds the declarations of `other`.
    pub fn extend(&mut self, other: RouteNeeds) {
        for (route, methods) in other.0 {
            for (method, need) in methods {
                self.declare(method, &route, need);
            }
        }
    }

    /// Returns what `method route` needs, `route` being the matched route
    /// template.
    pub fn need(&self, method: &Method, route: &str) -> RouteNeed {
        match self.0.get(route) {
            None => RouteNeed::Undeclared,
            Some(methods) => methods
                .iter()
                .find(|(declared, _)| declared == method)
                .map_or(RouteNeed::OtherMethod, |&(_, need)| {
                    RouteNeed::Declared(need)
                }),
        }
    }

    /// Returns every declaration: (method, route template, need).
    pub fn declared(&self) -> impl Iterator<Item = (&Method, &str, Need)> {
        self.0.iter().flat_map(|(route, methods)| {
            methods
                .iter()
                .map(move |(method, need)| (method, route.as_str(), *need))
        })
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
        // Runners read what they run; taking the run's data out is not theirs.
        assert!(runner.allow(Permission::Read) && !runner.allow(Permission::Export));
        assert!(Permissions::of(&[Role::Read]).allow(Permission::Export));
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
    fn routes_need_what_they_declare() {
        let mut needs = RouteNeeds::default();
        needs.declare(Method::GET, "/a/{id}", READ);
        needs.declare(Method::POST, "/a/{id}", WORK);
        assert_eq!(
            needs.need(&Method::GET, "/a/{id}"),
            RouteNeed::Declared(READ)
        );
        assert_eq!(
            needs.need(&Method::POST, "/a/{id}"),
            RouteNeed::Declared(WORK)
        );
        assert_eq!(needs.need(&Method::PUT, "/a/{id}"), RouteNeed::OtherMethod);
        assert_eq!(needs.need(&Method::GET, "/b"), RouteNeed::Undeclared);
        assert_eq!(needs.declared().count(), 2);
    }
}
