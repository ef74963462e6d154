//! Spans: add, ingest, sequence ids, query.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::super::error::{StoreError, StoreResult};
use super::super::events::Change;
use super::super::ids::{self, AttemptId, RolloutId};
use super::super::limits;
use super::super::model::{Attempt, NewSpan, RolloutView, Span};
use super::super::namespace::Usage;
use super::super::query::{AttemptSelector, Page, Paged, SpanFilter};
use super::super::retention::span_size;
use super::super::reward;
use super::super::storage::Access;
use super::super::training::RolloutReward;
use super::super::trajectory;
use super::tx::{self, Tx};

use super::runner::{Engine, Scan};

impl Engine {
    /// Stores spans atomically: if any span names an unknown rollout or
    /// attempt, nothing is stored. Missing sequence ids are allocated in
    /// request order before explicit ones raise the counters; each attempt
    /// that got a new span records a heartbeat. A writer that presents its
    /// session's `owner_epoch` is refused (FAILED_PRECONDITION, nothing
    /// stored) unless that session still owns every attempt named.
    pub async fn add_spans(
        &self,
        new_spans: Vec<NewSpan>,
        owner_epoch: Option<u64>,
    ) -> StoreResult<AddedSpans> {
        // OTLP's ingest is bounded by its message size instead: exporters
        // batch by bytes, and a partial success cannot split a batch.
        self.limits().check_batch("spans", new_spans.len())?;
        self.store_spans(new_spans, SpanWrite::Strict { owner_epoch })
            .await
    }

    /// Stores spans like [`Engine::add_spans`], but skips the spans whose
    /// rollout or attempt is unknown and reports them in
    /// [`AddedSpans::rejected`] (OTLP's partial success).
    pub async fn ingest_spans(&self, new_spans: Vec<NewSpan>) -> StoreResult<AddedSpans> {
        self.store_spans(new_spans, SpanWrite::Lenient).await
    }

    async fn store_spans(
        &self,
        new_spans: Vec<NewSpan>,
        how: SpanWrite,
    ) -> StoreResult<AddedSpans> {
        // Checked before the transaction: a bad request must not fail the
        // writes that share its commit. A lenient write sets the spans with
        // bad ids aside instead.
        if let SpanWrite::Strict { .. } = how {
            for new in &new_spans {
                ids::validate_id("span.rollout_id", &new.span.rollout_id)?;
                ids::validate_id("span.attempt_id", &new.span.attempt_id)?;
            }
        }
        if let Some(too_large) = new_spans
            .iter()
            .filter_map(|new| new.sequence_id)
            .find(|&id| id > limits::LARGEST_SEQUENCE_ID)
        {
            return Err(StoreError::invalid(format!(
                "sequence_id must be at most {}, got {too_large}",
                limits::LARGEST_SEQUENCE_ID
            )));
        }
        let usage = self.span_usage(&new_spans);
        let added = self
            .run(Scan::Skip, |tx| {
                Box::pin(async move {
                    self.check_quotas(tx, usage).await?;
                    store_spans(tx, new_spans, how).await
                })
            })
            .await?;
        self.observer
            .spans_written(added.spans.len(), added.duplicates, added.rejected.len());
        Ok(added)
    }

    /// Returns what storing `new_spans` adds, as the quotas count it (their
    /// bytes measured only when a quota limits them). Spans already stored
    /// count too: the check comes before the write finds them.
    fn span_usage(&self, new_spans: &[NewSpan]) -> Usage {
        let span_bytes = match self.config.quotas.max_span_bytes {
            Some(_) => new_spans.iter().map(|new| span_size(&new.span)).sum(),
            None => 0,
        };
        Usage {
            spans: new_spans.len() as u64,
            span_bytes,
            ..Usage::default()
        }
    }

    /// Allocates one sequence id per (rollout, attempt) pair: consecutive
    /// values per rollout in request order.
    pub async fn next_sequence_ids(
        &self,
        pairs: &[(RolloutId, AttemptId)],
    ) -> StoreResult<Vec<i64>> {
        self.allocate_sequence_ids(pairs, true).await
    }

    /// Allocates sequence ids like [`Engine::next_sequence_ids`] without
    /// looking the pairs up, as upstream's `get_next_span_sequence_id` does:
    /// an unknown rollout simply gets a counter.
    pub async fn next_sequence_ids_unchecked(
        &self,
        pairs: &[(RolloutId, AttemptId)],
    ) -> StoreResult<Vec<i64>> {
        self.allocate_sequence_ids(pairs, false).await
    }

