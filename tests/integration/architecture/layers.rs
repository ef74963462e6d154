//! Each crate depends only on the layers below it, as `cargo metadata`
//! reports the workspace's manifests: the compiler then keeps the layers
//! (a module cannot name a crate its package does not depend on). And the
//! core stays free of wire, web and database code, through any path of
//! dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use super::repository;

/// The workspace crates each crate may depend on (its normal and build
/// dependencies; tests may use more): the layers below it.
const ALLOWED: &[(&str, &[&str])] = &[
    // The public contract and the rules: the bottom layers.
    ("lightning-store-proto", &[]),
    ("lightning-store-core", &[]),
    // The export's file formats: an encoding, knowing no other layer; the
    // console and the command line write their downloads and files with it.
    ("lightning-store-formats", &[]),
    // The backends implement the core's storage port.
    ("lightning-store-backends", &["lightning-store-core"]),
    // The adapters speak the contract and call the core; they never name a
    // backend (the engine hides which one runs).
    (
        "lightning-store-adapters",
        &["lightning-store-core", "lightning-store-proto"],
    ),
    (
        "lightning-store-console",
        &[
            "lightning-store-core",
            "lightning-store-adapters",
            "lightning-store-formats",
        ],
    ),
    // The client side of the command line speaks only the contract.
    (
        "lightning-store-cli",
        &["lightning-store-proto", "lightning-store-formats"],
    ),
    // The server binary assembles them all.
    (
        "lightning-store",
        &[
            "lightning-store-proto",
            "lightning-store-core",
            "lightning-store-backends",
            "lightning-store-adapters",
            "lightning-store-console",
            "lightning-store-cli",
            "lightning-store-formats",
        ],
    ),
];

/// Crates of the wire (gRPC, protobuf, HTTP), the web and the databases,
/// which the core must not reach through any dependency.
const NOT_IN_THE_CORE: &[&str] = &[
    "tonic",
    "prost",
    "hyper",
    "http",
    "axum",
    "tower",
    "opentelemetry-proto",
    "askama",
    "sqlx",
    "rusqlite",
    "libsqlite3-sys",
];

fn metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .current_dir(repository())
        // The host's dependencies alone: offline, cargo has the packages the
        // build downloaded, not those of other platforms.
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            "host-tuple",
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Returns each workspace package's workspace dependencies that are not
/// dev-dependencies.
fn workspace_dependencies(metadata: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    let packages = metadata["packages"].as_array().unwrap();
    let names: BTreeSet<&str> = packages
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap()))
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap()))
        .map(|package| {
            let deps = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap())
                .filter(|name| names.contains(name))
                .map(str::to_owned)
                .collect();
            (package["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// Returns the names of every package `root` depends on, directly or not,
/// through normal and build dependencies.
fn reachable(metadata: &Value, root: &str) -> BTreeSet<String> {
    let nodes = metadata["resolve"]["nodes"].as_array().unwrap();
    let by_id: BTreeMap<&str, &Value> = nodes
        .iter()
        .map(|node| (node["id"].as_str().unwrap(), node))
        .collect();
    let name_of: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let start = name_of
        .iter()
        .find(|(_, name)| **name == root)
        .map(|(id, _)| *id)
        .unwrap();
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        for dep in by_id[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|kind| kind["kind"].as_str() != Some("dev"));
            let next = dep["pkg"].as_str().unwrap();
            if normal && seen.insert(next) {
                stack.push(next);
            }
        }
    }
    seen.into_iter().map(|id| name_of[id].to_owned()).collect()
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let metadata = metadata();
    let dependencies = workspace_dependencies(&metadata);
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(name, below)| (*name, below.iter().copied().collect()))
        .collect();
    assert_eq!(
        dependencies
            .keys()
            .map(String::as_str)
            .collect::<BTreeSet<_>>(),
        allowed.keys().copied().collect(),
        "every crate of the workspace has its place in ALLOWED"
    );
    for (name, deps) in &dependencies {
        for dep in deps {
            assert!(
                allowed[name.as_str()].contains(dep.as_str()),
                "{name} depends on {dep}, which is not a layer below it"
            );
        }
    }
    // The server binary does assemble every layer.
    assert_eq!(dependencies["lightning-store"].len(), ALLOWED.len() - 1);
}

#[test]
fn the_core_reaches_no_wire_web_or_database_crate() {
    let metadata = metadata();
    let core = reachable(&metadata, "lightning-store-core");
    assert!(core.contains("tokio"), "{core:?}");
    for forbidden in NOT_IN_THE_CORE {
        assert!(
            !core.contains(*forbidden),
            "the core depends on {forbidden}"
        );
    }
    // The check sees these crates where they are used.
    let adapters = reachable(&metadata, "lightning-store-adapters");
    assert!(adapters.contains("tonic") && adapters.contains("axum"));
    let backends = reachable(&metadata, "lightning-store-backends");
    assert!(backends.contains("sqlx") && backends.contains("rusqlite"));
}
