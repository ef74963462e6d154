//! Versioned resources (`docs/semantics.md#resources`) and worker heartbeats (`#workers`).

use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

async fn latest(c: &mut Client) -> Option<pb::ResourcesUpdate> {
    c.get_latest_resources(pb::GetLatestResourcesRequest {})
        .await
        .unwrap()
        .into_inner()
        .resources
}

async fn update(c: &mut Client, id: &str, json: &str) -> pb::ResourcesUpdate {
    c.update_resources(pb::UpdateResourcesRequest {
        resources_id: id.into(),
        resources_json: json.into(),
    })
    .await
    .unwrap()
    .into_inner()
    .resources
    .unwrap()
}

#[tokio::test]
async fn resources_have_versions_and_a_latest_snapshot() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    assert!(latest(&mut c).await.is_none());
    let added = c
        .add_resources(pb::AddResourcesRequest { resources_json: r#"{"prompt": {"resource_type": "prompt_template", "template": "hi {x}", "engine": "f-string"}}"#.into() })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert!(added.resources_id.starts_with("rs-") && added.resources_id.len() == 15);
    assert_eq!(added.version, 1);
    assert_eq!(added.create_time, added.update_time);
    assert_eq!(
        latest(&mut c).await.unwrap().resources_id,
        added.resources_id
    );

    let fixed = update(&mut c, "fixed", r#"{"a": {}}"#).await;
    assert_eq!(fixed.version, 1, "unknown ids are created");
    assert_eq!(
        update(&mut c, "fixed", r#"{"a": {"v": 2}}"#).await.version,
        2
    );
    assert_eq!(latest(&mut c).await.unwrap().resources_id, "fixed");

    let again = update(&mut c, &added.resources_id, r#"{"b": {}}"#).await;
    assert_eq!(again.version, 2);
    assert_eq!(again.create_time, added.create_time);
    assert_eq!(
        latest(&mut c).await.unwrap().resources_id,
        added.resources_id,
        "updating an old id makes it latest"
    );

    // An enqueued rollout without resources_id gets the latest one.
    let rollout = enqueue(&mut c, "1").await;
    assert_eq!(
        rollout.resources_id.as_deref(),
        Some(added.resources_id.as_str())
    );

    let got = c
        .get_resources(pb::GetResourcesRequest {
            resources_id: "fixed".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert_eq!(got.resources_json, r#"{"a":{"v":2}}"#);
    assert_code(
        c.get_resources(pb::GetResourcesRequest {
            resources_id: "rs-missing".into(),
        })
        .await,
        Code::NotFound,
        "rs-missing",
    );

    let query = |id: Option<&str>, contains: Option<&str>| pb::QueryResourcesRequest {
        resources_id: id.map(str::to_owned),
        resources_id_contains: contains.map(str::to_owned),
        page: page("version", true, None, 0),
    };
    let all = c
        .query_resources(query(None, None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.total, 2);
    let both = c
        .query_resources(query(Some("fixed"), Some("rs-")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(both.total, 0, "exact and contains are AND-ed");
    let one = c
        .query_resources(query(None, Some("fix")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one.resources[0].resources_id, "fixed");
}

#[tokio::test]
async fn worker_heartbeats_record_stats_and_never_change_status() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let beat = |c: &mut Client, stats: Option<&str>| {
        let mut c = c.clone();
        let stats = stats.map(str::to_owned);
        async move {
            c.update_worker(pb::UpdateWorkerRequest {
                worker_id: "Worker-0".into(),
                heartbeat_stats_json: stats,
            })
            .await
            .map(|r| r.into_inner().worker.unwrap())
        }
    };
    let created = beat(&mut c, Some(r#"{"cpu": 0.5}"#)).await.unwrap();
    assert_eq!(created.status, pb::WorkerStatus::Unknown as i32);
    assert_eq!(created.heartbeat_stats_json, r#"{"cpu":0.5}"#);
    assert!(created.last_heartbeat_time.is_some());

    enqueue(&mut c, "1").await;
    dequeue(&mut c, Some("Worker-0")).await.unwrap();
    let kept = beat(&mut c, None).await.unwrap();
    assert_eq!(
        kept.status,
        pb::WorkerStatus::Busy as i32,
        "heartbeats never change status"
    );
    assert_eq!(
        kept.heartbeat_stats_json, r#"{"cpu":0.5}"#,
        "absent stats are kept"
    );
    let nanos = |t: Option<prost_types::Timestamp>| t.map(|t| (t.seconds, t.nanos));
    assert!(nanos(kept.last_heartbeat_time) > nanos(created.last_heartbeat_time));
    assert_code(
        beat(&mut c, Some("null")).await,
        Code::InvalidArgument,
        "must not be null",
    );
    assert_code(
        c.get_worker(pb::GetWorkerRequest {
            worker_id: "Worker-404".into(),
        })
        .await,
        Code::NotFound,
        "Worker Worker-404 not found",
    );
}