    async fn allocate_sequence_ids(
        &self,
        pairs: &[(RolloutId, AttemptId)],
        require_known: bool,
    ) -> StoreResult<Vec<i64>> {
        self.limits().check_batch("attempts", pairs.len())?;
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let mut counts: Vec<(&str, u64)> = Vec::new();
                let mut checked: HashSet<(&str, &str)> = HashSet::new();
                for (rollout_id, attempt_id) in pairs {
                    let (rollout_id, attempt_id) = (rollout_id.as_str(), attempt_id.as_str());
                    if require_known && checked.insert((rollout_id, attempt_id)) {
                        tx.require_rollout(rollout_id, Access::Read).await?;
                        if tx.attempt(rollout_id, attempt_id).await?.is_none() {
                            return Err(StoreError::attempt_not_found(rollout_id, attempt_id));
                        }
                    }
                    match counts.iter_mut().find(|(id, _)| *id == rollout_id) {
                        Some((_, count)) => *count += 1,
                        None => counts.push((rollout_id, 1)),
                    }
                }
                // Counters are taken in id order, as every multi-row lock is.
                counts.sort_unstable();
                let mut next: HashMap<&str, i64> = HashMap::new();
                for (rollout_id, count) in counts {
                    let first = tx.store.allocate_sequence_ids(rollout_id, count).await?;
                    next.insert(rollout_id, first);
                }
                Ok(pairs
                    .iter()
                    .map(|(rollout_id, _)| {
                        let value = next.get_mut(rollout_id.as_str()).expect("allocated above");
                        *value += 1;
                        *value - 1
                    })
                    .collect())
            })
        })
        .await
    }

    /// Lists the spans of a rollout.
    pub async fn query_spans(
        &self,
        mut filter: SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>> {
        page.validate::<Span>()?;
        ids::validate_id("rollout_id", &filter.rollout_id)?;
        if let AttemptSelector::Id(attempt_id) = &filter.attempt {
            ids::validate_id("attempt_id", attempt_id)?;
        }
        self.run(Scan::Read, |tx| {
            Box::pin(async move {
                let view = tx.require_rollout(&filter.rollout_id, Access::Read).await?;
                if tx.store.spans_evicted(&filter.rollout_id).await? {
                    return Err(StoreError::FailedPrecondition(format!(
                        "Spans for rollout {} have been evicted",
                        filter.rollout_id
                    )));
                }
                if filter.attempt == AttemptSelector::Latest {
                    match view.attempt {
                        Some(latest) => filter.attempt = AttemptSelector::Id(latest.attempt_id),
                        None => return Ok(page.apply(Vec::new())),
                    }
                }
                tx.store.query_spans(&filter, page).await
            })
        })
        .await
    }
}

/// How a span write treats the spans it cannot store.
#[derive(Debug, Clone, Copy)]
enum SpanWrite {
    /// Any unknown rollout or attempt (or an owner epoch that no longer
    /// owns an attempt) fails the whole call.
    Strict { owner_epoch: Option<u64> },
    /// Spans of unknown rollouts and attempts are skipped and reported.
    Lenient,
}

/// The (rollout, attempt) pair some of a request's spans name, with its
/// attempt (or why it cannot take spans) and how many of its spans were
/// stored.
struct Group {
    rollout_id: String,
    attempt_id: String,
    attempt: Result<Attempt, StoreError>,
    stored: u64,
}

/// The spans of a request grouped by the (rollout, attempt) pair they name:
/// the distinct pairs in request order, and each span's pair, by index (no
/// span's ids are copied).
struct Pairs<'s> {
    pairs: Vec<(&'s str, &'s str)>,
    group_of: Vec<usize>,
}

impl<'s> Pairs<'s> {
    fn of(new_spans: &'s [NewSpan]) -> Self {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        let mut group_of: Vec<usize> = Vec::with_capacity(new_spans.len());
        let mut index: HashMap<(&str, &str), usize> = HashMap::new();
        for new in new_spans {
            let pair = (new.span.rollout_id.as_str(), new.span.attempt_id.as_str());
            group_of.push(*index.entry(pair).or_insert_with(|| {
                pairs.push(pair);
                pairs.len() - 1
            }));
        }
        Self { pairs, group_of }
    }
}

