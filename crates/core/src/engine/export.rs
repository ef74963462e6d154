//! Exports ([`crate::export`]): the selection fixed at the start, paged by
//! keyset (rollout id order, [`PAGE_ROLLOUTS`] ids at a time, uncounted),
//! the rollouts then read whole, as many in one transaction as fit
//! [`READ_BUDGET`] (at least one), so that an export holds a page of listed
//! rollouts and one read's rollouts, whatever the run's size, and never
//! holds a transaction (on the in-memory backend, the store's lock) for
//! longer than one page or one read.

use std::collections::VecDeque;
use std::sync::Arc;

use super::super::error::StoreResult;
use super::super::export::{self, Cursor, Layout, PAGE_ROLLOUTS, RolloutRecord};
use super::super::ids::RolloutId;
use super::super::pages::RolloutDownload;
use super::super::query::{Page, RolloutFilter};
use super::runner::{Engine, Scan};

/// The spans' weight ([`crate::model::Span::weight`]) after which a read
/// of an export's rollouts stops: small rollouts share a transaction (on
/// PostgreSQL, a commit's durability wait; docs/performance.md#export), a
/// large one has one of its own.
pub const READ_BUDGET: usize = 4 << 20;

/// An export under way: call [`Export::next`] until it returns `None`.
pub struct Export {
    engine: Arc<Engine>,
    /// The caller's conditions; the selection adds the cursor's.
    filter: RolloutFilter,
    /// The cursor the export started from.
    start: Cursor,
    /// The position after the last rollout listed.
    listed: Cursor,
    /// Listed rollouts not read yet, in order.
    page: VecDeque<RolloutId>,
    /// Rollouts read, in order, not returned yet.
    read: VecDeque<(RolloutId, RolloutDownload)>,
    /// The last page was short: nothing is left to list.
    exhausted: bool,
    /// The selected rollouts after the starting cursor, when it started.
    total: usize,
}

impl Engine {
    /// Starts an export of the rollouts `filter` selects
    /// ([`export::selection_filter`]) in `layout`, from the start
    /// (`after` = `None`: the selection's instant is now) or after a cursor
    /// an export of the same filter and layout wrote.
    pub async fn export(
        self: &Arc<Self>,
        filter: RolloutFilter,
        layout: Layout,
        after: Option<Cursor>,
    ) -> StoreResult<Export> {
        export::check_filter(&filter)?;
        let selection = export::selection_key(&filter, layout);
        let cursor = match after {
            Some(cursor) => {
                cursor.check_selection("after", &selection)?;
                if let Some(rollout_id) = &cursor.after {
                    RolloutId::parse("after", rollout_id.clone())?;
                }
                cursor
            }
            None => Cursor::start(self.now(), selection),
        };
        let count = Page {
            limit: Some(0),
            ..Page::default()
        };
        let total = self
            .query_rollouts(&export::selection_filter(&filter, &cursor), &count)
            .await?
            .total;
        Ok(Export {
            engine: Arc::clone(self),
            filter,
            start: cursor.clone(),
            listed: cursor,
            page: VecDeque::new(),
            read: VecDeque::new(),
            exhausted: false,
            total,
        })
    }
}

impl Export {
    /// Returns how many records the export had to send when it started
    /// (rollouts deleted meanwhile are skipped, so fewer may come).
    pub fn total(&self) -> usize {
        self.total
    }

    /// Returns the cursor the export started from.
    pub fn start_cursor(&self) -> &Cursor {
        &self.start
    }

    /// Returns the next record, or `None` once the selection is exhausted.
    pub async fn next(&mut self) -> StoreResult<Option<RolloutRecord>> {
        loop {
            if let Some((id, download)) = self.read.pop_front() {
                let cursor = self.listed.after(id.as_str());
                return RolloutRecord::new(download, cursor).map(Some);
            }
            if self.page.is_empty() && !self.exhausted {
                self.list_page().await?;
            }
            if self.page.is_empty() {
                return Ok(None);
            }
            self.read_rollouts().await?;
        }
    }

    /// Reads the next listed rollouts, as many as [`READ_BUDGET`] lets one
    /// transaction read; those deleted since they were listed are skipped.
    async fn read_rollouts(&mut self) -> StoreResult<()> {
        let ids = self.page.make_contiguous();
        let downloads = self.engine.rollout_downloads(ids, READ_BUDGET).await?;
        let read = self.page.drain(..downloads.len());
        let stored = read
            .zip(downloads)
            .filter_map(|(id, download)| Some((id, download?)));
        self.read.extend(stored);
        Ok(())
    }

    /// Lists the next page of the selection, by keyset after the last
    /// rollout listed: ids alone, and nothing counted.
    async fn list_page(&mut self) -> StoreResult<()> {
        let filter = export::selection_filter(&self.filter, &self.listed);
        let filter = &filter;
        let listed = self
            .engine
            .run(Scan::Read, |tx| {
                Box::pin(async move { tx.store.ended_rollout_ids(filter, PAGE_ROLLOUTS).await })
            })
            .await?;
        self.exhausted = listed.len() < PAGE_ROLLOUTS;
        if let Some(last) = listed.last() {
            self.listed = self.listed.after(last);
        }
        for rollout_id in listed {
            self.page
                .push_back(RolloutId::parse("rollout_id", rollout_id)?);
        }
        Ok(())
    }
}
