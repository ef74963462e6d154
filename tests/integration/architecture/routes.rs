//! Every HTTP route of the port is registered through `http::routes::Routes`,
//! which records the permission it needs: a route registered around it
//! would answer without the access layer knowing what it requires.

use super::{rust_files, workspace_crates};

#[test]
fn routes_join_the_port_only_through_their_declarations() {
    // Routes of their own servers, not of the port: the metrics endpoint
    // (another listener) and the bench's stand-in model server.
    let elsewhere = ["http/routes.rs", "src/metrics.rs", "bench/http.rs"];
    let mut checked = 0;
    for krate in workspace_crates() {
        for (path, text) in rust_files(&krate.src) {
            if elsewhere.iter().any(|file| path.ends_with(file)) {
                continue;
            }
            checked += 1;
            for raw in [
                ".route(",
                "Router::new(",
                "axum::routing",
                ".route_service(",
            ] {
                assert!(
                    !text.contains(raw),
                    "{} registers a route with {raw}: declare it with http::routes::Routes, \
                     with the permission it needs",
                    path.display()
                );
            }
        }
    }
    assert!(checked > 150, "{checked} files");
}