/// The body of [`Engine::store_spans`], in its phases: the spans' pairs
/// are resolved to their attempts (owners checked), the spans that cannot
/// be stored are set aside (a lenient write) or fail the write, the rest
/// are numbered and inserted, and each attempt that got spans records a
/// heartbeat and an event.
async fn store_spans(
    tx: &mut Tx<'_>,
    new_spans: Vec<NewSpan>,
    how: SpanWrite,
) -> StoreResult<AddedSpans> {
    let Pairs { pairs, group_of } = Pairs::of(&new_spans);
    // The rollouts the spans name, locked: their heartbeats write them
    // (an id that breaks the rule names none).
    let mut rollout_ids: Vec<&str> = pairs
        .iter()
        .map(|&(rollout_id, _)| rollout_id)
        .filter(|rollout_id| ids::validate_id("span.rollout_id", rollout_id).is_ok())
        .collect();
    rollout_ids.sort_unstable();
    rollout_ids.dedup();
    let mut rollouts = tx.rollouts(&rollout_ids, Access::Update).await?;
    let mut groups = resolve_groups(tx, &pairs, &rollouts, how).await?;
    drop(pairs);
    let (new_spans, group_of, rejected) = set_aside_rejected(new_spans, group_of, &groups);
    let received = new_spans.len();
    let stored = insert(tx, new_spans, group_of, &mut groups).await?;
    let duplicates = received - stored.len();
    for span in &stored {
        if let Some(reward) = reward::span_reward(span)
            .and_then(|reward| RolloutReward::new(span.sequence_id, reward.value()))
        {
            tx.offer_reward(&span.rollout_id, reward);
        }
        if let Some(call) = trajectory::agl0::model_call(span) {
            tx.offer_call(&span.rollout_id, call);
        }
    }
    for group in groups {
        record_spans(tx, &mut rollouts, group);
    }
    Ok(AddedSpans {
        spans: stored,
        duplicates,
        rejected,
    })
}

/// Resolves each pair to its attempt, or to why it cannot take spans (an
/// id that breaks the id rule, an unknown rollout or attempt); a strict
/// write fails on the first such pair, and on an attempt its writer's
/// session no longer owns.
async fn resolve_groups(
    tx: &mut Tx<'_>,
    pairs: &[(&str, &str)],
    rollouts: &HashMap<String, RolloutView>,
    how: SpanWrite,
) -> StoreResult<Vec<Group>> {
    let mut groups: Vec<Group> = Vec::with_capacity(pairs.len());
    for &(rollout_id, attempt_id) in pairs {
        let attempt = match (
            ids::validate_id("span.rollout_id", rollout_id),
            ids::validate_id("span.attempt_id", attempt_id),
            rollouts.get(rollout_id),
        ) {
            (Err(error), _, _) | (_, Err(error), _) => Err(error),
            (_, _, None) => Err(StoreError::rollout_not_found(rollout_id)),
            (
                _,
                _,
                Some(RolloutView {
                    attempt: Some(latest),
                    ..
                }),
            ) if latest.attempt_id == attempt_id => Ok(latest.clone()),
            (_, _, Some(_)) => tx
                .attempt(rollout_id, attempt_id)
                .await?
                .ok_or_else(|| StoreError::attempt_not_found(rollout_id, attempt_id)),
        };
        match (&attempt, how) {
            (
                Ok(attempt),
                SpanWrite::Strict {
                    owner_epoch: owner_epoch @ Some(_),
                },
            ) => {
                let latest = rollouts[rollout_id]
                    .attempt
                    .clone()
                    .expect("an attempt exists");
                tx::check_owner(tx, attempt, &latest, owner_epoch).await?;
            }
            (Err(error), SpanWrite::Strict { .. }) => return Err(error.clone()),
            _ => {}
        }
        groups.push(Group {
            rollout_id: rollout_id.to_owned(),
            attempt_id: attempt_id.to_owned(),
            attempt,
            stored: 0,
        });
    }
    Ok(groups)
}

/// Sets aside the spans whose pair cannot take spans: returns the others
/// with their groups, and why each span set aside was rejected.
fn set_aside_rejected(
    mut new_spans: Vec<NewSpan>,
    group_of: Vec<usize>,
    groups: &[Group],
) -> (Vec<NewSpan>, Vec<usize>, Vec<StoreError>) {
    let mut rejected = Vec::new();
    if groups.iter().all(|group| group.attempt.is_ok()) {
        return (new_spans, group_of, rejected);
    }
    let mut kept = Vec::with_capacity(group_of.len());
    let mut each = group_of.iter();
    new_spans.retain(|_| {
        let group = *each.next().expect("one group per span");
        match &groups[group].attempt {
            Ok(_) => {
                kept.push(group);
                true
            }
            Err(error) => {
                rejected.push(error.clone());
                false
            }
        }
    });
    (new_spans, kept, rejected)
}

