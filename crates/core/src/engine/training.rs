//! The training summary ([`crate::training`]): reward by policy version,
//! read from the rows the backends keep in the commit of every change.

use super::super::error::StoreResult;
use super::super::model::RolloutMode;
use super::super::training::{self, VersionSummary};
use super::runner::Engine;

/// Which versions a summary covers, by number (a resources snapshot's place
/// in creation order, from 1), both
/// bounds included (`None`: unbounded). Rollouts of a version the store
/// does not hold, or of none, are only in an unbounded range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VersionRange {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl VersionRange {
    fn contains(&self, number: Option<i64>) -> bool {
        match number {
            Some(n) => self.from.is_none_or(|from| n >= from) && self.to.is_none_or(|to| n <= to),
            None => self.from.is_none() && self.to.is_none(),
        }
    }
}

impl Engine {
    /// Returns, for each version and mode (of `mode` only, when given), the
    /// rollouts that ended as succeeded or failed and their rewards, in
    /// version order. Costs the summary's rows, not the rollouts counted.
    pub async fn training_summary(
        &self,
        mode: Option<RolloutMode>,
        versions: VersionRange,
    ) -> StoreResult<Vec<VersionSummary>> {
        let mode = mode.map(|mode| mode.as_str());
        let rows = self
            .read(|store| Box::pin(store.training_rows(mode)))
            .await?;
        let mut summaries = training::summarise(rows);
        summaries.retain(|summary| versions.contains(summary.version_number));
        Ok(summaries)
    }
}
