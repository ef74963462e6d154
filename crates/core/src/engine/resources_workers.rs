//! Resources snapshots and workers.

use super::super::access::Caller;
use super::super::error::{StoreError, StoreResult};
use super::super::ids::{self, ResourcesId, WorkerId};
use super::super::model::{Json, ResourcesUpdate, Worker, WorkerSession};
use super::super::query::{Page, Paged, ResourcesFilter, WorkerFilter};
use super::super::storage::Access;
use super::runner::{Engine, Scan};

impl Engine {
    /// Stores a new resources snapshot (version 1) as the latest.
    pub async fn add_resources(&self, resources: Json) -> StoreResult<ResourcesUpdate> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let update = ResourcesUpdate {
                    resources_id: ids::new_resources_id(),
                    create_time: tx.now,
                    update_time: tx.now,
                    version: 1,
                    resources,
                };
                tx.save_resources(&update);
                Ok(update)
            })
        })
        .await
    }

    /// Replaces (or creates) a snapshot and makes it the latest.
    pub async fn update_resources(
        &self,
        resources_id: &ResourcesId,
        resources: Json,
    ) -> StoreResult<ResourcesUpdate> {
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let now = tx.now;
                let update = match tx.resources(resources_id).await? {
                    Some(existing) => ResourcesUpdate {
                        update_time: now,
                        version: existing.version + 1,
                        resources,
                        ..existing
                    },
                    None => ResourcesUpdate {
                        resources_id: resources_id.as_str().to_owned(),
                        create_time: now,
                        update_time: now,
                        version: 1,
                        resources,
                    },
                };
                tx.save_resources(&update);
                Ok(update)
            })
        })
        .await
    }

    /// Returns a resources snapshot.
    pub async fn get_resources(&self, resources_id: &ResourcesId) -> StoreResult<ResourcesUpdate> {
        let resources = self
            .run(Scan::Skip, |tx| {
                Box::pin(async move { tx.resources(resources_id).await })
            })
            .await?;
        resources.ok_or_else(|| StoreError::resources_not_found(resources_id))
    }

    /// Returns the latest resources snapshot, `None` when there is none.
    pub async fn latest_resources(&self) -> StoreResult<Option<ResourcesUpdate>> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move { tx.store.latest_resources().await })
        })
        .await
    }

    /// Lists resources snapshots.
    pub async fn query_resources(
        &self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>> {
        page.validate::<ResourcesUpdate>()?;
        if let Some(resources_id) = &filter.resources_id {
            ids::validate_id("resources_id", resources_id)?;
        }
        self.run(Scan::Skip, |tx| {
            Box::pin(async move { tx.store.query_resources(filter, page).await })
        })
        .await
    }

    /// Lists workers.
    pub async fn query_workers(
        &self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>> {
        page.validate::<Worker>()?;
        self.run(Scan::Read, |tx| {
            Box::pin(async move { tx.store.query_workers(filter, page).await })
        })
        .await
    }

    /// Returns a worker.
    pub async fn get_worker(&self, worker_id: &WorkerId) -> StoreResult<Worker> {
        let worker = self
            .run(Scan::Skip, |tx| {
                Box::pin(async move { tx.store.workers(&[worker_id.as_str()], Access::Read).await })
            })
            .await?;
        worker
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::worker_not_found(worker_id))
    }

    /// Returns the session records of the workers among `worker_ids` that
    /// have one, in worker id order: which server holds (or last held)
    /// each worker's session, in which state, and the attempts it owns.
    pub async fn worker_sessions(&self, worker_ids: &[&str]) -> StoreResult<Vec<WorkerSession>> {
        self.limits().check_ids("worker_ids", worker_ids.len())?;
        self.run(Scan::Read, |tx| {
            Box::pin(async move { tx.store.sessions(worker_ids, Access::Read).await })
        })
        .await
    }

    /// Records a worker heartbeat, creating the worker when unknown; never
    /// changes its status or assignment. `caller` must be allowed to act
    /// for the worker.
    pub async fn update_worker(
        &self,
        worker_id: &WorkerId,
        heartbeat_stats: Option<Json>,
        caller: &Caller,
    ) -> StoreResult<Worker> {
        caller.check_worker(Some(worker_id))?;
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let mut worker = tx.worker(worker_id).await?;
                worker.last_heartbeat_time = Some(tx.now);
                if let Some(stats) = heartbeat_stats {
                    worker.heartbeat_stats = stats;
                }
                tx.save_worker(&worker);
                Ok(worker)
            })
        })
        .await
    }
}