/// Numbers and inserts the spans, counting each group's stored spans;
/// returns the stored spans (a span already stored is skipped, and one line
/// per request names the first).
async fn insert(
    tx: &mut Tx<'_>,
    new_spans: Vec<NewSpan>,
    group_of: Vec<usize>,
    groups: &mut [Group],
) -> StoreResult<Vec<Arc<Span>>> {
    let received = new_spans.len();
    let spans = number_spans(tx, new_spans).await?;
    let stored_flags = tx.store.insert_spans(&spans).await?;
    let mut stored = Vec::with_capacity(spans.len());
    let mut first_duplicate = None;
    for ((span, was_stored), group) in spans.into_iter().zip(stored_flags).zip(group_of) {
        if was_stored {
            groups[group].stored += 1;
            stored.push(span);
        } else if first_duplicate.is_none() {
            first_duplicate = Some(span);
        }
    }
    // One line per request: an exporter retrying a batch repeats every span.
    if let Some(span) = first_duplicate {
        tracing::warn!(
            duplicates = received - stored.len(),
            rollout_id = span.rollout_id,
            attempt_id = span.attempt_id,
            span_id = span.span_id,
            "duplicated spans skipped (the first one named)"
        );
    }
    Ok(stored)
}

/// Records a group's stored spans: its attempt's heartbeat and an event.
fn record_spans(tx: &mut Tx<'_>, rollouts: &mut HashMap<String, RolloutView>, group: Group) {
    let (Ok(mut attempt), count @ 1..) = (group.attempt, group.stored) else {
        return;
    };
    let view = rollouts.get_mut(&group.rollout_id).expect("loaded above");
    let is_latest = view
        .attempt
        .as_ref()
        .is_some_and(|latest| latest.attempt_id == attempt.attempt_id);
    tx::heartbeat(tx, &mut view.rollout, &mut attempt, is_latest);
    if is_latest {
        view.attempt = Some(attempt);
    }
    tx.record(Change::SpansAdded {
        rollout_id: group.rollout_id,
        attempt_id: group.attempt_id,
        count,
    });
}

/// Gives every span its sequence id: missing ones are allocated per rollout
/// in request order, explicit ones raise the rollout's counter. The spans
/// move into shared ownership: the store keeps them and the caller gets the
/// same values back, without a copy.
async fn number_spans(tx: &mut Tx<'_>, new_spans: Vec<NewSpan>) -> StoreResult<Vec<Arc<Span>>> {
    let mut missing: HashMap<&str, u64> = HashMap::new();
    for new in &new_spans {
        if new.sequence_id.is_none() {
            *missing.entry(new.span.rollout_id.as_str()).or_default() += 1;
        }
    }
    let mut missing: Vec<(&str, u64)> = missing.into_iter().collect();
    missing.sort_unstable();
    let mut next_id: HashMap<String, i64> = HashMap::new();
    for (rollout_id, count) in missing {
        let first = tx.store.allocate_sequence_ids(rollout_id, count).await?;
        next_id.insert(rollout_id.to_owned(), first);
    }
    let mut highest: HashMap<String, i64> = HashMap::new();
    let mut spans = Vec::with_capacity(new_spans.len());
    for NewSpan {
        sequence_id,
        mut span,
    } in new_spans
    {
        match sequence_id {
            Some(explicit) => {
                span.sequence_id = explicit;
                let entry = highest.entry(span.rollout_id.clone()).or_insert(explicit);
                *entry = (*entry).max(explicit);
            }
            None => {
                let next = next_id.get_mut(&span.rollout_id).expect("allocated above");
                span.sequence_id = *next;
                *next += 1;
            }
        }
        spans.push(Arc::new(span));
    }
    let mut highest: Vec<(String, i64)> = highest.into_iter().collect();
    highest.sort_unstable();
    for (rollout_id, at_least) in highest {
        tx.store.raise_sequence_id(&rollout_id, at_least).await?;
    }
    Ok(spans)
}

/// Result of storing spans.
#[derive(Debug, Clone, PartialEq)]
pub struct AddedSpans {
    /// The stored spans in request order, with their sequence ids (shared
    /// with the store).
    pub spans: Vec<Arc<Span>>,
    /// Spans skipped because they were already stored.
    pub duplicates: usize,
    /// Why each skipped span with an unknown rollout or attempt was
    /// rejected (only [`Engine::ingest_spans`] skips them).
    pub rejected: Vec<StoreError>,
}
